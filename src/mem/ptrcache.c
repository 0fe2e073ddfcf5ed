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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Host mappings remembered: cacheable ones (answered host) and ones to ask
 * the driver about; round-robin replacement. */
#define HOST_RANGES 32

typedef struct {
    uintptr_t lo, hi;
} range_t;

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
    _Atomic uint64_t    hits, misses, stale, host_hits;
    range_t             host[HOST_RANGES];   /* answered host */
    range_t             ask[HOST_RANGES];    /* anonymous: ask the driver */
    int                 nhost, nask, next_host, next_ask;
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

static int in_ranges(const range_t *r, int n, uintptr_t p)
{
    for (int i = 0; i < n; i++) {
        if (p >= r[i].lo && p < r[i].hi) {
            return 1;
        }
    }
    return 0;
}

/* Drop host ranges overlapping [lo, hi): the driver says device memory
 * is there now (not expected: such ranges hold no device memory). */
static void remove_host(collar_ptrcache_t *c, uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < c->nhost; i++) {
        if (c->host[i].lo < hi && lo < c->host[i].hi) {
            c->host[i] = c->host[--c->nhost];
            c->next_host = 0;
            i--;
            atomic_fetch_add(&cache_generation, 1);
        }
    }
}

static void insert(collar_ptrcache_t *c, const collar_ptr_info_t *info)
{
    const uintptr_t lo = info->base, hi = info->base + info->size;
    pthread_rwlock_wrlock(&c->lock);
    remove_host(c, lo, hi);
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
    const int known = in_ranges(c->host, c->nhost, p) || in_ranges(c->ask, c->nask, p);
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
    range_t *r = safe ? c->host : c->ask;
    int *n = safe ? &c->nhost : &c->nask;
    int *next = safe ? &c->next_host : &c->next_ask;
    if (!in_ranges(r, *n, p)) {
        if (*n < HOST_RANGES) {
            r[(*n)++] = (range_t){ lo, hi };
        } else {
            r[*next] = (range_t){ lo, hi };
            *next = (*next + 1) % HOST_RANGES;
        }
        atomic_fetch_add(&cache_generation, 1);
    }
    pthread_rwlock_unlock(&c->lock);
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
            } else {
                for (int h = 0; h < c->nhost; h++) {
                    if (p >= c->host[h].lo && p < c->host[h].hi) {
                        memset(info, 0, sizeof(*info));
                        info->kind = COLLAR_MEM_HOST;
                        info->device = -1;
                        info->base = c->host[h].lo;
                        info->size = c->host[h].hi - c->host[h].lo;
                        hit = 1;
                        break;
                    }
                }
            }
            if (hit) {
                last_hit.cache = c;
                last_hit.generation = atomic_load(&cache_generation);
                last_hit.info = *info;
            }
            pthread_rwlock_unlock(&c->lock);
        }
        if (hit && info->kind == COLLAR_MEM_HOST) {
            /* A range no device memory can appear in: no check. */
            atomic_fetch_add_explicit(&c->host_hits, 1, memory_order_relaxed);
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
    if (c->mode != COLLAR_PTR_CACHE_OFF && info->kind != COLLAR_MEM_HOST
        && info->size > 0 && p >= info->base && p - info->base < info->size
        && (c->mode == COLLAR_PTR_CACHE_TRUST || info->buffer_id != 0)) {
        insert(c, info);
    } else if (c->mode != COLLAR_PTR_CACHE_OFF && info->kind == COLLAR_MEM_HOST
               && c->driver.host_range != NULL && p != 0) {
        learn_host(c, p);
    }
    return COLLAR_OK;
}

void collar_ptrcache_stats(collar_ptrcache_t *c, collar_ptrcache_stats_t *st)
{
    st->hits = atomic_load(&c->hits) + atomic_load(&c->host_hits);
    st->misses = atomic_load(&c->misses);
    st->stale = atomic_load(&c->stale);
    st->host_hits = atomic_load(&c->host_hits);
    pthread_rwlock_rdlock(&c->lock);
    st->entries = c->n;
    st->host_ranges = (uint64_t)c->nhost;
    pthread_rwlock_unlock(&c->lock);
}
