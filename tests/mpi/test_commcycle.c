/*
 * collar - many communicator create/free cycles.
 *
 * --cycles times (default 10000): MPI_Comm_dup of MPI_COMM_WORLD, one
 * allreduce on the duplicate (under collar: the first call on a
 * communicator creates collar's private duplicate of it), MPI_Comm_free.
 * Every call must succeed with the right result (an MPI library that ran
 * out of communicator ids, because collar's private duplicates are never
 * freed, fails MPI_Comm_dup), and the resident set (/proc/self/statm) must
 * not grow by more than --rss-bound KiB between the end of the first tenth
 * of the cycles and the end.
 *
 * --count elements of MPI_INT (default 64) per allreduce.  A plain MPI
 * program: it gives the same verdict without collar.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int cycles = 10000, count = 64;
    long bound_kb = 4096;
    MPI_Init(&argc, &argv);
    tu_init("test_commcycle");
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--cycles") == 0) {
            cycles = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--count") == 0) {
            count = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--rss-bound") == 0) {
            bound_kb = atol(argv[i + 1]);
        }
    }
    if (cycles < 10 || count < 1) {
        fprintf(stderr, "usage: test_commcycle [--cycles N>=10] [--count N] "
                "[--rss-bound KIB]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int rank = tu_world_rank(), size = tu_world_size();
    int *sbuf = malloc((size_t)count * sizeof(int));
    int *rbuf = malloc((size_t)count * sizeof(int));
    if (sbuf == NULL || rbuf == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    const double t0 = MPI_Wtime();
    long rss0 = -1;
    int bad = 0, c;
    for (c = 0; c < cycles && bad == 0; c++) {
        if (c == cycles / 10) {
            rss0 = tu_rss_kb();
        }
        MPI_Comm comm;
        int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        if (!tu_check(rc == MPI_SUCCESS, "MPI_Comm_dup", "cycle %d: %s", c,
                      tu_errstr(rc))) {
            bad = 1;
            break;
        }
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        for (int i = 0; i < count; i++) {
            sbuf[i] = rank + i + c;
            rbuf[i] = -1;
        }
        rc = MPI_Allreduce(sbuf, rbuf, count, MPI_INT, MPI_SUM, comm);
        if (!tu_check_rc(rc, "MPI_Allreduce")) {
            bad = 1;
        } else {
            for (int i = 0; i < count; i++) {
                const int want = size * (i + c) + size * (size - 1) / 2;
                if (rbuf[i] != want) {
                    tu_fail("result", "cycle %d element %d: %d, expected %d", c,
                            i, rbuf[i], want);
                    bad = 1;
                    break;
                }
            }
        }
        rc = MPI_Comm_free(&comm);
        if (!tu_check(rc == MPI_SUCCESS, "MPI_Comm_free", "cycle %d: %s", c,
                      tu_errstr(rc))) {
            bad = 1;
        }
    }
    const long rss1 = tu_rss_kb();
    tu_check(c == cycles, "cycles", "%d of %d cycles done", c, cycles);
    tu_check(rss0 >= 0 && rss1 >= 0 && rss1 - rss0 <= bound_kb, "memory",
             "resident set %ld KiB after %d cycles, %ld KiB after %d (bound: "
             "+%ld KiB)", rss0, cycles / 10, rss1, c, bound_kb);
    if (rank == 0) {
        printf("commcycle: %d cycles in %.1f s; rss %ld KiB after %d, %ld KiB "
               "after %d\n", c, MPI_Wtime() - t0, rss0, cycles / 10, rss1, c);
    }
    free(sbuf);
    free(rbuf);
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
