/*
 * collar - the `staged` allreduce.
 *
 * One copy of the whole message into pinned host memory, the MPI library's
 * allreduce on that copy (any op, any datatype: the MPI library reduces),
 * one copy back:
 *
 *   order after the caller's device work
 *     -> copy  user buffer --> host         (device stream)
 *     -> PMPI_Iallreduce(MPI_IN_PLACE, host) on the private communicator
 *     -> copy  host --> user receive buffer (device stream)
 *
 * The copies move the bytes the datatype spans, [lo, lo + span).  A datatype
 * with gaps (a vector, a padded pair type) must not overwrite the gaps of the
 * receive buffer, so then the receive buffer is copied in as well and the
 * host allreduce runs from a separate send copy into it: the gaps go out and
 * come back unchanged.
 */
#include "config.h"
#include "algo.h"

static collar_status_t add_copy(collar_sched_t *s, void *dst, const void *src,
                                size_t bytes, int stream, int dep, int *index)
{
    collar_step_t t = { .kind = COLLAR_STEP_COPY, .ndeps = 1, .deps = { dep } };
    t.u.copy.dst = dst;
    t.u.copy.src = src;
    t.u.copy.bytes = bytes;
    t.u.copy.stream = stream;
    return collar_sched_add(s, &t, index);
}

collar_status_t collar_algo_staged_build(const collar_call_t *call,
                                         const collar_plan_t *plan,
                                         collar_sched_t *s)
{
    (void)plan;
    const int stream = (int)(s->seq % (uint64_t)s->dev->nstreams());
    const char *send = call->in_place ? (const char *)call->rbuf
                                      : (const char *)call->sbuf;
    char *recv = call->rbuf;
    char *host_recv;
    int order, in_recv, in_send = -1, reduce;

    collar_step_t t = { .kind = COLLAR_STEP_ORDER };
    COLLAR_CHECK(collar_sched_add(s, &t, &order));

    COLLAR_CHECK(collar_sched_staging(s, call->span, (void **)&host_recv));
    const int gaps = !call->dense && !call->in_place;
    const char *host_send = MPI_IN_PLACE;
    if (gaps) {
        char *hs;
        COLLAR_CHECK(collar_sched_staging(s, call->span, (void **)&hs));
        COLLAR_CHECK(add_copy(s, hs, send + call->lo, call->span, stream, order,
                              &in_send));
        COLLAR_CHECK(add_copy(s, host_recv, recv + call->lo, call->span, stream,
                              order, &in_recv));
        host_send = hs - call->lo;
    } else {
        COLLAR_CHECK(add_copy(s, host_recv, send + call->lo, call->span, stream,
                              order, &in_recv));
    }

    t = (collar_step_t){ .kind = COLLAR_STEP_IALLREDUCE, .ndeps = 1,
                         .deps = { in_recv } };
    if (in_send >= 0) {
        t.deps[t.ndeps++] = in_send;
    }
    t.u.allreduce.sbuf = host_send;
    t.u.allreduce.rbuf = host_recv - call->lo;
    t.u.allreduce.count = call->count;
    t.u.allreduce.dt = call->dtype;
    t.u.allreduce.op = call->op;
    COLLAR_CHECK(collar_sched_add(s, &t, &reduce));

    return add_copy(s, recv + call->lo, host_recv, call->span, stream, reduce,
                    NULL);
}
