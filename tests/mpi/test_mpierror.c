/*
 * A call the MPI library refuses although collar's own checks cannot tell:
 * a predefined op on a derived datatype (Open MPI 4.1 and MPICH 4.0 both
 * refuse it: MPI_ERR_OP; others may accept it).  collar asks the library
 * (a one-rank probe) and hands the call over, so that under
 * MPI_ERRORS_RETURN the call returns the library's own error class (the
 * same as PMPI_Allreduce on the same arguments), blocking and nonblocking
 * (at the call, not at the wait); the next call must work.  If the library
 * accepts the call, both entry points must agree.
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static void check_sum(const int *got, int n, int size, const char *what)
{
    for (int i = 0; i < n; i++) {
        int want = i * size + size * (size - 1) / 2;
        if (got[i] != want) {
            tu_check(0, what, "element %d is %d, expected %d", i, got[i], want);
            return;
        }
    }
    tu_check(1, what, "ok");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_mpierror");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    int in[64], out[64], ref_out[64];
    for (int i = 0; i < 64; i++) {
        in[i] = i + rank;
    }

    /* What the MPI library alone says. */
    int ref = PMPI_Allreduce(in, ref_out, 32, pair, MPI_SUM, comm);
    int ref_class = MPI_SUCCESS;
    MPI_Error_class(ref, &ref_class);

    for (int round = 0; round < 3; round++) {
        char what[128];
        int rc = MPI_Allreduce(in, out, 32, pair, MPI_SUM, comm), cls;
        MPI_Error_class(rc, &cls);
        snprintf(what, sizeof(what), "blocking, round %d", round);
        tu_check(cls == ref_class, what, "error class %d, the library alone gives %d",
                 cls, ref_class);

        MPI_Request req = MPI_REQUEST_NULL;
        rc = MPI_Iallreduce(in, out, 32, pair, MPI_SUM, comm, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        MPI_Error_class(rc, &cls);
        snprintf(what, sizeof(what), "nonblocking, round %d", round);
        tu_check(cls == ref_class, what, "error class %d, the library alone gives %d",
                 cls, ref_class);
        tu_check(req == MPI_REQUEST_NULL, what, "the request was not freed");

        /* The next, valid call works. */
        memset(out, 0xff, sizeof(out));
        rc = MPI_Allreduce(in, out, 64, MPI_INT, MPI_SUM, comm);
        snprintf(what, sizeof(what), "valid call after the error, round %d", round);
        tu_check(rc == MPI_SUCCESS, what, "rc %d", rc);
        check_sum(out, 64, size, what);
    }
    if (rank == 0 && ref_class != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(ref_class, msg, &len);
        printf("note: the MPI library refuses MPI_SUM on a derived datatype: %s\n", msg);
    }
    MPI_Type_free(&pair);
    MPI_Comm_free(&comm);
    int status = tu_finish();
    MPI_Finalize();
    return status;
}
