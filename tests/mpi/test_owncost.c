/*
 * What a small blocking device allreduce costs under collar besides its
 * data (owncost.test): the program's own PMPI_Allreduce, PMPI_Iallreduce
 * and PMPI_Test (-rdynamic) count what collar asks of the MPI library, and
 * its malloc, calloc and realloc (over glibc's __libc_ ones) the heap
 * allocations of the process while the calls run, less those made inside
 * the MPI library's calls: collar's.
 *
 * For each size (8 B, 64 B, 1 KiB of MPI_INT, MPI_SUM) it makes
 * `iters` blocking allreduces on the (sim) device buffers, checks the values
 * on every rank after each, and prints per call:
 *   "<bytes> B: <a> PMPI_Allreduce, <i> PMPI_Iallreduce, <t> PMPI_Test per
 *    call, <m> allocations"
 * Then calls that change from one to the next (two buffer pairs, in place,
 * a datatype freed and made again with another layout), checked.
 * Then, with --mixed, a nonblocking allreduce of 64 KiB left in flight
 * while blocking small ones run on the same communicator and on a
 * duplicate (their internal collectives keep the order of the schedules
 * on the communicator), all checked.
 *
 * Usage: test_owncost [--iters N] [--mixed]
 */
#include "testutil.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long n_allreduce, n_iallreduce, n_test;
/* Allocations, and those made inside the MPI library's calls above. */
static _Atomic long n_alloc, n_alloc_mpi;

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);

void *malloc(size_t n)
{
    n_alloc++;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    n_alloc++;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    n_alloc++;
    return __libc_realloc(p, n);
}

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op,
                            MPI_Comm);
typedef int (*iallreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op,
                             MPI_Comm, MPI_Request *);
typedef int (*test_fn)(MPI_Request *, int *, MPI_Status *);

static void *next_symbol(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "test_owncost: %s not found\n", name);
        abort();
    }
    return f;
}

int PMPI_Allreduce(const void *s, void *r, int n, MPI_Datatype dt, MPI_Op op,
                   MPI_Comm comm)
{
    static allreduce_fn next;
    if (next == NULL) {
        next = (allreduce_fn)next_symbol("PMPI_Allreduce");
    }
    n_allreduce++;
    const long before = n_alloc;
    const int rc = next(s, r, n, dt, op, comm);
    n_alloc_mpi += n_alloc - before;
    return rc;
}

int PMPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype dt, MPI_Op op,
                    MPI_Comm comm, MPI_Request *req)
{
    static iallreduce_fn next;
    if (next == NULL) {
        next = (iallreduce_fn)next_symbol("PMPI_Iallreduce");
    }
    n_iallreduce++;
    const long before = n_alloc;
    const int rc = next(s, r, n, dt, op, comm, req);
    n_alloc_mpi += n_alloc - before;
    return rc;
}

int PMPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    static test_fn next;
    if (next == NULL) {
        next = (test_fn)next_symbol("PMPI_Test");
    }
    n_test++;
    const long before = n_alloc;
    const int rc = next(req, flag, status);
    n_alloc_mpi += n_alloc - before;
    return rc;
}

static void fill(int *buf, int n, int rank, int round)
{
    for (int i = 0; i < n; i++) {
        buf[i] = (rank + 1) * (i + 1) + round;
    }
}

static int check_sum(const int *buf, int n, int size, int round)
{
    for (int i = 0; i < n; i++) {
        const int want = size * (size + 1) / 2 * (i + 1) + size * round;
        if (buf[i] != want) {
            return i;
        }
    }
    return -1;
}

/* The sum of the ints of an element of the datatype in use: two ints, or
 * (g_gap) a vector of two ints with a gap between them (extent 3 ints). */
static int g_gap;

static void layout_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const int *a = in;
    int *b = inout;
    for (int e = 0; e < *len; e++) {
        if (g_gap) {
            b[3 * e] += a[3 * e];
            b[3 * e + 2] += a[3 * e + 2];
        } else {
            b[2 * e] += a[2 * e];
            b[2 * e + 1] += a[2 * e + 1];
        }
    }
}

/* A blocking allreduce of n ints on `comm`, checked. */
static void one_call(MPI_Comm comm, int *s, int *r, int n, int round,
                     const char *what)
{
    const int rank = tu_world_rank(), size = tu_world_size();
    fill(s, n, rank, round);
    int rc = MPI_Allreduce(s, r, n, MPI_INT, MPI_SUM, comm);
    tu_check_rc(rc, what);
    const int bad = check_sum(r, n, size, round);
    tu_check(bad < 0, what, "element %d wrong in round %d", bad, round);
}

static int finish(void)
{
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_owncost");
    int iters = 200, mixed = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--mixed") == 0) {
            mixed = 1;
        }
    }
    const int rank = tu_world_rank(), size = tu_world_size();
    enum { MAXN = 16384 };
    int *s = malloc(MAXN * sizeof(int)), *r = malloc(MAXN * sizeof(int));
    if (s == NULL || r == NULL) {
        tu_fail("malloc", "no memory");
        return finish();
    }
    static const int sizes[] = { 8, 64, 1024 };
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        const int n = sizes[k] / (int)sizeof(int);
        char what[64];
        snprintf(what, sizeof(what), "allreduce of %d B", sizes[k]);
        /* The first calls make collar's communicator and fill its pools. */
        for (int i = 0; i < 3; i++) {
            one_call(MPI_COMM_WORLD, s, r, n, i, what);
        }
        n_allreduce = n_iallreduce = n_test = n_alloc = n_alloc_mpi = 0;
        for (int i = 0; i < iters; i++) {
            one_call(MPI_COMM_WORLD, s, r, n, i, what);
        }
        const long a = n_allreduce, ia = n_iallreduce, t = n_test;
        /* Less what the MPI library allocates inside those (Open MPI 4.1's
         * recursive doubling: a buffer a call; MPICH's more, and more for
         * 3 ints than for 2). */
        const long m = n_alloc - n_alloc_mpi;
        if (rank == 0) {
            printf("%d B: %.2f PMPI_Allreduce, %.2f PMPI_Iallreduce, "
                   "%.2f PMPI_Test per call, %.2f allocations\n", sizes[k],
                   (double)a / iters, (double)ia / iters, (double)t / iters,
                   (double)m / iters);
            fflush(stdout);
        }
    }

    /* Calls that differ from the one before: another buffer pair, in
     * place, another datatype under a handle that may be the same. */
    for (int i = 0; i < 20; i++) {
        one_call(MPI_COMM_WORLD, s, r, 4, i, "first pair");
        one_call(MPI_COMM_WORLD, s + 64, r + 64, 4, i, "second pair");
        fill(r, 4, rank, i);
        tu_check_rc(MPI_Allreduce(MPI_IN_PLACE, r, 4, MPI_INT, MPI_SUM,
                                  MPI_COMM_WORLD), "in place");
        const int bad = check_sum(r, 4, size, i);
        tu_check(bad < 0, "in place", "element %d wrong in round %d", bad, i);
    }
    MPI_Op sum;
    MPI_Op_create(layout_sum, 1, &sum);
    for (int i = 0; i < 4; i++) {
        /* Pairs of ints, then ints with a gap after each (a vector): the
         * gaps must stay; a user's op (MPI_SUM takes no derived type), so
         * the status agreement is an allreduce of its own. */
        MPI_Datatype t;
        g_gap = i % 2 == 1;
        if (i % 2 == 0) {
            MPI_Type_contiguous(2, MPI_INT, &t);
        } else {
            MPI_Type_vector(2, 1, 2, MPI_INT, &t);
        }
        MPI_Type_commit(&t);
        fill(s, 8, rank, i);
        for (int j = 0; j < 8; j++) {
            r[j] = -1;
        }
        tu_check_rc(MPI_Allreduce(s, r, 2, t, sum, MPI_COMM_WORLD), "derived");
        int want[8];
        for (int j = 0; j < 8; j++) {
            want[j] = size * (size + 1) / 2 * (j + 1) + size * i;
        }
        int bad = -1;
        for (int j = 0; j < 8; j++) {
            /* Two elements: ints 0 1 2 3, or 0 2 3 5 (extent 3 ints). */
            const int in = g_gap ? (j == 0 || j == 2 || j == 3 || j == 5) : j < 4;
            if (r[j] != (in ? want[j] : -1)) {
                bad = j;
                break;
            }
        }
        tu_check(bad < 0, "derived datatype", "element %d wrong in round %d",
                 bad, i);
        MPI_Type_free(&t);
    }
    MPI_Op_free(&sum);

    if (mixed) {
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        one_call(dup, s, r, 2, 0, "first call on the duplicate");
        int *bs = malloc(MAXN * sizeof(int)), *br = malloc(MAXN * sizeof(int));
        if (bs == NULL || br == NULL) {
            tu_fail("malloc", "no memory");
            return finish();
        }
        for (int round = 0; round < 20; round++) {
            MPI_Request req;
            fill(bs, MAXN, rank, round);
            tu_check_rc(MPI_Iallreduce(bs, br, MAXN, MPI_INT, MPI_SUM,
                                       MPI_COMM_WORLD, &req), "iallreduce");
            one_call(MPI_COMM_WORLD, s, r, 2, round, "blocking after a nonblocking one");
            one_call(dup, s, r, 16, round, "blocking on the duplicate");
            tu_check_rc(MPI_Wait(&req, MPI_STATUS_IGNORE), "wait");
            const int bad = check_sum(br, MAXN, size, round);
            tu_check(bad < 0, "nonblocking allreduce", "element %d wrong in "
                     "round %d", bad, round);
        }
        free(bs);
        free(br);
        MPI_Comm_free(&dup);
    }
    free(s);
    free(r);
    return finish();
}
