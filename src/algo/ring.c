/*
 * collar - the `ring` allreduce: reduce-scatter then allgather around the
 * ring of ranks, each block cut into segments, reductions on the device.
 *
 * The message (count elements) is cut into N blocks, one per rank; the
 * first count % N blocks get one element more (remainders go to the low
 * blocks).  Each block is cut into segments of `chunk` bytes (whole
 * elements).  Rank r sends to r+1 and receives from r-1.  With N = 4 and
 * blocks a b c d, after the copy of the send buffer into the receive
 * buffer ("acc"):
 *
 *   reduce-scatter, step k = 0 .. N-2: send block (r - k), receive block
 *   (r - k - 1) and reduce it into acc
 *
 *          rank 0      rank 1      rank 2      rank 3
 *   k=0    a ->        b ->        c ->        d ->      (to the right)
 *          +d          +a          +b          +c
 *   k=1    d ->        a ->        b ->        c ->
 *          +c          +d          +a          +b
 *   k=2    c ->        d ->        a ->        b ->
 *          +b          +c          +d          +a
 *          b done      c done      d done      a done
 *
 *   allgather, step k = 0 .. N-2: send block (r + 1 - k), which is final,
 *   receive block (r - k) into acc.
 *
 * Per segment, the primitives are:
 *   send          : [copy acc -> host slot] -> Isend
 *   recv-reduce   : Irecv host slot -> [copy -> device scratch] -> reduce
 *                   scratch into acc (a device kernel; the sim device's
 *                   worker thread)
 *   recv-copy     : Irecv host slot -> [copy -> acc]
 * The copies in brackets are the staging through pinned memory over an MPI
 * library that does not take device pointers; over one that does, device
 * buffers go to PMPI directly.  Segments pipeline: the transfer of segment
 * j+1 overlaps the reduction of segment j.
 *
 * Every access to a slot (a segment of acc, of the host send or receive
 * staging, of the device scratch) depends on the previous access to that
 * slot, so a slot is never reused while a copy or message still reads it.
 * Staging is one message-sized buffer each for sends, receives and the
 * scratch.  Messages carry tags unique within the operation, in a window
 * of the tag space chosen by the operation's sequence number
 * (collar_ring_tags), so concurrent operations on one communicator never
 * match each other's messages (while fewer than the number of windows are
 * in flight on it), and no tag exceeds MPI_TAG_UB.
 *
 * Element counts and offsets are 64-bit; a segment has at most
 * COLLAR_PIECE_MAX elements (PMPI takes int counts).
 *
 * On host buffers (the call's memory is host memory: a host call under
 * COLLAR_ALGORITHM=ring) nothing touches the device: the scratch is host
 * memory from the staging pool and the reductions are host loops, as the
 * MPI library may not be handed device memory and a device kernel may not
 * read pageable memory.
 *
 * A device call whose receive buffer is host memory on this rank (its send
 * buffer is device memory; other ranks may have other mixes) runs the same
 * messages: acc is then device scratch, and each segment of acc is copied
 * to the receive buffer once it is final.  A host send buffer needs
 * nothing: it is only ever copied into acc.  Whether the ring runs at all
 * depends on what every rank agrees on (the call's memory kind, type, op,
 * count), never on one rank's buffers.
 */
#include "config.h"
#include "algo.h"

#include <stdlib.h>

typedef struct {
    collar_sched_t *s;
    const collar_call_t *call;
    int             aware;      /* PMPI takes acc and the scratch */
    int             host;       /* host buffers: host scratch and loops */
    int             n, r, right, left;
    MPI_Count       per;        /* elements per segment */
    MPI_Count      *bcount;     /* elements per block */
    MPI_Count      *boff;       /* first element of each block */
    int             nseg_max;
    size_t          esize;
    char           *acc, *hs, *hr, *ds;
    /* last step touching each (block, segment) slot, -1: none */
    int            *last_acc, *last_hs, *last_hr, *last_ds;
    int             tag_base;
    int             in_stream, out_stream;
} ring_t;

static MPI_Count nseg(const ring_t *g, int b)
{
    return g->bcount[b] == 0 ? 0 : (g->bcount[b] - 1) / g->per + 1;
}

static int slot(const ring_t *g, int b, int j)
{
    return b * g->nseg_max + j;
}

/* Element range of segment j of block b. */
static void seg_range(const ring_t *g, int b, int j, MPI_Count *first, int *cnt)
{
    *first = g->boff[b] + (MPI_Count)j * g->per;
    const MPI_Count left = g->bcount[b] - (MPI_Count)j * g->per;
    *cnt = (int)(left < g->per ? left : g->per);  /* per <= COLLAR_PIECE_MAX */
}

static collar_status_t add(ring_t *g, collar_step_t *t, int dep1, int dep2,
                           int dep3, int *index)
{
    const int deps[3] = { dep1, dep2, dep3 };
    t->ndeps = 0;
    for (int i = 0; i < 3; i++) {
        if (deps[i] >= 0) {
            t->deps[t->ndeps++] = deps[i];
        }
    }
    return collar_sched_add(g->s, t, index);
}

static collar_status_t add_copy(ring_t *g, void *dst, const void *src,
                                size_t bytes, int stream, int dep1, int dep2,
                                int dep3, int *index)
{
    collar_step_t t = { .kind = COLLAR_STEP_COPY };
    t.u.copy.dst = dst;
    t.u.copy.src = src;
    t.u.copy.bytes = bytes;
    t.u.copy.stream = stream;
    return add(g, &t, dep1, dep2, dep3, index);
}

static collar_status_t add_p2p(ring_t *g, collar_step_kind_t kind, void *buf,
                               int count, int peer, int tag, int dep1, int dep2,
                               int *index)
{
    collar_step_t t = { .kind = kind };
    t.u.p2p.buf = buf;
    t.u.p2p.count = count;
    t.u.p2p.dt = g->call->dtype;
    t.u.p2p.peer = peer;
    t.u.p2p.tag = tag;
    return add(g, &t, dep1, dep2, -1, index);
}

static int ring_tag(const ring_t *g, int phase, int k, int j)
{
    return g->tag_base + (phase * (g->n - 1) + k) * g->nseg_max + j;
}

/* Send segment j of block b of acc to the right. */
static collar_status_t send_seg(ring_t *g, int phase, int k, int b, int j)
{
    MPI_Count first;
    int cnt, t;
    seg_range(g, b, j, &first, &cnt);
    const size_t off = (size_t)first * g->esize, len = (size_t)cnt * g->esize;
    const int sl = slot(g, b, j);
    const int tag = ring_tag(g, phase, k, j);
    if (g->aware) {
        COLLAR_CHECK(add_p2p(g, COLLAR_STEP_ISEND, g->acc + off, cnt, g->right,
                             tag, g->last_acc[sl], -1, &t));
        g->last_acc[sl] = t;
        return COLLAR_OK;
    }
    int c;
    COLLAR_CHECK(add_copy(g, g->hs + off, g->acc + off, len, g->out_stream,
                          g->last_acc[sl], g->last_hs[sl], -1, &c));
    g->last_acc[sl] = c;
    COLLAR_CHECK(add_p2p(g, COLLAR_STEP_ISEND, g->hs + off, cnt, g->right, tag,
                         c, -1, &t));
    g->last_hs[sl] = t;
    return COLLAR_OK;
}

/* Receive segment j of block b from the left; reduce it into acc or, in
 * the allgather, store it there. */
static collar_status_t recv_seg(ring_t *g, int phase, int k, int b, int j)
{
    MPI_Count first;
    int cnt, t;
    seg_range(g, b, j, &first, &cnt);
    const size_t off = (size_t)first * g->esize, len = (size_t)cnt * g->esize;
    const int sl = slot(g, b, j);
    const int tag = ring_tag(g, phase, k, j);
    const int reduce = phase == 0;

    if (g->aware && !reduce) {
        COLLAR_CHECK(add_p2p(g, COLLAR_STEP_IRECV, g->acc + off, cnt, g->left,
                             tag, g->last_acc[sl], -1, &t));
        g->last_acc[sl] = t;
        return COLLAR_OK;
    }
    int landed;   /* the step after which the data is in device memory */
    char *dev_in = reduce ? g->ds + off : g->acc + off;
    if (g->aware) {
        COLLAR_CHECK(add_p2p(g, COLLAR_STEP_IRECV, dev_in, cnt, g->left, tag,
                             g->last_ds[sl], -1, &landed));
        g->last_ds[sl] = landed;
    } else {
        int rv;
        COLLAR_CHECK(add_p2p(g, COLLAR_STEP_IRECV, g->hr + off, cnt, g->left, tag,
                             g->last_hr[sl], -1, &rv));
        int *last_dst = reduce ? &g->last_ds[sl] : &g->last_acc[sl];
        COLLAR_CHECK(add_copy(g, dev_in, g->hr + off, len, g->in_stream, rv,
                              *last_dst, -1, &landed));
        g->last_hr[sl] = landed;
        *last_dst = landed;
    }
    if (reduce) {
        collar_step_t red = { .kind = g->host ? COLLAR_STEP_HOST_REDUCE
                                              : COLLAR_STEP_DEV_REDUCE };
        red.u.reduce.inout = g->acc + off;
        red.u.reduce.in = g->ds + off;
        red.u.reduce.count = (size_t)cnt;
        red.u.reduce.dt = g->call->cdt;
        red.u.reduce.op = g->call->cop;
        red.u.reduce.stream = g->in_stream;
        COLLAR_CHECK(add(g, &red, landed, g->last_acc[sl], -1, &t));
        g->last_acc[sl] = t;
        g->last_ds[sl] = t;
    }
    return COLLAR_OK;
}

static collar_status_t ring_build(ring_t *g)
{
    const collar_call_t *call = g->call;
    collar_sched_t *s = g->s;
    const size_t bytes = call->bytes;

    int order;
    collar_step_t t = { .kind = COLLAR_STEP_ORDER };
    COLLAR_CHECK(collar_sched_add(s, &t, &order));
    int init = order;
    if (g->acc != call->rbuf || !call->in_place) {
        /* acc is the receive buffer, or device scratch standing in for a
         * host one (then even in place the data starts in rbuf). */
        const void *src = call->in_place ? call->rbuf : call->sbuf;
        COLLAR_CHECK(add_copy(g, g->acc, src, bytes, g->in_stream, order,
                              -1, -1, &init));
    }
    const int nslots = g->n * g->nseg_max;
    for (int i = 0; i < nslots; i++) {
        g->last_acc[i] = init;
        g->last_hs[i] = g->last_hr[i] = g->last_ds[i] = -1;
    }
    for (int phase = 0; phase < 2; phase++) {
        for (int k = 0; k < g->n - 1; k++) {
            const int sb = phase == 0 ? (g->r - k + g->n) % g->n
                                      : (g->r + 1 - k + g->n) % g->n;
            const int rb = phase == 0 ? (g->r - k - 1 + g->n) % g->n
                                      : (g->r - k + g->n) % g->n;
            /* Segment by segment, so that segment j+1 travels while
             * segment j is reduced. */
            const int ns = (int)(nseg(g, sb) > nseg(g, rb) ? nseg(g, sb)
                                                           : nseg(g, rb));
            for (int j = 0; j < ns; j++) {
                if (j < nseg(g, rb)) {
                    COLLAR_CHECK(recv_seg(g, phase, k, rb, j));
                }
                if (j < nseg(g, sb)) {
                    COLLAR_CHECK(send_seg(g, phase, k, sb, j));
                }
            }
        }
    }
    if (g->acc != call->rbuf) {
        /* Device scratch in place of a host receive buffer: each segment
         * goes out once its last step (the allgather's) is done. */
        for (int b = 0; b < g->n; b++) {
            for (int j = 0; j < nseg(g, b); j++) {
                MPI_Count first;
                int cnt, t;
                seg_range(g, b, j, &first, &cnt);
                const size_t off = (size_t)first * g->esize;
                COLLAR_CHECK(add_copy(g, (char *)call->rbuf + off, g->acc + off,
                                      (size_t)cnt * g->esize, g->out_stream,
                                      g->last_acc[slot(g, b, j)], -1, -1, &t));
            }
        }
    }
    /* A failed copy or reduction anywhere feeds every rank's result: the
     * status agreement runs once everything else is done. */
    return collar_sched_add_agree(s, 1);
}

int collar_algo_ring_eligible(const collar_call_t *call, int comm_size)
{
    /* Only what every rank agrees on: a rank's own mix of buffers does not
     * count (a host receive buffer is reduced into device scratch). */
    return comm_size >= 1 && call->dense && call->cdt != COLLAR_DT_NONE
           && call->cop != COLLAR_OP_NONE
           && (call->dev != NULL && call->mem != COLLAR_MEM_HOST
               ? call->dev->reduce_supported(call->cdt, call->cop)
               : collar_reduce_supported(call->cdt, call->cop));
}

int collar_ring_tags(int tag_ub, int n, uint64_t seq, collar_ring_tags_t *tags)
{
    /* Tags 0 .. tag_ub: tag_ub + 1 of them (tag_ub may be INT_MAX). */
    const long long space = (long long)tag_ub + 1;
    const long long per_seg = n > 1 ? 2LL * (n - 1) : 1;  /* tags a segment index */
    long long nwin = COLLAR_RING_TAG_OPS;
    if (space / nwin < per_seg) {
        nwin = space / per_seg;  /* fewer windows, each one segment deep */
    }
    if (tag_ub < 0 || nwin < 1) {
        return 0;
    }
    const long long span = space / nwin;
    tags->nwin = (int)nwin;
    tags->span = (int)span;
    tags->nseg_max = (int)(span / per_seg);
    tags->base = (int)((long long)(seq % (uint64_t)nwin) * span);
    return 1;
}

collar_status_t collar_algo_ring_build(const collar_call_t *call,
                                       const collar_plan_t *plan,
                                       collar_sched_t *s)
{
    ring_t g = { .s = s, .call = call, .aware = plan->device_pointers_ok,
                 .host = call->mem == COLLAR_MEM_HOST };
    collar_status_t st = COLLAR_OK;
    g.n = s->comm->size;
    g.r = s->comm->rank;
    g.right = (g.r + 1) % g.n;
    g.left = (g.r - 1 + g.n) % g.n;
    g.esize = (size_t)call->type_size;
    const size_t chunk = plan->chunk != 0 ? plan->chunk : COLLAR_DEFAULT_CHUNK;
    g.per = (MPI_Count)(chunk / g.esize > 0 ? chunk / g.esize : 1);
    if (g.per > COLLAR_PIECE_MAX) {
        g.per = COLLAR_PIECE_MAX;
    }
    const int nstreams = s->dev->nstreams();
    g.in_stream = (int)(s->seq % (uint64_t)nstreams);
    g.out_stream = (g.in_stream + 1) % nstreams;
    g.acc = call->rbuf;
    s->pmpi_device_ok = plan->mpi_cuda_aware;

    collar_ring_tags_t tags;
    if (!collar_ring_tags(s->comm->tag_ub, g.n, s->seq, &tags)) {
        /* Every rank of the communicator decides alike (same n, tag_ub). */
        if (collar_log_first("ring-tags")) {
            collar_warn(COLL, "ring: %d ranks do not fit MPI_TAG_UB %d; "
                        "running chunked instead", g.n, s->comm->tag_ub);
        }
        return collar_algo_chunked_build(call, plan, s);
    }
    g.tag_base = tags.base;

    g.bcount = calloc((size_t)g.n, sizeof(MPI_Count));
    g.boff = calloc((size_t)g.n, sizeof(MPI_Count));
    if (g.bcount == NULL || g.boff == NULL) {
        st = COLLAR_ERR_NO_MEMORY;
        goto out;
    }
    /* Remainders go to the low blocks. */
    for (int b = 0; b < g.n; b++) {
        collar_block_range(call->count, g.n, b, &g.boff[b], &g.bcount[b]);
    }
    if (g.per > g.bcount[0] && g.bcount[0] > 0) {
        g.per = g.bcount[0];
    }
    if (nseg(&g, 0) > tags.nseg_max) {
        /* Too many segments for the operation's tag window: fewer, larger
         * ones (still at most COLLAR_PIECE_MAX elements: a block of more
         * than nseg_max * COLLAR_PIECE_MAX elements cannot run). */
        g.per = (g.bcount[0] - 1) / tags.nseg_max + 1;
        if (g.per > COLLAR_PIECE_MAX) {
            st = COLLAR_ERR_UNSUPPORTED;
            goto out;
        }
    }
    g.nseg_max = g.bcount[0] > 0 ? (int)nseg(&g, 0) : 1;

    const int nslots = g.n * g.nseg_max;
    g.last_acc = malloc((size_t)nslots * 4 * sizeof(int));
    if (g.last_acc == NULL) {
        st = COLLAR_ERR_NO_MEMORY;
        goto out;
    }
    g.last_hs = g.last_acc + nslots;
    g.last_hr = g.last_hs + nslots;
    g.last_ds = g.last_hr + nslots;

    /* Scratch for the received segments: device memory, or on host buffers
     * host memory; over a library that does not take device pointers, host
     * staging for the messages, each the size of the message.  A device
     * call with a host receive buffer here reduces into device scratch. */
    if (!g.host && call->rmem == COLLAR_MEM_HOST) {
        COLLAR_CHECK_GOTO(collar_sched_scratch(s, call->bytes, (void **)&g.acc), st, out);
    }
    if (g.host) {
        COLLAR_CHECK_GOTO(collar_sched_staging(s, call->bytes, (void **)&g.ds), st, out);
    } else {
        COLLAR_CHECK_GOTO(collar_sched_scratch(s, call->bytes, (void **)&g.ds), st, out);
    }
    if (!g.aware) {
        COLLAR_CHECK_GOTO(collar_sched_staging(s, call->bytes, (void **)&g.hs), st, out);
        COLLAR_CHECK_GOTO(collar_sched_staging(s, call->bytes, (void **)&g.hr), st, out);
    }
    st = ring_build(&g);
out:
    free(g.last_acc);
    free(g.bcount);
    free(g.boff);
    return st;
}
