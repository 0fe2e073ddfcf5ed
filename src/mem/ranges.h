/*
 * collar - a set of address ranges read without a lock.
 *
 * The pointer cache (ptrcache.c) keeps the mappings it has learnt in two
 * such sets: the host ranges (no device memory can appear in them, so a
 * pointer there is host memory) and the anonymous mappings it asks the
 * driver about.  Its writers change a set under the cache's write lock;
 * readers take the cache's lock, or none: every host-buffer call probes the
 * host ranges (collar_ranges_probe), as a sequence lock: writers make `seq`
 * odd while they change the set, and a reader that saw it odd or changed
 * does not trust what it read.  The order comes from the accesses
 * themselves, not from fences (which ThreadSanitizer does not follow):
 * readers load the ranges with acquire (what follows, the second look at
 * `seq`, cannot pass them), writers store them with release (the odd `seq`
 * before them cannot pass them).  On x86 both are plain moves.
 */
#ifndef COLLAR_RANGES_H
#define COLLAR_RANGES_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#define COLLAR_RANGES_MAX 32

typedef struct {
    _Atomic uintptr_t lo, hi;   /* [lo, hi) */
} collar_range_t;

/* What a host-buffer call reads (seq, n, the first three ranges) is one
 * cache line; what it writes (hits) another. */
typedef struct {
    alignas(64) _Atomic uint64_t seq;
    _Atomic int       n;
    int               next;   /* the one to replace when full (writers) */
    collar_range_t    r[COLLAR_RANGES_MAX];
    /* A device entry overlaps the range (anonymous mappings only): its
     * lookups search the cache's entries first. */
    _Atomic int       mixed[COLLAR_RANGES_MAX];
    /* Pointers found in the set by lookups that count them: exact in one
     * thread, may miss a few when threads race (a plain load and store,
     * not a locked read-modify-write on every call). */
    alignas(64) _Atomic uint64_t hits;
} collar_ranges_t;

/* The index of the range holding p, or -1.  Under the cache's lock, or
 * inside collar_ranges_probe. */
static inline int collar_ranges_find(const collar_ranges_t *s, uintptr_t p)
{
    const int n = atomic_load_explicit(&s->n, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        const uintptr_t lo = atomic_load_explicit(&s->r[i].lo, memory_order_acquire);
        const uintptr_t hi = atomic_load_explicit(&s->r[i].hi, memory_order_acquire);
        if (p - lo < hi - lo) {
            return i;
        }
    }
    return -1;
}

/* Without a lock: 1 when p is in a range of the set as it was at one
 * moment during the call (and then, where `mixed` is not NULL, whether
 * that range is marked mixed in *mixed); 0 when it is not, or the set was
 * changing. */
static inline int collar_ranges_probe(const collar_ranges_t *s, uintptr_t p,
                                      int *mixed)
{
    const uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (seq & 1) {
        return 0;
    }
    const int i = collar_ranges_find(s, p);
    if (i >= 0 && mixed != NULL) {
        *mixed = atomic_load_explicit(&s->mixed[i], memory_order_acquire);
    }
    return i >= 0 && atomic_load_explicit(&s->seq, memory_order_relaxed) == seq;
}

/* Without a lock: 1 when a and b are both in ranges of the set as it was
 * at one moment during the call (one pass for a call's two buffers); 0
 * when one is not, or the set was changing. */
static inline int collar_ranges_probe_pair(const collar_ranges_t *s,
                                           uintptr_t a, uintptr_t b)
{
    const uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (seq & 1) {
        return 0;
    }
    const int n = atomic_load_explicit(&s->n, memory_order_acquire);
    unsigned in = 0;   /* bit 0: a is in a range, bit 1: b */
    for (int i = 0; i < n && in != 3; i++) {
        const uintptr_t lo = atomic_load_explicit(&s->r[i].lo, memory_order_acquire);
        const uintptr_t size = atomic_load_explicit(&s->r[i].hi, memory_order_acquire) - lo;
        in |= (unsigned)(a - lo < size) | (unsigned)(b - lo < size) << 1;
    }
    return in == 3 && atomic_load_explicit(&s->seq, memory_order_relaxed) == seq;
}

static inline void collar_ranges_count_hits(collar_ranges_t *s, uint64_t hits)
{
    atomic_store_explicit(&s->hits,
                          atomic_load_explicit(&s->hits, memory_order_relaxed) + hits,
                          memory_order_relaxed);
}

#endif /* COLLAR_RANGES_H */
