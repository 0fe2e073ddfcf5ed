/* What does not work, shown.  PROTO_CASE:
 *   p2p     a "collar" rank (PROTO_MARK=1) sends a hello to rank 0 on
 *           MPI_COMM_WORLD with a tag of its own; the application on rank 0
 *           receives MPI_ANY_SOURCE/MPI_ANY_TAG and gets collar's message.
 *   lookup  MPI_Lookup_name of a name nobody published. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
    const char *c = getenv("PROTO_CASE"), *m = getenv("PROTO_MARK");
    int mark = m != NULL && atoi(m) == 1, rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (c != NULL && strcmp(c, "p2p") == 0) {
        int hello = -7;   /* collar's presence message */
        if (mark && rank == 1) MPI_Send(&hello, 1, MPI_INT, 0, 31000, MPI_COMM_WORLD);
        /* the application: rank 2 sends 42 to rank 0, which takes any */
        if (rank == 2) { int v = 42; MPI_Send(&v, 1, MPI_INT, 0, 5, MPI_COMM_WORLD); }
        if (rank == 0) {
            int v; MPI_Status st;
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            printf("p2p: the application's receive got %d from rank %d tag %d (%s)\n", v, st.MPI_SOURCE,
                   st.MPI_TAG, v == 42 ? "its own" : "collar's message: WRONG");
            if (v != 42) MPI_Recv(&v, 1, MPI_INT, 2, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else {
        char port[MPI_MAX_PORT_NAME] = "";
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        int rc = MPI_Lookup_name("collar-presence-nobody", MPI_INFO_NULL, port);
        char msg[MPI_MAX_ERROR_STRING] = ""; int len = 0;
        MPI_Error_string(rc, msg, &len);
        printf("lookup: rank %d MPI_Lookup_name of an unpublished name: rc %d (%s)\n", rank, rc, msg);
        char name[MPI_MAX_PORT_NAME] = "collar-p";
        rc = MPI_Publish_name("collar-presence-1", MPI_INFO_NULL, name);
        MPI_Error_string(rc, msg, &len);
        printf("publish: rank %d MPI_Publish_name: rc %d (%s)\n", rank, rc, msg);
    }
    MPI_Finalize();
    return 0;
}
