/*
 * collar - the `nccl` allreduce: ncclAllReduce on collar's device stream,
 * with NCCL loaded at run time (dlopen of libnccl.so.2): no build or link
 * dependency, and nothing changes where the library is absent (the
 * algorithm falls back, with its reason, when asked for).
 *
 * One NCCL communicator per application communicator (comm->nccl), made
 * at nccl's first blocking allreduce on it, in the communicator's turn
 * (collar_run_in_turn, as hier's communicators): rank 0 of the private
 * communicator takes a unique id (ncclGetUniqueId), broadcasts it on the
 * private communicator, and every rank calls ncclCommInitRank with the
 * device of the call's buffer current ("ncclCommInitRank ... creates a new
 * communicator (multi thread/process version) ... the CUDA device used is
 * the one current", NCCL API, Communicator Creation and Management).  The
 * outcome is agreed (MPI_MAX of the ncclResult_t on the private
 * communicator) before any rank uses the communicator: where one rank's
 * init failed (NCCL refuses two ranks on one GPU: ncclInvalidUsage,
 * "Duplicate GPU detected"), every rank destroys its communicator and the
 * algorithm falls back on every rank alike, said once with NCCL's last
 * error (ncclGetLastError).  A nonblocking or persistent start never makes
 * it (it would wait for the other ranks): until a blocking allreduce has,
 * those fall back, like hier.
 *
 * A call: the caller's queued device work first (ORDER), then one CALL
 * step that issues ncclAllReduce on collar's stream of the buffer's device
 * (dev->issue_async; in the communicator's turn, so that every rank issues
 * its NCCL operations on one communicator in the same order, as NCCL
 * requires: "NCCL operations ... must be called in the same order on all
 * ranks"), and polls the event recorded after it; then the status
 * agreement.  A receive buffer in host memory on this rank goes through
 * device scratch; a send buffer in host memory is first copied into the
 * device receive buffer (NCCL takes device pointers only).
 *
 * Types and ops NCCL has (ncclDataType_t, ncclRedOp_t): sum, prod, min,
 * max on int8, uint8, int32, uint32, int64, uint64, float16, bfloat16,
 * float, double; anything else falls back (collar_algo_eligible).
 */
#include "config.h"
#include "algo.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* NCCL's types, as nccl.h declares them (values from NCCL 2.x's nccl.h;
 * collar does not need the header to build). */
typedef struct nccl_comm *nccl_comm_t;
typedef int nccl_result_t;            /* ncclResult_t: ncclSuccess = 0 */
#define NCCL_SUCCESS 0
#define NCCL_INVALID_ARGUMENT 4
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } nccl_unique_id_t;
enum { NCCL_INT8 = 0, NCCL_UINT8 = 1, NCCL_INT32 = 2, NCCL_UINT32 = 3,
       NCCL_INT64 = 4, NCCL_UINT64 = 5, NCCL_FLOAT16 = 6, NCCL_FLOAT32 = 7,
       NCCL_FLOAT64 = 8, NCCL_BFLOAT16 = 9 };
enum { NCCL_SUM = 0, NCCL_PROD = 1, NCCL_MAX = 2, NCCL_MIN = 3 };

/* The entry points, from dlsym. */
static struct {
    pthread_once_t once;
    void          *lib;
    char           why[200];   /* when lib is NULL */
    nccl_result_t (*get_unique_id)(nccl_unique_id_t *id);
    nccl_result_t (*comm_init_rank)(nccl_comm_t *comm, int nranks,
                                    nccl_unique_id_t id, int rank);
    nccl_result_t (*all_reduce)(const void *sbuf, void *rbuf, size_t count,
                                int dt, int op, nccl_comm_t comm, void *stream);
    nccl_result_t (*comm_destroy)(nccl_comm_t comm);
    const char   *(*error_string)(nccl_result_t r);
    const char   *(*last_error)(nccl_comm_t comm);   /* NCCL >= 2.13; may be NULL */
} nc = { .once = PTHREAD_ONCE_INIT };

static void nccl_load(void)
{
    /* The soname NCCL's packages install; found as the dynamic loader
     * finds libraries (LD_LIBRARY_PATH, the cache). */
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(nc.why, sizeof(nc.why), "NCCL is not available (%s)",
                 e != NULL ? e : "libnccl.so.2 not found");
        return;
    }
    *(void **)&nc.get_unique_id = dlsym(lib, "ncclGetUniqueId");
    *(void **)&nc.comm_init_rank = dlsym(lib, "ncclCommInitRank");
    *(void **)&nc.all_reduce = dlsym(lib, "ncclAllReduce");
    *(void **)&nc.comm_destroy = dlsym(lib, "ncclCommDestroy");
    *(void **)&nc.error_string = dlsym(lib, "ncclGetErrorString");
    *(void **)&nc.last_error = dlsym(lib, "ncclGetLastError");
    if (nc.get_unique_id == NULL || nc.comm_init_rank == NULL
        || nc.all_reduce == NULL || nc.comm_destroy == NULL
        || nc.error_string == NULL) {
        snprintf(nc.why, sizeof(nc.why), "NCCL is not available "
                 "(libnccl.so.2 lacks ncclAllReduce or its companions)");
        dlclose(lib);
        return;
    }
    nc.lib = lib;
}

/* NCCL's type for collar's, or -1. */
static int nccl_dtype(collar_dtype_t dt)
{
    switch (dt) {
    case COLLAR_DT_INT8:     return NCCL_INT8;
    case COLLAR_DT_UINT8:    return NCCL_UINT8;
    case COLLAR_DT_INT32:    return NCCL_INT32;
    case COLLAR_DT_UINT32:   return NCCL_UINT32;
    case COLLAR_DT_INT64:    return NCCL_INT64;
    case COLLAR_DT_UINT64:   return NCCL_UINT64;
    case COLLAR_DT_FLOAT16:  return NCCL_FLOAT16;
    case COLLAR_DT_BFLOAT16: return NCCL_BFLOAT16;
    case COLLAR_DT_FLOAT:    return NCCL_FLOAT32;
    case COLLAR_DT_DOUBLE:   return NCCL_FLOAT64;
    default:                 return -1;
    }
}

static int nccl_op(collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  return NCCL_SUM;
    case COLLAR_OP_PROD: return NCCL_PROD;
    case COLLAR_OP_MAX:  return NCCL_MAX;
    case COLLAR_OP_MIN:  return NCCL_MIN;
    default:             return -1;
    }
}

int collar_algo_nccl_eligible_call(const collar_call_t *call)
{
    return call->mem != COLLAR_MEM_HOST && call->dense
           && nccl_dtype(call->cdt) >= 0 && nccl_op(call->cop) >= 0;
}

/* ---------------------------------------------------------- communicator */

static void nccl_release(void *p)
{
    if (p != NULL && nc.lib != NULL) {
        nc.comm_destroy((nccl_comm_t)p);
    }
}

typedef struct {
    nccl_unique_id_t id;
    int              nranks, rank;
    nccl_comm_t      comm;
    nccl_result_t    r;
} make_args_t;

static collar_status_t init_on_device(void *native, void *arg)
{
    (void)native;
    make_args_t *m = arg;
    m->r = nc.comm_init_rank(&m->comm, m->nranks, m->id, m->rank);
    return COLLAR_OK;
}

/* The buffer whose device the communicator being made goes to (set by
 * the blocking allreduce that makes it, in its own thread). */
static _Thread_local const void *make_ptr;
static _Thread_local const collar_device_t *make_dev;
static char made_why[8][240];   /* agreed reasons, by ncclResult_t (capped) */

static void nccl_make(collar_comm_t *c)
{
    pthread_once(&nc.once, nccl_load);
    make_args_t m = { .nranks = c->size, .rank = c->rank };
    /* 0 on rank 0: it has an id to give. */
    struct { int ok; nccl_unique_id_t id; } root = { 0 };
    nccl_result_t r = NCCL_SUCCESS;
    int usable = nc.lib != NULL && make_dev != NULL && make_dev->issue_async != NULL;
    if (c->rank == 0 && usable) {
        root.ok = nc.get_unique_id(&root.id) == NCCL_SUCCESS;
    }
    if (PMPI_Bcast(&root, (int)sizeof(root), MPI_BYTE, 0, c->private_comm)
        != MPI_SUCCESS) {
        root.ok = 0;
    }
    /* r: 0 made, -1 collar's reason (no library, no stream, no id),
     * else NCCL's error. */
    if (!usable || !root.ok) {
        r = -1;
    } else {
        m.id = root.id;
        collar_event_t ev;
        if (make_dev->issue_async(make_ptr, 0, init_on_device, &m, &ev) != COLLAR_OK) {
            r = -1;
        } else {
            collar_status_t st;
            while ((st = make_dev->event_query(&ev)) == COLLAR_INPROGRESS) {
            }
            r = m.r;
        }
    }
    /* The worst outcome, on every rank: collar's own (-1) counts worst. */
    int mine = r < 0 ? INT_MAX : r, worst = INT_MAX;
    if (PMPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, c->private_comm)
        != MPI_SUCCESS) {
        worst = INT_MAX;
    }
    if (worst == NCCL_SUCCESS) {
        c->nccl = m.comm;
        c->nccl_release = nccl_release;
        c->nccl_made = 1;
        return;
    }
    if (r == NCCL_SUCCESS) {
        nc.comm_destroy(m.comm);
    }
    c->nccl_made = -1;
    const int slot = worst == INT_MAX ? 0 : (worst & 7);
    if (worst == INT_MAX) {
        snprintf(made_why[slot], sizeof(made_why[slot]),
                 "nccl -> chunked: %s",
                 nc.lib == NULL ? nc.why
                 : "NCCL could not be set up on some rank (no device "
                   "stream, or no unique id)");
    } else {
        const char *last = nc.last_error != NULL ? nc.last_error(NULL) : NULL;
        snprintf(made_why[slot], sizeof(made_why[slot]),
                 "nccl -> chunked: ncclCommInitRank failed: %s%s%s",
                 nc.error_string(worst), last != NULL && *last ? ": " : "",
                 last != NULL ? last : "");
    }
    c->nccl_why = made_why[slot];
    collar_info(COLL, "cannot make NCCL's communicator; nccl falls back (%s)",
                c->nccl_why);
}

void collar_algo_nccl_eligible(const collar_call_t *call, collar_comm_t *comm,
                               int blocking, collar_in_turn_fn_t in_turn,
                               collar_plan_t *plan)
{
    if (plan->alg != COLLAR_ALG_NCCL) {
        return;
    }
    if (comm->nccl_made == 0 && blocking && in_turn != NULL) {
        make_ptr = call->rbuf;
        make_dev = call->dev;
        if (in_turn(comm, nccl_make) != COLLAR_OK) {
            comm->nccl_made = -1;
        }
    }
    if (comm->nccl_made == 1) {
        return;
    }
    plan->alg = collar_call_chunkable(call) ? COLLAR_ALG_CHUNKED : COLLAR_ALG_STAGED;
    if (comm->nccl_made == 0) {
        plan->fallback = "nccl -> chunked: nccl makes NCCL's communicator at "
                         "its first blocking allreduce on the communicator, "
                         "not in a nonblocking or persistent one";
    } else {
        plan->fallback = comm->nccl_why != NULL
            ? comm->nccl_why
            : "nccl -> chunked: NCCL's communicator could not be made";
    }
}

/* ------------------------------------------------------------------ call */

typedef struct {
    const void    *sbuf;
    void          *rbuf;
    size_t         count;
    int            dt, op;
    nccl_comm_t    comm;
    int            stream;
    int            issued;
    nccl_result_t  r;
    collar_event_t ev;
} nccl_op_t;

static collar_status_t issue_on_stream(void *native, void *arg)
{
    nccl_op_t *o = arg;
    o->r = nc.all_reduce(o->sbuf, o->rbuf, o->count, o->dt, o->op, o->comm,
                         native);
    return o->r == NCCL_SUCCESS ? COLLAR_OK : COLLAR_ERR_DEVICE;
}

/* The CALL step: ncclAllReduce issued in the communicator's turn, then the
 * event after it polled.  Resets itself when done, so that a persistent
 * operation runs it again. */
static collar_status_t nccl_step(collar_sched_t *s, void *arg)
{
    nccl_op_t *o = arg;
    if (!o->issued) {
        if (s->status != COLLAR_OK) {
            /* Draining (a step before failed here): the agreement tells
             * the other ranks, whose NCCL operation cannot complete
             * without this rank's: the same as a failed issue below. */
            return COLLAR_OK;
        }
        if (s->comm->coll_turn != s->ticket) {
            return COLLAR_INPROGRESS;
        }
        collar_status_t st = s->dev->issue_async(o->rbuf, o->stream,
                                                 issue_on_stream, o, &o->ev);
        if (st != COLLAR_OK) {
            collar_error(COLL, "ncclAllReduce failed: %s",
                         o->r != NCCL_SUCCESS ? nc.error_string(o->r)
                                              : collar_status_string(st));
            return st;
        }
        o->issued = 1;
    }
    collar_status_t st = s->dev->event_query(&o->ev);
    if (st != COLLAR_INPROGRESS) {
        o->issued = 0;
    }
    return st;
}

static void nccl_cleanup(collar_sched_t *s)
{
    free(s->cleanup_arg);
}

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

collar_status_t collar_algo_nccl_build(const collar_call_t *call,
                                       const collar_plan_t *plan,
                                       collar_sched_t *s)
{
    (void)plan;
    const collar_comm_t *comm = s->comm;
    if (comm->nccl_made != 1 || !collar_algo_nccl_eligible_call(call)
        || s->dev->issue_async == NULL) {
        return COLLAR_ERR_INVALID;   /* collar_algo_nccl_eligible decides */
    }
    nccl_op_t *o = calloc(1, sizeof(*o));
    if (o == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    s->cleanup = nccl_cleanup;
    s->cleanup_arg = o;
    o->count = (size_t)call->count;
    o->dt = nccl_dtype(call->cdt);
    o->op = nccl_op(call->cop);
    o->comm = (nccl_comm_t)comm->nccl;
    o->stream = (int)(s->seq % (uint64_t)s->dev->nstreams());

    collar_step_t order = { .kind = COLLAR_STEP_ORDER };
    int dep;
    COLLAR_CHECK(collar_sched_add(s, &order, &dep));
    /* NCCL takes device pointers: a host receive buffer on this rank goes
     * through device scratch, a host send buffer is copied in first. */
    char *rbuf = (char *)call->rbuf + call->lo;
    const char *sbuf = call->in_place ? rbuf : (const char *)call->sbuf + call->lo;
    char *dst = rbuf;
    if (call->rmem == COLLAR_MEM_HOST) {
        COLLAR_CHECK(collar_sched_scratch(s, call->bytes, (void **)&dst));
    }
    collar_mem_kind_t skind = COLLAR_MEM_DEVICE;
    if (sbuf != rbuf) {
        COLLAR_CHECK(s->dev->mem_query(sbuf, &skind));
    }
    if (dst != rbuf || skind == COLLAR_MEM_HOST) {
        COLLAR_CHECK(add_copy(s, dst, sbuf, call->bytes, o->stream, dep, &dep));
        sbuf = dst;
    }
    o->sbuf = sbuf;
    o->rbuf = dst;
    collar_step_t t = { .kind = COLLAR_STEP_CALL, .ndeps = 1, .deps = { dep } };
    t.u.call.fn = nccl_step;
    t.u.call.arg = o;
    COLLAR_CHECK(collar_sched_add(s, &t, &dep));
    if (dst != rbuf) {
        COLLAR_CHECK(add_copy(s, rbuf, dst, call->bytes, o->stream, dep, &dep));
    }
    return collar_sched_add_agree(s, 1);
}
