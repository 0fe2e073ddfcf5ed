/*
 * collar - the six bindings of the allreduce: MPI_Allreduce,
 * MPI_Iallreduce, MPI_Allreduce_init and their large-count (_c) forms.
 * Each goes straight to the MPI library on the engine's short ways
 * (collar_allreduce_straight: collar not active; host buffers with nothing
 * for collar to do), else describes the call and hands it to the engine
 * (src/engine/allreduce.c).
 */
#include "config.h"
#include "interpose.h"

COLLAR_EXPORT int MPI_Allreduce(const void *sbuf, void *rbuf, int count,
                                MPI_Datatype dtype, MPI_Op op, MPI_Comm comm)
{
    if (collar_allreduce_straight(sbuf, rbuf)) {
        return PMPI_Allreduce(sbuf, rbuf, count, dtype, op, comm);
    }
    return collar_allreduce_call(sbuf, rbuf, count, dtype, op, comm, NULL, 0);
}

COLLAR_EXPORT int MPI_Iallreduce(const void *sbuf, void *rbuf, int count,
                                 MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                                 MPI_Request *request)
{
    if (request == NULL || collar_allreduce_straight(sbuf, rbuf)) {
        return PMPI_Iallreduce(sbuf, rbuf, count, dtype, op, comm, request);
    }
    return collar_allreduce_call(sbuf, rbuf, count, dtype, op, comm, request, 0);
}

#if defined(HAVE_PMPI_ALLREDUCE_INIT)
COLLAR_EXPORT int MPI_Allreduce_init(const void *sbuf, void *rbuf, int count,
                                     MPI_Datatype dtype, MPI_Op op,
                                     MPI_Comm comm, MPI_Info info,
                                     MPI_Request *request)
{
    if (collar_paths.straight || collar_paths.state != COLLAR_STATE_ACTIVE
        || request == NULL) {
        return PMPI_Allreduce_init(sbuf, rbuf, count, dtype, op, comm, info,
                                   request);
    }
    const collar_allreduce_args_t a = {
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op,
        .comm = comm, .request = request, .persistent = 1, .info = info,
    };
    return collar_allreduce_intercept(&a);
}
#endif

#if defined(HAVE_PMPI_ALLREDUCE_C)
COLLAR_EXPORT int MPI_Allreduce_c(const void *sbuf, void *rbuf, MPI_Count count,
                                  MPI_Datatype dtype, MPI_Op op, MPI_Comm comm)
{
    if (collar_allreduce_straight(sbuf, rbuf)) {
        return PMPI_Allreduce_c(sbuf, rbuf, count, dtype, op, comm);
    }
    return collar_allreduce_call(sbuf, rbuf, count, dtype, op, comm, NULL, 1);
}

COLLAR_EXPORT int MPI_Iallreduce_c(const void *sbuf, void *rbuf, MPI_Count count,
                                   MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                                   MPI_Request *request)
{
    if (request == NULL || collar_allreduce_straight(sbuf, rbuf)) {
        return PMPI_Iallreduce_c(sbuf, rbuf, count, dtype, op, comm, request);
    }
    return collar_allreduce_call(sbuf, rbuf, count, dtype, op, comm, request, 1);
}

#if defined(HAVE_PMPI_ALLREDUCE_INIT)
COLLAR_EXPORT int MPI_Allreduce_init_c(const void *sbuf, void *rbuf,
                                       MPI_Count count, MPI_Datatype dtype,
                                       MPI_Op op, MPI_Comm comm, MPI_Info info,
                                       MPI_Request *request)
{
    if (collar_paths.straight || collar_paths.state != COLLAR_STATE_ACTIVE
        || request == NULL) {
        return PMPI_Allreduce_init_c(sbuf, rbuf, count, dtype, op, comm, info,
                                     request);
    }
    const collar_allreduce_args_t a = {
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op,
        .comm = comm, .request = request, .persistent = 1, .info = info,
        .large = 1,
    };
    return collar_allreduce_intercept(&a);
}
#endif
#endif /* HAVE_PMPI_ALLREDUCE_C */

/* ------------------------------------------------- completion and progress */
