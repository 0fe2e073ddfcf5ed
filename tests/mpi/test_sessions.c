/*
 * An MPI program that starts MPI with MPI-4 sessions only (no MPI_Init):
 * an allreduce on a communicator made from the world process set, checked
 * on every rank.  Under collar, collar must say at info level that it is
 * not active (sessions.test).  Exit 77 where the library has no sessions.
 */
#include "config.h"
#include <mpi.h>
#include <stdio.h>

int main(void)
{
#if defined(HAVE_PMPI_SESSION_INIT)
    MPI_Session session;
    MPI_Group group;
    MPI_Comm comm;
    if (MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session) != MPI_SUCCESS
        || MPI_Group_from_session_pset(session, "mpi://WORLD", &group) != MPI_SUCCESS
        || MPI_Comm_create_from_group(group, "collar.sessions", MPI_INFO_NULL,
                                      MPI_ERRORS_RETURN, &comm) != MPI_SUCCESS) {
        printf("test_sessions: cannot start MPI with a session\n");
        return 1;
    }
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    long in[3] = { rank, 1, 1000L * rank }, out[3] = { -1, -1, -1 };
    int rc = MPI_Allreduce(in, out, 3, MPI_LONG, MPI_SUM, comm);
    const long want0 = (long)size * (size - 1) / 2;
    int ok = rc == MPI_SUCCESS && out[0] == want0 && out[1] == size
             && out[2] == 1000L * want0;
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm);
    if (rank == 0) {
        printf("test_sessions: %d passed, %d failed\n", all_ok ? 1 : 0, all_ok ? 0 : 1);
    }
    MPI_Comm_free(&comm);
    MPI_Group_free(&group);
    MPI_Session_finalize(&session);
    return all_ok ? 0 : 1;
#else
    printf("test_sessions: SKIP: the MPI library has no MPI_Session_init\n");
    return 77;
#endif
}
