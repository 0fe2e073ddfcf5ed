/* collar - what all algorithms share: describing a call, finding a builder. */
#include "config.h"
#include "algo.h"

#include <pthread.h>
#include <stdint.h>

collar_status_t collar_call_describe(collar_call_t *call)
{
    MPI_Aint lb, extent, true_lb, true_extent;
    if (PMPI_Type_size(call->dtype, &call->type_size) != MPI_SUCCESS
        || PMPI_Type_get_extent(call->dtype, &lb, &extent) != MPI_SUCCESS
        || PMPI_Type_get_true_extent(call->dtype, &true_lb, &true_extent) != MPI_SUCCESS) {
        return COLLAR_ERR_MPI;
    }
    call->bytes = (size_t)call->count * (size_t)call->type_size;
    if (call->count == 0 || call->type_size == 0) {
        call->lo = 0;
        call->span = 0;
    } else {
        /* Element i occupies [true_lb + i*extent, true_lb + i*extent +
         * true_extent); extents may be negative. */
        MPI_Aint last = (MPI_Aint)(call->count - 1) * extent;
        MPI_Aint lo = true_lb + (last < 0 ? last : 0);
        MPI_Aint hi = true_lb + true_extent + (last > 0 ? last : 0);
        call->lo = lo;
        call->span = (size_t)(hi - lo);
    }
    call->dense = call->span == call->bytes;
    call->extent = extent;
    call->true_extent = true_extent;
    call->cdt = collar_dtype_from_mpi(call->dtype);
    call->cop = collar_op_from_mpi(call->op);
    return COLLAR_OK;
}

/*
 * The answers of the probes below are cached on the datatype itself, in an
 * attribute: a handle is not a safe key (a freed datatype's handle can be
 * handed out again for another type), but an attribute goes away with the
 * type (MPI_Type_free deletes it) and is not copied by MPI_Type_dup (the
 * null copy function).  Only "accepted" answers are kept: a type the
 * library refuses (uncommitted) may be committed later, while a committed
 * type stays committed until it is freed.  The value is a bit set: bit 0
 * the send probe passed, bit 1 + op the allreduce probe with that
 * predefined op passed.  The keyval lives until the process ends (types may
 * outlive collar's finalization in the application's bookkeeping; the MPI
 * library frees keyvals at MPI_Finalize).
 */
static int type_keyval = MPI_KEYVAL_INVALID;
static pthread_once_t type_keyval_once = PTHREAD_ONCE_INIT;

static void type_keyval_create(void)
{
    if (PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN,
                                &type_keyval, NULL) != MPI_SUCCESS) {
        type_keyval = MPI_KEYVAL_INVALID;
    }
}

static uintptr_t type_known(MPI_Datatype dt)
{
    void *attr = NULL;
    int flag = 0;
    pthread_once(&type_keyval_once, type_keyval_create);
    if (type_keyval == MPI_KEYVAL_INVALID
        || PMPI_Type_get_attr(dt, type_keyval, &attr, &flag) != MPI_SUCCESS
        || !flag) {
        return 0;
    }
    return (uintptr_t)attr;
}

static void type_remember(MPI_Datatype dt, uintptr_t bits)
{
    if (type_keyval != MPI_KEYVAL_INVALID) {
        PMPI_Type_set_attr(dt, type_keyval, (void *)bits);
    }
}

collar_status_t collar_call_validate(const collar_call_t *call)
{
    if (call->cdt != COLLAR_DT_NONE && call->cop != COLLAR_OP_NONE) {
        return collar_reduce_supported(call->cdt, call->cop)
               ? COLLAR_OK : COLLAR_ERR_INVALID;
    }
    if (call->cdt == COLLAR_DT_NONE) {
        MPI_Comm probe = collar_comm_probe();
        const int ask_op = call->cop != COLLAR_OP_NONE && probe != MPI_COMM_NULL;
        const uintptr_t op_bit = ask_op ? (uintptr_t)2 << call->cop : 0;
        const uintptr_t known = type_known(call->dtype);
        if ((known & 1) && (known & op_bit) == op_bit) {
            return COLLAR_OK;
        }
        collar_debug(COLL, "asking the MPI library whether it takes this "
                     "derived datatype%s", ask_op ? " with this op" : "");
        MPI_Request req;
        if (probe == MPI_COMM_NULL
            || PMPI_Isend(call->rbuf, 1, call->dtype, MPI_PROC_NULL, 0, probe,
                          &req) != MPI_SUCCESS) {
            return COLLAR_ERR_INVALID;
        }
        PMPI_Wait(&req, MPI_STATUS_IGNORE);
        /* A predefined op on a derived datatype: the library may refuse it
         * (Open MPI 4.1 and MPICH 4.0 do).  Ask it with a one-rank in-place
         * allreduce, which moves no data. */
        if (ask_op) {
            if (PMPI_Iallreduce(MPI_IN_PLACE, call->rbuf, 1, call->dtype, call->op,
                                probe, &req) != MPI_SUCCESS) {
                type_remember(call->dtype, known | 1);
                return COLLAR_ERR_INVALID;
            }
            PMPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        type_remember(call->dtype, known | 1 | op_bit);
    }
    return COLLAR_OK;
}

void collar_block_range(MPI_Count count, int n, int b, MPI_Count *first,
                        MPI_Count *len)
{
    const MPI_Count base = count / n, extra = count % n;
    *len = base + (b < extra ? 1 : 0);
    *first = (MPI_Count)b * base + (b < extra ? b : extra);
}

int collar_call_chunkable(const collar_call_t *call)
{
    return call->extent > 0 && call->true_extent <= call->extent;
}

void collar_algo_eligible(const collar_call_t *call, int mpi_cuda_aware,
                          collar_plan_t *plan)
{
    plan->device_pointers_ok = call->mem == COLLAR_MEM_HOST || mpi_cuda_aware;
    plan->mpi_cuda_aware = mpi_cuda_aware;
    if ((plan->alg == COLLAR_ALG_IPC || plan->alg == COLLAR_ALG_HIER)
        && !collar_algo_ipc_eligible_call(call)) {
        static const char *const why[2][2] = {
            { "ipc -> chunked: ipc reduces by itself and needs a predefined "
              "op and datatype it has a reduction for",
              "ipc -> chunked: ipc works on device buffers only" },
            { "hier -> chunked: hier reduces by itself and needs a predefined "
              "op and datatype it has a reduction for",
              "hier -> chunked: hier works on device buffers only" },
        };
        /* The call's memory kind, which every rank agrees on; a rank's own
         * mix of host and device buffers never decides (ipc and hier run
         * on every mix). */
        const int host = call->mem == COLLAR_MEM_HOST;
        plan->fallback = why[plan->alg == COLLAR_ALG_HIER][host];
        plan->alg = COLLAR_ALG_CHUNKED;
    }
    if (plan->alg == COLLAR_ALG_NCCL && !collar_algo_nccl_eligible_call(call)) {
        plan->fallback = call->mem == COLLAR_MEM_HOST
            ? "nccl -> chunked: nccl works on device buffers only"
            : "nccl -> chunked: NCCL has no reduction for this op and "
              "datatype (sum, prod, min, max on its integer and floating "
              "types, densely laid out)";
        plan->alg = COLLAR_ALG_CHUNKED;
    }
    if (plan->alg == COLLAR_ALG_RING && !collar_algo_ring_eligible(call, 1)) {
        plan->alg = COLLAR_ALG_CHUNKED;
        plan->fallback = "ring -> chunked: ring reduces by itself and needs a "
                         "predefined op and datatype it has a reduction for";
    }
    if (plan->alg == COLLAR_ALG_NATIVE && call->mem != COLLAR_MEM_HOST
        && !mpi_cuda_aware) {
        plan->alg = COLLAR_ALG_STAGED;
        plan->fallback = "native -> staged: the MPI library does not take "
                         "device pointers (COLLAR_MPI_CUDA_AWARE)";
    }
    if (plan->alg == COLLAR_ALG_CHUNKED && !collar_call_chunkable(call)) {
        plan->alg = COLLAR_ALG_STAGED;
        plan->fallback = "chunked -> staged: the datatype's elements cannot be "
                         "cut apart (interleaved or non-positive extent)";
    }
}

collar_algo_build_fn_t collar_algo_builder(collar_alg_t alg)
{
    switch (alg) {
    case COLLAR_ALG_STAGED:
        return collar_algo_staged_build;
    case COLLAR_ALG_CHUNKED:
        return collar_algo_chunked_build;
    case COLLAR_ALG_RING:
        return collar_algo_ring_build;
    case COLLAR_ALG_IPC:
        return collar_algo_ipc_build;
    case COLLAR_ALG_HIER:
        return collar_algo_hier_build;
    case COLLAR_ALG_NCCL:
        return collar_algo_nccl_build;
    case COLLAR_ALG_AUTO:
    case COLLAR_ALG_NATIVE:
    case COLLAR_ALG_COUNT:
        break;
    }
    return NULL;
}

/* What runs, in words, where the caller does not say (ipc and hier do,
 * from their schedule). */
static void describe_run(const collar_plan_t *plan, char *buf, size_t len)
{
    char size[32];
    const size_t chunk = plan->chunk ? plan->chunk : COLLAR_DEFAULT_CHUNK;
    collar_format_bytes_exact(chunk, size, sizeof(size));
    switch (plan->alg) {
    case COLLAR_ALG_NATIVE:
        snprintf(buf, len, "native, the MPI library's own allreduce");
        break;
    case COLLAR_ALG_STAGED:
        snprintf(buf, len, "staged through host memory");
        break;
    case COLLAR_ALG_CHUNKED:
        snprintf(buf, len, "chunked through host memory in %s chunks", size);
        break;
    case COLLAR_ALG_RING:
        snprintf(buf, len, "ring in %s segments", size);
        break;
    default:
        snprintf(buf, len, "%s", collar_alg_name(plan->alg));
        break;
    }
}

void collar_algo_log_choice(int rank, const collar_select_key_t *key,
                            const collar_plan_t *plan, const char *how)
{
    if (!collar_log_enabled(COLLAR_LOG_INFO, COLLAR_SUB_COLL)) {
        return;
    }
    char call[160];
    collar_format_call(key->coll, key->comm_size, key->bytes, key->mem, call,
                       sizeof(call));
    char what[160];
    if (how != NULL) {
        snprintf(what, sizeof(what), "%s", how);
    } else {
        describe_run(plan, what, sizeof(what));
    }
    char once[1024];
    snprintf(once, sizeof(once), "choice %d %s: %s %s", key->nodes, call, what,
             plan->fallback ? plan->fallback : "");
    if (!collar_log_first(once)) {
        return;
    }
    if (rank != 0 && !collar_log_enabled(COLLAR_LOG_DEBUG, COLLAR_SUB_COLL)) {
        return;
    }
    char why[600];
    collar_plan_describe(plan, why, sizeof(why));
    if (plan->fallback != NULL) {
        collar_info(COLL, "%s: %s (%s; fallback %s)", call, what, why,
                    plan->fallback);
    } else {
        collar_info(COLL, "%s: %s (%s)", call, what, why);
    }
}
