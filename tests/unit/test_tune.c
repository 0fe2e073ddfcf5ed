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
    test_nice_size();
    test_refine();
    test_ranges();
    return unit_finish("test_tune");
}
