/*
 * collar - unit test of the host reduction loops (src/reduce/host_reduce.c).
 *
 * Standalone, no MPI, and no libm (the few helpers it needs are below):
 *   gcc -std=c11 -Wall -Wextra -O1 -g tests/unit/test_reduce.c \
 *       src/reduce/host_reduce.c -o test_reduce && ./test_reduce
 *
 * For every supported (type, op) pair the test generates operands suited to
 * the op, computes the expected result with its own scalar code (wider
 * precision where that is exact or correctly rounded, an independent
 * round-to-nearest-even encoder for float16 / bfloat16) and compares, at
 * counts 0, 1, 7 and 1000, with aligned and 1-byte-misaligned buffers and
 * with in == inout.  It also checks the validity table, that unsupported
 * pairs return -1 and write nothing, sizes and names, and hand-picked wrap,
 * rounding and NaN cases.
 *
 * One line per failed check; last line: "test_reduce: N passed, N failed".
 * Exit status 0 when nothing failed, 1 otherwise.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/reduce/reduce.h"
#include "rng.h"

/* ------------------------------------------------------------ bookkeeping */

static unsigned long n_passed, n_failed;

static int check(int ok, const char *fmt, ...)
{
    if (ok) {
        n_passed++;
        return 1;
    }
    n_failed++;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    return 0;
}

static uint64_t rnd_below(uint64_t n)
{
    return rnd() % n;
}

/* Uniform in [lo, hi). */
static double rnd_range(double lo, double hi)
{
    return lo + (hi - lo) * ((double)(rnd() >> 11) * 0x1p-53);
}

/* ------------------------------------------------------------- test types */

/* The pair types, declared here independently of the library. */
typedef struct { float v;       int k; } t_float_int;
typedef struct { double v;      int k; } t_double_int;
typedef struct { long v;        int k; } t_long_int;
typedef struct { int v;         int k; } t_2int;
typedef struct { short v;       int k; } t_short_int;
typedef struct { long double v; int k; } t_long_double_int;

enum kind {
    K_SINT, K_UINT, K_BOOL, K_BYTE,
    K_F16, K_BF16, K_FLT, K_DBL, K_LDBL,
    K_CFLT, K_CDBL, K_CLDBL,
    K_PFLT, K_PDBL, K_PLONG, K_P2INT, K_PSHORT, K_PLDBL
};

#define OPB(op) (1u << (op))
#define OPS_INTEGER (OPB(COLLAR_OP_SUM) | OPB(COLLAR_OP_PROD) |                \
                     OPB(COLLAR_OP_MIN) | OPB(COLLAR_OP_MAX) |                 \
                     OPB(COLLAR_OP_LAND) | OPB(COLLAR_OP_LOR) |                \
                     OPB(COLLAR_OP_LXOR) | OPB(COLLAR_OP_BAND) |               \
                     OPB(COLLAR_OP_BOR) | OPB(COLLAR_OP_BXOR))
#define OPS_FLOAT   (OPB(COLLAR_OP_SUM) | OPB(COLLAR_OP_PROD) |                \
                     OPB(COLLAR_OP_MIN) | OPB(COLLAR_OP_MAX))
#define OPS_COMPLEX (OPB(COLLAR_OP_SUM) | OPB(COLLAR_OP_PROD))
#define OPS_LOGICAL (OPB(COLLAR_OP_LAND) | OPB(COLLAR_OP_LOR) |                \
                     OPB(COLLAR_OP_LXOR))
#define OPS_BITWISE (OPB(COLLAR_OP_BAND) | OPB(COLLAR_OP_BOR) |                \
                     OPB(COLLAR_OP_BXOR))
#define OPS_LOC     (OPB(COLLAR_OP_MINLOC) | OPB(COLLAR_OP_MAXLOC))

struct tdt {
    collar_dtype_t dt;
    const char    *label;   /* for messages; not compared with the library */
    enum kind      kind;
    size_t         size;    /* expected sizeof */
    int            bits;    /* integer width, for the integer kinds */
    unsigned       ops;     /* the ops MPI allows on it */
};

static const struct tdt dts[] = {
    { COLLAR_DT_INT8,    "INT8",    K_SINT, sizeof(int8_t),   8,  OPS_INTEGER },
    { COLLAR_DT_INT16,   "INT16",   K_SINT, sizeof(int16_t),  16, OPS_INTEGER },
    { COLLAR_DT_INT32,   "INT32",   K_SINT, sizeof(int32_t),  32, OPS_INTEGER },
    { COLLAR_DT_INT64,   "INT64",   K_SINT, sizeof(int64_t),  64, OPS_INTEGER },
    { COLLAR_DT_UINT8,   "UINT8",   K_UINT, sizeof(uint8_t),  8,  OPS_INTEGER },
    { COLLAR_DT_UINT16,  "UINT16",  K_UINT, sizeof(uint16_t), 16, OPS_INTEGER },
    { COLLAR_DT_UINT32,  "UINT32",  K_UINT, sizeof(uint32_t), 32, OPS_INTEGER },
    { COLLAR_DT_UINT64,  "UINT64",  K_UINT, sizeof(uint64_t), 64, OPS_INTEGER },
    { COLLAR_DT_FLOAT16, "FLOAT16", K_F16,  2,                0,  OPS_FLOAT },
    { COLLAR_DT_BFLOAT16,"BFLOAT16",K_BF16, 2,                0,  OPS_FLOAT },
    { COLLAR_DT_FLOAT,   "FLOAT",   K_FLT,  sizeof(float),    0,  OPS_FLOAT },
    { COLLAR_DT_DOUBLE,  "DOUBLE",  K_DBL,  sizeof(double),   0,  OPS_FLOAT },
    { COLLAR_DT_LONG_DOUBLE, "LONG_DOUBLE", K_LDBL, sizeof(long double), 0, OPS_FLOAT },
    { COLLAR_DT_BOOL,    "BOOL",    K_BOOL, sizeof(_Bool),    8,  OPS_LOGICAL },
    { COLLAR_DT_BYTE,    "BYTE",    K_BYTE, 1,                8,  OPS_BITWISE },
    { COLLAR_DT_FLOAT_COMPLEX, "FLOAT_COMPLEX", K_CFLT,
      sizeof(float _Complex), 0, OPS_COMPLEX },
    { COLLAR_DT_DOUBLE_COMPLEX, "DOUBLE_COMPLEX", K_CDBL,
      sizeof(double _Complex), 0, OPS_COMPLEX },
    { COLLAR_DT_LONG_DOUBLE_COMPLEX, "LONG_DOUBLE_COMPLEX", K_CLDBL,
      sizeof(long double _Complex), 0, OPS_COMPLEX },
    { COLLAR_DT_FLOAT_INT, "FLOAT_INT", K_PFLT, sizeof(t_float_int), 0, OPS_LOC },
    { COLLAR_DT_DOUBLE_INT, "DOUBLE_INT", K_PDBL, sizeof(t_double_int), 0, OPS_LOC },
    { COLLAR_DT_LONG_INT, "LONG_INT", K_PLONG, sizeof(t_long_int), 0, OPS_LOC },
    { COLLAR_DT_2INT,    "2INT",    K_P2INT, sizeof(t_2int),  0,  OPS_LOC },
    { COLLAR_DT_SHORT_INT, "SHORT_INT", K_PSHORT, sizeof(t_short_int), 0, OPS_LOC },
    { COLLAR_DT_LONG_DOUBLE_INT, "LONG_DOUBLE_INT", K_PLDBL,
      sizeof(t_long_double_int), 0, OPS_LOC },
};
#define N_DTS (sizeof dts / sizeof dts[0])

static const char *const op_labels[COLLAR_OP_COUNT] = {
    "SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR",
    "BAND", "BOR", "BXOR", "MINLOC", "MAXLOC"
};

/* ---------------------------------------------------------- element access */

/* Bytes of a long double that carry its value (x87 extended: 10 of 16).  The
 * rest are padding; the test writes zeros there so that buffers are fully
 * defined (valgrind) and never compares them. */
#if LDBL_MANT_DIG == 64
#define LD_VALUE_BYTES 10
#else
#define LD_VALUE_BYTES sizeof(long double)
#endif

static uint64_t get_bits(const unsigned char *p, size_t bytes)
{
    uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
    switch (bytes) {
    case 1:  memcpy(&u8, p, 1);  return u8;
    case 2:  memcpy(&u16, p, 2); return u16;
    case 4:  memcpy(&u32, p, 4); return u32;
    default: memcpy(&u64, p, 8); return u64;
    }
}

static void put_bits(unsigned char *p, size_t bytes, uint64_t v)
{
    uint8_t u8 = (uint8_t)v; uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v; uint64_t u64 = v;
    switch (bytes) {
    case 1:  memcpy(p, &u8, 1);  break;
    case 2:  memcpy(p, &u16, 2); break;
    case 4:  memcpy(p, &u32, 4); break;
    default: memcpy(p, &u64, 8); break;
    }
}

static float get_f(const unsigned char *p)        { float v; memcpy(&v, p, sizeof v); return v; }
static double get_d(const unsigned char *p)       { double v; memcpy(&v, p, sizeof v); return v; }
static long double get_ld(const unsigned char *p) { long double v; memcpy(&v, p, sizeof v); return v; }
static void put_f(unsigned char *p, float v)      { memcpy(p, &v, sizeof v); }
static void put_d(unsigned char *p, double v)     { memcpy(p, &v, sizeof v); }

static void put_ld(unsigned char *p, long double v)
{
    memset(p, 0, sizeof v);
    memcpy(p, &v, LD_VALUE_BYTES);
}

static int get_int(const unsigned char *p) { int v; memcpy(&v, p, sizeof v); return v; }
static void put_int(unsigned char *p, int v) { memcpy(p, &v, sizeof v); }

/* Sign-extend the low nbits of x. */
static int64_t sext(uint64_t x, int nbits)
{
    uint64_t mask = nbits == 64 ? ~0ull : (1ull << nbits) - 1;
    uint64_t sign = 1ull << (nbits - 1);
    x &= mask;
    if (x & sign)
        return -(int64_t)(~x & mask) - 1;
    return (int64_t)x;
}

static uint64_t width_mask(int nbits)
{
    return nbits == 64 ? ~0ull : (1ull << nbits) - 1;
}

/* ------------------------------------------------- small libm stand-ins */

/* 2^e as a double, exact, for -1022 <= e <= 1023 (normal range). */
static double pow2(int e)
{
    uint64_t bits = (uint64_t)(e + 1023) << 52;
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* floor(log2(x)) for a positive normal double. */
static int ilog2d(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (int)((bits >> 52) & 0x7FF) - 1023;
}

/* Round a nonnegative double below 2^52 to an integer, ties to even. */
static double round_half_even(double t)
{
    double fl = (double)(uint64_t)t;     /* truncation = floor for t >= 0 */
    double frac = t - fl;                /* exact */
    if (frac > 0.5 || (frac == 0.5 && ((uint64_t)fl & 1)))
        fl += 1;
    return fl;
}

static long double abs_ld(long double x)
{
    return x < 0 ? -x : x;
}

/* --------------------------------------- reference 16-bit float codec */

/* A binary float with eb exponent bits and mb stored mantissa bits:
 * float16 is (5, 10), bfloat16 is (8, 7). */
struct mini { int eb, mb; };
static const struct mini MINI_F16  = { 5, 10 };
static const struct mini MINI_BF16 = { 8, 7 };

static int mini_bias(struct mini f) { return (1 << (f.eb - 1)) - 1; }
static unsigned mini_expmask(struct mini f) { return ((1u << f.eb) - 1) << f.mb; }
static unsigned mini_mantmask(struct mini f) { return (1u << f.mb) - 1; }

static int mini_isnan(struct mini f, unsigned h)
{
    return (h & mini_expmask(f)) == mini_expmask(f) && (h & mini_mantmask(f));
}

static double mini_to_double(struct mini f, unsigned h)
{
    unsigned e = (h & mini_expmask(f)) >> f.mb;
    unsigned m = h & mini_mantmask(f);
    int neg = (h >> (f.eb + f.mb)) & 1;
    double v;

    if (e == (1u << f.eb) - 1)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = (double)m * pow2(1 - mini_bias(f) - f.mb);
    else
        v = (double)(m + (1u << f.mb)) * pow2((int)e - mini_bias(f) - f.mb);
    return neg ? -v : v;
}

/* Round x to the nearest mini, ties to even, by scaling to an integer
 * significand and rounding that.  x must be 0, inf, NaN or a normal double
 * (all sums and products of two minis are). */
static unsigned double_to_mini(struct mini f, double x)
{
    unsigned sign = signbit(x) ? 1u << (f.eb + f.mb) : 0;
    unsigned inf  = sign | mini_expmask(f);
    double ax = x < 0 ? -x : x;
    int bias = mini_bias(f), emin = 1 - bias, e, qexp;
    double r;

    if (isnan(x))
        return mini_expmask(f) | (1u << (f.mb - 1));
    if (isinf(x))
        return inf;
    if (ax == 0)
        return sign;
    e = ilog2d(ax);                      /* ax = [1, 2) * 2^e */
    qexp = (e > emin ? e : emin) - f.mb;
    r = round_half_even(ax * pow2(-qexp)); /* significand in units of 2^qexp */
    if (r >= pow2(f.mb + 1)) {           /* rounded up to the next binade */
        r /= 2;
        qexp++;
    }
    if (r >= pow2(f.mb)) {               /* normal */
        int ef = qexp + f.mb + bias;
        if (ef >= (1 << f.eb) - 1)
            return inf;
        return sign | ((unsigned)ef << f.mb) | ((unsigned)r - (1u << f.mb));
    }
    return sign | (unsigned)r;           /* subnormal or zero */
}

/* Distance in ulps between two non-NaN encodings (sign-magnitude order). */
static long mini_ulps(struct mini f, unsigned x, unsigned y)
{
    unsigned smask = 1u << (f.eb + f.mb);
    long kx = (x & smask) ? -(long)(x & ~smask) : (long)x;
    long ky = (y & smask) ? -(long)(y & ~smask) : (long)y;
    return labs(kx - ky);
}

/* ------------------------------------------------------------- generators */

static uint64_t gen_int(const struct tdt *t, collar_op_t op)
{
    int nb = t->bits, sgn = t->kind == K_SINT;
    uint64_t x = rnd();

    if (t->kind == K_BOOL)
        return rnd_below(2);
    switch (op) {
    case COLLAR_OP_SUM:
        /* Full range wraps often; the reference is exact in 64 bits except
         * for 64-bit types, kept in range here (wrap tested separately). */
        if (nb == 64)
            x = sgn ? (uint64_t)((int64_t)(x >> 1) - ((int64_t)1 << 62)) : x >> 1;
        break;
    case COLLAR_OP_PROD:
        if (nb == 64)
            x = sgn ? (uint64_t)((int64_t)(x >> 33) - ((int64_t)1 << 30)) : x >> 32;
        break;
    case COLLAR_OP_MIN:
    case COLLAR_OP_MAX:
        if (rnd_below(4) == 0)           /* small: equal pairs happen */
            x = (uint64_t)((int64_t)rnd_below(5) - 2);
        break;
    case COLLAR_OP_LAND:
    case COLLAR_OP_LOR:
    case COLLAR_OP_LXOR:
        switch (rnd_below(4)) {
        case 0:  x = 0; break;
        case 1:  x = 1ull << (nb - 1); break;      /* only the top bit */
        default: if ((x & width_mask(nb)) == 0) x = 1; break;
        }
        break;
    default:
        break;
    }
    return x & width_mask(nb);
}

static unsigned gen_mini(struct mini f, collar_op_t op)
{
    unsigned smask = 1u << (f.eb + f.mb);
    unsigned r = (unsigned)rnd_below(64);
    unsigned h;

    if (r == 0)
        return mini_expmask(f) | (unsigned)(rnd() & mini_mantmask(f)) | 1u; /* NaN */
    if (r == 1)
        return mini_expmask(f) | (rnd_below(2) ? smask : 0);               /* inf */
    if (r == 2)
        return rnd_below(2) ? smask : 0;                                   /* +-0 */
    if (r < 6)                                                             /* subnormal */
        return (unsigned)(rnd() & (smask | mini_mantmask(f)));
    do {
        h = (unsigned)(rnd() & (2 * smask - 1));
        if (op == COLLAR_OP_PROD && rnd_below(2)) {
            /* exponent near the bias: products stay in range */
            unsigned ef = (unsigned)(mini_bias(f) - 4 + (int)rnd_below(9));
            h = (h & ~mini_expmask(f)) | (ef << f.mb);
        }
    } while ((h & mini_expmask(f)) == mini_expmask(f));
    return h;
}

/* A random long double in the style of the type T: p significand bits,
 * binary exponent in [elo, ehi], with the occasional special value. */
static long double gen_real(int p, int elo, int ehi, long double tiny,
                            long double huge, int specials)
{
    long double v;
    if (specials) {
        switch (rnd_below(40)) {
        case 0: return 0.0L;
        case 1: return -0.0L;
        case 2: return (long double)INFINITY;
        case 3: return -(long double)INFINITY;
        case 4: return (long double)NAN;
        case 5: return rnd_below(2) ? tiny : -tiny;
        case 6: return rnd_below(2) ? huge : -huge;
        default: break;
        }
    }
    /* p random bits, leading one set: exact in the target type. */
    uint64_t m = (rnd() >> (64 - p)) | (1ull << (p - 1));
    v = (long double)m *
        (long double)pow2(elo + (int)rnd_below((uint64_t)(ehi - elo + 1)) - (p - 1));
    return rnd_below(2) ? -v : v;
}

static float gen_float(collar_op_t op)
{
    return (float)gen_real(FLT_MANT_DIG, -30, 30, FLT_TRUE_MIN, FLT_MAX,
                           op != COLLAR_OP_PROD || rnd_below(2));
}

static double gen_double(collar_op_t op)
{
    return (double)gen_real(DBL_MANT_DIG, -60, 60, DBL_TRUE_MIN, DBL_MAX,
                            op != COLLAR_OP_PROD || rnd_below(2));
}

static long double gen_ldouble(collar_op_t op)
{
    return gen_real(LDBL_MANT_DIG < 64 ? LDBL_MANT_DIG : 64, -60, 60,
                    LDBL_TRUE_MIN, LDBL_MAX,
                    op != COLLAR_OP_PROD || rnd_below(2));
}

/* A small value with a fractional part, for complex operands. */
static double gen_small(void)
{
    return rnd_range(-8.0, 8.0);
}

/* Pair-type value: a small range so that ties are common. */
static int gen_pair_value(void)
{
    return (int)rnd_below(7) - 3;
}

static int gen_pair_index(void)
{
    return (int)rnd_below(12) - 3;
}

/*
 * Generate element i of `in` (a) and of `inout` (b).  For MIN/MAX/MINLOC/
 * MAXLOC, b sometimes copies a so that equal values are exercised.
 */
static void gen_elem(const struct tdt *t, collar_op_t op,
                     unsigned char *a, unsigned char *b)
{
    int same = (op == COLLAR_OP_MIN || op == COLLAR_OP_MAX) && rnd_below(8) == 0;
    size_t sz = t->size;

    memset(a, 0, sz);
    memset(b, 0, sz);
    switch (t->kind) {
    case K_SINT: case K_UINT: case K_BOOL: case K_BYTE:
        put_bits(a, sz, gen_int(t, op));
        put_bits(b, sz, gen_int(t, op));
        break;
    case K_F16: case K_BF16: {
        struct mini f = t->kind == K_F16 ? MINI_F16 : MINI_BF16;
        unsigned x = gen_mini(f, op), y = gen_mini(f, op);
        if (same && rnd_below(2))          /* +0 vs -0 */
            x = 0, y = 1u << (f.eb + f.mb);
        put_bits(a, 2, x);
        put_bits(b, 2, y);
        break;
    }
    case K_FLT:
        put_f(a, gen_float(op));
        put_f(b, gen_float(op));
        break;
    case K_DBL:
        put_d(a, gen_double(op));
        put_d(b, gen_double(op));
        break;
    case K_LDBL:
        put_ld(a, gen_ldouble(op));
        put_ld(b, gen_ldouble(op));
        break;
    case K_CFLT:
        for (int c = 0; c < 2; c++) {
            put_f(a + c * sizeof(float), (float)gen_small());
            put_f(b + c * sizeof(float), (float)gen_small());
        }
        break;
    case K_CDBL:
        for (int c = 0; c < 2; c++) {
            put_d(a + c * sizeof(double), gen_small());
            put_d(b + c * sizeof(double), gen_small());
        }
        break;
    case K_CLDBL:
        for (int c = 0; c < 2; c++) {
            put_ld(a + c * sizeof(long double),
                   (long double)gen_small() + (long double)gen_small() * 0x1p-40L);
            put_ld(b + c * sizeof(long double),
                   (long double)gen_small() + (long double)gen_small() * 0x1p-40L);
        }
        break;
    case K_PFLT:
        put_f(a + offsetof(t_float_int, v), (float)gen_pair_value() / 2);
        put_f(b + offsetof(t_float_int, v), (float)gen_pair_value() / 2);
        put_int(a + offsetof(t_float_int, k), gen_pair_index());
        put_int(b + offsetof(t_float_int, k), gen_pair_index());
        break;
    case K_PDBL:
        put_d(a + offsetof(t_double_int, v), gen_pair_value() / 4.0);
        put_d(b + offsetof(t_double_int, v), gen_pair_value() / 4.0);
        put_int(a + offsetof(t_double_int, k), gen_pair_index());
        put_int(b + offsetof(t_double_int, k), gen_pair_index());
        break;
    case K_PLONG: {
        /* Some values beyond 32 bits where long is wider than int. */
        long x = gen_pair_value(), y = gen_pair_value();
        if (sizeof(long) > 4 && rnd_below(4) == 0) {
            x = (long)((unsigned long)x << 40);
            y = (long)((unsigned long)y << 40);
        }
        memcpy(a + offsetof(t_long_int, v), &x, sizeof x);
        memcpy(b + offsetof(t_long_int, v), &y, sizeof y);
        put_int(a + offsetof(t_long_int, k), gen_pair_index());
        put_int(b + offsetof(t_long_int, k), gen_pair_index());
        break;
    }
    case K_P2INT:
        put_int(a + offsetof(t_2int, v), gen_pair_value());
        put_int(b + offsetof(t_2int, v), gen_pair_value());
        put_int(a + offsetof(t_2int, k), gen_pair_index());
        put_int(b + offsetof(t_2int, k), gen_pair_index());
        break;
    case K_PSHORT: {
        short x = (short)gen_pair_value(), y = (short)gen_pair_value();
        memcpy(a + offsetof(t_short_int, v), &x, sizeof x);
        memcpy(b + offsetof(t_short_int, v), &y, sizeof y);
        put_int(a + offsetof(t_short_int, k), gen_pair_index());
        put_int(b + offsetof(t_short_int, k), gen_pair_index());
        break;
    }
    case K_PLDBL:
        put_ld(a + offsetof(t_long_double_int, v), gen_pair_value() / 8.0L);
        put_ld(b + offsetof(t_long_double_int, v), gen_pair_value() / 8.0L);
        put_int(a + offsetof(t_long_double_int, k), gen_pair_index());
        put_int(b + offsetof(t_long_double_int, k), gen_pair_index());
        break;
    }
    if (same)
        memcpy(b, a, sz);
}

/* ------------------------------------------------------- reference results */

/* Low `bits` bits of the exact result of a (op) b on integers. */
static uint64_t ref_int(const struct tdt *t, collar_op_t op, uint64_t a, uint64_t b)
{
    int nb = t->bits, sgn = t->kind == K_SINT;
    int64_t sa = sext(a, nb), sb = sext(b, nb);
    uint64_t r = 0;

    switch (op) {
    case COLLAR_OP_SUM:  r = sgn ? (uint64_t)(sa + sb) : a + b; break;
    case COLLAR_OP_PROD: r = sgn ? (uint64_t)(sa * sb) : a * b; break;
    case COLLAR_OP_MIN:  r = (sgn ? sa <= sb : a <= b) ? a : b; break;
    case COLLAR_OP_MAX:  r = (sgn ? sa >= sb : a >= b) ? a : b; break;
    case COLLAR_OP_LAND: r = (a == 0 || b == 0) ? 0 : 1; break;
    case COLLAR_OP_LOR:  r = (a == 0 && b == 0) ? 0 : 1; break;
    case COLLAR_OP_LXOR: r = ((a == 0) == (b == 0)) ? 0 : 1; break;
    case COLLAR_OP_BAND: r = a & b; break;
    case COLLAR_OP_BOR:  r = a | b; break;
    case COLLAR_OP_BXOR: r = a ^ b; break;
    default: break;
    }
    return r & width_mask(nb);
}

/*
 * MIN / MAX on floating point, the documented MPI-library behaviour: the
 * result is `in` (a) when the values compare equal or are unordered,
 * otherwise the smaller / larger one.  Returns 1 to pick a, 0 to pick b.
 */
static int ref_pick_in(collar_op_t op, long double a, long double b)
{
    if (isnan(a) || isnan(b) || a == b)
        return 1;
    return op == COLLAR_OP_MIN ? !(b < a) : !(b > a);
}

/* Same float value, or both NaN; zeros must agree in sign. */
static int same_ld(long double x, long double y)
{
    if (isnan(x) || isnan(y))
        return isnan(x) && isnan(y);
    return x == y && signbit(x) == signbit(y);
}

static void hexdump(char *out, size_t outlen, const unsigned char *p, size_t n)
{
    size_t used = 0;
    out[0] = 0;
    /* most significant byte first (little-endian hosts) */
    for (size_t i = n; i-- > 0 && used + 3 < outlen;)
        used += (size_t)snprintf(out + used, outlen - used, "%02x", p[i]);
}

/* Complex product reference in long double, compared with a tolerance of a
 * few units of the type's epsilon relative to the size of the terms. */
static int cprod_ok(long double ar, long double ai, long double br, long double bi,
                    long double rr, long double ri, long double eps)
{
    long double er = ar * br - ai * bi, ei = ar * bi + ai * br;
    long double sr = abs_ld(ar * br) + abs_ld(ai * bi);
    long double si = abs_ld(ar * bi) + abs_ld(ai * br);
    return abs_ld(rr - er) <= 4 * eps * sr + LDBL_MIN &&
           abs_ld(ri - ei) <= 4 * eps * si + LDBL_MIN;
}

/* Pair reference per the MPI standard: u = in, v = inout. */
#define LOC_REF(op, u, i, v, j, w, k)                                          \
    do {                                                                       \
        int better_ = (op) == COLLAR_OP_MINLOC ? (u) < (v) : (u) > (v);        \
        if ((u) == (v)) {                                                      \
            (w) = (u);                                                         \
            (k) = (i) < (j) ? (i) : (j);                                       \
        } else if (better_) {                                                  \
            (w) = (u);                                                         \
            (k) = (i);                                                         \
        } else {                                                               \
            (w) = (v);                                                         \
            (k) = (j);                                                         \
        }                                                                      \
    } while (0)

/*
 * Check r = a (op) b for one element.  Returns 1 if right; otherwise writes a
 * description to why.
 */
static int check_elem(const struct tdt *t, collar_op_t op,
                      const unsigned char *a, const unsigned char *b,
                      const unsigned char *r, char *why, size_t whylen)
{
    size_t sz = t->size;
    int ok = 1;

    switch (t->kind) {
    case K_SINT: case K_UINT: case K_BOOL: case K_BYTE: {
        uint64_t want = ref_int(t, op, get_bits(a, sz), get_bits(b, sz));
        ok = get_bits(r, sz) == want;
        break;
    }
    case K_F16: case K_BF16: {
        struct mini f = t->kind == K_F16 ? MINI_F16 : MINI_BF16;
        unsigned x = (unsigned)get_bits(a, 2), y = (unsigned)get_bits(b, 2);
        unsigned got = (unsigned)get_bits(r, 2);
        double dx = mini_to_double(f, x), dy = mini_to_double(f, y);
        if (op == COLLAR_OP_MIN || op == COLLAR_OP_MAX) {
            ok = got == (ref_pick_in(op, dx, dy) ? x : y);
        } else {
            /* Exact in double for float16; for bfloat16 a sum may round in
             * double first, which is innocuous (53 >= 2*8+2). */
            double exact = op == COLLAR_OP_SUM ? dx + dy : dx * dy;
            unsigned want = double_to_mini(f, exact);
            if (isnan(exact))
                ok = mini_isnan(f, got);
            else
                ok = !mini_isnan(f, got) && mini_ulps(f, got, want) <= 1;
        }
        break;
    }
    case K_FLT: {
        float x = get_f(a), y = get_f(b), got = get_f(r), want;
        if (op == COLLAR_OP_MIN || op == COLLAR_OP_MAX)
            want = ref_pick_in(op, x, y) ? x : y;
        else  /* exact in double, then one rounding to float */
            want = (float)(op == COLLAR_OP_SUM ? (double)x + (double)y
                                               : (double)x * (double)y);
        if (isnan(want) && op != COLLAR_OP_MIN && op != COLLAR_OP_MAX)
            ok = isnan(got);
        else
            ok = memcmp(&got, &want, sizeof got) == 0;
        break;
    }
    case K_DBL: {
        /* No wider exactly-rounding type is portable: the reference is the
         * correctly rounded IEEE operation itself, compared bit for bit. */
        double x = get_d(a), y = get_d(b), got = get_d(r), want;
        if (op == COLLAR_OP_MIN || op == COLLAR_OP_MAX)
            want = ref_pick_in(op, x, y) ? x : y;
        else
            want = op == COLLAR_OP_SUM ? y + x : y * x;
        if (isnan(want) && op != COLLAR_OP_MIN && op != COLLAR_OP_MAX)
            ok = isnan(got);
        else
            ok = memcmp(&got, &want, sizeof got) == 0;
        break;
    }
    case K_LDBL: {
        long double x = get_ld(a), y = get_ld(b), got = get_ld(r), want;
        if (op == COLLAR_OP_MIN || op == COLLAR_OP_MAX)
            want = ref_pick_in(op, x, y) ? x : y;
        else
            want = op == COLLAR_OP_SUM ? y + x : y * x;
        ok = same_ld(got, want);
        break;
    }
    case K_CFLT: {
        float xr = get_f(a), xi = get_f(a + 4), yr = get_f(b), yi = get_f(b + 4);
        float gr = get_f(r), gi = get_f(r + 4);
        if (op == COLLAR_OP_SUM)
            ok = gr == (float)((double)xr + yr) && gi == (float)((double)xi + yi);
        else
            ok = cprod_ok(xr, xi, yr, yi, gr, gi, FLT_EPSILON);
        break;
    }
    case K_CDBL: {
        const size_t d = sizeof(double);
        double xr = get_d(a), xi = get_d(a + d), yr = get_d(b), yi = get_d(b + d);
        double gr = get_d(r), gi = get_d(r + d);
        if (op == COLLAR_OP_SUM)
            ok = gr == xr + yr && gi == xi + yi;
        else
            ok = cprod_ok(xr, xi, yr, yi, gr, gi, DBL_EPSILON);
        break;
    }
    case K_CLDBL: {
        const size_t d = sizeof(long double);
        long double xr = get_ld(a), xi = get_ld(a + d);
        long double yr = get_ld(b), yi = get_ld(b + d);
        long double gr = get_ld(r), gi = get_ld(r + d);
        if (op == COLLAR_OP_SUM)
            ok = gr == xr + yr && gi == xi + yi;
        else
            ok = cprod_ok(xr, xi, yr, yi, gr, gi, LDBL_EPSILON);
        break;
    }
    case K_PFLT: {
        float u = get_f(a), v = get_f(b), w = 0;
        int i = get_int(a + offsetof(t_float_int, k));
        int j = get_int(b + offsetof(t_float_int, k)), k = 0;
        LOC_REF(op, u, i, v, j, w, k);
        ok = get_f(r) == w && get_int(r + offsetof(t_float_int, k)) == k;
        break;
    }
    case K_PDBL: {
        double u = get_d(a), v = get_d(b), w = 0;
        int i = get_int(a + offsetof(t_double_int, k));
        int j = get_int(b + offsetof(t_double_int, k)), k = 0;
        LOC_REF(op, u, i, v, j, w, k);
        ok = get_d(r) == w && get_int(r + offsetof(t_double_int, k)) == k;
        break;
    }
    case K_PLONG: {
        long u, v, w = 0, g;
        memcpy(&u, a, sizeof u);
        memcpy(&v, b, sizeof v);
        memcpy(&g, r, sizeof g);
        int i = get_int(a + offsetof(t_long_int, k));
        int j = get_int(b + offsetof(t_long_int, k)), k = 0;
        LOC_REF(op, u, i, v, j, w, k);
        ok = g == w && get_int(r + offsetof(t_long_int, k)) == k;
        break;
    }
    case K_P2INT: {
        int u = get_int(a), v = get_int(b), w = 0;
        int i = get_int(a + offsetof(t_2int, k));
        int j = get_int(b + offsetof(t_2int, k)), k = 0;
        LOC_REF(op, u, i, v, j, w, k);
        ok = get_int(r) == w && get_int(r + offsetof(t_2int, k)) == k;
        break;
    }
    case K_PSHORT: {
        short u, v, w = 0, g;
        memcpy(&u, a, sizeof u);
        memcpy(&v, b, sizeof v);
        memcpy(&g, r, sizeof g);
        int i = get_int(a + offsetof(t_short_int, k));
        int j = get_int(b + offsetof(t_short_int, k)), k = 0;
        LOC_REF(op, u, i, v, j, w, k);
        ok = g == w && get_int(r + offsetof(t_short_int, k)) == k;
        break;
    }
    case K_PLDBL: {
        long double u = get_ld(a), v = get_ld(b), w = 0;
        int i = get_int(a + offsetof(t_long_double_int, k));
        int j = get_int(b + offsetof(t_long_double_int, k)), k = 0;
        LOC_REF(op, u, i, v, j, w, k);
        ok = get_ld(r) == w && get_int(r + offsetof(t_long_double_int, k)) == k;
        break;
    }
    }
    if (!ok) {
        char ha[80], hb[80], hr[80];
        size_t n = sz > 32 ? 32 : sz;
        hexdump(ha, sizeof ha, a, n);
        hexdump(hb, sizeof hb, b, n);
        hexdump(hr, sizeof hr, r, n);
        snprintf(why, whylen, "in=%s inout=%s got=%s", ha, hb, hr);
    }
    return ok;
}

/* -------------------------------------------------------------- sweeps */

#define GUARD 64
#define PAT_IO 0xA5
#define PAT_IN 0x5A

/*
 * One call of collar_reduce_host: `count` elements, inout at io_off and in at
 * in_off bytes past a malloc'd (hence maximally aligned) address, or in ==
 * inout when alias is set.  Checks the return code, every element, that
 * nothing outside the inout range changed and that in did not change.
 */
static void run_case(const struct tdt *t, collar_op_t op, size_t count,
                     size_t io_off, size_t in_off, int alias)
{
    size_t sz = t->size, bytes = count * sz, alloc = bytes + GUARD;
    unsigned char *iobuf = malloc(alloc), *inbuf = malloc(alloc);
    unsigned char *inkeep = malloc(alloc);
    unsigned char *aref = malloc(bytes + 1), *bref = malloc(bytes + 1);
    unsigned char *io, *in;
    char what[160], why[400] = "";
    size_t bad = 0, first_bad = 0;
    int rc;

    if (!iobuf || !inbuf || !inkeep || !aref || !bref) {
        fprintf(stderr, "test_reduce: out of memory\n");
        exit(1);
    }
    snprintf(what, sizeof what, "%s %s count=%zu %s", t->label, op_labels[op],
             count, alias ? "in==inout" : "");
    if (!alias) {
        size_t len = strlen(what);
        snprintf(what + len, sizeof what - len, "inout+%zu in+%zu", io_off, in_off);
    }

    rng_seed(((uint64_t)t->dt << 40) ^ ((uint64_t)op << 32) ^
             ((uint64_t)count << 8) ^ (io_off << 4) ^ (in_off << 2) ^ (uint64_t)alias);
    for (size_t i = 0; i < count; i++) {
        gen_elem(t, op, aref + i * sz, bref + i * sz);
        if (alias)
            memcpy(bref + i * sz, aref + i * sz, sz);
    }

    memset(iobuf, PAT_IO, alloc);
    memset(inbuf, PAT_IN, alloc);
    io = iobuf + io_off;
    in = alias ? io : inbuf + in_off;
    if (bytes) {
        memcpy(io, bref, bytes);
        if (!alias)
            memcpy(in, aref, bytes);
    }
    memcpy(inkeep, inbuf, alloc);

    rc = collar_reduce_host(io, in, count, t->dt, op);
    check(rc == 0, "%s: returned %d, want 0", what, rc);

    for (size_t i = 0; i < count; i++) {
        char w[400];
        if (!check_elem(t, op, aref + i * sz, bref + i * sz, io + i * sz, w, sizeof w)) {
            if (bad++ == 0) {
                first_bad = i;
                memcpy(why, w, sizeof why);
            }
        }
    }
    check(bad == 0, "%s: %zu of %zu elements wrong, first [%zu]: %s",
          what, bad, count, first_bad, why);

    {
        size_t touched = 0;
        for (size_t i = 0; i < alloc; i++)
            if ((i < io_off || i >= io_off + bytes) && iobuf[i] != PAT_IO)
                touched++;
        check(touched == 0, "%s: %zu bytes outside inout[0..count) changed",
              what, touched);
    }
    if (!alias)
        check(memcmp(inbuf, inkeep, alloc) == 0, "%s: in buffer changed", what);

    free(iobuf);
    free(inbuf);
    free(inkeep);
    free(aref);
    free(bref);
}

static void test_supported_pairs(void)
{
    static const size_t counts[] = { 0, 1, 7, 1000 };
    static const size_t offs[][2] = { { 0, 0 }, { 1, 1 }, { 1, 0 }, { 0, 1 } };

    for (size_t d = 0; d < N_DTS; d++) {
        for (int op = 0; op < COLLAR_OP_COUNT; op++) {
            if (!(dts[d].ops & OPB(op)))
                continue;
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
                    run_case(&dts[d], (collar_op_t)op, counts[c],
                             offs[o][0], offs[o][1], 0);
            run_case(&dts[d], (collar_op_t)op, 7, 0, 0, 1);
            run_case(&dts[d], (collar_op_t)op, 7, 1, 1, 1);
        }
    }
}

/* Every pair: the validity answer, and unsupported pairs write nothing. */
static void test_validity(void)
{
    enum { N = 7, BYTES = N * 64 };
    unsigned char io[BYTES], in[BYTES], iokeep[BYTES], inkeep[BYTES];

    for (size_t d = 0; d < N_DTS; d++) {
        for (int op = 0; op < COLLAR_OP_COUNT; op++) {
            const struct tdt *t = &dts[d];
            int want = (t->ops & OPB(op)) != 0;
            int got = collar_reduce_supported(t->dt, (collar_op_t)op);
            check(got == want, "supported(%s, %s) = %d, want %d",
                  t->label, op_labels[op], got, want);
            if (want)
                continue;
            for (size_t i = 0; i < BYTES; i++) {
                io[i] = (unsigned char)(i * 7 + 1);
                in[i] = (unsigned char)(i * 13 + 5);
            }
            memcpy(iokeep, io, BYTES);
            memcpy(inkeep, in, BYTES);
            int rc = collar_reduce_host(io, in, N, t->dt, (collar_op_t)op);
            check(rc == -1, "%s %s (unsupported): returned %d, want -1",
                  t->label, op_labels[op], rc);
            check(memcmp(io, iokeep, BYTES) == 0 && memcmp(in, inkeep, BYTES) == 0,
                  "%s %s (unsupported): a buffer was written",
                  t->label, op_labels[op]);
        }
    }

    /* The "none" / count sentinels. */
    int x[4] = { 1, 2, 3, 4 }, y[4] = { 5, 6, 7, 8 };
    check(!collar_reduce_supported(COLLAR_DT_NONE, COLLAR_OP_SUM),
          "supported(DT_NONE, SUM) != 0");
    check(!collar_reduce_supported(COLLAR_DT_INT32, COLLAR_OP_NONE),
          "supported(INT32, OP_NONE) != 0");
    check(!collar_reduce_supported(COLLAR_DT_COUNT, COLLAR_OP_SUM),
          "supported(DT_COUNT, SUM) != 0");
    check(!collar_reduce_supported(COLLAR_DT_INT32, COLLAR_OP_COUNT),
          "supported(INT32, OP_COUNT) != 0");
    check(collar_reduce_host(x, y, 4, COLLAR_DT_NONE, COLLAR_OP_SUM) == -1 &&
          collar_reduce_host(x, y, 4, COLLAR_DT_INT32, COLLAR_OP_NONE) == -1 &&
          collar_reduce_host(x, y, 4, COLLAR_DT_COUNT, COLLAR_OP_SUM) == -1 &&
          collar_reduce_host(x, y, 4, COLLAR_DT_INT32, COLLAR_OP_COUNT) == -1,
          "reduce with NONE/COUNT type or op did not return -1");
    check(x[0] == 1 && x[1] == 2 && x[2] == 3 && x[3] == 4,
          "reduce with NONE/COUNT type or op wrote to inout");
    /* Three named in the brief. */
    check(collar_reduce_host(x, y, 4, COLLAR_DT_BYTE, COLLAR_OP_SUM) == -1,
          "SUM on BYTE accepted");
    check(collar_reduce_host(x, y, 4, COLLAR_DT_FLOAT, COLLAR_OP_BAND) == -1,
          "BAND on FLOAT accepted");
    check(collar_reduce_host(x, y, 4, COLLAR_DT_INT32, COLLAR_OP_MINLOC) == -1,
          "MINLOC on INT32 accepted");
    /* count 0 touches nothing, not even through NULL. */
    check(collar_reduce_host(NULL, NULL, 0, COLLAR_DT_INT32, COLLAR_OP_SUM) == 0,
          "count 0 with NULL buffers did not return 0");
}

static void test_sizes_and_names(void)
{
    int seen[COLLAR_DT_COUNT] = { 0 };

    check(N_DTS == COLLAR_DT_COUNT, "test table has %zu types, enum has %d",
          (size_t)N_DTS, (int)COLLAR_DT_COUNT);
    for (size_t d = 0; d < N_DTS; d++) {
        const struct tdt *t = &dts[d];
        const char *name = collar_dtype_name(t->dt);
        seen[t->dt]++;
        check(collar_dtype_size(t->dt) == t->size, "size(%s) = %zu, want %zu",
              t->label, collar_dtype_size(t->dt), t->size);
        check(name != NULL && *name && strcmp(name, "none") != 0,
              "name(%s) is %s", t->label, name ? name : "NULL");
        for (size_t e = 0; e < d && name; e++) {
            const char *other = collar_dtype_name(dts[e].dt);
            check(other == NULL || strcmp(name, other) != 0,
                  "name(%s) == name(%s) == \"%s\"", t->label, dts[e].label, name);
        }
    }
    for (int d = 0; d < COLLAR_DT_COUNT; d++)
        check(seen[d] == 1, "type %d appears %d times in the test table", d, seen[d]);
    check(collar_dtype_size(COLLAR_DT_NONE) == 0, "size(DT_NONE) != 0");
    check(collar_dtype_name(COLLAR_DT_NONE) != NULL &&
          strcmp(collar_dtype_name(COLLAR_DT_NONE), "none") == 0,
          "name(DT_NONE) is not \"none\"");

    for (int op = 0; op < COLLAR_OP_COUNT; op++) {
        const char *name = collar_op_name((collar_op_t)op);
        check(name != NULL && *name && strcmp(name, "none") != 0,
              "op name(%s) is %s", op_labels[op], name ? name : "NULL");
        for (int e = 0; e < op && name; e++) {
            const char *other = collar_op_name((collar_op_t)e);
            check(other == NULL || strcmp(name, other) != 0,
                  "op name(%s) == op name(%s) == \"%s\"",
                  op_labels[op], op_labels[e], name);
        }
    }
    check(collar_op_name(COLLAR_OP_NONE) != NULL &&
          strcmp(collar_op_name(COLLAR_OP_NONE), "none") == 0,
          "op name(OP_NONE) is not \"none\"");
}

/* ------------------------------------------------------- hand-picked cases */

struct bits_case {
    collar_dtype_t dt;
    collar_op_t    op;
    uint64_t       in, inout, want;   /* raw bits of one element */
    const char    *what;
};

static void run_bits_cases(const struct bits_case *cs, size_t n, int nan_ok_mask)
{
    for (size_t i = 0; i < n; i++) {
        const struct bits_case *c = &cs[i];
        size_t sz = collar_dtype_size(c->dt);
        unsigned char io[9], in[9];     /* element at offset 1: unaligned */
        memset(io, 0, sizeof io);
        memset(in, 0, sizeof in);
        put_bits(io + 1, sz, c->inout);
        put_bits(in + 1, sz, c->in);
        int rc = collar_reduce_host(io + 1, in + 1, 1, c->dt, c->op);
        uint64_t got = get_bits(io + 1, sz);
        int ok = got == c->want;
        if (!ok && nan_ok_mask && c->want == (uint64_t)nan_ok_mask) {
            /* want "any NaN" of a 16-bit float */
            struct mini f = c->dt == COLLAR_DT_FLOAT16 ? MINI_F16 : MINI_BF16;
            ok = mini_isnan(f, (unsigned)got);
        }
        check(rc == 0 && ok, "%s: got 0x%llx, want 0x%llx (rc %d)", c->what,
              (unsigned long long)got, (unsigned long long)c->want, rc);
    }
}

static void test_integer_wrap(void)
{
    static const struct bits_case cs[] = {
        { COLLAR_DT_INT8,   COLLAR_OP_SUM,  0x7F, 0x01, 0x80, "int8 127+1 = -128" },
        { COLLAR_DT_INT8,   COLLAR_OP_SUM,  0x80, 0xFF, 0x7F, "int8 -128+-1 = 127" },
        { COLLAR_DT_INT8,   COLLAR_OP_SUM,  100, 100, 0xC8, "int8 100+100 = -56" },
        { COLLAR_DT_INT8,   COLLAR_OP_SUM,  0x80, 0x80, 0x00, "int8 -128+-128 = 0" },
        { COLLAR_DT_UINT8,  COLLAR_OP_SUM,  0xFF, 0x01, 0x00, "uint8 255+1 = 0" },
        { COLLAR_DT_INT8,   COLLAR_OP_PROD, 0x80, 0xFF, 0x80, "int8 -128*-1 = -128" },
        { COLLAR_DT_INT8,   COLLAR_OP_PROD, 16, 16, 0x00, "int8 16*16 = 0" },
        { COLLAR_DT_INT16,  COLLAR_OP_PROD, 300, 300, 24464, "int16 300*300" },
        { COLLAR_DT_UINT16, COLLAR_OP_PROD, 0xFFFF, 0xFFFF, 1, "uint16 65535^2 = 1" },
        { COLLAR_DT_INT16,  COLLAR_OP_SUM,  0x7FFF, 1, 0x8000, "int16 max+1" },
        { COLLAR_DT_INT32,  COLLAR_OP_SUM,  0x7FFFFFFF, 1, 0x80000000, "int32 max+1" },
        { COLLAR_DT_INT32,  COLLAR_OP_PROD, 0x80000000, 0xFFFFFFFF, 0x80000000,
          "int32 min*-1 = min" },
        { COLLAR_DT_UINT32, COLLAR_OP_PROD, 0xFFFFFFFF, 0xFFFFFFFF, 1, "uint32 max^2 = 1" },
        { COLLAR_DT_INT64,  COLLAR_OP_SUM,  0x7FFFFFFFFFFFFFFFull, 1,
          0x8000000000000000ull, "int64 max+1 = min" },
        { COLLAR_DT_INT64,  COLLAR_OP_SUM,  0x8000000000000000ull,
          0x8000000000000000ull, 0, "int64 min+min = 0" },
        { COLLAR_DT_INT64,  COLLAR_OP_PROD, 0x8000000000000000ull,
          0xFFFFFFFFFFFFFFFFull, 0x8000000000000000ull, "int64 min*-1 = min" },
        { COLLAR_DT_INT64,  COLLAR_OP_PROD, 0x100000000ull, 0x100000000ull, 0,
          "int64 2^32*2^32 = 0" },
        { COLLAR_DT_UINT64, COLLAR_OP_PROD, 0xFFFFFFFFFFFFFFFFull,
          0xFFFFFFFFFFFFFFFFull, 1, "uint64 max^2 = 1" },
        { COLLAR_DT_UINT64, COLLAR_OP_SUM,  0xFFFFFFFFFFFFFFFFull, 2, 1,
          "uint64 max+2 = 1" },
        { COLLAR_DT_INT16,  COLLAR_OP_LAND, 0x100, 0x1, 1, "int16 0x100 && 1" },
        { COLLAR_DT_INT64,  COLLAR_OP_LXOR, 0x8000000000000000ull, 0, 1,
          "int64 top bit ^^ 0" },
        { COLLAR_DT_INT8,   COLLAR_OP_MIN,  0x80, 0x7F, 0x80, "int8 min(-128,127)" },
        { COLLAR_DT_UINT8,  COLLAR_OP_MIN,  0x80, 0x7F, 0x7F, "uint8 min(128,127)" },
        { COLLAR_DT_INT64,  COLLAR_OP_MAX,  0x8000000000000000ull, 5, 5,
          "int64 max(min,5)" },
    };
    run_bits_cases(cs, sizeof cs / sizeof cs[0], 0);
}

#define ANY_NAN 0xFFFF  /* marker: any NaN encoding is right */

static void test_16bit_floats(void)
{
    static const struct bits_case cs[] = {
        /* float16 */
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x3C00, 0x3C00, 0x4000, "f16 1+1" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x7BFF, 0x4C00, 0x7C00,
          "f16 65504+16 ties to even = inf" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x7BFF, 0x4800, 0x7BFF,
          "f16 65504+8 = 65504" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x3C00, 0x1000, 0x3C00,
          "f16 1+2^-11 ties to even (down)" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x3C01, 0x1000, 0x3C02,
          "f16 (1+2^-10)+2^-11 ties to even (up)" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x0001, 0x0001, 0x0002,
          "f16 subnormal+subnormal" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x03FF, 0x0001, 0x0400,
          "f16 max subnormal + min subnormal = min normal" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x3C00, 0xBC00, 0x0000, "f16 1-1 = +0" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_PROD, 0x0001, 0x3800, 0x0000,
          "f16 2^-24*0.5 ties to 0" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_PROD, 0x0003, 0x3800, 0x0002,
          "f16 3*2^-24*0.5 ties to 2*2^-24" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_PROD, 0x0001, 0xB800, 0x8000,
          "f16 2^-24*-0.5 = -0" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_PROD, 0x3C01, 0x3C01, 0x3C02,
          "f16 (1+2^-10)^2" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_PROD, 0x5C00, 0x5C00, 0x7C00,
          "f16 256*256 overflows to inf" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_PROD, 0x5BFF, 0x5BFF, 0x7BFE,
          "f16 255.875^2 = 65472" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_PROD, 0x0400, 0x3400, 0x0100,
          "f16 min normal * 0.25 = subnormal" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x7C00, 0xFC00, ANY_NAN, "f16 inf-inf" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x7E00, 0x3C00, ANY_NAN, "f16 NaN+1" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x3C00, 0x7C01, ANY_NAN, "f16 1+sNaN" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_PROD, 0x7C00, 0x0000, ANY_NAN, "f16 inf*0" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_SUM, 0x7C00, 0x3C00, 0x7C00, "f16 inf+1" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_MIN, 0x7E00, 0x3C00, 0x7E00,
          "f16 min(in=NaN, inout=1) = in" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_MIN, 0x3C00, 0x7E00, 0x3C00,
          "f16 min(in=1, inout=NaN) = in" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_MAX, 0x0000, 0x8000, 0x0000,
          "f16 max(in=+0, inout=-0) = in" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_MIN, 0x8000, 0x0000, 0x8000,
          "f16 min(in=-0, inout=+0) = in" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_MIN, 0xBC00, 0x0001, 0xBC00, "f16 min(-1, tiny)" },
        { COLLAR_DT_FLOAT16, COLLAR_OP_MAX, 0xFC00, 0x7BFF, 0x7BFF, "f16 max(-inf, max)" },
        /* bfloat16 */
        { COLLAR_DT_BFLOAT16, COLLAR_OP_SUM, 0x3F80, 0x3F80, 0x4000, "bf16 1+1" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_SUM, 0x7F7F, 0x7F7F, 0x7F80,
          "bf16 max+max = inf" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_SUM, 0x3F80, 0x3B80, 0x3F80,
          "bf16 1+2^-8 ties to even (down)" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_SUM, 0x3F81, 0x3B80, 0x3F82,
          "bf16 (1+2^-7)+2^-8 ties to even (up)" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_SUM, 0x007F, 0x0001, 0x0080,
          "bf16 max subnormal + min subnormal = min normal" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_PROD, 0x0001, 0x3F00, 0x0000,
          "bf16 2^-133*0.5 ties to 0" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_PROD, 0x0003, 0x3F00, 0x0002,
          "bf16 3*2^-133*0.5 ties to 2*2^-133" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_PROD, 0x3F81, 0x3F81, 0x3F82,
          "bf16 (1+2^-7)^2" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_SUM, 0x7F81, 0x3F80, ANY_NAN, "bf16 sNaN+1" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_SUM, 0x7F80, 0xFF80, ANY_NAN, "bf16 inf-inf" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_PROD, 0xFFC0, 0x3F80, ANY_NAN, "bf16 NaN*1" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_MAX, 0x7FC0, 0x3F80, 0x7FC0,
          "bf16 max(in=NaN, inout=1) = in" },
        { COLLAR_DT_BFLOAT16, COLLAR_OP_MAX, 0x3F80, 0x7FC0, 0x3F80,
          "bf16 max(in=1, inout=NaN) = in" },
    };
    run_bits_cases(cs, sizeof cs / sizeof cs[0], ANY_NAN);
}

/* The documented MIN/MAX behaviour on NaN and signed zero for float. */
static void test_float_minmax_nan(void)
{
    float in[4]    = { NAN, 1.0f, 0.0f, -0.0f };
    float inout[4] = { 1.0f, NAN, -0.0f, 0.0f };
    float r[4];    /* want `in` in every lane: unordered or equal */

    memcpy(r, inout, sizeof r);
    check(collar_reduce_host(r, in, 4, COLLAR_DT_FLOAT, COLLAR_OP_MIN) == 0 &&
          isnan(r[0]) && r[1] == 1.0f && !signbit(r[2]) && signbit(r[3]),
          "float MIN NaN/zero semantics: got %g %g %g %g", r[0], r[1], r[2], r[3]);
    memcpy(r, inout, sizeof r);
    check(collar_reduce_host(r, in, 4, COLLAR_DT_FLOAT, COLLAR_OP_MAX) == 0 &&
          isnan(r[0]) && r[1] == 1.0f && !signbit(r[2]) && signbit(r[3]),
          "float MAX NaN/zero semantics: got %g %g %g %g", r[0], r[1], r[2], r[3]);
}

/* Logical ops on BOOL give exactly 0 or 1 (every 0/1 combination). */
static void test_bool_table(void)
{
    static const struct { collar_op_t op; unsigned char want[4]; } t[] = {
        { COLLAR_OP_LAND, { 0, 0, 0, 1 } },
        { COLLAR_OP_LOR,  { 0, 1, 1, 1 } },
        { COLLAR_OP_LXOR, { 0, 1, 1, 0 } },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        _Bool in[4] = { 0, 0, 1, 1 }, io[4] = { 0, 1, 0, 1 };
        int rc = collar_reduce_host(io, in, 4, COLLAR_DT_BOOL, t[i].op);
        check(rc == 0 && memcmp(io, t[i].want, 4) == 0,
              "BOOL %s truth table", op_labels[t[i].op]);
    }
}

int main(void)
{
    test_sizes_and_names();
    test_validity();
    test_integer_wrap();
    test_16bit_floats();
    test_float_minmax_nan();
    test_bool_table();
    test_supported_pairs();

    printf("test_reduce: %lu passed, %lu failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
