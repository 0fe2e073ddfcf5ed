/*
 * collar - statistics: what ran, how often, how long and from where
 * (COLLAR_STATS; the report's layout is documented in docs/stats.md).
 *
 * The hot path only counts.  collar_stats_record() adds one call to the
 * calling thread's own table (allocated on the thread's first call and kept
 * on a global list; its lock is only ever contended by the report), and
 * collar_stats_callsite() stores raw return addresses from libunwind's
 * unw_backtrace().  Nothing is resolved or formatted there.
 *
 * The report, as mpiP makes it (record_stack.c, report.c), collective over
 * the communicator and before PMPI_Finalize:
 *   1. merge this rank's thread tables;
 *   2. PMPI_Reduce the per-(collective, algorithm, memory kind) counters to
 *      rank 0: sums, minima and maxima over ranks;
 *   3. each rank turns the program counters of its call sites into (object
 *      file, address within the object) with dladdr1(), pc - 1 so that the
 *      address lies inside the call instruction -- position-independent
 *      executables and shared libraries load at different addresses on
 *      different ranks, an object-relative address is the same -- and packs
 *      them with its fallback counts; PMPI_Gather of the sizes, PMPI_Gatherv
 *      of the records;
 *   4. rank 0 resolves each distinct (object, address) once: addr2line (one
 *      process per object for many addresses) for "function (file:line)",
 *      else dladdr's symbol, else "object+0xaddress"; it adds up call sites
 *      with the same resolved name and writes the report in one write.
 * Only PMPI_* is called in here, so nothing re-enters collar's wrappers.
 */
#include "config.h"
#include "core.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <link.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef COLLAR_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

extern char **environ;

/* Sizes of the counter array: collective x algorithm x memory kind. */
#define NCOLL    COLLAR_COLL_COUNT
#define NALG     COLLAR_ALG_COUNT
#define NMEM     (COLLAR_MEM_MANAGED + 1)
#define NKEYS    (NCOLL * NALG * NMEM)
/* Bucket 0: 0 bytes; bucket b >= 1: [2^(b-1), 2^b). */
#define NBUCKETS 65
/* Call sites printed. */
#define TOP_SITES 20
/* Distinct fallback strings kept per rank; more are counted as lost. */
#define MAX_FALLBACKS 1024
/* Addresses per addr2line process. */
#define A2L_BATCH 128
#define ADDR2LINE "/usr/bin/addr2line"
#define SITE_SEP " <- "

/* ------------------------------------------------------------ the tables */

typedef struct {
    uint64_t calls;
    uint64_t bytes;
    double   time;
    double   tmin;                /* of one call; valid when calls > 0 */
    double   tmax;
    uint64_t hcalls[NBUCKETS];
    uint64_t hbytes[NBUCKETS];
    double   htime[NBUCKETS];
} key_stats_t;

typedef struct {
    void    *pcs[COLLAR_STATS_MAX_DEPTH];
    int      npcs;                /* 0: empty slot */
    uint64_t calls;
    uint64_t bytes;
    double   time;
} site_t;

/* Open addressing, linear probing, at most half full. */
typedef struct {
    site_t *slots;
    size_t  cap;                  /* a power of two, or 0 */
    size_t  used;
} site_table_t;

typedef struct stats_thread {
    pthread_mutex_t      lock;    /* the owner, or the report */
    key_stats_t          keys[NKEYS];
    site_table_t         sites;
    uint64_t             nosite;  /* calls counted without a call site */
    uint64_t             lost;    /* calls not counted at all */
    struct stats_thread *next;
} stats_thread_t;

typedef struct {
    char    *what;
    uint64_t count;
} fallback_t;

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

static unsigned key_index(int coll, int alg, int mem)
{
    return ((unsigned)coll * NALG + (unsigned)alg) * NMEM + (unsigned)mem;
}

static const char *coll_name(int coll)
{
    return collar_coll_name((collar_coll_t)coll);
}

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

static collar_status_t site_add(site_table_t *tab, void *const *pcs, int npcs,
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
            || site_add(&t->sites, call->pcs, call->npcs, 1, call->bytes, s) != COLLAR_OK) {
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

/* ------------------------------------------------------ packing records */

typedef struct {
    char  *buf;
    size_t len;
    size_t cap;
    int    failed;
} pack_t;

static void put(pack_t *p, const void *data, size_t n)
{
    if (p->failed) {
        return;
    }
    if (p->len + n > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->len + n) {
            cap *= 2;
        }
        char *buf = realloc(p->buf, cap);
        if (buf == NULL) {
            p->failed = 1;
            return;
        }
        p->buf = buf;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, data, n);
    p->len += n;
}

static void put_u64(pack_t *p, uint64_t v) { put(p, &v, sizeof(v)); }
static void put_f64(pack_t *p, double v)   { put(p, &v, sizeof(v)); }
static void put_str(pack_t *p, const char *s) { put(p, s, strlen(s) + 1); }

static void patch_u64(pack_t *p, size_t at, uint64_t v)
{
    if (!p->failed) {
        memcpy(p->buf + at, &v, sizeof(v));
    }
}

typedef struct {
    const char *buf;
    size_t      len;
    size_t      at;
    int         bad;
} unpack_t;

static uint64_t get_u64(unpack_t *u)
{
    uint64_t v = 0;
    if (u->bad || u->len - u->at < sizeof(v)) {
        u->bad = 1;
        return 0;
    }
    memcpy(&v, u->buf + u->at, sizeof(v));
    u->at += sizeof(v);
    return v;
}

static double get_f64(unpack_t *u)
{
    double v = 0;
    if (u->bad || u->len - u->at < sizeof(v)) {
        u->bad = 1;
        return 0;
    }
    memcpy(&v, u->buf + u->at, sizeof(v));
    u->at += sizeof(v);
    return v;
}

static const char *get_str(unpack_t *u)
{
    if (u->bad) {
        return "";
    }
    const char *s = u->buf + u->at;
    const char *nul = memchr(s, '\0', u->len - u->at);
    if (nul == NULL) {
        u->bad = 1;
        return "";
    }
    u->at += (size_t)(nul - s) + 1;
    return s;
}

/* ------------------------------------------- locating frames, per rank */

static int site_by_time(const void *a, const void *b)
{
    const site_t *x = *(const site_t *const *)a, *y = *(const site_t *const *)b;
    return (x->time < y->time) - (x->time > y->time);
}

/*
 * One frame as (object, address in the object, dladdr's symbol): the object
 * the return address lies in, the address minus the object's load bias --
 * what addr2line takes for shared libraries, position-independent and
 * ordinary executables alike.
 */
static void pack_frame(pack_t *p, void *pc, const char *exe)
{
    uintptr_t a = (uintptr_t)pc - 1;  /* inside the call instruction */
    Dl_info info;
    struct link_map *lm = NULL;
    if (dladdr1((void *)a, &info, (void **)&lm, RTLD_DL_LINKMAP) == 0 || lm == NULL) {
        put_str(p, "?");
        put_u64(p, (uint64_t)a);
        put_str(p, "");
        return;
    }
    const char *obj = lm->l_name != NULL && lm->l_name[0] != '\0' ? lm->l_name : exe;
    put_str(p, obj);
    put_u64(p, (uint64_t)(a - (uintptr_t)lm->l_addr));
    char sym[512] = "";
    if (info.dli_sname != NULL) {
        snprintf(sym, sizeof(sym), "%s+0x%lx", info.dli_sname,
                 (unsigned long)(a - (uintptr_t)info.dli_saddr));
    }
    put_str(p, sym);
}

/*
 * This rank's records for rank 0:
 *   u64 nfallbacks, { str what, u64 count } x nfallbacks,
 *   u64 nsites, u64 dropped, { u64 calls, u64 bytes, f64 time, u64 nframes,
 *                              { str object, u64 address, str symbol } } ...
 * Sites heaviest first; those that would take the buffer past `limit`
 * (what PMPI_Gatherv's int displacements allow per rank) are dropped and
 * counted.
 */
static void pack_records(pack_t *p, const site_table_t *sites, size_t limit)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        strcpy(exe, "?");
    } else {
        exe[n] = '\0';
    }

    pthread_mutex_lock(&stats_lock);
    uint64_t nf = 0;
    size_t at = p->len;
    put_u64(p, 0);
    for (int i = 0; i < nfallbacks; i++) {
        size_t before = p->len;
        put_str(p, fallbacks[i].what);
        put_u64(p, fallbacks[i].count);
        if (p->len > limit) {
            p->len = before;
        } else {
            nf++;
        }
    }
    pthread_mutex_unlock(&stats_lock);
    patch_u64(p, at, nf);

    const site_t **order = calloc(sites->used ? sites->used : 1, sizeof(*order));
    size_t count = 0;
    uint64_t dropped = 0;
    if (order == NULL) {
        dropped = sites->used;
    } else {
        for (size_t i = 0; i < sites->cap; i++) {
            if (sites->slots[i].npcs != 0) {
                order[count++] = &sites->slots[i];
            }
        }
        qsort(order, count, sizeof(*order), site_by_time);
    }
    uint64_t ns = 0;
    at = p->len;
    put_u64(p, 0);
    put_u64(p, 0);
    for (size_t i = 0; i < count; i++) {
        const site_t *s = order[i];
        size_t before = p->len;
        put_u64(p, s->calls);
        put_u64(p, s->bytes);
        put_f64(p, s->time);
        put_u64(p, (uint64_t)s->npcs);
        for (int f = 0; f < s->npcs; f++) {
            pack_frame(p, s->pcs[f], exe);
        }
        if (p->len > limit) {
            p->len = before;
            dropped++;
        } else {
            ns++;
        }
    }
    free(order);
    patch_u64(p, at, ns);
    patch_u64(p, at + sizeof(uint64_t), dropped);
}

/* ------------------------------------------- naming frames, on rank 0 */

typedef struct {
    const char *obj;
    uint64_t    addr;
    const char *sym;
    char       *name;   /* resolved; owned by the distinct copy */
} frame_t;

typedef struct {
    uint64_t calls;
    uint64_t bytes;
    double   time;
    int      rank;
    int      ranks;     /* after merging: ranks calling from here */
    int      nframes;
    size_t   first;     /* into the frame references */
    char    *name;
} site_row_t;

static int frame_cmp(const void *a, const void *b)
{
    const frame_t *x = a, *y = b;
    int c = strcmp(x->obj, y->obj);
    if (c != 0) {
        return c;
    }
    return (x->addr > y->addr) - (x->addr < y->addr);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Control characters would break a line of the text report. */
static void sanitize(char *s)
{
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f) {
            *s = '?';
        }
    }
}

/* One frame's name from addr2line's two lines (or NULLs), else from dladdr. */
static char *frame_name(const frame_t *f, const char *func, const char *line)
{
    char buf[2048];
    char where[1024] = "";
    int have_func = func != NULL && func[0] != '\0' && strcmp(func, "??") != 0;
    if (line != NULL && strncmp(line, "??", 2) != 0) {
        snprintf(where, sizeof(where), "%s", base_name(line));
        char *disc = strstr(where, " (discriminator");
        if (disc != NULL) {
            *disc = '\0';
        }
        size_t n = strlen(where);
        if (n < 2 || strcmp(where + n - 2, ":0") == 0 || strcmp(where + n - 2, ":?") == 0) {
            where[0] = '\0';
        }
    }
    const char *obj = base_name(f->obj);
    unsigned long long addr = (unsigned long long)f->addr;
    if (have_func && where[0] != '\0') {
        snprintf(buf, sizeof(buf), "%s (%s)", func, where);
    } else if (have_func) {
        snprintf(buf, sizeof(buf), "%s (%s+0x%llx)", func, obj, addr);
    } else if (where[0] != '\0') {
        snprintf(buf, sizeof(buf), "%s (%s+0x%llx)", where, obj, addr);
    } else if (f->sym[0] != '\0') {
        snprintf(buf, sizeof(buf), "%s (%s+0x%llx)", f->sym, obj, addr);
    } else {
        snprintf(buf, sizeof(buf), "%s+0x%llx", obj, addr);
    }
    char *name = strdup(buf);
    if (name != NULL) {
        sanitize(name);
    }
    return name;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) {
        s[--n] = '\0';
    }
}

/*
 * addr2line -f -C -e OBJECT ADDR...: two lines per address (function, then
 * file:line, "??" where unknown).  Run directly (no shell: object paths are
 * not quoted), without LD_PRELOAD (not collar again), its stderr discarded.
 * posix_spawn does not copy the address space, which matters to MPI
 * libraries with registered memory.  Frames it does not name keep
 * name == NULL.
 */
static void addr2line_batch(frame_t *f, size_t n)
{
    char (*addrs)[24] = calloc(n, sizeof(*addrs));
    char **argv = calloc(n + 6, sizeof(*argv));
    size_t nenv = 0;
    while (environ != NULL && environ[nenv] != NULL) {
        nenv++;
    }
    char **envp = calloc(nenv + 1, sizeof(*envp));
    int fds[2] = { -1, -1 };
    posix_spawn_file_actions_t fa;
    int fa_ok = 0;
    pid_t pid = -1;
    if (addrs == NULL || argv == NULL || envp == NULL || pipe2(fds, O_CLOEXEC) != 0) {
        goto out;
    }
    for (size_t i = 0, e = 0; i < nenv; i++) {
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0) {
            envp[e++] = environ[i];
        }
    }
    argv[0] = "addr2line";
    argv[1] = "-f";
    argv[2] = "-C";
    argv[3] = "-e";
    argv[4] = (char *)f[0].obj;
    for (size_t i = 0; i < n; i++) {
        snprintf(addrs[i], sizeof(addrs[i]), "0x%llx", (unsigned long long)f[i].addr);
        argv[5 + i] = addrs[i];
    }
    if (posix_spawn_file_actions_init(&fa) != 0) {
        goto out;
    }
    fa_ok = 1;
    if (posix_spawn_file_actions_adddup2(&fa, fds[1], 1) != 0
        || posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) != 0
        || posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0) != 0
        || posix_spawn(&pid, ADDR2LINE, &fa, NULL, argv, envp) != 0) {
        pid = -1;
        goto out;
    }
    close(fds[1]);
    fds[1] = -1;
    FILE *in = fdopen(fds[0], "r");
    if (in != NULL) {
        fds[0] = -1;
        char *func = NULL, *line = NULL;
        size_t funclen = 0, linelen = 0;
        for (size_t i = 0; i < n; i++) {
            if (getline(&func, &funclen, in) < 0 || getline(&line, &linelen, in) < 0) {
                break;
            }
            chomp(func);
            chomp(line);
            f[i].name = frame_name(&f[i], func, line);
        }
        free(func);
        free(line);
        fclose(in);
    }
out:
    if (fds[0] >= 0) {
        close(fds[0]);
    }
    if (fds[1] >= 0) {
        close(fds[1]);
    }
    if (pid > 0) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    if (fa_ok) {
        posix_spawn_file_actions_destroy(&fa);
    }
    free(envp);
    free(argv);
    free(addrs);
}

/* Name every distinct frame (sorted by object): addr2line where it can. */
static void resolve_frames(frame_t *f, size_t n)
{
    int have_a2l = access(ADDR2LINE, X_OK) == 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && strcmp(f[j].obj, f[i].obj) == 0) {
            j++;
        }
        if (have_a2l && f[i].obj[0] == '/' && access(f[i].obj, R_OK) == 0) {
            for (size_t k = i; k < j; k += A2L_BATCH) {
                addr2line_batch(&f[k], j - k < A2L_BATCH ? j - k : A2L_BATCH);
            }
        }
        for (size_t k = i; k < j; k++) {
            if (f[k].name == NULL) {
                f[k].name = frame_name(&f[k], NULL, NULL);
            }
        }
        i = j;
    }
}

static int row_by_name(const void *a, const void *b)
{
    const site_row_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

static int row_by_time(const void *a, const void *b)
{
    const site_row_t *x = a, *y = b;
    if (x->time != y->time) {
        return (x->time < y->time) - (x->time > y->time);
    }
    if (x->calls != y->calls) {
        return (x->calls < y->calls) - (x->calls > y->calls);
    }
    return strcmp(x->name, y->name);
}

static int fallback_by_what(const void *a, const void *b)
{
    return strcmp(((const fallback_t *)a)->what, ((const fallback_t *)b)->what);
}

static int fallback_by_count(const void *a, const void *b)
{
    const fallback_t *x = a, *y = b;
    if (x->count != y->count) {
        return (x->count < y->count) - (x->count > y->count);
    }
    return strcmp(x->what, y->what);
}

/* ----------------------------------------------- the report, on rank 0 */

/* What rank 0 has after the reductions and the gather. */
typedef struct {
    int         nranks;
    int         mode;
    long        depth;
    double      wall;            /* max over ranks */
    const char *tuning;
    /* Per key; see reduce_all for the layouts. */
    uint64_t   *usum, *umin, *umax;
    double     *dsum, *dmin, *dmax;
    uint64_t    lost;            /* calls not counted */
    uint64_t    nosite;          /* calls counted without a site */
    uint64_t    dropped;         /* site records over the gather limit */
    site_row_t *sites;           /* merged, heaviest first */
    size_t      nsites;
    frame_t    *frames;          /* distinct, sorted */
    size_t      nframes;
    frame_t    *refs;            /* per site row, its frames */
    fallback_t *falls;           /* merged, most frequent first */
    size_t      nfalls;
} report_t;

/* u64 sums: per key calls, bytes, hcalls[NBUCKETS], hbytes[NBUCKETS]; then
 * lost, nosite.  u64 min/max: per key calls, bytes.  double sums: per key
 * time, htime[NBUCKETS].  double min: per key time, tmin.  double max: per
 * key time, tmax; then the wall time. */
#define USUM_PER_KEY (2 + 2 * NBUCKETS)
#define USUM_LEN     (NKEYS * USUM_PER_KEY + 2)
#define UMM_LEN      (NKEYS * 2)
#define DSUM_PER_KEY (1 + NBUCKETS)
#define DSUM_LEN     (NKEYS * DSUM_PER_KEY)
#define DMIN_LEN     (NKEYS * 2)
#define DMAX_LEN     (NKEYS * 2 + 1)

static const char *mode_name(int mode)
{
    return mode == COLLAR_STATS_CALLSITES ? "callsites" : "summary";
}

static void bucket_bounds(unsigned b, char *lo, char *hi, size_t len)
{
    if (b == 0) {
        snprintf(lo, len, "0");
        snprintf(hi, len, "1");
    } else if (b == 64) {
        snprintf(lo, len, "%llu", 1ull << 63);
        snprintf(hi, len, "18446744073709551616");
    } else {
        snprintf(lo, len, "%llu", 1ull << (b - 1));
        snprintf(hi, len, "%llu", 1ull << b);
    }
}

static double mb_per_s(double bytes, double seconds)
{
    return seconds > 0.0 ? bytes / seconds / 1e6 : 0.0;
}

static const char *site_status(const report_t *r)
{
#ifndef COLLAR_HAVE_LIBUNWIND
    if (r->mode == COLLAR_STATS_CALLSITES) {
        return "unavailable";
    }
#endif
    return r->mode == COLLAR_STATS_CALLSITES ? "recorded" : "off";
}

static void print_text(FILE *out, const report_t *r, const char *host, long pid)
{
    uint64_t total = 0;
    for (int k = 0; k < NKEYS; k++) {
        total += r->usum[k * USUM_PER_KEY];
    }
    fprintf(out, "# collar statistics\n");
    fprintf(out, "version: %s\n", PACKAGE_VERSION);
    fprintf(out, "ranks: %d\n", r->nranks);
    fprintf(out, "reporter: rank 0 host %s pid %ld\n", host, pid);
    fprintf(out, "tuning: %s\n", r->tuning);
    fprintf(out, "mode: %s\n", mode_name(r->mode));
    if (r->mode == COLLAR_STATS_CALLSITES) {
        fprintf(out, "depth: %ld\n", r->depth);
    }
    fprintf(out, "wall time: %.6f s\n", r->wall);
    fprintf(out, "calls: %llu\n", (unsigned long long)total);
    if (r->lost != 0) {
        fprintf(out, "calls not counted: %llu\n", (unsigned long long)r->lost);
    }

    fprintf(out, "\n## by algorithm\n");
    fprintf(out, "# calls, bytes, time_s: sum over ranks; _min, _mean, _max: "
            "one rank's, over ranks\n");
    fprintf(out, "# call_*_us: one call; MB/s: bytes / time_s\n");
    fprintf(out, "# collective algorithm memory calls calls_min calls_mean calls_max "
            "bytes bytes_min bytes_mean bytes_max time_s time_min_s time_mean_s "
            "time_max_s call_min_us call_mean_us call_max_us MB/s\n");
    int rows = 0;
    for (int c = 0; c < NCOLL; c++) {
        for (int a = 0; a < NALG; a++) {
            for (int m = 0; m < NMEM; m++) {
                unsigned k = key_index(c, a, m);
                const uint64_t *us = &r->usum[k * USUM_PER_KEY];
                if (us[0] == 0) {
                    continue;
                }
                rows++;
                const double *ds = &r->dsum[k * DSUM_PER_KEY];
                double n = (double)r->nranks;
                fprintf(out, "%-10s %-8s %-7s %llu %llu %.2f %llu %llu %llu %.2f %llu "
                        "%.6f %.6f %.6f %.6f %.3f %.3f %.3f %.2f\n",
                        coll_name(c), collar_alg_name((collar_alg_t)a),
                        collar_mem_kind_name((collar_mem_kind_t)m),
                        (unsigned long long)us[0], (unsigned long long)r->umin[k * 2],
                        (double)us[0] / n, (unsigned long long)r->umax[k * 2],
                        (unsigned long long)us[1], (unsigned long long)r->umin[k * 2 + 1],
                        (double)us[1] / n, (unsigned long long)r->umax[k * 2 + 1],
                        ds[0], r->dmin[k * 2], ds[0] / n, r->dmax[k * 2],
                        r->dmin[k * 2 + 1] * 1e6, ds[0] / (double)us[0] * 1e6,
                        r->dmax[k * 2 + 1] * 1e6, mb_per_s((double)us[1], ds[0]));
            }
        }
    }
    if (rows == 0) {
        fprintf(out, "(none)\n");
    }

    fprintf(out, "\n## by message size\n");
    fprintf(out, "# bucket [bytes_lo, bytes_hi) of one call's size; calls, bytes, "
            "time_s: sum over ranks\n");
    fprintf(out, "# collective algorithm memory bytes_lo bytes_hi calls bytes time_s MB/s\n");
    rows = 0;
    for (int c = 0; c < NCOLL; c++) {
        for (int a = 0; a < NALG; a++) {
            for (int m = 0; m < NMEM; m++) {
                unsigned k = key_index(c, a, m);
                const uint64_t *us = &r->usum[k * USUM_PER_KEY];
                const double *ds = &r->dsum[k * DSUM_PER_KEY];
                for (unsigned b = 0; b < NBUCKETS; b++) {
                    uint64_t calls = us[2 + b];
                    uint64_t bytes = us[2 + NBUCKETS + b];
                    if (calls == 0) {
                        continue;
                    }
                    rows++;
                    char lo[32], hi[32];
                    bucket_bounds(b, lo, hi, sizeof(lo));
                    fprintf(out, "%-10s %-8s %-7s %s %s %llu %llu %.6f %.2f\n",
                            coll_name(c), collar_alg_name((collar_alg_t)a),
                            collar_mem_kind_name((collar_mem_kind_t)m), lo, hi,
                            (unsigned long long)calls, (unsigned long long)bytes,
                            ds[1 + b], mb_per_s((double)bytes, ds[1 + b]));
                }
            }
        }
    }
    if (rows == 0) {
        fprintf(out, "(none)\n");
    }

    fprintf(out, "\n## by call site\n");
    const char *status = site_status(r);
    if (strcmp(status, "unavailable") == 0) {
        fprintf(out, "call sites unavailable (built without libunwind)\n");
    } else if (strcmp(status, "off") == 0) {
        fprintf(out, "call sites not recorded (COLLAR_STATS=callsites records them)\n");
    } else {
        size_t shown = r->nsites < TOP_SITES ? r->nsites : TOP_SITES;
        fprintf(out, "# %zu call sites, %zu shown, heaviest first; calls, bytes, "
                "time_s: sum over ranks\n", r->nsites, shown);
        fprintf(out, "# top calls bytes time_s call_mean_us ranks site\n");
        for (size_t i = 0; i < shown; i++) {
            const site_row_t *s = &r->sites[i];
            fprintf(out, "%zu %llu %llu %.6f %.3f %d %s\n", i + 1,
                    (unsigned long long)s->calls, (unsigned long long)s->bytes,
                    s->time, s->calls ? s->time / (double)s->calls * 1e6 : 0.0,
                    s->ranks, s->name);
        }
        if (r->nsites == 0) {
            fprintf(out, "(none)\n");
        }
        if (r->nosite != 0) {
            fprintf(out, "calls without a call site: %llu\n", (unsigned long long)r->nosite);
        }
        if (r->dropped != 0) {
            fprintf(out, "call-site records dropped (gather limit): %llu\n",
                    (unsigned long long)r->dropped);
        }
    }

    fprintf(out, "\n## fallbacks\n");
    fprintf(out, "# count what (count: sum over ranks)\n");
    for (size_t i = 0; i < r->nfalls; i++) {
        fprintf(out, "%llu %s\n", (unsigned long long)r->falls[i].count, r->falls[i].what);
    }
    if (r->nfalls == 0) {
        fprintf(out, "(none)\n");
    }
    fprintf(out, "\n# end of collar statistics\n");
}

/* A JSON string: escapes, and U+FFFD for bytes that are not UTF-8. */
static void json_str(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', out);
    while (*p != '\0') {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', out);
            fputc(c, out);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            fputc(c, out);
            p++;
        } else {
            /* Length and validity of one UTF-8 sequence. */
            int n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
            if (c >= 0xf5) {
                n = 0;
            }
            int ok = n > 0;
            for (int i = 1; ok && i < n; i++) {
                ok = (p[i] & 0xc0) == 0x80;
            }
            if (ok && n == 3) {
                ok = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
            } else if (ok && n == 4) {
                ok = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
            }
            if (ok) {
                fwrite(p, 1, (size_t)n, out);
                p += n;
            } else {
                fputs("\\ufffd", out);
                p++;
            }
        }
    }
    fputc('"', out);
}

/* Finite, so that the output stays JSON. */
static double json_num(double v)
{
    return v == v && v <= DBL_MAX && v >= -DBL_MAX ? v : 0.0;
}

static void print_json(FILE *out, const report_t *r, const char *host, long pid)
{
    uint64_t total = 0;
    for (int k = 0; k < NKEYS; k++) {
        total += r->usum[k * USUM_PER_KEY];
    }
    fprintf(out, "{\n  \"schema\": \"collar-stats/1\",\n  \"version\": ");
    json_str(out, PACKAGE_VERSION);
    fprintf(out, ",\n  \"ranks\": %d,\n  \"reporter\": {\"rank\": 0, \"host\": ", r->nranks);
    json_str(out, host);
    fprintf(out, ", \"pid\": %ld},\n  \"tuning\": ", pid);
    json_str(out, r->tuning);
    fprintf(out, ",\n  \"mode\": \"%s\",\n  \"depth\": %ld,\n  \"wall_time_s\": %.9g,\n"
            "  \"calls\": %llu,\n  \"calls_not_counted\": %llu,\n",
            mode_name(r->mode), r->mode == COLLAR_STATS_CALLSITES ? r->depth : 0,
            json_num(r->wall), (unsigned long long)total, (unsigned long long)r->lost);

    fprintf(out, "  \"by_algorithm\": [");
    int rows = 0;
    for (int c = 0; c < NCOLL; c++) {
        for (int a = 0; a < NALG; a++) {
            for (int m = 0; m < NMEM; m++) {
                unsigned k = key_index(c, a, m);
                const uint64_t *us = &r->usum[k * USUM_PER_KEY];
                if (us[0] == 0) {
                    continue;
                }
                const double *ds = &r->dsum[k * DSUM_PER_KEY];
                double n = (double)r->nranks;
                fprintf(out, "%s\n    {\"collective\": \"%s\", \"algorithm\": \"%s\", "
                        "\"memory\": \"%s\",\n", rows++ ? "," : "", coll_name(c),
                        collar_alg_name((collar_alg_t)a),
                        collar_mem_kind_name((collar_mem_kind_t)m));
                fprintf(out, "     \"calls\": {\"total\": %llu, \"min\": %llu, \"mean\": %.9g, "
                        "\"max\": %llu},\n", (unsigned long long)us[0],
                        (unsigned long long)r->umin[k * 2], (double)us[0] / n,
                        (unsigned long long)r->umax[k * 2]);
                fprintf(out, "     \"bytes\": {\"total\": %llu, \"min\": %llu, \"mean\": %.9g, "
                        "\"max\": %llu},\n", (unsigned long long)us[1],
                        (unsigned long long)r->umin[k * 2 + 1], (double)us[1] / n,
                        (unsigned long long)r->umax[k * 2 + 1]);
                fprintf(out, "     \"time_s\": {\"total\": %.9g, \"min\": %.9g, \"mean\": %.9g, "
                        "\"max\": %.9g},\n", json_num(ds[0]), json_num(r->dmin[k * 2]),
                        json_num(ds[0] / n), json_num(r->dmax[k * 2]));
                fprintf(out, "     \"call_us\": {\"min\": %.9g, \"mean\": %.9g, \"max\": %.9g},\n",
                        json_num(r->dmin[k * 2 + 1] * 1e6),
                        json_num(ds[0] / (double)us[0] * 1e6),
                        json_num(r->dmax[k * 2 + 1] * 1e6));
                fprintf(out, "     \"MB_per_s\": %.9g}", json_num(mb_per_s((double)us[1], ds[0])));
            }
        }
    }
    fprintf(out, "%s],\n", rows ? "\n  " : "");

    fprintf(out, "  \"by_message_size\": [");
    rows = 0;
    for (int c = 0; c < NCOLL; c++) {
        for (int a = 0; a < NALG; a++) {
            for (int m = 0; m < NMEM; m++) {
                unsigned k = key_index(c, a, m);
                const uint64_t *us = &r->usum[k * USUM_PER_KEY];
                const double *ds = &r->dsum[k * DSUM_PER_KEY];
                for (unsigned b = 0; b < NBUCKETS; b++) {
                    uint64_t calls = us[2 + b];
                    uint64_t bytes = us[2 + NBUCKETS + b];
                    if (calls == 0) {
                        continue;
                    }
                    char lo[32], hi[32];
                    bucket_bounds(b, lo, hi, sizeof(lo));
                    fprintf(out, "%s\n    {\"collective\": \"%s\", \"algorithm\": \"%s\", "
                            "\"memory\": \"%s\", \"bytes_lo\": %s, \"bytes_hi\": %s, "
                            "\"calls\": %llu, \"bytes\": %llu, \"time_s\": %.9g, "
                            "\"MB_per_s\": %.9g}", rows++ ? "," : "", coll_name(c),
                            collar_alg_name((collar_alg_t)a),
                            collar_mem_kind_name((collar_mem_kind_t)m), lo, hi,
                            (unsigned long long)calls, (unsigned long long)bytes,
                            json_num(ds[1 + b]),
                            json_num(mb_per_s((double)bytes, ds[1 + b])));
                }
            }
        }
    }
    fprintf(out, "%s],\n", rows ? "\n  " : "");

    const char *status = site_status(r);
    size_t shown = r->nsites < TOP_SITES ? r->nsites : TOP_SITES;
    fprintf(out, "  \"call_sites\": {\"status\": \"%s\", \"count\": %zu, \"shown\": %zu, "
            "\"calls_without_site\": %llu, \"dropped\": %llu, \"sites\": [",
            status, r->nsites, shown, (unsigned long long)r->nosite,
            (unsigned long long)r->dropped);
    for (size_t i = 0; i < shown; i++) {
        const site_row_t *s = &r->sites[i];
        fprintf(out, "%s\n    {\"site\": ", i ? "," : "");
        json_str(out, s->name);
        fprintf(out, ", \"frames\": [");
        for (int f = 0; f < s->nframes; f++) {
            const frame_t *ref = &r->refs[s->first + (size_t)f];
            const frame_t *d = bsearch(ref, r->frames, r->nframes, sizeof(frame_t), frame_cmp);
            fprintf(out, "%s", f ? ", " : "");
            json_str(out, d != NULL && d->name != NULL ? d->name : "?");
        }
        fprintf(out, "],\n     \"calls\": %llu, \"bytes\": %llu, \"time_s\": %.9g, "
                "\"call_mean_us\": %.9g, \"ranks\": %d}",
                (unsigned long long)s->calls, (unsigned long long)s->bytes,
                json_num(s->time),
                json_num(s->calls ? s->time / (double)s->calls * 1e6 : 0.0), s->ranks);
    }
    fprintf(out, "%s]},\n", shown ? "\n  " : "");

    fprintf(out, "  \"fallbacks\": [");
    for (size_t i = 0; i < r->nfalls; i++) {
        fprintf(out, "%s\n    {\"what\": ", i ? "," : "");
        json_str(out, r->falls[i].what);
        fprintf(out, ", \"count\": %llu}", (unsigned long long)r->falls[i].count);
    }
    fprintf(out, "%s]\n}\n", r->nfalls ? "\n  " : "");
}

/*
 * Rank 0: read every rank's records, name the frames, merge call sites by
 * name and fallbacks by text.  On a malformed buffer (a bug) the rest of
 * that rank's records are ignored.
 */
static collar_status_t collect_records(report_t *r, const char *all, const int *sizes,
                                       const int *displs, int nranks)
{
    size_t nrows = 0, nrefs = 0, nf = 0;
    /* First pass: how many of each. */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            r->sites = calloc(nrows ? nrows : 1, sizeof(*r->sites));
            r->refs = calloc(nrefs ? nrefs : 1, sizeof(*r->refs));
            r->falls = calloc(nf ? nf : 1, sizeof(*r->falls));
            if (r->sites == NULL || r->refs == NULL || r->falls == NULL) {
                return COLLAR_ERR_NO_MEMORY;
            }
            nrows = nrefs = nf = 0;
        }
        for (int rank = 0; rank < nranks; rank++) {
            unpack_t u = { all + displs[rank], (size_t)sizes[rank], 0, 0 };
            uint64_t n = get_u64(&u);
            for (uint64_t i = 0; i < n && !u.bad; i++) {
                const char *what = get_str(&u);
                uint64_t count = get_u64(&u);
                if (!u.bad && pass == 1) {
                    r->falls[nf].what = (char *)what;  /* within `all` */
                    sanitize(r->falls[nf].what);
                    r->falls[nf].count = count;
                }
                nf += !u.bad;
            }
            n = get_u64(&u);
            uint64_t dropped = get_u64(&u);
            if (pass == 1) {
                r->dropped += dropped;
            }
            for (uint64_t i = 0; i < n && !u.bad; i++) {
                site_row_t row = { 0 };
                row.calls = get_u64(&u);
                row.bytes = get_u64(&u);
                row.time = get_f64(&u);
                uint64_t frames = get_u64(&u);
                if (frames > COLLAR_STATS_MAX_DEPTH) {
                    u.bad = 1;
                }
                row.rank = rank;
                row.ranks = 1;
                row.nframes = (int)frames;
                row.first = nrefs;
                for (uint64_t f = 0; f < frames && !u.bad; f++) {
                    frame_t fr = { 0 };
                    fr.obj = get_str(&u);
                    fr.addr = get_u64(&u);
                    fr.sym = get_str(&u);
                    if (pass == 1 && !u.bad) {
                        r->refs[nrefs] = fr;
                    }
                    nrefs++;
                }
                if (u.bad) {
                    nrefs = row.first;
                    break;
                }
                if (pass == 1) {
                    r->sites[nrows] = row;
                }
                nrows++;
            }
            if (u.bad && pass == 0) {
                collar_warn(STATS, "malformed statistics records from rank %d; "
                            "ignoring the rest of them", rank);
            }
        }
    }

    r->nsites = nrows;  /* for report_free, until merged */

    /* Distinct frames, each named once. */
    r->frames = calloc(nrefs ? nrefs : 1, sizeof(*r->frames));
    if (r->frames == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    memcpy(r->frames, r->refs, nrefs * sizeof(*r->frames));
    qsort(r->frames, nrefs, sizeof(*r->frames), frame_cmp);
    size_t nd = 0;
    for (size_t i = 0; i < nrefs; i++) {
        if (nd == 0 || frame_cmp(&r->frames[nd - 1], &r->frames[i]) != 0) {
            r->frames[nd++] = r->frames[i];
        }
    }
    r->nframes = nd;
    resolve_frames(r->frames, nd);

    /* Each row's name: its frames' names, innermost first. */
    for (size_t i = 0; i < nrows; i++) {
        site_row_t *s = &r->sites[i];
        size_t len = 1;
        const char *names[COLLAR_STATS_MAX_DEPTH];
        for (int f = 0; f < s->nframes; f++) {
            const frame_t *d = bsearch(&r->refs[s->first + (size_t)f], r->frames, nd,
                                       sizeof(frame_t), frame_cmp);
            names[f] = d != NULL && d->name != NULL ? d->name : "?";
            len += strlen(names[f]) + strlen(SITE_SEP);
        }
        s->name = malloc(len);
        if (s->name == NULL) {
            return COLLAR_ERR_NO_MEMORY;
        }
        s->name[0] = '\0';
        for (int f = 0; f < s->nframes; f++) {
            if (f > 0) {
                strcat(s->name, SITE_SEP);
            }
            strcat(s->name, names[f]);
        }
    }

    /* Merge rows with the same name (on one rank or on several). */
    qsort(r->sites, nrows, sizeof(*r->sites), row_by_name);
    size_t nm = 0;
    for (size_t i = 0; i < nrows; i++) {
        site_row_t *s = &r->sites[i];
        if (nm > 0 && strcmp(r->sites[nm - 1].name, s->name) == 0) {
            site_row_t *m = &r->sites[nm - 1];
            m->calls += s->calls;
            m->bytes += s->bytes;
            m->time += s->time;
            if (s->rank != m->rank) {
                m->ranks++;
                m->rank = s->rank;  /* rows come in rank order per name */
            }
            free(s->name);
            s->name = NULL;
        } else {
            r->sites[nm++] = *s;
            if (nm - 1 != i) {
                s->name = NULL;
            }
        }
    }
    r->nsites = nm;
    qsort(r->sites, nm, sizeof(*r->sites), row_by_time);

    qsort(r->falls, nf, sizeof(*r->falls), fallback_by_what);
    size_t nfm = 0;
    for (size_t i = 0; i < nf; i++) {
        if (nfm > 0 && strcmp(r->falls[nfm - 1].what, r->falls[i].what) == 0) {
            r->falls[nfm - 1].count += r->falls[i].count;
        } else {
            r->falls[nfm++] = r->falls[i];
        }
    }
    r->nfalls = nfm;
    qsort(r->falls, nfm, sizeof(*r->falls), fallback_by_count);
    return COLLAR_OK;
}

static void report_free(report_t *r)
{
    for (size_t i = 0; i < r->nsites; i++) {
        free(r->sites[i].name);
    }
    for (size_t i = 0; i < r->nframes; i++) {
        free(r->frames[i].name);
    }
    free(r->sites);
    free(r->frames);
    free(r->refs);
    free(r->falls);
}

/* Write the report in one piece: lines of other ranks or of the log do not
 * land inside it. */
static void write_report(const char *text, size_t len, int rank)
{
    const char *pattern = collar_cfg.stats_file;
    FILE *f = NULL;
    if (pattern != NULL && pattern[0] != '\0' && strcmp(pattern, "stderr") != 0) {
        char path[4096];
        collar_expand_pattern(pattern, rank, path, sizeof(path));
        f = fopen(path, "w");
        if (f == NULL) {
            collar_warn(STATS, "cannot open COLLAR_STATS_FILE '%s' for writing: %m; "
                        "the report goes to stderr", path);
        } else {
            int bad = fwrite(text, 1, len, f) != len;
            if (fclose(f) != 0 || bad) {
                collar_warn(STATS, "cannot write the statistics report to '%s': %m", path);
            }
            return;
        }
    }
    fflush(stderr);
    int fd = fileno(stderr);
    while (len > 0) {
        ssize_t n = write(fd, text, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        text += n;
        len -= (size_t)n;
    }
}

/* Free every table: recording stops here. */
static void stats_free_all(void)
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

#define MPI_TRY(call)                                                         \
    do {                                                                      \
        int mpi_try_rc_ = (call);                                             \
        if (mpi_try_rc_ != MPI_SUCCESS) {                                     \
            collar_warn(STATS, "%s failed (MPI error %d): no statistics report", \
                        #call, mpi_try_rc_);                                  \
            goto out;                                                         \
        }                                                                     \
    } while (0)

_Static_assert(DSUM_LEN >= DMAX_LEN && USUM_LEN >= UMM_LEN, "reduction buffers");

/* The report runs once per process: the counters reduced over ranks live
 * here, so that no allocation can fail on one rank between collectives. */
static key_stats_t rep_keys[NKEYS];
static uint64_t    rep_u[2][3][USUM_LEN];   /* [send, receive][sum, min, max] */
static double      rep_d[2][3][DSUM_LEN];

void collar_stats_report(MPI_Comm comm)
{
    if (!collar_stats_on) {
        return;
    }
    collar_stats_on = 0;

    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double wall = (double)(now.tv_sec - stats_t0.tv_sec)
                  + (double)(now.tv_nsec - stats_t0.tv_nsec) * 1e-9;

    MPI_Comm c = MPI_COMM_NULL;
    int rank = 0, nranks = 1;
    site_table_t sites = { NULL, 0, 0 };
    uint64_t nosite = 0, lost = atomic_load(&stats_lost);
    pack_t pack = { NULL, 0, 0, 0 };
    report_t r;
    memset(&r, 0, sizeof(r));
    int *sizes = NULL, *displs = NULL;
    char *all = NULL;
    char *text = NULL;
    size_t textlen = 0;
    char *tuning = NULL;

    if (PMPI_Comm_dup(comm, &c) != MPI_SUCCESS) {
        collar_warn(STATS, "cannot duplicate the communicator: no statistics report");
        c = MPI_COMM_NULL;
        goto out;
    }
    PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    PMPI_Comm_rank(c, &rank);
    PMPI_Comm_size(c, &nranks);

    /* 1. This rank's tables. */
    memset(rep_keys, 0, sizeof(rep_keys));
    pthread_mutex_lock(&stats_lock);
    for (stats_thread_t *t = stats_threads; t != NULL; t = t->next) {
        pthread_mutex_lock(&t->lock);
        for (int k = 0; k < NKEYS; k++) {
            key_merge(&rep_keys[k], &t->keys[k]);
        }
        for (size_t i = 0; i < t->sites.cap; i++) {
            const site_t *s = &t->sites.slots[i];
            if (s->npcs != 0
                && site_add(&sites, s->pcs, s->npcs, s->calls, s->bytes, s->time) != COLLAR_OK) {
                nosite += s->calls;
            }
        }
        nosite += t->nosite;
        lost += t->lost;
        pthread_mutex_unlock(&t->lock);
    }
    lost += fallbacks_lost;
    pthread_mutex_unlock(&stats_lock);

    /* 2. Counters: sums, minima, maxima over ranks. */
    memset(rep_u, 0, sizeof(rep_u));
    memset(rep_d, 0, sizeof(rep_d));
    uint64_t (*u)[USUM_LEN] = rep_u[0];
    double (*d)[DSUM_LEN] = rep_d[0];
    for (int k = 0; k < NKEYS; k++) {
        const key_stats_t *ks = &rep_keys[k];
        uint64_t *us = &u[0][k * USUM_PER_KEY];
        us[0] = ks->calls;
        us[1] = ks->bytes;
        for (int b = 0; b < NBUCKETS; b++) {
            us[2 + b] = ks->hcalls[b];
            us[2 + NBUCKETS + b] = ks->hbytes[b];
            d[0][k * DSUM_PER_KEY + 1 + b] = ks->htime[b];
        }
        d[0][k * DSUM_PER_KEY] = ks->time;
        u[1][k * 2] = u[2][k * 2] = ks->calls;
        u[1][k * 2 + 1] = u[2][k * 2 + 1] = ks->bytes;
        d[1][k * 2] = d[2][k * 2] = ks->time;
        d[1][k * 2 + 1] = ks->calls ? ks->tmin : DBL_MAX;
        d[2][k * 2 + 1] = ks->calls ? ks->tmax : 0.0;
    }
    u[0][NKEYS * USUM_PER_KEY] = lost;
    u[0][NKEYS * USUM_PER_KEY + 1] = nosite;
    d[2][NKEYS * 2] = wall;
    const int ulen[3] = { USUM_LEN, UMM_LEN, UMM_LEN };
    const int dlen[3] = { DSUM_LEN, DMIN_LEN, DMAX_LEN };
    const MPI_Op ops[3] = { MPI_SUM, MPI_MIN, MPI_MAX };
    for (int i = 0; i < 3; i++) {
        MPI_TRY(PMPI_Reduce(rep_u[0][i], rep_u[1][i], ulen[i], MPI_UINT64_T, ops[i], 0, c));
        MPI_TRY(PMPI_Reduce(rep_d[0][i], rep_d[1][i], dlen[i], MPI_DOUBLE, ops[i], 0, c));
    }

    /* 3. Call sites and fallbacks: gathered, merged on rank 0.  Rank 0 says
     * whether it could make room; if not, every rank sends nothing. */
    pack_records(&pack, &sites, (size_t)INT_MAX / (size_t)nranks);
    if (pack.failed) {
        collar_warn(STATS, "out of memory: this rank's call sites and fallbacks "
                    "are left out of the report");
    }
    int mysize = pack.failed ? 0 : (int)pack.len;
    int dummy[1] = { 0 };
    if (rank == 0) {
        sizes = calloc((size_t)nranks, sizeof(int));
        displs = calloc((size_t)nranks, sizeof(int));
    }
    MPI_TRY(PMPI_Gather(&mysize, 1, MPI_INT, sizes ? sizes : dummy, 1, MPI_INT, 0, c));
    int room = 0;
    if (rank == 0 && sizes != NULL && displs != NULL) {
        size_t total = 0;
        for (int i = 0; i < nranks; i++) {
            displs[i] = (int)total;
            total += (size_t)sizes[i];
        }
        all = malloc(total ? total : 1);
        room = all != NULL;
    }
    MPI_TRY(PMPI_Bcast(&room, 1, MPI_INT, 0, c));
    if (!room) {
        if (rank == 0) {
            collar_warn(STATS, "out of memory: no statistics report");
        }
        goto out;
    }
    MPI_TRY(PMPI_Gatherv(pack.buf ? pack.buf : (char *)dummy, mysize, MPI_BYTE,
                         all, sizes, displs, MPI_BYTE, 0, c));
    if (rank != 0) {
        goto out;
    }

    /* 4. Rank 0: name, merge, print. */
    r.nranks = nranks;
    r.mode = stats_mode;
    r.depth = collar_cfg.stats_depth;
    r.usum = rep_u[1][0];
    r.umin = rep_u[1][1];
    r.umax = rep_u[1][2];
    r.dsum = rep_d[1][0];
    r.dmin = rep_d[1][1];
    r.dmax = rep_d[1][2];
    r.wall = r.dmax[NKEYS * 2];
    r.lost = r.usum[NKEYS * USUM_PER_KEY];
    r.nosite = r.usum[NKEYS * USUM_PER_KEY + 1];
    pthread_mutex_lock(&stats_lock);
    tuning = strdup(tuning_source ? tuning_source : "built-in");
    pthread_mutex_unlock(&stats_lock);
    if (tuning != NULL) {
        sanitize(tuning);
    }
    r.tuning = tuning ? tuning : "built-in";
    if (collect_records(&r, all, sizes, displs, nranks) != COLLAR_OK) {
        collar_warn(STATS, "out of memory: no statistics report");
        goto out;
    }
    char host[256] = "?";
    if (gethostname(host, sizeof(host) - 1) != 0) {
        strcpy(host, "?");
    }
    host[sizeof(host) - 1] = '\0';
    sanitize(host);
    FILE *mem = open_memstream(&text, &textlen);
    if (mem == NULL) {
        collar_warn(STATS, "out of memory: no statistics report");
        goto out;
    }
    if (collar_cfg.stats_format == 1) {
        print_json(mem, &r, host, (long)getpid());
    } else {
        print_text(mem, &r, host, (long)getpid());
    }
    if (fclose(mem) == 0 && text != NULL) {
        write_report(text, textlen, rank);
    }

out:
    report_free(&r);
    free(tuning);
    free(text);
    free(all);
    free(sizes);
    free(displs);
    free(pack.buf);
    free(sites.slots);
    if (c != MPI_COMM_NULL) {
        PMPI_Comm_free(&c);
    }
    stats_free_all();
}
