/*
 * What an intercepted MPI_Allreduce costs over the MPI library's own.
 *
 * In one process, batches of MPI_Allreduce (through collar when it is
 * preloaded) alternate with batches of PMPI_Allreduce (the MPI library's
 * entry point, which never goes through collar), so both are measured side
 * by side on the same ranks, cores and buffers.  Per batch: the mean time of
 * one call, the slowest rank's.  Reported: the median over batch pairs of
 * each, and the median of the per-pair ratios MPI/PMPI.  Without collar both
 * entry points are the same function, and the ratio shows the noise floor.
 *
 * Usage: bench_allreduce [--bytes N] [--iters N] [--pairs N]
 * Prints: bytes <n> mpi_us <t> pmpi_us <t> ratio <r>
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

typedef int (*allreduce_fn_t)(const void *, void *, int, MPI_Datatype, MPI_Op,
                              MPI_Comm);

static double batch(allreduce_fn_t fn, const double *in, double *out, int n,
                    long iters)
{
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        fn(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    double t = (MPI_Wtime() - t0) / (double)iters, tmax;
    PMPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    long bytes = 8, iters = 5000;
    int pairs = 41;
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--bytes") == 0) {
            bytes = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--iters") == 0) {
            iters = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--pairs") == 0) {
            pairs = atoi(argv[i + 1]);
        }
    }
    if (pairs < 1 || pairs > 10000 || iters < 1 || bytes < 8) {
        fprintf(stderr, "bench_allreduce: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int n = (int)(bytes / 8);
    double *in = calloc((size_t)n, sizeof(double));
    double *out = calloc((size_t)n, sizeof(double));
    double *tm = malloc((size_t)pairs * sizeof(double));
    double *tp = malloc((size_t)pairs * sizeof(double));
    double *ratio = malloc((size_t)pairs * sizeof(double));

    batch(MPI_Allreduce, in, out, n, iters);     /* warm-up */
    batch(PMPI_Allreduce, in, out, n, iters);
    for (int p = 0; p < pairs; p++) {
        /* Alternate which goes first, so that neither always follows the
         * other. */
        if (p % 2 == 0) {
            tm[p] = batch(MPI_Allreduce, in, out, n, iters);
            tp[p] = batch(PMPI_Allreduce, in, out, n, iters);
        } else {
            tp[p] = batch(PMPI_Allreduce, in, out, n, iters);
            tm[p] = batch(MPI_Allreduce, in, out, n, iters);
        }
        ratio[p] = tm[p] / tp[p];
    }
    if (rank == 0) {
        printf("bytes %d mpi_us %.4f pmpi_us %.4f ratio %.4f\n", n * 8,
               median(tm, pairs) * 1e6, median(tp, pairs) * 1e6,
               median(ratio, pairs));
    }
    free(in); free(out); free(tm); free(tp); free(ratio);
    MPI_Finalize();
    return 0;
}
