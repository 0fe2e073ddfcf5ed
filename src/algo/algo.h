/*
 * collar - algorithms layer.
 *
 * Each algorithm is a schedule builder with one signature: it reads the
 * description of the call and the plan chosen for it, and appends steps to
 * an empty schedule.  The `native` algorithm is the MPI library's own call
 * on the user's buffers and needs no schedule.
 */
#ifndef COLLAR_ALGO_H
#define COLLAR_ALGO_H

#include "../core/core.h"
#include "mpi_types.h"

/* One MPI_Allreduce / MPI_Iallreduce call, described once. */
typedef struct {
    const void       *sbuf;       /* MPI_IN_PLACE when in_place */
    void             *rbuf;
    MPI_Count         count;      /* 64-bit: the large-count bindings */
    MPI_Datatype      dtype;
    MPI_Op            op;
    MPI_Comm          comm;
    int               in_place;
    int               type_size;
    size_t            bytes;      /* count x type_size: the message size */
    /* Bytes the data touches, relative to the buffer address: [lo, lo+span). */
    MPI_Aint          lo;
    size_t            span;
    int               dense;      /* span == bytes: no gaps, no padding */
    MPI_Aint          extent;     /* of one element */
    MPI_Aint          true_extent;
    collar_dtype_t    cdt;        /* COLLAR_DT_NONE: collar cannot reduce it */
    collar_op_t       cop;        /* COLLAR_OP_NONE: user-defined or other */
    /* Host or device: device when either buffer is device memory, the
     * same on every rank (docs/reliability.md).  Every choice (selection,
     * eligibility, fallbacks) reads this one. */
    collar_mem_kind_t mem;
    /* Of the receive buffer alone: may differ between ranks, so builders
     * only read it, to treat a host receive buffer on this rank (kernels
     * cannot write pageable memory); never a choice. */
    collar_mem_kind_t rmem;
    const collar_device_t *dev;   /* the open backend (NULL: none) */
    int               persistent; /* MPI_Allreduce_init: built now, started
                                     later (maybe after calls made since) */
    /* MPI_Allreduce: the call returns when its schedule is over, on every
     * rank alike (a blocking collective does not match a nonblocking one,
     * so a correct program makes the same kind of call everywhere). */
    int               blocking;
} collar_call_t;

/*
 * Fill the type-dependent fields of `call` (its arguments are set).  Returns
 * COLLAR_ERR_MPI when the MPI library rejects the datatype: the caller then
 * lets the MPI library report the error as it would without collar.
 */
collar_status_t collar_call_describe(collar_call_t *call);

/*
 * Would the MPI library reject this call at initiation?  Checked before a
 * schedule takes the call over, so that an invalid call is handed to the MPI
 * library, which reports it exactly as it would without collar (for
 * MPI_Iallreduce: at the call, not later at the wait):
 *   - a predefined op on a predefined type it is not defined for;
 *   - a derived datatype the library refuses to send (e.g. uncommitted),
 *     probed with a one-element send to MPI_PROC_NULL (no data moves; a
 *     zero-count send is not checked by MPICH) on collar's duplicate of
 *     MPI_COMM_SELF, whose errors return to collar (a check that needs
 *     no private communicator, made before any is).
 *   - a predefined op on a derived datatype the library refuses (some
 *     accept it), probed with a one-rank in-place allreduce (no data moves)
 *     on collar's duplicate of MPI_COMM_SELF.
 * The probes' "accepted" answers are cached in an attribute of the
 * datatype (it goes away with the type, so a reused handle asks again):
 * a derived type pays for them on its first call only (algo.c).
 */
collar_status_t collar_call_validate(const collar_call_t *call);

typedef collar_status_t (*collar_algo_build_fn_t)(const collar_call_t *call,
                                                  const collar_plan_t *plan,
                                                  collar_sched_t *sched);

/* staged: copy to host, allreduce the host copy, copy back. */
collar_status_t collar_algo_staged_build(const collar_call_t *call,
                                         const collar_plan_t *plan,
                                         collar_sched_t *sched);

/* chunked: the same in chunks, pipelined (plan->chunk bytes a chunk). */
collar_status_t collar_algo_chunked_build(const collar_call_t *call,
                                          const collar_plan_t *plan,
                                          collar_sched_t *sched);

/* ring: reduce-scatter then allgather in segments, reducing on the device
 * (plan->chunk bytes a segment). */
collar_status_t collar_algo_ring_build(const collar_call_t *call,
                                       const collar_plan_t *plan,
                                       collar_sched_t *sched);
/* Can ring run this call?  It reduces by itself: a predefined op on a
 * predefined type with a reduction loop, laid out densely. */
int collar_algo_ring_eligible(const collar_call_t *call, int comm_size);

/*
 * ipc: within one node, through device memory the ranks map from each
 * other (src/algo/ipc.c); one-shot below plan->oneshot bytes (default
 * COLLAR_IPC_ONESHOT_DEFAULT), two-shot from there.
 */
#define COLLAR_IPC_ONESHOT_DEFAULT ((size_t)256 << 10)
collar_status_t collar_algo_ipc_build(const collar_call_t *call,
                                      const collar_plan_t *plan,
                                      collar_sched_t *sched);
/* The one-shot threshold in force for the plan. */
size_t collar_algo_ipc_oneshot(const collar_plan_t *plan);
/* The largest copy staged and chunked let the backend do by the CPU
 * (gdrcopy=; 0: none). */
size_t collar_algo_gdrcopy_limit(const collar_plan_t *plan);
/* Can ipc run this call, as far as the call shows?  A device call (any mix
 * of buffers), a predefined op and type the device reduces, laid out
 * densely. */
int collar_algo_ipc_eligible_call(const collar_call_t *call);
/*
 * The rest of ipc's eligibility, which needs the communicator: all its
 * ranks on one node (known locally: collar_comm_t's node fields).
 * Otherwise plan->alg becomes chunked, with the reason in plan->fallback,
 * on every rank alike.  The IPC region is the builder's affair
 * (collar_ipc_start): a registration that fails makes the call chunked
 * then, on every rank alike.
 */
void collar_algo_ipc_eligible(const collar_call_t *call,
                              const collar_comm_t *comm, collar_plan_t *plan);

/*
 * hier: for a communicator that spans nodes (src/algo/hier.c): within each
 * node a reduce-scatter through IPC memory, an allreduce of each slice
 * across nodes among the ranks with the same node rank (staged through
 * host memory, in plan->chunk pieces), and an allgather through IPC
 * memory.  Nodes of different sizes: the message is cut into as many
 * slices as the smallest node has ranks.
 */
collar_status_t collar_algo_hier_build(const collar_call_t *call,
                                       const collar_plan_t *plan,
                                       collar_sched_t *sched);
/*
 * Run fn(comm) in the communicator's turn (every operation started before
 * has issued its internal collectives; none started after issues any until
 * fn returns), advancing collar's operations while it waits.  For set-up
 * collectives inside a blocking allreduce (src/engine/progress.c).
 */
typedef collar_status_t (*collar_in_turn_fn_t)(collar_comm_t *comm,
                                               void (*fn)(collar_comm_t *comm));
/*
 * The end of the ipc algorithm's memory (ipc.c), at MPI_Finalize once
 * collar_comm_finalize has released the predefined communicators: with
 * `barrier` (the same on every process) a barrier on MPI_COMM_WORLD before
 * the memory whose peers could not be heard from is freed.
 */
void collar_ipc_finalize(int barrier);
/*
 * The rest of hier's eligibility, which needs the communicator, like
 * collar_algo_ipc_eligible: a communicator on one node runs ipc; one whose
 * ranks cannot be grouped by node runs chunked.  hier's communicators are
 * made by the first blocking allreduce (`blocking`) that selects hier,
 * through `in_turn`; until then, and when they cannot be made, chunked.
 */
void collar_algo_hier_eligible(const collar_call_t *call, collar_comm_t *comm,
                               int blocking, collar_in_turn_fn_t in_turn,
                               collar_plan_t *plan);

/*
 * nccl: ncclAllReduce on collar's stream, NCCL loaded at run time
 * (src/algo/nccl.c).  Can it run this call, as far as the call shows?  A
 * device call, laid out densely, a type and op NCCL has.
 */
collar_status_t collar_algo_nccl_build(const collar_call_t *call,
                                       const collar_plan_t *plan,
                                       collar_sched_t *sched);
int collar_algo_nccl_eligible_call(const collar_call_t *call);
/*
 * The rest of nccl's eligibility, which needs the communicator, like
 * collar_algo_hier_eligible: NCCL's communicator is made by the first
 * blocking allreduce (`blocking`) that selects nccl, through `in_turn`;
 * until then, and when it cannot be made (no library, an init failure
 * on any rank), chunked (staged where chunked cannot run), on every rank
 * alike.
 */
void collar_algo_nccl_eligible(const collar_call_t *call, collar_comm_t *comm,
                               int blocking, collar_in_turn_fn_t in_turn,
                               collar_plan_t *plan);
/* At MPI_Finalize, after the communicators are released: destroys the NCCL
 * communicators whose (collective) finalization was started by their
 * release, waiting for it a bounded while. */
void collar_algo_nccl_finalize(void);

/*
 * Blocks of a message cut among n: block b of `count` elements starts at
 * element *first and has *len elements; the first count % n blocks have
 * one element more (remainders go to the low blocks).  The ring's blocks
 * and ipc's slices.
 */
void collar_block_range(MPI_Count count, int n, int b, MPI_Count *first,
                        MPI_Count *len);

/*
 * The ring's tags.  Every operation on a communicator takes a window of
 * `span` tags, base = (seq % nwin) * span, so that up to nwin operations in
 * flight on one communicator never match each other's messages, and every
 * tag stays within [0, tag_ub].  A window holds 2 (n - 1) tags a segment
 * index; nseg_max is the most segments a block may have in it.  nwin is
 * COLLAR_RING_TAG_OPS when the tag space allows it, fewer when n is large
 * and tag_ub small.  Returns 0 when not even one segment a block fits (the
 * ring cannot run: more than (tag_ub + 1) / 2 + 1 ranks).
 */
#define COLLAR_RING_TAG_OPS 1024
typedef struct {
    int base;
    int span;
    int nwin;
    int nseg_max;
} collar_ring_tags_t;
int collar_ring_tags(int tag_ub, int n, uint64_t seq, collar_ring_tags_t *tags);

/* Default chunk of the chunked algorithm when neither the rule nor
 * COLLAR_CHUNK_SIZE gives one. */
#define COLLAR_DEFAULT_CHUNK ((size_t)1 << 20)

/* The most elements one internal PMPI call takes (its count is an int):
 * larger host allreduces are issued in pieces, ring segments are no larger. */
#define COLLAR_PIECE_MAX ((MPI_Count)INT_MAX)

/* Staging slots the chunked pipeline cycles through: copy-in of chunk i+1,
 * the host allreduce of chunk i and copy-out of chunk i-1 at once. */
#define COLLAR_PIPELINE_SLOTS 3

/*
 * Can the message be cut into chunks?  Elements must follow each other
 * (extent > 0) without interleaving (true extent <= extent), or the copy-out
 * of one chunk would overwrite bytes of the next.  Otherwise the message
 * goes as one chunk (staged).
 */
int collar_call_chunkable(const collar_call_t *call);

/*
 * Eligibility, after selection: move plan->alg down the fallback chain until
 * the algorithm can run this call, and say why in plan->fallback.
 *   native  on device memory needs an MPI library that takes device
 *           pointers (mpi_cuda_aware)           -> staged
 *   ipc     a device call, and what ring needs     -> chunked
 *           (then collar_algo_ipc_eligible: one node, IPC memory)
 *   hier    the same                               -> chunked
 *           (then collar_algo_hier_eligible: nodes, IPC memory)
 *   ring    reduces by itself: needs a predefined op and type collar has
 *           a reduction for, laid out densely    -> chunked
 *   chunked needs elements that can be cut apart (collar_call_chunkable)
 *                                                -> staged
 *   staged  runs everything (the MPI library reduces the host copy).
 */
void collar_algo_eligible(const collar_call_t *call, int mpi_cuda_aware,
                          collar_plan_t *plan);

/* The builder of `alg`, or NULL for native (no schedule). */
/*
 * Say at info level what runs and why, once per (communicator size, size
 * range, memory kind, algorithm as it runs):
 *   allreduce on 2 ranks, 4 MiB to under 8 MiB, device memory:
 *     ipc two-shot, zero-copy (built-in rules line 28)
 * from rank 0 (`rank`: in the communicator; all ranks choose alike), or
 * from every rank at debug level.  `how`: the algorithm and its mode as
 * it runs, where the plan does not tell (ipc: one-shot or two-shot,
 * copy-in or zero-copy; hier); NULL: from the plan (the chunk of chunked
 * and ring).  ipc and hier say it from their schedule, once the region's
 * registration says whether they run (collar_ipc_start).
 */
void collar_algo_log_choice(int rank, const collar_select_key_t *key,
                            const collar_plan_t *plan, const char *how);

collar_algo_build_fn_t collar_algo_builder(collar_alg_t alg);

#endif /* COLLAR_ALGO_H */
