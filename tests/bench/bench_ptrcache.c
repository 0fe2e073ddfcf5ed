/*
 * The cost of asking what kind of memory a pointer is (the pointer cache,
 * src/mem/ptrcache.c).  No MPI run.  Prints ns per lookup, best of 5 runs.
 *
 *   fake driver (always): the cache's own cost, a hit in trust mode (no
 *   buffer-id check) and in mode 1 (plus a free buffer-id check), against a
 *   miss whose full query costs nothing: what collar adds around the
 *   driver's calls.  A hit on the buffer the thread hit last skips the
 *   lock; two buffers alternating take the locked search every time.
 *   cuda (built with CUDA and a GPU present): collar's cuda backend on a
 *   cudaMalloc'ed pointer with COLLAR_PTR_CACHE=0 (every lookup a full
 *   driver query: the miss cost), 1 (hit + one buffer-id attribute) and
 *   trust (hit alone), and on host pointers: a 1 MiB malloc (an anonymous
 *   mapping: the driver is asked every time) and a stack buffer (a host
 *   range from /proc/self/maps: cached).
 *   host pointers, fake driver: the cost of a host lookup with and without
 *   the host ranges (the fake query is free; the driver's is not), the
 *   whole answer (collar_ptrcache_lookup) and the kind alone
 *   (collar_ptrcache_kind, what every call's classification asks).
 */
#include "config.h"
#include "mem/mem.h"
#include "mem/ptrcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef COLLAR_HAVE_CUDA
#include <cuda_runtime.h>
#endif

typedef collar_status_t (*lookup_fn)(void *ctx, const void *ptr);

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double best_ns(lookup_fn fn, void *ctx, const void *ptr, int n)
{
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        const double t0 = now_ns();
        for (int i = 0; i < n; i++) {
            fn(ctx, (const char *)ptr + (i & 63));
        }
        const double t = (now_ns() - t0) / n;
        best = t < best ? t : best;
    }
    return best;
}

/* ------------------------------------------------------------- fake driver */

static collar_status_t fake_query(void *ctx, const void *ptr, collar_ptr_info_t *info)
{
    (void)ctx;
    memset(info, 0, sizeof(*info));
    info->kind = COLLAR_MEM_DEVICE;
    info->base = (uintptr_t)ptr & ~(uintptr_t)0xffff;
    info->size = 0x10000;
    info->buffer_id = 7;
    return COLLAR_OK;
}

static collar_status_t fake_host_query(void *ctx, const void *ptr,
                                       collar_ptr_info_t *info)
{
    (void)ctx;
    (void)ptr;
    memset(info, 0, sizeof(*info));
    info->kind = COLLAR_MEM_HOST;
    info->device = -1;
    return COLLAR_OK;
}

static unsigned long long fake_id(void *ctx, const void *ptr)
{
    (void)ctx;
    (void)ptr;
    return 7;
}

static collar_status_t cache_lookup(void *ctx, const void *ptr)
{
    collar_ptr_info_t info;
    return collar_ptrcache_lookup(ctx, ptr, &info);
}

/* The kind alone (what the cuda backend's mem_query asks for). */
static collar_status_t cache_kind(void *ctx, const void *ptr)
{
    collar_mem_kind_t kind;
    int device;
    return collar_ptrcache_kind(ctx, ptr, &kind, &device);
}

/* Alternating between two cached buffers: the thread's last hit never
 * matches, every lookup searches under the read lock. */
static collar_status_t cache_lookup_alternating(void *ctx, const void *ptr)
{
    static unsigned flip;
    collar_ptr_info_t info;
    return collar_ptrcache_lookup(ctx, (const char *)ptr + ((flip++ & 1) << 16), &info);
}

static void bench_fake(void)
{
    const collar_ptr_driver_t drv = { fake_query, fake_id, NULL, NULL };
    static const char *names[] = { "miss (cache off, free query)", "hit, buffer id checked (free)",
                                   "hit, trusted" };
    const int modes[] = { COLLAR_PTR_CACHE_OFF, COLLAR_PTR_CACHE_ON, COLLAR_PTR_CACHE_TRUST };
    printf("pointer cache, fake driver (the cache's own cost), 64 entries:\n");
    for (int m = 0; m < 3; m++) {
        collar_ptrcache_t *c;
        if (collar_ptrcache_create(&drv, modes[m], 1024, &c) != COLLAR_OK) {
            return;
        }
        /* 64 cached ranges, the lookups land in the middle one. */
        for (uintptr_t a = 1; a <= 64; a++) {
            cache_lookup(c, (const void *)(a << 16));
        }
        printf("  %-34s %6.1f ns\n", names[m],
               best_ns(cache_lookup, c, (const void *)((uintptr_t)32 << 16), 2000000));
        if (modes[m] != COLLAR_PTR_CACHE_OFF) {
            printf("  %-34s %6.1f ns\n", "  the same, two buffers alternating",
                   best_ns(cache_lookup_alternating, c,
                           (const void *)((uintptr_t)32 << 16), 2000000));
        }
        collar_ptrcache_destroy(c);
    }

    /* Host buffers: a fake driver whose query answers host (it costs
     * nothing; a real driver's pointer query is a call into libcuda), with
     * and without the host ranges of /proc/self/maps. */
    const collar_ptr_driver_t hdrv = { fake_host_query, fake_id, NULL,
                                       collar_ptr_host_range_maps };
    const collar_ptr_driver_t hdrv0 = { fake_host_query, fake_id, NULL, NULL };
    static char host_buf[4096];   /* .bss of this program: a file mapping */
    int stack_buf[64];
    char *heap_buf = malloc(256);
    printf("host pointers (mode 1):\n");
    for (int k = 0; k < 2; k++) {
        collar_ptrcache_t *c;
        if (collar_ptrcache_create(k ? &hdrv : &hdrv0, COLLAR_PTR_CACHE_ON, 1024,
                                   &c) != COLLAR_OK) {
            return;
        }
        const char *what = k ? "host range cached" : "driver asked (no host ranges)";
        printf("  %-34s %6.1f ns (static), %6.1f ns (stack), %6.1f ns (heap)\n",
               what, best_ns(cache_lookup, c, host_buf, 2000000),
               best_ns(cache_lookup, c, stack_buf, 2000000),
               heap_buf ? best_ns(cache_lookup, c, heap_buf, 2000000) : 0.0);
        printf("  %-34s %6.1f ns (static), %6.1f ns (stack), %6.1f ns (heap)\n",
               "  the kind alone", best_ns(cache_kind, c, host_buf, 2000000),
               best_ns(cache_kind, c, stack_buf, 2000000),
               heap_buf ? best_ns(cache_kind, c, heap_buf, 2000000) : 0.0);
        collar_ptrcache_stats_t st;
        collar_ptrcache_stats(c, &st);
        printf("  %-34s %llu host hits, %llu misses\n", "",
               (unsigned long long)st.host_hits, (unsigned long long)st.misses);
        collar_ptrcache_destroy(c);
    }
    free(heap_buf);
}

/* -------------------------------------------------------------------- cuda */

#ifdef COLLAR_HAVE_CUDA
static collar_status_t dev_lookup(void *ctx, const void *ptr)
{
    collar_mem_kind_t kind;
    return ((const collar_device_t *)ctx)->mem_query(ptr, &kind);
}

static collar_status_t runtime_lookup(void *ctx, const void *ptr)
{
    (void)ctx;
    struct cudaPointerAttributes a;
    return cudaPointerGetAttributes(&a, ptr) == cudaSuccess ? COLLAR_OK
                                                             : COLLAR_ERR_DEVICE;
}

static int bench_cuda(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("cuda: no GPU here; the driver's costs are measured on a GPU "
               "machine (tests/gpu/run.sh)\n");
        return 0;
    }
    void *d = NULL;
    if (cudaMalloc(&d, 1 << 20) != cudaSuccess) {
        printf("cuda: cudaMalloc failed\n");
        return 1;
    }
    char *h = malloc(1 << 20);
    printf("cuda backend, mem_query on a 1 MiB cudaMalloc buffer:\n");
    static const char *names[] = { "COLLAR_PTR_CACHE=0 (driver query)",
                                   "COLLAR_PTR_CACHE=1 (hit + buffer id)",
                                   "COLLAR_PTR_CACHE=trust (hit)" };
    const int modes[] = { COLLAR_PTR_CACHE_OFF, COLLAR_PTR_CACHE_ON, COLLAR_PTR_CACHE_TRUST };
    for (int m = 0; m < 3; m++) {
        collar_cfg.ptr_cache = modes[m];
        collar_cfg.device = COLLAR_DEVICE_CUDA;
        const collar_device_t *dev = collar_device_open(COLLAR_DEVICE_CUDA);
        printf("  %-38s %7.1f ns\n", names[m], best_ns(dev_lookup, (void *)dev, d, 200000));
        if (m == 1) {
            printf("  %-38s %7.1f ns\n", "host 1 MiB malloc (anonymous: asked)",
                   best_ns(dev_lookup, (void *)dev, h, 200000));
            char small[256];
            printf("  %-38s %7.1f ns\n", "host stack buffer (cached)",
                   best_ns(dev_lookup, (void *)dev, small, 200000));
        }
        collar_device_close();
    }
    printf("  %-38s %7.1f ns\n", "cudaPointerGetAttributes (runtime)",
           best_ns(runtime_lookup, NULL, d, 200000));
    cudaFree(d);
    free(h);
    return 0;
}
#endif

int main(void)
{
    collar_config_load();
    bench_fake();
#ifdef COLLAR_HAVE_CUDA
    return bench_cuda();
#else
    printf("cuda: not built in\n");
    return 0;
#endif
}
