/*
 * collar - stress: many allreduces of random shapes from several threads,
 * for a bounded time (MPI_THREAD_MULTIPLE).
 *
 * NTHREADS threads per rank, each on its own communicator (MPI_Comm_dup of
 * MPI_COMM_WORLD, made before the threads start), run batches until rank 0
 * says stop.  A batch is one of
 *
 *   - a blocking MPI_Allreduce;
 *   - MPI_Iallreduce + MPI_Wait;
 *   - MPI_Iallreduce + an MPI_Test loop;
 *   - 2 to MAX_OUT outstanding MPI_Iallreduce completed by one MPI_Waitall
 *     over the requests in a random order (drawn per rank);
 *   - 2 to MAX_OUT outstanding MPI_Iallreduce completed one by one with
 *     MPI_Wait in a random order (drawn per rank).
 *
 * Each allreduce has a random size (0 to --max-bytes, 256 KiB by default,
 * spread over every power of two), a random type (MPI_INT, MPI_FLOAT,
 * MPI_DOUBLE, MPI_LONG_LONG), a random op (MPI_SUM, MPI_MAX) and is
 * sometimes MPI_IN_PLACE.  The result is compared element by element with a
 * reference computed locally (every rank can compute every rank's input; the
 * values are chosen so that float and double sums are exact), and the bytes
 * after the receive buffer and the send buffer must be unchanged.
 *
 * Every rank must issue the same collectives in the same order on each
 * communicator: the batches are drawn from a seed that rank 0 chooses (or
 * --seed) and broadcasts, per thread and batch; only the completion order
 * is drawn per rank.  Before each batch rank 0's thread broadcasts on its
 * communicator whether the time (--seconds) is up, so all ranks stop after
 * the same batch.
 *
 * A watchdog thread aborts the job (MPI_Abort) with a FAIL line naming each
 * thread's batch if no allreduce completes for TU_PROGRESS_TIMEOUT seconds
 * (120 by default): a deadlock shows as a failure, not as a hang.
 *
 * Which algorithm runs is collar's choice (COLLAR_ALGORITHM,
 * COLLAR_ALLREDUCE_RULES...): tests/mpi/stress.test runs this program under
 * several settings.  Exits 77 (skipped) without MPI_THREAD_MULTIPLE.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NTHREADS 2
#define MAX_OUT 6
#define GUARD 16

enum { T_INT, T_FLOAT, T_DOUBLE, T_LL, NTYPES };
enum { M_BLOCKING, M_WAIT, M_TEST, M_WAITALL, M_WAITEACH, NMODES };

static const char *const type_name[NTYPES] = { "MPI_INT", "MPI_FLOAT", "MPI_DOUBLE",
                                               "MPI_LONG_LONG" };
static const size_t type_size[NTYPES] = { sizeof(int), sizeof(float), sizeof(double),
                                          sizeof(long long) };
static const char *const mode_name[NMODES] = {
    "MPI_Allreduce", "MPI_Iallreduce+MPI_Wait", "MPI_Iallreduce+MPI_Test loop",
    "MPI_Iallreduce x N + MPI_Waitall (random order)",
    "MPI_Iallreduce x N + MPI_Wait each (random order)"
};

static double g_seconds = 8.0;
static size_t g_max_bytes = 256 * 1024;
static uint64_t g_seed;
static double g_t0;

typedef struct {
    int id;
    MPI_Comm comm;
    int rank, size;
    long batches;
    long calls[NMODES];
    long long bytes;
    atomic_long completed;   /* allreduces completed (for the watchdog) */
    atomic_long cur_batch;
    atomic_int cur_mode;
} targ_t;

typedef struct {
    int type, isop_max, count, inplace;
    uint64_t seed;
    size_t nb;
    unsigned char *s, *r, guard[GUARD];
    MPI_Request req;
    char what[224];
} op_t;

static MPI_Datatype mpi_type(int t)
{
    switch (t) {
    case T_INT: return MPI_INT;
    case T_FLOAT: return MPI_FLOAT;
    case T_DOUBLE: return MPI_DOUBLE;
    default: return MPI_LONG_LONG;
    }
}

/* Input element i of rank r.  Ranges keep every sum exact in its type (and
 * in a double, for float and double) up to thousands of ranks. */
static int64_t val(const op_t *o, int rank, size_t i)
{
    int64_t lo, hi;

    switch (o->type) {
    case T_INT:
        lo = o->isop_max ? INT_MIN : -100000;
        hi = o->isop_max ? INT_MAX : 100000;
        break;
    case T_FLOAT:
        lo = o->isop_max ? -(1 << 24) : -1000;
        hi = o->isop_max ? (1 << 24) : 1000;
        break;
    case T_DOUBLE:
        lo = -((int64_t)1 << 40);
        hi = (int64_t)1 << 40;
        break;
    default:
        lo = o->isop_max ? -((int64_t)1 << 62) : -((int64_t)1 << 50);
        hi = o->isop_max ? ((int64_t)1 << 62) : ((int64_t)1 << 50);
        break;
    }
    return tu_gen_int(rank, i, o->seed, lo, hi);
}

static void put(const op_t *o, unsigned char *buf, size_t i, int64_t v)
{
    switch (o->type) {
    case T_INT: ((int *)buf)[i] = (int)v; break;
    case T_FLOAT: ((float *)buf)[i] = (float)v; break;
    case T_DOUBLE: ((double *)buf)[i] = (double)v; break;
    default: ((long long *)buf)[i] = (long long)v; break;
    }
}

/* Element i of buf equals v exactly. */
static int is(const op_t *o, const unsigned char *buf, size_t i, int64_t v)
{
    switch (o->type) {
    case T_INT: return ((const int *)buf)[i] == (int)v;
    case T_FLOAT: return ((const float *)buf)[i] == (float)v;
    case T_DOUBLE: return ((const double *)buf)[i] == (double)v;
    default: return ((const long long *)buf)[i] == (long long)v;
    }
}

static double as_double(const op_t *o, const unsigned char *buf, size_t i)
{
    switch (o->type) {
    case T_INT: return ((const int *)buf)[i];
    case T_FLOAT: return ((const float *)buf)[i];
    case T_DOUBLE: return ((const double *)buf)[i];
    default: return (double)((const long long *)buf)[i];
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", tu_world_rank(), n);
        MPI_Abort(MPI_COMM_WORLD, 99);
    }
    return p;
}

/* Draws the shape of allreduce k of a batch from the batch's shared seed
 * (the same on every rank) and fills the buffers. */
static void op_prepare(op_t *o, const targ_t *a, uint64_t bseed, int k, long batch, int mode)
{
    uint64_t h = tu_hash(0, 100 + (uint64_t)k, bseed), h2 = tu_hash(0, 200 + (uint64_t)k, bseed);
    size_t bytes, es, i;

    o->seed = tu_seed(bseed, 300, (uint64_t)k);
    o->type = (int)(h % NTYPES);
    o->isop_max = (int)((h >> 8) & 1);
    o->inplace = ((h >> 12) % 4) == 0;
    if ((h >> 16) % 20 == 0) {
        bytes = 0;
    } else {
        /* a power of two from 1 B to 256 KiB, then anywhere in its upper half */
        int e = (int)((h >> 24) % 19);
        size_t top = (size_t)1 << e;
        bytes = top / 2 + (size_t)(h2 % (top / 2 + 1));
    }
    if (bytes > g_max_bytes)
        bytes = g_max_bytes;
    es = type_size[o->type];
    o->count = (int)(bytes / es);
    o->nb = (size_t)o->count * es;
    o->req = MPI_REQUEST_NULL;
    snprintf(o->what, sizeof o->what,
             "thread %d batch %ld call %d (%s): %s %s count=%d (%zu B)%s", a->id, batch, k,
             mode_name[mode], type_name[o->type], o->isop_max ? "MPI_MAX" : "MPI_SUM",
             o->count, o->nb, o->inplace ? " MPI_IN_PLACE" : "");
    o->s = xmalloc(o->nb);
    o->r = xmalloc(o->nb + GUARD);
    for (i = 0; i < (size_t)o->count; i++)
        put(o, o->s, i, val(o, a->rank, i));
    if (o->inplace)
        memcpy(o->r, o->s, o->nb);
    else
        tu_fill_garbage(o->r, o->nb, o->seed ^ 3);
    tu_fill_garbage(o->r + o->nb, GUARD, o->seed ^ 4);
    memcpy(o->guard, o->r + o->nb, GUARD);
}

static void op_verify(op_t *o, const targ_t *a)
{
    size_t i, bad = 0, first = 0;
    int64_t firstexp = 0;
    double firstgot = 0;
    int rr;

    for (i = 0; i < (size_t)o->count; i++) {
        int64_t e = val(o, 0, i);
        for (rr = 1; rr < a->size; rr++) {
            int64_t v = val(o, rr, i);
            if (o->isop_max)
                e = v > e ? v : e;
            else
                e += v;
        }
        if (!is(o, o->r, i, e) && bad++ == 0) {
            first = i;
            firstexp = e;
            firstgot = as_double(o, o->r, i);
        }
    }
    tu_check(bad == 0, o->what,
             "%zu of %d elements wrong; first at index %zu: expected %lld got %.17g", bad,
             o->count, first, (long long)firstexp, firstgot);
    tu_check(memcmp(o->r + o->nb, o->guard, GUARD) == 0, o->what,
             "bytes after the receive buffer changed");
    if (!o->inplace) {
        for (i = 0, bad = 0; i < (size_t)o->count; i++)
            bad += !is(o, o->s, i, val(o, a->rank, i));
        tu_check(bad == 0, o->what, "send buffer changed (%zu elements)", bad);
    }
    free(o->s);
    free(o->r);
    o->s = o->r = NULL;
}

static int op_start(op_t *o, const targ_t *a, int blocking)
{
    int rc;

    if (blocking) {
        rc = MPI_Allreduce(o->inplace ? MPI_IN_PLACE : o->s, o->r, o->count,
                           mpi_type(o->type), o->isop_max ? MPI_MAX : MPI_SUM, a->comm);
        return tu_check(rc == MPI_SUCCESS, o->what, "MPI_Allreduce returned %d (%s)", rc,
                        tu_errstr(rc));
    }
    rc = MPI_Iallreduce(o->inplace ? MPI_IN_PLACE : o->s, o->r, o->count, mpi_type(o->type),
                        o->isop_max ? MPI_MAX : MPI_SUM, a->comm, &o->req);
    return tu_check(rc == MPI_SUCCESS, o->what, "MPI_Iallreduce returned %d (%s)", rc,
                    tu_errstr(rc));
}

/* A random permutation of 0..n-1, drawn per rank. */
static void shuffle(int *perm, int n, int rank, uint64_t bseed)
{
    int i, j, t;

    for (i = 0; i < n; i++)
        perm[i] = i;
    for (i = n - 1; i > 0; i--) {
        j = (int)tu_gen_uint(rank + 1, (size_t)i, bseed, (uint64_t)i);
        t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static void run_batch(targ_t *a, long batch)
{
    uint64_t bseed = tu_seed(g_seed, (uint64_t)a->id, (uint64_t)batch);
    uint64_t h = tu_hash(0, 0, bseed);
    int mode = (int)(h % NMODES), n = 1, k, rc, flag, perm[MAX_OUT];
    op_t ops[MAX_OUT];
    MPI_Request reqs[MAX_OUT];
    double t0;

    if (mode == M_WAITALL || mode == M_WAITEACH)
        n = 2 + (int)((h >> 8) % (MAX_OUT - 1));
    atomic_store(&a->cur_batch, batch);
    atomic_store(&a->cur_mode, mode);
    for (k = 0; k < n; k++)
        op_prepare(&ops[k], a, bseed, k, batch, mode);

    switch (mode) {
    case M_BLOCKING:
        op_start(&ops[0], a, 1);
        break;
    case M_WAIT:
        if (op_start(&ops[0], a, 0)) {
            rc = MPI_Wait(&ops[0].req, MPI_STATUS_IGNORE);
            tu_check(rc == MPI_SUCCESS, ops[0].what, "MPI_Wait returned %d (%s)", rc,
                     tu_errstr(rc));
        }
        break;
    case M_TEST:
        if (op_start(&ops[0], a, 0)) {
            flag = 0;
            t0 = MPI_Wtime();
            while (!flag) {
                rc = MPI_Test(&ops[0].req, &flag, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS) {
                    tu_fail(ops[0].what, "MPI_Test returned %d (%s)", rc, tu_errstr(rc));
                    break;
                }
                tu_progress_guard(t0, ops[0].what);
            }
        }
        break;
    case M_WAITALL:
        for (k = 0; k < n; k++)
            op_start(&ops[k], a, 0);
        shuffle(perm, n, a->rank, bseed);
        for (k = 0; k < n; k++)
            reqs[k] = ops[perm[k]].req;
        rc = MPI_Waitall(n, reqs, tu_statuses_ignore());
        tu_check(rc == MPI_SUCCESS, ops[0].what, "MPI_Waitall returned %d (%s)", rc,
                 tu_errstr(rc));
        for (k = 0; k < n; k++) {
            tu_check(reqs[k] == MPI_REQUEST_NULL, ops[perm[k]].what,
                     "request not MPI_REQUEST_NULL after MPI_Waitall");
            ops[perm[k]].req = MPI_REQUEST_NULL;
        }
        break;
    default: /* M_WAITEACH */
        for (k = 0; k < n; k++)
            op_start(&ops[k], a, 0);
        shuffle(perm, n, a->rank, bseed);
        for (k = 0; k < n; k++) {
            op_t *o = &ops[perm[k]];
            rc = MPI_Wait(&o->req, MPI_STATUS_IGNORE);
            tu_check(rc == MPI_SUCCESS, o->what, "MPI_Wait returned %d (%s)", rc,
                     tu_errstr(rc));
        }
        break;
    }

    for (k = 0; k < n; k++) {
        if (mode != M_BLOCKING)
            tu_check(ops[k].req == MPI_REQUEST_NULL, ops[k].what,
                     "request not MPI_REQUEST_NULL after completion");
        a->bytes += (long long)ops[k].nb;
        op_verify(&ops[k], a);
        atomic_fetch_add(&a->completed, 1);
    }
    a->calls[mode] += n;
}

static void *thread_main(void *p)
{
    targ_t *a = p;
    long batch;
    int stop, rc;

    for (batch = 0;; batch++) {
        /* rank 0 decides; everybody stops after the same batch */
        stop = tu_world_rank() == 0 && MPI_Wtime() - g_t0 >= g_seconds;
        rc = MPI_Bcast(&stop, 1, MPI_INT, 0, a->comm);
        if (!tu_check(rc == MPI_SUCCESS, "MPI_Bcast (stop flag)", "returned %d (%s)", rc,
                      tu_errstr(rc)))
            MPI_Abort(MPI_COMM_WORLD, 99);
        if (stop)
            break;
        run_batch(a, batch);
    }
    a->batches = batch;
    return NULL;
}

/* ---- watchdog ----------------------------------------------------------- */

static targ_t g_args[NTHREADS];
static atomic_int g_done;

static void *watchdog_main(void *p)
{
    long last[NTHREADS], now;
    double limit = tu_progress_timeout(), since = MPI_Wtime();
    struct timespec ts = { 0, 100 * 1000 * 1000 };
    int i, moved;

    (void)p;
    for (i = 0; i < NTHREADS; i++)
        last[i] = -1;
    while (!atomic_load(&g_done)) {
        nanosleep(&ts, NULL);
        moved = 0;
        for (i = 0; i < NTHREADS; i++) {
            now = atomic_load(&g_args[i].completed);
            moved |= now != last[i];
            last[i] = now;
        }
        if (moved) {
            since = MPI_Wtime();
        } else if (MPI_Wtime() - since > limit && !atomic_load(&g_done)) {
            for (i = 0; i < NTHREADS; i++)
                tu_fail("watchdog", "no allreduce completed for %.0f s: thread %d in batch "
                        "%ld (%s), %ld allreduces completed", limit, i,
                        atomic_load(&g_args[i].cur_batch),
                        mode_name[atomic_load(&g_args[i].cur_mode)], last[i]);
            fflush(stdout);
            MPI_Abort(MPI_COMM_WORLD, 98);
        }
    }
    return NULL;
}

/* ---- main --------------------------------------------------------------- */

static size_t parse_bytes(const char *s)
{
    char *end;
    double v = strtod(s, &end);

    if (*end == 'K' || *end == 'k')
        v *= 1024, end++;
    else if (*end == 'M' || *end == 'm')
        v *= 1024 * 1024, end++;
    if (*end != '\0' || v < 0 || v > (double)INT_MAX)
        return (size_t)-1;
    return (size_t)v;
}

static void usage(void)
{
    printf("usage: test_stress [--seconds S] [--seed N] [--max-bytes B]\n"
           "%d threads per rank, each on its own communicator, run random blocking and\n"
           "nonblocking allreduces (0 to B bytes, default 256K; int/float/double/long long,\n"
           "SUM/MAX) for S seconds (default 8; rank 0 decides when to stop) and check\n"
           "every result.  --seed repeats a run (default: chosen by rank 0 and printed).\n"
           "Needs MPI_THREAD_MULTIPLE (else exit 77).\n", NTHREADS);
}

int main(int argc, char **argv)
{
    pthread_t th[NTHREADS], wd;
    int provided = -1, i, rc, m, bad_args = 0, help = 0;
    unsigned long long seed = 0;
    int have_seed = 0;
    long long totals[NMODES + 2], sums[NMODES + 2];

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    tu_init("test_stress");
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            help = 1;
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            g_seconds = atof(argv[++i]);
            bad_args |= !(g_seconds >= 0);
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
            have_seed = 1;
        } else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) {
            g_max_bytes = parse_bytes(argv[++i]);
            bad_args |= g_max_bytes == (size_t)-1;
        } else {
            bad_args = 1;
        }
    }
    if (help || bad_args) {
        if (tu_world_rank() == 0)
            usage();
        MPI_Finalize();
        return bad_args ? 2 : 0;
    }
    if (provided < MPI_THREAD_MULTIPLE)
        tu_skip("MPI_THREAD_MULTIPLE not provided (MPI_Init_thread provided level %d)",
                provided);

    /* one seed for all ranks: rank 0's */
    if (!have_seed)
        seed = (unsigned long long)time(NULL) ^ ((unsigned long long)clock() << 32);
    PMPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    g_seed = seed;
    if (tu_world_rank() == 0) {
        printf("test_stress: %d ranks x %d threads, %.0f s, up to %zu B per allreduce, "
               "seed %llu (--seed %llu repeats the sequence)\n", tu_world_size(), NTHREADS,
               g_seconds, g_max_bytes, seed, seed);
        fflush(stdout);
    }

    for (i = 0; i < NTHREADS; i++) {
        g_args[i].id = i;
        MPI_Comm_dup(MPI_COMM_WORLD, &g_args[i].comm);
        MPI_Comm_rank(g_args[i].comm, &g_args[i].rank);
        MPI_Comm_size(g_args[i].comm, &g_args[i].size);
        atomic_store(&g_args[i].completed, 0);
        atomic_store(&g_args[i].cur_batch, -1);
        atomic_store(&g_args[i].cur_mode, 0);
    }
    atomic_store(&g_done, 0);
    rc = pthread_create(&wd, NULL, watchdog_main, NULL);
    if (!tu_check(rc == 0, "pthread_create (watchdog)", "returned %d", rc))
        MPI_Abort(MPI_COMM_WORLD, 99);
    g_t0 = MPI_Wtime();
    for (i = 0; i < NTHREADS; i++) {
        rc = pthread_create(&th[i], NULL, thread_main, &g_args[i]);
        if (!tu_check(rc == 0, "pthread_create", "returned %d", rc)) {
            fprintf(stderr, "rank %d: cannot create thread %d\n", tu_world_rank(), i);
            MPI_Abort(MPI_COMM_WORLD, 99);
        }
    }
    for (i = 0; i < NTHREADS; i++)
        tu_check(pthread_join(th[i], NULL) == 0, "pthread_join", "thread %d", i);
    atomic_store(&g_done, 1);
    pthread_join(wd, NULL);

    /* what ran, summed over ranks and threads (rank 0 prints) */
    memset(totals, 0, sizeof totals);
    for (i = 0; i < NTHREADS; i++) {
        for (m = 0; m < NMODES; m++)
            totals[m] += g_args[i].calls[m];
        totals[NMODES] += g_args[i].bytes;
        totals[NMODES + 1] += g_args[i].batches;
        MPI_Comm_free(&g_args[i].comm);
    }
    PMPI_Reduce(totals, sums, NMODES + 2, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (tu_world_rank() == 0) {
        printf("test_stress: %lld batches, %.1f MiB reduced, in %.1f s; allreduces by kind, "
               "summed over ranks:", sums[NMODES + 1], (double)sums[NMODES] / 1048576.0,
               MPI_Wtime() - g_t0);
        for (m = 0; m < NMODES; m++)
            printf("%s %s %lld", m ? "," : "", mode_name[m], sums[m]);
        printf("\n");
        fflush(stdout);
    }

    rc = tu_finish();
    MPI_Finalize();
    return rc;
}
