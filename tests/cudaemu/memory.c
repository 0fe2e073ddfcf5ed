/*
 * collar - the CUDA emulation's memory (tests only): every kind of memory a
 * CUDA program or framework allocates, and what the driver answers about a
 * pointer into it.
 *
 *   device     cudaMalloc: its own memfd (a header page, then the bytes).
 *              The program's address maps the bytes PROT_NONE, so that a
 *              host load or store faults (the rule host-access-to-device-
 *              memory); the emulation reads and writes them through a
 *              second mapping (the span).  A peer opens the memfd through
 *              /proc/PID/fd/N (cudaIpcOpenMemHandle) and maps the same
 *              bytes; the header page counts the peers' opens.
 *   async      cudaMallocAsync: device memory of the device's pool, freed
 *              in stream order (cudaFreeAsync); no IPC handle.
 *   vmm        cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess.
 *   ipc        a peer's cudaMalloc, opened here.
 *   managed    cudaMallocManaged: host-accessible.
 *   pinned     cudaMallocHost, cudaHostAlloc; registered: cudaHostRegister.
 *   pageable   everything else: cudaMemoryTypeUnregistered, no error (as
 *              CUDA 11 and later answer).
 *
 * Buffer ids count allocations: an address range freed and handed out
 * again has a new id.
 */
#define _GNU_SOURCE
#include "emu.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE      4096UL
#define IPC_SLOTS 32
#define IPC_MAGIC 0x63756970u    /* "cuip" */
#define VMM_GRAN  ((size_t)2 << 20)

/* The header page of a cudaMalloc memfd: who has it open. */
typedef struct {
    uint32_t magic;
    int32_t  owner;
    uint64_t id;
    uint64_t size;
    struct { int32_t pid; int32_t count; } open[IPC_SLOTS];
} ipc_hdr_t;

/* What a cudaIpcMemHandle_t carries (64 bytes). */
typedef struct {
    uint32_t magic;
    int32_t  pid;
    int32_t  fd;
    int32_t  phys;
    uint64_t id;
    uint64_t size;
} ipc_handle_t;
_Static_assert(sizeof(ipc_handle_t) <= sizeof(cudaIpcMemHandle_t), "handle fits");

/* A cuMemCreate handle. */
typedef struct {
    uint32_t magic;
    int      fd;
    size_t   size;
    int      phys;
    int      refs;     /* the handle itself and each mapping */
    unsigned long long id;
} vmm_phys_t;
#define VMM_MAGIC 0x766d6d70u

typedef struct {
    emu_alloc_t a;
    int         fd;        /* memfd (device), the opened file (ipc), -1 */
    ipc_hdr_t  *hdr;       /* device and ipc: the header page */
    int         opens;     /* ipc: cudaIpcOpenMemHandle count here */
    int32_t     owner;     /* ipc: the exporting process */
    vmm_phys_t *phys;      /* vmm */
    int         access;    /* vmm: cuMemSetAccess done */
} entry_t;

/* The table: grown by copying, the old array left in place, so that the
 * SIGSEGV handler may read it without the lock. */
static entry_t *table;
static int ntable, captable;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long next_id = 1;

static int is_dev(enum emu_kind k)
{
    return k == EMU_DEVICE || k == EMU_ASYNC || k == EMU_VMM || k == EMU_IPC;
}

/* Under lock. */
static entry_t *find(const void *p)
{
    const char *c = p;
    for (int i = 0; i < ntable; i++) {
        entry_t *e = &table[i];
        if (c >= e->a.base && c < e->a.base + (e->a.size ? e->a.size : 1)) {
            return e;
        }
    }
    return NULL;
}

static entry_t *add(void)
{
    if (ntable == captable) {
        int cap = captable ? 2 * captable : 64;
        entry_t *t = calloc((size_t)cap, sizeof(*t));
        if (t == NULL) {
            return NULL;
        }
        if (ntable > 0) {
            memcpy(t, table, (size_t)ntable * sizeof(*t));
        }
        __atomic_store_n(&table, t, __ATOMIC_RELEASE);
        captable = cap;
    }
    entry_t *e = &table[ntable];
    memset(e, 0, sizeof(*e));
    e->fd = -1;
    e->a.id = next_id++;
    __atomic_store_n(&ntable, ntable + 1, __ATOMIC_RELEASE);
    return e;
}

static void drop(entry_t *e)
{
    *e = table[ntable - 1];
    __atomic_store_n(&ntable, ntable - 1, __ATOMIC_RELEASE);
}

int emu_lookup(const void *p, emu_alloc_t *out)
{
    pthread_mutex_lock(&lock);
    entry_t *e = find(p);
    if (e != NULL) {
        *out = e->a;
    }
    pthread_mutex_unlock(&lock);
    return e != NULL;
}

void *emu_host_view(const void *p, size_t n, int *is_device, int *pinned)
{
    emu_alloc_t a;
    *is_device = 0;
    *pinned = 0;
    if (!emu_lookup(p, &a)) {
        return (void *)p;
    }
    const size_t off = (size_t)((const char *)p - a.base);
    if (n > a.size - off) {
        return NULL;
    }
    *is_device = is_dev(a.kind);
    *pinned = a.kind == EMU_PINNED || a.kind == EMU_REGISTERED;
    return a.span + off;
}

void *cudaemu_device_span(int device, const void *p, size_t bytes)
{
    (void)device;   /* every device of the node is every other's peer */
    pthread_mutex_lock(&lock);
    entry_t *e = find(p);
    void *r = NULL;
    if (e != NULL && (e->a.kind != EMU_VMM || e->access)) {
        const size_t off = (size_t)((const char *)p - e->a.base);
        if (bytes <= e->a.size - off) {
            r = e->a.span + off;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* ------------------------------------------------ host access to device */

static struct sigaction old_segv;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    const char *addr = si->si_addr;
    const entry_t *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    const int n = __atomic_load_n(&ntable, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++) {
        const entry_t *e = &t[i];
        const size_t mapped = (e->a.size + PAGE - 1) & ~(PAGE - 1);
        if (is_dev(e->a.kind) && addr >= e->a.base && addr < e->a.base + mapped) {
            emu_break(EMU_R_HOST_ACCESS, "the host read or wrote %p, %zu bytes "
                      "into a device allocation of %zu bytes at %p",
                      (void *)addr, (size_t)(addr - e->a.base), e->a.size,
                      (void *)e->a.base);
        }
    }
    /* Not ours: the handler before us, or the default action. */
    if (old_segv.sa_flags & SA_SIGINFO) {
        old_segv.sa_sigaction(sig, si, uc);
    } else if (old_segv.sa_handler != SIG_IGN && old_segv.sa_handler != SIG_DFL) {
        old_segv.sa_handler(sig);
    } else {
        signal(SIGSEGV, SIG_DFL);   /* the access faults again, and kills */
    }
}

static void segv_handler_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
}

static void segv_install(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, segv_handler_install);
}

/* -------------------------------------------------------- device memory */

static size_t pages(size_t n)
{
    return (n + PAGE - 1) & ~(PAGE - 1);
}

/* A memfd of `size` bytes (plus a header page when hdr != NULL), mapped
 * PROT_NONE at the address it gets here and read-write as its span. */
static cudaError_t map_device(entry_t *e, size_t size, int with_hdr)
{
    const size_t len = pages(size ? size : 1);
    const off_t off = with_hdr ? (off_t)PAGE : 0;
    int fd = memfd_create("cudaemu", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, off + (off_t)len) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return cudaErrorMemoryAllocation;
    }
    void *base = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, off);
    void *span = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
    void *hdr = with_hdr ? mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
                                fd, 0) : NULL;
    if (base == MAP_FAILED || span == MAP_FAILED || hdr == MAP_FAILED) {
        if (base != MAP_FAILED) munmap(base, len);
        if (span != MAP_FAILED) munmap(span, len);
        if (hdr != NULL && hdr != MAP_FAILED) munmap(hdr, PAGE);
        close(fd);
        return cudaErrorMemoryAllocation;
    }
    e->fd = fd;
    e->a.base = base;
    e->a.span = span;
    e->a.size = size;
    e->hdr = hdr;
    if (hdr != NULL) {
        e->hdr->magic = IPC_MAGIC;
        e->hdr->owner = (int32_t)getpid();
        e->hdr->id = e->a.id;
        e->hdr->size = size;
    }
    segv_install();
    return cudaSuccess;
}

static void unmap_entry(entry_t *e)
{
    const size_t len = pages(e->a.size ? e->a.size : 1);
    switch (e->a.kind) {
    case EMU_DEVICE: case EMU_ASYNC: case EMU_IPC:
        munmap(e->a.base, len);
        munmap(e->a.span, len);
        if (e->hdr != NULL) {
            munmap(e->hdr, PAGE);
        }
        close(e->fd);
        break;
    case EMU_MANAGED: case EMU_PINNED:
        munmap(e->a.base, len);
        break;
    default:
        break;
    }
}

/* The current device an allocation goes to (making its context), or -1
 * with *err set: no device, or an injected failure of `kind`. */
static int alloc_device(enum emu_fail kind, cudaError_t *err)
{
    const int d = emu_device();
    if (d < 0) {
        *err = cudaErrorNoDevice;
        return -1;
    }
    if (emu_inject(kind)) {
        *err = emu_error(cudaErrorMemoryAllocation);
        return -1;
    }
    return d;
}

/* A new device-like allocation on the current device. */
static cudaError_t dev_alloc(void **ptr, size_t size, enum emu_kind kind)
{
    if (ptr == NULL) {
        return emu_error(cudaErrorInvalidValue);
    }
    cudaError_t err;
    const int d = alloc_device(EMU_F_MALLOC, &err);
    if (d < 0) {
        *ptr = NULL;
        return err;
    }
    pthread_mutex_lock(&lock);
    entry_t *e = add();
    err = cudaErrorMemoryAllocation;
    if (e != NULL) {
        e->a.kind = kind;
        e->a.phys = emu_vis[d];
        if (kind == EMU_MANAGED) {
            void *p = mmap(NULL, pages(size ? size : 1), PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED) {
                e->a.base = e->a.span = p;
                e->a.size = size;
                err = cudaSuccess;
            }
        } else {
            err = map_device(e, size, kind == EMU_DEVICE);
        }
        if (err != cudaSuccess) {
            drop(e);
        } else {
            *ptr = e->a.base;
        }
    }
    pthread_mutex_unlock(&lock);
    return emu_error(err);
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    EMU_ENTER("cudaMalloc");
    return dev_alloc(devPtr, size, EMU_DEVICE);
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    (void)flags;
    EMU_ENTER("cudaMallocManaged");
    return dev_alloc(devPtr, size, EMU_MANAGED);
}

/* CUDA Runtime API, cudaMallocAsync: "Allocates memory with stream ordered
 * semantics" from the device's current pool.  The bytes exist from the
 * call on; stream order matters for the free. */
cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    EMU_ENTER("cudaMallocAsync");
    if (emu_stream(hStream) == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    return dev_alloc(devPtr, size, EMU_ASYNC);
}

/* The live peers that have the allocation open (its header page). */
static void check_no_peer(const entry_t *e)
{
    if (e->hdr == NULL) {
        return;
    }
    for (int i = 0; i < IPC_SLOTS; i++) {
        const int32_t pid = __atomic_load_n(&e->hdr->open[i].pid, __ATOMIC_ACQUIRE);
        const int32_t n = __atomic_load_n(&e->hdr->open[i].count, __ATOMIC_ACQUIRE);
        if (pid > 0 && n > 0 && (kill(pid, 0) == 0 || errno == EPERM)) {
            emu_break(EMU_R_IPC_FREE_WHILE_OPEN, "cudaFree(%p) while process "
                      "%d still has it open (cudaIpcOpenMemHandle without "
                      "cudaIpcCloseMemHandle)", (void *)e->a.base, (int)pid);
        }
    }
}

/* Free an allocation the table has at exactly p, of one of the kinds in
 * mask (bit per emu_kind). */
static cudaError_t free_kind(void *p, unsigned mask)
{
    pthread_mutex_lock(&lock);
    entry_t *e = find(p);
    if (e == NULL || e->a.base != p || !(mask & (1u << e->a.kind))) {
        pthread_mutex_unlock(&lock);
        return emu_error(cudaErrorInvalidValue);
    }
    check_no_peer(e);
    entry_t copy = *e;
    drop(e);
    pthread_mutex_unlock(&lock);
    unmap_entry(&copy);
    return cudaSuccess;
}

/* cudaFree synchronizes: CUDA Programming Guide, Implicit Synchronization
 * ("a device memory allocation" between two commands of different streams
 * keeps them from running concurrently), and in practice cudaFree waits for
 * the device to be idle before it returns the memory, so work still
 * reading the allocation is finished.  The emulation waits for every
 * stream of the allocation's device. */
cudaError_t cudaFree(void *devPtr)
{
    EMU_ENTER("cudaFree");
    if (emu_device() < 0) {
        return cudaErrorNoDevice;
    }
    if (devPtr == NULL) {
        return cudaSuccess;   /* the idiom that makes the context */
    }
    emu_alloc_t a;
    if (emu_lookup(devPtr, &a)) {
        emu_device_wait(a.phys);
    }
    return free_kind(devPtr, 1u << EMU_DEVICE | 1u << EMU_MANAGED
                             | 1u << EMU_ASYNC);
}

struct async_free {
    entry_t e;
};

static void async_free_run(void *arg)
{
    unmap_entry(&((struct async_free *)arg)->e);
}

/* CUDA Runtime API, cudaFreeAsync: "Inserts a free operation into
 * hStream. The allocation must not be accessed after stream execution
 * reaches the free."  The pointer is gone from the table at once (its
 * attributes are undefined after the call); the bytes stay mapped until
 * the stream reaches the free, for the work queued before it. */
cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    EMU_ENTER("cudaFreeAsync");
    struct CUstream_st *s = emu_stream(hStream);
    if (s == NULL) {
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    struct async_free *f = malloc(sizeof(*f));
    if (f == NULL) {
        return emu_error(cudaErrorMemoryAllocation);
    }
    pthread_mutex_lock(&lock);
    entry_t *e = find(devPtr);
    if (e == NULL || e->a.base != devPtr
        || (e->a.kind != EMU_ASYNC && e->a.kind != EMU_DEVICE)) {
        pthread_mutex_unlock(&lock);
        free(f);
        return emu_error(cudaErrorInvalidValue);
    }
    check_no_peer(e);
    f->e = *e;
    drop(e);
    pthread_mutex_unlock(&lock);
    emu_enqueue(s, async_free_run, f);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_, size_t *total)
{
    EMU_ENTER("cudaMemGetInfo");
    if (emu_device() < 0) {
        return cudaErrorNoDevice;
    }
    *total = (size_t)16 << 30;
    *free_ = (size_t)15 << 30;
    return cudaSuccess;
}

/* ------------------------------------------------------------ host memory */

/* CUDA Runtime API, cudaHostAlloc: "Allocates size bytes of host memory that
 * is page-locked and accessible to the device"; with unified addressing
 * the device pointer is the host pointer (cudaHostGetDevicePointer). */
cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    EMU_ENTER("cudaHostAlloc");
    if (pHost == NULL || (flags & ~(unsigned)(cudaHostAllocPortable
                                               | cudaHostAllocMapped
                                               | cudaHostAllocWriteCombined))) {
        return emu_error(cudaErrorInvalidValue);
    }
    cudaError_t err;
    const int d = alloc_device(EMU_F_HOSTALLOC, &err);
    if (d < 0) {
        return err;
    }
    void *p = mmap(NULL, pages(size ? size : 1), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return emu_error(cudaErrorMemoryAllocation);
    }
    pthread_mutex_lock(&lock);
    entry_t *e = add();
    if (e != NULL) {
        e->a.kind = EMU_PINNED;
        e->a.base = e->a.span = p;
        e->a.size = size;
        e->a.phys = emu_vis[d];
        e->a.flags = flags;
    }
    pthread_mutex_unlock(&lock);
    if (e == NULL) {
        munmap(p, pages(size ? size : 1));
        return emu_error(cudaErrorMemoryAllocation);
    }
    *pHost = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

/* cudaFreeHost waits for the device, as cudaFree does. */
cudaError_t cudaFreeHost(void *ptr)
{
    EMU_ENTER("cudaFreeHost");
    emu_device_wait(-1);
    return free_kind(ptr, 1u << EMU_PINNED);
}

/* CUDA Runtime API, cudaHostRegister: "Page-locks the memory range
 * specified by ptr and size"; a range overlapping a registered one is
 * cudaErrorHostMemoryAlreadyRegistered. */
cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    EMU_ENTER("cudaHostRegister");
    if (ptr == NULL || size == 0) {
        return emu_error(cudaErrorInvalidValue);
    }
    cudaError_t err;
    const int d = alloc_device(EMU_F_HOSTALLOC, &err);
    if (d < 0) {
        return err;
    }
    pthread_mutex_lock(&lock);
    err = cudaSuccess;
    if (find(ptr) != NULL || find((char *)ptr + size - 1) != NULL) {
        err = cudaErrorHostMemoryAlreadyRegistered;
    } else {
        entry_t *e = add();
        if (e == NULL) {
            err = cudaErrorMemoryAllocation;
        } else {
            e->a.kind = EMU_REGISTERED;
            e->a.base = e->a.span = ptr;
            e->a.size = size;
            e->a.phys = emu_vis[d];
            e->a.flags = flags;
        }
    }
    pthread_mutex_unlock(&lock);
    return emu_error(err);
}

cudaError_t cudaHostUnregister(void *ptr)
{
    EMU_ENTER("cudaHostUnregister");
    emu_alloc_t a;
    if (!emu_lookup(ptr, &a) || a.kind != EMU_REGISTERED || a.base != ptr) {
        return emu_error(cudaErrorHostMemoryNotRegistered);
    }
    emu_device_wait(-1);
    return free_kind(ptr, 1u << EMU_REGISTERED);
}

cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    EMU_ENTER("cudaHostGetDevicePointer");
    emu_alloc_t a;
    if (flags != 0 || !emu_lookup(pHost, &a)
        || (a.kind != EMU_PINNED && a.kind != EMU_REGISTERED)) {
        return emu_error(cudaErrorInvalidValue);
    }
    *pDevice = pHost;
    return cudaSuccess;
}

cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    EMU_ENTER("cudaHostGetFlags");
    emu_alloc_t a;
    if (!emu_lookup(pHost, &a) || (a.kind != EMU_PINNED && a.kind != EMU_REGISTERED)) {
        return emu_error(cudaErrorInvalidValue);
    }
    *pFlags = a.flags;
    return cudaSuccess;
}

/* ------------------------------------------------------ pointer attributes */

/* The ordinal, in this process, of the device an allocation is on (an
 * opened peer allocation on a device hidden here: the current device). */
static int ordinal_of(const emu_alloc_t *a)
{
    const int o = emu_ordinal_of_phys(a->phys);
    if (o >= 0) {
        return o;
    }
    CUcontext c = emu_current_ctx();
    return c != NULL ? emu_ctx_ordinal(c) : 0;
}

/* CUDA Runtime API, cudaPointerGetAttributes: type cudaMemoryTypeUnregistered
 * for "unregistered host memory" (no error since CUDA 11), Host for
 * registered or pinned memory, Device, Managed; device "the device against
 * which the memory was allocated or registered". */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
                                     const void *ptr)
{
    EMU_ENTER("cudaPointerGetAttributes");
    if (attributes == NULL) {
        return emu_error(cudaErrorInvalidValue);
    }
    if (emu_device() < 0) {
        return cudaErrorNoDevice;
    }
    memset(attributes, 0, sizeof(*attributes));
    emu_alloc_t a;
    if (!emu_lookup(ptr, &a)) {
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = cudaInvalidDeviceId;
        attributes->hostPointer = (void *)ptr;
        return cudaSuccess;
    }
    attributes->device = ordinal_of(&a);
    attributes->devicePointer = (void *)ptr;
    if (is_dev(a.kind)) {
        attributes->type = cudaMemoryTypeDevice;
    } else {
        attributes->type = a.kind == EMU_MANAGED ? cudaMemoryTypeManaged
                                                 : cudaMemoryTypeHost;
        attributes->hostPointer = (void *)ptr;
    }
    return cudaSuccess;
}

static size_t attr_size(CUpointer_attribute attr)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        return sizeof(unsigned int);
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
        return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
    default:
        return sizeof(unsigned long long);   /* pointers, ids, sizes */
    }
}

/* One attribute of the allocation `a` (NULL: not CUDA memory) at ptr. */
static CUresult attr_get(const emu_alloc_t *a, const entry_t *e,
                         CUpointer_attribute attr, void *data, CUdeviceptr ptr)
{
    memset(data, 0, attr_size(attr));
    if (attr == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) {
        *(int *)data = cudaInvalidDeviceId;
    }
    if (a == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const int dev = is_dev(a->kind);
    unsigned int *u = data;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = &emu_ctx[a->phys];
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *u = dev || a->kind == EMU_MANAGED ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (dev) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *u = 1;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *(unsigned long long *)data = a->id;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *u = a->kind == EMU_MANAGED;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = ordinal_of(a);
        break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *u = a->kind == EMU_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)(uintptr_t)a->base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = a->size;
        break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        *u = dev;
        break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *u = a->kind != EMU_VMM || (e != NULL && e->access)
             ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
             : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(void **)data = a->kind == EMU_ASYNC ? (void *)&emu_ctx[a->phys] : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* CUDA Driver API, cuPointerGetAttribute: CUDA_ERROR_INVALID_VALUE for a
 * pointer that is not CUDA memory. */
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                               CUdeviceptr ptr)
{
    if (emu_enter("cuPointerGetAttribute") != cudaSuccess) {
        return emu_cu(emu_sticky());
    }
    if (data == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&lock);
    entry_t *e = find((void *)(uintptr_t)ptr);
    emu_alloc_t a;
    if (e != NULL) {
        a = e->a;
    }
    CUresult r = attr_get(e ? &a : NULL, e, attribute, data, ptr);
    pthread_mutex_unlock(&lock);
    return r;
}

/* CUDA Driver API, cuPointerGetAttributes: "Unlike cuPointerGetAttribute,
 * this function will not return an error when the ptr encountered is not a
 * valid CUDA pointer. Instead, the attributes are assigned default NULL
 * values and function returns CUDA_SUCCESS." */
CUresult cuPointerGetAttributes(unsigned int numAttributes,
                                CUpointer_attribute *attributes, void **data,
                                CUdeviceptr ptr)
{
    if (emu_enter("cuPointerGetAttributes") != cudaSuccess) {
        return emu_cu(emu_sticky());
    }
    if (attributes == NULL || data == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&lock);
    entry_t *e = find((void *)(uintptr_t)ptr);
    emu_alloc_t a;
    if (e != NULL) {
        a = e->a;
    }
    for (unsigned i = 0; i < numAttributes; i++) {
        if (data[i] != NULL) {
            attr_get(e ? &a : NULL, e, attributes[i], data[i], ptr);
        }
    }
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    emu_init();
    emu_alloc_t a;
    if (!emu_lookup((void *)(uintptr_t)dptr, &a) || !is_dev(a.kind)) {
        return CUDA_ERROR_NOT_FOUND;
    }
    if (pbase != NULL) {
        *pbase = (CUdeviceptr)(uintptr_t)a.base;
    }
    if (psize != NULL) {
        *psize = a.size;
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- IPC memory */

/* CUDA Runtime API, cudaIpcGetMemHandle: "Takes a pointer to the base of an
 * existing device memory allocation previously allocated with cudaMalloc"
 * (not cudaMallocAsync, not VMM: cudaErrorInvalidValue). */
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    EMU_ENTER("cudaIpcGetMemHandle");
    if (handle == NULL) {
        return emu_error(cudaErrorInvalidValue);
    }
    pthread_mutex_lock(&lock);
    entry_t *e = find(devPtr);
    if (e == NULL || e->a.kind != EMU_DEVICE) {
        pthread_mutex_unlock(&lock);
        return emu_error(cudaErrorInvalidValue);
    }
    ipc_handle_t h = { .magic = IPC_MAGIC, .pid = (int32_t)getpid(),
                       .fd = e->fd, .phys = e->a.phys, .id = e->a.id,
                       .size = e->a.size };
    pthread_mutex_unlock(&lock);
    memset(handle, 0, sizeof(*handle));
    memcpy(handle->reserved, &h, sizeof(h));
    return cudaSuccess;
}

/* This process's slot in the header's open counts: +1 or -1. */
static void count_open(ipc_hdr_t *hdr, int delta)
{
    const int32_t me = (int32_t)getpid();
    for (int i = 0; i < IPC_SLOTS; i++) {
        int32_t pid = __atomic_load_n(&hdr->open[i].pid, __ATOMIC_ACQUIRE);
        if (pid == me) {
            __atomic_add_fetch(&hdr->open[i].count, delta, __ATOMIC_ACQ_REL);
            return;
        }
    }
    if (delta < 0) {
        return;
    }
    for (int i = 0; i < IPC_SLOTS; i++) {
        int32_t pid = __atomic_load_n(&hdr->open[i].pid, __ATOMIC_ACQUIRE);
        const int dead = pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
        if ((pid == 0 || dead)
            && __atomic_compare_exchange_n(&hdr->open[i].pid, &pid, me, 0,
                                           __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&hdr->open[i].count, delta, __ATOMIC_RELEASE);
            return;
        }
    }
}

/* At exit, the opens this process never closed are given back, so that the
 * owner's free of a buffer of a process that ended is no error. */
static void close_all_at_exit(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < ntable; i++) {
        if (table[i].a.kind == EMU_IPC && table[i].hdr != NULL) {
            for (int k = 0; k < table[i].opens; k++) {
                count_open(table[i].hdr, -1);
            }
        }
    }
    pthread_mutex_unlock(&lock);
}

static void close_all_at_exit_once(void)
{
    atexit(close_all_at_exit);
}

/* CUDA Runtime API, cudaIpcOpenMemHandle: "Maps memory exported from
 * another process with cudaIpcGetMemHandle into the current device address
 * space"; "If the memory handle has already been opened by the current
 * context, the reference count on the handle is incremented by 1 and the
 * existing device pointer is returned"; "can open handles to devices that
 * may not be visible in the process calling the API". */
cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
                                 unsigned int flags)
{
    EMU_ENTER("cudaIpcOpenMemHandle");
    ipc_handle_t h;
    memcpy(&h, handle.reserved, sizeof(h));
    if (devPtr == NULL || h.magic != IPC_MAGIC
        || (flags & ~(unsigned)cudaIpcMemLazyEnablePeerAccess)) {
        return emu_error(cudaErrorInvalidValue);
    }
    if (h.pid == (int32_t)getpid()) {
        emu_break(EMU_R_IPC_OWN_PROCESS, "cudaIpcOpenMemHandle of a handle of "
                  "this process's own allocation (buffer id %llu)",
                  (unsigned long long)h.id);
    }
    if (emu_device() < 0) {
        return cudaErrorNoDevice;
    }
    if (emu_inject(EMU_F_IPCOPEN)) {
        return emu_error(cudaErrorMapBufferObjectFailed);
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < ntable; i++) {
        entry_t *e = &table[i];
        if (e->a.kind == EMU_IPC && e->owner == h.pid && e->hdr->id == h.id) {
            e->opens++;
            count_open(e->hdr, 1);
            *devPtr = e->a.base;
            pthread_mutex_unlock(&lock);
            return cudaSuccess;
        }
    }
    pthread_mutex_unlock(&lock);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
    const int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return emu_error(cudaErrorMapBufferObjectFailed);
    }
    const size_t len = pages(h.size ? h.size : 1);
    void *hdr = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (hdr == MAP_FAILED || ((ipc_hdr_t *)hdr)->magic != IPC_MAGIC
        || ((ipc_hdr_t *)hdr)->id != h.id || ((ipc_hdr_t *)hdr)->owner != h.pid) {
        /* The owner freed it (the descriptor names something else now). */
        if (hdr != MAP_FAILED) {
            munmap(hdr, PAGE);
        }
        close(fd);
        return emu_error(cudaErrorInvalidResourceHandle);
    }
    void *base = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, (off_t)PAGE);
    void *span = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)PAGE);
    if (base == MAP_FAILED || span == MAP_FAILED) {
        if (base != MAP_FAILED) munmap(base, len);
        if (span != MAP_FAILED) munmap(span, len);
        munmap(hdr, PAGE);
        close(fd);
        return emu_error(cudaErrorMapBufferObjectFailed);
    }
    static pthread_once_t at_exit = PTHREAD_ONCE_INIT;
    pthread_once(&at_exit, close_all_at_exit_once);
    pthread_mutex_lock(&lock);
    entry_t *e = add();
    if (e == NULL) {
        pthread_mutex_unlock(&lock);
        munmap(base, len);
        munmap(span, len);
        munmap(hdr, PAGE);
        close(fd);
        return emu_error(cudaErrorMemoryAllocation);
    }
    e->a.kind = EMU_IPC;
    e->a.base = base;
    e->a.span = span;
    e->a.size = h.size;
    e->a.phys = h.phys;
    e->fd = fd;
    e->hdr = hdr;
    e->owner = h.pid;
    e->opens = 1;
    count_open(e->hdr, 1);
    pthread_mutex_unlock(&lock);
    segv_install();
    *devPtr = base;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
    EMU_ENTER("cudaIpcCloseMemHandle");
    pthread_mutex_lock(&lock);
    entry_t *e = find(devPtr);
    if (e == NULL || e->a.kind != EMU_IPC || e->a.base != devPtr) {
        pthread_mutex_unlock(&lock);
        return emu_error(cudaErrorInvalidValue);
    }
    count_open(e->hdr, -1);
    if (--e->opens > 0) {
        pthread_mutex_unlock(&lock);
        return cudaSuccess;
    }
    entry_t copy = *e;
    drop(e);
    pthread_mutex_unlock(&lock);
    /* Work queued before on this device may still read the mapping. */
    emu_device_wait(-1);
    unmap_entry(&copy);
    return cudaSuccess;
}

/* ------------------------------------------------------------------- VMM */

CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                       const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    (void)option;
    emu_init();
    if (granularity == NULL || prop == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *granularity = VMM_GRAN;
    return CUDA_SUCCESS;
}

/* CUDA Driver API, cuMemCreate: "Create a CUDA memory handle representing a
 * memory allocation of a given size described by the given properties";
 * size a multiple of the granularity. */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (emu_enter("cuMemCreate") != cudaSuccess) {
        return emu_cu(emu_sticky());
    }
    if (handle == NULL || prop == NULL || flags != 0 || size == 0
        || size % VMM_GRAN != 0 || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE
        || prop->location.id < 0 || prop->location.id >= emu_nvis) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (emu_inject(EMU_F_MALLOC)) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    vmm_phys_t *v = calloc(1, sizeof(*v));
    if (v == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    v->fd = memfd_create("cudaemu-vmm", MFD_CLOEXEC);
    if (v->fd < 0 || ftruncate(v->fd, (off_t)size) != 0) {
        if (v->fd >= 0) {
            close(v->fd);
        }
        free(v);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    v->magic = VMM_MAGIC;
    v->size = size;
    v->phys = emu_vis[prop->location.id];
    v->refs = 1;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)v;
    return CUDA_SUCCESS;
}

static void vmm_unref(vmm_phys_t *v)
{
    if (__atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        close(v->fd);
        v->magic = 0;
        free(v);
    }
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    emu_init();
    vmm_phys_t *v = (vmm_phys_t *)(uintptr_t)handle;
    if (v == NULL || v->magic != VMM_MAGIC) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    vmm_unref(v);
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                             CUdeviceptr addr, unsigned long long flags)
{
    (void)addr;   /* a hint */
    emu_init();
    if (ptr == NULL || size == 0 || size % VMM_GRAN != 0 || flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    const size_t align = alignment > VMM_GRAN ? alignment : VMM_GRAN;
    char *p = mmap(NULL, size + align, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    char *start = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    if (start > p) {
        munmap(p, (size_t)(start - p));
    }
    if (start + size < p + size + align) {
        munmap(start + size, (size_t)(p + size + align - (start + size)));
    }
    *ptr = (CUdeviceptr)(uintptr_t)start;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    emu_init();
    if (ptr == 0 || size == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    munmap((void *)(uintptr_t)ptr, size);
    return CUDA_SUCCESS;
}

/* CUDA Driver API, cuMemMap: "Maps an allocation handle to a reserved
 * virtual address range"; the range is not accessible before
 * cuMemSetAccess. */
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                  CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    if (emu_enter("cuMemMap") != cudaSuccess) {
        return emu_cu(emu_sticky());
    }
    vmm_phys_t *v = (vmm_phys_t *)(uintptr_t)handle;
    if (ptr == 0 || v == NULL || v->magic != VMM_MAGIC || flags != 0
        || size == 0 || offset + size > v->size || size % VMM_GRAN != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    void *base = mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
                      MAP_SHARED | MAP_FIXED, v->fd, (off_t)offset);
    void *span = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd,
                      (off_t)offset);
    if (base == MAP_FAILED || span == MAP_FAILED) {
        if (span != MAP_FAILED) {
            munmap(span, size);
        }
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&lock);
    entry_t *e = add();
    if (e != NULL) {
        e->a.kind = EMU_VMM;
        e->a.base = base;
        e->a.span = span;
        e->a.size = size;
        e->a.phys = v->phys;
        e->phys = v;
        __atomic_add_fetch(&v->refs, 1, __ATOMIC_ACQ_REL);
    }
    pthread_mutex_unlock(&lock);
    segv_install();
    return e != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                        size_t count)
{
    emu_init();
    if (ptr == 0 || desc == NULL || count == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < ntable; i++) {
        entry_t *e = &table[i];
        const uintptr_t b = (uintptr_t)e->a.base;
        if (e->a.kind == EMU_VMM && b >= ptr && b + e->a.size <= ptr + size) {
            e->access = desc[0].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE;
            n++;
        }
    }
    pthread_mutex_unlock(&lock);
    return n > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    emu_init();
    if (ptr == 0 || size == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    emu_device_wait(-1);
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < ntable;) {
        entry_t *e = &table[i];
        const uintptr_t b = (uintptr_t)e->a.base;
        if (e->a.kind == EMU_VMM && b >= ptr && b + e->a.size <= ptr + size) {
            munmap(e->a.span, e->a.size);
            /* The reservation stays: PROT_NONE anonymous memory again. */
            mmap(e->a.base, e->a.size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
            vmm_unref(e->phys);
            drop(e);
            n++;
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&lock);
    return n > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
