/*
 * MPI_Init called by a library that is loaded after collar: this program
 * makes no MPI call of its own; it loads tests/mpi/dlopen_plugin.c's plugin
 * with dlopen and runs it.
 *
 * Usage: test_dlopen PLUGIN.so [deepbind]
 *   default   RTLD_NOW | RTLD_LOCAL: the plugin's MPI calls bind to the
 *             preloaded collar, which is active (dlopen.test checks its
 *             statistics).
 *   deepbind  RTLD_DEEPBIND as well: the plugin binds to the MPI library
 *             directly, collar never sees MPI_Init and says so at exit.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*plugin_run_fn)(int *argc, char ***argv);

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_dlopen PLUGIN.so [deepbind]\n");
        return 2;
    }
    int flags = RTLD_NOW | RTLD_LOCAL;
    if (argc > 2 && strcmp(argv[2], "deepbind") == 0) {
        flags |= RTLD_DEEPBIND;
    }
    void *h = dlopen(argv[1], flags);
    if (h == NULL) {
        printf("test_dlopen: cannot load %s: %s\n", argv[1], dlerror());
        return 1;
    }
    plugin_run_fn run;
    *(void **)&run = dlsym(h, "dlopen_plugin_run");
    if (run == NULL) {
        printf("test_dlopen: no dlopen_plugin_run in %s\n", argv[1]);
        return 1;
    }
    return run(&argc, &argv);
}
