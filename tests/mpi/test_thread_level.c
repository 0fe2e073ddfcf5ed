/*
 * The thread level under collar: the application is told the level it
 * asked for (MPI_Init_thread's `provided`, MPI_Query_thread), and the MPI
 * library itself runs at the level collar asked it for, which is what every
 * MPI call pays for.  The library's level is read with PMPI_Query_thread
 * (collar wraps MPI_Query_thread only) and, with Open MPI's one-sided
 * component pt2pt (OMPI_MCA_osc=pt2pt), which refuses MPI_THREAD_MULTIPLE,
 * by creating a window.
 *
 * Usage: test_thread_level ASKED LIBRARY
 *   ASKED    single | multiple: the level the program asks for
 *   LIBRARY  single | multiple: the level the MPI library must run at
 *            (single: exactly the level asked for, MPI_THREAD_SINGLE)
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int level_of(const char *name)
{
    return strcmp(name, "multiple") == 0 ? MPI_THREAD_MULTIPLE
                                         : MPI_THREAD_SINGLE;
}

int main(int argc, char **argv)
{
    const int asked = level_of(argc > 1 ? argv[1] : "single");
    const int want_lib = level_of(argc > 2 ? argv[2] : "single");
    int provided = -1;
    MPI_Init_thread(&argc, &argv, asked, &provided);
    tu_init("test_thread_level");
    tu_check(provided == asked, "provided", "asked for %d, told %d", asked,
             provided);
    int queried = -1;
    MPI_Query_thread(&queried);
    tu_check(queried == asked, "MPI_Query_thread", "asked for %d, told %d",
             asked, queried);
    int lib = -1;
    PMPI_Query_thread(&lib);
    tu_check(lib == want_lib, "library level",
             "the MPI library runs at thread level %d, want %d", lib, want_lib);

    /* Open MPI's osc pt2pt refuses MPI_THREAD_MULTIPLE. */
    const char *osc = getenv("OMPI_MCA_osc");
    if (osc != NULL && strcmp(osc, "pt2pt") == 0 && want_lib < MPI_THREAD_MULTIPLE) {
        PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int value = 0;
        MPI_Win win = MPI_WIN_NULL;
        int rc = MPI_Win_create(&value, sizeof(value), sizeof(value),
                                MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        if (tu_check_rc(rc, "MPI_Win_create (osc pt2pt)")) {
            MPI_Win_free(&win);
        }
    }
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
