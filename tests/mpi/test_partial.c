/*
 * collar loaded on some ranks only (partial.test): a plain MPI program whose
 * ranks run with and without libcollar.so in LD_PRELOAD.  MPI_Allreduce,
 * MPI_Iallreduce and MPI_Bcast on MPI_COMM_WORLD and on a duplicate, small
 * and large, every value checked on every rank.  With collar on every rank
 * the same program runs collar's algorithms; on some ranks only, collar
 * must stay out of the way (no collective of its own) and the results must
 * still be right.
 */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

static void run(MPI_Comm comm, const char *name, int n)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    double *d = malloc((size_t)n * sizeof(*d)), *dsum = malloc((size_t)n * sizeof(*dsum));
    int *i = malloc((size_t)n * sizeof(*i)), *isum = malloc((size_t)n * sizeof(*isum));
    int *b = malloc((size_t)n * sizeof(*b));
    if (d == NULL || dsum == NULL || i == NULL || isum == NULL || b == NULL) {
        tu_fail("malloc", "%d elements", n);
        return;
    }
    for (int k = 0; k < n; k++) {
        d[k] = rank + 0.5 * k;
        i[k] = rank * 3 + k;
        b[k] = rank == size - 1 ? 7 * k + 1 : -1;
    }
    char what[64];
    snprintf(what, sizeof(what), "%s allreduce %d", name, n);
    tu_check_rc(MPI_Allreduce(d, dsum, n, MPI_DOUBLE, MPI_SUM, comm), what);
    for (int k = 0; k < n; k++) {
        const double want = size * (size - 1) / 2.0 + size * 0.5 * k;
        if (!tu_check(dsum[k] == want, what, "element %d: %g, want %g", k, dsum[k], want)) {
            break;
        }
    }
    snprintf(what, sizeof(what), "%s iallreduce %d", name, n);
    MPI_Request req;
    tu_check_rc(MPI_Iallreduce(i, isum, n, MPI_INT, MPI_SUM, comm, &req), what);
    tu_check_rc(MPI_Wait(&req, MPI_STATUS_IGNORE), what);
    for (int k = 0; k < n; k++) {
        const int want = 3 * size * (size - 1) / 2 + size * k;
        if (!tu_check(isum[k] == want, what, "element %d: %d, want %d", k, isum[k], want)) {
            break;
        }
    }
    snprintf(what, sizeof(what), "%s bcast %d", name, n);
    tu_check_rc(MPI_Bcast(b, n, MPI_INT, size - 1, comm), what);
    for (int k = 0; k < n; k++) {
        if (!tu_check(b[k] == 7 * k + 1, what, "element %d: %d, want %d", k, b[k], 7 * k + 1)) {
            break;
        }
    }
    free(d);
    free(dsum);
    free(i);
    free(isum);
    free(b);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_partial");
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    const int counts[] = { 1, 1000, 300000 };
    for (int loop = 0; loop < 2; loop++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            run(MPI_COMM_WORLD, "world", counts[c]);
            run(dup, "dup", counts[c]);
        }
    }
    MPI_Comm_free(&dup);
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
