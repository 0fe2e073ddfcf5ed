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
 * scratch.  Messages carry tags unique within the operation, offset by the
 * operation's sequence number, so concurrent operations on one
 * communicator never match each other's messages (while fewer than
 * RING_TAG_OPS are in flight on it).
 */
#include "config.h"
#include "algo.h"

#include <stdlib.h>

#define RING_TAG_OPS 1024

typedef struct {
    collar_sched_t *s;
    const collar_call_t *call;
    int             aware;      /* PMPI takes device pointers */
    int             n, r, right, left;
    int             per;        /* elements per segment */
    int            *bcount;     /* elements per block */
    int            *boff;       /* first element of each block */
    int             nseg_max;
    size_t          esize;
    char           *acc, *hs, *hr, *ds;
    /* last step touching each (block, segment) slot, -1: none */
    int            *last_acc, *last_hs, *last_hr, *last_ds;
    int             tag_base, tag_span;
    int             in_stream, out_stream;
} ring_t;

static int nseg(const ring_t *g, int b)
{
    return (g->bcount[b] + g->per - 1) / g->per;
}

static int slot(const ring_t *g, int b, int j)
{
    return b * g->nseg_max + j;
}

/* Element range of segment j of block b. */
static void seg_range(const ring_t *g, int b, int j, int *first, int *cnt)
{
    *first = g->boff[b] + j * g->per;
    int left = g->bcount[b] - j * g->per;
    *cnt = left < g->per ? left : g->per;
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
    int first, cnt, t;
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
    int first, cnt, t;
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
        collar_step_t red = { .kind = COLLAR_STEP_DEV_REDUCE };
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
    if (!call->in_place) {
        COLLAR_CHECK(add_copy(g, g->acc, call->sbuf, bytes, g->in_stream, order,
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
            const int ns = nseg(g, sb) > nseg(g, rb) ? nseg(g, sb) : nseg(g, rb);
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
    return COLLAR_OK;
}

int collar_algo_ring_eligible(const collar_call_t *call, int comm_size)
{
    /* The device reduces into the receive buffer: it must be memory the
     * device works on (device or managed), unless the call is on host
     * memory only (then the reductions are host loops). */
    return comm_size >= 1 && call->dense && call->cdt != COLLAR_DT_NONE
           && call->cop != COLLAR_OP_NONE
           && (call->dev != NULL ? call->dev->reduce_supported(call->cdt, call->cop)
                                 : collar_reduce_supported(call->cdt, call->cop))
           && (call->mem == COLLAR_MEM_HOST || call->rmem != COLLAR_MEM_HOST);
}

collar_status_t collar_algo_ring_build(const collar_call_t *call,
                                       const collar_plan_t *plan,
                                       collar_sched_t *s)
{
    ring_t g = { .s = s, .call = call, .aware = plan->device_pointers_ok };
    collar_status_t st = COLLAR_OK;
    g.n = s->comm->size;
    g.r = s->comm->rank;
    g.right = (g.r + 1) % g.n;
    g.left = (g.r - 1 + g.n) % g.n;
    g.esize = (size_t)call->type_size;
    const size_t chunk = plan->chunk != 0 ? plan->chunk : COLLAR_DEFAULT_CHUNK;
    g.per = (int)(chunk / g.esize > 0 ? chunk / g.esize : 1);
    const int nstreams = s->dev->nstreams();
    g.in_stream = (int)(s->seq % (uint64_t)nstreams);
    g.out_stream = (g.in_stream + 1) % nstreams;
    g.acc = call->rbuf;

    g.bcount = calloc((size_t)g.n, sizeof(int));
    g.boff = calloc((size_t)g.n, sizeof(int));
    if (g.bcount == NULL || g.boff == NULL) {
        st = COLLAR_ERR_NO_MEMORY;
        goto out;
    }
    /* Remainders go to the low blocks. */
    for (int b = 0, off = 0; b < g.n; b++) {
        g.bcount[b] = call->count / g.n + (b < call->count % g.n ? 1 : 0);
        g.boff[b] = off;
        off += g.bcount[b];
    }
    if (g.per > g.bcount[0] && g.bcount[0] > 0) {
        g.per = g.bcount[0];
    }
    g.nseg_max = g.bcount[0] > 0 ? nseg(&g, 0) : 1;

    /* Tags: unique within the operation, offset by its sequence number. */
    const long ntags = 2L * (g.n - 1) * g.nseg_max;
    g.tag_span = s->comm->tag_ub / RING_TAG_OPS;
    if (ntags > g.tag_span) {
        /* Too many segments for the tag space: fewer, larger ones. */
        const long need = (ntags + g.tag_span - 1) / g.tag_span;
        g.per = (int)((long)g.per * need);
        if (g.per > g.bcount[0]) {
            g.per = g.bcount[0];
        }
        g.nseg_max = nseg(&g, 0);
    }
    g.tag_base = (int)(s->seq % RING_TAG_OPS) * g.tag_span;

    const int nslots = g.n * g.nseg_max;
    g.last_acc = malloc((size_t)nslots * 4 * sizeof(int));
    if (g.last_acc == NULL) {
        st = COLLAR_ERR_NO_MEMORY;
        goto out;
    }
    g.last_hs = g.last_acc + nslots;
    g.last_hr = g.last_hs + nslots;
    g.last_ds = g.last_hr + nslots;

    /* Device scratch and (over a library that does not take device
     * pointers) host staging, each the size of the message. */
    COLLAR_CHECK_GOTO(collar_sched_scratch(s, call->bytes, (void **)&g.ds), st, out);
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
