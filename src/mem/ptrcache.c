/*
 * collar - the pointer cache (see ptrcache.h).
 *
 * Entries sit in an array sorted by base address, without overlaps; a
 * lookup is a binary search under a read lock.  Insertion removes what the
 * new range overlaps (the driver's answer is the truth now) and, when the
 * array is full, the oldest insertion.
 *
 * In front of that, each thread remembers the last two entries it hit
 * (a call's send and receive buffers), valid while no cache has changed
 * since (one global generation counter, bumped by every insertion and
 * removal): a program that passes the same buffers call after call (a
 * fusion buffer, or host buffers in one stack or heap) pays no lock and
 * no atomic read-modify-write.
 */
#include "config.h"
#include "ptrcache.h"
#include "ranges.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Host mappings remembered (ranges.h): cacheable ones (answered host) and
 * ones to ask the driver about; round-robin replacement. */

typedef struct {
    collar_ptr_info_t info;
    uint64_t          inserted;   /* insertion order, for eviction */
} entry_t;

/* Bumped by every change of any cache. */
static _Atomic uint64_t cache_generation = 1;

/* The last entries this thread hit; `next` is the one to replace. */
enum { LAST_HITS = 2 };
typedef struct {
    struct {
        const collar_ptrcache_t *cache;
        uint64_t                 generation;
        collar_ptr_info_t        info;
    } e[LAST_HITS];
    unsigned next;
} last_hits_t;
static _Thread_local last_hits_t last_hit;

struct collar_ptrcache {
    collar_ptr_driver_t driver;
    int                 mode;
    size_t              cap;
    size_t              n;
    entry_t            *e;
    uint64_t            clock;
    pthread_rwlock_t    lock;
    _Atomic uint64_t    hits, misses, stale;
    collar_ranges_t     host;   /* answered host (hits: the host hits) */
    collar_ranges_t     ask;    /* anonymous: ask the driver */
};

collar_status_t collar_ptrcache_create(const collar_ptr_driver_t *driver,
                                       int mode, size_t capacity,
                                       collar_ptrcache_t **cache)
{
    /* Aligned for its cache-line-aligned members. */
    const size_t align = _Alignof(collar_ptrcache_t);
    collar_ptrcache_t *c = aligned_alloc(align, (sizeof(*c) + align - 1) / align * align);
    if (c == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    memset(c, 0, sizeof(*c));
    c->driver = *driver;
    c->mode = mode;
    c->cap = capacity > 0 ? capacity : 1;
    c->e = calloc(c->cap, sizeof(*c->e));
    if (c->e == NULL) {
        free(c);
        return COLLAR_ERR_NO_MEMORY;
    }
    pthread_rwlock_init(&c->lock, NULL);
    *cache = c;
    return COLLAR_OK;
}

void collar_ptrcache_destroy(collar_ptrcache_t *c)
{
    if (c == NULL) {
        return;
    }
    atomic_fetch_add(&cache_generation, 1);
    pthread_rwlock_destroy(&c->lock);
    free(c->e);
    free(c);
}

/* Index of the last entry with base <= p, or -1. */
static long find(const collar_ptrcache_t *c, uintptr_t p)
{
    long lo = 0, hi = (long)c->n - 1, at = -1;
    while (lo <= hi) {
        const long mid = lo + (hi - lo) / 2;
        if (c->e[mid].info.base <= p) {
            at = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return at;
}

static int covers(const entry_t *e, uintptr_t p)
{
    return p >= e->info.base && p - e->info.base < e->info.size;
}

static void remove_at(collar_ptrcache_t *c, size_t i)
{
    atomic_fetch_add(&cache_generation, 1);
    memmove(&c->e[i], &c->e[i + 1], (c->n - i - 1) * sizeof(*c->e));
    c->n--;
}

/* Remove entries overlapping [lo, hi).  Write lock held. */
static void remove_range(collar_ptrcache_t *c, uintptr_t lo, uintptr_t hi)
{
    size_t i = 0;
    while (i < c->n) {
        const entry_t *e = &c->e[i];
        if (e->info.base < hi && lo < e->info.base + e->info.size) {
            remove_at(c, i);
        } else {
            i++;
        }
    }
}

static inline uintptr_t range_ld(const _Atomic uintptr_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

/* A store into a range set (ranges.h: release, for its lock-free readers). */
static void range_st(_Atomic uintptr_t *v, uintptr_t x)
{
    atomic_store_explicit(v, x, memory_order_release);
}

/* Around a change of a set: write lock held. */
static void ranges_change_begin(collar_ranges_t *r)
{
    atomic_store_explicit(&r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static void ranges_change_end(collar_ranges_t *r)
{
    atomic_store_explicit(&r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
                          memory_order_release);
    atomic_fetch_add(&cache_generation, 1);
}

/* Add [lo, hi) to the set (replacing one when it is full).  Write lock
 * held. */
static void ranges_add(collar_ranges_t *r, uintptr_t lo, uintptr_t hi)
{
    ranges_change_begin(r);
    const int n = atomic_load_explicit(&r->n, memory_order_relaxed);
    int at = n;
    if (n < COLLAR_RANGES_MAX) {
        atomic_store_explicit(&r->n, n + 1, memory_order_release);
    } else {
        at = r->next;
        r->next = (r->next + 1) % COLLAR_RANGES_MAX;
    }
    range_st(&r->r[at].lo, lo);
    range_st(&r->r[at].hi, hi);
    atomic_store_explicit(&r->mixed[at], 0, memory_order_release);
    ranges_change_end(r);
}

/* Mark the ranges overlapping [lo, hi) mixed.  Write lock held. */
static void ranges_mark(collar_ranges_t *r, uintptr_t lo, uintptr_t hi)
{
    const int n = atomic_load_explicit(&r->n, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        if (range_ld(&r->r[i].lo) < hi && lo < range_ld(&r->r[i].hi)
            && !atomic_load_explicit(&r->mixed[i], memory_order_relaxed)) {
            ranges_change_begin(r);
            atomic_store_explicit(&r->mixed[i], 1, memory_order_release);
            ranges_change_end(r);
        }
    }
}

/* Drop the ranges overlapping [lo, hi): the driver says device memory is
 * there now (not expected: host ranges hold no device memory).  Write
 * lock held. */
static void ranges_remove(collar_ranges_t *r, uintptr_t lo, uintptr_t hi)
{
    int n = atomic_load_explicit(&r->n, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        if (range_ld(&r->r[i].lo) < hi && lo < range_ld(&r->r[i].hi)) {
            ranges_change_begin(r);
            n--;
            range_st(&r->r[i].lo, range_ld(&r->r[n].lo));
            range_st(&r->r[i].hi, range_ld(&r->r[n].hi));
            atomic_store_explicit(&r->mixed[i],
                                  atomic_load_explicit(&r->mixed[n], memory_order_relaxed),
                                  memory_order_release);
            atomic_store_explicit(&r->n, n, memory_order_release);
            r->next = 0;
            ranges_change_end(r);
            i--;
        }
    }
}

static void insert(collar_ptrcache_t *c, const collar_ptr_info_t *info)
{
    const uintptr_t lo = info->base, hi = info->base + info->size;
    pthread_rwlock_wrlock(&c->lock);
    ranges_remove(&c->host, lo, hi);
    ranges_mark(&c->ask, lo, hi);
    remove_range(c, lo, hi);
    if (c->n == c->cap) {
        size_t oldest = 0;
        for (size_t i = 1; i < c->n; i++) {
            if (c->e[i].inserted < c->e[oldest].inserted) {
                oldest = i;
            }
        }
        remove_at(c, oldest);
    }
    const size_t at = (size_t)(find(c, lo) + 1);
    memmove(&c->e[at + 1], &c->e[at], (c->n - at) * sizeof(*c->e));
    c->e[at].info = *info;
    c->e[at].inserted = ++c->clock;
    c->n++;
    atomic_fetch_add(&cache_generation, 1);
    pthread_rwlock_unlock(&c->lock);
}

void collar_ptrcache_forget(collar_ptrcache_t *c, const void *ptr, size_t len)
{
    const uintptr_t lo = (uintptr_t)ptr;
    pthread_rwlock_wrlock(&c->lock);
    remove_range(c, lo, lo + (len > 0 ? len : 1));
    pthread_rwlock_unlock(&c->lock);
}

/* A host answer at p: learn the mapping around it, once. */
static void learn_host(collar_ptrcache_t *c, uintptr_t p)
{
    pthread_rwlock_rdlock(&c->lock);
    const int known = collar_ranges_find(&c->host, p) >= 0
                      || collar_ranges_find(&c->ask, p) >= 0;
    pthread_rwlock_unlock(&c->lock);
    if (known) {
        return;
    }
    uintptr_t lo = 0, hi = 0;
    const int safe = c->driver.host_range(c->driver.ctx, (const void *)p, &lo, &hi);
    if (safe < 0 || !(p >= lo && p < hi)) {
        return;
    }
    pthread_rwlock_wrlock(&c->lock);
    collar_ranges_t *r = safe ? &c->host : &c->ask;
    if (collar_ranges_find(r, p) < 0) {
        ranges_add(r, lo, hi);
    }
    pthread_rwlock_unlock(&c->lock);
}

int collar_ptr_cpu_readable(const void *ptr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        return -1;
    }
    const uintptr_t p = (uintptr_t)ptr;
    char line[512];
    int ret = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long a, b;
        char perms[8] = "";
        if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3 && p >= a && p < b) {
            ret = perms[0] == 'r';
            break;
        }
    }
    fclose(f);
    return ret;
}

int collar_ptr_host_range_maps(void *ctx, const void *ptr, uintptr_t *lo,
                               uintptr_t *hi)
{
    (void)ctx;
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        return -1;
    }
    const uintptr_t p = (uintptr_t)ptr;
    char line[512];
    int ret = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long a, b, inode;
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %lu %n", &a, &b, &inode, &path_at) < 3) {
            continue;
        }
        if (p < a || p >= b) {
            continue;
        }
        char *path = line + path_at;
        path[strcspn(path, "\n")] = '\0';
        *lo = a;
        *hi = b;
        /* [heap] and [stack]: the program's own; regular files: not the
         * driver's (its device files are under /dev; memfd and anonymous
         * mappings do not start with '/'). */
        ret = strcmp(path, "[heap]") == 0 || strcmp(path, "[stack]") == 0
              || (path[0] == '/' && inode != 0 && strncmp(path, "/dev/", 5) != 0);
        break;
    }
    fclose(f);
    return ret;
}

/* What the driver said about p: a device or managed allocation becomes an
 * entry; for a host answer, the mapping around p is learnt (once). */
static void cache_answer(collar_ptrcache_t *c, uintptr_t p,
                         const collar_ptr_info_t *info)
{
    if (info->kind != COLLAR_MEM_HOST && info->size > 0 && p >= info->base
        && p - info->base < info->size
        && (c->mode == COLLAR_PTR_CACHE_TRUST || info->buffer_id != 0)) {
        insert(c, info);
    } else if (info->kind == COLLAR_MEM_HOST && c->driver.host_range != NULL
               && p != 0) {
        learn_host(c, p);
    }
}


/* collar_ptrcache_kind past the host ranges (apart, so that the probe
 * before it needs no stack frame). */
__attribute__((noinline))
static collar_status_t kind_looked_up(collar_ptrcache_t *c, const void *ptr,
                                      collar_mem_kind_t *kind, int *device)
{
    collar_ptr_info_t info;
    int mixed = 1;
    if (c->mode != COLLAR_PTR_CACHE_OFF
        && collar_ranges_probe(&c->ask, (uintptr_t)ptr, &mixed) && !mixed) {
        /* An anonymous mapping seen before, with no device entry in it:
         * the driver, at once (no entry to search, the mapping known).
         * Device memory found there (mapped since) is entered as always,
         * and marks the range mixed: its lookups search the entries
         * first from then on. */
        atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
        COLLAR_CHECK(c->driver.query(c->driver.ctx, ptr, &info));
        if (info.kind != COLLAR_MEM_HOST) {
            cache_answer(c, (uintptr_t)ptr, &info);
        }
    } else {
        COLLAR_CHECK(collar_ptrcache_lookup(c, ptr, &info));
    }
    *kind = info.kind;
    *device = info.device;
    return COLLAR_OK;
}

collar_status_t collar_ptrcache_kind(collar_ptrcache_t *c, const void *ptr,
                                     collar_mem_kind_t *kind, int *device)
{
    /* No mode test: with the cache off no range is ever learnt. */
    if (collar_ranges_probe(&c->host, (uintptr_t)ptr, NULL)) {
        collar_ranges_count_hits(&c->host, 1);
        *kind = COLLAR_MEM_HOST;
        *device = -1;
        return COLLAR_OK;
    }
    return kind_looked_up(c, ptr, kind, device);
}

collar_status_t collar_ptrcache_lookup(collar_ptrcache_t *c, const void *ptr,
                                       collar_ptr_info_t *info)
{
    const uintptr_t p = (uintptr_t)ptr;
    if (c->mode != COLLAR_PTR_CACHE_OFF) {
        int hit = 0;
        const uint64_t gen = atomic_load_explicit(&cache_generation,
                                                  memory_order_acquire);
        last_hits_t *lh = &last_hit;
        for (int l = 0; l < LAST_HITS && !hit; l++) {
            const collar_ptr_info_t *li = &lh->e[l].info;
            if (lh->e[l].cache == c && lh->e[l].generation == gen
                && p - li->base < li->size) {
                *info = *li;
                hit = 1;
            }
        }
        if (!hit) {
            pthread_rwlock_rdlock(&c->lock);
            const long i = find(c, p);
            if (i >= 0 && covers(&c->e[i], p)) {
                *info = c->e[i].info;
                hit = 1;
            } else {
                const int h = collar_ranges_find(&c->host, p);
                if (h >= 0) {
                    memset(info, 0, sizeof(*info));
                    info->kind = COLLAR_MEM_HOST;
                    info->device = -1;
                    info->base = range_ld(&c->host.r[h].lo);
                    info->size = range_ld(&c->host.r[h].hi) - info->base;
                    hit = 1;
                }
            }
            if (hit) {
                const unsigned l = lh->next;
                lh->next = (l + 1) % LAST_HITS;
                lh->e[l].cache = c;
                lh->e[l].generation = atomic_load(&cache_generation);
                lh->e[l].info = *info;
            }
            pthread_rwlock_unlock(&c->lock);
        }
        if (hit && info->kind == COLLAR_MEM_HOST) {
            /* A range no device memory can appear in: no check. */
            collar_ranges_count_hits(&c->host, 1);
            return COLLAR_OK;
        }
        if (hit && (c->mode == COLLAR_PTR_CACHE_TRUST
                    || c->driver.buffer_id(c->driver.ctx, ptr) == info->buffer_id)) {
            atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
            return COLLAR_OK;
        }
        if (hit) {
            /* Freed and reused behind the cache's back. */
            atomic_fetch_add_explicit(&c->stale, 1, memory_order_relaxed);
            collar_ptrcache_forget(c, (const void *)info->base, info->size);
        }
    }
    atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
    COLLAR_CHECK(c->driver.query(c->driver.ctx, ptr, info));
    if (c->mode != COLLAR_PTR_CACHE_OFF) {
        cache_answer(c, p, info);
    }
    return COLLAR_OK;
}

collar_ranges_t *collar_ptrcache_host_ranges(collar_ptrcache_t *c)
{
    return &c->host;
}

void collar_ptrcache_stats(collar_ptrcache_t *c, collar_ptrcache_stats_t *st)
{
    st->hits = atomic_load(&c->hits) + atomic_load(&c->host.hits);
    st->misses = atomic_load(&c->misses);
    st->stale = atomic_load(&c->stale);
    st->host_hits = atomic_load(&c->host.hits);
    pthread_rwlock_rdlock(&c->lock);
    st->entries = c->n;
    st->host_ranges = (uint64_t)atomic_load(&c->host.n);
    pthread_rwlock_unlock(&c->lock);
}
