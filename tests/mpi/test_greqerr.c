/*
 * collar - where the error of a failed nonblocking operation goes.
 *
 * MPI raises the error of a communication request on the communicator of
 * the operation.  This program runs operations on a duplicate of
 * MPI_COMM_WORLD with an error handler of its own that counts its calls
 * (user-defined with MPI_Comm_create_errhandler), while counting handlers
 * on MPI_COMM_WORLD and MPI_COMM_SELF must never be called.  Run it with a
 * failure injected on every rank (COLLAR_SIM_FAIL=copy:1: the first device
 * copy of each process, which belongs to the first operation) and
 * --expect-fail 1, or without one (or without collar) and --expect-fail 0.
 *
 * Usage: test_greqerr --op OP --complete HOW [--count N] [--expect-fail 0|1]
 *                     [--free-comm] [--fatal]
 *   OP    iallreduce (MPI_SUM of ints), ibcast (from rank 0), or
 *         allreduce_init (persistent: MPI_Allreduce_init and MPI_Start;
 *         exit 77 where the MPI library has no persistent collectives)
 *   HOW   wait, test (an MPI_Test loop), waitall, waitany, waitsome,
 *         testany, testsome (two operations, the first one fails; with
 *         ibcast the other is the MPI library's own PMPI_Ibcast), or
 *         getstatus (an MPI_Request_get_status loop, then MPI_Wait)
 *
 * What is checked, on every rank:
 *   - the failing operation's completion returns an error of class
 *     MPI_ERR_OTHER (MPI_Wait, MPI_Test, MPI_Waitany and MPI_Testany: as
 *     their return code, the index set; the array forms: MPI_ERR_IN_STATUS
 *     with the error in the failed request's status and MPI_SUCCESS in the
 *     other's); MPI_Request_get_status says complete, returns MPI_SUCCESS
 *     and puts the error in the status, and the MPI_Wait after it returns
 *     the error;
 *   - the communicator's handler is called exactly once, with that
 *     communicator and that error; those of MPI_COMM_WORLD and
 *     MPI_COMM_SELF never;
 *   - the other operation's result is right, and so are those of the
 *     operations after the failure (the same completion again, then a
 *     blocking MPI_Allreduce and MPI_Bcast), with no further handler call.
 * --free-comm frees the communicator right after starting the operations
 * (MPI allows it): the handler is still called once (with another
 * communicator: the application's is gone).
 * --fatal: the communicator's handler is MPI_ERRORS_ARE_FATAL; the job must
 * abort in the failing completion.  If the completion returns instead, the
 * program prints "greqerr: the failing completion returned" and fails.
 */
#include "config.h"
#include "testutil.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OP_IALLREDUCE, OP_IBCAST, OP_ALLREDUCE_INIT } op_kind_t;
typedef enum {
    HOW_WAIT, HOW_TEST, HOW_WAITALL, HOW_WAITANY, HOW_WAITSOME, HOW_TESTANY,
    HOW_TESTSOME, HOW_GETSTATUS
} how_t;

static const char *const how_names[] = {
    "wait", "test", "waitall", "waitany", "waitsome", "testany", "testsome",
    "getstatus",
};

static op_kind_t opt_op = OP_IALLREDUCE;
static how_t     opt_how = HOW_WAIT;
static int       opt_count = 6144;
static int       opt_expect = 0;
static int       opt_free_comm = 0;
static int       opt_fatal = 0;

static int rank, size;
static MPI_Comm user_comm = MPI_COMM_NULL;

static atomic_int n_world, n_self, n_user, n_user_wrong_comm;
static atomic_int user_code = MPI_SUCCESS;

static void eh_world(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    atomic_fetch_add(&n_world, 1);
}

static void eh_self(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    atomic_fetch_add(&n_self, 1);
}

static void eh_user(MPI_Comm *comm, int *code, ...)
{
    atomic_fetch_add(&n_user, 1);
    atomic_store(&user_code, *code);
    /* Once the application has freed it, no handle names it any more. */
    if (!opt_free_comm && *comm != user_comm) {
        atomic_fetch_add(&n_user_wrong_comm, 1);
    }
}

static int err_class(int rc)
{
    int cls = -1;
    MPI_Error_class(rc, &cls);
    return cls;
}

static int value(int r, int i, int round)
{
    return (r + 1) * 1000 + i % 997 + round * 13;
}

/* One operation: its buffers and request. */
typedef struct {
    int        *sbuf;
    int        *rbuf;
    int         round;
    MPI_Request req;
} op_t;

static void op_fill(op_t *o, int round)
{
    o->round = round;
    for (int i = 0; i < opt_count; i++) {
        o->sbuf[i] = value(rank, i, round);
        o->rbuf[i] = opt_op == OP_IBCAST && rank == 0 ? value(0, i, round) : -1;
    }
}

/* Operation `which` (0: the one that fails, 1: the other). */
static int op_start(op_t *o, int which, int round, MPI_Comm comm)
{
    op_fill(o, round);
    o->req = MPI_REQUEST_NULL;
    switch (opt_op) {
    case OP_IALLREDUCE:
        return MPI_Iallreduce(o->sbuf, o->rbuf, opt_count, MPI_INT, MPI_SUM,
                              comm, &o->req);
    case OP_IBCAST:
        /* The other one is the MPI library's own request (no copy): on a
         * rank other than the root the copies back of two staged
         * broadcasts may run in either order, and the injected failure
         * must hit the first one on every rank. */
        return which == 0
               ? MPI_Ibcast(o->rbuf, opt_count, MPI_INT, 0, comm, &o->req)
               : PMPI_Ibcast(o->rbuf, opt_count, MPI_INT, 0, comm, &o->req);
    case OP_ALLREDUCE_INIT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
    {
        int rc = MPI_Allreduce_init(o->sbuf, o->rbuf, opt_count, MPI_INT,
                                    MPI_SUM, comm, MPI_INFO_NULL, &o->req);
        return rc != MPI_SUCCESS ? rc : MPI_Start(&o->req);
    }
#else
        break;
#endif
    }
    return MPI_ERR_OTHER;
}

/* A persistent request started again with new data. */
static int op_restart(op_t *o, int round)
{
    op_fill(o, round);
    return MPI_Start(&o->req);
}

static int op_want(int i, int round)
{
    if (opt_op == OP_IBCAST) {
        return value(0, i, round);
    }
    int want = 0;
    for (int r = 0; r < size; r++) {
        want += value(r, i, round);
    }
    return want;
}

static void op_check(const op_t *o, const char *what)
{
    int bad = 0, first = -1;
    for (int i = 0; i < opt_count; i++) {
        if (o->rbuf[i] != op_want(i, o->round)) {
            bad += 1;
            first = first < 0 ? i : first;
        }
    }
    tu_check(bad == 0, what, "round %d: %d of %d elements wrong, first at %d",
             o->round, bad, opt_count, first);
}

/* The request after its completion: null, or inactive and kept (persistent). */
static void check_completed(const op_t *o, const char *what)
{
    if (opt_op == OP_ALLREDUCE_INIT) {
        tu_check(o->req != MPI_REQUEST_NULL, what, "a persistent request was freed");
    } else {
        tu_check(o->req == MPI_REQUEST_NULL, what, "request not MPI_REQUEST_NULL");
    }
}

static void check_error(int rc, int fails, const char *what)
{
    if (fails) {
        tu_check(err_class(rc) == MPI_ERR_OTHER, what,
                 "error class %d (%s), expected MPI_ERR_OTHER", err_class(rc),
                 tu_errstr(rc));
    } else {
        tu_check(rc == MPI_SUCCESS, what, "%s", tu_errstr(rc));
    }
}

static void returned_after_fatal(void)
{
    if (opt_fatal) {
        printf("greqerr: the failing completion returned\n");
        fflush(stdout);
        tu_fail("MPI_ERRORS_ARE_FATAL", "the failing completion returned");
    }
}

/* The returns of the array forms, per request. */
typedef struct {
    int done[2];
    int rc[2];        /* the error of each (its status, or the return code) */
    int in_status;    /* calls that returned MPI_ERR_IN_STATUS */
    int bad_success;  /* a call returned success although a request failed */
} pair_t;

static void note_any(pair_t *p, int rc, int idx, const MPI_Status *st)
{
    (void)st;
    if (idx == MPI_UNDEFINED || idx < 0 || idx > 1) {
        tu_fail("index", "index %d (rc %s)", idx, tu_errstr(rc));
        return;
    }
    tu_check(!p->done[idx], "index", "request %d completed twice", idx);
    p->done[idx] = 1;
    p->rc[idx] = rc;
}

static void note_some(pair_t *p, int rc, int outcount, const int *indices,
                      const MPI_Status *st)
{
    if (rc != MPI_SUCCESS && err_class(rc) != MPI_ERR_IN_STATUS) {
        tu_fail("return code", "%s, expected MPI_SUCCESS or MPI_ERR_IN_STATUS",
                tu_errstr(rc));
    }
    int failed = 0;
    for (int j = 0; j < outcount; j++) {
        const int i = indices[j];
        if (i < 0 || i > 1 || p->done[i]) {
            tu_fail("indices", "index %d", i);
            continue;
        }
        p->done[i] = 1;
        p->rc[i] = rc == MPI_SUCCESS ? MPI_SUCCESS : st[j].MPI_ERROR;
        failed |= p->rc[i] != MPI_SUCCESS;
    }
    p->in_status += rc != MPI_SUCCESS;
    p->bad_success += rc == MPI_SUCCESS && failed;
}

/* Complete ops[0..n-1] as opt_how says; returns, per operation, its error. */
static void complete(op_t *ops, int n, int fails, int *rcs)
{
    MPI_Request reqs[2];
    MPI_Status st[2];
    const double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        reqs[i] = ops[i].req;
        st[i].MPI_ERROR = -12345;   /* what the call must overwrite */
    }
    int rc = MPI_SUCCESS, flag = 0, idx = MPI_UNDEFINED, out = 0, ind[2];
    pair_t p = { { 0, 0 }, { MPI_SUCCESS, MPI_SUCCESS }, 0, 0 };
    switch (opt_how) {
    case HOW_WAIT:
        rcs[0] = MPI_Wait(&reqs[0], &st[0]);
        if (fails) {
            returned_after_fatal();
        }
        break;
    case HOW_TEST:
        do {
            rc = MPI_Test(&reqs[0], &flag, &st[0]);
            tu_progress_guard(t0, "MPI_Test loop");
        } while (rc == MPI_SUCCESS && !flag);
        tu_check(flag, "MPI_Test flag", "flag 0 with %s", tu_errstr(rc));
        rcs[0] = rc;
        break;
    case HOW_GETSTATUS: {
        const int before = atomic_load(&n_user);
        do {
            rc = MPI_Request_get_status(reqs[0], &flag, &st[0]);
            tu_progress_guard(t0, "MPI_Request_get_status loop");
        } while (rc == MPI_SUCCESS && !flag);
        tu_check(rc == MPI_SUCCESS, "MPI_Request_get_status",
                 "returned %s", tu_errstr(rc));
        tu_check(reqs[0] != MPI_REQUEST_NULL, "MPI_Request_get_status",
                 "the request was freed");
        if (fails) {
            tu_check(err_class(st[0].MPI_ERROR) == MPI_ERR_OTHER,
                     "MPI_Request_get_status status", "MPI_ERROR %d, expected "
                     "class MPI_ERR_OTHER", st[0].MPI_ERROR);
        }
        tu_check(atomic_load(&n_user) == before, "MPI_Request_get_status",
                 "handler called (the completion reports)");
        rcs[0] = MPI_Wait(&reqs[0], &st[0]);
        break;
    }
    case HOW_WAITALL:
        rc = MPI_Waitall(n, reqs, st);
        if (fails) {
            returned_after_fatal();
            tu_check(err_class(rc) == MPI_ERR_IN_STATUS, "MPI_Waitall",
                     "returned %s, expected MPI_ERR_IN_STATUS", tu_errstr(rc));
        }
        for (int i = 0; i < n; i++) {
            rcs[i] = rc == MPI_SUCCESS ? MPI_SUCCESS : st[i].MPI_ERROR;
        }
        break;
    case HOW_WAITANY:
    case HOW_TESTANY:
        while (!p.done[0] || !p.done[1]) {
            idx = MPI_UNDEFINED;
            if (opt_how == HOW_WAITANY) {
                rc = MPI_Waitany(n, reqs, &idx, &st[0]);
                flag = 1;
            } else {
                rc = MPI_Testany(n, reqs, &idx, &flag, &st[0]);
            }
            if (flag || rc != MPI_SUCCESS) {
                note_any(&p, rc, idx, &st[0]);
                if (rc != MPI_SUCCESS) {
                    returned_after_fatal();
                }
            }
            tu_progress_guard(t0, "MPI_Waitany / MPI_Testany loop");
        }
        rcs[0] = p.rc[0];
        rcs[1] = p.rc[1];
        break;
    case HOW_WAITSOME:
    case HOW_TESTSOME:
        while (!p.done[0] || !p.done[1]) {
            out = 0;
            if (opt_how == HOW_WAITSOME) {
                rc = MPI_Waitsome(n, reqs, &out, ind, st);
            } else {
                rc = MPI_Testsome(n, reqs, &out, ind, st);
            }
            if (out == MPI_UNDEFINED) {
                tu_fail("outcount", "MPI_UNDEFINED with active requests");
                break;
            }
            note_some(&p, rc, out, ind, st);
            if (rc != MPI_SUCCESS) {
                returned_after_fatal();
            }
            tu_progress_guard(t0, "MPI_Waitsome / MPI_Testsome loop");
        }
        tu_check(p.in_status == fails, "MPI_ERR_IN_STATUS", "%d calls returned "
                 "it, expected %d", p.in_status, fails);
        tu_check(p.bad_success == 0, "MPI_ERR_IN_STATUS", "a call returned "
                 "MPI_SUCCESS with a failed request");
        rcs[0] = p.rc[0];
        rcs[1] = p.rc[1];
        break;
    }
    if (fails && (opt_how == HOW_WAIT || opt_how == HOW_TEST
                  || opt_how == HOW_GETSTATUS)) {
        returned_after_fatal();
    }
    for (int i = 0; i < n; i++) {
        ops[i].req = reqs[i];
    }
}

static int parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--op") == 0 && v != NULL) {
            if (strcmp(v, "iallreduce") == 0) {
                opt_op = OP_IALLREDUCE;
            } else if (strcmp(v, "ibcast") == 0) {
                opt_op = OP_IBCAST;
            } else if (strcmp(v, "allreduce_init") == 0) {
                opt_op = OP_ALLREDUCE_INIT;
            } else {
                return 0;
            }
            i++;
        } else if (strcmp(a, "--complete") == 0 && v != NULL) {
            int found = 0;
            for (int h = 0; h <= HOW_GETSTATUS; h++) {
                if (strcmp(v, how_names[h]) == 0) {
                    opt_how = (how_t)h;
                    found = 1;
                }
            }
            if (!found) {
                return 0;
            }
            i++;
        } else if (strcmp(a, "--count") == 0 && v != NULL) {
            opt_count = atoi(v);
            i++;
        } else if (strcmp(a, "--expect-fail") == 0 && v != NULL) {
            opt_expect = atoi(v);
            i++;
        } else if (strcmp(a, "--free-comm") == 0) {
            opt_free_comm = 1;
        } else if (strcmp(a, "--fatal") == 0) {
            opt_fatal = 1;
        } else {
            return 0;
        }
    }
    return opt_count > 0 && (opt_expect == 0 || opt_expect == 1);
}

static int pairs(void)
{
    return opt_how == HOW_WAIT || opt_how == HOW_TEST || opt_how == HOW_GETSTATUS
           ? 1 : 2;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_greqerr");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!parse(argc, argv)) {
        if (rank == 0) {
            fprintf(stderr, "usage: test_greqerr --op iallreduce|ibcast|"
                    "allreduce_init --complete wait|test|waitall|waitany|"
                    "waitsome|testany|testsome|getstatus [--count N] "
                    "[--expect-fail 0|1] [--free-comm] [--fatal]\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
#if !defined(HAVE_PMPI_ALLREDUCE_INIT)
    if (opt_op == OP_ALLREDUCE_INIT) {
        tu_skip("the MPI library has no persistent collectives");
    }
#endif
    if (opt_op == OP_ALLREDUCE_INIT && opt_free_comm) {
        tu_skip("--free-comm is for the nonblocking operations");
    }

    MPI_Errhandler eh_w, eh_s, eh_u;
    MPI_Comm_create_errhandler(eh_world, &eh_w);
    MPI_Comm_create_errhandler(eh_self, &eh_s);
    MPI_Comm_create_errhandler(eh_user, &eh_u);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh_w);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, eh_s);
    MPI_Comm_dup(MPI_COMM_WORLD, &user_comm);
    MPI_Comm_set_errhandler(user_comm, opt_fatal ? MPI_ERRORS_ARE_FATAL : eh_u);

    op_t ops[2];
    for (int i = 0; i < 2; i++) {
        ops[i].sbuf = malloc((size_t)opt_count * sizeof(int));
        ops[i].rbuf = malloc((size_t)opt_count * sizeof(int));
        ops[i].req = MPI_REQUEST_NULL;
        if (ops[i].sbuf == NULL || ops[i].rbuf == NULL) {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    const int n = pairs();
    char what[128];

    /* Round 0: the first operation fails where a failure is injected. */
    for (int i = 0; i < n; i++) {
        snprintf(what, sizeof(what), "start %d", i);
        tu_check_rc(op_start(&ops[i], i, i, user_comm), what);
    }
    MPI_Comm comm = user_comm;
    if (opt_free_comm) {
        MPI_Comm_free(&comm);
    }
    int rcs[2] = { MPI_SUCCESS, MPI_SUCCESS };
    complete(ops, n, opt_expect, rcs);
    snprintf(what, sizeof(what), "%s: the failing operation", how_names[opt_how]);
    check_error(rcs[0], opt_expect, what);
    if (rcs[0] == MPI_SUCCESS) {
        op_check(&ops[0], "result of the first operation");
    }
    for (int i = 1; i < n; i++) {
        snprintf(what, sizeof(what), "%s: the other operation", how_names[opt_how]);
        check_error(rcs[i], 0, what);
        op_check(&ops[i], "result of the other operation");
    }
    for (int i = 0; i < n; i++) {
        check_completed(&ops[i], "request after completion");
    }
    const int calls = atomic_load(&n_user);
    tu_check(calls == opt_expect, "communicator's handler",
             "called %d times, expected %d", calls, opt_expect);
    if (opt_expect && calls > 0) {
        tu_check(atomic_load(&user_code) == rcs[0], "communicator's handler",
                 "called with %d, the completion returned %d",
                 atomic_load(&user_code), rcs[0]);
    }
    tu_check(atomic_load(&n_user_wrong_comm) == 0, "communicator's handler",
             "called with another communicator");

    /* Round 1: the same again works (persistent: the same requests). */
    if (opt_free_comm) {
        MPI_Comm_dup(MPI_COMM_WORLD, &user_comm);
        MPI_Comm_set_errhandler(user_comm, eh_u);
        opt_free_comm = 0;
    }
    for (int i = 0; i < n; i++) {
        int rc = opt_op == OP_ALLREDUCE_INIT ? op_restart(&ops[i], 10 + i)
                                             : op_start(&ops[i], i, 10 + i, user_comm);
        tu_check_rc(rc, "start after the failure");
    }
    complete(ops, n, 0, rcs);
    for (int i = 0; i < n; i++) {
        tu_check_rc(rcs[i], "completion after the failure");
        op_check(&ops[i], "result after the failure");
        check_completed(&ops[i], "request after completion");
    }
    if (opt_op == OP_ALLREDUCE_INIT) {
        for (int i = 0; i < n; i++) {
            tu_check_rc(MPI_Request_free(&ops[i].req), "MPI_Request_free");
        }
    }

    /* Blocking calls on the communicator. */
    op_fill(&ops[0], 20);
    if (opt_op == OP_IBCAST) {
        tu_check_rc(MPI_Bcast(ops[0].rbuf, opt_count, MPI_INT, 0, user_comm),
                    "MPI_Bcast after the failure");
    } else {
        tu_check_rc(MPI_Allreduce(ops[0].sbuf, ops[0].rbuf, opt_count, MPI_INT,
                                  MPI_SUM, user_comm),
                    "MPI_Allreduce after the failure");
    }
    op_check(&ops[0], "blocking call after the failure");

    tu_check(atomic_load(&n_user) == opt_expect, "communicator's handler",
             "called %d times in all, expected %d", atomic_load(&n_user),
             opt_expect);
    tu_check(atomic_load(&n_world) == 0, "MPI_COMM_WORLD's handler",
             "called %d times", atomic_load(&n_world));
    tu_check(atomic_load(&n_self) == 0, "MPI_COMM_SELF's handler",
             "called %d times", atomic_load(&n_self));
    if (rank == 0) {
        printf("greqerr: %s by %s: handler calls: communicator %d, "
               "MPI_COMM_WORLD %d, MPI_COMM_SELF %d\n",
               opt_op == OP_IBCAST ? "ibcast"
               : opt_op == OP_ALLREDUCE_INIT ? "allreduce_init" : "iallreduce",
               how_names[opt_how], atomic_load(&n_user), atomic_load(&n_world),
               atomic_load(&n_self));
    }

    for (int i = 0; i < 2; i++) {
        free(ops[i].sbuf);
        free(ops[i].rbuf);
    }
    MPI_Comm_free(&user_comm);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh_w);
    MPI_Errhandler_free(&eh_s);
    MPI_Errhandler_free(&eh_u);
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
