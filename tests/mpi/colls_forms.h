/*
 * collar tests - one call of a collective in any of its bindings.
 *
 * tf_<collective>() has the arguments of the int blocking form and calls the
 * binding chosen with tf_set_form(): blocking, nonblocking (then completed
 * by MPI_Wait, an MPI_Test loop, MPI_Waitall or PMPI_Wait in turn),
 * persistent (MPI_X_init, MPI_Start, completion, MPI_Request_free) or the
 * large-count _c form (counts and displacements copied to MPI_Count and
 * MPI_Aint arrays).  A form the MPI library lacks returns
 * MPI_ERR_UNSUPPORTED_OPERATION; tf_form_available() says beforehand.
 */
#ifndef COLLAR_TESTS_MPI_COLLS_FORMS_H
#define COLLAR_TESTS_MPI_COLLS_FORMS_H
#include <mpi.h>

typedef enum { TF_BLOCKING, TF_NONBLOCKING, TF_PERSISTENT, TF_LARGE, TF_FORMS } tf_form_t;

void tf_set_form(tf_form_t form);
tf_form_t tf_form(void);
const char *tf_form_name(tf_form_t form);
/* -1 when no form has that name. */
int tf_form_from_name(const char *name);
int tf_form_available(tf_form_t form);
/* Complete a started nonblocking or persistent request with MPI_Wait, an
 * MPI_Test loop, MPI_Waitall or (nonblocking form only) PMPI_Wait, in
 * turn from call to call. */
int tf_complete(MPI_Request *req);

int tf_bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int tf_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int tf_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *displs, MPI_Datatype recvtype, MPI_Comm comm);
int tf_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int tf_alltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *rdispls, MPI_Datatype recvtype, MPI_Comm comm);
int tf_reduce_scatter(const void *sendbuf, void *recvbuf, const int *recvcounts, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int tf_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int tf_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm);
int tf_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int tf_gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *displs, MPI_Datatype recvtype, int root, MPI_Comm comm);
int tf_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int tf_scatterv(const void *sendbuf, const int *sendcounts, const int *displs, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int tf_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);

#endif
