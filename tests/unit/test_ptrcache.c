/*
 * Unit test of the pointer cache (src/mem/ptrcache.c) against a fake
 * driver: a table of "allocations" that the test frees and reuses behind
 * the cache's back, as an application does.  Checks that hits need no full
 * query, that host memory is never cached, that a freed-and-reused range
 * is caught by its buffer id (and never yields the old kind) in mode 1,
 * what trust mode promises, eviction at capacity, forget(), lookups
 * from several threads while ranges change, and the kind alone
 * (collar_ptrcache_kind) with the lock-free probes of the host ranges.
 */
#include "config.h"
#include "mem/ptrcache.h"
#include "unit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define NALLOC 8

typedef struct {
    uintptr_t          base;
    size_t             size;
    collar_mem_kind_t  kind;
    unsigned long long id;       /* 0: free */
} fake_alloc_t;

static fake_alloc_t     allocs[NALLOC];
static pthread_mutex_t  fake_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned long long next_id = 1;
static _Atomic long     nqueries, nids;

static void fake_map(int slot, uintptr_t base, size_t size, collar_mem_kind_t kind)
{
    pthread_mutex_lock(&fake_lock);
    allocs[slot] = (fake_alloc_t){ base, size, kind, atomic_fetch_add(&next_id, 1) };
    pthread_mutex_unlock(&fake_lock);
}

static void fake_unmap(int slot)
{
    pthread_mutex_lock(&fake_lock);
    allocs[slot].id = 0;
    pthread_mutex_unlock(&fake_lock);
}

static const fake_alloc_t *fake_find(uintptr_t p, fake_alloc_t *copy)
{
    const fake_alloc_t *found = NULL;
    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < NALLOC; i++) {
        if (allocs[i].id != 0 && p >= allocs[i].base
            && p - allocs[i].base < allocs[i].size) {
            *copy = allocs[i];
            found = copy;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return found;
}

static collar_status_t fake_query(void *ctx, const void *ptr, collar_ptr_info_t *info)
{
    (void)ctx;
    atomic_fetch_add(&nqueries, 1);
    fake_alloc_t a;
    memset(info, 0, sizeof(*info));
    info->kind = COLLAR_MEM_HOST;
    info->device = -1;
    if (fake_find((uintptr_t)ptr, &a) != NULL) {
        info->kind = a.kind;
        info->base = a.base;
        info->size = a.size;
        info->buffer_id = a.id;
        info->device = 0;
    }
    return COLLAR_OK;
}

static unsigned long long fake_buffer_id(void *ctx, const void *ptr)
{
    (void)ctx;
    atomic_fetch_add(&nids, 1);
    fake_alloc_t a;
    return fake_find((uintptr_t)ptr, &a) != NULL ? a.id : 0;
}

static const collar_ptr_driver_t driver = { fake_query, fake_buffer_id, NULL, NULL };

static collar_mem_kind_t kind_at(collar_ptrcache_t *c, uintptr_t p)
{
    collar_ptr_info_t info;
    collar_status_t st = collar_ptrcache_lookup(c, (const void *)p, &info);
    UNIT_CHECK(st == COLLAR_OK, "lookup %#lx: %d", (unsigned long)p, st);
    return info.kind;
}

static void reset(void)
{
    memset(allocs, 0, sizeof(allocs));
    atomic_store(&nqueries, 0);
    atomic_store(&nids, 0);
}

static void test_hits_and_host(int mode)
{
    reset();
    collar_ptrcache_t *c;
    UNIT_CHECK(collar_ptrcache_create(&driver, mode, 16, &c) == COLLAR_OK, "create");
    fake_map(0, 0x100000, 0x10000, COLLAR_MEM_DEVICE);
    fake_map(1, 0x200000, 0x1000, COLLAR_MEM_MANAGED);
    UNIT_CHECK(kind_at(c, 0x100000) == COLLAR_MEM_DEVICE, "device base");
    UNIT_CHECK(kind_at(c, 0x10ffff) == COLLAR_MEM_DEVICE, "device last byte");
    UNIT_CHECK(kind_at(c, 0x108000) == COLLAR_MEM_DEVICE, "device middle");
    UNIT_CHECK(kind_at(c, 0x110000) == COLLAR_MEM_HOST, "one past the end");
    UNIT_CHECK(kind_at(c, 0x200010) == COLLAR_MEM_MANAGED, "managed");
    UNIT_CHECK(kind_at(c, 0x200010) == COLLAR_MEM_MANAGED, "managed again");
    UNIT_CHECK(kind_at(c, 0x50) == COLLAR_MEM_HOST, "host");
    UNIT_CHECK(kind_at(c, 0x50) == COLLAR_MEM_HOST, "host again");
    collar_ptrcache_stats_t st;
    collar_ptrcache_stats(c, &st);
    if (mode == COLLAR_PTR_CACHE_OFF) {
        UNIT_CHECK(atomic_load(&nqueries) == 8, "off: every lookup queries (%ld)",
                   atomic_load(&nqueries));
        UNIT_CHECK(st.entries == 0 && st.hits == 0, "off: nothing cached");
    } else {
        /* Misses: device base, one past the end, managed, host twice. */
        UNIT_CHECK(atomic_load(&nqueries) == 5, "mode %d: %ld full queries",
                   mode, atomic_load(&nqueries));
        UNIT_CHECK(st.hits == 3 && st.misses == 5 && st.entries == 2,
                   "mode %d: %llu hits %llu misses %llu entries", mode,
                   (unsigned long long)st.hits, (unsigned long long)st.misses,
                   (unsigned long long)st.entries);
        UNIT_CHECK(atomic_load(&nids) == (mode == COLLAR_PTR_CACHE_ON ? 3 : 0),
                   "mode %d: %ld buffer-id checks", mode, atomic_load(&nids));
    }
    collar_ptrcache_destroy(c);
}

/* Freed and reused behind the cache's back. */
static void test_reuse(void)
{
    reset();
    collar_ptrcache_t *c;
    UNIT_CHECK(collar_ptrcache_create(&driver, COLLAR_PTR_CACHE_ON, 16, &c) == COLLAR_OK,
               "create");
    fake_map(0, 0x100000, 0x10000, COLLAR_MEM_DEVICE);
    UNIT_CHECK(kind_at(c, 0x100100) == COLLAR_MEM_DEVICE, "device");
    /* Freed: the range is host memory now (as far as the driver knows). */
    fake_unmap(0);
    UNIT_CHECK(kind_at(c, 0x100100) == COLLAR_MEM_HOST, "freed: host");
    /* Reused as managed memory at an overlapping range. */
    fake_map(0, 0x0f8000, 0x10000, COLLAR_MEM_MANAGED);
    UNIT_CHECK(kind_at(c, 0x100100) == COLLAR_MEM_MANAGED, "reused as managed");
    UNIT_CHECK(kind_at(c, 0x0f8000) == COLLAR_MEM_MANAGED, "reused base");
    /* Reused again as device memory, same range, new id. */
    fake_unmap(0);
    fake_map(0, 0x0f8000, 0x10000, COLLAR_MEM_DEVICE);
    UNIT_CHECK(kind_at(c, 0x0f8000) == COLLAR_MEM_DEVICE, "reused as device");
    collar_ptrcache_stats_t st;
    collar_ptrcache_stats(c, &st);
    UNIT_CHECK(st.stale == 2, "%llu stale hits detected", (unsigned long long)st.stale);
    UNIT_CHECK(st.entries == 1, "%llu entries", (unsigned long long)st.entries);
    collar_ptrcache_destroy(c);

    /* Trust mode keeps answering from the cache (documented): the cost of
     * skipping the check. */
    reset();
    UNIT_CHECK(collar_ptrcache_create(&driver, COLLAR_PTR_CACHE_TRUST, 16, &c) == COLLAR_OK,
               "create");
    fake_map(0, 0x100000, 0x10000, COLLAR_MEM_DEVICE);
    UNIT_CHECK(kind_at(c, 0x100100) == COLLAR_MEM_DEVICE, "trust: device");
    fake_unmap(0);
    UNIT_CHECK(kind_at(c, 0x100100) == COLLAR_MEM_DEVICE, "trust: stale answer");
    collar_ptrcache_forget(c, (const void *)0x100000, 1);
    UNIT_CHECK(kind_at(c, 0x100100) == COLLAR_MEM_HOST, "trust: forgotten");
    collar_ptrcache_destroy(c);
}

static void test_capacity(void)
{
    reset();
    collar_ptrcache_t *c;
    UNIT_CHECK(collar_ptrcache_create(&driver, COLLAR_PTR_CACHE_ON, 3, &c) == COLLAR_OK,
               "create");
    for (int i = 0; i < NALLOC; i++) {
        fake_map(i, 0x1000000 - (uintptr_t)i * 0x10000, 0x8000, COLLAR_MEM_DEVICE);
    }
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < NALLOC; i++) {
            UNIT_CHECK(kind_at(c, 0x1000000 - (uintptr_t)i * 0x10000 + 8)
                       == COLLAR_MEM_DEVICE, "alloc %d", i);
        }
    }
    collar_ptrcache_stats_t st;
    collar_ptrcache_stats(c, &st);
    UNIT_CHECK(st.entries == 3, "capacity kept: %llu", (unsigned long long)st.entries);
    /* The last three stay: one more round over them hits. */
    const uint64_t before = st.hits;
    for (int i = NALLOC - 3; i < NALLOC; i++) {
        kind_at(c, 0x1000000 - (uintptr_t)i * 0x10000);
    }
    collar_ptrcache_stats(c, &st);
    UNIT_CHECK(st.hits == before + 3, "newest entries kept");
    collar_ptrcache_destroy(c);
}

/* Several threads look up while one frees and remaps: every answer is one
 * the driver gave at some moment (host while unmapped, else the range's
 * kind and bounds), a host address is never anything but host, and
 * nothing crashes (run it under --enable-tsan too).  The range alternates
 * between device and managed memory. */
typedef struct {
    collar_ptrcache_t *c;
    _Atomic int       *stop;
    long               bad;
} worker_t;

static void *lookup_worker(void *arg)
{
    worker_t *w = arg;
    while (!atomic_load(w->stop)) {
        collar_ptr_info_t info;
        collar_ptrcache_lookup(w->c, (const void *)0x300040, &info);
        if (info.kind != COLLAR_MEM_HOST
            && (info.base != 0x300000 || info.size != 0x1000)) {
            w->bad++;
        }
        collar_ptrcache_lookup(w->c, (const void *)0x10, &info);
        if (info.kind != COLLAR_MEM_HOST) {
            w->bad++;
        }
    }
    return NULL;
}

static void test_threads(void)
{
    reset();
    collar_ptrcache_t *c;
    UNIT_CHECK(collar_ptrcache_create(&driver, COLLAR_PTR_CACHE_ON, 8, &c) == COLLAR_OK,
               "create");
    _Atomic int stop = 0;
    worker_t w[3];
    pthread_t t[3];
    fake_map(0, 0x300000, 0x1000, COLLAR_MEM_DEVICE);
    for (int i = 0; i < 3; i++) {
        w[i] = (worker_t){ c, &stop, 0 };
        pthread_create(&t[i], NULL, lookup_worker, &w[i]);
    }
    for (int i = 0; i < 20000; i++) {
        fake_unmap(0);
        fake_map(0, 0x300000, 0x1000, i % 2 ? COLLAR_MEM_MANAGED : COLLAR_MEM_DEVICE);
    }
    atomic_store(&stop, 1);
    long bad = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        bad += w[i].bad;
    }
    UNIT_CHECK(bad == 0, "%ld impossible answers", bad);
    collar_ptrcache_destroy(c);
}

/* Host answers: cached for mappings the driver can never put device memory
 * in, asked every time elsewhere; the mapping is learnt once. */
static _Atomic long nranges;

static int fake_host_range(void *ctx, const void *ptr, uintptr_t *lo, uintptr_t *hi)
{
    (void)ctx;
    const uintptr_t p = (uintptr_t)ptr;
    atomic_fetch_add(&nranges, 1);
    if (p >= 0x1000 && p < 0x9000) {        /* "[heap]" */
        *lo = 0x1000;
        *hi = 0x9000;
        return 1;
    }
    if (p >= 0x20000 && p < 0x30000) {      /* anonymous */
        *lo = 0x20000;
        *hi = 0x30000;
        return 0;
    }
    if (p >= 0x40000 && p < 0x48000) {      /* "[heap2]" (test_probe_threads) */
        *lo = 0x40000;
        *hi = 0x48000;
        return 1;
    }
    return -1;
}

static void test_host_ranges(int mode)
{
    reset();
    atomic_store(&nranges, 0);
    const collar_ptr_driver_t drv = { fake_query, fake_buffer_id, NULL,
                                      fake_host_range };
    collar_ptrcache_t *c;
    UNIT_CHECK(collar_ptrcache_create(&drv, mode, 16, &c) == COLLAR_OK, "create");
    for (int i = 0; i < 10; i++) {
        UNIT_CHECK(kind_at(c, 0x2000 + 8 * (uintptr_t)i) == COLLAR_MEM_HOST, "heap");
    }
    collar_ptrcache_stats_t st;
    collar_ptrcache_stats(c, &st);
    if (mode == COLLAR_PTR_CACHE_OFF) {
        UNIT_CHECK(atomic_load(&nqueries) == 10 && atomic_load(&nranges) == 0,
                   "off: %ld queries, %ld range reads", atomic_load(&nqueries),
                   atomic_load(&nranges));
        collar_ptrcache_destroy(c);
        return;
    }
    UNIT_CHECK(atomic_load(&nqueries) == 1 && atomic_load(&nids) == 0,
               "mode %d: 10 heap lookups made %ld driver queries and %ld id "
               "checks, expected 1 and 0", mode, atomic_load(&nqueries),
               atomic_load(&nids));
    UNIT_CHECK(st.host_hits == 9 && st.host_ranges == 1, "host hits %llu, "
               "ranges %llu", (unsigned long long)st.host_hits,
               (unsigned long long)st.host_ranges);
    UNIT_CHECK(atomic_load(&nranges) == 1, "mapping read %ld times",
               atomic_load(&nranges));
    /* Anonymous memory: the driver every time, the mapping read once. */
    reset();
    for (int i = 0; i < 5; i++) {
        UNIT_CHECK(kind_at(c, 0x20010) == COLLAR_MEM_HOST, "anonymous");
    }
    UNIT_CHECK(atomic_load(&nqueries) == 5, "anonymous: %ld queries, expected 5",
               atomic_load(&nqueries));
    UNIT_CHECK(atomic_load(&nranges) == 2, "mapping reads %ld, expected 2",
               atomic_load(&nranges));
    /* ... where device memory can then appear, and is seen at once. */
    fake_map(0, 0x20000, 0x1000, COLLAR_MEM_DEVICE);
    UNIT_CHECK(kind_at(c, 0x20010) == COLLAR_MEM_DEVICE,
               "device memory where host memory was");
    /* Unknown mappings are neither cached nor remembered. */
    reset();
    UNIT_CHECK(kind_at(c, 0x70000) == COLLAR_MEM_HOST, "unknown");
    UNIT_CHECK(kind_at(c, 0x70000) == COLLAR_MEM_HOST, "unknown");
    UNIT_CHECK(atomic_load(&nqueries) == 2, "unknown: %ld queries",
               atomic_load(&nqueries));
    collar_ptrcache_destroy(c);
}

/* collar_ptrcache_kind: the answers of collar_ptrcache_lookup.  A host
 * range answers with no driver call and no lock (the host ranges are also
 * what collar_mem_known_host probes); an anonymous mapping known to hold no
 * device entry goes to the driver at once (one query, no id check, the
 * mapping not read again); device memory that appears in one is entered and
 * marks the mapping, whose lookups then search the entries (a hit: one id
 * check, no full query). */
static collar_mem_kind_t kind_of(collar_ptrcache_t *c, uintptr_t p, int *device)
{
    collar_mem_kind_t kind = COLLAR_MEM_DEVICE;
    collar_status_t st = collar_ptrcache_kind(c, (const void *)p, &kind, device);
    UNIT_CHECK(st == COLLAR_OK, "kind %#lx: %d", (unsigned long)p, st);
    return kind;
}

static void test_kind(int mode)
{
    reset();
    atomic_store(&nranges, 0);
    const collar_ptr_driver_t drv = { fake_query, fake_buffer_id, NULL,
                                      fake_host_range };
    collar_ptrcache_t *c;
    UNIT_CHECK(collar_ptrcache_create(&drv, mode, 16, &c) == COLLAR_OK, "create");
    int device = 5;
    UNIT_CHECK(kind_of(c, 0x2000, &device) == COLLAR_MEM_HOST && device == -1,
               "heap: host, device %d", device);
    atomic_store(&nqueries, 0);
    collar_ranges_t *host = collar_ptrcache_host_ranges(c);
    for (int i = 0; i < 10; i++) {
        UNIT_CHECK(kind_of(c, 0x1000 + 0x700 * (uintptr_t)i, &device) == COLLAR_MEM_HOST,
                   "heap");
        UNIT_CHECK(collar_ranges_probe(host, 0x1000 + 0x700 * (uintptr_t)i, NULL)
                   == (mode != COLLAR_PTR_CACHE_OFF), "probe %d", i);
    }
    UNIT_CHECK(collar_ranges_probe_pair(host, 0x1000, 0x8fff)
               == (mode != COLLAR_PTR_CACHE_OFF), "probe both ends");
    UNIT_CHECK(!collar_ranges_probe_pair(host, 0x1000, 0x9000)
               && !collar_ranges_probe_pair(host, 0xfff, 0x2000)
               && !collar_ranges_probe(host, 0x9000, NULL), "probe outside");
    collar_ptrcache_stats_t st;
    collar_ptrcache_stats(c, &st);
    if (mode == COLLAR_PTR_CACHE_OFF) {
        UNIT_CHECK(atomic_load(&nqueries) == 10 && st.host_ranges == 0,
                   "off: %ld queries, %llu host ranges", atomic_load(&nqueries),
                   (unsigned long long)st.host_ranges);
        collar_ptrcache_destroy(c);
        return;
    }
    UNIT_CHECK(atomic_load(&nqueries) == 0 && atomic_load(&nids) == 0,
               "10 heap kinds: %ld queries, %ld id checks", atomic_load(&nqueries),
               atomic_load(&nids));
    UNIT_CHECK(st.host_hits == 10, "host hits %llu, expected 10",
               (unsigned long long)st.host_hits);

    /* Anonymous: the driver once a call, the mapping read once. */
    atomic_store(&nranges, 0);
    for (int i = 0; i < 5; i++) {
        UNIT_CHECK(kind_of(c, 0x20010, &device) == COLLAR_MEM_HOST, "anonymous");
    }
    UNIT_CHECK(atomic_load(&nqueries) == 5 && atomic_load(&nids) == 0
               && atomic_load(&nranges) == 1, "anonymous: %ld queries, %ld id "
               "checks, %ld mapping reads; expected 5, 0, 1",
               atomic_load(&nqueries), atomic_load(&nids), atomic_load(&nranges));
    UNIT_CHECK(!collar_ranges_probe(host, 0x20010, NULL), "anonymous is no host range");

    /* Device memory appears in the anonymous mapping: seen at once; the
     * mapping is marked, its next lookups hit the entry. */
    fake_map(0, 0x24000, 0x1000, COLLAR_MEM_DEVICE);
    UNIT_CHECK(kind_of(c, 0x24010, &device) == COLLAR_MEM_DEVICE && device == 0,
               "device memory in an anonymous mapping");
    atomic_store(&nqueries, 0);
    atomic_store(&nranges, 0);
    for (int i = 0; i < 3; i++) {
        UNIT_CHECK(kind_of(c, 0x24020, &device) == COLLAR_MEM_DEVICE, "device again");
    }
    UNIT_CHECK(atomic_load(&nqueries) == 0, "device hits made %ld full queries",
               atomic_load(&nqueries));
    /* Host memory beside it in the same mapping: still host, asked. */
    UNIT_CHECK(kind_of(c, 0x20010, &device) == COLLAR_MEM_HOST, "host beside it");
    UNIT_CHECK(atomic_load(&nranges) == 0, "mapping read %ld times again",
               atomic_load(&nranges));
    /* Freed and the range reused as host memory: host, not the old kind. */
    fake_unmap(0);
    UNIT_CHECK(kind_of(c, 0x24020, &device) == COLLAR_MEM_HOST
               || mode == COLLAR_PTR_CACHE_TRUST, "freed device memory");
    collar_ptrcache_destroy(c);
}

/* Lock-free probes of the host ranges while they change (ranges added and
 * dropped as device memory appears over one of them): a pointer in a range
 * that is always there is always found, one in a range that never is never
 * is (run it under --enable-tsan too). */
typedef struct {
    collar_ranges_t *host;
    _Atomic int     *stop;
    long             missed, wrong, probes;
} prober_t;

static void *probe_worker(void *arg)
{
    prober_t *w = arg;
    while (!atomic_load(w->stop)) {
        const int in = collar_ranges_probe_pair(w->host, 0x1010, 0x8ff0);
        const int out = collar_ranges_probe(w->host, 0x9000, NULL);
        /* A probe that saw the set changing says no: counted apart, it
         * must stay rare. */
        w->missed += !in;
        w->wrong += out;
        w->probes++;
    }
    return NULL;
}

static void test_probe_threads(void)
{
    reset();
    const collar_ptr_driver_t drv = { fake_query, fake_buffer_id, NULL,
                                      fake_host_range };
    collar_ptrcache_t *c;
    UNIT_CHECK(collar_ptrcache_create(&drv, COLLAR_PTR_CACHE_ON, 64, &c) == COLLAR_OK,
               "create");
    int device;
    kind_of(c, 0x2000, &device);   /* the "[heap]" [0x1000, 0x9000) */
    _Atomic int stop = 0;
    prober_t w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (prober_t){ collar_ptrcache_host_ranges(c), &stop, 0, 0, 0 };
        pthread_create(&t[i], NULL, probe_worker, &w[i]);
    }
    /* Learn and drop another range, over and over: device memory appears
     * where "[heap2]" was (fake_host_range answers [0x40000, 0x48000)). */
    for (int i = 0; i < 2000; i++) {
        kind_of(c, 0x40010, &device);
        fake_map(1, 0x40000, 0x1000, COLLAR_MEM_DEVICE);
        kind_of(c, 0x40010, &device);
        fake_unmap(1);
        collar_ptrcache_forget(c, (const void *)0x40000, 0x1000);
    }
    atomic_store(&stop, 1);
    long missed = 0, wrong = 0, probes = 0;
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        missed += w[i].missed;
        wrong += w[i].wrong;
        probes += w[i].probes;
    }
    UNIT_CHECK(wrong == 0, "%ld of %ld probes found an address in no range",
               wrong, probes);
    UNIT_CHECK(probes == 0 || missed * 2 < probes, "%ld of %ld probes did not "
               "find an address that is always in a range", missed, probes);
    collar_ptrcache_destroy(c);
}

/* /proc/self/maps: the heap and the main thread's stack are cacheable; an
 * anonymous mapping (a large malloc) is not. */
static void test_maps(void)
{
    uintptr_t lo, hi;
    int on_stack = 0;
    UNIT_CHECK(collar_ptr_host_range_maps(NULL, &on_stack, &lo, &hi) == 1
               && (uintptr_t)&on_stack >= lo && (uintptr_t)&on_stack < hi,
               "the stack");
    void *small = malloc(64);
    const int heap = collar_ptr_host_range_maps(NULL, small, &lo, &hi);
    /* malloc may serve small blocks from an arena mapping of its own
     * (threads): [heap] for the main thread's first blocks. */
    UNIT_CHECK(heap == 1 || heap == 0, "a small malloc: %d", heap);
    free(small);
    void *big = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (big != MAP_FAILED) {
        UNIT_CHECK(collar_ptr_host_range_maps(NULL, big, &lo, &hi) == 0,
                   "an anonymous mapping is not cacheable");
        munmap(big, 1 << 20);
    }
    UNIT_CHECK(collar_ptr_host_range_maps(NULL, (void *)(uintptr_t)16, &lo, &hi) == -1,
               "an unmapped address");
}

int main(void)
{
    test_host_ranges(COLLAR_PTR_CACHE_OFF);
    test_host_ranges(COLLAR_PTR_CACHE_ON);
    test_host_ranges(COLLAR_PTR_CACHE_TRUST);
    test_maps();
    test_hits_and_host(COLLAR_PTR_CACHE_OFF);
    test_hits_and_host(COLLAR_PTR_CACHE_ON);
    test_hits_and_host(COLLAR_PTR_CACHE_TRUST);
    test_reuse();
    test_capacity();
    test_threads();
    test_kind(COLLAR_PTR_CACHE_OFF);
    test_kind(COLLAR_PTR_CACHE_ON);
    test_kind(COLLAR_PTR_CACHE_TRUST);
    test_probe_threads();
    return unit_finish("test_ptrcache");
}
