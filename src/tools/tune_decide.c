/*
 * collar-tune: the decisions, apart from MPI and the clock, so that they
 * can be tested alone (tests/unit/test_tune.c).
 *
 * Noise: a candidate is measured in batches until its median settles (moved
 * by at most 5% after 15 repetitions), falls far behind the best so far,
 * uses its time budget, or the run's time limit comes.  A winner must beat
 * a simpler algorithm (native < staged < chunked < ring < ipc < hier < nccl) by more than the
 * noise: the larger of the two spreads (interquartile range / median), at
 * least 3%.
 * Doubt: where the winner and another candidate (a contender) lie within
 * each other's noise and that noise is above --max-spread (15%), the
 * choice is a coin toss: both are measured again, up to --repeats (2) more times, each keeping the
 * measurement with the smaller spread (the machine's quieter moment), until
 * the doubt goes; a choice still in doubt is marked in the table and named
 * in a warning.
 * Crossovers: where the winners of two grid sizes differ, the geometric
 * midpoint is measured once (refinement), and the rule boundary is put at
 * a size that reads well between the two sizes that won differently.
 */
#include "tune.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int tune_takes_chunk(collar_alg_t alg)
{
    return alg == COLLAR_ALG_CHUNKED || alg == COLLAR_ALG_RING;
}

int tune_same_cand(const cand_t *a, const cand_t *b)
{
    return a->alg == b->alg && (!tune_takes_chunk(a->alg) || a->chunk == b->chunk);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tune_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Quantile of sorted v (linear interpolation). */
double tune_quantile(const double *v, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)pos;
    if (i >= n - 1) {
        return v[n - 1];
    }
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

int tune_batch_decision(const tune_batch_t *b)
{
    if (b->elapsed >= b->time_limit * 0.97 - 0.05) {
        return STOP_TIME;
    }
    if (b->reps >= MIN_REPS && b->prune && b->best > 0
        && b->median > PRUNE_FACTOR * b->best) {
        return STOP_PRUNED;
    }
    if (b->reps >= SETTLE_REPS && b->prev_median > 0
        && fabs(b->median - b->prev_median) <= SETTLE * b->prev_median) {
        return STOP_DONE;
    }
    if (b->reps >= MAX_REPS || b->point_elapsed >= b->point_budget) {
        return STOP_BUDGET;
    }
    return GO_ON;
}

void tune_summarize(double *samples, int n, int decision, meas_t *m)
{
    qsort(samples, (size_t)n, sizeof(double), cmp_double);
    m->reps = n;
    m->median = tune_median(samples, n);
    m->min = samples[0];
    m->max = samples[n - 1];
    m->spread = m->median > 0 ? (tune_quantile(samples, n, 0.75)
                                 - tune_quantile(samples, n, 0.25)) / m->median : 0;
    m->state = decision == STOP_PRUNED ? MEAS_PRUNED
             : decision == STOP_BUDGET ? MEAS_BUDGET : MEAS_DONE;
    if (decision == STOP_TIME && n < MIN_REPS) {
        m->state = MEAS_NONE;   /* too few to count */
    }
}

/* The candidates at `bytes`: eligible algorithms, chunks below the size. */
int tune_candidates(const opts_t *o, size_t bytes, cand_t *out)
{
    int n = 0;
    if (o->alg_on[COLLAR_ALG_NATIVE]) {
        out[n++] = (cand_t){ COLLAR_ALG_NATIVE, 0 };
    }
    if (o->alg_on[COLLAR_ALG_STAGED]) {
        out[n++] = (cand_t){ COLLAR_ALG_STAGED, 0 };
    }
    if (o->alg_on[COLLAR_ALG_CHUNKED]) {
        for (int i = 0; i < o->nchunks; i++) {
            if (o->chunks[i] < bytes) {
                out[n++] = (cand_t){ COLLAR_ALG_CHUNKED, o->chunks[i] };
            }
        }
    }
    /* ring cuts each rank's block into segments: a segment as large as the
     * message is still a ring, so the smallest chunk always runs. */
    if (o->alg_on[COLLAR_ALG_RING]) {
        for (int i = 0; i < o->nchunks; i++) {
            if (o->chunks[i] < bytes || i == 0) {
                out[n++] = (cand_t){ COLLAR_ALG_RING, o->chunks[i] };
            }
        }
    }
    /* ipc and hier: whole messages, no chunk of their own to tune. */
    if (o->alg_on[COLLAR_ALG_IPC]) {
        out[n++] = (cand_t){ COLLAR_ALG_IPC, 0 };
    }
    if (o->alg_on[COLLAR_ALG_HIER]) {
        out[n++] = (cand_t){ COLLAR_ALG_HIER, 0 };
    }
    /* nccl: whole messages, NCCL's own pipelining. */
    if (o->alg_on[COLLAR_ALG_NCCL]) {
        out[n++] = (cand_t){ COLLAR_ALG_NCCL, 0 };
    }
    return n;
}

void tune_default_algorithms(opts_t *o, int cuda_aware)
{
    memset(o->alg_on, 0, sizeof(o->alg_on));
    o->alg_on[COLLAR_ALG_NATIVE] = !o->device || cuda_aware;
    o->alg_on[COLLAR_ALG_STAGED] = 1;
    o->alg_on[COLLAR_ALG_CHUNKED] = 1;
    o->alg_on[COLLAR_ALG_RING] = 1;
    /* Whichever fits the communicators tuned: ipc on one node, hier across
     * nodes (the other falls back and is not measured). */
    o->alg_on[COLLAR_ALG_IPC] = o->device;
    o->alg_on[COLLAR_ALG_HIER] = o->device;
    /* Where NCCL can be loaded (it falls back, unmeasured, elsewhere). */
    o->alg_on[COLLAR_ALG_NCCL] = o->device;
}

void tune_format_candidates(const opts_t *o, char *buf, size_t len)
{
    /* The order of tune_candidates. */
    static const collar_alg_t order[] = {
        COLLAR_ALG_NATIVE, COLLAR_ALG_STAGED, COLLAR_ALG_CHUNKED, COLLAR_ALG_RING,
        COLLAR_ALG_IPC, COLLAR_ALG_HIER, COLLAR_ALG_NCCL,
    };
    size_t n = 0;
    int chunked = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < sizeof(order) / sizeof(order[0]) && n < len; k++) {
        if (o->alg_on[order[k]]) {
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? " " : "",
                                  collar_alg_name(order[k]));
            chunked |= tune_takes_chunk(order[k]);
        }
    }
    for (int i = 0; chunked && i < o->nchunks && n < len; i++) {
        char s[32];
        collar_format_size(o->chunks[i], s, sizeof(s));
        n += (size_t)snprintf(buf + n, len - n, "%s %s", i ? "" : "; chunks", s);
    }
}

/*
 * The winner of a point (rank 0): the fastest candidate, unless a simpler
 * algorithm (native < staged < chunked < ring < ipc < hier < nccl) is within the noise of it: the
 * larger of the two spreads, at least 3%.  Among chunks, the previous
 * size's chunk is kept when it is within the noise of the best chunk.
 */
int tune_pick_winner(const point_t *p, const cand_t *prev)
{
    int best = -1;
    for (int i = 0; i < p->nmeas; i++) {
        const meas_t *m = &p->meas[i];
        if (m->state != MEAS_NONE && (best < 0 || m->median < p->meas[best].median)) {
            best = i;
        }
    }
    if (best < 0) {
        return -1;
    }
    const meas_t *b = &p->meas[best];
    static const collar_alg_t order[] = {
        COLLAR_ALG_NATIVE, COLLAR_ALG_STAGED, COLLAR_ALG_CHUNKED, COLLAR_ALG_RING,
        COLLAR_ALG_IPC, COLLAR_ALG_HIER, COLLAR_ALG_NCCL,
    };
    for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
        int cb = -1;
        for (int i = 0; i < p->nmeas; i++) {
            const meas_t *m = &p->meas[i];
            if (m->state != MEAS_NONE && m->cand.alg == order[k]
                && (cb < 0 || m->median < p->meas[cb].median)) {
                cb = i;
            }
        }
        if (cb < 0) {
            continue;
        }
        if (tune_takes_chunk(order[k]) && prev != NULL && prev->alg == order[k]) {
            for (int i = 0; i < p->nmeas; i++) {
                const meas_t *m = &p->meas[i];
                double noise = fmax(MIN_NOISE, fmax(m->spread, p->meas[cb].spread));
                if (m->state != MEAS_NONE && tune_same_cand(&m->cand, prev)
                    && m->median <= p->meas[cb].median * (1 + noise)) {
                    cb = i;
                }
            }
        }
        const meas_t *c = &p->meas[cb];
        double noise = fmax(MIN_NOISE, fmax(c->spread, b->spread));
        if (c->median <= b->median * (1 + noise)) {
            return cb;
        }
    }
    return best;
}

int tune_runner_up(const point_t *p)
{
    int r = -1;
    for (int i = 0; i < p->nmeas; i++) {
        const meas_t *m = &p->meas[i];
        if (i != p->winner && m->state != MEAS_NONE && m->cand.alg != COLLAR_ALG_AUTO
            && (r < 0 || m->median < p->meas[r].median)) {
            r = i;
        }
    }
    return r;
}

int tune_contender(const point_t *p, double max_spread, double *noise)
{
    if (p->winner < 0) {
        return -1;
    }
    const meas_t *w = &p->meas[p->winner];
    int c = -1;
    double cn = 0;
    for (int i = 0; i < p->nmeas; i++) {
        const meas_t *m = &p->meas[i];
        if (i == p->winner || m->state == MEAS_NONE || m->cand.alg == COLLAR_ALG_AUTO) {
            continue;
        }
        double n = fmax(w->spread, m->spread);
        double lo = fmin(w->median, m->median), hi = fmax(w->median, m->median);
        if (n > max_spread && hi <= lo * (1 + n)
            && (c < 0 || m->median < p->meas[c].median)) {
            c = i;
            cn = n;
        }
    }
    if (c >= 0 && noise != NULL) {
        *noise = cn;
    }
    return c;
}

int tune_in_doubt(const point_t *p, double max_spread, double *noise)
{
    return tune_contender(p, max_spread, noise) >= 0;
}

int tune_settle_point(point_t *p, const cand_t *prev, double max_spread,
                      int max_repeats, tune_remeasure_fn fn, void *ctx)
{
    while (p->repeats < max_repeats && tune_in_doubt(p, max_spread, NULL)) {
        int pair[2] = { p->winner, tune_contender(p, max_spread, NULL) };
        p->repeats++;
        for (int k = 0; k < 2; k++) {
            meas_t m;
            memset(&m, 0, sizeof(m));
            int rc = fn(ctx, &p->meas[pair[k]].cand, p->repeats, &m);
            if (rc != 0) {
                return rc;
            }
            m.round = p->repeats;
            /* The quieter of the two measurements stands for the
             * candidate. */
            if (m.state != MEAS_NONE && m.spread < p->meas[pair[k]].spread) {
                p->meas[pair[k]] = m;
            }
        }
        p->winner = tune_pick_winner(p, prev);
    }
    return 0;
}

int tune_mark_noise(tuned_t *t, double max_spread)
{
    int n = 0;
    for (int i = 0; i < t->npoints; i++) {
        point_t *p = &t->points[i];
        p->noisy = tune_in_doubt(p, max_spread, NULL);
        n += p->noisy;
    }
    return n;
}

/* A size that reads well: m x 2^j with m in {4,5,6,7} (a power of two or a
 * K multiple from 4K), the nearest to g (in ratio) inside (lo, hi]; g
 * rounded to 4 bytes if there is none. */
size_t tune_nice_size(double g, size_t lo, size_t hi)
{
    size_t best = 0;
    double best_d = 0;
    for (int j = 0; j < 62; j++) {
        for (size_t m = 4; m <= 7; m++) {
            double v = (double)m * ldexp(1.0, j) / 4;
            if (v < 4 || v > (double)SIZE_MAX / 2 || v != floor(v)) {
                continue;
            }
            size_t s = (size_t)v;
            if (s <= lo || s > hi) {
                continue;
            }
            double d = fabs(log(v / g));
            if (best == 0 || d < best_d) {
                best = s;
                best_d = d;
            }
        }
    }
    if (best == 0) {
        best = (size_t)g / 4 * 4;
        if (best <= lo) {
            best = hi;
        }
    }
    return best;
}

size_t tune_refine_size(const point_t *lo, const point_t *hi)
{
    if (lo->winner < 0 || hi->winner < 0
        || tune_same_cand(&hi->meas[hi->winner].cand, &lo->meas[lo->winner].cand)) {
        return 0;
    }
    size_t a = lo->bytes, b = hi->bytes;
    size_t mid = tune_nice_size(sqrt((double)a * (double)b), a, b - 1) / 4 * 4;
    return mid > a && mid < b ? mid : 0;
}

/*
 * A lone winner: a point whose two neighbours agree on another candidate
 * W.  If W is within the noise of the lone winner at that point (the larger
 * spread, at least 5%), W takes the point: one measurement that noise may
 * have tipped does not make two extra rules.
 */
void tune_smooth_winners(tuned_t *t)
{
    for (int i = 1; i + 1 < t->npoints; i++) {
        point_t *a = &t->points[i - 1], *p = &t->points[i], *b = &t->points[i + 1];
        if (a->winner < 0 || p->winner < 0 || b->winner < 0) {
            continue;
        }
        const cand_t *w = &a->meas[a->winner].cand;
        if (!tune_same_cand(w, &b->meas[b->winner].cand)
            || tune_same_cand(w, &p->meas[p->winner].cand)) {
            continue;
        }
        const meas_t *cur = &p->meas[p->winner];
        for (int m = 0; m < p->nmeas; m++) {
            const meas_t *x = &p->meas[m];
            double noise = fmax(SMOOTH_NOISE, fmax(x->spread, cur->spread));
            if (x->state != MEAS_NONE && tune_same_cand(&x->cand, w)
                && x->median <= cur->median * (1 + noise)) {
                p->winner = m;
                p->smoothed = 1;
                break;
            }
        }
    }
}

/* Merge adjacent points with the same winner into ranges. */
int tune_make_ranges(const tuned_t *t, range_t *r)
{
    int n = 0;
    for (int i = 0; i < t->npoints; i++) {
        const point_t *p = &t->points[i];
        if (p->winner < 0) {
            continue;
        }
        const cand_t *c = &p->meas[p->winner].cand;
        if (n > 0 && tune_same_cand(&r[n - 1].cand, c)) {
            r[n - 1].last = p->bytes;
            continue;
        }
        if (n > 0) {
            size_t a = r[n - 1].last, b = p->bytes;
            size_t cut = tune_nice_size(sqrt((double)a * (double)b), a, b);
            r[n - 1].hi = cut;
            r[n].lo = cut;
        } else {
            r[n].lo = 0;
        }
        r[n].cand = *c;
        r[n].first = r[n].last = p->bytes;
        r[n].hi = SIZE_MAX;
        n++;
    }
    return n;
}
