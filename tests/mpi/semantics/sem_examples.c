/*
 * The MPI standard's own examples of nonblocking collectives and progress,
 * as tests: each valid example of MPI-4.1 written out with real buffers,
 * its results checked on every rank (ints, bit-exact).  Where an example
 * uses MPI_Ibarrier (which carries no data, and which a layer such as
 * collar leaves to the MPI library), it runs a second time with
 * MPI_Iallreduce of device buffers in its place; the point-to-point
 * examples run with a nonblocking collective of device buffers outstanding
 * around them.  With TU_DEVICE=cuda the collectives' buffers are device
 * memory; point-to-point buffers stay host memory.
 *
 * MPI-4.1 section 6.14 ("Correctness"), the valid examples in the order
 * the section gives them (they are identified here by the sentence that
 * introduces each one):
 *   interleave   "Blocking and nonblocking collective operations can be
 *                interleaved, i.e., a blocking collective operation can be
 *                posted even if there is a nonblocking collective operation
 *                outstanding": MPI_Ibarrier, MPI_Bcast, MPI_Wait
 *   dupcomm      "... if such an order is required, the user must create
 *                different duplicate communicators ... the following
 *                program would be correct": rank 0 MPI_Ibarrier(comm) then
 *                MPI_Bcast(dupcomm), rank 1 the other way round (here: even
 *                and odd ranks)
 *   progress     "Nonblocking collective operations can rely on the similar
 *                progress rules as nonblocking point-to-point operations":
 *                rank 0 MPI_Ibarrier, MPI_Wait, MPI_Send; rank 1
 *                MPI_Ibarrier, MPI_Recv, MPI_Wait.  "The MPI library must
 *                progress the barrier in the MPI_Recv call."
 *   mixed        "Collective and point-to-point requests can be mixed in
 *                functions that enable multiple completions": rank 0
 *                MPI_Ibarrier, MPI_Send, MPI_Wait; rank 1 MPI_Irecv,
 *                MPI_Ibarrier, MPI_Waitall
 *   pipeline     "Multiple nonblocking collective operations can be
 *                outstanding on a single communicator and match in order":
 *                three MPI_Ibcast, each after its buffer is computed, one
 *                MPI_Waitall
 *   overlap      "Nonblocking collective operations can also be used to
 *                enable simultaneous collective operations on multiple
 *                overlapping communicators": three ranks, comm1 = {0,1},
 *                comm2 = {1,2}, comm3 = {0,2}, two MPI_Iallreduce per rank
 *                in the example's order, MPI_Waitall (needs 3 ranks; ranks
 *                above 2 take no part)
 *   independent  "The progress of multiple outstanding nonblocking
 *                collective operations is completely independent": two
 *                MPI_Ibcast, MPI_Wait on the second, then on the first
 *   nondet       the "unsafe, nondeterministic" example before them, which
 *                is still valid (it terminates; only the matching order of
 *                rank 1's two wildcard receives is not determined): rank 0
 *                MPI_Bcast then MPI_Send to 1; rank 1 MPI_Recv(ANY_SOURCE),
 *                MPI_Bcast, MPI_Recv(ANY_SOURCE); rank 2 MPI_Send to 1 then
 *                MPI_Bcast.  Checked: rank 1 got one message from each of
 *                ranks 0 and 2 (needs 3 ranks)
 * MPI-4.1 section 3.7.4 ("Semantics of Nonblocking Communication
 * Operations"), the example "An illustration of progress semantics"
 * (Fortran there):
 *   p2p_progress rank 0 MPI_Ssend(a, tag 0), MPI_Send(b, tag 1); rank 1
 *                MPI_Irecv(a, tag 0), MPI_Recv(b, tag 1), MPI_Wait: "the
 *                first synchronous send must complete once the matching
 *                (nonblocking) receive is started, even though the
 *                completing wait call has not yet been reached".  Run
 *                alone, then inside an MPI_Ibcast and inside an
 *                MPI_Iallreduce of device buffers started before it and
 *                waited for after it on every rank.
 * MPI-4.1 section 3.5 ("Semantics of Point-to-Point Communication",
 * "Progress"), the example of two intertwined matching pairs:
 *   intertwined  rank 0 MPI_Bsend(buf1, tag1), MPI_Ssend(buf2, tag2);
 *                rank 1 MPI_Recv(tag2), MPI_Recv(tag1): the buffered send
 *                completes at once, then the synchronous pair is enabled.
 *                Alone and inside an MPI_Iallreduce of device buffers.
 *
 * Usage: sem_examples [--thread single|multiple] [--examples LIST]
 *                     [--count N] [--reps R]
 *   N: elements of the collectives (default 65536), R: repetitions of each
 *   example with new values (default 3).
 */
#include "config.h"
#include "semutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, count, rep;

static int value(int r, long i, int salt)
{
    return (r + 1) * 1000 + (int)((i * 7 + salt) % 9973);
}

/* A device buffer (the host buffer's mirror under TU_DEVICE=cuda). */
typedef struct {
    int *h, *d;
    long n;
} dbuf_t;

static void dbuf_new(dbuf_t *b, long n)
{
    b->n = n;
    b->h = malloc((size_t)n * sizeof(int));
    if (b->h == NULL) {
        tu_fail("malloc", "%ld ints", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(b->h, 0, (size_t)n * sizeof(int));
    b->d = tu_dev_mirror(b->h, (size_t)n * sizeof(int));
}

static void dbuf_free(dbuf_t *b)
{
    tu_dev_unmirror(b->d, b->h);
    free(b->h);
}

/* Fill with rank r's values (or -1 everywhere: r < 0) and put. */
static void dbuf_fill(dbuf_t *b, int r, int salt)
{
    for (long i = 0; i < b->n; i++) {
        b->h[i] = r < 0 ? -1 : value(r, i, salt);
    }
    tu_dev_put(b->d, b->h, (size_t)b->n * sizeof(int));
}

/* Every element must be rank r's value. */
static void dbuf_check_value(dbuf_t *b, int r, int salt, const char *what)
{
    tu_dev_get(b->h, b->d, (size_t)b->n * sizeof(int));
    long bad = 0, first = -1;
    for (long i = 0; i < b->n; i++) {
        if (b->h[i] != value(r, i, salt) && bad++ == 0) {
            first = i;
        }
    }
    tu_check(bad == 0, what, "%ld of %ld elements wrong, the first at %ld",
             bad, b->n, first);
}

/* Every element must be the sum over the world ranks in `members`. */
static void dbuf_check_sum(dbuf_t *b, const int *members, int nm, int salt,
                           const char *what)
{
    tu_dev_get(b->h, b->d, (size_t)b->n * sizeof(int));
    long bad = 0, first = -1;
    for (long i = 0; i < b->n; i++) {
        long long want = 0;
        for (int m = 0; m < nm; m++) {
            want += value(members[m], i, salt);
        }
        if (b->h[i] != want && bad++ == 0) {
            first = i;
        }
    }
    tu_check(bad == 0, what, "%ld of %ld elements wrong, the first at %ld",
             bad, b->n, first);
}

static int *world_members(void)
{
    static int m[1024];
    for (int r = 0; r < size && r < 1024; r++) {
        m[r] = r;
    }
    return m;
}

/* "The nonblocking collective" of the examples that have MPI_Ibarrier:
 * the barrier itself (with = 0) or an MPI_Iallreduce of `b` (with = 1). */
static void nbc_start(int with, dbuf_t *b, int salt, MPI_Comm comm,
                      MPI_Request *req)
{
    if (with == 0) {
        MPI_Ibarrier(comm, req);
    } else {
        dbuf_fill(b, rank, salt);
        MPI_Iallreduce(MPI_IN_PLACE, b->d, (int)b->n, MPI_INT, MPI_SUM, comm, req);
    }
}

static void nbc_check(int with, dbuf_t *b, int salt, const char *what)
{
    if (with == 1) {
        dbuf_check_sum(b, world_members(), size, salt, what);
    }
}

static const char *const with_names[2] = { "MPI_Ibarrier", "MPI_Iallreduce" };

/* Point-to-point message of the examples: host memory. */
static void msg_fill(int *m, int n, int salt)
{
    for (int i = 0; i < n; i++) {
        m[i] = salt * 31 + i;
    }
}

static void msg_check(const int *m, int n, int salt, const char *what)
{
    long bad = 0;
    for (int i = 0; i < n; i++) {
        bad += m[i] != salt * 31 + i;
    }
    tu_check(bad == 0, what, "%ld of %d ints of the message wrong", bad, n);
}

#define MSG 4096

/* ---- section 6.14 ------------------------------------------------------- */

static void ex_interleave(int salt)
{
    for (int with = 0; with < 2; with++) {
        sc_phase_begin("interleave/%s/rep %d", with_names[with], rep);
        dbuf_t nb, buf1;
        dbuf_new(&nb, count);
        dbuf_new(&buf1, count);
        MPI_Request req;
        nbc_start(with, &nb, salt, MPI_COMM_WORLD, &req);
        dbuf_fill(&buf1, rank == 0 ? 0 : -1, salt + 1);
        MPI_Bcast(buf1.d, count, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        dbuf_check_value(&buf1, 0, salt + 1, sc_phase());
        nbc_check(with, &nb, salt, sc_phase());
        dbuf_free(&nb);
        dbuf_free(&buf1);
        sc_sync(MPI_COMM_WORLD);
        sc_phase_end();
    }
}

static void ex_dupcomm(int salt)
{
    for (int with = 0; with < 2; with++) {
        sc_phase_begin("dupcomm/%s/rep %d", with_names[with], rep);
        MPI_Comm dupcomm;
        MPI_Comm_dup(MPI_COMM_WORLD, &dupcomm);
        dbuf_t nb, buf1;
        dbuf_new(&nb, count);
        dbuf_new(&buf1, count);
        dbuf_fill(&buf1, rank == 0 ? 0 : -1, salt + 1);
        MPI_Request req;
        if (rank % 2 == 0) {
            nbc_start(with, &nb, salt, MPI_COMM_WORLD, &req);
            MPI_Bcast(buf1.d, count, MPI_INT, 0, dupcomm);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Bcast(buf1.d, count, MPI_INT, 0, dupcomm);
            nbc_start(with, &nb, salt, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        dbuf_check_value(&buf1, 0, salt + 1, sc_phase());
        nbc_check(with, &nb, salt, sc_phase());
        dbuf_free(&nb);
        dbuf_free(&buf1);
        MPI_Comm_free(&dupcomm);
        sc_sync(MPI_COMM_WORLD);
        sc_phase_end();
    }
}

static void ex_progress(int salt)
{
    for (int with = 0; with < 2; with++) {
        sc_phase_begin("progress/%s/rep %d", with_names[with], rep);
        dbuf_t nb;
        dbuf_new(&nb, count);
        int buf[MSG];
        MPI_Request req;
        switch (rank) {
        case 0:
            nbc_start(with, &nb, salt, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            msg_fill(buf, MSG, salt);
            MPI_Send(buf, MSG, MPI_INT, 1, 11, MPI_COMM_WORLD);
            break;
        case 1:
            nbc_start(with, &nb, salt, MPI_COMM_WORLD, &req);
            MPI_Recv(buf, MSG, MPI_INT, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            msg_check(buf, MSG, salt, sc_phase());
            break;
        default:
            nbc_start(with, &nb, salt, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            break;
        }
        nbc_check(with, &nb, salt, sc_phase());
        dbuf_free(&nb);
        sc_sync(MPI_COMM_WORLD);
        sc_phase_end();
    }
}

static void ex_mixed(int salt)
{
    for (int with = 0; with < 2; with++) {
        sc_phase_begin("mixed/%s/rep %d", with_names[with], rep);
        dbuf_t nb;
        dbuf_new(&nb, count);
        int buf[MSG];
        MPI_Request reqs[2];
        switch (rank) {
        case 0:
            nbc_start(with, &nb, salt, MPI_COMM_WORLD, &reqs[0]);
            msg_fill(buf, MSG, salt);
            MPI_Send(buf, MSG, MPI_INT, 1, 12, MPI_COMM_WORLD);
            MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
            break;
        case 1:
            MPI_Irecv(buf, MSG, MPI_INT, 0, 12, MPI_COMM_WORLD, &reqs[0]);
            nbc_start(with, &nb, salt, MPI_COMM_WORLD, &reqs[1]);
            MPI_Waitall(2, reqs, tu_statuses_ignore());
            msg_check(buf, MSG, salt, sc_phase());
            break;
        default:
            nbc_start(with, &nb, salt, MPI_COMM_WORLD, &reqs[0]);
            MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
            break;
        }
        nbc_check(with, &nb, salt, sc_phase());
        dbuf_free(&nb);
        sc_sync(MPI_COMM_WORLD);
        sc_phase_end();
    }
}

static void ex_pipeline(int salt)
{
    sc_phase_begin("pipeline/rep %d", rep);
    dbuf_t b[3];
    MPI_Request reqs[3];
    for (int k = 0; k < 3; k++) {
        dbuf_new(&b[k], count);
    }
    for (int k = 0; k < 3; k++) {
        /* compute(buf_k): the root's data; the others' buffers get -1 */
        dbuf_fill(&b[k], rank == 0 ? 0 : -1, salt + k);
        MPI_Ibcast(b[k].d, count, MPI_INT, 0, MPI_COMM_WORLD, &reqs[k]);
    }
    MPI_Waitall(3, reqs, tu_statuses_ignore());
    for (int k = 0; k < 3; k++) {
        dbuf_check_value(&b[k], 0, salt + k, sc_phase());
        dbuf_free(&b[k]);
    }
    sc_sync(MPI_COMM_WORLD);
    sc_phase_end();
}

/* comm1 = {0,1}, comm2 = {1,2}, comm3 = {0,2}: made with MPI_Comm_split in
 * the same order on every rank. */
static MPI_Comm pair_comm(int a, int b)
{
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, rank == a || rank == b ? 0 : MPI_UNDEFINED,
                   rank, &c);
    return c;
}

static void ex_overlap(int salt)
{
    if (size < 3) {
        return;
    }
    sc_phase_begin("overlap/rep %d", rep);
    MPI_Comm comm1 = pair_comm(0, 1), comm2 = pair_comm(1, 2),
             comm3 = pair_comm(0, 2);
    dbuf_t b1, b2, b3; /* sbuf/rbuf of each: in place */
    dbuf_new(&b1, count);
    dbuf_new(&b2, count);
    dbuf_new(&b3, count);
    MPI_Request reqs[2] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL };
    const int m1[2] = { 0, 1 }, m2[2] = { 1, 2 }, m3[2] = { 0, 2 };
    switch (rank) {
    case 0:
        dbuf_fill(&b1, rank, salt + 1);
        dbuf_fill(&b3, rank, salt + 3);
        MPI_Iallreduce(MPI_IN_PLACE, b1.d, count, MPI_INT, MPI_SUM, comm1, &reqs[0]);
        MPI_Iallreduce(MPI_IN_PLACE, b3.d, count, MPI_INT, MPI_SUM, comm3, &reqs[1]);
        break;
    case 1:
        dbuf_fill(&b1, rank, salt + 1);
        dbuf_fill(&b2, rank, salt + 2);
        MPI_Iallreduce(MPI_IN_PLACE, b1.d, count, MPI_INT, MPI_SUM, comm1, &reqs[0]);
        MPI_Iallreduce(MPI_IN_PLACE, b2.d, count, MPI_INT, MPI_SUM, comm2, &reqs[1]);
        break;
    case 2:
        dbuf_fill(&b2, rank, salt + 2);
        dbuf_fill(&b3, rank, salt + 3);
        MPI_Iallreduce(MPI_IN_PLACE, b2.d, count, MPI_INT, MPI_SUM, comm2, &reqs[0]);
        MPI_Iallreduce(MPI_IN_PLACE, b3.d, count, MPI_INT, MPI_SUM, comm3, &reqs[1]);
        break;
    default:
        break;
    }
    MPI_Waitall(2, reqs, tu_statuses_ignore());
    if (rank == 0 || rank == 1) {
        dbuf_check_sum(&b1, m1, 2, salt + 1, "overlap comm1");
    }
    if (rank == 1 || rank == 2) {
        dbuf_check_sum(&b2, m2, 2, salt + 2, "overlap comm2");
    }
    if (rank == 0 || rank == 2) {
        dbuf_check_sum(&b3, m3, 2, salt + 3, "overlap comm3");
    }
    dbuf_free(&b1);
    dbuf_free(&b2);
    dbuf_free(&b3);
    MPI_Comm *cs[3] = { &comm1, &comm2, &comm3 };
    for (int k = 0; k < 3; k++) {
        if (*cs[k] != MPI_COMM_NULL) {
            MPI_Comm_free(cs[k]);
        }
    }
    sc_sync(MPI_COMM_WORLD);
    sc_phase_end();
}

static void ex_independent(int salt)
{
    sc_phase_begin("independent/rep %d", rep);
    dbuf_t b1, b2;
    dbuf_new(&b1, count);
    dbuf_new(&b2, count);
    MPI_Request reqs[2];
    dbuf_fill(&b1, rank == 0 ? 0 : -1, salt + 1);
    MPI_Ibcast(b1.d, count, MPI_INT, 0, MPI_COMM_WORLD, &reqs[0]);
    dbuf_fill(&b2, rank == 0 ? 0 : -1, salt + 2);
    MPI_Ibcast(b2.d, count, MPI_INT, 0, MPI_COMM_WORLD, &reqs[1]);
    MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
    /* nothing is known about the status of the first bcast here */
    MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
    dbuf_check_value(&b1, 0, salt + 1, sc_phase());
    dbuf_check_value(&b2, 0, salt + 2, sc_phase());
    dbuf_free(&b1);
    dbuf_free(&b2);
    sc_sync(MPI_COMM_WORLD);
    sc_phase_end();
}

static void ex_nondet(int salt)
{
    if (size < 3) {
        return;
    }
    sc_phase_begin("nondet/rep %d", rep);
    dbuf_t buf1;
    dbuf_new(&buf1, count);
    dbuf_fill(&buf1, rank == 0 ? 0 : -1, salt);
    int buf2[2] = { rank, salt };
    const int tag = 13;
    MPI_Status st;
    switch (rank) {
    case 0:
        MPI_Bcast(buf1.d, count, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Send(buf2, 2, MPI_INT, 1, tag, MPI_COMM_WORLD);
        break;
    case 1: {
        int got[2][2];
        MPI_Recv(got[0], 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
        tu_check(st.MPI_SOURCE == got[0][0], sc_phase(), "first message: "
                 "source %d, it says %d", st.MPI_SOURCE, got[0][0]);
        MPI_Bcast(buf1.d, count, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Recv(got[1], 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
        tu_check(st.MPI_SOURCE == got[1][0], sc_phase(), "second message: "
                 "source %d, it says %d", st.MPI_SOURCE, got[1][0]);
        tu_check(got[0][0] + got[1][0] == 2 && got[0][0] != got[1][0],
                 sc_phase(), "messages from ranks %d and %d, want 0 and 2",
                 got[0][0], got[1][0]);
        tu_check(got[0][1] == salt && got[1][1] == salt, sc_phase(),
                 "message values %d %d, want %d", got[0][1], got[1][1], salt);
        break;
    }
    case 2:
        MPI_Send(buf2, 2, MPI_INT, 1, tag, MPI_COMM_WORLD);
        MPI_Bcast(buf1.d, count, MPI_INT, 0, MPI_COMM_WORLD);
        break;
    default:
        MPI_Bcast(buf1.d, count, MPI_INT, 0, MPI_COMM_WORLD);
        break;
    }
    dbuf_check_value(&buf1, 0, salt, sc_phase());
    dbuf_free(&buf1);
    sc_sync(MPI_COMM_WORLD);
    sc_phase_end();
}

/* ---- sections 3.7.4 and 3.5 -------------------------------------------- */

/* Around the point-to-point examples: nothing (0), an MPI_Ibcast (1) or
 * an MPI_Iallreduce (2) of device buffers, started before and waited for
 * after on every rank. */
static const char *const around_names[3] = { "alone", "in MPI_Ibcast",
                                              "in MPI_Iallreduce" };

static void around_start(int around, dbuf_t *b, int salt, MPI_Request *req)
{
    *req = MPI_REQUEST_NULL;
    if (around == 1) {
        dbuf_fill(b, rank == 0 ? 0 : -1, salt);
        MPI_Ibcast(b->d, (int)b->n, MPI_INT, 0, MPI_COMM_WORLD, req);
    } else if (around == 2) {
        dbuf_fill(b, rank, salt);
        MPI_Iallreduce(MPI_IN_PLACE, b->d, (int)b->n, MPI_INT, MPI_SUM,
                       MPI_COMM_WORLD, req);
    }
}

static void around_finish(int around, dbuf_t *b, int salt, MPI_Request *req)
{
    MPI_Wait(req, MPI_STATUS_IGNORE);
    if (around == 1) {
        dbuf_check_value(b, 0, salt, sc_phase());
    } else if (around == 2) {
        dbuf_check_sum(b, world_members(), size, salt, sc_phase());
    }
}

static void ex_p2p_progress(int salt)
{
    for (int around = 0; around < 3; around++) {
        sc_phase_begin("p2p_progress/%s/rep %d", around_names[around], rep);
        dbuf_t nb;
        dbuf_new(&nb, count);
        MPI_Request nbreq;
        around_start(around, &nb, salt, &nbreq);
        int a = 0, b = 0;
        if (rank == 0) {
            a = salt;
            b = salt + 1;
            MPI_Ssend(&a, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Send(&b, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
        } else if (rank == 1) {
            MPI_Request r;
            MPI_Irecv(&a, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &r);
            MPI_Recv(&b, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            tu_check(a == salt && b == salt + 1, sc_phase(),
                     "got %d %d, want %d %d", a, b, salt, salt + 1);
        }
        around_finish(around, &nb, salt, &nbreq);
        dbuf_free(&nb);
        sc_sync(MPI_COMM_WORLD);
        sc_phase_end();
    }
}

static void ex_intertwined(int salt)
{
    for (int around = 0; around < 3; around += 2) {
        sc_phase_begin("intertwined/%s/rep %d", around_names[around], rep);
        dbuf_t nb;
        dbuf_new(&nb, count);
        MPI_Request nbreq;
        around_start(around, &nb, salt, &nbreq);
        enum { N = 1024 };
        int buf1[N], buf2[N];
        const int tag1 = 21, tag2 = 22;
        if (rank == 0) {
            int bsize = (int)(N * sizeof(int)) + MPI_BSEND_OVERHEAD;
            char *bbuf = malloc((size_t)bsize);
            MPI_Buffer_attach(bbuf, bsize);
            msg_fill(buf1, N, salt);
            msg_fill(buf2, N, salt + 1);
            MPI_Bsend(buf1, N, MPI_INT, 1, tag1, MPI_COMM_WORLD);
            MPI_Ssend(buf2, N, MPI_INT, 1, tag2, MPI_COMM_WORLD);
            void *detached;
            MPI_Buffer_detach(&detached, &bsize);
            free(detached);
        } else if (rank == 1) {
            MPI_Recv(buf1, N, MPI_INT, 0, tag2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(buf2, N, MPI_INT, 0, tag1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            /* received in the reverse order of the sends */
            msg_check(buf1, N, salt + 1, sc_phase());
            msg_check(buf2, N, salt, sc_phase());
        }
        around_finish(around, &nb, salt, &nbreq);
        dbuf_free(&nb);
        sc_sync(MPI_COMM_WORLD);
        sc_phase_end();
    }
}

static const struct {
    const char *name;
    void (*fn)(int salt);
} examples[] = {
    { "interleave", ex_interleave }, { "dupcomm", ex_dupcomm },
    { "progress", ex_progress }, { "mixed", ex_mixed },
    { "pipeline", ex_pipeline }, { "overlap", ex_overlap },
    { "independent", ex_independent }, { "nondet", ex_nondet },
    { "p2p_progress", ex_p2p_progress }, { "intertwined", ex_intertwined },
};

int main(int argc, char **argv)
{
    sc_init(&argc, &argv, "sem_examples");
    rank = tu_world_rank();
    size = tu_world_size();
    if (size < 2) {
        tu_skip("needs at least 2 ranks");
    }
    const char *list = sc_arg(argc, argv, "--examples", "all");
    count = atoi(sc_arg(argc, argv, "--count", "65536"));
    const int reps = atoi(sc_arg(argc, argv, "--reps", "3"));
    if (count < 1) {
        count = 1;
    }
    int ran = 0;
    for (size_t e = 0; e < sizeof(examples) / sizeof(examples[0]); e++) {
        if (!sc_list_has(list, examples[e].name)) {
            continue;
        }
        for (rep = 0; rep < reps; rep++) {
            examples[e].fn((int)(e * 100 + (size_t)rep * 7));
        }
        ran++;
    }
    if (rank == 0) {
        printf("sem_examples: %d examples x %d repetitions, %d ranks%s\n", ran,
               reps, size, size < 3 ? " (overlap and nondet need 3: left out)" : "");
        fflush(stdout);
    }
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
