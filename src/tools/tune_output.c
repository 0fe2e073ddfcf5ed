/*
 * collar-tune: what it writes -- the tuning table (checked by parsing it
 * back before it replaces the file), the CSV of every measurement, the
 * gnuplot data and script, and the progress line on a terminal.  Rank 0
 * only.
 */
#include "tune.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ----------------------------------------------------------------- system */

static void cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) {
        return;
    }
    char line[512];
    int ncpu = 0;
    char model[256] = "";
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "processor", 9) == 0) {
            ncpu++;
        }
        if (!model[0] && strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c != NULL) {
                c++;
                while (*c == ' ' || *c == '\t') {
                    c++;
                }
                c[strcspn(c, "\n")] = '\0';
                snprintf(model, sizeof(model), "%s", c);
            }
        }
    }
    fclose(f);
    if (model[0]) {
        snprintf(buf, len, "%s (%d CPUs)", model, ncpu);
    }
}

static void mpi_library(char *buf, size_t len)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int n = 0;
    MPI_Get_library_version(lib, &n);
    lib[strcspn(lib, "\n")] = '\0';
    /* Open MPI: "Open MPI v4.1.4, package: ..., ident: ..." -> first part. */
    char *comma = strchr(lib, ',');
    if (comma != NULL) {
        *comma = '\0';
    }
    snprintf(buf, len, "%s", lib[0] ? lib : "unknown MPI");
}
/* ------------------------------------------------------------ formatting */

void fmt_cand(const cand_t *c, char *buf, size_t len)
{
    if (c->alg == COLLAR_ALG_AUTO) {
        snprintf(buf, len, "rules in force");
    } else if (tune_takes_chunk(c->alg)) {
        char s[32];
        collar_format_size(c->chunk, s, sizeof(s));
        snprintf(buf, len, "%s chunk=%s", collar_alg_name(c->alg), s);
    } else {
        snprintf(buf, len, "%s", collar_alg_name(c->alg));
    }
}

void fmt_duration(double s, char *buf, size_t len)
{
    if (s < 0) {
        s = 0;
    }
    long t = (long)(s + 0.5);
    if (s < 10) {
        snprintf(buf, len, "%.1fs", s);
    } else if (t >= 3600) {
        snprintf(buf, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
    } else if (t >= 60) {
        snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    } else {
        snprintf(buf, len, "%lds", t);
    }
}

/* A measurement's median and spread: "120.3 us +-18%". */
static void fmt_meas(const meas_t *m, char *buf, size_t len)
{
    snprintf(buf, len, "%.1f us +-%.0f%%", m->median * 1e6, 100 * m->spread);
}

/* ---------------------------------------------------------------- progress */

/* The last size's result, shown on the terminal's progress line. */
static char progress_last[160];

double work_of(size_t bytes, int ncand)
{
    /* Roughly proportional to the time a point takes: a fixed part (the
     * latency-bound reps) plus the bytes moved. */
    return (double)ncand * ((double)bytes + 256.0 * 1024);
}

void progress(int ranks, size_t bytes, const cand_t *c, int round)
{
    if (!progress_tty || world_rank != 0) {
        return;
    }
    double frac = work_total > 0 ? work_done / work_total : 0;
    if (frac > 1) {
        frac = 1;
    }
    double el = MPI_Wtime() - t_start;
    char size[32], cand[64], left[32] = "?";
    collar_format_bytes(bytes, size, sizeof(size));
    fmt_cand(c, cand, sizeof(cand));
    if (frac > 0.02) {
        double rem = el / frac * (1 - frac);
        if (rem > opt.time_limit - el) {
            rem = opt.time_limit - el;
        }
        fmt_duration(rem, left, sizeof(left));
    }
    char again[32] = "";
    if (round > 0) {
        snprintf(again, sizeof(again), " (repeat %d)", round);
    }
    fprintf(stderr, "\r\033[K" PROG ": %d rank%s, %s, %s%s  %3.0f%%  ~%s left%s%s",
            ranks, collar_plural(ranks), size, cand, again, 100 * frac, left,
            progress_last[0] ? "  last: " : "", progress_last);
    fflush(stderr);
}

void progress_clear(void)
{
    if (progress_tty && world_rank == 0) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

/* ------------------------------------------------------------- per point */

void csv_row(int ranks, size_t bytes, const meas_t *m)
{
    if (csv_out == NULL || m->state == MEAS_NONE) {
        return;
    }
    fprintf(csv_out, "%d,%zu,%s,%zu,%d,%.3f,%.3f,%.3f,%.4f,%d\n", ranks, bytes,
            m->cand.alg == COLLAR_ALG_AUTO ? "auto" : collar_alg_name(m->cand.alg),
            m->cand.chunk, m->reps, m->median * 1e6, m->min * 1e6, m->max * 1e6,
            m->spread, m->round);
    fflush(csv_out);
}


/* The winner and the runner-up of a point with their spreads, the
 * repeats, and the doubt: "staged 120.3 us +-18%; next chunked chunk=1M
 * 118.9 us +-22%; repeated 2x; within noise" (of the runner-up, or "within
 * noise of ipc 19390.2 us +-79%" where another candidate makes the doubt). */
static void fmt_choice(const point_t *p, double max_spread, char *buf, size_t len)
{
    if (p->winner < 0) {
        snprintf(buf, len, "no result");
        return;
    }
    char w[64], wm[48];
    fmt_cand(&p->meas[p->winner].cand, w, sizeof(w));
    fmt_meas(&p->meas[p->winner], wm, sizeof(wm));
    size_t n = (size_t)snprintf(buf, len, "%s %s", w, wm);
    int r = tune_runner_up(p);
    if (r >= 0 && n < len) {
        char u[64], um[48];
        fmt_cand(&p->meas[r].cand, u, sizeof(u));
        fmt_meas(&p->meas[r], um, sizeof(um));
        n += (size_t)snprintf(buf + n, len - n, "; next %s %s", u, um);
    }
    if (p->repeats > 0 && n < len) {
        n += (size_t)snprintf(buf + n, len - n, "; repeated %dx", p->repeats);
    }
    int c = tune_contender(p, max_spread, NULL);
    if (c >= 0 && n < len) {
        n += (size_t)snprintf(buf + n, len - n, "; within noise");
    }
    if (c >= 0 && c != r && n < len) {
        char u[64], um[48];
        fmt_cand(&p->meas[c].cand, u, sizeof(u));
        fmt_meas(&p->meas[c], um, sizeof(um));
        snprintf(buf + n, len - n, " of %s %s", u, um);
    }
}

/* The doubt at a marked point: "staged 120.3 us +-18%, chunked chunk=1M
 * 118.9 us +-22% (repeated 2x)". */
static void fmt_noise(const point_t *p, char *buf, size_t len)
{
    int r = tune_contender(p, opt.max_spread, NULL);
    if (p->winner < 0 || r < 0) {
        snprintf(buf, len, "?");
        return;
    }
    char w[64], wm[48], u[64], um[48], again[32] = "";
    fmt_cand(&p->meas[p->winner].cand, w, sizeof(w));
    fmt_meas(&p->meas[p->winner], wm, sizeof(wm));
    fmt_cand(&p->meas[r].cand, u, sizeof(u));
    fmt_meas(&p->meas[r], um, sizeof(um));
    if (p->repeats > 0) {
        snprintf(again, sizeof(again), " (repeated %dx)", p->repeats);
    }
    snprintf(buf, len, "%s %s, %s %s%s", w, wm, u, um, again);
}

void report_point(int ranks, const point_t *p)
{
    if (world_rank != 0) {
        return;
    }
    char size[32], choice[320];
    collar_format_bytes(p->bytes, size, sizeof(size));
    fmt_choice(p, opt.max_spread, choice, sizeof(choice));
    if (progress_tty) {
        char w[64] = "no result";
        if (p->winner >= 0) {
            fmt_cand(&p->meas[p->winner].cand, w, sizeof(w));
        }
        snprintf(progress_last, sizeof(progress_last), "%s %s +-%.0f%%%s", size, w,
                 p->winner >= 0 ? 100 * p->meas[p->winner].spread : 0.0,
                 tune_in_doubt(p, opt.max_spread, NULL) ? " (within noise)" : "");
        return;
    }
    fprintf(stderr, PROG ": %d rank%s, %s%s: %s\n", ranks, collar_plural(ranks), size,
            p->refined ? " (crossover)" : "", choice);
}

/* "2 ranks at 4K, 64K; 4 ranks at 1M": the sizes marked within noise;
 * returns how many. */
static int noisy_sizes(char *buf, size_t len)
{
    size_t n = 0;
    int count = 0;
    buf[0] = '\0';
    for (int k = 0; k < ntuned; k++) {
        const tuned_t *t = &tuned[k];
        int here = 0;
        for (int i = 0; i < t->npoints && n < len; i++) {
            if (!t->points[i].noisy) {
                continue;
            }
            char s[32];
            collar_format_size(t->points[i].bytes, s, sizeof(s));
            if (here++ == 0) {
                n += (size_t)snprintf(buf + n, len - n, "%s%d rank%s at %s",
                                      count ? "; " : "", t->ranks,
                                      collar_plural(t->ranks), s);
            } else {
                n += (size_t)snprintf(buf + n, len - n, ", %s", s);
            }
            count++;
        }
    }
    return count;
}

void warn_noise(void)
{
    char list[2048];
    int count = noisy_sizes(list, sizeof(list));
    if (count == 0) {
        return;
    }
    fprintf(stderr, PROG ": warning: %d choice%s within the noise (the winner "
            "and another candidate within each other's spread, above %.0f%%, after up to %d "
            "repeat%s): %s; the table marks %s '# within noise': measure again on "
            "a quieter machine, or with more --repeats\n", count,
            count == 1 ? "" : "s", 100 * opt.max_spread, opt.repeats,
            opt.repeats == 1 ? "" : "s", list, count == 1 ? "it" : "them");
}

/* ------------------------------------------------------------ the table */

typedef struct {
    char  *buf;
    size_t len, cap;
} text_t;

static void tprintf(text_t *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL,
                          t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            return;
        }
        if (t->buf != NULL && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap ? t->cap * 2 : 8192) + (size_t)n;
        char *b = realloc(t->buf, cap);
        if (b == NULL) {
            fail("out of memory");
        }
        t->buf = b;
        t->cap = cap;
    }
}

static void system_header(text_t *tx, const char *what)
{
    char host[256] = "unknown host", cpu[300], mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    cpu_model(cpu, sizeof(cpu));
    mpi_library(mpi, sizeof(mpi));
    /* The system comment ends at a middle dot: keep them out of it. */
    tprintf(tx, "# collar tuning table · system: %s, %s, %s\n", host, cpu, mpi);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %z", localtime(&now));
    tprintf(tx, "# %s by collar-tune %s (libcollar %s) on %s\n", what,
            PACKAGE_VERSION, lib_version ? lib_version() : "?", date);
    const char *dev = getenv("COLLAR_DEVICE");
    if (!opt.device) {
        tprintf(tx, "# GPU: not used (host memory tuned)\n");
    } else if (collar_cfg.device == COLLAR_DEVICE_SIM) {
        tprintf(tx, "# GPU: none (sim device)\n");
    } else {
        tprintf(tx, "# GPU: %s\n", dev ? dev : "auto");
    }
    tprintf(tx, "# MPI library: %s\n", mpi);
    if (collar_cfg.device == COLLAR_DEVICE_SIM && opt.device) {
        char bw[32], dbw[32];
        collar_format_size(collar_cfg.sim_bandwidth, bw, sizeof(bw));
        collar_format_size(collar_cfg.sim_device_bandwidth, dbw, sizeof(dbw));
        tprintf(tx, "# This table models a GPU on collar's sim device (host memory "
                "posing as device\n# memory; modelled: host-device copies at %s%s, "
                "%ld us each (COLLAR_SIM_BANDWIDTH,\n# COLLAR_SIM_LATENCY), device "
                "memory at %s%s (COLLAR_SIM_DEVICE_BANDWIDTH)):\n# it was not "
                "measured on a GPU.\n",
                collar_cfg.sim_bandwidth ? bw : "memcpy speed",
                collar_cfg.sim_bandwidth ? "/s" : "", collar_cfg.sim_latency_us,
                collar_cfg.sim_device_bandwidth ? dbw : "memcpy speed",
                collar_cfg.sim_device_bandwidth ? "/s" : "");
    }
}

/* A word as the shell reads it: quoted where it needs to be. */
static void tprint_word(text_t *tx, const char *w)
{
    if (*w && strspn(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789-_=.,/:+@%") == strlen(w)) {
        tprintf(tx, "%s", w);
        return;
    }
    tprintf(tx, "'");
    for (; *w; w++) {
        if (*w == '\'') {
            tprintf(tx, "'\\''");
        } else {
            tprintf(tx, "%c", *w);
        }
    }
    tprintf(tx, "'");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "# environment: COLLAR_DEVICE=sim ...": every COLLAR_* variable set in
 * rank 0's environment, sorted, as the shell reads them. */
static void environment_line(text_t *tx)
{
    const char *vars[256];
    int n = 0;
    for (char **e = environ; e != NULL && *e != NULL && n < 256; e++) {
        if (strncmp(*e, "COLLAR_", 7) == 0) {
            vars[n++] = *e;
        }
    }
    qsort(vars, (size_t)n, sizeof(vars[0]), cmp_str);
    tprintf(tx, "# environment:");
    for (int i = 0; i < n; i++) {
        tprintf(tx, " ");
        tprint_word(tx, vars[i]);
    }
    tprintf(tx, "%s\n", n ? "" : " no COLLAR_* variable set");
}

/* The whole table as text (rank 0). */
static void build_table(text_t *tx, double elapsed)
{
    system_header(tx, "measured");
    tprintf(tx, "# job: %d rank%s; tuned communicator sizes:", world_size,
            collar_plural(world_size));
    for (int i = 0; i < ntuned; i++) {
        tprintf(tx, " %d", tuned[i].ranks);
    }
    char mn[32], mx[32], tm[32];
    collar_format_size(opt.min, mn, sizeof(mn));
    collar_format_size(opt.max, mx, sizeof(mx));
    fmt_duration(elapsed, tm, sizeof(tm));
    tprintf(tx, "; memory: %s; sizes %s to %s (x%d grid); took %s\n",
            opt.device ? "device" : "host", mn, mx, opt.quick ? 4 : 2, tm);
    tprintf(tx, "# command: %s\n", cmdline ? cmdline : PROG);
    environment_line(tx);
    char cands[1024];
    tune_format_candidates(&opt, cands, sizeof(cands));
    tprintf(tx, "# candidates: %s\n", cands);
    int nfell = 0;
    for (int a = 0; a < COLLAR_ALG_COUNT; a++) {
        if (fell_back[a]) {
            tprintf(tx, "%s%s", nfell++ ? ", " : "# not measured (they fell back to "
                    "another algorithm here): ", collar_alg_name((collar_alg_t)a));
        }
    }
    if (nfell) {
        tprintf(tx, "\n");
    }
    tprintf(tx, "# method: %d warm-up call%s, then batches of %d repetitions (each the "
            "slowest rank's\n# time) until the median moves by at most %.0f%% "
            "(at least %d), or %.1f s or %d\n# repetitions per candidate.\n",
            opt.quick ? 1 : 2, opt.quick ? "" : "s", BATCH, 100 * SETTLE, SETTLE_REPS,
            opt.quick ? 0.2 : 1.0, MAX_REPS);
    tprintf(tx, "# spread (+-N%%): interquartile range / median of a candidate's "
            "repetitions; where\n# the winner and another candidate lie within a "
            "spread above %.0f%%, both are\n# measured again, up to %d time%s, and a "
            "choice still within it is marked\n# \"within noise\".\n",
            100 * opt.max_spread, opt.repeats, opt.repeats == 1 ? "" : "s");
    if (opt.note != NULL) {
        tprintf(tx, "# %s\n", opt.note);
    }
    if (time_up) {
        char b[32];
        collar_format_size(time_up_bytes, b, sizeof(b));
        tprintf(tx, "# incomplete: time limit reached at %zu bytes (%s, %d rank%s); "
                "larger sizes take the last winner", time_up_bytes, b, time_up_ranks,
                collar_plural(time_up_ranks));
        int skipped = 0;
        for (int i = 0; i < opt.nranks; i++) {
            int found = 0;
            for (int k = 0; k < ntuned; k++) {
                found |= tuned[k].ranks == opt.ranks[i] && tuned[k].npoints > 0;
            }
            if (!found) {
                tprintf(tx, "%s%d", skipped++ ? "," : "; not measured: ranks ",
                        opt.ranks[i]);
            }
        }
        tprintf(tx, "\n");
    }
    tprintf(tx, "#\n# Ranks: each tuned communicator size covers the sizes up to the "
            "next tuned one;\n# the largest extends to inf; smaller communicators "
            "fall through to other rules.\n# Bytes: ranges merge measured sizes "
            "with the same winner; boundaries at the\n# geometric midpoint between "
            "measured sizes, rounded to read well.\n");
    /* Communicator sizes that have results; their node shape goes into
     * their rules (version 2) where it is known for every one. */
    int idx[MAX_RANKS_VALUES], nidx = 0, shaped = 1;
    for (int k = 0; k < ntuned; k++) {
        if (tuned[k].npoints > 0) {
            idx[nidx++] = k;
            shaped &= tuned[k].nodes > 0;
        }
    }
    shaped &= nidx > 0;
    if (shaped) {
        tprintf(tx, "# Nodes: each rule holds for the node shape it was measured "
                "on, one node\n# (nodes=1) or several (nodes=2-inf); "
                "communicators of another shape fall\n# through to other "
                "rules.\n");
    }
    tprintf(tx, "version %d\n", shaped ? 2 : 1);
    for (int j = 0; j < nidx; j++) {
        const tuned_t *t = &tuned[idx[j]];
        char rr[32], shape[32] = "";
        int rlo = t->ranks;
        if (shaped) {
            snprintf(shape, sizeof(shape), " nodes=%s",
                     t->nodes == 1 ? "1" : "2-inf");
        }
        if (j + 1 < nidx) {
            int rhi = tuned[idx[j + 1]].ranks - 1;
            snprintf(rr, sizeof(rr), "%d-%d", rlo, rhi);
        } else {
            snprintf(rr, sizeof(rr), "%d-inf", rlo);
        }
        range_t ranges[MAX_POINTS];
        int nr = tune_make_ranges(t, ranges);
        tprintf(tx, "\n# %d rank%s", t->ranks, collar_plural(t->ranks));
        if (t->nodes > 0) {
            tprintf(tx, " on %d node%s", t->nodes, t->nodes == 1 ? "" : "s");
        }
        tprintf(tx, ": measured median time per call at each size (us) "
                "+- spread, the winner first\n");
        for (int i = 0; i < t->npoints; i++) {
            const point_t *p = &t->points[i];
            if (p->winner < 0) {
                continue;
            }
            char s[32], w[64];
            collar_format_size(p->bytes, s, sizeof(s));
            fmt_cand(&p->meas[p->winner].cand, w, sizeof(w));
            tprintf(tx, "#   %-6s %s %.1f +-%.0f%%", s, w,
                    p->meas[p->winner].median * 1e6,
                    100 * p->meas[p->winner].spread);
            for (int m = 0; m < p->nmeas; m++) {
                if (m == p->winner || p->meas[m].state == MEAS_NONE) {
                    continue;
                }
                fmt_cand(&p->meas[m].cand, w, sizeof(w));
                tprintf(tx, "; %s %.1f +-%.0f%%%s", w, p->meas[m].median * 1e6,
                        100 * p->meas[m].spread,
                        p->meas[m].state == MEAS_PRUNED ? " (stopped early)" : "");
            }
            char again[32] = "";
            if (p->repeats > 0) {
                snprintf(again, sizeof(again), " [repeated %dx]", p->repeats);
            }
            tprintf(tx, "%s%s%s%s\n", p->refined ? " [crossover]" : "",
                    p->smoothed ? " [as its neighbours: within noise]" : "", again,
                    p->noisy ? " [within noise]" : "");
        }
        tprintf(tx, "# collective memory ranks bytes %salgorithm options\n",
                shaped ? "nodes " : "");
        for (int i = 0; i < nr; i++) {
            char lo[32], hi[32] = "inf", opts[48] = "";
            collar_format_size(ranges[i].lo, lo, sizeof(lo));
            if (ranges[i].hi != SIZE_MAX) {
                collar_format_size(ranges[i].hi, hi, sizeof(hi));
            }
            if (tune_takes_chunk(ranges[i].cand.alg)) {
                char c[32];
                collar_format_size(ranges[i].cand.chunk, c, sizeof(c));
                snprintf(opts, sizeof(opts), " chunk=%s", c);
            }
            char span[80], a[32], b[32];
            collar_format_size(ranges[i].first, a, sizeof(a));
            collar_format_size(ranges[i].last, b, sizeof(b));
            if (ranges[i].first == ranges[i].last) {
                snprintf(span, sizeof(span), "measured at %s", a);
            } else {
                snprintf(span, sizeof(span), "measured %s to %s", a, b);
            }
            for (int k = 0; k < t->npoints; k++) {
                const point_t *p = &t->points[k];
                if (!p->noisy || p->bytes < ranges[i].first || p->bytes > ranges[i].last) {
                    continue;
                }
                char at[32], choice[320];
                collar_format_size(p->bytes, at, sizeof(at));
                fmt_noise(p, choice, sizeof(choice));
                tprintf(tx, "# within noise at %s: %s\n", at, choice);
            }
            tprintf(tx, "allreduce %s %s %s-%s%s %s%s  # %s\n",
                    opt.device ? "device" : "host", rr, lo, hi, shape,
                    collar_alg_name(ranges[i].cand.alg), opts, span);
        }
    }
}

void write_table(double elapsed)
{
    text_t tx = { 0 };
    build_table(&tx, elapsed);
    collar_table_t table;
    char err[1024];
    if (collar_table_parse(tx.buf, tx.len, opt.output, 0, &table, err,
                           sizeof(err)) != COLLAR_OK) {
        fprintf(stderr, PROG ": internal error: the table made does not parse: "
                "%s\n--- table ---\n%s", err, tx.buf);
        free(tx.buf);
        finish(1);
    }
    int nrules = table.nrules;
    collar_table_free(&table);
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp%ld", opt.output, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fwrite(tx.buf, 1, tx.len, f) != tx.len) {
        int e = errno;
        if (f) {
            fclose(f);
        }
        remove(tmp);
        free(tx.buf);
        fail("cannot write %s: %s", tmp, strerror(e));
    }
    if (fclose(f) != 0 || rename(tmp, opt.output) != 0) {
        int e = errno;
        remove(tmp);
        free(tx.buf);
        fail("cannot write %s: %s", opt.output, strerror(e));
    }
    free(tx.buf);
    char tm[32];
    fmt_duration(elapsed, tm, sizeof(tm));
    fprintf(stderr, PROG ": wrote %s: %d rule%s%s, in %s\n", opt.output, nrules,
            nrules == 1 ? "" : "s", time_up ? " (incomplete: time limit reached)" : "",
            tm);
}

/* ------------------------------------------------------------------- plot */

void write_plot(void)
{
    const char *gp = find_gnuplot();
    char data[4096], script[4096];
    snprintf(data, sizeof(data), "%s.dat", opt.plot);
    snprintf(script, sizeof(script), "%s.gp", opt.plot);
    FILE *d = fopen(data, "w"), *s = fopen(script, "w");
    if (d == NULL || s == NULL) {
        if (d) {
            fclose(d);
        }
        if (s) {
            fclose(s);
        }
        fprintf(stderr, PROG ": cannot write the plot's files next to %s\n", opt.plot);
        return;
    }
    const char *ext = strrchr(opt.plot, '.');
    int svg = ext && strcmp(ext, ".svg") == 0;
    fprintf(s, "set terminal %s size %d,%d\nset output '%s'\n",
            svg ? "svg" : "png", 900, 420 * (ntuned ? ntuned : 1), opt.plot);
    fprintf(s, "set logscale xy 2\nset format x '%%.0s%%cB'\nset xlabel 'bytes per rank'\n"
            "set ylabel 'time per call (us)'\nset key left top\nset grid\n");
    fprintf(s, "set multiplot layout %d,1\n", ntuned ? ntuned : 1);
    int block = 0;
    for (int k = 0; k < ntuned; k++) {
        const tuned_t *t = &tuned[k];
        if (t->npoints == 0) {
            continue;
        }
        cand_t cs[MAX_CANDS];
        int nc = tune_candidates(&opt, opt.max + 1, cs);
        range_t ranges[MAX_POINTS];
        int nr = tune_make_ranges(t, ranges);
        fprintf(s, "unset object\nunset label\nset title '%d rank%s, %s memory'\n",
                t->ranks, collar_plural(t->ranks), opt.device ? "device" : "host");
        for (int i = 0; i < nr; i++) {
            double lo = ranges[i].lo ? (double)ranges[i].lo : (double)opt.min / 2;
            double hi = ranges[i].hi != SIZE_MAX ? (double)ranges[i].hi
                                                 : (double)opt.max * 2;
            char w[64];
            fmt_cand(&ranges[i].cand, w, sizeof(w));
            fprintf(s, "set object %d rect from %g, graph 0 to %g, graph 1 behind "
                    "fillcolor rgb '%s' fillstyle solid 0.15 noborder\n",
                    i + 1, lo, hi, i % 2 ? "#4070c0" : "#40a040");
            fprintf(s, "set label %d '%s' at %g, graph 0.95 center font ',8'\n",
                    i + 1, w, sqrt(lo * hi));
        }
        fprintf(s, "plot");
        for (int c = 0; c < nc; c++) {
            char w[64];
            fmt_cand(&cs[c], w, sizeof(w));
            fprintf(s, "%s '%s' index %d using 1:2 with linespoints title '%s'",
                    c ? ", \\\n    " : " ", data, block + c, w);
            fprintf(d, "# %d rank%s, %s\n", t->ranks, collar_plural(t->ranks), w);
            for (int i = 0; i < t->npoints; i++) {
                const point_t *p = &t->points[i];
                for (int m = 0; m < p->nmeas; m++) {
                    if (p->meas[m].state != MEAS_NONE && tune_same_cand(&p->meas[m].cand, &cs[c])) {
                        fprintf(d, "%zu %.3f\n", p->bytes, p->meas[m].median * 1e6);
                    }
                }
            }
            fprintf(d, "\n\n");
        }
        block += nc;
        fprintf(s, "\n");
    }
    fprintf(s, "unset multiplot\n");
    fclose(d);
    fclose(s);
    char cmd[9000];
    snprintf(cmd, sizeof(cmd), "'%s' '%s'", gp ? gp : "gnuplot", script);
    if (system(cmd) != 0) {
        fprintf(stderr, PROG ": gnuplot failed on %s (data in %s)\n", script, data);
    } else {
        fprintf(stderr, PROG ": plotted %s (script %s, data %s)\n", opt.plot,
                script, data);
    }
}
