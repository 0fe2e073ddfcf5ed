/*
 * collar - host reduction loops.
 *
 * inout[i] = in[i] (op) inout[i] for every (type, op) pair that MPI defines
 * for the predefined C types; see reduce.h.  No MPI, no GPU.
 *
 * Layout of this file:
 *   - tables: element sizes, names, type classes, the validity rule;
 *   - float16 / bfloat16 <-> float conversions;
 *   - ELEMWISE, the one loop macro: it only stamps out a loop body inside a
 *     named function, it never defines a function;
 *   - one reduce_<type>() function per element type with a switch over ops;
 *   - collar_reduce_host(), a switch over types.
 *
 * Semantics chosen to match the MPI libraries (checked against Open MPI's
 * ompi/mca/op/base/op_base_functions.c and MPICH's src/mpi/coll/op/):
 *   - Integer SUM / PROD wrap modulo 2^N.  Both libraries compute in the
 *     signed type and rely on the hardware wrapping; we compute in the
 *     unsigned type of the same width (no undefined behaviour), which gives
 *     the same bits.
 *   - MIN / MAX are plain comparisons, exactly Open MPI's
 *         inout = (inout < in) ? inout : in      (MIN; '>' for MAX)
 *     so when the two values compare equal (+0 vs -0) or are unordered (either
 *     one is a NaN) the result is `in`.  MPICH's ((in > inout) ? inout : in)
 *     picks the same operand in every case.  NaNs are therefore not sticky:
 *     MIN(in = 1.0, inout = NaN) is 1.0, MIN(in = NaN, inout = 1.0) is NaN.
 *   - Logical ops yield 0 or 1 of the element type; any nonzero input is true.
 *   - MINLOC / MAXLOC: strictly smaller (larger) value wins with its index;
 *     equal values keep the smaller index (MPI standard, section 6.9.4).
 *     With a NaN value neither test holds and inout is left as it was.
 *   - float16 / bfloat16 are converted to float, combined and rounded back to
 *     nearest-even.  float carries more than 2p+2 significand bits for both
 *     (24 >= 2*11+2, 24 >= 2*8+2) so the float-then-16-bit double rounding of
 *     one + or * is innocuous: results are correctly rounded.  (If the process
 *     runs with FTZ/DAZ set, e.g. a program linked with -ffast-math, float
 *     subnormals - and hence bfloat16 subnormals - are flushed, as they would
 *     be in the MPI library.)
 *
 * `in` and `inout` must either be the same pointer or not overlap.
 */
#include "reduce.h"

#include <stdint.h>
#include <string.h>

_Static_assert(sizeof(_Bool) == 1, "COLLAR_DT_BOOL is handled as one byte");

/* The pair types of MPI_MINLOC / MPI_MAXLOC, with their C layout. */
typedef struct { float v;       int k; } pair_float_int_t;
typedef struct { double v;      int k; } pair_double_int_t;
typedef struct { long v;        int k; } pair_long_int_t;
typedef struct { int v;         int k; } pair_2int_t;
typedef struct { short v;       int k; } pair_short_int_t;
typedef struct { long double v; int k; } pair_long_double_int_t;

/* ------------------------------------------------------------------ tables */

static const size_t dtype_sizes[COLLAR_DT_COUNT] = {
    [COLLAR_DT_INT8]                = sizeof(int8_t),
    [COLLAR_DT_INT16]               = sizeof(int16_t),
    [COLLAR_DT_INT32]               = sizeof(int32_t),
    [COLLAR_DT_INT64]               = sizeof(int64_t),
    [COLLAR_DT_UINT8]               = sizeof(uint8_t),
    [COLLAR_DT_UINT16]              = sizeof(uint16_t),
    [COLLAR_DT_UINT32]              = sizeof(uint32_t),
    [COLLAR_DT_UINT64]              = sizeof(uint64_t),
    [COLLAR_DT_FLOAT16]             = sizeof(uint16_t),
    [COLLAR_DT_BFLOAT16]            = sizeof(uint16_t),
    [COLLAR_DT_FLOAT]               = sizeof(float),
    [COLLAR_DT_DOUBLE]              = sizeof(double),
    [COLLAR_DT_LONG_DOUBLE]         = sizeof(long double),
    [COLLAR_DT_BOOL]                = sizeof(_Bool),
    [COLLAR_DT_BYTE]                = 1,
    [COLLAR_DT_FLOAT_COMPLEX]       = sizeof(float _Complex),
    [COLLAR_DT_DOUBLE_COMPLEX]      = sizeof(double _Complex),
    [COLLAR_DT_LONG_DOUBLE_COMPLEX] = sizeof(long double _Complex),
    [COLLAR_DT_FLOAT_INT]           = sizeof(pair_float_int_t),
    [COLLAR_DT_DOUBLE_INT]          = sizeof(pair_double_int_t),
    [COLLAR_DT_LONG_INT]            = sizeof(pair_long_int_t),
    [COLLAR_DT_2INT]                = sizeof(pair_2int_t),
    [COLLAR_DT_SHORT_INT]           = sizeof(pair_short_int_t),
    [COLLAR_DT_LONG_DOUBLE_INT]     = sizeof(pair_long_double_int_t),
};

static const char *const dtype_names[COLLAR_DT_COUNT] = {
    [COLLAR_DT_INT8]                = "int8",
    [COLLAR_DT_INT16]               = "int16",
    [COLLAR_DT_INT32]               = "int32",
    [COLLAR_DT_INT64]               = "int64",
    [COLLAR_DT_UINT8]               = "uint8",
    [COLLAR_DT_UINT16]              = "uint16",
    [COLLAR_DT_UINT32]              = "uint32",
    [COLLAR_DT_UINT64]              = "uint64",
    [COLLAR_DT_FLOAT16]             = "float16",
    [COLLAR_DT_BFLOAT16]            = "bfloat16",
    [COLLAR_DT_FLOAT]               = "float",
    [COLLAR_DT_DOUBLE]              = "double",
    [COLLAR_DT_LONG_DOUBLE]         = "long_double",
    [COLLAR_DT_BOOL]                = "bool",
    [COLLAR_DT_BYTE]                = "byte",
    [COLLAR_DT_FLOAT_COMPLEX]       = "float_complex",
    [COLLAR_DT_DOUBLE_COMPLEX]      = "double_complex",
    [COLLAR_DT_LONG_DOUBLE_COMPLEX] = "long_double_complex",
    [COLLAR_DT_FLOAT_INT]           = "float_int",
    [COLLAR_DT_DOUBLE_INT]          = "double_int",
    [COLLAR_DT_LONG_INT]            = "long_int",
    [COLLAR_DT_2INT]                = "2int",
    [COLLAR_DT_SHORT_INT]           = "short_int",
    [COLLAR_DT_LONG_DOUBLE_INT]     = "long_double_int",
};

static const char *const op_names[COLLAR_OP_COUNT] = {
    [COLLAR_OP_SUM]    = "sum",
    [COLLAR_OP_PROD]   = "prod",
    [COLLAR_OP_MIN]    = "min",
    [COLLAR_OP_MAX]    = "max",
    [COLLAR_OP_LAND]   = "land",
    [COLLAR_OP_LOR]    = "lor",
    [COLLAR_OP_LXOR]   = "lxor",
    [COLLAR_OP_BAND]   = "band",
    [COLLAR_OP_BOR]    = "bor",
    [COLLAR_OP_BXOR]   = "bxor",
    [COLLAR_OP_MINLOC] = "minloc",
    [COLLAR_OP_MAXLOC] = "maxloc",
};

static int dtype_valid(collar_dtype_t dt)
{
    return dt >= 0 && dt < COLLAR_DT_COUNT;
}

static int op_valid(collar_op_t op)
{
    return op >= 0 && op < COLLAR_OP_COUNT;
}

size_t collar_dtype_size(collar_dtype_t dt)
{
    return dtype_valid(dt) ? dtype_sizes[dt] : 0;
}

const char *collar_dtype_name(collar_dtype_t dt)
{
    if (dt == COLLAR_DT_NONE)
        return "none";
    return dtype_valid(dt) ? dtype_names[dt] : "invalid";
}

const char *collar_op_name(collar_op_t op)
{
    if (op == COLLAR_OP_NONE)
        return "none";
    return op_valid(op) ? op_names[op] : "invalid";
}

/* The MPI type groups of MPI-4.0 section 6.9.2, restricted to C types. */
typedef enum {
    CLASS_NONE,
    CLASS_INTEGER,  /* C integer */
    CLASS_FLOAT,    /* floating point, including float16 and bfloat16 */
    CLASS_COMPLEX,  /* complex */
    CLASS_LOGICAL,  /* C _Bool */
    CLASS_BYTE,     /* MPI_BYTE */
    CLASS_PAIR      /* MINLOC / MAXLOC pair types */
} dtype_class_t;

static dtype_class_t dtype_class(collar_dtype_t dt)
{
    switch (dt) {
    case COLLAR_DT_INT8:
    case COLLAR_DT_INT16:
    case COLLAR_DT_INT32:
    case COLLAR_DT_INT64:
    case COLLAR_DT_UINT8:
    case COLLAR_DT_UINT16:
    case COLLAR_DT_UINT32:
    case COLLAR_DT_UINT64:
        return CLASS_INTEGER;
    case COLLAR_DT_FLOAT16:
    case COLLAR_DT_BFLOAT16:
    case COLLAR_DT_FLOAT:
    case COLLAR_DT_DOUBLE:
    case COLLAR_DT_LONG_DOUBLE:
        return CLASS_FLOAT;
    case COLLAR_DT_FLOAT_COMPLEX:
    case COLLAR_DT_DOUBLE_COMPLEX:
    case COLLAR_DT_LONG_DOUBLE_COMPLEX:
        return CLASS_COMPLEX;
    case COLLAR_DT_BOOL:
        return CLASS_LOGICAL;
    case COLLAR_DT_BYTE:
        return CLASS_BYTE;
    case COLLAR_DT_FLOAT_INT:
    case COLLAR_DT_DOUBLE_INT:
    case COLLAR_DT_LONG_INT:
    case COLLAR_DT_2INT:
    case COLLAR_DT_SHORT_INT:
    case COLLAR_DT_LONG_DOUBLE_INT:
        return CLASS_PAIR;
    default:
        return CLASS_NONE;
    }
}

int collar_reduce_supported(collar_dtype_t dt, collar_op_t op)
{
    dtype_class_t c = dtype_class(dt);

    switch (op) {
    case COLLAR_OP_SUM:
    case COLLAR_OP_PROD:
        return c == CLASS_INTEGER || c == CLASS_FLOAT || c == CLASS_COMPLEX;
    case COLLAR_OP_MIN:
    case COLLAR_OP_MAX:
        return c == CLASS_INTEGER || c == CLASS_FLOAT;
    case COLLAR_OP_LAND:
    case COLLAR_OP_LOR:
    case COLLAR_OP_LXOR:
        return c == CLASS_INTEGER || c == CLASS_LOGICAL;
    case COLLAR_OP_BAND:
    case COLLAR_OP_BOR:
    case COLLAR_OP_BXOR:
        return c == CLASS_INTEGER || c == CLASS_BYTE;
    case COLLAR_OP_MINLOC:
    case COLLAR_OP_MAXLOC:
        return c == CLASS_PAIR;
    default:
        return 0;
    }
}

/* ------------------------------------------------- 16-bit float conversions */

static inline float bits_to_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static inline uint32_t f32_to_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

/* IEEE binary16 -> float; exact. */
static inline float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp  = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;

    if (exp == 0x1Fu)                       /* inf, NaN (payload kept) */
        return bits_to_f32(sign | 0x7F800000u | (mant << 13));
    if (exp != 0)                           /* normal: rebias 15 -> 127 */
        return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0)                          /* +-0 */
        return bits_to_f32(sign);
    /* Subnormal mant * 2^-24: normalise.  Leading bit at position p < 10
     * means the value is 1.f * 2^(p-24), biased float exponent 103 + p. */
    exp = 113;
    while (!(mant & 0x400u)) {
        mant <<= 1;
        exp--;
    }
    return bits_to_f32(sign | (exp << 23) | ((mant & 0x3FFu) << 13));
}

/* float -> IEEE binary16, round to nearest, ties to even. */
static inline uint16_t f32_to_f16(float f)
{
    uint32_t x    = f32_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax   = x & 0x7FFFFFFFu;

    if (ax >= 0x7F800000u) {                /* inf, NaN */
        if (ax == 0x7F800000u)
            return (uint16_t)(sign | 0x7C00u);
        /* NaN: quiet it, keep the top of the payload. */
        return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
    }
    if (ax >= 0x38800000u) {                /* >= 2^-14: normal half (or inf) */
        /* Rebias 127 -> 15 and round the 13 dropped bits to nearest even;
         * a carry out of the mantissa bumps the exponent, up to 0x7C00
         * (infinity) for values >= 65520. */
        uint32_t r = ax - (112u << 23);
        r += 0x0FFFu + ((r >> 13) & 1u);
        r >>= 13;
        return (uint16_t)(sign | (r >= 0x7C00u ? 0x7C00u : r));
    }
    if (ax < 0x33000000u)                   /* < 2^-25: rounds to +-0 */
        return sign;
    {
        /* Subnormal half: value = m * 2^(e-150) with the 24-bit significand
         * m; in units of 2^-24 that is m >> (126 - e), shift in [14, 24]. */
        uint32_t e     = ax >> 23;
        uint32_t m     = (ax & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126u - e;
        uint32_t q     = m >> shift;
        uint32_t rem   = m & ((1u << shift) - 1u);
        uint32_t half  = 1u << (shift - 1u);  /* 2^-25 itself ties to 0 */
        if (rem > half || (rem == half && (q & 1u)))
            q++;                            /* may become 0x400: min normal */
        return (uint16_t)(sign | q);
    }
}

/* bfloat16 -> float; exact. */
static inline float bf16_to_f32(uint16_t h)
{
    return bits_to_f32((uint32_t)h << 16);
}

/* float -> bfloat16, round to nearest, ties to even; NaN stays NaN. */
static inline uint16_t f32_to_bf16(float f)
{
    uint32_t x = f32_to_bits(f);

    if ((x & 0x7FFFFFFFu) > 0x7F800000u)    /* NaN: truncating could give inf */
        return (uint16_t)((x >> 16) | 0x0040u);
    x += 0x7FFFu + ((x >> 16) & 1u);        /* cannot overflow: x <= 0xFF800000 */
    return (uint16_t)(x >> 16);
}

/* -------------------------------------------------------------- the loop */

static inline int is_aligned(const void *p, size_t align)
{
    return ((uintptr_t)p & (align - 1)) == 0;
}

/*
 * ELEMWISE(T, body...): for k in [0, n): load a = in[k] and b = inout[k] as T,
 * run `body` (which computes the result into b), store b to inout[k].
 * Expects `io`, `in` and `n` in the enclosing function.
 *
 * The alignment of both pointers is checked once; the aligned case is a plain
 * indexed loop the compiler can vectorise (in == io is fine: each element is
 * loaded before it is stored), the unaligned case moves each element through
 * memcpy.  `body` is variadic so that it may contain commas.
 */
#define ELEMWISE(T, ...)                                                      \
    do {                                                                      \
        if (is_aligned(io, _Alignof(T)) && is_aligned(in, _Alignof(T))) {     \
            T *o_ = (T *)io;                                                  \
            const T *i_ = (const T *)in;                                      \
            for (size_t k_ = 0; k_ < n; k_++) {                               \
                T a = i_[k_];                                                 \
                T b = o_[k_];                                                 \
                __VA_ARGS__;                                                  \
                o_[k_] = b;                                                   \
            }                                                                 \
        } else {                                                              \
            unsigned char *o_ = (unsigned char *)io;                          \
            const unsigned char *i_ = (const unsigned char *)in;              \
            for (size_t k_ = 0; k_ < n; k_++) {                               \
                T a, b;                                                       \
                memcpy(&a, i_ + k_ * sizeof(T), sizeof(T));                   \
                memcpy(&b, o_ + k_ * sizeof(T), sizeof(T));                   \
                __VA_ARGS__;                                                  \
                memcpy(o_ + k_ * sizeof(T), &b, sizeof(T));                   \
            }                                                                 \
        }                                                                     \
    } while (0)

/* Loop bodies shared by several types. */
#define BODY_MIN   b = (b < a) ? b : a
#define BODY_MAX   b = (b > a) ? b : a
#define BODY_MINLOC                                                           \
    if (a.v < b.v) {                                                          \
        b.v = a.v;                                                            \
        b.k = a.k;                                                            \
    } else if (a.v == b.v && a.k < b.k) {                                     \
        b.k = a.k;                                                            \
    }
#define BODY_MAXLOC                                                           \
    if (a.v > b.v) {                                                          \
        b.v = a.v;                                                            \
        b.k = a.k;                                                            \
    } else if (a.v == b.v && a.k < b.k) {                                     \
        b.k = a.k;                                                            \
    }

/* -------------------------------------------------------- unsigned integers */

/*
 * Arithmetic on uint8_t / uint16_t promotes to int, where 65535 * 65535
 * overflows: those products are taken in unsigned int.  uint32_t and
 * uint64_t arithmetic is already unsigned.  Logical ops give 0 or 1.
 */

static int reduce_uint8(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  ELEMWISE(uint8_t, b = (uint8_t)((unsigned)b + a)); return 0;
    case COLLAR_OP_PROD: ELEMWISE(uint8_t, b = (uint8_t)((unsigned)b * a)); return 0;
    case COLLAR_OP_MIN:  ELEMWISE(uint8_t, BODY_MIN); return 0;
    case COLLAR_OP_MAX:  ELEMWISE(uint8_t, BODY_MAX); return 0;
    case COLLAR_OP_LAND: ELEMWISE(uint8_t, b = (uint8_t)(b != 0 && a != 0)); return 0;
    case COLLAR_OP_LOR:  ELEMWISE(uint8_t, b = (uint8_t)(b != 0 || a != 0)); return 0;
    case COLLAR_OP_LXOR: ELEMWISE(uint8_t, b = (uint8_t)((b != 0) != (a != 0))); return 0;
    case COLLAR_OP_BAND: ELEMWISE(uint8_t, b = (uint8_t)(b & a)); return 0;
    case COLLAR_OP_BOR:  ELEMWISE(uint8_t, b = (uint8_t)(b | a)); return 0;
    case COLLAR_OP_BXOR: ELEMWISE(uint8_t, b = (uint8_t)(b ^ a)); return 0;
    default:             return -1;
    }
}

static int reduce_uint16(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  ELEMWISE(uint16_t, b = (uint16_t)((unsigned)b + a)); return 0;
    case COLLAR_OP_PROD: ELEMWISE(uint16_t, b = (uint16_t)((unsigned)b * a)); return 0;
    case COLLAR_OP_MIN:  ELEMWISE(uint16_t, BODY_MIN); return 0;
    case COLLAR_OP_MAX:  ELEMWISE(uint16_t, BODY_MAX); return 0;
    case COLLAR_OP_LAND: ELEMWISE(uint16_t, b = (uint16_t)(b != 0 && a != 0)); return 0;
    case COLLAR_OP_LOR:  ELEMWISE(uint16_t, b = (uint16_t)(b != 0 || a != 0)); return 0;
    case COLLAR_OP_LXOR: ELEMWISE(uint16_t, b = (uint16_t)((b != 0) != (a != 0))); return 0;
    case COLLAR_OP_BAND: ELEMWISE(uint16_t, b = (uint16_t)(b & a)); return 0;
    case COLLAR_OP_BOR:  ELEMWISE(uint16_t, b = (uint16_t)(b | a)); return 0;
    case COLLAR_OP_BXOR: ELEMWISE(uint16_t, b = (uint16_t)(b ^ a)); return 0;
    default:             return -1;
    }
}

static int reduce_uint32(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  ELEMWISE(uint32_t, b = b + a); return 0;
    case COLLAR_OP_PROD: ELEMWISE(uint32_t, b = b * a); return 0;
    case COLLAR_OP_MIN:  ELEMWISE(uint32_t, BODY_MIN); return 0;
    case COLLAR_OP_MAX:  ELEMWISE(uint32_t, BODY_MAX); return 0;
    case COLLAR_OP_LAND: ELEMWISE(uint32_t, b = (uint32_t)(b != 0 && a != 0)); return 0;
    case COLLAR_OP_LOR:  ELEMWISE(uint32_t, b = (uint32_t)(b != 0 || a != 0)); return 0;
    case COLLAR_OP_LXOR: ELEMWISE(uint32_t, b = (uint32_t)((b != 0) != (a != 0))); return 0;
    case COLLAR_OP_BAND: ELEMWISE(uint32_t, b = b & a); return 0;
    case COLLAR_OP_BOR:  ELEMWISE(uint32_t, b = b | a); return 0;
    case COLLAR_OP_BXOR: ELEMWISE(uint32_t, b = b ^ a); return 0;
    default:             return -1;
    }
}

static int reduce_uint64(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  ELEMWISE(uint64_t, b = b + a); return 0;
    case COLLAR_OP_PROD: ELEMWISE(uint64_t, b = b * a); return 0;
    case COLLAR_OP_MIN:  ELEMWISE(uint64_t, BODY_MIN); return 0;
    case COLLAR_OP_MAX:  ELEMWISE(uint64_t, BODY_MAX); return 0;
    case COLLAR_OP_LAND: ELEMWISE(uint64_t, b = (uint64_t)(b != 0 && a != 0)); return 0;
    case COLLAR_OP_LOR:  ELEMWISE(uint64_t, b = (uint64_t)(b != 0 || a != 0)); return 0;
    case COLLAR_OP_LXOR: ELEMWISE(uint64_t, b = (uint64_t)((b != 0) != (a != 0))); return 0;
    case COLLAR_OP_BAND: ELEMWISE(uint64_t, b = b & a); return 0;
    case COLLAR_OP_BOR:  ELEMWISE(uint64_t, b = b | a); return 0;
    case COLLAR_OP_BXOR: ELEMWISE(uint64_t, b = b ^ a); return 0;
    default:             return -1;
    }
}

/* ---------------------------------------------------------- signed integers */

/*
 * Only MIN and MAX depend on signedness.  Every other op gives, in two's
 * complement, the same bits as on the unsigned type of the same width (SUM
 * and PROD modulo 2^N, logical and bitwise ops trivially), so those go to the
 * unsigned loops; C allows accessing an object through the unsigned type
 * corresponding to its signed type.
 */

static int reduce_int8(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_MIN: ELEMWISE(int8_t, BODY_MIN); return 0;
    case COLLAR_OP_MAX: ELEMWISE(int8_t, BODY_MAX); return 0;
    default:            return reduce_uint8(io, in, n, op);
    }
}

static int reduce_int16(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_MIN: ELEMWISE(int16_t, BODY_MIN); return 0;
    case COLLAR_OP_MAX: ELEMWISE(int16_t, BODY_MAX); return 0;
    default:            return reduce_uint16(io, in, n, op);
    }
}

static int reduce_int32(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_MIN: ELEMWISE(int32_t, BODY_MIN); return 0;
    case COLLAR_OP_MAX: ELEMWISE(int32_t, BODY_MAX); return 0;
    default:            return reduce_uint32(io, in, n, op);
    }
}

static int reduce_int64(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_MIN: ELEMWISE(int64_t, BODY_MIN); return 0;
    case COLLAR_OP_MAX: ELEMWISE(int64_t, BODY_MAX); return 0;
    default:            return reduce_uint64(io, in, n, op);
    }
}

/* ------------------------------------------------------------ 16-bit floats */

/* MIN / MAX select one of the two encodings unchanged (no rounding). */

static int reduce_float16(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:
        ELEMWISE(uint16_t, b = f32_to_f16(f16_to_f32(b) + f16_to_f32(a)));
        return 0;
    case COLLAR_OP_PROD:
        ELEMWISE(uint16_t, b = f32_to_f16(f16_to_f32(b) * f16_to_f32(a)));
        return 0;
    case COLLAR_OP_MIN:
        ELEMWISE(uint16_t, b = (f16_to_f32(b) < f16_to_f32(a)) ? b : a);
        return 0;
    case COLLAR_OP_MAX:
        ELEMWISE(uint16_t, b = (f16_to_f32(b) > f16_to_f32(a)) ? b : a);
        return 0;
    default:
        return -1;
    }
}

static int reduce_bfloat16(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:
        ELEMWISE(uint16_t, b = f32_to_bf16(bf16_to_f32(b) + bf16_to_f32(a)));
        return 0;
    case COLLAR_OP_PROD:
        ELEMWISE(uint16_t, b = f32_to_bf16(bf16_to_f32(b) * bf16_to_f32(a)));
        return 0;
    case COLLAR_OP_MIN:
        ELEMWISE(uint16_t, b = (bf16_to_f32(b) < bf16_to_f32(a)) ? b : a);
        return 0;
    case COLLAR_OP_MAX:
        ELEMWISE(uint16_t, b = (bf16_to_f32(b) > bf16_to_f32(a)) ? b : a);
        return 0;
    default:
        return -1;
    }
}

/* ------------------------------------------------------ floats and complex */

static int reduce_float(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  ELEMWISE(float, b = b + a); return 0;
    case COLLAR_OP_PROD: ELEMWISE(float, b = b * a); return 0;
    case COLLAR_OP_MIN:  ELEMWISE(float, BODY_MIN); return 0;
    case COLLAR_OP_MAX:  ELEMWISE(float, BODY_MAX); return 0;
    default:             return -1;
    }
}

static int reduce_double(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  ELEMWISE(double, b = b + a); return 0;
    case COLLAR_OP_PROD: ELEMWISE(double, b = b * a); return 0;
    case COLLAR_OP_MIN:  ELEMWISE(double, BODY_MIN); return 0;
    case COLLAR_OP_MAX:  ELEMWISE(double, BODY_MAX); return 0;
    default:             return -1;
    }
}

static int reduce_long_double(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  ELEMWISE(long double, b = b + a); return 0;
    case COLLAR_OP_PROD: ELEMWISE(long double, b = b * a); return 0;
    case COLLAR_OP_MIN:  ELEMWISE(long double, BODY_MIN); return 0;
    case COLLAR_OP_MAX:  ELEMWISE(long double, BODY_MAX); return 0;
    default:             return -1;
    }
}

/* C complex arithmetic (Annex G infinities), as Open MPI's `*=` does. */

static int reduce_float_complex(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  ELEMWISE(float _Complex, b = b + a); return 0;
    case COLLAR_OP_PROD: ELEMWISE(float _Complex, b = b * a); return 0;
    default:             return -1;
    }
}

static int reduce_double_complex(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  ELEMWISE(double _Complex, b = b + a); return 0;
    case COLLAR_OP_PROD: ELEMWISE(double _Complex, b = b * a); return 0;
    default:             return -1;
    }
}

static int reduce_long_double_complex(void *io, const void *in, size_t n,
                                      collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_SUM:  ELEMWISE(long double _Complex, b = b + a); return 0;
    case COLLAR_OP_PROD: ELEMWISE(long double _Complex, b = b * a); return 0;
    default:             return -1;
    }
}

/* --------------------------------------------------------------- pair types */

static int reduce_float_int(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_MINLOC: ELEMWISE(pair_float_int_t, BODY_MINLOC); return 0;
    case COLLAR_OP_MAXLOC: ELEMWISE(pair_float_int_t, BODY_MAXLOC); return 0;
    default:               return -1;
    }
}

static int reduce_double_int(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_MINLOC: ELEMWISE(pair_double_int_t, BODY_MINLOC); return 0;
    case COLLAR_OP_MAXLOC: ELEMWISE(pair_double_int_t, BODY_MAXLOC); return 0;
    default:               return -1;
    }
}

static int reduce_long_int(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_MINLOC: ELEMWISE(pair_long_int_t, BODY_MINLOC); return 0;
    case COLLAR_OP_MAXLOC: ELEMWISE(pair_long_int_t, BODY_MAXLOC); return 0;
    default:               return -1;
    }
}

static int reduce_2int(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_MINLOC: ELEMWISE(pair_2int_t, BODY_MINLOC); return 0;
    case COLLAR_OP_MAXLOC: ELEMWISE(pair_2int_t, BODY_MAXLOC); return 0;
    default:               return -1;
    }
}

static int reduce_short_int(void *io, const void *in, size_t n, collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_MINLOC: ELEMWISE(pair_short_int_t, BODY_MINLOC); return 0;
    case COLLAR_OP_MAXLOC: ELEMWISE(pair_short_int_t, BODY_MAXLOC); return 0;
    default:               return -1;
    }
}

static int reduce_long_double_int(void *io, const void *in, size_t n,
                                  collar_op_t op)
{
    switch (op) {
    case COLLAR_OP_MINLOC: ELEMWISE(pair_long_double_int_t, BODY_MINLOC); return 0;
    case COLLAR_OP_MAXLOC: ELEMWISE(pair_long_double_int_t, BODY_MAXLOC); return 0;
    default:               return -1;
    }
}

/* ------------------------------------------------------------------ entry */

int collar_reduce_host(void *inout, const void *in, size_t count,
                       collar_dtype_t dt, collar_op_t op)
{
    /* Validity is decided here, once, so that the per-type functions below
     * never see a pair they would reject after writing something. */
    if (!collar_reduce_supported(dt, op))
        return -1;
    if (count == 0)
        return 0;

    switch (dt) {
    case COLLAR_DT_INT8:                return reduce_int8(inout, in, count, op);
    case COLLAR_DT_INT16:               return reduce_int16(inout, in, count, op);
    case COLLAR_DT_INT32:               return reduce_int32(inout, in, count, op);
    case COLLAR_DT_INT64:               return reduce_int64(inout, in, count, op);
    case COLLAR_DT_UINT8:               return reduce_uint8(inout, in, count, op);
    case COLLAR_DT_UINT16:              return reduce_uint16(inout, in, count, op);
    case COLLAR_DT_UINT32:              return reduce_uint32(inout, in, count, op);
    case COLLAR_DT_UINT64:              return reduce_uint64(inout, in, count, op);
    case COLLAR_DT_FLOAT16:             return reduce_float16(inout, in, count, op);
    case COLLAR_DT_BFLOAT16:            return reduce_bfloat16(inout, in, count, op);
    case COLLAR_DT_FLOAT:               return reduce_float(inout, in, count, op);
    case COLLAR_DT_DOUBLE:              return reduce_double(inout, in, count, op);
    case COLLAR_DT_LONG_DOUBLE:         return reduce_long_double(inout, in, count, op);
    /* _Bool holds 0 or 1 and has size 1: the uint8 logical loops apply. */
    case COLLAR_DT_BOOL:                return reduce_uint8(inout, in, count, op);
    /* MPI_BYTE: only the bitwise ops are valid; those are the uint8 loops. */
    case COLLAR_DT_BYTE:                return reduce_uint8(inout, in, count, op);
    case COLLAR_DT_FLOAT_COMPLEX:       return reduce_float_complex(inout, in, count, op);
    case COLLAR_DT_DOUBLE_COMPLEX:      return reduce_double_complex(inout, in, count, op);
    case COLLAR_DT_LONG_DOUBLE_COMPLEX: return reduce_long_double_complex(inout, in, count, op);
    case COLLAR_DT_FLOAT_INT:           return reduce_float_int(inout, in, count, op);
    case COLLAR_DT_DOUBLE_INT:          return reduce_double_int(inout, in, count, op);
    case COLLAR_DT_LONG_INT:            return reduce_long_int(inout, in, count, op);
    case COLLAR_DT_2INT:                return reduce_2int(inout, in, count, op);
    case COLLAR_DT_SHORT_INT:           return reduce_short_int(inout, in, count, op);
    case COLLAR_DT_LONG_DOUBLE_INT:     return reduce_long_double_int(inout, in, count, op);
    default:                            return -1;
    }
}
