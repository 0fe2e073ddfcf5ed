/*
 * collar - the engine (src/engine/): the conductor of one operation
 * (classify its buffers, agree, select, build, start or run, record),
 * shared by the allreduce and the staged collectives; start-up and
 * shut-down around MPI_Init / MPI_Finalize; the progress of outstanding
 * operations; collar's requests (nonblocking and persistent) and their
 * completion.
 *
 * The entry points of src/interpose/ describe a call and hand it here.  The
 * engine knows the layers below it (src/algo/, src/mem/, src/reduce/,
 * src/core/) and nothing above it: it never includes a header of
 * src/interpose/.
 */
#ifndef COLLAR_ENGINE_H
#define COLLAR_ENGINE_H

#include "../algo/algo.h"
#include "../mem/mem.h"

/* ------------------------------------------------ the entry points' short ways */

/* The engine's state, from MPI_Init to MPI_Finalize (lifecycle.c). */
enum { COLLAR_STATE_OFF, COLLAR_STATE_ACTIVE, COLLAR_STATE_DISABLED,
       COLLAR_STATE_FINALIZED };

/*
 * What the allreduce's entry points test before anything else, one load
 * each, kept by lifecycle.c (decide_paths):
 *   straight       every allreduce goes straight to the MPI library (not
 *                  active; or no device backend, every host rule native
 *                  and nothing to record);
 *   host_straight  a device backend, every host rule native and nothing to
 *                  record: a call whose buffers are in the backend's host
 *                  ranges goes straight to the MPI library.
 */
typedef struct {
    int              state;
    int              straight;
    int              host_straight;
    collar_ranges_t *host_ranges;
} collar_paths_t;
extern collar_paths_t collar_paths;

/* Whether an allreduce on (sbuf, rbuf) goes straight to the MPI library:
 * see collar_paths (with host_straight, its arguments are not checked:
 * collar hands a call with bad arguments to the MPI library as it is). */
static inline int collar_allreduce_straight(const void *sbuf, const void *rbuf)
{
    return collar_paths.straight || collar_paths.state != COLLAR_STATE_ACTIVE
           || (collar_paths.host_straight
               && collar_mem_known_host(collar_paths.host_ranges, rbuf,
                                        sbuf == MPI_IN_PLACE ? rbuf : sbuf));
}

/* ------------------------------------------------ start-up and shut-down */

/* MPI_Init and MPI_Init_thread: start the MPI library and collar. */
int collar_engine_init(int *argc, char ***argv);
int collar_engine_init_thread(int *argc, char ***argv, int required,
                              int *provided);
/* The PMIx_Init in front of the PMIx library's (src/interpose/pmix.c):
 * the MPI library's own, plus collar's key inside MPI_Init. */
int collar_engine_pmix_init(void *proc, void *info, size_t ninfo);
/* collar stays off (built for another MPI library: src/interpose/abi.c). */
void collar_engine_off(void);
/* MPI_Finalize, before the library's: drain and free what collar holds. */
void collar_engine_finalize(void);
/* MPI_Query_thread: the level the application was told. */
int collar_engine_query_thread(int *provided);
/* MPI started without collar's MPI_Init: say why, once, from the first
 * rank: at info level (collar_engine_inactive: MPI_Session_init); as a
 * warning when libcollar.so loads into a process whose MPI is initialised
 * already (collar_engine_loaded; after_mpi: an MPI library was loaded
 * before collar), or at the process's exit (collar_engine_unseen_init)
 * when nothing else said it. */
void collar_engine_inactive(const char *why);
void collar_engine_loaded(int after_mpi);
void collar_engine_unseen_init(void);

/* collar's own API (collar.h). */
int collar_engine_active(void);
const char *collar_engine_device_name(void);
int collar_engine_set_algorithm(const char *name, size_t chunk);
const char *collar_engine_last_algorithm(void);
int collar_engine_communicators(void);

/* ------------------------------------------------------------ allreduce */

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

/* An allreduce of one of the six bindings, past collar_allreduce_straight
 * (allreduce.c); _call for the blocking and nonblocking ones (request
 * NULL: blocking; large: the _c forms), whose entry points then need no
 * stack frame. */
int collar_allreduce_intercept(const collar_allreduce_args_t *a);
int collar_allreduce_call(const void *sbuf, void *rbuf, MPI_Count count,
                          MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                          MPI_Request *request, int large);

/* ------------------------------------------------- the other collectives */

/*
 * The arguments of one call of the other collectives, whatever its
 * binding: counts widened to MPI_Count; count and displacement arrays are
 * read through `large` (the _c forms pass MPI_Count counts and MPI_Aint
 * displacements, the others int).  Reductions (reduce, reduce_scatter,
 * reduce_scatter_block) use sdt = rdt, rcount / rcounts for their counts
 * and `op`.
 */
typedef struct {
    collar_coll_t coll;
    const void   *sbuf;
    void         *rbuf;
    MPI_Count     scount, rcount;
    const void   *scounts, *sdispls, *rcounts, *rdispls;
    int           large;
    MPI_Datatype  sdt, rdt;
    MPI_Op        op;
    int           root;
    MPI_Comm      comm;
} collar_coll_args_t;

/* Collectives whose entry points do more than the PMPI call (colls.c). */
extern unsigned collar_colls_on;
static inline int collar_coll_wanted(collar_coll_t coll)
{
    return (collar_colls_on & (1u << coll)) != 0;
}

/* The blocking, nonblocking and persistent forms of a wanted collective:
 * the device buffers staged, the MPI library's call on the host copies. */
int collar_coll_run(const collar_coll_args_t *a);
int collar_coll_start(const collar_coll_args_t *a, MPI_Request *request);
int collar_coll_init(const collar_coll_args_t *a, MPI_Info info,
                     MPI_Request *request);

/* ------------------------------------------------------------ completion */

/* The completion calls (complete.c): collar's operations progress while
 * the call waits, and the errors of collar's requests among those it
 * completes are reported as the MPI library reports its own. */
int collar_complete_wait(MPI_Request *request, MPI_Status *status);
int collar_complete_waitall(int count, MPI_Request requests[],
                            MPI_Status statuses[]);
int collar_complete_waitany(int count, MPI_Request requests[], int *index,
                            MPI_Status *status);
int collar_complete_waitsome(int incount, MPI_Request requests[],
                             int *outcount, int indices[],
                             MPI_Status statuses[]);
int collar_complete_test(MPI_Request *request, int *flag, MPI_Status *status);
int collar_complete_testall(int count, MPI_Request requests[], int *flag,
                            MPI_Status statuses[]);
int collar_complete_testany(int count, MPI_Request requests[], int *index,
                            int *flag, MPI_Status *status);
int collar_complete_testsome(int incount, MPI_Request requests[],
                             int *outcount, int indices[],
                             MPI_Status statuses[]);
int collar_complete_get_status(MPI_Request request, int *flag,
                               MPI_Status *status);

/* MPI_Start, MPI_Startall and MPI_Request_free (persist.c): collar's
 * persistent requests among them are started (freed) by collar, the
 * others by the MPI library; one load while collar has none. */
int collar_persist_start(MPI_Request *request);
int collar_persist_startall(int count, MPI_Request requests[]);
int collar_persist_request_free(MPI_Request *request);

/* ------------------------------------- progress in blocking point-to-point */

/* Whether a blocking call must progress collar's operations while it
 * waits: some are outstanding and the wrappers may.  One load otherwise. */
int collar_progress_in_calls(void);
/* MPI_Wait that progresses collar's operations while any are outstanding
 * (a loop of progress and PMPI_Test), the library's PMPI_Wait otherwise. */
int collar_wait_progress(MPI_Request *request, MPI_Status *status);
/* The blocking point-to-point calls while collar_progress_in_calls (p2p.c):
 * their nonblocking form and collar_wait_progress; MPI_Probe and
 * MPI_Mprobe as a loop of progress and MPI_Iprobe (MPI_Improbe). */
typedef int (*collar_isend_fn_t)(const void *, int, MPI_Datatype, int, int,
                                 MPI_Comm, MPI_Request *);
int collar_send_progress(collar_isend_fn_t start, const void *buf, int count,
                         MPI_Datatype dtype, int dest, int tag, MPI_Comm comm);
int collar_recv_progress(void *buf, int count, MPI_Datatype dtype, int source,
                         int tag, MPI_Comm comm, MPI_Status *status);
int collar_sendrecv_progress(const void *sbuf, int scount, MPI_Datatype stype,
                             int dest, int stag, void *rbuf, int rcount,
                             MPI_Datatype rtype, int source, int rtag,
                             MPI_Comm comm, MPI_Status *status);
int collar_probe_progress(int source, int tag, MPI_Comm comm,
                          MPI_Status *status);
int collar_mprobe_progress(int source, int tag, MPI_Comm comm,
                           MPI_Message *message, MPI_Status *status);

#endif /* COLLAR_ENGINE_H */
