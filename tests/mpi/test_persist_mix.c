/*
 * Persistent collectives collar runs (MPI_Allreduce_init, MPI_Bcast_init on
 * device buffers) completed in one call together with the MPI library's own
 * requests: its persistent MPI_Barrier_init (collar does not intercept
 * barriers), a persistent send and receive (MPI_Send_init, MPI_Recv_init)
 * and a generalized request the program completes itself.
 *
 * Every round starts them all (MPI_Startall, or MPI_Start one by one in
 * array order or in reverse) and completes them in one of MPI_Waitall,
 * MPI_Testall (looped), MPI_Waitany, MPI_Testany, MPI_Waitsome and
 * MPI_Testsome (looped until every request is reported).  Checked on every
 * rank after every round: each call returns MPI_SUCCESS, no status says an
 * error, the allreduce's sum, the broadcast's data and the message are
 * right, the generalized request is freed exactly once.
 *
 * The Any/Some loops pass MPI_REQUEST_NULL for the requests already
 * reported (the handles are kept aside): MPICH 4.0.2 reports an inactive
 * persistent collective request as complete again, on its own.
 *
 * Where the library has no persistent collectives (Open MPI 4.1), or with
 * the argument nonblocking: collar's MPI_Iallreduce and MPI_Ibcast and the
 * library's MPI_Ibarrier in their place, issued where the persistent ones
 * are started; the send, the receive and the generalized request stay.
 *
 * Last, completion calls over 20 requests, none of collar's, while collar
 * holds one of its own: no memory kept (the resident size).
 *
 * Usage: test_persist_mix [rounds [count [nonblocking]]]
 * (defaults 200 and 10007 ints).
 */
#include "config.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALLREDUCE, BCAST, BARRIER, SEND, RECV, GREQ, NREQ };
enum { WAITALL, TESTALL, WAITANY, TESTANY, WAITSOME, TESTSOME, NMODE };
static const char *const mode_name[NMODE] = {
    "waitall", "testall", "waitany", "testany", "waitsome", "testsome",
};
static const char *const order_name[3] = { "startall", "start", "start reversed" };

static int rank, size;
static int nonblocking;
static int *sbuf, *rbuf, *bbuf, count;

static int value(int r, int i, int round)
{
    return (r + 1) * 13 + i % 997 + round * 17;
}

/* The generalized request: complete when the program says so. */
static int greq_query(void *extra, MPI_Status *status)
{
    (void)extra;
    MPI_Status_set_elements(status, MPI_BYTE, 0);
    MPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    status->MPI_ERROR = MPI_SUCCESS;
    return MPI_SUCCESS;
}

static int greq_free(void *extra)
{
    (*(int *)extra)++;
    return MPI_SUCCESS;
}

static int greq_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

static void statuses_preset(MPI_Status st[], int n)
{
    for (int i = 0; i < n; i++) {
        st[i].MPI_ERROR = MPI_SUCCESS;
    }
}

/* A call returned rc with statuses st[0..n): MPI_SUCCESS, and no status
 * says an error (they were preset to MPI_SUCCESS: MPI changes the field
 * only where a call returns MPI_ERR_IN_STATUS). */
static void check_call(int rc, const MPI_Status st[], int n, const char *what,
                       int round)
{
    tu_check(rc == MPI_SUCCESS, what, "round %d: returned %s", round,
             tu_errstr(rc));
    for (int i = 0; i < n; i++) {
        tu_check(st[i].MPI_ERROR == MPI_SUCCESS, what,
                 "round %d: status %d says %s", round, i,
                 tu_errstr(st[i].MPI_ERROR));
    }
}

/* The Any/Some loops: every request reported once; the program completes
 * the generalized request after a few passes (at once before a wait). */
static void complete_some(MPI_Request reqs[], int mode, MPI_Request greq,
                          int round)
{
    MPI_Request act[NREQ];
    MPI_Status st[NREQ];
    int seen[NREQ] = { 0 }, done = 0, passes = 0, greq_done = 0;
    const int waits = mode == WAITANY || mode == WAITSOME;
    const char *what = mode_name[mode];
    for (int i = 0; i < NREQ; i++) {
        act[i] = reqs[i];
    }
    const double t0 = MPI_Wtime();
    while (done < NREQ) {
        if (!greq_done && (waits || passes == 3)) {
            MPI_Grequest_complete(greq);
            greq_done = 1;
        }
        passes++;
        int idx[NREQ], n = 0, rc, flag = 1;
        statuses_preset(st, NREQ);
        if (mode == WAITANY || mode == TESTANY) {
            rc = mode == WAITANY ? MPI_Waitany(NREQ, act, &idx[0], &st[0])
                                 : MPI_Testany(NREQ, act, &idx[0], &flag, &st[0]);
            n = flag && idx[0] != MPI_UNDEFINED ? 1 : 0;
            check_call(rc, st, 1, what, round);
        } else {
            rc = mode == WAITSOME ? MPI_Waitsome(NREQ, act, &n, idx, st)
                                  : MPI_Testsome(NREQ, act, &n, idx, st);
            check_call(rc, st, n == MPI_UNDEFINED ? 0 : n, what, round);
        }
        if (rc != MPI_SUCCESS || n == MPI_UNDEFINED) {
            tu_fail(what, "round %d: %d of %d requests reported", round, done,
                    NREQ);
            break;
        }
        for (int j = 0; j < n; j++) {
            const int i = idx[j];
            tu_check(i >= 0 && i < NREQ && !seen[i], what,
                     "round %d: index %d reported again", round, i);
            if (i >= 0 && i < NREQ && !seen[i]) {
                seen[i] = 1;
                done++;
                act[i] = MPI_REQUEST_NULL;
            }
        }
        tu_progress_guard(t0, what);
    }
    if (!greq_done) {
        MPI_Grequest_complete(greq);
    }
}

static void complete(MPI_Request reqs[], int mode, int round)
{
    MPI_Status st[NREQ];
    const MPI_Request greq = reqs[GREQ];
    if (mode == WAITALL) {
        MPI_Grequest_complete(greq);
        statuses_preset(st, NREQ);
        check_call(MPI_Waitall(NREQ, reqs, st), st, NREQ, "waitall", round);
    } else if (mode == TESTALL) {
        const double t0 = MPI_Wtime();
        for (int pass = 0, flag = 0; !flag; pass++) {
            if (pass == 3) {
                MPI_Grequest_complete(greq);
            }
            statuses_preset(st, NREQ);
            const int rc = MPI_Testall(NREQ, reqs, &flag, st);
            check_call(rc, st, NREQ, "testall", round);
            if (rc != MPI_SUCCESS) {
                if (pass < 3) {
                    MPI_Grequest_complete(greq);
                }
                break;
            }
            tu_progress_guard(t0, "testall");
        }
    } else {
        complete_some(reqs, mode, greq, round);
    }
    tu_check(reqs[GREQ] == MPI_REQUEST_NULL || mode >= WAITANY, mode_name[mode],
             "round %d: generalized request not freed", round);
}

static int start_one(MPI_Request reqs[], int i)
{
    if (!nonblocking || i >= SEND) {
        return MPI_Start(&reqs[i]);
    }
    switch (i) {
    case ALLREDUCE:
        return MPI_Iallreduce(sbuf, rbuf, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                              &reqs[i]);
    case BCAST:
        return MPI_Ibcast(bbuf, count, MPI_INT, size - 1, MPI_COMM_WORLD, &reqs[i]);
    default:
        return MPI_Ibarrier(MPI_COMM_WORLD, &reqs[i]);
    }
}

static void start(MPI_Request reqs[], int order, int round)
{
    const char *what = order_name[order];
    if (order == 0) {
        const int first = nonblocking ? SEND : 0;
        int rc = MPI_SUCCESS;
        for (int i = 0; i < first && rc == MPI_SUCCESS; i++) {
            rc = start_one(reqs, i);
        }
        if (rc == MPI_SUCCESS) {
            rc = MPI_Startall(GREQ - first, &reqs[first]);
        }
        tu_check(rc == MPI_SUCCESS, what, "round %d: %s", round, tu_errstr(rc));
        return;
    }
    for (int k = 0; k < GREQ; k++) {
        const int i = order == 1 ? k : GREQ - 1 - k;
        const int rc = start_one(reqs, i);
        tu_check(rc == MPI_SUCCESS, what, "round %d: request %d: %s", round, i,
                 tu_errstr(rc));
    }
}

static void check_values(const int *r, const int *b, const int *in, int count,
                         int msg, int round, const char *how)
{
    int bad_r = 0, bad_b = 0, bad_m = 0;
    for (int i = 0; i < count; i++) {
        long want = 0;
        for (int q = 0; q < size; q++) {
            want += value(q, i, round);
        }
        bad_r += r[i] != (int)want;
        bad_b += b[i] != value(size, i, round);
    }
    const int left = (rank + size - 1) % size;
    for (int i = 0; i < msg; i++) {
        bad_m += in[i] != value(left, i + 7, round);
    }
    tu_check(bad_r == 0, "allreduce", "round %d (%s): %d wrong elements", round,
             how, bad_r);
    tu_check(bad_b == 0, "bcast", "round %d (%s): %d wrong elements", round,
             how, bad_b);
    tu_check(bad_m == 0, "message", "round %d (%s): %d wrong elements", round,
             how, bad_m);
}

/* Completion calls over more requests than collar looks up on the stack
 * (16), none of them collar's, while collar holds a request of its own:
 * they keep no memory (collar's lookup array was not freed then, 160
 * bytes a call). */
static void check_lookup_memory(void)
{
    enum { N = 20, CALLS = 200000 };
    int x = rank, y = 0;
    MPI_Request held, none[N];
    tu_check_rc(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &held),
                "lookup memory: iallreduce");
    for (int i = 0; i < N; i++) {
        none[i] = MPI_REQUEST_NULL;
    }
    const long before = tu_rss_kb();
    for (int k = 0; k < CALLS; k++) {
        int idx[N], flag, n;
        MPI_Testany(N, none, &idx[0], &flag, MPI_STATUS_IGNORE);
        MPI_Testsome(N, none, &n, idx, tu_statuses_ignore());
    }
    const long grown = tu_rss_kb() - before;
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer keeps freed memory in its quarantine: the resident
     * size says nothing about leaks there (LeakSanitizer does). */
    const int bounded = 0;
#else
    const int bounded = before >= 0;
#endif
    tu_check(!bounded || grown < 8192, "lookup memory",
             "%d completion calls over %d requests: %ld KiB more resident",
             2 * CALLS, N, grown);
    tu_check_rc(MPI_Wait(&held, MPI_STATUS_IGNORE), "lookup memory: wait");
    tu_check(y == size * (size - 1) / 2, "lookup memory", "iallreduce gave %d", y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_persist_mix");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    const int rounds = argc > 1 ? atoi(argv[1]) : 200;
    count = argc > 2 ? atoi(argv[2]) : 10007;
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
    nonblocking = argc > 3 && strcmp(argv[3], "nonblocking") == 0;
#else
    nonblocking = 1;
#endif
    if (rank == 0) {
        printf("test_persist_mix: %s\n", nonblocking
               ? "collar's nonblocking collectives and the library's MPI_Ibarrier"
               : "collar's persistent collectives and the library's MPI_Barrier_init");
        fflush(stdout);
    }
    const int msg = 257;
    int *s = sbuf = malloc((size_t)count * sizeof(int));
    int *r = rbuf = malloc((size_t)count * sizeof(int));
    int *b = bbuf = malloc((size_t)count * sizeof(int));
    int *out = malloc((size_t)msg * sizeof(int));
    int *in = malloc((size_t)msg * sizeof(int));
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;

    MPI_Comm check;
    MPI_Comm_dup(MPI_COMM_WORLD, &check);
    MPI_Request reqs[NREQ] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL };
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
    if (!nonblocking) {
        tu_check_rc(MPI_Allreduce_init(s, r, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                                       MPI_INFO_NULL, &reqs[ALLREDUCE]),
                    "allreduce_init");
        tu_check_rc(MPI_Bcast_init(b, count, MPI_INT, size - 1, MPI_COMM_WORLD,
                                   MPI_INFO_NULL, &reqs[BCAST]), "bcast_init");
        tu_check_rc(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &reqs[BARRIER]),
                    "barrier_init");
    }
#endif
    tu_check_rc(MPI_Send_init(out, msg, MPI_INT, right, 7, MPI_COMM_WORLD,
                              &reqs[SEND]), "send_init");
    tu_check_rc(MPI_Recv_init(in, msg, MPI_INT, left, 7, MPI_COMM_WORLD,
                              &reqs[RECV]), "recv_init");
    for (int round = 0; round < rounds; round++) {
        const int mode = round % NMODE, order = round / NMODE % 3;
        for (int i = 0; i < count; i++) {
            s[i] = value(rank, i, round);
            r[i] = -1;
            b[i] = rank == size - 1 ? value(size, i, round) : -1;
        }
        for (int i = 0; i < msg; i++) {
            out[i] = value(rank, i + 7, round);
            in[i] = -1;
        }
        int freed = 0;
        tu_check_rc(MPI_Grequest_start(greq_query, greq_free, greq_cancel, &freed,
                                       &reqs[GREQ]), "grequest_start");
        start(reqs, order, round);
        complete(reqs, mode, round);
        tu_check(freed == 1, "grequest", "round %d: freed %d times", round, freed);
        char how[64];
        snprintf(how, sizeof(how), "%s, %s", order_name[order], mode_name[mode]);
        check_values(r, b, in, count, msg, round, how);
        /* After a failure the requests may still be active: the rounds
         * stop on every rank, and the run ends in MPI_Abort. */
        long long mine = tu_failures(), any = 0;
        PMPI_Allreduce(&mine, &any, 1, MPI_LONG_LONG, MPI_MAX, check);
        if (any != 0) {
            tu_finish();
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    check_lookup_memory();
    for (int i = nonblocking ? SEND : 0; i < GREQ; i++) {
        tu_check_rc(MPI_Request_free(&reqs[i]), "request_free");
    }
    MPI_Comm_free(&check);
    free(s);
    free(r);
    free(b);
    free(out);
    free(in);
    const int status = tu_finish();
    MPI_Finalize();
    return status;
}
