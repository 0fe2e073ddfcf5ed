/*
 * collar - the `cuda` device backend.
 *
 * Built when configure finds the CUDA toolkit; the CUDA runtime is linked
 * statically (libcudart_static.a, its symbols kept inside libcollar.so), so
 * the application's own runtime version does not matter: both talk to the
 * same driver and its primary contexts, where device pointers are shared.
 * The driver's pointer query is reached through the runtime's driver entry
 * points, so libcollar.so needs no libcuda.so at load time: on a machine
 * without a driver or a GPU, init() says so at debug level and collar runs
 * as `none`.
 *
 * Nothing touches a GPU before the first staged operation: no context is
 * created at MPI_Init (a process that never passes a device buffer never
 * pays for one).  Streams and events are created on first use, per device,
 * on the device of the buffer being worked on (the application's current
 * device lives in its own runtime, which collar's runtime does not see).
 *
 *   memory kinds   cuPointerGetAttributes behind the pointer cache
 *                  (ptrcache.h); device -> device, managed -> managed
 *                  (staged like device memory), registered or pinned host
 *                  and pageable host -> host.
 *   copies         cudaMemcpyAsync(cudaMemcpyDefault) on collar's streams;
 *                  an event recorded after each, from a per-device pool,
 *                  or, where the schedule has nothing else to do until
 *                  it is done (a serial schedule in a blocking call), a
 *                  cudaStreamSynchronize instead (cu_finish).  Small ones
 *                  the schedule allows (staged's gdrcopy=) by the CPU
 *                  through a GDRCopy mapping where GDRCopy is in use
 *                  (copy_now, gdrcopy.c).
 *   reductions     the kernels of src/reduce/device_reduce.cu.
 *   ordering       COLLAR_SYNC: device = cudaDeviceSynchronize on the
 *                  devices the application's buffers live on (every device
 *                  a buffer classified as device or managed memory was on;
 *                  in practice the rank's one GPU): the work the caller
 *                  queued on any stream of it is done before collar reads
 *                  its buffers; no other GPU is touched (no context is
 *                  created on it, EXCLUSIVE_PROCESS GPUs of other ranks are
 *                  left alone);
 *                  stream = collar's streams are blocking streams, which
 *                  start after what is queued on the legacy default stream
 *                  before them, at no host cost (with a CUDA-aware MPI
 *                  library, which reads device buffers outside collar's
 *                  streams, the host waits for the legacy stream of the
 *                  buffers' devices instead); none = non-blocking
 *                  streams, no wait: the caller has synchronised.
 *   staging        cudaHostAlloc (portable); if pinned memory cannot be
 *                  had, host_alloc fails and the caller stages through
 *                  pageable memory (collar_staging_get: copies are then
 *                  slower, never wrong).  Device scratch: cudaMalloc on the
 *                  device of the call's buffers; the scratch pool keeps
 *                  buffers per device (scratch_device).
 *   IPC memory     cudaMalloc on the device of the call, shared with the
 *                  other ranks of the node by cudaIpcGetMemHandle; a peer
 *                  maps it with cudaIpcOpenMemHandle
 *                  (cudaIpcMemLazyEnablePeerAccess) and unmaps it with
 *                  cudaIpcCloseMemHandle, which every peer does before the
 *                  owner's cudaFree (src/algo/ipc.c sees to that).  A
 *                  peer's device is named by its PCI bus id; it is
 *                  refused when this process sees it and it is neither
 *                  the same device nor one cudaDeviceCanAccessPeer allows;
 *                  a device this process does not see is left to
 *                  cudaIpcOpenMemHandle, which can map it.  (Built and
 *                  linked on machines without a GPU; see docs/ipc.md.)
 *   current device every entry point that makes a device current in
 *                  collar's runtime puts back the calling thread's context
 *                  as it found it (the driver's cuCtxGetCurrent /
 *                  cuCtxSetCurrent, so "no context" stays "no context"):
 *                  the application's current device is never changed.
 *   contexts       every runtime call that needs a context runs with the
 *                  context of the device of what it touches current (an
 *                  event's or stream's device, a device pointer's, the
 *                  device a pinned block was allocated on), also where
 *                  the thread's own is another device's or none: on a
 *                  thread without a current context the runtime would make
 *                  device 0's primary context current and create it
 *                  ("Interactions with the CUDA Driver API"), a context on
 *                  GPU 0 in every rank of the node (collar's progress
 *                  thread, a schedule finished in another thread).
 */
#include "config.h"
#include "mem.h"
#include "gdrcopy.h"
#include "ptrcache.h"
#include "../reduce/device_reduce.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CU_MAX_DEVICES 64
#define CU_NSTREAMS    3
#define CU_CACHE_SIZE  1024

typedef CUresult (*cu_get_attrs_fn)(unsigned, CUpointer_attribute *, void **,
                                    CUdeviceptr);
typedef CUresult (*cu_get_attr_fn)(void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*cu_ctx_get_fn)(CUcontext *);
typedef CUresult (*cu_ctx_set_fn)(CUcontext);

struct collar_stream {
    cudaStream_t stream;
    int          device;
};

typedef struct {
    int                  ready;      /* streams created */
    CUcontext            ctx;        /* its primary context, once known */
    struct collar_stream s[CU_NSTREAMS];
    cudaEvent_t         *events;     /* free events of this device */
    int                  nevents, cap;
} cu_device_t;

/* A pinned block and the device it was allocated on, where it is freed
 * (the pool gives blocks back from any thread); or a peer's IPC memory and
 * the device whose context opened it, where it is closed (the pointer's
 * own device is the peer's). */
struct cu_pinned {
    void             *ptr;
    int               device;
    struct cu_pinned *next;
};

static struct {
    int               ndevices;
    cu_get_attrs_fn   get_attrs;
    cu_get_attr_fn    get_attr;
    cu_ctx_get_fn     ctx_get;
    cu_ctx_set_fn     ctx_set;
    uint64_t          used;       /* atomic: bit d, a buffer lives on d */
    int               last;       /* atomic: the last device a buffer was on */
    struct cu_pinned *pinned;     /* pinned blocks and their devices (lock) */
    struct cu_pinned *mapped;     /* peers' IPC memory, the devices that opened it (lock) */
    int               mpi_aware;  /* -1: not asked yet */
    collar_ptrcache_t *cache;
    pthread_mutex_t   lock;
    cu_device_t       dev[CU_MAX_DEVICES];
} cu = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int cu_fail(const char *what, cudaError_t err)
{
    collar_error(MEM, "cuda: %s failed: %s (%s)", what, cudaGetErrorName(err),
                 cudaGetErrorString(err));
    return 0;
}

/* The calling thread's current context (or device), to put back. */
typedef struct {
    int       saved;   /* 1: ctx, 2: device, 0: nothing to put back */
    CUcontext ctx;
    int       device;
} cu_current_t;

static void cu_save_current(cu_current_t *c)
{
    c->saved = 0;
    if (cu.ctx_get != NULL && cu.ctx_set != NULL) {
        if (cu.ctx_get(&c->ctx) == CUDA_SUCCESS) {
            c->saved = 1;
        }
    } else if (cudaGetDevice(&c->device) == cudaSuccess) {
        c->saved = 2;
    } else {
        cudaGetLastError();
    }
}

static void cu_restore_current(const cu_current_t *c)
{
    if (c->saved == 1) {
        cu.ctx_set(c->ctx);
    } else if (c->saved == 2) {
        if (cudaSetDevice(c->device) != cudaSuccess) {
            cudaGetLastError();
        }
    }
}

/* Device d's context current in this thread, the thread's own saved in
 * *c for cu_restore_current (nothing to put back when d's is current
 * already).  d < 0: unknown, nothing changes. */
static void cu_enter(int d, cu_current_t *c)
{
    cu_save_current(c);
    if (d < 0 || d >= cu.ndevices) {
        return;
    }
    const CUcontext want = __atomic_load_n(&cu.dev[d].ctx, __ATOMIC_ACQUIRE);
    if (c->saved == 1 && want != NULL && c->ctx == want) {
        c->saved = 0;
        return;
    }
    if (cudaSetDevice(d) != cudaSuccess) {
        cudaGetLastError();
    } else if (want == NULL && cu.ctx_get != NULL) {
        CUcontext now = NULL;
        if (cu.ctx_get(&now) == CUDA_SUCCESS && now != NULL) {
            __atomic_store_n(&cu.dev[d].ctx, now, __ATOMIC_RELEASE);
        }
    }
}

static void cu_note_device(int d)
{
    if (d >= 0 && d < CU_MAX_DEVICES) {
        const uint64_t bit = (uint64_t)1 << d;
        if (!(__atomic_load_n(&cu.used, __ATOMIC_RELAXED) & bit)) {
            __atomic_fetch_or(&cu.used, bit, __ATOMIC_RELAXED);
        }
    }
}

/* ------------------------------------------------------------ memory kinds */

static collar_status_t cu_query(void *ctx, const void *ptr,
                                collar_ptr_info_t *info)
{
    (void)ctx;
    memset(info, 0, sizeof(*info));
    info->kind = COLLAR_MEM_HOST;
    info->device = -1;
    if (ptr == NULL) {
        return COLLAR_OK;
    }
    if (cu.get_attrs != NULL) {
        unsigned int type = 0, managed = 0;
        int ordinal = -1;
        unsigned long long id = 0;
        CUdeviceptr start = 0;
        size_t size = 0;
        CUpointer_attribute attrs[] = {
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
            CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_BUFFER_ID,
            CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        };
        void *data[] = { &type, &managed, &ordinal, &id, &start, &size };
        /* A pointer the driver does not know is no error ("the attributes
         * are assigned default NULL values"): zero reads as host memory,
         * and so does a driver not (or no longer) initialized.  Any other
         * error is the context's (a sticky error: every call fails from
         * then on).  The other ranks, whose driver answers, take a host
         * buffer for host memory and a device one for device memory, and
         * this rank must take the same path as they do: so the process's
         * own mapping decides, not the driver.  Memory the CPU can read
         * (the heap, an anonymous mapping, pinned memory) is host memory;
         * device memory's addresses are mappings the CPU cannot read (CUDA
         * reserves them in the process without access), taken as device
         * memory of the last device, not cached: the device path's first
         * device operation then fails, an error on every rank (the status
         * agreement).  (Managed memory the CPU can read, first seen after
         * such an error, would count as host here: docs/cuda.md.) */
        CUresult r = cu.get_attrs(6, attrs, data, (CUdeviceptr)(uintptr_t)ptr);
        if (r == CUDA_SUCCESS && collar_fault(COLLAR_FAULT_QUERY)) {
            r = CUDA_ERROR_LAUNCH_FAILED;   /* injected: as after a sticky error */
        }
        if (r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED) {
            return COLLAR_OK;
        }
        if (r != CUDA_SUCCESS) {
            memset(info, 0, sizeof(*info));
            info->kind = COLLAR_MEM_HOST;
            info->device = -1;
            if (collar_ptr_cpu_readable(ptr) != 1) {
                info->kind = COLLAR_MEM_DEVICE;
                info->device = __atomic_load_n(&cu.last, __ATOMIC_RELAXED);
            }
            return COLLAR_OK;
        }
        if (managed) {
            info->kind = COLLAR_MEM_MANAGED;
        } else if (type == CU_MEMORYTYPE_DEVICE) {
            info->kind = COLLAR_MEM_DEVICE;
        }
        if (info->kind != COLLAR_MEM_HOST) {
            info->device = ordinal;
            info->buffer_id = id;
            info->base = (uintptr_t)start;
            info->size = size;
        }
        return COLLAR_OK;
    }
    /* No driver entry points: the runtime's query, which gives no range
     * (nothing is cached then). */
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
        cudaGetLastError();
        return COLLAR_OK;
    }
    if (a.type == cudaMemoryTypeManaged) {
        info->kind = COLLAR_MEM_MANAGED;
    } else if (a.type == cudaMemoryTypeDevice) {
        info->kind = COLLAR_MEM_DEVICE;
    }
    if (info->kind != COLLAR_MEM_HOST) {
        info->device = a.device;
    }
    return COLLAR_OK;
}

static unsigned long long cu_buffer_id(void *ctx, const void *ptr)
{
    (void)ctx;
    unsigned long long id = 0;
    if (cu.get_attr == NULL
        || cu.get_attr(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                       (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS) {
        return 0;
    }
    return id;
}

/* What ptr is.  A peer's IPC memory is the peer's device's to the runtime;
 * the work on it (copies, kernels) goes to the device whose context opened
 * it, one this process uses, and not to the peer's, where it would make a
 * context of its own. */
static collar_status_t cu_info(const void *ptr, collar_ptr_info_t *info)
{
    COLLAR_CHECK(collar_ptrcache_lookup(cu.cache, ptr, info));
    const int d = info->device;
    if (info->kind == COLLAR_MEM_HOST || d < 0 || d >= CU_MAX_DEVICES
        || (__atomic_load_n(&cu.used, __ATOMIC_RELAXED) & ((uint64_t)1 << d))) {
        return COLLAR_OK;
    }
    pthread_mutex_lock(&cu.lock);
    for (const struct cu_pinned *b = cu.mapped; b != NULL; b = b->next) {
        if ((uintptr_t)b->ptr == info->base) {
            info->device = b->device;
            break;
        }
    }
    pthread_mutex_unlock(&cu.lock);
    return COLLAR_OK;
}

/* The device of the last device buffer this thread asked about: where a
 * call's device scratch goes (it is allocated before any copy names a
 * buffer); -1 in a thread that asked about none (the progress thread),
 * which takes the process's last (cu.last). */
static _Thread_local int cu_last_device = -1;

static collar_status_t cu_mem_query(const void *ptr, collar_mem_kind_t *kind)
{
    int device = -1;
    COLLAR_CHECK(collar_ptrcache_kind(cu.cache, ptr, kind, &device));
    if (*kind != COLLAR_MEM_HOST && device >= 0) {
        cu_last_device = device;
        if (__atomic_load_n(&cu.last, __ATOMIC_RELAXED) != device) {
            /* Once per change: the line is shared by every thread. */
            __atomic_store_n(&cu.last, device, __ATOMIC_RELAXED);
        }
        cu_note_device(device);
    }
    return COLLAR_OK;
}

/* The device of a device pointer, -1 when the driver does not know it. */
static int cu_ptr_device(const void *ptr)
{
    collar_ptr_info_t info;
    if (cu_info(ptr, &info) != COLLAR_OK || info.kind == COLLAR_MEM_HOST) {
        return -1;
    }
    return info.device;
}

collar_ranges_t *collar_cuda_host_ranges(void)
{
    return cu.cache != NULL ? collar_ptrcache_host_ranges(cu.cache) : NULL;
}

/* ----------------------------------------------------------- start, close */

static void *cu_entry_point(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess
        || found != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        collar_debug(MEM, "cuda: driver entry point %s not found", name);
        return NULL;
    }
    return fn;
}

/* Why init() failed, for the message of an explicit COLLAR_DEVICE=cuda. */
static char cu_reason[160];

const char *collar_cuda_unavailable_reason(void)
{
    return cu_reason[0] ? cu_reason : "unknown reason";
}

int collar_cuda_probe(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n > 0;
}

static collar_status_t cu_init(void)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n <= 0) {
        if (err != cudaSuccess) {
            snprintf(cu_reason, sizeof(cu_reason), "%s: %s",
                     cudaGetErrorName(err), cudaGetErrorString(err));
        } else {
            snprintf(cu_reason, sizeof(cu_reason), "the driver sees 0 devices");
        }
        collar_debug(MEM, "cuda: no usable GPU (%s)", cu_reason);
        cudaGetLastError();
        return COLLAR_ERR_UNAVAILABLE;
    }
    cu.ndevices = n < CU_MAX_DEVICES ? n : CU_MAX_DEVICES;
    cu.get_attrs = (cu_get_attrs_fn)cu_entry_point("cuPointerGetAttributes");
    cu.get_attr = (cu_get_attr_fn)cu_entry_point("cuPointerGetAttribute");
    cu.ctx_get = (cu_ctx_get_fn)cu_entry_point("cuCtxGetCurrent");
    cu.ctx_set = (cu_ctx_set_fn)cu_entry_point("cuCtxSetCurrent");
    cu.used = 0;
    cu.last = 0;
    cu.mpi_aware = -1;
    int mode = collar_cfg.ptr_cache;
    if (cu.get_attr == NULL && mode == COLLAR_PTR_CACHE_ON) {
        /* No buffer ids to check hits against: no cache. */
        mode = COLLAR_PTR_CACHE_OFF;
    }
    collar_ptr_driver_t drv = { .query = cu_query, .buffer_id = cu_buffer_id,
                                .host_range = collar_ptr_host_range_maps };
    COLLAR_CHECK(collar_ptrcache_create(&drv, mode, CU_CACHE_SIZE, &cu.cache));
    int version = 0;
    cudaDriverGetVersion(&version);
    collar_debug(MEM, "cuda: %d GPU(s), driver %d.%d, runtime %d.%d, pointer "
                 "cache %s", n, version / 1000, version % 1000 / 10,
                 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10,
                 mode == COLLAR_PTR_CACHE_OFF ? "off"
                 : mode == COLLAR_PTR_CACHE_TRUST ? "on (trusted hits)" : "on");
    return COLLAR_OK;
}

static void cu_finalize(void)
{
    collar_gdr_finalize();
    cu_current_t cur;
    cu_save_current(&cur);
    pthread_mutex_lock(&cu.lock);
    for (int d = 0; d < cu.ndevices; d++) {
        cu_device_t *dv = &cu.dev[d];
        if (dv->ready && cudaSetDevice(d) == cudaSuccess) {
            /* Errors are ignored: the application may have reset the
             * device already. */
            for (int i = 0; i < CU_NSTREAMS; i++) {
                cudaStreamDestroy(dv->s[i].stream);
            }
            for (int i = 0; i < dv->nevents; i++) {
                cudaEventDestroy(dv->events[i]);
            }
        }
        free(dv->events);
        memset(dv, 0, sizeof(*dv));
    }
    for (int l = 0; l < 2; l++) {   /* blocks not given back: forgotten */
        struct cu_pinned **list = l == 0 ? &cu.pinned : &cu.mapped;
        while (*list != NULL) {
            struct cu_pinned *b = *list;
            *list = b->next;
            free(b);
        }
    }
    cudaGetLastError();
    cu_restore_current(&cur);
    if (cu.cache != NULL) {
        collar_ptrcache_stats_t st;
        collar_ptrcache_stats(cu.cache, &st);
        collar_debug(MEM, "cuda: pointer cache: %llu hits, %llu misses, %llu "
                     "stale", (unsigned long long)st.hits,
                     (unsigned long long)st.misses, (unsigned long long)st.stale);
        collar_ptrcache_destroy(cu.cache);
        cu.cache = NULL;
    }
    pthread_mutex_unlock(&cu.lock);
}

/* ------------------------------------------------------- streams, events */

/* Make `d` current in collar's runtime and create its streams once. */
static collar_status_t cu_use_device(int d, cu_device_t **out)
{
    if (d < 0 || d >= cu.ndevices) {
        d = 0;
    }
    cudaError_t err = cudaSetDevice(d);
    if (err != cudaSuccess) {
        cu_fail("cudaSetDevice", err);
        return COLLAR_ERR_DEVICE;
    }
    cu_device_t *dv = &cu.dev[d];
    if (__atomic_load_n(&dv->ctx, __ATOMIC_ACQUIRE) == NULL && cu.ctx_get != NULL) {
        CUcontext now = NULL;
        if (cu.ctx_get(&now) == CUDA_SUCCESS && now != NULL) {
            __atomic_store_n(&dv->ctx, now, __ATOMIC_RELEASE);
        }
    }
    if (!__atomic_load_n(&dv->ready, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&cu.lock);
        collar_status_t st = COLLAR_OK;
        if (!dv->ready) {
            const unsigned flags = collar_cfg.sync == COLLAR_SYNC_NONE
                                   ? cudaStreamNonBlocking : cudaStreamDefault;
            int i;
            for (i = 0; i < CU_NSTREAMS; i++) {
                err = cudaStreamCreateWithFlags(&dv->s[i].stream, flags);
                if (err != cudaSuccess) {
                    break;
                }
                dv->s[i].device = d;
            }
            if (i < CU_NSTREAMS) {
                cu_fail("cudaStreamCreateWithFlags", err);
                while (i-- > 0) {
                    cudaStreamDestroy(dv->s[i].stream);
                }
                st = COLLAR_ERR_DEVICE;
            } else {
                __atomic_store_n(&dv->ready, 1, __ATOMIC_RELEASE);
                collar_debug(MEM, "cuda: %d streams on device %d", CU_NSTREAMS, d);
            }
        }
        pthread_mutex_unlock(&cu.lock);
        COLLAR_CHECK(st);
    }
    *out = dv;
    return COLLAR_OK;
}

static collar_status_t cu_record(cu_device_t *dv, struct collar_stream *s,
                                 collar_event_t *done)
{
    cudaEvent_t ev = NULL;
    pthread_mutex_lock(&cu.lock);
    if (dv->nevents > 0) {
        ev = dv->events[--dv->nevents];
    }
    pthread_mutex_unlock(&cu.lock);
    cudaError_t err;
    if (ev == NULL) {
        err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
        if (err != cudaSuccess) {
            cu_fail("cudaEventCreateWithFlags", err);
            return COLLAR_ERR_DEVICE;
        }
    }
    err = cudaEventRecord(ev, s->stream);
    if (err != cudaSuccess) {
        cudaEventDestroy(ev);
        cu_fail("cudaEventRecord", err);
        return COLLAR_ERR_DEVICE;
    }
    done->stream = s;
    done->ticket = 0;
    done->handle = ev;
    return COLLAR_OK;
}

/*
 * What follows an operation queued on `s`: an event recorded after it into
 * `done`, or for `done` NULL (device.h) the host's wait for it.  CUDA
 * Runtime API, cudaStreamSynchronize: "Blocks until stream has completed
 * all operations"; stream order (Programming Guide, Asynchronous
 * Execution: a stream's operations run in issue order) makes that this
 * operation and what was queued before it, all that a wait for an event
 * recorded after it would cover, with no event to record and poll.  The
 * waits cannot go: a copy to pinned memory is "fully asynchronous"
 * (Runtime API, API synchronization behavior), so the host learns that a
 * copy in is done (before the MPI library or a peer reads it) or that the
 * last copy or kernel is (before the call returns) only by a wait.
 */
static collar_status_t cu_finish(cu_device_t *dv, struct collar_stream *s,
                                 collar_event_t *done)
{
    if (done != NULL) {
        return cu_record(dv, s, done);
    }
    cudaError_t err = cudaStreamSynchronize(s->stream);
    if (err != cudaSuccess) {
        cu_fail("a device operation", err);
        return COLLAR_ERR_DEVICE;
    }
    return COLLAR_OK;
}

static void cu_event_release(struct collar_stream *s, cudaEvent_t ev)
{
    cu_device_t *dv = &cu.dev[s->device];
    pthread_mutex_lock(&cu.lock);
    if (dv->nevents == dv->cap) {
        int cap = dv->cap ? 2 * dv->cap : 64;
        cudaEvent_t *e = realloc(dv->events, (size_t)cap * sizeof(*e));
        if (e != NULL) {
            dv->events = e;
            dv->cap = cap;
        }
    }
    if (dv->nevents < dv->cap) {
        dv->events[dv->nevents++] = ev;
        ev = NULL;
    }
    pthread_mutex_unlock(&cu.lock);
    if (ev != NULL) {
        cudaEventDestroy(ev);
    }
}

static collar_status_t cu_event_query(collar_event_t *ev)
{
    if (ev->handle == NULL) {
        return COLLAR_OK;   /* done at once (a host-to-host copy) */
    }
    /* On the event's device: steps are tested by any thread (the progress
     * thread has no context of its own). */
    struct collar_stream *s = ev->stream;
    cu_current_t cur;
    cu_enter(s->device, &cur);
    cudaError_t err = cudaEventQuery((cudaEvent_t)ev->handle);
    if (err != cudaErrorNotReady) {
        cu_event_release(s, (cudaEvent_t)ev->handle);
    }
    cu_restore_current(&cur);
    if (err == cudaErrorNotReady) {
        return COLLAR_INPROGRESS;
    }
    ev->handle = NULL;
    if (err != cudaSuccess) {
        cu_fail("a device operation", err);
        return COLLAR_ERR_DEVICE;
    }
    return COLLAR_OK;
}

static int cu_nstreams(void)
{
    return CU_NSTREAMS;
}

/* ------------------------------------------------------ copies, reductions */

static collar_status_t cu_copy_async(void *dst, const void *src, size_t bytes,
                                     int stream, collar_event_t *done)
{
    collar_ptr_info_t di, si;
    COLLAR_CHECK(cu_info(dst, &di));
    COLLAR_CHECK(cu_info(src, &si));
    if (di.kind == COLLAR_MEM_HOST && si.kind == COLLAR_MEM_HOST) {
        if (bytes != 0 && dst != src) {
            memmove(dst, src, bytes);
        }
        if (done != NULL) {
            memset(done, 0, sizeof(*done));
        }
        return COLLAR_OK;
    }
    cu_device_t *dv;
    cu_current_t cur;
    cu_save_current(&cur);
    collar_status_t st = cu_use_device(di.kind != COLLAR_MEM_HOST ? di.device
                                       : si.device, &dv);
    if (st == COLLAR_OK) {
        struct collar_stream *s = &dv->s[(unsigned)stream % CU_NSTREAMS];
        /* The host side may be pageable memory (staging without pinned
         * memory: collar_staging_get).  CUDA Runtime API, "API
         * synchronization behavior", Memcpy, Asynchronous: "For transfers
         * between device memory and pageable host memory, the function
         * might be synchronous with respect to host" ("If pageable memory
         * must first be staged to pinned memory, the driver may synchronize
         * with the stream and stage the copy into pinned memory"): allowed,
         * and still in stream order, so the event recorded after it (or
         * the wait) covers it as for pinned memory; only slower, and this
         * thread may wait in the call. */
        cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                          s->stream);
        if (err != cudaSuccess) {
            cu_fail("cudaMemcpyAsync", err);
            st = COLLAR_ERR_DEVICE;
        } else {
            st = cu_finish(dv, s, done);
        }
    }
    cu_restore_current(&cur);
    return st;
}

static unsigned long long cu_id_now(const void *ptr)
{
    return cu_buffer_id(NULL, ptr);
}

/*
 * A copy between the application's device memory (cudaMalloc: not
 * managed memory, which GDRCopy does not map) and host memory, by the CPU
 * through a GDRCopy mapping.  The CPU is ordered after the caller's device
 * work the way collar's streams are: under COLLAR_SYNC=device the
 * schedule's ordering step waited for the whole device; under stream the
 * streams would start after the legacy default stream's work, which the
 * host waits for here instead; under none the caller has synchronised.
 */
static collar_status_t cu_copy_now(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0 || !collar_gdr_available(NULL)) {
        return COLLAR_ERR_UNAVAILABLE;   /* before any pointer query */
    }
    collar_ptr_info_t di, si;
    COLLAR_CHECK(cu_info(dst, &di));
    COLLAR_CHECK(cu_info(src, &si));
    const int to_dev = di.kind == COLLAR_MEM_DEVICE && si.kind == COLLAR_MEM_HOST;
    if (!to_dev && !(si.kind == COLLAR_MEM_DEVICE && di.kind == COLLAR_MEM_HOST)) {
        return COLLAR_ERR_UNAVAILABLE;
    }
    const collar_ptr_info_t *a = to_dev ? &di : &si;
    void *dev = to_dev ? dst : (void *)src;
    /* Under COLLAR_PTR_CACHE=trust a hit is not checked: an allocation
     * freed and made again at the same address would be copied through
     * the old one's mapping, which the driver has torn down (a fault, not
     * a stale byte).  The copy engine does not care; the mapping does. */
    if (a->buffer_id == 0
        || (collar_cfg.ptr_cache == COLLAR_PTR_CACHE_TRUST
            && cu_buffer_id(NULL, dev) != a->buffer_id)) {
        return COLLAR_ERR_UNAVAILABLE;
    }
    if (collar_cfg.sync == COLLAR_SYNC_STREAM) {
        cu_current_t cur;
        cu_enter(a->device, &cur);
        const cudaError_t err = cudaStreamSynchronize(cudaStreamLegacy);
        cu_restore_current(&cur);
        if (err != cudaSuccess) {
            cu_fail("cudaStreamSynchronize", err);
            return COLLAR_ERR_DEVICE;
        }
    }
    return collar_gdr_copy(a, dev, to_dev ? (void *)src : dst, bytes, to_dev,
                           cu_id_now);
}

/* Streams of their own for another library's work (ncclAllReduce), on the
 * device of `ptr`, with the flags of collar's streams. */
static collar_status_t cu_stream_new(const void *ptr, collar_stream_t **out)
{
    struct collar_stream *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    cu_device_t *dv;
    cu_current_t cur;
    cu_save_current(&cur);
    const int d = cu_ptr_device(ptr);
    collar_status_t st = cu_use_device(d, &dv);
    if (st == COLLAR_OK) {
        const unsigned flags = collar_cfg.sync == COLLAR_SYNC_NONE
                               ? cudaStreamNonBlocking : cudaStreamDefault;
        cudaError_t err = cudaStreamCreateWithFlags(&s->stream, flags);
        if (err != cudaSuccess) {
            cu_fail("cudaStreamCreateWithFlags", err);
            st = COLLAR_ERR_DEVICE;
        }
        s->device = d < 0 || d >= cu.ndevices ? 0 : d;
    }
    cu_restore_current(&cur);
    if (st != COLLAR_OK) {
        free(s);
        return st;
    }
    *out = s;
    return COLLAR_OK;
}

static collar_status_t cu_issue_async(collar_stream_t *s,
                                      collar_status_t (*fn)(void *native, void *arg),
                                      void *arg, collar_event_t *done)
{
    cu_device_t *dv;
    cu_current_t cur;
    cu_save_current(&cur);
    collar_status_t st = cu_use_device(s->device, &dv);
    if (st == COLLAR_OK) {
        st = fn((void *)s->stream, arg);
        if (st == COLLAR_OK) {
            st = cu_record(dv, s, done);
        }
    }
    cu_restore_current(&cur);
    return st;
}

static void cu_stream_free(collar_stream_t *s)
{
    if (s != NULL) {
        cu_current_t cur;
        cu_enter(s->device, &cur);
        cudaStreamDestroy(s->stream);
        cu_restore_current(&cur);
        free(s);
    }
}

/* A reduction kernel on the device of dst (inputs elsewhere are IPC
 * memory this process mapped, addressable from there): the pair
 * dst op= in when src is NULL, else the n inputs of src into dst. */
static collar_status_t cu_reduce_launch(void *dst, const void *in,
                                        const void *const *src, int n,
                                        size_t count, collar_dtype_t dt,
                                        collar_op_t op, int stream,
                                        collar_event_t *done)
{
    if (!collar_cuda_reduce_supported(dt, op)) {
        return COLLAR_ERR_UNSUPPORTED;
    }
    collar_ptr_info_t info;
    COLLAR_CHECK(cu_info(dst, &info));
    cu_device_t *dv;
    cu_current_t cur;
    cu_save_current(&cur);
    collar_status_t st = cu_use_device(info.device, &dv);
    if (st == COLLAR_OK) {
        struct collar_stream *s = &dv->s[(unsigned)stream % CU_NSTREAMS];
        const int rc = src == NULL
            ? collar_cuda_reduce_launch(dst, in, count, dt, op, s->stream)
            : collar_cuda_reduce_n_launch(dst, src, n, count, dt, op, s->stream);
        if (rc < 0) {
            st = COLLAR_ERR_UNSUPPORTED;
        } else if (rc > 0) {
            cu_fail("a reduction kernel launch", (cudaError_t)rc);
            st = COLLAR_ERR_DEVICE;
        } else {
            st = cu_finish(dv, s, done);
        }
    }
    cu_restore_current(&cur);
    return st;
}

static collar_status_t cu_reduce_async(void *inout, const void *in,
                                       size_t count, collar_dtype_t dt,
                                       collar_op_t op, int stream,
                                       collar_event_t *done)
{
    return cu_reduce_launch(inout, in, NULL, 0, count, dt, op, stream, done);
}

static collar_status_t cu_reduce_n_async(void *dst, const void *const *src, int n,
                                         size_t count, collar_dtype_t dt,
                                         collar_op_t op, int stream,
                                         collar_event_t *done)
{
    if (src == NULL || n < 2 || n > COLLAR_REDUCE_N_MAX) {
        return COLLAR_ERR_INVALID;
    }
    return cu_reduce_launch(dst, NULL, src, n, count, dt, op, stream, done);
}

/* Does the MPI library read device buffers itself?  Asked once. */
static int cu_mpi_reads_device(void)
{
    int a = __atomic_load_n(&cu.mpi_aware, __ATOMIC_RELAXED);
    if (a < 0) {
        a = collar_mpi_cuda_aware() ? 1 : 0;
        __atomic_store_n(&cu.mpi_aware, a, __ATOMIC_RELAXED);
    }
    return a;
}

static collar_status_t cu_order_after_caller(void)
{
    if (collar_cfg.sync == COLLAR_SYNC_NONE) {
        return COLLAR_OK;
    }
    /* The waits kept per call (docs/cuda.md, "Synchronisations per
     * call").  device: the caller's streams are unknown, and
     * cudaDeviceSynchronize "blocks until the device has completed all
     * preceding requested tasks".  stream: collar's own copies and kernels
     * are ordered after the legacy default stream by being on blocking
     * streams, at no host cost (Runtime API, Stream synchronization
     * behavior: an action in the legacy stream is queued after all
     * blocking streams' work, "and then all blocking streams wait on the
     * legacy stream").  But a
     * CUDA-aware MPI library reads device buffers itself (the ring's first
     * sends of an in-place call read the user's buffer directly), ordered
     * after nothing: the host waits for the legacy stream then. */
    const int stream_wait = collar_cfg.sync == COLLAR_SYNC_STREAM;
    if (stream_wait && !cu_mpi_reads_device()) {
        return COLLAR_OK;
    }
    /* The devices the application's buffers live on: the caller's work on
     * them may be on any of their streams.  Not the others: that would
     * create a context on every GPU of the node (and fail on GPUs in
     * EXCLUSIVE_PROCESS mode that belong to other ranks). */
    const uint64_t used = __atomic_load_n(&cu.used, __ATOMIC_RELAXED);
    if (used == 0) {
        return COLLAR_OK;
    }
    cu_current_t cur;
    cu_save_current(&cur);
    collar_status_t st = COLLAR_OK;
    for (int d = 0; d < cu.ndevices && st == COLLAR_OK; d++) {
        if (!(used & ((uint64_t)1 << d))) {
            continue;
        }
        cudaError_t err = cudaSetDevice(d);
        if (err == cudaSuccess) {
            err = stream_wait ? cudaStreamSynchronize(cudaStreamLegacy)
                              : cudaDeviceSynchronize();
        }
        if (err != cudaSuccess) {
            cu_fail(stream_wait ? "cudaStreamSynchronize" : "cudaDeviceSynchronize",
                    err);
            st = COLLAR_ERR_DEVICE;
        }
    }
    cu_restore_current(&cur);
    return st;
}

/* ----------------------------------------------------------------- memory */

/* The device a scratch buffer is for (ptr NULL: a new one, for the call
 * this thread is setting up) or lives on. */
static int cu_scratch_device(const void *ptr)
{
    if (ptr == NULL) {
        const int d = cu_last_device >= 0 ? cu_last_device
                                          : __atomic_load_n(&cu.last, __ATOMIC_RELAXED);
        return d >= 0 && d < cu.ndevices ? d : 0;
    }
    collar_ptr_info_t info;
    if (cu_info(ptr, &info) != COLLAR_OK || info.device < 0) {
        return 0;
    }
    return info.device;
}

/* Note b (ptr, device) in *list / take ptr's entry out of it (NULL: none). */
static void cu_block_note(struct cu_pinned **list, struct cu_pinned *b, void *ptr, int d)
{
    b->ptr = ptr;
    b->device = d;
    pthread_mutex_lock(&cu.lock);
    b->next = *list;
    *list = b;
    pthread_mutex_unlock(&cu.lock);
}

static struct cu_pinned *cu_block_take(struct cu_pinned **list, const void *ptr)
{
    struct cu_pinned *b = NULL;
    pthread_mutex_lock(&cu.lock);
    for (struct cu_pinned **p = list; *p != NULL; p = &(*p)->next) {
        if ((*p)->ptr == ptr) {
            b = *p;
            *p = b->next;
            break;
        }
    }
    pthread_mutex_unlock(&cu.lock);
    return b;
}

static collar_status_t cu_host_alloc(size_t bytes, void **ptr)
{
    /* On the device of the call's buffers: the runtime would otherwise
     * create a context on device 0. */
    cu_device_t *dv;
    cu_current_t cur;
    cu_save_current(&cur);
    cudaError_t err = cudaErrorInvalidDevice;
    const int d = cu_scratch_device(NULL);
    struct cu_pinned *b = malloc(sizeof(*b));
    if (b != NULL && cu_use_device(d, &dv) == COLLAR_OK) {
        err = cudaHostAlloc(ptr, bytes ? bytes : 1, cudaHostAllocPortable);
    }
    cu_restore_current(&cur);
    if (err == cudaSuccess) {
        cu_block_note(&cu.pinned, b, *ptr, d);
        return COLLAR_OK;
    }
    free(b);
    cudaGetLastError();
    /* The caller falls back where it may (collar_staging_get: pageable
     * memory for staging, but never for the scratch kernels read). */
    collar_debug(MEM, "cuda: cannot pin %zu bytes: %s", bytes,
                 cudaGetErrorString(err));
    *ptr = NULL;
    return COLLAR_ERR_NO_MEMORY;
}

static void cu_host_free(void *ptr)
{
    struct cu_pinned *b = cu_block_take(&cu.pinned, ptr);
    if (b == NULL) {
        return;   /* not host_alloc's */
    }
    cu_current_t cur;
    cu_enter(b->device, &cur);
    if (cudaFreeHost(ptr) != cudaSuccess) {
        cudaGetLastError();
    }
    cu_restore_current(&cur);
    free(b);
}

static collar_status_t cu_dev_alloc(size_t bytes, void **ptr)
{
    cu_device_t *dv;
    cu_current_t cur;
    cu_save_current(&cur);
    collar_status_t st = cu_use_device(cu_scratch_device(NULL), &dv);
    if (st == COLLAR_OK) {
        cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1);
        if (err != cudaSuccess) {
            cudaGetLastError();
            collar_debug(MEM, "cuda: cudaMalloc of %zu bytes failed: %s", bytes,
                         cudaGetErrorString(err));
            st = COLLAR_ERR_NO_MEMORY;
        }
    }
    cu_restore_current(&cur);
    return st;
}

static void cu_dev_free(void *ptr)
{
    const int d = cu_ptr_device(ptr);
    collar_ptrcache_forget(cu.cache, ptr, 1);
    cu_current_t cur;
    cu_enter(d, &cur);
    if (cudaFree(ptr) != cudaSuccess) {
        cudaGetLastError();
    }
    cu_restore_current(&cur);
}

/* ------------------------------------------------------------- IPC memory */

_Static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(collar_ipc_handle_t),
               "cudaIpcMemHandle_t fits collar_ipc_handle_t");

static collar_status_t cu_ipc_alloc(size_t bytes, void **ptr,
                                    collar_ipc_handle_t *handle)
{
    memset(handle, 0, sizeof(*handle));
    COLLAR_CHECK(cu_dev_alloc(bytes, ptr));
    cudaIpcMemHandle_t h;
    cu_current_t cur;
    cu_enter(cu_scratch_device(NULL), &cur);
    cudaError_t err = cudaIpcGetMemHandle(&h, *ptr);
    cu_restore_current(&cur);
    if (err != cudaSuccess) {
        cudaGetLastError();
        collar_debug(MEM, "cuda: cudaIpcGetMemHandle failed: %s",
                     cudaGetErrorString(err));
        cu_dev_free(*ptr);
        *ptr = NULL;
        return COLLAR_ERR_DEVICE;
    }
    memcpy(handle->bytes, &h, sizeof(h));
    return COLLAR_OK;
}

static void cu_ipc_where(const void *ptr, char *where, size_t len)
{
    const int d = cu_scratch_device(ptr);
    if (cudaDeviceGetPCIBusId(where, (int)len, d) != cudaSuccess) {
        cudaGetLastError();
        snprintf(where, len, "cuda:%d", d);   /* names no device of a peer */
    }
}

/* Can this process map the memory of a peer whose device is named
 * peer_where?  Refused only where it is known not to work: a device this
 * process sees that is neither its own nor a peer of it
 * (cudaDeviceCanAccessPeer; "cudaDeviceCanAccessPeer can determine if a
 * mapping is possible").  A device it does not see is no reason:
 * "cudaIpcOpenMemHandle can open handles to devices that may not be
 * visible in the process calling the API" -- with a per-task
 * CUDA_VISIBLE_DEVICES (SLURM's --gpus-per-task) every peer's GPU is
 * hidden; whether the two GPUs can map each other's memory is then known
 * only by opening the handle, and a failure there makes the registration
 * fall back on every rank. */
static int cu_ipc_reachable(const char *peer_where)
{
    int peer = -1, mine = cu_scratch_device(NULL), can = 0;
    if (cudaDeviceGetByPCIBusId(&peer, peer_where) != cudaSuccess) {
        cudaGetLastError();
        return 1;   /* not visible here: cudaIpcOpenMemHandle decides */
    }
    if (peer == mine) {
        return 1;
    }
    if (cudaDeviceCanAccessPeer(&can, mine, peer) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return can;
}

static collar_status_t cu_ipc_open(const collar_ipc_handle_t *handle, void **ptr)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle->bytes, sizeof(h));
    cu_device_t *dv;
    cu_current_t cur;
    cu_save_current(&cur);
    const int d = cu_scratch_device(NULL);
    struct cu_pinned *b = malloc(sizeof(*b));
    collar_status_t st = b != NULL ? cu_use_device(d, &dv) : COLLAR_ERR_NO_MEMORY;
    if (st == COLLAR_OK) {
        cudaError_t err = cudaIpcOpenMemHandle(ptr, h,
                                               cudaIpcMemLazyEnablePeerAccess);
        if (err != cudaSuccess) {
            cudaGetLastError();
            collar_debug(MEM, "cuda: cudaIpcOpenMemHandle failed: %s",
                         cudaGetErrorString(err));
            st = COLLAR_ERR_DEVICE;
        }
    }
    cu_restore_current(&cur);
    if (st == COLLAR_OK) {
        cu_block_note(&cu.mapped, b, *ptr, d);
    } else {
        free(b);
    }
    return st;
}

static void cu_ipc_published(void *ptr)
{
    (void)ptr;  /* a CUDA IPC handle names nothing that outlives the process */
}

static collar_status_t cu_ipc_close(void *ptr)
{
    /* In the context that opened it: the device noted at the open.  The
     * pointer's own device (its attributes) is the peer's, where this
     * process has no business making a context. */
    struct cu_pinned *b = cu_block_take(&cu.mapped, ptr);
    const int d = b != NULL ? b->device : cu_ptr_device(ptr);
    free(b);
    collar_ptrcache_forget(cu.cache, ptr, 1);
    cu_current_t cur;
    cu_enter(d, &cur);
    const cudaError_t err = cudaIpcCloseMemHandle(ptr);
    if (err != cudaSuccess) {
        cudaGetLastError();
        collar_debug(MEM, "cuda: cudaIpcCloseMemHandle failed: %s; the "
                     "peer's memory stays allocated", cudaGetErrorName(err));
    }
    cu_restore_current(&cur);
    return err == cudaSuccess ? COLLAR_OK : COLLAR_ERR_DEVICE;
}

/*
 * The application's buffer for peers to read in place (ipc's zero-copy).
 * Exportable only when the pointer cache (cuPointerGetAttributes) says
 * device memory, not managed, with its allocation's base and buffer id,
 * the buffer inside the allocation, and the driver says so:
 *   - "Takes a pointer to the base of an existing device memory allocation
 *     previously allocated with cudaMalloc and exports it for use in
 *     another process" (cudaIpcGetMemHandle): the handle is taken at the
 *     allocation's base (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR), the
 *     buffer's offset travels beside it;
 *   - CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: "Returns in *data a
 *     boolean that indicates if the pointed to memory is capable to be
 *     used with legacy CUDA IPC APIs" (cuPointerGetAttribute) -- 0 for
 *     memory from cuMemCreate (VMM) and from stream-ordered pools
 *     (cudaMallocAsync), which have their own export mechanisms;
 *   - managed memory (CU_POINTER_ATTRIBUTE_IS_MANAGED) and host memory
 *     are not cudaMalloc memory;
 *   - "If a region of memory is freed with cudaFree and a subsequent call
 *     to cudaMalloc returns memory with the same device address,
 *     cudaIpcGetMemHandle will return a unique handle for the new memory"
 *     (cudaIpcGetMemHandle): the buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID,
 *     "unique for the lifetime of the process") tells peers the same.
 * A failing cudaIpcGetMemHandle is "cannot export" too (the call copies
 * in on every rank).
 */
static collar_status_t cu_ipc_export(const void *ptr, size_t bytes,
                                     collar_ipc_handle_t *handle,
                                     uint64_t *base, size_t *offset,
                                     uint64_t *id)
{
    collar_ptr_info_t info;
    unsigned int capable = 0;
    if (cu_info(ptr, &info) != COLLAR_OK || info.kind != COLLAR_MEM_DEVICE
        || info.base == 0 || info.buffer_id == 0 || info.device < 0
        || (uintptr_t)ptr < info.base
        || (uintptr_t)ptr - info.base > info.size
        || bytes > info.size - ((uintptr_t)ptr - info.base)) {
        collar_debug(MEM, "cuda: %p (%zu bytes) is not cudaMalloc memory "
                     "collar can export (%s, device %d, allocation %#llx, "
                     "%zu bytes, buffer id %llu)", ptr, bytes,
                     collar_mem_kind_name(info.kind), info.device,
                     (unsigned long long)info.base, info.size, info.buffer_id);
        return COLLAR_ERR_UNAVAILABLE;
    }
    if (cu.get_attr == NULL
        || cu.get_attr(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                       (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS
        || !capable) {
        return COLLAR_ERR_UNAVAILABLE;
    }
    cudaIpcMemHandle_t h;
    cu_current_t cur;
    cu_enter(info.device, &cur);
    const cudaError_t err = cudaIpcGetMemHandle(&h, (void *)info.base);
    cu_restore_current(&cur);
    if (err != cudaSuccess) {
        cudaGetLastError();
        collar_debug(MEM, "cuda: cudaIpcGetMemHandle of a buffer failed: %s",
                     cudaGetErrorString(err));
        return COLLAR_ERR_UNAVAILABLE;
    }
    memset(handle, 0, sizeof(*handle));
    memcpy(handle->bytes, &h, sizeof(h));
    *base = (uint64_t)info.base;
    *offset = (size_t)((uintptr_t)ptr - info.base);
    *id = (uint64_t)info.buffer_id;
    return COLLAR_OK;
}

const collar_device_t collar_device_cuda = {
    .name               = "cuda",
    .init               = cu_init,
    .finalize           = cu_finalize,
    .mem_query          = cu_mem_query,
    .host_alloc         = cu_host_alloc,
    .host_free          = cu_host_free,
    .dev_alloc          = cu_dev_alloc,
    .dev_free           = cu_dev_free,
    .nstreams           = cu_nstreams,
    .copy_async         = cu_copy_async,
    .copy_now           = cu_copy_now,
    .reduce_supported   = collar_cuda_reduce_supported,
    .reduce_async       = cu_reduce_async,
    .reduce_n_async     = cu_reduce_n_async,
    .event_query        = cu_event_query,
    .order_after_caller = cu_order_after_caller,
    .scratch_device     = cu_scratch_device,
    .stream_new         = cu_stream_new,
    .issue_async        = cu_issue_async,
    .stream_free        = cu_stream_free,
    .ipc_alloc          = cu_ipc_alloc,
    .ipc_where          = cu_ipc_where,
    .ipc_reachable      = cu_ipc_reachable,
    .ipc_open           = cu_ipc_open,
    .ipc_published      = cu_ipc_published,
    .ipc_close          = cu_ipc_close,
    .ipc_free           = cu_dev_free,
    .ipc_export         = cu_ipc_export,
    .ipc_export_keep    = 0,
};
