/*
 * collar - the CUDA emulation's streams, events and copies (tests only).
 *
 * Every stream has a worker thread that runs its work in order.  The
 * ordering between streams is that of the CUDA Programming Guide
 * ("Default Stream", "Implicit Synchronization") and the Runtime API's
 * "Stream synchronization behavior": work on the device's legacy default
 * stream (0, cudaStreamLegacy) waits for all work queued before on the
 * device's blocking streams, and work queued on a blocking stream waits for
 * the legacy stream's earlier work; non-blocking streams
 * (cudaStreamNonBlocking) do neither; the per-thread default stream
 * (cudaStreamPerThread) is a blocking stream of its thread.  An event is a
 * pair of counters (records issued, the last record completed), in shared
 * memory for interprocess events.  Copies follow the API's "API
 * synchronization behavior" section for pageable and pinned host memory.
 */
#define _GNU_SOURCE
#include "emu.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define STREAM_MAGIC 0x7374726du
#define EVENT_MAGIC  0x6576656eu
#define EVH_MAGIC    0x65766970u

pthread_mutex_t emu_sched_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sched_cv = PTHREAD_COND_INITIALIZER;

struct dep {
    const uint64_t *counter;   /* a stream's completed, an event's completed */
    uint64_t        target;
};

struct emu_task {
    struct emu_task *next;
    void           (*fn)(void *);
    void            *arg;
    int              ndeps;
    struct dep       deps[];
};

/* Every stream of the process, never freed (a destroyed stream stays, so
 * that a later use is recognised), and every event. */
static struct CUstream_st *streams;
static int nstreams;
static struct CUstream_st *legacy[EMU_MAXDEV];
static _Thread_local struct CUstream_st *per_thread[EMU_MAXDEV];

struct event_node {
    struct CUevent_st   ev;
    struct event_node  *next;
};
static struct event_node *events;

/* ----------------------------------------------------------------- waits */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Under emu_sched_lock: wait until *counter >= target.  Interprocess
 * counters change without a signal here: poll every millisecond. */
static void wait_counter(const uint64_t *counter, uint64_t target)
{
    while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < target) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&sched_cv, &emu_sched_lock, &ts);
    }
}

static void *worker(void *p)
{
    struct CUstream_st *s = p;
    pthread_mutex_lock(&emu_sched_lock);
    for (;;) {
        while (s->head == NULL && !s->destroyed) {
            pthread_cond_wait(&sched_cv, &emu_sched_lock);
        }
        struct emu_task *t = s->head;
        if (t == NULL) {
            break;   /* destroyed, and its work done */
        }
        for (int i = 0; i < t->ndeps; i++) {
            wait_counter(t->deps[i].counter, t->deps[i].target);
        }
        pthread_mutex_unlock(&emu_sched_lock);
        if (t->fn != NULL) {
            t->fn(t->arg);
        }
        free(t->arg);
        pthread_mutex_lock(&emu_sched_lock);
        s->head = t->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        __atomic_store_n(&s->completed, s->completed + 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&sched_cv);
        free(t);
    }
    s->running = 0;
    pthread_mutex_unlock(&emu_sched_lock);
    return NULL;
}

/* A forked child has the streams but not their workers: new ones start at
 * the next enqueue. */
static void after_fork_child(void)
{
    pthread_mutex_init(&emu_sched_lock, NULL);
    pthread_cond_init(&sched_cv, NULL);
    for (struct CUstream_st *s = streams; s != NULL; s = s->next) {
        s->running = 0;
    }
}

static void at_fork_once(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

/* ---------------------------------------------------------------- streams */

/* Under emu_sched_lock. */
static struct CUstream_st *new_stream(int ordinal, unsigned flags, int is_legacy)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, at_fork_once);
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->magic = STREAM_MAGIC;
    s->ordinal = ordinal;
    s->phys = emu_vis[ordinal];
    s->flags = flags;
    s->legacy = is_legacy;
    s->next = streams;
    streams = s;
    nstreams++;
    return s;
}

struct CUstream_st *emu_stream(cudaStream_t h)
{
    if (h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread) {
        const int d = emu_device();
        if (d < 0) {
            return NULL;
        }
        const int phys = emu_vis[d];
        pthread_mutex_lock(&emu_sched_lock);
        struct CUstream_st **slot = h == cudaStreamPerThread ? &per_thread[phys]
                                                             : &legacy[phys];
        if (*slot == NULL) {
            *slot = new_stream(d, 0, h != cudaStreamPerThread);
        }
        struct CUstream_st *s = *slot;
        pthread_mutex_unlock(&emu_sched_lock);
        return s;
    }
    pthread_mutex_lock(&emu_sched_lock);
    struct CUstream_st *s;
    for (s = streams; s != NULL && s != h; s = s->next) {
    }
    const int dead = s != NULL && s->destroyed;
    pthread_mutex_unlock(&emu_sched_lock);
    if (dead) {
        emu_break(EMU_R_STREAM_DESTROYED, "stream %p used after "
                  "cudaStreamDestroy", (void *)h);
    }
    return s;
}

/* Under emu_sched_lock: queue a task with the default-stream dependencies. */
static void enqueue_locked(struct CUstream_st *s, struct emu_task *t)
{
    t->ndeps = 0;
    if (s->legacy) {
        /* Waits for the earlier work of the device's blocking streams. */
        for (struct CUstream_st *x = streams; x != NULL; x = x->next) {
            if (x != s && x->phys == s->phys && !(x->flags & cudaStreamNonBlocking)
                && x->enqueued > x->completed) {
                t->deps[t->ndeps].counter = &x->completed;
                t->deps[t->ndeps++].target = x->enqueued;
            }
        }
    } else if (!(s->flags & cudaStreamNonBlocking)) {
        struct CUstream_st *l = legacy[s->phys];
        if (l != NULL && l->enqueued > l->completed) {
            t->deps[t->ndeps].counter = &l->completed;
            t->deps[t->ndeps++].target = l->enqueued;
        }
    }
    t->next = NULL;
    if (s->tail != NULL) {
        s->tail->next = t;
    } else {
        s->head = t;
    }
    s->tail = t;
    s->enqueued++;
    if (!s->running) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, worker, s) != 0) {
            fprintf(stderr, "cudaemu: cannot start a stream worker\n");
            abort();
        }
        pthread_attr_destroy(&at);
        s->running = 1;
    }
    pthread_cond_broadcast(&sched_cv);
}

static struct emu_task *new_task(void (*fn)(void *), void *arg, int extra)
{
    struct emu_task *t = malloc(sizeof(*t) + (size_t)(nstreams + 1 + extra)
                                * sizeof(struct dep));
    if (t == NULL) {
        fprintf(stderr, "cudaemu: out of memory\n");
        abort();
    }
    t->fn = fn;
    t->arg = arg;
    return t;
}

void emu_enqueue(struct CUstream_st *s, void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&emu_sched_lock);
    enqueue_locked(s, new_task(fn, arg, 0));
    pthread_mutex_unlock(&emu_sched_lock);
}

void emu_stream_wait(struct CUstream_st *s)
{
    pthread_mutex_lock(&emu_sched_lock);
    wait_counter(&s->completed, s->enqueued);
    pthread_mutex_unlock(&emu_sched_lock);
}

void emu_device_wait(int phys)
{
    pthread_mutex_lock(&emu_sched_lock);
    for (struct CUstream_st *s = streams; s != NULL; s = s->next) {
        if (phys < 0 || s->phys == phys) {
            wait_counter(&s->completed, s->enqueued);
        }
    }
    pthread_mutex_unlock(&emu_sched_lock);
}

/* A kernel's sticky fault (CUDAEMU_FAIL=sticky:N): it happens when the
 * kernel runs, and every later call returns it. */
static void fault_run(void *arg)
{
    (void)arg;
    emu_set_sticky(cudaErrorIllegalAddress);
}

cudaError_t cudaemu_stream_enqueue(cudaStream_t stream, void (*fn)(void *arg),
                                   void *arg)
{
    /* Counted by the launch entry point that got here. */
    cudaError_t e = emu_enter_again("cudaLaunchKernel");
    if (e != cudaSuccess) {
        return e;
    }
    struct CUstream_st *s = emu_stream(stream);
    if (s == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    /* CUDA Programming Guide, Stream and Event Behavior: "A kernel launch
     * will fail if it is issued to a stream that is not associated to the
     * current device". */
    if (s->phys != emu_vis[emu_device()]) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    /* Both count every launch call. */
    const int refuse = emu_inject(EMU_F_LAUNCH);
    const int fault = emu_inject(EMU_F_STICKY);
    if (refuse) {
        return emu_error(cudaErrorLaunchOutOfResources);
    }
    if (fault) {
        free(arg);
        emu_enqueue(s, fault_run, NULL);
        return cudaSuccess;
    }
    emu_enqueue(s, fn, arg);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
                                         int priority)
{
    (void)priority;
    EMU_ENTER("cudaStreamCreate");
    if (pStream == NULL || (flags & ~(unsigned)cudaStreamNonBlocking)) {
        return emu_error(cudaErrorInvalidValue);
    }
    const int d = emu_device();
    if (d < 0) {
        return cudaErrorNoDevice;
    }
    pthread_mutex_lock(&emu_sched_lock);
    struct CUstream_st *s = new_stream(d, flags, 0);
    pthread_mutex_unlock(&emu_sched_lock);
    if (s == NULL) {
        return emu_error(cudaErrorMemoryAllocation);
    }
    *pStream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    return cudaStreamCreateWithPriority(pStream, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    return cudaStreamCreateWithPriority(pStream, cudaStreamDefault, 0);
}

/* CUDA Runtime API, cudaStreamDestroy: "In case the device is still doing
 * work in the stream stream when cudaStreamDestroy() is called, the function
 * will return immediately and the resources associated with stream will be
 * released automatically once the device has completed all work". */
cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    EMU_ENTER("cudaStreamDestroy");
    if (stream == NULL || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    struct CUstream_st *s = emu_stream(stream);
    if (s == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    pthread_mutex_lock(&emu_sched_lock);
    s->destroyed = 1;
    pthread_cond_broadcast(&sched_cv);
    pthread_mutex_unlock(&emu_sched_lock);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    EMU_ENTER("cudaStreamSynchronize");
    struct CUstream_st *s = emu_stream(stream);
    if (s == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    emu_stream_wait(s);
    return emu_error(emu_sticky());
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    EMU_ENTER("cudaStreamQuery");
    struct CUstream_st *s = emu_stream(stream);
    if (s == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    pthread_mutex_lock(&emu_sched_lock);
    const int busy = s->completed < s->enqueued;
    pthread_mutex_unlock(&emu_sched_lock);
    /* cudaErrorNotReady is no error: not recorded as the last one. */
    return busy ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    EMU_ENTER("cudaStreamGetFlags");
    struct CUstream_st *s = emu_stream(hStream);
    if (s == NULL || flags == NULL) {
        return emu_error(s == NULL ? cudaErrorInvalidResourceHandle
                                   : cudaErrorInvalidValue);
    }
    *flags = s->flags;
    return cudaSuccess;
}

struct host_fn {
    cudaHostFn_t fn;
    void        *data;
    cudaStreamCallback_t cb;
    cudaStream_t stream;
};

static void host_fn_run(void *arg)
{
    struct host_fn *h = arg;
    emu_in_host_func = 1;
    if (h->fn != NULL) {
        h->fn(h->data);
    } else {
        h->cb(h->stream, cudaSuccess, h->data);
    }
    emu_in_host_func = 0;
}

static cudaError_t host_fn(cudaStream_t stream, struct host_fn h)
{
    struct CUstream_st *s = emu_stream(stream);
    if (s == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    struct host_fn *a = malloc(sizeof(*a));
    if (a == NULL) {
        return emu_error(cudaErrorMemoryAllocation);
    }
    *a = h;
    emu_enqueue(s, host_fn_run, a);
    return cudaSuccess;
}

/* CUDA Runtime API, cudaLaunchHostFunc: "Enqueues a host function to run in
 * a stream"; "Host functions must not make any CUDA API calls" (the rule
 * cuda-call-in-host-function). */
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    EMU_ENTER("cudaLaunchHostFunc");
    if (fn == NULL) {
        return emu_error(cudaErrorInvalidValue);
    }
    return host_fn(stream, (struct host_fn){ .fn = fn, .data = userData });
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                  void *userData, unsigned int flags)
{
    EMU_ENTER("cudaStreamAddCallback");
    if (callback == NULL || flags != 0) {
        return emu_error(cudaErrorInvalidValue);
    }
    return host_fn(stream, (struct host_fn){ .cb = callback, .data = userData,
                                             .stream = stream });
}

/* ----------------------------------------------------------------- events */

static struct CUevent_st *event_of(cudaEvent_t h)
{
    pthread_mutex_lock(&emu_sched_lock);
    struct event_node *n;
    for (n = events; n != NULL && &n->ev != h; n = n->next) {
    }
    const int dead = n != NULL && n->ev.destroyed;
    pthread_mutex_unlock(&emu_sched_lock);
    if (dead) {
        emu_break(EMU_R_EVENT_DESTROYED, "event %p used after cudaEventDestroy",
                  (void *)h);
    }
    return n != NULL ? &n->ev : NULL;
}

static struct CUevent_st *new_event(unsigned flags, int ordinal,
                                    emu_evstate_t *shared, int fd)
{
    struct event_node *n = calloc(1, sizeof(*n));
    if (n == NULL) {
        return NULL;
    }
    n->ev.magic = EVENT_MAGIC;
    n->ev.flags = flags;
    n->ev.ordinal = ordinal;
    n->ev.ipc_fd = fd;
    n->ev.st = shared != NULL ? shared : &n->ev.local;
    pthread_mutex_lock(&emu_sched_lock);
    n->next = events;
    events = n;
    pthread_mutex_unlock(&emu_sched_lock);
    return &n->ev;
}

/* CUDA Runtime API, cudaEventCreateWithFlags: cudaEventInterprocess "must be
 * specified along with cudaEventDisableTiming". */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    EMU_ENTER("cudaEventCreate");
    const unsigned all = cudaEventBlockingSync | cudaEventDisableTiming
                         | cudaEventInterprocess;
    if (event == NULL || (flags & ~all)
        || ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))) {
        return emu_error(cudaErrorInvalidValue);
    }
    const int d = emu_device();
    if (d < 0) {
        return cudaErrorNoDevice;
    }
    emu_evstate_t *shared = NULL;
    int fd = -1;
    if (flags & cudaEventInterprocess) {
        fd = memfd_create("cudaemu-event", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, sizeof(emu_evstate_t)) != 0
            || (shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
                              MAP_SHARED, fd, 0)) == MAP_FAILED) {
            if (fd >= 0) {
                close(fd);
            }
            return emu_error(cudaErrorMemoryAllocation);
        }
    }
    struct CUevent_st *ev = new_event(flags, d, shared, fd);
    if (ev == NULL) {
        return emu_error(cudaErrorMemoryAllocation);
    }
    *event = ev;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    EMU_ENTER("cudaEventDestroy");
    struct CUevent_st *ev = event_of(event);
    if (ev == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    /* The state stays: work queued before may still complete the record. */
    pthread_mutex_lock(&emu_sched_lock);
    ev->destroyed = 1;
    pthread_mutex_unlock(&emu_sched_lock);
    return cudaSuccess;
}

struct record {
    emu_evstate_t *st;
    uint64_t       n;
};

static void record_run(void *arg)
{
    struct record *r = arg;
    __atomic_store_n(&r->st->when_ns, now_ns(), __ATOMIC_RELAXED);
    uint64_t cur = __atomic_load_n(&r->st->completed, __ATOMIC_ACQUIRE);
    while (cur < r->n
           && !__atomic_compare_exchange_n(&r->st->completed, &cur, r->n, 0,
                                           __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
}

/* CUDA Runtime API, cudaEventRecord: "Captures in event the contents of
 * stream at the time of this call"; "will fail if the input event and input
 * stream are associated to different devices". */
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    EMU_ENTER("cudaEventRecord");
    struct CUevent_st *ev = event_of(event);
    struct CUstream_st *s = emu_stream(stream);
    if (ev == NULL || s == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    if (s->ordinal != ev->ordinal && !(ev->flags & cudaEventInterprocess)) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    struct record *r = malloc(sizeof(*r));
    if (r == NULL) {
        return emu_error(cudaErrorMemoryAllocation);
    }
    r->st = ev->st;
    pthread_mutex_lock(&emu_sched_lock);
    r->n = __atomic_add_fetch(&ev->st->recorded, 1, __ATOMIC_ACQ_REL);
    enqueue_locked(s, new_task(record_run, r, 0));
    pthread_mutex_unlock(&emu_sched_lock);
    return cudaSuccess;
}

/* CUDA Runtime API, cudaEventQuery: cudaSuccess when "all captured work has
 * been completed, or if cudaEventRecord() has not been called on event",
 * else cudaErrorNotReady. */
cudaError_t cudaEventQuery(cudaEvent_t event)
{
    EMU_ENTER("cudaEventQuery");
    struct CUevent_st *ev = event_of(event);
    if (ev == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    const uint64_t rec = __atomic_load_n(&ev->st->recorded, __ATOMIC_ACQUIRE);
    const uint64_t done = __atomic_load_n(&ev->st->completed, __ATOMIC_ACQUIRE);
    return done >= rec ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    EMU_ENTER("cudaEventSynchronize");
    struct CUevent_st *ev = event_of(event);
    if (ev == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    pthread_mutex_lock(&emu_sched_lock);
    wait_counter(&ev->st->completed,
                 __atomic_load_n(&ev->st->recorded, __ATOMIC_ACQUIRE));
    pthread_mutex_unlock(&emu_sched_lock);
    return emu_error(emu_sticky());
}

/* CUDA Runtime API, cudaStreamWaitEvent: "Makes all future work submitted to
 * stream wait for all work captured in event"; "event may be from a
 * different device than stream". */
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int flags)
{
    EMU_ENTER("cudaStreamWaitEvent");
    struct CUevent_st *ev = event_of(event);
    struct CUstream_st *s = emu_stream(stream);
    if (ev == NULL || s == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    if (flags & ~(unsigned)cudaEventWaitExternal) {
        return emu_error(cudaErrorInvalidValue);
    }
    pthread_mutex_lock(&emu_sched_lock);
    struct emu_task *t = new_task(NULL, NULL, 1);
    const uint64_t target = __atomic_load_n(&ev->st->recorded, __ATOMIC_ACQUIRE);
    enqueue_locked(s, t);
    /* The task is not running yet (the worker needs the lock): add the
     * event to its dependencies. */
    t->deps[t->ndeps].counter = &ev->st->completed;
    t->deps[t->ndeps++].target = target;
    pthread_mutex_unlock(&emu_sched_lock);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    EMU_ENTER("cudaEventElapsedTime");
    struct CUevent_st *a = event_of(start), *b = event_of(end);
    if (ms == NULL || a == NULL || b == NULL) {
        return emu_error(ms == NULL ? cudaErrorInvalidValue
                                    : cudaErrorInvalidResourceHandle);
    }
    if ((a->flags | b->flags) & cudaEventDisableTiming) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    if (cudaEventQuery(start) != cudaSuccess || cudaEventQuery(end) != cudaSuccess) {
        return cudaErrorNotReady;
    }
    *ms = (float)(b->st->when_ns - a->st->when_ns) / 1e6f;
    return cudaSuccess;
}

typedef struct {
    uint32_t magic;
    int32_t  pid;
    int32_t  fd;
} ipc_event_handle_t;

/* CUDA Runtime API, cudaIpcGetEventHandle: the event "must have been
 * created with the cudaEventInterprocess and cudaEventDisableTiming flags
 * set" (else cudaErrorInvalidResourceHandle). */
cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event)
{
    EMU_ENTER("cudaIpcGetEventHandle");
    struct CUevent_st *ev = event_of(event);
    if (handle == NULL) {
        return emu_error(cudaErrorInvalidValue);
    }
    if (ev == NULL || ev->ipc_fd < 0) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    ipc_event_handle_t h = { EVH_MAGIC, (int32_t)getpid(), ev->ipc_fd };
    memset(handle, 0, sizeof(*handle));
    memcpy(handle->reserved, &h, sizeof(h));
    return cudaSuccess;
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle)
{
    EMU_ENTER("cudaIpcOpenEventHandle");
    ipc_event_handle_t h;
    memcpy(&h, handle.reserved, sizeof(h));
    if (event == NULL || h.magic != EVH_MAGIC) {
        return emu_error(cudaErrorInvalidValue);
    }
    const int d = emu_device();
    if (d < 0) {
        return cudaErrorNoDevice;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    emu_evstate_t *st = fd < 0 ? MAP_FAILED
        : mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (st == MAP_FAILED) {
        if (fd >= 0) {
            close(fd);
        }
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    struct CUevent_st *ev = new_event(cudaEventInterprocess | cudaEventDisableTiming,
                                      d, st, fd);
    if (ev == NULL) {
        return emu_error(cudaErrorMemoryAllocation);
    }
    *event = ev;
    return cudaSuccess;
}

/* ------------------------------------------------------------------ copies */

struct copy {
    char       *dst;
    const char *src;
    size_t      n;
    int         byte;     /* memset: the value; -1: a copy */
    char        staged[]; /* a pageable source, copied at the call */
};

static void copy_run(void *arg)
{
    struct copy *c = arg;
    if (c->byte >= 0) {
        memset(c->dst, c->byte, c->n);
    } else if (c->n > 0) {
        memmove(c->dst, c->src, c->n);
    }
}

enum side { PAGEABLE, PINNED, MANAGED, DEVICE };

static enum side side_of(const void *p, size_t n, char **view)
{
    emu_alloc_t a;
    if (!emu_lookup(p, &a)) {
        *view = (char *)p;
        return PAGEABLE;
    }
    const size_t off = (size_t)((const char *)p - a.base);
    *view = n <= a.size - off ? a.span + off : NULL;
    switch (a.kind) {
    case EMU_MANAGED: return MANAGED;
    case EMU_PINNED: case EMU_REGISTERED: return PINNED;
    default: return DEVICE;
    }
}

/*
 * CUDA Runtime API, "API synchronization behavior":
 *   synchronous cudaMemcpy: pageable host to device: "a stream sync is
 *   performed before the copy is initiated. The function will return once
 *   the pageable buffer has been copied to the staging memory"; pinned host
 *   to device: "synchronous with respect to the host"; device to host: "the
 *   function returns only once the copy has completed"; device to device:
 *   "no host-side synchronization is performed"; host to host: "fully
 *   synchronous with respect to the host".
 *   cudaMemcpyAsync: device and pageable host memory: "might be synchronous
 *   with respect to host" (here: a pageable source is staged at the call,
 *   a pageable destination waits for the copy, as the driver does); host
 *   to host: "fully synchronous"; "For all other transfers, the function
 *   should be fully asynchronous."  Transfers involving managed memory are
 *   fully synchronous (older editions of the same section).
 * cudaMemcpyDefault (and every kind, with unified addressing): the pointers
 * say where the bytes are; an explicit kind naming device memory where
 * there is only pageable host memory is cudaErrorInvalidValue.
 */
static cudaError_t do_copy(void *dst, const void *src, size_t n,
                           enum cudaMemcpyKind kind, cudaStream_t stream,
                           int async, int memset_byte)
{
    if ((unsigned)kind > cudaMemcpyDefault) {
        return emu_error(cudaErrorInvalidMemcpyDirection);
    }
    if (emu_device() < 0) {
        return cudaErrorNoDevice;
    }
    struct CUstream_st *s = emu_stream(stream);
    if (s == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    if (n == 0) {
        return cudaSuccess;
    }
    char *dv, *sv = NULL;
    const enum side ds = side_of(dst, n, &dv);
    enum side ss = PINNED;
    if (memset_byte < 0) {
        ss = side_of(src, n, &sv);
    }
    if (dv == NULL || (memset_byte < 0 && sv == NULL)) {
        return emu_error(cudaErrorInvalidValue);   /* past an allocation's end */
    }
    if (memset_byte >= 0 && ds == PAGEABLE) {
        return emu_error(cudaErrorInvalidValue);
    }
    if (((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice)
         && ds == PAGEABLE)
        || ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice)
            && ss == PAGEABLE)) {
        return emu_error(cudaErrorInvalidValue);
    }
    const int stage = memset_byte < 0 && ss == PAGEABLE && ds != PAGEABLE;
    struct copy *c = malloc(sizeof(*c) + (stage ? n : 0));
    if (c == NULL) {
        return emu_error(cudaErrorMemoryAllocation);
    }
    c->dst = dv;
    c->n = n;
    c->byte = memset_byte;
    c->src = sv;
    int wait;
    if (memset_byte >= 0) {
        /* "Memset: the synchronous memset functions are asynchronous with
         * respect to the host except when the target is pinned host memory
         * or a Unified Memory region"; the Async ones are asynchronous. */
        wait = !async && (ds == PINNED || ds == MANAGED);
    } else if (ds == MANAGED || ss == MANAGED) {
        wait = 1;
    } else if (ss != DEVICE && ds != DEVICE) {
        wait = 1;                                  /* host to host */
    } else if (ss == DEVICE && ds == DEVICE) {
        wait = 0;
    } else if (ss == DEVICE) {
        wait = !async || ds == PAGEABLE;           /* device to host */
    } else if (ss == PAGEABLE) {
        if (!async) {
            emu_stream_wait(s);                    /* "a stream sync" first */
        }
        wait = 0;
    } else {
        wait = !async;                             /* pinned to device */
    }
    if (stage) {
        memcpy(c->staged, src, n);
        c->src = c->staged;
    }
    emu_enqueue(s, copy_run, c);
    if (wait) {
        emu_stream_wait(s);
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                       enum cudaMemcpyKind kind)
{
    EMU_ENTER("cudaMemcpy");
    return do_copy(dst, src, count, kind, cudaStreamLegacy, 0, -1);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                            enum cudaMemcpyKind kind, cudaStream_t stream)
{
    EMU_ENTER("cudaMemcpyAsync");
    return do_copy(dst, src, count, kind, stream, 1, -1);
}

cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src,
                           int srcDevice, size_t count)
{
    (void)dstDevice;
    (void)srcDevice;
    EMU_ENTER("cudaMemcpyPeer");
    return do_copy(dst, src, count, cudaMemcpyDeviceToDevice, cudaStreamLegacy, 0, -1);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src,
                                int srcDevice, size_t count, cudaStream_t stream)
{
    (void)dstDevice;
    (void)srcDevice;
    EMU_ENTER("cudaMemcpyPeerAsync");
    return do_copy(dst, src, count, cudaMemcpyDeviceToDevice, stream, 1, -1);
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    EMU_ENTER("cudaMemset");
    return do_copy(devPtr, NULL, count, cudaMemcpyDefault, cudaStreamLegacy, 0,
                   value & 0xff);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count,
                            cudaStream_t stream)
{
    EMU_ENTER("cudaMemsetAsync");
    return do_copy(devPtr, NULL, count, cudaMemcpyDefault, stream, 1, value & 0xff);
}
