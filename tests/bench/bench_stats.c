/*
 * What COLLAR_STATS costs per call: collar_stats_record() alone, and with
 * collar_stats_callsite() before it at depth 1 and 4, in a tight loop in one
 * process.  No MPI_Init: the statistics functions need no MPI until the
 * report, which this program does not make (mpicc only because core.h
 * includes mpi.h).  Link with src/core/stats.c, the core and -lunwind.
 *
 * The loop calls a stand-in for collar's MPI_Allreduce wrapper from a few
 * frames deep, and the wrapper asks for the call site with skip = 1, as the
 * real one does.  Per measurement: the median over --reps repetitions of
 * --iters calls.
 *
 * Usage: bench_stats [--iters N] [--reps N] [--threads N]
 * Prints one line per measurement: <name> <ns per call>
 *   record_summary     record, COLLAR_STATS=1 (no call site)
 *   record             record with a call site already captured (callsites)
 *   callsite1_record   callsite at depth 1 + record
 *   callsite4_record   callsite at depth 4 + record
 *   record_threads_T   record, T threads at once, per call of one thread
 */
#include "config.h"
#include "core/core.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long iters = 2000000;
static int reps = 7;
static int callsite_depth;     /* 0: record only */
static collar_stats_call_t template_call;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The wrapper: what the engine (src/engine/allreduce.c) does around each
 * intercepted call. */
__attribute__((noinline)) static void fake_allreduce(size_t bytes)
{
    collar_stats_call_t call = template_call;
    call.bytes = bytes;
    call.seconds = 1e-6;
    if (callsite_depth > 0) {
        call.npcs = collar_stats_callsite(call.pcs, callsite_depth, 1);
    }
    collar_stats_record(&call);
}

__attribute__((noinline)) static void loop(long n)
{
    for (long i = 0; i < n; i++) {
        fake_allreduce((size_t)8 << (i & 15));
    }
    __asm__ volatile("" ::: "memory");
}

/* A few application frames above the loop, for the deeper call sites. */
__attribute__((noinline)) static void app3(long n) { loop(n); __asm__ volatile(""); }
__attribute__((noinline)) static void app2(long n) { app3(n); __asm__ volatile(""); }
__attribute__((noinline)) static void app1(long n) { app2(n); __asm__ volatile(""); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double measure(long n)
{
    double t[64];
    int r = reps < 64 ? reps : 64;
    app1(n / 10 + 1);  /* warm: tables, libunwind's caches */
    for (int i = 0; i < r; i++) {
        double t0 = now_s();
        app1(n);
        t[i] = (now_s() - t0) / (double)n * 1e9;
    }
    qsort(t, (size_t)r, sizeof(double), cmp_double);
    return t[r / 2];
}

static void *thread_main(void *arg)
{
    double *ns = arg;
    *ns = measure(iters);
    return NULL;
}

int main(int argc, char **argv)
{
    int nthreads = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--iters") == 0) {
            iters = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--reps") == 0) {
            reps = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--threads") == 0) {
            nthreads = atoi(argv[i + 1]);
        }
    }
    if (iters < 1 || reps < 1 || nthreads < 1 || nthreads > 64) {
        fprintf(stderr, "usage: bench_stats [--iters N] [--reps N] [--threads 1-64]\n");
        return 2;
    }
    collar_config_load();
    template_call.coll = COLLAR_COLL_ALLREDUCE;
    template_call.alg = COLLAR_ALG_STAGED;
    template_call.mem = COLLAR_MEM_DEVICE;

    collar_cfg.stats = COLLAR_STATS_SUMMARY;
    collar_stats_init();
    printf("record_summary %.1f\n", measure(iters));
    collar_stats_on = 0;  /* start over in the other mode */

    collar_cfg.stats = COLLAR_STATS_CALLSITES;
    collar_cfg.stats_depth = COLLAR_STATS_MAX_DEPTH;
    collar_stats_init();
    callsite_depth = 1;
    fake_allreduce(8);    /* capture one call site for the template */
    template_call.npcs = collar_stats_callsite(template_call.pcs, 1, 0);
    callsite_depth = 0;
    printf("record %.1f\n", measure(iters));
#ifdef COLLAR_HAVE_LIBUNWIND
    callsite_depth = 1;
    printf("callsite1_record %.1f\n", measure(iters / 4));
    callsite_depth = 4;
    printf("callsite4_record %.1f\n", measure(iters / 4));
#else
    printf("callsite1_record unavailable (built without libunwind)\n");
    printf("callsite4_record unavailable (built without libunwind)\n");
#endif

    callsite_depth = 0;
    pthread_t th[64];
    double ns[64];
    for (int i = 0; i < nthreads; i++) {
        pthread_create(&th[i], NULL, thread_main, &ns[i]);
    }
    double worst = 0.0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        worst = ns[i] > worst ? ns[i] : worst;
    }
    printf("record_threads_%d %.1f\n", nthreads, worst);
    return 0;
}
