/*
 * collar - nccl_order (nccl.test): the caller's device work on a
 * non-blocking stream comes before an allreduce that runs NCCL, while
 * another NCCL operation of the process may be in flight.
 *
 * The send buffer of a blocking MPI_Allreduce on A is written by work
 * queued on a non-blocking stream just before the call (a host function
 * that sleeps 300 ms, then a copy), while rank 0 has an MPI_Iallreduce in
 * flight on B (rank 1 starts its part after the blocking call; valid
 * MPI).  Under COLLAR_SYNC=device (the default: safe for work on any
 * stream) every value must be right.  The ranks then free A and B in
 * opposite orders (MPI_Comm_free is local).  Prints, per rank,
 * "rank R: W of N wrong"; exits 1 where any value is wrong.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 1024

static void CUDART_CB slow(void *arg)
{
    (void)arg;
    struct timespec t = { 0, 300000000 };
    nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, dev = 0;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--device") == 0) {
            dev = atoi(argv[++i]);
        }
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cudaSetDevice(dev);
    MPI_Comm A, B;
    MPI_Comm_dup(MPI_COMM_WORLD, &A);
    MPI_Comm_dup(MPI_COMM_WORLD, &B);
    float *sA, *rA, *bB, *h, out[N];
    cudaMalloc((void **)&sA, N * sizeof(float));
    cudaMalloc((void **)&rA, N * sizeof(float));
    cudaMalloc((void **)&bB, N * sizeof(float));
    cudaMallocHost((void **)&h, N * sizeof(float));
    cudaMemset(sA, 0, N * sizeof(float));
    cudaMemset(bB, 0, N * sizeof(float));
    /* Blocking allreduces first: they make NCCL's communicators. */
    MPI_Allreduce(MPI_IN_PLACE, bB, N, MPI_FLOAT, MPI_SUM, B);
    MPI_Allreduce(sA, rA, N, MPI_FLOAT, MPI_SUM, A);
    cudaStream_t nb;
    cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
    MPI_Request req = MPI_REQUEST_NULL;
    if (rank == 0) {
        MPI_Iallreduce(MPI_IN_PLACE, bB, N, MPI_FLOAT, MPI_SUM, B, &req);
    }
    for (int i = 0; i < N; i++) {
        h[i] = (float)(rank + 100 + i);
    }
    cudaLaunchHostFunc(nb, slow, NULL);
    cudaMemcpyAsync(sA, h, N * sizeof(float), cudaMemcpyHostToDevice, nb);
    int rc = MPI_Allreduce(sA, rA, N, MPI_FLOAT, MPI_SUM, A);
    if (rank != 0) {
        MPI_Iallreduce(MPI_IN_PLACE, bB, N, MPI_FLOAT, MPI_SUM, B, &req);
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    cudaMemcpy(out, rA, sizeof(out), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        if (out[i] != (float)(size * (100 + i) + size * (size - 1) / 2)) {
            bad++;
        }
    }
    printf("rank %d rc %d: %d of %d wrong\n", rank, rc, bad, N);
    if (rank == 0) {
        MPI_Comm_free(&A);
        MPI_Comm_free(&B);
    } else {
        MPI_Comm_free(&B);
        MPI_Comm_free(&A);
    }
    cudaStreamDestroy(nb);
    cudaFreeHost(h);
    cudaFree(sA);
    cudaFree(rA);
    cudaFree(bB);
    MPI_Finalize();
    return bad != 0 || rc != MPI_SUCCESS;
}
