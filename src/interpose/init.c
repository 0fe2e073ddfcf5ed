/*
 * collar - MPI's start and end: MPI_Init, MPI_Init_thread,
 * MPI_Session_init, MPI_Query_thread and MPI_Finalize.
 *
 * Through the MPI profiling interface: each does its part and the MPI
 * library's PMPI_* call runs.  Before MPI_Init, after MPI_Finalize, under
 * COLLAR_DISABLE=1 and in a process that never calls MPI (mpirun itself, a
 * shell), every call goes straight to the MPI library.  A collar built for
 * another MPI library (abi.c) stays off.
 */
#include "config.h"
#include "interpose.h"
#include "abi.h"

COLLAR_EXPORT int MPI_Init(int *argc, char ***argv)
{
    if (!collar_abi_ok()) {
        collar_engine_off();
        return PMPI_Init(argc, argv);
    }
    return collar_engine_init(argc, argv);
}

COLLAR_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required,
                                  int *provided)
{
    if (!collar_abi_ok()) {
        collar_engine_off();
        return PMPI_Init_thread(argc, argv, required, provided);
    }
    return collar_engine_init_thread(argc, argv, required, provided);
}

#if defined(HAVE_PMPI_SESSION_INIT)
/*
 * MPI-4 sessions: collar starts at MPI_Init / MPI_Init_thread (it needs
 * MPI_COMM_WORLD for its statistics and its configuration's agreement), so
 * a program that only uses sessions runs without collar.
 */
COLLAR_EXPORT int MPI_Session_init(MPI_Info info, MPI_Errhandler errhandler,
                                   MPI_Session *session)
{
    int rc = PMPI_Session_init(info, errhandler, session);
    if (rc == MPI_SUCCESS) {
        collar_engine_inactive("the program started MPI with "
                               "MPI_Session_init, and collar starts at "
                               "MPI_Init or MPI_Init_thread (sessions are not "
                               "supported)");
    }
    return rc;
}
#endif

/* When libcollar.so loads: where MPI is initialised already (collar loaded
 * with dlopen after MPI_Init, as mpi4py.profile after
 * `from mpi4py import MPI` does), collar's MPI_Init will never run: say so
 * now (collar_engine_loaded).  Not in the wrappers: the calls of the
 * program bound to the MPI library before collar came never reach them. */
__attribute__((constructor)) static void collar_loaded(void)
{
    if (collar_abi_ok()) {
        collar_engine_loaded(collar_abi_loaded_after_mpi());
    }
}

/* At exit, where MPI was started without collar's MPI_Init: say so
 * (collar_engine_unseen_init). */
__attribute__((destructor)) static void collar_unseen_init(void)
{
    if (collar_abi_ok()) {
        collar_engine_unseen_init();
    }
}

COLLAR_EXPORT int MPI_Query_thread(int *provided)
{
    return collar_engine_query_thread(provided);
}

COLLAR_EXPORT int MPI_Finalize(void)
{
    collar_engine_finalize();
    return PMPI_Finalize();
}
