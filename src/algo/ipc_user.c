/*
 * collar - ipc's zero-copy: the ranks of a node read each other's send and
 * receive buffers in place, through IPC mappings of the allocations that
 * hold them, instead of copying every input into the IPC region first.
 * This file owns the per-call exchange of what each rank exports, the
 * process's cache of peers' mappings, and the steps of such a call.
 *
 * A call (ipc, not persistent, more than one rank, COLLAR_IPC_ZEROCOPY on;
 * alike on every rank), rank r of n, S its send buffer (the receive buffer
 * in place), R its receive buffer:
 *
 *   X   allreduce (MPI_BOR of bytes) of every rank's card: the handle of
 *       the allocation of S (and R for two-shot), its address and id in
 *       the owner, the buffer's offset; "cannot" when a buffer cannot be
 *       exported (dev->ipc_export).  Issued in the schedule's turn after
 *       every collective of the calls before, it completes once every
 *       rank has finished the calls before (their status agreements wait
 *       for every read of a peer): it is C0 of the copy-in.
 *   op  map every peer's allocation (the cache: opened once per peer
 *       allocation, validated by its id), or "cannot"
 *   C1  signal 1, MPI_MAX of "cannot": 0 on every rank, or every rank
 *       copies in (below)
 *   one-shot:  R = S0 op S1 ... op Sn-1, read in place; in place (S = R,
 *       which peers are reading), into the region's `out` area, then
 *       C2 "every rank has read every input" and a copy into R.  C2 is
 *       issued on every rank when any rank's card says in place: MPI asks
 *       every rank to pass MPI_IN_PLACE alike, but collar takes a
 *       different mix of buffers on each rank (tests/mpi/test_mix.c), and
 *       the ranks must issue the same collectives
 *   two-shot:  R[r] = S0[r] op ... op Sn-1[r] (own slice straight into
 *       the receive buffer; in place R[r] is S[r], which only this rank
 *       reads: its own input first there, so that the output only ever
 *       aliases the first input), C2 "every slice is reduced" (every read
 *       of S is over), then R[p] copied from rank p's R[p], p != r
 *   AG  status agreement, once every step is done: when a call returns on
 *       any rank no peer reads its buffers any more, so the application
 *       may reuse or free them.
 *
 * Fallback, per call and agreed through C1: when a rank's buffer cannot be
 * exported (CUDA: managed, VMM or stream-ordered pool memory, host memory;
 * sim: COLLAR_SIM_FAIL=export:K) or a rank cannot map a peer's (a failed
 * open; sim: cross-memory attach denied), every rank copies its input into
 * the region (`in`), then C1' (signal 0, unused by zero-copy), then the
 * copy-in's steps: one collective more than a copy-in call.
 *
 * The cache (process-wide, every communicator): an entry per (owner PID,
 * allocation address, id), shared by the calls in flight that read it.
 * Where the backend lets a mapping outlive the call (ipc_export_keep: the
 * sim device) it stays open for the next calls, up to the limit below;
 * where it does not (CUDA, see below), the last call that uses it closes
 * it in a step before its status agreement, so that when a call returns on
 * its owner no peer has the allocation open any more and the owner may
 * free it.  A peer's card with the same address and
 * another id means that allocation was freed and another made there: the
 * old entry is stale and closed once no call uses it.  At most
 * COLLAR_IPC_MAPS entries: beyond, the least recently used one not in use
 * is closed.  Every entry is closed at MPI_Finalize.  CUDA leaves the
 * owner's cudaFree of an allocation still opened elsewhere undefined
 * ("Calling cudaFree on an exported memory region before calling
 * cudaIpcCloseMemHandle in the importing context will result in undefined
 * behavior", cudaIpcOpenMemHandle), and an application frees its buffers
 * when it likes: hence no mapping of a CUDA buffer outlives its call.
 */
#include "config.h"
#include "ipc_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One buffer as its owner exports it. */
typedef struct {
    collar_ipc_handle_t handle;
    uint64_t            base;   /* the allocation's address in the owner */
    uint64_t            id;
    uint64_t            off;    /* of the buffer in the allocation */
} ipc_buf_card_t;

/* What a rank tells its peers at a call (X). */
typedef struct {
    int32_t        cannot;   /* 1: a buffer cannot be exported */
    int32_t        pid;
    int32_t        in_place; /* (ranks may differ: a mix of buffers) */
    int32_t        pad;
    ipc_buf_card_t buf[2];   /* the send buffer, the receive buffer */
} ipc_zc_card_t;

/* A peer's allocation mapped here. */
typedef struct ipc_map {
    struct ipc_map        *next;
    const collar_device_t *dev;
    int32_t                pid;
    uint64_t               base, id;
    char                  *ptr;     /* the mapping */
    int                    users;   /* calls that read through it */
    int                    stale;   /* the owner has another allocation there */
    uint64_t               used;    /* when last taken, for eviction */
} ipc_map_t;

struct ipc_zc {
    ipc_zc_card_t *mine;    /* n cards, zero but this rank's (X's input) */
    ipc_zc_card_t *all;     /* X's output */
    ipc_map_t    **maps;    /* 2n: what this call holds (NULL: none) */
    const char   **send;    /* n: every rank's send buffer as seen here */
    const char   **recv;    /* n: every rank's receive buffer */
    int            nbufs;   /* buffers a rank exports: 1 one-shot, 2 two-shot */
    int            stream;
    int            before_close;   /* steps the close step waits for */
};

static pthread_mutex_t zc_lock = PTHREAD_MUTEX_INITIALIZER;
static ipc_map_t      *zc_maps;
static int             zc_nmaps;
static uint64_t        zc_clock;

static void zc_close(ipc_map_t *m)
{
    if (m->dev->ipc_close(m->ptr) != COLLAR_OK) {
        /* (A broken context: the driver closes it when this process ends;
         * until then the owner's free of that buffer is undefined.) */
        collar_warn(MEM, "ipc: cannot close the mapping of process %ld's "
                    "buffer: it stays open until this process ends",
                    (long)m->pid);
    }
    free(m);
}

/* Unlink every entry `drop` says goes (zc_lock held) onto *out. */
static void zc_unlink(int (*drop)(const ipc_map_t *m, const void *arg),
                      const void *arg, ipc_map_t **out)
{
    ipc_map_t **pp = &zc_maps;
    while (*pp != NULL) {
        ipc_map_t *m = *pp;
        if (drop(m, arg)) {
            *pp = m->next;
            m->next = *out;
            *out = m;
            zc_nmaps--;
        } else {
            pp = &m->next;
        }
    }
}

static int zc_drop_stale(const ipc_map_t *m, const void *arg)
{
    (void)arg;
    return m->stale && m->users == 0;
}

static int zc_drop_this(const ipc_map_t *m, const void *arg)
{
    return m == arg;
}

static int zc_drop_all(const ipc_map_t *m, const void *arg)
{
    (void)m;
    (void)arg;
    return 1;
}

static void zc_close_list(ipc_map_t *list)
{
    while (list != NULL) {
        ipc_map_t *m = list;
        list = m->next;
        zc_close(m);
    }
}

/* The mapping of peer buffer `c` (of process pid), taken for a call; NULL
 * when it cannot be opened.  Under zc_lock the cache only: the open itself
 * runs outside it. */
static ipc_map_t *zc_take(const collar_device_t *dev, int32_t pid,
                          const ipc_buf_card_t *c)
{
    ipc_map_t *closing = NULL;
    pthread_mutex_lock(&zc_lock);
    for (ipc_map_t *m = zc_maps; m != NULL; m = m->next) {
        if (m->dev != dev || m->pid != pid || m->base != c->base || m->stale) {
            continue;
        }
        if (m->id == c->id) {
            m->users++;
            m->used = ++zc_clock;
            pthread_mutex_unlock(&zc_lock);
            return m;
        }
        /* Freed there, and another allocation made at the same address. */
        m->stale = 1;
        collar_debug(MEM, "ipc: process %ld has a new allocation at %#llx: "
                     "its old mapping is closed", (long)pid,
                     (unsigned long long)c->base);
    }
    zc_unlink(zc_drop_stale, NULL, &closing);
    /* Room for one more: the least recently used entry nobody uses. */
    while (zc_nmaps >= collar_cfg.ipc_maps) {
        ipc_map_t *lru = NULL;
        for (ipc_map_t *m = zc_maps; m != NULL; m = m->next) {
            if (m->users == 0 && (lru == NULL || m->used < lru->used)) {
                lru = m;
            }
        }
        if (lru == NULL) {
            break;   /* every one in use: one more, until they are released */
        }
        collar_debug(MEM, "ipc: %d peers' buffers mapped: the least recently "
                     "used one is closed", zc_nmaps);
        zc_unlink(zc_drop_this, lru, &closing);
    }
    pthread_mutex_unlock(&zc_lock);
    zc_close_list(closing);

    ipc_map_t *m = calloc(1, sizeof(*m));
    void *ptr = NULL;
    if (m == NULL || dev->ipc_open(&c->handle, &ptr) != COLLAR_OK) {
        collar_debug(MEM, "ipc: cannot map the buffer of process %ld", (long)pid);
        free(m);
        return NULL;
    }
    m->dev = dev;
    m->pid = pid;
    m->base = c->base;
    m->id = c->id;
    m->ptr = ptr;
    m->users = 1;
    pthread_mutex_lock(&zc_lock);
    m->used = ++zc_clock;
    m->next = zc_maps;
    zc_maps = m;
    zc_nmaps++;
    pthread_mutex_unlock(&zc_lock);
    return m;
}

static void zc_release(ipc_map_t *m)
{
    ipc_map_t *closing = NULL;
    pthread_mutex_lock(&zc_lock);
    if (--m->users == 0 && !m->dev->ipc_export_keep) {
        m->stale = 1;   /* closed before the owner may free (CUDA) */
    }
    zc_unlink(zc_drop_stale, NULL, &closing);
    pthread_mutex_unlock(&zc_lock);
    zc_close_list(closing);
}

void collar_ipc_zc_finalize(void)
{
    ipc_map_t *closing = NULL;
    pthread_mutex_lock(&zc_lock);
    zc_unlink(zc_drop_all, NULL, &closing);
    pthread_mutex_unlock(&zc_lock);
    zc_close_list(closing);
}

/* Every mapping the call holds given back. */
static void zc_release_all(ipc_op_t *op)
{
    struct ipc_zc *zc = op->zc;
    for (int i = 0; zc->maps != NULL && i < 2 * op->region->n; i++) {
        if (zc->maps[i] != NULL) {
            zc_release(zc->maps[i]);
            zc->maps[i] = NULL;
        }
    }
}

/*
 * The bookkeeping of a call that could not allocate its own: its card
 * exchange must still be the one every rank issues (a rank that left it
 * out would leave the others waiting in it), so a reserve for one call at
 * a time, for nodes of up to ZC_RESERVE ranks, stands in, and this rank's
 * card says it cannot be read in place: every rank copies in for that
 * call, agreed by the exchange itself.  Where even the reserve is taken,
 * collar ends the job rather than issue other collectives than its peers.
 */
enum { ZC_RESERVE = 128 };
static struct {
    struct ipc_zc  zc;
    ipc_zc_card_t  mine[ZC_RESERVE], all[ZC_RESERVE];
    ipc_map_t     *maps[2 * ZC_RESERVE];
    const char    *send[ZC_RESERVE], *recv[ZC_RESERVE];
} zc_reserve;
static atomic_int zc_reserve_taken;

static struct ipc_zc *zc_from_reserve(int n)
{
    int free_ = 0;
    if (n > ZC_RESERVE || !atomic_compare_exchange_strong(&zc_reserve_taken, &free_, 1)) {
        collar_fail_stop(MPI_COMM_WORLD, MPI_ERR_NO_MEM, "ipc zero-copy's "
                         "bookkeeping of a call (no memory, and its reserve "
                         "is in use or too small)");
        return NULL;
    }
    memset(&zc_reserve, 0, sizeof(zc_reserve));
    struct ipc_zc *zc = &zc_reserve.zc;
    zc->mine = zc_reserve.mine;
    zc->all = zc_reserve.all;
    zc->maps = zc_reserve.maps;
    zc->send = zc_reserve.send;
    zc->recv = zc_reserve.recv;
    collar_warn(COLL, "ipc: no memory for zero-copy's bookkeeping of a call: "
                "its reserve stands in, and every rank copies in for it");
    return zc;
}

void collar_ipc_zc_free(ipc_op_t *op)
{
    struct ipc_zc *zc = op->zc;
    if (zc == NULL) {
        return;
    }
    zc_release_all(op);
    if (zc == &zc_reserve.zc) {
        op->zc = NULL;
        atomic_store(&zc_reserve_taken, 0);
        return;
    }
    free(zc->mine);
    free(zc->all);
    free(zc->maps);
    free(zc->send);
    free(zc->recv);
    free(zc);
    op->zc = NULL;
}

int collar_ipc_zc_wanted(const collar_comm_t *comm, const ipc_op_t *op)
{
    /* (Every rank has the same backend: the region's registration, which
     * succeeded, names it; and the same settings: agreed on comm.) */
    return comm->ipc_zerocopy && op->region->dev->ipc_export != NULL
           && op->plan.alg == COLLAR_ALG_IPC
           && !op->call.persistent && op->region->n > 1 && op->call.bytes > 0
           && op->call.bytes >= comm->ipc_zerocopy_min;
}

static const void *zc_send(const collar_call_t *call)
{
    return call->in_place ? call->rbuf : call->sbuf;
}

/* This rank's card: its buffers exported, or "cannot". */
static void zc_fill_card(const ipc_op_t *op, const collar_device_t *dev,
                         ipc_zc_card_t *c, int nbufs)
{
    const void *buf[2] = { zc_send(&op->call), op->call.rbuf };
    c->pid = (int32_t)getpid();
    c->in_place = op->call.in_place != 0;
    for (int b = 0; b < nbufs && !c->cannot; b++) {
        size_t off = 0;
        if (dev->ipc_export == NULL
            || dev->ipc_export(buf[b], op->call.bytes, &c->buf[b].handle,
                               &c->buf[b].base, &off, &c->buf[b].id) != COLLAR_OK) {
            collar_debug(COLL, "ipc: the %s buffer cannot be exported: the "
                         "call copies in", b == 0 ? "send" : "receive");
            c->cannot = 1;
        }
        c->buf[b].off = off;
    }
}

/* The CALL step after X: map every peer's buffers, or say "cannot" in
 * signal 1. */
static collar_status_t zc_open_step(collar_sched_t *s, void *arg)
{
    ipc_op_t *op = arg;
    struct ipc_zc *zc = op->zc;
    const ipc_region_t *g = op->region;
    int cannot = s->status != COLLAR_OK;
    for (int i = 0; i < g->n && !cannot; i++) {
        cannot = zc->all[i].cannot != 0;
    }
    for (int i = 0; i < g->n && !cannot; i++) {
        if (i == g->rank) {
            zc->send[i] = zc_send(&op->call);
            zc->recv[i] = op->call.rbuf;
            continue;
        }
        const ipc_zc_card_t *c = &zc->all[i];
        for (int b = 0; b < zc->nbufs && !cannot; b++) {
            ipc_map_t *m = zc_take(g->dev, c->pid, &c->buf[b]);
            zc->maps[2 * i + b] = m;
            if (m == NULL) {
                collar_info(MEM, "ipc: cannot map rank %d's buffer: the call "
                            "copies in", i);
                cannot = 1;
                break;
            }
            const char *p = m->ptr + c->buf[b].off;
            if (b == 0) {
                zc->send[i] = p;
            } else {
                zc->recv[i] = p;
            }
        }
    }
    op->sig_in[1] = cannot;
    return COLLAR_OK;
}

/* The CALL step that closes the call's mappings once every step before it
 * is done, before the status agreement (backends whose owners must not
 * free an allocation a peer still has open). */
static collar_status_t zc_close_step(collar_sched_t *s, void *arg)
{
    ipc_op_t *op = arg;
    if (!collar_sched_steps_done(s, 0, op->zc->before_close)) {
        return COLLAR_INPROGRESS;
    }
    zc_release_all(op);
    return COLLAR_OK;
}

/* The end of a zero-copy call: the close where the backend wants it, and
 * the status agreement after every step. */
static collar_status_t zc_finish(collar_sched_t *s, ipc_op_t *op)
{
    if (!op->region->dev->ipc_export_keep) {
        op->zc->before_close = s->nsteps;
        collar_step_t t = { .kind = COLLAR_STEP_CALL };
        t.u.call.fn = zc_close_step;
        t.u.call.arg = op;
        COLLAR_CHECK(collar_sched_add(s, &t, NULL));
    }
    return collar_sched_add_agree(s, 1);
}

/* Zero-copy's steps after C1 (at c1). */
static collar_status_t zc_steps(collar_sched_t *s, ipc_op_t *op, int c1)
{
    struct ipc_zc *zc = op->zc;
    const collar_call_t *call = &op->call;
    const ipc_region_t *g = op->region;
    const int stream = zc->stream;
    char *recv = call->rbuf;
    int last;
    collar_debug(COLL, "ipc: zero-copy, %d ranks' buffers read in place (%zu bytes)",
                 g->n, op->call.bytes);
    /* The same collectives as the copy-in's (zc_go), whichever a rank
     * takes: a rank whose C1 failed cannot know the others' choice, and
     * ranks that issued different collectives would hang.  One-shot: C2
     * for the copy-in's S0, then AG; two-shot: S0 (here a signal with no
     * meaning), C2, AG. */
    if (!collar_ipc_twoshot(op)) {
        /* C2: in place, the peers read this rank's receive buffer until
         * then (ranks may pass different mixes of buffers). */
        /* One-shot exports the send buffer only: a receive buffer in host
         * memory (a rank's own mix) is written by a copy, never a kernel. */
        const int host = call->rmem == COLLAR_MEM_HOST;
        if (!call->in_place && !host) {
            COLLAR_CHECK(collar_ipc_add_reduce_ptrs(s, call, zc->send, g->n, recv,
                                                    (size_t)call->count, stream,
                                                    c1, &last));
            COLLAR_CHECK(collar_ipc_add_signal(s, op, 2, COLLAR_STEP_ON_PRIVATE,
                                               last, &last));
            return zc_finish(s, op);
        }
        /* Into the own `out` area (no peer reads it); in place, peers read
         * the receive buffer until C2. */
        char *tmp = g->own + g->cap;
        COLLAR_CHECK(collar_ipc_add_reduce_ptrs(s, call, zc->send, g->n, tmp,
                                                (size_t)call->count, stream, c1,
                                                &last));
        COLLAR_CHECK(collar_ipc_add_signal(s, op, 2, COLLAR_STEP_ON_PRIVATE,
                                           last, &last));
        COLLAR_CHECK(collar_ipc_add_copy(s, recv, tmp, call->bytes, stream, last,
                                         &last));
        return zc_finish(s, op);
    }
    int s0;
    COLLAR_CHECK(collar_ipc_add_signal(s, op, 0, COLLAR_STEP_ON_PRIVATE, c1, &s0));
    MPI_Count first, cnt;
    collar_block_range(call->count, g->n, g->rank, &first, &cnt);
    int reduced = c1;
    if (cnt > 0) {
        const size_t off = (size_t)first * (size_t)call->type_size;
        const char *src[g->n];
        int k = 0;
        if (call->in_place) {
            /* The output is this rank's input there: first. */
            src[k++] = zc->send[g->rank] + off;
        }
        for (int i = 0; i < g->n; i++) {
            if (!call->in_place || i != g->rank) {
                src[k++] = zc->send[i] + off;
            }
        }
        COLLAR_CHECK(collar_ipc_add_reduce_ptrs(s, call, src, g->n, recv + off,
                                                (size_t)cnt, stream, c1, &reduced));
    }
    int c2;
    COLLAR_CHECK(collar_ipc_add_signal(s, op, 2, COLLAR_STEP_ON_PRIVATE, reduced, &c2));
    COLLAR_CHECK(collar_ipc_add_gather_from(s, call, zc->recv, g->n, g->rank,
                                            stream, c2));
    return zc_finish(s, op);
}

/* The continuation after C1: zero-copy when no rank said "cannot", else
 * the copy-in on every rank. */
static collar_status_t zc_go(collar_sched_t *s, void *arg)
{
    ipc_op_t *op = arg;
    const int stream = op->zc->stream;
    char how[160];
    /* (A rank whose C1 failed takes the copy-in: the same collectives.) */
    if (s->status == COLLAR_OK && op->sig_out[1] == 0) {
        collar_ipc_describe(op, 1, how, sizeof(how));
        collar_ipc_log(s, op, &op->plan, how);
        return zc_steps(s, op, -1);
    }
    if (s->status == COLLAR_OK) {
        static const char why[] = "ipc zero-copy -> copy-in: a rank's buffer "
                                  "cannot be read in place by its peers";
        collar_stats_fallback(why);
        char both[512];
        collar_plan_t p = op->plan;
        if (p.fallback != NULL) {
            snprintf(both, sizeof(both), "%s; fallback %s", p.fallback, why);
            p.fallback = both;
        } else {
            p.fallback = why;
        }
        collar_ipc_describe(op, 0, how, sizeof(how));
        collar_ipc_log(s, op, &p, how);
    }
    int copied, c1;
    COLLAR_CHECK(collar_ipc_add_copy(s, op->region->own, zc_send(&op->call),
                                     op->call.bytes, stream, -1, &copied));
    /* Signal 0 (C0's, which zero-copy's X stands for): "every input is in
     * place". */
    COLLAR_CHECK(collar_ipc_add_signal(s, op, 0, COLLAR_STEP_ON_PRIVATE, copied,
                                       &c1));
    COLLAR_CHECK(collar_ipc_add_after_intake(s, op, stream, c1));
    return zc_finish(s, op);   /* (what one rank mapped, closed) */
}

collar_status_t collar_ipc_zc_add(collar_sched_t *s, ipc_op_t *op, int stream)
{
    const int n = op->region->n;
    struct ipc_zc *zc = collar_fault(COLLAR_FAULT_ZEROCOPY) ? NULL
                        : calloc(1, sizeof(*zc));
    if (zc != NULL) {
        zc->mine = calloc((size_t)n, sizeof(*zc->mine));
        zc->all = calloc((size_t)n, sizeof(*zc->all));
        zc->maps = calloc((size_t)(2 * n), sizeof(*zc->maps));
        zc->send = calloc((size_t)n, sizeof(*zc->send));
        zc->recv = calloc((size_t)n, sizeof(*zc->recv));
        if (zc->mine == NULL || zc->all == NULL || zc->maps == NULL
            || zc->send == NULL || zc->recv == NULL) {
            op->zc = zc;
            collar_ipc_zc_free(op);
            zc = NULL;
        }
    }
    const int reserve = zc == NULL;
    if (reserve && (zc = zc_from_reserve(n)) == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    op->zc = zc;
    zc->stream = stream;
    /* Two-shot peers read the receive buffer too (the finished slices). */
    zc->nbufs = collar_ipc_twoshot(op) ? 2 : 1;
    zc->mine[op->region->rank].cannot = reserve;
    zc_fill_card(op, s->dev, &zc->mine[op->region->rank], zc->nbufs);

    int order, x, opened, c1;
    collar_step_t t = { .kind = COLLAR_STEP_ORDER };
    COLLAR_CHECK(collar_sched_add(s, &t, &order));
    collar_step_t xs = { .kind = COLLAR_STEP_IALLREDUCE, .ndeps = 1,
                         .deps = { order } };
    xs.u.allreduce.on = COLLAR_STEP_ON_PRIVATE;
    xs.u.allreduce.sbuf = zc->mine;
    xs.u.allreduce.rbuf = zc->all;
    xs.u.allreduce.count = (int)((size_t)n * sizeof(ipc_zc_card_t));
    xs.u.allreduce.dt = MPI_BYTE;
    xs.u.allreduce.op = MPI_BOR;
    COLLAR_CHECK(collar_sched_add(s, &xs, &x));
    collar_step_t open = { .kind = COLLAR_STEP_CALL, .ndeps = 1, .deps = { x } };
    open.u.call.fn = zc_open_step;
    open.u.call.arg = op;
    COLLAR_CHECK(collar_sched_add(s, &open, &opened));
    COLLAR_CHECK(collar_ipc_add_signal(s, op, 1, COLLAR_STEP_ON_PRIVATE, opened, &c1));
    collar_step_t go = { .kind = COLLAR_STEP_CALL, .ndeps = 1, .deps = { c1 } };
    go.u.call.fn = zc_go;
    go.u.call.arg = op;
    go.u.call.extends = 1;
    return collar_sched_add(s, &go, NULL);
}
