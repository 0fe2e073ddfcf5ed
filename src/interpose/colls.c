/*
 * collar - the entry points of the collectives other than allreduce:
 * MPI_Bcast, MPI_Allgather(v), MPI_Alltoall(v), MPI_Reduce_scatter(_block),
 * MPI_Reduce, MPI_Gather(v) and MPI_Scatter(v), in their blocking,
 * nonblocking (MPI_I...), persistent (..._init) and large-count (_c)
 * bindings.  Each goes straight to the MPI library unless collar has
 * something to do for that collective (collar_coll_wanted: device buffers
 * to stage, calls to count), else describes its call and hands it to the
 * engine (src/engine/colls.c), which stages the device buffers and makes
 * the MPI library's call on the host copies.
 */
#include "config.h"
#include "interpose.h"

/* blocking */
COLLAR_EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_BCAST)) {
        return PMPI_Bcast(buffer, count, datatype, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_BCAST, .rbuf = buffer, .rcount = count, .rdt = datatype, .root = root, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHER)) {
        return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHERV)) {
        return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALL)) {
        return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALL, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALLV)) {
        return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALLV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = sdispls, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = rdispls, .rdt = recvtype, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER)) {
        return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, reduce_op, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER, .sbuf = sendbuf, .rbuf = recvbuf, .rcounts = recvcounts, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER_BLOCK)) {
        return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, reduce_op, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER_BLOCK, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = recvcount, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op reduce_op, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE)) {
        return PMPI_Reduce(sendbuf, recvbuf, count, datatype, reduce_op, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = count, .sdt = datatype, .rdt = datatype, .op = reduce_op, .root = root, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHER)) {
        return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHERV)) {
        return PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTER)) {
        return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTERV)) {
        return PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTERV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = displs, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_run(&a);
}


/* nonblocking */
COLLAR_EXPORT int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_BCAST)) {
        return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_BCAST, .rbuf = buffer, .rcount = count, .rdt = datatype, .root = root, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHER)) {
        return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHERV)) {
        return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALL)) {
        return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALL, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALLV)) {
        return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALLV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = sdispls, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = rdispls, .rdt = recvtype, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER)) {
        return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, reduce_op, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER, .sbuf = sendbuf, .rbuf = recvbuf, .rcounts = recvcounts, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER_BLOCK)) {
        return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, reduce_op, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER_BLOCK, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = recvcount, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op reduce_op, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE)) {
        return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, reduce_op, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = count, .sdt = datatype, .rdt = datatype, .op = reduce_op, .root = root, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHER)) {
        return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHERV)) {
        return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTER)) {
        return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTERV)) {
        return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTERV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = displs, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_start(&a, request);
}


/* persistent */
#if defined(HAVE_PMPI_ALLREDUCE_INIT)

COLLAR_EXPORT int MPI_Bcast_init(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_BCAST)) {
        return PMPI_Bcast_init(buffer, count, datatype, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_BCAST, .rbuf = buffer, .rcount = count, .rdt = datatype, .root = root, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Allgather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHER)) {
        return PMPI_Allgather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Allgatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHERV)) {
        return PMPI_Allgatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Alltoall_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALL)) {
        return PMPI_Alltoall_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALL, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALLV)) {
        return PMPI_Alltoallv_init(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALLV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = sdispls, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = rdispls, .rdt = recvtype, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Reduce_scatter_init(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER)) {
        return PMPI_Reduce_scatter_init(sendbuf, recvbuf, recvcounts, datatype, reduce_op, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER, .sbuf = sendbuf, .rbuf = recvbuf, .rcounts = recvcounts, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Reduce_scatter_block_init(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER_BLOCK)) {
        return PMPI_Reduce_scatter_block_init(sendbuf, recvbuf, recvcount, datatype, reduce_op, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER_BLOCK, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = recvcount, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Reduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op reduce_op, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE)) {
        return PMPI_Reduce_init(sendbuf, recvbuf, count, datatype, reduce_op, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = count, .sdt = datatype, .rdt = datatype, .op = reduce_op, .root = root, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Gather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHER)) {
        return PMPI_Gather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Gatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHERV)) {
        return PMPI_Gatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Scatter_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTER)) {
        return PMPI_Scatter_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Scatterv_init(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTERV)) {
        return PMPI_Scatterv_init(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTERV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = displs, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm };
    return collar_coll_init(&a, info, request);
}

#endif /* defined(HAVE_PMPI_ALLREDUCE_INIT) */

/* blocking, large counts (_c) */
#if defined(HAVE_PMPI_ALLREDUCE_C)

COLLAR_EXPORT int MPI_Bcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_BCAST)) {
        return PMPI_Bcast_c(buffer, count, datatype, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_BCAST, .rbuf = buffer, .rcount = count, .rdt = datatype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Allgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHER)) {
        return PMPI_Allgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Allgatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHERV)) {
        return PMPI_Allgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Alltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALL)) {
        return PMPI_Alltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALL, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Alltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALLV)) {
        return PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALLV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = sdispls, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = rdispls, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Reduce_scatter_c(const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER)) {
        return PMPI_Reduce_scatter_c(sendbuf, recvbuf, recvcounts, datatype, reduce_op, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER, .sbuf = sendbuf, .rbuf = recvbuf, .rcounts = recvcounts, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Reduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER_BLOCK)) {
        return PMPI_Reduce_scatter_block_c(sendbuf, recvbuf, recvcount, datatype, reduce_op, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER_BLOCK, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = recvcount, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Reduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op reduce_op, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE)) {
        return PMPI_Reduce_c(sendbuf, recvbuf, count, datatype, reduce_op, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = count, .sdt = datatype, .rdt = datatype, .op = reduce_op, .root = root, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Gather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHER)) {
        return PMPI_Gather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Gatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHERV)) {
        return PMPI_Gatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Scatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTER)) {
        return PMPI_Scatter_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

COLLAR_EXPORT int MPI_Scatterv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTERV)) {
        return PMPI_Scatterv_c(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTERV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = displs, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_run(&a);
}

#endif /* defined(HAVE_PMPI_ALLREDUCE_C) */

/* nonblocking, large counts (_c) */
#if defined(HAVE_PMPI_ALLREDUCE_C)

COLLAR_EXPORT int MPI_Ibcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_BCAST)) {
        return PMPI_Ibcast_c(buffer, count, datatype, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_BCAST, .rbuf = buffer, .rcount = count, .rdt = datatype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Iallgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHER)) {
        return PMPI_Iallgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Iallgatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHERV)) {
        return PMPI_Iallgatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Ialltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALL)) {
        return PMPI_Ialltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALL, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Ialltoallv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALLV)) {
        return PMPI_Ialltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALLV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = sdispls, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = rdispls, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Ireduce_scatter_c(const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER)) {
        return PMPI_Ireduce_scatter_c(sendbuf, recvbuf, recvcounts, datatype, reduce_op, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER, .sbuf = sendbuf, .rbuf = recvbuf, .rcounts = recvcounts, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Ireduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER_BLOCK)) {
        return PMPI_Ireduce_scatter_block_c(sendbuf, recvbuf, recvcount, datatype, reduce_op, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER_BLOCK, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = recvcount, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Ireduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op reduce_op, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE)) {
        return PMPI_Ireduce_c(sendbuf, recvbuf, count, datatype, reduce_op, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = count, .sdt = datatype, .rdt = datatype, .op = reduce_op, .root = root, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Igather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHER)) {
        return PMPI_Igather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Igatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHERV)) {
        return PMPI_Igatherv_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Iscatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTER)) {
        return PMPI_Iscatter_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

COLLAR_EXPORT int MPI_Iscatterv_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTERV)) {
        return PMPI_Iscatterv_c(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTERV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = displs, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_start(&a, request);
}

#endif /* defined(HAVE_PMPI_ALLREDUCE_C) */

/* persistent, large counts (_c) */
#if defined(HAVE_PMPI_ALLREDUCE_C) && defined(HAVE_PMPI_ALLREDUCE_INIT)

COLLAR_EXPORT int MPI_Bcast_init_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_BCAST)) {
        return PMPI_Bcast_init_c(buffer, count, datatype, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_BCAST, .rbuf = buffer, .rcount = count, .rdt = datatype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Allgather_init_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHER)) {
        return PMPI_Allgather_init_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Allgatherv_init_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLGATHERV)) {
        return PMPI_Allgatherv_init_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLGATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Alltoall_init_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALL)) {
        return PMPI_Alltoall_init_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALL, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Alltoallv_init_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_ALLTOALLV)) {
        return PMPI_Alltoallv_init_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLTOALLV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = sdispls, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = rdispls, .rdt = recvtype, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Reduce_scatter_init_c(const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER)) {
        return PMPI_Reduce_scatter_init_c(sendbuf, recvbuf, recvcounts, datatype, reduce_op, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER, .sbuf = sendbuf, .rbuf = recvbuf, .rcounts = recvcounts, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Reduce_scatter_block_init_c(const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op reduce_op, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE_SCATTER_BLOCK)) {
        return PMPI_Reduce_scatter_block_init_c(sendbuf, recvbuf, recvcount, datatype, reduce_op, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE_SCATTER_BLOCK, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = recvcount, .sdt = datatype, .rdt = datatype, .op = reduce_op, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Reduce_init_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op reduce_op, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_REDUCE)) {
        return PMPI_Reduce_init_c(sendbuf, recvbuf, count, datatype, reduce_op, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_REDUCE, .sbuf = sendbuf, .rbuf = recvbuf, .rcount = count, .sdt = datatype, .rdt = datatype, .op = reduce_op, .root = root, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Gather_init_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHER)) {
        return PMPI_Gather_init_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Gatherv_init_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_GATHERV)) {
        return PMPI_Gatherv_init_c(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_GATHERV, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcounts = recvcounts, .rdispls = displs, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Scatter_init_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTER)) {
        return PMPI_Scatter_init_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTER, .sbuf = sendbuf, .scount = sendcount, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

COLLAR_EXPORT int MPI_Scatterv_init_c(const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!collar_coll_wanted(COLLAR_COLL_SCATTERV)) {
        return PMPI_Scatterv_init_c(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, info, request);
    }
    const collar_coll_args_t a = { .coll = COLLAR_COLL_SCATTERV, .sbuf = sendbuf, .scounts = sendcounts, .sdispls = displs, .sdt = sendtype, .rbuf = recvbuf, .rcount = recvcount, .rdt = recvtype, .root = root, .comm = comm, .large = 1 };
    return collar_coll_init(&a, info, request);
}

#endif /* defined(HAVE_PMPI_ALLREDUCE_C) && defined(HAVE_PMPI_ALLREDUCE_INIT) */
