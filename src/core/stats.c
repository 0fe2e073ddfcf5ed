/*
 * collar - statistics: what ran, how often, how long and from where
 * (COLLAR_STATS; the report's layout is documented in docs/stats.md).
 *
 * This file records.  The hot path only counts: collar_stats_record() adds
 * one call to the calling thread's own table (allocated on the thread's
 * first call and kept on a global list; its lock is only ever contended by
 * the report), and collar_stats_callsite() stores raw return addresses from
 * libunwind's unw_backtrace().  Nothing is resolved or formatted here.
 *
 * The report (collar_stats_report, at MPI_Finalize) is made by the other
 * parts, as stats_int.h lists them: stats_gather.c reduces and gathers to
 * rank 0, stats_symbolize.c names the call sites, stats_report.c prints.
 */
#include "config.h"
#include "stats_int.h"

#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef COLLAR_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

typedef struct stats_thread {
    pthread_mutex_t      lock;    /* the owner, or the report */
    key_stats_t          keys[NKEYS];
    site_table_t         sites;
    uint64_t             nosite;  /* calls counted without a call site */
    uint64_t             lost;    /* calls not counted at all */
    struct stats_thread *next;
} stats_thread_t;

int collar_stats_on;

static int             stats_mode;
static struct timespec stats_t0;
/* Guards the list of thread tables, the fallbacks and the tuning source. */
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static stats_thread_t *stats_threads;
static unsigned        stats_gen;           /* bumped by each init */
static atomic_ullong   stats_lost;          /* calls lost before a table */
static fallback_t     *fallbacks;
static int             nfallbacks;
static uint64_t        fallbacks_lost;
static char           *tuning_source;
/* collar's own code, when it is a shared library (libcollar.so): frames in
 * it are never the application's call site. */
static uintptr_t       own_lo, own_hi;

static __thread stats_thread_t *my_table;
static __thread unsigned        my_gen;

static unsigned size_bucket(size_t bytes)
{
    if (bytes == 0) {
        return 0;
    }
    return 64u - (unsigned)__builtin_clzll((unsigned long long)bytes);
}

static uint64_t site_hash(void *const *pcs, int npcs)
{
    uint64_t h = (uint64_t)npcs;
    for (int i = 0; i < npcs; i++) {
        h = (h ^ (uint64_t)(uintptr_t)pcs[i]) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return h;
}

static site_t *site_slot(site_table_t *tab, void *const *pcs, int npcs)
{
    size_t mask = tab->cap - 1;
    for (size_t i = site_hash(pcs, npcs) & mask;; i = (i + 1) & mask) {
        site_t *s = &tab->slots[i];
        if (s->npcs == 0 || (s->npcs == npcs
                             && memcmp(s->pcs, pcs, (size_t)npcs * sizeof(void *)) == 0)) {
            return s;
        }
    }
}

collar_status_t collar_stats_site_add(site_table_t *tab, void *const *pcs, int npcs,
                                      uint64_t calls, uint64_t bytes, double time)
{
    if (npcs > COLLAR_STATS_MAX_DEPTH) {
        npcs = COLLAR_STATS_MAX_DEPTH;
    }
    if ((tab->used + 1) * 2 > tab->cap) {
        size_t cap = tab->cap ? tab->cap * 2 : 64;
        site_t *slots = calloc(cap, sizeof(*slots));
        if (slots == NULL) {
            return COLLAR_ERR_NO_MEMORY;
        }
        site_table_t grown = { slots, cap, tab->used };
        for (size_t i = 0; i < tab->cap; i++) {
            if (tab->slots[i].npcs != 0) {
                *site_slot(&grown, tab->slots[i].pcs, tab->slots[i].npcs) = tab->slots[i];
            }
        }
        free(tab->slots);
        *tab = grown;
    }
    site_t *s = site_slot(tab, pcs, npcs);
    if (s->npcs == 0) {
        memcpy(s->pcs, pcs, (size_t)npcs * sizeof(void *));
        s->npcs = npcs;
        tab->used++;
    }
    s->calls += calls;
    s->bytes += bytes;
    s->time += time;
    return COLLAR_OK;
}

static void key_merge(key_stats_t *to, const key_stats_t *from)
{
    if (from->calls == 0) {
        return;
    }
    if (to->calls == 0 || from->tmin < to->tmin) {
        to->tmin = from->tmin;
    }
    if (from->tmax > to->tmax) {
        to->tmax = from->tmax;
    }
    to->calls += from->calls;
    to->bytes += from->bytes;
    to->time += from->time;
    for (int b = 0; b < NBUCKETS; b++) {
        to->hcalls[b] += from->hcalls[b];
        to->hbytes[b] += from->hbytes[b];
        to->htime[b] += from->htime[b];
    }
}

/* The calling thread's table, created on its first record. */
static stats_thread_t *thread_table(void)
{
    stats_thread_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_lock(&stats_lock);
    t->next = stats_threads;
    stats_threads = t;
    my_gen = stats_gen;
    pthread_mutex_unlock(&stats_lock);
    my_table = t;
    return t;
}

/* The executable segment of the object holding this code, unless that is
 * the program itself (collar linked statically into a test or benchmark). */
static int find_own_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t me = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)
            && me >= lo && me < lo + ph->p_memsz) {
            if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0') {
                own_lo = lo;
                own_hi = lo + ph->p_memsz;
            }
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- the API */

int collar_stats_init(void)
{
    if (collar_cfg.stats == COLLAR_STATS_OFF) {
        collar_stats_on = 0;
        return 0;
    }
    if (collar_stats_on) {
        return 1;
    }
    stats_mode = collar_cfg.stats;
    clock_gettime(CLOCK_MONOTONIC, &stats_t0);
    pthread_mutex_lock(&stats_lock);
    stats_gen++;
    pthread_mutex_unlock(&stats_lock);
    own_lo = own_hi = 0;
    dl_iterate_phdr(find_own_object, (void *)(uintptr_t)&collar_stats_callsite);
    if (stats_mode == COLLAR_STATS_CALLSITES) {
#ifdef COLLAR_HAVE_LIBUNWIND
        /* libunwind reads and caches unwind tables on first use. */
        void *warm[4];
        unw_backtrace(warm, 4);
#else
        collar_info(STATS, "call sites unavailable (built without libunwind): "
                    "the report has no call sites");
#endif
    }
    collar_debug(STATS, "statistics on: %s, report to %s as %s",
                stats_mode == COLLAR_STATS_CALLSITES ? "per call site" : "summary",
                collar_cfg.stats_file ? collar_cfg.stats_file : "stderr",
                collar_cfg.stats_format == 1 ? "json" : "text");
    collar_stats_on = 1;
    return 1;
}

void collar_stats_record(const collar_stats_call_t *call)
{
    if (!collar_stats_on || call == NULL) {
        return;
    }
    stats_thread_t *t = my_table;
    if (t == NULL || my_gen != stats_gen) {
        t = thread_table();
        if (t == NULL) {
            atomic_fetch_add(&stats_lost, 1);
            return;
        }
    }
    double s = call->seconds >= 0.0 ? call->seconds : 0.0;  /* and NaN */
    pthread_mutex_lock(&t->lock);
    if ((unsigned)call->coll >= NCOLL || (unsigned)call->alg >= NALG
        || (unsigned)call->mem >= NMEM) {
        t->lost++;
        pthread_mutex_unlock(&t->lock);
        return;
    }
    key_stats_t *k = &t->keys[key_index(call->coll, call->alg, call->mem)];
    if (k->calls == 0 || s < k->tmin) {
        k->tmin = s;
    }
    if (s > k->tmax) {
        k->tmax = s;
    }
    k->calls++;
    k->bytes += call->bytes;
    k->time += s;
    unsigned b = size_bucket(call->bytes);
    k->hcalls[b]++;
    k->hbytes[b] += call->bytes;
    k->htime[b] += s;
    if (stats_mode == COLLAR_STATS_CALLSITES) {
        if (call->npcs <= 0
            || collar_stats_site_add(&t->sites, call->pcs, call->npcs, 1, call->bytes, s) != COLLAR_OK) {
            t->nosite++;
        }
    }
    pthread_mutex_unlock(&t->lock);
}

/*
 * unw_backtrace() returns the return addresses of the frames above it: [0]
 * lies in this function, [1] in its caller, and so on.  `skip` frames after
 * this one's are dropped, and then any frame in collar's own shared library,
 * so that a wrapper calling through a helper still gets the application's
 * frame.  Return addresses are stored as they are: pc - 1 is taken when the
 * report resolves them.
 */
__attribute__((noinline))
int collar_stats_callsite(void **pcs, int max, int skip)
{
#ifdef COLLAR_HAVE_LIBUNWIND
    void *frames[1 + 16 + COLLAR_STATS_MAX_DEPTH + 2];
    long depth = collar_cfg.stats_depth;
    if (pcs == NULL || max <= 0) {
        return 0;
    }
    if (depth < 1) {
        depth = 1;
    }
    if (max > depth) {
        max = (int)depth;
    }
    if (max > COLLAR_STATS_MAX_DEPTH) {
        max = COLLAR_STATS_MAX_DEPTH;
    }
    if (skip < 0) {
        skip = 0;
    } else if (skip > 16) {
        skip = 16;
    }
    int want = 1 + skip + max + (own_hi != 0 ? 2 : 0);
    int n = unw_backtrace(frames, want);
    int i = 1 + skip;
    while (i < n && (uintptr_t)frames[i] >= own_lo && (uintptr_t)frames[i] < own_hi) {
        i++;
    }
    int k = 0;
    for (; i < n && k < max; i++) {
        pcs[k++] = frames[i];
    }
    return k;
#else
    (void)pcs;
    (void)max;
    (void)skip;
    return 0;
#endif
}

void collar_stats_fallback(const char *what)
{
    if (!collar_stats_on || what == NULL) {
        return;
    }
    pthread_mutex_lock(&stats_lock);
    int i;
    for (i = 0; i < nfallbacks; i++) {
        if (strcmp(fallbacks[i].what, what) == 0) {
            break;
        }
    }
    if (i == nfallbacks) {
        fallback_t *grown = NULL;
        char *copy = NULL;
        if (nfallbacks < MAX_FALLBACKS
            && (grown = realloc(fallbacks, (size_t)(nfallbacks + 1) * sizeof(*grown))) != NULL) {
            fallbacks = grown;
            copy = strdup(what);
        }
        if (copy == NULL) {
            fallbacks_lost++;
            pthread_mutex_unlock(&stats_lock);
            return;
        }
        fallbacks[i].what = copy;
        fallbacks[i].count = 0;
        nfallbacks++;
    }
    fallbacks[i].count++;
    pthread_mutex_unlock(&stats_lock);
}

/* Kept even before collar_stats_init, so that the order in which the
 * layers start does not matter. */
void collar_stats_set_tuning_source(const char *source)
{
    char *copy = source ? strdup(source) : NULL;
    pthread_mutex_lock(&stats_lock);
    free(tuning_source);
    tuning_source = copy;
    pthread_mutex_unlock(&stats_lock);
}


/* ------------------------------------------------ for the report's parts */

int collar_stats_mode(void)
{
    return stats_mode;
}

double collar_stats_elapsed(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - stats_t0.tv_sec)
           + (double)(now.tv_nsec - stats_t0.tv_nsec) * 1e-9;
}

void collar_stats_snapshot(key_stats_t *keys, site_table_t *sites,
                           uint64_t *nosite, uint64_t *lost)
{
    *lost += atomic_load(&stats_lost);
    pthread_mutex_lock(&stats_lock);
    for (stats_thread_t *t = stats_threads; t != NULL; t = t->next) {
        pthread_mutex_lock(&t->lock);
        for (int k = 0; k < NKEYS; k++) {
            key_merge(&keys[k], &t->keys[k]);
        }
        for (size_t i = 0; i < t->sites.cap; i++) {
            const site_t *s = &t->sites.slots[i];
            if (s->npcs != 0
                && collar_stats_site_add(sites, s->pcs, s->npcs, s->calls, s->bytes,
                                         s->time) != COLLAR_OK) {
                *nosite += s->calls;
            }
        }
        *nosite += t->nosite;
        *lost += t->lost;
        pthread_mutex_unlock(&t->lock);
    }
    *lost += fallbacks_lost;
    pthread_mutex_unlock(&stats_lock);
}

void collar_stats_each_fallback(void (*fn)(void *ctx, const char *what, uint64_t count),
                                void *ctx)
{
    pthread_mutex_lock(&stats_lock);
    for (int i = 0; i < nfallbacks; i++) {
        fn(ctx, fallbacks[i].what, fallbacks[i].count);
    }
    pthread_mutex_unlock(&stats_lock);
}

char *collar_stats_tuning_copy(void)
{
    pthread_mutex_lock(&stats_lock);
    char *copy = strdup(tuning_source ? tuning_source : "built-in");
    pthread_mutex_unlock(&stats_lock);
    return copy;
}

/* Free every table: recording stops here. */
void collar_stats_free_all(void)
{
    pthread_mutex_lock(&stats_lock);
    stats_thread_t *t = stats_threads;
    stats_threads = NULL;
    stats_gen++;
    for (int i = 0; i < nfallbacks; i++) {
        free(fallbacks[i].what);
    }
    free(fallbacks);
    fallbacks = NULL;
    nfallbacks = 0;
    fallbacks_lost = 0;
    free(tuning_source);
    tuning_source = NULL;
    pthread_mutex_unlock(&stats_lock);
    while (t != NULL) {
        stats_thread_t *next = t->next;
        pthread_mutex_destroy(&t->lock);
        free(t->sites.slots);
        free(t);
        t = next;
    }
    my_table = NULL;
    atomic_store(&stats_lost, 0);
}

