/*
 * collar - the schedule engine.
 *
 * An algorithm is a schedule: a typed array of steps, each with up to
 * COLLAR_STEP_MAX_DEPS dependencies on earlier steps.  Progress issues every
 * step whose dependencies are done and polls the ones in flight (device
 * events, PMPI requests).  A blocking call progresses its schedule until it
 * finishes; a nonblocking one hands back a request and is progressed from
 * the application's MPI_Wait* / MPI_Test* calls.
 *
 * Collective steps (PMPI_Iallreduce on the private communicator) must be
 * issued in the same order on every rank.  Within a schedule they are issued
 * in the order they were added; across schedules on one communicator, in the
 * order the schedules were started (the communicator's coll_turn).  A
 * blocking call's schedule in which nothing overlaps its collectives
 * (one-chunk staged, ipc one-shot) issues them as the blocking
 * PMPI_Allreduce (collar_sched_block_colls), still in its turn: the MPI library's
 * blocking allreduce costs a fraction of its nonblocking one and the
 * tests that poll it.
 *
 * On the first failing step the schedule records that step's error and
 * drains: device and host work not yet started is skipped (its inputs may be
 * missing), what is in flight is waited for (buffers must not be released
 * under a pending copy or message), and the communication steps (internal
 * allreduces, sends, receives) are still issued, in dependency order, on
 * whatever the buffers hold.  The schedule then finishes with the first
 * error.  Draining keeps the pattern of messages and collectives the same
 * on every rank whatever step failed: when every rank fails in the same
 * call, but at different steps (pipelines progress differently on each
 * rank), nobody is left waiting for a message or a collective a peer gave
 * up on, no stale message stays behind to match a later operation, and the
 * internal collectives of later operations stay in the same order on every
 * rank.
 *
 * A failure on one rank only: a rank that cannot get pinned staging
 * memory stages through pageable host memory instead, and nothing fails
 * (collar_staging_get); one that cannot get that either (or, for device
 * scratch, neither device nor pinned memory) still builds the whole
 * schedule on drain memory, failed from the start (collar_sched_staging),
 * so it drains through the same messages and collectives, and the
 * sequence numbers and collective order stay the same on every rank.  The
 * other ranks learn of it from the status agreement
 * (collar_sched_add_agree), the last collective of every schedule: a
 * nonblocking MPI_MAX allreduce of one int, issued when the rank's
 * contribution is final and overlapped with the data's allreduces (staged,
 * chunked) or at the end (the ring), or carried by the data's own
 * allreduce as one more element (collar_sched_fold_agree: one-chunk
 * staged, where the op keeps a flag; drain memory keeps it).  Every rank
 * then either has
 * the right result or returns an error: a failure after the agreement (a
 * copy-out) fails that rank alone, whose contribution was already whole.
 */
#include "config.h"
#include "core.h"

#include <stdlib.h>
#include <string.h>

enum { STEP_PENDING, STEP_ACTIVE, STEP_DONE };

collar_status_t collar_sched_create(collar_comm_t *comm,
                                    const collar_device_t *dev,
                                    collar_sched_t **sched)
{
    /* Taken whether or not the schedule can be made: the other ranks made
     * theirs, and the numbers of the next ones must match. */
    const uint64_t seq = comm->next_seq++;
    collar_sched_t *s = collar_fault(COLLAR_FAULT_SCHED) ? NULL
                        : calloc(1, sizeof(*s));
    if (s == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    s->comm = comm;
    collar_comm_ref(comm);   /* the operation may outlive MPI_Comm_free */
    s->dev = dev;
    s->seq = seq;
    s->mpi_error = MPI_SUCCESS;
    *sched = s;
    return COLLAR_OK;
}

void collar_sched_destroy(collar_sched_t *s)
{
    if (s == NULL) {
        return;
    }
    if (s->cleanup != NULL) {
        s->cleanup(s);
    }
    for (int i = 0; i < s->nstaging; i++) {
        if (s->staging_kind[i] == COLLAR_SLOT_SCRATCH) {
            collar_scratch_put(s->dev, s->staging[i], s->staging_len[i]);
        } else {
            collar_staging_put(s->dev, s->staging[i], s->staging_len[i],
                               (collar_staging_kind_t)s->staging_kind[i]);
        }
    }
    free(s->steps);
    collar_check_free(s->check);
    collar_comm_unref(s->comm);
    free(s);
}

collar_status_t collar_sched_add(collar_sched_t *s, const collar_step_t *step,
                                 int *index)
{
    if ((s->started && !s->extending) || step->ndeps > COLLAR_STEP_MAX_DEPS) {
        return COLLAR_ERR_INVALID;
    }
    for (int d = 0; d < step->ndeps; d++) {
        if (step->deps[d] < 0 || step->deps[d] >= s->nsteps) {
            return COLLAR_ERR_INVALID;  /* only earlier steps */
        }
    }
    if (s->nsteps == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        collar_step_t *steps = realloc(s->steps, (size_t)cap * sizeof(*steps));
        if (steps == NULL) {
            return COLLAR_ERR_NO_MEMORY;
        }
        s->steps = steps;
        s->cap = cap;
    }
    collar_step_t *t = &s->steps[s->nsteps];
    *t = *step;
    t->state = STEP_PENDING;
    t->req = MPI_REQUEST_NULL;
    memset(&t->ev, 0, sizeof(t->ev));
    memset(&t->obs, 0, sizeof(t->obs));
    if (t->kind == COLLAR_STEP_IALLREDUCE || t->kind == COLLAR_STEP_AGREE) {
        t->u.allreduce.ord = s->ncoll++;
    }
    if (t->kind == COLLAR_STEP_CALL && t->u.call.extends) {
        s->nextend++;
    }
    if (index != NULL) {
        *index = s->nsteps;
    }
    s->nsteps++;
    return COLLAR_OK;
}

static void sched_fail(collar_sched_t *s, collar_status_t st, int mpi_error);

/* Note a buffer the schedule owns. */
static void staging_note(collar_sched_t *s, void *ptr, size_t bytes, int kind)
{
    s->staging[s->nstaging] = ptr;
    s->staging_len[s->nstaging] = bytes;
    s->staging_kind[s->nstaging] = (unsigned char)kind;
    s->nstaging++;
}

static int staging_full(const collar_sched_t *s)
{
    return s->nstaging == (int)(sizeof(s->staging) / sizeof(s->staging[0]));
}

/* Drain memory for a schedule that could get no memory for a buffer
 * (`what`) at all. */
static collar_status_t staging_drain(collar_sched_t *s, size_t bytes,
                                     collar_status_t st, const char *what,
                                     void **ptr)
{
    /* Fail this operation, but keep its shape: the other ranks wait for
     * its messages and collectives, which drain memory carries; no device
     * or host work touches it (the schedule drains). */
    *ptr = collar_drain_get(bytes);
    if (*ptr == NULL) {
        if (s->comm != NULL && s->comm->private_comm != MPI_COMM_NULL) {
            collar_fail_stop(s->comm->private_comm, MPI_ERR_NO_MEM,
                             "memory to take part in an operation's messages");
        }
        return st;
    }
    collar_error(COLL, "schedule %llu: %s (%zu bytes): %s; the operation "
                 "fails, after its messages", (unsigned long long)s->seq, what,
                 bytes, collar_status_string(st));
    sched_fail(s, st, MPI_ERR_OTHER);
    staging_note(s, *ptr, bytes, COLLAR_SLOT_DRAIN);
    return COLLAR_OK;
}

collar_status_t collar_sched_staging(collar_sched_t *s, size_t bytes, void **ptr)
{
    if (staging_full(s)) {
        return COLLAR_ERR_INVALID;
    }
    collar_staging_kind_t kind;
    collar_status_t st = collar_staging_get(s->dev, bytes, ptr, &kind);
    if (st != COLLAR_OK) {
        return staging_drain(s, bytes, st, "no host memory for its staging", ptr);
    }
    if (kind == COLLAR_STAGING_HEAP) {
        int first = 1;   /* the operation's first: one fallback a call */
        for (int i = 0; i < s->nstaging; i++) {
            first &= s->staging_kind[i] != COLLAR_SLOT_HEAP;
        }
        if (first) {
            collar_staging_count_fallback();
        }
    }
    staging_note(s, *ptr, bytes, (int)kind);
    return COLLAR_OK;
}

collar_status_t collar_sched_add_agree(collar_sched_t *s, int after_all)
{
    collar_step_t t = { .kind = COLLAR_STEP_AGREE };
    t.u.allreduce.count = after_all;  /* AGREE: 1 waits for every step */
    return collar_sched_add(s, &t, NULL);
}

/* The 0/1 a rank puts in a folded agreement's element, and reads back. */
static void fold_put(void *p, collar_dtype_t dt, int v)
{
    switch (dt) {
    case COLLAR_DT_INT32:  { int32_t x = v;  memcpy(p, &x, sizeof(x)); break; }
    case COLLAR_DT_UINT32: { uint32_t x = (uint32_t)v; memcpy(p, &x, sizeof(x)); break; }
    case COLLAR_DT_INT64:  { int64_t x = v;  memcpy(p, &x, sizeof(x)); break; }
    case COLLAR_DT_UINT64: { uint64_t x = (uint64_t)v; memcpy(p, &x, sizeof(x)); break; }
    case COLLAR_DT_FLOAT:  { float x = (float)v; memcpy(p, &x, sizeof(x)); break; }
    case COLLAR_DT_DOUBLE: { double x = v;   memcpy(p, &x, sizeof(x)); break; }
    default: break;  /* collar_sched_can_fold admits no other */
    }
}

/* The element is exactly v (v: 0 or 1). */
static int fold_is(const void *p, collar_dtype_t dt, int v)
{
    union { int32_t i32; uint32_t u32; int64_t i64; uint64_t u64; float f; double d; } x;
    memcpy(&x, p, collar_dtype_size(dt));
    switch (dt) {
    case COLLAR_DT_INT32:  return x.i32 == v;
    case COLLAR_DT_UINT32: return x.u32 == (uint32_t)v;
    case COLLAR_DT_INT64:  return x.i64 == v;
    case COLLAR_DT_UINT64: return x.u64 == (uint64_t)v;
    case COLLAR_DT_FLOAT:  return x.f == (float)v;
    case COLLAR_DT_DOUBLE: return x.d == (double)v;
    default: return 1;
    }
}

/*
 * An allreduce whose op keeps a flag: every rank that did not fail puts in
 * the value the op leaves as it is when all put it in (0 for a sum, a
 * maximum, an or; 1 for a product, a minimum, an and), a rank that failed
 * the other one, and the result is that value exactly when no rank failed.
 * A sum of n ones is exact in these types for the ranks a communicator
 * can have (a float up to 2^24: the bound below).  Exclusive ors would
 * cancel two failures, and narrower types could wrap: those keep the
 * separate agreement.
 */
int collar_sched_can_fold(collar_dtype_t dt, collar_op_t op, int comm_size)
{
    const int integer = dt == COLLAR_DT_INT32 || dt == COLLAR_DT_UINT32
                        || dt == COLLAR_DT_INT64 || dt == COLLAR_DT_UINT64;
    const int real = dt == COLLAR_DT_FLOAT || dt == COLLAR_DT_DOUBLE;
    if (!(integer || real) || comm_size >= (1 << 24)) {
        return 0;
    }
    switch (op) {
    case COLLAR_OP_SUM: case COLLAR_OP_PROD:
    case COLLAR_OP_MIN: case COLLAR_OP_MAX:
        return 1;
    case COLLAR_OP_LAND: case COLLAR_OP_LOR:
    case COLLAR_OP_BAND: case COLLAR_OP_BOR:
        return integer;
    default:
        return 0;
    }
}

void collar_sched_fold_agree(collar_sched_t *s, int index, void *flag,
                             collar_dtype_t dt, collar_op_t op)
{
    collar_step_t *t = &s->steps[index];
    t->u.allreduce.fold = flag;
    t->u.allreduce.fold_dt = dt;
    t->u.allreduce.fold_fail = op == COLLAR_OP_SUM || op == COLLAR_OP_MAX
                               || op == COLLAR_OP_LOR || op == COLLAR_OP_BOR;
}

void collar_sched_block_coll(collar_sched_t *s, int index)
{
    collar_step_t *t = &s->steps[index];
    if (s->run_here && s->comm != NULL && s->comm->all_threaded
        && (t->kind == COLLAR_STEP_IALLREDUCE || t->kind == COLLAR_STEP_AGREE)) {
        t->u.allreduce.blocking = 1;
    }
}

void collar_sched_block_colls(collar_sched_t *s)
{
    if (s->started) {
        return;   /* steps added by a continuation: the schedule is listed */
    }
    /* Without a progress thread on every rank, the collectives stay
     * nonblocking and the calling thread polls them together with
     * collar's other operations (MPI's progress rule). */
    const int may_block = s->comm != NULL && s->comm->all_threaded;
    for (int i = 0; may_block && i < s->nsteps; i++) {
        collar_step_t *t = &s->steps[i];
        if (t->kind == COLLAR_STEP_IALLREDUCE || t->kind == COLLAR_STEP_AGREE) {
            t->u.allreduce.blocking = 1;
        }
    }
    s->run_here = 1;
}

collar_status_t collar_sched_scratch(collar_sched_t *s, size_t bytes, void **ptr)
{
    if (staging_full(s)) {
        return COLLAR_ERR_INVALID;
    }
    if (collar_scratch_get(s->dev, bytes, ptr) == COLLAR_OK) {
        staging_note(s, *ptr, bytes, COLLAR_SLOT_SCRATCH);
        return COLLAR_OK;
    }
    /* The same messages and steps with the scratch in pinned memory:
     * slower reductions, but nothing the other ranks would notice.  Not
     * pageable memory, which a device kernel cannot read: without pinned
     * memory either, the operation fails and drains. */
    if (collar_log_first("scratch-fallback")) {
        collar_warn(MEM, "no device scratch memory; reductions read "
                    "pinned host memory instead (slower)");
    }
    collar_status_t st = collar_pool_get(s->dev, bytes, ptr);
    if (st != COLLAR_OK) {
        return staging_drain(s, bytes, st, "no device scratch and no pinned "
                             "memory for its reductions", ptr);
    }
    staging_note(s, *ptr, bytes, COLLAR_SLOT_PINNED);
    return COLLAR_OK;
}

/* MPI_Type_size, or 1 without MPI (the unit tests). */
static int type_size(MPI_Datatype dt)
{
    int init = 0, size = 1;
    PMPI_Initialized(&init);
    if (init) {
        PMPI_Type_size(dt, &size);
    }
    return size;
}

/* The buffer and byte count a PMPI step hands over (NULL: none), and its
 * second buffer (an allreduce's send buffer) in *second. */
static const void *step_pmpi_buf(const collar_step_t *t, size_t *bytes,
                                 const void **second)
{
    int size;
    *second = NULL;
    switch (t->kind) {
    case COLLAR_STEP_IALLREDUCE:
        size = type_size(t->u.allreduce.dt);
        *bytes = (size_t)t->u.allreduce.count * (size_t)(size > 0 ? size : 1);
        if (t->u.allreduce.sbuf != MPI_IN_PLACE) {
            *second = t->u.allreduce.sbuf;
        }
        return t->u.allreduce.rbuf;
    case COLLAR_STEP_ISEND:
    case COLLAR_STEP_IRECV:
        size = type_size(t->u.p2p.dt);
        *bytes = (size_t)t->u.p2p.count * (size_t)(size > 0 ? size : 1);
        return t->u.p2p.buf;
    default:
        return NULL;
    }
}

collar_status_t collar_sched_check_pmpi(const collar_sched_t *s)
{
    if (s->pmpi_device_ok || s->dev->is_dev_scratch == NULL) {
        return COLLAR_OK;
    }
    for (int i = 0; i < s->nsteps; i++) {
        size_t bytes = 0;
        const void *second;
        const void *buf = step_pmpi_buf(&s->steps[i], &bytes, &second);
        if ((buf != NULL && s->dev->is_dev_scratch(buf, bytes))
            || (second != NULL && s->dev->is_dev_scratch(second, bytes))) {
            collar_error(COLL, "schedule %llu step %d (%s) hands device scratch "
                         "%p to an MPI library that does not take device "
                         "pointers", (unsigned long long)s->seq, i,
                         s->steps[i].kind == COLLAR_STEP_IALLREDUCE ? "internal allreduce"
                         : s->steps[i].kind == COLLAR_STEP_ISEND ? "internal send"
                         : "internal receive", buf);
            return COLLAR_ERR_INVALID;
        }
    }
    return COLLAR_OK;
}

void collar_sched_observe_buffers(collar_sched_t *s, const void *send,
                                  size_t send_len, const void *recv,
                                  size_t recv_len)
{
    s->obs_send = send;
    s->obs_send_len = send_len;
    s->obs_recv = recv;
    s->obs_recv_len = recv_len;
}

void collar_sched_start(collar_sched_t *s)
{
    if (collar_cfg.sim_strict && collar_sched_check_pmpi(s) != COLLAR_OK) {
        abort();  /* COLLAR_SIM_STRICT: a test is to fail loudly */
    }
    if (collar_observe && s->obs.t0 == 0) {
        collar_obs_coll_begin(&s->obs, s->stats.coll, s->stats.alg,
                              s->stats.bytes);
    }
    s->started = 1;
    if (s->ncoll > s->coll_issued || s->nextend > 0) {
        /* Collectives to issue, or a continuation that may add some. */
        s->ticket = s->comm->next_ticket++;
    } else {
        s->turn_done = 1;  /* takes no turn */
    }
}

/* Record the first error; later ones are consequences. */
static void sched_fail(collar_sched_t *s, collar_status_t st, int mpi_error)
{
    if (s->status == COLLAR_OK) {
        s->status = st;
        s->mpi_error = mpi_error != MPI_SUCCESS ? mpi_error : MPI_ERR_OTHER;
    }
}

void collar_sched_fail(collar_sched_t *s, collar_status_t st)
{
    sched_fail(s, st, MPI_ERR_OTHER);
}

void collar_sched_rewind(collar_sched_t *s)
{
    int ndone = 0, coll = 0, nextend = 0;
    for (int i = 0; i < s->nsteps; i++) {
        collar_step_t *t = &s->steps[i];
        if (t->once && t->state == STEP_DONE) {
            /* Set-up done for good (a registration, a continuation that
             * appended the steps that follow): not run again. */
            ndone++;
            coll += t->kind == COLLAR_STEP_IALLREDUCE || t->kind == COLLAR_STEP_AGREE;
            continue;
        }
        nextend += t->kind == COLLAR_STEP_CALL && t->u.call.extends;
        t->state = STEP_PENDING;
        t->req = MPI_REQUEST_NULL;
        memset(&t->ev, 0, sizeof(t->ev));
        memset(&t->obs, 0, sizeof(t->obs));
    }
    memset(&s->obs, 0, sizeof(s->obs));
    s->ndone = ndone;
    s->first_open = 0;
    s->coll_issued = coll;
    s->nextend = nextend;
    s->nactive = 0;
    s->started = 0;
    s->turn_done = 0;
    s->status = COLLAR_OK;
    s->mpi_error = MPI_SUCCESS;
    s->finished = 0;
    s->check_done = 0;
    s->next = NULL;
}

int collar_sched_steps_done(const collar_sched_t *s, int first, int n)
{
    for (int i = first; i < first + n && i < s->nsteps; i++) {
        if (s->steps[i].state != STEP_DONE) {
            return 0;
        }
    }
    return 1;
}

static void pass_turn(collar_sched_t *s)
{
    if (!s->turn_done && s->comm->coll_turn == s->ticket) {
        s->comm->coll_turn++;
        s->turn_done = 1;
    }
}

/* The turn passes on once every collective is issued and no continuation
 * can add more. */
static void maybe_pass_turn(collar_sched_t *s)
{
    if (s->coll_issued == s->ncoll && s->nextend == 0) {
        pass_turn(s);
    }
}

static int deps_done(const collar_sched_t *s, const collar_step_t *t)
{
    if (t->kind == COLLAR_STEP_AGREE && t->u.allreduce.count
        && s->ndone < s->nsteps - 1) {
        return 0;  /* after every other step (it is the last one) */
    }
    for (int d = 0; d < t->ndeps; d++) {
        if (s->steps[t->deps[d]].state != STEP_DONE) {
            return 0;
        }
    }
    return 1;
}

static const char *step_name(collar_step_kind_t kind)
{
    switch (kind) {
    case COLLAR_STEP_COPY:        return "device copy";
    case COLLAR_STEP_DEV_REDUCE:  return "device reduction";
    case COLLAR_STEP_DEV_REDUCE_N: return "device reduction of n inputs";
    case COLLAR_STEP_HOST_REDUCE: return "host reduction";
    case COLLAR_STEP_IALLREDUCE:  return "internal allreduce";
    case COLLAR_STEP_ISEND:       return "internal send";
    case COLLAR_STEP_IRECV:       return "internal receive";
    case COLLAR_STEP_ORDER:       return "device ordering";
    case COLLAR_STEP_REQUEST:     return "collective";
    case COLLAR_STEP_AGREE:       return "status agreement";
    case COLLAR_STEP_CALL:        return "set-up";
    }
    return "step";
}

/* The communicator of a collective step (collar_step_comm_t). */
static MPI_Comm step_comm(const collar_sched_t *s, const collar_step_t *t)
{
    switch (t->u.allreduce.on) {
    case COLLAR_STEP_ON_NODE:
        return s->comm->node_sched;
    case COLLAR_STEP_ON_CROSS:
        return s->comm->cross_comm;
    default:
        return s->comm->private_comm;
    }
}

/* ------------------------------------------------------------ observation */

/* p in [base, base + len): addresses compared as numbers (they may point
 * into different objects). */
static int within(const void *p, const void *base, size_t len)
{
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;
    return base != NULL && a >= b && a - b < len;
}

/* What a step is to the tools that watch (collar_observe). */
static collar_phase_t step_phase(const collar_sched_t *s, const collar_step_t *t)
{
    switch (t->kind) {
    case COLLAR_STEP_COPY:
        if (within(t->u.copy.dst, s->obs_recv, s->obs_recv_len)) {
            return COLLAR_PHASE_COPY_OUT;
        }
        return within(t->u.copy.src, s->obs_send, s->obs_send_len)
               ? COLLAR_PHASE_COPY_IN : COLLAR_PHASE_COPY;
    case COLLAR_STEP_DEV_REDUCE:
    case COLLAR_STEP_DEV_REDUCE_N:  return COLLAR_PHASE_REDUCE;
    case COLLAR_STEP_HOST_REDUCE:   return COLLAR_PHASE_HOST_REDUCE;
    case COLLAR_STEP_IALLREDUCE:
        /* ipc's signals are one-int MPI_MAX allreduces out of place; the
         * data's are in place or of the application's type. */
        return t->u.allreduce.count == 1 && t->u.allreduce.dt == MPI_INT
               && t->u.allreduce.op == MPI_MAX
               && t->u.allreduce.sbuf != MPI_IN_PLACE
               && !within(t->u.allreduce.sbuf, s->obs_send, s->obs_send_len)
               ? COLLAR_PHASE_SIGNAL : COLLAR_PHASE_MPI_ALLREDUCE;
    case COLLAR_STEP_ISEND:         return COLLAR_PHASE_MPI_SEND;
    case COLLAR_STEP_IRECV:         return COLLAR_PHASE_MPI_RECV;
    case COLLAR_STEP_REQUEST:
        return t->u.request.agree ? COLLAR_PHASE_AGREE : COLLAR_PHASE_MPI_COLL;
    case COLLAR_STEP_AGREE:         return COLLAR_PHASE_AGREE;
    case COLLAR_STEP_ORDER:         return COLLAR_PHASE_ORDER;
    case COLLAR_STEP_CALL:
        return t->u.call.agree ? COLLAR_PHASE_AGREE : COLLAR_PHASE_CALL;
    }
    return COLLAR_PHASE_CALL;
}

/* The bytes a step moves or reduces (0: none to speak of). */
static size_t step_bytes(const collar_step_t *t)
{
    const void *second;
    size_t bytes = 0;
    switch (t->kind) {
    case COLLAR_STEP_COPY:
        return t->u.copy.bytes;
    case COLLAR_STEP_DEV_REDUCE:
    case COLLAR_STEP_HOST_REDUCE:
        return t->u.reduce.count * collar_dtype_size(t->u.reduce.dt);
    case COLLAR_STEP_DEV_REDUCE_N:
        return t->u.reduce_n.count * collar_dtype_size(t->u.reduce_n.dt);
    default:
        return step_pmpi_buf(t, &bytes, &second) != NULL ? bytes : 0;
    }
}

/* Where a step runs: its stream, the MPI library, or the host. */
static int step_track(const collar_step_t *t)
{
    switch (t->kind) {
    case COLLAR_STEP_COPY:
        return COLLAR_TRACK_STREAM + t->u.copy.stream;
    case COLLAR_STEP_DEV_REDUCE:
        return COLLAR_TRACK_STREAM + t->u.reduce.stream;
    case COLLAR_STEP_DEV_REDUCE_N:
        return COLLAR_TRACK_STREAM + t->u.reduce_n.stream;
    case COLLAR_STEP_IALLREDUCE:
    case COLLAR_STEP_ISEND:
    case COLLAR_STEP_IRECV:
    case COLLAR_STEP_REQUEST:
    case COLLAR_STEP_AGREE:
        return COLLAR_TRACK_MPI;
    default:
        return COLLAR_TRACK_HOST;
    }
}

static void observe_begin(const collar_sched_t *s, collar_step_t *t)
{
    if (t->obs.t0 == 0) {
        collar_obs_phase_begin(&t->obs, step_phase(s, t), step_bytes(t));
    }
}

/* Step `t` (index i) completed.  Device work: when it actually ran, where
 * the device knows. */
static void observe_end(const collar_sched_t *s, collar_step_t *t, int i)
{
    if (t->obs.t0 == 0) {
        return;   /* skipped while draining, or begun before observing */
    }
    uint64_t start = 0, end = 0;
    if ((t->kind == COLLAR_STEP_COPY || t->kind == COLLAR_STEP_DEV_REDUCE
         || t->kind == COLLAR_STEP_DEV_REDUCE_N)
        && s->dev->event_times != NULL
        && !s->dev->event_times(&t->ev, &start, &end)) {
        start = end = 0;
    }
    collar_obs_phase_end(&t->obs, step_phase(s, t), step_bytes(t),
                         step_track(t), &s->obs, i, start, end);
}

/* A collective step (IALLREDUCE, AGREE) completed: what the status
 * agreement, folded or apart, says of the other ranks. */
static void coll_done(collar_sched_t *s, const collar_step_t *t)
{
    const int folded = t->kind == COLLAR_STEP_IALLREDUCE
                       && t->u.allreduce.fold != NULL;
    if (folded) {
        /* Out of place, the flag's result is as far into rbuf. */
        const char *out = t->u.allreduce.fold;
        if (t->u.allreduce.sbuf != MPI_IN_PLACE) {
            out = (const char *)t->u.allreduce.rbuf
                  + (out - (const char *)t->u.allreduce.sbuf);
        }
        s->agree_out = !fold_is(out, t->u.allreduce.fold_dt,
                                !t->u.allreduce.fold_fail);
    }
    if ((t->kind == COLLAR_STEP_AGREE || folded) && s->agree_out && !s->agree_in
        && s->status == COLLAR_OK) {
        collar_error(COLL, "schedule %llu failed on another rank; its result "
                     "here is not complete", (unsigned long long)s->seq);
        sched_fail(s, COLLAR_ERR_MPI, MPI_ERR_OTHER);
    }
}

/* A collective step issued blocking (collar_sched_block_colls): the MPI
 * library's own allreduce, in the calling thread, which returns once every
 * rank has contributed. */
static int coll_blocking(collar_sched_t *s, const collar_step_t *t)
{
    if (t->kind == COLLAR_STEP_AGREE) {
        return PMPI_Allreduce(&s->agree_in, &s->agree_out, 1, MPI_INT, MPI_MAX,
                              s->comm->private_comm);
    }
    return PMPI_Allreduce(t->u.allreduce.sbuf, t->u.allreduce.rbuf,
                          t->u.allreduce.count, t->u.allreduce.dt,
                          t->u.allreduce.op, step_comm(s, t));
}

/* Start step `t`.  Returns OK (now active or already done), INPROGRESS
 * (must wait for its turn) or an error. */
static collar_status_t step_issue(collar_sched_t *s, collar_step_t *t,
                                  int *mpi_rc)
{
    const collar_device_t *dev = s->dev;
    collar_status_t st = COLLAR_OK;
    int rc;

    /* A device step of a serial schedule in a blocking call: the host
     * waits for it here (the backend's `done` NULL), since the schedule
     * has nothing else to do meanwhile; the step is then done, with no
     * event to poll. */
    collar_event_t *done = s->blocking && s->serial_device ? NULL : &t->ev;

    switch (t->kind) {
    case COLLAR_STEP_COPY:
        if (t->u.copy.cpu && dev->copy_now != NULL) {
            if (collar_observe & COLLAR_OBS_STEPS) {
                observe_begin(s, t);   /* the work is done here, inline */
            }
            st = dev->copy_now(t->u.copy.dst, t->u.copy.src, t->u.copy.bytes);
            if (st == COLLAR_OK) {
                memset(&t->ev, 0, sizeof(t->ev));
                t->state = STEP_DONE;
                return COLLAR_OK;
            }
            if (st != COLLAR_ERR_UNAVAILABLE) {
                return st;
            }
        }
        st = dev->copy_async(t->u.copy.dst, t->u.copy.src, t->u.copy.bytes,
                             t->u.copy.stream, done);
        break;
    case COLLAR_STEP_DEV_REDUCE:
        st = dev->reduce_async(t->u.reduce.inout, t->u.reduce.in,
                               t->u.reduce.count, t->u.reduce.dt,
                               t->u.reduce.op, t->u.reduce.stream, done);
        break;
    case COLLAR_STEP_DEV_REDUCE_N:
        if (dev->reduce_n_async == NULL) {
            return COLLAR_ERR_UNSUPPORTED;
        }
        st = dev->reduce_n_async(t->u.reduce_n.dst, t->u.reduce_n.src,
                                 t->u.reduce_n.n, t->u.reduce_n.count,
                                 t->u.reduce_n.dt, t->u.reduce_n.op,
                                 t->u.reduce_n.stream, done);
        break;
    case COLLAR_STEP_HOST_REDUCE:
        if (collar_observe & COLLAR_OBS_STEPS) {
            observe_begin(s, t);   /* the work is done here, inline */
        }
        if (collar_reduce_host(t->u.reduce.inout, t->u.reduce.in,
                               t->u.reduce.count, t->u.reduce.dt,
                               t->u.reduce.op) != 0) {
            return COLLAR_ERR_UNSUPPORTED;
        }
        t->state = STEP_DONE;
        return COLLAR_OK;
    case COLLAR_STEP_ORDER:
        if (collar_observe & COLLAR_OBS_STEPS) {
            observe_begin(s, t);
        }
        COLLAR_CHECK(dev->order_after_caller());
        t->state = STEP_DONE;
        return COLLAR_OK;
    case COLLAR_STEP_IALLREDUCE:
    case COLLAR_STEP_AGREE:
        if (s->comm->coll_turn != s->ticket || t->u.allreduce.ord != s->coll_issued) {
            return COLLAR_INPROGRESS;
        }
        if (t->u.allreduce.fold != NULL) {
            /* As at an AGREE step: this rank's contribution is final. */
            s->agree_in = s->status != COLLAR_OK;
            fold_put(t->u.allreduce.fold, t->u.allreduce.fold_dt,
                     s->agree_in ? t->u.allreduce.fold_fail
                                 : !t->u.allreduce.fold_fail);
        }
        if (t->kind == COLLAR_STEP_AGREE) {
            /* Everything this rank's contribution depends on is done. */
            s->agree_in = s->status != COLLAR_OK;
            s->agree_out = 0;
        }
        rc = t->u.allreduce.blocking ? coll_blocking(s, t)
             : t->kind == COLLAR_STEP_AGREE
             ? PMPI_Iallreduce(&s->agree_in, &s->agree_out, 1, MPI_INT, MPI_MAX,
                               s->comm->private_comm, &t->req)
             : PMPI_Iallreduce(t->u.allreduce.sbuf, t->u.allreduce.rbuf,
                               t->u.allreduce.count, t->u.allreduce.dt,
                               t->u.allreduce.op, step_comm(s, t), &t->req);
        if (rc != MPI_SUCCESS) {
            *mpi_rc = rc;
            return COLLAR_ERR_MPI;
        }
        s->coll_issued++;
        maybe_pass_turn(s);
        if (t->u.allreduce.blocking) {
            coll_done(s, t);
            t->state = STEP_DONE;
        } else {
            t->state = STEP_ACTIVE;
        }
        return COLLAR_OK;
    case COLLAR_STEP_REQUEST:
        t->req = *t->u.request.req;
        t->state = STEP_ACTIVE;
        return COLLAR_OK;
    case COLLAR_STEP_CALL:
        return COLLAR_ERR_INVALID;   /* call_poll */
    case COLLAR_STEP_ISEND:
    case COLLAR_STEP_IRECV:
        if (t->kind == COLLAR_STEP_ISEND) {
            rc = PMPI_Isend(t->u.p2p.buf, t->u.p2p.count, t->u.p2p.dt,
                            t->u.p2p.peer, t->u.p2p.tag, s->comm->private_comm,
                            &t->req);
        } else {
            rc = PMPI_Irecv(t->u.p2p.buf, t->u.p2p.count, t->u.p2p.dt,
                            t->u.p2p.peer, t->u.p2p.tag, s->comm->private_comm,
                            &t->req);
        }
        if (rc != MPI_SUCCESS) {
            *mpi_rc = rc;
            return COLLAR_ERR_MPI;
        }
        t->state = STEP_ACTIVE;
        return COLLAR_OK;
    }
    /* The device steps. */
    if (st < 0 && done == NULL) {
        /* Waited for: failed as it ran, or as it was issued (the same to
         * the schedule), reported as a polled step's failure is. */
        collar_error(COLL, "%s of schedule %llu failed: %s", step_name(t->kind),
                     (unsigned long long)s->seq, collar_status_string(st));
        sched_fail(s, st, MPI_ERR_OTHER);
    } else if (st < 0) {
        return st;
    }
    t->state = done == NULL ? STEP_DONE : STEP_ACTIVE;
    return COLLAR_OK;
}

/* Steps that exchange data with the other ranks: still issued after a
 * failure (see the top of this file). */
static int step_is_comm(collar_step_kind_t kind)
{
    return kind == COLLAR_STEP_IALLREDUCE || kind == COLLAR_STEP_ISEND
           || kind == COLLAR_STEP_IRECV || kind == COLLAR_STEP_REQUEST
           || kind == COLLAR_STEP_AGREE || kind == COLLAR_STEP_CALL;
}

/*
 * Run CALL step i (pending with its dependencies done, or active).  It may
 * append steps (s->steps can move).  Returns 1 when the step is done now.
 */
static int call_poll(collar_sched_t *s, int i)
{
    collar_step_t *t = &s->steps[i];
    const int extends = t->u.call.extends;
    if (collar_observe & COLLAR_OBS_STEPS) {
        observe_begin(s, t);
    }
    s->extending = extends;
    collar_status_t st = t->u.call.fn(s, t->u.call.arg);
    s->extending = 0;
    t = &s->steps[i];
    if (st == COLLAR_INPROGRESS) {
        if (t->state == STEP_PENDING) {
            t->state = STEP_ACTIVE;
            s->nactive++;
        }
        return 0;
    }
    if (st < 0) {
        collar_error(COLL, "%s of schedule %llu failed: %s", step_name(t->kind),
                     (unsigned long long)s->seq, collar_status_string(st));
        sched_fail(s, st, MPI_ERR_OTHER);
    }
    if (t->state == STEP_ACTIVE) {
        s->nactive--;
    }
    t->state = STEP_DONE;
    s->ndone++;
    if (collar_observe & COLLAR_OBS_STEPS) {
        observe_end(s, &s->steps[i], i);
    }
    if (extends) {
        s->nextend--;
        if (collar_cfg.sim_strict && collar_sched_check_pmpi(s) != COLLAR_OK) {
            abort();  /* COLLAR_SIM_STRICT, as at collar_sched_start */
        }
        maybe_pass_turn(s);
    }
    return 1;
}

/* Poll an active step.  OK: it completed (or failed: see s->status). */
static collar_status_t step_test(collar_sched_t *s, collar_step_t *t)
{
    if (t->kind == COLLAR_STEP_COPY || t->kind == COLLAR_STEP_DEV_REDUCE
        || t->kind == COLLAR_STEP_DEV_REDUCE_N) {
        collar_status_t st = s->dev->event_query(&t->ev);
        if (st == COLLAR_INPROGRESS) {
            return COLLAR_INPROGRESS;
        }
        if (st < 0) {
            collar_error(COLL, "%s of schedule %llu failed: %s", step_name(t->kind),
                         (unsigned long long)s->seq, collar_status_string(st));
            sched_fail(s, st, MPI_ERR_OTHER);
        }
        return COLLAR_OK;
    }
    int flag = 0;
    int rc = PMPI_Test(&t->req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        collar_error(COLL, "%s of schedule %llu failed (MPI error %d)",
                     step_name(t->kind), (unsigned long long)s->seq, rc);
        sched_fail(s, COLLAR_ERR_MPI, rc);
        return COLLAR_OK;
    }
    if (flag && (t->kind == COLLAR_STEP_IALLREDUCE || t->kind == COLLAR_STEP_AGREE)) {
        coll_done(s, t);
    }
    return flag ? COLLAR_OK : COLLAR_INPROGRESS;
}

/* The check that gates a schedule (s->check) failed on every rank: every
 * step is given up unissued, and the schedule ends with `mpi_error` once
 * it has passed its turn on. */
static void sched_abandon(collar_sched_t *s, int mpi_error)
{
    sched_fail(s, COLLAR_ERR_MPI, mpi_error);
    for (int i = 0; i < s->nsteps; i++) {
        if (s->steps[i].state == STEP_PENDING) {
            s->steps[i].state = STEP_DONE;
            s->ndone++;
        }
    }
    s->first_open = s->nsteps;
    s->coll_issued = s->ncoll;
    s->nextend = 0;
    s->abandoned = 1;
}

/* Whether the schedule may issue: its check (if any) is over.  A check
 * that failed abandons it. */
static int check_gate(collar_sched_t *s)
{
    if (s->check == NULL || s->check_done) {
        return 1;
    }
    int flag = 0;
    int rc = PMPI_Test(collar_check_request(s->check), &flag, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && !flag) {
        return 0;
    }
    s->check_done = 1;
    if (rc == MPI_SUCCESS) {
        rc = collar_check_result(s->check);
    } else {
        collar_error(COLL, "COLLAR_CHECK: the check of schedule %llu failed "
                     "(MPI error %d)", (unsigned long long)s->seq, rc);
    }
    if (rc != MPI_SUCCESS) {
        sched_abandon(s, rc);
    }
    return 1;
}

collar_status_t collar_sched_progress(collar_sched_t *s)
{
    if (s->finished) {
        return COLLAR_OK;
    }
    if (!check_gate(s)) {
        return COLLAR_INPROGRESS;
    }
    int changed;
    do {
        changed = 0;
        int all_done_below = 1;
        for (int i = s->first_open; i < s->nsteps; i++) {
            collar_step_t *t = &s->steps[i];
            if (t->kind == COLLAR_STEP_CALL
                && (t->state == STEP_ACTIVE
                    || (t->state == STEP_PENDING && deps_done(s, t)))) {
                changed |= call_poll(s, i);
                t = &s->steps[i];
            } else if (t->state == STEP_ACTIVE) {
                if (step_test(s, t) == COLLAR_OK) {
                    t->state = STEP_DONE;
                    s->nactive--;
                    s->ndone++;
                    changed = 1;
                    if (collar_observe & COLLAR_OBS_STEPS) {
                        observe_end(s, t, i);
                    }
                }
            } else if (t->state == STEP_PENDING && deps_done(s, t)) {
                int mpi_rc = MPI_SUCCESS;
                collar_status_t st = COLLAR_OK;
                if (s->status != COLLAR_OK && !step_is_comm(t->kind)) {
                    /* Draining: device and host work is skipped. */
                    t->state = STEP_DONE;
                } else {
                    st = step_issue(s, t, &mpi_rc);
                }
                if (st < 0) {
                    collar_error(COLL, "cannot start %s of schedule %llu: %s",
                                 step_name(t->kind), (unsigned long long)s->seq,
                                 collar_status_string(st));
                    sched_fail(s, st, mpi_rc);
                    /* Given up: done, so that the steps after it drain; a
                     * collective counts as issued, so that the turn passes
                     * on after this schedule's last one. */
                    if (t->kind == COLLAR_STEP_IALLREDUCE
                        || t->kind == COLLAR_STEP_AGREE) {
                        s->coll_issued++;
                        maybe_pass_turn(s);
                    }
                    t->state = STEP_DONE;
                    s->ndone++;
                    changed = 1;
                } else if (st == COLLAR_OK) {
                    changed = 1;
                    if (collar_observe & COLLAR_OBS_STEPS
                        && t->state != STEP_PENDING) {
                        observe_begin(s, t);
                        if (t->state == STEP_DONE) {
                            observe_end(s, t, i);
                        }
                    }
                    if (t->state == STEP_DONE) {
                        s->ndone++;
                    } else {
                        s->nactive++;
                    }
                }
            }
            if (t->state != STEP_DONE && all_done_below) {
                s->first_open = i;
                all_done_below = 0;
            }
        }
        if (all_done_below) {
            s->first_open = s->nsteps;
        }
    } while (changed && s->ndone < s->nsteps);

    /* A schedule whose collectives were all issued before its turn came (a
     * continuation that added none) passes it on when it comes. */
    if (!s->turn_done) {
        maybe_pass_turn(s);
    }
    /* A failed schedule drains to the end like a good one: every collective
     * step is issued or given up, and the last one passes the turn on. */
    if (s->turn_done && s->nactive == 0 && s->ndone == s->nsteps) {
        s->finished = 1;
        if (collar_observe && s->obs.t0 != 0) {
            collar_obs_coll_end(&s->obs, s->stats.coll, s->stats.alg,
                                s->stats.bytes);
        }
        return COLLAR_OK;
    }
    return COLLAR_INPROGRESS;
}
