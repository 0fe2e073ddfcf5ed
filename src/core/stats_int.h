/*
 * collar - statistics, inside: what the four parts of COLLAR_STATS share.
 *
 *   stats.c            recording on the hot path: per-thread tables, call
 *                      sites as raw return addresses, fallbacks;
 *   stats_gather.c     the report's collective part: counters reduced to
 *                      rank 0, call sites and fallbacks packed, gathered
 *                      and merged there;
 *   stats_symbolize.c  call-site frames: located in their object on each
 *                      rank, named (function, file:line) on rank 0;
 *   stats_report.c     the text and JSON reports, from one walk over the
 *                      merged counters.
 *
 * Only the files above include this header; the rest of collar sees the
 * collar_stats_* functions of core.h.
 */
#ifndef COLLAR_STATS_INT_H
#define COLLAR_STATS_INT_H

#include "core.h"

#include <stdint.h>
#include <stdio.h>

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

typedef struct {
    char    *what;
    uint64_t count;
} fallback_t;

static inline unsigned key_index(int coll, int alg, int mem)
{
    return ((unsigned)coll * NALG + (unsigned)alg) * NMEM + (unsigned)mem;
}

/* ------------------------------------------------- recording (stats.c) */

/* The recording mode (collar_stats_mode_t) and the seconds since
 * collar_stats_init. */
int collar_stats_mode(void);
double collar_stats_elapsed(void);
/* This rank's tables, merged over its threads into `keys` (NKEYS, zeroed
 * by the caller) and `sites`; calls counted without a site and calls not
 * counted at all are added to *nosite and *lost. */
void collar_stats_snapshot(key_stats_t *keys, site_table_t *sites,
                           uint64_t *nosite, uint64_t *lost);
collar_status_t collar_stats_site_add(site_table_t *tab, void *const *pcs, int npcs,
                                      uint64_t calls, uint64_t bytes, double time);
/* fn(ctx, what, count) for each fallback, under the statistics lock. */
void collar_stats_each_fallback(void (*fn)(void *ctx, const char *what, uint64_t count),
                                void *ctx);
/* A copy of the tuning source ("built-in" when none was set), or NULL. */
char *collar_stats_tuning_copy(void);
/* Free every table: recording stops here. */
void collar_stats_free_all(void);

/* ----------------------------------------- frames (stats_symbolize.c) */

typedef struct {
    const char *obj;
    uint64_t    addr;
    const char *sym;
    char       *name;   /* resolved; owned by the distinct copy */
} frame_t;

/* Where a return address lies, on the rank that recorded it: its object
 * (a path, `exe` for the program, "?" if unknown), the address of the call
 * instruction within that object, and whatever symbol this process can
 * name there ("" if none) into sym[len]. */
void collar_stats_locate(void *pc, const char *exe, const char **obj,
                         uint64_t *addr, char *sym, size_t len);
/* Rank 0: name every distinct frame (sorted by frame_cmp). */
void collar_stats_resolve(frame_t *f, size_t n);
int collar_stats_frame_cmp(const void *a, const void *b);
/* Control characters would break a line of the text report. */
void collar_stats_sanitize(char *s);

/* ------------------------------------ the merged report (rank 0) */

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

/* What rank 0 has after the reductions and the gather. */
typedef struct {
    int         nranks;
    int         mode;
    long        depth;
    double      wall;            /* max over ranks */
    const char *tuning;
    /* Per key; see collar_stats_report (stats_gather.c) for the layouts. */
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

/* ------------------------------------------- output (stats_report.c) */

/* The report, text or JSON (collar_cfg.stats_format == 1). */
void collar_stats_print(FILE *out, const report_t *r, const char *host, long pid,
                        int json);
/* Write the report in one piece to COLLAR_STATS_FILE (or stderr). */
void collar_stats_write(const char *text, size_t len, int rank);

#endif
