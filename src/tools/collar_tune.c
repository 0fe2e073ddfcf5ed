/*
 * collar-tune: measure the allreduce algorithms on this system and write a
 * tuning table (docs/tune.md).
 *
 *     mpirun -np 4 env LD_PRELOAD=<libdir>/libcollar.so collar-tune --output my.table
 *
 * collar-tune is an MPI program that runs under collar: its MPI_Allreduce
 * calls are collar's, and it switches the algorithm between measurements
 * with collar_set_algorithm() (found with dlsym: collar-tune links only
 * collar's core, for the table functions, not the preloaded library).
 *
 * Control flow: every decision (go on measuring, stop a candidate, refine a
 * crossover, stop at the time limit) is taken by rank 0 of the
 * communicator being tuned and broadcast, so that no rank ever leaves a
 * collective alone.  The other ranks only follow.  collar-tune's own
 * collectives (decisions, points, node keys, times) are PMPI_*, past
 * collar: under the sim device every buffer counts as device memory, and
 * the algorithm forced for the last measurement would take them, on some
 * ranks and not on others.
 */
#define _GNU_SOURCE
#include "tune.h"
#include "../mem/mem.h"
#include "libpath.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ----------------------------------------------------------------- state */

opts_t          opt;
char           *cmdline;
int             world_rank, world_size;
const char   *(*lib_version)(void);
double          t_start;
int             time_up;
size_t          time_up_bytes;
int             time_up_ranks;
FILE           *csv_out;
int             progress_tty;
double          work_total, work_done;
tuned_t        *tuned;
int             ntuned;
int             fell_back[COLLAR_ALG_COUNT];

static int      (*set_algorithm)(const char *name, size_t chunk);
static const char *(*last_algorithm)(void);
static int      (*lib_active)(void);
static const char *(*lib_device)(void);
static float   *sbuf, *rbuf;
/* The buffers' device (cuda: device memory from this program's own copy
 * of the backend, which shares the driver's context with libcollar's);
 * NULL: host memory (malloc). */
static const collar_device_t *buf_dev;
static double   point_budget;            /* seconds per candidate and size */
/* TUNE_TEST_NOISE=US, for tests only (docs/tune.md): rank 0 adds u x US
 * microseconds to each repetition's time, u uniform in [0, 1) from the same
 * fixed sequence in every measurement.  Candidates of like cost then stay
 * within each other's noise (their medians move alike), with a spread
 * near US / (2 x time + US) whatever the machine's own. */
static double   test_noise;              /* seconds */
static unsigned long long test_noise_state;

static void test_noise_reset(void)
{
    test_noise_state = 0x9e3779b97f4a7c15ULL;
}

static double test_noise_add(void)
{
    if (test_noise <= 0) {
        return 0;
    }
    /* xorshift64* */
    test_noise_state ^= test_noise_state >> 12;
    test_noise_state ^= test_noise_state << 25;
    test_noise_state ^= test_noise_state >> 27;
    double u = (double)((test_noise_state * 0x2545f4914f6cdd1dULL) >> 11) * 0x1.0p-53;
    return test_noise * u;
}

/* --------------------------------------------------------------- messages */

/* The rank that prints, before MPI_Init: rank 0 of the launcher's job
 * (Open MPI, MPICH, PMIx), or the process itself when run alone. */
static int launcher_rank(void)
{
    static const char *const vars[] = {
        "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID",
    };
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v) {
            return atoi(v);
        }
    }
    return 0;
}

static int mpi_up;

int is_lead(void)
{
    return mpi_up ? world_rank == 0 : launcher_rank() == 0;
}

/* The preloaded library's device backend. */
static const char *lib_device_name(void)
{
    return lib_device != NULL ? lib_device() : "none";
}

/* Copy with the buffers' device and wait (setup and checks only). */
static int buf_copy(void *dst, const void *src, size_t bytes)
{
    collar_event_t ev;
    if (buf_dev->copy_async(dst, src, bytes, 0, &ev) != COLLAR_OK) {
        return -1;
    }
    collar_status_t st;
    while ((st = buf_dev->event_query(&ev)) == COLLAR_INPROGRESS) {
    }
    return st == COLLAR_OK ? 0 : -1;
}

static void buffers_free(void)
{
    if (buf_dev != NULL) {
        if (sbuf != NULL) {
            buf_dev->dev_free(sbuf);
        }
        if (rbuf != NULL) {
            buf_dev->dev_free(rbuf);
        }
        collar_device_close();
        buf_dev = NULL;
    } else {
        free(sbuf);
        free(rbuf);
    }
    sbuf = rbuf = NULL;
}

/* Two buffers of `bytes`, the send buffer all 1.0f: GPU memory when tuning
 * device memory on the cuda backend, else host memory (the sim device's
 * "device memory" is host memory).  0 on success. */
static int buffers_alloc(size_t bytes)
{
    float *ones = malloc(bytes);
    if (ones == NULL) {
        return -1;
    }
    for (size_t i = 0; i < bytes / sizeof(float); i++) {
        ones[i] = 1.0f;
    }
    if (opt.device && collar_cfg.device != COLLAR_DEVICE_SIM) {
        buf_dev = collar_device_open(collar_cfg.device);
        if (buf_dev->dev_alloc(bytes, (void **)&sbuf) != COLLAR_OK
            || buf_dev->dev_alloc(bytes, (void **)&rbuf) != COLLAR_OK
            || buf_copy(sbuf, ones, bytes) != 0) {
            free(ones);
            return -1;
        }
        free(ones);
        return 0;
    }
    sbuf = ones;
    rbuf = calloc(1, bytes);
    return rbuf != NULL ? 0 : -1;
}

/* The first and last element of the result. */
static void result_ends(int count, float *first, float *last)
{
    if (buf_dev == NULL) {
        *first = rbuf[0];
        *last = rbuf[count - 1];
        return;
    }
    *first = *last = NAN;
    buf_copy(first, rbuf, sizeof(float));
    buf_copy(last, rbuf + count - 1, sizeof(float));
}

void finish(int code)
{
    if (mpi_up) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) {
            MPI_Finalize();
        }
    }
    free(cmdline);
    free(tuned);
    buffers_free();
    exit(code);
}

/* A bad option: one line with the reason and a hint, exit 2. */
void bad_usage(const char *fmt, ...)
{
    if (is_lead()) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, PROG ": ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\nTry '" PROG " --help' for the options.\n");
        va_end(ap);
    }
    finish(2);
}

/* Something here prevents tuning: one line, exit 1. */
void fail(const char *fmt, ...)
{
    if (is_lead()) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, PROG ": ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    finish(1);
}

/* ------------------------------------------------------------- measuring */

static void select_candidate(const cand_t *c)
{
    const char *name = c->alg == COLLAR_ALG_AUTO ? "auto" : collar_alg_name(c->alg);
    if (set_algorithm(name, tune_takes_chunk(c->alg) ? c->chunk : 0) != 0) {
        fail("collar_set_algorithm(\"%s\") failed: is collar active "
             "(COLLAR_DISABLE unset)?", name);
    }
}

/*
 * Measure candidate c at `bytes` on comm (collective over comm).  Rank 0
 * fills *m and decides when to stop; best is the best median so far at this
 * size (0: none), for the early stop (prune != 0).  Returns the last
 * decision (STOP_TIME: the time limit was reached).
 */
static int measure(MPI_Comm comm, size_t bytes, const cand_t *c, double best,
                   int prune, meas_t *m)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    int count = (int)(bytes / sizeof(float));
    double samples[MAX_REPS];
    int n = 0;
    double t0_point = MPI_Wtime();
    double prev_median = 0;
    int decision = GO_ON;
    int size;
    MPI_Comm_size(comm, &size);

    select_candidate(c);
    /* Warm-up: the first calls allocate staging memory, create collar's
     * private communicator, start the device's workers. */
    for (int w = 0; w < (opt.quick ? 1 : 2); w++) {
        MPI_Barrier(comm);
        MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, comm);
    }
    memset(m, 0, sizeof(*m));
    m->cand = *c;
    test_noise_reset();
    /* ipc and hier run only on communicators of one node or of several:
     * a candidate that fell back (alike on every rank) is not measured. */
    const char *ran = last_algorithm != NULL ? last_algorithm() : NULL;
    if (c->alg != COLLAR_ALG_AUTO && ran != NULL
        && strcmp(ran, collar_alg_name(c->alg)) != 0) {
        if (world_rank == 0 && !fell_back[c->alg]) {
            fell_back[c->alg] = 1;
            progress_clear();
            fprintf(stderr, PROG ": %s falls back to %s on %d rank%s here (it "
                    "runs on %s): not measured where it falls back\n",
                    collar_alg_name(c->alg), ran, size, collar_plural(size),
                    c->alg == COLLAR_ALG_HIER ? "communicators that span nodes"
                    : c->alg == COLLAR_ALG_IPC ? "communicators of one node"
                    : c->alg == COLLAR_ALG_NCCL ? "processes that can load NCCL"
                    : "other calls");
        }
        return GO_ON;
    }
    float first, last;
    result_ends(count, &first, &last);
    if (first != (float)size || last != (float)size) {
        /* Only this rank knows: abort the job rather than leave the
         * others waiting in a collective. */
        fprintf(stderr, PROG ": wrong allreduce result with %s at %zu bytes "
                "(%g and %g, expected %d)\n",
                c->alg == COLLAR_ALG_AUTO ? "auto" : collar_alg_name(c->alg),
                bytes, (double)first, (double)last, size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    while (decision == GO_ON) {
        double t[BATCH];
        for (int i = 0; i < BATCH; i++) {
            MPI_Barrier(comm);
            double t0 = MPI_Wtime();
            MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, comm);
            t[i] = MPI_Wtime() - t0;
        }
        /* Per repetition, the slowest rank's time. */
        PMPI_Allreduce(MPI_IN_PLACE, t, BATCH, MPI_DOUBLE, MPI_MAX, comm);
        if (rank == 0) {
            for (int i = 0; i < BATCH && n < MAX_REPS; i++) {
                samples[n++] = t[i] + test_noise_add();
            }
            double sorted[MAX_REPS];
            memcpy(sorted, samples, (size_t)n * sizeof(double));
            double now = MPI_Wtime();
            tune_batch_t b = {
                .reps = n, .median = tune_median(sorted, n), .prev_median = prev_median,
                .best = best, .prune = prune, .elapsed = now - t_start,
                .time_limit = opt.time_limit, .point_elapsed = now - t0_point,
                .point_budget = point_budget,
            };
            decision = tune_batch_decision(&b);
            prev_median = b.median;
        }
        PMPI_Bcast(&decision, 1, MPI_INT, 0, comm);
    }
    if (rank == 0 && n > 0) {
        tune_summarize(samples, n, decision, m);
    }
    return decision;
}

static int measure_point(MPI_Comm comm, int ranks, point_t *p, const cand_t *prev,
                         int prune, int with_auto)
{
    cand_t cs[MAX_CANDS];
    int nc = tune_candidates(&opt, p->bytes, cs);
    if (with_auto) {
        cs[nc++] = (cand_t){ COLLAR_ALG_AUTO, 0 };
    }
    p->nmeas = 0;
    p->winner = -1;
    double best = 0;
    int d = GO_ON;
    for (int i = 0; i < nc; i++) {
        progress(ranks, p->bytes, &cs[i], 0);
        meas_t *m = &p->meas[p->nmeas];
        d = measure(comm, p->bytes, &cs[i], best, prune, m);
        work_done += work_of(p->bytes, 1);
        if (world_rank == 0 && m->state != MEAS_NONE) {
            csv_row(ranks, p->bytes, m);
            if (cs[i].alg != COLLAR_ALG_AUTO && (best == 0 || m->median < best)) {
                best = m->median;
            }
        }
        p->nmeas++;
        if (d == STOP_TIME) {
            break;
        }
    }
    if (world_rank == 0) {
        p->winner = tune_pick_winner(p, prev);
    }
    return d;
}

/* Broadcast a point from rank 0 of comm (so that every rank sees the same
 * winners when deciding what follows). */
static void bcast_point(point_t *p, MPI_Comm comm)
{
    PMPI_Bcast(p, (int)sizeof(*p), MPI_BYTE, 0, comm);
}

static int cmp_point(const void *a, const void *b)
{
    const point_t *x = a, *y = b;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/* What rank 0 tells the others while it repeats a point's measurements:
 * measure this candidate again, or done (and whether the time limit came). */
typedef struct {
    int    go;
    int    time_up;
    cand_t cand;
} repeat_cmd_t;

typedef struct {
    MPI_Comm comm;
    int      ranks;
    size_t   bytes;
} repeat_ctx_t;

/* tune_settle_point's measurement (rank 0): the others follow the command. */
static int remeasure(void *ctx, const cand_t *c, int round, meas_t *out)
{
    repeat_ctx_t *r = ctx;
    repeat_cmd_t cmd = { .go = 1, .cand = *c };
    PMPI_Bcast(&cmd, (int)sizeof(cmd), MPI_BYTE, 0, r->comm);
    work_total += work_of(r->bytes, 1);
    progress(r->ranks, r->bytes, c, round);
    int d = measure(r->comm, r->bytes, c, 0, 0, out);
    work_done += work_of(r->bytes, 1);
    if (d == STOP_TIME) {
        return 1;
    }
    out->round = round;
    csv_row(r->ranks, r->bytes, out);
    return 0;
}

/* The winner and its contender measured again while the choice at p is in
 * doubt (docs/tune.md, "Noise"); 1 when the time limit came meanwhile.
 * Collective over comm. */
static int repeat_point(MPI_Comm comm, int ranks, point_t *p, const cand_t *prev)
{
    repeat_cmd_t cmd = { 0 };
    if (world_rank == 0) {
        repeat_ctx_t ctx = { comm, ranks, p->bytes };
        cmd.time_up = tune_settle_point(p, prev, opt.max_spread, opt.repeats,
                                        remeasure, &ctx) != 0;
        cmd.go = 0;
        PMPI_Bcast(&cmd, (int)sizeof(cmd), MPI_BYTE, 0, comm);
        return cmd.time_up;
    }
    for (;;) {
        PMPI_Bcast(&cmd, (int)sizeof(cmd), MPI_BYTE, 0, comm);
        if (!cmd.go) {
            return cmd.time_up;
        }
        meas_t m;
        measure(comm, p->bytes, &cmd.cand, 0, 0, &m);
    }
}

/*
 * Measure the next point of t at `bytes` (collective over comm; prev: the
 * previous size's winner), repeat it while its choice is in doubt, share it
 * with every rank and keep it.  A point cut short by the time limit is not
 * kept (the candidates it did not measure might have won; the last winner
 * covers the rest): returns NULL then.  A point whose repeats the time
 * limit cut short is kept as it stands, with time_up set.
 */
static point_t *take_point(MPI_Comm comm, tuned_t *t, size_t bytes, int refined,
                           const cand_t *prev)
{
    point_t *p = &t->points[t->npoints];
    memset(p, 0, sizeof(*p));
    p->bytes = bytes;
    p->refined = refined;
    int d = measure_point(comm, t->ranks, p, prev, 1, 0);
    int cut = d == STOP_TIME || repeat_point(comm, t->ranks, p, prev);
    bcast_point(p, comm);
    if (cut) {
        time_up = 1;
        time_up_bytes = p->bytes;
        time_up_ranks = t->ranks;
        if (d == STOP_TIME) {
            return NULL;
        }
    }
    report_point(t->ranks, p);
    t->npoints++;
    return p;
}

static void tune_ranks(MPI_Comm comm, tuned_t *t)
{
    const double step = opt.quick ? 4 : 2;
    size_t bytes = opt.min;
    const cand_t *prev = NULL;
    point_t *last_grid = NULL;
    t->npoints = 0;
    for (;;) {
        point_t *p = take_point(comm, t, bytes / 4 * 4, 0, prev);
        if (p == NULL || time_up) {
            break;
        }
        /* A crossover between this size and the previous grid size: measure
         * the geometric midpoint once. */
        size_t mid = last_grid != NULL ? tune_refine_size(last_grid, p) : 0;
        if (mid != 0 && t->npoints < MAX_POINTS) {
            work_total += work_of(mid, tune_candidates(&opt, mid, (cand_t[MAX_CANDS]){{0}}));
            if (take_point(comm, t, mid, 1, &last_grid->meas[last_grid->winner].cand) == NULL
                || time_up) {
                break;
            }
        }
        last_grid = p;
        /* p may have moved in the array order only after sorting, which
         * happens at the end: pointers stay valid until then. */
        if (p->winner >= 0) {
            prev = &p->meas[p->winner].cand;
        }
        if (bytes >= opt.max || t->npoints >= MAX_POINTS - 1) {
            break;
        }
        double next = (double)bytes * step;
        bytes = next >= (double)opt.max ? opt.max : (size_t)next;
    }
    qsort(t->points, (size_t)t->npoints, sizeof(point_t), cmp_point);
    if (world_rank == 0) {
        tune_smooth_winners(t);
        tune_mark_noise(t, opt.max_spread);
    }
}

/* This process's node as collar sees it (src/core/comm.c): its lowest
 * rank in MPI_COMM_WORLD among the ranks that share memory
 * (MPI_COMM_TYPE_SHARED; -1 when the MPI library cannot say), and its
 * pseudo-node of COLLAR_SIM_NODE_SIZE consecutive ranks.  Found once, by
 * every rank of MPI_COMM_WORLD together (world_node_key), before any
 * communicator is split off. */
static long long node_key[2] = { -1, 0 };

static void world_node_key(void)
{
    MPI_Comm shared = MPI_COMM_NULL;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank,
                            MPI_INFO_NULL, &shared) == MPI_SUCCESS) {
        int leader = -1;
        if (PMPI_Allreduce(&world_rank, &leader, 1, MPI_INT, MPI_MIN, shared)
            == MPI_SUCCESS) {
            node_key[0] = leader;
        }
        MPI_Comm_free(&shared);
    }
    if (collar_cfg.sim_node_size > 0) {
        node_key[1] = world_rank / collar_cfg.sim_node_size;
    }
}

/* The node shape of `comm` from its ranks' node keys; shape->nodes 0 when
 * the MPI library cannot say.  Collective over comm only: the ranks
 * outside it wait elsewhere. */
static void comm_shape(MPI_Comm comm, collar_select_key_t *shape)
{
    int size;
    shape->nodes = shape->ppn_min = shape->ppn_max = 0;
    MPI_Comm_size(comm, &size);
    long long *keys = malloc(2 * (size_t)size * sizeof(long long));
    int ok = keys != NULL, all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
        free(keys);
        return;
    }
    PMPI_Allgather(node_key, 2, MPI_LONG_LONG, keys, 2, MPI_LONG_LONG, comm);
    int nodes = 0, ppn_min = size, ppn_max = 0;
    for (int i = 0; i < size; i++) {
        if (keys[2 * i] < 0) {
            free(keys);     /* some rank's node is unknown: none is known */
            return;
        }
        int first = 1, ranks = 0;
        for (int j = 0; j < size; j++) {
            const int same = keys[2 * j] == keys[2 * i]
                             && keys[2 * j + 1] == keys[2 * i + 1];
            first &= !(same && j < i);
            ranks += same;
        }
        if (first) {
            nodes++;
            ppn_min = ranks < ppn_min ? ranks : ppn_min;
            ppn_max = ranks > ppn_max ? ranks : ppn_max;
        }
    }
    free(keys);
    shape->nodes = nodes;
    shape->ppn_min = ppn_min;
    shape->ppn_max = ppn_max;
}

/* ---------------------------------------------------------------- compare */

/* What the rules in force choose (COLLAR_TUNING_FILE only; else NULL). */
static int table_choice(int ranks, const collar_select_key_t *shape,
                        size_t bytes, cand_t *out)
{
    const char *file = getenv("COLLAR_TUNING_FILE");
    if (file == NULL || !*file) {
        return 0;
    }
    collar_table_t t;
    char err[1024];
    if (collar_table_load(file, &t, err, sizeof(err)) != COLLAR_OK) {
        return 0;
    }
    const collar_mem_kind_t mem = opt.device ? COLLAR_MEM_DEVICE : COLLAR_MEM_HOST;
    const collar_select_key_t key = {
        .coll = COLLAR_COLL_ALLREDUCE, .mem = mem, .comm_size = ranks,
        .bytes = bytes, .nodes = shape->nodes, .ppn_min = shape->ppn_min,
        .ppn_max = shape->ppn_max,
    };
    const collar_rule_t *r = collar_table_match_key(&t, &key, mem);
    int found = r != NULL;
    if (found) {
        out->alg = r->alg;
        out->chunk = tune_takes_chunk(r->alg) ? (r->chunk ? r->chunk : (size_t)1 << 20) : 0;
    }
    collar_table_free(&t);
    return found;
}

static void compare_ranks(MPI_Comm comm, int ranks, double *max_regret,
                          char *max_at, size_t max_at_len)
{
    collar_select_key_t shape;
    comm_shape(comm, &shape);
    for (int i = 0; i < opt.ncompare; i++) {
        point_t *p = calloc(1, sizeof(point_t));
        if (p == NULL) {
            fail("out of memory");
        }
        p->bytes = opt.compare[i] / 4 * 4;
        int d = measure_point(comm, ranks, p, NULL, 0, 1);
        if (world_rank == 0 && p->nmeas > 0) {
            progress_clear();
            int best = -1, autom = -1, chosen = -1;
            cand_t tc;
            int have_tc = table_choice(ranks, &shape, p->bytes, &tc);
            for (int m = 0; m < p->nmeas; m++) {
                const meas_t *x = &p->meas[m];
                if (x->state == MEAS_NONE) {
                    continue;
                }
                if (x->cand.alg == COLLAR_ALG_AUTO) {
                    autom = m;
                    continue;
                }
                if (best < 0 || x->median < p->meas[best].median) {
                    best = m;
                }
                if (have_tc && tune_same_cand(&x->cand, &tc)) {
                    chosen = m;
                }
            }
            char s[32], bw[64], cw[64] = "?";
            collar_format_size(p->bytes, s, sizeof(s));
            if (best >= 0) {
                fmt_cand(&p->meas[best].cand, bw, sizeof(bw));
                if (have_tc) {
                    fmt_cand(&tc, cw, sizeof(cw));
                }
                double ref = chosen >= 0 ? p->meas[chosen].median
                           : autom >= 0 ? p->meas[autom].median : 0;
                double regret = ref / p->meas[best].median - 1;
                double regret_auto = autom >= 0 ? p->meas[autom].median
                                                  / p->meas[best].median - 1 : 0;
                printf("%5d %8s  %-20s %10.1f  %-20s %10.1f %10.1f  %+7.1f%% %+7.1f%%\n",
                       ranks, s, bw, p->meas[best].median * 1e6, cw,
                       chosen >= 0 ? p->meas[chosen].median * 1e6 : 0.0,
                       autom >= 0 ? p->meas[autom].median * 1e6 : 0.0,
                       100 * regret, 100 * regret_auto);
                fflush(stdout);
                if (regret > *max_regret) {
                    *max_regret = regret;
                    snprintf(max_at, max_at_len, "%d rank%s, %s", ranks,
                             collar_plural(ranks), s);
                }
            }
        }
        free(p);
        if (d == STOP_TIME) {
            time_up = 1;
            break;
        }
    }
}

/* ------------------------------------------------------------------- main */

static void check_preloaded(void)
{
    set_algorithm = (int (*)(const char *, size_t))dlsym(RTLD_DEFAULT,
                                                         "collar_set_algorithm");
    lib_version = (const char *(*)(void))dlsym(RTLD_DEFAULT, "collar_version");
    lib_active = (int (*)(void))dlsym(RTLD_DEFAULT, "collar_active");
    last_algorithm = (const char *(*)(void))dlsym(RTLD_DEFAULT, "collar_last_algorithm");
    lib_device = (const char *(*)(void))dlsym(RTLD_DEFAULT, "collar_device_name");
    if (set_algorithm == NULL || lib_active == NULL) {
        char lib[4096];
        collar_tool_library_path(lib, sizeof(lib));
        fail("collar-tune must run with libcollar preloaded: "
             "LD_PRELOAD=%s", lib);
    }
}

static void idle_barrier(void)
{
    MPI_Request req;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    while (!done) {
        struct timespec ts = { 0, 1000000 };   /* 1 ms */
        nanosleep(&ts, NULL);
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    }
}

static void default_ranks(void)
{
    if (opt.nranks > 0) {
        qsort(opt.ranks, (size_t)opt.nranks, sizeof(int), cmp_int);
        for (int i = 0; i < opt.nranks; i++) {
            if (opt.ranks[i] > world_size) {
                bad_usage("--ranks %d: the job has only %d rank%s", opt.ranks[i],
                          world_size, world_size == 1 ? "" : "s");
            }
        }
        return;
    }
    for (int k = 2; k < world_size && opt.nranks < MAX_RANKS_VALUES - 1; k *= 2) {
        opt.ranks[opt.nranks++] = k;
    }
    opt.ranks[opt.nranks++] = world_size;
}

/* The candidates: the defaults (by memory kind and whether the MPI library
 * takes device pointers) or --algorithms, checked. */
static void choose_algorithms(int cuda_aware)
{
    if (!opt.alg_given) {
        tune_default_algorithms(&opt, cuda_aware);
    } else if (!opt.device && (opt.alg_on[COLLAR_ALG_IPC] || opt.alg_on[COLLAR_ALG_HIER]
                               || opt.alg_on[COLLAR_ALG_NCCL])) {
        bad_usage("--algorithms ipc, hier, nccl: device memory only (--memory device)");
    } else if (opt.device && opt.alg_on[COLLAR_ALG_NATIVE] && !cuda_aware) {
        bad_usage("--algorithms native: not eligible on device memory, the MPI "
                  "library does not take device pointers (COLLAR_MPI_CUDA_AWARE)");
    }
}

/* --list-candidates: the candidate list this command line considers, as
 * the table's header writes it; without collar, and without MPI unless
 * the MPI library must say whether it takes device pointers. */
_Noreturn static void list_candidates(int argc, char **argv)
{
    collar_config_load_quiet(1);
    int cuda_aware = 0;
    if (opt.device && collar_cfg.mpi_cuda_aware == 0
        && (!opt.alg_given || opt.alg_on[COLLAR_ALG_NATIVE])) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
        mpi_up = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    }
    if (opt.device) {
        cuda_aware = collar_mpi_cuda_aware();
    }
    choose_algorithms(cuda_aware);
    if (is_lead()) {
        char line[1024];
        tune_format_candidates(&opt, line, sizeof(line));
        printf("candidates: %s\n", line);
    }
    finish(0);
}

int main(int argc, char **argv)
{
    parse_options(argc, argv);
    if (opt.list_candidates) {
        list_candidates(argc, argv);
    }
    check_preloaded();
    const char *tn = getenv("TUNE_TEST_NOISE");
    if (tn != NULL && *tn) {
        test_noise = atof(tn) * 1e-6;
    }

    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    mpi_up = 1;
    t_start = MPI_Wtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    /* The same configuration collar read (quietly: collar reported it). */
    collar_config_load_quiet(1);
    world_node_key();
    if (!lib_active()) {
        fail("collar is not active in this process (COLLAR_DISABLE=1?): there "
             "is nothing to tune");
    }
    if (opt.device && collar_cfg.device != COLLAR_DEVICE_SIM
        && strcmp(lib_device_name(), "cuda") != 0) {
        fail("--memory device needs device memory, and collar runs without a "
             "device here (COLLAR_DEVICE=%s, backend %s): use a GPU machine, "
             "set COLLAR_DEVICE=sim to tune the modelled device, or use "
             "--memory host", getenv("COLLAR_DEVICE") ? getenv("COLLAR_DEVICE") : "auto",
             lib_device_name());
    }
    if (!opt.device && collar_cfg.device == COLLAR_DEVICE_SIM) {
        fail("--memory host: under COLLAR_DEVICE=sim every buffer counts as "
             "device memory; tune host memory with COLLAR_DEVICE=none");
    }
    choose_algorithms(collar_mpi_cuda_aware());
    default_ranks();
    point_budget = opt.quick ? 0.2 : 1.0;
    progress_tty = world_rank == 0 && isatty(STDERR_FILENO);

    /* Early checks of the output files (rank 0), broadcast. */
    int ok = 1;
    char why[4200] = "";
    if (world_rank == 0 && opt.output) {
        FILE *f = fopen(opt.output, "a");
        if (f == NULL) {
            ok = 0;
            snprintf(why, sizeof(why), "cannot write %s: %s", opt.output, strerror(errno));
        } else {
            fclose(f);
            struct stat st;
            if (stat(opt.output, &st) == 0 && st.st_size == 0) {
                remove(opt.output);   /* created just now: not a table yet */
            }
        }
    }
    if (world_rank == 0 && ok && opt.csv) {
        csv_out = fopen(opt.csv, "w");
        if (csv_out == NULL) {
            ok = 0;
            snprintf(why, sizeof(why), "cannot write %s: %s", opt.csv, strerror(errno));
        } else {
            fprintf(csv_out, "ranks,bytes,algorithm,chunk,reps,median_us,min_us,"
                    "max_us,spread,round\n");
        }
    }
    PMPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
        fail("%s", why);
    }

    size_t top = opt.max;
    if (opt.ncompare > 0 && opt.compare[opt.ncompare - 1] > top) {
        top = opt.compare[opt.ncompare - 1];
    }
    if (buffers_alloc(top) != 0) {
        fail("cannot allocate two %s buffers of %zu bytes",
             buf_dev != NULL ? "device" : "host", top);
    }

    /* Planned work, for the progress estimate. */
    for (int k = 0; k < opt.nranks; k++) {
        if (opt.ncompare) {
            for (int i = 0; i < opt.ncompare; i++) {
                cand_t cs[MAX_CANDS];
                work_total += work_of(opt.compare[i], tune_candidates(&opt, opt.compare[i], cs) + 1);
            }
            continue;
        }
        size_t b = opt.min;
        for (;;) {
            cand_t cs[MAX_CANDS];
            work_total += work_of(b, tune_candidates(&opt, b, cs));
            if (b >= opt.max) {
                break;
            }
            double nb = (double)b * (opt.quick ? 4 : 2);
            b = nb >= (double)opt.max ? opt.max : (size_t)nb;
        }
    }

    tuned = calloc((size_t)opt.nranks, sizeof(tuned_t));
    if (tuned == NULL) {
        fail("out of memory");
    }
    double max_regret = -1;
    char max_at[64] = "";
    if (opt.ncompare > 0 && world_rank == 0) {
        printf("ranks    bytes  best candidate          best_us  table's choice"
               "         chosen_us    auto_us   regret  (auto)\n");
    }
    for (int k = 0; k < opt.nranks; k++) {
        int ranks = opt.ranks[k];
        MPI_Comm comm;
        MPI_Comm_split(MPI_COMM_WORLD, world_rank < ranks ? 0 : MPI_UNDEFINED,
                       world_rank, &comm);
        if (comm != MPI_COMM_NULL) {
            if (opt.ncompare > 0) {
                compare_ranks(comm, ranks, &max_regret, max_at, sizeof(max_at));
            } else {
                tuned[ntuned].ranks = ranks;
                collar_select_key_t shape;
                comm_shape(comm, &shape);
                tuned[ntuned].nodes = shape.nodes;
                tune_ranks(comm, &tuned[ntuned]);
            }
            /* Back to the rules in force for whatever else runs. */
            select_candidate(&(cand_t){ COLLAR_ALG_AUTO, 0 });
            MPI_Comm_free(&comm);
        }
        ntuned++;
        /* Ranks outside wait here, asleep rather than spinning in a
         * barrier: they would take CPU from the ranks being measured. */
        idle_barrier();
        /* Rank 0 says whether to go on. */
        PMPI_Bcast(&time_up, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (time_up) {
            break;
        }
    }
    progress_clear();
    double elapsed = MPI_Wtime() - t_start;
    if (world_rank == 0) {
        if (opt.ncompare > 0) {
            if (max_regret >= 0) {
                printf("max regret: %.1f%% (%s)%s\n", 100 * max_regret, max_at,
                       time_up ? " (incomplete: time limit reached)" : "");
            }
        } else {
            write_table(elapsed);
            if (opt.plot) {
                write_plot();
            }
            warn_noise();
        }
    }
    if (csv_out) {
        fclose(csv_out);
    }
    finish(0);
    return 0;
}
