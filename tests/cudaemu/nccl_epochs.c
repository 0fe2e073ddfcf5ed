/*
 * collar - nccl_epochs (nccl.test): the stand-in NCCL enforces the rule of
 * NCCL's user guide on several communicators ("Using multiple NCCL
 * communicators concurrently": operations on different communicators
 * "should therefore be used at different epochs with a locking mechanism,
 * and applications should ensure operations are submitted in the same
 * order across ranks"), loudly, so that a test of collar's nccl algorithm
 * would fail where collar broke it.
 *
 * Two ranks, two NCCL communicators A and B (NCCL loaded with dlopen from
 * the path given, as collar loads it), one ncclAllReduce on each:
 *   serial   A, its stream synchronized, then B: "nccl_epochs: serial ok"
 *   overlap  A, then B while A is in flight: the stand-in aborts the
 *            process with "RULE nccl-epochs"
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } unique_id_t;
typedef int (*get_id_fn)(unique_id_t *);
typedef int (*init_fn)(void **, int, unique_id_t, int);
typedef int (*allreduce_fn)(const void *, void *, size_t, int, int, void *,
                            cudaStream_t);

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3 || size != 2) {
        fprintf(stderr, "usage: nccl_epochs LIBNCCL serial|overlap (2 ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int overlap = strcmp(argv[2], "overlap") == 0;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    get_id_fn get_id = lib ? (get_id_fn)dlsym(lib, "ncclGetUniqueId") : NULL;
    init_fn init = lib ? (init_fn)dlsym(lib, "ncclCommInitRank") : NULL;
    allreduce_fn allreduce = lib ? (allreduce_fn)dlsym(lib, "ncclAllReduce") : NULL;
    if (get_id == NULL || init == NULL || allreduce == NULL) {
        fprintf(stderr, "nccl_epochs: cannot load %s: %s\n", argv[1], dlerror());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    cudaSetDevice(rank);
    void *comm[2];
    cudaStream_t stream[2];
    float *buf[2];
    for (int c = 0; c < 2; c++) {
        unique_id_t id;
        memset(&id, 0, sizeof(id));
        if (rank == 0 && get_id(&id) != 0) {
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
        if (init(&comm[c], size, id, rank) != 0) {
            fprintf(stderr, "nccl_epochs: ncclCommInitRank failed\n");
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        cudaStreamCreate(&stream[c]);
        cudaMalloc((void **)&buf[c], 1024 * sizeof(float));
        cudaMemset(buf[c], 0, 1024 * sizeof(float));
    }
    /* float (7), sum (0) */
    allreduce(buf[0], buf[0], 1024, 7, 0, comm[0], stream[0]);
    if (!overlap) {
        cudaStreamSynchronize(stream[0]);
    }
    allreduce(buf[1], buf[1], 1024, 7, 0, comm[1], stream[1]);
    cudaStreamSynchronize(stream[0]);
    cudaStreamSynchronize(stream[1]);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("nccl_epochs: %s ok\n", argv[2]);
    }
    MPI_Finalize();
    return 0;
}
