/*
 * collar - the `staged` and `chunked` allreduce: staging through pinned host
 * memory, the MPI library reducing the host copy.
 *
 * `chunked` cuts the message into chunks of whole elements and pipelines
 * them through COLLAR_PIPELINE_SLOTS staging slots, copy-in and copy-out on
 * different device streams, so that at steady state three things overlap:
 *
 *   stream A  : in(0) in(1) in(2) in(3) ...
 *   MPI       :       ar(0) ar(1) ar(2) ar(3) ...
 *   stream B  :             out(0) out(1) out(2) ...
 *
 *   in(i)  copy chunk i of the user's buffer into slot i % SLOTS
 *          (after out(i - SLOTS) has emptied that slot)
 *   ar(i)  PMPI_Iallreduce(MPI_IN_PLACE, slot) on the private communicator,
 *          in chunk order on every rank
 *   out(i) copy slot i % SLOTS back into chunk i of the receive buffer
 *
 * `staged` is the same with one chunk: one copy in, one host allreduce, one
 * copy out.  Every step waits for the caller's queued device work first.
 * The schedule ends with the status agreement (collar_sched_add_agree),
 * issued with the last chunk's allreduce: a rank whose copy-in failed (or
 * that could not get its staging) makes every rank return an error.  With
 * one chunk of a dense message whose op keeps a flag (an integer or real
 * sum, product, minimum, maximum, and or or: collar_sched_can_fold), the
 * agreement is one more element of the data's allreduce instead, issued
 * at the same moment, and the call makes one internal collective.  A
 * blocking call with one chunk issues its host allreduce as the MPI
 * library's blocking MPI_Allreduce (collar_sched_block_colls): nothing of
 * the schedule runs beside it.
 *
 * Chunks are whole elements: elements_per_chunk = max(1, chunk / type size);
 * the last chunk takes the remainder.  Counts are 64-bit (MPI_Count); a
 * host allreduce of more than COLLAR_PIECE_MAX elements (staged, a message
 * above INT_MAX elements) is issued in pieces, as PMPI takes int counts.  A copy moves the bytes the chunk's
 * elements span.  A datatype with gaps (a vector, a padded pair type) must
 * not overwrite the gaps of the receive buffer, so then the receive buffer's
 * span is copied in as well and the host allreduce runs from a separate send
 * slot into it: gaps go out and come back unchanged.
 *
 * A copy of at most gdrcopy= bytes (default COLLAR_GDRCOPY_DEFAULT) may be
 * done by the CPU at issue (dev->copy_now: GDRCopy on the cuda backend)
 * instead of on a stream; the dependencies are the same either way.
 */
#include "config.h"
#include "algo.h"

/* Byte range [off, off + len) of elements [e0, e1) relative to the buffer. */
static void chunk_span(const collar_call_t *call, MPI_Count nchunks, MPI_Count e0,
                       MPI_Count e1, MPI_Aint *off, size_t *len)
{
    if (nchunks == 1) {
        *off = call->lo;
        *len = call->span;
        return;
    }
    /* chunkable: extent > 0, so lo is the true lower bound */
    *off = call->lo + (MPI_Aint)e0 * call->extent;
    *len = (size_t)((MPI_Aint)(e1 - e0 - 1) * call->extent + call->true_extent);
}

/* A copy of `bytes` that the backend may do by the CPU when it is at most
 * `cpu_max` bytes (gdrcopy=). */
static collar_status_t add_copy(collar_sched_t *s, void *dst, const void *src,
                                size_t bytes, int stream, int dep1, int dep2,
                                size_t cpu_max, int *index)
{
    collar_step_t t = { .kind = COLLAR_STEP_COPY, .ndeps = 1, .deps = { dep1 } };
    if (dep2 >= 0) {
        t.deps[t.ndeps++] = dep2;
    }
    t.u.copy.dst = dst;
    t.u.copy.src = src;
    t.u.copy.bytes = bytes;
    t.u.copy.stream = stream;
    t.u.copy.cpu = bytes <= cpu_max;
    return collar_sched_add(s, &t, index);
}

/*
 * The host allreduce of `n` elements at sbuf / rbuf (MPI's addresses of the
 * first one), after steps dep1 and dep2.  PMPI_Iallreduce takes an int
 * count: more than COLLAR_PIECE_MAX elements go as several allreduces of at
 * most that many (allreduce is elementwise), one after the other.  *last:
 * the step after which the whole result is in rbuf.
 */
static collar_status_t add_allreduce(collar_sched_t *s, const collar_call_t *call,
                                     const char *sbuf, char *rbuf, MPI_Count n,
                                     int dep1, int dep2, int *last)
{
    for (MPI_Count done = 0; done < n;) {
        const MPI_Count piece = n - done < COLLAR_PIECE_MAX ? n - done
                                                            : COLLAR_PIECE_MAX;
        const MPI_Aint off = (MPI_Aint)done * call->extent;
        collar_step_t t = { .kind = COLLAR_STEP_IALLREDUCE, .ndeps = 1,
                            .deps = { dep1 } };
        if (dep2 >= 0) {
            t.deps[t.ndeps++] = dep2;
        }
        t.u.allreduce.sbuf = sbuf == MPI_IN_PLACE ? MPI_IN_PLACE : sbuf + off;
        t.u.allreduce.rbuf = rbuf + off;
        t.u.allreduce.count = (int)piece;
        t.u.allreduce.dt = call->dtype;
        t.u.allreduce.op = call->op;
        COLLAR_CHECK(collar_sched_add(s, &t, last));
        dep1 = *last;  /* the next piece after this one */
        dep2 = -1;
        done += piece;
    }
    return COLLAR_OK;
}

static collar_status_t pipeline_build(const collar_call_t *call, MPI_Count per,
                                      size_t cpu_max, collar_sched_t *s)
{
    const MPI_Count nchunks = (call->count - 1) / per + 1;  /* count >= 1 */
    const int nslots = nchunks < COLLAR_PIPELINE_SLOTS ? (int)nchunks
                                                       : COLLAR_PIPELINE_SLOTS;
    const int nstreams = s->dev->nstreams();
    const int in_stream = (int)(s->seq % (uint64_t)nstreams);
    const int out_stream = (in_stream + 1) % nstreams;
    const int gaps = !call->dense && !call->in_place;
    const char *send = call->in_place ? (const char *)call->rbuf
                                      : (const char *)call->sbuf;
    char *recv = call->rbuf;

    /* The largest chunk span: the first chunk is always a full one. */
    MPI_Aint off0;
    size_t slot_len;
    chunk_span(call, nchunks, 0, per < call->count ? per : call->count, &off0,
               &slot_len);
    /* One chunk of a dense message whose op keeps a flag: the status
     * agreement rides in the data's allreduce as one more element, after
     * the message in the slot (collar_sched_fold_agree), instead of an
     * allreduce of its own. */
    const int fold = nchunks == 1 && call->dense && !gaps && call->lo == 0
                     && call->count < COLLAR_PIECE_MAX
                     && call->extent == (MPI_Aint)collar_dtype_size(call->cdt)
                     && collar_sched_can_fold(call->cdt, call->cop, s->comm->size);
    if (fold) {
        slot_len += (size_t)call->extent;
    }

    char *slots_recv, *slots_send = NULL;
    COLLAR_CHECK(collar_sched_staging(s, (size_t)nslots * slot_len,
                                      (void **)&slots_recv));
    if (gaps) {
        COLLAR_CHECK(collar_sched_staging(s, (size_t)nslots * slot_len,
                                          (void **)&slots_send));
    }

    /* One chunk: copy in, allreduce, copy out, each waiting for the one
     * before; in a blocking call the host waits for each copy as it is
     * issued (collar_sched_t.serial_device). */
    s->serial_device = nchunks == 1 && !gaps;

    int order;
    collar_step_t t = { .kind = COLLAR_STEP_ORDER };
    COLLAR_CHECK(collar_sched_add(s, &t, &order));

    /* Per slot: the step after which it may be refilled. */
    int recv_free[COLLAR_PIPELINE_SLOTS] = { -1, -1, -1 };
    int send_free[COLLAR_PIPELINE_SLOTS] = { -1, -1, -1 };

    for (MPI_Count i = 0; i < nchunks; i++) {
        const MPI_Count e0 = i * per;
        const MPI_Count e1 = call->count - e0 > per ? e0 + per : call->count;
        const int k = (int)(i % nslots);
        MPI_Aint off;
        size_t len;
        chunk_span(call, nchunks, e0, e1, &off, &len);
        char *hr = slots_recv + (size_t)k * slot_len;
        /* The host address MPI sees for element e0 of the chunk. */
        char *hr_base = hr - (off - (MPI_Aint)e0 * call->extent);

        int in_recv, in_send = -1, ar;
        const char *host_send = MPI_IN_PLACE;
        if (gaps) {
            char *hs = slots_send + (size_t)k * slot_len;
            COLLAR_CHECK(add_copy(s, hs, send + off, len, in_stream, order,
                                  send_free[k], cpu_max, &in_send));
            COLLAR_CHECK(add_copy(s, hr, recv + off, len, in_stream, order,
                                  recv_free[k], cpu_max, &in_recv));
            host_send = hs - (off - (MPI_Aint)e0 * call->extent);
        } else {
            COLLAR_CHECK(add_copy(s, hr, send + off, len, in_stream, order,
                                  recv_free[k], cpu_max, &in_recv));
        }

        COLLAR_CHECK(add_allreduce(s, call, host_send, hr_base,
                                   e1 - e0 + fold, in_recv, in_send, &ar));
        if (fold) {
            collar_sched_fold_agree(s, ar, hr_base + (e1 - e0) * call->extent,
                                    call->cdt, call->cop);
        }
        send_free[k] = ar;

        COLLAR_CHECK(add_copy(s, recv + off, hr, len, out_stream, ar, -1,
                              cpu_max, &recv_free[k]));
    }
    /* Every rank learns whether any rank's contribution failed: issued
     * right after the last chunk's allreduce, when every copy-in is done,
     * and overlapped with the allreduces in flight (or in that allreduce,
     * folded). */
    if (!fold) {
        COLLAR_CHECK(collar_sched_add_agree(s, 0));
    }
    if (nchunks == 1 && call->blocking) {
        /* One host allreduce (and the agreement, unless folded) with
         * nothing to overlap it: the MPI library's blocking allreduce, in
         * the calling thread, instead of its nonblocking one and a loop of
         * tests. */
        collar_sched_block_colls(s);
    }
    return COLLAR_OK;
}

size_t collar_algo_gdrcopy_limit(const collar_plan_t *plan)
{
    if (plan->gdrcopy == COLLAR_GDRCOPY_NEVER) {
        return 0;
    }
    return plan->gdrcopy != 0 ? plan->gdrcopy : COLLAR_GDRCOPY_DEFAULT;
}

collar_status_t collar_algo_staged_build(const collar_call_t *call,
                                         const collar_plan_t *plan,
                                         collar_sched_t *s)
{
    return pipeline_build(call, call->count, collar_algo_gdrcopy_limit(plan), s);
}

collar_status_t collar_algo_chunked_build(const collar_call_t *call,
                                          const collar_plan_t *plan,
                                          collar_sched_t *s)
{
    if (!collar_call_chunkable(call) || call->type_size == 0) {
        return pipeline_build(call, call->count, collar_algo_gdrcopy_limit(plan),
                              s);  /* see collar_algo_eligible */
    }
    size_t chunk = plan->chunk != 0 ? plan->chunk : COLLAR_DEFAULT_CHUNK;
    size_t per = chunk / (size_t)call->type_size;
    if (per < 1) {
        per = 1;
    }
    if (per > (size_t)COLLAR_PIECE_MAX) {
        per = (size_t)COLLAR_PIECE_MAX;
    }
    if ((MPI_Count)per > call->count) {
        per = (size_t)call->count;
    }
    return pipeline_build(call, (MPI_Count)per, collar_algo_gdrcopy_limit(plan), s);
}
