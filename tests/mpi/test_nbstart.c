/*
 * Valid MPI programs that collar must not make hang or fail: a nonblocking
 * start never waits for another rank, and collar keeps at most one
 * communicator of its own for each of the application's.
 *
 *   orders    two fresh communicators; MPI_Iallreduce started on them in
 *             opposite orders on even and odd ranks, then one MPI_Waitall.
 *             Again on the same (now used) communicators with a message
 *             `big` elements long, and once more with small ones.  All of it
 *             twice: on communicators that never saw a blocking allreduce
 *             (collar stages their calls on them), then on ones that did
 *             (collar's algorithms run, and the larger message makes ipc and
 *             hier register a larger region inside the nonblocking calls).
 *             Last MPI_COMM_WORLD and MPI_COMM_SELF in opposite orders.
 *             Under TU_DEVICE=cuda the buffers of these calls are device
 *             memory (testutil.h; nccl.test).
 *   sendrecv  on a fresh communicator: rank 0 starts MPI_Iallreduce, then
 *             receives 4 MiB from rank 1; rank 1 sends them to rank 0
 *             (rendezvous: the send returns only when the receive is
 *             posted), then starts its MPI_Iallreduce.  Again on the used
 *             communicator with `big` elements, again small; the same after
 *             a blocking allreduce, and on MPI_COMM_WORLD.
 *   persist   two persistent allreduces on MPI_COMM_WORLD built, a
 *             blocking and a nonblocking allreduce made, then the two
 *             started in the other order (ipc: a persistent operation
 *             registers its region at its first start, never one that
 *             calls before that start would wait for).
 *   many N B  N duplicates of MPI_COMM_WORLD, all alive at once, one
 *             allreduce of 8 ints on each (B = 1: blocking MPI_Allreduce,
 *             0: MPI_Iallreduce + MPI_Wait); then collar_communicators()
 *             (looked up with dlsym, absent without collar) must be at
 *             most N + 1 (the +1: MPI_COMM_WORLD's, made in MPI_Init).
 *             Every result checked on every rank;
 *             the duplicates' error handler is MPI_ERRORS_ARE_FATAL, which
 *             collar's own shortage of context ids must never reach.
 *
 * Values: element i of rank r is (r + 1) * 1000 + i % 997, ints: the sum
 * is exact.  Run it under `timeout`: a hang is the failure it looks for.
 */
#include "config.h"
#include "testutil.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int value(int rank, long i)
{
    return (rank + 1) * 1000 + (int)(i % 997);
}

static void fill(int *buf, long n, int rank)
{
    for (long i = 0; i < n; i++) {
        buf[i] = value(rank, i);
    }
}

/* The expected sum of element i over the ranks of `comm` (their ranks in
 * MPI_COMM_WORLD give the values: fill() is called with the world rank). */
static long long want_at(MPI_Comm comm, long i)
{
    int size;
    MPI_Comm_size(comm, &size);
    MPI_Group g, w;
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &w);
    long long sum = 0;
    for (int r = 0; r < size; r++) {
        int wr;
        MPI_Group_translate_ranks(g, 1, &r, w, &wr);
        sum += value(wr, i);
    }
    MPI_Group_free(&g);
    MPI_Group_free(&w);
    return sum;
}

static void check_sum(const int *got, long n, MPI_Comm comm, const char *what)
{
    long bad = 0, first = -1;
    /* want_at is linear in i % 997: one group lookup for all. */
    const long long want0 = want_at(comm, 0);
    int size;
    MPI_Comm_size(comm, &size);
    for (long i = 0; i < n; i++) {
        const long long want = want0 + (long long)size * (i % 997);
        if (got[i] != want) {
            if (first < 0) {
                first = i;
            }
            bad++;
        }
    }
    tu_check(bad == 0, what, "%ld of %ld elements wrong, the first at %ld",
             bad, n, first);
}

/* s, r on the host; ds, dr their device mirrors under TU_DEVICE=cuda (the
 * buffers themselves without it), what the orders and blocking calls
 * hand to MPI. */
typedef struct {
    int *s, *r;
    int *ds, *dr;
    long n;
} buf_t;

static void buf_new(buf_t *b, long n)
{
    b->n = n;
    b->s = malloc((size_t)n * sizeof(int));
    b->r = malloc((size_t)n * sizeof(int));
    if (b->s == NULL || b->r == NULL) {
        fprintf(stderr, "no memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fill(b->s, n, tu_world_rank());
    memset(b->r, 0, (size_t)n * sizeof(int));
    b->ds = tu_dev_mirror(b->s, (size_t)n * sizeof(int));
    b->dr = tu_dev_mirror(b->r, (size_t)n * sizeof(int));
}

/* The result back from the device mirror (nothing without the layer). */
static void buf_back(buf_t *b)
{
    tu_dev_get(b->r, b->dr, (size_t)b->n * sizeof(int));
}

static void buf_free(buf_t *b)
{
    tu_dev_unmirror(b->ds, b->s);
    tu_dev_unmirror(b->dr, b->r);
    free(b->s);
    free(b->r);
}

static void orders_round(MPI_Comm c[2], long n, const char *what)
{
    buf_t b[2];
    MPI_Request req[2];
    const int even = tu_world_rank() % 2 == 0;
    for (int k = 0; k < 2; k++) {
        buf_new(&b[k], n);
    }
    for (int j = 0; j < 2; j++) {
        const int k = even ? j : 1 - j;
        tu_check_rc(MPI_Iallreduce(b[k].ds, b[k].dr, (int)n, MPI_INT, MPI_SUM,
                                   c[k], &req[k]), what);
    }
    tu_check_rc(MPI_Waitall(2, req, tu_statuses_ignore()), what);
    for (int k = 0; k < 2; k++) {
        buf_back(&b[k]);
        check_sum(b[k].r, n, c[k], what);
        buf_free(&b[k]);
    }
}

/* One blocking allreduce of 7 ints on comm: collar's own communicator
 * for it, and ipc's first region, are made here. */
static void blocking_first(MPI_Comm comm, const char *what)
{
    buf_t b;
    buf_new(&b, 7);
    tu_check_rc(MPI_Allreduce(b.ds, b.dr, 7, MPI_INT, MPI_SUM, comm), what);
    buf_back(&b);
    check_sum(b.r, 7, comm, what);
    buf_free(&b);
}

static void test_orders(long big)
{
    for (int warm = 0; warm < 2; warm++) {
        MPI_Comm c[2];
        MPI_Comm_dup(MPI_COMM_WORLD, &c[0]);
        MPI_Comm_split(MPI_COMM_WORLD, 0, tu_world_size() - tu_world_rank(), &c[1]);
        if (warm) {
            /* Then the nonblocking calls run collar's algorithms, and the
             * larger message grows ipc's region in opposite orders. */
            blocking_first(c[0], "a blocking allreduce first");
            blocking_first(c[1], "a blocking allreduce first");
        }
        orders_round(c, 7, "opposite orders, first calls");
        orders_round(c, big, "opposite orders, a larger message");
        orders_round(c, 1031, "opposite orders, used communicators");
        MPI_Comm_free(&c[0]);
        MPI_Comm_free(&c[1]);
    }
    MPI_Comm w[2] = { MPI_COMM_WORLD, MPI_COMM_SELF };
    if (tu_world_rank() % 2) {
        w[0] = MPI_COMM_SELF;
        w[1] = MPI_COMM_WORLD;
    }
    /* MPI_COMM_WORLD: collar's communicator is made in MPI_Init. */
    orders_round(w, big, "MPI_COMM_WORLD and MPI_COMM_SELF in opposite orders");
}

static void sendrecv_round(MPI_Comm comm, long n, const char *what)
{
    const long p2p = (4L << 20) / (long)sizeof(int);
    const int rank = tu_world_rank();
    int *msg = calloc((size_t)p2p, sizeof(int));
    buf_t b;
    buf_new(&b, n);
    MPI_Request req;
    if (rank == 0) {
        tu_check_rc(MPI_Iallreduce(b.s, b.r, (int)n, MPI_INT, MPI_SUM, comm, &req), what);
        tu_check_rc(MPI_Recv(msg, (int)p2p, MPI_INT, 1, 5, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE), what);
        tu_check(msg[0] == 42 && msg[p2p - 1] == 43, what, "message %d %d",
                 msg[0], msg[p2p - 1]);
    } else if (rank == 1) {
        msg[0] = 42;
        msg[p2p - 1] = 43;
        tu_check_rc(MPI_Send(msg, (int)p2p, MPI_INT, 0, 5, MPI_COMM_WORLD), what);
        tu_check_rc(MPI_Iallreduce(b.s, b.r, (int)n, MPI_INT, MPI_SUM, comm, &req), what);
    } else {
        tu_check_rc(MPI_Iallreduce(b.s, b.r, (int)n, MPI_INT, MPI_SUM, comm, &req), what);
    }
    tu_check_rc(MPI_Wait(&req, MPI_STATUS_IGNORE), what);
    check_sum(b.r, n, comm, what);
    buf_free(&b);
    free(msg);
}

static void test_sendrecv(long big)
{
    for (int warm = 0; warm < 2; warm++) {
        MPI_Comm comm;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        if (warm) {
            blocking_first(comm, "a blocking allreduce first");
        }
        sendrecv_round(comm, 7, "start, then 4 MiB point to point, first call");
        sendrecv_round(comm, big, "start, then 4 MiB point to point, a larger message");
        sendrecv_round(comm, 1031, "start, then 4 MiB point to point, used communicator");
        MPI_Comm_free(&comm);
    }
    sendrecv_round(MPI_COMM_WORLD, big, "start, then 4 MiB point to point, MPI_COMM_WORLD");
}

static void test_many(int n, int blocking)
{
    MPI_Comm *c = calloc((size_t)n, sizeof(MPI_Comm));
    int made = 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (; made < n; made++) {
        if (MPI_Comm_dup(MPI_COMM_WORLD, &c[made]) != MPI_SUCCESS) {
            break;
        }
    }
    tu_check(made == n, "many: duplicates", "%d of %d made", made, n);
    for (int k = 0; k < made; k++) {
        /* collar's own shortage must never reach the application's
         * handler: this one would end the job. */
        MPI_Comm_set_errhandler(c[k], MPI_ERRORS_ARE_FATAL);
    }
    buf_t b;
    buf_new(&b, 8);
    for (int k = 0; k < made; k++) {
        memset(b.r, 0, 8 * sizeof(int));
        int rc;
        if (blocking) {
            rc = MPI_Allreduce(b.s, b.r, 8, MPI_INT, MPI_SUM, c[k]);
        } else {
            MPI_Request req;
            rc = MPI_Iallreduce(b.s, b.r, 8, MPI_INT, MPI_SUM, c[k], &req);
            if (rc == MPI_SUCCESS) {
                rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
        }
        tu_check_rc(rc, "many: allreduce");
        check_sum(b.r, 8, c[k], "many: allreduce");
    }
    int (*count)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "collar_communicators");
    if (count != NULL) {
        const int held = count();
        tu_check(held <= made + 1, "many: collar's communicators",
                 "collar holds %d for %d of the application's", held, made);
        if (tu_world_rank() == 0) {
            printf("many: %d communicators, collar holds %d\n", made, held);
        }
    }
    for (int k = 0; k < made; k++) {
        MPI_Comm_free(&c[k]);
    }
    buf_free(&b);
    free(c);
}

#if defined(HAVE_PMPI_ALLREDUCE_INIT)
/* Persistent allreduces built, then other calls, then started: P1 and P2
 * made (each needing a larger IPC region than the one before), a blocking
 * and a nonblocking allreduce of P2's size made before either starts, then
 * P2 started before P1. */
static void test_persist(long big)
{
    buf_t p1, p2, a, b;
    buf_new(&p1, big / 2);
    buf_new(&p2, big);
    buf_new(&a, big);
    buf_new(&b, big);
    MPI_Request req[2], nb;
    tu_check_rc(MPI_Allreduce_init(p1.s, p1.r, (int)p1.n, MPI_INT, MPI_SUM,
                                   MPI_COMM_WORLD, MPI_INFO_NULL, &req[0]),
                "persistent: init 1");
    tu_check_rc(MPI_Allreduce_init(p2.s, p2.r, (int)p2.n, MPI_INT, MPI_SUM,
                                   MPI_COMM_WORLD, MPI_INFO_NULL, &req[1]),
                "persistent: init 2");
    tu_check_rc(MPI_Allreduce(a.s, a.r, (int)a.n, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                "persistent: a blocking allreduce before the starts");
    check_sum(a.r, a.n, MPI_COMM_WORLD, "persistent: the blocking allreduce");
    tu_check_rc(MPI_Iallreduce(b.s, b.r, (int)b.n, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                               &nb), "persistent: a nonblocking allreduce");
    tu_check_rc(MPI_Wait(&nb, MPI_STATUS_IGNORE), "persistent: its wait");
    check_sum(b.r, b.n, MPI_COMM_WORLD, "persistent: the nonblocking allreduce");
    for (int round = 0; round < 3; round++) {
        tu_check_rc(MPI_Start(&req[1]), "persistent: start 2");
        tu_check_rc(MPI_Start(&req[0]), "persistent: start 1");
        tu_check_rc(MPI_Waitall(2, req, tu_statuses_ignore()), "persistent: waitall");
        check_sum(p1.r, p1.n, MPI_COMM_WORLD, "persistent: 1");
        check_sum(p2.r, p2.n, MPI_COMM_WORLD, "persistent: 2");
    }
    MPI_Request_free(&req[0]);
    MPI_Request_free(&req[1]);
    buf_free(&p1);
    buf_free(&p2);
    buf_free(&a);
    buf_free(&b);
}
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_nbstart");
    const char *mode = argc > 1 ? argv[1] : "orders";
    const long big = argc > 2 ? atol(argv[2]) : 40000;
    if (strcmp(mode, "orders") == 0) {
        test_orders(big);
    } else if (strcmp(mode, "sendrecv") == 0) {
        if (tu_world_size() < 2) {
            tu_skip("sendrecv needs 2 ranks");
        }
        test_sendrecv(big);
    } else if (strcmp(mode, "persist") == 0) {
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        test_persist(big);
#else
        tu_skip("the MPI library has no persistent collectives");
#endif
    } else if (strcmp(mode, "many") == 0) {
        test_many(argc > 2 ? atoi(argv[2]) : 100, argc > 3 ? atoi(argv[3]) : 1);
    } else {
        fprintf(stderr, "usage: test_nbstart orders|sendrecv|persist [BIG] | many N BLOCKING\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
