/*
 * collar - shared helpers for the MPI correctness test programs.
 * See testutil.h.
 */
#include "config.h" /* _GNU_SOURCE: RTLD_DEFAULT */
#include "testutil.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *g_prog = "mpi-test";
static int g_rank = -1;
static int g_size = 0;
static atomic_llong g_checks;
static atomic_llong g_failures;
static atomic_llong g_lines;
static double g_timeout = 120.0;
static long long g_max_lines = TU_MAX_FAIL_LINES;

static void dev_init(void);

void tu_init(const char *progname)
{
    const char *env;

    g_prog = progname;
    PMPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &g_size);
    atomic_store(&g_checks, 0);
    atomic_store(&g_failures, 0);
    atomic_store(&g_lines, 0);
    env = getenv("TU_PROGRESS_TIMEOUT");
    if (env != NULL && atof(env) > 0)
        g_timeout = atof(env);
    env = getenv("TU_MAX_FAIL_LINES");
    if (env != NULL && atoll(env) > 0)
        g_max_lines = atoll(env);
    dev_init();
}

const char *tu_progname(void) { return g_prog; }
int tu_world_rank(void) { return g_rank; }
int tu_world_size(void) { return g_size; }
long long tu_checks(void) { return atomic_load(&g_checks); }
long long tu_failures(void) { return atomic_load(&g_failures); }

static void vfail(const char *what, const char *fmt, va_list ap)
{
    char detail[1024];
    long long line;

    atomic_fetch_add(&g_failures, 1);
    line = atomic_fetch_add(&g_lines, 1);
    if (line > g_max_lines)
        return;
    if (line == g_max_lines) {
        fprintf(stdout, "rank %d: FAIL (further FAIL lines of this rank "
                "suppressed; still counted)\n", g_rank);
        fflush(stdout);
        return;
    }
    vsnprintf(detail, sizeof detail, fmt, ap);
    /* one fprintf per line: stdio locks the stream, so lines of
     * concurrent threads do not interleave */
    fprintf(stdout, "rank %d: FAIL %s: %s\n", g_rank, what, detail);
    fflush(stdout);
}

int tu_check(int ok, const char *what, const char *fmt, ...)
{
    va_list ap;

    atomic_fetch_add(&g_checks, 1);
    if (ok)
        return 1;
    va_start(ap, fmt);
    vfail(what, fmt, ap);
    va_end(ap);
    return 0;
}

void tu_fail(const char *what, const char *fmt, ...)
{
    va_list ap;

    atomic_fetch_add(&g_checks, 1);
    va_start(ap, fmt);
    vfail(what, fmt, ap);
    va_end(ap);
}

const char *tu_errstr(int rc)
{
    static _Thread_local char buf[MPI_MAX_ERROR_STRING + 32];
    int len = 0;

    if (PMPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
        snprintf(buf, sizeof buf, "error code %d", rc);
    return buf;
}

int tu_check_rc(int rc, const char *what)
{
    return tu_check(rc == MPI_SUCCESS, what, "returned %d (%s)", rc,
                    rc == MPI_SUCCESS ? "MPI_SUCCESS" : tu_errstr(rc));
}

int tu_check_same_bytes(const void *got, const void *want, size_t n,
                        const char *what)
{
    const unsigned char *g = got, *w = want;
    size_t i, first = 0, ndiff = 0;

    for (i = 0; i < n; i++) {
        if (g[i] != w[i]) {
            if (ndiff == 0)
                first = i;
            ndiff++;
        }
    }
    if (ndiff == 0)
        return tu_check(1, what, "-");
    return tu_check(0, what, "%zu of %zu bytes differ, first at byte %zu: "
                    "expected 0x%02x got 0x%02x", ndiff, n, first,
                    (unsigned)w[first], (unsigned)g[first]);
}

int tu_check_int_sum(const int *buf, int count, int nranks,
                     int (*value)(int r, int i, int round), int round,
                     const char *what)
{
    int bad = 0, first = -1;
    for (int i = 0; i < count; i++) {
        long want = 0;
        for (int r = 0; r < nranks; r++) {
            want += value(r, i, round);
        }
        if (buf[i] != (int)want) {
            if (first < 0) {
                first = i;
            }
            bad++;
        }
    }
    return tu_check(bad == 0, what, "round %d: %d wrong elements, first at %d",
                    round, bad, first);
}

int tu_finish(void)
{
    long long v[2];
    int rc;

    if (atomic_load(&g_checks) == 0)
        tu_fail("finish", "no check was run on this rank");
    v[0] = atomic_load(&g_checks);
    v[1] = atomic_load(&g_failures);
    /* PMPI_: the test's bookkeeping must not depend on the shim */
    rc = PMPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_LONG_LONG, MPI_SUM,
                        MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        fprintf(stdout, "rank %d: FAIL finish: PMPI_Allreduce returned %d\n",
                g_rank, rc);
        fflush(stdout);
        return 1;
    }
    if (g_rank == 0) {
        fprintf(stdout, "%s: %lld passed, %lld failed\n", g_prog,
                v[0] - v[1], v[1]);
        fflush(stdout);
    }
    return v[1] == 0 ? 0 : 1;
}

void tu_skip(const char *fmt, ...)
{
    va_list ap;
    char why[512];

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (g_rank <= 0) {
        fprintf(stdout, "%s: SKIP: %s\n", g_prog, why);
        fflush(stdout);
    }
    MPI_Finalize();
    exit(TU_EXIT_SKIP);
}

MPI_Status *tu_statuses_ignore(void) { return MPI_STATUSES_IGNORE; }

/* ---- generators --------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t tu_hash(uint64_t rank, uint64_t index, uint64_t seed)
{
    return mix64(mix64(mix64(seed) ^ rank) ^ index);
}

uint64_t tu_seed(uint64_t seed, uint64_t a, uint64_t b)
{
    return mix64(mix64(seed ^ 0x5851f42d4c957f2dULL) + a) ^ mix64(b + 17);
}

uint64_t tu_seed_str(uint64_t seed, const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return mix64(seed ^ h);
}

uint64_t tu_gen_bits(int rank, size_t index, uint64_t seed)
{
    return tu_hash((uint64_t)rank, (uint64_t)index, seed);
}

uint64_t tu_gen_uint(int rank, size_t index, uint64_t seed, uint64_t hi)
{
    uint64_t h = tu_gen_bits(rank, index, seed);

    if (hi == UINT64_MAX)
        return h;
    return h % (hi + 1); /* bias is irrelevant here */
}

int64_t tu_gen_int(int rank, size_t index, uint64_t seed, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)hi - (uint64_t)lo; /* modular: no overflow */

    return (int64_t)((uint64_t)lo + tu_gen_uint(rank, index, seed, span));
}

double tu_gen_real(int rank, size_t index, uint64_t seed, double lo, double hi)
{
    double u = (double)(tu_gen_bits(rank, index, seed) >> 11) * 0x1.0p-53;

    return lo + (hi - lo) * u;
}

void tu_fill_garbage(void *buf, size_t n, uint64_t seed)
{
    unsigned char *p = buf;
    size_t i;
    uint64_t h = 0;

    for (i = 0; i < n; i++) {
        if (i % 8 == 0)
            h = tu_hash(0xdead, i / 8, seed);
        p[i] = (unsigned char)(h >> (8 * (i % 8)));
    }
}

double tu_progress_timeout(void) { return g_timeout; }

void tu_progress_guard(double t0, const char *what)
{
    if (MPI_Wtime() - t0 > g_timeout) {
        tu_fail(what, "no completion after %.0f s (lost progress?); aborting",
                g_timeout);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

long tu_rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f == NULL) {
        return -1;
    }
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) {
        resident = -1;
    }
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ---- device memory (TU_DEVICE) ------------------------------------------ */

/* The runtime's entry points, by value: no CUDA header, no link-time
 * dependency (cudaError_t is an int-sized enum, cudaSuccess 0;
 * cudaMemcpyHostToDevice 1, cudaMemcpyDeviceToHost 2). */
typedef int (*dev_malloc_fn)(void **, size_t);
typedef int (*dev_free_fn)(void *);
typedef int (*dev_memcpy_fn)(void *, const void *, size_t, int);
typedef int (*dev_sync_fn)(void);
typedef int (*dev_count_fn)(int *);
typedef int (*dev_set_fn)(int);
typedef const char *(*dev_errstr_fn)(int);

static struct {
    int on;
    int local;   /* node-local rank */
    int chosen;  /* a device is current (tu_dev_select or the default) */
    dev_count_fn count;
    dev_set_fn set;
    dev_malloc_fn malloc;
    dev_free_fn free;
    dev_memcpy_fn memcpy;
    dev_sync_fn sync;
    dev_errstr_fn errstr;
} g_dev;

/* A failed CUDA call: the program cannot go on (its buffers are lost). */
static void dev_check(int err, const char *call)
{
    if (err == 0)
        return;
    fprintf(stdout, "rank %d: FAIL device: %s returned %d (%s)\n", g_rank, call,
            err, g_dev.errstr != NULL ? g_dev.errstr(err) : "?");
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void *dev_sym(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);

    if (f == NULL) {
        fprintf(stdout, "rank %d: FAIL device: TU_DEVICE=cuda, but no %s in the "
                "process (preload a CUDA runtime)\n", g_rank, name);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return f;
}

static void dev_init(void)
{
    const char *env = getenv("TU_DEVICE");
    MPI_Comm node;

    memset(&g_dev, 0, sizeof g_dev);
    if (env == NULL || *env == '\0' || strcmp(env, "host") == 0)
        return;
    if (strcmp(env, "cuda") != 0) {
        fprintf(stdout, "rank %d: FAIL device: TU_DEVICE=%s (cuda or host)\n",
                g_rank, env);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    g_dev.errstr = (dev_errstr_fn)dlsym(RTLD_DEFAULT, "cudaGetErrorString");
    g_dev.malloc = (dev_malloc_fn)dev_sym("cudaMalloc");
    g_dev.free = (dev_free_fn)dev_sym("cudaFree");
    g_dev.memcpy = (dev_memcpy_fn)dev_sym("cudaMemcpy");
    g_dev.sync = (dev_sync_fn)dev_sym("cudaDeviceSynchronize");
    g_dev.count = (dev_count_fn)dev_sym("cudaGetDeviceCount");
    g_dev.set = (dev_set_fn)dev_sym("cudaSetDevice");
    /* Collective, so here; the device is chosen at the first allocation
     * (a program that selects its own makes no context on another). */
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                         &node);
    PMPI_Comm_rank(node, &g_dev.local);
    PMPI_Comm_free(&node);
    g_dev.on = 1;
}

int tu_dev_on(void) { return g_dev.on; }

void tu_dev_select(int device)
{
    if (!g_dev.on)
        return;
    dev_check(g_dev.set(device), "cudaSetDevice");
    g_dev.chosen = 1;
}

void *tu_dev_alloc(size_t n)
{
    void *dev = NULL;
    int ndev = 0;

    if (!g_dev.on) {
        dev = malloc(n > 0 ? n : 1);
        if (dev == NULL)
            dev_check(-1, "malloc");
        return dev;
    }
    if (!g_dev.chosen) {
        /* A device per node-local rank, as a CUDA-aware program does. */
        dev_check(g_dev.count(&ndev), "cudaGetDeviceCount");
        if (ndev < 1)
            dev_check(-1, "cudaGetDeviceCount (no device)");
        tu_dev_select(g_dev.local % ndev);
    }
    dev_check(g_dev.malloc(&dev, n > 0 ? n : 1), "cudaMalloc");
    return dev;
}

void tu_dev_free(void *dev)
{
    if (g_dev.on)
        dev_check(g_dev.free(dev), "cudaFree");
    else
        free(dev);
}

void *tu_dev_mirror(const void *host, size_t n)
{
    void *dev;

    if (!g_dev.on)
        return (void *)host;
    dev = tu_dev_alloc(n);
    tu_dev_put(dev, host, n);
    return dev;
}

void tu_dev_unmirror(void *dev, const void *host)
{
    if (g_dev.on && dev != host)
        tu_dev_free(dev);
}

void tu_dev_put(void *dev, const void *host, size_t n)
{
    if (!g_dev.on || n == 0)
        return;
    dev_check(g_dev.memcpy(dev, host, n, 1), "cudaMemcpy to the device");
    /* From pageable memory the copy may still be in flight at the return
     * (CUDA's "API synchronization behavior"): what a program does before
     * handing the buffer to another library. */
    dev_check(g_dev.sync(), "cudaDeviceSynchronize");
}

void tu_dev_get(void *host, const void *dev, size_t n)
{
    if (!g_dev.on || n == 0)
        return;
    dev_check(g_dev.memcpy(host, dev, n, 2), "cudaMemcpy from the device");
}
