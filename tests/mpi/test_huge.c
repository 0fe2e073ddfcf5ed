/*
 * collar - messages above 4 GiB: MPI_Allreduce (MPI_SUM) of
 *   - 2^30 + 3 MPI_INT (4 GiB + 12 bytes) from a send buffer into a receive
 *     buffer, and
 *   - 2^29 + 3 elements of MPI_Type_contiguous(2, MPI_INT) (4 GiB + 24
 *     bytes) in place,
 * (MPI_SUM through a user-defined op on the pairs: the MPI library's own
 * ops need not take derived datatypes), every element of the result checked on every rank against the sum of
 * the ranks' inputs (integers: exact).  Byte offsets past 4 GiB in every
 * copy and chunk; the MPI library's own large-count call (MPI_Allreduce_c)
 * does not exist in every MPI library yet, so the counts stay below 2^31
 * (tests/unit/test_algo covers counts above it).
 *
 * A plain MPI program: without collar it gives the same verdict.  Needs
 * two buffers of 4 GiB + 24 bytes per rank; exits 77 (skip) on every rank
 * when MemAvailable is below --need-gib GiB (the whole job's need, checked
 * by rank 0: all ranks share the machine).
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long mem_available_kib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long kib = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1) {
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kib;
}

static int value(int rank, size_t i)
{
    return (int)(i % 1000003u) + 7 * rank - (int)(i % 61u) * rank;
}

/* Check n ints of `got` against the sum over ranks; report the first miss. */
static void check(const int *got, size_t n, int size, const char *what)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        long want = 0;
        for (int r = 0; r < size; r++) {
            want += value(r, i);
        }
        if (got[i] != (int)want) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    tu_check(bad == 0, what, "%zu of %zu ints wrong, first at %zu (%d, want "
             "the sum of %d ranks)", bad, n, first, bad ? got[first] : 0, size);
}

/* MPI_SUM on pairs of ints, for MPI_Op_create. */
static void pair_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const int *a = in;
    int *b = inout;
    for (size_t i = 0; i < 2 * (size_t)*len; i++) {
        b[i] += a[i];
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_huge");
    double need_gib = 18.0;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--need-gib") == 0) {
            need_gib = atof(argv[++i]);
        }
    }
    const int rank = tu_world_rank(), size = tu_world_size();
    int enough = mem_available_kib() >= (long)(need_gib * 1024 * 1024);
    MPI_Bcast(&enough, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!enough) {
        if (rank == 0) {
            printf("SKIP: MemAvailable below %.1f GiB\n", need_gib);
        }
        MPI_Finalize();
        return 77;
    }

    const size_t n1 = ((size_t)1 << 30) + 3;       /* ints */
    const size_t n2 = ((size_t)1 << 29) + 3;       /* int pairs */
    const size_t bytes = 2 * n2 * sizeof(int);     /* 4 GiB + 24 */
    int *sbuf = malloc(bytes), *rbuf = malloc(bytes);
    int ok = sbuf != NULL && rbuf != NULL, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (rank == 0) {
            printf("SKIP: cannot allocate 2 x %zu bytes\n", bytes);
        }
        free(sbuf);
        free(rbuf);
        MPI_Finalize();
        return 77;
    }

    /* 2^30 + 3 MPI_INT, send buffer to receive buffer. */
    for (size_t i = 0; i < n1; i++) {
        sbuf[i] = value(rank, i);
    }
    memset(rbuf, 0xff, bytes);
    double t0 = MPI_Wtime();
    int rc = MPI_Allreduce(sbuf, rbuf, (int)n1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    double t1 = MPI_Wtime();
    if (tu_check_rc(rc, "allreduce of 2^30 + 3 ints")) {
        check(rbuf, n1, size, "2^30 + 3 ints (4 GiB + 12 bytes)");
    }
    if (rank == 0) {
        printf("huge: 2^30+3 MPI_INT: %.1f s\n", t1 - t0);
    }

    /* 2^29 + 3 pairs of ints, in place. */
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Op op;
    MPI_Op_create(pair_sum, 1, &op);
    free(sbuf);
    for (size_t i = 0; i < 2 * n2; i++) {
        rbuf[i] = value(rank, i);
    }
    t0 = MPI_Wtime();
    rc = MPI_Allreduce(MPI_IN_PLACE, rbuf, (int)n2, pair, op, MPI_COMM_WORLD);
    t1 = MPI_Wtime();
    if (tu_check_rc(rc, "allreduce of 2^29 + 3 int pairs")) {
        check(rbuf, 2 * n2, size, "2^29 + 3 int pairs in place (4 GiB + 24 bytes)");
    }
    if (rank == 0) {
        printf("huge: 2^29+3 contiguous(2, MPI_INT) in place: %.1f s\n", t1 - t0);
    }
    MPI_Op_free(&op);
    MPI_Type_free(&pair);
    free(rbuf);
    rc = tu_finish();
    MPI_Finalize();
    return rc;
}
