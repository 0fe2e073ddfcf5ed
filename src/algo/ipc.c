/*
 * collar - the `ipc` allreduce: the ranks of one node reduce in device
 * memory they map from each other (CUDA IPC; shared memory on the sim
 * device), so that no byte crosses the host-device link.
 *
 * Each communicator keeps one IPC region: on every rank a device buffer of
 * two areas, `in` and `out`, of `cap` bytes each, which every other rank of
 * the node has mapped.  It is registered on the first ipc call and grown
 * when a larger message comes (every rank sees the same size, so all grow
 * in the same call); see ipc_register.  With n ranks, rank r and peer[i]
 * rank i's region as mapped here (peer[r] is the own one):
 *
 *   one-shot (bytes below oneshot=, default 256K):
 *
 *     C0  allreduce(1 int)     "the last call's buffers are free"
 *     in  copy send -> peer[r].in            (device copy)
 *     C1  allreduce(1 int)     "every input is in place"
 *     red copy peer[0].in -> recv, then recv op= peer[1].in ... peer[n-1].in
 *     AG  status agreement, once every step is done
 *
 *          rank 0            rank 1            rank 2
 *     in   a0 -> in0         a1 -> in1         a2 -> in2
 *          ---------------- C1 ------------------------
 *     red  ((in0+in1)+in2)   ((in0+in1)+in2)   ((in0+in1)+in2)
 *
 *   two-shot (bytes from oneshot= up): reduce-scatter then allgather
 *   through IPC memory; the message is cut into n slices of whole elements
 *   (collar_block_range: remainders to the low slices), rank r owns slice r:
 *
 *     C0, in, C1          as above
 *     rs  copy peer[0].in[r] -> peer[r].out[r], then
 *         peer[r].out[r] op= peer[1].in[r] ... peer[n-1].in[r]
 *     C2  allreduce(1 int)     "every slice is reduced"
 *     ag  copy peer[p].out[p] -> recv[p] for every p (spread over streams)
 *     AG  status agreement, once every step is done
 *
 *          rank 0            rank 1            rank 2
 *     in   a -> in0          b -> in1          c -> in2
 *          ---------------- C1 ------------------------
 *     rs   out0[0] =         out1[1] =         out2[2] =
 *          a0+b0+c0          a1+b1+c1          a2+b2+c2
 *          ---------------- C2 ------------------------
 *     ag   recv = out0[0] out1[1] out2[2] on every rank
 *
 * The reductions run in rank order 0 .. n-1 everywhere, so the result is
 * the same bits on every rank.  Cross-process order comes from MPI only
 * (the one-int allreduces on the private communicator, issued in order by
 * the schedule engine), never from a kernel waiting on a peer's flag.
 *
 * Reuse of the region: C0 of a call is issued after this rank issued
 * every collective of the calls before it (the communicator's turn), the
 * last of which, the status agreement, waits for every step of its
 * schedule, reads of peers' memory included.  So C0 completes only when
 * every rank has finished reading what the previous call left in the
 * region, and only then does the copy-in overwrite it.
 *
 * Buffers: only copies touch the send buffer and, in two-shot, the receive
 * buffer, so either may be host memory on a rank (a device call with a
 * mix of buffers).  One-shot reduces with kernels into the receive buffer
 * when it is device memory, else into the own `out` area and copies the
 * result out: the same signals on every rank whatever its mix.
 *
 * Failure: a step that fails drains as in every schedule, and the status
 * agreement makes every rank return an error.  A region that cannot be set
 * up (no IPC in the backend, a peer's memory that cannot be mapped, not one
 * node) is known to every rank through one allreduce at registration; the
 * call then runs `chunked` (collar_algo_ipc_eligible).
 */
#include "config.h"
#include "ipc_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* What a rank tells the others at registration. */
typedef struct {
    collar_ipc_handle_t handle;
    char                where[COLLAR_IPC_WHERE_BYTES];
    int                 code;     /* IPC_OK etc. */
} ipc_card_t;

const char *collar_ipc_fallback_why(collar_alg_t alg, int code)
{
    if (alg == COLLAR_ALG_HIER) {
        switch (code) {
        case IPC_NO_BACKEND:
            return "hier -> chunked: the device backend cannot share memory "
                   "between processes";
        case IPC_NO_MEMORY:
            return "hier -> chunked: a rank cannot allocate IPC memory";
        default:
            return "hier -> chunked: a rank cannot map the device memory of "
                   "a peer on its node";
        }
    }
    switch (code) {
    case IPC_NO_BACKEND:
        return "ipc -> chunked: the device backend cannot share memory "
               "between processes";
    case IPC_NO_MEMORY:
        return "ipc -> chunked: a rank cannot allocate IPC memory";
    default:
        return "ipc -> chunked: a rank cannot map the device memory of a peer";
    }
}

void collar_ipc_region_unref(ipc_region_t *g)
{
    if (g == NULL || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0) {
        return;
    }
    for (int i = 0; i < g->n; i++) {
        if (i != g->rank && g->peer[i] != NULL) {
            g->dev->ipc_close(g->peer[i]);
        }
    }
    if (g->own != NULL) {
        g->dev->ipc_free(g->own);
    }
    free(g->peer);
    free(g);
}

static void ipc_state_release(void *arg)
{
    ipc_state_t *st = arg;
    collar_ipc_region_unref(st->region);
    free(st);
}

/* Wait for a request of the registration, advancing collar's other
 * operations meanwhile (a peer may need them to reach this call). */
static int ipc_wait(MPI_Request *req, collar_check_progress_fn_t progress)
{
    for (;;) {
        int flag = 0;
        int rc = PMPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) {
            return rc;
        }
        if (progress == NULL || !progress()) {
            sched_yield();
        }
    }
}

/*
 * Set up a region of `cap` bytes an area, collectively over the node
 * (every rank of the communicator: the caller checked comm->one_node):
 * allocate, exchange handles (allgather), map every peer's, agree
 * (allreduce MPI_MIN of the codes), then let the backend drop the names
 * (ipc_published).  Returns the agreed code; *out the region when IPC_OK.
 */
static int ipc_register(collar_comm_t *comm, const collar_device_t *dev,
                        size_t cap, collar_check_progress_fn_t progress,
                        ipc_region_t **out)
{
    const int n = comm->node_size;
    int code = IPC_OK, agreed = IPC_NO_MAP;
    MPI_Request req;
    ipc_card_t mine;
    memset(&mine, 0, sizeof(mine));
    *out = NULL;

    ipc_region_t *g = calloc(1, sizeof(*g));
    ipc_card_t *cards = calloc((size_t)n, sizeof(*cards));
    if (g != NULL) {
        g->peer = calloc((size_t)n, sizeof(*g->peer));
    }
    if (g == NULL || cards == NULL || g->peer == NULL) {
        code = IPC_NO_MEMORY;   /* still takes part in the collectives */
    } else {
        g->refs = 1;
        g->dev = dev;
        g->n = n;
        g->rank = comm->node_rank;
        g->cap = cap;
    }
    if (code == IPC_OK && dev->ipc_alloc == NULL) {
        code = IPC_NO_BACKEND;
    }
    if (code == IPC_OK) {
        if (dev->ipc_alloc(2 * cap, (void **)&g->own, &mine.handle) != COLLAR_OK) {
            collar_info(MEM, "ipc: cannot allocate %zu bytes of IPC memory", 2 * cap);
            g->own = NULL;
            code = IPC_NO_MEMORY;
        } else {
            dev->ipc_where(g->own, mine.where, sizeof(mine.where));
            mine.where[sizeof(mine.where) - 1] = '\0';
        }
    }
    mine.code = code;

    ipc_card_t dummy;
    int rc = PMPI_Iallgather(&mine, (int)sizeof(mine), MPI_BYTE,
                             cards != NULL ? (void *)cards : (void *)&dummy,
                             cards != NULL ? (int)sizeof(mine) : 0, MPI_BYTE,
                             comm->node_comm, &req);
    if (rc == MPI_SUCCESS) {
        rc = ipc_wait(&req, progress);
    }
    if (rc != MPI_SUCCESS) {
        code = IPC_NO_MAP < code ? IPC_NO_MAP : code;
    }
    for (int i = 0; code == IPC_OK && i < n; i++) {
        if (i == g->rank) {
            g->peer[i] = g->own;
            continue;
        }
        cards[i].where[sizeof(cards[i].where) - 1] = '\0';
        if (cards[i].code != IPC_OK) {
            break;   /* that rank says why; the agreement takes its code */
        }
        if (!dev->ipc_reachable(cards[i].where)) {
            collar_info(MEM, "ipc: rank %d's device (%s) cannot be reached "
                        "from this one", i, cards[i].where);
            code = IPC_NO_MAP;
        } else if (dev->ipc_open(&cards[i].handle, (void **)&g->peer[i])
                   != COLLAR_OK) {
            collar_info(MEM, "ipc: cannot map the IPC memory of rank %d", i);
            g->peer[i] = NULL;
            code = IPC_NO_MAP;
        }
    }

    rc = PMPI_Iallreduce(&code, &agreed, 1, MPI_INT, MPI_MIN, comm->node_comm, &req);
    if (rc == MPI_SUCCESS) {
        rc = ipc_wait(&req, progress);
    }
    if (rc != MPI_SUCCESS) {
        agreed = IPC_NO_MAP < code ? IPC_NO_MAP : code;
        collar_error(COLL, "ipc: the registration's agreement failed (MPI "
                     "error %d)", rc);
    }
    /* Every peer has opened the own handle or given up on it. */
    if (g != NULL && g->own != NULL) {
        dev->ipc_published(g->own);
    }
    free(cards);
    if (agreed != IPC_OK) {
        if (g != NULL && g->peer == NULL) {
            free(g);
        } else {
            collar_ipc_region_unref(g);
        }
        return agreed;
    }
    collar_debug(COLL, "ipc: %d ranks share %zu bytes of IPC memory each",
                 n, 2 * cap);
    *out = g;
    return IPC_OK;
}

/* ipc_register, then (agree != NULL) the outcome made one over the whole
 * communicator.  *out keeps the region whatever the agreement says: the
 * caller drops it when the answer is not IPC_OK. */
static int ipc_register_agreed(collar_comm_t *comm, const collar_device_t *dev,
                               size_t cap, collar_check_progress_fn_t progress,
                               collar_agree_min_fn_t agree, collar_alg_t alg,
                               ipc_region_t **out)
{
    const int code = ipc_register(comm, dev, cap, progress, out);
    if (agree == NULL) {
        return code;
    }
    int all = IPC_NO_MAP;
    if (agree(comm, code, &all) != COLLAR_OK) {
        all = IPC_NO_MAP;
    }
    if (all != IPC_OK && code == IPC_OK) {
        collar_info(COLL, "%s: another node could not set up its IPC memory",
                    collar_alg_name(alg));
    }
    return all;
}

void collar_ipc_prepare(const collar_call_t *call, collar_comm_t *comm,
                        collar_check_progress_fn_t progress,
                        collar_agree_min_fn_t agree, collar_plan_t *plan)
{
    const collar_alg_t alg = plan->alg;
    ipc_state_t *st = comm->ipc;
    if (st == NULL) {
        st = calloc(1, sizeof(*st));
        if (st == NULL) {
            /* Nowhere to keep a region: still take part in the other
             * ranks' registration (and agreement), then give it up. */
            ipc_region_t *g = NULL;
            (void)ipc_register_agreed(comm, call->dev, IPC_MIN_CAP, progress,
                                      agree, alg, &g);
            collar_ipc_region_unref(g);
            plan->alg = COLLAR_ALG_CHUNKED;
            plan->fallback = collar_ipc_fallback_why(alg, IPC_NO_MEMORY);
            return;
        }
        comm->ipc = st;
        comm->ipc_release = ipc_state_release;
    }
    if (st->failed == 0
        && (st->region == NULL || st->region->cap < call->bytes)) {
        /* Every rank sees the same bytes and the same region: all
         * register in this call. */
        size_t cap = collar_pool_round(call->bytes);
        if (cap == 0) {
            cap = call->bytes;
        }
        if (cap < IPC_MIN_CAP) {
            cap = IPC_MIN_CAP;
        }
        ipc_region_t *g = NULL;
        const int code = ipc_register_agreed(comm, call->dev, cap, progress,
                                             agree, alg, &g);
        if (code == IPC_OK) {
            collar_ipc_region_unref(st->region);  /* schedules keep theirs */
            st->region = g;
        } else {
            collar_ipc_region_unref(g);
            st->failed = code + 1;
        }
    }
    if (st->failed != 0) {
        plan->alg = COLLAR_ALG_CHUNKED;
        plan->fallback = collar_ipc_fallback_why(alg, st->failed - 1);
    }
}

void collar_algo_ipc_eligible(const collar_call_t *call, collar_comm_t *comm,
                              collar_check_progress_fn_t progress,
                              collar_plan_t *plan)
{
    if (plan->alg != COLLAR_ALG_IPC) {
        return;
    }
    if (!comm->one_node || comm->node_comm == MPI_COMM_NULL) {
        /* Every rank knows (agreed when the state was made). */
        plan->alg = COLLAR_ALG_CHUNKED;
        plan->fallback = "ipc -> chunked: the communicator spans more than "
                         "one node";
        return;
    }
    collar_ipc_prepare(call, comm, progress, NULL, plan);
}

/* ---------------------------------------------------------------- schedule */

static void ipc_op_free(collar_sched_t *s)
{
    ipc_op_t *op = s->cleanup_arg;
    collar_ipc_region_unref(op->region);
    free(op);
}

static collar_status_t add_step(collar_sched_t *s, collar_step_t *t, int dep1,
                                int dep2, int *index)
{
    t->ndeps = 0;
    if (dep1 >= 0) {
        t->deps[t->ndeps++] = dep1;
    }
    if (dep2 >= 0) {
        t->deps[t->ndeps++] = dep2;
    }
    return collar_sched_add(s, t, index);
}

ipc_op_t *collar_ipc_op_attach(const collar_call_t *call, collar_sched_t *s)
{
    const ipc_state_t *st = s->comm->ipc;
    if (st == NULL || st->region == NULL || st->failed != 0
        || st->region->cap < call->bytes || call->type_size <= 0) {
        return NULL;
    }
    ipc_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return NULL;
    }
    op->region = st->region;
    __atomic_add_fetch(&op->region->refs, 1, __ATOMIC_RELAXED);
    s->cleanup = ipc_op_free;
    s->cleanup_arg = op;
    return op;
}

collar_status_t collar_ipc_add_copy(collar_sched_t *s, void *dst, const void *src,
                                    size_t bytes, int stream, int dep, int *index)
{
    collar_step_t t = { .kind = COLLAR_STEP_COPY };
    t.u.copy.dst = dst;
    t.u.copy.src = src;
    t.u.copy.bytes = bytes;
    t.u.copy.stream = stream;
    return add_step(s, &t, dep, -1, index);
}

/* A cross-process signal: a one-int allreduce. */
collar_status_t collar_ipc_add_signal(collar_sched_t *s, ipc_op_t *op, int k,
                                      int on, int dep, int *index)
{
    collar_step_t t = { .kind = COLLAR_STEP_IALLREDUCE };
    t.u.allreduce.on = on;
    t.u.allreduce.sbuf = &op->sig_in[k];
    t.u.allreduce.rbuf = &op->sig_out[k];
    t.u.allreduce.count = 1;
    t.u.allreduce.dt = MPI_INT;
    t.u.allreduce.op = MPI_MAX;
    return add_step(s, &t, dep, -1, index);
}

/* dst = src[0] op src[1] ... op src[n-1] (each at byte offset `off`), in
 * rank order, on one stream, after `dep`.  *last: the final step. */
collar_status_t collar_ipc_add_reduce_all(collar_sched_t *s,
                                          const collar_call_t *call,
                                          const ipc_region_t *g, size_t area,
                                          char *dst, size_t off, size_t count,
                                          int stream, int dep, int *last)
{
    const size_t bytes = count * (size_t)call->type_size;
    if (s->dev->reduce_n_async != NULL && g->n > 1) {
        /* One pass a group of inputs; a later group goes on from dst. */
        int i = 0;
        *last = dep;
        while (i < g->n) {
            collar_step_t t = { .kind = COLLAR_STEP_DEV_REDUCE_N };
            int k = 0;
            if (i > 0) {
                t.u.reduce_n.src[k++] = dst;
            }
            while (k < COLLAR_REDUCE_N_MAX && i < g->n) {
                t.u.reduce_n.src[k++] = g->peer[i++] + area + off;
            }
            t.u.reduce_n.dst = dst;
            t.u.reduce_n.n = k;
            t.u.reduce_n.count = count;
            t.u.reduce_n.dt = call->cdt;
            t.u.reduce_n.op = call->cop;
            t.u.reduce_n.stream = stream;
            COLLAR_CHECK(add_step(s, &t, *last, -1, last));
        }
        return COLLAR_OK;
    }
    COLLAR_CHECK(collar_ipc_add_copy(s, dst, g->peer[0] + area + off, bytes, stream, dep, last));
    for (int i = 1; i < g->n; i++) {
        collar_step_t t = { .kind = COLLAR_STEP_DEV_REDUCE };
        t.u.reduce.inout = dst;
        t.u.reduce.in = g->peer[i] + area + off;
        t.u.reduce.count = count;
        t.u.reduce.dt = call->cdt;
        t.u.reduce.op = call->cop;
        t.u.reduce.stream = stream;
        COLLAR_CHECK(add_step(s, &t, *last, -1, last));
    }
    return COLLAR_OK;
}

size_t collar_algo_ipc_oneshot(const collar_plan_t *plan)
{
    return plan->oneshot != 0 ? plan->oneshot : COLLAR_IPC_ONESHOT_DEFAULT;
}

collar_status_t collar_ipc_add_intake(collar_sched_t *s, ipc_op_t *op,
                                      const collar_call_t *call, int on,
                                      int stream, int *c1)
{
    const void *send = call->in_place ? call->rbuf : call->sbuf;
    int order, c0, copied;
    collar_step_t t = { .kind = COLLAR_STEP_ORDER };
    COLLAR_CHECK(collar_sched_add(s, &t, &order));
    COLLAR_CHECK(collar_ipc_add_signal(s, op, 0, on, order, &c0));
    COLLAR_CHECK(collar_ipc_add_copy(s, op->region->own, send, call->bytes, stream,
                                     c0, &copied));
    return collar_ipc_add_signal(s, op, 1, on, copied, c1);
}

collar_status_t collar_ipc_add_gather(collar_sched_t *s, const collar_call_t *call,
                                      const ipc_region_t *g, int nslices,
                                      int stream, int dep)
{
    const int nstreams = s->dev->nstreams();
    const size_t esize = (size_t)call->type_size;
    char *recv = call->rbuf;
    for (int p = 0; p < nslices; p++) {
        MPI_Count first, cnt;
        collar_block_range(call->count, nslices, p, &first, &cnt);
        if (cnt > 0) {
            const size_t off = (size_t)first * esize;
            int last;
            COLLAR_CHECK(collar_ipc_add_copy(s, recv + off, g->peer[p] + g->cap + off,
                                             (size_t)cnt * esize,
                                             (stream + p) % nstreams, dep, &last));
        }
    }
    return COLLAR_OK;
}

collar_status_t collar_algo_ipc_build(const collar_call_t *call,
                                      const collar_plan_t *plan,
                                      collar_sched_t *s)
{
    ipc_op_t *op = collar_ipc_op_attach(call, s);
    if (op == NULL) {
        /* collar_algo_ipc_eligible decides, alike on every rank. */
        return COLLAR_ERR_INVALID;
    }
    const ipc_region_t *g = op->region;
    const int stream = (int)(s->seq % (uint64_t)s->dev->nstreams());
    const size_t in = 0, out = g->cap;

    int c1, last;
    COLLAR_CHECK(collar_ipc_add_intake(s, op, call, COLLAR_STEP_ON_PRIVATE, stream,
                                       &c1));
    if (call->bytes < collar_algo_ipc_oneshot(plan) || g->n == 1) {
        /* A kernel writes the result: into the receive buffer when it is
         * device memory, else into the own `out` area (unused by one-shot,
         * no peer reads it before the next call's C0), copied out from
         * there. */
        const int host = call->rmem == COLLAR_MEM_HOST;
        char *dst = host ? g->own + out : call->rbuf;
        COLLAR_CHECK(collar_ipc_add_reduce_all(s, call, g, in, dst, 0,
                                               (size_t)call->count, stream, c1,
                                               &last));
        if (host) {
            COLLAR_CHECK(collar_ipc_add_copy(s, call->rbuf, dst, call->bytes,
                                             stream, last, &last));
        }
        return collar_sched_add_agree(s, 1);
    }

    /* Two-shot: this rank's slice of every input, reduced into its out. */
    MPI_Count first, cnt;
    collar_block_range(call->count, g->n, g->rank, &first, &cnt);
    int reduced = c1;
    if (cnt > 0) {
        const size_t off = (size_t)first * (size_t)call->type_size;
        COLLAR_CHECK(collar_ipc_add_reduce_all(s, call, g, in, g->own + out + off,
                                               off, (size_t)cnt, stream, c1,
                                               &reduced));
    }
    int c2;
    COLLAR_CHECK(collar_ipc_add_signal(s, op, 2, COLLAR_STEP_ON_PRIVATE, reduced, &c2));
    COLLAR_CHECK(collar_ipc_add_gather(s, call, g, g->n, stream, c2));
    return collar_sched_add_agree(s, 1);
}

int collar_algo_ipc_eligible_call(const collar_call_t *call)
{
    /* A device call (on every rank: a rank's own mix of buffers does not
     * count, see collar_algo_ipc_build), a reduction collar has, elements
     * without gaps. */
    return call->dev != NULL && call->mem != COLLAR_MEM_HOST && call->dense
           && call->cdt != COLLAR_DT_NONE && call->cop != COLLAR_OP_NONE
           && call->dev->reduce_supported(call->cdt, call->cop);
}
