/*
 * collar - statistics: the report, as text or JSON (docs/stats.md), from
 * what rank 0 merged (stats_gather.c), and its one write.
 */
#include "config.h"
#include "stats_int.h"

#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *coll_name(int coll)
{
    return collar_coll_name((collar_coll_t)coll);
}

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

/* ------------------------------------------------------------ one walk */

/* The report's sections, in order. */
enum { SEC_ALGORITHM, SEC_SIZE, SEC_SITES, SEC_FALLBACKS, NSEC };

/* One row of "by algorithm", worked out once for both formats. */
typedef struct {
    const char *coll, *alg, *mem;
    uint64_t    calls, calls_min, calls_max;
    double      calls_mean;
    uint64_t    bytes, bytes_min, bytes_max;
    double      bytes_mean;
    double      time_s, time_min_s, time_mean_s, time_max_s;
    double      call_min_us, call_mean_us, call_max_us;
    double      mb_per_s;
} alg_row_t;

/* One row of "by message size". */
typedef struct {
    const char *coll, *alg, *mem;
    char        lo[32], hi[32];    /* [bytes_lo, bytes_hi) */
    uint64_t    calls, bytes;
    double      time_s, mb_per_s;
} size_row_t;

/* One row of "by call site": the merged site and its frames' names. */
typedef struct {
    const site_row_t *site;
    const char       *frames[COLLAR_STATS_MAX_DEPTH];
    double            call_mean_us;
} site_line_t;

/* What the report says about itself, before the sections. */
typedef struct {
    const char *host;
    long        pid;
    uint64_t    calls;             /* sum over keys and ranks */
    const char *site_status;       /* "recorded", "off", "unavailable" */
    size_t      sites_shown;
} head_t;

/*
 * A format: the walk calls begin, then for each section open, one row
 * function per row (n counts the rows before it) and close, then end.
 */
typedef struct {
    void (*begin)(FILE *out, const report_t *r, const head_t *h);
    void (*open)(FILE *out, int section, const report_t *r, const head_t *h);
    void (*algorithm)(FILE *out, const alg_row_t *row, size_t n);
    void (*size)(FILE *out, const size_row_t *row, size_t n);
    void (*site)(FILE *out, const site_line_t *row, size_t n);
    void (*fallback)(FILE *out, const fallback_t *row, size_t n);
    void (*close)(FILE *out, int section, size_t rows, const report_t *r, const head_t *h);
    void (*end)(FILE *out);
} format_t;

static void alg_row(const report_t *r, int c, int a, int m, alg_row_t *row)
{
    unsigned k = key_index(c, a, m);
    const uint64_t *us = &r->usum[k * USUM_PER_KEY];
    const double *ds = &r->dsum[k * DSUM_PER_KEY];
    double n = (double)r->nranks;
    row->coll = coll_name(c);
    row->alg = collar_alg_name((collar_alg_t)a);
    row->mem = collar_mem_kind_name((collar_mem_kind_t)m);
    row->calls = us[0];
    row->calls_min = r->umin[k * 2];
    row->calls_mean = (double)us[0] / n;
    row->calls_max = r->umax[k * 2];
    row->bytes = us[1];
    row->bytes_min = r->umin[k * 2 + 1];
    row->bytes_mean = (double)us[1] / n;
    row->bytes_max = r->umax[k * 2 + 1];
    row->time_s = ds[0];
    row->time_min_s = r->dmin[k * 2];
    row->time_mean_s = ds[0] / n;
    row->time_max_s = r->dmax[k * 2];
    row->call_min_us = r->dmin[k * 2 + 1] * 1e6;
    row->call_mean_us = ds[0] / (double)us[0] * 1e6;
    row->call_max_us = r->dmax[k * 2 + 1] * 1e6;
    row->mb_per_s = mb_per_s((double)us[1], ds[0]);
}

static void walk(FILE *out, const report_t *r, const char *host, long pid,
                 const format_t *fmt)
{
    head_t h = { host, pid, 0, site_status(r),
                 r->nsites < TOP_SITES ? r->nsites : TOP_SITES };
    for (int k = 0; k < NKEYS; k++) {
        h.calls += r->usum[k * USUM_PER_KEY];
    }
    fmt->begin(out, r, &h);

    size_t rows = 0;
    fmt->open(out, SEC_ALGORITHM, r, &h);
    for (int c = 0; c < NCOLL; c++) {
        for (int a = 0; a < NALG; a++) {
            for (int m = 0; m < NMEM; m++) {
                if (r->usum[key_index(c, a, m) * USUM_PER_KEY] != 0) {
                    alg_row_t row;
                    alg_row(r, c, a, m, &row);
                    fmt->algorithm(out, &row, rows++);
                }
            }
        }
    }
    fmt->close(out, SEC_ALGORITHM, rows, r, &h);

    rows = 0;
    fmt->open(out, SEC_SIZE, r, &h);
    for (int c = 0; c < NCOLL; c++) {
        for (int a = 0; a < NALG; a++) {
            for (int m = 0; m < NMEM; m++) {
                unsigned k = key_index(c, a, m);
                const uint64_t *us = &r->usum[k * USUM_PER_KEY];
                const double *ds = &r->dsum[k * DSUM_PER_KEY];
                for (unsigned b = 0; b < NBUCKETS; b++) {
                    if (us[2 + b] == 0) {
                        continue;
                    }
                    size_row_t row = {
                        coll_name(c), collar_alg_name((collar_alg_t)a),
                        collar_mem_kind_name((collar_mem_kind_t)m), "", "",
                        us[2 + b], us[2 + NBUCKETS + b], ds[1 + b],
                        mb_per_s((double)us[2 + NBUCKETS + b], ds[1 + b])
                    };
                    bucket_bounds(b, row.lo, row.hi, sizeof(row.lo));
                    fmt->size(out, &row, rows++);
                }
            }
        }
    }
    fmt->close(out, SEC_SIZE, rows, r, &h);

    fmt->open(out, SEC_SITES, r, &h);
    for (size_t i = 0; i < h.sites_shown; i++) {
        site_line_t row = { &r->sites[i], { NULL }, 0.0 };
        const site_row_t *s = row.site;
        for (int f = 0; f < s->nframes; f++) {
            const frame_t *d = bsearch(&r->refs[s->first + (size_t)f], r->frames, r->nframes,
                                       sizeof(frame_t), collar_stats_frame_cmp);
            row.frames[f] = d != NULL && d->name != NULL ? d->name : "?";
        }
        row.call_mean_us = s->calls ? s->time / (double)s->calls * 1e6 : 0.0;
        fmt->site(out, &row, i);
    }
    fmt->close(out, SEC_SITES, h.sites_shown, r, &h);

    fmt->open(out, SEC_FALLBACKS, r, &h);
    for (size_t i = 0; i < r->nfalls; i++) {
        fmt->fallback(out, &r->falls[i], i);
    }
    fmt->close(out, SEC_FALLBACKS, r->nfalls, r, &h);
    fmt->end(out);
}

/* ------------------------------------------------------------------ text */

static void text_begin(FILE *out, const report_t *r, const head_t *h)
{
    fprintf(out, "# collar statistics\n");
    fprintf(out, "version: %s\n", PACKAGE_VERSION);
    fprintf(out, "ranks: %d\n", r->nranks);
    fprintf(out, "totals: summed over the %d rank%s (calls, bytes, time_s; "
            "_min, _mean, _max columns: one rank's)\n", r->nranks,
            collar_plural(r->nranks));
    fprintf(out, "reporter: rank 0 host %s pid %ld\n", h->host, h->pid);
    fprintf(out, "tuning: %s\n", r->tuning);
    fprintf(out, "mode: %s\n", mode_name(r->mode));
    if (r->mode == COLLAR_STATS_CALLSITES) {
        fprintf(out, "depth: %ld\n", r->depth);
    }
    fprintf(out, "wall time: %.6f s\n", r->wall);
    fprintf(out, "calls: %llu\n", (unsigned long long)h->calls);
    if (r->lost != 0) {
        fprintf(out, "calls not counted: %llu\n", (unsigned long long)r->lost);
    }
}

static void text_open(FILE *out, int section, const report_t *r, const head_t *h)
{
    switch (section) {
    case SEC_ALGORITHM:
        fprintf(out, "\n## by algorithm\n");
        fprintf(out, "# calls, bytes, time_s: sum over ranks; _min, _mean, _max: "
                "one rank's, over ranks\n");
        fprintf(out, "# call_*_us: one call; MB/s: bytes / time_s\n");
        fprintf(out, "# collective algorithm memory calls calls_min calls_mean calls_max "
                "bytes bytes_min bytes_mean bytes_max time_s time_min_s time_mean_s "
                "time_max_s call_min_us call_mean_us call_max_us MB/s\n");
        break;
    case SEC_SIZE:
        fprintf(out, "\n## by message size\n");
        fprintf(out, "# bucket [bytes_lo, bytes_hi) of one call's size; calls, bytes, "
                "time_s: sum over ranks\n");
        fprintf(out, "# collective algorithm memory bytes_lo bytes_hi calls bytes time_s "
                "MB/s\n");
        break;
    case SEC_SITES:
        fprintf(out, "\n## by call site\n");
        if (strcmp(h->site_status, "unavailable") == 0) {
            fprintf(out, "call sites unavailable (built without libunwind)\n");
        } else if (strcmp(h->site_status, "off") == 0) {
            fprintf(out, "call sites not recorded (COLLAR_STATS=callsites records them)\n");
        } else {
            fprintf(out, "# %zu call sites, %zu shown, heaviest first; calls, bytes, "
                    "time_s: sum over ranks\n", r->nsites, h->sites_shown);
            fprintf(out, "# top calls bytes time_s call_mean_us ranks site\n");
        }
        break;
    default:
        fprintf(out, "\n## fallbacks\n");
        fprintf(out, "# count what (count: sum over ranks)\n");
        break;
    }
}

static void text_algorithm(FILE *out, const alg_row_t *x, size_t n)
{
    (void)n;
    fprintf(out, "%-10s %-8s %-7s %llu %llu %.2f %llu %llu %llu %.2f %llu "
            "%.6f %.6f %.6f %.6f %.3f %.3f %.3f %.2f\n", x->coll, x->alg, x->mem,
            (unsigned long long)x->calls, (unsigned long long)x->calls_min, x->calls_mean,
            (unsigned long long)x->calls_max, (unsigned long long)x->bytes,
            (unsigned long long)x->bytes_min, x->bytes_mean,
            (unsigned long long)x->bytes_max, x->time_s, x->time_min_s, x->time_mean_s,
            x->time_max_s, x->call_min_us, x->call_mean_us, x->call_max_us, x->mb_per_s);
}

static void text_size(FILE *out, const size_row_t *x, size_t n)
{
    (void)n;
    fprintf(out, "%-10s %-8s %-7s %s %s %llu %llu %.6f %.2f\n", x->coll, x->alg, x->mem,
            x->lo, x->hi, (unsigned long long)x->calls, (unsigned long long)x->bytes,
            x->time_s, x->mb_per_s);
}

static void text_site(FILE *out, const site_line_t *x, size_t n)
{
    const site_row_t *s = x->site;
    fprintf(out, "%zu %llu %llu %.6f %.3f %d %s\n", n + 1, (unsigned long long)s->calls,
            (unsigned long long)s->bytes, s->time, x->call_mean_us, s->ranks, s->name);
}

static void text_fallback(FILE *out, const fallback_t *x, size_t n)
{
    (void)n;
    fprintf(out, "%llu %s\n", (unsigned long long)x->count, x->what);
}

static void text_close(FILE *out, int section, size_t rows, const report_t *r,
                       const head_t *h)
{
    if (section != SEC_SITES) {
        if (rows == 0) {
            fprintf(out, "(none)\n");
        }
        return;
    }
    if (strcmp(h->site_status, "recorded") != 0) {
        return;
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

static void text_end(FILE *out)
{
    fprintf(out, "\n# end of collar statistics\n");
}

static const format_t text_format = {
    text_begin, text_open, text_algorithm, text_size, text_site, text_fallback,
    text_close, text_end
};

/* ------------------------------------------------------------------ JSON */

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


static void json_begin(FILE *out, const report_t *r, const head_t *h)
{
    fprintf(out, "{\n  \"schema\": \"collar-stats/1\",\n  \"version\": ");
    json_str(out, PACKAGE_VERSION);
    fprintf(out, ",\n  \"ranks\": %d,\n  \"totals\": \"summed over ranks\",\n"
            "  \"reporter\": {\"rank\": 0, \"host\": ", r->nranks);
    json_str(out, h->host);
    fprintf(out, ", \"pid\": %ld},\n  \"tuning\": ", h->pid);
    json_str(out, r->tuning);
    fprintf(out, ",\n  \"mode\": \"%s\",\n  \"depth\": %ld,\n  \"wall_time_s\": %.9g,\n"
            "  \"calls\": %llu,\n  \"calls_not_counted\": %llu,\n",
            mode_name(r->mode), r->mode == COLLAR_STATS_CALLSITES ? r->depth : 0,
            json_num(r->wall), (unsigned long long)h->calls, (unsigned long long)r->lost);
}

static void json_open(FILE *out, int section, const report_t *r, const head_t *h)
{
    switch (section) {
    case SEC_ALGORITHM:
        fprintf(out, "  \"by_algorithm\": [");
        break;
    case SEC_SIZE:
        fprintf(out, "  \"by_message_size\": [");
        break;
    case SEC_SITES:
        fprintf(out, "  \"call_sites\": {\"status\": \"%s\", \"count\": %zu, \"shown\": %zu, "
                "\"calls_without_site\": %llu, \"dropped\": %llu, \"sites\": [",
                h->site_status, r->nsites, h->sites_shown, (unsigned long long)r->nosite,
                (unsigned long long)r->dropped);
        break;
    default:
        fprintf(out, "  \"fallbacks\": [");
        break;
    }
}

static void json_algorithm(FILE *out, const alg_row_t *x, size_t n)
{
    fprintf(out, "%s\n    {\"collective\": \"%s\", \"algorithm\": \"%s\", \"memory\": \"%s\",\n",
            n ? "," : "", x->coll, x->alg, x->mem);
    fprintf(out, "     \"calls\": {\"total\": %llu, \"min\": %llu, \"mean\": %.9g, "
            "\"max\": %llu},\n", (unsigned long long)x->calls,
            (unsigned long long)x->calls_min, x->calls_mean, (unsigned long long)x->calls_max);
    fprintf(out, "     \"bytes\": {\"total\": %llu, \"min\": %llu, \"mean\": %.9g, "
            "\"max\": %llu},\n", (unsigned long long)x->bytes,
            (unsigned long long)x->bytes_min, x->bytes_mean, (unsigned long long)x->bytes_max);
    fprintf(out, "     \"time_s\": {\"total\": %.9g, \"min\": %.9g, \"mean\": %.9g, "
            "\"max\": %.9g},\n", json_num(x->time_s), json_num(x->time_min_s),
            json_num(x->time_mean_s), json_num(x->time_max_s));
    fprintf(out, "     \"call_us\": {\"min\": %.9g, \"mean\": %.9g, \"max\": %.9g},\n",
            json_num(x->call_min_us), json_num(x->call_mean_us), json_num(x->call_max_us));
    fprintf(out, "     \"MB_per_s\": %.9g}", json_num(x->mb_per_s));
}

static void json_size(FILE *out, const size_row_t *x, size_t n)
{
    fprintf(out, "%s\n    {\"collective\": \"%s\", \"algorithm\": \"%s\", "
            "\"memory\": \"%s\", \"bytes_lo\": %s, \"bytes_hi\": %s, "
            "\"calls\": %llu, \"bytes\": %llu, \"time_s\": %.9g, "
            "\"MB_per_s\": %.9g}", n ? "," : "", x->coll, x->alg, x->mem, x->lo, x->hi,
            (unsigned long long)x->calls, (unsigned long long)x->bytes,
            json_num(x->time_s), json_num(x->mb_per_s));
}

static void json_site(FILE *out, const site_line_t *x, size_t n)
{
    const site_row_t *s = x->site;
    fprintf(out, "%s\n    {\"site\": ", n ? "," : "");
    json_str(out, s->name);
    fprintf(out, ", \"frames\": [");
    for (int f = 0; f < s->nframes; f++) {
        fprintf(out, "%s", f ? ", " : "");
        json_str(out, x->frames[f]);
    }
    fprintf(out, "],\n     \"calls\": %llu, \"bytes\": %llu, \"time_s\": %.9g, "
            "\"call_mean_us\": %.9g, \"ranks\": %d}",
            (unsigned long long)s->calls, (unsigned long long)s->bytes,
            json_num(s->time), json_num(x->call_mean_us), s->ranks);
}

static void json_fallback(FILE *out, const fallback_t *x, size_t n)
{
    fprintf(out, "%s\n    {\"what\": ", n ? "," : "");
    json_str(out, x->what);
    fprintf(out, ", \"count\": %llu}", (unsigned long long)x->count);
}

static void json_close(FILE *out, int section, size_t rows, const report_t *r,
                       const head_t *h)
{
    (void)r;
    (void)h;
    const char *nl = rows ? "\n  " : "";
    switch (section) {
    case SEC_SITES:
        fprintf(out, "%s]},\n", nl);
        break;
    case SEC_FALLBACKS:
        fprintf(out, "%s]\n", nl);
        break;
    default:
        fprintf(out, "%s],\n", nl);
        break;
    }
}

static void json_end(FILE *out)
{
    fprintf(out, "}\n");
}

static const format_t json_format = {
    json_begin, json_open, json_algorithm, json_size, json_site, json_fallback,
    json_close, json_end
};

/* ------------------------------------------------------------ the output */

void collar_stats_print(FILE *out, const report_t *r, const char *host, long pid,
                        int json)
{
    walk(out, r, host, pid, json ? &json_format : &text_format);
}

/* Write the report in one piece: lines of other ranks or of the log do not
 * land inside it. */
void collar_stats_write(const char *text, size_t len, int rank)
{
    const char *pattern = collar_cfg.stats_file;
    FILE *f = NULL;
    if (pattern != NULL && pattern[0] != '\0' && strcmp(pattern, "stderr") != 0) {
        char path[4096];
        collar_expand_pattern(pattern, rank, path, sizeof(path));
        f = collar_open_output(path, 0, "COLLAR_STATS_FILE",
                               "the report goes to stderr");
        if (f != NULL) {
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

