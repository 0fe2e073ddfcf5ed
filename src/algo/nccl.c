/*
 * collar - the `nccl` allreduce: ncclAllReduce on collar's device stream,
 * with NCCL loaded at run time (dlopen of libnccl.so.2, or of
 * COLLAR_NCCL_LIBRARY): no build or link
 * dependency, and nothing changes where the library is absent (the
 * algorithm falls back, with its reason, when asked for).
 *
 * One NCCL communicator per application communicator (comm->nccl), made
 * at nccl's first blocking allreduce on it, in the communicator's turn
 * (collar_run_in_turn, as hier's communicators): every rank's readiness
 * is agreed first (a rank without the library would leave the others in
 * NCCL's init), then rank 0 of the private communicator takes a unique
 * id (ncclGetUniqueId), broadcasts it on a duplicate of the private
 * communicator, and every rank calls ncclCommInitRankConfig
 * (non-blocking; NCCL >= 2.14 is required) with the device of the call's
 * buffer current (NCCL user guide, "Creating a
 * Communicator": the id from ncclGetUniqueId "has to be broadcast to all
 * participating threads and processes", e.g. with MPI; API reference,
 * ncclCommInitRank: each rank is associated to the CUDA device set before
 * the call).  The outcome is agreed (the worst ncclResult_t, MPI_MAX on
 * that communicator) before any rank uses the communicator: where one
 * rank's init failed (the same CUDA device as two ranks "is not supported
 * and may lead to hangs"; NCCL refuses it with ncclInvalidUsage and
 * "Duplicate GPU detected"), every rank aborts its communicator and the
 * algorithm falls back on every rank alike, said once with NCCL's last
 * error (ncclGetLastError, whose comm argument "can be set to NULL").
 * The communicator's release is not collective (nccl_release).
 *
 * Order across communicators.  NCCL's operations on different
 * communicators must not be in flight together, and must be issued in the
 * same order on every rank (NCCL user guide, "Using multiple NCCL
 * communicators concurrently": they "should therefore be used at
 * different epochs with a locking mechanism, and applications should
 * ensure operations are submitted in the same order across ranks"); MPI
 * lets a program start nonblocking collectives on different communicators
 * in any order, and threads call blocking ones in any order.  So only a
 * blocking allreduce runs NCCL, and it completes its operation before it
 * returns (one NCCL operation in flight in the process: nccl_busy), in a
 * program that calls MPI from one thread at a time (MPI_THREAD_SERIALIZED
 * or below on every rank, agreed when the communicator is made: a program
 * at MPI_THREAD_MULTIPLE may call two blocking allreduces at once on two
 * communicators, in different orders on different ranks).  Nonblocking
 * and persistent calls, and every call of a program at
 * MPI_THREAD_MULTIPLE, fall back, alike on every rank; a nonblocking or
 * persistent start never makes the communicator either (it would wait
 * for the other ranks).
 *
 * A call: the caller's queued device work first (nccl_order), then one CALL
 * step that issues ncclAllReduce on collar's stream of the buffer's device
 * (dev->issue_async; in the communicator's turn, so that every rank issues
 * its NCCL operations on one communicator in the same order, which NCCL's
 * collectives need as MPI's do), and polls the event recorded after it;
 * then the status
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
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* NCCL's types, as nccl.h declares them (values from NCCL 2.x's nccl.h;
 * collar does not need the header to build). */
typedef struct nccl_comm *nccl_comm_t;
typedef int nccl_result_t;            /* ncclResult_t: ncclSuccess = 0 */
#define NCCL_SUCCESS 0
#define NCCL_INVALID_ARGUMENT 4
#define NCCL_REMOTE_ERROR 6
#define NCCL_IN_PROGRESS 7
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
    nccl_result_t (*all_reduce)(const void *sbuf, void *rbuf, size_t count,
                                int dt, int op, nccl_comm_t comm, void *stream);
    nccl_result_t (*comm_destroy)(nccl_comm_t comm);
    const char   *(*error_string)(nccl_result_t r);
    const char   *(*last_error)(nccl_comm_t comm);   /* NCCL >= 2.13; may be NULL */
    /* NCCL >= 2.14: the non-blocking communicator collar needs. */
    nccl_result_t (*comm_init_config)(nccl_comm_t *comm, int nranks,
                                      nccl_unique_id_t id, int rank,
                                      void *config);
    nccl_result_t (*async_error)(nccl_comm_t comm, nccl_result_t *r);
    nccl_result_t (*comm_abort)(nccl_comm_t comm);
    nccl_result_t (*comm_finalize)(nccl_comm_t comm);
} nc = { .once = PTHREAD_ONCE_INIT };

static void nccl_load(void)
{
    /* The soname NCCL's packages install, found as the dynamic loader
     * finds libraries (LD_LIBRARY_PATH, the cache); or COLLAR_NCCL_LIBRARY. */
    const char *name = collar_cfg.nccl_library != NULL && collar_cfg.nccl_library[0]
                       ? collar_cfg.nccl_library : "libnccl.so.2";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(nc.why, sizeof(nc.why), "NCCL is not available (%s)",
                 e != NULL ? e : name);
        return;
    }
    *(void **)&nc.get_unique_id = dlsym(lib, "ncclGetUniqueId");
    *(void **)&nc.all_reduce = dlsym(lib, "ncclAllReduce");
    *(void **)&nc.comm_destroy = dlsym(lib, "ncclCommDestroy");
    *(void **)&nc.error_string = dlsym(lib, "ncclGetErrorString");
    *(void **)&nc.last_error = dlsym(lib, "ncclGetLastError");
    *(void **)&nc.comm_init_config = dlsym(lib, "ncclCommInitRankConfig");
    *(void **)&nc.async_error = dlsym(lib, "ncclCommGetAsyncError");
    *(void **)&nc.comm_abort = dlsym(lib, "ncclCommAbort");
    *(void **)&nc.comm_finalize = dlsym(lib, "ncclCommFinalize");
    if (nc.get_unique_id == NULL || nc.all_reduce == NULL
        || nc.comm_destroy == NULL || nc.error_string == NULL
        || nc.async_error == NULL || nc.comm_abort == NULL) {
        snprintf(nc.why, sizeof(nc.why), "NCCL is not available "
                 "(libnccl.so.2 lacks ncclAllReduce or its companions)");
        dlclose(lib);
        return;
    }
    if (nc.comm_init_config == NULL || nc.comm_finalize == NULL) {
        /* Before 2.14 only the blocking ncclCommInitRank: a rank whose
         * peer's init failed would wait in it for ever, and
         * ncclCommDestroy would be the only (blocking, intra-node
         * collective) teardown. */
        snprintf(nc.why, sizeof(nc.why),
                 "NCCL older than 2.14 (no ncclCommInitRankConfig)");
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

/* A wait's turn of the loop: the others' threads (and the MPI library's
 * progress) get the processor, then the wait backs off to sleeps. */
static void nccl_pause(unsigned *spins)
{
    ++*spins;
    if (*spins > 4096) {
        const struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    } else if (*spins > 64) {
        sched_yield();
    }
}

/* comm->nccl: NCCL's communicator and the stream of its own that its
 * operations run on (one per communicator: an NCCL operation waits on its
 * stream for the other ranks). */
typedef struct nccl_state {
    nccl_comm_t            comm;
    collar_stream_t       *stream;
    const collar_device_t *dev;
    struct nccl_state     *next;   /* on the retired list */
} nccl_state_t;

/* The schedule whose NCCL operation is in flight in this process (NULL:
 * none): NCCL's operations, on whatever communicator, one at a time. */
static collar_sched_t *_Atomic nccl_busy;

/*
 * Teardown.  ncclCommFinalize and ncclCommDestroy (which finalizes a
 * communicator not yet finalized) are intra-node collectives (NCCL API
 * reference: "all ranks on the same node should call" them "to avoid a
 * hang"), while MPI_Comm_free, where collar lets its communicator go, is
 * local: ranks may free communicators in any order.  So the release only
 * starts ncclCommFinalize, which on a non-blocking communicator returns
 * ncclInProgress at once, and puts the communicator on the retired list;
 * ncclCommDestroy, purely local once the finalization is over
 * (ncclCommGetAsyncError says ncclSuccess), comes from nccl_poll_retired:
 * at nccl's next communicator, release or call, and at MPI_Finalize.
 */
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static nccl_state_t *retired;
static int nretired;   /* atomic: read without the lock, to skip it */

static void state_free(nccl_state_t *n)
{
    n->dev->stream_free(n->stream);
    free(n);
}

/* Destroys the retired communicators whose finalization is over (one that
 * failed is aborted); waits up to wait_s seconds for the rest. */
static void nccl_poll_retired(double wait_s)
{
    if (wait_s <= 0 && __atomic_load_n(&nretired, __ATOMIC_ACQUIRE) == 0) {
        return;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned spins = 0;
    pthread_mutex_lock(&retired_lock);
    for (;;) {
        for (nccl_state_t **pp = &retired; *pp != NULL;) {
            nccl_state_t *n = *pp;
            nccl_result_t r = NCCL_IN_PROGRESS;
            if (nc.async_error(n->comm, &r) != NCCL_SUCCESS) {
                r = NCCL_INVALID_ARGUMENT;
            }
            if (r == NCCL_IN_PROGRESS) {
                pp = &n->next;
                continue;
            }
            if (r == NCCL_SUCCESS) {
                nc.comm_destroy(n->comm);
            } else {
                nc.comm_abort(n->comm);
            }
            *pp = n->next;
            __atomic_sub_fetch(&nretired, 1, __ATOMIC_ACQ_REL);
            state_free(n);
        }
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (retired == NULL
            || (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec)
               >= wait_s) {
            break;
        }
        pthread_mutex_unlock(&retired_lock);
        nccl_pause(&spins);
        pthread_mutex_lock(&retired_lock);
    }
    const int left = retired != NULL && wait_s > 0;
    pthread_mutex_unlock(&retired_lock);
    if (left) {
        collar_warn(COLL, "NCCL communicators still being finalized after "
                    "%.0f s (a rank never freed its communicator?): left "
                    "as they are", wait_s);
    }
}

static void nccl_release(void *p)
{
    nccl_state_t *n = p;
    if (n == NULL) {
        return;
    }
    nccl_result_t r = nc.comm_finalize(n->comm);
    if (r != NCCL_SUCCESS && r != NCCL_IN_PROGRESS) {
        nc.comm_abort(n->comm);
        state_free(n);
        return;
    }
    pthread_mutex_lock(&retired_lock);
    n->next = retired;
    retired = n;
    __atomic_add_fetch(&nretired, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&retired_lock);
    nccl_poll_retired(0);
}

void collar_algo_nccl_finalize(void)
{
    /* Every rank is in MPI_Finalize, its communicators released: their
     * finalizations can all end. */
    nccl_poll_retired(10.0);
}

/* ncclConfig_t as NCCL 2.14 declares it (nccl.h: NCCL reads the fields
 * that `size` covers, so a library of any later version takes it). */
typedef struct {
    size_t      size;
    unsigned    magic;         /* 0xcafebeef */
    unsigned    version;       /* NCCL_VERSION(2, 14, 0) = 21400 */
    int         blocking;
    int         cga_cluster_size, min_ctas, max_ctas;
    const char *net_name;
    int         split_share;
} nccl_config_t;
#define NCCL_CONFIG_UNDEF_INT INT_MIN

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
    /* Non-blocking (config.blocking = 0): the call may return
     * ncclInProgress, and ncclCommGetAsyncError tells when the
     * communicator is ready or failed (NCCL API reference,
     * ncclCommInitRankConfig), so that a rank whose peer failed is not
     * left waiting inside NCCL: nccl_make aborts it. */
    nccl_config_t cfg = {
        .size = sizeof(cfg), .magic = 0xcafebeef, .version = 21400,
        .blocking = 0, .cga_cluster_size = NCCL_CONFIG_UNDEF_INT,
        .min_ctas = NCCL_CONFIG_UNDEF_INT, .max_ctas = NCCL_CONFIG_UNDEF_INT,
        .net_name = NULL, .split_share = NCCL_CONFIG_UNDEF_INT,
    };
    m->r = nc.comm_init_config(&m->comm, m->nranks, m->id, m->rank, &cfg);
    return COLLAR_OK;
}

/* The buffer whose device the communicator being made goes to (set by
 * the blocking allreduce that makes it, in its own thread). */
static _Thread_local const void *make_ptr;
static _Thread_local const collar_device_t *make_dev;
static char made_why[8][320];   /* agreed reasons, by ncclResult_t (capped) */


/* This rank cannot go on with the init (its own failed, or it could not
 * start it): every other rank is told, so that none waits for it. */
static void tell_others(MPI_Comm side, int size, int rank, MPI_Request *reqs,
                        int *sent)
{
    static const int v = 1;
    for (int p = 0; reqs != NULL && p < size; p++) {
        if (p != rank) {
            PMPI_Isend(&v, 1, MPI_INT, p, 0, side, &reqs[p]);
        }
    }
    *sent = reqs != NULL;
}

/*
 * Wait for this rank's init to finish while listening for the other ranks'
 * failure notices on `side`: a rank whose init failed says so to every
 * other rank, and a rank told so aborts its own init (which waits for the
 * failed rank in vain).  Returns this rank's outcome; *sent: it sent
 * notices, *heard: the notices it received.
 */
static nccl_result_t init_wait(make_args_t *m, MPI_Comm side, int size,
                               int rank, MPI_Request *reqs, int *sent,
                               int *heard)
{
    nccl_result_t r = m->r;
    unsigned spins = 0;
    while (r == NCCL_IN_PROGRESS) {
        if (nc.async_error(m->comm, &r) != NCCL_SUCCESS) {
            r = -1;
        }
        int flag = 0;
        MPI_Status st;
        if (r == NCCL_IN_PROGRESS
            && PMPI_Iprobe(MPI_ANY_SOURCE, 0, side, &flag, &st) == MPI_SUCCESS
            && flag) {
            int v;
            PMPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, 0, side, MPI_STATUS_IGNORE);
            (*heard)++;
            nc.comm_abort(m->comm);
            m->comm = NULL;
            return NCCL_REMOTE_ERROR;
        }
        nccl_pause(&spins);
    }
    if (r != NCCL_SUCCESS) {
        tell_others(side, size, rank, reqs, sent);
    }
    return r;
}

/* Why a rank cannot take part, agreed before any rank calls NCCL's init
 * (the worst on every rank): a rank that is not there would leave the
 * others waiting in it.  NCCL_THREADED: the program runs at
 * MPI_THREAD_MULTIPLE there (see the top of this file). */
enum { NCCL_READY = 0, NCCL_THREADED = 1, NCCL_NO_SETUP = 2,
       NCCL_NO_LIBRARY = 3 };

static void nccl_make(collar_comm_t *c)
{
    pthread_once(&nc.once, nccl_load);
    make_args_t m = { .nranks = c->size, .rank = c->rank };
    /* A communicator of its own for the set-up: its notices never meet
     * the messages of operations in flight on the private one.  Made, or
     * not, alike on every rank (agreed on the private communicator, in its
     * turn). */
    MPI_Comm side = MPI_COMM_NULL;
    int dup_ok = PMPI_Comm_dup(c->private_comm, &side) == MPI_SUCCESS, dup_all = 0;
    if (dup_ok && collar_fault(COLLAR_FAULT_SPLIT)) {
        PMPI_Comm_free(&side);   /* injected: this rank has none */
        dup_ok = 0;
    }
    collar_agree(&dup_ok, &dup_all, 1, MPI_MIN, c->private_comm,
                 "nccl's set-up communicator");
    if (!dup_all) {
        if (side != MPI_COMM_NULL) {
            PMPI_Comm_free(&side);
        }
        c->nccl_made = -1;
        c->nccl_why = "nccl -> chunked: the MPI library could not make "
                      "nccl's set-up communicator on some rank";
        return;
    }
    PMPI_Comm_set_errhandler(side, MPI_ERRORS_RETURN);
    nccl_result_t r = NCCL_SUCCESS;
    collar_stream_t *stream = NULL;
    nccl_state_t *state = malloc(sizeof(*state));
    int ready = nc.lib == NULL ? NCCL_NO_LIBRARY
                : collar_app_thread_level >= MPI_THREAD_MULTIPLE ? NCCL_THREADED
                : NCCL_READY;
    if (ready == NCCL_READY
        && (make_dev == NULL || make_dev->issue_async == NULL || state == NULL
            || make_dev->stream_new(make_ptr, &stream) != COLLAR_OK)) {
        ready = NCCL_NO_SETUP;
    }
    nccl_unique_id_t id;
    memset(&id, 0, sizeof(id));
    if (c->rank == 0 && ready == NCCL_READY
        && nc.get_unique_id(&id) != NCCL_SUCCESS) {
        ready = NCCL_NO_SETUP;
    }
    /* Every rank's readiness, then the id. */
    int mine[1] = { ready };
    int agreed[1] = { NCCL_NO_SETUP };
    collar_agree(mine, agreed, 1, MPI_MAX, side, "NCCL's readiness");
    if (agreed[0] == NCCL_READY) {
        /* The id, and whether every rank has it (a broadcast that failed
         * here must not leave the others in NCCL's init). */
        int got = PMPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, side) == MPI_SUCCESS;
        int all_got = 0;
        collar_agree(&got, &all_got, 1, MPI_MIN, side, "NCCL's unique id");
        if (!all_got) {
            agreed[0] = NCCL_NO_SETUP;
        }
    }
    /* r: 0 made, -1 collar's reason (no library, no stream, no id), else
     * NCCL's error. */
    int sent = 0, heard = 0;
    MPI_Request *reqs = malloc((size_t)c->size * sizeof(*reqs));
    for (int p = 0; reqs != NULL && p < c->size; p++) {
        reqs[p] = MPI_REQUEST_NULL;
    }
    if (agreed[0] != NCCL_READY) {
        r = -1;
    } else {
        m.id = id;
        collar_event_t ev;
        if (make_dev->issue_async(stream, init_on_device, &m, &ev) != COLLAR_OK) {
            r = -1;
            tell_others(side, c->size, c->rank, reqs, &sent);
        } else {
            unsigned spins = 0;
            while (make_dev->event_query(&ev) == COLLAR_INPROGRESS) {
                nccl_pause(&spins);
            }
            r = init_wait(&m, side, c->size, c->rank, reqs, &sent, &heard);
        }
    }
    /* The worst outcome, on every rank: collar's own (-1) counts worst,
     * an abort because another rank failed (1) least, NCCL's own errors
     * (16 + code) between; and the notices to take. */
    int out[2] = { r < 0 ? INT_MAX : r == NCCL_SUCCESS ? 0
                   : r == NCCL_REMOTE_ERROR && heard ? 1 : 16 + r,
                   sent }, all[2] = { INT_MAX, 0 };
    collar_agree(&out[0], &all[0], 1, MPI_MAX, side, "NCCL's init");
    collar_agree(&out[1], &all[1], 1, MPI_SUM, side, "NCCL's failure notices");
    for (int k = heard + sent; k < all[1]; k++) {
        int v;
        PMPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 0, side, MPI_STATUS_IGNORE);
    }
    if (reqs != NULL) {
        for (int k = 0; k < c->size; k++) {   /* (not MPI_Waitall with
                                                  MPI_STATUSES_IGNORE: gcc
                                                  warns about MPICH's) */
            PMPI_Wait(&reqs[k], MPI_STATUS_IGNORE);
        }
        free(reqs);
    }
    PMPI_Comm_free(&side);
    const int worst = all[0] == INT_MAX || all[0] < 16 ? all[0] : all[0] - 16;
    if (worst == NCCL_SUCCESS) {
        *state = (nccl_state_t){ .comm = m.comm, .stream = stream, .dev = make_dev };
        c->nccl = state;
        c->nccl_release = nccl_release;
        c->nccl_made = 1;
        return;
    }
    free(state);
    if (stream != NULL) {
        make_dev->stream_free(stream);
    }
    if (m.comm != NULL && r != -1) {
        /* ncclCommAbort frees a communicator whatever its state, a failed
         * or unfinished init's too (NCCL API reference). */
        nc.comm_abort(m.comm);
    }
    c->nccl_made = -1;
    const int slot = worst == INT_MAX ? 0 : (worst & 7);
    if (worst == INT_MAX) {
        /* The same words on every rank but where this rank has the
         * library's own reason (dlerror, or its version). */
        snprintf(made_why[slot], sizeof(made_why[slot]),
                 "nccl -> chunked: %s",
                 nc.lib == NULL ? nc.why
                 : agreed[0] == NCCL_NO_LIBRARY
                 ? "NCCL is not available on some rank (it could not be "
                   "loaded there, or is older than 2.14)"
                 : agreed[0] == NCCL_THREADED
                 ? "the program runs at MPI_THREAD_MULTIPLE on some rank, "
                   "where two threads may start collectives on two "
                   "communicators in different orders on different ranks, "
                   "which NCCL's operations must not (docs/nccl.md; "
                   "MPI_THREAD_SERIALIZED declares one thread at a time)"
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
    nccl_poll_retired(0);
    if (comm->nccl_made == 0 && blocking && in_turn != NULL) {
        /* The device of the call: the receive buffer's, or the send
         * buffer's where this rank receives into host memory. */
        make_ptr = call->rmem != COLLAR_MEM_HOST || call->in_place ? call->rbuf
                                                                    : call->sbuf;
        make_dev = call->dev;
        if (in_turn(comm, nccl_make) != COLLAR_OK) {
            comm->nccl_made = -1;
        }
    }
    if (comm->nccl_made == 1 && blocking) {
        return;
    }
    plan->alg = collar_call_chunkable(call) ? COLLAR_ALG_CHUNKED : COLLAR_ALG_STAGED;
    if (comm->nccl_made == 1) {
        /* An NCCL operation left in flight past its call could meet
         * another communicator's in another order on another rank (see
         * the top of this file); and a device-wide wait for the caller's
         * work (COLLAR_SYNC=device) would wait for it. */
        plan->fallback = "nccl -> chunked: only blocking allreduces run "
                         "NCCL (an NCCL operation left in flight could meet "
                         "another communicator's in a different order on "
                         "another rank)";
    } else if (comm->nccl_made == 0) {
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
    collar_stream_t *stream;
    int            issued;
    nccl_result_t  r;
    collar_event_t ev;
} nccl_op_t;

static collar_status_t issue_on_stream(void *native, void *arg)
{
    nccl_op_t *o = arg;
    o->r = nc.all_reduce(o->sbuf, o->rbuf, o->count, o->dt, o->op, o->comm,
                         native);
    /* On a non-blocking communicator ncclInProgress: the operation is in
     * the stream (and the event recorded after this returns follows it)
     * only once ncclCommGetAsyncError says ncclSuccess, and no other NCCL
     * call may come before (NCCL API reference, ncclCommGetAsyncError:
     * ncclInProgress means the operation is being enqueued in the
     * background, and the communicator's state must be queried until it
     * is ncclSuccess before another NCCL call). */
    unsigned spins = 0;
    while (o->r == NCCL_IN_PROGRESS) {
        if (nc.async_error(o->comm, &o->r) != NCCL_SUCCESS) {
            o->r = NCCL_INVALID_ARGUMENT;
        }
        nccl_pause(&spins);
    }
    return o->r == NCCL_SUCCESS ? COLLAR_OK : COLLAR_ERR_DEVICE;
}

/* The CALL step in place of ORDER: the caller's queued device work
 * first, as for every algorithm.  No NCCL operation of this process is in
 * flight past its own (blocking) call (collar_algo_nccl_eligible), so a
 * device-wide wait (COLLAR_SYNC=device) never waits for one. */
static collar_status_t nccl_order(collar_sched_t *s, void *arg)
{
    (void)arg;
    return s->dev->order_after_caller();
}

/* The CALL step: ncclAllReduce issued in the communicator's turn, then the
 * event after it polled.  Resets itself when done, so that a persistent
 * operation runs it again. */
static collar_status_t nccl_step(collar_sched_t *s, void *arg)
{
    nccl_op_t *o = arg;
    if (!o->issued) {
        /* Issued also when a step before failed here (draining, as every
         * schedule issues its collectives): the other ranks' NCCL
         * operation cannot complete without this rank's, and the status
         * agreement after it fails the call everywhere.  Only an issue
         * that fails (below) leaves them waiting (docs/nccl.md). */
        if (s->comm->coll_turn != s->ticket) {
            return COLLAR_INPROGRESS;
        }
        collar_sched_t *none = NULL;
        if (!atomic_compare_exchange_strong(&nccl_busy, &none, s)) {
            return COLLAR_INPROGRESS;   /* another's epoch (serialized threads) */
        }
        collar_status_t st = s->dev->issue_async(o->stream, issue_on_stream,
                                                 o, &o->ev);
        if (st != COLLAR_OK) {
            atomic_store(&nccl_busy, NULL);
            collar_error(COLL, "ncclAllReduce failed: %s",
                         o->r != NCCL_SUCCESS ? nc.error_string(o->r)
                                              : collar_status_string(st));
            return st;
        }
        o->issued = 1;
    }
    collar_status_t st = s->dev->event_query(&o->ev);
    nccl_result_t async = NCCL_SUCCESS;
    if (st == COLLAR_INPROGRESS && nc.async_error != NULL
        && nc.async_error(o->comm, &async) == NCCL_SUCCESS
        && async != NCCL_SUCCESS && async != NCCL_IN_PROGRESS) {
        /* NCCL's asynchronous error (a peer gone, a network failure):
         * its operation will not complete (ncclCommGetAsyncError). */
        collar_error(COLL, "ncclAllReduce failed: %s", nc.error_string(async));
        st = COLLAR_ERR_DEVICE;
    }
    if (st != COLLAR_INPROGRESS) {
        o->issued = 0;
        atomic_store(&nccl_busy, NULL);
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
    const nccl_state_t *state = comm->nccl;
    o->comm = state->comm;
    o->stream = state->stream;
    /* The copies around it (a host buffer on this rank) on collar's own. */
    const int stream = (int)(s->seq % (uint64_t)s->dev->nstreams());

    collar_step_t order = { .kind = COLLAR_STEP_CALL };
    order.u.call.fn = nccl_order;
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
        COLLAR_CHECK(add_copy(s, dst, sbuf, call->bytes, stream, dep, &dep));
        sbuf = dst;
    }
    o->sbuf = sbuf;
    o->rbuf = dst;
    collar_step_t t = { .kind = COLLAR_STEP_CALL, .ndeps = 1, .deps = { dep } };
    t.u.call.fn = nccl_step;
    t.u.call.arg = o;
    COLLAR_CHECK(collar_sched_add(s, &t, &dep));
    if (dst != rbuf) {
        COLLAR_CHECK(add_copy(s, rbuf, dst, call->bytes, stream, dep, &dep));
    }
    return collar_sched_add_agree(s, 1);
}
