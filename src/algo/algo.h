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
    int               count;
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
    collar_dtype_t    cdt;        /* COLLAR_DT_NONE: collar cannot reduce it */
    collar_op_t       cop;        /* COLLAR_OP_NONE: user-defined or other */
    collar_mem_kind_t mem;
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
 *     zero-count send is not checked by MPICH) on the private
 *     communicator, whose errors return to collar.
 * A predefined op on a derived datatype is left to the MPI library's own
 * allreduce on the host copy (some libraries accept it): when the library
 * refuses it, the error comes at completion.
 */
collar_status_t collar_call_validate(const collar_call_t *call,
                                     const collar_comm_t *comm);

typedef collar_status_t (*collar_algo_build_fn_t)(const collar_call_t *call,
                                                  const collar_plan_t *plan,
                                                  collar_sched_t *sched);

/* staged: copy to host, allreduce the host copy, copy back. */
collar_status_t collar_algo_staged_build(const collar_call_t *call,
                                         const collar_plan_t *plan,
                                         collar_sched_t *sched);

/* The builder of `alg`, or NULL for native (no schedule). */
collar_algo_build_fn_t collar_algo_builder(collar_alg_t alg);

#endif /* COLLAR_ALGO_H */
