/*
 * collar - calls for the consistency check (COLLAR_CHECK=1, tests/mpi/check.test).
 *
 * Usage: test_check MODE
 *
 * Erroneous modes: the ranks disagree, on purpose, so that the program is
 * wrong under any MPI library (a hang, a truncation or a wrong result);
 * under collar with COLLAR_CHECK=1 the call must fail on every rank with a
 * message instead.  The program refuses to run them without COLLAR_CHECK=1.
 *   count   rank 1 passes count + 1
 *   zero    rank 0 passes count 0, the others 4
 *   op      rank 1 passes MPI_MAX, the others MPI_SUM
 *   userop  rank 0 passes a user-defined op, the others MPI_SUM
 *   type    rank 1 passes MPI_DOUBLE, the others MPI_INT (same count)
 *   coll    rank 1 calls MPI_Iallreduce, the others MPI_Allreduce
 *   bigcount  MPI_Allreduce_c with counts that differ only above INT_MAX:
 *           2^31 + 4 bytes on rank 0, 2^32 + 4 on the others, from
 *           buffers of 4 bytes (the check fails the call before anything
 *           is read; a check that let it through would read past them).
 *           A library without MPI_Allreduce_c (MPI-3) skips it.
 * With MPI_ERRORS_ARE_FATAL the job must end there; if the call returns, the
 * program says so and exits 3.
 *   aware   a correct program in a misconfigured job (COLLAR_MPI_CUDA_AWARE
 *           set on some ranks only, buffers on the device): an
 *           MPI_Allreduce, then an MPI_Iallreduce on a fresh communicator
 *           (the MPI library's allreduce, staged on some ranks only), then
 *           one on MPI_COMM_WORLD (the same on collar's communicator, or
 *           collar's schedule with the progress thread), each with
 *           MPI_ERRORS_RETURN: every rank must get MPI_ERR_OTHER, from the
 *           call or its MPI_Wait.  Nothing is used after (the library's
 *           allreduces of a failed nonblocking check are left in flight);
 *           each rank prints "test_check aware: rank R ok".
 *   return  each of the above on a communicator with MPI_ERRORS_RETURN:
 *           every rank must get MPI_ERR_ARG (and MPI_REQUEST_NULL from
 *           MPI_Iallreduce), and a matching call after each must work.
 *
 * Correct modes (any MPI library, with or without collar):
 *   late [warm]  on a fresh communicator (warm: after a blocking allreduce
 *             on it), rank 1 starts an MPI_Iallreduce 2 s after the
 *             others.  Under collar with a start that fails on rank 0
 *             (COLLAR_SIM_FAIL there, after the start has issued its
 *             collectives), rank 0's start must return MPI_ERR_OTHER in
 *             under a second, without waiting for rank 1; every other
 *             rank gets the right result or an error; then a second
 *             MPI_Iallreduce is right everywhere.  Without a failure every
 *             start must succeed and every result be right.
 *   progress  rank 0 starts two MPI_Iallreduce and waits for both; rank 1
 *             waits for the first before it starts the second: the check of
 *             the second on rank 0 must not stop the first from advancing.
 *   zeros     count 0 and small calls, blocking and nonblocking, on
 *             MPI_COMM_WORLD and on a split communicator.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++) {
        ((int *)inout)[i] += ((int *)in)[i];
    }
}

static const char *const kinds[] = { "count", "zero", "op", "userop", "type", "coll" };
#define NKINDS ((int)(sizeof(kinds) / sizeof(kinds[0])))

/* The call of one erroneous mode on comm: its return code, or -1 for an
 * unknown mode.  *req: the request of a nonblocking call, else untouched. */
static int erroneous(const char *mode, MPI_Comm comm, MPI_Request *req)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    int in[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, out[8];
    double din[8] = { 0 }, dout[8];
    if (strcmp(mode, "count") == 0) {
        return MPI_Allreduce(in, out, rank == 1 ? 5 : 4, MPI_INT, MPI_SUM, comm);
    } else if (strcmp(mode, "zero") == 0) {
        return MPI_Allreduce(in, out, rank == 0 ? 0 : 4, MPI_INT, MPI_SUM, comm);
    } else if (strcmp(mode, "op") == 0) {
        return MPI_Allreduce(in, out, 4, MPI_INT, rank == 1 ? MPI_MAX : MPI_SUM, comm);
    } else if (strcmp(mode, "userop") == 0) {
        MPI_Op user;
        MPI_Op_create(user_sum, 1, &user);
        int rc = MPI_Allreduce(in, out, 4, MPI_INT, rank == 0 ? user : MPI_SUM, comm);
        MPI_Op_free(&user);
        return rc;
    } else if (strcmp(mode, "type") == 0) {
        return rank == 1 ? MPI_Allreduce(din, dout, 4, MPI_DOUBLE, MPI_SUM, comm)
                         : MPI_Allreduce(in, out, 4, MPI_INT, MPI_SUM, comm);
    } else if (strcmp(mode, "coll") == 0) {
        if (rank == 1) {
            return MPI_Iallreduce(in, out, 4, MPI_INT, MPI_SUM, comm, req);
        }
        return MPI_Allreduce(in, out, 4, MPI_INT, MPI_SUM, comm);
    } else if (strcmp(mode, "bigcount") == 0) {
#if MPI_VERSION >= 4
        const MPI_Count count = ((MPI_Count)1 << (rank == 0 ? 31 : 32)) + 4;
        return MPI_Allreduce_c(in, out, count, MPI_BYTE, MPI_BOR, comm);
#else
        tu_skip("MPI_Allreduce_c needs an MPI-4 library");
#endif
    }
    return -1;
}

/* Every kind of disagreement on a communicator that returns errors: every
 * rank fails alike (MPI_ERR_ARG), and where every rank's call was blocking
 * the communicator still works afterwards.  A nonblocking start is never
 * held up by the check (it would wait for the other ranks): its request
 * carries the error, returned by the completion call; the MPI library's
 * own collective it started is left in flight, so that communicator is
 * not used again (each kind has a communicator of its own). */
static void mode_return(void)
{
    int size = tu_world_size();
    int in[4] = { 1, 2, 3, 4 }, out[4];
    for (int k = 0; k < NKINDS; k++) {
        MPI_Comm comm;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = erroneous(kinds[k], comm, &req);
        const int started = rc == MPI_SUCCESS && req != MPI_REQUEST_NULL;
        if (started) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        int cls = MPI_SUCCESS;
        MPI_Error_class(rc, &cls);
        tu_check(cls == MPI_ERR_ARG, kinds[k], "got %s, not MPI_ERR_ARG", tu_errstr(rc));
        tu_check(req == MPI_REQUEST_NULL, kinds[k], "request not MPI_REQUEST_NULL");
        int nonblocking = started, any = 0;
        PMPI_Allreduce(&nonblocking, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (!any) {
            rc = MPI_Allreduce(in, out, 4, MPI_INT, MPI_SUM, comm);
            tu_check_rc(rc, "matching call after the mismatch");
            for (int i = 0; i < 4; i++) {
                tu_check(out[i] == in[i] * size, "result", "out[%d] = %d", i, out[i]);
            }
        }
        MPI_Comm_free(&comm);
    }
}

/* The calls of mode aware on comm (nonblocking: an MPI_Iallreduce and its
 * MPI_Wait): 1 when the call failed with MPI_ERR_OTHER. */
static int aware_call(MPI_Comm comm, int nonblocking, const char *what)
{
    const int n = 1000;
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) {
        a[i] = 1.0f;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rc;
    if (nonblocking) {
        MPI_Request req = MPI_REQUEST_NULL;
        rc = MPI_Iallreduce(a, b, n, MPI_FLOAT, MPI_SUM, comm, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    } else {
        rc = MPI_Allreduce(a, b, n, MPI_FLOAT, MPI_SUM, comm);
    }
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    if (cls != MPI_ERR_OTHER) {
        printf("rank %d: FAIL %s: %s, not MPI_ERR_OTHER\n", tu_world_rank(), what,
               tu_errstr(rc));
    }
    /* (The buffers of a failed nonblocking call may still be the library's.) */
    if (!nonblocking) {
        free(a);
        free(b);
    }
    return cls == MPI_ERR_OTHER;
}

static int mode_aware(void)
{
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    int ok = aware_call(a, 0, "MPI_Allreduce");
    ok &= aware_call(b, 1, "MPI_Iallreduce on a fresh communicator");
    ok &= aware_call(MPI_COMM_WORLD, 1, "MPI_Iallreduce on MPI_COMM_WORLD");
    printf("test_check aware: rank %d %s\n", tu_world_rank(), ok ? "ok" : "FAILED");
    fflush(stdout);
    return ok ? 0 : 1;
}

static void mode_late(int warm)
{
    const int rank = tu_world_rank(), size = tu_world_size();
    /* (Rank 0 alone has the failure; the others learn it here, past
     * collar.) */
    int failing = getenv("COLLAR_SIM_FAIL") != NULL && rank == 0;
    PMPI_Allreduce(MPI_IN_PLACE, &failing, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const int n = 1000;
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) {
        a[i] = (float)(rank + 1);
    }
    const float want = (float)(size * (size + 1) / 2);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (warm) {
        tu_check_rc(MPI_Allreduce(a, b, n, MPI_FLOAT, MPI_SUM, comm), "warm-up");
    }
    if (rank == 1) {
        sleep(2);
    }
    MPI_Request req = MPI_REQUEST_NULL;
    const double t0 = MPI_Wtime();
    int rc = MPI_Iallreduce(a, b, n, MPI_FLOAT, MPI_SUM, comm, &req);
    const double took = MPI_Wtime() - t0;
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    if (failing && rank == 0) {
        tu_check(cls == MPI_ERR_OTHER, "failed start", "%s, not MPI_ERR_OTHER",
                 tu_errstr(rc));
        tu_check(req == MPI_REQUEST_NULL, "failed start", "a request");
        tu_check(took < 1.0, "failed start", "took %.2f s: it waited for rank 1",
                 took);
        printf("test_check late: rank %d: the failed start took %.3f s\n", rank, took);
    } else if (rank != 1) {
        tu_check(rc == MPI_SUCCESS, "start", "%s", tu_errstr(rc));
        tu_check(took < 1.0, "start", "took %.2f s: it waited for rank 1", took);
    }
    if (rc == MPI_SUCCESS && req != MPI_REQUEST_NULL) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Error_class(rc, &cls);
        if (rc == MPI_SUCCESS) {
            tu_check(b[0] == want && b[n - 1] == want, "result", "%g, not %g",
                     b[0], want);
        } else {
            tu_check(failing && cls == MPI_ERR_OTHER, "wait", "%s", tu_errstr(rc));
        }
    }
    /* The communicator goes on. */
    rc = MPI_Iallreduce(a, b, n, MPI_FLOAT, MPI_SUM, comm, &req);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    tu_check_rc(rc, "the call after");
    tu_check(rc != MPI_SUCCESS || b[0] == want, "result after", "%g, not %g",
             b[0], want);
    MPI_Comm_free(&comm);
    free(a);
    free(b);
}

static void mode_progress(void)
{
    int rank = tu_world_rank(), size = tu_world_size();
    const int n = 64 * 1024;  /* 256 KiB of int */
    int *a = malloc((size_t)n * sizeof(int)), *ra = malloc((size_t)n * sizeof(int));
    int b = rank + 1, rb = 0;
    for (int i = 0; i < n; i++) {
        a[i] = i % 1000 + rank;
    }
    MPI_Request req[2];
    if (rank == 0) {
        tu_check_rc(MPI_Iallreduce(a, ra, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[0]), "ia");
        tu_check_rc(MPI_Iallreduce(&b, &rb, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[1]), "ib");
        tu_check_rc(MPI_Waitall(2, req, tu_statuses_ignore()), "waitall");
    } else {
        tu_check_rc(MPI_Iallreduce(a, ra, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[0]), "ia");
        tu_check_rc(MPI_Wait(&req[0], MPI_STATUS_IGNORE), "wait a");
        tu_check_rc(MPI_Iallreduce(&b, &rb, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[1]), "ib");
        tu_check_rc(MPI_Wait(&req[1], MPI_STATUS_IGNORE), "wait b");
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        bad += ra[i] != (i % 1000) * size + size * (size - 1) / 2;
    }
    tu_check(bad == 0, "large result", "%d wrong elements", bad);
    tu_check(rb == size * (size + 1) / 2, "small result", "got %d", rb);
    free(a);
    free(ra);
}

static void mode_zeros(void)
{
    int rank = tu_world_rank();
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Comm comms[2] = { MPI_COMM_WORLD, half };
    for (int c = 0; c < 2; c++) {
        int size;
        MPI_Comm_size(comms[c], &size);
        int in[4] = { 1, 2, 3, 4 }, out[4] = { 0 };
        tu_check_rc(MPI_Allreduce(in, out, 0, MPI_INT, MPI_SUM, comms[c]), "count 0");
        tu_check_rc(MPI_Allreduce(NULL, NULL, 0, MPI_DOUBLE, MPI_MAX, comms[c]),
                    "count 0, NULL buffers");
        MPI_Request req;
        tu_check_rc(MPI_Iallreduce(in, out, 0, MPI_INT, MPI_SUM, comms[c], &req),
                    "nonblocking count 0");
        tu_check_rc(MPI_Wait(&req, MPI_STATUS_IGNORE), "wait count 0");
        tu_check_rc(MPI_Allreduce(in, out, 4, MPI_INT, MPI_SUM, comms[c]), "count 4");
        tu_check(out[3] == 4 * size, "count 4 result", "got %d", out[3]);
        tu_check_rc(MPI_Iallreduce(MPI_IN_PLACE, in, 4, MPI_INT, MPI_MAX, comms[c], &req),
                    "nonblocking in place");
        tu_check_rc(MPI_Wait(&req, MPI_STATUS_IGNORE), "wait in place");
        tu_check(in[2] == 3, "in place result", "got %d", in[2]);
    }
    MPI_Comm_free(&half);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int wrong = strcmp(mode, "progress") != 0 && strcmp(mode, "zeros") != 0
                && strcmp(mode, "late") != 0;
    const char *check = getenv("COLLAR_CHECK");
    if (wrong && (check == NULL || strcmp(check, "1") != 0)) {
        fprintf(stderr, "test_check: mode '%s' is an erroneous MPI program: "
                "run it only under collar with COLLAR_CHECK=1\n", mode);
        return 2;
    }
    MPI_Init(&argc, &argv);
    tu_init("test_check");
    if (tu_world_size() < 2) {
        tu_skip("needs 2 ranks or more");
    }
    int status = 0;
    if (strcmp(mode, "aware") == 0) {
        status = mode_aware();
        MPI_Finalize();
        return status;
    }
    if (strcmp(mode, "return") == 0) {
        mode_return();
    } else if (strcmp(mode, "progress") == 0) {
        mode_progress();
    } else if (strcmp(mode, "late") == 0) {
        mode_late(argc > 2 && strcmp(argv[2], "warm") == 0);
    } else if (strcmp(mode, "zeros") == 0) {
        mode_zeros();
    } else {
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = erroneous(mode, MPI_COMM_WORLD, &req);
        if (rc == -1) {
            fprintf(stderr, "test_check: unknown mode '%s'\n", mode);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (rc == MPI_SUCCESS && req != MPI_REQUEST_NULL) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        printf("rank %d: FAIL: the erroneous call returned (%s)\n", tu_world_rank(),
               tu_errstr(rc));
        fflush(stdout);
        MPI_Finalize();
        return 3;
    }
    status = tu_finish();
    MPI_Finalize();
    return status;
}
