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

/* One allreduce call, whichever of its six bindings. */
typedef struct {
    const void   *sbuf;
    void         *rbuf;
    MPI_Count     count;
    MPI_Datatype  dtype;
    MPI_Op        op;
    MPI_Comm      comm;
    MPI_Request  *request;    /* nonblocking and persistent forms, else NULL */
    int           persistent; /* MPI_Allreduce_init(_c) */
    MPI_Info      info;       /* of the persistent forms */
    int           large;      /* the _c forms (MPI_Count count) */
} collar_allreduce_args_t;

/* Run an allreduce through collar.  stat: NULL, or the call's statistics
 * record (call site filled in).  Counts above INT_MAX go to the MPI
 * library's own _c form. */
int collar_allreduce(const collar_allreduce_args_t *a, collar_stats_call_t *stat);

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
/* Hand a started schedule with an on_finish hook to progress (a start of
 * a persistent operation). */
void collar_run_persistent(collar_sched_t *s);
/* Progress until nothing is outstanding (MPI_Finalize). */
void collar_run_drain(void);
/* Let a progress thread run (the MPI library gives MPI_THREAD_MULTIPLE):
 * it starts with the first operation and makes a pass over the outstanding
 * ones every interval_us while there are any. */
void collar_progress_thread_enable(long interval_us);
/* Stop and join it (before MPI_Finalize). */
void collar_progress_thread_stop(void);

/* ------------------------------------------------ persistent (persist.c) */

/*
 * A persistent operation collar runs itself.  The owner (interpose.c,
 * colls.c) fills coll, start and destroy, then collar_persist_create gives
 * it the application's request.  start: called by MPI_Start with the
 * request's receive posted; it starts the operation, whose end calls
 * collar_persist_finished.  destroy: frees the owner's state (after
 * MPI_Request_free, or at MPI_Finalize).
 */
typedef struct collar_persist collar_persist_t;
struct collar_persist {
    collar_coll_t     coll;
    void            (*start)(collar_persist_t *p);
    void            (*destroy)(collar_persist_t *p);
    MPI_Comm          comm;      /* the application's, for its error handler */
    /* Kept by persist.c. */
    MPI_Request       handle;
    int               tag;
    int               active;
    int               freed;     /* freed by the application while active */
    int               error;     /* MPI error of the last start */
    collar_persist_t *next;
};

int collar_persist_create(collar_persist_t *p, MPI_Request *request);
void collar_persist_finished(collar_persist_t *p, int error);
/* The operation behind `handle` when it is one of collar's, else NULL. */
collar_persist_t *collar_persist_find(MPI_Request handle);
/* Free every persistent operation left (MPI_Finalize). */
void collar_persist_finalize(void);

#endif /* COLLAR_INTERPOSE_H */
