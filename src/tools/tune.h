/*
 * collar-tune, inside: what its four parts share (docs/tune.md).
 *
 *   collar_tune.c   main and measurement: MPI, the buffers, the loop over
 *                   communicator sizes and message sizes, --compare;
 *   tune_options.c  the command line (--help, parsing, checks);
 *   tune_decide.c   the decisions, without MPI: when a candidate's
 *                   measurement has settled or is pruned, which candidate
 *                   wins a size within the noise, where crossovers are
 *                   refined and cut (unit-tested: tests/unit/test_tune.c);
 *   tune_output.c   the table, CSV, plot and progress outputs.
 */
#ifndef COLLAR_TUNE_H
#define COLLAR_TUNE_H

#include "config.h"
#include "../core/core.h"

#include <stddef.h>
#include <stdio.h>

#define PROG "collar-tune"

/* ----------------------------------------------------------------- limits */

#define MAX_RANKS_VALUES 32
#define MAX_CHUNKS       16
#define MAX_CANDS        (2 + 2 * MAX_CHUNKS + 2 + 1)  /* native, staged,
                                                   * chunked and ring per chunk,
                                                   * ipc, hier, auto */
#define MAX_REPS         400
#define MAX_POINTS       512                    /* per ranks value */
#define MAX_COMPARE      64
#define MIN_REPS         5
#define SETTLE_REPS      15     /* reps before the median may count as settled */
#define BATCH            5
#define SETTLE           0.05   /* median moved by at most 5%: settled */
#define PRUNE_FACTOR     2.0    /* median > 2x the best so far: stop early */
#define MIN_NOISE        0.03   /* a winner must beat the simpler by > 3% */
#define SMOOTH_NOISE     0.05   /* a lone winner must beat its neighbours' by > 5% */
#define MAX_SPREAD       0.15   /* --max-spread: a choice in doubt above it is repeated */
#define REPEATS          2      /* --repeats: how many times at most */

/* ---------------------------------------------------------------- options */

typedef struct {
    const char *output;
    const char *csv;
    const char *plot;
    int         device;              /* --memory device (1) or host (0) */
    int         ranks[MAX_RANKS_VALUES];
    int         nranks;              /* 0: the default list */
    size_t      min, max;
    int         alg_given;           /* --algorithms given */
    int         alg_on[COLLAR_ALG_COUNT];
    size_t      chunks[MAX_CHUNKS];
    int         nchunks;
    double      time_limit;
    int         quick;
    size_t      compare[MAX_COMPARE]; /* --compare SIZES */
    int         ncompare;
    double      max_spread;          /* --max-spread, a fraction */
    int         repeats;             /* --repeats */
    int         list_candidates;     /* --list-candidates */
    const char *note;                /* --note */
} opts_t;

/* One candidate: an algorithm, and a chunk for chunked.  COLLAR_ALG_AUTO is
 * "the rules in force" (--compare only). */
typedef struct {
    collar_alg_t alg;
    size_t       chunk;
} cand_t;

/* One candidate measured at one size (rank 0's copy is the truth). */
typedef struct {
    cand_t cand;
    int    reps;
    int    state;          /* MEAS_* */
    int    round;          /* 0: the first measurement, k: the k-th repeat */
    double median, min, max, spread;  /* seconds; spread = IQR / median */
} meas_t;

enum { MEAS_NONE, MEAS_DONE, MEAS_PRUNED, MEAS_BUDGET };

typedef struct {
    size_t bytes;
    int    refined;        /* a midpoint measured to place a crossover */
    int    nmeas;
    meas_t meas[MAX_CANDS];
    int    winner;         /* index into meas, -1: none */
    int    smoothed;       /* winner replaced by its neighbours' */
    int    repeats;        /* times the winner and its contender were measured
                            * again */
    int    noisy;          /* the winner is within the noise of a contender,
                            * spread above --max-spread: marked in the table */
} point_t;

typedef struct {
    int     ranks;
    int     nodes;          /* nodes the measured communicator spans; 0: unknown */
    int     npoints;
    point_t points[MAX_POINTS];
} tuned_t;

/* Decisions broadcast by rank 0 after each batch. */
enum { GO_ON = 0, STOP_DONE, STOP_PRUNED, STOP_BUDGET, STOP_TIME };

/* A rule of the table: one winner over a range of sizes. */
typedef struct {
    size_t lo, hi;          /* [lo, hi); hi == SIZE_MAX: inf */
    cand_t cand;
    size_t first, last;     /* measured sizes it covers */
} range_t;

/* ------------------------------------------- the program's state (main) */

extern opts_t   opt;
extern char    *cmdline;                 /* the command line, shell-quoted */
extern int      world_rank, world_size;
extern const char *(*lib_version)(void);
extern double   t_start;
extern int      time_up;                 /* the time limit was reached */
extern size_t   time_up_bytes;
extern int      time_up_ranks;
extern FILE    *csv_out;
extern int      progress_tty;
extern double   work_total, work_done;   /* for the progress estimate */
extern tuned_t *tuned;
extern int      ntuned;
extern int      fell_back[COLLAR_ALG_COUNT]; /* candidates not measured: they
                                              * fell back (rank 0) */

/* Leave (MPI_Finalize if needed, free, exit). */
_Noreturn void finish(int code);
/* A bad option: one line with the reason and a hint, exit 2. */
_Noreturn void bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Something here prevents tuning: one line, exit 1. */
_Noreturn void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether this process prints (rank 0, also before MPI_Init). */
int is_lead(void);

/* ------------------------------------------------ options (tune_options.c) */

void parse_options(int argc, char **argv);
/* gnuplot on PATH, or NULL. */
const char *find_gnuplot(void);
int cmp_int(const void *a, const void *b);

/* ------------------------------------------------ decisions (tune_decide.c) */

/* Algorithms that take a chunk (a segment, for ring). */
int tune_takes_chunk(collar_alg_t alg);
int tune_same_cand(const cand_t *a, const cand_t *b);
/* The median of v[0..n) (sorts v); a quantile of sorted v. */
double tune_median(double *v, int n);
double tune_quantile(const double *v, int n, double q);

/* Where one candidate's measurement stands after a batch (rank 0). */
typedef struct {
    int    reps;            /* samples so far */
    double median;          /* of them */
    double prev_median;     /* after the previous batch (0: none) */
    double best;            /* best median at this size so far (0: none) */
    int    prune;           /* stop early when far behind best */
    double elapsed;         /* seconds since the start of the run */
    double time_limit;      /* --time-limit */
    double point_elapsed;   /* seconds on this candidate and size */
    double point_budget;    /* the most for one candidate and size */
} tune_batch_t;

/* GO_ON, or why to stop: STOP_TIME, STOP_PRUNED, STOP_DONE (settled),
 * STOP_BUDGET. */
int tune_batch_decision(const tune_batch_t *b);
/* The measurement of samples[0..n) (sorted here), ended by `decision`. */
void tune_summarize(double *samples, int n, int decision, meas_t *m);
/* The candidates at `bytes`: eligible algorithms, chunks below the size. */
int tune_candidates(const opts_t *o, size_t bytes, cand_t *out);
/* The algorithms considered when --algorithms is not given: on device
 * memory staged, chunked, ring, ipc, hier, nccl, and native when the MPI
 * library takes device pointers; on host memory native, staged, chunked,
 * ring. */
void tune_default_algorithms(opts_t *o, int cuda_aware);
/* The candidate list of o, as the table's header and --list-candidates
 * write it: "staged chunked ring ipc hier nccl; chunks 256K 1M 4M". */
void tune_format_candidates(const opts_t *o, char *buf, size_t len);
/* The winner of a point (index into p->meas, -1: none); prev is the
 * previous size's winner (NULL: none). */
int tune_pick_winner(const point_t *p, const cand_t *prev);
/* The fastest measured candidate other than the winner (-1: none). */
int tune_runner_up(const point_t *p);
/* The candidate that makes the choice at p doubtful (-1: none): the
 * fastest other candidate that lies within the winner's noise, the larger
 * of the two spreads, where that noise is above max_spread.  *noise gets
 * it when not NULL. */
int tune_contender(const point_t *p, double max_spread, double *noise);
/* Whether the choice at p is in doubt: it has a contender. */
int tune_in_doubt(const point_t *p, double max_spread, double *noise);
/* Measure candidate c again into *out (round set by the caller); 0, or
 * nonzero to stop repeating (the time limit: *out not to be used). */
typedef int (*tune_remeasure_fn)(void *ctx, const cand_t *c, int round, meas_t *out);
/* While the choice at p is in doubt, measure the winner and the contender
 * again, up to max_repeats times; each keeps the measurement of the two
 * with the smaller spread, and the winner is picked again.  Returns 0, or
 * what the remeasure function returned to stop. */
int tune_settle_point(point_t *p, const cand_t *prev, double max_spread,
                      int max_repeats, tune_remeasure_fn fn, void *ctx);
/* Mark the points whose final winner is in doubt (p->noisy); returns how
 * many. */
int tune_mark_noise(tuned_t *t, double max_spread);
/* A size that reads well near g, inside (lo, hi]. */
size_t tune_nice_size(double g, size_t lo, size_t hi);
/* The size to measure between two grid points whose winners differ, to
 * place the crossover (0: none, they are too close). */
size_t tune_refine_size(const point_t *lo, const point_t *hi);
/* Lone winners within the noise of their neighbours' take theirs. */
void tune_smooth_winners(tuned_t *t);
/* Adjacent points with the same winner merged into ranges; returns how
 * many (r has room for t->npoints). */
int tune_make_ranges(const tuned_t *t, range_t *r);

/* ------------------------------------------------- outputs (tune_output.c) */

void fmt_cand(const cand_t *c, char *buf, size_t len);
void fmt_duration(double s, char *buf, size_t len);
double work_of(size_t bytes, int ncand);
void progress(int ranks, size_t bytes, const cand_t *c, int round);
void progress_clear(void);
void csv_row(int ranks, size_t bytes, const meas_t *m);
void report_point(int ranks, const point_t *p);
void write_table(double elapsed);
/* The warning naming the sizes whose choice is within the noise (none:
 * nothing printed). */
void warn_noise(void);
void write_plot(void);

#endif
