/*
 * The cost of one MPI_Start of a persistent allreduce against a fresh
 * MPI_Iallreduce of the same buffers, side by side in one process
 * (alternating, so that both see the same machine).  Under collar on device
 * memory, the persistent form does its selection, staging buffers and
 * private-communicator lookup once at MPI_Allreduce_init.
 *
 * Usage: bench_persist [SIZE ...]   (bytes with K/M suffixes; default 8 1K 64K 1M)
 * Prints per size: median microseconds per operation (start + wait) of each
 * form and their ratio.  Exit 77 where the MPI library has no persistent
 * collectives.
 */
#include "config.h"
#include "bench_util.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 21
#define REPS 200

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#if !defined(HAVE_PMPI_ALLREDUCE_INIT)
    if (rank == 0) {
        printf("bench_persist: SKIP: the MPI library has no persistent collectives\n");
    }
    MPI_Finalize();
    (void)argv;
    return 77;
#else
    static const char *const dflt[] = { "8", "1K", "64K", "1M" };
    const int nsizes = argc > 1 ? argc - 1 : 4;
    if (rank == 0) {
        printf("# bytes  iallreduce_us  start_us  start/iallreduce\n");
    }
    for (int k = 0; k < nsizes; k++) {
        const size_t bytes = bench_parse_size(argc > 1 ? argv[k + 1] : dflt[k]);
        const int count = (int)(bytes / sizeof(float) > 0 ? bytes / sizeof(float) : 1);
        float *s = calloc((size_t)count, sizeof(float));
        float *r = calloc((size_t)count, sizeof(float));
        MPI_Request preq, req;
        MPI_Allreduce_init(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           MPI_INFO_NULL, &preq);
        double fresh[ROUNDS], start[ROUNDS];
        for (int round = 0; round < ROUNDS; round++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < REPS; i++) {
                MPI_Iallreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
            double t1 = MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
            double t2 = MPI_Wtime();
            for (int i = 0; i < REPS; i++) {
                MPI_Start(&preq);
                MPI_Wait(&preq, MPI_STATUS_IGNORE);
            }
            double t3 = MPI_Wtime();
            double mine[2] = { (t1 - t0) / REPS, (t3 - t2) / REPS }, slow[2];
            MPI_Allreduce(mine, slow, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            fresh[round] = slow[0];
            start[round] = slow[1];
        }
        MPI_Request_free(&preq);
        qsort(fresh, ROUNDS, sizeof(double), bench_cmp_double);
        qsort(start, ROUNDS, sizeof(double), bench_cmp_double);
        if (rank == 0) {
            printf("%-8zu %13.2f %9.2f %17.3f\n", bytes, fresh[ROUNDS / 2] * 1e6,
                   start[ROUNDS / 2] * 1e6, start[ROUNDS / 2] / fresh[ROUNDS / 2]);
        }
        free(s);
        free(r);
    }
    MPI_Finalize();
    return 0;
#endif
}
