/*
 * Persistent collectives under collar (MPI-4): MPI_Allreduce_init and
 * MPI_Bcast_init started again and again with new data each time, MPI_Start
 * and MPI_Startall, every completion call, MPI_Request_free on an inactive
 * and on an active request, the large-count MPI_Allreduce_init_c.  Values
 * are checked bit-exact on every rank after every start.
 *
 * Usage: test_persist [count [free-active]]   (default 100003 ints: several
 * chunks).  free-active = 1 adds a persistent allreduce freed while active,
 * then an allreduce on another communicator checked (the freed receive used
 * to complete a send of the next operation under MPICH: wrong first chunks
 * or an assertion), and the freed operation's own result, checked after
 * MPI_Finalize (the only point at which MPI says it is complete).
 * Exit 77 where the MPI library has no persistent collectives.
 *
 * Then, three times: a nonblocking all-to-all (staged) completed, and a
 * new persistent allreduce made, started twice and freed (MPICH 4.0.2 at
 * MPI_THREAD_MULTIPLE, on three ranks, once lost that allreduce to what
 * collar did to wake a waiting thread: every rank waited for ever).
 *
 * Usage, in full: test_persist [count [free-active [warm [multiple]]]];
 * multiple: MPI_Init_thread asking for MPI_THREAD_MULTIPLE.
 *
 * With TU_DEVICE=cuda (testutil.h) every buffer the operations get is
 * device memory: new data is put there before each start and the result
 * read back after each completion.
 */
#include "config.h"
#include "testutil.h"
#include "colls_forms.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(HAVE_PMPI_ALLREDUCE_INIT)
static int rank, size;

static int value(int r, int i, int round)
{
    return (r + 1) * 7 + i % 1009 + round * 31;
}

static void check_sum(const int *buf, int count, int round, const char *what)
{
    tu_check_int_sum(buf, count, size, value, round, what);
}

#endif

int main(int argc, char **argv)
{
    if (argc > 4 && strcmp(argv[4], "multiple") == 0) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    tu_init("test_persist");
#if !defined(HAVE_PMPI_ALLREDUCE_INIT)
    (void)argc;
    (void)argv;
    tu_skip("the MPI library has no persistent collectives");
#else
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tf_set_form(TF_PERSISTENT);
    const int count = argc > 1 ? atoi(argv[1]) : 100003;
    const int free_active = argc > 2 && atoi(argv[2]) != 0;
    /* warm: a blocking allreduce first, so that the persistent ones run
     * what needs one to set up (nccl's communicator). */
    const int warm = argc > 3 && atoi(argv[3]) != 0;
    int *s = malloc((size_t)count * sizeof(int));
    int *r = malloc((size_t)count * sizeof(int));
    int *b = malloc((size_t)count * sizeof(int));
    const size_t bytes = (size_t)count * sizeof(int);
    int *ds = tu_dev_mirror(s, bytes), *dr = tu_dev_mirror(r, bytes);
    int *db = tu_dev_mirror(b, bytes);
    if (warm) {
        for (int i = 0; i < count; i++) {
            s[i] = value(rank, i, 0);
        }
        tu_dev_put(ds, s, bytes);
        tu_check_rc(MPI_Allreduce(ds, dr, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                    "warm: blocking allreduce");
        tu_dev_get(r, dr, bytes);
        check_sum(r, count, 0, "warm: blocking allreduce");
    }

    /* One allreduce and one in place, started five times each with new data. */
    for (int in_place = 0; in_place < 2; in_place++) {
        MPI_Request req;
        const char *what = in_place ? "allreduce_init in place" : "allreduce_init";
        tu_check_rc(MPI_Allreduce_init(in_place ? MPI_IN_PLACE : ds, dr, count,
                                       MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                                       MPI_INFO_NULL, &req), what);
        for (int round = 0; round < 5; round++) {
            for (int i = 0; i < count; i++) {
                (in_place ? r : s)[i] = value(rank, i, round);
            }
            tu_dev_put(in_place ? dr : ds, in_place ? r : s, bytes);
            tu_check_rc(MPI_Start(&req), what);
            tu_check_rc(tf_complete(&req), what);
            tu_dev_get(r, dr, bytes);
            check_sum(r, count, round, what);
        }
        tu_check_rc(MPI_Request_free(&req), "free inactive");
        tu_check(req == MPI_REQUEST_NULL, "free inactive", "request not null");
    }

    /* MPI_Startall over an allreduce and a broadcast. */
    MPI_Request two[2];
    tu_check_rc(MPI_Allreduce_init(ds, dr, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                                   MPI_INFO_NULL, &two[0]), "startall: allreduce_init");
    tu_check_rc(MPI_Bcast_init(db, count, MPI_INT, size - 1, MPI_COMM_WORLD,
                               MPI_INFO_NULL, &two[1]), "startall: bcast_init");
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < count; i++) {
            s[i] = value(rank, i, round);
            b[i] = rank == size - 1 ? value(size, i, round) : -1;
        }
        tu_dev_put(ds, s, bytes);
        tu_dev_put(db, b, bytes);
        tu_check_rc(MPI_Startall(2, two), "startall");
        tu_check_rc(MPI_Waitall(2, two, tu_statuses_ignore()), "startall: waitall");
        tu_dev_get(r, dr, bytes);
        tu_dev_get(b, db, bytes);
        check_sum(r, count, round, "startall: allreduce");
        int bad = 0;
        for (int i = 0; i < count; i++) {
            bad += b[i] != value(size, i, round);
        }
        tu_check(bad == 0, "startall: bcast", "round %d: %d wrong elements", round, bad);
    }
    MPI_Request_free(&two[0]);
    MPI_Request_free(&two[1]);

    /* A nonblocking all-to-all, then a new persistent allreduce, again. */
    const int per = count / size < 1000 ? count / size : 1000;
    for (int round = 0; round < 3 && per > 0; round++) {
        for (int i = 0; i < per * size; i++) {
            s[i] = value(rank, i, round + 40);   /* block i / per goes to rank i / per */
        }
        tu_dev_put(ds, s, (size_t)per * size * sizeof(int));
        MPI_Request a2a;
        tu_check_rc(MPI_Ialltoall(ds, per, MPI_INT, dr, per, MPI_INT, MPI_COMM_WORLD, &a2a),
                    "ialltoall");
        tu_check_rc(MPI_Wait(&a2a, MPI_STATUS_IGNORE), "ialltoall: wait");
        tu_dev_get(r, dr, (size_t)per * size * sizeof(int));
        int bad = 0;
        for (int q = 0; q < size; q++) {
            for (int i = 0; i < per; i++) {
                bad += r[q * per + i] != value(q, rank * per + i, round + 40);
            }
        }
        tu_check(bad == 0, "ialltoall", "round %d: %d wrong elements", round, bad);
        MPI_Request pr;
        tu_check_rc(MPI_Allreduce_init(ds, dr, per, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                                       MPI_INFO_NULL, &pr), "after ialltoall: allreduce_init");
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < per; i++) {
                s[i] = value(rank, i, round * 2 + k + 50);
            }
            tu_dev_put(ds, s, (size_t)per * sizeof(int));
            tu_check_rc(MPI_Start(&pr), "after ialltoall: start");
            tu_check_rc(MPI_Wait(&pr, MPI_STATUS_IGNORE), "after ialltoall: wait");
            tu_dev_get(r, dr, (size_t)per * sizeof(int));
            check_sum(r, per, round * 2 + k + 50, "after ialltoall: allreduce_init");
        }
        tu_check_rc(MPI_Request_free(&pr), "after ialltoall: free");
    }

    /* Freed while active: the operation still completes on every rank, and
     * the next operations are right (on another communicator: MPICH 4.0.2
     * alone gives a wrong result for an allreduce on the communicator of a
     * persistent allreduce freed while active). */
    MPI_Request act;
    int *fs = malloc((size_t)count * sizeof(int));
    int *fr = malloc((size_t)count * sizeof(int));
    for (int i = 0; free_active && i < count; i++) {
        fs[i] = value(rank, i, 9);
    }
    int *dfs = tu_dev_mirror(fs, bytes), *dfr = tu_dev_mirror(fr, bytes);
    if (free_active) {
        tu_check_rc(MPI_Allreduce_init(dfs, dfr, count, MPI_INT, MPI_SUM,
                                       MPI_COMM_WORLD, MPI_INFO_NULL, &act),
                    "free active: init");
        tu_check_rc(MPI_Start(&act), "free active: start");
        tu_check_rc(MPI_Request_free(&act), "free active");
        tu_check(act == MPI_REQUEST_NULL, "free active", "request not null");
    }
    for (int i = 0; i < count; i++) {
        b[i] = value(rank, i, 11);
    }
    int *r2 = malloc((size_t)count * sizeof(int));
    int *dr2 = tu_dev_mirror(r2, bytes);
    tu_dev_put(db, b, bytes);
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    tu_check_rc(MPI_Allreduce(db, dr2, count, MPI_INT, MPI_SUM, other),
                "after free active");
    tu_dev_get(r2, dr2, bytes);
    check_sum(r2, count, 11, "after free active");
    MPI_Comm_free(&other);
    tu_dev_unmirror(dr2, r2);
    free(r2);

#if defined(HAVE_PMPI_ALLREDUCE_C)
    MPI_Request big;
    tu_check_rc(MPI_Allreduce_init_c(ds, dr, (MPI_Count)count, MPI_INT, MPI_SUM,
                                     MPI_COMM_WORLD, MPI_INFO_NULL, &big),
                "allreduce_init_c");
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < count; i++) {
            s[i] = value(rank, i, round + 20);
        }
        tu_dev_put(ds, s, bytes);
        MPI_Start(&big);
        MPI_Wait(&big, MPI_STATUS_IGNORE);
        tu_dev_get(r, dr, bytes);
        check_sum(r, count, round + 20, "allreduce_init_c");
    }
    MPI_Request_free(&big);
#endif
    tu_dev_unmirror(ds, s);
    tu_dev_unmirror(dr, r);
    tu_dev_unmirror(db, b);
    free(s);
    free(r);
    free(b);
    int status = tu_finish();
    MPI_Finalize();
    if (free_active) {
        /* Finished by now: the operation freed while active is right too. */
        tu_dev_get(fr, dfr, bytes);
        int bad = 0;
        for (int i = 0; i < count; i++) {
            long want = 0;
            for (int q = 0; q < size; q++) {
                want += value(q, i, 9);
            }
            bad += fr[i] != (int)want;
        }
        printf("test_persist: rank %d: allreduce freed while active: %d wrong "
               "elements after MPI_Finalize\n", rank, bad);
        if (bad != 0) {
            status = 1;
        }
    }
    tu_dev_unmirror(dfs, fs);
    tu_dev_unmirror(dfr, fr);
    free(fs);
    free(fr);
    return status;
#endif
}
