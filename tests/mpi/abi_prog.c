/*
 * A plain MPI program, built by tests/mpi/abi.test with the mpicc of another
 * MPI library than collar's, so that a collar preloaded into it runs under
 * an MPI library it was not built for.  It checks its own results:
 * MPI_Allreduce (int32 sums, float64 sums), MPI_Iallreduce + MPI_Wait,
 * MPI_Bcast and MPI_Allgather on 3 ranks, each rank against values it
 * computes itself.  Prints "abi_prog: rank R ok" per rank and the MPI
 * library's first version line on rank 0; exits 1 on a wrong value.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1000

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    static int32_t is[N], ir[N];
    static double ds[N], dr[N];
    for (int i = 0; i < N; i++) {
        is[i] = (int32_t)(rank * 7 + i);
        ds[i] = 0.5 * rank + i;
    }
    MPI_Allreduce(is, ir, N, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(ds, dr, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < N; i++) {
        int32_t want = 0;
        double dwant = 0;
        for (int r = 0; r < size; r++) {
            want += (int32_t)(r * 7 + i);
            dwant += 0.5 * r + i;
        }
        bad += ir[i] != want;
        bad += dr[i] != dwant;
    }

    MPI_Request req;
    memset(ir, 0, sizeof(ir));
    MPI_Iallreduce(is, ir, N, MPI_INT32_T, MPI_MAX, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; i < N; i++) {
        bad += ir[i] != (int32_t)((size - 1) * 7 + i);
    }

    int32_t b[16];
    for (int i = 0; i < 16; i++) {
        b[i] = rank == 1 ? 100 + i : -1;
    }
    MPI_Bcast(b, 16, MPI_INT32_T, 1 % size, MPI_COMM_WORLD);
    for (int i = 0; i < 16; i++) {
        bad += b[i] != (size > 1 ? 100 + i : -1);
    }

    int32_t *all = malloc((size_t)size * sizeof(*all));
    int32_t mine = 1000 + rank;
    MPI_Allgather(&mine, 1, MPI_INT32_T, all, 1, MPI_INT32_T, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) {
        bad += all[r] != 1000 + r;
    }
    free(all);

    if (rank == 0) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(v, &len);
        v[strcspn(v, "\n")] = '\0';
        printf("abi_prog: library %s\n", v);
    }
    printf("abi_prog: rank %d %s (%d wrong values)\n", rank, bad ? "FAIL" : "ok", bad);
    MPI_Finalize();
    return bad ? 1 : 0;
}
