/*
 * collar - derived datatypes called again and again, freed, and their
 * handles reused.
 *
 * --calls N (default 40) MPI_Allreduce calls on a committed contiguous type
 * of 3 ints with a user op (sum): right results on every rank.  Then the
 * type is freed and another contiguous type made and left uncommitted
 * (MPI libraries often hand out the freed handle again): MPI_Allreduce on
 * it must fail with the error class PMPI_Allreduce gives, as without
 * collar.  Then that type is committed: calls on it must succeed with
 * right results.  A plain MPI program: same verdict without collar.
 * (mpi/typecache.test counts collar's probes of the MPI library from its
 * debug log: one per type, not one per call.)
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 3, COUNT = 5 };

static void sum_op(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const int *a = in;
    int *b = inout;
    for (int i = 0; i < *len * N; i++) {
        b[i] += a[i];
    }
}

static void run_calls(MPI_Datatype t, MPI_Op op, int calls, int base)
{
    const int rank = tu_world_rank(), size = tu_world_size();
    int sbuf[COUNT * N], rbuf[COUNT * N];
    for (int c = 0; c < calls; c++) {
        for (int i = 0; i < COUNT * N; i++) {
            sbuf[i] = (rank + 1) * (i + 1) + base + c;
            rbuf[i] = -1;
        }
        if (!tu_check_rc(MPI_Allreduce(sbuf, rbuf, COUNT, t, op, MPI_COMM_WORLD),
                         "MPI_Allreduce")) {
            return;
        }
        int bad = 0;
        for (int i = 0; i < COUNT * N; i++) {
            const int want = size * (size + 1) / 2 * (i + 1) + size * (base + c);
            bad += rbuf[i] != want;
        }
        tu_check(bad == 0, "result", "call %d: %d wrong elements", c, bad);
    }
}

int main(int argc, char **argv)
{
    int calls = 40;
    MPI_Init(&argc, &argv);
    tu_init("test_typecache");
    if (argc > 2 && strcmp(argv[1], "--calls") == 0) {
        calls = atoi(argv[2]);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Op op;
    MPI_Op_create(sum_op, 1, &op);

    MPI_Datatype t, u;
    MPI_Type_contiguous(N, MPI_INT, &t);
    MPI_Type_commit(&t);
    run_calls(t, op, calls, 0);
    const MPI_Datatype old = t;
    MPI_Type_free(&t);

    MPI_Type_contiguous(N, MPI_INT, &u);   /* not committed */
    if (tu_world_rank() == 0) {
        printf("test_typecache: the freed handle %s\n",
               u == old ? "was reused" : "was not reused");
    }
    int sbuf[COUNT * N] = { 0 }, rbuf[COUNT * N];
    int rc = MPI_Allreduce(sbuf, rbuf, COUNT, u, op, MPI_COMM_WORLD);
    int prc = PMPI_Allreduce(sbuf, rbuf, COUNT, u, op, MPI_COMM_WORLD);
    int cls = -1, pcls = -1;
    MPI_Error_class(rc, &cls);
    MPI_Error_class(prc, &pcls);
    tu_check(rc != MPI_SUCCESS && cls == pcls, "uncommitted type",
             "error class %d, the MPI library's %d", cls, pcls);

    MPI_Type_commit(&u);
    run_calls(u, op, calls, 100);
    MPI_Type_free(&u);
    MPI_Op_free(&op);
    const int ret = tu_finish();
    MPI_Finalize();
    return ret;
}
