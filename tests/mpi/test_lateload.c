/*
 * libcollar.so loaded with dlopen by a program linked against its MPI
 * library, as Python's mpi4py.profile loads it: collar's MPI_Init never
 * runs, and collar must say so (lateload.test).
 *
 * Usage: test_lateload LIBCOLLAR.so after-init|before-init
 *   after-init   MPI_Init, then dlopen (mpi4py.profile after
 *                `from mpi4py import MPI`): MPI is already initialised
 *                when collar loads;
 *   before-init  dlopen, then MPI_Init: the program's MPI calls were bound
 *                to the MPI library, loaded before collar, and its MPI_Init
 *                does not reach collar's.
 * Then an allreduce, checked; "test_lateload: rank R ok" on success.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void *load(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        printf("test_lateload: cannot load %s: %s\n", path, dlerror());
    }
    return h;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[2], "after-init") != 0
                     && strcmp(argv[2], "before-init") != 0)) {
        fprintf(stderr, "usage: test_lateload LIBCOLLAR.so after-init|before-init\n");
        return 2;
    }
    const int after = strcmp(argv[2], "after-init") == 0;
    if (!after && load(argv[1]) == NULL) {
        return 1;
    }
    MPI_Init(&argc, &argv);
    if (after && load(argv[1]) == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int in[2] = { rank, 1 }, out[2] = { -1, -1 };
    int rc = MPI_Allreduce(in, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS && out[0] == size * (size - 1) / 2 && out[1] == size) {
        printf("test_lateload: rank %d ok\n", rank);
    } else {
        printf("test_lateload: rank %d FAIL: rc %d, %d %d\n", rank, rc, out[0], out[1]);
    }
    MPI_Finalize();
    return 0;
}
