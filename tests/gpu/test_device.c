/*
 * Allreduce on real device memory: an MPI program that checks, on every
 * rank, what a user would check.  Run under collar (LD_PRELOAD) by
 * tests/gpu/run.sh with each algorithm forced in turn.
 *
 * Cases: int32 SUM/MAX/BXOR, int64 SUM, uint8 BOR, float SUM/MIN, double
 * SUM; counts 0 .. 8M elements; out of place and MPI_IN_PLACE; blocking
 * and nonblocking; buffers from cudaMalloc, cudaMallocManaged, and a
 * device send buffer with a pinned host receive buffer; and the ordering
 * promise: the send buffer filled by a cudaMemcpyAsync on a non-blocking
 * stream that is NOT synchronised before the call (COLLAR_SYNC=device
 * must see the copied data).  Integers bit-exact; floats against a double
 * reference (the values are exact in float, so any order of summation
 * gives the same result: the tolerance only guards the format).
 *
 * Without a GPU (no driver, or --host) the buffers are host memory: run
 * under COLLAR_DEVICE=sim this exercises the same program and script on a
 * CPU-only machine.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

enum { MEM_DEVICE, MEM_MANAGED, MEM_MIXED, MEM_ASYNC_FILL, MEM_NKINDS };
static const char *mem_names[] = { "device", "managed", "device->pinned",
                                   "device, unsynchronised fill" };

static int use_gpu;
static int rank, nranks;
static long failures, cases;

typedef struct {
    const char  *name;
    MPI_Datatype mpi;
    size_t       size;
    int          is_float;
} type_t;

static const type_t types[] = {
    { "int32", MPI_INT32_T, 4, 0 }, { "int64", MPI_INT64_T, 8, 0 },
    { "uint8", MPI_UINT8_T, 1, 0 }, { "float", MPI_FLOAT, 4, 1 },
    { "double", MPI_DOUBLE, 8, 1 },
};

typedef struct {
    int         type;
    MPI_Op      op;
    const char *opname;
} pair_t;

static const pair_t pairs[] = {
    { 0, MPI_SUM, "sum" }, { 0, MPI_MAX, "max" }, { 0, MPI_BXOR, "bxor" },
    { 1, MPI_SUM, "sum" }, { 2, MPI_BOR, "bor" },  { 3, MPI_SUM, "sum" },
    { 3, MPI_MIN, "min" }, { 4, MPI_SUM, "sum" },
};

/* Rank r's element i, as a double (exact in every type used). */
static double value(int r, size_t i, const type_t *t)
{
    if (t->size == 1) {
        return (double)((unsigned)(r * 37 + i * 11) & 0xff);
    }
    long v = (long)((i * 7 + (size_t)r * 13) % 1001) - 500;
    return t->is_float ? (double)v * 0.25 : (double)v;
}

static void put(void *buf, size_t i, const type_t *t, double v)
{
    switch (t->size) {
    case 1: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case 4:
        if (t->is_float) ((float *)buf)[i] = (float)v;
        else ((int32_t *)buf)[i] = (int32_t)v;
        break;
    default:
        if (t->is_float) ((double *)buf)[i] = v;
        else ((int64_t *)buf)[i] = (int64_t)v;
    }
}

static double get(const void *buf, size_t i, const type_t *t)
{
    switch (t->size) {
    case 1: return ((const uint8_t *)buf)[i];
    case 4: return t->is_float ? ((const float *)buf)[i] : ((const int32_t *)buf)[i];
    default: return t->is_float ? ((const double *)buf)[i] : (double)((const int64_t *)buf)[i];
    }
}

static double expect(size_t i, const type_t *t, MPI_Op op)
{
    double acc = value(0, i, t);
    long bits = (long)acc;
    for (int r = 1; r < nranks; r++) {
        const double v = value(r, i, t);
        if (op == MPI_SUM) acc += v;
        else if (op == MPI_MAX) acc = v > acc ? v : acc;
        else if (op == MPI_MIN) acc = v < acc ? v : acc;
        else if (op == MPI_BXOR) bits ^= (long)v;
        else if (op == MPI_BOR) bits |= (long)v;
    }
    if (op == MPI_BXOR || op == MPI_BOR) {
        return (double)bits;
    }
    if (!t->is_float && t->size == 4) {
        return (double)(int32_t)(int64_t)acc;
    }
    return acc;
}

static void *dalloc(size_t bytes, int managed)
{
    void *p = NULL;
    if (!use_gpu) {
        return malloc(bytes ? bytes : 1);
    }
    cudaError_t e = managed ? cudaMallocManaged(&p, bytes ? bytes : 1, cudaMemAttachGlobal)
                            : cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        fprintf(stderr, "rank %d: allocation of %zu bytes failed: %s\n", rank, bytes,
                cudaGetErrorString(e));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void dfree(void *p, int pinned)
{
    if (!use_gpu) {
        free(p);
    } else if (pinned) {
        cudaFreeHost(p);
    } else {
        cudaFree(p);
    }
}

static void copy(void *dst, const void *src, size_t bytes)
{
    if (!use_gpu) {
        memcpy(dst, src, bytes);
    } else if (cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) != cudaSuccess) {
        fprintf(stderr, "rank %d: cudaMemcpy failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void run_case(const pair_t *p, size_t count, int kind, int in_place, int nonblocking)
{
    const type_t *t = &types[p->type];
    const size_t bytes = count * t->size;
    char *host = malloc(bytes ? bytes : 1);
    char *sbuf = dalloc(bytes, kind == MEM_MANAGED);
    char *rbuf;
    if (kind == MEM_MIXED && use_gpu) {
        if (cudaMallocHost((void **)&rbuf, bytes ? bytes : 1) != cudaSuccess) {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else {
        rbuf = dalloc(bytes, kind == MEM_MANAGED);
    }
    for (size_t i = 0; i < count; i++) {
        put(host, i, t, value(rank, i, t));
    }
    char *src = in_place ? rbuf : sbuf;
    cudaStream_t st = NULL;
    char *pinned = NULL;
    if (kind == MEM_ASYNC_FILL && use_gpu) {
        /* Filled by an asynchronous copy the program does not wait for. */
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
        cudaMallocHost((void **)&pinned, bytes ? bytes : 1);
        memcpy(pinned, host, bytes);
        cudaMemsetAsync(src, 0x5a, bytes, st);
        cudaMemcpyAsync(src, pinned, bytes, cudaMemcpyHostToDevice, st);
    } else {
        copy(src, host, bytes);
    }
    int rc;
    if (nonblocking) {
        MPI_Request req;
        rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : sbuf, rbuf, (int)count, t->mpi,
                            p->op, MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    } else {
        rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : sbuf, rbuf, (int)count, t->mpi,
                           p->op, MPI_COMM_WORLD);
    }
    memset(host, 0, bytes);
    copy(host, rbuf, bytes);
    long bad = 0;
    size_t first_bad = 0;
    for (size_t i = 0; i < count; i++) {
        const double want = expect(i, t, p->op), got = get(host, i, t);
        const int ok = t->is_float ? fabs(got - want) <= 1e-6 * (fabs(want) + 1) : got == want;
        if (!ok && bad++ == 0) {
            first_bad = i;
        }
    }
    cases++;
    if (rc != MPI_SUCCESS || bad != 0) {
        failures++;
        fprintf(stderr, "FAIL rank %d: %s %s count %zu %s%s%s: rc %d, %ld wrong "
                "(first at %zu: %g, expected %g)\n", rank, t->name, p->opname, count,
                mem_names[kind], in_place ? " in place" : "",
                nonblocking ? " nonblocking" : "", rc, bad, first_bad,
                bad ? get(host, first_bad, t) : 0.0,
                bad ? expect(first_bad, t, p->op) : 0.0);
    }
    if (st != NULL) {
        cudaStreamDestroy(st);
        cudaFreeHost(pinned);
    }
    free(host);
    dfree(sbuf, 0);
    dfree(rbuf, kind == MEM_MIXED && use_gpu);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int ndev = 0;
    use_gpu = !(argc > 1 && strcmp(argv[1], "--host") == 0)
              && cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0;
    if (use_gpu) {
        cudaSetDevice(rank % ndev);
    }
    const size_t counts[] = { 0, 1, 3, 1023, 65537, (size_t)1 << 20, (size_t)1 << 23 };
    const int ncounts = sizeof(counts) / sizeof(counts[0]);
    for (size_t pi = 0; pi < sizeof(pairs) / sizeof(pairs[0]); pi++) {
        for (int c = 0; c < ncounts; c++) {
            /* The largest count for two pairs only: time. */
            if (c == ncounts - 1 && pi != 0 && pi != 5) {
                continue;
            }
            for (int kind = 0; kind < MEM_NKINDS; kind++) {
                if (kind != MEM_DEVICE && c >= ncounts - 1) {
                    continue;
                }
                for (int mode = 0; mode < 4; mode++) {
                    run_case(&pairs[pi], counts[c], kind, mode & 1, mode >> 1);
                }
            }
        }
    }
    long total[2] = { cases, failures }, sum[2];
    MPI_Reduce(total, sum, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("test_device: %d ranks, %s memory: %ld cases on all ranks, %ld failed\n",
               nranks, use_gpu ? "GPU" : "host (no GPU)", sum[0], sum[1]);
    }
    MPI_Finalize();
    return failures != 0;
}
