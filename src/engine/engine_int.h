/*
 * collar - inside the engine (src/engine/): its state, collar's requests,
 * persistent operations and the running of schedules, shared by the
 * engine's files and by nothing above them.
 */
#ifndef COLLAR_ENGINE_INT_H
#define COLLAR_ENGINE_INT_H

#include "engine.h"

#include <stdatomic.h>

/* What the allreduce's conductor needs of start-up (lifecycle.c). */
typedef struct {
    const collar_device_t *dev;
    /* The MPI library takes device pointers (native is eligible for them). */
    int mpi_cuda_aware;
    /* Host buffers only and nothing forced: every allreduce is native. */
    int pass_all;
    /* A device backend classifies buffers, and a call on host memory is
     * native whatever its size or communicator, with nothing to check or
     * log for it: such a call goes to the MPI library right after the
     * classification of its buffers (collar_allreduce). */
    int host_direct;
    /* The MPI library runs at MPI_THREAD_MULTIPLE: a thread may sit in the
     * library's own wait for a request another thread completes
     * (persist.c). */
    int thread_multiple;
} collar_engine_t;
extern collar_engine_t collar_engine;

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
/* Whether collar_colls_allreduce copies a call of memory kind `mem` to
 * the host (then adds a status agreement, and runs on collar's
 * communicator where it is given one): a device call where the MPI
 * library does not take device pointers (COLLAR_MPI_CUDA_AWARE). */
int collar_colls_allreduce_stages(collar_mem_kind_t mem);
/* An allreduce as the MPI library's own collective of the same form on
 * host copies of its device buffers, on the application's communicator
 * (blocking, nonblocking, persistent, _c): the form the library alone
 * carries (src/engine/allreduce.c, form_of).  `check`: COLLAR_CHECK's
 * check of a nonblocking or persistent start, started before (NULL:
 * none), which the operation now owns.  `site`: the statistics record
 * with the call site the entry point took (NULL: none).  `on`: collar's
 * state of the communicator, whose private duplicate carries the library's
 * collectives of a staged call where it is ready (NULL: the application's
 * communicator carries them); the conductor gives it only where nothing
 * else of collar's issues collectives on that duplicate meanwhile (no
 * progress thread on every rank), so that their order there is the
 * application's. */
int collar_colls_allreduce(const collar_allreduce_args_t *a,
                           collar_check_t *check,
                           const collar_stats_call_t *site, collar_comm_t *on);

/* Advance every outstanding schedule once; nonzero if any is outstanding. */
int collar_progress_all(void);
/* collar_in_turn_fn_t (algo.h): fn(c) in the communicator's turn, once
 * its private communicator is there, progressing the others meanwhile. */
collar_status_t collar_run_in_turn(collar_comm_t *c, void (*fn)(collar_comm_t *c));
/* Run a started schedule to completion; returns its final status. */
collar_status_t collar_run_blocking(collar_sched_t *s);
/* Hand a started schedule to progress behind a new generalized request;
 * comm: the application's communicator of the operation (its errors go
 * through its handler, request.c). */
collar_status_t collar_run_nonblocking(collar_sched_t *s, MPI_Comm comm,
                                       MPI_Request *request);
/* Hand a started schedule to progress with no request: a start that
 * failed here after its schedule was started (its turn taken, its
 * messages expected by the other ranks) returns its error at once, and
 * the schedule, failed (collar_sched_fail: it drains, touching no buffer
 * of the application's), runs to its end and goes. */
void collar_run_detached(collar_sched_t *s);
/* Hand a started schedule with an on_finish hook to progress (a start of
 * a persistent operation). */
void collar_run_persistent(collar_sched_t *s);
/* Progress until nothing is outstanding (MPI_Finalize). */
void collar_run_drain(void);
/* Let a progress thread run (the MPI library gives MPI_THREAD_MULTIPLE):
 * it makes a pass over the outstanding operations every interval_us while
 * there are any, and sleeps while there are none. */
void collar_progress_thread_enable(long interval_us);
/* Whether this process runs the progress thread, started here the first
 * time it is asked where it may run: before the first agreement that
 * counts on it (a private communicator's), so that a thread that cannot
 * start is agreed on, never found later. */
int collar_progress_thread_ready(void);
/* Stop and join it (before MPI_Finalize). */
void collar_progress_thread_stop(void);
/* Let the blocking point-to-point wrappers progress (blocking.c); off
 * again at collar_progress_thread_stop. */
void collar_progress_calls_enable(void);
/* Between two polls of such a loop: yield the processor after the first
 * 64. */
void collar_wait_pause(unsigned *spins);

/* ------------------------------------------ collar's requests (request.c) */

typedef enum {
    COLLAR_REQUEST_NONBLOCKING,   /* a generalized request (progress.c) */
    COLLAR_REQUEST_PERSISTENT     /* collar_persist_t (persist.c) */
} collar_request_kind_t;

/*
 * A request the application got from collar, whose operation collar runs:
 * in one table by handle while the MPI library holds the request.  The
 * library's completion of it says success; the operation's error is kept
 * here, and collar's completion calls report it (through the handler of
 * `comm`).  Reference-counted: the owner's reference (from
 * collar_request_init), and one per completion call that holds it
 * (collar_watch_begin); `release` runs at the last.
 */
typedef struct collar_request collar_request_t;
struct collar_request {
    collar_request_kind_t kind;
    MPI_Request       handle;    /* the application's request */
    MPI_Comm          comm;      /* the application's communicator */
    collar_usercomm_t *ucomm;    /* its state (a reference), or NULL */
    atomic_int        error;     /* the operation's MPI error, until reported */
    atomic_int        watched;   /* completion calls of collar's holding it */
    atomic_int        refs;
    void            (*release)(collar_request_t *r);
    /* Kept by request.c. */
    collar_request_t *next;
    int               listed;
};

/* Fill `r` with one reference (the caller's), for an operation on the
 * application's communicator `comm`. */
void collar_request_init(collar_request_t *r, collar_request_kind_t kind,
                         MPI_Comm comm, void (*release)(collar_request_t *r));
void collar_request_ref(collar_request_t *r);
/* Drop a reference; the last one calls release. */
void collar_request_unref(collar_request_t *r);
/* Enter `r` in the table under `handle` (before the application sees it). */
void collar_request_add(collar_request_t *r, MPI_Request handle);
/* Take it out (the library frees or has freed the handle); idempotent. */
void collar_request_remove(collar_request_t *r);
/* The request entered under `handle`, else NULL.  Good while the caller
 * holds the application's request (nothing else can remove it then). */
collar_request_t *collar_request_find(MPI_Request handle);
/* The operation's error (MPI_SUCCESS: none, or a new start). */
void collar_request_set_error(collar_request_t *r, int error);
/* Whether one of collar's completion calls holds it now. */
int collar_request_is_watched(const collar_request_t *r);

/*
 * collar's requests among the requests of one completion call, held from
 * before the library's completion (while the handles still name them) to
 * the end of the call.
 */
typedef struct {
    int                count;   /* entries in reqs (0: none of collar's) */
    int                found;   /* collar's requests among them */
    collar_request_t **reqs;    /* [count]: collar's request, or NULL */
    collar_request_t  *local[16];
} collar_watch_t;

/* Look requests[0..count-1] up and hold collar's; one atomic load while
 * collar has no request. */
void collar_watch_begin(collar_watch_t *w, int count, const MPI_Request requests[]);
void collar_watch_end(collar_watch_t *w);
/* Whether requests[i] of the call is one of collar's. */
int collar_watch_is_collar(const collar_watch_t *w, int i);
/* requests[i], which the call completed: its operation's error, reported
 * once (cleared, and raised through its communicator's handler), or
 * MPI_SUCCESS. */
int collar_watch_take(collar_watch_t *w, int i);
/* The error of requests[i] without reporting it (MPI_Request_get_status). */
int collar_watch_peek(const collar_watch_t *w, int i);

/* ------------------------------------------------ persistent (persist.c) */

/*
 * A persistent operation collar runs itself.  The owner (allreduce.c,
 * colls.c) fills coll, start, destroy and comm, then
 * collar_persist_create gives it the application's request.  start: called
 * by MPI_Start with the request's receive posted; it starts the operation,
 * whose end calls collar_persist_finished.  destroy: frees the owner's
 * state (after MPI_Request_free, or at MPI_Finalize).
 */
typedef struct collar_persist collar_persist_t;
struct collar_persist {
    collar_coll_t     coll;
    void            (*start)(collar_persist_t *p);
    void            (*destroy)(collar_persist_t *p);
    MPI_Comm          comm;      /* the application's, for its error handler */
    /* Kept by persist.c. */
    collar_request_t  req;       /* the application's request; its error:
                                    that of the last start */
    int               tag;
    int               active;
    int               freed;     /* freed by the application while active */
    collar_persist_t *next;
};

int collar_persist_create(collar_persist_t *p, MPI_Request *request);
void collar_persist_finished(collar_persist_t *p, int error);
/* Free every persistent operation left (MPI_Finalize). */
void collar_persist_finalize(void);


#endif /* COLLAR_ENGINE_INT_H */
