/*
 * collar - the blocking collectives other than allreduce: MPI_Bcast,
 * MPI_Allgather(v), MPI_Alltoall(v), MPI_Reduce_scatter(_block), MPI_Reduce,
 * MPI_Gather(v), MPI_Scatter(v).
 *
 * For each collective: every datatype of the list below, counts 0, 1, a
 * prime and (with --big) about 1 MiB, every root, the MPI_IN_PLACE forms the
 * standard allows; the v-variants with zero counts on some ranks and
 * displacements with gaps between the blocks; the reductions with MPI_SUM,
 * MPI_MAX and MPI_PROD, bit-exact on integers and against a float64
 * reference on floats.  Every rank checks every byte of its receive buffer:
 * what the call writes, and that the bytes it must not write (the gaps of a
 * strided datatype, the room between displacements, the buffers of ranks
 * where they are not significant) are as they were; send buffers unchanged.
 * Every rank regenerates the other ranks' inputs (deterministic values).
 *
 * Datatypes: int8, int32, int64, float, double (MPI_INT8_T, MPI_INT32_T,
 * MPI_INT64_T, MPI_FLOAT, MPI_DOUBLE), a contiguous type of 3 int32, a
 * strided vector (2 int32 with a gap of one, resized to an extent of 16
 * bytes: gaps inside and between elements) and a type with a negative lower
 * bound (int32 at -4 and +4, extent 16).
 *
 * A plain MPI program: the same verdict with and without collar.
 * With TU_DEVICE=cuda (testutil.h) every buffer a collective gets is device
 * memory: a device mirror of the whole buffer (pads included), put before
 * the call and read back after it, so the same bytes are checked.
 *
 * --fault all|one|carried: fault injection (COLLAR_SIM_FAIL in the
 * environment, collar on the sim device).  The first call, an MPI_Bcast of
 * 4096 int32 from rank 0 under MPI_ERRORS_RETURN, fails with MPI_ERR_OTHER
 * on every rank (all) or on rank 1 only (one: the other ranks drop
 * COLLAR_SIM_FAIL from their environment before MPI_Init) and succeeds
 * elsewhere, without a hang; or (carried: a failure collar works around,
 * such as no pinned memory) succeeds on every rank with the right result.
 * Then the small cases of the matrix must all be right.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "colls_forms.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_I8, K_I32, K_I64, K_F32, K_F64 };
static const int kind_size[] = { 1, 4, 8, 4, 8 };

typedef struct {
    const char  *name;
    MPI_Datatype dt;
    int          kind;      /* of every item */
    int          nitems;    /* items per element */
    MPI_Aint     off[3];    /* of the items, from the element's address */
    MPI_Aint     extent;
    int          reducible; /* a predefined type */
} ttype_t;

#define NTYPES 8
static ttype_t types[NTYPES];

/* Bytes before the address passed to MPI (room for negative offsets) and
 * after the last element. */
#define PAD 32

static int rank, size;
static int opt_big;
static uint64_t seed = 0xc011ec71;

/* A buffer of `nelem` elements: pad, elements, pad. */
typedef struct {
    char  *base;
    char  *ptr;     /* what MPI gets without a device */
    size_t bytes;   /* of base */
    char  *dev;     /* base's device mirror during a call (to_dev) */
} buf_t;

static void buf_make(buf_t *b, const ttype_t *t, long nelem, uint64_t garbage)
{
    b->bytes = (size_t)(2 * PAD + nelem * t->extent);
    b->base = malloc(b->bytes);
    if (b->base == NULL) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    b->ptr = b->base + PAD;
    b->dev = NULL;
    tu_fill_garbage(b->base, b->bytes, garbage);
}

/* The address MPI gets for `b`: the same place in its device mirror
 * (b->ptr itself without TU_DEVICE). */
static char *to_dev(buf_t *b)
{
    b->dev = tu_dev_mirror(b->base, b->bytes);
    return b->dev + (b->ptr - b->base);
}

/* After the call: the mirror's bytes back into b, the mirror released. */
static void from_dev(buf_t *b)
{
    if (b->dev == NULL) { /* not passed (MPI_IN_PLACE) */
        return;
    }
    tu_dev_get(b->base, b->dev, b->bytes);
    tu_dev_unmirror(b->dev, b->base);
    b->dev = NULL;
}

static void buf_copy(buf_t *dst, const buf_t *src)
{
    dst->bytes = src->bytes;
    dst->base = malloc(src->bytes);
    if (dst->base == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memcpy(dst->base, src->base, src->bytes);
    dst->ptr = dst->base + (src->ptr - src->base);
    dst->dev = NULL;
}

static void buf_free(buf_t *b)
{
    free(b->base);
    b->base = b->ptr = NULL;
}

/* The value of item k of rank r's input, as double (exact for every kind:
 * integers are small enough).  small: for reductions, so that sums and
 * products stay exact and in range. */
static double item_value(const ttype_t *t, int r, uint64_t k, int small)
{
    switch (t->kind) {
    case K_I8:
        return (double)tu_gen_int(r, k, seed, small ? -3 : -100, small ? 3 : 100);
    case K_I32:
        return (double)tu_gen_int(r, k, seed, small ? -3 : -1000000000,
                                  small ? 3 : 1000000000);
    case K_I64:
        return (double)tu_gen_int(r, k, seed, small ? -3 : -(1ll << 50),
                                  small ? 3 : (1ll << 50));
    default:
        return tu_gen_real(r, k, seed, small ? -2.0 : -1000.0, small ? 2.0 : 1000.0);
    }
}

static void item_store(const ttype_t *t, char *p, double v)
{
    switch (t->kind) {
    case K_I8:  { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case K_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case K_I64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case K_F32: { float x = (float)v; memcpy(p, &x, 4); break; }
    default:    { double x = v; memcpy(p, &x, 8); break; }
    }
}

static double item_load(const ttype_t *t, const char *p)
{
    switch (t->kind) {
    case K_I8:  { int8_t x; memcpy(&x, p, 1); return x; }
    case K_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case K_I64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case K_F32: { float x; memcpy(&x, p, 4); return x; }
    default:    { double x; memcpy(&x, p, 8); return x; }
    }
}

static char *item_ptr(const ttype_t *t, char *base, long elem, int j)
{
    return base + elem * t->extent + t->off[j];
}

/* Elements [at, at + n) of `b` get rank r's values of elements [idx, idx + n). */
static void fill(const ttype_t *t, buf_t *b, long at, long n, int r, long idx,
                 int small)
{
    for (long e = 0; e < n; e++) {
        for (int j = 0; j < t->nitems; j++) {
            double v = item_value(t, r, (uint64_t)(idx + e) * (uint64_t)t->nitems
                                        + (uint64_t)j, small);
            item_store(t, item_ptr(t, b->ptr, at + e, j), v);
        }
    }
}

/* Compare a receive buffer with what it must hold: every byte, or, for a
 * float reduction (tol > 0), the items within tol of the float64 reference
 * and every other byte exactly.  `limit`: bytes from b->ptr up to which to
 * compare (the rest of an in-place reduce-scatter buffer is undefined);
 * -1 for all. */
static void check_buf(const char *what, const ttype_t *t, buf_t *got,
                      buf_t *want, long nelem, double tol, long limit)
{
    if (tol > 0) {
        int bad = 0;
        for (long e = 0; e < nelem && !bad; e++) {
            for (int j = 0; j < t->nitems; j++) {
                char *g = item_ptr(t, got->ptr, e, j);
                char *w = item_ptr(t, want->ptr, e, j);
                double gv = item_load(t, g), wv = item_load(t, w);
                if (!(fabs(gv - wv) <= tol * (1.0 + fabs(wv)))) {
                    tu_fail(what, "element %ld item %d: got %.17g, want %.17g",
                            e, j, gv, wv);
                    bad = 1;
                    break;
                }
                memcpy(w, g, (size_t)kind_size[t->kind]);
            }
        }
        if (bad) {
            return;
        }
    }
    size_t n = limit < 0 ? got->bytes : (size_t)(PAD + limit);
    tu_check_same_bytes(got->base, want->base, n, what);
}

/* The reference of a reduction over all ranks of item k, in float64. */
static double reduce_ref(const ttype_t *t, MPI_Op op, uint64_t k)
{
    double acc = item_value(t, 0, k, 1);
    for (int r = 1; r < size; r++) {
        double v = item_value(t, r, k, 1);
        if (op == MPI_SUM) {
            acc += v;
        } else if (op == MPI_PROD) {
            acc *= v;
        } else if (v > acc) {
            acc = v;
        }
    }
    if (t->kind == K_F32) {
        acc = (float)acc;
    }
    return acc;
}

/* Elements [at, at + n) of `b` get the reduction of elements [idx, idx + n). */
static void fill_reduced(const ttype_t *t, buf_t *b, long at, long n, long idx,
                         MPI_Op op)
{
    for (long e = 0; e < n; e++) {
        for (int j = 0; j < t->nitems; j++) {
            uint64_t k = (uint64_t)(idx + e) * (uint64_t)t->nitems + (uint64_t)j;
            item_store(t, item_ptr(t, b->ptr, at + e, j), reduce_ref(t, op, k));
        }
    }
}

static double tolerance(const ttype_t *t)
{
    return t->kind == K_F32 ? 1e-5 : t->kind == K_F64 ? 1e-12 : 0.0;
}

static void check_rc(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        tu_fail(what, "returned %s", tu_errstr(rc));
    }
}

/* A label for failure lines. */
static char *label(char *buf, size_t len, const char *coll, const ttype_t *t,
                   long count, int root, int in_place, MPI_Op op)
{
    const char *opn = op == MPI_SUM ? " sum" : op == MPI_MAX ? " max"
                    : op == MPI_PROD ? " prod" : "";
    snprintf(buf, len, "%s %s count %ld root %d%s%s", coll, t->name, count, root,
             in_place ? " in-place" : "", opn);
    return buf;
}

/* The blocks of rank q in a gather or scatter: counts[q] elements at
 * displs[q].  Plain (v = 0): `base` each, one after the other.  v-variants:
 * zero on ranks 1, 4, ..., one element free before the first block and two
 * between blocks.  *total: the elements of the whole buffer. */
static void layout(int v, long base, int *counts, int *displs, long *total)
{
    long at = v ? 1 : 0;
    for (int r = 0; r < size; r++) {
        counts[r] = !v ? (int)base : r % 3 == 1 ? 0 : (int)base + r;
        displs[r] = (int)at;
        at += counts[r] + (v ? 2 : 0);
    }
    *total = at;
}

static void t_bcast(const ttype_t *t, long count, int root)
{
    char what[160];
    label(what, sizeof(what), "bcast", t, count, root, 0, MPI_OP_NULL);
    buf_t b, want;
    buf_make(&b, t, count, tu_seed(seed, 1, (uint64_t)rank));
    if (rank == root) {
        fill(t, &b, 0, count, root, 0, 0);
    }
    buf_copy(&want, &b);
    fill(t, &want, 0, count, root, 0, 0);
    check_rc(tf_bcast(to_dev(&b), (int)count, t->dt, root, MPI_COMM_WORLD), what);
    from_dev(&b);
    check_buf(what, t, &b, &want, count, 0, -1);
    buf_free(&b);
    buf_free(&want);
}

/* MPICH 4.0.2's MPI_Allgatherv on one rank ignores the displacement (it
 * writes at the start of the receive buffer).  Asked of the library alone,
 * on MPI_COMM_SELF, so that the verdict is the same with and without
 * collar. */
static int allgatherv_self_ignores_displs;

static int probe_allgatherv_self(void)
{
    int in = 7, out[2] = { -1, -1 }, count = 1, displ = 1;
    PMPI_Allgatherv(&in, 1, MPI_INT, out, &count, &displ, MPI_INT, MPI_COMM_SELF);
    return out[0] != -1 || out[1] != 7;
}

/* MPICH 4.0.2's persistent MPI_Gather_init runs the gather at
 * MPI_Gather_init: MPI_Start does not read the buffers again (seen without
 * collar: a value changed between MPI_Gather_init and MPI_Start does not
 * arrive).  collar copies in at both, so dense buffers give what the
 * library alone gives, but a receive buffer with gaps is copied in again at
 * MPI_Start, over what the library wrote at MPI_Gather_init. */
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40100000
static const int persistent_gather_reads_at_init = 1;
#else
static const int persistent_gather_reads_at_init = 0;
#endif

/* Gather, allgather (all), gatherv, allgatherv (v).  On ranks where the
 * receive buffer is not significant it must stay as it is. */
static void t_gather(const ttype_t *t, long base, int root, int in_place,
                     int all, int v)
{
    if (all && v && size == 1 && allgatherv_self_ignores_displs) {
        return;
    }

    if (!all && tf_form() == TF_PERSISTENT && persistent_gather_reads_at_init) {
        return;
    }
    static const char *const names[2][2] = { { "gather", "gatherv" },
                                             { "allgather", "allgatherv" } };
    char what[160];
    label(what, sizeof(what), names[all][v], t, base, root, in_place, MPI_OP_NULL);
    int counts[64], displs[64];
    long total;
    layout(v, base, counts, displs, &total);
    const int significant = all || rank == root;
    const int here_in_place = in_place && significant;
    const long mine = counts[rank];
    buf_t s, s0, r, want;
    buf_make(&s, t, mine, tu_seed(seed, 2, (uint64_t)rank));
    fill(t, &s, 0, mine, rank, 0, 0);
    buf_copy(&s0, &s);
    buf_make(&r, t, significant ? total : 4, tu_seed(seed, 3, (uint64_t)rank));
    if (here_in_place) {
        fill(t, &r, displs[rank], mine, rank, 0, 0);
    }
    buf_copy(&want, &r);
    if (significant) {
        for (int q = 0; q < size; q++) {
            fill(t, &want, displs[q], counts[q], q, 0, 0);
        }
    }
    const void *sp = here_in_place ? MPI_IN_PLACE : to_dev(&s);
    char *rp = to_dev(&r);
    int rc;
    if (all) {
        rc = v ? tf_allgatherv(sp, (int)mine, t->dt, rp, counts, displs, t->dt,
                                MPI_COMM_WORLD)
               : tf_allgather(sp, (int)mine, t->dt, rp, (int)base, t->dt,
                               MPI_COMM_WORLD);
    } else {
        rc = v ? tf_gatherv(sp, (int)mine, t->dt, rp, counts, displs, t->dt,
                             root, MPI_COMM_WORLD)
               : tf_gather(sp, (int)mine, t->dt, rp, (int)base, t->dt, root,
                            MPI_COMM_WORLD);
    }
    check_rc(rc, what);
    from_dev(&s);
    from_dev(&r);
    check_buf(what, t, &r, &want, 0, 0, -1);
    check_buf(what, t, &s, &s0, 0, 0, -1);
    buf_free(&s); buf_free(&s0); buf_free(&r); buf_free(&want);
}

/* Scatter, scatterv (v): block q of the root's buffer holds the root's
 * values of elements [displs[q], ...). */
static void t_scatter(const ttype_t *t, long base, int root, int in_place, int v)
{
    char what[160];
    label(what, sizeof(what), v ? "scatterv" : "scatter", t, base, root,
          in_place, MPI_OP_NULL);
    int counts[64], displs[64];
    long total;
    layout(v, base, counts, displs, &total);
    const int here_in_place = in_place && rank == root;
    buf_t s, s0, r, want;
    buf_make(&s, t, rank == root ? total : 4, tu_seed(seed, 6, (uint64_t)rank));
    if (rank == root) {
        for (int q = 0; q < size; q++) {
            fill(t, &s, displs[q], counts[q], root, displs[q], 0);
        }
    }
    buf_copy(&s0, &s);
    buf_make(&r, t, counts[rank], tu_seed(seed, 7, (uint64_t)rank));
    buf_copy(&want, &r);
    if (!here_in_place) {
        fill(t, &want, 0, counts[rank], root, displs[rank], 0);
    }
    void *rp = here_in_place ? MPI_IN_PLACE : to_dev(&r);
    char *sp = to_dev(&s);
    int rc = v ? tf_scatterv(sp, counts, displs, t->dt, rp, counts[rank],
                              t->dt, root, MPI_COMM_WORLD)
               : tf_scatter(sp, (int)base, t->dt, rp, (int)base, t->dt, root,
                             MPI_COMM_WORLD);
    check_rc(rc, what);
    from_dev(&s);
    from_dev(&r);
    check_buf(what, t, &r, &want, 0, 0, -1);
    check_buf(what, t, &s, &s0, 0, 0, -1);
    buf_free(&s); buf_free(&s0); buf_free(&r); buf_free(&want);
}

static void t_alltoall(const ttype_t *t, long count, int in_place)
{
    char what[160];
    label(what, sizeof(what), "alltoall", t, count, 0, in_place, MPI_OP_NULL);
    /* Block d of rank q's input: q's values of elements [d*count, ...). */
    buf_t s, s0, r, want;
    buf_make(&s, t, count * size, tu_seed(seed, 10, (uint64_t)rank));
    fill(t, &s, 0, count * size, rank, 0, 0);
    buf_copy(&s0, &s);
    buf_make(&r, t, count * size, tu_seed(seed, 11, (uint64_t)rank));
    if (in_place) {
        fill(t, &r, 0, count * size, rank, 0, 0);
    }
    buf_copy(&want, &r);
    for (int q = 0; q < size; q++) {
        fill(t, &want, count * q, count, q, count * rank, 0);
    }
    char *sp = to_dev(&s), *rp = to_dev(&r);
    check_rc(tf_alltoall(in_place ? MPI_IN_PLACE : sp, (int)count, t->dt,
                          rp, (int)count, t->dt, MPI_COMM_WORLD), what);
    from_dev(&s);
    from_dev(&r);
    check_buf(what, t, &r, &want, 0, 0, -1);
    check_buf(what, t, &s, &s0, 0, 0, -1);
    buf_free(&s); buf_free(&s0); buf_free(&r); buf_free(&want);
}

/* Elements from rank q to rank d in alltoallv: symmetric (the in-place form
 * needs it), zero for some pairs. */
static int a2av_count(long base, int q, int d)
{
    return (q + d) % 3 == 1 ? 0 : (int)base + q + d;
}

static void t_alltoallv(const ttype_t *t, long base, int in_place)
{
    char what[160];
    label(what, sizeof(what), "alltoallv", t, base, 0, in_place, MPI_OP_NULL);
    int sc[64], sd[64], rc_[64], rd[64];
    long sat = 2, rat = 1;
    for (int q = 0; q < size; q++) {
        sc[q] = a2av_count(base, rank, q);
        sd[q] = (int)sat;
        sat += sc[q] + 1;
        rc_[q] = a2av_count(base, q, rank);
        rd[q] = (int)rat;
        rat += rc_[q] + 2;
    }
    /* The element index of the values rank q sends to rank d. */
    const long stride = 1L << 20;
    buf_t s, s0, r, want;
    buf_make(&s, t, sat, tu_seed(seed, 12, (uint64_t)rank));
    for (int d = 0; d < size; d++) {
        fill(t, &s, sd[d], sc[d], rank, stride * d, 0);
    }
    buf_copy(&s0, &s);
    buf_make(&r, t, rat, tu_seed(seed, 13, (uint64_t)rank));
    if (in_place) {
        for (int d = 0; d < size; d++) {
            fill(t, &r, rd[d], rc_[d], rank, stride * d, 0);
        }
    }
    buf_copy(&want, &r);
    for (int q = 0; q < size; q++) {
        fill(t, &want, rd[q], rc_[q], q, stride * rank, 0);
    }
    char *sp = to_dev(&s), *rp = to_dev(&r);
    check_rc(tf_alltoallv(in_place ? MPI_IN_PLACE : sp, sc, sd, t->dt,
                           rp, rc_, rd, t->dt, MPI_COMM_WORLD), what);
    from_dev(&s);
    from_dev(&r);
    check_buf(what, t, &r, &want, 0, 0, -1);
    check_buf(what, t, &s, &s0, 0, 0, -1);
    buf_free(&s); buf_free(&s0); buf_free(&r); buf_free(&want);
}

static void t_reduce(const ttype_t *t, long count, MPI_Op op, int root,
                     int in_place)
{
    char what[160];
    label(what, sizeof(what), "reduce", t, count, root, in_place, op);
    const int here_in_place = in_place && rank == root;
    buf_t s, s0, r, want;
    buf_make(&s, t, count, tu_seed(seed, 14, (uint64_t)rank));
    fill(t, &s, 0, count, rank, 0, 1);
    buf_copy(&s0, &s);
    buf_make(&r, t, count, tu_seed(seed, 15, (uint64_t)rank));
    if (here_in_place) {
        fill(t, &r, 0, count, rank, 0, 1);
    }
    buf_copy(&want, &r);
    if (rank == root) {
        fill_reduced(t, &want, 0, count, 0, op);
    }
    char *sp = to_dev(&s), *rp = to_dev(&r);
    check_rc(tf_reduce(here_in_place ? MPI_IN_PLACE : sp, rp, (int)count,
                        t->dt, op, root, MPI_COMM_WORLD), what);
    from_dev(&s);
    from_dev(&r);
    check_buf(what, t, &r, &want, rank == root ? count : 0, tolerance(t), -1);
    check_buf(what, t, &s, &s0, 0, 0, -1);
    buf_free(&s); buf_free(&s0); buf_free(&r); buf_free(&want);
}

/* Reduce-scatter: block q of the input (counts[q] elements at starts[q])
 * reduced onto rank q. */
static void t_reduce_scatter(const ttype_t *t, long base, MPI_Op op,
                             int in_place, int block)
{
    char what[160];
    label(what, sizeof(what), block ? "reduce_scatter_block" : "reduce_scatter",
          t, base, 0, in_place, op);
    int counts[64];
    long total = 0, start = 0;
    for (int q = 0; q < size; q++) {
        counts[q] = block ? (int)base : q % 3 == 1 ? 0 : (int)base + q;
        if (q < rank) {
            start += counts[q];
        }
        total += counts[q];
    }
    const long mine = counts[rank];
    buf_t s, s0, r, want;
    buf_make(&s, t, total, tu_seed(seed, 16, (uint64_t)rank));
    fill(t, &s, 0, total, rank, 0, 1);
    buf_copy(&s0, &s);
    buf_make(&r, t, in_place ? total : mine, tu_seed(seed, 17, (uint64_t)rank));
    if (in_place) {
        fill(t, &r, 0, total, rank, 0, 1);
    }
    buf_copy(&want, &r);
    fill_reduced(t, &want, 0, mine, start, op);
    char *sp = to_dev(&s), *rp = to_dev(&r);
    int rc = block
        ? tf_reduce_scatter_block(in_place ? MPI_IN_PLACE : sp, rp,
                                   (int)base, t->dt, op, MPI_COMM_WORLD)
        : tf_reduce_scatter(in_place ? MPI_IN_PLACE : sp, rp, counts,
                             t->dt, op, MPI_COMM_WORLD);
    check_rc(rc, what);
    from_dev(&s);
    from_dev(&r);
    /* In place, only the first block of the buffer is defined afterwards. */
    check_buf(what, t, &r, &want, mine, tolerance(t),
              in_place ? (long)(mine * t->extent) : -1);
    check_buf(what, t, &s, &s0, 0, 0, -1);
    buf_free(&s); buf_free(&s0); buf_free(&r); buf_free(&want);
}

/* ------------------------------------------------------------ matrix */

static void make_types(void)
{
    static const struct { const char *name; int kind; } basic[] = {
        { "int8", K_I8 }, { "int32", K_I32 }, { "int64", K_I64 },
        { "float", K_F32 }, { "double", K_F64 },
    };
    const MPI_Datatype dts[] = { MPI_INT8_T, MPI_INT32_T, MPI_INT64_T, MPI_FLOAT,
                                 MPI_DOUBLE };
    for (int i = 0; i < 5; i++) {
        types[i] = (ttype_t){ basic[i].name, dts[i], basic[i].kind, 1, { 0 },
                              kind_size[basic[i].kind], 1 };
    }
    MPI_Datatype contig, vec, vec16, hidx, neg;
    MPI_Type_contiguous(3, MPI_INT32_T, &contig);
    MPI_Type_commit(&contig);
    types[5] = (ttype_t){ "contig3", contig, K_I32, 3, { 0, 4, 8 }, 12, 0 };
    MPI_Type_vector(2, 1, 2, MPI_INT32_T, &vec);
    MPI_Type_create_resized(vec, 0, 16, &vec16);
    MPI_Type_commit(&vec16);
    MPI_Type_free(&vec);
    types[6] = (ttype_t){ "vector", vec16, K_I32, 2, { 0, 8 }, 16, 0 };
    const int lens[2] = { 1, 1 };
    const MPI_Aint disp[2] = { -4, 4 };
    MPI_Type_create_hindexed(2, lens, disp, MPI_INT32_T, &hidx);
    MPI_Type_create_resized(hidx, -4, 16, &neg);
    MPI_Type_commit(&neg);
    MPI_Type_free(&hidx);
    types[7] = (ttype_t){ "neglb", neg, K_I32, 2, { -4, 4 }, 16, 0 };
}

static void free_types(void)
{
    for (int i = 5; i < NTYPES; i++) {
        MPI_Type_free(&types[i].dt);
    }
}

static void run_matrix(int small_only)
{
    const long counts[] = { 0, 1, 13 };
    const MPI_Op ops[] = { MPI_SUM, MPI_MAX, MPI_PROD };
    for (int ti = 0; ti < NTYPES; ti++) {
        const ttype_t *t = &types[ti];
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
            const long n = counts[ci];
            if (small_only && n > 1) {
                continue;
            }
#if defined(OPEN_MPI) && OPEN_MPI && OMPI_MAJOR_VERSION < 5
            /* Open MPI 4.1.4's nonblocking rooted collectives with zero
             * counts (MPI_Igather, MPI_Iscatter) let the root finish while
             * another rank still waits for it, then match that rank's wait
             * with the next collective: a hang, seen without collar. */
            if (n == 0 && tf_form() != TF_BLOCKING) {
                continue;
            }
#endif
            for (int ip = 0; ip < 2; ip++) {
                t_gather(t, n, 0, ip, 1, 0);
                t_gather(t, n, 0, ip, 1, 1);
                t_alltoall(t, n, ip);
                t_alltoallv(t, n, ip);
                for (int root = 0; root < size; root++) {
                    if (!ip) {
                        t_bcast(t, n, root);
                    }
                    t_gather(t, n, root, ip, 0, 0);
                    t_gather(t, n, root, ip, 0, 1);
                    t_scatter(t, n, root, ip, 0);
                    t_scatter(t, n, root, ip, 1);
                }
                if (!t->reducible) {
                    continue;
                }
                for (size_t oi = 0; oi < sizeof(ops) / sizeof(ops[0]); oi++) {
                    t_reduce_scatter(t, n, ops[oi], ip, 0);
                    t_reduce_scatter(t, n, ops[oi], ip, 1);
                    for (int root = 0; root < size; root++) {
                        t_reduce(t, n, ops[oi], root, ip);
                    }
                }
            }
        }
    }
    if (!opt_big || small_only) {
        return;
    }
    /* About 1 MiB a block: int32, the strided vector, float sums. */
    const ttype_t *big[] = { &types[1], &types[6] };
    for (int i = 0; i < 2; i++) {
        const ttype_t *t = big[i];
        const long n = (1L << 20) / t->extent + 1;
        const int root = size - 1;
        t_bcast(t, n, root);
        t_gather(t, n, 0, 0, 1, 0);
        t_gather(t, n, 0, 1, 1, 1);
        t_alltoall(t, n / size, 0);
        t_alltoallv(t, n / size, 0);
        t_gather(t, n, root, 0, 0, 0);
        t_gather(t, n, root, 0, 0, 1);
        t_scatter(t, n, root, 0, 0);
        t_scatter(t, n, root, 1, 1);
    }
    const ttype_t *red[] = { &types[1], &types[3] };
    for (int i = 0; i < 2; i++) {
        const long n = (1L << 20) / red[i]->extent + 1;
        t_reduce(red[i], n, MPI_SUM, size - 1, 0);
        t_reduce_scatter(red[i], n / size, MPI_SUM, 0, 0);
        t_reduce_scatter(red[i], n / size, MPI_SUM, 1, 1);
    }
}

/* --fault: the first call fails where the failure is injected (one: on
 * rank 1 only), or nowhere (carried: -1). */
static void run_fault(int one)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const int n = 4096;
    int32_t *b = malloc(n * sizeof(*b));
    for (int i = 0; i < n; i++) {
        b[i] = rank == 0 ? i : -1;
    }
    int rc = tf_bcast(b, n, MPI_INT32_T, 0, MPI_COMM_WORLD);
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, &cls);
    }
    const int expect_fail = one >= 0 && (!one || rank == 1);
    if (one < 0) {
        check_rc(rc, "fault: a call whose failure collar carries");
        int wrong = 0;
        for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
            wrong += b[i] != i;
        }
        tu_check(wrong == 0, "fault: a call whose failure collar carries",
                 "%d of %d elements wrong", wrong, n);
    } else if (expect_fail) {
        tu_check(cls == MPI_ERR_OTHER, "fault: failing call", "returned %s, "
                 "want an error of class MPI_ERR_OTHER", tu_errstr(rc));
        if (rank == 0) {
            printf("failed call: class %d\n", cls);
        }
    } else {
        check_rc(rc, "fault: call on a rank without a failure");
    }
    free(b);
    run_matrix(1);
}

int main(int argc, char **argv)
{
    int fault = -2;   /* none; -1 carried, 0 all, 1 one */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--big") == 0) {
            opt_big = 1;
        } else if (strcmp(argv[i], "--fault") == 0 && i + 1 < argc) {
            ++i;
            fault = strcmp(argv[i], "one") == 0 ? 1
                    : strcmp(argv[i], "carried") == 0 ? -1 : 0;
        } else if (strcmp(argv[i], "--form") == 0 && i + 1 < argc
                   && tf_form_from_name(argv[i + 1]) >= 0) {
            tf_set_form((tf_form_t)tf_form_from_name(argv[++i]));
        } else {
            fprintf(stderr, "usage: test_colls [--big] [--fault all|one|carried] "
                    "[--form blocking|nonblocking|persistent|large]\n");
            return 2;
        }
    }
    if (fault == 1) {
        /* Before MPI_Init, where the configuration is read: the failure
         * stays in rank 1's environment only. */
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        if (r == NULL) {
            r = getenv("PMI_RANK");
        }
        if (r != NULL && atoi(r) != 1) {
            unsetenv("COLLAR_SIM_FAIL");
        }
    }
    MPI_Init(&argc, &argv);
    tu_init("test_colls");
    if (!tf_form_available(tf_form())) {
        tu_skip("the MPI library has no %s form of the collectives",
                tf_form_name(tf_form()));
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 64) {
        tu_skip("at most 64 ranks");
    }
    allgatherv_self_ignores_displs = probe_allgatherv_self();
    if (allgatherv_self_ignores_displs && rank == 0) {
        printf("note: the MPI library's MPI_Allgatherv on one rank ignores the "
               "displacements (MPICH 4.0.2); skipping allgatherv on one rank\n");
    }
    if (persistent_gather_reads_at_init && tf_form() == TF_PERSISTENT && rank == 0) {
        printf("note: the MPI library's persistent MPI_Gather_init reads the "
               "send buffer at MPI_Gather_init, not at MPI_Start (MPICH "
               "4.0.2); skipping persistent gather and gatherv\n");
    }
    make_types();
    if (fault >= -1) {
        run_fault(fault);
    } else {
        run_matrix(0);
    }
    free_types();
    int status = tu_finish();
    MPI_Finalize();
    return status;
}
