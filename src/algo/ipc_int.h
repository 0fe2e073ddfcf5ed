/*
 * collar - what the `ipc` and `hier` allreduces share (src/algo/ipc.c,
 * src/algo/hier.c): the IPC region of a node, its registration, and the
 * steps both schedules are made of.
 */
#ifndef COLLAR_IPC_INT_H
#define COLLAR_IPC_INT_H

#include "algo.h"

#include <pthread.h>

/* Registrations allocate at least this much (each area). */
#define IPC_MIN_CAP ((size_t)64 << 10)

struct ipc_state;

/* One rank's view of its node's IPC region. */
typedef struct {
    int                    refs;     /* atomic: the communicator's + schedules' */
    struct ipc_state      *st;       /* its communicator's (a reference) */
    uint64_t               serial;   /* the own memory's in this process
                                        (ipc.c, "Freeing"); 0: none */
    const collar_device_t *dev;
    int                    n, rank;  /* of the node */
    size_t                 cap;      /* bytes of each area (in, out) */
    char                  *own;      /* 2 * cap: in, then out */
    char                 **peer;     /* peer[i]: node rank i's region here */
    int                   *world;    /* n: node rank i's MPI_COMM_WORLD rank */
    uint64_t              *peer_serial; /* n: node rank i's serial of its
                                        memory (from its card; 0: unknown) */
    /* Registration (ipc.c): done (atomic) once the outcome is known, the
     * same on every rank of the communicator: code (IPC_OK, or why not;
     * the memory is given back then).  code_in/code_out are the
     * agreement's, cards the exchange's. */
    int                    done;
    int                    code;
    int                    code_in, code_out;
    void                  *cards;
} ipc_region_t;

/* comm->ipc: the latest region registered (or registering, or failed),
 * the one calls up to its size use. */
typedef struct ipc_state {
    ipc_region_t         *region;
    int                   refs;      /* atomic: the communicator's, each
                                        region's */
} ipc_state_t;

/* The outcome of a registration (MPI_MIN of every rank's code). */
enum { IPC_NO_BACKEND = 0, IPC_NO_MEMORY = 1, IPC_NO_MAP = 2, IPC_OK = 3 };

/* "ipc -> chunked: ..." (or "hier -> chunked: ...") for a failed code. */
const char *collar_ipc_fallback_why(collar_alg_t alg, int code);

void collar_ipc_region_unref(ipc_region_t *g);

/* Owned by a schedule: its reference on the region, the signals' ints,
 * and what the continuation needs to build the steps once the region is
 * registered. */
#define IPC_SIGNALS 3
struct ipc_op;
typedef collar_status_t (*collar_ipc_steps_fn_t)(const collar_call_t *call,
                                                 const collar_plan_t *plan,
                                                 collar_sched_t *s,
                                                 struct ipc_op *op);
typedef struct ipc_op {
    ipc_region_t         *region;
    int                   sig_in[IPC_SIGNALS];
    int                   sig_out[IPC_SIGNALS];
    collar_call_t         call;
    collar_plan_t         plan;
    collar_ipc_steps_fn_t steps;
    int                   registrar;   /* this call registers the region */
    int                   agreed;      /* the status agreement rides in C1
                                          (a blocking one-shot) */
    int                   first_recv, nexch;   /* its exchange: nexch steps from first_recv */
    struct ipc_zc        *zc;          /* zero-copy's (ipc_user.c), or NULL */
} ipc_op_t;

/*
 * The schedule of an ipc or hier call on `s` (which owns what it makes):
 * the region this call uses (collar ipc.c: the latest when large enough,
 * else a new one), and `steps` on it, built now when its registration is
 * known, else by a continuation step after it (this call's registration
 * steps, or an earlier call's registration still in flight).  When the
 * registration failed, chunked's steps instead, the reason said once.
 * Nothing waits for another rank here.
 */
collar_status_t collar_ipc_start(const collar_call_t *call,
                                 const collar_plan_t *plan, collar_sched_t *s,
                                 collar_ipc_steps_fn_t steps);

/* Two-shot (1) or one-shot (0): from oneshot= bytes up, on more than one
 * rank. */
int collar_ipc_twoshot(const ipc_op_t *op);
/* The info line of the call (collar_algo_log_choice), with `how` it runs:
 * ipc's mode, as collar_ipc_describe words it ("ipc two-shot, zero-copy"),
 * hier's chunk; NULL for what the plan says (a fallback's). */
void collar_ipc_log(const collar_sched_t *s, const ipc_op_t *op,
                    const collar_plan_t *plan, const char *how);
void collar_ipc_describe(const ipc_op_t *op, int zerocopy, char *buf, size_t len);

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
/* The same from n inputs anywhere: dst = src[0] op ... op src[n-1]. */
collar_status_t collar_ipc_add_reduce_ptrs(collar_sched_t *s,
                                           const collar_call_t *call,
                                           const char *const *src, int n,
                                           char *dst, size_t count, int stream,
                                           int dep, int *last);
/* collar_ipc_add_gather's copies from from[p] (slice p at its offset
 * there) for every p but `skip` (-1: none). */
collar_status_t collar_ipc_add_gather_from(collar_sched_t *s,
                                           const collar_call_t *call,
                                           const char *const *from, int nslices,
                                           int skip, int stream, int dep);
/* ipc's steps once every input is in its `in` area (signal 1 at c1): the
 * one-shot reduction, or two-shot's reduce-scatter, signal 2 and gather;
 * the status agreement is the caller's. */
collar_status_t collar_ipc_add_after_intake(collar_sched_t *s, ipc_op_t *op,
                                            int stream, int c1);

/*
 * Zero-copy (ipc_user.c): ipc reading the peers' buffers in place.
 * wanted: whether this call tries (alike on every rank: ipc, not
 * persistent, more than one rank, COLLAR_IPC_ZEROCOPY); add: its steps,
 * the status agreement included (falling back to the copy-in by itself
 * where a rank cannot export or map); free: what a schedule holds;
 * finalize: every mapping closed (MPI_Finalize).
 */
int collar_ipc_zc_wanted(const collar_comm_t *comm, const ipc_op_t *op);
collar_status_t collar_ipc_zc_add(collar_sched_t *s, ipc_op_t *op, int stream);
void collar_ipc_zc_free(ipc_op_t *op);
void collar_ipc_zc_finalize(void);

#endif /* COLLAR_IPC_INT_H */
