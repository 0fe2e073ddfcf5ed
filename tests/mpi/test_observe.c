/*
 * Allreduces for the tests of what tools see of collar (nvtx.test,
 * trace.test): ITERS sums of COUNT floats on MPI_COMM_WORLD, blocking or
 * nonblocking, each result checked on every rank; with --bcast, one
 * MPI_Bcast of COUNT floats from rank 0 too (a staged collective).
 *
 * Usage: test_observe [--count N] [--iters N] [--nonblocking] [--bcast]
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

int main(int argc, char **argv)
{
    long count = 4096;
    int iters = 2, nonblocking = 0, bcast = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
            count = atol(argv[++i]);
        } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--nonblocking") == 0) {
            nonblocking = 1;
        } else if (strcmp(argv[i], "--bcast") == 0) {
            bcast = 1;
        }
    }
    MPI_Init(&argc, &argv);
    tu_init("test_observe");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    float *s = malloc((size_t)count * sizeof(float));
    float *r = malloc((size_t)count * sizeof(float));
    if (s == NULL || r == NULL) {
        tu_skip("no memory for %ld floats", count);
    }
    for (int it = 0; it < iters; it++) {
        for (long i = 0; i < count; i++) {
            s[i] = (float)(rank + 1 + (i + it) % 7);
        }
        if (nonblocking) {
            MPI_Request req;
            MPI_Iallreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Allreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        long bad = 0;
        for (long i = 0; i < count; i++) {
            const float want = (float)(size * (size + 1) / 2 + size * ((i + it) % 7));
            bad += r[i] != want;
        }
        tu_check(bad == 0, "allreduce", "iteration %d: %ld wrong elements", it, bad);
    }
    if (bcast) {
        for (long i = 0; i < count; i++) {
            r[i] = rank == 0 ? (float)(i % 13) : -1.0f;
        }
        MPI_Bcast(r, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        long bad = 0;
        for (long i = 0; i < count; i++) {
            bad += r[i] != (float)(i % 13);
        }
        tu_check(bad == 0, "bcast", "%ld wrong elements", bad);
    }
    free(s);
    free(r);
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
