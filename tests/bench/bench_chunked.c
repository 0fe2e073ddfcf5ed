/*
 * Allreduce time by message size, for whatever algorithm collar runs (set by
 * the environment: see run-chunked.sh).  Float SUM, MPI_COMM_WORLD; per size
 * a warm-up call, then REPS calls, each timed on every rank after a barrier,
 * the slowest rank's time taken; the median is printed:
 *     bytes <n> median_us <t> min_us <t>
 * and the result of the last call is checked (exit 1 if wrong).
 *
 * Usage: bench_chunked [--reps N] SIZE...   (sizes in bytes, K/M suffixes)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"


int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, reps = 7, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--reps") == 0 && a + 1 < argc) {
            reps = atoi(argv[++a]);
            continue;
        }
        size_t bytes = bench_parse_size(argv[a]);
        int n = (int)(bytes / sizeof(float));
        float *in = malloc((size_t)n * sizeof(float));
        float *out = malloc((size_t)n * sizeof(float));
        double *t = malloc((size_t)reps * sizeof(double));
        for (int i = 0; i < n; i++) {
            in[i] = (float)((i % 100) + rank);
        }
        MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (int r = 0; r < reps; r++) {
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double dt = MPI_Wtime() - t0;
            PMPI_Allreduce(&dt, &t[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        }
        for (int i = 0; i < n; i++) {
            float want = (float)((i % 100) * size + size * (size - 1) / 2);
            if (out[i] != want) {
                bad = 1;
                break;
            }
        }
        qsort(t, (size_t)reps, sizeof(double), bench_cmp_double);
        if (rank == 0) {
            printf("bytes %zu median_us %.1f min_us %.1f\n", bytes, t[reps / 2] * 1e6,
                   t[0] * 1e6);
        }
        free(in);
        free(out);
        free(t);
    }
    int bad_any = 0;
    PMPI_Allreduce(&bad, &bad_any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && bad_any) {
        printf("WRONG RESULT\n");
    }
    MPI_Finalize();
    return bad_any;
}
