/*
 * collar - COLLAR_CHECK on buffers of different memory kinds.
 *
 * Linked with collar's core (not preloaded): the check is called the way
 * the interposition layer calls it, with the memory kinds collar would
 * have found, so that every mix can be set up without a GPU (the sim
 * device makes every buffer device memory).  Two ranks:
 *
 *   mixed   rank 0 host buffers; rank 1 a device send buffer and a host
 *           receive buffer.  They would select differently (the first is
 *           a host call, the second a device call) and hang: the check
 *           must fail the call on both ranks with MPI_ERR_ARG, and its
 *           message (stderr) names rank 1's send and receive buffer kinds.
 *   same    rank 0 a device send buffer and a host receive buffer, rank 1
 *           device buffers: both are device calls, which select alike; the
 *           check must pass.
 *   bigcount  counts that differ only above INT_MAX (2^31 + 4 and 2^32 + 4,
 *           as the _c bindings pass them), then datatype sizes that do
 *           (2^31 and 2^32 bytes: MPI_Type_size has no int for either):
 *           both must fail on both ranks with MPI_ERR_ARG.
 */
#include "config.h"
#include "core/core.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int mixed = argc > 1 && strcmp(argv[1], "mixed") == 0;
    const int big = argc > 1 && strcmp(argv[1], "bigcount") == 0;
    if (size != 2 || argc < 2
        || (!mixed && !big && strcmp(argv[1], "same") != 0)) {
        fprintf(stderr, "usage: test_checkmem mixed|same|bigcount (2 ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    collar_log_set_rank(rank);
    collar_config_load();
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    const collar_mem_kind_t H = COLLAR_MEM_HOST, D = COLLAR_MEM_DEVICE;
    collar_check_call_t call = {
        .count = 4, .dtype = MPI_INT, .op = MPI_SUM, .alg = COLLAR_ALG_NATIVE,
    };
    int fails = 0;
    if (big) {
        /* The count: nothing is allocated, the check sees the arguments. */
        call.smem = call.rmem = call.mem = D;
        call.count = ((MPI_Count)1 << (rank == 0 ? 31 : 32)) + 4;
        int rc = collar_check_allreduce(comm, &call, NULL);
        if (rc != MPI_ERR_ARG) {
            printf("rank %d: FAIL count: returned %d, expected MPI_ERR_ARG\n", rank, rc);
            fails = 1;
        }
        /* The datatype size: 2^21 or 2^22 blocks of 1 KiB. */
        MPI_Datatype kib, large;
        MPI_Type_contiguous(1024, MPI_BYTE, &kib);
        MPI_Type_contiguous(rank == 0 ? 1 << 21 : 1 << 22, kib, &large);
        MPI_Type_commit(&large);
        call.count = 1;
        call.dtype = large;
        call.op = MPI_BOR;
        rc = collar_check_allreduce(comm, &call, NULL);
        if (rc != MPI_ERR_ARG) {
            printf("rank %d: FAIL datatype size: returned %d, expected MPI_ERR_ARG\n",
                   rank, rc);
            fails = 1;
        }
        MPI_Type_free(&large);
        MPI_Type_free(&kib);
    } else if (mixed) {
        call.smem = rank == 0 ? H : D;
        call.rmem = H;
    } else {
        call.smem = D;
        call.rmem = rank == 0 ? H : D;
    }
    if (!big) {
        call.mem = call.smem != H || call.rmem != H ? D : H;
        const int rc = collar_check_allreduce(comm, &call, NULL);
        const int want = mixed ? MPI_ERR_ARG : MPI_SUCCESS;
        if (rc != want) {
            printf("rank %d: FAIL check: returned %d, expected %d\n", rank, rc, want);
            fails = 1;
        }
    }
    int total = 0;
    PMPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("test_checkmem %s: %s\n", argv[1], total ? "FAILED" : "ok");
    }
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return total ? 1 : 0;
}
