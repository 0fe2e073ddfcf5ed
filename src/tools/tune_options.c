/*
 * collar-tune: the command line (docs/tune.md).  Every process parses it
 * (before MPI_Init); only the lead one prints.
 */
#include "tune.h"
#include "libpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* gnuplot on PATH, or NULL. */
const char *find_gnuplot(void)
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
    char lib[4096];
    collar_tool_library_path(lib, sizeof(lib));
    fprintf(out,
        "Usage: mpirun -np N env LD_PRELOAD=%s \\\n"
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
        "  --algorithms LIST     candidates among native, staged, chunked, ring,\n"
        "                        ipc, hier, nccl (default: every eligible one: on\n"
        "                        device memory staged, chunked, ring, ipc\n"
        "                        (communicators of one node), hier (across nodes),\n"
        "                        nccl (where NCCL can be loaded), and native\n"
        "                        when the MPI library takes device pointers; on\n"
        "                        host memory native, staged, chunked, ring)\n"
        "  --chunks LIST         chunk sizes tried for chunked and segment sizes for\n"
        "                        ring (default 256K,1M,4M; only chunks smaller than\n"
        "                        the message)\n"
        "  --time-limit SECONDS  bound on the whole run (default 600); a run that\n"
        "                        reaches it writes what it has measured, marked\n"
        "                        incomplete\n"
        "  --quick               a coarser grid (x4 instead of x2) and smaller time\n"
        "                        budgets per point\n"
        "  --max-spread PERCENT  the noise above which a choice within the noise is\n"
        "                        measured again, then marked (default 15; spread =\n"
        "                        interquartile range / median)\n"
        "  --repeats N           how many more times at most (default 2; 0: never)\n"
        "  --note TEXT           a line of your own in the table's header (e.g. how\n"
        "                        to make it again)\n"
        "  --list-candidates     print the candidate list these options consider,\n"
        "                        as the table's header writes it, and exit (no\n"
        "                        measurement, no collar needed)\n"
        "  --csv FILE            every measurement, one line each: ranks, bytes,\n"
        "                        algorithm, chunk, reps, median_us, min_us, max_us,\n"
        "                        spread, round (0, or the repeat)\n"
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
        "chunked < ring) by more than the measured noise (at least 3%%); where\n"
        "the winner and another candidate stay within a noise above\n"
        "--max-spread after --repeats, the table marks the choice and a warning\n"
        "names the size.  Exit status: 0 done, 1 cannot tune here, 2 bad option.\n",
        lib, COLLAR_TUNINGDIR,
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
    if (alg < 0) {
        bad_usage("%s expects native, staged, chunked, ring, ipc, hier or nccl, not "
                  "'%s'", name, item);
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

int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
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

void parse_options(int argc, char **argv)
{
    opt.device = 1;
    opt.min = 1024;
    opt.max = (size_t)64 << 20;
    opt.time_limit = 600;
    opt.max_spread = MAX_SPREAD;
    opt.repeats = REPEATS;
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
        if (strcmp(a, "--list-candidates") == 0) {
            opt.list_candidates = 1;
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
            "--max-spread", "--repeats", "--note",
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
        } else if (strcmp(name, "--max-spread") == 0) {
            char *end;
            errno = 0;
            double v = strtod(val, &end);
            if (end != val && *end == '%') {
                end++;
            }
            if (errno || end == val || *end || !(v > 0) || v > 1000) {
                bad_usage("--max-spread expects a percentage above 0 (e.g. 15 or "
                          "15%%), not '%s'", val);
            }
            opt.max_spread = v / 100;
        } else if (strcmp(name, "--repeats") == 0) {
            long v;
            if (collar_parse_long(val, 0, 100, &v) != COLLAR_OK) {
                bad_usage("--repeats expects a number from 0 to 100, not '%s'", val);
            }
            opt.repeats = (int)v;
        } else if (strcmp(name, "--note") == 0) {
            if (strchr(val, '\n') != NULL) {
                bad_usage("--note expects one line");
            }
            opt.note = val;
        }
    }
    if (opt.ncompare == 0 && opt.output == NULL && !opt.list_candidates) {
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
