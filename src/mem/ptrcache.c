/*
 * collar - the pointer cache (see ptrcache.h).
 *
 * Entries sit in an array sorted by base address, without overlaps; a
 * lookup is a binary search under a read lock.  Insertion removes what the
 * new range overlaps (the driver's answer is the truth now) and, when the
 * array is full, the oldest insertion.
 *
 * In front of that, each thread remembers the last entry it hit, valid
 * while no cache has changed since (one global generation counter, bumped
 * by every insertion and removal): a program that passes the same buffers
 * call after call (a fusion buffer) pays no lock.
 */
#include "config.h"
#include "ptrcache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    collar_ptr_info_t info;
    uint64_t          inserted;   /* insertion order, for eviction */
} entry_t;

/* Bumped by every change of any cache. */
static _Atomic uint64_t cache_generation = 1;

static _Thread_local struct {
    const collar_ptrcache_t *cache;
    uint64_t                 generation;
    collar_ptr_info_t        info;
} last_hit;

struct collar_ptrcache {
    collar_ptr_driver_t driver;
    int                 mode;
    size_t              cap;
    size_t              n;
    entry_t            *e;
    uint64_t            clock;
    pthread_rwlock_t    lock;
    _Atomic uint64_t    hits, misses, stale;
};

collar_status_t collar_ptrcache_create(const collar_ptr_driver_t *driver,
                                       int mode, size_t capacity,
                                       collar_ptrcache_t **cache)
{
    collar_ptrcache_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
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

static void insert(collar_ptrcache_t *c, const collar_ptr_info_t *info)
{
    const uintptr_t lo = info->base, hi = info->base + info->size;
    pthread_rwlock_wrlock(&c->lock);
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

collar_status_t collar_ptrcache_lookup(collar_ptrcache_t *c, const void *ptr,
                                       collar_ptr_info_t *info)
{
    const uintptr_t p = (uintptr_t)ptr;
    if (c->mode != COLLAR_PTR_CACHE_OFF) {
        int hit = 0;
        const uint64_t gen = atomic_load_explicit(&cache_generation,
                                                  memory_order_acquire);
        if (last_hit.cache == c && last_hit.generation == gen
            && p >= last_hit.info.base && p - last_hit.info.base < last_hit.info.size) {
            *info = last_hit.info;
            hit = 1;
        } else {
            pthread_rwlock_rdlock(&c->lock);
            const long i = find(c, p);
            if (i >= 0 && covers(&c->e[i], p)) {
                *info = c->e[i].info;
                hit = 1;
                last_hit.cache = c;
                last_hit.generation = atomic_load(&cache_generation);
                last_hit.info = *info;
            }
            pthread_rwlock_unlock(&c->lock);
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
    if (c->mode != COLLAR_PTR_CACHE_OFF && info->kind != COLLAR_MEM_HOST
        && info->size > 0 && p >= info->base && p - info->base < info->size
        && (c->mode == COLLAR_PTR_CACHE_TRUST || info->buffer_id != 0)) {
        insert(c, info);
    }
    return COLLAR_OK;
}

void collar_ptrcache_stats(collar_ptrcache_t *c, collar_ptrcache_stats_t *st)
{
    st->hits = atomic_load(&c->hits);
    st->misses = atomic_load(&c->misses);
    st->stale = atomic_load(&c->stale);
    pthread_rwlock_rdlock(&c->lock);
    st->entries = c->n;
    pthread_rwlock_unlock(&c->lock);
}
