/*
 * collar - the blocking point-to-point calls (MPI_Send, MPI_Ssend,
 * MPI_Rsend, MPI_Recv, MPI_Sendrecv, MPI_Probe, MPI_Mprobe): the library's
 * own call after one load while collar has nothing outstanding, else a
 * wait that progresses collar's operations (src/engine/p2p.c says why).
 */
#include "config.h"
#include "interpose.h"

COLLAR_EXPORT int MPI_Send(const void *buf, int count, MPI_Datatype dtype,
                           int dest, int tag, MPI_Comm comm)
{
    if (!collar_progress_in_calls()) {
        return PMPI_Send(buf, count, dtype, dest, tag, comm);
    }
    return collar_send_progress(PMPI_Isend, buf, count, dtype, dest, tag, comm);
}

COLLAR_EXPORT int MPI_Ssend(const void *buf, int count, MPI_Datatype dtype,
                            int dest, int tag, MPI_Comm comm)
{
    if (!collar_progress_in_calls()) {
        return PMPI_Ssend(buf, count, dtype, dest, tag, comm);
    }
    return collar_send_progress(PMPI_Issend, buf, count, dtype, dest, tag, comm);
}

COLLAR_EXPORT int MPI_Rsend(const void *buf, int count, MPI_Datatype dtype,
                            int dest, int tag, MPI_Comm comm)
{
    if (!collar_progress_in_calls()) {
        return PMPI_Rsend(buf, count, dtype, dest, tag, comm);
    }
    return collar_send_progress(PMPI_Irsend, buf, count, dtype, dest, tag, comm);
}

COLLAR_EXPORT int MPI_Recv(void *buf, int count, MPI_Datatype dtype,
                           int source, int tag, MPI_Comm comm,
                           MPI_Status *status)
{
    if (!collar_progress_in_calls()) {
        return PMPI_Recv(buf, count, dtype, source, tag, comm, status);
    }
    return collar_recv_progress(buf, count, dtype, source, tag, comm, status);
}

COLLAR_EXPORT int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype,
                               int dest, int stag, void *rbuf, int rcount,
                               MPI_Datatype rtype, int source, int rtag,
                               MPI_Comm comm, MPI_Status *status)
{
    if (!collar_progress_in_calls()) {
        return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount,
                             rtype, source, rtag, comm, status);
    }
    return collar_sendrecv_progress(sbuf, scount, stype, dest, stag, rbuf,
                                    rcount, rtype, source, rtag, comm, status);
}

COLLAR_EXPORT int MPI_Probe(int source, int tag, MPI_Comm comm,
                            MPI_Status *status)
{
    return collar_probe_progress(source, tag, comm, status);
}

COLLAR_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm comm,
                             MPI_Message *message, MPI_Status *status)
{
    return collar_mprobe_progress(source, tag, comm, message, status);
}
