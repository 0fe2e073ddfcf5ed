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
 *
 * Options (tests/mpi/cudaemu.test runs it on the CUDA emulation):
 *   --device N      this rank's device ordinal (default: the node-local
 *                   rank modulo the number of visible devices)
 *   --max-count N   leave out the counts above N elements
 *   --lifetime      first, what creates and frees collar's device state:
 *                   on a duplicate of MPI_COMM_WORLD, int32 sums of growing
 *                   sizes up to 262147 elements, whatever --max-count (ipc
 *                   registers a larger region each time),
 *                   blocking and nonblocking, then MPI_Comm_free, twice; an
 *                   MPI_Iallreduce whose communicator is freed before
 *                   MPI_Wait; the matrix then runs on MPI_COMM_WORLD, whose
 *                   state goes at MPI_Finalize
 *   --faults N      instead of the matrix, N int32 sums of --max-count
 *                   elements (default 65537) on one pair of cudaMalloc
 *                   buffers, alternately blocking and nonblocking, under
 *                   MPI_ERRORS_RETURN, for injected device failures: each
 *                   call must return on every rank with MPI_SUCCESS and the
 *                   right sums, or with an error; rank 0 prints, per call
 *                   that failed anywhere, which ranks failed, then
 *                   "test_device faults: N calls, A failed on every rank,
 *                   S failed on some ranks, W wrong" (W: MPI_SUCCESS with
 *                   wrong or unreadable values on some rank); then one sum
 *                   of host memory in a large malloc, which must be right
 *                   on every rank ("a host call after them: right on every
 *                   rank"), a rank with a sticky device error included, or
 *                   (an algorithm forced on host memory, which needs the
 *                   device) fail on every rank
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
static size_t max_count = (size_t)-1;

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

/* One call and its check; with free_comm, a nonblocking call's
 * communicator is freed between the start and MPI_Wait. */
static void run_case(const pair_t *p, size_t count, int kind, int in_place, int nonblocking,
                     MPI_Comm comm, int free_comm)
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
                            p->op, comm, &req);
        if (free_comm) {
            MPI_Comm_free(&comm);
        }
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    } else {
        rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : sbuf, rbuf, (int)count, t->mpi,
                           p->op, comm);
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

/* --lifetime: see the top of the file. */
static void lifetime(void)
{
    /* Whatever --max-count: the region must grow. */
    const size_t sizes[] = { 1023, 65537, 262147 };
    for (int round = 0; round < 2; round++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            run_case(&pairs[0], sizes[i], MEM_DEVICE, 0, 0, c, 0);
            run_case(&pairs[0], sizes[i], MEM_DEVICE, 1, 1, c, 0);
        }
        MPI_Comm_free(&c);
    }
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    run_case(&pairs[0], 7, MEM_DEVICE, 0, 0, c, 0);
    run_case(&pairs[0], 65537, MEM_DEVICE, 1, 1, c, 1);
}

/* --faults N: see the top of the file.  Outcome of a call on a rank. */
enum { OUT_RIGHT, OUT_ERROR, OUT_WRONG };

static int faults(int ncalls)
{
    const type_t *t = &types[0];
    const size_t count = max_count == (size_t)-1 ? 65537 : max_count;
    const size_t bytes = count * t->size;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    char *host = malloc(bytes ? bytes : 1);
    char *sbuf = dalloc(bytes, 0), *rbuf = dalloc(bytes, 0);
    int *outs = malloc((size_t)nranks * sizeof(*outs));
    long every = 0, some = 0, wrong = 0;
    for (int k = 0; k < ncalls; k++) {
        for (size_t i = 0; i < count; i++) {
            put(host, i, t, value(rank, i, t));
        }
        /* The program's own copies fail once the device has a sticky error:
         * the call is still made on every rank. */
        int readable = 1;
        if (use_gpu) {
            readable = cudaMemcpy(sbuf, host, bytes, cudaMemcpyDefault) == cudaSuccess;
        } else {
            memcpy(sbuf, host, bytes);
        }
        int rc;
        if (k % 2) {
            MPI_Request req;
            rc = MPI_Iallreduce(sbuf, rbuf, (int)count, t->mpi, MPI_SUM, MPI_COMM_WORLD, &req);
            if (rc == MPI_SUCCESS) {
                rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
        } else {
            rc = MPI_Allreduce(sbuf, rbuf, (int)count, t->mpi, MPI_SUM, MPI_COMM_WORLD);
        }
        int out = rc == MPI_SUCCESS ? OUT_RIGHT : OUT_ERROR;
        if (out == OUT_RIGHT) {
            readable = readable && (!use_gpu || cudaMemcpy(host, rbuf, bytes, cudaMemcpyDefault)
                                                    == cudaSuccess);
            if (!use_gpu) {
                memcpy(host, rbuf, bytes);
            }
            for (size_t i = 0; i < count && readable; i++) {
                readable = get(host, i, t) == expect(i, t, MPI_SUM);
            }
            out = readable ? OUT_RIGHT : OUT_WRONG;
        }
        MPI_Gather(&out, 1, MPI_INT, outs, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank != 0) {
            continue;
        }
        int nerr = 0, nwrong = 0;
        char line[256] = "";
        for (int r = 0; r < nranks; r++) {
            nerr += outs[r] == OUT_ERROR;
            nwrong += outs[r] == OUT_WRONG;
            if (outs[r] != OUT_RIGHT && strlen(line) < sizeof(line) - 32) {
                snprintf(line + strlen(line), sizeof(line) - strlen(line), " %d (%s)", r,
                         outs[r] == OUT_ERROR ? "error" : "WRONG");
            }
        }
        every += nerr == nranks;
        some += nerr > 0 && nerr < nranks;
        wrong += nwrong > 0;
        if (nerr + nwrong > 0) {
            printf("test_device faults: call %d (%s): ranks%s\n", k,
                   k % 2 ? "nonblocking" : "blocking", line);
        }
    }
    if (rank == 0) {
        printf("test_device faults: %d calls, %ld failed on every rank, %ld failed on some "
               "ranks, %ld wrong\n", ncalls, every, some, wrong);
    }
    /* Then a sum of host memory in a large malloc (an anonymous mapping,
     * which the driver is asked about at every call): it needs no device,
     * so it is right on every rank, a rank whose device has a sticky error
     * included, where it goes to the MPI library (it fails on every rank
     * where an algorithm forced on host memory needs the device); never
     * wrong, never failed on some ranks only, never a hang. */
    int *hs = malloc(bytes), *hr = malloc(bytes);
    int out = OUT_ERROR;
    if (hs != NULL && hr != NULL) {
        for (size_t i = 0; i < count; i++) {
            hs[i] = (int)(rank + i % 1000);
        }
        if (MPI_Allreduce(hs, hr, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD)
            == MPI_SUCCESS) {
            out = OUT_RIGHT;
            for (size_t i = 0; i < count && out == OUT_RIGHT; i++) {
                if (hr[i] != (int)(nranks * (i % 1000) + nranks * (nranks - 1) / 2)) {
                    out = OUT_WRONG;
                }
            }
        }
    }
    /* (The tally through the library itself: a forced algorithm is
     * collar's on this host memory too.) */
    int worst = 0, best = 0;
    PMPI_Allreduce(&out, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    PMPI_Allreduce(&out, &best, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("test_device faults: a host call after them: %s\n",
               worst == OUT_RIGHT ? "right on every rank"
               : best == OUT_ERROR && worst == OUT_ERROR ? "failed on every rank"
               : "WRONG or failed on some ranks");
    }
    wrong += worst == OUT_WRONG || (worst == OUT_ERROR && best != OUT_ERROR);
    free(hs);
    free(hr);
    free(outs);
    free(host);
    dfree(sbuf, 0);
    dfree(rbuf, 0);
    return rank == 0 && wrong != 0;
}

int main(int argc, char **argv)
{
    /* TEST_THREAD_LEVEL=multiple: the level a threaded program asks for
     * (nccl.test: NCCL's operations need one thread at a time). */
    const char *level = getenv("TEST_THREAD_LEVEL");
    int provided;
    MPI_Init_thread(&argc, &argv, level != NULL && strcmp(level, "multiple") == 0
                                  ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE,
                    &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int host_only = 0, device = -1, do_lifetime = 0, nfaults = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--host") == 0) {
            host_only = 1;
        } else if (strcmp(argv[i], "--lifetime") == 0) {
            do_lifetime = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--device") == 0) {
            device = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--max-count") == 0) {
            max_count = (size_t)atol(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--faults") == 0) {
            nfaults = atoi(argv[++i]);
        } else {
            if (rank == 0) {
                fprintf(stderr, "usage: test_device [--host] [--device N] [--max-count N] "
                        "[--lifetime] [--faults N]\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    int ndev = 0;
    use_gpu = !host_only && cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0;
    if (use_gpu) {
        if (device < 0) {
            /* The node-local rank picks the device. */
            MPI_Comm node;
            int local = rank;
            if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                    &node) == MPI_SUCCESS) {
                MPI_Comm_rank(node, &local);
                MPI_Comm_free(&node);
            }
            device = local % ndev;
        }
        if (cudaSetDevice(device) != cudaSuccess) {
            fprintf(stderr, "rank %d: cudaSetDevice(%d) failed (%d devices)\n", rank, device,
                    ndev);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (nfaults > 0) {
        const int bad = faults(nfaults);
        MPI_Finalize();
        return bad;
    }
    if (do_lifetime) {
        lifetime();
    }
    const size_t counts[] = { 0, 1, 3, 1023, 65537, (size_t)1 << 20, (size_t)1 << 23 };
    const int ncounts = sizeof(counts) / sizeof(counts[0]);
    for (size_t pi = 0; pi < sizeof(pairs) / sizeof(pairs[0]); pi++) {
        for (int c = 0; c < ncounts; c++) {
            /* The largest count for two pairs only: time. */
            if ((c == ncounts - 1 && pi != 0 && pi != 5) || counts[c] > max_count) {
                continue;
            }
            for (int kind = 0; kind < MEM_NKINDS; kind++) {
                if (kind != MEM_DEVICE && c >= ncounts - 1) {
                    continue;
                }
                for (int mode = 0; mode < 4; mode++) {
                    run_case(&pairs[pi], counts[c], kind, mode & 1, mode >> 1,
                             MPI_COMM_WORLD, 0);
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
