/*
 * collar - reductions layer.
 *
 * Element-wise reduction loops for every predefined MPI type and op, written
 * against collar's own type and op enums so that this layer needs neither MPI
 * nor a GPU.  The host loops are used by the `sim` device backend, by host
 * reduction steps of a schedule, and as the reference for the device kernels.
 *
 * Semantics are those of an MPI user function: inout[i] = in[i] (op) inout[i].
 *   - `in` and `inout` are the same buffer or do not overlap.
 *   - MIN and MAX keep `in` when the values are equal or unordered (NaN), as
 *     Open MPI and MPICH do; device kernels must match (not fminf/fmaxf).
 *   - Count 0 touches nothing.
 *   - Pair types have the C layout of struct { T value; int index; }.
 */
#ifndef COLLAR_REDUCE_H
#define COLLAR_REDUCE_H

#include <stddef.h>

typedef enum {
    COLLAR_DT_INT8,
    COLLAR_DT_INT16,
    COLLAR_DT_INT32,
    COLLAR_DT_INT64,
    COLLAR_DT_UINT8,
    COLLAR_DT_UINT16,
    COLLAR_DT_UINT32,
    COLLAR_DT_UINT64,
    COLLAR_DT_FLOAT16,      /* IEEE binary16 */
    COLLAR_DT_BFLOAT16,     /* bfloat16 */
    COLLAR_DT_FLOAT,
    COLLAR_DT_DOUBLE,
    COLLAR_DT_LONG_DOUBLE,
    COLLAR_DT_BOOL,         /* C _Bool */
    COLLAR_DT_BYTE,         /* MPI_BYTE: bitwise ops only */
    COLLAR_DT_FLOAT_COMPLEX,
    COLLAR_DT_DOUBLE_COMPLEX,
    COLLAR_DT_LONG_DOUBLE_COMPLEX,
    COLLAR_DT_FLOAT_INT,    /* pair types for MINLOC / MAXLOC, C layout */
    COLLAR_DT_DOUBLE_INT,
    COLLAR_DT_LONG_INT,
    COLLAR_DT_2INT,
    COLLAR_DT_SHORT_INT,
    COLLAR_DT_LONG_DOUBLE_INT,
    COLLAR_DT_COUNT,
    COLLAR_DT_NONE = -1     /* no predefined equivalent (derived, user) */
} collar_dtype_t;

typedef enum {
    COLLAR_OP_SUM,
    COLLAR_OP_PROD,
    COLLAR_OP_MIN,
    COLLAR_OP_MAX,
    COLLAR_OP_LAND,
    COLLAR_OP_LOR,
    COLLAR_OP_LXOR,
    COLLAR_OP_BAND,
    COLLAR_OP_BOR,
    COLLAR_OP_BXOR,
    COLLAR_OP_MINLOC,
    COLLAR_OP_MAXLOC,
    COLLAR_OP_COUNT,
    COLLAR_OP_NONE = -1     /* user-defined or unsupported op */
} collar_op_t;

/* The most inputs of one reduction of n inputs into one output (the
 * devices' reduce_n_async, collar_cuda_reduce_n_launch). */
#define COLLAR_REDUCE_N_MAX 8

/* Size in bytes of one element (C sizeof of the matching type). 0 for NONE. */
size_t collar_dtype_size(collar_dtype_t dt);

/* "int32", "float", "double_complex", ...; "none" for COLLAR_DT_NONE. */
const char *collar_dtype_name(collar_dtype_t dt);

/* "sum", "prod", ..., "maxloc"; "none" for COLLAR_OP_NONE. */
const char *collar_op_name(collar_op_t op);

/* 1 when the pair is valid in MPI and has a host loop, else 0. */
int collar_reduce_supported(collar_dtype_t dt, collar_op_t op);

/*
 * inout[i] = in[i] (op) inout[i] for i in [0, count).  Buffers may be
 * unaligned.  Returns 0 on success, -1 when the pair is not supported (nothing
 * is written then).
 */
int collar_reduce_host(void *inout, const void *in, size_t count,
                       collar_dtype_t dt, collar_op_t op);

#endif /* COLLAR_REDUCE_H */
