/*
 * A fake CUDA runtime and driver for the cuda backend, without a GPU:
 * NDEV GPUs, a per-thread current context as the driver keeps it, device
 * allocations in a table (host memory the fake driver answers "device"
 * for), copies done at once, events always complete, pointer queries
 * counted.  Included after src/mem/cuda.c by tests/unit/test_cuda.c and by
 * the tests' LD_PRELOAD library (tests/fake/collar_fakecuda.c); each gets
 * its own copy of the state.
 */
#ifndef COLLAR_FAKE_CUDA_H
#define COLLAR_FAKE_CUDA_H

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
    *a = (fake_alloc_t){ base, size, device, managed, next_id++ };
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

cudaError_t cudaFree(void *p)
{
    fake_alloc_t *a = fake_find(p);
    if (a != NULL) {
        munmap(a->base, a->size);
        a->id = 0;
    }
    return cudaSuccess;
}

/* IPC: a handle carries the pointer; "opening" it gives the pointer back
 * and notes the device current at the time. */
static int ipc_opens, ipc_closes, ipc_open_device = -1;

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
    memset(h, 0, sizeof(*h));
    memcpy(h->reserved, &p, sizeof(p));
    return fake_find(p) != NULL ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned flags)
{
    if (flags != cudaIpcMemLazyEnablePeerAccess) {
        return cudaErrorInvalidValue;
    }
    memcpy(p, h.reserved, sizeof(*p));
    ipc_open_device = cur_device();
    ipc_opens++;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *p)
{
    (void)p;
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

int collar_cuda_reduce_supported(collar_dtype_t dt, collar_op_t op)
{
    (void)dt;
    (void)op;
    return 1;
}

int collar_cuda_reduce_launch(void *inout, const void *in, size_t count,
                              collar_dtype_t dt, collar_op_t op, void *s)
{
    (void)inout;
    (void)in;
    (void)count;
    (void)dt;
    (void)op;
    (void)s;
    return 0;
}

int collar_cuda_reduce_n_launch(void *dst, const void *const *src, int n,
                                size_t count, collar_dtype_t dt, collar_op_t op,
                                void *s)
{
    (void)dst;
    (void)src;
    (void)n;
    (void)count;
    (void)dt;
    (void)op;
    (void)s;
    return 0;
}

#endif /* COLLAR_FAKE_CUDA_H */
