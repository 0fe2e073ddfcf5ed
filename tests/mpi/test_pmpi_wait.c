/*
 * collar's requests completed through the profiling entry points alone
 * (PMPI_Wait, PMPI_Waitall, a PMPI_Test loop): what a tool, or a Fortran
 * binding that calls the profiling layer directly, does.  No call of
 * collar's runs between the start and the completion, so the copies back
 * into the device buffers and the completion of collar's request are left
 * to collar's progress thread (run it: COLLAR_PROGRESS=thread, or auto in a
 * program that asks for MPI_THREAD_MULTIPLE).
 *
 *   persistent   MPI_Allreduce_init and MPI_Bcast_init (where the MPI
 *                library has persistent collectives), each MPI_Start
 *                completed by PMPI_Wait, both by PMPI_Waitall, the
 *                allreduce by a PMPI_Test loop
 *   nonblocking  MPI_Iallreduce on a new duplicate of MPI_COMM_WORLD (its
 *                first call: the MPI library's own on host copies, collar's
 *                communicator not made yet) and MPI_Ibcast, each completed
 *                by PMPI_Wait
 *
 * Every value is checked on every rank after every completion.
 *
 * Usage: test_pmpi_wait [rounds [single|multiple [count]]]  (defaults 5,
 * multiple, 1000 doubles).  Without the thread a PMPI_Wait on collar's
 * request never returns (docs/reliability.md, "Known limitations"): the
 * test's timeout is its failure.
 */
#include "config.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, count;

static double value(int r, int i, int round)
{
    return (double)((r + 1) * 3 + i % 101 + round * 7);
}

static void check_sum(const double *buf, int round, const char *what)
{
    int bad = 0, first = -1;
    for (int i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < size; r++) {
            want += value(r, i, round);
        }
        if (buf[i] != want) {
            if (first < 0) {
                first = i;
            }
            bad++;
        }
    }
    tu_check(bad == 0, what, "round %d: %d wrong elements, first at %d", round,
             bad, first);
}

static void check_bcast(const double *buf, int round, const char *what)
{
    int bad = 0;
    for (int i = 0; i < count; i++) {
        bad += buf[i] != value(size, i, round);
    }
    tu_check(bad == 0, what, "round %d: %d wrong elements", round, bad);
}

typedef struct {
    double *s, *r, *b;      /* host */
    double *ds, *dr, *db;   /* what MPI gets */
    size_t bytes;
} bufs_t;

static void fill(bufs_t *x, int round)
{
    for (int i = 0; i < count; i++) {
        x->s[i] = value(rank, i, round);
        x->r[i] = -1;
        x->b[i] = rank == size - 1 ? value(size, i, round) : -1;
    }
    tu_dev_put(x->ds, x->s, x->bytes);
    tu_dev_put(x->dr, x->r, x->bytes);
    tu_dev_put(x->db, x->b, x->bytes);
}

static void fetch(bufs_t *x)
{
    tu_dev_get(x->r, x->dr, x->bytes);
    tu_dev_get(x->b, x->db, x->bytes);
}

#if defined(HAVE_PMPI_ALLREDUCE_INIT)
static void persistent(bufs_t *x, int rounds)
{
    MPI_Request req[2];
    int ok = tu_check_rc(MPI_Allreduce_init(x->ds, x->dr, count, MPI_DOUBLE, MPI_SUM,
                                            MPI_COMM_WORLD, MPI_INFO_NULL, &req[0]),
                         "persistent: MPI_Allreduce_init");
    ok &= tu_check_rc(MPI_Bcast_init(x->db, count, MPI_DOUBLE, size - 1,
                                     MPI_COMM_WORLD, MPI_INFO_NULL, &req[1]),
                      "persistent: MPI_Bcast_init");
    for (int round = 0; ok && round < rounds; round++) {
        fill(x, round);
        tu_check_rc(MPI_Start(&req[0]), "persistent: MPI_Start");
        tu_check_rc(PMPI_Wait(&req[0], MPI_STATUS_IGNORE), "persistent: PMPI_Wait");
        tu_check_rc(MPI_Start(&req[1]), "persistent: MPI_Start");
        tu_check_rc(PMPI_Wait(&req[1], MPI_STATUS_IGNORE), "persistent: PMPI_Wait");
        fetch(x);
        check_sum(x->r, round, "persistent allreduce, PMPI_Wait");
        check_bcast(x->b, round, "persistent bcast, PMPI_Wait");

        fill(x, round + 100);
        tu_check_rc(MPI_Startall(2, req), "persistent: MPI_Startall");
        tu_check_rc(PMPI_Waitall(2, req, tu_statuses_ignore()),
                    "persistent: PMPI_Waitall");
        fetch(x);
        check_sum(x->r, round + 100, "persistent allreduce, PMPI_Waitall");
        check_bcast(x->b, round + 100, "persistent bcast, PMPI_Waitall");

        fill(x, round + 200);
        tu_check_rc(MPI_Start(&req[0]), "persistent: MPI_Start");
        int flag = 0;
        const double t0 = MPI_Wtime();
        while (!flag) {
            tu_check_rc(PMPI_Test(&req[0], &flag, MPI_STATUS_IGNORE),
                        "persistent: PMPI_Test");
            tu_progress_guard(t0, "persistent allreduce, PMPI_Test loop");
        }
        fetch(x);
        check_sum(x->r, round + 200, "persistent allreduce, PMPI_Test loop");
    }
    for (int i = 0; i < 2; i++) {
        if (req[i] != MPI_REQUEST_NULL) {
            MPI_Request_free(&req[i]);
        }
    }
}
#endif

static void nonblocking(bufs_t *x, int rounds)
{
    for (int round = 0; round < rounds; round++) {
        MPI_Comm fresh;
        MPI_Request req;
        tu_check_rc(MPI_Comm_dup(MPI_COMM_WORLD, &fresh), "MPI_Comm_dup");
        fill(x, round);
        tu_check_rc(MPI_Iallreduce(x->ds, x->dr, count, MPI_DOUBLE, MPI_SUM, fresh,
                                   &req), "nonblocking: MPI_Iallreduce");
        tu_check_rc(PMPI_Wait(&req, MPI_STATUS_IGNORE), "nonblocking: PMPI_Wait");
        tu_check_rc(MPI_Ibcast(x->db, count, MPI_DOUBLE, size - 1, MPI_COMM_WORLD,
                               &req), "nonblocking: MPI_Ibcast");
        tu_check_rc(PMPI_Wait(&req, MPI_STATUS_IGNORE), "nonblocking: PMPI_Wait");
        fetch(x);
        check_sum(x->r, round, "MPI_Iallreduce on a new communicator, PMPI_Wait");
        check_bcast(x->b, round, "MPI_Ibcast, PMPI_Wait");
        MPI_Comm_free(&fresh);
    }
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 5;
    const int single = argc > 2 && strcmp(argv[2], "single") == 0;
    count = argc > 3 ? atoi(argv[3]) : 1000;
    int provided = 0;
    MPI_Init_thread(&argc, &argv, single ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE,
                    &provided);
    tu_init("test_pmpi_wait");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bufs_t x;
    x.bytes = (size_t)count * sizeof(double);
    x.s = malloc(x.bytes);
    x.r = malloc(x.bytes);
    x.b = malloc(x.bytes);
    x.ds = tu_dev_mirror(x.s, x.bytes);
    x.dr = tu_dev_mirror(x.r, x.bytes);
    x.db = tu_dev_mirror(x.b, x.bytes);
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
    persistent(&x, rounds);
#else
    if (rank == 0) {
        printf("test_pmpi_wait: no persistent collectives in this MPI library\n");
    }
#endif
    nonblocking(&x, rounds);
    tu_dev_unmirror(x.ds, x.s);
    tu_dev_unmirror(x.dr, x.r);
    tu_dev_unmirror(x.db, x.b);
    free(x.s);
    free(x.r);
    free(x.b);
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
