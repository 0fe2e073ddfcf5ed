/*
 * collar - statistics: the report's collective part, as mpiP makes it
 * (record_stack.c, report.c), over the communicator and before
 * PMPI_Finalize:
 *   1. merge this rank's thread tables (stats.c);
 *   2. PMPI_Reduce the per-(collective, algorithm, memory kind) counters to
 *      rank 0: sums, minima and maxima over ranks;
 *   3. each rank locates the frames of its call sites in their objects
 *      (stats_symbolize.c) and packs them with its fallback counts;
 *      PMPI_Gather of the sizes, PMPI_Gatherv of the records;
 *   4. rank 0 unpacks, names each distinct frame once (stats_symbolize.c),
 *      adds up call sites with the same name and fallbacks with the same
 *      text, and prints (stats_report.c).
 * Only PMPI_* is called in here, so nothing re-enters collar's wrappers.
 */
#include "config.h"
#include "stats_int.h"

#include <float.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* n bytes into v (left as they are when the buffer is short: bad). */
static void get(unpack_t *u, void *v, size_t n)
{
    if (u->bad || u->len - u->at < n) {
        u->bad = 1;
        return;
    }
    memcpy(v, u->buf + u->at, n);
    u->at += n;
}

static uint64_t get_u64(unpack_t *u) { uint64_t v = 0; get(u, &v, sizeof(v)); return v; }
static double get_f64(unpack_t *u)   { double v = 0;   get(u, &v, sizeof(v)); return v; }

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

/* ------------------------------------------------ this rank, packed */

static int site_by_time(const void *a, const void *b)
{
    const site_t *x = *(const site_t *const *)a, *y = *(const site_t *const *)b;
    return (x->time < y->time) - (x->time > y->time);
}


/*
 * One frame as (object, address in the object, the symbol this process
 * names there).
 */
static void pack_frame(pack_t *p, void *pc, const char *exe)
{
    const char *obj;
    uint64_t addr;
    char sym[512];
    collar_stats_locate(pc, exe, &obj, &addr, sym, sizeof(sym));
    put_str(p, obj);
    put_u64(p, addr);
    put_str(p, sym);
}

typedef struct {
    pack_t  *p;
    size_t   limit;
    uint64_t n;
} pack_limit_t;

static void pack_fallback(void *ctx, const char *what, uint64_t count)
{
    pack_limit_t *fl = ctx;
    size_t before = fl->p->len;
    put_str(fl->p, what);
    put_u64(fl->p, count);
    if (fl->p->len > fl->limit) {
        fl->p->len = before;
    } else {
        fl->n++;
    }
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

    pack_limit_t fl = { p, limit, 0 };
    size_t at = p->len;
    put_u64(p, 0);
    collar_stats_each_fallback(pack_fallback, &fl);
    patch_u64(p, at, fl.n);

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

/* ------------------------------------- merging the records, on rank 0 */

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
                    collar_stats_sanitize(r->falls[nf].what);
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
    qsort(r->frames, nrefs, sizeof(*r->frames), collar_stats_frame_cmp);
    size_t nd = 0;
    for (size_t i = 0; i < nrefs; i++) {
        if (nd == 0 || collar_stats_frame_cmp(&r->frames[nd - 1], &r->frames[i]) != 0) {
            r->frames[nd++] = r->frames[i];
        }
    }
    r->nframes = nd;
    collar_stats_resolve(r->frames, nd);

    /* Each row's name: its frames' names, innermost first. */
    for (size_t i = 0; i < nrows; i++) {
        site_row_t *s = &r->sites[i];
        size_t len = 1;
        const char *names[COLLAR_STATS_MAX_DEPTH];
        for (int f = 0; f < s->nframes; f++) {
            const frame_t *d = bsearch(&r->refs[s->first + (size_t)f], r->frames, nd,
                                       sizeof(frame_t), collar_stats_frame_cmp);
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

/* ------------------------------------------------------------ the report */

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

    double wall = collar_stats_elapsed();

    MPI_Comm c = MPI_COMM_NULL;
    int rank = 0, nranks = 1;
    site_table_t sites = { NULL, 0, 0 };
    uint64_t nosite = 0, lost = 0;
    pack_t pack = { NULL, 0, 0, 0 };
    report_t r;
    memset(&r, 0, sizeof(r));
    int *sizes = NULL, *displs = NULL;
    char *all = NULL;
    char *text = NULL;
    size_t textlen = 0;
    char *tuning = NULL;

    /* The application may have used up its communicators (no context id
     * left): no report then, and no error handler hears of it. */
    if (collar_comm_dup_quiet(comm, &c) != MPI_SUCCESS) {
        collar_warn(STATS, "cannot duplicate the communicator: no statistics report");
        c = MPI_COMM_NULL;
        goto out;
    }
    PMPI_Comm_rank(c, &rank);
    PMPI_Comm_size(c, &nranks);

    /* 1. This rank's tables. */
    memset(rep_keys, 0, sizeof(rep_keys));
    collar_stats_snapshot(rep_keys, &sites, &nosite, &lost);

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
    r.mode = collar_stats_mode();
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
    tuning = collar_stats_tuning_copy();
    if (tuning != NULL) {
        collar_stats_sanitize(tuning);
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
    collar_stats_sanitize(host);
    FILE *mem = open_memstream(&text, &textlen);
    if (mem == NULL) {
        collar_warn(STATS, "out of memory: no statistics report");
        goto out;
    }
    collar_stats_print(mem, &r, host, (long)getpid(), collar_cfg.stats_format == 1);
    if (fclose(mem) == 0 && text != NULL) {
        collar_stats_write(text, textlen, rank);
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
    collar_stats_free_all();
}
