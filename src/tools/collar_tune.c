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
 * collective alone.  The other ranks only follow.
 */
#define _GNU_SOURCE
#include "config.h"
#include "../core/core.h"
#include "../mem/mem.h"

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


#define PROG "collar-tune"

/* ----------------------------------------------------------------- limits */

#define MAX_RANKS_VALUES 32
#define MAX_CHUNKS       16
#define MAX_CANDS        (2 + 2 * MAX_CHUNKS + 1)  /* native, staged, chunked and ring
                                                   * per chunk, auto */
#define MAX_REPS         400
#define MAX_POINTS       512                    /* per ranks value */
#define MAX_COMPARE      64
#define MIN_REPS         5
#define SETTLE_REPS      15     /* reps before the median may count as settled */
#define BATCH            5
#define SETTLE           0.05   /* median moved by at most 5%: settled */
#define PRUNE_FACTOR     2.0    /* median > 2x the best so far: stop early */
#define MIN_NOISE        0.03   /* a winner must beat the simpler by > 3% */

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
} opts_t;

static opts_t opt;
static char  *cmdline;               /* the command line, shell-quoted */

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
} point_t;

typedef struct {
    int     ranks;
    int     npoints;
    point_t points[MAX_POINTS];
} tuned_t;

/* Decisions broadcast by rank 0 after each batch. */
enum { GO_ON = 0, STOP_DONE, STOP_PRUNED, STOP_BUDGET, STOP_TIME };

/* ----------------------------------------------------------------- state */

static int      world_rank, world_size;
static int      (*set_algorithm)(const char *name, size_t chunk);
static const char *(*lib_version)(void);
static int      (*lib_active)(void);
static const char *(*lib_device)(void);
static float   *sbuf, *rbuf;
/* The buffers' device (cuda: device memory from this program's own copy
 * of the backend, which shares the driver's context with libcollar's);
 * NULL: host memory (malloc). */
static const collar_device_t *buf_dev;
static double   t_start;
static int      time_up;                 /* the time limit was reached */
static size_t   time_up_bytes;
static int      time_up_ranks;
static FILE    *csv_out;
static int      progress_tty;
static double   work_total, work_done;   /* for the progress estimate */
static double   point_budget;            /* seconds per candidate and size */
static tuned_t *tuned;
static int      ntuned;

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

static int is_lead(void)
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

static void finish(int code)
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
static void bad_usage(const char *fmt, ...)
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
static void fail(const char *fmt, ...)
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

/* gnuplot on PATH, or NULL. */
static const char *find_gnuplot(void)
{
    static char found[4096];
    const char *path = getenv("PATH");
    if (path == NULL) {
        return NULL;
    }
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 0 && n < sizeof(found) - 16) {
            snprintf(found, sizeof(found), "%.*s/gnuplot", (int)n, p);
            if (access(found, X_OK) == 0) {
                return found;
            }
        }
        p += n;
        if (*p == ':') {
            p++;
        }
    }
    return NULL;
}

static void usage(FILE *out)
{
    const char *gp = find_gnuplot();
    fprintf(out,
        "Usage: mpirun -np N env LD_PRELOAD=%s/libcollar.so \\\n"
        "           " PROG " --output FILE [OPTION]...\n"
        "Measure collar's allreduce algorithms on this system and write a tuning\n"
        "table that collar then uses (COLLAR_TUNING_FILE=FILE, or install it as\n"
        "the site default %s/default.table).\n"
        "collar-tune must run under collar (LD_PRELOAD) on every rank.\n"
        "\n"
        "Options (sizes in bytes with K, M, G suffixes; lists comma-separated):\n"
        "  --output FILE         the table to write (required)\n"
        "  --memory KIND         device (default) or host: the memory the buffers\n"
        "                        live in; device needs a device (COLLAR_DEVICE=sim\n"
        "                        models one on a machine without a GPU)\n"
        "  --ranks LIST          communicator sizes to tune (default: the job size\n"
        "                        and the powers of two from 2 below it); a size k\n"
        "                        is measured on the first k ranks\n"
        "  --min SIZE            smallest message (default 1K)\n"
        "  --max SIZE            largest message (default 64M)\n"
        "  --algorithms LIST     candidates among native, staged, chunked, ring\n"
        "                        (default: every eligible one: on device memory\n"
        "                        staged, chunked and ring, and native when the MPI\n"
        "                        library takes device pointers; on host memory all)\n"
        "  --chunks LIST         chunk sizes tried for chunked and segment sizes for\n"
        "                        ring (default 256K,1M,4M; only chunks smaller than\n"
        "                        the message)\n"
        "  --time-limit SECONDS  bound on the whole run (default 600); a run that\n"
        "                        reaches it writes what it has measured, marked\n"
        "                        incomplete\n"
        "  --quick               a coarser grid (x4 instead of x2) and smaller time\n"
        "                        budgets per point\n"
        "  --csv FILE            every measurement, one line each: ranks, bytes,\n"
        "                        algorithm, chunk, reps, median_us, min_us, max_us,\n"
        "                        spread\n"
        "  --plot FILE           time per call against size for every candidate,\n"
        "                        log-log, with the chosen ranges marked (.png or\n"
        "                        .svg); needs gnuplot: %s%s\n"
        "  --compare LIST        instead of tuning: at these sizes, measure every\n"
        "                        candidate and the rules in force (e.g. a table in\n"
        "                        COLLAR_TUNING_FILE) side by side and print the\n"
        "                        regret of the rules' choice; writes no table\n"
        "  --version             print the version and exit\n"
        "  --help                print this help and exit\n"
        "\n"
        "Method: sizes on a power-of-two grid from --min to --max; for each size and\n"
        "candidate, repetitions until the median settles (within 5%%, at least 15),\n"
        "each timing the slowest rank; crossovers refined at the geometric\n"
        "midpoint; a winner must beat a simpler algorithm (native < staged <\n"
        "chunked < ring) by more than the measured noise (at least 3%%).  Exit\n"
        "status: 0 done, 1 cannot tune here, 2 bad option.\n",
        LIBDIR, COLLAR_TUNINGDIR,
        gp ? "found at " : "not found on this system's PATH, so --plot\n"
                           "                        is refused",
        gp ? gp : "");
}

/* ---------------------------------------------------------------- parsing */

static void parse_size_opt(const char *name, const char *val, size_t *out)
{
    if (collar_parse_size(val, out) != COLLAR_OK) {
        bad_usage("%s expects a size in bytes (e.g. 4096, 64K, 16M), not '%s'",
                  name, val);
    }
}

/* Split a comma-separated list; calls fn for each item. */
static void parse_list(const char *name, const char *val,
                       void (*fn)(const char *name, const char *item))
{
    if (*val == '\0') {
        bad_usage("%s expects a comma-separated list, not an empty string", name);
    }
    char *copy = strdup(val);
    if (copy == NULL) {
        fail("out of memory");
    }
    char *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        fn(name, tok);
        n++;
    }
    free(copy);
    if (n == 0) {
        bad_usage("%s expects a comma-separated list, not '%s'", name, val);
    }
}

static void add_rank(const char *name, const char *item)
{
    long v;
    if (collar_parse_long(item, 1, 1 << 24, &v) != COLLAR_OK) {
        bad_usage("%s expects positive integers, not '%s'", name, item);
    }
    if (opt.nranks == MAX_RANKS_VALUES) {
        bad_usage("%s: at most %d values", name, MAX_RANKS_VALUES);
    }
    for (int i = 0; i < opt.nranks; i++) {
        if (opt.ranks[i] == v) {
            return;
        }
    }
    opt.ranks[opt.nranks++] = (int)v;
}

static void add_alg(const char *name, const char *item)
{
    int alg = collar_alg_from_name(item, strlen(item));
    if (alg != COLLAR_ALG_NATIVE && alg != COLLAR_ALG_STAGED
        && alg != COLLAR_ALG_CHUNKED && alg != COLLAR_ALG_RING) {
        bad_usage("%s expects native, staged, chunked or ring, not '%s'", name, item);
    }
    opt.alg_on[alg] = 1;
}

static void add_chunk(const char *name, const char *item)
{
    size_t v;
    if (collar_parse_size(item, &v) != COLLAR_OK || v == 0 || v > ((size_t)1 << 30)) {
        bad_usage("%s expects chunk sizes from 1 to 1G (e.g. 256K,1M), not '%s'",
                  name, item);
    }
    if (opt.nchunks == MAX_CHUNKS) {
        bad_usage("%s: at most %d chunk sizes", name, MAX_CHUNKS);
    }
    for (int i = 0; i < opt.nchunks; i++) {
        if (opt.chunks[i] == v) {
            return;
        }
    }
    opt.chunks[opt.nchunks++] = v;
}

static void add_compare(const char *name, const char *item)
{
    size_t v;
    parse_size_opt(name, item, &v);
    if (v < 4) {
        bad_usage("%s: sizes must be at least 4 bytes, not '%s'", name, item);
    }
    if (opt.ncompare == MAX_COMPARE) {
        bad_usage("%s: at most %d sizes", name, MAX_COMPARE);
    }
    opt.compare[opt.ncompare++] = v;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The command line, each argument quoted when the shell would need it. */
static char *quote_cmdline(int argc, char **argv)
{
    size_t len = 1;
    for (int i = 0; i < argc; i++) {
        len += 4 * strlen(argv[i]) + 3;
    }
    char *s = malloc(len), *p = s;
    if (s == NULL) {
        return NULL;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = i == 0 ? PROG : argv[i];
        int plain = *a != '\0' && strspn(a, "abcdefghijklmnopqrstuvwxyz"
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:+@%") == strlen(a);
        if (i > 0) {
            *p++ = ' ';
        }
        if (plain) {
            p += sprintf(p, "%s", a);
            continue;
        }
        *p++ = '\'';
        for (; *a; a++) {
            if (*a == '\'') {
                p += sprintf(p, "'\\''");
            } else {
                *p++ = *a;
            }
        }
        *p++ = '\'';
    }
    *p = '\0';
    return s;
}

static void parse_options(int argc, char **argv)
{
    opt.device = 1;
    opt.min = 1024;
    opt.max = (size_t)64 << 20;
    opt.time_limit = 600;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            if (is_lead()) {
                usage(stdout);
            }
            finish(0);
        }
        if (strcmp(a, "--version") == 0) {
            if (is_lead()) {
                printf(PROG " (collar) %s\n", PACKAGE_VERSION);
            }
            finish(0);
        }
        if (strcmp(a, "--quick") == 0) {
            opt.quick = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            bad_usage("unexpected argument '%s'", a);
        }
        /* --name VALUE or --name=VALUE */
        char name[64];
        const char *val;
        const char *eq = strchr(a, '=');
        if (eq != NULL) {
            snprintf(name, sizeof(name), "%.*s", (int)(eq - a), a);
            val = eq + 1;
        } else {
            snprintf(name, sizeof(name), "%s", a);
            val = NULL;
        }
        static const char *const with_value[] = {
            "--output", "--csv", "--plot", "--memory", "--ranks", "--min",
            "--max", "--algorithms", "--chunks", "--time-limit", "--compare",
        };
        int known = 0;
        for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++) {
            known |= strcmp(name, with_value[k]) == 0;
        }
        if (!known) {
            bad_usage("unknown option '%s'", name);
        }
        if (val == NULL) {
            if (i + 1 >= argc) {
                bad_usage("%s expects a value", name);
            }
            val = argv[++i];
        }
        if (strcmp(name, "--output") == 0) {
            if (!*val) {
                bad_usage("--output expects a file name");
            }
            opt.output = val;
        } else if (strcmp(name, "--csv") == 0) {
            if (!*val) {
                bad_usage("--csv expects a file name");
            }
            opt.csv = val;
        } else if (strcmp(name, "--plot") == 0) {
            const char *dot = strrchr(val, '.');
            if (dot == NULL || (strcmp(dot, ".png") != 0 && strcmp(dot, ".svg") != 0)) {
                bad_usage("--plot expects a file name ending in .png or .svg, "
                          "not '%s'", val);
            }
            opt.plot = val;
        } else if (strcmp(name, "--memory") == 0) {
            if (strcmp(val, "device") == 0) {
                opt.device = 1;
            } else if (strcmp(val, "host") == 0) {
                opt.device = 0;
            } else {
                bad_usage("--memory expects device or host, not '%s'", val);
            }
        } else if (strcmp(name, "--ranks") == 0) {
            opt.nranks = 0;
            parse_list(name, val, add_rank);
        } else if (strcmp(name, "--min") == 0) {
            parse_size_opt(name, val, &opt.min);
        } else if (strcmp(name, "--max") == 0) {
            parse_size_opt(name, val, &opt.max);
        } else if (strcmp(name, "--algorithms") == 0) {
            memset(opt.alg_on, 0, sizeof(opt.alg_on));
            opt.alg_given = 1;
            parse_list(name, val, add_alg);
        } else if (strcmp(name, "--chunks") == 0) {
            opt.nchunks = 0;
            parse_list(name, val, add_chunk);
        } else if (strcmp(name, "--time-limit") == 0) {
            char *end;
            errno = 0;
            double v = strtod(val, &end);
            if (errno || end == val || *end || !(v > 0) || v > 1e7) {
                bad_usage("--time-limit expects a positive number of seconds, "
                          "not '%s'", val);
            }
            opt.time_limit = v;
        } else if (strcmp(name, "--compare") == 0) {
            opt.ncompare = 0;
            parse_list(name, val, add_compare);
        }
    }
    if (opt.ncompare == 0 && opt.output == NULL) {
        bad_usage("--output FILE is required (the table to write)");
    }
    if (opt.ncompare > 0 && (opt.output || opt.plot)) {
        bad_usage("--compare measures and prints; it takes no --output or --plot");
    }
    if (opt.min < 4) {
        bad_usage("--min must be at least 4 bytes (one float), not %zu", opt.min);
    }
    if (opt.max < opt.min) {
        bad_usage("--max (%zu) is smaller than --min (%zu)", opt.max, opt.min);
    }
    if (opt.max > ((size_t)1 << 31)) {
        bad_usage("--max is at most 2G (one rank's buffer), not %zu", opt.max);
    }
    if (opt.nchunks == 0) {
        opt.chunks[0] = (size_t)256 << 10;
        opt.chunks[1] = (size_t)1 << 20;
        opt.chunks[2] = (size_t)4 << 20;
        opt.nchunks = 3;
    }
    qsort(opt.chunks, (size_t)opt.nchunks, sizeof(size_t), cmp_size);
    qsort(opt.compare, (size_t)opt.ncompare, sizeof(size_t), cmp_size);
    if (opt.plot != NULL && find_gnuplot() == NULL) {
        bad_usage("--plot needs gnuplot, which is not on this system's PATH "
                  "(install gnuplot, or leave --plot out; --csv has the numbers)");
    }
    cmdline = quote_cmdline(argc, argv);
}

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

/* Algorithms that take a chunk (a segment, for ring). */
static int takes_chunk(collar_alg_t alg)
{
    return alg == COLLAR_ALG_CHUNKED || alg == COLLAR_ALG_RING;
}

static void fmt_cand(const cand_t *c, char *buf, size_t len)
{
    if (c->alg == COLLAR_ALG_AUTO) {
        snprintf(buf, len, "rules in force");
    } else if (takes_chunk(c->alg)) {
        char s[32];
        collar_format_size(c->chunk, s, sizeof(s));
        snprintf(buf, len, "%s chunk=%s", collar_alg_name(c->alg), s);
    } else {
        snprintf(buf, len, "%s", collar_alg_name(c->alg));
    }
}

static void fmt_duration(double s, char *buf, size_t len)
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

/* ---------------------------------------------------------------- progress */

static double work_of(size_t bytes, int ncand)
{
    /* Roughly proportional to the time a point takes: a fixed part (the
     * latency-bound reps) plus the bytes moved. */
    return (double)ncand * ((double)bytes + 256.0 * 1024);
}

static void progress(int ranks, size_t bytes, const cand_t *c)
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
    fprintf(stderr, "\r\033[K" PROG ": %d ranks, %s, %s  %3.0f%%  ~%s left",
            ranks, size, cand, 100 * frac, left);
    fflush(stderr);
}

static void progress_clear(void)
{
    if (progress_tty && world_rank == 0) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

/* ------------------------------------------------------------- measuring */

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Quantile of sorted v (linear interpolation). */
static double quantile(const double *v, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)pos;
    if (i >= n - 1) {
        return v[n - 1];
    }
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

static void select_candidate(const cand_t *c)
{
    const char *name = c->alg == COLLAR_ALG_AUTO ? "auto" : collar_alg_name(c->alg);
    if (set_algorithm(name, takes_chunk(c->alg) ? c->chunk : 0) != 0) {
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
    memset(m, 0, sizeof(*m));
    m->cand = *c;
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
                samples[n++] = t[i];
            }
            double sorted[MAX_REPS];
            memcpy(sorted, samples, (size_t)n * sizeof(double));
            double med = median_of(sorted, n);
            double now = MPI_Wtime();
            if (now - t_start >= opt.time_limit * 0.97 - 0.05) {
                decision = STOP_TIME;
            } else if (n >= MIN_REPS && prune && best > 0
                       && med > PRUNE_FACTOR * best) {
                decision = STOP_PRUNED;
            } else if (n >= SETTLE_REPS && prev_median > 0
                       && fabs(med - prev_median) <= SETTLE * prev_median) {
                decision = STOP_DONE;
            } else if (n >= MAX_REPS || now - t0_point >= point_budget) {
                decision = STOP_BUDGET;
            }
            prev_median = med;
        }
        MPI_Bcast(&decision, 1, MPI_INT, 0, comm);
    }
    if (rank == 0 && n > 0) {
        qsort(samples, (size_t)n, sizeof(double), cmp_double);
        m->reps = n;
        m->median = median_of(samples, n);
        m->min = samples[0];
        m->max = samples[n - 1];
        m->spread = m->median > 0 ? (quantile(samples, n, 0.75)
                                     - quantile(samples, n, 0.25)) / m->median : 0;
        m->state = decision == STOP_PRUNED ? MEAS_PRUNED
                 : decision == STOP_BUDGET ? MEAS_BUDGET : MEAS_DONE;
        if (decision == STOP_TIME && n < MIN_REPS) {
            m->state = MEAS_NONE;   /* too few to count */
        }
    }
    return decision;
}

static void csv_row(int ranks, size_t bytes, const meas_t *m)
{
    if (csv_out == NULL || m->state == MEAS_NONE) {
        return;
    }
    fprintf(csv_out, "%d,%zu,%s,%zu,%d,%.3f,%.3f,%.3f,%.4f\n", ranks, bytes,
            m->cand.alg == COLLAR_ALG_AUTO ? "auto" : collar_alg_name(m->cand.alg),
            m->cand.chunk, m->reps, m->median * 1e6, m->min * 1e6, m->max * 1e6,
            m->spread);
    fflush(csv_out);
}

/* The candidates at `bytes`: eligible algorithms, chunks below the size. */
static int candidates(size_t bytes, cand_t *out)
{
    int n = 0;
    if (opt.alg_on[COLLAR_ALG_NATIVE]) {
        out[n++] = (cand_t){ COLLAR_ALG_NATIVE, 0 };
    }
    if (opt.alg_on[COLLAR_ALG_STAGED]) {
        out[n++] = (cand_t){ COLLAR_ALG_STAGED, 0 };
    }
    if (opt.alg_on[COLLAR_ALG_CHUNKED]) {
        for (int i = 0; i < opt.nchunks; i++) {
            if (opt.chunks[i] < bytes) {
                out[n++] = (cand_t){ COLLAR_ALG_CHUNKED, opt.chunks[i] };
            }
        }
    }
    /* ring cuts each rank's block into segments: a segment as large as the
     * message is still a ring, so the smallest chunk always runs. */
    if (opt.alg_on[COLLAR_ALG_RING]) {
        for (int i = 0; i < opt.nchunks; i++) {
            if (opt.chunks[i] < bytes || i == 0) {
                out[n++] = (cand_t){ COLLAR_ALG_RING, opt.chunks[i] };
            }
        }
    }
    return n;
}

static int same_cand(const cand_t *a, const cand_t *b)
{
    return a->alg == b->alg && (!takes_chunk(a->alg) || a->chunk == b->chunk);
}

/*
 * The winner of a point (rank 0): the fastest candidate, unless a simpler
 * algorithm (native < staged < chunked < ring) is within the noise of it: the
 * larger of the two spreads, at least 3%.  Among chunks, the previous
 * size's chunk is kept when it is within the noise of the best chunk.
 */
static int pick_winner(const point_t *p, const cand_t *prev)
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
        if (takes_chunk(order[k]) && prev != NULL && prev->alg == order[k]) {
            for (int i = 0; i < p->nmeas; i++) {
                const meas_t *m = &p->meas[i];
                double noise = fmax(MIN_NOISE, fmax(m->spread, p->meas[cb].spread));
                if (m->state != MEAS_NONE && same_cand(&m->cand, prev)
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

/* Measure every candidate at one size (collective over comm).  Returns
 * STOP_TIME when the time limit was reached, else GO_ON. */
static int measure_point(MPI_Comm comm, int ranks, point_t *p, const cand_t *prev,
                         int prune, int with_auto)
{
    cand_t cs[MAX_CANDS];
    int nc = candidates(p->bytes, cs);
    if (with_auto) {
        cs[nc++] = (cand_t){ COLLAR_ALG_AUTO, 0 };
    }
    p->nmeas = 0;
    p->winner = -1;
    double best = 0;
    int d = GO_ON;
    for (int i = 0; i < nc; i++) {
        progress(ranks, p->bytes, &cs[i]);
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
        p->winner = pick_winner(p, prev);
    }
    return d;
}

/* A size that reads well: m x 2^j with m in {4,5,6,7} (a power of two or a
 * K multiple from 4K), the nearest to g (in ratio) inside (lo, hi]; g
 * rounded to 4 bytes if there is none. */
static size_t nice_size(double g, size_t lo, size_t hi)
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

static void report_point(int ranks, const point_t *p)
{
    if (world_rank != 0 || progress_tty) {
        return;
    }
    char size[32], win[64] = "no result";
    collar_format_bytes(p->bytes, size, sizeof(size));
    if (p->winner >= 0) {
        fmt_cand(&p->meas[p->winner].cand, win, sizeof(win));
    }
    fprintf(stderr, PROG ": %d ranks, %s%s: %s (%.1f us)\n", ranks, size,
            p->refined ? " (crossover)" : "", win,
            p->winner >= 0 ? p->meas[p->winner].median * 1e6 : 0.0);
}

/* Broadcast a point from rank 0 of comm (so that every rank sees the same
 * winners when deciding what follows). */
static void bcast_point(point_t *p, MPI_Comm comm)
{
    MPI_Bcast(p, (int)sizeof(*p), MPI_BYTE, 0, comm);
}

static int cmp_point(const void *a, const void *b)
{
    const point_t *x = a, *y = b;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/*
 * A lone winner: a point whose two neighbours agree on another candidate
 * W.  If W is within the noise of the lone winner at that point (the larger
 * spread, at least 5%), W takes the point: one measurement that noise may
 * have tipped does not make two extra rules.
 */
static void smooth_winners(tuned_t *t)
{
    for (int i = 1; i + 1 < t->npoints; i++) {
        point_t *a = &t->points[i - 1], *p = &t->points[i], *b = &t->points[i + 1];
        if (a->winner < 0 || p->winner < 0 || b->winner < 0) {
            continue;
        }
        const cand_t *w = &a->meas[a->winner].cand;
        if (!same_cand(w, &b->meas[b->winner].cand)
            || same_cand(w, &p->meas[p->winner].cand)) {
            continue;
        }
        const meas_t *cur = &p->meas[p->winner];
        for (int m = 0; m < p->nmeas; m++) {
            const meas_t *x = &p->meas[m];
            double noise = fmax(0.05, fmax(x->spread, cur->spread));
            if (x->state != MEAS_NONE && same_cand(&x->cand, w)
                && x->median <= cur->median * (1 + noise)) {
                p->winner = m;
                p->smoothed = 1;
                break;
            }
        }
    }
}

static void tune_ranks(MPI_Comm comm, tuned_t *t)
{
    const double step = opt.quick ? 4 : 2;
    size_t bytes = opt.min;
    const cand_t *prev = NULL;
    point_t *last_grid = NULL;
    t->npoints = 0;
    for (;;) {
        point_t *p = &t->points[t->npoints];
        memset(p, 0, sizeof(*p));
        p->bytes = bytes / 4 * 4;
        int d = measure_point(comm, t->ranks, p, prev, 1, 0);
        bcast_point(p, comm);
        if (d == STOP_TIME) {
            time_up = 1;
            time_up_bytes = p->bytes;
            time_up_ranks = t->ranks;
            /* A point cut short is not kept: the candidates it did not
             * measure might have won.  The last winner covers the rest. */
            break;
        }
        report_point(t->ranks, p);
        t->npoints++;
        /* A crossover between this size and the previous grid size: measure
         * the geometric midpoint once. */
        if (last_grid != NULL && p->winner >= 0 && last_grid->winner >= 0
            && !same_cand(&p->meas[p->winner].cand,
                          &last_grid->meas[last_grid->winner].cand)
            && t->npoints < MAX_POINTS) {
            size_t lo = last_grid->bytes, hi = p->bytes;
            size_t mid = nice_size(sqrt((double)lo * (double)hi), lo, hi - 1) / 4 * 4;
            if (mid > lo && mid < hi) {
                point_t *q = &t->points[t->npoints];
                memset(q, 0, sizeof(*q));
                q->bytes = mid;
                q->refined = 1;
                work_total += work_of(mid, candidates(mid, (cand_t[MAX_CANDS]){{0}}));
                d = measure_point(comm, t->ranks, q,
                                  &last_grid->meas[last_grid->winner].cand, 1, 0);
                bcast_point(q, comm);
                if (d == STOP_TIME) {
                    time_up = 1;
                    time_up_bytes = q->bytes;
                    time_up_ranks = t->ranks;
                    break;
                }
                report_point(t->ranks, q);
                t->npoints++;
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
        smooth_winners(t);
    }
}

/* ------------------------------------------------------------ the table */

typedef struct {
    size_t lo, hi;          /* [lo, hi); hi == SIZE_MAX: inf */
    cand_t cand;
    size_t first, last;     /* measured sizes it covers */
} range_t;

/* Merge adjacent points with the same winner into ranges. */
static int make_ranges(const tuned_t *t, range_t *r)
{
    int n = 0;
    for (int i = 0; i < t->npoints; i++) {
        const point_t *p = &t->points[i];
        if (p->winner < 0) {
            continue;
        }
        const cand_t *c = &p->meas[p->winner].cand;
        if (n > 0 && same_cand(&r[n - 1].cand, c)) {
            r[n - 1].last = p->bytes;
            continue;
        }
        if (n > 0) {
            size_t a = r[n - 1].last, b = p->bytes;
            size_t cut = nice_size(sqrt((double)a * (double)b), a, b);
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
        char bw[32];
        collar_format_size(collar_cfg.sim_bandwidth, bw, sizeof(bw));
        tprintf(tx, "# This table models a GPU on collar's sim device (host memory "
                "posing as device\n# memory, copy bandwidth %s/s, copy latency "
                "%ld us modelled by COLLAR_SIM_BANDWIDTH\n# and COLLAR_SIM_LATENCY): "
                "it was not measured on a GPU.\n",
                collar_cfg.sim_bandwidth ? bw : "unlimited",
                collar_cfg.sim_latency_us);
    }
}

/* The whole table as text (rank 0). */
static void build_table(text_t *tx, double elapsed)
{
    system_header(tx, "measured");
    tprintf(tx, "# job: %d ranks; tuned communicator sizes:", world_size);
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
    if (time_up) {
        char b[32];
        collar_format_size(time_up_bytes, b, sizeof(b));
        tprintf(tx, "# incomplete: time limit reached at %zu bytes (%s, %d ranks); "
                "larger sizes take the last winner", time_up_bytes, b, time_up_ranks);
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
    tprintf(tx, "version 1\n");
    /* Communicator sizes that have results. */
    int idx[MAX_RANKS_VALUES], nidx = 0;
    for (int k = 0; k < ntuned; k++) {
        if (tuned[k].npoints > 0) {
            idx[nidx++] = k;
        }
    }
    for (int j = 0; j < nidx; j++) {
        const tuned_t *t = &tuned[idx[j]];
        char rr[32];
        int rlo = t->ranks;
        if (j + 1 < nidx) {
            int rhi = tuned[idx[j + 1]].ranks - 1;
            snprintf(rr, sizeof(rr), "%d-%d", rlo, rhi);
        } else {
            snprintf(rr, sizeof(rr), "%d-inf", rlo);
        }
        range_t ranges[MAX_POINTS];
        int nr = make_ranges(t, ranges);
        tprintf(tx, "\n# %d ranks: measured median time per call at each size "
                "(us), the winner first\n", t->ranks);
        for (int i = 0; i < t->npoints; i++) {
            const point_t *p = &t->points[i];
            if (p->winner < 0) {
                continue;
            }
            char s[32], w[64];
            collar_format_size(p->bytes, s, sizeof(s));
            fmt_cand(&p->meas[p->winner].cand, w, sizeof(w));
            tprintf(tx, "#   %-6s %s %.1f (spread %.0f%%)", s, w,
                    p->meas[p->winner].median * 1e6,
                    100 * p->meas[p->winner].spread);
            for (int m = 0; m < p->nmeas; m++) {
                if (m == p->winner || p->meas[m].state == MEAS_NONE) {
                    continue;
                }
                fmt_cand(&p->meas[m].cand, w, sizeof(w));
                tprintf(tx, "; %s %.1f%s", w, p->meas[m].median * 1e6,
                        p->meas[m].state == MEAS_PRUNED ? " (stopped early)" : "");
            }
            tprintf(tx, "%s%s\n", p->refined ? " [crossover]" : "",
                    p->smoothed ? " [as its neighbours: within noise]" : "");
        }
        tprintf(tx, "# collective memory ranks bytes algorithm options\n");
        for (int i = 0; i < nr; i++) {
            char lo[32], hi[32] = "inf", opts[48] = "";
            collar_format_size(ranges[i].lo, lo, sizeof(lo));
            if (ranges[i].hi != SIZE_MAX) {
                collar_format_size(ranges[i].hi, hi, sizeof(hi));
            }
            if (takes_chunk(ranges[i].cand.alg)) {
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
            tprintf(tx, "allreduce %s %s %s-%s %s%s  # %s\n",
                    opt.device ? "device" : "host", rr, lo, hi,
                    collar_alg_name(ranges[i].cand.alg), opts, span);
        }
    }
}

static void write_table(double elapsed)
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

static void write_plot(void)
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
        int nc = candidates(opt.max + 1, cs);
        range_t ranges[MAX_POINTS];
        int nr = make_ranges(t, ranges);
        fprintf(s, "unset object\nunset label\nset title '%d ranks, %s memory'\n",
                t->ranks, opt.device ? "device" : "host");
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
            fprintf(d, "# %d ranks, %s\n", t->ranks, w);
            for (int i = 0; i < t->npoints; i++) {
                const point_t *p = &t->points[i];
                for (int m = 0; m < p->nmeas; m++) {
                    if (p->meas[m].state != MEAS_NONE && same_cand(&p->meas[m].cand, &cs[c])) {
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

/* ---------------------------------------------------------------- compare */

/* What the rules in force choose (COLLAR_TUNING_FILE only; else NULL). */
static int table_choice(int ranks, size_t bytes, cand_t *out)
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
    const collar_rule_t *r = collar_table_match(&t, COLLAR_COLL_ALLREDUCE,
        opt.device ? COLLAR_MEM_DEVICE : COLLAR_MEM_HOST, ranks, bytes);
    int found = r != NULL;
    if (found) {
        out->alg = r->alg;
        out->chunk = takes_chunk(r->alg) ? (r->chunk ? r->chunk : (size_t)1 << 20) : 0;
    }
    collar_table_free(&t);
    return found;
}

static void compare_ranks(MPI_Comm comm, int ranks, double *max_regret,
                          char *max_at, size_t max_at_len)
{
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
            int have_tc = table_choice(ranks, p->bytes, &tc);
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
                if (have_tc && same_cand(&x->cand, &tc)) {
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
                    snprintf(max_at, max_at_len, "%d ranks, %s", ranks, s);
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
    lib_device = (const char *(*)(void))dlsym(RTLD_DEFAULT, "collar_device_name");
    if (set_algorithm == NULL || lib_active == NULL) {
        fail("collar-tune must run with libcollar preloaded: "
             "LD_PRELOAD=%s/libcollar.so", LIBDIR);
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

int main(int argc, char **argv)
{
    parse_options(argc, argv);
    check_preloaded();

    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    mpi_up = 1;
    t_start = MPI_Wtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    /* The same configuration collar read (quietly: collar reported it). */
    collar_config_load_quiet(1);
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
    int cuda_aware = collar_mpi_cuda_aware();
    if (!opt.alg_given) {
        opt.alg_on[COLLAR_ALG_NATIVE] = !opt.device || cuda_aware;
        opt.alg_on[COLLAR_ALG_STAGED] = 1;
        opt.alg_on[COLLAR_ALG_CHUNKED] = 1;
        opt.alg_on[COLLAR_ALG_RING] = 1;
    } else if (opt.device && opt.alg_on[COLLAR_ALG_NATIVE] && !cuda_aware) {
        bad_usage("--algorithms native: not eligible on device memory, the MPI "
                  "library does not take device pointers (COLLAR_MPI_CUDA_AWARE)");
    }
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
                    "max_us,spread\n");
        }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
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
                work_total += work_of(opt.compare[i], candidates(opt.compare[i], cs) + 1);
            }
            continue;
        }
        size_t b = opt.min;
        for (;;) {
            cand_t cs[MAX_CANDS];
            work_total += work_of(b, candidates(b, cs));
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
                tune_ranks(comm, &tuned[ntuned]);
            }
            MPI_Comm_free(&comm);
        }
        ntuned++;
        /* Ranks outside wait here, asleep rather than spinning in a
         * barrier: they would take CPU from the ranks being measured. */
        idle_barrier();
        /* Rank 0 says whether to go on. */
        MPI_Bcast(&time_up, 1, MPI_INT, 0, MPI_COMM_WORLD);
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
        }
    }
    if (csv_out) {
        fclose(csv_out);
    }
    finish(0);
    return 0;
}
