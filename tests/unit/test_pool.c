/*
 * Unit test of the staging pools (src/core/pool.c) against a fake device
 * that records its allocations: what a request allocates (powers of two up
 * to 4 MiB, 2 MiB multiples above: a 1 GiB + 4 byte message must not take
 * 2 GiB), reuse of returned buffers, the COLLAR_STAGING_POOL bound,
 * device scratch kept per GPU (a buffer of one device is never handed out
 * for a call on another), pageable memory where no pinned memory can be
 * had, and drain memory.
 */
#include "config.h"
#include "core/core.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    void  *ptr;
    size_t bytes;
    int    device;
    int    live;
} fake_buf_t;

static fake_buf_t bufs[64];
static int nbufs, nallocs, nfrees;
static int current_device;   /* the device of the call being set up */
static int out_of_memory;    /* every allocation fails */

/* Fake allocations: distinct addresses, never touched, nothing mapped. */
static collar_status_t fake_alloc(size_t bytes, void **ptr)
{
    if (nbufs == 64 || out_of_memory) {
        return COLLAR_ERR_NO_MEMORY;
    }
    static uintptr_t next = 0x100000;
    *ptr = (void *)next;
    next += 0x1000;
    bufs[nbufs++] = (fake_buf_t){ *ptr, bytes, current_device, 1 };
    nallocs++;
    return COLLAR_OK;
}

static fake_buf_t *fake_find(const void *ptr)
{
    for (int i = 0; i < nbufs; i++) {
        if (bufs[i].ptr == ptr) {
            return &bufs[i];
        }
    }
    return NULL;
}

static void fake_free(void *ptr)
{
    fake_buf_t *b = fake_find(ptr);
    if (b != NULL) {
        b->live = 0;
    }
    nfrees++;
}

static int fake_scratch_device(const void *ptr)
{
    if (ptr == NULL) {
        return current_device;
    }
    const fake_buf_t *b = fake_find(ptr);
    return b != NULL ? b->device : -1;
}

static collar_device_t fake_dev = {
    .name = "fake",
    .host_alloc = fake_alloc, .host_free = fake_free,
    .dev_alloc = fake_alloc, .dev_free = fake_free,
    .scratch_device = fake_scratch_device,
};

static size_t last_alloc_bytes(void)
{
    return nbufs > 0 ? bufs[nbufs - 1].bytes : 0;
}

static void test_rounding(void)
{
    const size_t K = 1024, M = 1024 * K, G = 1024 * M;
    UNIT_CHECK(collar_pool_round(1) == 4 * K, "1 byte -> %zu", collar_pool_round(1));
    UNIT_CHECK(collar_pool_round(4 * K + 1) == 8 * K, "4K+1");
    UNIT_CHECK(collar_pool_round(3 * M) == 4 * M, "3M");
    UNIT_CHECK(collar_pool_round(4 * M) == 4 * M, "4M");
    UNIT_CHECK(collar_pool_round(4 * M + 1) == 6 * M, "4M+1 -> %zu",
               collar_pool_round(4 * M + 1));
    UNIT_CHECK(collar_pool_round(G + 4) == G + 2 * M, "1G+4 -> %zu",
               collar_pool_round(G + 4));
    UNIT_CHECK(collar_pool_round(SIZE_MAX) == 0, "SIZE_MAX");
    /* Every rounding holds the request, and wastes at most 2 MiB above
     * 4 MiB. */
    for (size_t b = 1; b < 64 * M; b = b * 3 + 7) {
        const size_t r = collar_pool_round(b);
        UNIT_CHECK(r >= b && (b <= 4 * M || r - b < 2 * M), "%zu -> %zu", b, r);
    }

    void *p;
    UNIT_CHECK(collar_pool_get(&fake_dev, G + 4, &p) == COLLAR_OK, "get 1G+4");
    UNIT_CHECK(last_alloc_bytes() == G + 2 * M,
               "1 GiB + 4 bytes allocated %zu bytes", last_alloc_bytes());
    collar_pool_put(&fake_dev, p, G + 4);
}

static void test_reuse(void)
{
    void *a, *b;
    const int n0 = nallocs;
    UNIT_CHECK(collar_pool_get(&fake_dev, 10000, &a) == COLLAR_OK, "get");
    collar_pool_put(&fake_dev, a, 10000);
    UNIT_CHECK(collar_pool_get(&fake_dev, 9000, &b) == COLLAR_OK && b == a,
               "a returned buffer of the same class is reused");
    UNIT_CHECK(nallocs == n0 + 1, "%d allocations, expected 1", nallocs - n0);
    collar_pool_put(&fake_dev, b, 9000);
    /* 6 MiB and 8 MiB are different large classes. */
    UNIT_CHECK(collar_pool_get(&fake_dev, 5 << 20, &a) == COLLAR_OK, "get 5M");
    collar_pool_put(&fake_dev, a, 5 << 20);
    UNIT_CHECK(collar_pool_get(&fake_dev, 7 << 20, &b) == COLLAR_OK && b != a,
               "a 6 MiB buffer is not handed out for 7 MiB");
    collar_pool_put(&fake_dev, b, 7 << 20);
    UNIT_CHECK(collar_pool_get(&fake_dev, (5 << 20) + 100, &b) == COLLAR_OK && b == a,
               "the 6 MiB buffer is reused for 5 MiB + 100");
    collar_pool_put(&fake_dev, b, (5 << 20) + 100);
    collar_pool_release_all();
}

static void test_per_device(void)
{
    void *a, *b, *c;
    current_device = 1;
    UNIT_CHECK(collar_scratch_get(&fake_dev, 100000, &a) == COLLAR_OK, "get on 1");
    collar_scratch_put(&fake_dev, a, 100000);
    current_device = 2;
    UNIT_CHECK(collar_scratch_get(&fake_dev, 100000, &b) == COLLAR_OK, "get on 2");
    UNIT_CHECK(b != a && fake_find(b)->device == 2,
               "scratch for device 2 came from device %d",
               fake_find(b) ? fake_find(b)->device : -1);
    collar_scratch_put(&fake_dev, b, 100000);
    current_device = 1;
    UNIT_CHECK(collar_scratch_get(&fake_dev, 100000, &c) == COLLAR_OK && c == a,
               "device 1's buffer is reused on device 1");
    collar_scratch_put(&fake_dev, c, 100000);
    /* Pinned host memory is portable: any device's call reuses it. */
    current_device = 1;
    UNIT_CHECK(collar_pool_get(&fake_dev, 100000, &a) == COLLAR_OK, "host get");
    collar_pool_put(&fake_dev, a, 100000);
    current_device = 2;
    UNIT_CHECK(collar_pool_get(&fake_dev, 100000, &b) == COLLAR_OK && b == a,
               "pinned host buffers are shared by devices");
    collar_pool_put(&fake_dev, b, 100000);
    collar_pool_release_all();
    for (int i = 0; i < nbufs; i++) {
        UNIT_CHECK(!bufs[i].live || bufs[i].bytes == 0, "buffer %d not freed", i);
    }
}

static void test_bound(void)
{
    void *a, *b;
    collar_cfg.staging_pool = 64 * 1024;
    UNIT_CHECK(collar_pool_get(&fake_dev, 64 * 1024, &a) == COLLAR_OK, "get");
    UNIT_CHECK(collar_pool_get(&fake_dev, 4096, &b) == COLLAR_OK, "get");
    const int f0 = nfrees;
    collar_pool_put(&fake_dev, a, 64 * 1024);
    collar_pool_put(&fake_dev, b, 4096);
    UNIT_CHECK(nfrees == f0 + 1, "the buffer over COLLAR_STAGING_POOL is freed "
               "(%d frees)", nfrees - f0);
    collar_pool_release_all();
}

/* Staging: pinned memory from the pool, else pageable memory that holds
 * data; an error only when neither can be had (COLLAR_SIM_FAIL=heap:1). */
static void test_staging(void)
{
    void *p = NULL;
    collar_staging_kind_t kind = COLLAR_STAGING_DRAIN;
    UNIT_CHECK(collar_staging_get(&fake_dev, 5000, &p, &kind) == COLLAR_OK
               && kind == COLLAR_STAGING_PINNED && fake_find(p) != NULL,
               "pinned staging: kind %d", (int)kind);
    collar_staging_put(&fake_dev, p, 5000, kind);

    out_of_memory = 1;
    const int a0 = nbufs;
    UNIT_CHECK(collar_staging_get(&fake_dev, 100000, &p, &kind) == COLLAR_OK
               && kind == COLLAR_STAGING_HEAP && fake_find(p) == NULL,
               "no pinned memory: pageable, kind %d", (int)kind);
    if (kind == COLLAR_STAGING_HEAP) {
        memset(p, 7, 100000);   /* memory of its own, every byte */
        collar_staging_put(&fake_dev, p, 100000, kind);
    }
    UNIT_CHECK(nbufs == a0, "a pinned buffer was made");

    collar_fault_init("heap:1");
    p = &kind;
    UNIT_CHECK(collar_staging_get(&fake_dev, 100000, &p, &kind) == COLLAR_ERR_NO_MEMORY
               && p == NULL, "no pinned and no pageable memory: an error");
    UNIT_CHECK(collar_staging_get(&fake_dev, 100000, &p, &kind) == COLLAR_OK
               && kind == COLLAR_STAGING_HEAP, "heap:1 fails once");
    collar_staging_put(&fake_dev, p, 100000, kind);
    collar_fault_init(NULL);
    out_of_memory = 0;
    collar_pool_release_all();
}

/* Drain memory: every byte may be written; its last 8 KiB hold what was
 * written there whatever is written elsewhere; the rest is one block seen
 * again and again, whatever the size. */
static void test_drain(void)
{
    const size_t M = (size_t)1 << 20;
    const size_t sizes[] = { 1, 100, 8192, 8193, 5 * M + 100, 64 * M };
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        const size_t n = sizes[s];
        unsigned char *d = collar_drain_get(n);
        UNIT_CHECK(d != NULL, "drain memory of %zu bytes", n);
        if (d == NULL) {
            continue;
        }
        const size_t tail = n < 8192 ? n : 8192;
        for (size_t i = n - tail; i < n; i++) {
            d[i] = (unsigned char)(i * 7);
        }
        memset(d, 0x5a, n - tail);
        size_t kept = 0;
        for (size_t i = n - tail; i < n; i++) {
            kept += d[i] == (unsigned char)(i * 7);
        }
        UNIT_CHECK(kept == tail, "%zu bytes: %zu of the last %zu kept", n, kept,
                   tail);
        if (n >= 5 * M) {
            volatile unsigned char *v = d;   /* (the compiler sees two bytes) */
            v[0] = 1;
            v[2 * M] = 2;
            UNIT_CHECK(v[0] == 2, "%zu bytes: not one block seen again", n);
        }
        collar_drain_put(d, n);
    }
    collar_pool_release_all();
    /* Made again after MPI_Finalize's release. */
    void *d = collar_drain_get(3 * M);
    UNIT_CHECK(d != NULL, "drain memory after the release");
    collar_drain_put(d, 3 * M);
    collar_pool_release_all();
}

int main(void)
{
    collar_config_load();
    collar_cfg.staging_pool = (size_t)4 << 30;
    test_rounding();
    test_reuse();
    test_per_device();
    test_bound();
    test_staging();
    test_drain();
    return unit_finish("test_pool");
}
