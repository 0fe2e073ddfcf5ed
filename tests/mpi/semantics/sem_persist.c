/*
 * Persistent collectives (MPI-4) started in different orders on different
 * ranks.
 *
 * MPI-4.1 section 6.13: the initialization calls (MPI_Allreduce_init, ...)
 * are collective and follow the ordering rules of the other collectives,
 * but "once initialized, persistent collective operations can be started
 * in any order and the order can differ among the MPI processes in the
 * communicator".  So for each collective this program initializes three
 * persistent operations A, B, C on one communicator, in that order on
 * every rank, with different arguments (op, root, counts, datatype,
 * displacements) and then:
 *
 *   pair    ten rounds of A and B: even ranks start A then B, odd ranks B
 *           then A (MPI_Start each), or in alternate rounds MPI_Startall
 *           with the array {A, B} on even ranks and {B, A} on odd ones;
 *           then MPI_Waitall;
 *   triple  ten rounds of A, B and C, started in a permutation that
 *           depends on the rank and the round (rank 1's is rank 0's
 *           reversed, rank 2's another), with MPI_Start in turn or with
 *           MPI_Startall on the permuted array; then MPI_Waitall.
 *
 * Every round puts new values in the send buffers and a sentinel in the
 * receive buffers before the starts, and checks every rank's results after
 * the wait: bit-exact for integers, against a float64 reference for
 * floating point (values whose sums are exact), and the parts of receive
 * buffers that the operation must not write (gaps between the blocks of
 * the v forms, receive buffers of non-root ranks) still the sentinel.
 * Collectives: allreduce, bcast, allgather, allgatherv, alltoall,
 * alltoallv, reduce_scatter, reduce_scatter_block, reduce, gather,
 * gatherv, scatter, scatterv; on MPI_COMM_WORLD, on a fresh duplicate and
 * on a duplicate that had a blocking MPI_Allreduce first.
 * C is initialized before the pair rounds and stays inactive during them.
 *
 * MPICH 4.0 runs its persistent gathers at MPI_Gather_init (without any
 * layer: MPI_Start does not read the buffers again, docs/collectives.md):
 * there the gather and gatherv operations keep the values of their
 * initialization in every round, and their receive buffers are not reset
 * between rounds.  Its persistent allgather and scatter deliver the other
 * ranks' data at their first start only (later starts leave the receive
 * buffer as it was; on 3 ranks MPI_Wait fails), without any layer too:
 * they are left out there, with a note.
 *
 * Usage: sem_persist [--thread single|multiple] [--colls LIST]
 *                    [--count N] [--rounds R] [--order mixed|same]
 *                    [--comms world,dup,used]
 *   N: elements of the allreduces (default 32768; the others about N/16)
 *   R: rounds of each phase (default 10)
 *   same: every rank starts in rank 0's order (for comparison; the
 *   default, mixed, is what this program is for)
 * Exit 77 where the MPI library has no persistent collectives (Open MPI
 * 4.1).  With TU_DEVICE=cuda every buffer the operations get is device
 * memory (put before the starts, read back after the wait).
 */
#include "config.h"
#include "semutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(HAVE_PMPI_ALLREDUCE_INIT)

enum { P_ALLREDUCE, P_BCAST, P_ALLGATHER, P_ALLGATHERV, P_ALLTOALL,
       P_ALLTOALLV, P_REDUCE_SCATTER, P_REDUCE_SCATTER_BLOCK, P_REDUCE,
       P_GATHER, P_GATHERV, P_SCATTER, P_SCATTERV, NPCOLLS };
static const char *const pcoll_names[NPCOLLS] = {
    "allreduce", "bcast", "allgather", "allgatherv", "alltoall", "alltoallv",
    "reduce_scatter", "reduce_scatter_block", "reduce", "gather", "gatherv",
    "scatter", "scatterv"
};

#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40100000
static const int gather_reads_at_init = 1;
static const int restarts_broken = 1;
#else
static const int gather_reads_at_init = 0;
static const int restarts_broken = 0;
#endif

/* MPICH 4.0's persistent allgather and scatter, without any layer: a start
 * after the first one does not deliver the other ranks' blocks (the
 * receive buffer keeps what was there), and on 3 ranks MPI_Wait fails
 * ("Invalid communicator" in its schedule).  Left out there. */
static int library_broken(int coll)
{
    return restarts_broken && (coll == P_ALLGATHER || coll == P_SCATTER);
}

#define SENTINEL 0x7A7A7A7A

static int rank, size;
static int count;   /* allreduce elements */
static int base;    /* the other collectives' scale */
static int same_order; /* --order same: every rank in rank 0's order */

/* One persistent operation: its collective, index k (0 = A, 1 = B, 2 = C)
 * and what its arguments are. */
typedef struct {
    int coll, k;
    int n;                  /* count (per rank block where there are blocks) */
    int root;
    MPI_Op op;
    MPI_Datatype type;      /* allreduce: double, int or float; else int */
    size_t esize;
    void *s, *r;            /* host buffers */
    void *ds, *dr;          /* their device mirrors */
    size_t scount, rcount;  /* elements */
    int *scounts, *sdispls, *rcounts, *rdispls;
    MPI_Request req;
} pop_t;

static const MPI_Op ops[3] = { MPI_SUM, MPI_MAX, MPI_MIN };

static int ival(int r, size_t i, uint64_t seed)
{
    uint32_t x = (uint32_t)(r + 1) * 0x9E3779B1u ^ (uint32_t)i * 0x85EBCA6Bu
                 ^ (uint32_t)seed ^ (uint32_t)(seed >> 32);
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return (int)(x % 2000001u) - 1000000;
}

/* Counts of the v forms: different per rank pair and per operation. */
static int cv(int q, int k)
{
    return 1 + (q * 7 + k * 5) % 11 + k * (base / 8);
}

static int c2(int src, int dst, int k)
{
    return 1 + (src * 7 + dst * 3 + k * 5) % 11 + k * (base / 8);
}

static int rc_count(int q, int k)
{
    return 1 + (q * 3 + k) % 5 + base / 4;
}

static int root_of(int k)
{
    return k == 0 ? 0 : k == 1 ? size - 1 : 1 % size;
}

/* Displacements with a gap of k elements after each block; returns the
 * total extent. */
static int displs_of(const int *counts, int *displs, int k)
{
    int off = 0;
    for (int q = 0; q < size; q++) {
        displs[q] = off;
        off += counts[q] + k;
    }
    return off;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL) {
        tu_fail("malloc", "%zu bytes", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void pop_setup(pop_t *p, int coll, int k)
{
    memset(p, 0, sizeof(*p));
    p->coll = coll;
    p->k = k;
    p->root = root_of(k);
    p->op = ops[k];
    p->type = MPI_INT;
    p->esize = sizeof(int);
    p->n = base + 3 * k;
    p->req = MPI_REQUEST_NULL;
    p->scounts = xmalloc((size_t)size * sizeof(int));
    p->sdispls = xmalloc((size_t)size * sizeof(int));
    p->rcounts = xmalloc((size_t)size * sizeof(int));
    p->rdispls = xmalloc((size_t)size * sizeof(int));
    const int n = p->n;
    switch (coll) {
    case P_ALLREDUCE:
        p->n = count + 7 * k;
        p->type = k == 0 ? MPI_DOUBLE : k == 1 ? MPI_INT : MPI_FLOAT;
        p->esize = k == 0 ? sizeof(double) : k == 1 ? sizeof(int) : sizeof(float);
        p->scount = p->rcount = (size_t)p->n;
        break;
    case P_BCAST:
        p->scount = 0;
        p->rcount = (size_t)n;
        break;
    case P_ALLGATHER:
    case P_GATHER:
        p->scount = (size_t)n;
        p->rcount = (size_t)size * n;
        break;
    case P_ALLGATHERV:
    case P_GATHERV:
        for (int q = 0; q < size; q++) {
            p->rcounts[q] = cv(q, k);
        }
        p->scount = (size_t)cv(rank, k);
        p->rcount = (size_t)displs_of(p->rcounts, p->rdispls, k);
        break;
    case P_ALLTOALL:
        p->scount = p->rcount = (size_t)size * n;
        break;
    case P_ALLTOALLV:
        for (int q = 0; q < size; q++) {
            p->scounts[q] = c2(rank, q, k);
            p->rcounts[q] = c2(q, rank, k);
        }
        p->scount = (size_t)displs_of(p->scounts, p->sdispls, k);
        p->rcount = (size_t)displs_of(p->rcounts, p->rdispls, k);
        break;
    case P_REDUCE_SCATTER:
        p->scount = 0;
        for (int q = 0; q < size; q++) {
            p->rcounts[q] = rc_count(q, k);
            p->scount += (size_t)p->rcounts[q];
        }
        p->rcount = (size_t)p->rcounts[rank];
        break;
    case P_REDUCE_SCATTER_BLOCK:
        p->scount = (size_t)size * n;
        p->rcount = (size_t)n;
        break;
    case P_REDUCE:
        p->scount = p->rcount = (size_t)n;
        break;
    case P_SCATTER:
        p->scount = (size_t)size * n;
        p->rcount = (size_t)n;
        break;
    case P_SCATTERV:
        for (int q = 0; q < size; q++) {
            p->scounts[q] = cv(q, k);
        }
        p->scount = (size_t)displs_of(p->scounts, p->sdispls, k);
        p->rcount = (size_t)cv(rank, k);
        break;
    }
    p->s = xmalloc(p->scount * p->esize);
    p->r = xmalloc(p->rcount * p->esize);
    memset(p->s, 0, p->scount * p->esize);
    memset(p->r, 0x7A, p->rcount * p->esize);
    p->ds = tu_dev_mirror(p->s, p->scount * p->esize);
    p->dr = tu_dev_mirror(p->r, p->rcount * p->esize);
}

static void pop_release(pop_t *p)
{
    tu_dev_unmirror(p->ds, p->s);
    tu_dev_unmirror(p->dr, p->r);
    free(p->s);
    free(p->r);
    free(p->scounts);
    free(p->sdispls);
    free(p->rcounts);
    free(p->rdispls);
}

static int keeps_init_values(const pop_t *p)
{
    return gather_reads_at_init && (p->coll == P_GATHER || p->coll == P_GATHERV);
}

/* The send buffer of rank q for this operation, element i. */
static double send_val(const pop_t *p, int q, size_t i, uint64_t seed)
{
    const int v = ival(q, i, seed);
    return p->type == MPI_INT ? (double)v : 0.5 * (double)v;
}

/* New inputs (the round's seed), the sentinel in the receive buffer, both
 * put on the device. */
static void pop_fill(pop_t *p, uint64_t seed, int reset_recv)
{
    const int in_root_buffer = p->coll == P_BCAST;
    if (in_root_buffer) {
        if (rank == p->root) {
            int *r = p->r;
            for (size_t i = 0; i < p->rcount; i++) {
                r[i] = ival(rank, i, seed);
            }
        } else if (reset_recv) {
            memset(p->r, 0x7A, p->rcount * p->esize);
        }
        tu_dev_put(p->dr, p->r, p->rcount * p->esize);
        return;
    }
    for (size_t i = 0; i < p->scount; i++) {
        const double v = send_val(p, rank, i, seed);
        if (p->type == MPI_DOUBLE) {
            ((double *)p->s)[i] = v;
        } else if (p->type == MPI_FLOAT) {
            ((float *)p->s)[i] = (float)v;
        } else {
            ((int *)p->s)[i] = (int)v;
        }
    }
    tu_dev_put(p->ds, p->s, p->scount * p->esize);
    if (reset_recv) {
        memset(p->r, 0x7A, p->rcount * p->esize);
        tu_dev_put(p->dr, p->r, p->rcount * p->esize);
    }
}

static int pop_init(pop_t *p, MPI_Comm comm)
{
    const MPI_Info I = MPI_INFO_NULL;
    MPI_Request *rq = &p->req;
    switch (p->coll) {
    case P_ALLREDUCE:
        return MPI_Allreduce_init(p->ds, p->dr, p->n, p->type, p->op, comm, I, rq);
    case P_BCAST:
        return MPI_Bcast_init(p->dr, p->n, MPI_INT, p->root, comm, I, rq);
    case P_ALLGATHER:
        return MPI_Allgather_init(p->ds, p->n, MPI_INT, p->dr, p->n, MPI_INT,
                                  comm, I, rq);
    case P_ALLGATHERV:
        return MPI_Allgatherv_init(p->ds, (int)p->scount, MPI_INT, p->dr,
                                   p->rcounts, p->rdispls, MPI_INT, comm, I, rq);
    case P_ALLTOALL:
        return MPI_Alltoall_init(p->ds, p->n, MPI_INT, p->dr, p->n, MPI_INT,
                                 comm, I, rq);
    case P_ALLTOALLV:
        return MPI_Alltoallv_init(p->ds, p->scounts, p->sdispls, MPI_INT, p->dr,
                                  p->rcounts, p->rdispls, MPI_INT, comm, I, rq);
    case P_REDUCE_SCATTER:
        return MPI_Reduce_scatter_init(p->ds, p->dr, p->rcounts, MPI_INT, p->op,
                                       comm, I, rq);
    case P_REDUCE_SCATTER_BLOCK:
        return MPI_Reduce_scatter_block_init(p->ds, p->dr, p->n, MPI_INT, p->op,
                                             comm, I, rq);
    case P_REDUCE:
        return MPI_Reduce_init(p->ds, p->dr, p->n, MPI_INT, p->op, p->root,
                               comm, I, rq);
    case P_GATHER:
        return MPI_Gather_init(p->ds, p->n, MPI_INT, p->dr, p->n, MPI_INT,
                               p->root, comm, I, rq);
    case P_GATHERV:
        return MPI_Gatherv_init(p->ds, (int)p->scount, MPI_INT, p->dr,
                                p->rcounts, p->rdispls, MPI_INT, p->root, comm,
                                I, rq);
    case P_SCATTER:
        return MPI_Scatter_init(p->ds, p->n, MPI_INT, p->dr, p->n, MPI_INT,
                                p->root, comm, I, rq);
    default:
        return MPI_Scatterv_init(p->ds, p->scounts, p->sdispls, MPI_INT, p->dr,
                                 (int)p->rcount, MPI_INT, p->root, comm, I, rq);
    }
}

/* The reduction of element i of every rank's send buffer. */
static double reduced(const pop_t *p, size_t i, uint64_t seed)
{
    double acc = send_val(p, 0, i, seed);
    for (int q = 1; q < size; q++) {
        const double v = send_val(p, q, i, seed);
        if (p->op == MPI_SUM) {
            acc += v;
        } else if (p->op == MPI_MAX) {
            acc = v > acc ? v : acc;
        } else {
            acc = v < acc ? v : acc;
        }
    }
    return acc;
}

/* The value element j of this rank's receive buffer must have: 1 and
 * *want set, or 0 where the operation must leave it alone. */
static int expected(const pop_t *p, size_t j, uint64_t seed, double *want)
{
    const int n = p->n, me = rank;
    switch (p->coll) {
    case P_ALLREDUCE:
        *want = reduced(p, j, seed);
        return 1;
    case P_BCAST:
        *want = send_val(p, p->root, j, seed);
        return 1;
    case P_REDUCE:
        if (me != p->root) {
            return 0;
        }
        *want = reduced(p, j, seed);
        return 1;
    case P_REDUCE_SCATTER_BLOCK:
        *want = reduced(p, (size_t)me * n + j, seed);
        return 1;
    case P_REDUCE_SCATTER: {
        size_t off = 0;
        for (int q = 0; q < me; q++) {
            off += (size_t)p->rcounts[q];
        }
        *want = reduced(p, off + j, seed);
        return 1;
    }
    case P_ALLGATHER:
    case P_GATHER:
        if (p->coll == P_GATHER && me != p->root) {
            return 0;
        }
        *want = send_val(p, (int)(j / (size_t)n), j % (size_t)n, seed);
        return 1;
    case P_ALLGATHERV:
    case P_GATHERV:
        if (p->coll == P_GATHERV && me != p->root) {
            return 0;
        }
        for (int q = 0; q < size; q++) {
            const size_t d = (size_t)p->rdispls[q];
            if (j >= d && j < d + (size_t)p->rcounts[q]) {
                *want = send_val(p, q, j - d, seed);
                return 1;
            }
        }
        return 0;
    case P_ALLTOALL: {
        const int q = (int)(j / (size_t)n);
        *want = send_val(p, q, (size_t)me * n + j % (size_t)n, seed);
        return 1;
    }
    case P_ALLTOALLV:
        for (int q = 0; q < size; q++) {
            const size_t d = (size_t)p->rdispls[q];
            if (j >= d && j < d + (size_t)p->rcounts[q]) {
                /* Where sender q put its block for this rank. */
                size_t sd = 0;
                for (int t = 0; t < me; t++) {
                    sd += (size_t)c2(q, t, p->k) + (size_t)p->k;
                }
                *want = send_val(p, q, sd + (j - d), seed);
                return 1;
            }
        }
        return 0;
    case P_SCATTER:
        *want = send_val(p, p->root, (size_t)me * n + j, seed);
        return 1;
    default: { /* P_SCATTERV */
        size_t sd = 0;
        for (int q = 0; q < me; q++) {
            sd += (size_t)cv(q, p->k) + (size_t)p->k;
        }
        *want = send_val(p, p->root, sd + j, seed);
        return 1;
    }
    }
}

static void pop_check(pop_t *p, uint64_t seed, const char *what)
{
    tu_dev_get(p->r, p->dr, p->rcount * p->esize);
    long bad = 0, first = -1;
    double first_got = 0, first_want = 0;
    for (size_t j = 0; j < p->rcount; j++) {
        double want = 0, got;
        int untouched_ok = 0;
        if (p->type == MPI_DOUBLE) {
            got = ((double *)p->r)[j];
        } else if (p->type == MPI_FLOAT) {
            got = (double)((float *)p->r)[j];
        } else {
            got = (double)((int *)p->r)[j];
        }
        if (!expected(p, j, seed, &want)) {
            /* must still be the sentinel: compare the bytes */
            int sentinel = 1;
            const unsigned char *b = (const unsigned char *)p->r + j * p->esize;
            for (size_t c = 0; c < p->esize; c++) {
                sentinel &= b[c] == 0x7A;
            }
            untouched_ok = sentinel;
            if (!untouched_ok && bad++ == 0) {
                first = (long)j;
                first_got = got;
                first_want = (double)SENTINEL;
            }
            continue;
        }
        if (got != want && bad++ == 0) {
            first = (long)j;
            first_got = got;
            first_want = want;
        }
    }
    tu_check(bad == 0, what, "%ld of %zu elements wrong, the first at %ld: "
             "%.17g, want %.17g", bad, p->rcount, first, first_got, first_want);
}

/* The six orders of three operations; order i + 3 is order i reversed. */
static const int perms[6][3] = {
    { 0, 1, 2 }, { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 }, { 0, 2, 1 }, { 1, 0, 2 }
};

static void run_coll(int coll, MPI_Comm comm, const char *comm_name, int rounds)
{
    pop_t p[3];
    char what[160];
    for (int k = 0; k < 3; k++) {
        pop_setup(&p[k], coll, k);
    }
    sc_phase_begin("%s/%s/init", comm_name, pcoll_names[coll]);
    /* Inputs before the initialization (a library may read them there),
     * then A, B, C initialized in the same order on every rank. */
    for (int k = 0; k < 3; k++) {
        pop_fill(&p[k], tu_seed(coll, (uint64_t)k, 0), 1);
        snprintf(what, sizeof(what), "%s/%s/init %c", comm_name,
                 pcoll_names[coll], 'A' + k);
        if (!tu_check_rc(pop_init(&p[k], comm), what)) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    sc_phase_end();
    for (int phase = 0; phase < 2; phase++) {
        const int nops = phase == 0 ? 2 : 3;
        for (int t = 0; t < rounds; t++) {
            const int use_startall = t % 2 == 1;
            sc_phase_begin("%s/%s/%s round %d (%s)", comm_name,
                            pcoll_names[coll], phase == 0 ? "pair" : "triple",
                            t, use_startall ? "MPI_Startall" : "MPI_Start");
            int order[3];
            const int r = same_order ? 0 : rank;
            if (phase == 0) {
                order[0] = r % 2 == 0 ? 0 : 1;
                order[1] = 1 - order[0];
            } else {
                const int *perm = perms[(t + 3 * (r % 2) + r / 2) % 6];
                memcpy(order, perm, sizeof(order));
            }
            uint64_t seeds[3];
            for (int k = 0; k < nops; k++) {
                const int keep = keeps_init_values(&p[k]);
                seeds[k] = tu_seed(coll, (uint64_t)k,
                                   keep ? 0 : (uint64_t)(1 + phase * 1000 + t));
                pop_fill(&p[k], seeds[k], !keep);
            }
            MPI_Request reqs[3];
            for (int i = 0; i < nops; i++) {
                reqs[i] = p[order[i]].req;
            }
            int rc = MPI_SUCCESS;
            if (use_startall) {
                rc = MPI_Startall(nops, reqs);
            } else {
                for (int i = 0; i < nops && rc == MPI_SUCCESS; i++) {
                    rc = MPI_Start(&reqs[i]);
                }
            }
            if (!tu_check_rc(rc, sc_phase())) {
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            tu_check_rc(MPI_Waitall(nops, reqs, tu_statuses_ignore()), sc_phase());
            for (int i = 0; i < nops; i++) {
                /* persistent: the handles stay valid (and inactive) */
                tu_check(reqs[i] == p[order[i]].req, sc_phase(),
                         "MPI_Waitall changed a persistent request's handle");
            }
            for (int k = 0; k < nops; k++) {
                snprintf(what, sizeof(what), "%s %c", sc_phase(), 'A' + k);
                pop_check(&p[k], seeds[k], what);
            }
            sc_phase_end();
        }
    }
    for (int k = 0; k < 3; k++) {
        MPI_Request_free(&p[k].req);
        pop_release(&p[k]);
    }
}

int main(int argc, char **argv)
{
    sc_init(&argc, &argv, "sem_persist");
    rank = tu_world_rank();
    size = tu_world_size();
    const char *coll_list = sc_arg(argc, argv, "--colls", "all");
    count = atoi(sc_arg(argc, argv, "--count", "32768"));
    const int rounds = atoi(sc_arg(argc, argv, "--rounds", "10"));
    same_order = strcmp(sc_arg(argc, argv, "--order", "mixed"), "same") == 0;
    if (count < 16) {
        count = 16;
    }
    base = count / 16;
    if (gather_reads_at_init && rank == 0) {
        printf("note: the MPI library's persistent gathers read their buffers "
               "at MPI_Gather_init (MPICH 4.0): gather and gatherv keep the "
               "values of their initialization in every round\n");
    }
    if (restarts_broken && rank == 0) {
        printf("note: the MPI library's persistent allgather and scatter "
               "deliver nothing new after their first start (MPICH 4.0, "
               "without collar too): left out\n");
    }
    /* The communicators: MPI_COMM_WORLD, a fresh duplicate (its first
     * collectives are the persistent ones), and a duplicate used by a
     * blocking MPI_Allreduce first (where a layer may set up its own
     * resources for the communicator). */
    static const char *const comm_names[3] = { "world", "dup", "used" };
    MPI_Comm comms[3] = { MPI_COMM_WORLD, MPI_COMM_NULL, MPI_COMM_NULL };
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[2]);
    int one = 1, n = 0;
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, comms[2]);
    tu_check(n == size, "blocking allreduce", "%d, want %d", n, size);
    int nruns = 0;
    const char *comm_list = sc_arg(argc, argv, "--comms", "all");
    for (int c = 0; c < 3; c++) {
        if (!sc_list_has(comm_list, comm_names[c])) {
            continue;
        }
        for (int coll = 0; coll < NPCOLLS; coll++) {
            if (!sc_list_has(coll_list, pcoll_names[coll]) || library_broken(coll)) {
                continue;
            }
            run_coll(coll, comms[c], comm_names[c], rounds);
            nruns++;
        }
        sc_phase_begin("sync after %s", comm_names[c]);
        sc_sync(MPI_COMM_WORLD);
        sc_phase_end();
    }
    MPI_Comm_free(&comms[1]);
    MPI_Comm_free(&comms[2]);
    if (rank == 0) {
        printf("sem_persist: %d collective x communicator pairs, %d rounds "
               "of pairs and of triples each, %d ranks\n", nruns, rounds, size);
        fflush(stdout);
    }
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

#else /* no persistent collectives in this MPI library */

int main(int argc, char **argv)
{
    sc_init(&argc, &argv, "sem_persist");
    tu_skip("the MPI library has no persistent collectives (MPI_Allreduce_init)");
}

#endif
