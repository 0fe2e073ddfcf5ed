/*
 * MPI_Iallreduce under the two forms collar runs it in (run-forms.sh sets
 * which: COLLAR_PROGRESS=thread gives collar's own schedules, carried by
 * its progress thread; without it, in a program at MPI_THREAD_SINGLE, the
 * MPI library's own collective on host copies, copied in at the start and
 * out at the completion call).  Float SUM on MPI_COMM_WORLD; per size, a
 * warm-up, then REPS rounds of each of:
 *   start     the MPI_Iallreduce call itself (what the program waits
 *             for before it can compute)
 *   alone     MPI_Iallreduce and MPI_Wait back to back
 *   overlap   MPI_Iallreduce, then computation (a loop on the CPU that
 *             makes no MPI call) lasting as long as `alone`'s median, then
 *             MPI_Wait: the whole
 * each the slowest rank's time, the median printed:
 *   bytes <n> start_us <t> alone_us <t> compute_us <t> overlap_us <t> hidden <f>
 * where hidden = (alone + compute - overlap) / alone, the part of the
 * allreduce the computation hid (1: all of it, 0: none).  The result of
 * the last call is checked (exit 1 if wrong).
 *
 * Usage: bench_forms [--reps N] SIZE...   (sizes in bytes, K/M suffixes)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static volatile double sink;

/* The CPU busy for `seconds`, with no MPI call. */
static void compute(double seconds)
{
    const double t0 = MPI_Wtime();
    double x = 1.0;
    while (MPI_Wtime() - t0 < seconds) {
        for (int i = 0; i < 1000; i++) {
            x = x * 1.0000001 + 1e-9;
        }
    }
    sink = x;
}

static double slowest(double dt)
{
    double t = 0;
    PMPI_Allreduce(&dt, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t;
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(double), bench_cmp_double);
    return t[n / 2];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, reps = 5, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc) {
            reps = atoi(argv[++a]);
            continue;
        }
        const size_t bytes = bench_parse_size(argv[a]);
        const int n = (int)(bytes / sizeof(float));
        float *in = malloc((size_t)n * sizeof(float));
        float *out = malloc((size_t)n * sizeof(float));
        double *ts = malloc(3 * (size_t)reps * sizeof(double));
        double *tstart = ts, *talone = ts + reps, *tover = ts + 2 * reps;
        for (int i = 0; i < n; i++) {
            in[i] = (float)((i % 100) + rank);
        }
        MPI_Request req;
        MPI_Iallreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (int r = 0; r < reps; r++) {
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Iallreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            double t1 = MPI_Wtime();
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            double t2 = MPI_Wtime();
            tstart[r] = slowest(t1 - t0);
            talone[r] = slowest(t2 - t0);
        }
        const double alone = median(talone, reps);
        for (int r = 0; r < reps; r++) {
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Iallreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            compute(alone);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            tover[r] = slowest(MPI_Wtime() - t0);
        }
        for (int i = 0; i < n; i++) {
            float want = (float)((i % 100) * size + size * (size - 1) / 2);
            if (out[i] != want) {
                bad = 1;
                break;
            }
        }
        const double start = median(tstart, reps), over = median(tover, reps);
        if (rank == 0) {
            printf("bytes %zu start_us %.1f alone_us %.1f compute_us %.1f overlap_us %.1f "
                   "hidden %.2f\n", bytes, start * 1e6, alone * 1e6, alone * 1e6,
                   over * 1e6, (2 * alone - over) / alone);
        }
        free(in);
        free(out);
        free(ts);
    }
    int any = 0;
    PMPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && any) {
        printf("WRONG result\n");
    }
    MPI_Finalize();
    return any;
}
