/*
 * Nonblocking starts that must not wait for other ranks: valid programs
 * that a consistency check synchronising the ranks at each start (as
 * COLLAR_CHECK=1 does, docs/reliability.md) would turn into hangs.
 *
 *   sendrecv  rank 0 starts MPI_Iallreduce, then MPI_Send's 1 MiB to
 *             rank 1 (rendezvous: the send returns only once the receive
 *             has started); rank 1 first MPI_Recv's it, then starts its
 *             MPI_Iallreduce; the other ranks start theirs; all wait.
 *             Valid: MPI_Iallreduce is a nonblocking (local) start, so
 *             rank 0 reaches its send whatever rank 1 does, and rank 1
 *             starts the same collective on the same communicator as its
 *             first collective there after the receive.
 *   orders    two duplicates of MPI_COMM_WORLD; even ranks start
 *             MPI_Iallreduce on the first, then on the second, odd ranks
 *             the other way round; then one MPI_Waitall.  Valid: the order
 *             of collectives is per communicator (MPI-4.1 section 6.14,
 *             the example with overlapping communicators).  Then the same
 *             with MPI_COMM_WORLD and a duplicate.
 *
 * Each runs on communicators that had no collective before (fresh) and
 * again after a blocking MPI_Allreduce on each (used), with a small
 * message (1031 elements) and a large one (--count, default 262144, to
 * make chunked algorithms take several steps), with host buffers and with
 * device buffers (TU_DEVICE=cuda: the device mirrors; under collar's sim
 * device every buffer counts as device memory).  Every result is checked
 * bit-exact on every rank (ints).  The blocking allreduces and the sends
 * use host memory.
 *
 * Usage: sem_nbstart [--thread single|multiple] [--cases sendrecv,orders]
 *                    [--count N] [--states fresh,used] [--mems host,device]
 *                    [--sizes small,large]
 *   the last three select parts (default: all of each)
 */
#include "config.h"
#include "semutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static int value(int r, long i, int salt)
{
    return (r + 1) * 1000 + (int)((i + salt) % 997);
}

/* An allreduce's buffers: host, and what MPI gets (device mirrors, or the
 * host buffers themselves). */
typedef struct {
    int *s, *r;
    int *ds, *dr;
    long n;
    int device;
} ar_t;

static void ar_new(ar_t *a, long n, int device)
{
    a->n = n;
    a->device = device;
    a->s = malloc((size_t)n * sizeof(int));
    a->r = malloc((size_t)n * sizeof(int));
    if (a->s == NULL || a->r == NULL) {
        tu_fail("malloc", "%ld ints", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    a->ds = device ? tu_dev_mirror(a->s, (size_t)n * sizeof(int)) : a->s;
    a->dr = device ? tu_dev_mirror(a->r, (size_t)n * sizeof(int)) : a->r;
}

static void ar_free(ar_t *a)
{
    if (a->device) {
        tu_dev_unmirror(a->ds, a->s);
        tu_dev_unmirror(a->dr, a->r);
    }
    free(a->s);
    free(a->r);
}

/* Start the allreduce of this rank's values (salted) on comm. */
static void ar_start(ar_t *a, MPI_Comm comm, int salt, MPI_Request *req)
{
    for (long i = 0; i < a->n; i++) {
        a->s[i] = value(rank, i, salt);
        a->r[i] = -1;
    }
    if (a->device) {
        tu_dev_put(a->ds, a->s, (size_t)a->n * sizeof(int));
        tu_dev_put(a->dr, a->r, (size_t)a->n * sizeof(int));
    }
    if (!tu_check_rc(MPI_Iallreduce(a->ds, a->dr, (int)a->n, MPI_INT, MPI_SUM,
                                    comm, req), sc_phase())) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* The sum over comm's ranks (their world ranks give the values). */
static void ar_check(ar_t *a, MPI_Comm comm, int salt, const char *what)
{
    if (a->device) {
        tu_dev_get(a->r, a->dr, (size_t)a->n * sizeof(int));
    }
    int csize;
    MPI_Comm_size(comm, &csize);
    MPI_Group g, w;
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &w);
    int *wr = malloc((size_t)csize * sizeof(int)), *cr = malloc((size_t)csize * sizeof(int));
    for (int r = 0; r < csize; r++) {
        cr[r] = r;
    }
    MPI_Group_translate_ranks(g, csize, cr, w, wr);
    long bad = 0, first = -1;
    for (long i = 0; i < a->n; i++) {
        long long want = 0;
        for (int r = 0; r < csize; r++) {
            want += value(wr[r], i, salt);
        }
        if (a->r[i] != want && bad++ == 0) {
            first = i;
        }
    }
    tu_check(bad == 0, what, "%ld of %ld elements wrong, the first at %ld", bad,
             a->n, first);
    free(wr);
    free(cr);
    MPI_Group_free(&g);
    MPI_Group_free(&w);
}

/* A blocking allreduce on comm (host memory): the communicator is "used". */
static void use_comm(MPI_Comm comm)
{
    int one = 1, n = 0;
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, comm);
    int csize;
    MPI_Comm_size(comm, &csize);
    tu_check(n == csize, "blocking allreduce", "%d, want %d", n, csize);
}

#define BIG (1 << 18) /* ints: 1 MiB */

static void case_sendrecv(MPI_Comm comm, long n, int device, int salt,
                          const char *name)
{
    sc_phase_begin("sendrecv/%s/%ld/%s", name, n, device ? "device" : "host");
    ar_t a;
    ar_new(&a, n, device);
    int crank;
    MPI_Comm_rank(comm, &crank);
    int *msg = malloc(BIG * sizeof(int));
    MPI_Request req = MPI_REQUEST_NULL;
    if (crank == 0) {
        ar_start(&a, comm, salt, &req);
        for (int i = 0; i < BIG; i++) {
            msg[i] = i ^ salt;
        }
        MPI_Send(msg, BIG, MPI_INT, 1, 5, comm);
    } else if (crank == 1) {
        memset(msg, 0, BIG * sizeof(int));
        MPI_Recv(msg, BIG, MPI_INT, 0, 5, comm, MPI_STATUS_IGNORE);
        long bad = 0;
        for (int i = 0; i < BIG; i++) {
            bad += msg[i] != (i ^ salt);
        }
        tu_check(bad == 0, sc_phase(), "%ld ints of the message wrong", bad);
        ar_start(&a, comm, salt, &req);
    } else {
        ar_start(&a, comm, salt, &req);
    }
    tu_check_rc(MPI_Wait(&req, MPI_STATUS_IGNORE), sc_phase());
    ar_check(&a, comm, salt, sc_phase());
    free(msg);
    ar_free(&a);
    sc_sync(MPI_COMM_WORLD);
    sc_phase_end();
}

static void case_orders(MPI_Comm c1, MPI_Comm c2, long n, int device, int salt,
                        const char *name)
{
    sc_phase_begin("orders/%s/%ld/%s", name, n, device ? "device" : "host");
    ar_t a1, a2;
    ar_new(&a1, n, device);
    ar_new(&a2, n, device);
    MPI_Request reqs[2];
    if (rank % 2 == 0) {
        ar_start(&a1, c1, salt, &reqs[0]);
        ar_start(&a2, c2, salt + 1, &reqs[1]);
    } else {
        ar_start(&a2, c2, salt + 1, &reqs[1]);
        ar_start(&a1, c1, salt, &reqs[0]);
    }
    tu_check_rc(MPI_Waitall(2, reqs, tu_statuses_ignore()), sc_phase());
    ar_check(&a1, c1, salt, sc_phase());
    ar_check(&a2, c2, salt + 1, sc_phase());
    ar_free(&a1);
    ar_free(&a2);
    sc_sync(MPI_COMM_WORLD);
    sc_phase_end();
}

int main(int argc, char **argv)
{
    sc_init(&argc, &argv, "sem_nbstart");
    rank = tu_world_rank();
    size = tu_world_size();
    if (size < 2) {
        tu_skip("needs at least 2 ranks");
    }
    const char *cases = sc_arg(argc, argv, "--cases", "all");
    const long big = atol(sc_arg(argc, argv, "--count", "262144"));
    const long counts[2] = { 1031, big };
    const char *states = sc_arg(argc, argv, "--states", "all");
    const char *mems = sc_arg(argc, argv, "--mems", "all");
    const char *sizes = sc_arg(argc, argv, "--sizes", "all");
    int salt = 0, phases = 0;
    for (int used = 0; used < 2; used++) {
        if (!sc_list_has(states, used ? "used" : "fresh")) {
            continue;
        }
        for (int device = 0; device < 2; device++) {
            if (!sc_list_has(mems, device ? "device" : "host")) {
                continue;
            }
            for (int ci = 0; ci < 2; ci++) {
                if (!sc_list_has(sizes, ci ? "large" : "small")) {
                    continue;
                }
                const long n = counts[ci];
                /* Fresh communicators each time (their first collective is
                 * the case's own), or made once and used. */
                MPI_Comm c1, c2;
                MPI_Comm_dup(MPI_COMM_WORLD, &c1);
                MPI_Comm_dup(MPI_COMM_WORLD, &c2);
                if (used) {
                    use_comm(c1);
                    use_comm(c2);
                }
                const char *state = used ? "used" : "fresh";
                char name[64];
                if (sc_list_has(cases, "sendrecv")) {
                    snprintf(name, sizeof(name), "%s dup", state);
                    case_sendrecv(c1, n, device, salt++, name);
                    case_sendrecv(MPI_COMM_WORLD, n, device, salt++, "world");
                    phases += 2;
                }
                if (sc_list_has(cases, "orders")) {
                    MPI_Comm c3, c4;
                    MPI_Comm_dup(MPI_COMM_WORLD, &c3);
                    MPI_Comm_dup(MPI_COMM_WORLD, &c4);
                    if (used) {
                        use_comm(c3);
                        use_comm(c4);
                    }
                    snprintf(name, sizeof(name), "%s dups", state);
                    case_orders(c3, c4, n, device, salt, name);
                    salt += 2;
                    snprintf(name, sizeof(name), "world+%s dup", state);
                    case_orders(MPI_COMM_WORLD, c2, n, device, salt, name);
                    salt += 2;
                    phases += 2;
                    MPI_Comm_free(&c3);
                    MPI_Comm_free(&c4);
                }
                MPI_Comm_free(&c1);
                MPI_Comm_free(&c2);
            }
        }
    }
    if (rank == 0) {
        printf("sem_nbstart: %d phases, %d ranks\n", phases, size);
        fflush(stdout);
    }
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
