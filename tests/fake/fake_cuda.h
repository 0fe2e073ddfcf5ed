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

static int       ctx_store[NDEV];
static _Thread_local CUcontext cur_ctx;   /* the thread's current context */
static unsigned  touched;                 /* bit d: a context made current on d */
static unsigned  synced;                  /* bit d: cudaDeviceSynchronize on d */
static int       nsync;
static int       memcpy_device = -1, malloc_device = -1, hostalloc_device = -1;

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

/* The runtime's notion of the current device: the current context's, or
 * device 0 (whose context the next call creates). */
static int cur_device(void)
{
    if (cur_ctx == NULL) {
        cur_ctx = ctx_of(0);
        touched |= 1u;
    }
    return ctx_device(cur_ctx);
}

typedef struct {
    char              *base;
    size_t             size;
    int                device;
    int                managed;
    unsigned long long id;
    int                shared;   /* 1: its IPC name is linked; 2: a peer's, mapped */
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
    *a = (fake_alloc_t){ base, size, device, managed, next_id++, 0 };
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
    *n = NDEV;
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
    if (d < 0 || d >= NDEV) {
        return cudaErrorInvalidDevice;
    }
    cur_ctx = ctx_of(d);
    touched |= 1u << d;
    return cudaSuccess;
}

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

cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }

static int event_store;
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    *e = (cudaEvent_t)(void *)&event_store;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)e;
    (void)s;
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) { (void)e; return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { (void)e; return cudaSuccess; }

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

/* IPC: a handle names the allocation's shared memory object (the owner's
 * process id and the allocation's id) and carries its pointer and size;
 * opened in the owner's process it gives the pointer back, elsewhere it
 * maps the object (a fake device allocation there too).  Opening notes the
 * device current at the time. */
static int ipc_opens, ipc_closes, ipc_open_device = -1;

typedef struct {
    long long          pid;
    unsigned long long id;
    void              *ptr;
    size_t             size;
    int                device;
} fake_ipc_t;

_Static_assert(sizeof(fake_ipc_t) <= sizeof(((cudaIpcMemHandle_t *)0)->reserved),
               "fake_ipc_t fits a cudaIpcMemHandle_t");

static void fake_ipc_name(char *name, size_t len, long long pid,
                          unsigned long long id)
{
    snprintf(name, len, "/collar-fakecuda-%lld-%llu", pid, id);
}

cudaError_t cudaFree(void *p)
{
    fake_alloc_t *a = fake_find(p);
    if (a != NULL) {
        if (a->shared == 1) {
            char name[64];
            fake_ipc_name(name, sizeof(name), (long long)getpid(), a->id);
            shm_unlink(name);
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

/* Move allocation a into a shared memory object at the same address. */
static int fake_share(fake_alloc_t *a)
{
    char name[64];
    fake_ipc_name(name, sizeof(name), (long long)getpid(), a->id);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        return -1;
    }
    if (ftruncate(fd, (off_t)a->size) != 0
        || pwrite(fd, a->base, a->size, 0) != (ssize_t)a->size
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
    memset(h, 0, sizeof(*h));
    fake_alloc_t *a = fake_find(p);
    if (a == NULL || (a->shared == 0 && fake_share(a) != 0)) {
        return cudaErrorInvalidValue;
    }
    const fake_ipc_t f = { getpid(), a->id, a->base, a->size, a->device };
    memcpy(h->reserved, &f, sizeof(f));
    return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned flags)
{
    if (flags != cudaIpcMemLazyEnablePeerAccess) {
        return cudaErrorInvalidValue;
    }
    fake_ipc_t f;
    memcpy(&f, h.reserved, sizeof(f));
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
        close(fd);
        if (base == MAP_FAILED) {
            return cudaErrorInvalidValue;
        }
        allocs[nalloc++] = (fake_alloc_t){ base, f.size, f.device, 0, next_id++, 2 };
        *p = base;
    }
    ipc_open_device = cur_device();
    ipc_opens++;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *p)
{
    fake_alloc_t *a = fake_find(p);
    if (a != NULL && a->shared == 2) {
        munmap(a->base, a->size);
        a->id = 0;
    }
    ipc_closes++;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d)
{
    snprintf(id, (size_t)len, "0000:%02x:00.0", 0x10 + d);
    return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int *d, const char *id)
{
    unsigned bus = 0;
    if (sscanf(id, "0000:%x:00.0", &bus) != 1 || bus < 0x10 || bus >= 0x10 + NDEV) {
        return cudaErrorInvalidDevice;
    }
    *d = (int)bus - 0x10;
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer)
{
    *can = (d / 2) == (peer / 2);   /* pairs 0-1 and 2-3 are linked */
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
    free(p);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a,
                                     const void *p)
{
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
