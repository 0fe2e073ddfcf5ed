/*
 * collar - a program with known allreduce call sites, for the statistics
 * report (tests/mpi/stats.test, docs/stats.md).
 *
 * Per rank, and nothing else goes through MPI_Allreduce or MPI_Iallreduce
 * (testutil's bookkeeping uses PMPI_*):
 *   site_a: 7 x MPI_Allreduce of 1024 doubles (8192 bytes),
 *   site_b: 3 x MPI_Allreduce of 10 ints (40 bytes),
 *   site_c: 2 x MPI_Iallreduce of 100 floats (400 bytes), both in flight,
 *           then MPI_Wait on each.
 * Each rank prints "test_stats: rank R pid P" first, so that the test can
 * tell which process printed the report (at MPI_Finalize).  The results are
 * checked, so the program gives the same verdict with and without collar.
 *
 * Build with -g, so that call sites resolve to "function (file:line)".  The
 * sites are separate noinline functions, each with one call instruction for
 * its collective, on the line marked "site X call".
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define A_CALLS 7
#define A_COUNT 1024
#define B_CALLS 3
#define B_COUNT 10
#define C_CALLS 2
#define C_COUNT 100

/* Rank r contributes r + 1 + i + k (small integers: exact in float). */
static double expect_sum(int nranks, int i, int k)
{
    return (double)nranks * (nranks + 1) / 2.0 + (double)nranks * (i + k);
}

__attribute__((noinline)) static void site_a(int rank, int nranks)
{
    double *in = malloc(A_COUNT * sizeof(double));
    double *out = malloc(A_COUNT * sizeof(double));
    if (in == NULL || out == NULL) {
        tu_fail("site_a", "out of memory");
        free(in);
        free(out);
        return;
    }
    for (int i = 0; i < A_CALLS; i++) {
        for (int k = 0; k < A_COUNT; k++) {
            in[k] = rank + 1 + i + k;
        }
        int rc = MPI_Allreduce(in, out, A_COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* site A call */
        tu_check_rc(rc, "site_a MPI_Allreduce");
        int bad = 0;
        for (int k = 0; k < A_COUNT; k++) {
            bad += out[k] != expect_sum(nranks, i, k);
        }
        tu_check(bad == 0, "site_a result", "call %d: %d wrong elements", i, bad);
    }
    free(in);
    free(out);
}

__attribute__((noinline)) static void site_b(int rank, int nranks)
{
    int *in = malloc(B_COUNT * sizeof(int));
    int *out = malloc(B_COUNT * sizeof(int));
    if (in == NULL || out == NULL) {
        tu_fail("site_b", "out of memory");
        free(in);
        free(out);
        return;
    }
    for (int i = 0; i < B_CALLS; i++) {
        for (int k = 0; k < B_COUNT; k++) {
            in[k] = rank + 1 + i + k;
        }
        int rc = MPI_Allreduce(in, out, B_COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* site B call */
        tu_check_rc(rc, "site_b MPI_Allreduce");
        int bad = 0;
        for (int k = 0; k < B_COUNT; k++) {
            bad += out[k] != (int)expect_sum(nranks, i, k);
        }
        tu_check(bad == 0, "site_b result", "call %d: %d wrong elements", i, bad);
    }
    free(in);
    free(out);
}

__attribute__((noinline)) static void site_c(int rank, int nranks)
{
    float *in = malloc(C_CALLS * C_COUNT * sizeof(float));
    float *out = malloc(C_CALLS * C_COUNT * sizeof(float));
    MPI_Request req[C_CALLS];
    if (in == NULL || out == NULL) {
        tu_fail("site_c", "out of memory");
        free(in);
        free(out);
        return;
    }
    for (int i = 0; i < C_CALLS; i++) {
        for (int k = 0; k < C_COUNT; k++) {
            in[i * C_COUNT + k] = (float)(rank + 1 + i + k);
        }
        int rc = MPI_Iallreduce(in + i * C_COUNT, out + i * C_COUNT, C_COUNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[i]); /* site C call */
        tu_check_rc(rc, "site_c MPI_Iallreduce");
    }
    for (int i = 0; i < C_CALLS; i++) {
        tu_check_rc(MPI_Wait(&req[i], MPI_STATUS_IGNORE), "site_c MPI_Wait");
    }
    for (int i = 0; i < C_CALLS; i++) {
        int bad = 0;
        for (int k = 0; k < C_COUNT; k++) {
            bad += out[i * C_COUNT + k] != (float)expect_sum(nranks, i, k);
        }
        tu_check(bad == 0, "site_c result", "call %d: %d wrong elements", i, bad);
    }
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_stats");
    int rank = tu_world_rank(), nranks = tu_world_size();
    printf("test_stats: rank %d pid %ld\n", rank, (long)getpid());
    fflush(stdout);
    PMPI_Barrier(MPI_COMM_WORLD);

    site_a(rank, nranks);
    site_b(rank, nranks);
    site_c(rank, nranks);

    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
