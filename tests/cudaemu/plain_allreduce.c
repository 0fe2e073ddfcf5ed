/*
 * collar - a plain CUDA + MPI program (cudaemu_plain.test): nothing of
 * collar's, the toolkit's headers, the shared CUDA runtime (-lcudart).
 *
 * Each rank takes the device of its node-local rank, copies its integers
 * and floats into cudaMalloc'ed buffers, reduces them with MPI_Allreduce
 * (in place and out of place) and with MPI_Iallreduce + MPI_Wait on the
 * device pointers, copies the results back and checks them: integer sums
 * exactly, float sums against a sum in double within the rounding of
 * `size` float additions.  Before its first MPI call on device memory each
 * rank prints "reached MPI_Allreduce with device pointer ..." (what the
 * runtime says the pointer is), so a run over an MPI library that cannot
 * read device memory shows how far it got.  Last line per rank:
 * "plain_allreduce: rank R: N values right" or "... N values wrong";
 * exit 0 only when every rank's values are right.
 *
 *   plain_allreduce [COUNT]     (default 100003 elements of each kind)
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#define CHECK_CUDA(call)                                                      \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) {                                              \
            fprintf(stderr, "plain_allreduce: rank %d: %s: %s\n", rank,       \
                    #call, cudaGetErrorString(e_));                           \
            MPI_Abort(MPI_COMM_WORLD, 2);                                     \
        }                                                                     \
    } while (0)

static int rank, size;

/* Rank r's integers and floats. */
static int int_value(int r, long i) { return (int)((r + 1) * 1000 + i % 977); }
static float float_value(int r, long i) { return 0.1f * (float)(r + 1) + 0.001f * (float)(i % 101); }

/* Wrong elements of a device result of `count` integers. */
static long check_ints(const int *dev, long count)
{
    int *h = malloc((size_t)count * sizeof *h);
    long bad = 0;
    CHECK_CUDA(cudaMemcpy(h, dev, (size_t)count * sizeof *h, cudaMemcpyDeviceToHost));
    for (long i = 0; i < count; i++) {
        long want = 0;
        for (int r = 0; r < size; r++)
            want += int_value(r, i);
        if (h[i] != want && bad++ < 3)
            fprintf(stderr, "plain_allreduce: rank %d: int %ld is %d, not %ld\n",
                    rank, i, h[i], want);
    }
    free(h);
    return bad;
}

static long check_floats(const float *dev, long count)
{
    float *h = malloc((size_t)count * sizeof *h);
    long bad = 0;
    CHECK_CUDA(cudaMemcpy(h, dev, (size_t)count * sizeof *h, cudaMemcpyDeviceToHost));
    for (long i = 0; i < count; i++) {
        double want = 0, mag = 0;
        for (int r = 0; r < size; r++) {
            want += float_value(r, i);
            mag += fabs(float_value(r, i));
        }
        /* Any order of size - 1 float additions. */
        if (fabs(h[i] - want) > size * FLT_EPSILON * mag && bad++ < 3)
            fprintf(stderr, "plain_allreduce: rank %d: float %ld is %.9g, not %.9g\n",
                    rank, i, h[i], want);
    }
    free(h);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const long count = argc > 1 ? atol(argv[1]) : 100003;

    /* The device of this rank's place on its node. */
    MPI_Comm node;
    int local = 0, ndev = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    CHECK_CUDA(cudaSetDevice(local % ndev));

    const size_t ibytes = (size_t)count * sizeof(int), fbytes = (size_t)count * sizeof(float);
    int *hi = malloc(ibytes);
    float *hf = malloc(fbytes);
    for (long i = 0; i < count; i++) {
        hi[i] = int_value(rank, i);
        hf[i] = float_value(rank, i);
    }
    int *di, *di2;
    float *df, *dfr;
    CHECK_CUDA(cudaMalloc((void **)&di, ibytes));
    CHECK_CUDA(cudaMalloc((void **)&di2, ibytes));
    CHECK_CUDA(cudaMalloc((void **)&df, fbytes));
    CHECK_CUDA(cudaMalloc((void **)&dfr, fbytes));
    CHECK_CUDA(cudaMemcpy(di, hi, ibytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(di2, hi, ibytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(df, hf, fbytes, cudaMemcpyHostToDevice));

    struct cudaPointerAttributes attr;
    CHECK_CUDA(cudaPointerGetAttributes(&attr, di));
    printf("plain_allreduce: rank %d: reached MPI_Allreduce with device pointer %p "
           "(%s memory of device %d)\n", rank, (void *)di,
           attr.type == cudaMemoryTypeDevice ? "device" : "not device", attr.device);
    fflush(stdout);

    long bad = 0;
    MPI_Allreduce(MPI_IN_PLACE, di, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    bad += check_ints(di, count);
    MPI_Allreduce(df, dfr, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    bad += check_floats(dfr, count);

    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, di2, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    bad += check_ints(di2, count);
    MPI_Iallreduce(df, dfr, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    bad += check_floats(dfr, count);

    CHECK_CUDA(cudaFree(di));
    CHECK_CUDA(cudaFree(di2));
    CHECK_CUDA(cudaFree(df));
    CHECK_CUDA(cudaFree(dfr));
    free(hi);
    free(hf);

    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("plain_allreduce: rank %d: %ld values %s\n", rank, 4 * count,
           bad == 0 ? "right" : "wrong");
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
