/*
 * One run's time of a small host-buffer MPI_Allreduce, for comparing runs
 * with and without collar preloaded (run-passthrough.sh): the program asks
 * for MPI_THREAD_SINGLE, as most do, so that what collar changes about the
 * MPI library itself (the thread level it asks for) shows, which a
 * comparison of MPI_Allreduce with PMPI_Allreduce inside one process
 * (bench_allreduce.c) cannot see.
 *
 * Batches of ITERS calls on MPI_COMM_WORLD; per batch the mean time of one
 * call on the slowest rank.  Rank 0 prints one line:
 *   <median us per call> us, library thread level <PMPI_Query_thread>
 *
 * --type int: MPI_INT and MPI_SUM (bytes / 4 elements), a pair every
 * device algorithm reduces by itself; the default is MPI_CHAR and MPI_MAX.
 *
 * Usage: bench_passthrough [--bytes N] [--iters N] [--batches N] [--type int]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

int main(int argc, char **argv)
{
    size_t bytes = 8;
    long iters = 2000;
    int batches = 31;
    MPI_Datatype type = MPI_CHAR;
    MPI_Op op = MPI_MAX;
    size_t esize = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--bytes") == 0) {
            bytes = bench_parse_size(argv[i + 1]);
        } else if (strcmp(argv[i], "--iters") == 0) {
            iters = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--batches") == 0) {
            batches = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--type") == 0 && strcmp(argv[i + 1], "int") == 0) {
            type = MPI_INT;
            op = MPI_SUM;
            esize = sizeof(int);
        }
    }
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    int rank, level = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Query_thread(&level);
    const int n = (int)(bytes < esize ? 1 : bytes / esize);
    char *s = calloc((size_t)n, esize), *r = calloc((size_t)n, esize);
    double *t = malloc((size_t)(batches > 0 ? batches : 1) * sizeof(double));
    if (s == NULL || r == NULL || t == NULL || batches < 1 || iters < 1) {
        fprintf(stderr, "bench_passthrough: bad arguments or no memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < iters; i++) {   /* warm-up */
        MPI_Allreduce(s, r, n, type, op, MPI_COMM_WORLD);
    }
    for (int b = 0; b < batches; b++) {
        PMPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            MPI_Allreduce(s, r, n, type, op, MPI_COMM_WORLD);
        }
        double dt = (MPI_Wtime() - t0) / (double)iters;
        PMPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[b] = dt;
    }
    qsort(t, (size_t)batches, sizeof(double), bench_cmp_double);
    if (rank == 0) {
        printf("%.4f us, library thread level %d\n", t[batches / 2] * 1e6, level);
    }
    free(s);
    free(r);
    free(t);
    MPI_Finalize();
    return 0;
}
