/*
 * Unit test of the staging pools (src/core/pool.c) against a fake device
 * that records its allocations: what a request allocates (powers of two up
 * to 4 MiB, 2 MiB multiples above: a 1 GiB + 4 byte message must not take
 * 2 GiB), reuse of returned buffers, the COLLAR_STAGING_POOL bound, and
 * device scratch kept per GPU (a buffer of one device is never handed out
 * for a call on another).
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

/* Fake allocations: distinct addresses, never touched, nothing mapped. */
static collar_status_t fake_alloc(size_t bytes, void **ptr)
{
    if (nbufs == 64) {
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

int main(void)
{
    collar_config_load();
    collar_cfg.staging_pool = (size_t)4 << 30;
    test_rounding();
    test_reuse();
    test_per_device();
    test_bound();
    return unit_finish("test_pool");
}
