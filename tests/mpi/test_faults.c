/*
 * collar - calls hit by an injected device failure (COLLAR_SIM_FAIL).
 *
 * Runs --calls allreduces (MPI_INT, MPI_SUM, --count elements) on a
 * duplicate of MPI_COMM_WORLD whose error handler is MPI_ERRORS_RETURN, each
 * with inputs that depend on the call, and checks for every call:
 *   - it returns MPI_SUCCESS and the result is right, or
 *   - it returns an error (from MPI_Allreduce; with --nonblocking from
 *     MPI_Iallreduce when it cannot start, else from MPI_Wait) whose MPI_Error_class is not MPI_SUCCESS; the receive
 *     buffer may hold anything.
 * With --window W (implies --nonblocking), calls go in groups of W
 * MPI_Iallreduce on separate buffers completed by one MPI_Waitall, so that a
 * failing operation has others in flight on the same communicator; a
 * call's error is then its status's MPI_ERROR (MPI_ERR_IN_STATUS; a request
 * left active with MPI_ERR_PENDING, as MPICH does after a failed one, is
 * waited for again, and its operation must have completed already).  The
 * sim device counts copies per process, and operations in flight together
 * progress in a different order on each rank: the failing copy may belong
 * to different operations on different ranks; a rank whose own steps of an
 * operation worked learns of a failure elsewhere from the status agreement
 * and returns an error too, or (after a failed copy-out elsewhere) has the
 * right result.  So with --window every call that returns MPI_SUCCESS is
 * checked, --expect-fail counts the groups in which any rank saw an
 * error, every call must complete (no hang) and every later group must be
 * right.
 * Otherwise: exactly --expect-fail calls failed (0 or 1), the same call on every
 * rank, and every call after the failure worked.
 *
 * With --one-rank (the failure injected on one rank only): a rank may see
 * no failure at all (one whose data went out before the failing rank's
 * failed, as after a failed copy-out there); at least one rank sees
 * exactly --expect-fail, the ranks that fail fail the same call, and every
 * call that returns MPI_SUCCESS is right on every rank.
 *
 * Then --loop more calls, all of which must work, and the resident set
 * (/proc/self/statm) measured after the first tenth of them and at the end
 * must not have grown by more than --rss-bound KiB: what a failed call
 * allocated is freed, and nothing grows call by call.
 *
 * A plain MPI program: without collar (or without an injected failure) it
 * runs with --expect-fail 0.  Rank 0 prints "failed call: I class C (text)"
 * for each failed call, for the test script.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int    opt_count = 6144;
static int    opt_calls = 8;
static int    opt_expect = 0;
static int    opt_nonblocking = 0;
static int    opt_window = 1;     /* --window W: W MPI_Iallreduce, MPI_Waitall */
static int    opt_loop = 1000;
static long   opt_rss_bound_kb = 8192;
static int    opt_one_rank = 0;   /* --one-rank: the failure on one rank */
static int    opt_dup = 0;        /* --dup: on a fresh duplicate of
                                     MPI_COMM_WORLD (collar stages its
                                     nonblocking calls on it) */

static int input(int rank, int call, int i)
{
    return (rank + 1) * 1000 + (i % 997) + call;
}

/* One call; returns its return code (MPI_Wait's with --nonblocking). */
static int one_call(MPI_Comm comm, int *sbuf, int *rbuf, int call)
{
    const int rank = tu_world_rank();
    for (int i = 0; i < opt_count; i++) {
        sbuf[i] = input(rank, call, i);
        rbuf[i] = -1;
    }
    if (!opt_nonblocking) {
        return MPI_Allreduce(sbuf, rbuf, opt_count, MPI_INT, MPI_SUM, comm);
    }
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(sbuf, rbuf, opt_count, MPI_INT, MPI_SUM, comm, &req);
    if (rc != MPI_SUCCESS) {
        return rc;  /* a failure to start (an allocation): no request */
    }
    MPI_Status status;
    return MPI_Wait(&req, &status);
}

/* Calls first .. first + n - 1 as one group of MPI_Iallreduce and an
 * MPI_Waitall; their return codes into rcs[]. */
static void window_calls(MPI_Comm comm, int *sbuf, int *rbuf, int first, int n,
                         int *rcs)
{
    const int rank = tu_world_rank();
    MPI_Request reqs[64];
    MPI_Status st[64];
    for (int w = 0; w < n; w++) {
        int *sb = sbuf + (size_t)w * opt_count, *rb = rbuf + (size_t)w * opt_count;
        for (int i = 0; i < opt_count; i++) {
            sb[i] = input(rank, first + w, i);
            rb[i] = -1;
        }
        reqs[w] = MPI_REQUEST_NULL;
        /* A failure to start leaves reqs[w] null: its rc is the error. */
        rcs[w] = MPI_Iallreduce(sb, rb, opt_count, MPI_INT, MPI_SUM, comm, &reqs[w]);
        st[w].MPI_ERROR = MPI_SUCCESS;
    }
    int rc = MPI_Waitall(n, reqs, st);
    for (int w = 0; w < n; w++) {
        if (rcs[w] != MPI_SUCCESS) {
            continue;
        }
        rcs[w] = rc == MPI_ERR_IN_STATUS ? st[w].MPI_ERROR : rc;
        if (rc != MPI_ERR_IN_STATUS || st[w].MPI_ERROR != MPI_ERR_PENDING) {
            continue;
        }
        /* Neither failed nor completed (MPICH stops at the first failed
         * request): still active, to be completed again.  Its operation
         * must nevertheless be over: MPI_Waitall returned, and the MPI
         * library's own MPI_Waitall returns only after every request has
         * completed.  PMPI, so that nothing advances it here. */
        int done = 0;
        PMPI_Request_get_status(reqs[w], &done, MPI_STATUS_IGNORE);
        tu_check(done, "MPI_Waitall completes every operation", "call %d still "
                 "running after MPI_Waitall returned", first + w);
        rcs[w] = MPI_Wait(&reqs[w], MPI_STATUS_IGNORE);
    }
}

static int check_result(const int *rbuf, int call)
{
    const int size = tu_world_size();
    int bad = 0, first = -1;
    for (int i = 0; i < opt_count; i++) {
        long want = 0;
        for (int r = 0; r < size; r++) {
            want += input(r, call, i);
        }
        if (rbuf[i] != (int)want) {
            if (first < 0) {
                first = i;
            }
            bad++;
        }
    }
    return tu_check(bad == 0, "result", "call %d: %d of %d elements wrong, first "
                    "at %d", call, bad, opt_count, first);
}

static int err_class(int rc)
{
    int cls = -1;
    if (PMPI_Error_class(rc, &cls) != MPI_SUCCESS) {
        return -1;
    }
    return cls;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: test_faults [--count N] [--calls K] [--expect-fail 0|1]\n"
            "                   [--nonblocking] [--loop L] [--rss-bound KIB]\n"
            "                   [--window W] [--one-rank] [--dup]\n");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_faults");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--nonblocking") == 0) {
            opt_nonblocking = 1;
        } else if (strcmp(a, "--dup") == 0) {
            opt_dup = 1;
        } else if (strcmp(a, "--one-rank") == 0) {
            opt_one_rank = 1;
        } else if (v != NULL && strcmp(a, "--window") == 0) {
            opt_window = atoi(v); i++;
            opt_nonblocking = 1;
        } else if (v != NULL && strcmp(a, "--count") == 0) {
            opt_count = atoi(v); i++;
        } else if (v != NULL && strcmp(a, "--calls") == 0) {
            opt_calls = atoi(v); i++;
        } else if (v != NULL && strcmp(a, "--expect-fail") == 0) {
            opt_expect = atoi(v); i++;
        } else if (v != NULL && strcmp(a, "--loop") == 0) {
            opt_loop = atoi(v); i++;
        } else if (v != NULL && strcmp(a, "--rss-bound") == 0) {
            opt_rss_bound_kb = atol(v); i++;
        } else {
            usage();
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (opt_count < 1 || opt_calls < 1 || opt_loop < 0 || opt_window < 1
        || opt_window > 64) {
        usage();
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* Errors return, on the communicator and on MPI_COMM_WORLD / SELF (a
     * generalized request's error may be raised there). */
    /* MPI_COMM_WORLD, whose collar communicator is made in MPI_Init: the
     * nonblocking calls run collar's algorithms from the first (on a
     * duplicate they would be staged on it until a blocking allreduce). */
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (opt_dup) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    }

    int *sbuf = malloc((size_t)opt_window * (size_t)opt_count * sizeof(int));
    int *rbuf = malloc((size_t)opt_window * (size_t)opt_count * sizeof(int));
    int rcs[64];
    if (sbuf == NULL || rbuf == NULL) {
        tu_fail("malloc", "%d ints", opt_count);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    int nfailed = 0, failed_at = -1, group_hit = 0;
    for (int c = 0; c < opt_calls; c++) {
        const int w = c % opt_window;
        if (w == 0 && opt_window > 1) {
            const int n = opt_calls - c < opt_window ? opt_calls - c : opt_window;
            window_calls(comm, sbuf, rbuf, c, n, rcs);
            int mine = 0;
            for (int k = 0; k < n; k++) {
                mine |= rcs[k] != MPI_SUCCESS;
            }
            PMPI_Allreduce(&mine, &group_hit, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (group_hit) {
                nfailed++;
                if (tu_world_rank() == 0) {
                    printf("failed group: calls %d to %d\n", c, c + n - 1);
                }
            }
        }
        int rc = opt_window > 1 ? rcs[w] : one_call(comm, sbuf, rbuf, c);
        if (rc == MPI_SUCCESS) {
            check_result(rbuf + (size_t)w * opt_count, c);
            continue;
        }
        int cls = err_class(rc);
        tu_check(cls != MPI_SUCCESS && cls != -1, "error class",
                 "call %d returned %d, class %d", c, rc, cls);
        if (tu_world_rank() == 0) {
            printf("failed call: %d class %d (%s)\n", c, cls, tu_errstr(rc));
            fflush(stdout);
        }
        nfailed += opt_window == 1;
        if (failed_at < 0) {
            failed_at = c;
        }
    }
    int lo = 0, hi = 0;
    if (opt_one_rank) {
        int most = 0;
        PMPI_Allreduce(&nfailed, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        tu_check(nfailed == 0 || nfailed == opt_expect, "failed calls",
                 "%d failed, expected 0 or %d", nfailed, opt_expect);
        tu_check(most == opt_expect, "failed calls", "at most %d failed on a "
                 "rank, expected %d", most, opt_expect);
        /* The ranks that failed, failed the same call. */
        int key = failed_at >= 0 ? failed_at : INT_MAX;
        PMPI_Allreduce(&key, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        key = failed_at >= 0 ? failed_at : -1;
        PMPI_Allreduce(&key, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (opt_window == 1 && failed_at >= 0) {
            tu_check(failed_at == lo && failed_at == hi, "same call on the "
                     "failing ranks", "failed call %d to %d", lo, hi);
        }
        if (tu_world_rank() == 0) {
            printf("ranks failing: %d call(s) at most\n", most);
        }
    } else {
        tu_check(nfailed == opt_expect, "failed calls", "%d failed, expected %d",
                 nfailed, opt_expect);
        /* The same call failed on every rank. */
        PMPI_Allreduce(&failed_at, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        PMPI_Allreduce(&failed_at, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (opt_window == 1) {
            tu_check(lo == hi, "same call on every rank", "failed call %d to %d",
                     lo, hi);
        }
    }

    /* Many more calls: all work, and memory does not grow. */
    long rss0 = -1;
    const int warm = opt_loop / 10;
    int loop_bad = 0;
    for (int c = 0; c < opt_loop; c++) {
        if (c == warm) {
            rss0 = tu_rss_kb();
        }
        int rc = one_call(comm, sbuf, rbuf, opt_calls + c);
        if (rc != MPI_SUCCESS) {
            loop_bad++;
            tu_check_rc(rc, "call after the failure");
        } else if (!check_result(rbuf, opt_calls + c)) {
            loop_bad++;
        }
        if (loop_bad > 3) {
            break;  /* enough said */
        }
    }
    if (opt_loop > 0) {
        long rss1 = tu_rss_kb();
        tu_check(rss0 >= 0 && rss1 >= 0 && rss1 - rss0 <= opt_rss_bound_kb,
                 "memory", "resident set %ld KiB after %d calls, %ld KiB after "
                 "%d (bound: +%ld KiB)", rss0, warm, rss1, opt_loop,
                 opt_rss_bound_kb);
        if (tu_world_rank() == 0) {
            printf("rss: %ld KiB after %d calls, %ld KiB after %d\n", rss0, warm,
                   rss1, opt_loop);
        }
    }

    free(sbuf);
    free(rbuf);
    if (opt_dup) {
        MPI_Comm_free(&comm);
    }
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
