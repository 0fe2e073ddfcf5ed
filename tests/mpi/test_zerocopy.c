/*
 * collar - what ipc's zero-copy (peers read each other's buffers in place)
 * must get right, as a user sees it: integer sums bit-exact on every rank.
 *   rounds     the same buffers reused, new values every round, in place
 *              and not, one-shot sizes and two-shot sizes: a rank that
 *              overwrote its in-place buffer while a peer still read it,
 *              or a peer that read a buffer before its owner had entered
 *              the call, gets a wrong sum;
 *   distinct   many buffers, each its own allocation, in turn (more than
 *              COLLAR_IPC_MAPS when the test sets it small: the cache
 *              closes and reopens mappings);
 *   realloc    a buffer freed and another of the same size allocated
 *              (often at the same address): the sums come from the new one;
 *   nonblocking several allreduces in flight on distinct buffers.
 * Buffers are device memory under TU_DEVICE=cuda (the CUDA emulation),
 * host memory (device memory to the sim device) otherwise.  With
 * --kind R managed|async, rank R's buffers are cudaMallocManaged or
 * cudaMallocAsync memory instead, which cannot be exported: every call
 * copies in, on every rank, with the same sums.  Run by ipc.test and
 * cudaemu.test, bounded by a timeout.
 *
 * Usage: test_zerocopy [--quick] [--kind RANK managed|async]
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int rank, size;

/* --kind: this rank's buffers (0: the mirrors of testutil.h). */
enum { KIND_MIRROR, KIND_MANAGED, KIND_ASYNC };
static int kind;

/* A buffer given to MPI (device memory under TU_DEVICE=cuda) and the host
 * buffer it mirrors (the same buffer otherwise; managed memory is its own
 * mirror). */
typedef struct {
    int   *host;
    void  *dev;
    size_t n;
} buf_t;

/* A CUDA runtime function of the process (the emulation's). */
static void *cuda_fn(const char *name)
{
    void *fn = dlsym(RTLD_DEFAULT, name);
    if (fn == NULL) {
        tu_fail("cuda", "%s not found (run with TU_DEVICE=cuda)", name);
        exit(1);
    }
    return fn;
}

static buf_t buf_new(size_t n)
{
    buf_t b = { calloc(n, sizeof(int)), NULL, n };
    if (b.host == NULL) {
        tu_fail("memory", "no memory for %zu ints", n);
        exit(1);
    }
    int rc = 0;
    if (kind == KIND_MANAGED) {
        int (*managed)(void **, size_t, unsigned) = (int (*)(void **, size_t, unsigned))
            cuda_fn("cudaMallocManaged");
        free(b.host);
        rc = managed(&b.dev, n * sizeof(int), 1 /* cudaMemAttachGlobal */);
        b.host = b.dev;
    } else if (kind == KIND_ASYNC) {
        int (*async)(void **, size_t, void *) = (int (*)(void **, size_t, void *))
            cuda_fn("cudaMallocAsync");
        int (*sync)(void *) = (int (*)(void *))cuda_fn("cudaStreamSynchronize");
        rc = async(&b.dev, n * sizeof(int), NULL);
        rc = rc != 0 ? rc : sync(NULL);
    } else {
        b.dev = tu_dev_mirror(b.host, n * sizeof(int));
    }
    if (rc != 0) {
        tu_fail("cuda", "allocation of %zu ints failed (%d)", n, rc);
        exit(1);
    }
    return b;
}

static void buf_free(buf_t *b)
{
    if (kind == KIND_MIRROR) {
        tu_dev_unmirror(b->dev, b->host);
        free(b->host);
        return;
    }
    int (*cuda_free)(void *) = (int (*)(void *))cuda_fn("cudaFree");
    tu_check(cuda_free(b->dev) == 0, "cudaFree", "failed");
    if (kind == KIND_ASYNC) {
        free(b->host);
    }
}

/* Rank r's element i in round k, and the sum over the ranks. */
static int value(int r, size_t i, int k)
{
    return (int)((i * 2654435761u + (unsigned)r * 40503u + (unsigned)k * 977u) % 1000u);
}

static long sum_of(size_t i, int k)
{
    long s = 0;
    for (int r = 0; r < size; r++) {
        s += value(r, i, k);
    }
    return s;
}

static void fill(buf_t *b, int k)
{
    for (size_t i = 0; i < b->n; i++) {
        b->host[i] = value(rank, i, k);
    }
    if (kind != KIND_MANAGED) {
        tu_dev_put(b->dev, b->host, b->n * sizeof(int));
    }
}

static void verify(buf_t *b, int k, const char *what)
{
    if (kind != KIND_MANAGED) {
        tu_dev_get(b->host, b->dev, b->n * sizeof(int));
    }
    long bad = 0;
    for (size_t i = 0; i < b->n; i++) {
        bad += b->host[i] != sum_of(i, k);
    }
    tu_check(bad == 0, what, "%ld of %zu sums wrong (round %d)", bad, b->n, k);
}

/* One allreduce into `recv` (from `send`, or in place), round k. */
static void one(buf_t *recv, buf_t *send, int k, int in_place, const char *what)
{
    fill(in_place ? recv : send, k);
    tu_check_rc(MPI_Allreduce(in_place ? MPI_IN_PLACE : send->dev, recv->dev,
                              (int)recv->n, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                what);
    verify(recv, k, what);
}

static void rounds(int quick)
{
    const size_t sizes[] = { 1, 1031, (size_t)1 << 20 };
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        buf_t recv = buf_new(sizes[s]), send = buf_new(sizes[s]);
        for (int k = 0; k < (quick ? 4 : 12); k++) {
            one(&recv, &send, k, k % 2, k % 2 ? "rounds in place" : "rounds");
        }
        buf_free(&send);
        buf_free(&recv);
    }
}

static void distinct(void)
{
    enum { K = 12 };
    buf_t recv[K], send[K];
    for (int b = 0; b < K; b++) {
        const size_t n = (size_t)(b % 3 == 2 ? 1 << 17 : 100 + 37 * b);
        recv[b] = buf_new(n);
        send[b] = buf_new(n);
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int b = 0; b < K; b++) {
            one(&recv[b], &send[b], pass * K + b, b % 2, "distinct");
        }
    }
    for (int b = 0; b < K; b++) {
        buf_free(&recv[b]);
        buf_free(&send[b]);
    }
}

static void reallocated(void)
{
    for (int k = 0; k < 4; k++) {
        buf_t recv = buf_new((size_t)1 << 17), send = buf_new((size_t)1 << 17);
        one(&recv, &send, 100 + k, 0, "realloc");
        one(&recv, &send, 200 + k, 1, "realloc in place");
        buf_free(&send);
        buf_free(&recv);
    }
}

static void nonblocking(void)
{
    enum { K = 6 };
    buf_t b[K];
    MPI_Request req[K];
    for (int j = 0; j < K; j++) {
        b[j] = buf_new((size_t)1 << 16);
        fill(&b[j], 300 + j);
        tu_check_rc(MPI_Iallreduce(MPI_IN_PLACE, b[j].dev, (int)b[j].n, MPI_INT,
                                   MPI_SUM, MPI_COMM_WORLD, &req[j]),
                    "iallreduce");
    }
    tu_check_rc(MPI_Waitall(K, req, tu_statuses_ignore()), "waitall");
    for (int j = 0; j < K; j++) {
        verify(&b[j], 300 + j, "nonblocking");
        buf_free(&b[j]);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_zerocopy");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--kind") == 0 && i + 2 < argc) {
            if (atoi(argv[i + 1]) == rank) {
                kind = strcmp(argv[i + 2], "managed") == 0 ? KIND_MANAGED
                                                           : KIND_ASYNC;
            }
            i += 2;
        }
    }
    rounds(quick);
    distinct();
    reallocated();
    nonblocking();
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
