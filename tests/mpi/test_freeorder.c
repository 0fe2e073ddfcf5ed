/*
 * collar - communicators that ran ipc, freed in different orders on
 * different ranks, or between point-to-point calls that pair the ranks.
 *
 * MPI_Comm_free is local in the MPI libraries users run, so these valid
 * programs finish without collar; collar must not turn MPI_Comm_free into
 * a wait for the other ranks (an agreement inside it hung both):
 *   orders    rank 0 frees A then B, the others B then A;
 *   p2p       rank 0 frees A, then sends to rank 1, which receives before
 *             it frees A.
 * Each communicator first carries device allreduces (ipc when forced), whose
 * sums are checked on every rank.  Run by ipc.test, bounded by a timeout.
 *
 * Usage: test_freeorder orders|p2p
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { N = 1 << 16 };

static void sums(MPI_Comm comm, const char *name)
{
    int size = 0, rank = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    int *x = malloc(N * sizeof(int)), *y = malloc(N * sizeof(int));
    if (x == NULL || y == NULL) {
        tu_fail("memory", "no memory for %d ints", N);
        free(x);
        free(y);
        return;
    }
    for (int i = 0; i < N; i++) {
        x[i] = rank + i % 7;
    }
    tu_check_rc(MPI_Allreduce(x, y, N, MPI_INT, MPI_SUM, comm), name);
    long bad = 0;
    for (int i = 0; i < N; i++) {
        const int want = size * (size - 1) / 2 + size * (i % 7);
        bad += y[i] != want;
    }
    tu_check(bad == 0, name, "%ld wrong sums", bad);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_freeorder");
    const char *mode = argc > 1 ? argv[1] : "orders";
    const int rank = tu_world_rank();
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    sums(a, "allreduce on A");
    sums(b, "allreduce on B");
    if (strcmp(mode, "p2p") == 0) {
        int token = 7;
        if (rank == 0) {
            tu_check_rc(MPI_Comm_free(&a), "free A");
            if (tu_world_size() > 1) {
                tu_check_rc(MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD), "send");
            }
        } else {
            if (rank == 1) {
                tu_check_rc(MPI_Recv(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD,
                                     MPI_STATUS_IGNORE), "recv");
            }
            tu_check_rc(MPI_Comm_free(&a), "free A");
        }
        tu_check_rc(MPI_Comm_free(&b), "free B");
    } else {
        MPI_Comm *first = rank == 0 ? &a : &b, *second = rank == 0 ? &b : &a;
        tu_check_rc(MPI_Comm_free(first), "first free");
        tu_check_rc(MPI_Comm_free(second), "second free");
    }
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
