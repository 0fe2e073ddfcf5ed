/*
 * collar - a stand-in NCCL for the tests (never installed): the few entry
 * points of NCCL's documented API that collar's `nccl` algorithm calls
 * (src/algo/nccl.c), over the CUDA emulation.  Built as libnccl.so.2
 * (tests/cudaemu/nccl.am); a test puts its directory on LD_LIBRARY_PATH,
 * where collar's dlopen("libnccl.so.2") finds it as it would find NCCL.
 *
 *   ncclGetUniqueId     a shared memory name (POSIX shm) in the id's bytes
 *   ncclCommInitRank    the ranks meet in that shared memory (each maps
 *                       it, says its device's PCI bus id and waits for
 *                       the others); two ranks on one GPU are refused as
 *                       NCCL refuses them: ncclInvalidUsage, with
 *                       "Duplicate GPU detected" for ncclGetLastError
 *   ncclAllReduce       queued on the stream (cudaemu_stream_enqueue):
 *                       on the stream's worker each rank puts its input
 *                       in its slot of the shared memory, a barrier, each
 *                       rank reduces every slot in rank order into its
 *                       output (the same bits on every rank), a barrier;
 *                       in slices of STUB_SLOT bytes
 *   ncclCommInitRankConfig  with blocking = 0: the same on a thread,
 *                       ncclInProgress until ncclCommGetAsyncError says
 *                       otherwise; ncclCommAbort stops it
 *   ncclCommFinalize    on a non-blocking communicator: ncclInProgress,
 *                       and ncclCommGetAsyncError says ncclSuccess once
 *                       every rank has called it (an intra-node
 *                       collective, as NCCL documents it)
 *   ncclCommDestroy     on a non-blocking communicator made, only after
 *                       its finalization is over: otherwise it would be
 *                       the collective teardown itself, called where the
 *                       others may never call it, and the stand-in says so
 *                       and aborts the process
 *   ncclCommAbort, ncclGetErrorString, ncclGetLastError, ncclGetVersion,
 *   ncclCommGetAsyncError
 *
 * Rules of NCCL's documentation it enforces by aborting the process with
 * a message: ncclCommDestroy before the finalization is over (above),
 * another ncclAllReduce before ncclCommGetAsyncError after ncclInProgress
 * (below), and an operation issued on one communicator while another
 * communicator's is in flight in the process ("RULE nccl-epochs",
 * epoch_enter).
 *
 * Error injection (NCCL_STUB_FAIL): "init" makes ncclCommInitRank fail
 * with ncclSystemError on every rank, "init@R" on rank R alone;
 * "allreduce" makes ncclAllReduce return ncclUnhandledCudaError.
 * NCCL_STUB_INPROGRESS=1: ncclAllReduce on a non-blocking communicator
 * returns ncclInProgress, as NCCL may, and queues its work only at the
 * next ncclCommGetAsyncError (which then says ncclSuccess); another
 * ncclAllReduce before that aborts the process.  A rank
 * that waits more than 60 s for the others fails (ncclSystemError for
 * init; the stream's operation gives up), so that a test never hangs.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cudaemu_int.h"
#include "../../src/reduce/reduce.h"

/* NCCL's ABI (nccl.h of NCCL 2.x). */
typedef enum { ncclSuccess = 0, ncclUnhandledCudaError = 1,
               ncclSystemError = 2, ncclInternalError = 3,
               ncclInvalidArgument = 4, ncclInvalidUsage = 5,
               ncclRemoteError = 6, ncclInProgress = 7 } ncclResult_t;
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
typedef struct ncclComm *ncclComm_t;

#define EXPORT __attribute__((visibility("default")))
#define STUB_MAX_RANKS 64
#define STUB_SLOT ((size_t)1 << 20)
#define STUB_WAIT_S 60

typedef struct {
    int      nranks;
    int      joined;      /* atomic */
    int      refused;     /* atomic: a duplicate GPU seen */
    unsigned arrived;     /* atomic: the barrier */
    unsigned gen;         /* atomic */
    int      finalized;   /* atomic: ranks that called ncclCommFinalize */
    char     bus[STUB_MAX_RANKS][32];
} shared_t;

struct ncclComm {
    shared_t *sh;
    size_t    len;
    int       rank, nranks, device;
    int       state;       /* atomic: ncclResult_t of a non-blocking init */
    int       abort;       /* atomic: ncclCommAbort during the init */
    int       has_thread;  /* non-blocking (ncclCommInitRankConfig) */
    pthread_t thread;
    int       finalizing;  /* ncclCommFinalize called */
    void     *pending;     /* NCCL_STUB_INPROGRESS: a job not yet queued */
    cudaStream_t pending_stream;
};

static char last_error[256];   /* ncclGetLastError: the process's last */

static size_t header_bytes(void)
{
    return (sizeof(shared_t) + 4095) & ~(size_t)4095;
}

static char *slot(struct ncclComm *c, int r)
{
    return (char *)c->sh + header_bytes() + (size_t)r * STUB_SLOT;
}

static int fail_wanted(const char *what, int rank)
{
    const char *f = getenv("NCCL_STUB_FAIL");
    size_t n = strlen(what);
    if (f == NULL || strncmp(f, what, n) != 0) {
        return 0;
    }
    return f[n] == '\0' || (f[n] == '@' && atoi(f + n + 1) == rank);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Every rank of the communicator here; 0 when one waited too long. */
static int barrier(struct ncclComm *c)
{
    const unsigned gen = __atomic_load_n(&c->sh->gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&c->sh->arrived, 1, __ATOMIC_ACQ_REL)
        == (unsigned)c->nranks) {
        __atomic_store_n(&c->sh->arrived, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->sh->gen, 1, __ATOMIC_RELEASE);
        return 1;
    }
    const double t0 = now_s();
    while (__atomic_load_n(&c->sh->gen, __ATOMIC_ACQUIRE) == gen) {
        if (now_s() - t0 > STUB_WAIT_S) {
            return 0;
        }
        sched_yield();
    }
    return 1;
}

EXPORT ncclResult_t ncclGetVersion(int *version)
{
    *version = 22809;
    return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:            return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:       return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:        return "remote process exited or there was a network error";
    case ncclInProgress:         return "NCCL operation in progress";
    }
    return "unknown result code";
}

EXPORT const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return last_error;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static unsigned counter;
    memset(id, 0, sizeof(*id));
    snprintf(id->internal, sizeof(id->internal), "/collar-nccl-stub-%ld-%u-%ld",
             (long)getpid(), __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED),
             (long)time(NULL));
    return ncclSuccess;
}

/* The ranks meet in the shared memory named by `id`; c->device, rank,
 * nranks set.  On failure nothing stays mapped. */
static ncclResult_t meet(struct ncclComm *c, const ncclUniqueId *id)
{
    const int rank = c->rank, nranks = c->nranks;
    if (fail_wanted("init", rank)) {
        snprintf(last_error, sizeof(last_error), "injected init failure (NCCL_STUB_FAIL)");
        return ncclSystemError;
    }
    char bus[32] = "";
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), c->device) != cudaSuccess) {
        return ncclUnhandledCudaError;
    }
    c->len = header_bytes() + (size_t)nranks * STUB_SLOT;
    char name[NCCL_UNIQUE_ID_BYTES];
    memcpy(name, id->internal, sizeof(name));
    name[sizeof(name) - 1] = '\0';
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)c->len) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return ncclSystemError;
    }
    shared_t *sh = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (sh == MAP_FAILED) {
        return ncclSystemError;
    }
    snprintf(sh->bus[rank], sizeof(sh->bus[rank]), "%s", bus);
    __atomic_add_fetch(&sh->joined, 1, __ATOMIC_ACQ_REL);
    const double t0 = now_s();
    while (__atomic_load_n(&sh->joined, __ATOMIC_ACQUIRE) < nranks) {
        if (now_s() - t0 > STUB_WAIT_S || __atomic_load_n(&c->abort, __ATOMIC_ACQUIRE)) {
            /* The others may never come: the name goes with the last. */
            if (__atomic_sub_fetch(&sh->joined, 1, __ATOMIC_ACQ_REL) == 0) {
                shm_unlink(name);
            }
            munmap(sh, c->len);
            return c->abort ? ncclRemoteError : ncclSystemError;
        }
        sched_yield();
    }
    /* Everyone has mapped it: the name can go. */
    if (rank == 0) {
        shm_unlink(name);
    }
    /* NCCL: "Duplicate GPU detected : rank %d and rank %d both on CUDA
     * device %lx" (init.cc), ncclInvalidUsage. */
    for (int r = 0; r < nranks; r++) {
        if (r != rank && strcmp(sh->bus[r], bus) == 0) {
            snprintf(last_error, sizeof(last_error),
                     "Duplicate GPU detected : rank %d and rank %d both on "
                     "CUDA device %s", rank < r ? rank : r, rank < r ? r : rank, bus);
            munmap(sh, c->len);
            return ncclInvalidUsage;
        }
    }
    c->sh = sh;
    return ncclSuccess;
}

static struct ncclComm *comm_new(int nranks, int rank, ncclResult_t *r)
{
    *r = ncclSuccess;
    if (nranks < 1 || nranks > STUB_MAX_RANKS || rank < 0 || rank >= nranks) {
        *r = ncclInvalidArgument;
        return NULL;
    }
    struct ncclComm *c = calloc(1, sizeof(*c));
    /* Each rank's CUDA device is the one current at the call
     * (ncclCommInitRank). */
    if (c == NULL || cudaGetDevice(&c->device) != cudaSuccess) {
        free(c);
        *r = c == NULL ? ncclSystemError : ncclUnhandledCudaError;
        return NULL;
    }
    c->rank = rank;
    c->nranks = nranks;
    return c;
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks,
                                     ncclUniqueId id, int rank)
{
    ncclResult_t r;
    *comm = comm_new(nranks, rank, &r);
    if (*comm != NULL && (r = meet(*comm, &id)) != ncclSuccess) {
        free(*comm);
        *comm = NULL;
    }
    return r;
}

#ifndef STUB_BEFORE_2_14   /* (libnccl_old_stub: as NCCL before 2.14) */
/* ncclConfig_t's first fields (every version has them). */
typedef struct {
    size_t   size;
    unsigned magic, version;
    int      blocking;
} config_head_t;

typedef struct {
    struct ncclComm *c;
    ncclUniqueId     id;
} init_job_t;

static void *init_thread(void *arg)
{
    init_job_t *j = arg;
    ncclResult_t r = meet(j->c, &j->id);
    __atomic_store_n(&j->c->state, (int)r, __ATOMIC_RELEASE);
    free(j);
    return NULL;
}

/* blocking = 0: the meeting runs on a thread of its own; the call returns
 * ncclInProgress, ncclCommGetAsyncError tells when it is over, and
 * ncclCommAbort stops it (NCCL API reference, ncclCommInitRankConfig,
 * ncclCommAbort). */
EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                           ncclUniqueId id, int rank,
                                           void *config)
{
    const config_head_t *cfg = config;
    if (cfg == NULL || cfg->magic != 0xcafebeef || cfg->blocking != 0) {
        return ncclCommInitRank(comm, nranks, id, rank);
    }
    ncclResult_t r;
    struct ncclComm *c = comm_new(nranks, rank, &r);
    *comm = c;
    if (c == NULL) {
        return r;
    }
    init_job_t *j = malloc(sizeof(*j));
    c->state = ncclInProgress;
    if (j == NULL) {
        c->state = ncclSystemError;
        return ncclSystemError;
    }
    j->c = c;
    j->id = id;
    if (pthread_create(&c->thread, NULL, init_thread, j) != 0) {
        free(j);
        c->state = ncclSystemError;
        return ncclSystemError;
    }
    c->has_thread = 1;
    return ncclInProgress;
}

#endif

static void comm_free(ncclComm_t comm)
{
    if (comm != NULL) {
        if (comm->has_thread) {
            __atomic_store_n(&comm->abort, 1, __ATOMIC_RELEASE);
            pthread_join(comm->thread, NULL);
        }
        if (comm->sh != NULL) {
            munmap(comm->sh, comm->len);
        }
        free(comm);
    }
}

static void queue_job(cudaStream_t stream, void *job);

#ifndef STUB_BEFORE_2_14
/* NCCL API reference, ncclCommFinalize: an intra-node collective; on a
 * non-blocking communicator it returns ncclInProgress and the state says
 * ncclSuccess once all its operations (here: every rank's call) are over. */
EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    if (comm == NULL || comm->sh == NULL || comm->finalizing) {
        return ncclInvalidArgument;
    }
    comm->finalizing = 1;
    __atomic_add_fetch(&comm->sh->finalized, 1, __ATOMIC_ACQ_REL);
    if (!comm->has_thread) {
        while (__atomic_load_n(&comm->sh->finalized, __ATOMIC_ACQUIRE) < comm->nranks) {
            sched_yield();
        }
        return ncclSuccess;
    }
    __atomic_store_n(&comm->state, ncclInProgress, __ATOMIC_RELEASE);
    return ncclInProgress;
}

#endif

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (comm != NULL && comm->has_thread && comm->sh != NULL
        && (!comm->finalizing
            || __atomic_load_n(&comm->sh->finalized, __ATOMIC_ACQUIRE) < comm->nranks)) {
        /* Without a finalization over, ncclCommDestroy is the
         * intra-node collective teardown: a rank that calls it where the
         * others may not (a local MPI call) can hang for ever. */
        fprintf(stderr, "nccl stub: ncclCommDestroy on rank %d before ncclCommFinalize "
                "completed on every rank (an intra-node collective, NCCL API reference)\n",
                comm->rank);
        abort();
    }
    comm_free(comm);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    comm_free(comm);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async)
{
    if (comm == NULL) {
        return ncclInvalidArgument;
    }
    if (comm->pending != NULL) {
        queue_job(comm->pending_stream, comm->pending);
        comm->pending = NULL;
        __atomic_store_n(&comm->state, ncclSuccess, __ATOMIC_RELEASE);
    }
    if (comm->finalizing && comm->sh != NULL
        && __atomic_load_n(&comm->sh->finalized, __ATOMIC_ACQUIRE) >= comm->nranks) {
        __atomic_store_n(&comm->state, ncclSuccess, __ATOMIC_RELEASE);
    }
    *async = (ncclResult_t)__atomic_load_n(&comm->state, __ATOMIC_ACQUIRE);
    return ncclSuccess;
}

/*
 * NCCL user guide, "Using multiple NCCL communicators concurrently":
 * operations on different communicators "should therefore be used at
 * different epochs with a locking mechanism, and applications should
 * ensure operations are submitted in the same order across ranks" (two
 * communicators' operations in flight together, issued in different
 * orders on different ranks, can deadlock on a GPU).  The stand-in counts
 * this process's operations from their ncclAllReduce to the end of their
 * work, and aborts loudly where one is issued on a communicator while
 * another communicator's is in flight.
 */
static pthread_mutex_t epoch_lock = PTHREAD_MUTEX_INITIALIZER;
static int             epoch_ops;       /* in flight */
static struct ncclComm *epoch_comm;     /* theirs */

static void epoch_enter(struct ncclComm *c)
{
    pthread_mutex_lock(&epoch_lock);
    if (epoch_ops > 0 && epoch_comm != c) {
        fprintf(stderr, "nccl stub: RULE nccl-epochs: rank %d issues ncclAllReduce on "
                "one communicator while an operation of another communicator of "
                "this process is in flight (NCCL user guide, \"Using multiple NCCL "
                "communicators concurrently\")\n", c->rank);
        abort();
    }
    epoch_ops++;
    epoch_comm = c;
    pthread_mutex_unlock(&epoch_lock);
}

static void epoch_leave(void)
{
    pthread_mutex_lock(&epoch_lock);
    epoch_ops--;
    pthread_mutex_unlock(&epoch_lock);
}

/* One allreduce on the stream's worker. */
typedef struct {
    struct ncclComm *c;
    const char      *in;    /* host addresses of the device spans */
    char            *out;
    size_t           count, esize;
    collar_dtype_t   dt;
    collar_op_t      op;
} job_t;

static void run_job_slices(job_t *j);

static void run_job(void *arg)
{
    run_job_slices(arg);
    epoch_leave();
}

static void run_job_slices(job_t *j)
{
    struct ncclComm *c = j->c;
    const size_t per = STUB_SLOT / j->esize;
    for (size_t e0 = 0; e0 < j->count; e0 += per) {
        const size_t n = j->count - e0 < per ? j->count - e0 : per;
        const size_t off = e0 * j->esize, bytes = n * j->esize;
        memcpy(slot(c, c->rank), j->in + off, bytes);
        if (!barrier(c)) {
            return;
        }
        char *acc = malloc(bytes);
        if (acc != NULL) {
            memcpy(acc, slot(c, 0), bytes);
            for (int r = 1; r < c->nranks; r++) {
                collar_reduce_host(acc, slot(c, r), n, j->dt, j->op);
            }
        }
        if (!barrier(c)) {
            free(acc);
            return;
        }
        if (acc != NULL) {
            memcpy(j->out + off, acc, bytes);
            free(acc);
        }
    }
}

EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff,
                                  size_t count, int datatype, int op,
                                  ncclComm_t comm, cudaStream_t stream)
{
    static const collar_dtype_t dts[] = {
        COLLAR_DT_INT8, COLLAR_DT_UINT8, COLLAR_DT_INT32, COLLAR_DT_UINT32,
        COLLAR_DT_INT64, COLLAR_DT_UINT64, COLLAR_DT_FLOAT16, COLLAR_DT_FLOAT,
        COLLAR_DT_DOUBLE, COLLAR_DT_BFLOAT16,
    };
    static const collar_op_t ops[] = {
        COLLAR_OP_SUM, COLLAR_OP_PROD, COLLAR_OP_MAX, COLLAR_OP_MIN,
    };
    if (comm == NULL || datatype < 0 || datatype > 9 || op < 0 || op > 3) {
        return ncclInvalidArgument;
    }
    if (fail_wanted("allreduce", comm->rank)) {
        snprintf(last_error, sizeof(last_error), "injected failure (NCCL_STUB_FAIL)");
        return ncclUnhandledCudaError;
    }
    job_t *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        return ncclSystemError;
    }
    j->c = comm;
    j->count = count;
    j->dt = dts[datatype];
    j->op = ops[op];
    j->esize = collar_dtype_size(j->dt);
    /* Device memory of the communicator's device, as a kernel sees it. */
    j->in = cudaemu_device_span(comm->device, sendbuff, count * j->esize);
    j->out = cudaemu_device_span(comm->device, recvbuff, count * j->esize);
    if (j->in == NULL || j->out == NULL) {
        free(j);
        snprintf(last_error, sizeof(last_error),
                 "ncclAllReduce: a buffer is not device memory of device %d",
                 comm->device);
        return ncclInvalidArgument;
    }
    if (comm->pending != NULL) {
        fprintf(stderr, "nccl stub: ncclAllReduce on rank %d before ncclCommGetAsyncError "
                "said ncclSuccess after ncclInProgress (NCCL API reference)\n", comm->rank);
        abort();
    }
    epoch_enter(comm);
    if (comm->has_thread && getenv("NCCL_STUB_INPROGRESS") != NULL) {
        comm->pending = j;
        comm->pending_stream = stream;
        __atomic_store_n(&comm->state, ncclInProgress, __ATOMIC_RELEASE);
        return ncclInProgress;
    }
    if (cudaemu_stream_enqueue(stream, run_job, j) != cudaSuccess) {
        epoch_leave();
        free(j);
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

/* The work of an ncclAllReduce left in progress, queued now (a failure to
 * queue shows as wrong values and the job's loss). */
static void queue_job(cudaStream_t stream, void *job)
{
    if (cudaemu_stream_enqueue(stream, run_job, job) != cudaSuccess) {
        epoch_leave();
        free(job);
    }
}
