/*
 * collar - allreduce from several threads at once (MPI_THREAD_MULTIPLE).
 *
 * Two pthreads, each with its own communicator (MPI_Comm_dup of
 * MPI_COMM_WORLD, made before the threads start), each run ITERS
 * allreduces: blocking MPI_Allreduce, MPI_Iallreduce + MPI_Wait and
 * MPI_Iallreduce + an MPI_Test loop, SUM on MPI_INT and MPI_DOUBLE, mixed
 * counts, some MPI_IN_PLACE.  Every result is checked (inputs are small
 * integers, so the double sums are exact).  The sequence of calls on each
 * communicator is the same on every rank; the two threads interleave freely.
 *
 * Exits 77 (skipped) if the library does not provide MPI_THREAD_MULTIPLE.
 * Build with -pthread (glibc >= 2.34 also links without it).
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 2
#define ITERS 300
#define GUARD 16

static const int g_counts[] = { 1, 0, 17, 1000, 3, 20000, 256, 2 };
#define NCOUNTS ((int)(sizeof g_counts / sizeof g_counts[0]))

typedef struct {
    int id;
    MPI_Comm comm;
    int rank, size;
} targ_t;

static int64_t val(int rank, size_t i, uint64_t seed)
{
    return tu_gen_int(rank, i, seed, -50000, 50000);
}

static void one_iteration(const targ_t *a, int it)
{
    uint64_t seed = tu_seed(0x7eade, (uint64_t)a->id, (uint64_t)it);
    uint64_t h = tu_hash(0, (uint64_t)it, seed);
    int count = g_counts[h % NCOUNTS];
    int isdbl = (int)((h >> 8) & 1);
    int mode = (int)((h >> 9) % 3); /* 0 blocking, 1 Iallreduce+Wait, 2 Iallreduce+Test */
    int inplace = ((h >> 12) % 4) == 0;
    size_t es = isdbl ? sizeof(double) : sizeof(int), nb = (size_t)count * es, i;
    unsigned char *s = malloc(nb + GUARD), *r = malloc(nb + GUARD), guard[GUARD];
    MPI_Request req = MPI_REQUEST_NULL;
    char what[160];
    int rc, flag, rr;
    size_t bad = 0, first = 0;
    int64_t firstexp = 0;
    double firstgot = 0, t0;
    static const char *mname[3] = { "MPI_Allreduce", "MPI_Iallreduce+MPI_Wait",
                                     "MPI_Iallreduce+MPI_Test loop" };

    if (s == NULL || r == NULL) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 99);
    }
    snprintf(what, sizeof what, "thread %d iteration %d: %s %s MPI_SUM count=%d%s", a->id, it,
             mname[mode], isdbl ? "MPI_DOUBLE" : "MPI_INT", count,
             inplace ? " MPI_IN_PLACE" : "");
    for (i = 0; i < (size_t)count; i++) {
        int64_t v = val(a->rank, i, seed);
        if (isdbl)
            ((double *)s)[i] = (double)v;
        else
            ((int *)s)[i] = (int)v;
    }
    if (inplace)
        memcpy(r, s, nb);
    else
        tu_fill_garbage(r, nb, seed ^ 3);
    tu_fill_garbage(r + nb, GUARD, seed ^ 4);
    memcpy(guard, r + nb, GUARD);

    if (mode == 0) {
        rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, count, isdbl ? MPI_DOUBLE : MPI_INT,
                           MPI_SUM, a->comm);
        tu_check(rc == MPI_SUCCESS, what, "returned %d (%s)", rc, tu_errstr(rc));
    } else {
        rc = MPI_Iallreduce(inplace ? MPI_IN_PLACE : s, r, count, isdbl ? MPI_DOUBLE : MPI_INT,
                            MPI_SUM, a->comm, &req);
        tu_check(rc == MPI_SUCCESS, what, "MPI_Iallreduce returned %d (%s)", rc, tu_errstr(rc));
        if (mode == 1) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            tu_check(rc == MPI_SUCCESS, what, "MPI_Wait returned %d (%s)", rc, tu_errstr(rc));
        } else {
            flag = 0;
            t0 = MPI_Wtime();
            while (!flag) {
                rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS) {
                    tu_fail(what, "MPI_Test returned %d (%s)", rc, tu_errstr(rc));
                    break;
                }
                tu_progress_guard(t0, what);
            }
        }
        tu_check(req == MPI_REQUEST_NULL, what, "request not MPI_REQUEST_NULL after completion");
    }
    for (i = 0; i < (size_t)count; i++) {
        int64_t e = 0;
        double got;
        for (rr = 0; rr < a->size; rr++)
            e += val(rr, i, seed);
        got = isdbl ? ((double *)r)[i] : (double)((int *)r)[i];
        if (got != (double)e && bad++ == 0) {
            first = i;
            firstexp = e;
            firstgot = got;
        }
    }
    tu_check(bad == 0, what, "%zu of %d elements wrong; first at index %zu: expected %lld got "
             "%.17g", bad, count, first, (long long)firstexp, firstgot);
    tu_check(memcmp(r + nb, guard, GUARD) == 0, what, "bytes after the receive buffer changed");
    if (!inplace) {
        for (i = 0, bad = 0; i < (size_t)count; i++) {
            int64_t v = val(a->rank, i, seed);
            bad += isdbl ? ((double *)s)[i] != (double)v : ((int *)s)[i] != (int)v;
        }
        tu_check(bad == 0, what, "send buffer changed (%zu elements)", bad);
    }
    free(s);
    free(r);
}

static void *thread_main(void *p)
{
    targ_t *a = p;
    int it;

    for (it = 0; it < ITERS; it++)
        one_iteration(a, it);
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th[NTHREADS];
    targ_t args[NTHREADS];
    int provided = -1, i, rc, created[NTHREADS];

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    tu_init("test_threads");
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            if (tu_world_rank() == 0)
                printf("usage: test_threads\n"
                       "%d threads x %d allreduces on their own communicators; needs "
                       "MPI_THREAD_MULTIPLE (else exit 77).\n", NTHREADS, ITERS);
            MPI_Finalize();
            return 0;
        }
    }
    if (provided < MPI_THREAD_MULTIPLE)
        tu_skip("MPI_THREAD_MULTIPLE not provided (MPI_Init_thread provided level %d)",
                provided);

    for (i = 0; i < NTHREADS; i++) {
        args[i].id = i;
        MPI_Comm_dup(MPI_COMM_WORLD, &args[i].comm);
        MPI_Comm_rank(args[i].comm, &args[i].rank);
        MPI_Comm_size(args[i].comm, &args[i].size);
    }
    for (i = 0; i < NTHREADS; i++) {
        rc = pthread_create(&th[i], NULL, thread_main, &args[i]);
        created[i] = tu_check(rc == 0, "pthread_create", "returned %d", rc);
        if (!created[i]) {
            fprintf(stderr, "rank %d: cannot create thread %d\n", tu_world_rank(), i);
            MPI_Abort(MPI_COMM_WORLD, 99);
        }
    }
    for (i = 0; i < NTHREADS; i++)
        tu_check(pthread_join(th[i], NULL) == 0, "pthread_join", "thread %d", i);
    for (i = 0; i < NTHREADS; i++)
        MPI_Comm_free(&args[i].comm);

    rc = tu_finish();
    MPI_Finalize();
    return rc;
}
