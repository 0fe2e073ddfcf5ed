/*
 * collar - the CUDA calls one small device allreduce makes, counted on the
 * CUDA emulation (mpi/sync_count.test; docs/cuda.md, "Synchronisations per
 * call").
 *
 * Each rank takes its device (--device, as tests/mpi/emu-rank.sh gives it),
 * and for each size: int sums on a pair of cudaMalloc buffers, a few
 * MPI_Allreduce calls to warm up (collar's streams, staging, IPC region and
 * pointer cache), the receive buffer cleared, then --calls calls with
 * nothing between them, counted through the emulation's cudaemu_count
 * (found with dlsym: the program links the ordinary shared runtime), and
 * the result read back and checked.  Per rank and size it prints the
 * calls per allreduce, a whole number where every call made the same
 * calls, else with two decimals:
 *
 *   sync_count: rank R bytes B: syncs=S waits=W queries=Q records=E
 *       copies=C launches=L ptrqueries=P total=T
 *   sync_count: rank R bytes B: NAME=N ... (every entry point called)
 *
 * syncs: cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize;
 * waits: cudaStreamWaitEvent; queries: cudaEventQuery, cudaStreamQuery;
 * records: cudaEventRecord; copies: cudaMemcpy, cudaMemcpyAsync and the
 * peer forms; launches: kernel launches; ptrqueries: cuPointerGetAttribute,
 * cuPointerGetAttributes, cudaPointerGetAttributes; total: every call of
 * the CUDA API.  Last line per rank: "sync_count: rank R: values right"
 * (exit 0) or "... values wrong" (exit 1).
 *
 *   sync_count [--calls N] [--sizes B,B,...] [--device D]
 *              (defaults: 20 calls; 8 and 1024 bytes)
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#define WARMUP 3

static int rank, size;

#define CHECK_CUDA(call)                                                      \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) {                                              \
            fprintf(stderr, "sync_count: rank %d: %s: %s\n", rank, #call,     \
                    cudaGetErrorString(e_));                                  \
            MPI_Abort(MPI_COMM_WORLD, 2);                                     \
        }                                                                     \
    } while (0)

typedef unsigned long (*count_fn)(const char *api);

/* The entry points a small allreduce may reach, by group. */
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

/* "n / calls": a whole number, or with two decimals. */
static void per_call(char *out, size_t len, unsigned long n, int calls)
{
    if (n % (unsigned long)calls == 0) {
        snprintf(out, len, "%lu", n / (unsigned long)calls);
    } else {
        snprintf(out, len, "%.2f", (double)n / calls);
    }
}

int main(int argc, char **argv)
{
    int calls = 20, device = -1;
    char sizes[256] = "8,1024";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--calls") == 0) {
            calls = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--sizes") == 0) {
            snprintf(sizes, sizeof(sizes), "%s", argv[i + 1]);
        } else if (strcmp(argv[i], "--device") == 0) {
            device = atoi(argv[i + 1]);
        }
    }
    count_fn count = (count_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cudaemu_count");
    if (count == NULL || calls < 1) {
        fprintf(stderr, "sync_count: needs the CUDA emulation (cudaemu_count) "
                "and --calls >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (device >= 0) {
        CHECK_CUDA(cudaSetDevice(device));
    }

    long wrong = 0;
    for (char *tok = strtok(sizes, ","); tok != NULL; tok = strtok(NULL, ",")) {
        const int bytes = atoi(tok);
        const int n = bytes / (int)sizeof(int) > 0 ? bytes / (int)sizeof(int) : 1;
        int *host = malloc((size_t)n * sizeof(int)), *dsend, *drecv;
        for (int i = 0; i < n; i++) {
            host[i] = (rank + 1) * 1000 + i;
        }
        CHECK_CUDA(cudaMalloc((void **)&dsend, (size_t)n * sizeof(int)));
        CHECK_CUDA(cudaMalloc((void **)&drecv, (size_t)n * sizeof(int)));
        CHECK_CUDA(cudaMemcpy(dsend, host, (size_t)n * sizeof(int),
                              cudaMemcpyHostToDevice));
        for (int c = 0; c < WARMUP; c++) {
            MPI_Allreduce(dsend, drecv, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
        CHECK_CUDA(cudaMemset(drecv, 0, (size_t)n * sizeof(int)));
        CHECK_CUDA(cudaDeviceSynchronize());
        MPI_Barrier(MPI_COMM_WORLD);

        unsigned long before[NNAMES], total0 = count(NULL);
        for (int k = 0; k < NNAMES; k++) {
            before[k] = count(names[k]);
        }
        for (int c = 0; c < calls; c++) {
            MPI_Allreduce(dsend, drecv, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
        const unsigned long total = count(NULL) - total0;
        unsigned long group[G_NGROUPS] = { 0 };
        char detail[2048] = "", v[32];
        size_t len = 0;
        for (int k = 0; k < NNAMES; k++) {
            const unsigned long d = count(names[k]) - before[k];
            const int g = group_of(names[k]);
            if (g >= 0) {
                group[g] += d;
            }
            if (d != 0 && len < sizeof(detail)) {
                per_call(v, sizeof(v), d, calls);
                len += (size_t)snprintf(detail + len, sizeof(detail) - len, " %s=%s",
                                        names[k], v);
            }
        }

        CHECK_CUDA(cudaMemcpy(host, drecv, (size_t)n * sizeof(int),
                              cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++) {
            const int want = 1000 * size * (size + 1) / 2 + size * i;
            if (host[i] != want && wrong++ < 3) {
                fprintf(stderr, "sync_count: rank %d bytes %d: element %d is %d, "
                        "not %d\n", rank, bytes, i, host[i], want);
            }
        }
        char line[512];
        len = (size_t)snprintf(line, sizeof(line), "sync_count: rank %d bytes %d:",
                               rank, bytes);
        for (int g = 0; g < G_NGROUPS; g++) {
            per_call(v, sizeof(v), group[g], calls);
            len += (size_t)snprintf(line + len, sizeof(line) - len, " %s=%s",
                                    group_names[g], v);
        }
        per_call(v, sizeof(v), total, calls);
        printf("%s total=%s\nsync_count: rank %d bytes %d:%s\n", line, v, rank,
               bytes, detail);
        fflush(stdout);
        CHECK_CUDA(cudaFree(dsend));
        CHECK_CUDA(cudaFree(drecv));
        free(host);
    }
    printf("sync_count: rank %d: values %s\n", rank, wrong ? "wrong" : "right");
    MPI_Finalize();
    return wrong != 0;
}
