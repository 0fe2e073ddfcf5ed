/*
 * collar - what the `ipc` and `hier` allreduces share (src/algo/ipc.c,
 * src/algo/hier.c): the IPC region of a node, its registration, and the
 * steps both schedules are made of.
 */
#ifndef COLLAR_IPC_INT_H
#define COLLAR_IPC_INT_H

#include "algo.h"

/* Registrations allocate at least this much (each area). */
#define IPC_MIN_CAP ((size_t)64 << 10)

/* One rank's view of its node's IPC region. */
typedef struct {
    int                    refs;     /* atomic: the communicator's + schedules' */
    const collar_device_t *dev;
    int                    n, rank;  /* of the node */
    size_t                 cap;      /* bytes of each area (in, out) */
    char                  *own;      /* 2 * cap: in, then out */
    char                 **peer;     /* peer[i]: node rank i's region here */
} ipc_region_t;

/* comm->ipc */
typedef struct {
    ipc_region_t *region;
    int           failed;   /* set once registration failed: its code + 1 */
} ipc_state_t;

/* The outcome of a registration (MPI_MIN of every rank's code). */
enum { IPC_NO_BACKEND = 0, IPC_NO_MEMORY = 1, IPC_NO_MAP = 2, IPC_OK = 3 };

/* "ipc -> chunked: ..." (or "hier -> chunked: ...") for a failed code. */
const char *collar_ipc_fallback_why(collar_alg_t alg, int code);

void collar_ipc_region_unref(ipc_region_t *g);

/*
 * The region for this call: registered (or grown) on every node when the
 * communicator has none large enough, collectively over the communicator.
 * The ranks of a node agree on the outcome at registration; `agree`, when
 * given, makes it the same on every rank of the communicator (`hier`:
 * nodes register apart).  When it fails, now or at an earlier call,
 * plan->alg becomes chunked with the reason.
 */
void collar_ipc_prepare(const collar_call_t *call, collar_comm_t *comm,
                        collar_check_progress_fn_t progress,
                        collar_agree_min_fn_t agree, collar_plan_t *plan);

/* Owned by a schedule: its reference on the region, the signals' ints. */
#define IPC_SIGNALS 3
typedef struct {
    ipc_region_t *region;
    int           sig_in[IPC_SIGNALS];
    int           sig_out[IPC_SIGNALS];
} ipc_op_t;

/* The schedule's reference on the communicator's region (freed with the
 * schedule); NULL when it cannot run (no region, too small). */
ipc_op_t *collar_ipc_op_attach(const collar_call_t *call, collar_sched_t *s);

/* Steps: a device copy after `dep` (-1: none); signal k, a one-int
 * allreduce on communicator `on` (collar_step_comm_t) after `dep`;
 * dst = peer[0] op peer[1] ... op peer[n-1], each at area + off, `count`
 * elements, in node rank order on one stream.  *index / *last: the step
 * (the last one) added. */
collar_status_t collar_ipc_add_copy(collar_sched_t *s, void *dst, const void *src,
                                    size_t bytes, int stream, int dep, int *index);
collar_status_t collar_ipc_add_signal(collar_sched_t *s, ipc_op_t *op, int k,
                                      int on, int dep, int *index);
/* The start every call shares: ORDER, signal 0 ("the last call's readers
 * are done"), the copy of the input into the own region's `in`, signal 1
 * ("every input is in place"), the signals on communicator `on`.  *c1:
 * signal 1. */
collar_status_t collar_ipc_add_intake(collar_sched_t *s, ipc_op_t *op,
                                      const collar_call_t *call, int on,
                                      int stream, int *c1);
/* The end of two-shot: slice p of nslices (collar_block_range) copied from
 * node rank p's `out` into the receive buffer, for every p, after `dep`. */
collar_status_t collar_ipc_add_gather(collar_sched_t *s, const collar_call_t *call,
                                      const ipc_region_t *g, int nslices,
                                      int stream, int dep);
collar_status_t collar_ipc_add_reduce_all(collar_sched_t *s,
                                          const collar_call_t *call,
                                          const ipc_region_t *g, size_t area,
                                          char *dst, size_t off, size_t count,
                                          int stream, int dep, int *last);

#endif /* COLLAR_IPC_INT_H */
