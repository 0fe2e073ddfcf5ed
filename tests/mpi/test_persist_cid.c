/*
 * Persistent collectives made after the application has used up its
 * communicators.  The application duplicates MPI_COMM_WORLD until the MPI
 * library refuses (no context id left: MPICH has 2048 a process), which it
 * may do: it checks the error, with an error handler that returns.  A
 * persistent collective needs no new context id in the MPI library, so
 *
 *   1. with every context id taken, MPI_Allreduce_init, MPI_Bcast_init (on
 *      MPI_COMM_WORLD) and MPI_Reduce_init (on one of the application's
 *      duplicates) succeed, and started again and again (MPI_Startall,
 *      MPI_Waitall) give the right values on every rank;
 *   2. once the application frees one duplicate, a persistent allreduce
 *      made then succeeds too, and the application can still make its
 *      duplicate afterwards: the context id it freed is its own, not
 *      collar's to take.
 *
 * No error handler may be called after the refusal that ends the loop:
 * MPI_COMM_WORLD and MPI_COMM_SELF carry handlers that count their calls
 * and return (a layer that makes a communicator of its own for the
 * operation would raise its failure there, or on MPI_COMM_SELF, whose
 * default handler ends the job).
 *
 * Usage: test_persist_cid [count [keep]]   (default 4099 ints); keep: the
 * duplicates stay until MPI_Finalize (what runs in it must not need a new
 * communicator either: COLLAR_STATS's report).  Exit 77 where the MPI
 * library has no persistent collectives; "no limit" when it gave 16384
 * duplicates without refusing (the checks still run).
 */
#include "config.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_DUPS 16384

#if defined(HAVE_PMPI_ALLREDUCE_INIT)
static int rank, size;
static int world_calls, self_calls;

static void count_world(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    world_calls++;
}

static void count_self(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    self_calls++;
}

static int value(int r, int i, int round)
{
    return (r + 1) * 13 + i % 997 + round * 29;
}

static void check_sum(const int *buf, int count, int round, const char *what)
{
    tu_check_int_sum(buf, count, size, value, round, what);
}

static void check_handlers(const char *what)
{
    tu_check(world_calls == 0 && self_calls == 0, what,
             "error handlers called: MPI_COMM_WORLD's %d times, "
             "MPI_COMM_SELF's %d times", world_calls, self_calls);
    world_calls = 0;
    self_calls = 0;
}

/* The persistent operations of part 1, started `rounds` times. */
static void part1(MPI_Comm dup, int count)
{
    const size_t bytes = (size_t)count * sizeof(int);
    int *s = malloc(bytes), *r = malloc(bytes), *b = malloc(bytes);
    int g[1] = { 0 }, mine = 0;
    int *ds = tu_dev_mirror(s, bytes), *dr = tu_dev_mirror(r, bytes);
    int *db = tu_dev_mirror(b, bytes);
    int *dg = tu_dev_mirror(g, sizeof(int));
    int *dm = tu_dev_mirror(&mine, sizeof(int));
    MPI_Request req[3] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL };
    int ok = tu_check_rc(MPI_Allreduce_init(ds, dr, count, MPI_INT, MPI_SUM,
                                            MPI_COMM_WORLD, MPI_INFO_NULL, &req[0]),
                         "exhausted: MPI_Allreduce_init");
    ok &= tu_check_rc(MPI_Bcast_init(db, count, MPI_INT, size - 1, MPI_COMM_WORLD,
                                     MPI_INFO_NULL, &req[1]),
                      "exhausted: MPI_Bcast_init");
    ok &= tu_check_rc(MPI_Reduce_init(dm, dg, 1, MPI_INT, MPI_SUM, 0, dup,
                                      MPI_INFO_NULL, &req[2]),
                      "exhausted: MPI_Reduce_init on a duplicate");
    check_handlers("exhausted: the inits");
    for (int round = 0; ok && round < 4; round++) {
        for (int i = 0; i < count; i++) {
            s[i] = value(rank, i, round);
            b[i] = rank == size - 1 ? value(size, i, round) : -1;
        }
        mine = value(rank, 0, round);
        tu_dev_put(ds, s, bytes);
        tu_dev_put(db, b, bytes);
        tu_dev_put(dm, &mine, sizeof(int));
        tu_check_rc(MPI_Startall(3, req), "exhausted: MPI_Startall");
        tu_check_rc(MPI_Waitall(3, req, tu_statuses_ignore()), "exhausted: MPI_Waitall");
        tu_dev_get(r, dr, bytes);
        tu_dev_get(b, db, bytes);
        tu_dev_get(g, dg, sizeof(int));
        check_sum(r, count, round, "exhausted: allreduce");
        int bad = 0;
        for (int i = 0; i < count; i++) {
            bad += b[i] != value(size, i, round);
        }
        tu_check(bad == 0, "exhausted: bcast", "round %d: %d wrong elements",
                 round, bad);
        if (rank == 0) {
            int want = 0;
            for (int q = 0; q < size; q++) {
                want += value(q, 0, round);
            }
            tu_check(g[0] == want, "exhausted: reduce", "round %d: %d, want %d",
                     round, g[0], want);
        }
    }
    for (int i = 0; i < 3; i++) {
        if (req[i] != MPI_REQUEST_NULL) {
            tu_check_rc(MPI_Request_free(&req[i]), "exhausted: MPI_Request_free");
        }
    }
    check_handlers("exhausted: the starts and completions");
    tu_dev_unmirror(ds, s);
    tu_dev_unmirror(dr, r);
    tu_dev_unmirror(db, b);
    tu_dev_unmirror(dg, g);
    tu_dev_unmirror(dm, &mine);
    free(s);
    free(r);
    free(b);
}

/* Part 2: one context id free, which is the application's. */
static void part2(int count)
{
    const size_t bytes = (size_t)count * sizeof(int);
    int *r = malloc(bytes);
    int *dr = tu_dev_mirror(r, bytes);
    MPI_Request req = MPI_REQUEST_NULL;
    if (tu_check_rc(MPI_Allreduce_init(MPI_IN_PLACE, dr, count, MPI_INT, MPI_SUM,
                                       MPI_COMM_WORLD, MPI_INFO_NULL, &req),
                    "one free: MPI_Allreduce_init")) {
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < count; i++) {
                r[i] = value(rank, i, round);
            }
            tu_dev_put(dr, r, bytes);
            tu_check_rc(MPI_Start(&req), "one free: MPI_Start");
            tu_check_rc(MPI_Wait(&req, MPI_STATUS_IGNORE), "one free: MPI_Wait");
            tu_dev_get(r, dr, bytes);
            check_sum(r, count, round, "one free: allreduce in place");
        }
        tu_check_rc(MPI_Request_free(&req), "one free: MPI_Request_free");
    }
    check_handlers("one free: the persistent allreduce");
    tu_dev_unmirror(dr, r);
    free(r);
}
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_persist_cid");
#if !defined(HAVE_PMPI_ALLREDUCE_INIT)
    (void)argc;
    (void)argv;
    tu_skip("the MPI library has no persistent collectives");
#else
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int count = argc > 1 ? atoi(argv[1]) : 4099;
    const int keep = argc > 2 && atoi(argv[2]) != 0;
    MPI_Errhandler ew, es;
    MPI_Comm_create_errhandler(count_world, &ew);
    MPI_Comm_create_errhandler(count_self, &es);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, ew);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, es);

    static MPI_Comm dups[MAX_DUPS];
    int n = 0;
    while (n < MAX_DUPS && MPI_Comm_dup(MPI_COMM_WORLD, &dups[n]) == MPI_SUCCESS) {
        n++;
    }
    /* The same on every rank (the library agrees on context ids). */
    int lo = n, hi = n;
    PMPI_Allreduce(&n, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    PMPI_Allreduce(&n, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    tu_check(lo == hi && n > 0, "exhaust", "duplicates made: %d here, %d to %d "
             "over the ranks", n, lo, hi);
    if (rank == 0) {
        printf("test_persist_cid: %d duplicates, then %s\n", n,
               n < MAX_DUPS ? "the MPI library refused" : "no limit");
    }
    /* The refusal went to MPI_COMM_WORLD's handler, as the application
     * expects; from here on no handler may be called. */
    world_calls = 0;
    self_calls = 0;

    if (n > 0 && lo == hi) {
        part1(dups[0], count);
        MPI_Comm_free(&dups[--n]);
        part2(count);
        tu_check_rc(MPI_Comm_dup(MPI_COMM_WORLD, &dups[n]),
                    "one free: the application's own MPI_Comm_dup");
        if (dups[n] != MPI_COMM_NULL) {
            n++;
        }
        check_handlers("one free: the application's own MPI_Comm_dup");
    }
    if (!keep) {
        for (int i = 0; i < n; i++) {
            MPI_Comm_free(&dups[i]);
        }
    }
    const int rc = tu_finish();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&ew);
    MPI_Errhandler_free(&es);
    MPI_Finalize();
    return rc;
#endif
}
