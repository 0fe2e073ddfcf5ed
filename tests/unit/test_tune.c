/*
 * collar-tune's decisions (src/tools/tune_decide.c), without MPI: when a
 * measurement stops, what it sums up to, which candidates run at a size,
 * which one wins within the noise, where crossovers are refined and cut.
 */
#include "tools/tune.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define K 1024
#define M (1024 * 1024)

static const cand_t NATIVE = { COLLAR_ALG_NATIVE, 0 };
static const cand_t STAGED = { COLLAR_ALG_STAGED, 0 };
static const cand_t CHUNK1M = { COLLAR_ALG_CHUNKED, 1 * M };
static const cand_t CHUNK4M = { COLLAR_ALG_CHUNKED, 4 * M };

/* Add a measured candidate to a point. */
static void add(point_t *p, cand_t c, double median, double spread)
{
    meas_t *m = &p->meas[p->nmeas++];
    memset(m, 0, sizeof(*m));
    m->cand = c;
    m->reps = 20;
    m->state = MEAS_DONE;
    m->median = median;
    m->min = m->max = median;
    m->spread = spread;
}

static point_t point(size_t bytes)
{
    point_t p;
    memset(&p, 0, sizeof(p));
    p.bytes = bytes;
    p.winner = -1;
    return p;
}

static const cand_t *winner(const point_t *p)
{
    return p->winner >= 0 ? &p->meas[p->winner].cand : NULL;
}

/* m x 2^j, m in {4, 5, 6, 7}: the sizes tune_nice_size picks. */
static int is_nice(size_t s)
{
    while (s > 7 && s % 2 == 0) {
        s /= 2;
    }
    return s >= 4 && s <= 7;
}

/* ---------------------------------------------------------------- noise */

static void test_batch_decision(void)
{
    tune_batch_t b = {
        .reps = 10, .median = 1.0, .prev_median = 0.9, .best = 0, .prune = 1,
        .elapsed = 1, .time_limit = 600, .point_elapsed = 0.1, .point_budget = 1,
    };
    UNIT_CHECK(tune_batch_decision(&b) == GO_ON, "10 reps, median still moving");

    /* Settled: 15 reps, the median moved by 2% (<= 5%). */
    b.reps = SETTLE_REPS;
    b.median = 1.02;
    b.prev_median = 1.0;
    UNIT_CHECK(tune_batch_decision(&b) == STOP_DONE, "moved 2%% after 15 reps");
    /* Moved by 10%: not settled. */
    b.median = 1.10;
    UNIT_CHECK(tune_batch_decision(&b) == GO_ON, "moved 10%%");
    /* Settled only after SETTLE_REPS, however still. */
    b.reps = SETTLE_REPS - BATCH;
    b.median = 1.0;
    UNIT_CHECK(tune_batch_decision(&b) == GO_ON, "10 reps, still median");

    /* Pruned: more than twice the best so far, after MIN_REPS. */
    b.reps = MIN_REPS;
    b.median = 2.5;
    b.prev_median = 0;
    b.best = 1.0;
    UNIT_CHECK(tune_batch_decision(&b) == STOP_PRUNED, "2.5x the best");
    b.median = 1.9;
    UNIT_CHECK(tune_batch_decision(&b) == GO_ON, "1.9x the best");
    b.median = 2.5;
    b.prune = 0;
    UNIT_CHECK(tune_batch_decision(&b) == GO_ON, "no pruning (--compare)");

    /* The candidate's budget, in repetitions or seconds. */
    b.reps = MAX_REPS;
    UNIT_CHECK(tune_batch_decision(&b) == STOP_BUDGET, "MAX_REPS reps");
    b.reps = 10;
    b.point_elapsed = 1.0;
    UNIT_CHECK(tune_batch_decision(&b) == STOP_BUDGET, "a second on one candidate");

    /* The time limit comes first (with a margin to write the table). */
    b.point_elapsed = 0.1;
    b.elapsed = 600;
    UNIT_CHECK(tune_batch_decision(&b) == STOP_TIME, "time limit");
    b.elapsed = 500;
    UNIT_CHECK(tune_batch_decision(&b) == GO_ON, "before the time limit");
}

static void test_summarize(void)
{
    double s[] = { 5, 1, 3, 2, 4 };
    meas_t m;
    memset(&m, 0, sizeof(m));
    tune_summarize(s, 5, STOP_DONE, &m);
    UNIT_CHECK(m.reps == 5 && m.median == 3 && m.min == 1 && m.max == 5,
               "reps %d median %g min %g max %g", m.reps, m.median, m.min, m.max);
    /* Interquartile range over the median: (4 - 2) / 3. */
    UNIT_CHECK(fabs(m.spread - 2.0 / 3.0) < 1e-12, "spread %g", m.spread);
    UNIT_CHECK(m.state == MEAS_DONE, "state %d", m.state);

    double e[] = { 4, 1, 3, 2 };
    tune_summarize(e, 4, STOP_PRUNED, &m);
    UNIT_CHECK(m.median == 2.5 && m.state == MEAS_PRUNED, "even count: median %g", m.median);
    double f[] = { 2, 1, 3 };
    tune_summarize(f, 3, STOP_BUDGET, &m);
    UNIT_CHECK(m.state == MEAS_BUDGET, "budget: state %d", m.state);
    /* Cut short by the time limit with too few repetitions: not counted. */
    double g[] = { 2, 1, 3 };
    tune_summarize(g, 3, STOP_TIME, &m);
    UNIT_CHECK(m.state == MEAS_NONE, "3 reps at the time limit: state %d", m.state);
    double h[] = { 2, 1, 3, 4, 5 };
    tune_summarize(h, 5, STOP_TIME, &m);
    UNIT_CHECK(m.state == MEAS_DONE, "5 reps at the time limit: state %d", m.state);
}

static void test_candidates(void)
{
    opts_t o;
    memset(&o, 0, sizeof(o));
    o.alg_on[COLLAR_ALG_NATIVE] = o.alg_on[COLLAR_ALG_STAGED] = 1;
    o.alg_on[COLLAR_ALG_CHUNKED] = o.alg_on[COLLAR_ALG_RING] = 1;
    o.chunks[0] = 256 * K;
    o.chunks[1] = 1 * M;
    o.chunks[2] = 4 * M;
    o.nchunks = 3;
    cand_t c[MAX_CANDS];
    /* 2 MiB: chunks below the size; ring also. */
    int n = tune_candidates(&o, 2 * M, c);
    UNIT_CHECK(n == 6, "2 MiB: %d candidates", n);
    UNIT_CHECK(n == 6 && tune_same_cand(&c[0], &NATIVE) && tune_same_cand(&c[1], &STAGED)
               && tune_same_cand(&c[3], &CHUNK1M) && c[4].alg == COLLAR_ALG_RING
               && c[5].chunk == 1 * M, "2 MiB: the order");
    /* 100 KiB: no chunked; ring with the smallest segment still runs. */
    n = tune_candidates(&o, 100 * K, c);
    UNIT_CHECK(n == 3 && c[2].alg == COLLAR_ALG_RING && c[2].chunk == 256 * K,
               "100 KiB: %d candidates", n);
    /* Native off (device memory, an MPI that does not take it). */
    o.alg_on[COLLAR_ALG_NATIVE] = 0;
    n = tune_candidates(&o, 100 * K, c);
    UNIT_CHECK(n == 2 && c[0].alg == COLLAR_ALG_STAGED, "no native: %d candidates", n);
}

static void test_pick_winner(void)
{
    /* Staged 2% faster, spreads 1%: within the 3% floor, native (simpler)
     * wins. */
    point_t p = point(64 * K);
    add(&p, NATIVE, 100e-6, 0.01);
    add(&p, STAGED, 98e-6, 0.01);
    p.winner = tune_pick_winner(&p, NULL);
    UNIT_CHECK(tune_same_cand(winner(&p), &NATIVE), "2%% faster is noise");

    /* 10% faster: staged wins. */
    p.meas[1].median = 90e-6;
    p.winner = tune_pick_winner(&p, NULL);
    UNIT_CHECK(tune_same_cand(winner(&p), &STAGED), "10%% faster wins");

    /* 10% faster, but staged's own spread is 15%: noise again. */
    p.meas[1].spread = 0.15;
    p.winner = tune_pick_winner(&p, NULL);
    UNIT_CHECK(tune_same_cand(winner(&p), &NATIVE), "10%% faster with 15%% spread");

    /* A candidate without a measurement never wins. */
    p.meas[1].spread = 0.01;
    p.meas[1].state = MEAS_NONE;
    p.winner = tune_pick_winner(&p, NULL);
    UNIT_CHECK(tune_same_cand(winner(&p), &NATIVE), "unmeasured staged");
    point_t none = point(64 * K);
    UNIT_CHECK(tune_pick_winner(&none, NULL) == -1, "nothing measured");

    /* Chunks: 4 MiB 1% faster than 1 MiB; the previous size's 1 MiB stays. */
    point_t q = point(32 * M);
    add(&q, STAGED, 10e-3, 0.01);
    add(&q, CHUNK1M, 6.0e-3, 0.01);
    add(&q, CHUNK4M, 5.94e-3, 0.01);
    q.winner = tune_pick_winner(&q, NULL);
    UNIT_CHECK(tune_same_cand(winner(&q), &CHUNK4M), "no previous: the fastest chunk");
    q.winner = tune_pick_winner(&q, &CHUNK1M);
    UNIT_CHECK(tune_same_cand(winner(&q), &CHUNK1M), "previous chunk within the noise");
    q.meas[1].median = 7e-3;
    q.winner = tune_pick_winner(&q, &CHUNK1M);
    UNIT_CHECK(tune_same_cand(winner(&q), &CHUNK4M), "previous chunk 18%% slower");
}

static void test_smooth(void)
{
    /* native, staged, native: staged at the middle point only 2% faster
     * than native there, which is noise: native takes it. */
    tuned_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        UNIT_CHECK(0, "out of memory");
        return;
    }
    size_t sizes[3] = { 4 * K, 8 * K, 16 * K };
    for (int i = 0; i < 3; i++) {
        t->points[i] = point(sizes[i]);
        add(&t->points[i], NATIVE, i == 1 ? 102e-6 : 90e-6, 0.01);
        add(&t->points[i], STAGED, i == 1 ? 100e-6 : 100e-6, 0.01);
        t->points[i].winner = i == 1 ? 1 : 0;
    }
    t->npoints = 3;
    tune_smooth_winners(t);
    UNIT_CHECK(tune_same_cand(winner(&t->points[1]), &NATIVE) && t->points[1].smoothed,
               "lone winner within 5%% replaced");
    /* 20% faster is not noise: the lone winner stays. */
    t->points[1].meas[0].median = 120e-6;
    t->points[1].winner = 1;
    t->points[1].smoothed = 0;
    tune_smooth_winners(t);
    UNIT_CHECK(tune_same_cand(winner(&t->points[1]), &STAGED) && !t->points[1].smoothed,
               "lone winner 20%% faster kept");
    free(t);
}

/* ---------------------------------------------------------- doubt */

/* A fake measurement for tune_settle_point: every call returns the next
 * of `answers` for the candidate asked (by algorithm), and counts. */
typedef struct {
    int    calls;
    int    stop_at;             /* call number that says "time limit" (0: none) */
    double median[COLLAR_ALG_COUNT][4];   /* per algorithm, per round */
    double spread[COLLAR_ALG_COUNT][4];
    int    asked[COLLAR_ALG_COUNT];
} fake_t;

static int fake_measure(void *ctx, const cand_t *c, int round, meas_t *out)
{
    fake_t *f = ctx;
    f->calls++;
    if (f->stop_at && f->calls == f->stop_at) {
        return 1;
    }
    f->asked[c->alg]++;
    out->cand = *c;
    out->reps = 20;
    out->state = MEAS_DONE;
    out->median = f->median[c->alg][round];
    out->spread = f->spread[c->alg][round];
    out->min = out->max = out->median;
    return 0;
}

static void test_runner_up(void)
{
    point_t p = point(64 * K);
    add(&p, NATIVE, 100e-6, 0.01);
    add(&p, STAGED, 90e-6, 0.01);
    add(&p, CHUNK1M, 95e-6, 0.01);
    p.winner = 1;
    UNIT_CHECK(tune_runner_up(&p) == 2, "runner-up: the fastest but the winner");
    p.winner = 0;   /* native, simpler, picked within the noise */
    UNIT_CHECK(tune_runner_up(&p) == 1, "runner-up of a slower winner: the fastest");
    p.meas[1].state = MEAS_NONE;
    UNIT_CHECK(tune_runner_up(&p) == 2, "unmeasured: never the runner-up");
    point_t one = point(64 * K);
    add(&one, STAGED, 90e-6, 0.01);
    one.winner = 0;
    UNIT_CHECK(tune_runner_up(&one) == -1, "one candidate: no runner-up");
    UNIT_CHECK(!tune_in_doubt(&one, MAX_SPREAD, NULL), "one candidate: no doubt");

    /* The runner-up is clear of the winner, but a third candidate, slower
     * and very noisy, lies within the noise: it is the contender. */
    point_t q = point(16 * M);
    add(&q, CHUNK4M, 11.1e-3, 0.16);
    add(&q, CHUNK1M, 13.2e-3, 0.08);
    add(&q, STAGED, 36e-3, 0.22);
    add(&q, (cand_t){ COLLAR_ALG_IPC, 0 }, 19.4e-3, 0.79);
    q.winner = 0;
    double noise = 0;
    UNIT_CHECK(tune_runner_up(&q) == 1, "runner-up: chunked 1M");
    UNIT_CHECK(tune_contender(&q, MAX_SPREAD, &noise) == 3 && noise == 0.79,
               "contender: ipc +-79%% (noise %g)", noise);
    q.meas[3].spread = 0.5;
    UNIT_CHECK(tune_contender(&q, MAX_SPREAD, NULL) == -1, "ipc 75%% slower, +-50%%: clear");
}

static void test_doubt(void)
{
    /* staged 120.3 us +-18%, chunked 118.9 us +-22%: within the noise, and
     * the noise above 15%: in doubt. */
    point_t p = point(2 * M);
    add(&p, STAGED, 120.3e-6, 0.18);
    add(&p, CHUNK1M, 118.9e-6, 0.22);
    p.winner = tune_pick_winner(&p, NULL);
    double noise = 0;
    UNIT_CHECK(tune_same_cand(winner(&p), &STAGED), "staged, simpler, within the noise");
    UNIT_CHECK(tune_in_doubt(&p, 0.15, &noise) && fabs(noise - 0.22) < 1e-12,
               "18%% and 22%% spreads, 1%% apart: in doubt (noise %g)", noise);
    /* A bound above the noise: close, but as close as the machine measures. */
    UNIT_CHECK(!tune_in_doubt(&p, 0.25, NULL), "spread below --max-spread: no doubt");
    /* Noisy but far apart: the choice is clear. */
    p.meas[1].median = 300e-6;
    p.winner = tune_pick_winner(&p, NULL);
    UNIT_CHECK(!tune_in_doubt(&p, 0.15, NULL), "2.5x apart with 22%% spread: clear");
    /* Clean and close: both as good. */
    point_t q = point(2 * M);
    add(&q, STAGED, 100e-6, 0.02);
    add(&q, CHUNK1M, 101e-6, 0.02);
    q.winner = tune_pick_winner(&q, NULL);
    UNIT_CHECK(!tune_in_doubt(&q, 0.15, NULL), "1%% apart with 2%% spreads: no doubt");
}

static void test_settle(void)
{
    /* Noisy inputs that stay noisy: repeated twice (winner and runner-up
     * each time), then marked. */
    fake_t f;
    memset(&f, 0, sizeof(f));
    for (int r = 0; r < 4; r++) {
        f.median[COLLAR_ALG_STAGED][r] = 120e-6;
        f.spread[COLLAR_ALG_STAGED][r] = 0.30;
        f.median[COLLAR_ALG_CHUNKED][r] = 118e-6;
        f.spread[COLLAR_ALG_CHUNKED][r] = 0.25;
    }
    tuned_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        UNIT_CHECK(0, "out of memory");
        return;
    }
    point_t *p = &t->points[0];
    *p = point(2 * M);
    add(p, STAGED, 120.3e-6, 0.18);
    add(p, CHUNK1M, 118.9e-6, 0.22);
    add(p, CHUNK4M, 400e-6, 0.01);
    p->winner = tune_pick_winner(p, NULL);
    t->npoints = 1;
    int rc = tune_settle_point(p, NULL, MAX_SPREAD, REPEATS, fake_measure, &f);
    UNIT_CHECK(rc == 0 && p->repeats == REPEATS && f.calls == 2 * REPEATS,
               "noisy: %d repeats, %d measurements", p->repeats, f.calls);
    UNIT_CHECK(f.asked[COLLAR_ALG_STAGED] == REPEATS && f.asked[COLLAR_ALG_CHUNKED] == REPEATS,
               "the winner and the runner-up measured again, not the others");
    /* The repeats were noisier (30%, 25%): the first measurements stand. */
    UNIT_CHECK(p->meas[0].round == 0 && p->meas[0].spread == 0.18
               && p->meas[1].round == 0, "the quieter measurement kept");
    UNIT_CHECK(tune_mark_noise(t, MAX_SPREAD) == 1 && p->noisy, "marked within noise");

    /* A repeat that comes out quieter and clear: one repeat, not marked. */
    memset(&f, 0, sizeof(f));
    f.median[COLLAR_ALG_STAGED][1] = 150e-6;
    f.spread[COLLAR_ALG_STAGED][1] = 0.03;
    f.median[COLLAR_ALG_CHUNKED][1] = 100e-6;
    f.spread[COLLAR_ALG_CHUNKED][1] = 0.04;
    *p = point(2 * M);
    add(p, STAGED, 120.3e-6, 0.18);
    add(p, CHUNK1M, 118.9e-6, 0.22);
    p->winner = tune_pick_winner(p, NULL);
    rc = tune_settle_point(p, NULL, MAX_SPREAD, REPEATS, fake_measure, &f);
    UNIT_CHECK(rc == 0 && p->repeats == 1 && f.calls == 2, "quiet repeat: %d repeats",
               p->repeats);
    UNIT_CHECK(tune_same_cand(winner(p), &CHUNK1M) && p->meas[1].round == 1,
               "the quieter measurement decides: chunked");
    UNIT_CHECK(tune_mark_noise(t, MAX_SPREAD) == 0 && !p->noisy, "not marked");

    /* Clean inputs: no repeat, no mark. */
    memset(&f, 0, sizeof(f));
    *p = point(2 * M);
    add(p, STAGED, 150e-6, 0.02);
    add(p, CHUNK1M, 100e-6, 0.03);
    p->winner = tune_pick_winner(p, NULL);
    rc = tune_settle_point(p, NULL, MAX_SPREAD, REPEATS, fake_measure, &f);
    UNIT_CHECK(rc == 0 && p->repeats == 0 && f.calls == 0, "clean: not repeated");
    UNIT_CHECK(tune_mark_noise(t, MAX_SPREAD) == 0, "clean: not marked");

    /* --repeats 0: marked at once. */
    *p = point(2 * M);
    add(p, STAGED, 120.3e-6, 0.18);
    add(p, CHUNK1M, 118.9e-6, 0.22);
    p->winner = tune_pick_winner(p, NULL);
    rc = tune_settle_point(p, NULL, MAX_SPREAD, 0, fake_measure, &f);
    UNIT_CHECK(rc == 0 && f.calls == 0 && tune_mark_noise(t, MAX_SPREAD) == 1,
               "--repeats 0: no repeat, marked");

    /* The time limit during a repeat: stop there, the point as it stood. */
    memset(&f, 0, sizeof(f));
    f.stop_at = 2;
    f.median[COLLAR_ALG_STAGED][1] = f.median[COLLAR_ALG_CHUNKED][1] = 120e-6;
    f.spread[COLLAR_ALG_STAGED][1] = f.spread[COLLAR_ALG_CHUNKED][1] = 0.30;
    rc = tune_settle_point(p, NULL, MAX_SPREAD, REPEATS, fake_measure, &f);
    UNIT_CHECK(rc == 1 && f.calls == 2 && p->meas[0].spread == 0.18,
               "time limit: stopped (rc %d, %d calls)", rc, f.calls);
    free(t);
}

static void test_candidate_list(void)
{
    opts_t o;
    memset(&o, 0, sizeof(o));
    o.device = 1;
    o.chunks[0] = 256 * K;
    o.chunks[1] = 1 * M;
    o.chunks[2] = 4 * M;
    o.nchunks = 3;
    char buf[256];
    tune_default_algorithms(&o, 0);
    tune_format_candidates(&o, buf, sizeof(buf));
    UNIT_CHECK(strcmp(buf, "staged chunked ring ipc hier nccl; chunks 256K 1M 4M") == 0,
               "device memory: '%s'", buf);
    tune_default_algorithms(&o, 1);
    tune_format_candidates(&o, buf, sizeof(buf));
    UNIT_CHECK(strncmp(buf, "native staged ", 14) == 0, "CUDA-aware MPI: '%s'", buf);
    o.device = 0;
    tune_default_algorithms(&o, 0);
    tune_format_candidates(&o, buf, sizeof(buf));
    UNIT_CHECK(strcmp(buf, "native staged chunked ring; chunks 256K 1M 4M") == 0,
               "host memory: '%s'", buf);
    memset(o.alg_on, 0, sizeof(o.alg_on));
    o.alg_on[COLLAR_ALG_STAGED] = o.alg_on[COLLAR_ALG_IPC] = 1;
    tune_format_candidates(&o, buf, sizeof(buf));
    UNIT_CHECK(strcmp(buf, "staged ipc") == 0, "no chunks without chunked or ring: '%s'",
               buf);
}

/* ----------------------------------------------------------- crossovers */

static void test_nice_size(void)
{
    for (size_t lo = 4; lo < ((size_t)1 << 40); lo *= 3) {
        size_t hi = lo * 2;
        size_t s = tune_nice_size(sqrt((double)lo * (double)hi), lo, hi);
        UNIT_CHECK(s > lo && s <= hi && is_nice(s), "(%zu, %zu]: %zu", lo, hi, s);
    }
    /* Between 8 KiB and 16 KiB the geometric midpoint is 11.3 KiB: 12 KiB
     * (6 x 2^11) is nearer in ratio than 10 KiB. */
    UNIT_CHECK(tune_nice_size(sqrt(8.0 * K * 16 * K), 8 * K, 16 * K) == 12 * K, "12 KiB");
}

static void test_refine(void)
{
    point_t a = point(8 * K), b = point(16 * K);
    add(&a, NATIVE, 10e-6, 0.01);
    add(&a, STAGED, 20e-6, 0.01);
    add(&b, NATIVE, 20e-6, 0.01);
    add(&b, STAGED, 10e-6, 0.01);
    a.winner = 0;
    b.winner = 0;
    UNIT_CHECK(tune_refine_size(&a, &b) == 0, "same winner: nothing to refine");
    b.winner = 1;
    size_t mid = tune_refine_size(&a, &b);
    UNIT_CHECK(mid > 8 * K && mid < 16 * K && mid % 4 == 0 && is_nice(mid),
               "a crossover between 8 and 16 KiB: %zu", mid);
    b.winner = -1;
    UNIT_CHECK(tune_refine_size(&a, &b) == 0, "no winner: nothing to refine");
    /* Chunk sizes are candidates of their own. */
    point_t c = point(32 * M), d = point(64 * M);
    add(&c, CHUNK1M, 1, 0.01);
    add(&d, CHUNK4M, 1, 0.01);
    c.winner = d.winner = 0;
    UNIT_CHECK(tune_refine_size(&c, &d) > 32 * M, "chunk 1M -> 4M is a crossover");
    /* Sizes 4 and 8 bytes: no size of 4-byte elements between them. */
    point_t e = point(4), f = point(8);
    add(&e, NATIVE, 1, 0.01);
    add(&f, STAGED, 1, 0.01);
    e.winner = f.winner = 0;
    UNIT_CHECK(tune_refine_size(&e, &f) == 0, "4 -> 8 bytes: too close");
}

static void test_ranges(void)
{
    tuned_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        UNIT_CHECK(0, "out of memory");
        return;
    }
    /* native, native, (no winner), staged, staged, chunked 1M. */
    size_t sizes[6] = { 4 * K, 8 * K, 12 * K, 16 * K, 1 * M, 4 * M };
    const cand_t *win[6] = { &NATIVE, &NATIVE, NULL, &STAGED, &STAGED, &CHUNK1M };
    for (int i = 0; i < 6; i++) {
        t->points[i] = point(sizes[i]);
        if (win[i] != NULL) {
            add(&t->points[i], *win[i], 1e-6, 0.01);
            t->points[i].winner = 0;
        }
    }
    t->npoints = 6;
    range_t r[MAX_POINTS];
    int n = tune_make_ranges(t, r);
    UNIT_CHECK(n == 3, "%d ranges", n);
    if (n == 3) {
        UNIT_CHECK(r[0].lo == 0 && tune_same_cand(&r[0].cand, &NATIVE)
                   && r[0].first == 4 * K && r[0].last == 8 * K, "native from 0");
        UNIT_CHECK(r[0].hi == r[1].lo && r[1].lo > 8 * K && r[1].lo <= 16 * K
                   && is_nice(r[1].lo), "native -> staged at %zu", r[1].lo);
        UNIT_CHECK(tune_same_cand(&r[1].cand, &STAGED) && r[1].first == 16 * K
                   && r[1].last == 1 * M, "staged over 16K .. 1M");
        UNIT_CHECK(r[1].hi == r[2].lo && r[2].lo > 1 * M && r[2].lo <= 4 * M
                   && is_nice(r[2].lo), "staged -> chunked at %zu", r[2].lo);
        UNIT_CHECK(tune_same_cand(&r[2].cand, &CHUNK1M) && r[2].hi == SIZE_MAX,
                   "chunked to inf");
    }
    free(t);
}

int main(void)
{
    test_batch_decision();
    test_summarize();
    test_candidates();
    test_pick_winner();
    test_smooth();
    test_runner_up();
    test_doubt();
    test_settle();
    test_candidate_list();
    test_nice_size();
    test_refine();
    test_ranges();
    return unit_finish("test_tune");
}
