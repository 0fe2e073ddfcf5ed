/*
 * collar - MPI_Iallreduce and request completion.
 *
 * collar returns MPI generalized requests from MPI_Iallreduce and progresses
 * them inside MPI_Wait* / MPI_Test*, so this program drives nonblocking
 * allreduces through every completion call, alone and mixed with the
 * application's own point-to-point requests:
 *
 *   a) 1..8 outstanding MPI_Iallreduce on one communicator (different types,
 *      ops, counts, some MPI_IN_PLACE), completed with MPI_Wait in forward,
 *      reverse and a rank-dependent shuffled order;
 *   b) MPI_Waitall over Iallreduce requests mixed with an MPI_Isend/MPI_Irecv
 *      ring exchange (statuses array and tu_statuses_ignore());
 *   c) MPI_Testany loops and MPI_Test loops;
 *   d) MPI_Waitsome loops;
 *   e) MPI_Waitany loops;
 *   f) MPI_Testall and MPI_Testsome loops;
 *   g) MPI_IN_PLACE and count 0;
 *   h) operations outstanding on MPI_COMM_WORLD, a duplicate of it and a
 *      split communicator at the same time, completed in rank-dependent order.
 *
 * Every result, every ring message (data, and MPI_SOURCE / MPI_TAG / count of
 * the receive status) and the send buffers are checked; every request must
 * be MPI_REQUEST_NULL after completion; index/outcount results of the
 * multi-completion calls must be valid and each request must complete
 * exactly once, with MPI_UNDEFINED once nothing is active.  Status fields of
 * collective requests are not checked (the standard leaves them undefined).
 * Inputs are small integers (also for double/float), so all results are
 * exact whatever the reduction order.
 *
 * With TU_DEVICE=cuda (testutil.h) the allreduces' buffers are device
 * memory, put there before the start and read back at completion; the
 * application's own point-to-point buffers stay host memory.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 32
#define MAXJ 16

enum tk { T_INT, T_DOUBLE, T_LL, T_FLOAT, T_USHORT, T_NT };
enum ok { O_SUM, O_MIN, O_MAX, O_PROD, O_BXOR, O_BOR, O_BAND };

static const struct {
    enum tk t;
    enum ok o;
} g_spec[] = {
    { T_INT, O_SUM },   { T_DOUBLE, O_SUM },  { T_LL, O_MAX },    { T_FLOAT, O_MIN },
    { T_USHORT, O_BXOR }, { T_INT, O_PROD },  { T_DOUBLE, O_MAX }, { T_LL, O_SUM },
    { T_INT, O_BOR },   { T_USHORT, O_BAND }, { T_DOUBLE, O_PROD }, { T_FLOAT, O_SUM },
};
#define NSPEC ((int)(sizeof g_spec / sizeof g_spec[0]))

static const size_t g_cnt[] = { 1, 1000, 7, 100000, 0, 33, 4096, 65537, 2, 250 };
#define NCNT ((int)(sizeof g_cnt / sizeof g_cnt[0]))

static const char *g_tname[T_NT] = { "MPI_INT", "MPI_DOUBLE", "MPI_LONG_LONG", "MPI_FLOAT",
                                     "MPI_UNSIGNED_SHORT" };
static const size_t g_tsize[T_NT] = { sizeof(int), sizeof(double), sizeof(long long),
                                      sizeof(float), sizeof(unsigned short) };
static const char *g_oname[] = { "MPI_SUM", "MPI_MIN", "MPI_MAX", "MPI_PROD",
                                 "MPI_BXOR", "MPI_BOR", "MPI_BAND" };

static MPI_Datatype tdt(enum tk t)
{
    switch (t) {
    case T_INT: return MPI_INT;
    case T_DOUBLE: return MPI_DOUBLE;
    case T_LL: return MPI_LONG_LONG;
    case T_FLOAT: return MPI_FLOAT;
    default: return MPI_UNSIGNED_SHORT;
    }
}

static MPI_Op odt(enum ok o)
{
    switch (o) {
    case O_SUM: return MPI_SUM;
    case O_MIN: return MPI_MIN;
    case O_MAX: return MPI_MAX;
    case O_PROD: return MPI_PROD;
    case O_BXOR: return MPI_BXOR;
    case O_BOR: return MPI_BOR;
    default: return MPI_BAND;
    }
}

/* ---- one nonblocking allreduce ---------------------------------------------- */

typedef struct {
    enum tk t;
    enum ok o;
    size_t count;
    int inplace;
    MPI_Comm comm;
    int rank, size;
    uint64_t seed;
    unsigned char *sbuf, *rbuf, *scopy, *gcopy;
    void *dsbuf, *drbuf; /* what MPI gets: sbuf, rbuf or their device mirrors */
    MPI_Request req;
    int started, completed;
    char what[200];
} job_t;

/* rank r's input element i: a small integer, exact in every type */
static int64_t jval(const job_t *j, int r, size_t i)
{
    switch (j->o) {
    case O_SUM:
        if (j->t == T_USHORT)
            return tu_gen_int(r, i, j->seed, 0, 1000);
        return tu_gen_int(r, i, j->seed, -100000, 100000);
    case O_PROD: /* factors other than +-1 on at most 8 ranks: |P| <= 2^8 */
        if (r < 8)
            return tu_gen_int(r, i, j->seed, -1, 2);
        return tu_gen_int(r, i, j->seed, 0, 1) ? 1 : -1;
    case O_MIN:
    case O_MAX:
        return tu_gen_int(r, i, j->seed, -1000000, 1000000);
    default: /* bitwise, unsigned short / int */
        return tu_gen_int(r, i, j->seed, 0, 65535);
    }
}

static int64_t jfold(enum ok o, int64_t a, int64_t b)
{
    switch (o) {
    case O_SUM: return a + b;
    case O_PROD: return a * b;
    case O_MIN: return a < b ? a : b;
    case O_MAX: return a > b ? a : b;
    case O_BXOR: return a ^ b;
    case O_BOR: return a | b;
    default: return a & b;
    }
}

static void jstore(enum tk t, void *p, int64_t v)
{
    int i = (int)v;
    double d = (double)v;
    long long l = v;
    float f = (float)v;
    unsigned short u = (unsigned short)v;

    switch (t) {
    case T_INT: memcpy(p, &i, sizeof i); break;
    case T_DOUBLE: memcpy(p, &d, sizeof d); break;
    case T_LL: memcpy(p, &l, sizeof l); break;
    case T_FLOAT: memcpy(p, &f, sizeof f); break;
    default: memcpy(p, &u, sizeof u); break;
    }
}

/* compare stored value with v exactly; returns 1 if equal, else writes got */
static int jequal(enum tk t, const void *p, int64_t v, char *got, size_t gn)
{
    int i;
    double d;
    long long l;
    float f;
    unsigned short u;

    switch (t) {
    case T_INT: memcpy(&i, p, sizeof i); snprintf(got, gn, "%d", i); return i == v;
    case T_DOUBLE: memcpy(&d, p, sizeof d); snprintf(got, gn, "%.17g", d); return d == (double)v;
    case T_LL: memcpy(&l, p, sizeof l); snprintf(got, gn, "%lld", l); return l == v;
    case T_FLOAT: memcpy(&f, p, sizeof f); snprintf(got, gn, "%.9g", (double)f); return f == (float)v;
    default: memcpy(&u, p, sizeof u); snprintf(got, gn, "%u", (unsigned)u); return u == v;
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 99);
    }
    return p;
}

static void job_init(job_t *j, const char *part, int spec, size_t count, int inplace,
                     MPI_Comm comm, const char *cname, uint64_t seed)
{
    size_t es, nb, i;

    memset(j, 0, sizeof *j);
    j->t = g_spec[spec % NSPEC].t;
    j->o = g_spec[spec % NSPEC].o;
    j->count = count;
    j->inplace = inplace;
    j->comm = comm;
    j->req = MPI_REQUEST_NULL;
    MPI_Comm_rank(comm, &j->rank);
    MPI_Comm_size(comm, &j->size);
    j->seed = tu_seed(seed, (uint64_t)spec, count * 2 + (size_t)inplace);
    snprintf(j->what, sizeof j->what, "%s: MPI_Iallreduce %s %s count=%zu %s comm=%s(size %d)",
             part, g_tname[j->t], g_oname[j->o], count, inplace ? "MPI_IN_PLACE" : "separate",
             cname, j->size);
    es = g_tsize[j->t];
    nb = count * es;
    j->sbuf = xmalloc(nb + GUARD);
    j->rbuf = xmalloc(nb + GUARD);
    j->scopy = xmalloc(nb + GUARD);
    j->gcopy = xmalloc(GUARD);
    tu_fill_garbage(j->sbuf, nb + GUARD, j->seed ^ 1);
    for (i = 0; i < count; i++)
        jstore(j->t, j->sbuf + i * es, jval(j, j->rank, i));
    if (inplace) {
        memcpy(j->rbuf, j->sbuf, nb);
        tu_fill_garbage(j->rbuf + nb, GUARD, j->seed ^ 2);
    } else {
        tu_fill_garbage(j->rbuf, nb + GUARD, j->seed ^ 3);
    }
    memcpy(j->scopy, j->sbuf, nb + GUARD);
    memcpy(j->gcopy, j->rbuf + nb, GUARD);
    j->dsbuf = tu_dev_mirror(j->sbuf, nb + GUARD);
    j->drbuf = tu_dev_mirror(j->rbuf, nb + GUARD);
}

static void job_start(job_t *j)
{
    int rc = MPI_Iallreduce(j->inplace ? MPI_IN_PLACE : j->dsbuf, j->drbuf, (int)j->count,
                            tdt(j->t), odt(j->o), j->comm, &j->req);

    j->started = tu_check(rc == MPI_SUCCESS, j->what, "MPI_Iallreduce returned %d (%s)", rc,
                          tu_errstr(rc));
    if (j->started)
        tu_check(j->req != MPI_REQUEST_NULL, j->what,
                 "MPI_Iallreduce returned MPI_REQUEST_NULL");
}

/* Called once the request completed: check it is null and the result. */
static void job_check(job_t *j, const char *how)
{
    size_t es = g_tsize[j->t], nb = j->count * es, i, bad = 0, first = 0;
    char d[160] = "", got[64], w[300];
    int r;

    snprintf(w, sizeof w, "%s [%s]", j->what, how);
    tu_dev_get(j->rbuf, j->drbuf, nb + GUARD);
    tu_dev_get(j->sbuf, j->dsbuf, nb + GUARD);
    tu_check(!j->completed, w, "request reported complete twice");
    j->completed = 1;
    tu_check(j->req == MPI_REQUEST_NULL, w, "request not MPI_REQUEST_NULL after completion");
    for (i = 0; i < j->count; i++) {
        int64_t e = jval(j, 0, i);
        for (r = 1; r < j->size; r++)
            e = jfold(j->o, e, jval(j, r, i));
        if (!jequal(j->t, j->rbuf + i * es, e, got, sizeof got) && bad++ == 0) {
            first = i;
            snprintf(d, sizeof d, "expected %lld got %s", (long long)e, got);
        }
    }
    tu_check(bad == 0, w, "%zu of %zu elements wrong; first at index %zu: %s", bad, j->count,
             first, d);
    if (!j->inplace)
        tu_check(memcmp(j->sbuf, j->scopy, nb + GUARD) == 0, w, "send buffer changed");
    tu_check(memcmp(j->rbuf + nb, j->gcopy, GUARD) == 0, w,
             "bytes after the receive buffer changed");
}

static void job_free(job_t *j)
{
    tu_check(j->completed || !j->started, j->what, "request never completed");
    tu_dev_unmirror(j->dsbuf, j->sbuf);
    tu_dev_unmirror(j->drbuf, j->rbuf);
    free(j->sbuf);
    free(j->rbuf);
    free(j->scopy);
    free(j->gcopy);
}

/* ---- point-to-point ring --------------------------------------------------------- */

typedef struct {
    MPI_Comm comm;
    int rank, size, left, right, tag, count;
    uint64_t seed;
    int *sbuf, *rbuf;
    MPI_Request rreq, sreq;
    int rdone, sdone;
    char what[120];
} ring_t;

static void ring_start(ring_t *g, const char *part, MPI_Comm comm, int count, int tag,
                       uint64_t seed)
{
    int i;

    memset(g, 0, sizeof *g);
    g->comm = comm;
    MPI_Comm_rank(comm, &g->rank);
    MPI_Comm_size(comm, &g->size);
    g->left = (g->rank + g->size - 1) % g->size;
    g->right = (g->rank + 1) % g->size;
    g->tag = tag;
    g->count = count;
    g->seed = seed;
    snprintf(g->what, sizeof g->what, "%s: ring Isend/Irecv count=%d tag=%d", part, count, tag);
    g->sbuf = xmalloc((size_t)count * sizeof(int));
    g->rbuf = xmalloc((size_t)count * sizeof(int) + GUARD);
    for (i = 0; i < count; i++)
        g->sbuf[i] = (int)tu_gen_int(g->rank, (size_t)i, seed, -1000000, 1000000);
    memset(g->rbuf, 0x5a, (size_t)count * sizeof(int) + GUARD);
    tu_check_rc(MPI_Irecv(g->rbuf, count, MPI_INT, g->left, tag, comm, &g->rreq), g->what);
    tu_check_rc(MPI_Isend(g->sbuf, count, MPI_INT, g->right, tag, comm, &g->sreq), g->what);
}

/* receive completed; st may be NULL when statuses were ignored */
static void ring_check_recv(ring_t *g, const MPI_Status *st, const char *how)
{
    char w[200];
    int i, bad = 0, first = -1, n = -1;

    snprintf(w, sizeof w, "%s [%s, receive]", g->what, how);
    tu_check(!g->rdone, w, "receive reported complete twice");
    g->rdone = 1;
    tu_check(g->rreq == MPI_REQUEST_NULL, w, "request not MPI_REQUEST_NULL after completion");
    for (i = 0; i < g->count; i++) {
        if (g->rbuf[i] != (int)tu_gen_int(g->left, (size_t)i, g->seed, -1000000, 1000000) &&
            bad++ == 0)
            first = i;
    }
    tu_check(bad == 0, w, "%d of %d ints wrong, first at %d", bad, g->count, first);
    if (st != NULL) {
        MPI_Get_count(st, MPI_INT, &n);
        tu_check(st->MPI_SOURCE == g->left && st->MPI_TAG == g->tag && n == g->count, w,
                 "status source %d tag %d count %d, expected %d %d %d", st->MPI_SOURCE,
                 st->MPI_TAG, n, g->left, g->tag, g->count);
    }
}

static void ring_check_send(ring_t *g, const char *how)
{
    char w[200];

    snprintf(w, sizeof w, "%s [%s, send]", g->what, how);
    tu_check(!g->sdone, w, "send reported complete twice");
    g->sdone = 1;
    tu_check(g->sreq == MPI_REQUEST_NULL, w, "request not MPI_REQUEST_NULL after completion");
}

static void ring_free(ring_t *g)
{
    tu_check(g->rdone && g->sdone, g->what, "ring requests never completed");
    free(g->sbuf);
    free(g->rbuf);
}

/* ---- request tables: which object does request slot k belong to ----------------- */

enum { S_NULL, S_JOB, S_RRECV, S_RSEND };

typedef struct {
    int n;
    MPI_Request req[3 * MAXJ + 4];
    int kind[3 * MAXJ + 4];
    job_t *job[3 * MAXJ + 4];
    ring_t *ring[3 * MAXJ + 4];
} rtab_t;

static void rt_add_job(rtab_t *t, job_t *j)
{
    t->req[t->n] = j->req;
    t->kind[t->n] = S_JOB;
    t->job[t->n] = j;
    t->ring[t->n++] = NULL;
}

static void rt_add_ring(rtab_t *t, ring_t *g)
{
    t->req[t->n] = g->rreq;
    t->kind[t->n] = S_RRECV;
    t->ring[t->n] = g;
    t->job[t->n++] = NULL;
    t->req[t->n] = g->sreq;
    t->kind[t->n] = S_RSEND;
    t->ring[t->n] = g;
    t->job[t->n++] = NULL;
}

static void rt_add_null(rtab_t *t)
{
    t->req[t->n] = MPI_REQUEST_NULL;
    t->kind[t->n] = S_NULL;
    t->job[t->n] = NULL;
    t->ring[t->n++] = NULL;
}

static int rt_active(const rtab_t *t)
{
    int k, a = 0;

    for (k = 0; k < t->n; k++)
        a += t->kind[k] != S_NULL;
    return a;
}

/* slot k completed (t->req[k] is what the MPI call left there) */
static void rt_complete(rtab_t *t, int k, const MPI_Status *st, const char *how)
{
    switch (t->kind[k]) {
    case S_JOB:
        t->job[k]->req = t->req[k];
        job_check(t->job[k], how);
        break;
    case S_RRECV:
        t->ring[k]->rreq = t->req[k];
        ring_check_recv(t->ring[k], st, how);
        break;
    case S_RSEND:
        t->ring[k]->sreq = t->req[k];
        ring_check_send(t->ring[k], how);
        break;
    default:
        tu_fail(how, "slot %d reported complete, but it held MPI_REQUEST_NULL", k);
        break;
    }
    t->kind[k] = S_NULL;
}

static int check_index(int idx, const rtab_t *t, const char *how)
{
    return tu_check(idx >= 0 && idx < t->n, how, "index %d out of range 0..%d", idx, t->n - 1);
}

/* ---- builders ---------------------------------------------------------------------- */

static int g_wrank, g_wsize;

/* Start nj jobs on comm with varied types/ops/counts, nj-dependent. */
static void start_jobs(job_t *jobs, int nj, const char *part, MPI_Comm comm, const char *cname,
                       uint64_t seed, int variant)
{
    int k;

    for (k = 0; k < nj; k++) {
        int spec = (k * 5 + variant) % NSPEC;
        size_t count = g_cnt[(k * 3 + variant) % NCNT];
        int inplace = (k + variant) % 3 == 0;
        job_init(&jobs[k], part, spec, count, inplace, comm, cname, tu_seed(seed, (uint64_t)k, 0));
    }
    for (k = 0; k < nj; k++)
        job_start(&jobs[k]);
}

static void shuffle(int *perm, int n, uint64_t seed)
{
    int i, j, t;

    for (i = 0; i < n; i++)
        perm[i] = i;
    for (i = n - 1; i > 0; i--) {
        j = (int)(tu_hash(0, (uint64_t)i, seed) % (uint64_t)(i + 1));
        t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* a) MPI_Wait in forward / reverse / shuffled order */
static void part_a(void)
{
    job_t jobs[MAXJ];
    int nj, order, k, perm[MAXJ], rc;
    static const char *oname[3] = { "forward", "reverse", "shuffled" };

    for (nj = 1; nj <= 8; nj++) {
        for (order = 0; order < 3; order++) {
            char part[64], how[64];

            snprintf(part, sizeof part, "a) %d outstanding, MPI_Wait %s", nj, oname[order]);
            start_jobs(jobs, nj, part, MPI_COMM_WORLD, "world",
                       tu_seed(0xa, (uint64_t)nj, (uint64_t)order), nj + order);
            if (order == 2) /* differs between ranks */
                shuffle(perm, nj, tu_seed(0x5f, (uint64_t)g_wrank, (uint64_t)nj));
            for (k = 0; k < nj; k++) {
                int idx = order == 0 ? k : order == 1 ? nj - 1 - k : perm[k];
                job_t *j = &jobs[idx];

                if (!j->started)
                    continue;
                rc = MPI_Wait(&j->req, MPI_STATUS_IGNORE);
                snprintf(how, sizeof how, "MPI_Wait #%d", k);
                tu_check(rc == MPI_SUCCESS, j->what, "MPI_Wait returned %d (%s)", rc,
                         tu_errstr(rc));
                job_check(j, how);
            }
            for (k = 0; k < nj; k++)
                job_free(&jobs[k]);
        }
    }
}

/* b) MPI_Waitall over Iallreduce + Isend/Irecv ring */
static void part_b(void)
{
    int variant;

    for (variant = 0; variant < 6; variant++) {
        job_t jobs[4];
        ring_t ring[2];
        rtab_t t;
        MPI_Status st[3 * MAXJ + 4];
        int nj = 1 + variant % 4, k, rc, ignore = variant % 2;
        char part[64];

        snprintf(part, sizeof part, "b) MPI_Waitall%s variant %d",
                 ignore ? "(tu_statuses_ignore())" : "", variant);
        t.n = 0;
        ring_start(&ring[0], part, MPI_COMM_WORLD, 1 + 100 * variant, 10 + variant,
                   tu_seed(0xb0, (uint64_t)variant, 0));
        rt_add_ring(&t, &ring[0]);
        start_jobs(jobs, nj, part, MPI_COMM_WORLD, "world", tu_seed(0xb, (uint64_t)variant, 0),
                   variant);
        for (k = 0; k < nj; k++) {
            rt_add_job(&t, &jobs[k]);
            if (k == 0) { /* interleave a second ring in the middle */
                ring_start(&ring[1], part, MPI_COMM_WORLD, 50000, 20 + variant,
                           tu_seed(0xb1, (uint64_t)variant, 0));
                rt_add_ring(&t, &ring[1]);
            }
        }
        rt_add_null(&t);
        rc = MPI_Waitall(t.n, t.req, ignore ? tu_statuses_ignore() : st);
        tu_check(rc == MPI_SUCCESS, part, "MPI_Waitall returned %d (%s)", rc, tu_errstr(rc));
        for (k = 0; k < t.n; k++)
            if (t.kind[k] != S_NULL)
                rt_complete(&t, k, ignore ? NULL : &st[k], part);
            else
                tu_check(t.req[k] == MPI_REQUEST_NULL, part, "null slot %d changed", k);
        for (k = 0; k < nj; k++)
            job_free(&jobs[k]);
        ring_free(&ring[0]);
        ring_free(&ring[1]);
    }
}

/* c) MPI_Testany loops, then MPI_Test loops */
static void part_c(void)
{
    int variant;

    for (variant = 0; variant < 6; variant++) {
        job_t jobs[MAXJ];
        ring_t ring;
        rtab_t t;
        int nj = 2 + variant, k, idx, flag, rc, left;
        MPI_Status st;
        double t0;
        char part[64];

        snprintf(part, sizeof part, "c) MPI_Testany loop variant %d", variant);
        t.n = 0;
        rt_add_null(&t);
        start_jobs(jobs, nj, part, MPI_COMM_WORLD, "world", tu_seed(0xc, (uint64_t)variant, 0),
                   variant + 1);
        for (k = 0; k < nj; k++)
            rt_add_job(&t, &jobs[k]);
        ring_start(&ring, part, MPI_COMM_WORLD, 3000, 30 + variant,
                   tu_seed(0xc0, (uint64_t)variant, 0));
        rt_add_ring(&t, &ring);
        left = rt_active(&t);
        t0 = MPI_Wtime();
        while (left > 0) {
            rc = MPI_Testany(t.n, t.req, &idx, &flag, &st);
            if (rc != MPI_SUCCESS) {
                tu_fail(part, "MPI_Testany returned %d (%s)", rc, tu_errstr(rc));
                break;
            }
            if (flag) {
                if (!tu_check(idx != MPI_UNDEFINED, part, "flag set with MPI_UNDEFINED while "
                              "%d requests are active", left) ||
                    !check_index(idx, &t, part))
                    break;
                rt_complete(&t, idx, &st, part);
                left--;
            }
            tu_progress_guard(t0, part);
        }
        /* nothing active: flag = true, index = MPI_UNDEFINED */
        rc = MPI_Testany(t.n, t.req, &idx, &flag, MPI_STATUS_IGNORE);
        tu_check(rc == MPI_SUCCESS && flag && idx == MPI_UNDEFINED, part,
                 "MPI_Testany with no active request: rc %d flag %d index %d", rc, flag, idx);
        for (k = 0; k < nj; k++)
            job_free(&jobs[k]);
        ring_free(&ring);
    }

    /* MPI_Test: round-robin over the requests until all completed */
    for (variant = 0; variant < 4; variant++) {
        job_t jobs[MAXJ];
        int nj = 1 + 2 * variant, k, flag, rc, left = nj;
        double t0 = MPI_Wtime();
        char part[64];
        MPI_Request nullreq = MPI_REQUEST_NULL;

        snprintf(part, sizeof part, "c) MPI_Test loop variant %d", variant);
        start_jobs(jobs, nj, part, MPI_COMM_WORLD, "world", tu_seed(0xc1, (uint64_t)variant, 0),
                   variant + 2);
        for (k = 0; k < nj; k++)
            if (!jobs[k].started)
                left--;
        while (left > 0) {
            /* ranks sweep in different directions */
            for (k = 0; k < nj; k++) {
                job_t *j = &jobs[g_wrank % 2 ? nj - 1 - k : k];
                if (!j->started || j->completed)
                    continue;
                flag = 0;
                rc = MPI_Test(&j->req, &flag, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS) {
                    tu_fail(j->what, "MPI_Test returned %d (%s)", rc, tu_errstr(rc));
                    flag = 1; /* do not spin on a broken request */
                    j->req = MPI_REQUEST_NULL;
                }
                if (flag) {
                    job_check(j, "MPI_Test loop");
                    left--;
                }
            }
            tu_progress_guard(t0, part);
        }
        /* MPI_Test on MPI_REQUEST_NULL: flag = true */
        flag = 0;
        rc = MPI_Test(&nullreq, &flag, MPI_STATUS_IGNORE);
        tu_check(rc == MPI_SUCCESS && flag, part, "MPI_Test(MPI_REQUEST_NULL): rc %d flag %d",
                 rc, flag);
        for (k = 0; k < nj; k++)
            job_free(&jobs[k]);
    }
}

/* d) MPI_Waitsome and f) MPI_Testsome loops share this */
static void some_loop(int test, int variant)
{
    job_t jobs[MAXJ];
    ring_t ring;
    rtab_t t;
    int nj = 3 + variant, k, rc, left, outcount, idx[3 * MAXJ + 4], seen[3 * MAXJ + 4];
    MPI_Status st[3 * MAXJ + 4];
    double t0;
    char part[64];

    snprintf(part, sizeof part, "%s) MPI_%s loop variant %d", test ? "f" : "d",
             test ? "Testsome" : "Waitsome", variant);
    t.n = 0;
    start_jobs(jobs, nj, part, MPI_COMM_WORLD, "world",
               tu_seed(test ? 0xf : 0xd, (uint64_t)variant, 0), variant + 3);
    for (k = 0; k < nj; k++) {
        rt_add_job(&t, &jobs[k]);
        if (k == nj / 2)
            rt_add_null(&t);
    }
    ring_start(&ring, part, MPI_COMM_WORLD, 777, 40 + variant,
               tu_seed(0xd0, (uint64_t)variant, (uint64_t)test));
    rt_add_ring(&t, &ring);
    left = rt_active(&t);
    t0 = MPI_Wtime();
    while (left > 0) {
        outcount = -2;
        if (test)
            rc = MPI_Testsome(t.n, t.req, &outcount, idx, st);
        else
            rc = MPI_Waitsome(t.n, t.req, &outcount, idx, st);
        if (rc != MPI_SUCCESS) {
            tu_fail(part, "returned %d (%s)", rc, tu_errstr(rc));
            break;
        }
        if (outcount == MPI_UNDEFINED || outcount < (test ? 0 : 1) || outcount > left) {
            tu_fail(part, "outcount %d with %d requests active", outcount, left);
            break;
        }
        memset(seen, 0, sizeof seen);
        for (k = 0; k < outcount; k++) {
            if (!check_index(idx[k], &t, part))
                break;
            tu_check(!seen[idx[k]], part, "index %d listed twice in one call", idx[k]);
            seen[idx[k]] = 1;
            rt_complete(&t, idx[k], &st[k], part);
        }
        left -= outcount;
        tu_progress_guard(t0, part);
    }
    outcount = -2;
    if (test)
        rc = MPI_Testsome(t.n, t.req, &outcount, idx, tu_statuses_ignore());
    else
        rc = MPI_Waitsome(t.n, t.req, &outcount, idx, tu_statuses_ignore());
    tu_check(rc == MPI_SUCCESS && outcount == MPI_UNDEFINED, part,
             "with no active request: rc %d outcount %d (expected MPI_UNDEFINED)", rc, outcount);
    for (k = 0; k < nj; k++)
        job_free(&jobs[k]);
    ring_free(&ring);
}

static void part_d(void)
{
    int v;

    for (v = 0; v < 6; v++)
        some_loop(0, v);
}

/* e) MPI_Waitany loop */
static void part_e(void)
{
    int variant;

    for (variant = 0; variant < 6; variant++) {
        job_t jobs[MAXJ];
        ring_t ring;
        rtab_t t;
        int nj = 1 + variant, k, idx, rc, left;
        MPI_Status st;
        char part[64];

        snprintf(part, sizeof part, "e) MPI_Waitany loop variant %d", variant);
        t.n = 0;
        ring_start(&ring, part, MPI_COMM_WORLD, 20000, 50 + variant,
                   tu_seed(0xe0, (uint64_t)variant, 0));
        rt_add_ring(&t, &ring);
        rt_add_null(&t);
        start_jobs(jobs, nj, part, MPI_COMM_WORLD, "world", tu_seed(0xe, (uint64_t)variant, 0),
                   variant + 4);
        for (k = 0; k < nj; k++)
            rt_add_job(&t, &jobs[k]);
        left = rt_active(&t);
        while (left > 0) {
            idx = -2;
            rc = MPI_Waitany(t.n, t.req, &idx, &st);
            if (!tu_check(rc == MPI_SUCCESS, part, "MPI_Waitany returned %d (%s)", rc,
                          tu_errstr(rc)) ||
                !tu_check(idx != MPI_UNDEFINED, part, "MPI_UNDEFINED while %d requests are "
                          "active", left) ||
                !check_index(idx, &t, part))
                break;
            rt_complete(&t, idx, &st, part);
            left--;
        }
        idx = -2;
        rc = MPI_Waitany(t.n, t.req, &idx, MPI_STATUS_IGNORE);
        tu_check(rc == MPI_SUCCESS && idx == MPI_UNDEFINED, part,
                 "MPI_Waitany with no active request: rc %d index %d", rc, idx);
        for (k = 0; k < nj; k++)
            job_free(&jobs[k]);
        ring_free(&ring);
    }
}

/* f) MPI_Testall loop, and MPI_Testsome loops */
static void part_f(void)
{
    int variant;

    for (variant = 0; variant < 5; variant++) {
        job_t jobs[MAXJ];
        ring_t ring;
        rtab_t t;
        MPI_Status st[3 * MAXJ + 4];
        int nj = 1 + variant, k, rc, flag = 0;
        double t0 = MPI_Wtime();
        char part[64];

        snprintf(part, sizeof part, "f) MPI_Testall loop variant %d", variant);
        t.n = 0;
        start_jobs(jobs, nj, part, MPI_COMM_WORLD, "world", tu_seed(0xf1, (uint64_t)variant, 0),
                   variant + 5);
        for (k = 0; k < nj; k++)
            rt_add_job(&t, &jobs[k]);
        ring_start(&ring, part, MPI_COMM_WORLD, 4000, 60 + variant,
                   tu_seed(0xf0, (uint64_t)variant, 0));
        rt_add_ring(&t, &ring);
        while (!flag) {
            rc = MPI_Testall(t.n, t.req, &flag, st);
            if (rc != MPI_SUCCESS) {
                tu_fail(part, "MPI_Testall returned %d (%s)", rc, tu_errstr(rc));
                break;
            }
            if (!flag) { /* nothing may have been freed yet */
                for (k = 0; k < t.n; k++)
                    if (t.req[k] == MPI_REQUEST_NULL)
                        break;
                if (k != t.n) {
                    tu_fail(part, "MPI_Testall returned flag 0 but slot %d is "
                            "MPI_REQUEST_NULL", k);
                    break;
                }
            }
            tu_progress_guard(t0, part);
        }
        if (flag)
            for (k = 0; k < t.n; k++)
                rt_complete(&t, k, &st[k], part);
        rc = MPI_Testall(t.n, t.req, &flag, tu_statuses_ignore());
        tu_check(rc == MPI_SUCCESS && flag, part, "MPI_Testall on completed requests: rc %d "
                 "flag %d", rc, flag);
        for (k = 0; k < nj; k++)
            job_free(&jobs[k]);
        ring_free(&ring);
    }
    for (variant = 0; variant < 5; variant++)
        some_loop(1, variant);
}

/* g) MPI_IN_PLACE and count 0 */
static void part_g(void)
{
    static const size_t counts[] = { 0, 0, 1, 5000, 0, 100000 };
    job_t jobs[12];
    int k, nj = 0, rc;
    MPI_Request reqs[12];

    for (k = 0; k < 6; k++) {
        job_init(&jobs[nj++], "g) in-place / count 0", k * 2, counts[k], 1, MPI_COMM_WORLD,
                 "world", tu_seed(0x9, (uint64_t)k, 1));
        job_init(&jobs[nj++], "g) in-place / count 0", k * 2 + 1, counts[k], k % 2,
                 MPI_COMM_WORLD, "world", tu_seed(0x9, (uint64_t)k, 2));
    }
    for (k = 0; k < nj; k++) {
        job_start(&jobs[k]);
        reqs[k] = jobs[k].req;
    }
    rc = MPI_Waitall(nj, reqs, tu_statuses_ignore());
    tu_check(rc == MPI_SUCCESS, "g) MPI_Waitall", "returned %d (%s)", rc, tu_errstr(rc));
    for (k = 0; k < nj; k++) {
        jobs[k].req = reqs[k];
        job_check(&jobs[k], "MPI_Waitall");
        job_free(&jobs[k]);
    }
    /* count 0 alone, with MPI_Wait and with MPI_Test */
    for (k = 0; k < 2; k++) {
        job_t j;
        int flag = 0;
        double t0 = MPI_Wtime();

        job_init(&j, k ? "g) count 0 MPI_Test" : "g) count 0 MPI_Wait", k, 0, k, MPI_COMM_WORLD,
                 "world", tu_seed(0x90, (uint64_t)k, 0));
        job_start(&j);
        if (k == 0) {
            rc = MPI_Wait(&j.req, MPI_STATUS_IGNORE);
            tu_check_rc(rc, j.what);
        } else {
            while (!flag) {
                rc = MPI_Test(&j.req, &flag, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS) {
                    tu_fail(j.what, "MPI_Test returned %d (%s)", rc, tu_errstr(rc));
                    break;
                }
                tu_progress_guard(t0, j.what);
            }
        }
        job_check(&j, k ? "MPI_Test" : "MPI_Wait");
        job_free(&j);
    }
}

/* h) several communicators at once */
static void part_h(void)
{
    MPI_Comm dup, split;
    int variant;

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, g_wrank % 2, g_wsize - g_wrank, &split);
    for (variant = 0; variant < 4; variant++) {
        job_t jobs[6];
        MPI_Comm cm[6] = { MPI_COMM_WORLD, dup, split, MPI_COMM_WORLD, dup, split };
        const char *cn[6] = { "world", "dup", "split", "world", "dup", "split" };
        int k, rc, perm[6];
        char part[64];

        snprintf(part, sizeof part, "h) world+dup+split variant %d", variant);
        for (k = 0; k < 6; k++)
            job_init(&jobs[k], part, k + variant, g_cnt[(k + 2 * variant) % NCNT],
                     (k + variant) % 4 == 0, cm[k], cn[k],
                     /* seeds must agree within each communicator */
                     tu_seed(0x4, (uint64_t)(variant * 8 + k),
                             (uint64_t)(cm[k] == split ? g_wrank % 2 : 0)));
        /* start order: the same everywhere per communicator */
        for (k = 0; k < 6; k++)
            job_start(&jobs[k]);
        if (variant < 3) {
            /* completion order differs between ranks */
            shuffle(perm, 6, tu_seed(0x44, (uint64_t)g_wrank, (uint64_t)variant));
            for (k = 0; k < 6; k++) {
                job_t *j = &jobs[perm[k]];
                if (!j->started)
                    continue;
                rc = MPI_Wait(&j->req, MPI_STATUS_IGNORE);
                tu_check_rc(rc, j->what);
                job_check(j, "MPI_Wait, rank-dependent order");
            }
        } else {
            MPI_Request reqs[6];
            for (k = 0; k < 6; k++)
                reqs[k] = jobs[k].req;
            rc = MPI_Waitall(6, reqs, tu_statuses_ignore());
            tu_check(rc == MPI_SUCCESS, part, "MPI_Waitall returned %d (%s)", rc,
                     tu_errstr(rc));
            for (k = 0; k < 6; k++) {
                jobs[k].req = reqs[k];
                job_check(&jobs[k], "MPI_Waitall");
            }
        }
        for (k = 0; k < 6; k++)
            job_free(&jobs[k]);
    }
    MPI_Comm_free(&dup);
    MPI_Comm_free(&split);
}

int main(int argc, char **argv)
{
    int rc, i;

    MPI_Init(&argc, &argv);
    tu_init("test_iallreduce");
    g_wrank = tu_world_rank();
    g_wsize = tu_world_size();
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            if (g_wrank == 0)
                printf("usage: test_iallreduce\n"
                       "Nonblocking allreduce with every MPI_Wait*/MPI_Test* completion call.\n"
                       "Prints one line '<program>: N passed, N failed'; exit 0 ok, 1 failed.\n");
            MPI_Finalize();
            return 0;
        }
    }

    part_a();
    part_b();
    part_c();
    part_d();
    part_e();
    part_f();
    part_g();
    part_h();

    rc = tu_finish();
    MPI_Finalize();
    return rc;
}
