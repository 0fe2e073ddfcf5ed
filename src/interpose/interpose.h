/*
 * collar - interposition layer: the exported MPI_* symbols, the start-up and
 * shut-down of collar around MPI_Init / MPI_Finalize, and the progress of
 * outstanding schedules from the application's MPI_Wait* / MPI_Test* calls.
 */
#ifndef COLLAR_INTERPOSE_H
#define COLLAR_INTERPOSE_H

#include "../algo/algo.h"
#include "../mem/mem.h"

#define COLLAR_EXPORT __attribute__((visibility("default")))

/* Run an allreduce through collar.  request == NULL: blocking.  stat:
 * NULL, or the call's statistics record (call site filled in). */
int collar_allreduce(const void *sbuf, void *rbuf, MPI_Count count,
                     MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                     MPI_Request *request, collar_stats_call_t *stat);

/* The other blocking collectives (colls.c): from MPI_Init on, stage the
 * device buffers of those in COLLAR_COLLECTIVES through host memory when
 * `dev` is a device and the MPI library does not take device pointers, and
 * count every call when statistics are on; until collar_colls_stop (at
 * MPI_Finalize) every call goes straight to the MPI library. */
void collar_colls_start(const collar_device_t *dev, int mpi_cuda_aware);
void collar_colls_stop(void);

/* Advance every outstanding schedule once; nonzero if any is outstanding. */
int collar_progress_all(void);
/* Progress until none of `requests` is one of collar's operations still
 * running; completes nothing for the caller (the requests stay as they are,
 * collar's completed operations ready for MPI_Wait / MPI_Test). */
void collar_progress_requests(int count, const MPI_Request requests[]);
/* Run a started schedule to completion; returns its final status. */
collar_status_t collar_run_blocking(collar_sched_t *s);
/* Hand a started schedule to progress behind a new generalized request. */
collar_status_t collar_run_nonblocking(collar_sched_t *s, MPI_Request *request);
/* Progress until nothing is outstanding (MPI_Finalize). */
void collar_run_drain(void);

#endif /* COLLAR_INTERPOSE_H */
