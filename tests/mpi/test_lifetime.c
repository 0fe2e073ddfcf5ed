/*
 * collar - communicator lifetime and attributes.
 *
 *   free   MPI_Iallreduce on a fresh duplicate of MPI_COMM_WORLD (after one
 *          blocking allreduce, which makes collar's own communicator), then
 *          MPI_Comm_free of it, then (after creating and freeing other
 *          communicators, which reuse the memory freed with it) MPI_Wait:
 *          legal MPI, the operation outlives the handle.  The result must
 *          be right on every rank.  --rounds N (default 200), --window W
 *          operations in flight at once (default 3).
 *   attr   a user attribute whose copy callback counts its calls, set on a
 *          duplicate of MPI_COMM_WORLD; allreduces on it (blocking and
 *          not) must not call it (nothing the application does copies the
 *          communicator); the application's own MPI_Comm_dup calls it once.
 *
 * --count N elements of MPI_INT (default 6144).  A plain MPI program: it
 * gives the same verdict without collar.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count = 6144;

static int value(int rank, int i, int round)
{
    return (rank + 1) * 7 + i * 3 + round;
}

static int expected(int size, int i, int round)
{
    return 7 * size * (size + 1) / 2 + size * (i * 3 + round);
}

static void check_result(const int *rbuf, int size, int round, const char *what)
{
    int bad = 0;
    for (int i = 0; i < count && bad < 3; i++) {
        const int want = expected(size, i, round);
        if (rbuf[i] != want) {
            tu_fail(what, "round %d element %d: %d, expected %d", round, i,
                    rbuf[i], want);
            bad++;
        }
    }
    tu_check(bad == 0, what, "round %d", round);
}

static void test_free(int rounds, int window)
{
    const int rank = tu_world_rank(), size = tu_world_size();
    int **sbuf = calloc((size_t)window, sizeof(*sbuf));
    int **rbuf = calloc((size_t)window, sizeof(*rbuf));
    MPI_Request *req = calloc((size_t)window, sizeof(*req));
    if (sbuf == NULL || rbuf == NULL || req == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int w = 0; w < window; w++) {
        sbuf[w] = malloc((size_t)count * sizeof(int));
        rbuf[w] = malloc((size_t)count * sizeof(int));
        if (sbuf[w] == NULL || rbuf[w] == NULL) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    for (int r = 0; r < rounds; r++) {
        for (int w = 0; w < window; w++) {
            MPI_Comm c;
            int rc = MPI_Comm_dup(MPI_COMM_WORLD, &c);
            if (!tu_check_rc(rc, "MPI_Comm_dup")) {
                return;
            }
            MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
            /* A blocking allreduce first: collar's communicator of `c` is
             * made there, and the MPI_Iallreduce runs on it (before one,
             * collar hands it to the MPI library on `c` itself, and Open
             * MPI 4.1 crashes when `c` is freed with its own nonblocking
             * collective in flight, with or without collar). */
            int one = 1, sum = 0;
            tu_check_rc(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c),
                        "MPI_Allreduce");
            for (int i = 0; i < count; i++) {
                sbuf[w][i] = value(rank, i, r + w);
                rbuf[w][i] = -1;
            }
            rc = MPI_Iallreduce(sbuf[w], rbuf[w], count, MPI_INT, MPI_SUM, c,
                                &req[w]);
            tu_check_rc(rc, "MPI_Iallreduce");
            rc = MPI_Comm_free(&c);
            tu_check_rc(rc, "MPI_Comm_free");
        }
        /* Other communicators come and go while the operations are in
         * flight: what was freed with the handles is handed out again. */
        for (int k = 0; k < 2; k++) {
            MPI_Comm d;
            if (tu_check_rc(MPI_Comm_dup(MPI_COMM_WORLD, &d), "MPI_Comm_dup")) {
                int one = 1, sum = 0;
                tu_check_rc(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d),
                            "MPI_Allreduce");
                tu_check(sum == size, "MPI_Allreduce", "%d, expected %d", sum,
                         size);
                MPI_Comm_free(&d);
            }
        }
        for (int w = 0; w < window; w++) {
            tu_check_rc(MPI_Wait(&req[w], MPI_STATUS_IGNORE), "MPI_Wait");
            check_result(rbuf[w], size, r + w, "freed communicator");
        }
    }
    for (int w = 0; w < window; w++) {
        free(sbuf[w]);
        free(rbuf[w]);
    }
    free(sbuf);
    free(rbuf);
    free(req);
}

static int copies;

static int count_copy(MPI_Comm comm, int keyval, void *extra, void *in,
                       void *out, int *flag)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static void test_attr(void)
{
    const int rank = tu_world_rank(), size = tu_world_size();
    int keyval;
    static int token;
    MPI_Comm c, d;
    tu_check_rc(MPI_Comm_create_keyval(count_copy, MPI_COMM_NULL_DELETE_FN,
                                       &keyval, NULL), "MPI_Comm_create_keyval");
    tu_check_rc(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup");
    tu_check_rc(MPI_Comm_set_attr(c, keyval, &token), "MPI_Comm_set_attr");
    int *sbuf = malloc((size_t)count * sizeof(int));
    int *rbuf = malloc((size_t)count * sizeof(int));
    if (sbuf == NULL || rbuf == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < count; i++) {
            sbuf[i] = value(rank, i, round);
        }
        if (round == 0) {
            tu_check_rc(MPI_Allreduce(sbuf, rbuf, count, MPI_INT, MPI_SUM, c),
                        "MPI_Allreduce");
        } else {
            MPI_Request req;
            tu_check_rc(MPI_Iallreduce(sbuf, rbuf, count, MPI_INT, MPI_SUM, c,
                                       &req), "MPI_Iallreduce");
            tu_check_rc(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
        }
        check_result(rbuf, size, round, "attribute communicator");
    }
    tu_check(copies == 0, "attribute copy callback",
             "called %d times by allreduces on the communicator, expected 0",
             copies);
    tu_check_rc(MPI_Comm_dup(c, &d), "MPI_Comm_dup");
    tu_check(copies == 1, "attribute copy callback",
             "called %d times after one MPI_Comm_dup, expected 1", copies);
    MPI_Comm_free(&d);
    MPI_Comm_free(&c);
    MPI_Comm_free_keyval(&keyval);
    free(sbuf);
    free(rbuf);
}

int main(int argc, char **argv)
{
    int rounds = 200, window = 3;
    MPI_Init(&argc, &argv);
    tu_init("test_lifetime");
    const char *mode = argc > 1 ? argv[1] : "";
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--rounds") == 0) {
            rounds = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--window") == 0) {
            window = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--count") == 0) {
            count = atoi(argv[i + 1]);
        }
    }
    if (rounds < 1 || window < 1 || count < 1
        || (strcmp(mode, "free") != 0 && strcmp(mode, "attr") != 0)) {
        fprintf(stderr, "usage: test_lifetime free|attr [--rounds N] "
                "[--window N] [--count N]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (strcmp(mode, "free") == 0) {
        test_free(rounds, window);
    } else {
        test_attr();
    }
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
