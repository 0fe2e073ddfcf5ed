/*
 * A plugin that uses MPI, loaded by tests/mpi/test_dlopen.c with dlopen
 * after collar: it calls MPI_Init itself, runs allreduces (checked on every
 * rank) and MPI_Finalize.  The program that loads it uses no MPI of its
 * own, like a Python interpreter loading an MPI extension.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int dlopen_plugin_run(int *argc, char ***argv);

int dlopen_plugin_run(int *argc, char ***argv)
{
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        printf("test_dlopen: MPI_Init failed\n");
        return 1;
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    enum { N = 100003, CALLS = 4 };
    int *in = malloc(N * sizeof(int)), *out = malloc(N * sizeof(int));
    int passed = 0, failed = 0;
    for (int call = 0; call < CALLS; call++) {
        for (int i = 0; i < N; i++) {
            in[i] = (rank + 1) * (i % 977) + call;
            out[i] = -1;
        }
        int rc = MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            const long want = (long)size * (size + 1) / 2 * (i % 977) + (long)size * call;
            bad += out[i] != (int)want;
        }
        if (rc == MPI_SUCCESS && bad == 0) {
            passed++;
        } else {
            failed++;
            printf("test_dlopen: rank %d: allreduce %d: rc %d, %d wrong elements\n",
                   rank, call, rc, bad);
        }
    }
    free(in);
    free(out);
    printf("test_dlopen: rank %d: %d passed, %d failed\n", rank, passed, failed);
    MPI_Finalize();
    return failed != 0;
}
