/*
 * MPI_Bcast through collar against the MPI library's own PMPI_Bcast on the
 * same buffer, side by side in one run: per size a warm-up of each, then
 * REPS pairs alternating the two, each call timed on every rank after a
 * barrier and the slowest rank's time taken.  Prints per size
 *     bytes <n> collar_us <median> pmpi_us <median> ratio <collar / pmpi>
 * On the sim device the MPI_Bcast is staged (copy in at the root, copy out
 * elsewhere) and PMPI_Bcast is what the MPI library alone costs; with no
 * device both are the MPI library's call.  The received bytes of the last
 * call are checked (exit 1 if wrong).
 *
 * Usage: bench_colls [--reps N] SIZE...   (sizes in bytes, K/M suffixes)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"


/* One timed broadcast: the slowest rank's seconds. */
static double timed(int use_pmpi, unsigned char *buf, int n)
{
    double t0, dt, slowest;
    PMPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    if (use_pmpi) {
        PMPI_Bcast(buf, n, MPI_BYTE, 0, MPI_COMM_WORLD);
    } else {
        MPI_Bcast(buf, n, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
    dt = MPI_Wtime() - t0;
    PMPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, reps = 21, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc) {
            reps = atoi(argv[++a]);
            continue;
        }
        const int n = (int)bench_parse_size(argv[a]);
        unsigned char *buf = malloc((size_t)n + 1);
        double *t[2] = { malloc((size_t)reps * sizeof(double)),
                         malloc((size_t)reps * sizeof(double)) };
        for (int i = 0; i < n; i++) {
            buf[i] = rank == 0 ? (unsigned char)(i * 7 + 1) : 0;
        }
        timed(0, buf, n);
        timed(1, buf, n);
        for (int r = 0; r < reps; r++) {
            /* Alternate which goes first, so that both see the same machine. */
            const int first = r % 2;
            t[first][r] = timed(first, buf, n);
            t[!first][r] = timed(!first, buf, n);
        }
        if (rank != 0) {
            memset(buf, 0, (size_t)n);
        }
        MPI_Bcast(buf, n, MPI_BYTE, 0, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) {
            if (buf[i] != (unsigned char)(i * 7 + 1)) {
                bad = 1;
                break;
            }
        }
        qsort(t[0], (size_t)reps, sizeof(double), bench_cmp_double);
        qsort(t[1], (size_t)reps, sizeof(double), bench_cmp_double);
        const double mc = t[0][reps / 2] * 1e6, mp = t[1][reps / 2] * 1e6;
        if (rank == 0) {
            printf("bytes %d collar_us %.1f pmpi_us %.1f ratio %.2f\n", n, mc, mp,
                   mp > 0 ? mc / mp : 0.0);
            fflush(stdout);
        }
        free(buf);
        free(t[0]);
        free(t[1]);
    }
    int any = 0;
    PMPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && any) {
        printf("WRONG: a broadcast delivered wrong bytes\n");
    }
    MPI_Finalize();
    return any ? 1 : 0;
}
