/*
 * collar - MPI_Allreduce correctness matrix.
 *
 * For every predefined datatype MPI_Allreduce accepts and every predefined
 * op valid for it (MPI-4.0 section 6.9.2), for every count of --counts, in
 * the normal form (distinct send/receive buffers, receive buffer prefilled
 * with garbage) and the MPI_IN_PLACE form, on MPI_COMM_WORLD and on a
 * communicator from MPI_Comm_split (odd/even world ranks, in reversed rank
 * order), this program checks
 *
 *   - the return code (and, with --nonblocking, that MPI_Wait returns the
 *     request as MPI_REQUEST_NULL);
 *   - every element of the result.  Rank r's input element i is a
 *     deterministic function of (r, i, case), so every rank recomputes all
 *     ranks' inputs and the expected result locally;
 *       integers, bool, byte, MIN/MAX of floats, MINLOC/MAXLOC: bit exact
 *         (value ranges are chosen so that signed overflow cannot happen:
 *         SUM inputs are bounded by max/n, PROD inputs are in {-3..3} on at
 *         most K ranks with 3^K <= max and in {-1,1} elsewhere; unsigned SUM
 *         uses full-range values and so tests modular wraparound; logical
 *         ops get zero and arbitrary nonzero inputs and must give 0 or 1 -
 *         with one rank no op is applied, and the input itself or its 0/1
 *         value are both accepted);
 *       SUM/PROD of float, double, long double and the complex types:
 *         against a reference computed in long double, with tolerance
 *             SUM:  n * eps * sum_k |x_k|        (per component)
 *             PROD: n * eps * prod_k |x_k|       (real)
 *                   3 * n * eps * prod_k |z_k|   (complex, per component)
 *         where n is the communicator size and eps the machine epsilon of
 *         the type (2 units in the last place).  Any summation order has
 *         error <= (n-1) * eps/2 * sum|x_k| (Higham, recursive summation),
 *         the long double reference at most as much again, so n * eps is a
 *         safe bound; likewise for products; a complex multiply has normwise
 *         relative error <= sqrt(5) * eps/2, so n-1 of them, plus as much
 *         again for a long double reference, stay below 3 * n * eps;
 *       MINLOC/MAXLOC use value ties on purpose (values from a 3-element
 *         set, indices not in rank order) so that the "lowest index wins"
 *         rule is exercised;
 *   - that the send buffer is unchanged (normal form) and that the bytes
 *     after the count elements of the receive buffer are untouched.
 *
 * Then derived-datatype and user-op cases: MPI_Type_contiguous(3, MPI_INT)
 * with SUM; MPI_Type_vector(4, 2, 3, MPI_DOUBLE) (also resized to a 12
 * double extent) with SUM and MIN, where the gap elements of the receive
 * buffer must be left untouched; a commutative user op f(a,b) = a + b + 1
 * (result: sum + n-1, so an op applied with an identity element or a
 * missing contribution shows) on MPI_INT, on the contiguous and on the
 * vector types (gaps checked as well); a non-commutative user op (2x2
 * integer matrix product on MPI_Type_contiguous(4, MPI_INT)), whose result
 * must be the product in rank order (the split communicator has its ranks
 * in reversed world order).  MPI_BYTE with BXOR is part of the predefined
 * matrix.  The derived-datatype cases with a predefined op run only where
 * the library accepts them (neither Open MPI 4.1 nor MPICH 4.0 does; see
 * the probes below).
 *
 * Library quirks are detected at start-up by probes (MPI_Reduce_local
 * through the PMPI_ interface, i.e. the library itself) and worked around
 * with a note on stdout; see "library capability probes" below.
 *
 * Options: see usage() (--help).
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <float.h>
#include <limits.h>
#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64                /* bytes checked after each buffer */
#define LARGE_BYTES (64u << 20) /* --large: 64 MiB per buffer */

/* ---- options ------------------------------------------------------------ */

static int g_nonblocking;
static int g_quick;
static int g_large;
static int g_verbose;
static const char *g_threads;  /* --threads NAME */
static size_t g_counts[64];
static int g_ncounts;

/* ---- types and ops ------------------------------------------------------ */

enum kind { K_SINT, K_UINT, K_REAL, K_CPLX, K_BOOL, K_BYTE, K_PAIR };
/* value kinds: component type of K_REAL/K_CPLX, value field of K_PAIR */
enum vkind { VK_NONE, VK_FLOAT, VK_DOUBLE, VK_LDOUBLE, VK_SHORT, VK_INT, VK_LONG };

enum opcode {
    O_SUM, O_PROD, O_MIN, O_MAX, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR,
    O_BXOR, O_MINLOC, O_MAXLOC, O_NOPS
};

typedef struct {
    const char *name;
    MPI_Datatype dt;
    enum kind kind;
    enum vkind vk;
    size_t size;  /* sizeof the C type = expected MPI extent */
    size_t tsize; /* expected MPI_Type_size (data bytes) */
    size_t ioff;  /* K_PAIR: offset of the int index */
    int quick;    /* part of the --quick subset */
    int usable;   /* size/extent agree with the C type */
    int minmax_quirk; /* library's MIN/MAX ignore the type's signedness */
    int sum_wrap_quirk; /* library's unsigned SUM does not wrap around */
} tinfo;

static const char *g_opname[O_NOPS] = {
    "MPI_SUM", "MPI_PROD", "MPI_MIN", "MPI_MAX", "MPI_LAND", "MPI_LOR",
    "MPI_LXOR", "MPI_BAND", "MPI_BOR", "MPI_BXOR", "MPI_MINLOC", "MPI_MAXLOC"
};
static MPI_Op g_op[O_NOPS];

struct float_int { float v; int i; };
struct double_int { double v; int i; };
struct long_int { long v; int i; };
struct two_int { int v; int i; };
struct short_int { short v; int i; };
struct ldouble_int { long double v; int i; };

#define MAXTYPES 40
static tinfo g_types[MAXTYPES];
static int g_ntypes;

static void add_type(const char *name, MPI_Datatype dt, enum kind kind,
                     enum vkind vk, size_t size, size_t tsize, size_t ioff,
                     int quick)
{
    tinfo *t = &g_types[g_ntypes++];

    t->name = name;
    t->dt = dt;
    t->kind = kind;
    t->vk = vk;
    t->size = size;
    t->tsize = tsize;
    t->ioff = ioff;
    t->quick = quick;
    t->usable = 1;
    t->minmax_quirk = 0;
    t->sum_wrap_quirk = 0;
}

#define SINT(n, dt, ct, q) add_type(n, dt, K_SINT, VK_NONE, sizeof(ct), sizeof(ct), 0, q)
#define UINT(n, dt, ct, q) add_type(n, dt, K_UINT, VK_NONE, sizeof(ct), sizeof(ct), 0, q)
#define PAIR(n, dt, st, vt, vk, q) \
    add_type(n, dt, K_PAIR, vk, sizeof(st), sizeof(vt) + sizeof(int), offsetof(st, i), q)

static void init_types(void)
{
    int i;

    g_op[O_SUM] = MPI_SUM;
    g_op[O_PROD] = MPI_PROD;
    g_op[O_MIN] = MPI_MIN;
    g_op[O_MAX] = MPI_MAX;
    g_op[O_LAND] = MPI_LAND;
    g_op[O_LOR] = MPI_LOR;
    g_op[O_LXOR] = MPI_LXOR;
    g_op[O_BAND] = MPI_BAND;
    g_op[O_BOR] = MPI_BOR;
    g_op[O_BXOR] = MPI_BXOR;
    g_op[O_MINLOC] = MPI_MINLOC;
    g_op[O_MAXLOC] = MPI_MAXLOC;

    /* C integers */
    SINT("MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, signed char, 0);
    UINT("MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, unsigned char, 1);
    SINT("MPI_SHORT", MPI_SHORT, short, 0);
    UINT("MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, unsigned short, 0);
    SINT("MPI_INT", MPI_INT, int, 1);
    UINT("MPI_UNSIGNED", MPI_UNSIGNED, unsigned, 1);
    SINT("MPI_LONG", MPI_LONG, long, 0);
    UINT("MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, unsigned long, 0);
    SINT("MPI_LONG_LONG", MPI_LONG_LONG, long long, 1);
    UINT("MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, unsigned long long, 0);
    SINT("MPI_INT8_T", MPI_INT8_T, int8_t, 1);
    SINT("MPI_INT16_T", MPI_INT16_T, int16_t, 0);
    SINT("MPI_INT32_T", MPI_INT32_T, int32_t, 0);
    SINT("MPI_INT64_T", MPI_INT64_T, int64_t, 0);
    UINT("MPI_UINT8_T", MPI_UINT8_T, uint8_t, 0);
    UINT("MPI_UINT16_T", MPI_UINT16_T, uint16_t, 1);
    UINT("MPI_UINT32_T", MPI_UINT32_T, uint32_t, 0);
    UINT("MPI_UINT64_T", MPI_UINT64_T, uint64_t, 1);
    /* multi-language types; both Open MPI 4.1 and MPICH 4.0 accept them */
    SINT("MPI_AINT", MPI_AINT, MPI_Aint, 0);
    SINT("MPI_OFFSET", MPI_OFFSET, MPI_Offset, 0);
    SINT("MPI_COUNT", MPI_COUNT, MPI_Count, 0);
    /* floating point */
    add_type("MPI_FLOAT", MPI_FLOAT, K_REAL, VK_FLOAT, sizeof(float), sizeof(float), 0, 1);
    add_type("MPI_DOUBLE", MPI_DOUBLE, K_REAL, VK_DOUBLE, sizeof(double), sizeof(double), 0, 1);
    add_type("MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, K_REAL, VK_LDOUBLE, sizeof(long double),
             sizeof(long double), 0, 1);
    /* complex; MPI_C_COMPLEX is the same handle as MPI_C_FLOAT_COMPLEX in
     * both Open MPI and MPICH, so it is not listed twice */
    add_type("MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, K_CPLX, VK_FLOAT, 2 * sizeof(float),
             2 * sizeof(float), 0, 0);
    add_type("MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, K_CPLX, VK_DOUBLE, 2 * sizeof(double),
             2 * sizeof(double), 0, 1);
    add_type("MPI_C_LONG_DOUBLE_COMPLEX", MPI_C_LONG_DOUBLE_COMPLEX, K_CPLX, VK_LDOUBLE,
             2 * sizeof(long double), 2 * sizeof(long double), 0, 0);
    /* logical, byte */
    add_type("MPI_C_BOOL", MPI_C_BOOL, K_BOOL, VK_NONE, sizeof(_Bool), sizeof(_Bool), 0, 1);
    add_type("MPI_BYTE", MPI_BYTE, K_BYTE, VK_NONE, 1, 1, 0, 1);
    /* pairs for MINLOC/MAXLOC */
    PAIR("MPI_FLOAT_INT", MPI_FLOAT_INT, struct float_int, float, VK_FLOAT, 0);
    PAIR("MPI_DOUBLE_INT", MPI_DOUBLE_INT, struct double_int, double, VK_DOUBLE, 1);
    PAIR("MPI_LONG_INT", MPI_LONG_INT, struct long_int, long, VK_LONG, 0);
    PAIR("MPI_2INT", MPI_2INT, struct two_int, int, VK_INT, 1);
    PAIR("MPI_SHORT_INT", MPI_SHORT_INT, struct short_int, short, VK_SHORT, 0);
    PAIR("MPI_LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, struct ldouble_int, long double,
         VK_LDOUBLE, 0);

    /* The tests lay out buffers as arrays of the C type: the MPI extent
     * must be sizeof(C type), and the type size the data bytes. */
    for (i = 0; i < g_ntypes; i++) {
        tinfo *t = &g_types[i];
        MPI_Aint lb = -1, ext = -1;
        int sz = -1;
        char what[128];

        MPI_Type_get_extent(t->dt, &lb, &ext);
        MPI_Type_size(t->dt, &sz);
        snprintf(what, sizeof what, "type layout %s", t->name);
        t->usable = tu_check(lb == 0 && (size_t)ext == t->size && (size_t)sz == t->tsize,
                             what, "lb %ld extent %ld size %d; expected lb 0 extent %zu "
                             "size %zu (type skipped)", (long)lb, (long)ext, sz, t->size,
                             t->tsize);
    }
}

static int op_valid(const tinfo *t, int op)
{
    switch (t->kind) {
    case K_SINT:
    case K_UINT:
        return op <= O_BXOR;
    case K_REAL:
        return op == O_SUM || op == O_PROD || op == O_MIN || op == O_MAX;
    case K_CPLX:
        return op == O_SUM || op == O_PROD;
    case K_BOOL:
        return op == O_LAND || op == O_LOR || op == O_LXOR;
    case K_BYTE:
        return op == O_BAND || op == O_BOR || op == O_BXOR;
    case K_PAIR:
        return op == O_MINLOC || op == O_MAXLOC;
    }
    return 0;
}

/* ---- integer helpers ------------------------------------------------------ */

static int is_logical(int op) { return op == O_LAND || op == O_LOR || op == O_LXOR; }

static uint64_t width_mask(size_t size)
{
    return size >= 8 ? UINT64_MAX : (((uint64_t)1 << (8 * size)) - 1);
}

/* sign-extend the low 8*size bits */
static uint64_t sext(uint64_t bits, size_t size)
{
    uint64_t m = width_mask(size);

    bits &= m;
    if (size < 8 && (bits >> (8 * size - 1)) & 1)
        bits |= ~m;
    return bits;
}

static void store_int(void *p, size_t size, uint64_t bits)
{
    uint8_t a;
    uint16_t b;
    uint32_t c;

    switch (size) {
    case 1: a = (uint8_t)bits; memcpy(p, &a, 1); break;
    case 2: b = (uint16_t)bits; memcpy(p, &b, 2); break;
    case 4: c = (uint32_t)bits; memcpy(p, &c, 4); break;
    default: memcpy(p, &bits, 8); break;
    }
}

static uint64_t load_int(const void *p, size_t size, int is_signed)
{
    uint8_t a;
    uint16_t b;
    uint32_t c;
    uint64_t d;

    switch (size) {
    case 1: memcpy(&a, p, 1); d = a; break;
    case 2: memcpy(&b, p, 2); d = b; break;
    case 4: memcpy(&c, p, 4); d = c; break;
    default: memcpy(&d, p, 8); break;
    }
    return is_signed ? sext(d, size) : d;
}

/* largest K with 3^K <= max */
static int prod_k(uint64_t max)
{
    int k = 0;
    uint64_t p = 1;

    while (p <= max / 3) {
        p *= 3;
        k++;
    }
    return k;
}

/* Input of rank r, element i, as bits (sign-extended for signed types). */
static uint64_t gen_int(const tinfo *t, int op, int r, int n, size_t i, uint64_t seed)
{
    int sgn = t->kind == K_SINT;
    size_t w = 8 * t->size;
    uint64_t umax = width_mask(t->size);
    int64_t smax = (int64_t)(umax >> 1);
    uint64_t h = tu_hash((uint64_t)r, i, seed);
    uint64_t h2 = tu_hash((uint64_t)r, i, seed ^ 0x1234);
    static const int64_t sfac[6] = { -3, -2, -1, 1, 2, 3 };

    switch (op) {
    case O_SUM:
        if (sgn) {
            int64_t b = smax / n;
            return (uint64_t)tu_gen_int(r, i, seed, -b, b);
        }
        /* full range: the sum wraps around modulo 2^bits, unless the
         * library is known to saturate (see probe_sum_wrap()) */
        if (t->sum_wrap_quirk)
            return tu_gen_uint(r, i, seed, umax / (uint64_t)n);
        return h & umax;
    case O_PROD:
        if (i % 7 == 3 && h2 % 4 == 0)
            return 0;
        if (r < prod_k(sgn ? (uint64_t)smax : umax)) {
            if (sgn)
                return (uint64_t)sfac[h % 6];
            return 1 + h % 3;
        }
        if (sgn)
            return (h & 1) ? (uint64_t)(int64_t)-1 : 1;
        return 1;
    case O_MIN:
    case O_MAX:
        if (t->minmax_quirk) /* see probe_minmax_sign(): top bit clear */
            return h & (umax >> 1);
        if (i % 4 == 0) /* small values: ties */
            return sgn ? (uint64_t)tu_gen_int(r, i, seed, -2, 2) : h % 3;
        return sgn ? sext(h, t->size) : (h & umax);
    case O_LAND:
    case O_LOR:
    case O_LXOR: {
        /* zero or a nonzero value of any bit pattern; the share of
         * nonzero inputs varies with i (1/8, 4/8, 7/8) */
        static const unsigned pnz[3] = { 1, 4, 7 };
        if (h % 8 >= pnz[i % 3])
            return 0;
        return sgn ? sext(h2 | ((uint64_t)1 << (h % w)), t->size)
                   : ((h2 | ((uint64_t)1 << (h % w))) & umax);
    }
    case O_BAND: /* bias towards 1 bits so that AND results are not all 0 */
        h |= h2;
        return sgn ? sext(h, t->size) : (h & umax);
    case O_BOR:  /* bias towards 0 bits */
        h &= h2;
        return sgn ? sext(h, t->size) : (h & umax);
    default:
        return sgn ? sext(h, t->size) : (h & umax);
    }
}

static uint64_t fold_int(int sgn, int op, uint64_t a, uint64_t b)
{
    int64_t sa = (int64_t)a, sb = (int64_t)b;

    switch (op) {
    case O_SUM: return sgn ? (uint64_t)(sa + sb) : a + b;
    case O_PROD: return sgn ? (uint64_t)(sa * sb) : a * b;
    case O_MIN: return sgn ? (sa < sb ? a : b) : (a < b ? a : b);
    case O_MAX: return sgn ? (sa > sb ? a : b) : (a > b ? a : b);
    case O_LAND: return (a != 0) && (b != 0);
    case O_LOR: return (a != 0) || (b != 0);
    case O_LXOR: return (a != 0) != (b != 0);
    case O_BAND: return a & b;
    case O_BOR: return a | b;
    default: return a ^ b;
    }
}

static int check_int(const tinfo *t, int op, int n, size_t i, uint64_t seed,
                     const void *p, char *d, size_t dn)
{
    int sgn = t->kind == K_SINT;
    uint64_t m = width_mask(t->size);
    uint64_t v0 = gen_int(t, op, 0, n, i, seed), acc = v0, got;
    int r;

    for (r = 1; r < n; r++)
        acc = fold_int(sgn, op, acc, gen_int(t, op, r, n, i, seed));
    got = load_int(p, t->size, sgn);
    if (((got ^ acc) & m) == 0)
        return 1;
    /* With one rank no operation is applied and MPI returns the input
     * unchanged; a normalised logical value (0/1) is accepted as well. */
    if (n == 1 && is_logical(op) && got == (uint64_t)(v0 != 0))
        return 1;
    if (sgn)
        snprintf(d, dn, "expected %lld got %lld", (long long)(int64_t)acc,
                 (long long)(int64_t)got);
    else
        snprintf(d, dn, "expected %llu (0x%llx) got %llu (0x%llx)",
                 (unsigned long long)(acc & m), (unsigned long long)(acc & m),
                 (unsigned long long)got, (unsigned long long)got);
    return 0;
}

/* ---- real / complex helpers --------------------------------------------- */

/* (no libm: the program links with just the MPI compiler wrapper) */
static long double fabsl_(long double x) { return x < 0 ? -x : x; }

/* square root of x in [0, 100] by Newton iteration; only used for
 * tolerances, so a few ulps do not matter */
static long double sqrtl_(long double x)
{
    long double y = x > 1 ? x : 1;
    int k;

    if (x <= 0)
        return 0;
    for (k = 0; k < 40; k++)
        y = (y + x / y) / 2;
    return y;
}

static long double round_to(enum vkind vk, long double x)
{
    switch (vk) {
    case VK_FLOAT: return (float)x;
    case VK_DOUBLE: return (double)x;
    default: return x;
    }
}

static long double eps_of(enum vkind vk)
{
    switch (vk) {
    case VK_FLOAT: return FLT_EPSILON;
    case VK_DOUBLE: return DBL_EPSILON;
    default: return LDBL_EPSILON;
    }
}

static size_t real_size(enum vkind vk)
{
    switch (vk) {
    case VK_FLOAT: return sizeof(float);
    case VK_DOUBLE: return sizeof(double);
    default: return sizeof(long double);
    }
}

static void store_real(void *p, enum vkind vk, long double x)
{
    float f;
    double d;

    switch (vk) {
    case VK_FLOAT: f = (float)x; memcpy(p, &f, sizeof f); break;
    case VK_DOUBLE: d = (double)x; memcpy(p, &d, sizeof d); break;
    default: memcpy(p, &x, sizeof x); break;
    }
}

static long double load_real(const void *p, enum vkind vk)
{
    float f;
    double d;
    long double l;

    switch (vk) {
    case VK_FLOAT: memcpy(&f, p, sizeof f); return f;
    case VK_DOUBLE: memcpy(&d, p, sizeof d); return d;
    default: memcpy(&l, p, sizeof l); return l;
    }
}

/* A real with more significant bits than a double (for long double), so
 * that computing long double data in double precision is detected. */
static long double gen_ld(int r, size_t i, uint64_t seed, double lo, double hi)
{
    long double a = tu_gen_real(r, i, seed, lo, hi);
    long double b = tu_gen_real(r, i, seed ^ 0xabcdef, -1.0, 1.0);

    return a + b * 0x1p-54L * a;
}

/* component c (0 = real, 1 = imaginary) of rank r's input i */
static long double gen_real(const tinfo *t, int op, int r, size_t i, uint64_t seed, int c)
{
    uint64_t s = seed + 0x1000 * (uint64_t)c;
    uint64_t h = tu_hash((uint64_t)r, i, s ^ 0x77);
    static const double ties[3] = { -1.5, 0.25, 3.0 };
    static const long double pow2[9] = { 0.0625L, 0.125L, 0.25L, 0.5L, 1, 2, 4, 8, 16 };

    switch (op) {
    case O_SUM: /* magnitudes 1/16 .. 16, mixed signs */
        return round_to(t->vk, gen_ld(r, i, s, -1.0, 1.0) * pow2[h % 9]);
    case O_PROD:
        if (t->kind == K_CPLX)
            return round_to(t->vk, gen_ld(r, i, s, -1.2, 1.2));
        return round_to(t->vk, gen_ld(r, i, s, 0.5, 2.0) * ((h & 1) ? -1 : 1));
    default: /* MIN, MAX */
        if (i % 4 == 0)
            return ties[h % 3];
        return round_to(t->vk, gen_ld(r, i, s, -100.0, 100.0));
    }
}

static int check_real(const tinfo *t, int op, int n, size_t i, uint64_t seed,
                      const void *p, char *d, size_t dn)
{
    long double ref = 0, abss = 0, tol, got, v;
    int r;

    for (r = 0; r < n; r++) {
        v = gen_real(t, op, r, i, seed, 0);
        if (r == 0) {
            ref = v;
        } else if (op == O_SUM) {
            ref += v;
        } else if (op == O_PROD) {
            ref *= v;
        } else if (op == O_MIN) {
            ref = v < ref ? v : ref;
        } else {
            ref = v > ref ? v : ref;
        }
        abss += fabsl_(v);
    }
    got = load_real(p, t->vk);
    if (op == O_MIN || op == O_MAX) {
        if (got == ref)
            return 1;
        snprintf(d, dn, "expected %.21Lg got %.21Lg (exact)", ref, got);
        return 0;
    }
    tol = n * eps_of(t->vk) * (op == O_SUM ? abss : fabsl_(ref));
    if (fabsl_(got - ref) <= tol)
        return 1;
    snprintf(d, dn, "expected %.21Lg got %.21Lg (|diff| %.3Lg > tol %.3Lg)", ref, got,
             fabsl_(got - ref), tol);
    return 0;
}

static int check_cplx(const tinfo *t, int op, int n, size_t i, uint64_t seed,
                      const void *p, char *d, size_t dn)
{
    long double re = 0, im = 0, absre = 0, absim = 0, absprod = 1, tre, tim;
    long double gre, gim, vr, vi, tol_re, tol_im;
    size_t cs = real_size(t->vk);
    int r;

    for (r = 0; r < n; r++) {
        vr = gen_real(t, op, r, i, seed, 0);
        vi = gen_real(t, op, r, i, seed, 1);
        if (r == 0) {
            re = vr;
            im = vi;
        } else if (op == O_SUM) {
            re += vr;
            im += vi;
        } else {
            tre = re * vr - im * vi;
            tim = re * vi + im * vr;
            re = tre;
            im = tim;
        }
        absre += fabsl_(vr);
        absim += fabsl_(vi);
        absprod *= sqrtl_(vr * vr + vi * vi);
    }
    gre = load_real(p, t->vk);
    gim = load_real((const char *)p + cs, t->vk);
    if (op == O_SUM) {
        tol_re = n * eps_of(t->vk) * absre;
        tol_im = n * eps_of(t->vk) * absim;
    } else {
        tol_re = tol_im = 3 * n * eps_of(t->vk) * absprod;
    }
    if (fabsl_(gre - re) <= tol_re && fabsl_(gim - im) <= tol_im)
        return 1;
    snprintf(d, dn, "expected (%.21Lg, %.21Lg) got (%.21Lg, %.21Lg) (tol %.3Lg, %.3Lg)", re,
             im, gre, gim, tol_re, tol_im);
    return 0;
}

/* ---- bool / byte ---------------------------------------------------------- */

static int gen_bool(int r, size_t i, uint64_t seed)
{
    static const unsigned pnz[3] = { 1, 4, 7 };

    return tu_hash((uint64_t)r, i, seed) % 8 < pnz[i % 3];
}

static unsigned gen_byte(int op, int r, size_t i, uint64_t seed)
{
    uint64_t h = tu_hash((uint64_t)r, i, seed), h2 = tu_hash((uint64_t)r, i, ~seed);

    if (op == O_BAND)
        h |= h2;
    else if (op == O_BOR)
        h &= h2;
    return (unsigned)(h & 0xff);
}

static int check_bool(int op, int n, size_t i, uint64_t seed, const void *p, char *d,
                      size_t dn)
{
    int acc = gen_bool(0, i, seed), r;
    unsigned char got;

    for (r = 1; r < n; r++)
        acc = (int)fold_int(0, op, (uint64_t)acc, (uint64_t)gen_bool(r, i, seed));
    memcpy(&got, p, 1); /* read the representation: must be 0 or 1 */
    if (got == (unsigned char)acc)
        return 1;
    snprintf(d, dn, "expected %d got byte 0x%02x", acc, (unsigned)got);
    return 0;
}

static int check_byte(int op, int n, size_t i, uint64_t seed, const void *p, char *d,
                      size_t dn)
{
    unsigned acc = gen_byte(op, 0, i, seed);
    unsigned char got;
    int r;

    for (r = 1; r < n; r++)
        acc = (unsigned)fold_int(0, op, acc, gen_byte(op, r, i, seed));
    memcpy(&got, p, 1);
    if (got == acc)
        return 1;
    snprintf(d, dn, "expected 0x%02x got 0x%02x", acc, (unsigned)got);
    return 0;
}

/* ---- MINLOC / MAXLOC pairs ------------------------------------------------- */

typedef struct {
    long double fv; /* value of float-valued pairs */
    int64_t iv;     /* value of integer-valued pairs */
    int loc;
} pairval;

static int pair_is_real(const tinfo *t)
{
    return t->vk == VK_FLOAT || t->vk == VK_DOUBLE || t->vk == VK_LDOUBLE;
}

static pairval gen_pair(const tinfo *t, int r, int n, size_t i, uint64_t seed)
{
    pairval pv;
    uint64_t h = tu_hash((uint64_t)r, i, seed);
    int64_t k = (int64_t)(h % 3) - 1; /* 3 values per element: many ties */

    pv.fv = 0;
    pv.iv = 0;
    switch (t->vk) {
    case VK_SHORT: pv.iv = k * 100 + (int64_t)(i % 7); break;
    case VK_INT: pv.iv = k * 1000000 + (int64_t)(i % 1000); break;
    case VK_LONG: pv.iv = k * (LONG_MAX / 4) + (int64_t)(i % 1000); break;
    default: pv.fv = round_to(t->vk, k * 1.75L + 0.125L * (i % 5)); break;
    }
    /* index not in rank order (and sometimes negative) */
    pv.loc = (int)tu_gen_int(r, i, seed ^ 0x51, -n, 2 * n);
    return pv;
}

static void store_pair(const tinfo *t, void *p, pairval pv)
{
    short s;
    int in;
    long l;

    switch (t->vk) {
    case VK_SHORT: s = (short)pv.iv; memcpy(p, &s, sizeof s); break;
    case VK_INT: in = (int)pv.iv; memcpy(p, &in, sizeof in); break;
    case VK_LONG: l = (long)pv.iv; memcpy(p, &l, sizeof l); break;
    default: store_real(p, t->vk, pv.fv); break;
    }
    memcpy((char *)p + t->ioff, &pv.loc, sizeof(int));
}

static pairval load_pair(const tinfo *t, const void *p)
{
    pairval pv;
    short s;
    int in;
    long l;

    pv.fv = 0;
    pv.iv = 0;
    switch (t->vk) {
    case VK_SHORT: memcpy(&s, p, sizeof s); pv.iv = s; break;
    case VK_INT: memcpy(&in, p, sizeof in); pv.iv = in; break;
    case VK_LONG: memcpy(&l, p, sizeof l); pv.iv = l; break;
    default: pv.fv = load_real(p, t->vk); break;
    }
    memcpy(&pv.loc, (const char *)p + t->ioff, sizeof(int));
    return pv;
}

static int check_pair(const tinfo *t, int op, int n, size_t i, uint64_t seed, const void *p,
                      char *d, size_t dn)
{
    pairval acc = gen_pair(t, 0, n, i, seed), v, got;
    int r, c, ties = 0;

    for (r = 1; r < n; r++) {
        v = gen_pair(t, r, n, i, seed);
        if (pair_is_real(t))
            c = v.fv < acc.fv ? -1 : v.fv > acc.fv ? 1 : 0;
        else
            c = v.iv < acc.iv ? -1 : v.iv > acc.iv ? 1 : 0;
        if (op == O_MAXLOC)
            c = -c;
        if (c < 0) {
            acc = v;
        } else if (c == 0) {
            ties++;
            if (v.loc < acc.loc)
                acc.loc = v.loc;
        }
    }
    got = load_pair(t, p);
    if (got.loc == acc.loc && (pair_is_real(t) ? got.fv == acc.fv : got.iv == acc.iv))
        return 1;
    if (pair_is_real(t))
        snprintf(d, dn, "expected (%.21Lg, %d) got (%.21Lg, %d)%s", acc.fv, acc.loc, got.fv,
                 got.loc, ties ? " [value tie]" : "");
    else
        snprintf(d, dn, "expected (%lld, %d) got (%lld, %d)%s", (long long)acc.iv, acc.loc,
                 (long long)got.iv, got.loc, ties ? " [value tie]" : "");
    return 0;
}

/* ---- generic element generation / verification ------------------------------ */

static void gen_elem(const tinfo *t, int op, int r, int n, size_t i, uint64_t seed, void *p)
{
    unsigned char b;
    _Bool bo;

    switch (t->kind) {
    case K_SINT:
    case K_UINT:
        store_int(p, t->size, gen_int(t, op, r, n, i, seed));
        break;
    case K_REAL:
        store_real(p, t->vk, gen_real(t, op, r, i, seed, 0));
        break;
    case K_CPLX:
        store_real(p, t->vk, gen_real(t, op, r, i, seed, 0));
        store_real((char *)p + real_size(t->vk), t->vk, gen_real(t, op, r, i, seed, 1));
        break;
    case K_BOOL:
        bo = gen_bool(r, i, seed);
        memcpy(p, &bo, sizeof bo);
        break;
    case K_BYTE:
        b = (unsigned char)gen_byte(op, r, i, seed);
        memcpy(p, &b, 1);
        break;
    case K_PAIR:
        store_pair(t, p, gen_pair(t, r, n, i, seed));
        break;
    }
}

static int check_elem(const tinfo *t, int op, int n, size_t i, uint64_t seed, const void *p,
                      char *d, size_t dn)
{
    switch (t->kind) {
    case K_SINT:
    case K_UINT: return check_int(t, op, n, i, seed, p, d, dn);
    case K_REAL: return check_real(t, op, n, i, seed, p, d, dn);
    case K_CPLX: return check_cplx(t, op, n, i, seed, p, d, dn);
    case K_BOOL: return check_bool(op, n, i, seed, p, d, dn);
    case K_BYTE: return check_byte(op, n, i, seed, p, d, dn);
    default: return check_pair(t, op, n, i, seed, p, d, dn);
    }
}

/* ---- the call ---------------------------------------------------------------- */

static int do_allreduce(const void *sbuf, void *rbuf, size_t count, MPI_Datatype dt,
                        MPI_Op op, MPI_Comm comm, const char *what)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    if (!g_nonblocking) {
        rc = MPI_Allreduce(sbuf, rbuf, (int)count, dt, op, comm);
        return tu_check(rc == MPI_SUCCESS, what, "MPI_Allreduce returned %d (%s)", rc,
                        tu_errstr(rc));
    }
    rc = MPI_Iallreduce(sbuf, rbuf, (int)count, dt, op, comm, &req);
    if (!tu_check(rc == MPI_SUCCESS, what, "MPI_Iallreduce returned %d (%s)", rc,
                  tu_errstr(rc)))
        return 0;
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    tu_check(req == MPI_REQUEST_NULL, what, "request is not MPI_REQUEST_NULL after MPI_Wait");
    return tu_check(rc == MPI_SUCCESS, what, "MPI_Wait returned %d (%s)", rc, tu_errstr(rc));
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", tu_world_rank(), n);
        MPI_Abort(MPI_COMM_WORLD, 99);
    }
    return p;
}

static void check_unchanged(const void *got, const void *want, size_t n, const char *what,
                            const char *which)
{
    char w[400];

    snprintf(w, sizeof w, "%s [%s]", what, which);
    tu_check_same_bytes(got, want, n, w);
}

/* ---- predefined matrix ---------------------------------------------------------- */

static void run_predef(const tinfo *t, int op, size_t count, int inplace, MPI_Comm comm,
                       const char *cname, uint64_t cseed)
{
    int r, n;
    size_t i, nbytes = count * t->size, tot = nbytes + GUARD, bad = 0, first = 0;
    uint64_t seed = tu_seed(tu_seed_str(cseed, t->name), (uint64_t)op, count * 2 + (size_t)inplace);
    unsigned char *sbuf, *rbuf, *scopy, gcopy[GUARD];
    char what[256], d[512], firstd[512] = "";

    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    snprintf(what, sizeof what, "%s %s %s count=%zu %s comm=%s(size %d)",
             g_nonblocking ? "MPI_Iallreduce" : "MPI_Allreduce", t->name, g_opname[op], count,
             inplace ? "MPI_IN_PLACE" : "separate-buffers", cname, n);
    if (g_verbose && tu_world_rank() == 0)
        printf("  %s\n", what);

    sbuf = xmalloc(tot);
    rbuf = xmalloc(tot);
    scopy = xmalloc(tot);
    /* garbage first: also in padding bytes (long double, pairs) */
    tu_fill_garbage(sbuf, tot, seed ^ 1);
    for (i = 0; i < count; i++)
        gen_elem(t, op, r, n, i, seed, sbuf + i * t->size);
    if (inplace) {
        memcpy(rbuf, sbuf, nbytes);
        tu_fill_garbage(rbuf + nbytes, GUARD, seed ^ 2);
    } else {
        tu_fill_garbage(rbuf, tot, seed ^ 3);
    }
    memcpy(scopy, sbuf, tot);
    memcpy(gcopy, rbuf + nbytes, GUARD);

    if (do_allreduce(inplace ? MPI_IN_PLACE : sbuf, rbuf, count, t->dt, g_op[op], comm,
                     what)) {
        for (i = 0; i < count; i++) {
            if (!check_elem(t, op, n, i, seed, rbuf + i * t->size, d, sizeof d)) {
                if (bad++ == 0) {
                    first = i;
                    memcpy(firstd, d, sizeof firstd);
                }
            }
        }
        tu_check(bad == 0, what, "%zu of %zu elements wrong; first at index %zu: %s", bad,
                 count, first, firstd);
    }
    if (!inplace)
        check_unchanged(sbuf, scopy, tot, what, "send buffer unchanged");
    check_unchanged(rbuf + nbytes, gcopy, GUARD, what, "bytes after receive buffer untouched");
    free(sbuf);
    free(rbuf);
    free(scopy);
}

/* ---- derived datatypes and user ops ---------------------------------------------- */

/* Data layout of one element of a derived type, in units of its base type
 * (int or double): nblk blocks of blklen units, block starts stride apart;
 * ext units between consecutive elements. */
typedef struct {
    const char *name;
    MPI_Datatype dt;
    int isdbl;
    int nblk, blklen, stride, ext;
} layout_t;

enum { L_INT, L_CONTIG3, L_VEC, L_VECRS, L_MAT, L_N };
static layout_t g_lay[L_N];
static MPI_Op g_user_sum1, g_user_matmul;

static const layout_t *find_layout(MPI_Datatype dt)
{
    int i;

    for (i = 0; i < L_N; i++)
        if (g_lay[i].dt == dt)
            return &g_lay[i];
    return NULL;
}

static int lay_is_data(const layout_t *L, int pos)
{
    return pos / L->stride < L->nblk && pos % L->stride < L->blklen;
}

static int lay_dlen(const layout_t *L) { return L->nblk * L->blklen; }

/* unit offset of data item dd (0 .. dlen-1) in an element */
static int lay_pos(const layout_t *L, int dd)
{
    return (dd / L->blklen) * L->stride + dd % L->blklen;
}

static size_t lay_unit(const layout_t *L) { return L->isdbl ? sizeof(double) : sizeof(int); }

/* Commutative user op: inout = in + inout + 1, on the data items only. */
static void user_sum1(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const layout_t *L = find_layout(*dt);
    int k, dd, pos;

    if (L == NULL) {
        tu_fail("user op sum1", "called with a datatype that is not the reduction's");
        return;
    }
    for (k = 0; k < *len; k++) {
        for (dd = 0; dd < lay_dlen(L); dd++) {
            pos = k * L->ext + lay_pos(L, dd);
            if (L->isdbl)
                ((double *)inout)[pos] = ((double *)in)[pos] + ((double *)inout)[pos] + 1.0;
            else
                ((int *)inout)[pos] = ((int *)in)[pos] + ((int *)inout)[pos] + 1;
        }
    }
}

/* 2x2 row-major integer matrices a, b: c = a * b */
static void mat2_mul(const int *a, const int *b, int *c)
{
    int t[4];

    t[0] = a[0] * b[0] + a[1] * b[2];
    t[1] = a[0] * b[1] + a[1] * b[3];
    t[2] = a[2] * b[0] + a[3] * b[2];
    t[3] = a[2] * b[1] + a[3] * b[3];
    memcpy(c, t, sizeof t);
}

/* Non-commutative user op: inout = in * inout (in comes from lower ranks). */
static void user_matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int k, a[4], b[4];

    if (*dt != g_lay[L_MAT].dt) {
        tu_fail("user op matmul", "called with a datatype that is not the reduction's");
        return;
    }
    for (k = 0; k < *len; k++) {
        memcpy(a, (char *)in + 16 * (size_t)k, 16);
        memcpy(b, (char *)inout + 16 * (size_t)k, 16);
        mat2_mul(a, b, b);
        memcpy((char *)inout + 16 * (size_t)k, b, 16);
    }
}

static void init_derived(void)
{
    MPI_Datatype contig3, vec, vecrs, mat;
    MPI_Aint lb, ext;
    int i;

    MPI_Type_contiguous(3, MPI_INT, &contig3);
    MPI_Type_commit(&contig3);
    MPI_Type_vector(4, 2, 3, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    MPI_Type_create_resized(vec, 0, 12 * (MPI_Aint)sizeof(double), &vecrs);
    MPI_Type_commit(&vecrs);
    MPI_Type_contiguous(4, MPI_INT, &mat);
    MPI_Type_commit(&mat);

    g_lay[L_INT] = (layout_t){ "MPI_INT", MPI_INT, 0, 1, 1, 1, 1 };
    g_lay[L_CONTIG3] = (layout_t){ "contiguous(3,MPI_INT)", contig3, 0, 1, 3, 3, 3 };
    g_lay[L_VEC] = (layout_t){ "vector(4,2,3,MPI_DOUBLE)", vec, 1, 4, 2, 3, 11 };
    g_lay[L_VECRS] = (layout_t){ "resized(vector(4,2,3,MPI_DOUBLE),0,12*8)", vecrs, 1, 4, 2, 3,
                                 12 };
    g_lay[L_MAT] = (layout_t){ "contiguous(4,MPI_INT)", mat, 0, 1, 4, 4, 4 };
    for (i = 0; i < L_N; i++) {
        char what[128];

        MPI_Type_get_extent(g_lay[i].dt, &lb, &ext);
        snprintf(what, sizeof what, "derived type layout %s", g_lay[i].name);
        tu_check(lb == 0 && (size_t)ext == (size_t)g_lay[i].ext * lay_unit(&g_lay[i]), what,
                 "lb %ld extent %ld, expected 0 and %zu", (long)lb, (long)ext,
                 (size_t)g_lay[i].ext * lay_unit(&g_lay[i]));
    }
    MPI_Op_create(user_sum1, 1, &g_user_sum1);
    MPI_Op_create(user_matmul, 0, &g_user_matmul);
}

static void free_derived(void)
{
    int i;

    for (i = 0; i < L_N; i++)
        if (i != L_INT)
            MPI_Type_free(&g_lay[i].dt);
    MPI_Op_free(&g_user_sum1);
    MPI_Op_free(&g_user_matmul);
}

enum comb { C_SUM, C_MIN, C_USER1, C_MATMUL };

typedef struct {
    int lay;
    enum comb comb;
    const char *opname;
} dcase_t;

static const dcase_t g_dcases[] = {
    { L_CONTIG3, C_SUM, "MPI_SUM" },
    { L_VEC, C_SUM, "MPI_SUM" },
    { L_VEC, C_MIN, "MPI_MIN" },
    { L_VECRS, C_SUM, "MPI_SUM" },
    { L_VECRS, C_MIN, "MPI_MIN" },
    { L_INT, C_USER1, "user-commutative(a+b+1)" },
    { L_CONTIG3, C_USER1, "user-commutative(a+b+1)" },
    { L_VEC, C_USER1, "user-commutative(a+b+1)" },
    { L_VECRS, C_USER1, "user-commutative(a+b+1)" },
    { L_MAT, C_MATMUL, "user-noncommutative(2x2 matrix product)" },
};

/* rank r's value of data item dd of element k (int-based layouts: exact
 * integers; double-based: multiples of 1/4 or, for MIN, arbitrary) */
static int64_t dgen_int(const dcase_t *c, int r, int n, size_t k, int dd, uint64_t seed)
{
    size_t flat = k * 16 + (size_t)dd;

    if (c->comb == C_MATMUL)
        return tu_gen_int(r, flat, seed, -1, 1);
    if (c->comb == C_MIN)
        return tu_gen_int(r, flat, seed, INT_MIN, INT_MAX);
    return tu_gen_int(r, flat, seed, -(INT_MAX / (2 * n)), INT_MAX / (2 * n));
}

static double dgen_dbl(const dcase_t *c, int r, size_t k, int dd, uint64_t seed)
{
    size_t flat = k * 16 + (size_t)dd;

    if (c->comb == C_MIN)
        return tu_gen_real(r, flat, seed, -1e6, 1e6);
    return 0.25 * (double)tu_gen_int(r, flat, seed, -4000, 4000);
}

static void run_derived(const dcase_t *c, size_t count, int inplace, MPI_Comm comm,
                        const char *cname, uint64_t cseed)
{
    const layout_t *L = &g_lay[c->lay];
    size_t unit = lay_unit(L), nbytes = count * (size_t)L->ext * unit, tot = nbytes + GUARD;
    size_t k, bad = 0, badgap = 0, firstgap = 0;
    int r, n, dd, pos, rr;
    uint64_t seed = tu_seed(tu_seed_str(cseed, L->name), (uint64_t)c->comb,
                            count * 2 + (size_t)inplace);
    unsigned char *sbuf, *rbuf, *scopy, *rcopy;
    MPI_Op op;
    char what[320], firstd[256] = "";

    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    op = c->comb == C_SUM ? MPI_SUM : c->comb == C_MIN ? MPI_MIN
         : c->comb == C_USER1 ? g_user_sum1 : g_user_matmul;
    snprintf(what, sizeof what, "%s %s %s count=%zu %s comm=%s(size %d)",
             g_nonblocking ? "MPI_Iallreduce" : "MPI_Allreduce", L->name, c->opname, count,
             inplace ? "MPI_IN_PLACE" : "separate-buffers", cname, n);
    if (g_verbose && tu_world_rank() == 0)
        printf("  %s\n", what);

    sbuf = xmalloc(tot);
    rbuf = xmalloc(tot);
    scopy = xmalloc(tot);
    rcopy = xmalloc(tot);
    tu_fill_garbage(sbuf, tot, seed ^ 1); /* gaps of the send buffer: garbage */
    for (k = 0; k < count; k++) {
        for (dd = 0; dd < lay_dlen(L); dd++) {
            unsigned char *p = sbuf + (k * (size_t)L->ext + (size_t)lay_pos(L, dd)) * unit;
            if (L->isdbl) {
                double v = dgen_dbl(c, r, k, dd, seed);
                memcpy(p, &v, sizeof v);
            } else {
                int v = (int)dgen_int(c, r, n, k, dd, seed);
                memcpy(p, &v, sizeof v);
            }
        }
    }
    if (inplace) {
        memcpy(rbuf, sbuf, nbytes);
        tu_fill_garbage(rbuf + nbytes, GUARD, seed ^ 2);
    } else {
        tu_fill_garbage(rbuf, tot, seed ^ 3);
    }
    memcpy(scopy, sbuf, tot);
    memcpy(rcopy, rbuf, tot);

    if (do_allreduce(inplace ? MPI_IN_PLACE : sbuf, rbuf, count, L->dt, op, comm, what)) {
        size_t firstk = 0;
        int firstdd = 0;

        for (k = 0; k < count; k++) {
            int mexp[4] = { 0 }, mr[4];

            if (c->comb == C_MATMUL) {
                for (rr = 0; rr < n; rr++) {
                    for (dd = 0; dd < 4; dd++)
                        mr[dd] = (int)dgen_int(c, rr, n, k, dd, seed);
                    if (rr == 0)
                        memcpy(mexp, mr, sizeof mr);
                    else
                        mat2_mul(mexp, mr, mexp); /* rank order: M0*M1*...*Mn-1 */
                }
            }
            for (dd = 0; dd < lay_dlen(L); dd++) {
                const unsigned char *p =
                    rbuf + (k * (size_t)L->ext + (size_t)lay_pos(L, dd)) * unit;
                char d[256];
                int ok;

                if (L->isdbl) {
                    double e = 0, v, got;
                    for (rr = 0; rr < n; rr++) {
                        v = dgen_dbl(c, rr, k, dd, seed);
                        if (rr == 0)
                            e = v;
                        else if (c->comb == C_MIN)
                            e = v < e ? v : e;
                        else
                            e += v + (c->comb == C_USER1 ? 1.0 : 0.0);
                    }
                    memcpy(&got, p, sizeof got);
                    ok = got == e; /* all values and sums are exact */
                    snprintf(d, sizeof d, "expected %.17g got %.17g", e, got);
                } else {
                    int64_t e = 0;
                    int got;
                    if (c->comb == C_MATMUL) {
                        e = mexp[dd];
                    } else {
                        for (rr = 0; rr < n; rr++) {
                            int64_t v = dgen_int(c, rr, n, k, dd, seed);
                            if (rr == 0)
                                e = v;
                            else if (c->comb == C_MIN)
                                e = v < e ? v : e;
                            else
                                e += v + (c->comb == C_USER1 ? 1 : 0);
                        }
                    }
                    memcpy(&got, p, sizeof got);
                    ok = got == e;
                    snprintf(d, sizeof d, "expected %lld got %d", (long long)e, got);
                }
                if (!ok && bad++ == 0) {
                    firstk = k;
                    firstdd = dd;
                    memcpy(firstd, d, sizeof firstd);
                }
            }
        }
        tu_check(bad == 0, what, "%zu of %zu data items wrong; first: element %zu item %d: %s",
                 bad, count * (size_t)lay_dlen(L), firstk, firstdd, firstd);
    }
    /* gaps inside / between the elements and the bytes after the buffer
     * must be exactly as before the call */
    for (k = 0; k < count; k++) {
        for (pos = 0; pos < L->ext; pos++) {
            size_t off = (k * (size_t)L->ext + (size_t)pos) * unit;
            if (!lay_is_data(L, pos) && memcmp(rbuf + off, rcopy + off, unit) != 0) {
                if (badgap++ == 0)
                    firstgap = off;
            }
        }
    }
    tu_check(badgap == 0, what, "receive buffer gap units modified: %zu, first at byte "
             "offset %zu (element %zu, unit %zu)", badgap, firstgap,
             firstgap / (unit * (size_t)L->ext), (firstgap / unit) % (size_t)L->ext);
    if (!inplace)
        check_unchanged(sbuf, scopy, tot, what, "send buffer unchanged");
    check_unchanged(rbuf + nbytes, rcopy + nbytes, GUARD, what,
                    "bytes after receive buffer untouched");
    free(sbuf);
    free(rbuf);
    free(scopy);
    free(rcopy);
}

/* ---- --large --------------------------------------------------------------------- */

static void run_large(MPI_Comm comm, int isfloat, int inplace)
{
    size_t count = LARGE_BYTES / 4, i, bad = 0, badsend = 0, first = 0;
    int r, n, rr;
    uint64_t seed = tu_seed(0x1a7e, (uint64_t)isfloat, (uint64_t)inplace);
    unsigned char *sbuf = NULL, *rbuf, gcopy[GUARD];
    char what[256], d[160] = "";
    double t0 = MPI_Wtime();

    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    snprintf(what, sizeof what, "%s %s MPI_SUM count=%zu (64 MiB) %s comm=world(size %d)",
             g_nonblocking ? "MPI_Iallreduce" : "MPI_Allreduce",
             isfloat ? "MPI_FLOAT" : "MPI_INT", count,
             inplace ? "MPI_IN_PLACE" : "separate-buffers", n);
    rbuf = xmalloc(LARGE_BYTES + GUARD);
    if (!inplace)
        sbuf = xmalloc(LARGE_BYTES + GUARD);
    else
        sbuf = rbuf;
    /* integer values (also for float: sums stay exact below 2^24) */
    for (i = 0; i < count; i++) {
        int32_t v = (int32_t)tu_gen_int(r, i, seed, -1000, 1000);
        if (isfloat)
            ((float *)sbuf)[i] = (float)v;
        else
            ((int *)sbuf)[i] = (int)v * 97;
    }
    if (!inplace)
        tu_fill_garbage(rbuf, LARGE_BYTES, seed ^ 5);
    tu_fill_garbage(rbuf + LARGE_BYTES, GUARD, seed ^ 6);
    memcpy(gcopy, rbuf + LARGE_BYTES, GUARD);
    if (do_allreduce(inplace ? MPI_IN_PLACE : sbuf, rbuf, count, isfloat ? MPI_FLOAT : MPI_INT,
                     MPI_SUM, comm, what)) {
        for (i = 0; i < count; i++) {
            int64_t e = 0;
            int ok;
            for (rr = 0; rr < n; rr++)
                e += tu_gen_int(rr, i, seed, -1000, 1000);
            if (isfloat) {
                ok = ((float *)rbuf)[i] == (float)e;
                if (!ok && bad == 0)
                    snprintf(d, sizeof d, "expected %lld got %.9g", (long long)e,
                             (double)((float *)rbuf)[i]);
            } else {
                ok = ((int *)rbuf)[i] == (int)(e * 97);
                if (!ok && bad == 0)
                    snprintf(d, sizeof d, "expected %lld got %d", (long long)(e * 97),
                             ((int *)rbuf)[i]);
            }
            if (!ok && bad++ == 0)
                first = i;
            if (!inplace) { /* send buffer unchanged (recomputed, no copy) */
                int32_t v = (int32_t)tu_gen_int(r, i, seed, -1000, 1000);
                if (isfloat ? ((float *)sbuf)[i] != (float)v : ((int *)sbuf)[i] != v * 97)
                    badsend++;
            }
        }
        tu_check(bad == 0, what, "%zu of %zu elements wrong; first at index %zu: %s", bad,
                 count, first, d);
        if (!inplace)
            tu_check(badsend == 0, what, "send buffer changed: %zu elements differ", badsend);
    }
    check_unchanged(rbuf + LARGE_BYTES, gcopy, GUARD, what,
                    "bytes after receive buffer untouched");
    if (!inplace)
        free(sbuf);
    free(rbuf);
    if (g_verbose && tu_world_rank() == 0)
        printf("  %s: %.2f s\n", what, MPI_Wtime() - t0);
}

/* ---- library capability probes ---------------------------------------------------
 *
 * Both probes use the profiling entry points and MPI_Reduce_local, so they ask the
 * MPI library itself (never a shim) and need no communication.
 *
 * 1. Known library bugs: MPI_MIN/MPI_MAX treat some integer types with the wrong
 *    signedness (MPICH 4.0.x: every unsigned type is compared as signed,
 *    pmodels/mpich#6083; Open MPI 4.1.2-4.1.4: MPI_UNSIGNED_LONG is compared as
 *    signed, open-mpi/ompi#10525, and MPI_OFFSET as unsigned).  For such a type the
 *    MIN/MAX inputs are limited to values with the top bit clear, where signed and
 *    unsigned order agree; everything else about the type is still tested.
 *    Open MPI 4.1.4's op/avx component (active unless "--mca op ^avx") uses
 *    saturating vector adds for 8- and 16-bit MPI_SUM (16 or more elements), so
 *    unsigned sums of such types do not wrap around; probe_sum_wrap() detects it
 *    and limits those SUM inputs to 0..max/n (no wraparound).
 * 2. MPI-4.0 defines the predefined operations only on the predefined datatypes
 *    (section 6.9.2: "Predefined operators work only with the MPI types listed").
 *    Open MPI 4.1 and MPICH 4.0 both reject derived datatypes with a predefined
 *    op (MPI_ERR_OP).  The derived-datatype cases with MPI_SUM/MPI_MIN run only
 *    where the library accepts them; the user-op cases on the same derived types
 *    (including the gap checks of the strided vector) always run.
 */
static int g_derived_builtin_ok = 1;

static void probe_minmax_sign(void)
{
    char list[512] = "";
    int i, op, rc;

    for (i = 0; i < g_ntypes; i++) {
        tinfo *t = &g_types[i];
        int sgn = t->kind == K_SINT;

        if ((t->kind != K_SINT && t->kind != K_UINT) || !t->usable)
            continue;
        for (op = O_MIN; op <= O_MAX; op++) {
            unsigned char in[8], io[8];
            uint64_t got, want;

            /* 1 versus all-ones (-1 if signed, the maximum if unsigned) */
            store_int(in, t->size, 1);
            store_int(io, t->size, UINT64_MAX);
            rc = PMPI_Reduce_local(in, io, 1, t->dt, g_op[op]);
            got = load_int(io, t->size, sgn);
            want = (op == O_MIN) ? (sgn ? sext(UINT64_MAX, t->size) : 1)
                                 : (sgn ? 1 : width_mask(t->size));
            if (rc != MPI_SUCCESS || got != want)
                t->minmax_quirk = 1;
        }
        if (t->minmax_quirk && strlen(list) + strlen(t->name) + 2 < sizeof list) {
            strcat(list, " ");
            strcat(list, t->name);
        }
    }
    if (list[0] != '\0' && tu_world_rank() == 0)
        printf("note: library quirk: MPI_MIN/MPI_MAX ignore the signedness of%s; "
               "their MIN/MAX inputs are limited to 0..2^(bits-1)-1\n", list);
}

static void probe_sum_wrap(void)
{
    char list[512] = "";
    unsigned char in[64 * 8], io[64 * 8];
    size_t k;
    int i, rc, bad;

    for (i = 0; i < g_ntypes; i++) {
        tinfo *t = &g_types[i];

        if (t->kind != K_UINT || !t->usable)
            continue;
        /* max + k wraps to k - 1; vector code paths need many elements */
        for (k = 0; k < 64; k++) {
            store_int(in + k * t->size, t->size, k + 1);
            store_int(io + k * t->size, t->size, UINT64_MAX);
        }
        rc = PMPI_Reduce_local(in, io, 64, t->dt, MPI_SUM);
        bad = rc != MPI_SUCCESS;
        for (k = 0; k < 64; k++)
            bad |= load_int(io + k * t->size, t->size, 0) != k;
        if (bad) {
            t->sum_wrap_quirk = 1;
            if (strlen(list) + strlen(t->name) + 2 < sizeof list) {
                strcat(list, " ");
                strcat(list, t->name);
            }
        }
    }
    if (list[0] != '\0' && tu_world_rank() == 0)
        printf("note: library quirk: MPI_SUM does not wrap around for%s (Open MPI op/avx? "
               "use --mca op ^avx); their SUM inputs are limited to 0..max/n\n", list);
}

static void probe_derived_builtin(void)
{
    MPI_Errhandler eh;
    int in[3] = { 1, 2, 3 }, io[3] = { 4, 5, 6 }, rc, errclass = MPI_SUCCESS;

    /* Reduce_local errors go to MPI_COMM_WORLD's (MPI-3) or MPI_COMM_SELF's
     * (MPI-4) handler: make both return */
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    rc = PMPI_Reduce_local(in, io, 1, g_lay[L_CONTIG3].dt, MPI_SUM);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&eh);
    g_derived_builtin_ok = rc == MPI_SUCCESS;
    MPI_Error_class(rc, &errclass);
    if (g_derived_builtin_ok)
        tu_check(io[0] == 5 && io[1] == 7 && io[2] == 9, "probe MPI_Reduce_local "
                 "contiguous(3,MPI_INT) MPI_SUM", "got {%d,%d,%d}, expected {5,7,9}",
                 io[0], io[1], io[2]);
    else if (tu_world_rank() == 0)
        printf("note: the MPI library rejects predefined ops on derived datatypes (error "
               "class %d); skipping the derived-datatype cases with MPI_SUM/MPI_MIN\n",
               errclass);
}

/* ---- main ----------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: test_allreduce [options]\n"
            "  --nonblocking   use MPI_Iallreduce + MPI_Wait instead of MPI_Allreduce\n"
            "  --counts LIST   comma-separated element counts (default 0,1,2,7,31,1031)\n"
            "  --large         add 64 MiB MPI_FLOAT and MPI_INT SUMs (separate buffers and\n"
            "                  MPI_IN_PLACE; < 200 MiB of buffers per rank)\n"
            "  --quick         only a subset of the predefined types\n"
            "  --threads NAME  at the end, print how many of this process's threads\n"
            "                  have a name starting with NAME (/proc/self/task)\n"
            "  --verbose       rank 0 prints each case before running it\n"
            "  --help          this text\n"
            "Prints one line '<program>: N passed, N failed'; exit 0 ok, 1 failed.\n");
}

static int parse_counts(const char *s)
{
    char *end;
    unsigned long v;

    g_ncounts = 0;
    while (*s != '\0') {
        if (g_ncounts == (int)(sizeof g_counts / sizeof g_counts[0]))
            return 0;
        if (*s < '0' || *s > '9')
            return 0;
        v = strtoul(s, &end, 10);
        if (end == s || v > (1ul << 24))
            return 0;
        g_counts[g_ncounts++] = v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s != '\0')
            return 0;
    }
    return g_ncounts > 0;
}

/* How many of this process's threads have a name starting with `prefix`
 * (the comm of each entry of /proc/self/task); -1 when it cannot be read. */
static int count_threads(const char *prefix)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char path[300], comm[64] = "";
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        f = fopen(path, "r");
        if (f == NULL)
            continue;  /* the thread has ended meanwhile */
        if (fgets(comm, sizeof comm, f) != NULL
            && strncmp(comm, prefix, strlen(prefix)) == 0)
            n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    static const size_t defcounts[] = { 0, 1, 2, 7, 31, 1031 };
    MPI_Comm comms[2];
    const char *cnames[2];
    int wrank, wsize, i, ci, op, ti, c, form, rc, bad_usage = 0, help = 0;
    double t0;

    MPI_Init(&argc, &argv);
    tu_init("test_allreduce");
    wrank = tu_world_rank();
    wsize = tu_world_size();

    g_ncounts = (int)(sizeof defcounts / sizeof defcounts[0]);
    memcpy(g_counts, defcounts, sizeof defcounts);
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--nonblocking") == 0)
            g_nonblocking = 1;
        else if (strcmp(argv[i], "--large") == 0)
            g_large = 1;
        else if (strcmp(argv[i], "--quick") == 0)
            g_quick = 1;
        else if (strcmp(argv[i], "--verbose") == 0)
            g_verbose = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            help = 1;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            g_threads = argv[++i];
        else if (strcmp(argv[i], "--counts") == 0 && i + 1 < argc)
            bad_usage |= !parse_counts(argv[++i]);
        else if (strncmp(argv[i], "--counts=", 9) == 0)
            bad_usage |= !parse_counts(argv[i] + 9);
        else
            bad_usage = 1;
    }
    if (help || bad_usage) {
        if (wrank == 0)
            usage(help ? stdout : stderr);
        MPI_Finalize();
        return help ? 0 : 99;
    }

    t0 = MPI_Wtime();
    init_types();
    init_derived();
    probe_minmax_sign();
    probe_sum_wrap();
    probe_derived_builtin();

    /* world, and odd/even world ranks in reversed order (so that the
     * sub-communicator's rank order differs from the world's) */
    comms[0] = MPI_COMM_WORLD;
    cnames[0] = "world";
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &comms[1]);
    cnames[1] = wrank % 2 ? "split-odd-reversed" : "split-even-reversed";

    for (ci = 0; ci < 2; ci++) {
        /* the split communicators differ between colours, keep the seeds
         * identical within one */
        uint64_t cseed = tu_seed(0xc011a5, (uint64_t)ci, (uint64_t)(ci ? wrank % 2 : 0));

        for (ti = 0; ti < g_ntypes; ti++) {
            const tinfo *t = &g_types[ti];
            if (!t->usable || (g_quick && !t->quick))
                continue;
            for (op = 0; op < O_NOPS; op++) {
                if (!op_valid(t, op))
                    continue;
                for (c = 0; c < g_ncounts; c++)
                    for (form = 0; form < 2; form++)
                        run_predef(t, op, g_counts[c], form, comms[ci], cnames[ci], cseed);
            }
        }
        for (i = 0; i < (int)(sizeof g_dcases / sizeof g_dcases[0]); i++) {
            if (!g_derived_builtin_ok &&
                (g_dcases[i].comb == C_SUM || g_dcases[i].comb == C_MIN))
                continue;
            for (c = 0; c < g_ncounts; c++)
                for (form = 0; form < 2; form++)
                    run_derived(&g_dcases[i], g_counts[c], form, comms[ci], cnames[ci], cseed);
        }
    }
    if (g_large) {
        run_large(MPI_COMM_WORLD, 1, 0);
        run_large(MPI_COMM_WORLD, 1, 1);
        run_large(MPI_COMM_WORLD, 0, 0);
        run_large(MPI_COMM_WORLD, 0, 1);
    }
    if (g_verbose && wrank == 0)
        printf("  elapsed %.2f s\n", MPI_Wtime() - t0);
    if (g_threads != NULL)
        printf("test_allreduce: rank %d: %d threads named %s*\n", wrank,
               count_threads(g_threads), g_threads);

    MPI_Comm_free(&comms[1]);
    free_derived();
    rc = tu_finish();
    MPI_Finalize();
    return rc;
}
