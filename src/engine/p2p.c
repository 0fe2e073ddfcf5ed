/*
 * collar - the blocking point-to-point calls with collar's operations
 * outstanding (the entry points: src/interpose/blocking.c).
 *
 * Without a progress thread (COLLAR_PROGRESS=auto in a program below
 * MPI_THREAD_MULTIPLE: collar does not raise the thread level, whose locks
 * every MPI call would pay for), collar's operations advance only inside
 * collar's calls.  A rank blocked in MPI_Recv while a peer waits for the
 * rank's next chunk of an MPI_Iallreduce would hang both, against MPI's
 * progress rule.  So while collar has operations outstanding, these calls
 * become their nonblocking form and a loop of collar's progress and the
 * library's test (an MPI_Isend and MPI_Wait are an MPI_Send, MPI-4.0
 * section 3.7.3); with nothing outstanding they are the library's own call
 * after one load.
 *
 * Blocking collectives are not wrapped: a nonblocking collective does not
 * match a blocking one (MPI-4.0 section 6.12), and whether collar has
 * operations outstanding differs between ranks.  They, Fortran's bindings
 * and direct PMPI_ calls keep the rule with the progress thread only.
 */
#include "config.h"
#include "engine_int.h"

/* The blocking point-to-point calls (src/interpose/blocking.c) while collar
 * has operations outstanding: their nonblocking form and a wait with
 * progress (an MPI_Isend and MPI_Wait are an MPI_Send, MPI-4.0 section
 * 3.7.3). */
int collar_send_progress(collar_isend_fn_t start, const void *buf, int count,
                         MPI_Datatype dtype, int dest, int tag, MPI_Comm comm)
{
    MPI_Request request;
    const int rc = start(buf, count, dtype, dest, tag, comm, &request);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    return collar_wait_progress(&request, MPI_STATUS_IGNORE);
}

int collar_recv_progress(void *buf, int count, MPI_Datatype dtype, int source,
                         int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Request request;
    const int rc = PMPI_Irecv(buf, count, dtype, source, tag, comm, &request);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    return collar_wait_progress(&request, status);
}

int collar_sendrecv_progress(const void *sbuf, int scount, MPI_Datatype stype,
                             int dest, int stag, void *rbuf, int rcount,
                             MPI_Datatype rtype, int source, int rtag,
                             MPI_Comm comm, MPI_Status *status)
{
    MPI_Request recv, send;
    int rc = PMPI_Irecv(rbuf, rcount, rtype, source, rtag, comm, &recv);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    rc = PMPI_Isend(sbuf, scount, stype, dest, stag, comm, &send);
    if (rc != MPI_SUCCESS) {
        /* The receive must not outlive the call. */
        PMPI_Cancel(&recv);
        PMPI_Wait(&recv, MPI_STATUS_IGNORE);
        return rc;
    }
    rc = collar_wait_progress(&recv, status);
    const int send_rc = collar_wait_progress(&send, MPI_STATUS_IGNORE);
    return rc != MPI_SUCCESS ? rc : send_rc;
}

/* MPI_Probe and MPI_Mprobe: a loop of progress and the library's
 * MPI_Iprobe (MPI_Improbe) while collar has operations outstanding. */
int collar_probe_progress(int source, int tag, MPI_Comm comm,
                          MPI_Status *status)
{
    unsigned spins = 0;
    while (collar_progress_in_calls()) {
        collar_progress_all();
        int flag = 0;
        const int rc = PMPI_Iprobe(source, tag, comm, &flag, status);
        if (rc != MPI_SUCCESS || flag) {
            return rc;
        }
        collar_wait_pause(&spins);
    }
    return PMPI_Probe(source, tag, comm, status);
}

int collar_mprobe_progress(int source, int tag, MPI_Comm comm,
                           MPI_Message *message, MPI_Status *status)
{
    unsigned spins = 0;
    while (collar_progress_in_calls()) {
        collar_progress_all();
        int flag = 0;
        const int rc = PMPI_Improbe(source, tag, comm, &flag, message, status);
        if (rc != MPI_SUCCESS || flag) {
            return rc;
        }
        collar_wait_pause(&spins);
    }
    return PMPI_Mprobe(source, tag, comm, message, status);
}
