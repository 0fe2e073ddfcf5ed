/*
 * The demo: an unmodified MPI program doing one allreduce of 1 Mi floats.
 * Run under collar on the sim device it goes through the device path
 * (ipc, the built-in rules' choice on one node); collar says what ran
 * (COLLAR_LOG=info) and the program checks the result on every rank.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    const int n = 1 << 20;
    float *in = malloc(n * sizeof(float));
    float *out = malloc(n * sizeof(float));
    if (in == NULL || out == NULL) {
        fprintf(stderr, "demo: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < n; i++) {
        in[i] = (float)(rank + 1) * (float)(i % 1000);
    }
    MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

    /* sum over ranks r of (r + 1) * v = v * size * (size + 1) / 2, exact in
     * float for these magnitudes. */
    long bad = 0;
    for (int i = 0; i < n; i++) {
        float want = (float)(i % 1000) * (float)(size * (size + 1) / 2);
        if (out[i] != want) {
            if (bad++ == 0) {
                fprintf(stderr, "demo: rank %d: element %d is %g, expected %g\n",
                        rank, i, out[i], want);
            }
        }
    }
    long bad_all = 0;
    MPI_Reduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("demo: %d ranks, allreduce of %d floats (%d MiB): %s\n", size, n,
               (int)(n * sizeof(float) >> 20),
               bad_all == 0 ? "result correct on every rank" : "WRONG RESULT");
    }
    free(in);
    free(out);
    MPI_Finalize();
    return bad_all == 0 ? 0 : 1;
}
