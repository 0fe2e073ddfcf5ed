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
 * Fast path: a bit per collective in `colls_on`, set at MPI_Init only when
 * there is something to do (a device backend, an MPI library that does not
 * take device pointers, the collective in COLLAR_COLLECTIVES; or statistics
 * on): otherwise the wrapper is one test and the PMPI call.
 *
 * A failure of collar's own (no staging memory, a failed copy) must not
 * leave the other ranks waiting in the collective: the rank still enters it
 * with its host copy (zeroed when the copy into it failed, a plain heap
 * buffer when no staging memory could be had), leaves its receive buffer as
 * it was, and then reports MPI_ERR_OTHER through the communicator's error
 * handler.  What the other ranks received from it is undefined and they are
 * not told.  Only when not even a heap buffer can be had does the rank
 * return without entering the collective.
 */
#include "config.h"
#include "interpose.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define COLL_BIT(c) (1u << (c))

/* Collectives whose wrapper does more than the PMPI call. */
static unsigned colls_on;
/* Collectives whose device buffers are staged. */
static unsigned colls_stage;
static const collar_device_t *colls_dev = &collar_device_none;

void collar_colls_start(const collar_device_t *dev, int mpi_cuda_aware)
{
    colls_dev = dev;
    colls_stage = 0;
    if (dev != &collar_device_none && !mpi_cuda_aware) {
        for (int c = COLLAR_COLL_BCAST; c < COLLAR_COLL_COUNT; c++) {
            if (collar_cfg.collectives & (1u << (c - COLLAR_COLL_BCAST))) {
                colls_stage |= COLL_BIT(c);
            }
        }
    }
    colls_on = colls_stage;
    if (collar_stats_on) {
        /* Every call is counted, staged or not. */
        for (int c = COLLAR_COLL_BCAST; c < COLLAR_COLL_COUNT; c++) {
            colls_on |= COLL_BIT(c);
        }
    }
}

void collar_colls_stop(void)
{
    colls_on = 0;
    colls_stage = 0;
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
    int         pooled;   /* from the staging pool (else the heap) */
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
} colls_call_t;

/*
 * The span of `n` blocks of `dt`: block i has counts[i] elements (count when
 * counts is NULL) at displs[i] extents from the buffer (i * count when
 * displs is NULL).  COLLAR_ERR_INVALID when the MPI library would reject
 * the arguments (it is then left to report them).
 */
static collar_status_t span_blocks(MPI_Datatype dt, int n, int count,
                                   const int *counts, const int *displs,
                                   colls_buf_t *b)
{
    MPI_Aint lb, extent, true_lb, true_extent;
    int size;
    if (dt == MPI_DATATYPE_NULL || PMPI_Type_size(dt, &size) != MPI_SUCCESS
        || PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS
        || PMPI_Type_get_true_extent(dt, &true_lb, &true_extent) != MPI_SUCCESS
        || (n > 0 && counts == NULL && count < 0)) {
        return COLLAR_ERR_INVALID;
    }
    MPI_Aint lo = 0, hi = 0;
    size_t total = 0;
    int any = 0;
    for (int i = 0; i < n; i++) {
        const int c = counts != NULL ? counts[i] : count;
        if (c < 0) {
            return COLLAR_ERR_INVALID;
        }
        if (c == 0) {
            continue;
        }
        const MPI_Aint d = (displs != NULL ? (MPI_Aint)displs[i]
                                           : (MPI_Aint)i * count) * extent;
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
static collar_status_t add_buf(colls_call_t *cc, const void *user, int recv,
                               int read, MPI_Datatype dt, int n, int count,
                               const int *counts, const int *displs)
{
    colls_buf_t *b = &cc->buf[cc->nbuf];
    *b = (colls_buf_t){ .user = user, .recv = recv, .read = read };
    COLLAR_CHECK(span_blocks(dt, n, count, counts, displs, b));
    if (b->len != 0 && user != MPI_BOTTOM && user != MPI_IN_PLACE) {
        cc->nbuf++;
    }
    return COLLAR_OK;
}

static size_t type_bytes(MPI_Datatype dt, long count)
{
    int size = 0;
    if (count <= 0 || PMPI_Type_size(dt, &size) != MPI_SUCCESS || size < 0) {
        return 0;
    }
    return (size_t)count * (size_t)size;
}

static long sum_counts(const int *counts, int n)
{
    long s = 0;
    for (int i = 0; i < n; i++) {
        s += counts[i];
    }
    return s;
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

/* Say once per collective, the first time it is staged, what happens. */
static void log_staged(const colls_call_t *cc)
{
    if (!collar_log_enabled(COLLAR_LOG_INFO, COLLAR_SUB_COLL)) {
        return;
    }
    char once[64];
    snprintf(once, sizeof(once), "colls staged %d", (int)cc->coll);
    /* From rank 0 of the communicator (all ranks stage alike), or from
     * every rank at debug level. */
    if (!collar_log_first(once)
        || (cc->rank != 0 && !collar_log_enabled(COLLAR_LOG_DEBUG, COLLAR_SUB_COLL))) {
        return;
    }
    collar_info(COLL, "%s %d ranks device: staged through host memory (the MPI "
                "library does not take device pointers)",
                collar_coll_name(cc->coll), cc->size);
}

/*
 * Classify the buffers; stage the device ones when the collective is staged:
 * allocate host copies and copy in.  cc->staged says whether the PMPI call
 * must take host pointers (host_ptr); cc->failed holds collar's failure,
 * reported after the collective.  COLLAR_ERR_NO_MEMORY: not even a heap
 * buffer; the caller returns without the collective.
 */
static collar_status_t stage_in(colls_call_t *cc)
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
    for (int i = 0; i < cc->nbuf; i++) {
        colls_buf_t *b = &cc->buf[i];
        if (b->len == 0) {
            continue;
        }
        void *p = NULL;
        collar_status_t st = cc->failed == COLLAR_OK
                             ? collar_pool_get(colls_dev, b->len, &p)
                             : COLLAR_ERR_NO_MEMORY;
        if (st == COLLAR_OK) {
            b->pooled = 1;
        } else {
            if (cc->failed == COLLAR_OK) {
                cc->failed = st;
            }
            /* Enough to take part in the collective. */
            p = calloc(1, b->len);
            if (p == NULL) {
                return COLLAR_ERR_NO_MEMORY;
            }
        }
        b->host = p;
        b->host_len = b->len;
    }
    if (cc->failed == COLLAR_OK) {
        collar_status_t st = colls_dev->order_after_caller();
        if (st == COLLAR_OK) {
            st = copy_all(cc, 0);
        }
        if (st != COLLAR_OK) {
            cc->failed = st;
        }
    }
    return COLLAR_OK;
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
        if (b->pooled) {
            collar_pool_put(colls_dev, b->host, b->host_len);
        } else {
            free(b->host);
        }
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
    if (rc == MPI_SUCCESS && cc->failed == COLLAR_OK) {
        cc->failed = copy_all(cc, 1);
    }
    release(cc);
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

/* ------------------------------------------------------------- calls */

/* Statistics of one call, when they are on. */
typedef struct {
    double              t0;
    collar_stats_call_t stat;
} colls_rec_t;

/* Start describing a call: 1 when the communicator is one collar stages
 * on (an intracommunicator), 0 when the MPI library gets the call as it is. */
static int colls_begin(colls_call_t *cc, collar_coll_t coll, MPI_Comm comm,
                       colls_rec_t *rec)
{
    *cc = (colls_call_t){ .coll = coll, .comm = comm, .mem = COLLAR_MEM_HOST };
    if (collar_stats_on) {
        rec->stat = (collar_stats_call_t){ .coll = coll, .alg = COLLAR_ALG_NATIVE };
        rec->stat.npcs = collar_stats_callsite(rec->stat.pcs, COLLAR_STATS_MAX_DEPTH, 1);
        rec->t0 = PMPI_Wtime();
    }
    int inter = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS
        || inter || PMPI_Comm_rank(comm, &cc->rank) != MPI_SUCCESS
        || PMPI_Comm_size(comm, &cc->size) != MPI_SUCCESS) {
        return 0;
    }
    return 1;
}

/*
 * Before the collective.  `ok` is 0 when the arguments were not understood
 * (nothing is staged: the MPI library gets them and reports them as it
 * would without collar).  MPI_SUCCESS: run the collective on H(buffer);
 * else the error to return without it (no memory at all).
 */
static int colls_enter(colls_call_t *cc, int ok)
{
    if (!ok) {
        cc->nbuf = 0;
        cc->bytes = 0;
        return MPI_SUCCESS;
    }
    if (stage_in(cc) != COLLAR_OK) {
        collar_error(COLL, "cannot stage %s: no host memory for %zu bytes",
                     collar_coll_name(cc->coll), cc->buf[0].len + cc->buf[1].len);
        release(cc);
        PMPI_Comm_call_errhandler(cc->comm, MPI_ERR_OTHER);
        return MPI_ERR_OTHER;
    }
    return MPI_SUCCESS;
}

/* After the collective, which returned `rc`: stage back, count, return what
 * the wrapper returns. */
static int colls_leave(colls_call_t *cc, colls_rec_t *rec, int rc)
{
    rc = stage_out(cc, rc);
    if (collar_stats_on && rc == MPI_SUCCESS) {
        rec->stat.alg = cc->staged ? COLLAR_ALG_STAGED : COLLAR_ALG_NATIVE;
        rec->stat.mem = cc->mem;
        rec->stat.bytes = cc->bytes;
        rec->stat.seconds = PMPI_Wtime() - rec->t0;
        collar_stats_record(&rec->stat);
    }
    return rc;
}

COLLAR_EXPORT int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root,
                            MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_BCAST))) {
        return PMPI_Bcast(buf, count, dt, root, comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    int ok = colls_begin(&cc, COLLAR_COLL_BCAST, comm, &rec)
             && root >= 0 && root < cc.size
             && add_buf(&cc, buf, cc.rank != root, cc.rank == root, dt, 1,
                        count, NULL, NULL) == COLLAR_OK;
    if (ok) {
        cc.bytes = type_bytes(dt, count);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Bcast(host_ptr(&cc, buf), count, dt,
                                               root, comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype sdt,
                                void *rbuf, int rcount, MPI_Datatype rdt,
                                MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_ALLGATHER))) {
        return PMPI_Allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = sbuf == MPI_IN_PLACE;
    int ok = colls_begin(&cc, COLLAR_COLL_ALLGATHER, comm, &rec)
             && (in_place || add_buf(&cc, sbuf, 0, 1, sdt, 1, scount, NULL,
                                     NULL) == COLLAR_OK)
             && add_buf(&cc, rbuf, 1, in_place, rdt, cc.size, rcount, NULL,
                        NULL) == COLLAR_OK;
    if (ok) {
        cc.bytes = in_place ? type_bytes(rdt, rcount) : type_bytes(sdt, scount);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Allgather(host_ptr(&cc, sbuf), scount,
                                                   sdt, host_ptr(&cc, rbuf),
                                                   rcount, rdt, comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype sdt,
                                 void *rbuf, const int rcounts[],
                                 const int displs[], MPI_Datatype rdt,
                                 MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_ALLGATHERV))) {
        return PMPI_Allgatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = sbuf == MPI_IN_PLACE;
    int ok = colls_begin(&cc, COLLAR_COLL_ALLGATHERV, comm, &rec)
             && rcounts != NULL && displs != NULL
             && (in_place || add_buf(&cc, sbuf, 0, 1, sdt, 1, scount, NULL,
                                     NULL) == COLLAR_OK)
             && add_buf(&cc, rbuf, 1, in_place, rdt, cc.size, 0, rcounts,
                        displs) == COLLAR_OK;
    if (ok) {
        cc.bytes = in_place ? type_bytes(rdt, rcounts[cc.rank])
                            : type_bytes(sdt, scount);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Allgatherv(host_ptr(&cc, sbuf), scount,
                                                    sdt, host_ptr(&cc, rbuf),
                                                    rcounts, displs, rdt,
                                                    comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype sdt,
                               void *rbuf, int rcount, MPI_Datatype rdt,
                               MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_ALLTOALL))) {
        return PMPI_Alltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = sbuf == MPI_IN_PLACE;
    int ok = colls_begin(&cc, COLLAR_COLL_ALLTOALL, comm, &rec)
             && (in_place || add_buf(&cc, sbuf, 0, 1, sdt, cc.size, scount,
                                     NULL, NULL) == COLLAR_OK)
             && add_buf(&cc, rbuf, 1, in_place, rdt, cc.size, rcount, NULL,
                        NULL) == COLLAR_OK;
    if (ok) {
        cc.bytes = in_place ? type_bytes(rdt, (long)rcount * cc.size)
                            : type_bytes(sdt, (long)scount * cc.size);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Alltoall(host_ptr(&cc, sbuf), scount,
                                                  sdt, host_ptr(&cc, rbuf),
                                                  rcount, rdt, comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Alltoallv(const void *sbuf, const int scounts[],
                                const int sdispls[], MPI_Datatype sdt,
                                void *rbuf, const int rcounts[],
                                const int rdispls[], MPI_Datatype rdt,
                                MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_ALLTOALLV))) {
        return PMPI_Alltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts,
                              rdispls, rdt, comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = sbuf == MPI_IN_PLACE;
    int ok = colls_begin(&cc, COLLAR_COLL_ALLTOALLV, comm, &rec)
             && rcounts != NULL && rdispls != NULL
             && (in_place || (scounts != NULL && sdispls != NULL
                              && add_buf(&cc, sbuf, 0, 1, sdt, cc.size, 0,
                                         scounts, sdispls) == COLLAR_OK))
             && add_buf(&cc, rbuf, 1, in_place, rdt, cc.size, 0, rcounts,
                        rdispls) == COLLAR_OK;
    if (ok) {
        cc.bytes = in_place ? type_bytes(rdt, sum_counts(rcounts, cc.size))
                            : type_bytes(sdt, sum_counts(scounts, cc.size));
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Alltoallv(host_ptr(&cc, sbuf), scounts,
                                                   sdispls, sdt,
                                                   host_ptr(&cc, rbuf), rcounts,
                                                   rdispls, rdt, comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Reduce_scatter(const void *sbuf, void *rbuf,
                                     const int rcounts[], MPI_Datatype dt,
                                     MPI_Op op, MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_REDUCE_SCATTER))) {
        return PMPI_Reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = sbuf == MPI_IN_PLACE;
    long total = 0;
    int ok = colls_begin(&cc, COLLAR_COLL_REDUCE_SCATTER, comm, &rec)
             && rcounts != NULL;
    if (ok) {
        total = sum_counts(rcounts, cc.size);
        ok = total <= INT_MAX
             && (in_place || add_buf(&cc, sbuf, 0, 1, dt, 1, (int)total, NULL,
                                     NULL) == COLLAR_OK)
             /* In place, the receive buffer holds the whole input. */
             && add_buf(&cc, rbuf, 1, in_place, dt, 1,
                        in_place ? (int)total : rcounts[cc.rank], NULL,
                        NULL) == COLLAR_OK;
        cc.bytes = type_bytes(dt, total);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Reduce_scatter(host_ptr(&cc, sbuf),
                                                        host_ptr(&cc, rbuf),
                                                        rcounts, dt, op, comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf,
                                           int rcount, MPI_Datatype dt,
                                           MPI_Op op, MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_REDUCE_SCATTER_BLOCK))) {
        return PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = sbuf == MPI_IN_PLACE;
    int ok = colls_begin(&cc, COLLAR_COLL_REDUCE_SCATTER_BLOCK, comm, &rec)
             && (in_place || add_buf(&cc, sbuf, 0, 1, dt, cc.size, rcount,
                                     NULL, NULL) == COLLAR_OK)
             && add_buf(&cc, rbuf, 1, in_place, dt, in_place ? cc.size : 1,
                        rcount, NULL, NULL) == COLLAR_OK;
    if (ok) {
        cc.bytes = type_bytes(dt, (long)rcount * cc.size);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Reduce_scatter_block(host_ptr(&cc, sbuf),
                                                              host_ptr(&cc, rbuf),
                                                              rcount, dt, op,
                                                              comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Reduce(const void *sbuf, void *rbuf, int count,
                             MPI_Datatype dt, MPI_Op op, int root,
                             MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_REDUCE))) {
        return PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = sbuf == MPI_IN_PLACE;
    int ok = colls_begin(&cc, COLLAR_COLL_REDUCE, comm, &rec)
             && root >= 0 && root < cc.size
             && (in_place || add_buf(&cc, sbuf, 0, 1, dt, 1, count, NULL,
                                     NULL) == COLLAR_OK)
             /* The receive buffer matters at the root only. */
             && (cc.rank != root
                 || add_buf(&cc, rbuf, 1, in_place, dt, 1, count, NULL,
                            NULL) == COLLAR_OK);
    if (ok) {
        cc.bytes = type_bytes(dt, count);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Reduce(host_ptr(&cc, sbuf),
                                                host_ptr(&cc, rbuf), count, dt,
                                                op, root, comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Gather(const void *sbuf, int scount, MPI_Datatype sdt,
                             void *rbuf, int rcount, MPI_Datatype rdt, int root,
                             MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_GATHER))) {
        return PMPI_Gather(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = sbuf == MPI_IN_PLACE;
    int ok = colls_begin(&cc, COLLAR_COLL_GATHER, comm, &rec)
             && root >= 0 && root < cc.size
             && (in_place || add_buf(&cc, sbuf, 0, 1, sdt, 1, scount, NULL,
                                     NULL) == COLLAR_OK)
             && (cc.rank != root
                 || add_buf(&cc, rbuf, 1, in_place, rdt, cc.size, rcount, NULL,
                            NULL) == COLLAR_OK);
    if (ok) {
        cc.bytes = in_place ? type_bytes(rdt, rcount) : type_bytes(sdt, scount);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Gather(host_ptr(&cc, sbuf), scount,
                                                sdt, host_ptr(&cc, rbuf),
                                                rcount, rdt, root, comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype sdt,
                              void *rbuf, const int rcounts[],
                              const int displs[], MPI_Datatype rdt, int root,
                              MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_GATHERV))) {
        return PMPI_Gatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root,
                            comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = sbuf == MPI_IN_PLACE;
    int ok = colls_begin(&cc, COLLAR_COLL_GATHERV, comm, &rec)
             && root >= 0 && root < cc.size
             && (in_place || add_buf(&cc, sbuf, 0, 1, sdt, 1, scount, NULL,
                                     NULL) == COLLAR_OK)
             && (cc.rank != root
                 || (rcounts != NULL && displs != NULL
                     && add_buf(&cc, rbuf, 1, in_place, rdt, cc.size, 0,
                                rcounts, displs) == COLLAR_OK));
    if (ok) {
        cc.bytes = in_place ? type_bytes(rdt, rcounts[cc.rank])
                            : type_bytes(sdt, scount);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Gatherv(host_ptr(&cc, sbuf), scount,
                                                 sdt, host_ptr(&cc, rbuf),
                                                 rcounts, displs, rdt, root,
                                                 comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype sdt,
                              void *rbuf, int rcount, MPI_Datatype rdt, int root,
                              MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_SCATTER))) {
        return PMPI_Scatter(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = rbuf == MPI_IN_PLACE;
    int ok = colls_begin(&cc, COLLAR_COLL_SCATTER, comm, &rec)
             && root >= 0 && root < cc.size
             && (cc.rank != root
                 || add_buf(&cc, sbuf, 0, 1, sdt, cc.size, scount, NULL,
                            NULL) == COLLAR_OK)
             && (in_place || add_buf(&cc, rbuf, 1, 0, rdt, 1, rcount, NULL,
                                     NULL) == COLLAR_OK);
    if (ok) {
        cc.bytes = in_place ? type_bytes(sdt, scount) : type_bytes(rdt, rcount);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Scatter(host_ptr(&cc, sbuf), scount,
                                                 sdt, host_ptr(&cc, rbuf),
                                                 rcount, rdt, root, comm));
    }
    return rc;
}

COLLAR_EXPORT int MPI_Scatterv(const void *sbuf, const int scounts[],
                               const int displs[], MPI_Datatype sdt, void *rbuf,
                               int rcount, MPI_Datatype rdt, int root,
                               MPI_Comm comm)
{
    if (!(colls_on & COLL_BIT(COLLAR_COLL_SCATTERV))) {
        return PMPI_Scatterv(sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root,
                             comm);
    }
    colls_call_t cc;
    colls_rec_t rec;
    const int in_place = rbuf == MPI_IN_PLACE;
    int ok = colls_begin(&cc, COLLAR_COLL_SCATTERV, comm, &rec)
             && root >= 0 && root < cc.size
             && (cc.rank != root
                 || (scounts != NULL && displs != NULL
                     && add_buf(&cc, sbuf, 0, 1, sdt, cc.size, 0, scounts,
                                displs) == COLLAR_OK))
             && (in_place || add_buf(&cc, rbuf, 1, 0, rdt, 1, rcount, NULL,
                                     NULL) == COLLAR_OK);
    if (ok) {
        cc.bytes = in_place ? type_bytes(sdt, scounts[cc.rank])
                            : type_bytes(rdt, rcount);
    }
    int rc = colls_enter(&cc, ok);
    if (rc == MPI_SUCCESS) {
        rc = colls_leave(&cc, &rec, PMPI_Scatterv(host_ptr(&cc, sbuf), scounts,
                                                  displs, sdt,
                                                  host_ptr(&cc, rbuf), rcount,
                                                  rdt, root, comm));
    }
    return rc;
}
