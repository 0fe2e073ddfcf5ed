/*
 * collar - device buffers in the blocking collectives other than allreduce.
 *
 * MPI_Bcast, MPI_Allgather(v), MPI_Alltoall(v), MPI_Reduce_scatter(_block),
 * MPI_Reduce, MPI_Gather(v) and MPI_Scatter(v) on device memory, over an MPI
 * library that does not take device pointers: every buffer of the call that
 * lives on the device is staged through pinned host memory, and the MPI
 * library does the whole collective (the arithmetic of the reductions too)
 * on the host copies.
 *
 *   copy in   device -> host, for what the call reads: send buffers, and a
 *             receive buffer that is also read (MPI_IN_PLACE) or that has
 *             gaps the call must leave as they are (a datatype with holes,
 *             displacements with room between them)
 *   PMPI_X    on the host copies, pointers shifted into them
 *   copy out  host -> device, for the receive buffer
 *
 * A copy moves the byte span the buffer's (datatype, counts, displacements)
 * touch: [true_lb + lowest offset, true_lb + highest offset + true_extent).
 * Only the buffers significant on this rank count (root-only arguments,
 * MPI_IN_PLACE, zero counts); host buffers go to the MPI library as they are.
 *
 * Fast path: a bit per collective in `collar_colls_on`, set at MPI_Init
 * only when
 * there is something to do (a device backend, an MPI library that does not
 * take device pointers, the collective in COLLAR_COLLECTIVES; or statistics
 * on): otherwise the wrapper is one test and the PMPI call.
 *
 * Without pinned memory for a host copy, pageable host memory carries it
 * (collar_staging_get): slower copies, the same result.  A failure of
 * collar's own (no host memory at all, a failed copy) must not leave the
 * other ranks waiting in the collective: the rank still enters it with its
 * host copy (zeroed when the copy into it failed, drain memory when no
 * host memory could be had), leaves its receive buffer as it was, and then
 * reports MPI_ERR_OTHER through the communicator's error handler.  What the
 * other ranks received from it is undefined and they are not told (an
 * allreduce's are: its status agreement).  Only when not even drain memory
 * can be had does the rank not enter the collective: it cannot, and the
 * others would wait for it, so collar ends the job (collar_fail_stop).
 */
#include "config.h"
#include "engine_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define COLL_BIT(c) (1u << (c))

/* Collectives whose entry points do more than the PMPI call (engine.h:
 * collar_coll_wanted). */
unsigned collar_colls_on;
/* Collectives whose device buffers are staged. */
static unsigned colls_stage;
static const collar_device_t *colls_dev = &collar_device_none;
/* The backend's host ranges (NULL: none): a call whose buffers are all in
 * them stages nothing, which op_enter knows without asking the MPI library
 * about the call. */
static collar_ranges_t *colls_host;

void collar_colls_start(const collar_device_t *dev, int mpi_cuda_aware)
{
    colls_dev = dev;
    colls_host = collar_mem_host_ranges();
    colls_stage = 0;
    if (dev != &collar_device_none && !mpi_cuda_aware) {
        /* collar_colls_allreduce's (no wrapper of colls.c calls it). */
        colls_stage |= COLL_BIT(COLLAR_COLL_ALLREDUCE);
        for (int c = COLLAR_COLL_BCAST; c < COLLAR_COLL_COUNT; c++) {
            if (collar_cfg.collectives & (1u << (c - COLLAR_COLL_BCAST))) {
                colls_stage |= COLL_BIT(c);
            }
        }
    }
    collar_colls_on = colls_stage;
    if (collar_stats_on) {
        /* Every call is counted, staged or not. */
        for (int c = COLLAR_COLL_BCAST; c < COLLAR_COLL_COUNT; c++) {
            collar_colls_on |= COLL_BIT(c);
        }
    }
}

int collar_colls_allreduce_stages(collar_mem_kind_t mem)
{
    return mem != COLLAR_MEM_HOST && (colls_stage & COLL_BIT(COLLAR_COLL_ALLREDUCE));
}

void collar_colls_stop(void)
{
    collar_colls_on = 0;
    colls_stage = 0;
    colls_host = NULL;
}

/* ------------------------------------------------------------- spans */

/* One buffer of a call on this rank. */
typedef struct {
    const void *user;     /* the user's buffer */
    MPI_Aint    lo;       /* bytes touched: [user + lo, user + lo + len) */
    size_t      len;
    int         dense;    /* every byte of the span is data (no gaps) */
    int         recv;     /* written by the call: copied out after it */
    int         read;     /* read by the call: copied in before it */
    char       *host;     /* the staging copy, NULL when not staged */
    size_t      host_len;
    collar_staging_kind_t kind;   /* what host is */
    collar_event_t ev;
    int         copying;  /* ev is outstanding */
} colls_buf_t;

/* One call: its buffers on this rank and what is known of it. */
typedef struct {
    collar_coll_t coll;
    MPI_Comm      comm;
    int           rank, size;
    colls_buf_t   buf[2];
    int           nbuf;
    size_t        bytes;   /* for statistics: this rank's contribution */
    collar_mem_kind_t mem; /* device when any buffer is */
    int           staged;
    collar_status_t failed;  /* collar's own failure, reported after */
    /* Observed (collar_observe): the operation, begun when it is staged,
     * and the blocking form's MPI call. */
    collar_obs_t  obs;
    collar_obs_t  mpi;
} colls_call_t;


static MPI_Count count_at(const void *counts, int large, int i)
{
    return large ? ((const MPI_Count *)counts)[i] : ((const int *)counts)[i];
}

static MPI_Aint displ_at(const void *displs, int large, int i)
{
    return large ? ((const MPI_Aint *)displs)[i] : ((const int *)displs)[i];
}

/*
 * The span of `n` blocks of `dt`: block i has counts[i] elements (count when
 * counts is NULL) at displs[i] extents from the buffer (i * count when
 * displs is NULL).  COLLAR_ERR_INVALID when the MPI library would reject
 * the arguments (it is then left to report them).
 */
static collar_status_t span_blocks(MPI_Datatype dt, int n, MPI_Count count,
                                   const void *counts, const void *displs,
                                   int large, colls_buf_t *b)
{
    MPI_Aint lb, extent, true_lb, true_extent;
    MPI_Count size;
    if (dt == MPI_DATATYPE_NULL || PMPI_Type_size_x(dt, &size) != MPI_SUCCESS
        || PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS
        || PMPI_Type_get_true_extent(dt, &true_lb, &true_extent) != MPI_SUCCESS
        || (n > 0 && counts == NULL && count < 0)) {
        return COLLAR_ERR_INVALID;
    }
    MPI_Aint lo = 0, hi = 0;
    size_t total = 0;
    int any = 0;
    for (int i = 0; i < n; i++) {
        const MPI_Count c = counts != NULL ? count_at(counts, large, i) : count;
        if (c < 0) {
            return COLLAR_ERR_INVALID;
        }
        if (c == 0) {
            continue;
        }
        const MPI_Aint d = (displs != NULL ? displ_at(displs, large, i)
                                           : (MPI_Aint)i * (MPI_Aint)count) * extent;
        /* Element j of the block occupies [d + j*extent + true_lb, ... +
         * true_extent); extents may be negative. */
        const MPI_Aint last = (MPI_Aint)(c - 1) * extent;
        const MPI_Aint blo = d + true_lb + (last < 0 ? last : 0);
        const MPI_Aint bhi = d + true_lb + true_extent + (last > 0 ? last : 0);
        if (!any || blo < lo) {
            lo = blo;
        }
        if (!any || bhi > hi) {
            hi = bhi;
        }
        any = 1;
        total += (size_t)c * (size_t)size;
    }
    if (!any || total == 0) {
        b->lo = 0;
        b->len = 0;
        b->dense = 1;
        return COLLAR_OK;
    }
    b->lo = lo;
    b->len = (size_t)(hi - lo);
    b->dense = b->len == total;
    return COLLAR_OK;
}

/* Add a buffer to the call: `recv` it is written, `read` it is read. */
static int add_buf(colls_call_t *cc, const void *user, int recv, int read,
                   MPI_Datatype dt, int n, MPI_Count count, const void *counts,
                   const void *displs, int large)
{
    colls_buf_t *b = &cc->buf[cc->nbuf];
    *b = (colls_buf_t){ .user = user, .recv = recv, .read = read };
    if (span_blocks(dt, n, count, counts, displs, large, b) != COLLAR_OK) {
        return 0;
    }
    if (b->len != 0 && user != MPI_BOTTOM && user != MPI_IN_PLACE) {
        cc->nbuf++;
    }
    return 1;
}

static size_t type_bytes(MPI_Datatype dt, MPI_Count count)
{
    MPI_Count size = 0;
    if (count <= 0 || PMPI_Type_size_x(dt, &size) != MPI_SUCCESS || size < 0) {
        return 0;
    }
    return (size_t)count * (size_t)size;
}

static MPI_Count sum_counts(const void *counts, int large, int n)
{
    MPI_Count s = 0;
    for (int i = 0; i < n; i++) {
        s += count_at(counts, large, i);
    }
    return s;
}

/*
 * The one description of every collective: which buffers are significant on
 * this rank, what the call reads and writes of them, how counts and
 * displacements span them, and this rank's contribution in bytes.  0 when
 * the arguments are not understood (the MPI library gets them as they are
 * and reports them).
 */
static int describe(colls_call_t *cc, const collar_coll_args_t *a)
{
    const int rank = cc->rank, size = cc->size, root = a->root;
    const int in_place = a->sbuf == MPI_IN_PLACE;
    const int L = a->large;
    switch (a->coll) {
    case COLLAR_COLL_BCAST:
        cc->bytes = type_bytes(a->rdt, a->rcount);
        return root >= 0 && root < size
               && add_buf(cc, a->rbuf, rank != root, rank == root, a->rdt, 1,
                          a->rcount, NULL, NULL, L);
    case COLLAR_COLL_ALLGATHER:
        cc->bytes = in_place ? type_bytes(a->rdt, a->rcount)
                             : type_bytes(a->sdt, a->scount);
        return (in_place || add_buf(cc, a->sbuf, 0, 1, a->sdt, 1, a->scount,
                                    NULL, NULL, L))
               && add_buf(cc, a->rbuf, 1, in_place, a->rdt, size, a->rcount,
                          NULL, NULL, L);
    case COLLAR_COLL_ALLGATHERV:
        if (a->rcounts == NULL || a->rdispls == NULL) {
            return 0;
        }
        cc->bytes = in_place ? type_bytes(a->rdt, count_at(a->rcounts, L, rank))
                             : type_bytes(a->sdt, a->scount);
        return (in_place || add_buf(cc, a->sbuf, 0, 1, a->sdt, 1, a->scount,
                                    NULL, NULL, L))
               && add_buf(cc, a->rbuf, 1, in_place, a->rdt, size, 0,
                          a->rcounts, a->rdispls, L);
    case COLLAR_COLL_ALLTOALL:
        cc->bytes = in_place ? type_bytes(a->rdt, a->rcount * size)
                             : type_bytes(a->sdt, a->scount * size);
        return (in_place || add_buf(cc, a->sbuf, 0, 1, a->sdt, size, a->scount,
                                    NULL, NULL, L))
               && add_buf(cc, a->rbuf, 1, in_place, a->rdt, size, a->rcount,
                          NULL, NULL, L);
    case COLLAR_COLL_ALLTOALLV:
        if (a->rcounts == NULL || a->rdispls == NULL
            || (!in_place && (a->scounts == NULL || a->sdispls == NULL))) {
            return 0;
        }
        cc->bytes = in_place ? type_bytes(a->rdt, sum_counts(a->rcounts, L, size))
                             : type_bytes(a->sdt, sum_counts(a->scounts, L, size));
        return (in_place || add_buf(cc, a->sbuf, 0, 1, a->sdt, size, 0,
                                    a->scounts, a->sdispls, L))
               && add_buf(cc, a->rbuf, 1, in_place, a->rdt, size, 0,
                          a->rcounts, a->rdispls, L);
    case COLLAR_COLL_REDUCE_SCATTER: {
        if (a->rcounts == NULL) {
            return 0;
        }
        const MPI_Count total = sum_counts(a->rcounts, L, size);
        cc->bytes = type_bytes(a->rdt, total);
        /* In place, the receive buffer holds the whole input. */
        return (in_place || add_buf(cc, a->sbuf, 0, 1, a->rdt, 1, total, NULL,
                                    NULL, L))
               && add_buf(cc, a->rbuf, 1, in_place, a->rdt, 1,
                          in_place ? total : count_at(a->rcounts, L, rank),
                          NULL, NULL, L);
    }
    case COLLAR_COLL_REDUCE_SCATTER_BLOCK:
        cc->bytes = type_bytes(a->rdt, a->rcount * size);
        return (in_place || add_buf(cc, a->sbuf, 0, 1, a->rdt, size, a->rcount,
                                    NULL, NULL, L))
               && add_buf(cc, a->rbuf, 1, in_place, a->rdt, in_place ? size : 1,
                          a->rcount, NULL, NULL, L);
    case COLLAR_COLL_ALLREDUCE:
        /* collar_colls_allreduce: a reduction with every rank its root. */
        cc->bytes = type_bytes(a->rdt, a->rcount);
        return (in_place || add_buf(cc, a->sbuf, 0, 1, a->rdt, 1, a->rcount,
                                    NULL, NULL, L))
               && add_buf(cc, a->rbuf, 1, in_place, a->rdt, 1, a->rcount,
                          NULL, NULL, L);
    case COLLAR_COLL_REDUCE:
        cc->bytes = type_bytes(a->rdt, a->rcount);
        /* The receive buffer matters at the root only. */
        return root >= 0 && root < size
               && (in_place || add_buf(cc, a->sbuf, 0, 1, a->rdt, 1, a->rcount,
                                       NULL, NULL, L))
               && (rank != root || add_buf(cc, a->rbuf, 1, in_place, a->rdt, 1,
                                           a->rcount, NULL, NULL, L));
    case COLLAR_COLL_GATHER:
        cc->bytes = in_place ? type_bytes(a->rdt, a->rcount)
                             : type_bytes(a->sdt, a->scount);
        return root >= 0 && root < size
               && (in_place || add_buf(cc, a->sbuf, 0, 1, a->sdt, 1, a->scount,
                                       NULL, NULL, L))
               && (rank != root || add_buf(cc, a->rbuf, 1, in_place, a->rdt,
                                           size, a->rcount, NULL, NULL, L));
    case COLLAR_COLL_GATHERV:
        if (root < 0 || root >= size
            || (rank == root && (a->rcounts == NULL || a->rdispls == NULL))) {
            return 0;
        }
        cc->bytes = in_place ? type_bytes(a->rdt, count_at(a->rcounts, L, rank))
                             : type_bytes(a->sdt, a->scount);
        return (in_place || add_buf(cc, a->sbuf, 0, 1, a->sdt, 1, a->scount,
                                    NULL, NULL, L))
               && (rank != root || add_buf(cc, a->rbuf, 1, in_place, a->rdt,
                                           size, 0, a->rcounts, a->rdispls, L));
    case COLLAR_COLL_SCATTER: {
        const int r_in_place = a->rbuf == MPI_IN_PLACE;
        cc->bytes = r_in_place ? type_bytes(a->sdt, a->scount)
                               : type_bytes(a->rdt, a->rcount);
        return root >= 0 && root < size
               && (rank != root || add_buf(cc, a->sbuf, 0, 1, a->sdt, size,
                                           a->scount, NULL, NULL, L))
               && (r_in_place || add_buf(cc, a->rbuf, 1, 0, a->rdt, 1, a->rcount,
                                         NULL, NULL, L));
    }
    case COLLAR_COLL_SCATTERV: {
        const int r_in_place = a->rbuf == MPI_IN_PLACE;
        if (root < 0 || root >= size
            || (rank == root && (a->scounts == NULL || a->sdispls == NULL))) {
            return 0;
        }
        cc->bytes = r_in_place ? type_bytes(a->sdt, count_at(a->scounts, L, rank))
                               : type_bytes(a->rdt, a->rcount);
        return (rank != root || add_buf(cc, a->sbuf, 0, 1, a->sdt, size, 0,
                                        a->scounts, a->sdispls, L))
               && (r_in_place || add_buf(cc, a->rbuf, 1, 0, a->rdt, 1, a->rcount,
                                         NULL, NULL, L));
    }
    default:
        return 0;
    }
}

/* ------------------------------------------------------------- staging */

static collar_status_t wait_event(const collar_device_t *dev, collar_event_t *ev)
{
    unsigned spins = 0;
    for (;;) {
        collar_status_t st = dev->event_query(ev);
        if (st != COLLAR_INPROGRESS) {
            return st;
        }
        if (++spins > 64) {
            sched_yield();
        }
    }
}

/* Queue the copy of every buffer for which `want` holds, then wait for all
 * of them; the first failure is returned (every copy is waited for). */
static collar_status_t copy_all(colls_call_t *cc, int out)
{
    const collar_device_t *dev = colls_dev;
    collar_status_t first = COLLAR_OK;
    for (int i = 0; i < cc->nbuf; i++) {
        colls_buf_t *b = &cc->buf[i];
        int want = out ? b->recv : (b->read || !b->dense);
        if (b->host == NULL || !want) {
            continue;
        }
        char *user = (char *)b->user + b->lo;
        collar_status_t st = out
            ? dev->copy_async(user, b->host, b->len, 0, &b->ev)
            : dev->copy_async(b->host, user, b->len, 0, &b->ev);
        if (st == COLLAR_OK) {
            b->copying = 1;
        } else if (first == COLLAR_OK) {
            first = st;
        }
    }
    for (int i = 0; i < cc->nbuf; i++) {
        colls_buf_t *b = &cc->buf[i];
        if (!b->copying) {
            continue;
        }
        b->copying = 0;
        collar_status_t st = wait_event(dev, &b->ev);
        if (st != COLLAR_OK && first == COLLAR_OK) {
            first = st;
        }
        if (st != COLLAR_OK && !out) {
            /* What reached the host copy is unknown: send zeros. */
            memset(b->host, 0, b->len);
        }
    }
    return first;
}

/* Say what happens, as the allreduce does (collar_algo_log_choice): once
 * per (collective, communicator size, size range, memory kind), from rank
 * 0 of the communicator (all ranks stage alike), or from every rank at
 * debug level.  Not for collar_colls_allreduce's calls: the allreduce says
 * its plan, fallback included. */
static void log_staged(const colls_call_t *cc)
{
    if (!collar_log_enabled(COLLAR_LOG_INFO, COLLAR_SUB_COLL)
        || cc->coll == COLLAR_COLL_ALLREDUCE) {
        return;
    }
    char call[160];
    collar_format_call(cc->coll, cc->size, cc->bytes, cc->mem, call, sizeof(call));
    char once[192];
    snprintf(once, sizeof(once), "colls staged %s", call);
    if (!collar_log_first(once)
        || (cc->rank != 0 && !collar_log_enabled(COLLAR_LOG_DEBUG, COLLAR_SUB_COLL))) {
        return;
    }
    collar_info(COLL, "%s: staged through host memory (the MPI library does "
                "not take device pointers)", call);
}

/*
 * Classify the buffers; when the collective is staged and a buffer is on
 * the device, allocate its host copy (cc->staged: the MPI call takes host
 * pointers, host_ptr), pinned or pageable.  Without either, drain memory
 * and cc->failed: collar's failure, reported after the collective.
 * COLLAR_ERR_NO_MEMORY: not even drain memory (the job ends, as the
 * other ranks would wait for this one).
 */
static collar_status_t stage_alloc(colls_call_t *cc)
{
    int ndev = 0;
    for (int i = 0; i < cc->nbuf; i++) {
        collar_mem_kind_t kind = COLLAR_MEM_HOST;
        if (collar_mem_classify(colls_dev, (const char *)cc->buf[i].user + cc->buf[i].lo,
                                &kind) != COLLAR_OK) {
            kind = COLLAR_MEM_HOST;
        }
        if (kind != COLLAR_MEM_HOST) {
            cc->mem = COLLAR_MEM_DEVICE;
            ndev++;
        } else {
            cc->buf[i].len = 0;   /* not staged */
        }
    }
    if (ndev == 0 || !(colls_stage & COLL_BIT(cc->coll))) {
        return COLLAR_OK;
    }
    log_staged(cc);
    cc->staged = 1;
    int pageable = 0;
    for (int i = 0; i < cc->nbuf; i++) {
        colls_buf_t *b = &cc->buf[i];
        if (b->len == 0) {
            continue;
        }
        void *p = NULL;
        collar_status_t st = cc->failed == COLLAR_OK
                             ? collar_staging_get(colls_dev, b->len, &p, &b->kind)
                             : COLLAR_ERR_NO_MEMORY;
        if (st != COLLAR_OK) {
            if (cc->failed == COLLAR_OK) {
                collar_error(COLL, "cannot stage %s: no host memory for %zu "
                             "bytes (%s); the rank takes part without its "
                             "data and the call fails", collar_coll_name(cc->coll),
                             b->len, collar_status_string(st));
                cc->failed = st;
            }
            /* Enough to take part in the collective. */
            p = collar_drain_get(b->len);
            if (p == NULL) {
                collar_fail_stop(cc->comm, MPI_ERR_NO_MEM, "memory to take "
                                 "part in a collective");
                return COLLAR_ERR_NO_MEMORY;
            }
            b->kind = COLLAR_STAGING_DRAIN;
        }
        pageable |= b->kind == COLLAR_STAGING_HEAP;
        b->host = p;
        b->host_len = b->len;
    }
    if (pageable) {
        collar_staging_count_fallback();   /* once a call */
    }
    return COLLAR_OK;
}

/* copy_all as one phase of an observed operation. */
static collar_status_t copy_observed(colls_call_t *cc, int out)
{
    if (cc->obs.t0 == 0 || !(collar_observe & COLLAR_OBS_STEPS)) {
        return copy_all(cc, out);
    }
    const collar_phase_t phase = out ? COLLAR_PHASE_COPY_OUT : COLLAR_PHASE_COPY_IN;
    collar_obs_t o;
    collar_obs_phase_begin(&o, phase, cc->bytes);
    collar_status_t st = copy_all(cc, out);
    collar_obs_phase_end(&o, phase, cc->bytes, COLLAR_TRACK_STREAM, &cc->obs,
                         -1, 0, 0);
    return st;
}

/* Copy in what the call reads (after the caller's device work). */
static void stage_copy_in(colls_call_t *cc)
{
    if (!cc->staged || cc->failed != COLLAR_OK) {
        return;
    }
    collar_status_t st = colls_dev->order_after_caller();
    if (st == COLLAR_OK) {
        st = copy_observed(cc, 0);
    }
    if (st != COLLAR_OK) {
        collar_error(COLL, "cannot stage %s through host memory: the copy in "
                     "failed: %s; the rank takes part with zeros and the call "
                     "fails", collar_coll_name(cc->coll), collar_status_string(st));
        cc->failed = st;
    }
}

/* The pointer MPI gets for the user's buffer `user`. */
static void *host_ptr(const colls_call_t *cc, const void *user)
{
    if (!cc->staged || user == MPI_IN_PLACE || user == MPI_BOTTOM) {
        return (void *)user;
    }
    for (int i = 0; i < cc->nbuf; i++) {
        const colls_buf_t *b = &cc->buf[i];
        if (b->user == user && b->host != NULL) {
            return b->host - b->lo;
        }
    }
    return (void *)user;
}

static void release(colls_call_t *cc)
{
    for (int i = 0; i < cc->nbuf; i++) {
        colls_buf_t *b = &cc->buf[i];
        if (b->host == NULL) {
            continue;
        }
        collar_staging_put(colls_dev, b->host, b->host_len, b->kind);
        b->host = NULL;
    }
}

/*
 * After the collective: copy the receive buffer back, free, report.  `rc`
 * is what the MPI library returned: an error of its own is returned as it
 * is (the library has called the error handler); else a failure of
 * collar's goes through the communicator's error handler.
 */
static int stage_out(colls_call_t *cc, int rc)
{
    if (!cc->staged) {
        return rc;
    }
    if (cc->mpi.t0 != 0) {
        collar_obs_phase_end(&cc->mpi, COLLAR_PHASE_MPI_COLL, cc->bytes,
                             COLLAR_TRACK_MPI, &cc->obs, -1, 0, 0);
    }
    if (rc == MPI_SUCCESS && cc->failed == COLLAR_OK) {
        cc->failed = copy_observed(cc, 1);
    }
    release(cc);
    if (cc->obs.t0 != 0) {
        collar_obs_coll_end(&cc->obs, cc->coll, COLLAR_ALG_STAGED, cc->bytes);
    }
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (cc->failed != COLLAR_OK) {
        collar_error(COLL, "cannot stage %s through host memory: %s",
                     collar_coll_name(cc->coll), collar_status_string(cc->failed));
        PMPI_Comm_call_errhandler(cc->comm, MPI_ERR_OTHER);
        return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}


/* ------------------------------------------------------------- engine */

/*
 * One operation: the call's description, its statistics, the pointers the
 * MPI library gets (host copies or the user's buffers), and, for the
 * nonblocking and persistent forms, the library's request on the host
 * copies and the schedule that copies the result back when it completes.
 */
typedef struct {
    colls_call_t        cc;
    double              t0;
    collar_stats_call_t stat;
    void               *s, *r;     /* what the MPI call gets */
    MPI_Request         inner;     /* the library's request */
    /* An allreduce (collar_colls_allreduce): "this rank failed", MPI_MAX
     * over the ranks, issued right after the data's collective, so that no
     * rank takes a result built on a failed rank's zeros for good. */
    int                 agree;
    int                 agree_in, agree_out;
    MPI_Request         agree_req;
    collar_sched_t     *sched;
    collar_persist_t    persist;
    collar_status_t     init_failed;  /* persistent: staging failed at init */
    /* COLLAR_CHECK's check, issued before the operation's collectives; it
     * gates the schedule (which owns it from op_schedule on). */
    collar_check_t     *check;
    /* collar's state of the communicator whose private duplicate carries
     * the library's collectives (an allreduce: collar_colls_allreduce),
     * held by the schedule; NULL: they run on the application's. */
    collar_comm_t      *on;
    /* A start that failed after issuing the library's collectives: they
     * complete later (op_left), the start returns at once. */
    collar_leftover_t   left;
} colls_op_t;

/* Schedules of staged collectives have no internal traffic: they take no
 * tags and no turn, only a state to be created on (never freed: its one
 * reference is its own). */
static collar_comm_t colls_comm = { .private_comm = MPI_COMM_NULL, .refs = 1 };

/* How op_enter observes an operation it stages (collar_observe). */
enum {
    OBSERVE_NONE,        /* persistent: each MPI_Start is observed */
    OBSERVE_NONBLOCKING, /* the operation and its copy-in; the schedule
                            observes the rest */
    OBSERVE_BLOCKING     /* and the MPI library's call (stage_out ends it) */
};

/*
 * Describe the call, allocate host copies for its device buffers and, when
 * `copy_in`, fill them.  MPI_SUCCESS: op->s and op->r are what the MPI call
 * gets; else the error to return without the collective (no memory at all,
 * reported through the communicator's error handler).
 */
static int op_enter(colls_op_t *op, const collar_coll_args_t *a, int copy_in,
                    int observe)
{
    colls_call_t *cc = &op->cc;
    *cc = (colls_call_t){ .coll = a->coll, .comm = a->comm, .mem = COLLAR_MEM_HOST };
    op->s = (void *)a->sbuf;
    op->r = a->rbuf;
    op->inner = MPI_REQUEST_NULL;
    if (collar_stats_on) {
        op->stat = (collar_stats_call_t){ .coll = a->coll, .alg = COLLAR_ALG_NATIVE };
        /* Frames inside libcollar.so are skipped: the wrapper's caller. */
        op->stat.npcs = collar_stats_callsite(op->stat.pcs, COLLAR_STATS_MAX_DEPTH, 1);
        op->t0 = PMPI_Wtime();
    }
    if (!collar_stats_on && colls_host != NULL) {
        /* Every buffer given (MPI_IN_PLACE aside) in the host ranges: no
         * significant buffer is device memory, nothing is staged, and the
         * MPI library gets the call as it is, as the full way below would
         * find, without the questions about the communicator and the
         * types. */
        const void *s = a->coll == COLLAR_COLL_BCAST || a->sbuf == MPI_IN_PLACE
                        ? a->rbuf : a->sbuf;
        const void *r = a->rbuf == MPI_IN_PLACE ? s : a->rbuf;
        if (collar_mem_known_host(colls_host, s, r)) {
            return MPI_SUCCESS;
        }
    }
    int inter = 0;
    if (a->comm == MPI_COMM_NULL || PMPI_Comm_test_inter(a->comm, &inter) != MPI_SUCCESS
        || inter || PMPI_Comm_rank(a->comm, &cc->rank) != MPI_SUCCESS
        || PMPI_Comm_size(a->comm, &cc->size) != MPI_SUCCESS || !describe(cc, a)) {
        /* Not understood: the MPI library gets the call as it is. */
        cc->nbuf = 0;
        cc->bytes = 0;
        return MPI_SUCCESS;
    }
    if (stage_alloc(cc) != COLLAR_OK) {
        collar_error(COLL, "cannot stage %s: no host memory for %zu bytes, not "
                     "even to take part", collar_coll_name(cc->coll),
                     cc->buf[0].len + cc->buf[1].len);
        release(cc);
        PMPI_Comm_call_errhandler(cc->comm, MPI_ERR_OTHER);
        return MPI_ERR_OTHER;
    }
    if (observe != OBSERVE_NONE && collar_observe && cc->staged) {
        collar_obs_coll_begin(&cc->obs, cc->coll, COLLAR_ALG_STAGED, cc->bytes);
    }
    if (copy_in) {
        stage_copy_in(cc);
    }
    if (observe == OBSERVE_BLOCKING && cc->obs.t0 != 0
        && (collar_observe & COLLAR_OBS_STEPS)) {
        collar_obs_phase_begin(&cc->mpi, COLLAR_PHASE_MPI_COLL, cc->bytes);
    }
    op->s = host_ptr(cc, a->sbuf);
    op->r = host_ptr(cc, a->rbuf);
    return MPI_SUCCESS;
}

static void op_record(colls_op_t *op, double seconds)
{
    if (!collar_stats_on) {
        return;
    }
    op->stat.alg = op->cc.staged ? COLLAR_ALG_STAGED : COLLAR_ALG_NATIVE;
    op->stat.mem = op->cc.mem;
    op->stat.bytes = op->cc.bytes;
    op->stat.seconds = seconds;
    collar_stats_record(&op->stat);
}

/* The blocking form, after the collective returned `rc`: stage back,
 * count, return what the wrapper returns. */
static int op_leave(colls_op_t *op, int rc)
{
    rc = stage_out(&op->cc, rc);
    if (rc == MPI_SUCCESS) {
        op_record(op, collar_stats_on ? PMPI_Wtime() - op->t0 : 0.0);
    }
    return rc;
}

static void op_free(collar_sched_t *s)
{
    colls_op_t *op = s->cleanup_arg;
    if (s->abandoned) {
        /* The check failed: the library's collective on the host copies
         * may still be in flight, and its buffers stay with it. */
        const size_t held = op->cc.buf[0].host_len + op->cc.buf[1].host_len;
        collar_warn(COLL, "COLLAR_CHECK: the MPI library's %s, started with "
                    "the call, is left in flight%s", collar_coll_name(op->cc.coll),
                    held ? " with its host copies (not reused)" : "");
        free(op);
        return;
    }
    release(&op->cc);
    free(op);
}

/* After the agreement of a staged allreduce: another rank failed. */
static collar_status_t agree_check(collar_sched_t *s, void *arg)
{
    const colls_op_t *op = arg;
    if (op->agree_out && !op->agree_in && s->status == COLLAR_OK) {
        collar_error(COLL, "a staged allreduce failed on another rank; its "
                     "result here is not complete");
        collar_sched_fail(s, COLLAR_ERR_MPI);
    }
    return COLLAR_OK;
}

/*
 * The schedule run when the library's request on the host copies is
 * complete: copy every receive buffer back.  A failure of collar's own
 * before the collective drains it (the copies are skipped) and becomes the
 * operation's error.
 */
static collar_status_t op_schedule(colls_op_t *op)
{
    collar_sched_t *s = NULL;
    COLLAR_CHECK(collar_sched_create(op->on != NULL ? op->on : &colls_comm,
                                     colls_dev, &s));
    collar_step_t wait = { .kind = COLLAR_STEP_REQUEST, .u.request.req = &op->inner };
    int w = 0;
    collar_status_t st = collar_sched_add(s, &wait, &w);
    if (st == COLLAR_OK && op->agree) {
        /* The copies back wait for the agreement too; a rank that learns
         * of another's failure fails (agree_check). */
        collar_step_t agree = { .kind = COLLAR_STEP_REQUEST,
                                .u.request = { .req = &op->agree_req, .agree = 1 } };
        int a = 0;
        st = collar_sched_add(s, &agree, &a);
        collar_step_t check = { .kind = COLLAR_STEP_CALL, .ndeps = 2,
                                .deps = { w, a } };
        check.u.call.fn = agree_check;
        check.u.call.arg = op;
        check.u.call.agree = 1;
        if (st == COLLAR_OK) {
            st = collar_sched_add(s, &check, &w);
        }
    }
    for (int i = 0; i < op->cc.nbuf && st == COLLAR_OK; i++) {
        const colls_buf_t *b = &op->cc.buf[i];
        if (b->host == NULL || !b->recv) {
            continue;
        }
        collar_step_t out = {
            .kind = COLLAR_STEP_COPY, .ndeps = 1, .deps = { w },
            .u.copy = { .dst = (char *)b->user + b->lo, .src = b->host,
                        .bytes = b->len, .stream = 0 },
        };
        st = collar_sched_add(s, &out, NULL);
    }
    if (st != COLLAR_OK) {
        collar_sched_destroy(s);
        return st;
    }
    s->check = op->check;
    op->check = NULL;
    op->sched = s;
    return COLLAR_OK;
}

/* Start the schedule of a nonblocking or persistent operation. */
static void op_start_schedule(colls_op_t *op)
{
    collar_sched_t *s = op->sched;
    if (op->cc.failed != COLLAR_OK) {
        collar_sched_fail(s, op->cc.failed);
    }
    s->stats_on = collar_stats_on;
    if (collar_stats_on) {
        op->stat.alg = COLLAR_ALG_STAGED;
        op->stat.mem = op->cc.mem;
        op->stat.bytes = op->cc.bytes;
        s->stats = op->stat;
        s->stats_t0 = op->t0;
    }
    s->stats.coll = op->cc.coll;
    s->stats.alg = COLLAR_ALG_STAGED;
    s->stats.bytes = op->cc.bytes;
    if (collar_observe) {
        /* The operation began with its copy-in (op_enter, persist_start). */
        s->obs = op->cc.obs;
        op->cc.obs.t0 = 0;
        for (int i = 0; i < op->cc.nbuf; i++) {
            const colls_buf_t *b = &op->cc.buf[i];
            if (b->recv) {
                collar_sched_observe_buffers(s, NULL, 0, (const char *)b->user + b->lo,
                                             b->len);
            }
        }
    }
    collar_sched_start(s);
}

/* What a failed start left (op_leave_behind): its check, then the
 * library's collective on the host copies and its status agreement, which
 * the other ranks match once they make their own start; the host copies
 * go when they are complete.  If the check finds that the ranks disagree,
 * those collectives may never be matched: they stay with the library, as
 * an abandoned operation's do (op_free). */
static int op_left(collar_leftover_t *l, int wait)
{
    colls_op_t *op = (colls_op_t *)((char *)l - offsetof(colls_op_t, left));
    if (op->check != NULL) {
        MPI_Request *req = collar_check_request(op->check);
        int flag = 1;
        int rc = wait ? PMPI_Wait(req, MPI_STATUS_IGNORE)
                      : PMPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !flag) {
            return 0;
        }
        if (rc == MPI_SUCCESS) {
            rc = collar_check_result(op->check);
        }
        collar_check_free(op->check);
        op->check = NULL;
        if (rc != MPI_SUCCESS) {
            collar_warn(COLL, "COLLAR_CHECK: the MPI library's %s of a failed "
                        "start is left in flight", collar_coll_name(op->cc.coll));
            free(op);   /* (the host copies and communicator stay with it) */
            return 1;
        }
    }
    MPI_Request *reqs[2] = { &op->inner, op->agree ? &op->agree_req : NULL };
    for (int i = 0; i < 2; i++) {
        if (reqs[i] == NULL || *reqs[i] == MPI_REQUEST_NULL) {
            continue;
        }
        int flag = 1;
        int rc = wait ? PMPI_Wait(reqs[i], MPI_STATUS_IGNORE)
                      : PMPI_Test(reqs[i], &flag, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !flag) {
            return 0;
        }
    }
    release(&op->cc);
    if (op->on != NULL) {
        collar_comm_unref(op->on);
    }
    free(op);
    return 1;
}

/* A nonblocking start that failed here after the library's collective on
 * the host copies was issued (and its status agreement, and the check):
 * they are left to complete later (op_left), nothing is copied back, and
 * the start returns its error now (raised on the application's
 * communicator where `raise`); the other ranks' calls go on. */
static int op_leave_behind(colls_op_t *op, int rc, int raise)
{
    if (op->cc.obs.t0 != 0) {
        collar_obs_coll_end(&op->cc.obs, op->cc.coll, COLLAR_ALG_STAGED,
                            op->cc.bytes);
    }
    if (op->on != NULL) {
        collar_comm_ref(op->on);   /* its collectives may run on it */
    }
    const MPI_Comm comm = op->cc.comm;
    collar_leftover_add(&op->left, comm, op_left);
    if (raise) {
        PMPI_Comm_call_errhandler(comm, rc);
    }
    return rc;
}

/*
 * The nonblocking form: op_enter has copied in, the library's nonblocking
 * collective on the host copies returned `rc` and op->inner.  Not staged:
 * the application gets the library's request.  Staged: a generalized
 * request, completed when the copies back are done.
 */
static int op_istart(colls_op_t *op, int rc, MPI_Request *request)
{
    if (rc != MPI_SUCCESS && op->check != NULL) {
        /* The check's collective is issued: it completes later, once every
         * rank has issued it, then goes (collar_check_free). */
        collar_check_free(op->check);
        op->check = NULL;
    }
    if (rc != MPI_SUCCESS || (!op->cc.staged && op->check == NULL)) {
        if (op->cc.obs.t0 != 0) {
            collar_obs_coll_end(&op->cc.obs, op->cc.coll, COLLAR_ALG_STAGED,
                                op->cc.bytes);
        }
        if (rc == MPI_SUCCESS) {
            *request = op->inner;
            /* For a nonblocking call: the time to start it (docs/stats.md). */
            op_record(op, collar_stats_on ? PMPI_Wtime() - op->t0 : 0.0);
        }
        release(&op->cc);
        free(op);
        return rc;
    }
    collar_status_t st = op_schedule(op);
    if (st != COLLAR_OK) {
        /* The collectives are issued: the library carries them, so the
         * peers are not left waiting, and this start does not wait for
         * them. */
        collar_error(COLL, "cannot run a nonblocking %s: %s; it fails here",
                     collar_coll_name(op->cc.coll), collar_status_string(st));
        *request = MPI_REQUEST_NULL;
        return op_leave_behind(op, MPI_ERR_OTHER, 1);
    }
    op->sched->cleanup = op_free;
    op->sched->cleanup_arg = op;
    op_start_schedule(op);
    collar_sched_t *s = op->sched;
    st = collar_run_nonblocking(s, op->cc.comm, request);
    if (st != COLLAR_OK) {
        /* The schedule is started: it runs on, failed (nothing is copied
         * back) and with no request, and goes when the library's
         * collectives are complete; the start does not wait for them. */
        collar_error(COLL, "cannot create the request of a nonblocking %s: %s; "
                     "it fails here", collar_coll_name(op->cc.coll),
                     collar_status_string(st));
        const MPI_Comm comm = op->cc.comm;
        s->stats_on = 0;
        collar_sched_fail(s, st);
        collar_run_detached(s);
        *request = MPI_REQUEST_NULL;
        PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
        return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}

/* ---------------------------------------------------- persistent form */

#if defined(HAVE_PMPI_ALLREDUCE_INIT)

static void persist_on_finish(collar_sched_t *s)
{
    colls_op_t *op = s->owner;
    collar_persist_finished(&op->persist, s->status == COLLAR_OK ? MPI_SUCCESS
                                                                 : s->mpi_error);
}

/* MPI_Start: copy in, start the library's persistent request on the host
 * copies, run the copies back when it completes. */
static void persist_start(collar_persist_t *p)
{
    colls_op_t *op = (colls_op_t *)((char *)p - offsetof(colls_op_t, persist));
    if (op->sched->abandoned) {
        /* Its check failed at an earlier start, and the library's
         * collective of that start is still in flight: every start ends
         * with that error (the arguments, fixed at the init, disagree). */
        collar_persist_finished(p, op->sched->mpi_error);
        return;
    }
    op->cc.failed = op->init_failed;
    if (collar_stats_on) {
        op->t0 = PMPI_Wtime();
    }
    if (collar_observe) {
        collar_obs_coll_begin(&op->cc.obs, op->cc.coll, COLLAR_ALG_STAGED,
                              op->cc.bytes);
    }
    stage_copy_in(&op->cc);
    /* (Its check was issued at the init, where MPI matches it; each
     * start's schedule is gated by it.) */
    int rc = PMPI_Start(&op->inner);
    if (rc == MPI_SUCCESS && op->agree) {
        op->agree_in = op->cc.failed != COLLAR_OK;
        rc = PMPI_Start(&op->agree_req);
    }
    collar_sched_rewind(op->sched);
    if (rc != MPI_SUCCESS) {
        collar_error(COLL, "cannot start a persistent %s (MPI error %d)",
                     collar_coll_name(op->cc.coll), rc);
        if (op->cc.obs.t0 != 0) {
            collar_obs_coll_end(&op->cc.obs, op->cc.coll, COLLAR_ALG_STAGED,
                                op->cc.bytes);
        }
        collar_persist_finished(p, rc);
        return;
    }
    op_start_schedule(op);
    collar_run_persistent(op->sched);
}

static void persist_destroy(collar_persist_t *p)
{
    colls_op_t *op = (colls_op_t *)((char *)p - offsetof(colls_op_t, persist));
    if (!op->sched->abandoned) {
        /* (Abandoned: the library's collectives may be active; freeing an
         * active persistent collective request is erroneous.) */
        if (op->inner != MPI_REQUEST_NULL) {
            PMPI_Request_free(&op->inner);
        }
        if (op->agree && op->agree_req != MPI_REQUEST_NULL) {
            PMPI_Request_free(&op->agree_req);
        }
    }
    collar_sched_destroy(op->sched);   /* frees op (op_free) */
}

/*
 * The persistent form (MPI_X_init): op_enter has allocated and filled the
 * host copies (filled again at each MPI_Start: MPICH 4.0.2's persistent
 * gathers read the send buffer at MPI_X_init already, so collar's copies
 * hold what the application's buffers held then too), the library's
 * MPI_X_init on them returned
 * `rc` and op->inner.  Not staged: the application gets the library's
 * request, which collar never sees again.  Staged: collar's persistent
 * request (persist.c).
 */
static int op_pinit(colls_op_t *op, int rc, MPI_Request *request)
{
    if (rc != MPI_SUCCESS || (!op->cc.staged && op->check == NULL)) {
        if (rc == MPI_SUCCESS) {
            *request = op->inner;
        }
        collar_check_free(op->check);
        release(&op->cc);
        free(op);
        return rc;
    }
    op->init_failed = op->cc.failed;
    collar_status_t st = op_schedule(op);
    if (st == COLLAR_OK) {
        op->sched->cleanup = op_free;
        op->sched->cleanup_arg = op;
        op->sched->owner = op;
        op->sched->on_finish = persist_on_finish;
        op->persist.coll = op->cc.coll;
        op->persist.comm = op->cc.comm;
        op->persist.start = persist_start;
        op->persist.destroy = persist_destroy;
        rc = collar_persist_create(&op->persist, request);
        if (rc == MPI_SUCCESS) {
            return MPI_SUCCESS;
        }
        collar_error(COLL, "cannot create a persistent %s request (MPI error %d)",
                     collar_coll_name(op->cc.coll), rc);
        const MPI_Comm comm = op->cc.comm;
        PMPI_Request_free(&op->inner);
        if (op->agree) {
            PMPI_Request_free(&op->agree_req);
        }
        collar_sched_destroy(op->sched);   /* frees op */
        PMPI_Comm_call_errhandler(comm, rc);
        return rc;
    }
    collar_error(COLL, "cannot set up a persistent %s: %s",
                 collar_coll_name(op->cc.coll), collar_status_string(st));
    collar_check_free(op->check);
    PMPI_Request_free(&op->inner);
    if (op->agree) {
        PMPI_Request_free(&op->agree_req);
    }
    release(&op->cc);
    const MPI_Comm comm = op->cc.comm;
    free(op);
    PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
    return MPI_ERR_OTHER;
}

#endif /* HAVE_PMPI_ALLREDUCE_INIT */


/* A new operation for a nonblocking or persistent call (NULL: no memory;
 * the caller hands the call to the library as it is). */
static colls_op_t *op_new(void)
{
    return calloc(1, sizeof(colls_op_t));
}

/* ---------------------------------------------- the MPI library's calls */

/*
 * The MPI library's call of a collective, in each form and binding, on
 * `s` and `r` (the host copies, or the user's buffers when nothing is
 * staged); the other arguments as the application gave them.
 */
typedef enum { FORM_BLOCKING, FORM_NONBLOCKING, FORM_PERSISTENT } form_t;

static int issue_blocking(const collar_coll_args_t *a, const void *s, void *r)
{
    switch (a->coll) {
    case COLLAR_COLL_BCAST:
        return PMPI_Bcast(r, (int)a->rcount, a->rdt, a->root, a->comm);
    case COLLAR_COLL_ALLGATHER:
        return PMPI_Allgather(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->comm);
    case COLLAR_COLL_ALLGATHERV:
        return PMPI_Allgatherv(s, (int)a->scount, a->sdt, r, (const int *)a->rcounts, (const int *)a->rdispls, a->rdt, a->comm);
    case COLLAR_COLL_ALLTOALL:
        return PMPI_Alltoall(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->comm);
    case COLLAR_COLL_ALLTOALLV:
        return PMPI_Alltoallv(s, (const int *)a->scounts, (const int *)a->sdispls, a->sdt, r, (const int *)a->rcounts, (const int *)a->rdispls, a->rdt, a->comm);
    case COLLAR_COLL_REDUCE_SCATTER:
        return PMPI_Reduce_scatter(s, r, (const int *)a->rcounts, a->sdt, a->op, a->comm);
    case COLLAR_COLL_REDUCE_SCATTER_BLOCK:
        return PMPI_Reduce_scatter_block(s, r, (int)a->rcount, a->sdt, a->op, a->comm);
    case COLLAR_COLL_REDUCE:
        return PMPI_Reduce(s, r, (int)a->rcount, a->sdt, a->op, a->root, a->comm);
    case COLLAR_COLL_GATHER:
        return PMPI_Gather(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->root, a->comm);
    case COLLAR_COLL_GATHERV:
        return PMPI_Gatherv(s, (int)a->scount, a->sdt, r, (const int *)a->rcounts, (const int *)a->rdispls, a->rdt, a->root, a->comm);
    case COLLAR_COLL_SCATTER:
        return PMPI_Scatter(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->root, a->comm);
    case COLLAR_COLL_SCATTERV:
        return PMPI_Scatterv(s, (const int *)a->scounts, (const int *)a->sdispls, a->sdt, r, (int)a->rcount, a->rdt, a->root, a->comm);
    default:
        return MPI_ERR_INTERN;
    }
}

static int issue_nonblocking(const collar_coll_args_t *a, const void *s, void *r, MPI_Request *req)
{
    switch (a->coll) {
    case COLLAR_COLL_BCAST:
        return PMPI_Ibcast(r, (int)a->rcount, a->rdt, a->root, a->comm, req);
    case COLLAR_COLL_ALLGATHER:
        return PMPI_Iallgather(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->comm, req);
    case COLLAR_COLL_ALLGATHERV:
        return PMPI_Iallgatherv(s, (int)a->scount, a->sdt, r, (const int *)a->rcounts, (const int *)a->rdispls, a->rdt, a->comm, req);
    case COLLAR_COLL_ALLTOALL:
        return PMPI_Ialltoall(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->comm, req);
    case COLLAR_COLL_ALLTOALLV:
        return PMPI_Ialltoallv(s, (const int *)a->scounts, (const int *)a->sdispls, a->sdt, r, (const int *)a->rcounts, (const int *)a->rdispls, a->rdt, a->comm, req);
    case COLLAR_COLL_REDUCE_SCATTER:
        return PMPI_Ireduce_scatter(s, r, (const int *)a->rcounts, a->sdt, a->op, a->comm, req);
    case COLLAR_COLL_REDUCE_SCATTER_BLOCK:
        return PMPI_Ireduce_scatter_block(s, r, (int)a->rcount, a->sdt, a->op, a->comm, req);
    case COLLAR_COLL_REDUCE:
        return PMPI_Ireduce(s, r, (int)a->rcount, a->sdt, a->op, a->root, a->comm, req);
    case COLLAR_COLL_GATHER:
        return PMPI_Igather(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->root, a->comm, req);
    case COLLAR_COLL_GATHERV:
        return PMPI_Igatherv(s, (int)a->scount, a->sdt, r, (const int *)a->rcounts, (const int *)a->rdispls, a->rdt, a->root, a->comm, req);
    case COLLAR_COLL_SCATTER:
        return PMPI_Iscatter(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->root, a->comm, req);
    case COLLAR_COLL_SCATTERV:
        return PMPI_Iscatterv(s, (const int *)a->scounts, (const int *)a->sdispls, a->sdt, r, (int)a->rcount, a->rdt, a->root, a->comm, req);
    default:
        return MPI_ERR_INTERN;
    }
}

#if defined(HAVE_PMPI_ALLREDUCE_INIT)
static int issue_persistent(const collar_coll_args_t *a, const void *s, void *r, MPI_Info info, MPI_Request *req)
{
    switch (a->coll) {
    case COLLAR_COLL_BCAST:
        return PMPI_Bcast_init(r, (int)a->rcount, a->rdt, a->root, a->comm, info, req);
    case COLLAR_COLL_ALLGATHER:
        return PMPI_Allgather_init(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->comm, info, req);
    case COLLAR_COLL_ALLGATHERV:
        return PMPI_Allgatherv_init(s, (int)a->scount, a->sdt, r, (const int *)a->rcounts, (const int *)a->rdispls, a->rdt, a->comm, info, req);
    case COLLAR_COLL_ALLTOALL:
        return PMPI_Alltoall_init(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->comm, info, req);
    case COLLAR_COLL_ALLTOALLV:
        return PMPI_Alltoallv_init(s, (const int *)a->scounts, (const int *)a->sdispls, a->sdt, r, (const int *)a->rcounts, (const int *)a->rdispls, a->rdt, a->comm, info, req);
    case COLLAR_COLL_REDUCE_SCATTER:
        return PMPI_Reduce_scatter_init(s, r, (const int *)a->rcounts, a->sdt, a->op, a->comm, info, req);
    case COLLAR_COLL_REDUCE_SCATTER_BLOCK:
        return PMPI_Reduce_scatter_block_init(s, r, (int)a->rcount, a->sdt, a->op, a->comm, info, req);
    case COLLAR_COLL_REDUCE:
        return PMPI_Reduce_init(s, r, (int)a->rcount, a->sdt, a->op, a->root, a->comm, info, req);
    case COLLAR_COLL_GATHER:
        return PMPI_Gather_init(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->root, a->comm, info, req);
    case COLLAR_COLL_GATHERV:
        return PMPI_Gatherv_init(s, (int)a->scount, a->sdt, r, (const int *)a->rcounts, (const int *)a->rdispls, a->rdt, a->root, a->comm, info, req);
    case COLLAR_COLL_SCATTER:
        return PMPI_Scatter_init(s, (int)a->scount, a->sdt, r, (int)a->rcount, a->rdt, a->root, a->comm, info, req);
    case COLLAR_COLL_SCATTERV:
        return PMPI_Scatterv_init(s, (const int *)a->scounts, (const int *)a->sdispls, a->sdt, r, (int)a->rcount, a->rdt, a->root, a->comm, info, req);
    default:
        return MPI_ERR_INTERN;
    }
}
#endif

#if defined(HAVE_PMPI_ALLREDUCE_C)
static int issue_blocking_c(const collar_coll_args_t *a, const void *s, void *r)
{
    switch (a->coll) {
    case COLLAR_COLL_BCAST:
        return PMPI_Bcast_c(r, a->rcount, a->rdt, a->root, a->comm);
    case COLLAR_COLL_ALLGATHER:
        return PMPI_Allgather_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->comm);
    case COLLAR_COLL_ALLGATHERV:
        return PMPI_Allgatherv_c(s, a->scount, a->sdt, r, (const MPI_Count *)a->rcounts, (const MPI_Aint *)a->rdispls, a->rdt, a->comm);
    case COLLAR_COLL_ALLTOALL:
        return PMPI_Alltoall_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->comm);
    case COLLAR_COLL_ALLTOALLV:
        return PMPI_Alltoallv_c(s, (const MPI_Count *)a->scounts, (const MPI_Aint *)a->sdispls, a->sdt, r, (const MPI_Count *)a->rcounts, (const MPI_Aint *)a->rdispls, a->rdt, a->comm);
    case COLLAR_COLL_REDUCE_SCATTER:
        return PMPI_Reduce_scatter_c(s, r, (const MPI_Count *)a->rcounts, a->sdt, a->op, a->comm);
    case COLLAR_COLL_REDUCE_SCATTER_BLOCK:
        return PMPI_Reduce_scatter_block_c(s, r, a->rcount, a->sdt, a->op, a->comm);
    case COLLAR_COLL_REDUCE:
        return PMPI_Reduce_c(s, r, a->rcount, a->sdt, a->op, a->root, a->comm);
    case COLLAR_COLL_GATHER:
        return PMPI_Gather_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->root, a->comm);
    case COLLAR_COLL_GATHERV:
        return PMPI_Gatherv_c(s, a->scount, a->sdt, r, (const MPI_Count *)a->rcounts, (const MPI_Aint *)a->rdispls, a->rdt, a->root, a->comm);
    case COLLAR_COLL_SCATTER:
        return PMPI_Scatter_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->root, a->comm);
    case COLLAR_COLL_SCATTERV:
        return PMPI_Scatterv_c(s, (const MPI_Count *)a->scounts, (const MPI_Aint *)a->sdispls, a->sdt, r, a->rcount, a->rdt, a->root, a->comm);
    default:
        return MPI_ERR_INTERN;
    }
}
#endif

#if defined(HAVE_PMPI_ALLREDUCE_C)
static int issue_nonblocking_c(const collar_coll_args_t *a, const void *s, void *r, MPI_Request *req)
{
    switch (a->coll) {
    case COLLAR_COLL_BCAST:
        return PMPI_Ibcast_c(r, a->rcount, a->rdt, a->root, a->comm, req);
    case COLLAR_COLL_ALLGATHER:
        return PMPI_Iallgather_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->comm, req);
    case COLLAR_COLL_ALLGATHERV:
        return PMPI_Iallgatherv_c(s, a->scount, a->sdt, r, (const MPI_Count *)a->rcounts, (const MPI_Aint *)a->rdispls, a->rdt, a->comm, req);
    case COLLAR_COLL_ALLTOALL:
        return PMPI_Ialltoall_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->comm, req);
    case COLLAR_COLL_ALLTOALLV:
        return PMPI_Ialltoallv_c(s, (const MPI_Count *)a->scounts, (const MPI_Aint *)a->sdispls, a->sdt, r, (const MPI_Count *)a->rcounts, (const MPI_Aint *)a->rdispls, a->rdt, a->comm, req);
    case COLLAR_COLL_REDUCE_SCATTER:
        return PMPI_Ireduce_scatter_c(s, r, (const MPI_Count *)a->rcounts, a->sdt, a->op, a->comm, req);
    case COLLAR_COLL_REDUCE_SCATTER_BLOCK:
        return PMPI_Ireduce_scatter_block_c(s, r, a->rcount, a->sdt, a->op, a->comm, req);
    case COLLAR_COLL_REDUCE:
        return PMPI_Ireduce_c(s, r, a->rcount, a->sdt, a->op, a->root, a->comm, req);
    case COLLAR_COLL_GATHER:
        return PMPI_Igather_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->root, a->comm, req);
    case COLLAR_COLL_GATHERV:
        return PMPI_Igatherv_c(s, a->scount, a->sdt, r, (const MPI_Count *)a->rcounts, (const MPI_Aint *)a->rdispls, a->rdt, a->root, a->comm, req);
    case COLLAR_COLL_SCATTER:
        return PMPI_Iscatter_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->root, a->comm, req);
    case COLLAR_COLL_SCATTERV:
        return PMPI_Iscatterv_c(s, (const MPI_Count *)a->scounts, (const MPI_Aint *)a->sdispls, a->sdt, r, a->rcount, a->rdt, a->root, a->comm, req);
    default:
        return MPI_ERR_INTERN;
    }
}
#endif

#if defined(HAVE_PMPI_ALLREDUCE_C) && defined(HAVE_PMPI_ALLREDUCE_INIT)
static int issue_persistent_c(const collar_coll_args_t *a, const void *s, void *r, MPI_Info info, MPI_Request *req)
{
    switch (a->coll) {
    case COLLAR_COLL_BCAST:
        return PMPI_Bcast_init_c(r, a->rcount, a->rdt, a->root, a->comm, info, req);
    case COLLAR_COLL_ALLGATHER:
        return PMPI_Allgather_init_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->comm, info, req);
    case COLLAR_COLL_ALLGATHERV:
        return PMPI_Allgatherv_init_c(s, a->scount, a->sdt, r, (const MPI_Count *)a->rcounts, (const MPI_Aint *)a->rdispls, a->rdt, a->comm, info, req);
    case COLLAR_COLL_ALLTOALL:
        return PMPI_Alltoall_init_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->comm, info, req);
    case COLLAR_COLL_ALLTOALLV:
        return PMPI_Alltoallv_init_c(s, (const MPI_Count *)a->scounts, (const MPI_Aint *)a->sdispls, a->sdt, r, (const MPI_Count *)a->rcounts, (const MPI_Aint *)a->rdispls, a->rdt, a->comm, info, req);
    case COLLAR_COLL_REDUCE_SCATTER:
        return PMPI_Reduce_scatter_init_c(s, r, (const MPI_Count *)a->rcounts, a->sdt, a->op, a->comm, info, req);
    case COLLAR_COLL_REDUCE_SCATTER_BLOCK:
        return PMPI_Reduce_scatter_block_init_c(s, r, a->rcount, a->sdt, a->op, a->comm, info, req);
    case COLLAR_COLL_REDUCE:
        return PMPI_Reduce_init_c(s, r, a->rcount, a->sdt, a->op, a->root, a->comm, info, req);
    case COLLAR_COLL_GATHER:
        return PMPI_Gather_init_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->root, a->comm, info, req);
    case COLLAR_COLL_GATHERV:
        return PMPI_Gatherv_init_c(s, a->scount, a->sdt, r, (const MPI_Count *)a->rcounts, (const MPI_Aint *)a->rdispls, a->rdt, a->root, a->comm, info, req);
    case COLLAR_COLL_SCATTER:
        return PMPI_Scatter_init_c(s, a->scount, a->sdt, r, a->rcount, a->rdt, a->root, a->comm, info, req);
    case COLLAR_COLL_SCATTERV:
        return PMPI_Scatterv_init_c(s, (const MPI_Count *)a->scounts, (const MPI_Aint *)a->sdispls, a->sdt, r, a->rcount, a->rdt, a->root, a->comm, info, req);
    default:
        return MPI_ERR_INTERN;
    }
}
#endif

static int issue(const collar_coll_args_t *a, form_t form, const void *s,
                 void *r, MPI_Info info, MPI_Request *req)
{
    (void)info;
#if defined(HAVE_PMPI_ALLREDUCE_C)
    if (a->large) {
        switch (form) {
        case FORM_BLOCKING:
            return issue_blocking_c(a, s, r);
        case FORM_NONBLOCKING:
            return issue_nonblocking_c(a, s, r, req);
        case FORM_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
            return issue_persistent_c(a, s, r, info, req);
#else
            break;
#endif
        }
        return MPI_ERR_INTERN;
    }
#endif
    switch (form) {
    case FORM_BLOCKING:
        return issue_blocking(a, s, r);
    case FORM_NONBLOCKING:
        return issue_nonblocking(a, s, r, req);
    case FORM_PERSISTENT:
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
        return issue_persistent(a, s, r, info, req);
#else
        break;
#endif
    }
    return MPI_ERR_INTERN;
}

/* ---------------------------------------------- the forms of a collective */

int collar_coll_run(const collar_coll_args_t *a)
{
    colls_op_t op;
    int rc = op_enter(&op, a, 1, OBSERVE_BLOCKING);
    if (rc == MPI_SUCCESS) {
        rc = op_leave(&op, issue(a, FORM_BLOCKING, op.s, op.r, MPI_INFO_NULL,
                                 NULL));
    }
    return rc;
}

int collar_coll_start(const collar_coll_args_t *a, MPI_Request *request)
{
    colls_op_t *op = op_new();
    if (op == NULL) {
        return issue(a, FORM_NONBLOCKING, a->sbuf, a->rbuf, MPI_INFO_NULL,
                     request);
    }
    int rc = op_enter(op, a, 1, OBSERVE_NONBLOCKING);
    if (rc != MPI_SUCCESS) {
        free(op);
        return rc;
    }
    return op_istart(op, issue(a, FORM_NONBLOCKING, op->s, op->r,
                               MPI_INFO_NULL, &op->inner), request);
}

#if defined(HAVE_PMPI_ALLREDUCE_INIT)
int collar_coll_init(const collar_coll_args_t *a, MPI_Info info,
                     MPI_Request *request)
{
    colls_op_t *op = op_new();
    if (op == NULL) {
        return issue(a, FORM_PERSISTENT, a->sbuf, a->rbuf, info, request);
    }
    int rc = op_enter(op, a, 1, OBSERVE_NONE);
    if (rc != MPI_SUCCESS) {
        free(op);
        return rc;
    }
    return op_pinit(op, issue(a, FORM_PERSISTENT, op->s, op->r, info,
                              &op->inner), request);
}
#endif

/* ------------------------------------------- allreduce without collar's communicator */

/* An MPI error of the library's collective on `on`: raised on the
 * application's communicator where `on` is collar's (whose errors
 * return), as the library raises its own on the application's. */
static int on_error(MPI_Comm app, MPI_Comm on, int rc)
{
    if (rc != MPI_SUCCESS && on != app) {
        PMPI_Comm_call_errhandler(app, rc);
    }
    return rc;
}

/* The call site the allreduce's entry point took (the frames of collar's
 * own between it and op_enter would hide the application's). */
static void op_site(colls_op_t *op, const collar_stats_call_t *site)
{
    if (collar_stats_on && site != NULL) {
        op->stat.npcs = site->npcs;
        memcpy(op->stat.pcs, site->pcs, sizeof(op->stat.pcs));
    }
}

int collar_colls_allreduce(const collar_allreduce_args_t *x,
                           collar_check_t *check,
                           const collar_stats_call_t *site, collar_comm_t *on)
{
    const collar_coll_args_t a = { .coll = COLLAR_COLL_ALLREDUCE, .sbuf = x->sbuf,
                             .rbuf = x->rbuf, .rcount = x->count, .sdt = x->dtype,
                             .rdt = x->dtype, .comm = x->comm, .large = x->large };
    const MPI_Op op_ = x->op;
    const MPI_Count n = x->count;
    if (x->request == NULL) {
        collar_check_free(check);   /* (a blocking call's check is done) */
        colls_op_t op;
        int rc = op_enter(&op, &a, 1, OBSERVE_BLOCKING);
        if (rc == MPI_SUCCESS) {
            op_site(&op, site);
#if defined(HAVE_PMPI_ALLREDUCE_C)
            rc = x->large ? PMPI_Allreduce_c(op.s, op.r, n, x->dtype, op_, x->comm)
                          : PMPI_Allreduce(op.s, op.r, (int)n, x->dtype, op_, x->comm);
#else
            rc = PMPI_Allreduce(op.s, op.r, (int)n, x->dtype, op_, x->comm);
#endif
            if (op.cc.staged) {
                /* Every rank stages alike (device calls everywhere): all
                 * take part in the agreement. */
                int bad = op.cc.failed != COLLAR_OK, any = 0;
                if (PMPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, x->comm)
                    != MPI_SUCCESS || (any && !bad)) {
                    collar_error(COLL, "a staged allreduce failed on another "
                                 "rank; its result here is not complete");
                    op.cc.failed = COLLAR_ERR_MPI;
                }
            }
            rc = op_leave(&op, rc);
        }
        return rc;
    }
    colls_op_t *op = op_new();
    if (op == NULL) {
        collar_error(COLL, "cannot stage an allreduce: no memory");
        collar_check_free(check);
        PMPI_Comm_call_errhandler(x->comm, MPI_ERR_NO_MEM);
        return MPI_ERR_NO_MEM;
    }
    /* Persistent: each MPI_Start copies in (persist_start), not the init. */
    int rc = op_enter(op, &a, !x->persistent,
                      x->persistent ? OBSERVE_NONE : OBSERVE_NONBLOCKING);
    if (rc != MPI_SUCCESS) {
        collar_check_free(check);
        free(op);
        return rc;
    }
    op_site(op, site);
    op->check = check;
    /* The communicator the library's collectives run on: collar's own
     * where the conductor gives it (it outlives the application's
     * MPI_Comm_free while the operation runs: Open MPI 4.1 crashes when a
     * nonblocking collective's communicator is freed before its wait). */
    op->on = on != NULL && on->setup == COLLAR_COMM_READY && op->cc.staged ? on : NULL;
    const MPI_Comm comm = op->on != NULL ? op->on->private_comm : x->comm;
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
    if (x->persistent) {
#if defined(HAVE_PMPI_ALLREDUCE_C)
        rc = x->large ? PMPI_Allreduce_init_c(op->s, op->r, n, x->dtype, op_, comm,
                                              x->info, &op->inner)
                      : PMPI_Allreduce_init(op->s, op->r, (int)n, x->dtype, op_,
                                            comm, x->info, &op->inner);
#else
        rc = PMPI_Allreduce_init(op->s, op->r, (int)n, x->dtype, op_, comm,
                                 x->info, &op->inner);
#endif
        if (rc == MPI_SUCCESS && op->cc.staged) {
            /* The status agreement, started after the data's at each
             * MPI_Start (persist_start). */
            rc = PMPI_Allreduce_init(&op->agree_in, &op->agree_out, 1, MPI_INT,
                                     MPI_MAX, comm, MPI_INFO_NULL,
                                     &op->agree_req);
            if (rc != MPI_SUCCESS) {
                PMPI_Request_free(&op->inner);
                collar_check_free(op->check);
                release(&op->cc);
                free(op);
                return on_error(x->comm, comm, rc);
            }
            op->agree = 1;
        }
        return op_pinit(op, on_error(x->comm, comm, rc), x->request);
    }
#endif
#if defined(HAVE_PMPI_ALLREDUCE_C)
    rc = x->large ? PMPI_Iallreduce_c(op->s, op->r, n, x->dtype, op_, comm, &op->inner)
                  : PMPI_Iallreduce(op->s, op->r, (int)n, x->dtype, op_, comm,
                                    &op->inner);
#else
    rc = PMPI_Iallreduce(op->s, op->r, (int)n, x->dtype, op_, comm, &op->inner);
#endif
    if (rc == MPI_SUCCESS && op->cc.staged) {
        op->agree = 1;
        op->agree_in = op->cc.failed != COLLAR_OK;
        rc = PMPI_Iallreduce(&op->agree_in, &op->agree_out, 1, MPI_INT, MPI_MAX,
                             comm, &op->agree_req);
        if (rc != MPI_SUCCESS) {
            /* The data's collective is issued: left to complete later, as
             * op_istart's error path does. */
            collar_error(COLL, "cannot start the status agreement of a "
                         "staged allreduce (MPI error %d); it fails here", rc);
            op->agree = 0;
            *x->request = MPI_REQUEST_NULL;
            /* (On the application's communicator the library raised its
             * own error.) */
            return op_leave_behind(op, rc, comm != x->comm);
        }
    }
    return op_istart(op, on_error(x->comm, comm, rc), x->request);
}
