/*
 * Small-message latency of MPI_Allreduce on device memory, for the GPU
 * check's latency table (tests/gpu/run.sh): int sums of each size on a
 * pair of cudaMalloc buffers (the device: --device, else the node-local
 * rank modulo the visible devices), a warm-up, then BATCHES batches of
 * ITERS blocking calls; a batch's time per call is the slowest rank's, and
 * the median batch is printed:
 *
 *   latency: bytes B: T us
 *
 * The last batch's result is read back and checked on every rank; the
 * last line is "latency: values right" (exit 0) or "... wrong" (exit 1).
 * Run under collar (LD_PRELOAD) with an algorithm forced, or without it
 * (--native) where the MPI library takes device pointers; where it does
 * not, --native prints "latency: skipped: ..." and exits 0.
 *
 *   latency [--sizes B,B,...] [--iters N] [--batches N] [--device D] [--native]
 *           (defaults: 8,64,1024,8192 bytes; 1000 calls; 7 batches)
 */
#include <cuda_runtime.h>
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

#define CHECK_CUDA(call)                                                      \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) {                                              \
            fprintf(stderr, "latency: rank %d: %s: %s\n", rank, #call,        \
                    cudaGetErrorString(e_));                                  \
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

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    char sizes[256] = "8,64,1024,8192";
    int iters = 1000, batches = 7, device = -1, native = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--native") == 0) {
            native = 1;
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
    if (iters < 1 || batches < 1 || batches > 64) {
        fprintf(stderr, "latency: --iters >= 1, 1 <= --batches <= 64\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (native && !mpi_takes_device()) {
        if (rank == 0) {
            printf("latency: skipped: the MPI library does not take device pointers\n");
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
        int *host = malloc((size_t)n * sizeof(int)), *dsend, *drecv;
        for (int i = 0; i < n; i++) {
            host[i] = rank + i;
        }
        CHECK_CUDA(cudaMalloc((void **)&dsend, (size_t)n * sizeof(int)));
        CHECK_CUDA(cudaMalloc((void **)&drecv, (size_t)n * sizeof(int)));
        CHECK_CUDA(cudaMemcpy(dsend, host, (size_t)n * sizeof(int),
                              cudaMemcpyHostToDevice));
        for (int c = 0; c < 20; c++) {
            MPI_Allreduce(dsend, drecv, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
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
        CHECK_CUDA(cudaMemcpy(host, drecv, (size_t)n * sizeof(int),
                              cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++) {
            wrong += host[i] != nranks * (nranks - 1) / 2 + nranks * i;
        }
        if (rank == 0) {
            printf("latency: bytes %d: %.2f us\n", bytes, per[batches / 2] * 1e6);
            fflush(stdout);
        }
        CHECK_CUDA(cudaFree(dsend));
        CHECK_CUDA(cudaFree(drecv));
        free(host);
    }
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("latency: values %s\n", wrong ? "wrong" : "right");
    }
    MPI_Finalize();
    return wrong != 0;
}
