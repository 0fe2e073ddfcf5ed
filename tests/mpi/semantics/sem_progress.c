/*
 * MPI's progress rule, one blocking or polling call at a time: a rank that
 * is inside an MPI call must not stall a peer's nonblocking collective.
 *
 * Each phase runs one case with one nonblocking collective in one
 * direction.  Every rank starts the collective on MPI_COMM_WORLD with its
 * buffers on the device (TU_DEVICE=cuda; collar's sim device takes every
 * buffer for device memory): MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather,
 * MPI_Ireduce_scatter_block or MPI_Ialltoall.  Then the blocked rank B
 * (rank 0; rank 1 in the reverse direction "rev") makes ONE call that can
 * only return once the late rank L (the other one of ranks 0 and 1) has
 * made the matching call, and L makes that call only after its own MPI_Wait
 * on the collective has returned.  That wait needs B's part of the
 * collective, which B's MPI library must progress while B is blocked in
 * the other call (MPI-4.1 section 2.9, "Progress": progress is guaranteed
 * in blocked procedures and in repeated test procedures).  So the program
 * is valid MPI and must finish; a layer that advances its collectives
 * only inside its own completion calls hangs here.  After B's call returns
 * B waits for the collective too, and every rank checks the collective's
 * values (bit-exact for integers, against a float64 reference for floats)
 * and the values the case's own calls carried.  Ranks other than B and L
 * wait for the collective and then take part in the case's call where it
 * is collective over MPI_COMM_WORLD.
 *
 * Why each case is valid (B's call; L's matching call after its wait):
 *   recv, recv_c         MPI_Recv / MPI_Recv_c from L; L sends
 *   ssend, ssend_c       MPI_Ssend / MPI_Ssend_c to L (returns only once
 *                        L's receive has started); L receives
 *   send                 MPI_Send of 1 MiB (above the eager limits of the
 *                        libraries here: rendezvous); L receives
 *   sendrecv             MPI_Sendrecv with L, which sends and receives
 *   sendrecv_replace     the same with MPI_Sendrecv_replace
 *   probe, mprobe        MPI_Probe + MPI_Recv, MPI_Mprobe + MPI_Mrecv
 *   iprobe, improbe      a loop of MPI_Iprobe / MPI_Improbe (a test
 *                        procedure called again and again: progress is
 *                        guaranteed) until L's message is there
 *   barrier, bcast, allreduce, reduce, gather, scan, alltoall
 *                        the blocking collective on MPI_COMM_WORLD (host
 *                        buffers; root B for reduce and gather, L for
 *                        bcast); every rank calls it after the
 *                        nonblocking collective, so the order of
 *                        collectives is the same everywhere.  (MPI_Scan
 *                        at rank 0 needs no other rank: the forward
 *                        direction may not block there, the reverse one
 *                        does.)
 *   comm_dup, comm_split, comm_create
 *                        communicator constructors over MPI_COMM_WORLD
 *                        (collective: every rank calls them in the same
 *                        order); the new communicator is checked and freed
 *   win_create           MPI_Win_create over MPI_COMM_WORLD, then a fence
 *                        epoch with MPI_Put, checked
 *   win_fence            a window made before the collective starts; B
 *                        enters MPI_Win_fence at once, the others after
 *                        their wait; then MPI_Put and a closing fence
 *   win_lock             passive target: L writes a flag and a payload
 *                        into its own window, in an exclusive lock epoch
 *                        on itself (valid in the separate and the unified
 *                        memory model), after its wait; B polls L's window
 *                        with MPI_Win_lock(shared)/MPI_Get/MPI_Win_unlock
 *                        until it sees the flag, with an MPI_Iprobe of a
 *                        tag nobody sends in each turn (a test procedure:
 *                        it guarantees progress even where the RMA calls
 *                        complete locally), then sends L an empty message,
 *                        which L receives, so that L is inside MPI while B
 *                        polls
 *   file_open            MPI_File_open of a temporary file over
 *                        MPI_COMM_WORLD (collective); then every rank
 *                        writes its part (MPI_File_write_at_all), sync,
 *                        barrier, sync, and reads all parts back
 *   pmpi_recv            PMPI_Recv: the profiling entry point, which a
 *                        layer above the MPI library never sees
 *   pmpi_barrier         PMPI_Barrier at B, MPI_Barrier elsewhere
 *   thread_recv          (MPI_THREAD_MULTIPLE) a second thread of B sits in
 *                        MPI_Recv from L while B's main thread waits for
 *                        the collective
 *   thread_wait          (MPI_THREAD_MULTIPLE) a second thread of B waits
 *                        for the collective (the request is the process's,
 *                        any thread may complete it) while B's main thread
 *                        sits in MPI_Recv from L
 * The _c cases need MPI-4's large-count bindings (MPI_VERSION >= 4), the
 * thread cases MPI_THREAD_MULTIPLE (--thread multiple); without them they
 * are left out, and rank 0 says so in one note line.
 *
 * Between phases the ranks synchronise with point-to-point messages only
 * (sc_sync); each phase has its own tags, and every phase has a watchdog
 * that names it if it hangs (TU_PHASE_TIMEOUT, semutil.h).
 *
 * Usage: sem_progress [--thread single|multiple] [--cases LIST]
 *                     [--colls LIST] [--dirs fwd,rev] [--count N]
 *   LIST: comma-separated names (above; the collectives without the
 *   leading "i" too: allreduce, bcast, allgather, reduce_scatter_block,
 *   alltoall), or all (the default).  N: elements of the allreduce and the
 *   broadcast (default 65536); the other collectives move N / 8 elements
 *   per rank.  SEM_VERBOSE=1: rank 0 prints each phase as it starts.
 *
 * With TU_DEVICE=cuda the collective's buffers are device memory (put
 * before the start, read back after the wait); the buffers of the blocking
 * calls, windows and files stay host memory.
 */
#include "config.h"
#include "semutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the nonblocking collectives --------------------------------------- */

enum { C_IALLREDUCE, C_IBCAST, C_IALLGATHER, C_IREDUCE_SCATTER_BLOCK,
       C_IALLTOALL, NCOLLS };
static const char *const coll_names[NCOLLS] = {
    "iallreduce", "ibcast", "iallgather", "ireduce_scatter_block", "ialltoall"
};

static int rank, size;
static int count;           /* allreduce and bcast elements */
static int blk;             /* per-rank block of the others */
static float *s_host, *r_host;  /* host buffers, as big as needed */
static void *s_dev, *r_dev;     /* their device mirrors */
static size_t s_bytes, r_bytes;

/* Element i of rank r's data: a cheap mix of (r, i, seed) in
 * [-1000000, 1000000] (sums of a few ranks stay exact in an int; halves
 * of them exact in a double). */
static int ival(int r, size_t i, uint64_t seed)
{
    uint32_t x = (uint32_t)(r + 1) * 0x9E3779B1u ^ (uint32_t)i * 0x85EBCA6Bu
                 ^ (uint32_t)seed ^ (uint32_t)(seed >> 32);
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return (int)(x % 2000001u) - 1000000;
}

static double dval(int r, size_t i, uint64_t seed)
{
    return 0.5 * (double)ival(r, i, seed);
}

/* Fill this rank's inputs of collective `c` (root: the broadcast's) and
 * garbage into the receive buffer, put both on the device, start it. */
static int start_coll(int c, int root, uint64_t seed, int phase,
                      MPI_Request *req)
{
    tu_fill_garbage(r_host, r_bytes, seed ^ 0x5a5aU);
    int *si = (int *)s_host, *ri = (int *)r_host;
    double *sd = (double *)s_host;
    switch (c) {
    case C_IALLREDUCE:
        for (int i = 0; i < count; i++) {
            s_host[i] = (float)((rank + 1) * ((i + phase) % 97));
        }
        break;
    case C_IBCAST:
        if (rank == root) {
            for (int i = 0; i < count; i++) {
                ri[i] = ival(root, (size_t)i, seed);
            }
        }
        break;
    case C_IALLGATHER:
        for (int i = 0; i < blk; i++) {
            sd[i] = dval(rank, (size_t)i, seed);
        }
        break;
    case C_IREDUCE_SCATTER_BLOCK:
    case C_IALLTOALL:
        for (int i = 0; i < size * blk; i++) {
            si[i] = ival(rank, (size_t)i, seed);
        }
        break;
    }
    tu_dev_put(s_dev, s_host, s_bytes);
    tu_dev_put(r_dev, r_host, r_bytes);
    switch (c) {
    case C_IALLREDUCE:
        return MPI_Iallreduce(s_dev, r_dev, count, MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD, req);
    case C_IBCAST:
        return MPI_Ibcast(r_dev, count, MPI_INT, root, MPI_COMM_WORLD, req);
    case C_IALLGATHER:
        return MPI_Iallgather(s_dev, blk, MPI_DOUBLE, r_dev, blk, MPI_DOUBLE,
                              MPI_COMM_WORLD, req);
    case C_IREDUCE_SCATTER_BLOCK:
        return MPI_Ireduce_scatter_block(s_dev, r_dev, blk, MPI_INT, MPI_SUM,
                                         MPI_COMM_WORLD, req);
    default:
        return MPI_Ialltoall(s_dev, blk, MPI_INT, r_dev, blk, MPI_INT,
                             MPI_COMM_WORLD, req);
    }
}

/* Read the result back and compare it with what every rank contributed. */
static void check_coll(int c, int root, uint64_t seed, int phase)
{
    tu_dev_get(r_host, r_dev, r_bytes);
    const int *ri = (const int *)r_host;
    const double *rd = (const double *)r_host;
    long bad = 0, first = -1, n = 0;
    switch (c) {
    case C_IALLREDUCE:
        n = count;
        for (int i = 0; i < count; i++) {
            double want = 0;
            for (int r = 0; r < size; r++) {
                want += (double)((r + 1) * ((i + phase) % 97));
            }
            if ((double)r_host[i] != want && bad++ == 0) {
                first = i;
            }
        }
        break;
    case C_IBCAST:
        n = count;
        for (int i = 0; i < count; i++) {
            if (ri[i] != ival(root, (size_t)i, seed) && bad++ == 0) {
                first = i;
            }
        }
        break;
    case C_IALLGATHER:
        n = (long)size * blk;
        for (int q = 0; q < size; q++) {
            for (int i = 0; i < blk; i++) {
                if (rd[q * blk + i] != dval(q, (size_t)i, seed) && bad++ == 0) {
                    first = q * blk + i;
                }
            }
        }
        break;
    case C_IREDUCE_SCATTER_BLOCK:
        n = blk;
        for (int i = 0; i < blk; i++) {
            long long want = 0;
            for (int q = 0; q < size; q++) {
                want += ival(q, (size_t)rank * blk + i, seed);
            }
            if (ri[i] != want && bad++ == 0) {
                first = i;
            }
        }
        break;
    case C_IALLTOALL:
        n = (long)size * blk;
        for (int q = 0; q < size; q++) {
            for (int i = 0; i < blk; i++) {
                if (ri[q * blk + i] != ival(q, (size_t)rank * blk + i, seed)
                    && bad++ == 0) {
                    first = q * blk + i;
                }
            }
        }
        break;
    }
    tu_check(bad == 0, sc_phase(), "%s: %ld of %ld elements wrong, the first at %ld",
             coll_names[c], bad, n, first);
}

/* ---- the cases ------------------------------------------------------------ */

enum {
    K_RECV, K_RECV_C, K_SSEND, K_SSEND_C, K_SEND, K_SENDRECV,
    K_SENDRECV_REPLACE, K_PROBE, K_IPROBE, K_MPROBE, K_IMPROBE, K_BARRIER,
    K_BCAST, K_ALLREDUCE, K_REDUCE, K_GATHER, K_SCAN, K_ALLTOALL, K_COMM_DUP,
    K_COMM_SPLIT, K_COMM_CREATE, K_WIN_CREATE, K_WIN_FENCE, K_WIN_LOCK,
    K_FILE_OPEN, K_PMPI_RECV, K_PMPI_BARRIER, K_THREAD_RECV, K_THREAD_WAIT,
    NCASES
};
enum { NEED_MPI4 = 1, NEED_THREADS = 2 };
static const struct {
    const char *name;
    int need;
} cases[NCASES] = {
    { "recv", 0 }, { "recv_c", NEED_MPI4 }, { "ssend", 0 },
    { "ssend_c", NEED_MPI4 }, { "send", 0 }, { "sendrecv", 0 },
    { "sendrecv_replace", 0 }, { "probe", 0 }, { "iprobe", 0 },
    { "mprobe", 0 }, { "improbe", 0 }, { "barrier", 0 }, { "bcast", 0 },
    { "allreduce", 0 }, { "reduce", 0 }, { "gather", 0 }, { "scan", 0 },
    { "alltoall", 0 }, { "comm_dup", 0 }, { "comm_split", 0 },
    { "comm_create", 0 }, { "win_create", 0 }, { "win_fence", 0 },
    { "win_lock", 0 }, { "file_open", 0 }, { "pmpi_recv", 0 },
    { "pmpi_barrier", 0 }, { "thread_recv", NEED_THREADS },
    { "thread_wait", NEED_THREADS },
};

/* A tag that no message of the program carries (win_lock's probe). */
#define TAG_NEVER 32600
/* send: 1 MiB of ints. */
#define NBIG (1 << 18)

enum { ROLE_B, ROLE_L, ROLE_OTHER };

/* What one phase's case works on. */
typedef struct {
    int kind, role, B, L, tag, tok;
    uint64_t seed;
    MPI_Request *req;
    int *big;             /* send: NBIG ints */
    int wbuf[8];          /* window memory (host) */
    MPI_Win win;
    MPI_Comm comm;
    MPI_File fh;
    char path[512];
} phase_t;

static char file_dir[400];
static int file_job;

static void wait_coll(MPI_Request *req, const char *what)
{
    tu_check_rc(MPI_Wait(req, MPI_STATUS_IGNORE), what);
}

static void check_tok(int got, int want, const char *what)
{
    tu_check(got == want, sc_phase(), "%s: got %d, want %d", what, got, want);
}

/* Second threads of thread_recv and thread_wait. */
typedef struct {
    phase_t *p;
    int got;
    int rc;
} thread_arg_t;

static void *thread_recv_main(void *arg)
{
    thread_arg_t *a = arg;
    a->rc = MPI_Recv(&a->got, 1, MPI_INT, a->p->L, a->p->tag, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    return NULL;
}

static void *thread_wait_main(void *arg)
{
    thread_arg_t *a = arg;
    a->rc = MPI_Wait(a->p->req, MPI_STATUS_IGNORE);
    return NULL;
}

/* The blocking call at B and its match at L (after L's wait), the
 * collective calls at the other ranks (after their wait). */
static void head(phase_t *p)
{
    const int B = p->B, L = p->L, tag = p->tag, role = p->role;
    const MPI_Comm w = MPI_COMM_WORLD;
    MPI_Status st;
    int t = -1, t2[2] = { -1, -1 };
    int tok2[2] = { p->tok, -p->tok };
    switch (p->kind) {
    case K_RECV:
    case K_PMPI_RECV:
        if (role == ROLE_B) {
            if (p->kind == K_RECV) {
                MPI_Recv(&t, 1, MPI_INT, L, tag, w, &st);
            } else {
                PMPI_Recv(&t, 1, MPI_INT, L, tag, w, &st);
            }
            check_tok(t, p->tok, "token");
            check_tok(st.MPI_SOURCE, L, "status source");
        } else if (role == ROLE_L) {
            MPI_Send(&p->tok, 1, MPI_INT, B, tag, w);
        }
        break;
#if MPI_VERSION >= 4
    case K_RECV_C:
        if (role == ROLE_B) {
            MPI_Recv_c(&t, (MPI_Count)1, MPI_INT, L, tag, w, &st);
            check_tok(t, p->tok, "token");
        } else if (role == ROLE_L) {
            MPI_Send_c(&p->tok, (MPI_Count)1, MPI_INT, B, tag, w);
        }
        break;
    case K_SSEND_C:
        if (role == ROLE_B) {
            MPI_Ssend_c(&p->tok, (MPI_Count)1, MPI_INT, L, tag, w);
        } else if (role == ROLE_L) {
            MPI_Recv_c(&t, (MPI_Count)1, MPI_INT, B, tag, w, MPI_STATUS_IGNORE);
            check_tok(t, p->tok, "token");
        }
        break;
#endif
    case K_SSEND:
        if (role == ROLE_B) {
            MPI_Ssend(&p->tok, 1, MPI_INT, L, tag, w);
        } else if (role == ROLE_L) {
            MPI_Recv(&t, 1, MPI_INT, B, tag, w, MPI_STATUS_IGNORE);
            check_tok(t, p->tok, "token");
        }
        break;
    case K_SEND:
        if (role == ROLE_B) {
            for (int i = 0; i < NBIG; i++) {
                p->big[i] = ival(B, (size_t)i, p->seed + 1);
            }
            MPI_Send(p->big, NBIG, MPI_INT, L, tag, w);
        } else if (role == ROLE_L) {
            memset(p->big, 0, NBIG * sizeof(int));
            MPI_Recv(p->big, NBIG, MPI_INT, B, tag, w, MPI_STATUS_IGNORE);
            long bad = 0, first = -1;
            for (int i = 0; i < NBIG; i++) {
                if (p->big[i] != ival(B, (size_t)i, p->seed + 1) && bad++ == 0) {
                    first = i;
                }
            }
            tu_check(bad == 0, sc_phase(), "1 MiB message: %ld ints wrong, "
                     "the first at %ld", bad, first);
        }
        break;
    case K_SENDRECV:
        if (role == ROLE_B) {
            MPI_Sendrecv(&p->tok, 1, MPI_INT, L, tag, &t, 1, MPI_INT, L,
                         tag + 1, w, MPI_STATUS_IGNORE);
            check_tok(t, -p->tok, "token from L");
        } else if (role == ROLE_L) {
            const int mine = -p->tok;
            MPI_Sendrecv(&mine, 1, MPI_INT, B, tag + 1, &t, 1, MPI_INT, B, tag,
                         w, MPI_STATUS_IGNORE);
            check_tok(t, p->tok, "token from B");
        }
        break;
    case K_SENDRECV_REPLACE:
        if (role == ROLE_B) {
            t = p->tok;
            MPI_Sendrecv_replace(&t, 1, MPI_INT, L, tag, L, tag + 1, w,
                                 MPI_STATUS_IGNORE);
            check_tok(t, -p->tok, "token from L");
        } else if (role == ROLE_L) {
            t = -p->tok;
            MPI_Sendrecv_replace(&t, 1, MPI_INT, B, tag + 1, B, tag, w,
                                 MPI_STATUS_IGNORE);
            check_tok(t, p->tok, "token from B");
        }
        break;
    case K_PROBE:
    case K_IPROBE:
    case K_MPROBE:
    case K_IMPROBE:
        if (role == ROLE_B) {
            MPI_Message msg = MPI_MESSAGE_NULL;
            int flag = 0, n = -1;
            if (p->kind == K_PROBE) {
                MPI_Probe(L, tag, w, &st);
            } else if (p->kind == K_MPROBE) {
                MPI_Mprobe(L, tag, w, &msg, &st);
            } else {
                while (!flag) {
                    if (p->kind == K_IPROBE) {
                        MPI_Iprobe(L, tag, w, &flag, &st);
                    } else {
                        MPI_Improbe(L, tag, w, &flag, &msg, &st);
                    }
                }
            }
            MPI_Get_count(&st, MPI_INT, &n);
            check_tok(n, 2, "probed count");
            check_tok(st.MPI_SOURCE, L, "probed source");
            if (p->kind == K_PROBE || p->kind == K_IPROBE) {
                MPI_Recv(t2, 2, MPI_INT, L, tag, w, MPI_STATUS_IGNORE);
            } else {
                MPI_Mrecv(t2, 2, MPI_INT, &msg, MPI_STATUS_IGNORE);
            }
            check_tok(t2[0], tok2[0], "token");
            check_tok(t2[1], tok2[1], "token");
        } else if (role == ROLE_L) {
            MPI_Send(tok2, 2, MPI_INT, B, tag, w);
        }
        break;
    case K_BARRIER:
        MPI_Barrier(w);
        break;
    case K_PMPI_BARRIER:
        if (role == ROLE_B) {
            PMPI_Barrier(w);
        } else {
            MPI_Barrier(w);
        }
        break;
    case K_BCAST: {
        int buf[4] = { -1, -1, -1, -1 };
        if (rank == L) {
            for (int i = 0; i < 4; i++) {
                buf[i] = p->tok + i;
            }
        }
        MPI_Bcast(buf, 4, MPI_INT, L, w);
        for (int i = 0; i < 4; i++) {
            check_tok(buf[i], p->tok + i, "broadcast value");
        }
        break;
    }
    case K_ALLREDUCE: {
        int in[3] = { rank + 1, p->tok, rank * rank }, out[3] = { 0, 0, 0 };
        MPI_Allreduce(in, out, 3, MPI_INT, MPI_SUM, w);
        int want2 = 0;
        for (int r = 0; r < size; r++) {
            want2 += r * r;
        }
        check_tok(out[0], size * (size + 1) / 2, "allreduce sum");
        check_tok(out[1], size * p->tok, "allreduce sum");
        check_tok(out[2], want2, "allreduce sum");
        break;
    }
    case K_REDUCE: {
        int in[2] = { rank + 1, p->tok }, out[2] = { -1, -1 };
        MPI_Reduce(in, out, 2, MPI_INT, MPI_SUM, B, w);
        if (rank == B) {
            check_tok(out[0], size * (size + 1) / 2, "reduce sum");
            check_tok(out[1], size * p->tok, "reduce sum");
        }
        break;
    }
    case K_GATHER: {
        int in[2] = { rank, p->tok + rank };
        int *out = malloc(2 * (size_t)size * sizeof(int));
        MPI_Gather(in, 2, MPI_INT, out, 2, MPI_INT, B, w);
        if (rank == B) {
            for (int r = 0; r < size; r++) {
                check_tok(out[2 * r], r, "gathered rank");
                check_tok(out[2 * r + 1], p->tok + r, "gathered value");
            }
        }
        free(out);
        break;
    }
    case K_SCAN: {
        int in[2] = { rank + 1, p->tok }, out[2] = { -1, -1 };
        MPI_Scan(in, out, 2, MPI_INT, MPI_SUM, w);
        check_tok(out[0], (rank + 1) * (rank + 2) / 2, "prefix sum");
        check_tok(out[1], (rank + 1) * p->tok, "prefix sum");
        break;
    }
    case K_ALLTOALL: {
        int *in = malloc((size_t)size * sizeof(int));
        int *out = malloc((size_t)size * sizeof(int));
        for (int j = 0; j < size; j++) {
            in[j] = p->tok + 100 * rank + j;
            out[j] = -1;
        }
        MPI_Alltoall(in, 1, MPI_INT, out, 1, MPI_INT, w);
        for (int q = 0; q < size; q++) {
            check_tok(out[q], p->tok + 100 * q + rank, "alltoall value");
        }
        free(in);
        free(out);
        break;
    }
    case K_COMM_DUP:
        MPI_Comm_dup(w, &p->comm);
        break;
    case K_COMM_SPLIT:
        MPI_Comm_split(w, 0, size - rank, &p->comm);
        break;
    case K_COMM_CREATE: {
        MPI_Group wg, g;
        const int members[2] = { B, L };
        MPI_Comm_group(w, &wg);
        MPI_Group_incl(wg, 2, members, &g);
        MPI_Comm_create(w, g, &p->comm);
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
        break;
    }
    case K_WIN_CREATE:
        MPI_Win_create(p->wbuf, (MPI_Aint)sizeof(p->wbuf), (int)sizeof(int),
                       MPI_INFO_NULL, w, &p->win);
        break;
    case K_WIN_FENCE:
        MPI_Win_fence(0, p->win);
        break;
    case K_WIN_LOCK:
        if (role == ROLE_B) {
            int got[2] = { 0, 0 }, flag = 0;
            for (;;) {
                MPI_Win_lock(MPI_LOCK_SHARED, L, 0, p->win);
                MPI_Get(got, 2, MPI_INT, L, 0, 2, MPI_INT, p->win);
                MPI_Win_unlock(L, p->win);
                if (got[0] == 1) {
                    break;
                }
                MPI_Iprobe(MPI_ANY_SOURCE, TAG_NEVER, w, &flag,
                           MPI_STATUS_IGNORE);
            }
            check_tok(got[1], p->tok, "value read from L's window");
            MPI_Send(NULL, 0, MPI_INT, L, tag, w);
        } else if (role == ROLE_L) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, L, 0, p->win);
            p->wbuf[1] = p->tok;
            p->wbuf[0] = 1;
            MPI_Win_unlock(L, p->win);
            MPI_Recv(NULL, 0, MPI_INT, B, tag, w, MPI_STATUS_IGNORE);
        }
        break;
    case K_FILE_OPEN:
        snprintf(p->path, sizeof(p->path), "%s/collar-sem-%d-%d", file_dir,
                 file_job, tag);
        tu_check_rc(MPI_File_open(w, p->path, MPI_MODE_CREATE | MPI_MODE_RDWR
                                  | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                                  &p->fh), "MPI_File_open");
        break;
    case K_THREAD_RECV:
    case K_THREAD_WAIT:
        if (role == ROLE_B) {
            thread_arg_t a = { p, -1, -1 };
            pthread_t th;
            pthread_create(&th, NULL, p->kind == K_THREAD_RECV
                           ? thread_recv_main : thread_wait_main, &a);
            int rc;
            if (p->kind == K_THREAD_RECV) {
                rc = MPI_Wait(p->req, MPI_STATUS_IGNORE);
            } else {
                rc = MPI_Recv(&a.got, 1, MPI_INT, L, tag, w, MPI_STATUS_IGNORE);
            }
            pthread_join(th, NULL);
            tu_check_rc(rc, sc_phase());
            tu_check_rc(a.rc, sc_phase());
            check_tok(a.got, p->tok, "token");
        } else if (role == ROLE_L) {
            MPI_Send(&p->tok, 1, MPI_INT, B, tag, w);
        }
        break;
    }
}

/* What follows the call on every rank, with the collective complete. */
static void tail(phase_t *p)
{
    const MPI_Comm w = MPI_COMM_WORLD;
    switch (p->kind) {
    case K_COMM_DUP:
    case K_COMM_SPLIT:
    case K_COMM_CREATE: {
        if (p->kind == K_COMM_CREATE && rank != p->B && rank != p->L) {
            tu_check(p->comm == MPI_COMM_NULL, sc_phase(),
                     "a rank outside the group got a communicator");
            break;
        }
        int nr = -1, ns = -1, cmp = -1;
        MPI_Comm_rank(p->comm, &nr);
        MPI_Comm_size(p->comm, &ns);
        if (p->kind == K_COMM_DUP) {
            MPI_Comm_compare(w, p->comm, &cmp);
            check_tok(cmp, MPI_CONGRUENT, "MPI_Comm_compare");
            check_tok(nr, rank, "rank in the duplicate");
        } else if (p->kind == K_COMM_SPLIT) {
            check_tok(ns, size, "size of the split");
            check_tok(nr, size - 1 - rank, "rank in the split");
        } else {
            check_tok(ns, 2, "size of the new communicator");
            check_tok(nr, rank == p->B ? 0 : 1, "rank in the new communicator");
        }
        MPI_Comm_free(&p->comm);
        break;
    }
    case K_WIN_CREATE:
    case K_WIN_FENCE: {
        if (p->kind == K_WIN_CREATE) {
            MPI_Win_fence(0, p->win);
        }
        const int val = p->tok + rank;
        MPI_Put(&val, 1, MPI_INT, (rank + 1) % size, 0, 1, MPI_INT, p->win);
        MPI_Win_fence(0, p->win);
        const int from = (rank + size - 1) % size;
        check_tok(p->wbuf[0], p->tok + from, "value put into the window");
        MPI_Win_free(&p->win);
        break;
    }
    case K_WIN_LOCK:
        MPI_Win_free(&p->win);
        break;
    case K_FILE_OPEN: {
        int mine[2] = { p->tok, rank }, *all;
        all = malloc(2 * (size_t)size * sizeof(int));
        for (int i = 0; i < 2 * size; i++) {
            all[i] = -1;
        }
        MPI_File_write_at_all(p->fh, (MPI_Offset)(2 * rank * (int)sizeof(int)),
                              mine, 2, MPI_INT, MPI_STATUS_IGNORE);
        MPI_File_sync(p->fh);
        MPI_Barrier(w);
        MPI_File_sync(p->fh);
        MPI_File_read_at_all(p->fh, 0, all, 2 * size, MPI_INT,
                             MPI_STATUS_IGNORE);
        for (int r = 0; r < size; r++) {
            check_tok(all[2 * r], p->tok, "value read from the file");
            check_tok(all[2 * r + 1], r, "value read from the file");
        }
        free(all);
        MPI_File_close(&p->fh);
        break;
    }
    default:
        break;
    }
}

static void run_phase(int kind, int coll, int B, int L, int phase, int *big)
{
    phase_t p;
    memset(&p, 0, sizeof(p));
    p.kind = kind;
    p.B = B;
    p.L = L;
    p.role = rank == B ? ROLE_B : rank == L ? ROLE_L : ROLE_OTHER;
    p.tag = 1 + 2 * (phase % 16000);
    p.tok = 1000 + phase;
    p.seed = tu_seed(tu_seed_str(7, cases[kind].name), (uint64_t)coll,
                     (uint64_t)phase);
    p.big = big;
    p.comm = MPI_COMM_NULL;
    p.win = MPI_WIN_NULL;
    for (int i = 0; i < 8; i++) {
        p.wbuf[i] = kind == K_WIN_LOCK ? 0 : -1;
    }
    sc_phase_begin("%s/%s/%s", cases[kind].name, coll_names[coll],
                    B == 0 ? "fwd" : "rev");
    if (rank == 0 && getenv("SEM_VERBOSE") != NULL) {
        printf("phase %d: %s\n", phase, sc_phase());
        fflush(stdout);
    }
    /* Windows that must exist before the collective starts (collective
     * over MPI_COMM_WORLD, the same order on every rank). */
    if (kind == K_WIN_FENCE || kind == K_WIN_LOCK) {
        MPI_Win_create(p.wbuf, (MPI_Aint)sizeof(p.wbuf), (int)sizeof(int),
                       MPI_INFO_NULL, MPI_COMM_WORLD, &p.win);
    }
    MPI_Request req = MPI_REQUEST_NULL;
    p.req = &req;
    const int root = B; /* the broadcast's: B's data is what L waits for */
    if (!tu_check_rc(start_coll(coll, root, p.seed, phase, &req), sc_phase())) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (p.role != ROLE_B) {
        wait_coll(&req, sc_phase());
    }
    head(&p);
    if (p.role == ROLE_B) {
        wait_coll(&req, sc_phase());
    }
    tail(&p);
    check_coll(coll, root, p.seed, phase);
    sc_sync(MPI_COMM_WORLD);
    sc_phase_end();
}

/* The collectives' names without the leading "i" select them too. */
static int coll_selected(const char *list, int c)
{
    return sc_list_has(list, coll_names[c]) || sc_list_has(list, coll_names[c] + 1);
}

int main(int argc, char **argv)
{
    const int asked = sc_init(&argc, &argv, "sem_progress");
    rank = tu_world_rank();
    size = tu_world_size();
    if (size < 2) {
        tu_skip("needs at least 2 ranks");
    }
    const char *case_list = sc_arg(argc, argv, "--cases", "all");
    const char *coll_list = sc_arg(argc, argv, "--colls", "all");
    const char *dir_list = sc_arg(argc, argv, "--dirs", "fwd,rev");
    count = atoi(sc_arg(argc, argv, "--count", "65536"));
    if (count < 8) {
        count = 8;
    }
    blk = count / 8;

    s_bytes = (size_t)count * sizeof(float);
    if ((size_t)size * blk * sizeof(int) > s_bytes) {
        s_bytes = (size_t)size * blk * sizeof(int);
    }
    r_bytes = s_bytes;
    if ((size_t)size * blk * sizeof(double) > r_bytes) {
        r_bytes = (size_t)size * blk * sizeof(double);
    }
    s_host = malloc(s_bytes);
    r_host = malloc(r_bytes);
    int *big = malloc(NBIG * sizeof(int));
    if (s_host == NULL || r_host == NULL || big == NULL) {
        tu_fail("malloc", "%zu + %zu bytes", s_bytes, r_bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(s_host, 0, s_bytes);
    s_dev = tu_dev_mirror(s_host, s_bytes);
    r_dev = tu_dev_mirror(r_host, r_bytes);

    /* file_open's files: one name per phase, in TMPDIR (or /tmp), made
     * unique by rank 0's process id. */
    const char *tmp = getenv("TMPDIR");
    snprintf(file_dir, sizeof(file_dir), "%s", tmp != NULL && *tmp ? tmp : "/tmp");
    file_job = (int)getpid();
    MPI_Bcast(&file_job, 1, MPI_INT, 0, MPI_COMM_WORLD);

    char skipped[512] = "";
    int phase = 0;
    for (int kind = 0; kind < NCASES; kind++) {
        if (!sc_list_has(case_list, cases[kind].name)) {
            continue;
        }
        const char *why = NULL;
        if ((cases[kind].need & NEED_MPI4) && MPI_VERSION < 4) {
            why = "no large-count bindings (MPI_VERSION < 4)";
        } else if ((cases[kind].need & NEED_THREADS) && asked != MPI_THREAD_MULTIPLE) {
            why = "not asked for MPI_THREAD_MULTIPLE";
        }
        if (why != NULL) {
            size_t len = strlen(skipped);
            snprintf(skipped + len, sizeof(skipped) - len, "%s%s: %s",
                     len ? "; " : "", cases[kind].name, why);
            continue;
        }
        for (int dir = 0; dir < 2; dir++) {
            if (!sc_list_has(dir_list, dir == 0 ? "fwd" : "rev")) {
                continue;
            }
            for (int coll = 0; coll < NCOLLS; coll++) {
                if (!coll_selected(coll_list, coll)) {
                    continue;
                }
                run_phase(kind, coll, dir == 0 ? 0 : 1, dir == 0 ? 1 : 0,
                          phase++, big);
            }
        }
    }
    if (rank == 0) {
        if (skipped[0] != '\0') {
            printf("note: left out: %s\n", skipped);
        }
        printf("sem_progress: %d phases, %d ranks, thread level %s\n", phase,
               size, asked == MPI_THREAD_MULTIPLE ? "multiple" : "single");
        fflush(stdout);
    }
    tu_dev_unmirror(s_dev, s_host);
    tu_dev_unmirror(r_dev, r_host);
    free(s_host);
    free(r_host);
    free(big);
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
