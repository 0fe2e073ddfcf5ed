/*
 * collar-info: what collar would do here.
 *
 * Prints collar's version, the MPI library it was built with, the device
 * backends, and every COLLAR_* variable with the value in force (from this
 * environment), its default and what it does.  Runs without mpirun: it does
 * not initialise MPI.
 */
#include "config.h"
#include "../core/core.h"
#include "../mem/mem.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
        "Usage: collar-info [OPTION]\n"
        "Show what collar (the collective algorithm router for MPI) would do in\n"
        "this environment: version, MPI library, device backends, and every\n"
        "COLLAR_* variable with its value in force, default and meaning.\n"
        "\n"
        "Options:\n"
        "  --variables   print only the COLLAR_* variables\n"
        "  --markdown    print the variables as a Markdown table (for docs)\n"
        "  --version     print the version and exit\n"
        "  --help        print this help and exit\n"
        "\n"
        "Use collar by preloading it under an MPI program:\n"
        "  LD_PRELOAD=%s/libcollar.so mpirun -np 4 ./app\n", LIBDIR);
}

static void print_environment(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, major = 0, minor = 0;
    /* Both may be called before MPI_Init. */
    MPI_Get_library_version(lib, &len);
    MPI_Get_version(&major, &minor);
    char *nl = strchr(lib, '\n');
    if (nl != NULL) {
        *nl = '\0';
    }
    printf("collar %s\n", PACKAGE_VERSION);
    printf("  MPI library       : %s (MPI %d.%d)\n", lib, major, minor);
    printf("  device backends   : %s built in", collar_device_builtin());
#ifdef COLLAR_HAVE_CUDA
    printf(" (CUDA toolkit found at build time; cuda backend not built yet)");
#else
    printf(" (built without CUDA)");
#endif
    printf("\n");
    printf("  call sites        : %s\n",
#ifdef COLLAR_HAVE_LIBUNWIND
           "libunwind"
#else
           "unavailable (built without libunwind)"
#endif
           );
    printf("  tuning tables     : %s\n", COLLAR_TUNINGDIR);
    printf("\nCOLLAR_* variables (value in force, default, meaning):\n");
}

int main(int argc, char **argv)
{
    int only_vars = 0, markdown = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("collar-info (collar) %s\n", PACKAGE_VERSION);
            return 0;
        } else if (strcmp(argv[i], "--variables") == 0) {
            only_vars = 1;
        } else if (strcmp(argv[i], "--markdown") == 0) {
            markdown = 1;
        } else {
            fprintf(stderr, "collar-info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    collar_config_load();
    if (markdown) {
        collar_config_print(stdout, 1);
        return 0;
    }
    if (!only_vars) {
        print_environment();
    }
    collar_config_print(stdout, 0);
    return 0;
}
