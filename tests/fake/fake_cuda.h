/*
 * A fake CUDA runtime and driver for the cuda backend, without a GPU:
 * NDEV GPUs, a per-thread current context as the driver keeps it, device
 * allocations in a table (host memory the fake driver answers "device"
 * for), copies done at once, events always complete, pointer queries
 * counted.  The reduction "kernels" run at once on the host, and, as a
 * real kernel, fail on memory that is not device memory (a pageable host
 * buffer).  IPC handles name shared memory another process maps (the
 * allocation is moved into it when its handle is taken), so that ipc runs
 * between processes.  Included after src/mem/cuda.c by
 * tests/unit/test_cuda.c and by the tests' LD_PRELOAD library
 * (tests/fake/collar_fakecuda.c); each gets its own copy of the state.
 */
#ifndef COLLAR_FAKE_CUDA_H
#define COLLAR_FAKE_CUDA_H

#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAKE_ALLOCS 256

#define NDEV 4

/* ------------------------------------------------------------ fake driver */

/*
 * Devices.  NDEV physical GPUs, bus 0x10 + i; pairs 0-1 and 2-3 have peer
 * access.  FAKECUDA_VISIBLE_DEVICES (a list of physical indexes) chooses
 * and renumbers the devices this process sees, as the driver does with
 * CUDA_VISIBLE_DEVICES: every ordinal below is this process's (0 ..
 * fake_nvis - 1), and cudaDeviceGetByPCIBusId fails for a device it does
 * not see.  (A name of its own: a CUDA_VISIBLE_DEVICES set for a real GPU
 * must not change the fake's devices under the other tests.)
 */
static int fake_vis[NDEV];   /* ordinal -> physical index */
static int fake_nvis = -1;

static void fake_visible(void)
{
    if (fake_nvis >= 0) {
        return;
    }
    const char *env = getenv("FAKECUDA_VISIBLE_DEVICES");
    int n = 0;
    if (env == NULL) {
        for (n = 0; n < NDEV; n++) {
            fake_vis[n] = n;
        }
    } else {
        /* As the driver does: the list ends at the first invalid entry. */
        for (const char *p = env; *p != '\0' && n < NDEV;) {
            char *end;
            const long d = strtol(p, &end, 10);
            if (end == p || d < 0 || d >= NDEV) {
                break;
            }
            fake_vis[n++] = (int)d;
            p = *end == ',' ? end + 1 : end;
        }
    }
    fake_nvis = n;
}

/* The physical index of ordinal d, or -1. */
static int fake_phys(int d)
{
    fake_visible();
    return d >= 0 && d < fake_nvis ? fake_vis[d] : -1;
}

/* The ordinal of physical device p in this process, or -1 (not visible). */
static int fake_ordinal(int p)
{
    fake_visible();
    for (int d = 0; d < fake_nvis; d++) {
        if (fake_vis[d] == p) {
            return d;
        }
    }
    return -1;
}

static int fake_peers(int p, int q)
{
    return p / 2 == q / 2;
}

static int       ctx_store[NDEV];
static _Thread_local CUcontext cur_ctx;   /* the thread's current context */
static unsigned  touched;                 /* bit d: a context made current on d */
static unsigned  synced;                  /* bit d: cudaDeviceSynchronize on d */
static int       nsync;
static int       memcpy_device = -1, malloc_device = -1, hostalloc_device = -1;

/*
 * Contexts of this process, as the CUDA Runtime API documents them
 * ("Interactions with the CUDA Driver API", "Initialization and
 * Tear-Down"; Programming Guide, "Initialization"): cudaSetDevice makes
 * the device's primary context current to the calling thread and, since
 * CUDA 12, initialises it at once; "If no CUcontext is current to the
 * calling thread when a CUDA Runtime API call which requires an active
 * context is made, then the primary context for a device will be
 * selected, made current to the calling thread, and initialized" -- the
 * thread's current device, 0 until cudaSetDevice chose another.  So a
 * call that needs a context on a thread without one (collar's progress
 * thread, a thread of the application's that never touched CUDA) creates
 * a context on GPU 0: hundreds of MB of device memory there, and an error
 * on a GPU in EXCLUSIVE_PROCESS mode that another rank holds.
 * fake_contexts records the devices that got a context, fake_implicit
 * the functions that made one current that way (the report at exit,
 * collar_fakecuda.c).
 */
static _Atomic unsigned fake_contexts;
static _Atomic unsigned fake_implicit_n;
static const char *_Atomic fake_implicit[16];

static CUcontext ctx_of(int d)
{
    return (CUcontext)(void *)&ctx_store[d];
}

static int ctx_device(CUcontext c)
{
    for (int d = 0; d < NDEV; d++) {
        if (c == ctx_of(d)) {
            return d;
        }
    }
    return -1;
}

static void fake_note_implicit(const char *fn)
{
    const unsigned n = atomic_load(&fake_implicit_n);
    for (unsigned i = 0; i < n && i < 16; i++) {
        if (strcmp(atomic_load(&fake_implicit[i]), fn) == 0) {
            return;
        }
    }
    const unsigned i = atomic_fetch_add(&fake_implicit_n, 1);
    if (i < 16) {
        atomic_store(&fake_implicit[i], fn);
    }
}

/* The device of the calling thread's current context, for runtime call
 * `fn`, which needs one: without one, device 0's primary context is made
 * current (and recorded). */
static int fake_current(const char *fn)
{
    if (cur_ctx == NULL) {
        cur_ctx = ctx_of(0);
        touched |= 1u;
        fake_note_implicit(fn);
    }
    const int d = ctx_device(cur_ctx);
    atomic_fetch_or(&fake_contexts, 1u << d);
    return d;
}
#define cur_device() fake_current(__func__)

typedef struct {
    char              *base;
    size_t             size;
    int                device;
    int                managed;
    unsigned long long id;
    int                shared;   /* 1: its IPC name is linked; 2: a peer's, mapped */
    _Atomic int       *opens;    /* shared: the processes that have it open */
} fake_alloc_t;

static fake_alloc_t allocs[FAKE_ALLOCS];
static int nalloc;
static unsigned long long next_id = 1;

static fake_alloc_t *fake_map(size_t size, int device, int managed)
{
    if (nalloc == FAKE_ALLOCS) {
        abort();
    }
    fake_alloc_t *a = &allocs[nalloc++];
    /* A mapping of its own, as the driver's allocations are: never in the
     * [heap] or a file mapping, whose host answers collar caches. */
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        abort();
    }
    *a = (fake_alloc_t){ base, size, device, managed, next_id++, 0, NULL };
    return a;
}

static fake_alloc_t *fake_find(const void *p)
{
    for (int i = 0; i < nalloc; i++) {
        if (allocs[i].id != 0 && (const char *)p >= allocs[i].base
            && (const char *)p < allocs[i].base + allocs[i].size) {
            return &allocs[i];
        }
    }
    return NULL;
}

/* Pointer queries so far: cuPointerGetAttributes, cuPointerGetAttribute. */
static _Atomic unsigned long fake_nqueries, fake_nattr;

static CUresult fake_attrs(unsigned n, CUpointer_attribute *attrs,
                           void **data, CUdeviceptr p)
{
    const fake_alloc_t *a = fake_find((const void *)(uintptr_t)p);
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned *)data[i] = a ? CU_MEMORYTYPE_DEVICE : 0;
            break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            *(unsigned *)data[i] = a ? (unsigned)a->managed : 0;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *(int *)data[i] = a ? a->device : -1;
            break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
            *(unsigned long long *)data[i] = a ? a->id : 0;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(CUdeviceptr *)data[i] = a ? (CUdeviceptr)(uintptr_t)a->base : 0;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *(size_t *)data[i] = a ? a->size : 0;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

static CUresult fake_get_attrs(unsigned n, CUpointer_attribute *attrs,
                               void **data, CUdeviceptr p)
{
    atomic_fetch_add_explicit(&fake_nqueries, 1, memory_order_relaxed);
    return fake_attrs(n, attrs, data, p);
}

static CUresult fake_get_attr(void *data, CUpointer_attribute attr, CUdeviceptr p)
{
    atomic_fetch_add_explicit(&fake_nattr, 1, memory_order_relaxed);
    void *d[1] = { data };
    return fake_attrs(1, &attr, d, p);
}

static CUresult fake_ctx_get(CUcontext *c)
{
    *c = cur_ctx;
    return CUDA_SUCCESS;
}

static CUresult fake_ctx_set(CUcontext c)
{
    cur_ctx = c;
    return CUDA_SUCCESS;
}

/* ----------------------------------------------------------- fake runtime */

cudaError_t cudaGetDeviceCount(int *n)
{
    fake_visible();
    *n = fake_nvis;
    return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *name, void **fn,
                                             unsigned version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *st)
{
    (void)version;
    (void)flags;
    *fn = NULL;
    if (strcmp(name, "cuPointerGetAttributes") == 0) {
        *fn = (void *)fake_get_attrs;
    } else if (strcmp(name, "cuPointerGetAttribute") == 0) {
        *fn = (void *)fake_get_attr;
    } else if (strcmp(name, "cuCtxGetCurrent") == 0) {
        *fn = (void *)fake_ctx_get;
    } else if (strcmp(name, "cuCtxSetCurrent") == 0) {
        *fn = (void *)fake_ctx_set;
    }
    *st = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorName(cudaError_t e) { (void)e; return "fake"; }
const char *cudaGetErrorString(cudaError_t e) { (void)e; return "fake error"; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 12000; return cudaSuccess; }

cudaError_t cudaSetDevice(int d)
{
    if (fake_phys(d) < 0) {
        return cudaErrorInvalidDevice;
    }
    cur_ctx = ctx_of(d);
    touched |= 1u << d;
    atomic_fetch_or(&fake_contexts, 1u << d);
    return cudaSuccess;
}

/* The thread's current device: no context is created. */
cudaError_t cudaGetDevice(int *d)
{
    *d = cur_ctx ? ctx_device(cur_ctx) : 0;
    return cudaSuccess;
}

static unsigned stream_synced;   /* bit d: the legacy stream of d */

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (s == cudaStreamLegacy) {
        stream_synced |= 1u << cur_device();
    }
    nsync++;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    synced |= 1u << cur_device();
    nsync++;
    return cudaSuccess;
}

static int stream_store[64];
static int nstreams;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    stream_store[nstreams] = cur_device();
    *s = (cudaStream_t)(void *)&stream_store[nstreams++];
    return cudaSuccess;
}

/* Streams, events, frees: each needs a context (see above). */
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    (void)s;
    cur_device();
    return cudaSuccess;
}

static int event_store;
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    cur_device();
    *e = (cudaEvent_t)(void *)&event_store;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)e;
    (void)s;
    cur_device();
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e)
{
    (void)e;
    cur_device();
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    (void)e;
    cur_device();
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                            enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)kind;
    memcpy_device = *(int *)(void *)s;   /* the stream's device */
    if (cur_device() != memcpy_device) {
        memcpy_device = -2;              /* issued on another device */
    }
    memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    malloc_device = cur_device();
    *p = fake_map(n, malloc_device, 0)->base;
    return cudaSuccess;
}

/*
 * IPC: a handle names the allocation's shared memory object (the owner's
 * process id and the allocation's id) and carries its pointer, size and
 * physical device; opened in the owner's process it gives the pointer
 * back, elsewhere it maps the object (a fake device allocation there too,
 * on the device current at the time, which opening notes).
 *
 * The rules of the CUDA Runtime API that the fake enforces:
 *   - cudaIpcOpenMemHandle "can open handles to devices that may not be
 *     visible in the process calling the API": opening never asks whether
 *     the owner's device is visible here; it fails only where the two
 *     physical devices are neither the same nor peers ("cudaDeviceCanAccessPeer
 *     can determine if a mapping is possible").
 *   - "Calling cudaFree on an exported memory region before calling
 *     cudaIpcCloseMemHandle in the importing context will result in
 *     undefined behavior": the object's last page counts the processes
 *     that have it open, and the owner's cudaFree aborts, naming the rule,
 *     while that count is not 0.
 */
static int ipc_opens, ipc_closes, ipc_open_device = -1;

typedef struct {
    long long          pid;
    unsigned long long id;
    void              *ptr;
    size_t             size;
    int                phys;     /* the owner's physical device */
} fake_ipc_t;

_Static_assert(sizeof(fake_ipc_t) <= sizeof(((cudaIpcMemHandle_t *)0)->reserved),
               "fake_ipc_t fits a cudaIpcMemHandle_t");

static void fake_ipc_name(char *name, size_t len, long long pid,
                          unsigned long long id)
{
    snprintf(name, len, "/collar-fakecuda-%lld-%llu", pid, id);
}

/* Where an object's count of openers is: the page after its data. */
static off_t fake_count_offset(size_t size)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (off_t)((size + page - 1) / page * page);
}

static _Atomic int *fake_map_count(int fd, size_t size)
{
    void *c = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   fake_count_offset(size));
    return c == MAP_FAILED ? NULL : (_Atomic int *)c;
}

cudaError_t cudaFree(void *p)
{
    cur_device();
    fake_alloc_t *a = fake_find(p);
    if (a != NULL) {
        if (a->shared == 1) {
            const int open = a->opens != NULL ? atomic_load(a->opens) : 0;
            if (open != 0) {
                fprintf(stderr, "fake cuda: cudaFree(%p) of IPC memory that %d "
                        "other process(es) still have open: \"Calling cudaFree "
                        "on an exported memory region before calling "
                        "cudaIpcCloseMemHandle in the importing context will "
                        "result in undefined behavior\" (cudaIpcOpenMemHandle)\n",
                        p, open);
                abort();
            }
            char name[64];
            fake_ipc_name(name, sizeof(name), (long long)getpid(), a->id);
            shm_unlink(name);
        }
        if (a->opens != NULL) {
            munmap((void *)a->opens, sizeof(int));
        }
        munmap(a->base, a->size);
        a->id = 0;
    }
    return cudaSuccess;
}

/* The names an exiting process still has linked (no cudaFree). */
__attribute__((destructor)) static void fake_ipc_unlink_all(void)
{
    for (int i = 0; i < nalloc; i++) {
        if (allocs[i].id != 0 && allocs[i].shared == 1) {
            char name[64];
            fake_ipc_name(name, sizeof(name), (long long)getpid(), allocs[i].id);
            shm_unlink(name);
            allocs[i].shared = 0;
        }
    }
}

/* Move allocation a into a shared memory object at the same address (and
 * map the count of its openers). */
static int fake_share(fake_alloc_t *a)
{
    char name[64];
    fake_ipc_name(name, sizeof(name), (long long)getpid(), a->id);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        return -1;
    }
    if (ftruncate(fd, fake_count_offset(a->size) + (off_t)sysconf(_SC_PAGESIZE)) != 0
        || pwrite(fd, a->base, a->size, 0) != (ssize_t)a->size
        || (a->opens = fake_map_count(fd, a->size)) == NULL
        || mmap(a->base, a->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                fd, 0) == MAP_FAILED) {
        close(fd);
        shm_unlink(name);
        return -1;
    }
    close(fd);
    a->shared = 1;
    return 0;
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
    cur_device();
    memset(h, 0, sizeof(*h));
    fake_alloc_t *a = fake_find(p);
    if (a == NULL || (a->shared == 0 && fake_share(a) != 0)) {
        return cudaErrorInvalidValue;
    }
    const fake_ipc_t f = { getpid(), a->id, a->base, a->size, fake_phys(a->device) };
    memcpy(h->reserved, &f, sizeof(f));
    return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned flags)
{
    if (flags != cudaIpcMemLazyEnablePeerAccess) {
        return cudaErrorInvalidValue;
    }
    const int here = cur_device();
    fake_ipc_t f;
    memcpy(&f, h.reserved, sizeof(f));
    if (f.phys != fake_phys(here) && !fake_peers(f.phys, fake_phys(here))) {
        return cudaErrorPeerAccessUnsupported;
    }
    if (f.pid == (long long)getpid()) {
        *p = f.ptr;
    } else {
        char name[64];
        fake_ipc_name(name, sizeof(name), f.pid, f.id);
        int fd = shm_open(name, O_RDWR, 0);
        if (fd < 0 || nalloc == FAKE_ALLOCS) {
            if (fd >= 0) {
                close(fd);
            }
            return cudaErrorInvalidValue;
        }
        void *base = mmap(NULL, f.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        _Atomic int *opens = fake_map_count(fd, f.size);
        close(fd);
        if (base == MAP_FAILED || opens == NULL) {
            if (base != MAP_FAILED) {
                munmap(base, f.size);
            }
            return cudaErrorInvalidValue;
        }
        atomic_fetch_add(opens, 1);
        allocs[nalloc++] = (fake_alloc_t){ base, f.size, here, 0, next_id++, 2,
                                           opens };
        *p = base;
    }
    ipc_open_device = here;
    ipc_opens++;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *p)
{
    cur_device();
    fake_alloc_t *a = fake_find(p);
    if (a != NULL && a->shared == 2) {
        atomic_fetch_sub(a->opens, 1);
        munmap((void *)a->opens, sizeof(int));
        munmap(a->base, a->size);
        a->id = 0;
    }
    ipc_closes++;
    return cudaSuccess;
}

/* Device management: no context needed.  Bus ids are physical, ordinals
 * this process's. */
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d)
{
    const int phys = fake_phys(d);
    if (phys < 0) {
        return cudaErrorInvalidDevice;
    }
    snprintf(id, (size_t)len, "0000:%02x:00.0", 0x10 + phys);
    return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int *d, const char *id)
{
    unsigned bus = 0;
    if (sscanf(id, "0000:%x:00.0", &bus) != 1 || bus < 0x10 || bus >= 0x10 + NDEV
        || fake_ordinal((int)bus - 0x10) < 0) {
        return cudaErrorInvalidDevice;
    }
    *d = fake_ordinal((int)bus - 0x10);
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer)
{
    if (fake_phys(d) < 0 || fake_phys(peer) < 0) {
        return cudaErrorInvalidDevice;
    }
    *can = fake_peers(fake_phys(d), fake_phys(peer));
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    hostalloc_device = cur_device();
    *p = malloc(n);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *p)
{
    cur_device();
    free(p);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a,
                                     const void *p)
{
    cur_device();
    memset(a, 0, sizeof(*a));
    a->type = fake_find(p) ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    return cudaSuccess;
}

/* The kernels are the host loops. */
int collar_cuda_reduce_supported(collar_dtype_t dt, collar_op_t op)
{
    return collar_reduce_supported(dt, op);
}

/* Is [p, p + bytes) device memory?  A kernel cannot touch anything else
 * (pageable host memory: an illegal address on a real GPU). */
static int fake_on_device(const void *p, size_t bytes)
{
    const fake_alloc_t *a = fake_find(p);
    return a != NULL && (size_t)((const char *)p - a->base) + bytes <= a->size;
}

int collar_cuda_reduce_launch(void *inout, const void *in, size_t count,
                              collar_dtype_t dt, collar_op_t op, void *s)
{
    (void)s;
    const size_t bytes = count * collar_dtype_size(dt);
    if (!fake_on_device(inout, bytes) || !fake_on_device(in, bytes)) {
        return (int)cudaErrorIllegalAddress;
    }
    return collar_reduce_host(inout, in, count, dt, op);
}

int collar_cuda_reduce_n_launch(void *dst, const void *const *src, int n,
                                size_t count, collar_dtype_t dt, collar_op_t op,
                                void *s)
{
    (void)s;
    const size_t bytes = count * collar_dtype_size(dt);
    for (int k = 0; k < n; k++) {
        if (!fake_on_device(src[k], bytes)) {
            return (int)cudaErrorIllegalAddress;
        }
    }
    if (!fake_on_device(dst, bytes)) {
        return (int)cudaErrorIllegalAddress;
    }
    if (dst != src[0]) {
        memmove(dst, src[0], bytes);
    }
    for (int k = 1; k < n; k++) {
        if (collar_reduce_host(dst, src[k], count, dt, op) != 0) {
            return -1;
        }
    }
    return 0;
}

#endif /* COLLAR_FAKE_CUDA_H */
