/*
 * collar - a stand-in GDRCopy for the tests (never installed): the entry
 * points of GDRCopy's documented API (gdrapi.h, README) that collar calls
 * (src/mem/gdrcopy.c), over the CUDA emulation's device memory.  Built as
 * libgdrapi.so.2 (tests/cudaemu/cudaemu.am); a test names it with
 * COLLAR_GDRCOPY_LIBRARY, where collar's dlopen finds it as it would find
 * GDRCopy.
 *
 * A mapping is a real second mapping of the emulation's device memory (its
 * memfd's pages, mremap of the emulation's own view), at an address of its
 * own: a CPU copy through it reads and writes the device bytes, and one
 * through the device pointer itself faults (the emulation's rule
 * host-access-to-device-memory).  The GPU pages of the pinned range that
 * the allocation does not cover are mapped PROT_NONE: touching them
 * faults.
 *
 * The documented rules it enforces; breaking one is the emulation's
 * cudaemu_rule (cudaemu: RULE <rule>: <what> (<source>), then abort):
 *   map-unaligned      gdr_map of a pin whose address is not aligned to
 *                      the GPU page (64 KiB): README, "Restrictions":
 *                      "gdr_map() requires that the pinned address is
 *                      aligned to the GPU page"
 *   map-size           gdr_map, gdr_unmap of a size other than what
 *                      gdr_get_info says is pinned, or gdr_unmap of an
 *                      address gdr_map did not return: gdrapi.h, gdr_map
 *   map-twice          gdr_map of a handle already mapped (the library
 *                      refuses it: "mh is mapped already")
 *   unmap-first        gdr_unpin_buffer of a mapped handle: gdrapi.h,
 *                      "First invoke gdr_unmap() then gdr_unpin_buffer()"
 *   use-after-unpin    any call with a handle gdr_unpin_buffer released
 *                      (handles are never reused here)
 *   copy-range         gdr_copy_to/from_mapping outside the mapping, or
 *                      through an unmapped handle; the offset arithmetic
 *                      is gdrapi.h's: device address p is at
 *                      map + (p - info.va)
 *   copy-freed         a copy through the mapping of an allocation that
 *                      has been freed (its buffer id at the base is gone or
 *                      another): the driver's free callback has torn the
 *                      mapping down (gdr_get_callback_flag)
 * and the documented failures it returns (no abort):
 *   gdr_open           NULL with GDRSTUB_NO_DRIVER=1 (no /dev/gdrdrv)
 *   gdr_pin_buffer     EINVAL for memory that is not device memory of the
 *                      emulation (no allocation in the range, managed or
 *                      host memory) or a range beyond the GPU pages that
 *                      cover one allocation; ENOMEM with GDRSTUB_FAIL=pin
 *                      (BAR1 space exhausted)
 * gdr_close unpins what is left, as the library does (counted).
 *
 * GDRSTUB_REPORT=1: at exit, one line on stderr:
 *   gdrapi_stub: pid P: pins N, unpins N, maps N, to N (largest B), from N
 *   (largest B), left pinned at close N, pinned at exit N
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cudaemu_int.h"
/* GDRCopy's ABI as collar declares it: the definitions below must match. */
#pragma GCC visibility push(default)
#include "../../src/mem/gdrapi_abi.h"
#pragma GCC visibility pop

#define EXPORT __attribute__((visibility("default")))
#define GPU_PAGE GDR_GPU_PAGE
#define HOST_PAGE ((uintptr_t)4096)
#define MAX_HANDLES 4096
#define SOURCE "GDRCopy, gdrapi.h and README"

struct gdr { int open; };

enum { H_FREE, H_PINNED, H_UNPINNED };

typedef struct {
    int                state;
    uintptr_t          addr;      /* as pinned */
    size_t             size;
    uintptr_t          va;        /* the GPU pages: va .. va + mapped */
    size_t             mapped;
    uintptr_t          base;      /* the allocation */
    size_t             alloc;
    unsigned long long id;
    int                device;
    char              *map;       /* gdr_map's; NULL when not mapped */
} handle_t;

static handle_t handles[MAX_HANDLES];
static int nhandles;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    long pins, unpins, maps, to, from, left_at_close;
    size_t largest_to, largest_from;
} count;

/* The allocation's bytes inside h's GPU pages, [*lo, *hi): all of them
 * for a pin from below its base, the part from the pinned page on for a
 * pin inside it (gdr_pin_buffer "accepts any addresses returned by
 * cudaMalloc", and an aligned one inside a larger allocation is what the
 * README asks of a mapped pin). */
static void mapped_bytes(const handle_t *h, uintptr_t *lo, uintptr_t *hi)
{
    *lo = h->base > h->va ? h->base : h->va;
    *hi = h->base + h->alloc < h->va + h->mapped ? h->base + h->alloc
                                                 : h->va + h->mapped;
}

/* The handle mh names, pinned; a released one breaks use-after-unpin. */
static handle_t *handle(gdr_mh_t mh, const char *api)
{
    if (mh.h == 0 || mh.h > (unsigned long)nhandles) {
        cudaemu_rule("use-after-unpin", SOURCE, "%s with a handle "
                     "gdr_pin_buffer never returned (%lu)", api, mh.h);
    }
    handle_t *h = &handles[mh.h - 1];
    if (h->state != H_PINNED) {
        cudaemu_rule("use-after-unpin", SOURCE, "%s with handle %lu, released "
                     "by gdr_unpin_buffer", api, mh.h);
    }
    return h;
}

static void report(void)
{
    if (getenv("GDRSTUB_REPORT") == NULL) {
        return;
    }
    long pinned = 0;
    for (int i = 0; i < nhandles; i++) {
        pinned += handles[i].state == H_PINNED;
    }
    fprintf(stderr, "gdrapi_stub: pid %d: pins %ld, unpins %ld, maps %ld, to %ld "
            "(largest %zu), from %ld (largest %zu), left pinned at close %ld, "
            "pinned at exit %ld\n", (int)getpid(), count.pins, count.unpins,
            count.maps, count.to, count.largest_to, count.from,
            count.largest_from, count.left_at_close, pinned);
}

EXPORT gdr_t gdr_open(void)
{
    static int registered;
    if (!registered) {
        registered = 1;
        atexit(report);
    }
    const char *v = getenv("GDRSTUB_NO_DRIVER");
    if (v != NULL && strcmp(v, "1") == 0) {
        return NULL;   /* "error opening driver": no /dev/gdrdrv */
    }
    gdr_t g = calloc(1, sizeof(*g));
    if (g != NULL) {
        g->open = 1;
    }
    return g;
}

/* The device allocation (not managed) holding p: 1 and its range, id and
 * device, or 0. */
static int device_alloc(uintptr_t p, uintptr_t *base, size_t *size,
                        unsigned long long *id, int *device)
{
    unsigned type = 0, managed = 0;
    CUdeviceptr start = 0;
    CUpointer_attribute attrs[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    };
    *size = 0;
    *id = 0;
    *device = -1;
    void *data[] = { &type, &managed, &start, size, id, device };
    if (cuPointerGetAttributes(6, attrs, data, (CUdeviceptr)p) != CUDA_SUCCESS
        || type != CU_MEMORYTYPE_DEVICE || managed || *size == 0) {
        return 0;
    }
    *base = (uintptr_t)start;
    return 1;
}

/* "Create a peer-to-peer mapping of the device memory buffer": the GPU
 * pages covering [addr, addr + size) must be device memory; here, of one
 * allocation (the first found in the range), whose GPU pages are the
 * 64 KiB pages covering it. */
EXPORT int gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size,
                          uint64_t p2p_token, uint32_t va_space, gdr_mh_t *mh)
{
    (void)p2p_token;
    (void)va_space;
    if (g == NULL || mh == NULL || size == 0) {
        return EINVAL;
    }
    const char *f = getenv("GDRSTUB_FAIL");
    if (f != NULL && strcmp(f, "pin") == 0) {
        return ENOMEM;
    }
    uintptr_t base = 0;
    size_t alloc = 0;
    unsigned long long id = 0;
    int device = -1, found = 0;
    /* The allocation begins within the first GPU page of the range. */
    for (uintptr_t p = addr; p < addr + size && p < addr + GPU_PAGE + HOST_PAGE
         && !found; p = (p & ~(HOST_PAGE - 1)) + HOST_PAGE) {
        found = device_alloc(p, &base, &alloc, &id, &device);
    }
    const uintptr_t lo = base & ~(GPU_PAGE - 1);
    const uintptr_t hi = (base + alloc + GPU_PAGE - 1) & ~(GPU_PAGE - 1);
    if (!found || addr < lo || addr + size > hi) {
        return EINVAL;
    }
    pthread_mutex_lock(&lock);
    if (nhandles == MAX_HANDLES) {
        pthread_mutex_unlock(&lock);
        return ENOMEM;
    }
    handle_t *h = &handles[nhandles++];
    memset(h, 0, sizeof(*h));
    h->state = H_PINNED;
    h->addr = addr;
    h->size = size;
    h->va = addr & ~(GPU_PAGE - 1);
    h->mapped = ((addr + size + GPU_PAGE - 1) & ~(GPU_PAGE - 1)) - h->va;
    h->base = base;
    h->alloc = alloc;
    h->id = id;
    h->device = device;
    mh->h = (unsigned long)nhandles;
    count.pins++;
    pthread_mutex_unlock(&lock);
    return 0;
}

EXPORT int gdr_get_info_v2(gdr_t g, gdr_mh_t mh, gdr_info_t *info)
{
    (void)g;
    pthread_mutex_lock(&lock);
    handle_t *h = handle(mh, "gdr_get_info");
    memset(info, 0, sizeof(*info));
    info->va = h->va;
    info->mapped_size = h->mapped;
    info->page_size = (uint32_t)GPU_PAGE;
    info->mapped = h->map != NULL;
    info->wc_mapping = h->map != NULL;
    info->mapping_type = h->map != NULL ? 1 : 0;
    pthread_mutex_unlock(&lock);
    return 0;
}

/* The v1 name (GDRCopy before 2.3): the v2 struct's beginning. */
EXPORT int gdr_get_info(gdr_t g, gdr_mh_t mh, gdr_info_t *info)
{
    return gdr_get_info_v2(g, mh, info);
}

EXPORT int gdr_map(gdr_t g, gdr_mh_t mh, void **va, size_t size)
{
    (void)g;
    pthread_mutex_lock(&lock);
    handle_t *h = handle(mh, "gdr_map");
    if (h->addr & (GPU_PAGE - 1)) {
        cudaemu_rule("map-unaligned", SOURCE, "gdr_map of a buffer pinned at "
                     "%#lx, not aligned to the 64 KiB GPU page",
                     (unsigned long)h->addr);
    }
    if (h->map != NULL) {
        cudaemu_rule("map-twice", SOURCE, "gdr_map of handle %lu, mapped "
                     "already", mh.h);
    }
    if (size == 0 || size > h->mapped) {
        cudaemu_rule("map-size", SOURCE, "gdr_map of %zu bytes; %zu are "
                     "pinned", size, h->mapped);
    }
    /* The GPU pages, PROT_NONE; the allocation's bytes in them mapped at
     * their offset (the emulation's allocations are host-page aligned,
     * and so is the part of one from a GPU page boundary on). */
    char *r = mmap(NULL, h->mapped, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    uintptr_t lo, hi;
    mapped_bytes(h, &lo, &hi);
    void *span = cudaemu_device_span(h->device, (void *)lo, hi - lo);
    const size_t len = (hi - lo + HOST_PAGE - 1) & ~(HOST_PAGE - 1);
    int rc = 0;
    if (r == MAP_FAILED || span == NULL
        || mremap(span, 0, len, MREMAP_MAYMOVE | MREMAP_FIXED,
                  r + (lo - h->va)) == MAP_FAILED) {
        rc = errno != 0 ? errno : ENOMEM;
        if (r != MAP_FAILED) {
            munmap(r, h->mapped);
        }
    } else {
        h->map = r;
        *va = r;
        count.maps++;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT int gdr_unmap(gdr_t g, gdr_mh_t mh, void *va, size_t size)
{
    (void)g;
    pthread_mutex_lock(&lock);
    handle_t *h = handle(mh, "gdr_unmap");
    if (h->map == NULL || va != h->map) {
        cudaemu_rule("map-size", SOURCE, "gdr_unmap of %p; gdr_map returned "
                     "%p", va, (void *)h->map);
    }
    if (size == 0 || size > h->mapped) {
        cudaemu_rule("map-size", SOURCE, "gdr_unmap of %zu bytes; %zu are "
                     "mapped", size, h->mapped);
    }
    munmap(h->map, h->mapped);
    h->map = NULL;
    pthread_mutex_unlock(&lock);
    return 0;
}

/* Lock held. */
static void unpin(handle_t *h, unsigned long n)
{
    if (h->map != NULL) {
        cudaemu_rule("unmap-first", SOURCE, "gdr_unpin_buffer of handle %lu, "
                     "still mapped (gdr_unmap first)", n);
    }
    h->state = H_UNPINNED;
    count.unpins++;
}

/* 1 when h's allocation is gone: no allocation at its base, or another
 * (the driver's free callback has run: gdr_get_callback_flag). */
static int freed(const handle_t *h)
{
    uintptr_t base;
    size_t size;
    unsigned long long id;
    int device;
    return !device_alloc(h->base, &base, &size, &id, &device) || id != h->id
           || base != h->base;
}

/* Also after the allocation was freed: the free callback has released the
 * pages; the handle still has to be given back. */
EXPORT int gdr_unpin_buffer(gdr_t g, gdr_mh_t mh)
{
    (void)g;
    pthread_mutex_lock(&lock);
    unpin(handle(mh, "gdr_unpin_buffer"), mh.h);
    pthread_mutex_unlock(&lock);
    return 0;
}

EXPORT int gdr_get_callback_flag(gdr_t g, gdr_mh_t mh, int *flag)
{
    (void)g;
    pthread_mutex_lock(&lock);
    *flag = freed(handle(mh, "gdr_get_callback_flag"));
    pthread_mutex_unlock(&lock);
    return 0;
}

/* [p, p + n) inside h's mapping, of an allocation not freed since. */
static void check_copy(gdr_mh_t mh, const void *p, size_t n, const char *api)
{
    handle_t *h = handle(mh, api);
    if (h->map == NULL) {
        cudaemu_rule("copy-range", SOURCE, "%s through handle %lu, not "
                     "mapped", api, mh.h);
    }
    const uintptr_t a = (uintptr_t)p, m = (uintptr_t)h->map;
    uintptr_t lo, hi;
    mapped_bytes(h, &lo, &hi);
    const uintptr_t b0 = m + (lo - h->va), b1 = m + (hi - h->va);
    if (a < b0 || n > b1 - b0 || a - b0 > (b1 - b0) - n) {
        cudaemu_rule("copy-range", SOURCE, "%s of %zu bytes at %p: the "
                     "allocation's bytes are %p .. %p of the mapping at %p "
                     "(device address p is at map + (p - info.va))", api, n,
                     p, (void *)b0, (void *)b1, (void *)h->map);
    }
    if (freed(h)) {
        cudaemu_rule("copy-freed", SOURCE, "%s through the mapping of the "
                     "allocation at %#lx (buffer id %llu), freed since it was "
                     "pinned", api, (unsigned long)h->base, h->id);
    }
}

EXPORT int gdr_copy_to_mapping(gdr_mh_t mh, void *map_d_ptr, const void *h_ptr,
                               size_t size)
{
    pthread_mutex_lock(&lock);
    check_copy(mh, map_d_ptr, size, "gdr_copy_to_mapping");
    memcpy(map_d_ptr, h_ptr, size);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);   /* the library's store fence */
    count.to++;
    if (size > count.largest_to) {
        count.largest_to = size;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

EXPORT int gdr_copy_from_mapping(gdr_mh_t mh, void *h_ptr, const void *map_d_ptr,
                                 size_t size)
{
    pthread_mutex_lock(&lock);
    check_copy(mh, map_d_ptr, size, "gdr_copy_from_mapping");
    memcpy(h_ptr, map_d_ptr, size);
    count.from++;
    if (size > count.largest_from) {
        count.largest_from = size;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

EXPORT int gdr_close(gdr_t g)
{
    if (g == NULL || !g->open) {
        return EINVAL;
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nhandles; i++) {
        handle_t *h = &handles[i];
        if (h->state == H_PINNED) {
            if (h->map != NULL) {
                munmap(h->map, h->mapped);
                h->map = NULL;
            }
            unpin(h, (unsigned long)i + 1);
            count.left_at_close++;
        }
    }
    pthread_mutex_unlock(&lock);
    g->open = 0;
    free(g);
    return 0;
}

EXPORT void gdr_runtime_get_version(int *major, int *minor)
{
    *major = 2;
    *minor = 4;
}
