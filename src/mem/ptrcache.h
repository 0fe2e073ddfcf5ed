/*
 * collar - the pointer cache: device allocations seen before, in front of
 * the driver's pointer query.
 *
 * Each entry is one device (or managed) allocation [base, base + size) with
 * its kind, device and buffer id, learnt from one full driver query (a
 * miss).
 *
 * Host answers are cached only where they cannot go stale: the driver gives
 * no range for pageable memory, and an address freed by the application
 * can be mapped again by the driver as device or managed memory.  The
 * driver's optional host_range() names the mapping around a host pointer
 * when no device memory can ever appear in it (collar_ptr_host_range_maps:
 * the [heap] and [stack] of /proc/self/maps and mappings of regular files,
 * which the CUDA driver never uses; not anonymous mappings, where large
 * malloc()s and the driver's own allocations live alike).  A pointer in
 * such a range is answered "host" with no driver call and no buffer-id
 * check; a pointer in an anonymous mapping is asked every time, and its
 * mapping remembered as one to ask about, so that /proc/self/maps is read
 * once per mapping, not once per call.  collar does not hook the application's frees, so an address
 * range can be freed and handed out again (as another kind) behind the
 * cache's back; in mode COLLAR_PTR_CACHE_ON each hit therefore asks the
 * driver for the buffer id at the pointer (one attribute, much cheaper than
 * the full query) and a different id drops the entry and counts as a miss.
 * COLLAR_PTR_CACHE_TRUST skips that check.
 *
 * The driver is a pair of functions, so that the cache is unit-tested and
 * measured without a GPU (tests/unit/test_ptrcache.c,
 * tests/bench/bench_ptrcache.c).
 */
#ifndef COLLAR_PTRCACHE_H
#define COLLAR_PTRCACHE_H

#include "../core/core.h"
#include "ranges.h"

typedef struct {
    collar_mem_kind_t  kind;
    uintptr_t          base;       /* allocation start; 0: unknown */
    size_t             size;       /* allocation size; 0: unknown */
    unsigned long long buffer_id;  /* 0: unknown or host */
    int                device;     /* ordinal; -1 for host memory */
} collar_ptr_info_t;

typedef struct {
    /* Everything about the memory at ptr (a miss). */
    collar_status_t (*query)(void *ctx, const void *ptr, collar_ptr_info_t *info);
    /* The buffer id of the allocation at ptr now; 0 when there is none. */
    unsigned long long (*buffer_id)(void *ctx, const void *ptr);
    void *ctx;
    /* Optional.  The mapping [*lo, *hi) around host pointer ptr; returns 1
     * when no device memory can ever be mapped in it (its host answer may
     * be cached), 0 when it can, -1 when unknown. */
    int (*host_range)(void *ctx, const void *ptr, uintptr_t *lo, uintptr_t *hi);
} collar_ptr_driver_t;

/* host_range from /proc/self/maps (see above). */
int collar_ptr_host_range_maps(void *ctx, const void *ptr, uintptr_t *lo,
                               uintptr_t *hi);
/* Whether the process's mapping around ptr can be read by the CPU
 * (/proc/self/maps: a mapping with read permission): 1; 0 for no mapping
 * or one without (device memory's addresses in the process are such
 * reservations); -1 when the maps cannot be read. */
int collar_ptr_cpu_readable(const void *ptr);

typedef struct collar_ptrcache collar_ptrcache_t;

typedef struct {
    uint64_t hits;
    uint64_t misses;
    uint64_t stale;     /* hits whose buffer id had changed */
    uint64_t entries;
    uint64_t host_hits; /* hits on a cached host range (also in hits;
                           may miss a few when threads look up at once) */
    uint64_t host_ranges;
} collar_ptrcache_stats_t;

/* mode: collar_ptr_cache_t; OFF makes every lookup a driver query.
 * capacity: entries kept (least recently inserted go first). */
collar_status_t collar_ptrcache_create(const collar_ptr_driver_t *driver,
                                       int mode, size_t capacity,
                                       collar_ptrcache_t **cache);
void collar_ptrcache_destroy(collar_ptrcache_t *cache);
/* What is at ptr.  Thread-safe. */
collar_status_t collar_ptrcache_lookup(collar_ptrcache_t *cache,
                                       const void *ptr, collar_ptr_info_t *info);
/* The kind and device (-1 for host memory) of what is at ptr: the same
 * answer as collar_ptrcache_lookup, quicker for a host pointer in a range
 * this thread hit last (no copy of the entry, no lock).  Thread-safe. */
collar_status_t collar_ptrcache_kind(collar_ptrcache_t *cache, const void *ptr,
                                     collar_mem_kind_t *kind, int *device);
/* The host ranges (ranges.h): a pointer in one is host memory, the answer
 * collar_ptrcache_kind gives, without a call (collar_mem_known_host).
 * Lives as long as the cache. */
collar_ranges_t *collar_ptrcache_host_ranges(collar_ptrcache_t *cache);
/* Forget every entry overlapping [ptr, ptr + len) (collar's own frees). */
void collar_ptrcache_forget(collar_ptrcache_t *cache, const void *ptr,
                            size_t len);
void collar_ptrcache_stats(collar_ptrcache_t *cache,
                           collar_ptrcache_stats_t *stats);

#endif /* COLLAR_PTRCACHE_H */
