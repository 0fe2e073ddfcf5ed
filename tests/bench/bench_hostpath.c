/*
 * What a host-buffer MPI_Allreduce costs through collar when a device
 * backend is active (a GPU node), against the MPI library's own
 * PMPI_Allreduce on the same buffers.
 *
 * Run under LD_PRELOAD of tests/fake/.libs/libcollar_fakecuda.so (collar's
 * own objects with the cuda backend on a fake CUDA driver: no GPU needed)
 * or of libcollar.so on a GPU node.  For each communicator (MPI_COMM_SELF,
 * then MPI_COMM_WORLD when it has more than one rank), each buffer (on the
 * stack; small malloc()s, in the [heap]; static arrays, in the program's
 * file mapping; inside 1 MiB malloc()s, anonymous mappings) and each size
 * (8 B, 64 B, 1 KiB): batches of MPI_Allreduce
 * (through collar) and PMPI_Allreduce (never through collar) alternate,
 * ABBA, so that drift hits both alike.  Per batch: the mean time of one
 * call (the slowest rank's on MPI_COMM_WORLD).  Printed: the median of each
 * and the median of the per-pair ratios MPI / PMPI; with the fake driver,
 * the driver's pointer queries per MPI_Allreduce.
 *
 * Usage: bench_hostpath [--iters N] [--pairs N] [--comm self|world|both]
 *        bench_hostpath --count N [--buf stack|heap|static|mmap]
 *          N calls of each loop on MPI_COMM_SELF, 8 bytes, no timing: for
 *          valgrind --tool=callgrind, whose inclusive counts of
 *          hostpath_collar and hostpath_pmpi divided by N are the
 *          instructions of one call (run-hostpath.sh with CALLGRIND=1)
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

enum { NSIZES = 3, NBUFS = 4, MAXBYTES = 1024, BIG = 1 << 20 };

static const int sizes[NSIZES] = { 8, 64, 1024 };
static const char *const buf_names[NBUFS] = { "stack", "heap", "static",
                                              "1M malloc" };

/* Initialised, so in .data: a mapping of the executable file. */
static double static_s[MAXBYTES / sizeof(double)] = { 1 };
static double static_r[MAXBYTES / sizeof(double)] = { 1 };

typedef void (*queries_fn_t)(unsigned long *, unsigned long *);
static queries_fn_t fake_queries;

/* The two loops, apart, so that callgrind counts each. */
__attribute__((noinline)) void hostpath_collar(const void *s, void *r, int n,
                                               MPI_Comm comm, long iters)
{
    for (long i = 0; i < iters; i++) {
        MPI_Allreduce(s, r, n, MPI_DOUBLE, MPI_SUM, comm);
    }
}

__attribute__((noinline)) void hostpath_pmpi(const void *s, void *r, int n,
                                             MPI_Comm comm, long iters)
{
    for (long i = 0; i < iters; i++) {
        PMPI_Allreduce(s, r, n, MPI_DOUBLE, MPI_SUM, comm);
    }
}

static double batch(int collar, const void *s, void *r, int n, MPI_Comm comm,
                    long iters)
{
    PMPI_Barrier(comm);
    const double t0 = PMPI_Wtime();
    if (collar) {
        hostpath_collar(s, r, n, comm, iters);
    } else {
        hostpath_pmpi(s, r, n, comm, iters);
    }
    double t = (PMPI_Wtime() - t0) / (double)iters, tmax = t;
    if (comm != MPI_COMM_SELF) {
        PMPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, comm);
    }
    return tmax;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static unsigned long queries_now(void)
{
    unsigned long full = 0, single = 0;
    if (fake_queries != NULL) {
        fake_queries(&full, &single);
    }
    return full + single;
}

static void measure(const char *comm_name, MPI_Comm comm, const char *buf,
                    const void *s, void *r, int bytes, long iters, int pairs,
                    int rank)
{
    const int n = bytes / (int)sizeof(double);
    double *tc = malloc((size_t)pairs * sizeof(double));
    double *tp = malloc((size_t)pairs * sizeof(double));
    double *ratio = malloc((size_t)pairs * sizeof(double));
    batch(1, s, r, n, comm, iters);     /* warm-up */
    batch(0, s, r, n, comm, iters);
    const unsigned long q0 = queries_now();
    for (int p = 0; p < pairs; p++) {
        if (p % 2 == 0) {
            tc[p] = batch(1, s, r, n, comm, iters);
            tp[p] = batch(0, s, r, n, comm, iters);
        } else {
            tp[p] = batch(0, s, r, n, comm, iters);
            tc[p] = batch(1, s, r, n, comm, iters);
        }
        ratio[p] = tc[p] / tp[p];
    }
    /* Queries while both loops ran: the PMPI loop makes none. */
    const double qpc = (double)(queries_now() - q0) / ((double)pairs * (double)iters);
    if (rank == 0) {
        char q[32] = "-";
        if (fake_queries != NULL) {
            snprintf(q, sizeof(q), "%.2f", qpc);
        }
        printf("%-14s %-10s %5d %10.1f %10.1f %7.4f %8s\n", comm_name, buf, bytes,
               median(tc, pairs) * 1e9, median(tp, pairs) * 1e9,
               median(ratio, pairs), q);
        fflush(stdout);
    }
    free(tc);
    free(tp);
    free(ratio);
}

int main(int argc, char **argv)
{
    long iters = 2000, count = 0;
    int pairs = 51, want_self = 1, want_world = 1, only_buf = 0;
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--iters") == 0) {
            iters = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--pairs") == 0) {
            pairs = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--count") == 0) {
            count = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--buf") == 0) {
            only_buf = strcmp(argv[i + 1], "stack") == 0 ? 1
                       : strcmp(argv[i + 1], "heap") == 0 ? 2
                       : strcmp(argv[i + 1], "static") == 0 ? 3
                       : strcmp(argv[i + 1], "mmap") == 0 ? 4 : -1;
        } else if (strcmp(argv[i], "--comm") == 0) {
            want_self = strcmp(argv[i + 1], "world") != 0;
            want_world = strcmp(argv[i + 1], "self") != 0;
        }
    }
    if (pairs < 1 || pairs > 100000 || iters < 1 || count < 0 || only_buf < 0) {
        fprintf(stderr, "bench_hostpath: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *(*device_name)(void) =
        (const char *(*)(void))dlsym(RTLD_DEFAULT, "collar_device_name");
    fake_queries = (queries_fn_t)dlsym(RTLD_DEFAULT, "collar_fakecuda_queries");
    const char *device = device_name != NULL ? device_name() : "(collar not loaded)";

    /* Stack buffers in this frame, small ones in the [heap], and 1 MiB
     * ones (anonymous mappings: above malloc's mmap threshold). */
    double stack_s[MAXBYTES / sizeof(double)], stack_r[MAXBYTES / sizeof(double)];
    double *heap_s = malloc(MAXBYTES), *heap_r = malloc(MAXBYTES);
    double *big_s = malloc(BIG), *big_r = malloc(BIG);
    if (heap_s == NULL || heap_r == NULL || big_s == NULL || big_r == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    memset(stack_s, 0, sizeof(stack_s));
    memset(heap_s, 0, MAXBYTES);
    memset(big_s, 0, BIG);
    const double *sbufs[NBUFS] = { stack_s, heap_s, static_s, big_s };
    double *rbufs[NBUFS] = { stack_r, heap_r, static_r, big_r };

    if (count > 0) {
        /* Prints the fake driver's pointer queries per MPI_Allreduce for
         * each buffer: under valgrind the stack and the heap are not the
         * [stack] and [heap] of /proc/self/maps (valgrind lays out the
         * process), so they take the path of anonymous mappings; static
         * data is still a file mapping. */
        for (int b = 0; b < NBUFS; b++) {
            if (only_buf == 0 || only_buf == b + 1) {
                const unsigned long q0 = queries_now();
                hostpath_collar(sbufs[b], rbufs[b], 1, MPI_COMM_SELF, count);
                const unsigned long q = queries_now() - q0;
                hostpath_pmpi(sbufs[b], rbufs[b], 1, MPI_COMM_SELF, count);
                if (rank == 0) {
                    printf("%s: %.2f driver queries per MPI_Allreduce\n",
                           buf_names[b], (double)q / (double)count);
                }
            }
        }
        MPI_Finalize();
        return 0;
    }

    if (rank == 0) {
        printf("host-buffer MPI_Allreduce (MPI_DOUBLE, MPI_SUM) through collar "
               "(device backend: %s) against PMPI_Allreduce; %d rank(s), %d "
               "alternating batch pairs of %ld calls\n", device, size, pairs, iters);
        if (device_name == NULL || strcmp(device, "cuda") != 0) {
            printf("note: the cuda backend is not active; this measures "
                   "another path\n");
        }
        printf("%-14s %-10s %5s %10s %10s %7s %8s\n", "communicator", "buffer",
               "bytes", "collar_ns", "pmpi_ns", "ratio", "queries");
    }
    for (int c = 0; c < 2; c++) {
        const MPI_Comm comm = c == 0 ? MPI_COMM_SELF : MPI_COMM_WORLD;
        if ((c == 0 && !want_self) || (c == 1 && (!want_world || size == 1))) {
            continue;
        }
        char name[32];
        snprintf(name, sizeof(name), c == 0 ? "SELF" : "WORLD(%d)", size);
        for (int b = 0; b < NBUFS; b++) {
            for (int z = 0; z < NSIZES; z++) {
                measure(name, comm, buf_names[b], sbufs[b], rbufs[b], sizes[z],
                        iters, pairs, rank);
            }
        }
    }
    if (rank == 0) {
        printf("(ns per call, medians over batch pairs; ratio: median of "
               "collar/PMPI per pair; queries: the fake driver's pointer "
               "queries per MPI_Allreduce)\n");
    }
    free(heap_s);
    free(heap_r);
    free(big_s);
    free(big_r);
    MPI_Finalize();
    return 0;
}
