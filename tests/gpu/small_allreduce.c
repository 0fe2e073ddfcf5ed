/*
 * Small MPI_Allreduce calls on device memory: their latency, for the GPU
 * check's latency table (tests/gpu/run.sh), or, on the CUDA emulation, the
 * CUDA calls each makes (--count, mpi/sync_count.test; docs/cuda.md,
 * "Synchronisations per call").
 *
 * Each rank takes its device (--device, else the node-local rank modulo
 * the visible devices) and, per size, int sums on a pair of cudaMalloc
 * buffers: a warm-up (collar's streams, staging, IPC region, pointer
 * cache), the receive buffer cleared, then
 *
 *   timing (default)  BATCHES batches of ITERS blocking calls; a batch's
 *                     time per call is the slowest rank's; rank 0 prints
 *                     the median batch:
 *                       small_allreduce: bytes B: T us
 *   --count           ITERS calls with nothing between them, counted
 *                     through the emulation's cudaemu_count (found with
 *                     dlsym: the program links the ordinary shared
 *                     runtime); every rank prints the calls per allreduce
 *                     (a whole number where every call made the same
 *                     calls, else with two decimals):
 *                       small_allreduce: rank R bytes B: syncs=S waits=W
 *                           queries=Q records=E copies=C launches=L
 *                           ptrqueries=P total=T
 *                       small_allreduce: rank R bytes B: NAME=N ...
 *                     syncs: cudaDeviceSynchronize, cudaStreamSynchronize,
 *                     cudaEventSynchronize; waits: cudaStreamWaitEvent;
 *                     queries: cudaEventQuery, cudaStreamQuery; records:
 *                     cudaEventRecord; copies: cudaMemcpy, cudaMemcpyAsync
 *                     and the peer forms; launches: kernel launches;
 *                     ptrqueries: cuPointerGetAttribute(s),
 *                     cudaPointerGetAttributes; total: every CUDA call.
 *
 * The result is read back and checked on every rank; each rank's last line
 * is "small_allreduce: rank R: values right" (exit 0) or "... wrong"
 * (exit 1).  Run under collar (LD_PRELOAD) with an algorithm forced, or
 * without it (--native) where the MPI library takes device pointers; where
 * it does not, --native prints "small_allreduce: skipped: ..." and exits 0.
 *
 *   small_allreduce [--count] [--native] [--sizes B,B,...] [--iters N]
 *                   [--batches N] [--device D]
 *       (defaults: 8,64,1024,8192 bytes; 1000 calls, 20 with --count;
 *        7 batches)
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 20

static int rank, nranks;

#define CHECK_CUDA(call)                                                      \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) {                                              \
            fprintf(stderr, "small_allreduce: rank %d: %s: %s\n", rank,       \
                    #call, cudaGetErrorString(e_));                           \
            MPI_Abort(MPI_COMM_WORLD, 2);                                     \
        }                                                                     \
    } while (0)

/* Whether the MPI library says it reads device memory itself. */
static int mpi_takes_device(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support();
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    int v = 0;
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &v) == MPI_SUCCESS && v;
#else
    return 0;
#endif
}

/* ----------------------------------------------------------- counting */

typedef unsigned long (*count_fn)(const char *api);
static count_fn count;

/* The entry points a small allreduce may reach. */
static const char *const names[] = {
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cudaStreamWaitEvent", "cudaEventQuery", "cudaStreamQuery",
    "cudaEventRecord", "cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpyPeer",
    "cudaMemcpyPeerAsync", "cudaLaunchKernel", "cuPointerGetAttribute",
    "cuPointerGetAttributes", "cudaPointerGetAttributes", "cudaSetDevice",
    "cudaGetDevice", "cuCtxGetCurrent", "cuCtxSetCurrent", "cudaEventCreate",
    "cudaEventDestroy", "cudaStreamCreate", "cudaMalloc", "cudaFree",
    "cudaHostAlloc", "cudaFreeHost", "cudaIpcGetMemHandle",
    "cudaIpcOpenMemHandle", "cudaIpcCloseMemHandle", "cudaGetDeviceCount",
};
#define NNAMES (int)(sizeof(names) / sizeof(names[0]))
enum { G_SYNC, G_WAIT, G_QUERY, G_RECORD, G_COPY, G_LAUNCH, G_PTR, G_NGROUPS };
static const char *const group_names[G_NGROUPS] = {
    "syncs", "waits", "queries", "records", "copies", "launches", "ptrqueries",
};

static int group_of(const char *n)
{
    if (strstr(n, "Synchronize") != NULL) {
        return G_SYNC;
    }
    if (strcmp(n, "cudaStreamWaitEvent") == 0) {
        return G_WAIT;
    }
    if (strstr(n, "Query") != NULL) {
        return G_QUERY;
    }
    if (strcmp(n, "cudaEventRecord") == 0) {
        return G_RECORD;
    }
    if (strncmp(n, "cudaMemcpy", 10) == 0) {
        return G_COPY;
    }
    if (strcmp(n, "cudaLaunchKernel") == 0) {
        return G_LAUNCH;
    }
    if (strstr(n, "PointerGetAttribute") != NULL) {
        return G_PTR;
    }
    return -1;
}

/* " name=n/calls": a whole number, or with two decimals. */
static size_t per_call(char *out, size_t len, const char *name, unsigned long n,
                       int calls)
{
    if (n % (unsigned long)calls == 0) {
        return (size_t)snprintf(out, len, " %s=%lu", name, n / (unsigned long)calls);
    }
    return (size_t)snprintf(out, len, " %s=%.2f", name, (double)n / calls);
}

/* `calls` allreduces, counted; prints the two lines of --count. */
static void count_calls(const int *dsend, int *drecv, int n, int bytes, int calls)
{
    unsigned long before[NNAMES], group[G_NGROUPS] = { 0 };
    const unsigned long total0 = count(NULL);
    for (int k = 0; k < NNAMES; k++) {
        before[k] = count(names[k]);
    }
    for (int c = 0; c < calls; c++) {
        MPI_Allreduce(dsend, drecv, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    const unsigned long total = count(NULL) - total0;
    char detail[2048], line[512];
    size_t dlen = 0, len = 0;
    detail[0] = '\0';
    for (int k = 0; k < NNAMES; k++) {
        const unsigned long d = count(names[k]) - before[k];
        const int g = group_of(names[k]);
        if (g >= 0) {
            group[g] += d;
        }
        if (d != 0 && dlen < sizeof(detail)) {
            dlen += per_call(detail + dlen, sizeof(detail) - dlen, names[k], d, calls);
        }
    }
    for (int g = 0; g < G_NGROUPS && len < sizeof(line); g++) {
        len += per_call(line + len, sizeof(line) - len, group_names[g], group[g], calls);
    }
    if (len < sizeof(line)) {
        per_call(line + len, sizeof(line) - len, "total", total, calls);
    }
    printf("small_allreduce: rank %d bytes %d:%s\nsmall_allreduce: rank %d bytes %d:%s\n",
           rank, bytes, line, rank, bytes, detail);
    fflush(stdout);
}

/* ------------------------------------------------------------- timing */

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* `batches` batches of `iters` allreduces; rank 0 prints the median. */
static void time_calls(const int *dsend, int *drecv, int n, int bytes, int iters,
                       int batches)
{
    double per[64];
    for (int b = 0; b < batches; b++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int c = 0; c < iters; c++) {
            MPI_Allreduce(dsend, drecv, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
        double t = (MPI_Wtime() - t0) / iters;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        per[b] = t;
    }
    qsort(per, (size_t)batches, sizeof(per[0]), cmp_double);
    if (rank == 0) {
        printf("small_allreduce: bytes %d: %.2f us\n", bytes, per[batches / 2] * 1e6);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    char sizes[256] = "8,64,1024,8192";
    int iters = -1, batches = 7, device = -1, native = 0, counting = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--native") == 0) {
            native = 1;
        } else if (strcmp(argv[i], "--count") == 0) {
            counting = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--sizes") == 0) {
            snprintf(sizes, sizeof(sizes), "%s", argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--iters") == 0) {
            iters = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--batches") == 0) {
            batches = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--device") == 0) {
            device = atoi(argv[++i]);
        }
    }
    if (iters < 0) {
        iters = counting ? 20 : 1000;
    }
    if (counting) {
        count = (count_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cudaemu_count");
    }
    if (iters < 1 || batches < 1 || batches > 64 || (counting && count == NULL)) {
        fprintf(stderr, "small_allreduce: --iters >= 1, 1 <= --batches <= 64; "
                "--count needs the CUDA emulation (cudaemu_count)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (native && !mpi_takes_device()) {
        if (rank == 0) {
            printf("small_allreduce: skipped: the MPI library does not take "
                   "device pointers\n");
        }
        MPI_Finalize();
        return 0;
    }
    if (device < 0) {
        MPI_Comm node;
        int local = 0, ndev = 1;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
        CHECK_CUDA(cudaGetDeviceCount(&ndev));
        device = ndev > 0 ? local % ndev : 0;
    }
    CHECK_CUDA(cudaSetDevice(device));

    long wrong = 0;
    for (char *tok = strtok(sizes, ","); tok != NULL; tok = strtok(NULL, ",")) {
        const int bytes = atoi(tok);
        const int n = bytes / (int)sizeof(int) > 0 ? bytes / (int)sizeof(int) : 1;
        const size_t len = (size_t)n * sizeof(int);
        int *host = malloc(len), *dsend, *drecv;
        for (int i = 0; i < n; i++) {
            host[i] = (rank + 1) * 1000 + i;
        }
        /* Each buffer from a GPU page boundary (64 KiB) inside its
         * allocation: GDRCopy pins from such a boundary only (docs/cuda.md,
         * "GDRCopy"), so the GDRCopy row measures its mappings, not the
         * copy engine; the other rows are the same either way. */
        char *dsend_base, *drecv_base;
        const size_t page = (size_t)64 << 10;
        CHECK_CUDA(cudaMalloc((void **)&dsend_base, len + page));
        CHECK_CUDA(cudaMalloc((void **)&drecv_base, len + page));
        dsend = (int *)(dsend_base + (page - (uintptr_t)dsend_base % page) % page);
        drecv = (int *)(drecv_base + (page - (uintptr_t)drecv_base % page) % page);
        CHECK_CUDA(cudaMemcpy(dsend, host, len, cudaMemcpyHostToDevice));
        for (int c = 0; c < WARMUP; c++) {
            MPI_Allreduce(dsend, drecv, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
        CHECK_CUDA(cudaMemset(drecv, 0, len));
        CHECK_CUDA(cudaDeviceSynchronize());
        MPI_Barrier(MPI_COMM_WORLD);
        if (counting) {
            count_calls(dsend, drecv, n, bytes, iters);
        } else {
            time_calls(dsend, drecv, n, bytes, iters, batches);
        }
        CHECK_CUDA(cudaMemcpy(host, drecv, len, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++) {
            const int want = 1000 * nranks * (nranks + 1) / 2 + nranks * i;
            if (host[i] != want && wrong++ < 3) {
                fprintf(stderr, "small_allreduce: rank %d bytes %d: element %d "
                        "is %d, not %d\n", rank, bytes, i, host[i], want);
            }
        }
        CHECK_CUDA(cudaFree(dsend_base));
        CHECK_CUDA(cudaFree(drecv_base));
        free(host);
    }
    printf("small_allreduce: rank %d: values %s\n", rank, wrong ? "wrong" : "right");
    MPI_Finalize();
    return wrong != 0;
}
