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
            const frame_t *d = bsearch(ref, r->frames, r->nframes, sizeof(frame_t), collar_stats_frame_cmp);
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

/* Write the report in one piece: lines of other ranks or of the log do not
 * land inside it. */
void collar_stats_write(const char *text, size_t len, int rank)
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

void collar_stats_print(FILE *out, const report_t *r, const char *host, long pid,
                        int json)
{
    if (json) {
        print_json(out, r, host, pid);
    } else {
        print_text(out, r, host, pid);
    }
}
