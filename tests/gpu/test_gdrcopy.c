/*
 * Small allreduces on device memory, the sizes GDRCopy copies (staged's
 * gdrcopy=, default 8 KiB): an MPI program that checks, on every rank,
 * what a user would check.  Run under collar on the CUDA emulation with a
 * stand-in libgdrapi by tests/mpi/gdrcopy.test; runs on a GPU too.
 *
 * Cases: int64 sums of 8 B to 8 KiB (--sizes small) or of 8 KiB + 8 and
 * 64 KiB (--sizes large), out of place, in place and nonblocking; the send
 * buffer filled by cudaMemcpyAsync behind 5 ms of other work on a
 * non-blocking stream, NOT synchronised before the call (COLLAR_SYNC=device
 * must see the data), or on the legacy default stream (--fill legacy,
 * for COLLAR_SYNC=stream, which orders after that stream only).
 * The buffers begin at a GPU page (64 KiB) boundary inside a larger
 * allocation, as GDRCopy's README asks of what is mapped ("users are
 * responsible for proper alignment"; GDRCopy's own tests allocate so).
 * --realloc: then a buffer is freed and
 * allocated again until the driver gives the same address (a new
 * allocation there), and its sums are checked: collar must map the new
 * allocation, not use the old one's mapping.
 * --neighbour: then the send buffer is a small allocation whose GPU page
 * begins with another allocation (allocated until the driver gives such
 * a pair): GDRCopy maps a pin of the allocation at the pinned address
 * only, so a copy for the later one must not go through a pin of that
 * page (the stand-in aborts: copy-range).
 *
 * Options: --device N (this rank's device ordinal), --sizes small|large,
 * --fill async|legacy, --realloc, --neighbour.  Rank 0 prints
 *   test_gdrcopy: R ranks, C cases, F failed[, realloc at the same
 *   address][, neighbour in the GPU page]
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, nranks;
static long cases, failures;
static int fill_legacy;
static cudaStream_t fill_stream;
static int64_t *pinned;   /* the fills' source */

#define CUDA_OK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_)); \
    MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)

static int64_t value(int r, size_t i, int round)
{
    return (int64_t)r * 1000003 + (int64_t)i * 7 + round;
}

/* A host function that holds its stream up for 5 ms. */
static void CUDART_CB nap(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 5000000 };
    nanosleep(&ts, NULL);
}

/* The device buffer d of n int64s gets rank `r`'s values of `round`, by a
 * copy queued behind 5 ms of other work, which the caller does not
 * synchronise: on a non-blocking stream of its own (COLLAR_SYNC=device
 * must wait for it) or on the legacy default stream (--fill legacy: what
 * COLLAR_SYNC=stream waits for).  The pinned source stays allocated
 * (cudaFreeHost would synchronise the device). */
static void fill(int64_t *d, size_t n, int r, int round)
{
    for (size_t i = 0; i < n; i++) {
        pinned[i] = value(r, i, round);
    }
    cudaStream_t st = fill_legacy ? cudaStreamLegacy : fill_stream;
    CUDA_OK(cudaLaunchHostFunc(st, nap, NULL));
    CUDA_OK(cudaMemcpyAsync(d, pinned, n * sizeof(*d), cudaMemcpyHostToDevice, st));
}

/* The result in d against the sums of every rank's values: 1 when right
 * on this rank. */
static int right(const int64_t *d, size_t n, int round)
{
    int64_t *h = malloc(n * sizeof(*h));
    CUDA_OK(cudaMemcpy(h, d, n * sizeof(*h), cudaMemcpyDeviceToHost));
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        int64_t want = 0;
        for (int r = 0; r < nranks; r++) {
            want += value(r, i, round);
        }
        if (h[i] != want) {
            fprintf(stderr, "rank %d: %zu int64 round %d: element %zu is %lld, "
                    "not %lld\n", rank, n, round, i, (long long)h[i],
                    (long long)want);
            ok = 0;
        }
    }
    free(h);
    return ok;
}

/* One case: every rank's verdict agreed (a wrong value anywhere fails). */
static void verdict(int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    cases++;
    failures += !all;
}

/* Out of place, in place, nonblocking: sums of n int64s. */
static void sums(size_t n, int64_t *s, int64_t *r, int round)
{
    fill(s, n, rank, round);
    MPI_Allreduce(s, r, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    verdict(right(r, n, round));

    fill(r, n, rank, round + 1);
    MPI_Allreduce(MPI_IN_PLACE, r, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    verdict(right(r, n, round + 1));

    MPI_Request req;
    fill(s, n, rank, round + 2);
    MPI_Iallreduce(s, r, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    verdict(right(r, n, round + 2));
}

#define GPU_PAGE ((uintptr_t)65536)

/* A buffer at a GPU page boundary: `raw` is the allocation (cudaMalloc of
 * the bytes and a page more), `at` the first boundary in it. */
typedef struct {
    void    *raw;
    int64_t *at;
} buffer_t;

static int64_t *aligned(void *raw)
{
    return (int64_t *)(((uintptr_t)raw + GPU_PAGE - 1) & ~(GPU_PAGE - 1));
}

static void buffer_alloc(buffer_t *b, size_t bytes)
{
    CUDA_OK(cudaMalloc(&b->raw, bytes + GPU_PAGE));
    b->at = aligned(b->raw);
}

/* Free s and allocate until the same address comes back; then sums on
 * the new allocation.  1 when the address came back. */
static int realloc_same(size_t n, buffer_t *s, int64_t *r)
{
    const size_t bytes = n * sizeof(int64_t) + GPU_PAGE;
    void *old = s->raw, *p = NULL, *kept[16];
    int nkept = 0, same = 0;
    CUDA_OK(cudaFree(old));
    for (int i = 0; i < 16 && !same; i++) {
        CUDA_OK(cudaMalloc(&p, bytes));
        if (p == old) {
            same = 1;
        } else {
            kept[nkept++] = p;
        }
    }
    for (int i = 0; i < nkept; i++) {
        CUDA_OK(cudaFree(kept[i]));
    }
    if (!same) {
        CUDA_OK(cudaMalloc(&p, bytes));
    }
    s->raw = p;
    s->at = aligned(p);
    sums(n, s->at, r, 100);
    return same;
}

/* Allocate 4 KiB buffers until one's GPU page begins with another
 * allocation (the other at or above the page boundary, below the
 * buffer); then sums from it.  1 when such a pair was found. */
static int neighbour(int64_t *r)
{
    enum { N = 32 };
    const size_t bytes = 4096;
    void *p[N];
    int np = 0, b = -1;
    for (; np < N && b < 0; np++) {
        CUDA_OK(cudaMalloc(&p[np], bytes));
        const uintptr_t q = (uintptr_t)p[np];
        for (int i = 0; i < np && b < 0; i++) {
            const uintptr_t k = (uintptr_t)p[i];
            if ((k & ~(GPU_PAGE - 1)) <= q && q < k) {
                b = i;
            } else if ((q & ~(GPU_PAGE - 1)) <= k && k < q) {
                b = np;
            }
        }
    }
    const int found = b >= 0;
    sums(bytes / sizeof(int64_t), p[found ? b : 0], r, 200);
    for (int i = 0; i < np; i++) {
        CUDA_OK(cudaFree(p[i]));
    }
    return found;
}

int main(int argc, char **argv)
{
    int device = -1, large = 0, do_realloc = 0, do_neighbour = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            device = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            large = strcmp(argv[++i], "large") == 0;
        } else if (strcmp(argv[i], "--fill") == 0 && i + 1 < argc) {
            fill_legacy = strcmp(argv[++i], "legacy") == 0;
        } else if (strcmp(argv[i], "--realloc") == 0) {
            do_realloc = 1;
        } else if (strcmp(argv[i], "--neighbour") == 0) {
            do_neighbour = 1;
        }
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (device >= 0) {
        CUDA_OK(cudaSetDevice(device));
    }
    CUDA_OK(cudaStreamCreateWithFlags(&fill_stream, cudaStreamNonBlocking));
    CUDA_OK(cudaMallocHost((void **)&pinned, 65536));

    static const size_t small[] = { 8, 64, 1024, 4096, 8192 };
    static const size_t big[] = { 8192 + 8, 65536 };
    const size_t *sizes = large ? big : small;
    const int nsizes = large ? 2 : 5;
    const size_t most = large ? 65536 : 8192;
    buffer_t s, r;
    buffer_alloc(&s, most);
    buffer_alloc(&r, most);
    for (int k = 0; k < nsizes; k++) {
        sums(sizes[k] / sizeof(int64_t), s.at, r.at, 10 * k);
    }
    int same = 0, all_same = 0, found = 0, all_found = 0;
    if (do_realloc) {
        same = realloc_same(most / sizeof(int64_t), &s, r.at);
        MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    }
    if (do_neighbour) {
        found = neighbour(r.at);
        MPI_Allreduce(&found, &all_found, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    }
    CUDA_OK(cudaFree(s.raw));
    CUDA_OK(cudaFree(r.raw));
    CUDA_OK(cudaStreamDestroy(fill_stream));
    CUDA_OK(cudaFreeHost(pinned));
    if (rank == 0) {
        printf("test_gdrcopy: %d ranks, %ld cases, %ld failed%s%s\n", nranks,
               cases, failures,
               do_realloc && all_same ? ", realloc at the same address" : "",
               do_neighbour && all_found ? ", neighbour in the GPU page" : "");
    }
    MPI_Finalize();
    return failures != 0;
}
