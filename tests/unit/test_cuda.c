/*
 * Unit test of the cuda backend (src/mem/cuda.c, compiled in here) against
 * a fake CUDA runtime and driver that record what collar asks of them:
 * four GPUs, a per-thread current context as the driver keeps it, device
 * allocations in a table.  Runs without a GPU.  Checks that
 *   - nothing touches a GPU at init;
 *   - COLLAR_SYNC=device synchronises only the device the application's
 *     buffers live on (no context is created on any other GPU);
 *   - every entry point puts the application's current context back as it
 *     found it, "no context" included (copies, reductions, the device
 *     ordering, scratch and staging allocation, finalize);
 *   - device scratch goes to, and is pooled on, the device of the call's
 *     buffers;
 *   - IPC memory goes to the device of the call, its handle opens with
 *     lazy peer access on that device, reachability follows the PCI bus id
 *     and cudaDeviceCanAccessPeer, and closing and freeing reach the runtime.
 */
#include "mem/cuda.c"
#include "unit.h"

#define NDEV 4

/* ------------------------------------------------------------ fake driver */

static int       ctx_store[NDEV];
static CUcontext cur_ctx;                 /* the thread's current context */
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

static fake_alloc_t allocs[32];
static int nalloc;
static unsigned long long next_id = 1;

static fake_alloc_t *fake_map(size_t size, int device, int managed)
{
    fake_alloc_t *a = &allocs[nalloc++];
    *a = (fake_alloc_t){ calloc(1, size), size, device, managed, next_id++ };
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

static CUresult fake_get_attrs(unsigned n, CUpointer_attribute *attrs,
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

static CUresult fake_get_attr(void *data, CUpointer_attribute attr, CUdeviceptr p)
{
    void *d[1] = { data };
    return fake_get_attrs(1, &attr, d, p);
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
        free(a->base);
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

/* ------------------------------------------------------------------ tests */

static const collar_device_t *dev = &collar_device_cuda;

static void test_sync_and_current(void)
{
    UNIT_CHECK(dev->init() == COLLAR_OK, "init");
    UNIT_CHECK(touched == 0 && cur_ctx == NULL,
               "init touched GPUs %#x", touched);

    /* The application works on device 2; its buffer is on device 1. */
    cur_ctx = ctx_of(2);
    touched = 1u << 2;
    fake_alloc_t *buf = fake_map(1 << 20, 1, 0);
    collar_mem_kind_t kind;
    UNIT_CHECK(dev->mem_query(buf->base, &kind) == COLLAR_OK
               && kind == COLLAR_MEM_DEVICE, "device buffer");
    char host[64];
    UNIT_CHECK(dev->mem_query(host, &kind) == COLLAR_OK && kind == COLLAR_MEM_HOST,
               "host buffer");

    collar_cfg.sync = COLLAR_SYNC_DEVICE;
    synced = 0;
    UNIT_CHECK(dev->order_after_caller() == COLLAR_OK, "order");
    UNIT_CHECK(synced == 1u << 1, "synchronised devices %#x, expected only "
               "device 1 (the buffer's)", synced);
    UNIT_CHECK((touched & ~((1u << 1) | (1u << 2))) == 0,
               "contexts made current on devices %#x", touched);
    UNIT_CHECK(cur_ctx == ctx_of(2), "the current device after the ordering "
               "is %d, expected the application's 2", ctx_device(cur_ctx));

    /* No current context: none afterwards. */
    cur_ctx = NULL;
    UNIT_CHECK(dev->order_after_caller() == COLLAR_OK, "order");
    UNIT_CHECK(cur_ctx == NULL, "a context (device %d) left current where "
               "there was none", ctx_device(cur_ctx));

    /* COLLAR_SYNC=stream with an MPI library that does not read device
     * buffers, and none: no host synchronisation at all. */
    nsync = 0;
    collar_cfg.mpi_cuda_aware = 2;   /* no */
    collar_cfg.sync = COLLAR_SYNC_STREAM;
    dev->order_after_caller();
    collar_cfg.sync = COLLAR_SYNC_NONE;
    dev->order_after_caller();
    UNIT_CHECK(nsync == 0, "%d synchronisations with COLLAR_SYNC=stream/none", nsync);
    collar_cfg.sync = COLLAR_SYNC_DEVICE;

    /* A copy from the device-1 buffer: issued on device 1, context put back. */
    cur_ctx = ctx_of(2);
    collar_event_t ev;
    UNIT_CHECK(dev->copy_async(host, buf->base, sizeof(host), 0, &ev) == COLLAR_OK,
               "copy");
    UNIT_CHECK(memcpy_device == 1, "copy issued on device %d, expected 1",
               memcpy_device);
    UNIT_CHECK(cur_ctx == ctx_of(2), "current device after a copy: %d",
               ctx_device(cur_ctx));
    while (dev->event_query(&ev) == COLLAR_INPROGRESS) {
    }
    cur_ctx = NULL;
    UNIT_CHECK(dev->reduce_async(buf->base, buf->base, 4, COLLAR_DT_INT32,
                                 COLLAR_OP_SUM, 1, &ev) == COLLAR_OK, "reduce");
    UNIT_CHECK(cur_ctx == NULL, "a reduction left device %d current",
               ctx_device(cur_ctx));
    while (dev->event_query(&ev) == COLLAR_INPROGRESS) {
    }
}

/* COLLAR_SYNC=stream with a CUDA-aware MPI library: it reads device
 * buffers outside collar's streams, so the host waits for the legacy
 * stream of the buffers' device (only). */
static void test_stream_aware(void)
{
    /* The answer is asked once per init. */
    dev->finalize();
    collar_cfg.mpi_cuda_aware = 1;   /* yes */
    UNIT_CHECK(dev->init() == COLLAR_OK, "init");
    fake_alloc_t *buf = fake_map(4096, 1, 0);
    collar_mem_kind_t kind;
    dev->mem_query(buf->base, &kind);
    collar_cfg.sync = COLLAR_SYNC_STREAM;
    stream_synced = 0;
    synced = 0;
    cur_ctx = ctx_of(2);
    UNIT_CHECK(dev->order_after_caller() == COLLAR_OK, "order");
    UNIT_CHECK(stream_synced == 1u << 1 && synced == 0, "stream mode with a "
               "CUDA-aware MPI: legacy streams waited for %#x, devices %#x; "
               "expected the legacy stream of device 1 only", stream_synced,
               synced);
    UNIT_CHECK(cur_ctx == ctx_of(2), "current device after the ordering: %d",
               ctx_device(cur_ctx));
    collar_cfg.sync = COLLAR_SYNC_DEVICE;
}

static void test_ipc(void)
{
    /* The call's buffer is on device 1, device 2 is current. */
    fake_alloc_t *b1 = fake_map(4096, 1, 0);
    collar_mem_kind_t kind;
    cur_ctx = ctx_of(2);
    dev->mem_query(b1->base, &kind);
    void *own = NULL, *mapped = NULL;
    collar_ipc_handle_t h;
    UNIT_CHECK(dev->ipc_alloc(8192, &own, &h) == COLLAR_OK && own != NULL,
               "IPC allocation");
    UNIT_CHECK(malloc_device == 1, "IPC memory allocated on device %d, "
               "expected 1", malloc_device);
    char where[COLLAR_IPC_WHERE_BYTES];
    dev->ipc_where(own, where, sizeof(where));
    UNIT_CHECK(strcmp(where, "0000:11:00.0") == 0, "IPC memory on %s", where);
    UNIT_CHECK(dev->ipc_reachable(where), "the same device is reachable");
    UNIT_CHECK(dev->ipc_reachable("0000:10:00.0"), "a peer device is reachable");
    UNIT_CHECK(!dev->ipc_reachable("0000:12:00.0"), "device 2 has no peer "
               "access to device 1");
    UNIT_CHECK(!dev->ipc_reachable("0000:99:00.0"), "an invisible device is "
               "not reachable");
    UNIT_CHECK(dev->ipc_open(&h, &mapped) == COLLAR_OK && mapped == own,
               "IPC open");
    UNIT_CHECK(ipc_opens == 1 && ipc_open_device == 1, "opened %d times, on "
               "device %d", ipc_opens, ipc_open_device);
    UNIT_CHECK(cur_ctx == ctx_of(2), "current device after the IPC open: %d",
               ctx_device(cur_ctx));
    dev->ipc_published(own);
    dev->ipc_close(mapped);
    UNIT_CHECK(ipc_closes == 1, "closed %d times", ipc_closes);
    dev->ipc_free(own);
    UNIT_CHECK(fake_find(own) == NULL, "IPC memory freed");
}

static void test_scratch(void)
{
    /* The call's buffer is on device 3: scratch and staging go there. */
    fake_alloc_t *b3 = fake_map(4096, 3, 0);
    fake_alloc_t *b1 = fake_map(4096, 1, 0);
    collar_mem_kind_t kind;
    cur_ctx = ctx_of(2);
    dev->mem_query(b3->base, &kind);
    void *s3, *h;
    UNIT_CHECK(collar_scratch_get(dev, 100000, &s3) == COLLAR_OK, "scratch");
    UNIT_CHECK(malloc_device == 3, "scratch allocated on device %d, expected 3",
               malloc_device);
    UNIT_CHECK(collar_pool_get(dev, 100000, &h) == COLLAR_OK, "staging");
    UNIT_CHECK(hostalloc_device == 3, "pinned memory allocated with device %d "
               "current, expected 3", hostalloc_device);
    UNIT_CHECK(cur_ctx == ctx_of(2), "current device after allocations: %d",
               ctx_device(cur_ctx));
    collar_scratch_put(dev, s3, 100000);
    collar_pool_put(dev, h, 100000);

    /* A call on device 1 must not get device 3's scratch back. */
    dev->mem_query(b1->base, &kind);
    void *s1;
    malloc_device = -1;
    UNIT_CHECK(collar_scratch_get(dev, 100000, &s1) == COLLAR_OK, "scratch");
    UNIT_CHECK(s1 != s3 && malloc_device == 1, "scratch for a device-1 call: "
               "%s", s1 == s3 ? "device 3's buffer" : "allocated elsewhere");
    collar_scratch_put(dev, s1, 100000);
    /* And device 3's call gets its own back. */
    dev->mem_query(b3->base, &kind);
    void *again;
    UNIT_CHECK(collar_scratch_get(dev, 100000, &again) == COLLAR_OK && again == s3,
               "device 3's scratch reused");
    collar_scratch_put(dev, again, 100000);
    collar_pool_release_all();

    cur_ctx = ctx_of(2);
    dev->finalize();
    UNIT_CHECK(cur_ctx == ctx_of(2), "current device after finalize: %d",
               ctx_device(cur_ctx));
}

int main(void)
{
    collar_config_load();
    test_sync_and_current();
    test_stream_aware();
    test_ipc();
    test_scratch();
    return unit_finish("test_cuda");
}
