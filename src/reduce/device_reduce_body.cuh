/*
 * collar - the body of the CUDA reduction kernels, shared by the kernels
 * (device_reduce.cu) and by the unit test that runs the same code on the CPU
 * (tests/unit/kernel_emu.cu).  CUDA C++; included by .cu files only.
 *
 * Everything a thread does is in __host__ __device__ code:
 *   - the element operations (struct op_*: apply(in, inout) -> new inout),
 *     written to give the bits of the host loops in host_reduce.c;
 *   - reduce_plan_make<T>(): how a buffer pair is cut (vector middle, scalar
 *     head and tail, or scalar only), decided once per launch on the host;
 *   - reduce_thread<T, Op>(): the grid-stride loops of one thread;
 *   - reduce_dispatch(): the (type, op) pairs that have a kernel, each mapped
 *     to its element type and op; only these pairs instantiate templates.
 *
 * On the host (the emulation), loads check the alignment the device would
 * need and abort when it is missing, so the CPU run also checks the plan.
 */
#ifndef COLLAR_DEVICE_REDUCE_BODY_CUH
#define COLLAR_DEVICE_REDUCE_BODY_CUH

#include "device_reduce.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>
#ifndef __CUDA_ARCH__
#include <stdio.h>
#include <stdlib.h>
#endif

#define COLLAR_HD __host__ __device__ __forceinline__

/* ------------------------------------------------------- element types */

/* 16-bit floats are carried as their encodings; arithmetic goes through
 * the cuda_fp16.h / cuda_bf16.h conversions below. */
struct f16_t  { uint16_t x; };
struct bf16_t { uint16_t x; };
/* The C layouts of float _Complex and double _Complex. */
struct cfloat_t  { float re, im; };
struct cdouble_t { double re, im; };

/* ------------------------------------------------ IEEE helpers (no FMA) */

/*
 * Rounded add / sub / mul.  On the device the _rn intrinsics are never
 * contracted into an FMA (nvcc contracts a*b+c by default), so complex
 * products round like the host's separate operations.
 */
#ifdef __CUDA_ARCH__
COLLAR_HD float  add_rn(float a, float b)   { return __fadd_rn(a, b); }
COLLAR_HD float  sub_rn(float a, float b)   { return __fsub_rn(a, b); }
COLLAR_HD float  mul_rn(float a, float b)   { return __fmul_rn(a, b); }
COLLAR_HD double add_rn(double a, double b) { return __dadd_rn(a, b); }
COLLAR_HD double sub_rn(double a, double b) { return __dsub_rn(a, b); }
COLLAR_HD double mul_rn(double a, double b) { return __dmul_rn(a, b); }
#else
template <class F> COLLAR_HD F add_rn(F a, F b) { return a + b; }
template <class F> COLLAR_HD F sub_rn(F a, F b) { return a - b; }
template <class F> COLLAR_HD F mul_rn(F a, F b) { return a * b; }
#endif

COLLAR_HD float bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}
COLLAR_HD uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}
COLLAR_HD double bits_f64(uint64_t x)
{
    double f;
    memcpy(&f, &x, sizeof f);
    return f;
}

template <class F> COLLAR_HD F infinity();
template <> COLLAR_HD float  infinity<float>()  { return bits_f32(0x7F800000u); }
template <> COLLAR_HD double infinity<double>() { return bits_f64(0x7FF0000000000000ull); }

COLLAR_HD bool is_nan(float x)  { return x != x; }
COLLAR_HD bool is_nan(double x) { return x != x; }
COLLAR_HD bool is_inf(float x)  { return fabsf(x) == infinity<float>(); }
COLLAR_HD bool is_inf(double x) { return fabs(x) == infinity<double>(); }
COLLAR_HD float  copy_sign(float x, float s)   { return copysignf(x, s); }
COLLAR_HD double copy_sign(double x, double s) { return copysign(x, s); }

/* ------------------------------------------- 16-bit float conversions */

/*
 * Widening is exact.  Narrowing rounds to nearest even with the
 * cuda_fp16.h / cuda_bf16.h conversions; NaNs are encoded by hand the way
 * host_reduce.c does (quiet bit set, top of the payload kept) because the
 * CUDA conversions return one canonical NaN.
 */
COLLAR_HD float f16_widen(f16_t h)
{
    if ((h.x & 0x7C00u) == 0x7C00u && (h.x & 0x3FFu) != 0) {   /* NaN */
        uint32_t bits = ((uint32_t)(h.x & 0x8000u) << 16) | 0x7F800000u |
                        ((uint32_t)(h.x & 0x3FFu) << 13);
        return bits_f32(bits);
    }
    return __half2float(__ushort_as_half(h.x));
}

COLLAR_HD f16_t f16_narrow(float f)
{
    f16_t r;
    if (is_nan(f)) {
        uint32_t x = f32_bits(f);
        r.x = (uint16_t)(((x >> 16) & 0x8000u) | 0x7E00u | ((x >> 13) & 0x3FFu));
    } else {
        r.x = __half_as_ushort(__float2half_rn(f));
    }
    return r;
}

COLLAR_HD float bf16_widen(bf16_t h)
{
    return __bfloat162float(__ushort_as_bfloat16(h.x));
}

COLLAR_HD bf16_t bf16_narrow(float f)
{
    bf16_t r;
    if (is_nan(f))
        r.x = (uint16_t)((f32_bits(f) >> 16) | 0x0040u);
    else
        r.x = __bfloat16_as_ushort(__float2bfloat16_rn(f));
    return r;
}

/* ------------------------------------------------------------- the ops */

/*
 * Op::apply(a, b) returns `a (op) b` with a = in[i], b = inout[i], the
 * result going to inout[i].  Generic versions serve the integer types and
 * float / double; overloads serve the 16-bit floats and complex.
 *
 * Integers: the unsigned type of each width does SUM, PROD, the logical and
 * the bitwise ops for both signednesses (same bits, as in host_reduce.c);
 * 8- and 16-bit products are taken in unsigned int.
 */
template <class U> struct uwide           { typedef U type; };
template <>        struct uwide<uint8_t>  { typedef unsigned type; };
template <>        struct uwide<uint16_t> { typedef unsigned type; };

struct op_sum {
    template <class U> COLLAR_HD static U apply(U a, U b)
    {
        return (U)((typename uwide<U>::type)b + a);
    }
    COLLAR_HD static float  apply(float a, float b)   { return add_rn(b, a); }
    COLLAR_HD static double apply(double a, double b) { return add_rn(b, a); }
    COLLAR_HD static f16_t apply(f16_t a, f16_t b)
    {
        return f16_narrow(add_rn(f16_widen(b), f16_widen(a)));
    }
    COLLAR_HD static bf16_t apply(bf16_t a, bf16_t b)
    {
        return bf16_narrow(add_rn(bf16_widen(b), bf16_widen(a)));
    }
    template <class C> COLLAR_HD static C apply_complex(C a, C b)
    {
        C r;
        r.re = add_rn(b.re, a.re);
        r.im = add_rn(b.im, a.im);
        return r;
    }
    COLLAR_HD static cfloat_t  apply(cfloat_t a, cfloat_t b)   { return apply_complex(a, b); }
    COLLAR_HD static cdouble_t apply(cdouble_t a, cdouble_t b) { return apply_complex(a, b); }
};

/*
 * Complex product with C's Annex G rules, step for step as GCC does it (the
 * inline x = ac - bd, y = ad + bc, then, when both are NaN, the recovery of
 * libgcc's __mulsc3 / __muldc3), for b * a with b = inout, a = in.
 */
template <class C, class F> COLLAR_HD C complex_mul(C lhs, C rhs)
{
    F a = lhs.re, b = lhs.im, c = rhs.re, d = rhs.im;
    F ac = mul_rn(a, c), bd = mul_rn(b, d), ad = mul_rn(a, d), bc = mul_rn(b, c);
    F x = sub_rn(ac, bd), y = add_rn(ad, bc);

    if (is_nan(x) && is_nan(y)) {
        const F one = 1, zero = 0;
        bool recalc = false;
        if (is_inf(a) || is_inf(b)) {
            a = copy_sign(is_inf(a) ? one : zero, a);
            b = copy_sign(is_inf(b) ? one : zero, b);
            if (is_nan(c)) c = copy_sign(zero, c);
            if (is_nan(d)) d = copy_sign(zero, d);
            recalc = true;
        }
        if (is_inf(c) || is_inf(d)) {
            c = copy_sign(is_inf(c) ? one : zero, c);
            d = copy_sign(is_inf(d) ? one : zero, d);
            if (is_nan(a)) a = copy_sign(zero, a);
            if (is_nan(b)) b = copy_sign(zero, b);
            recalc = true;
        }
        if (!recalc && (is_inf(ac) || is_inf(bd) || is_inf(ad) || is_inf(bc))) {
            if (is_nan(a)) a = copy_sign(zero, a);
            if (is_nan(b)) b = copy_sign(zero, b);
            if (is_nan(c)) c = copy_sign(zero, c);
            if (is_nan(d)) d = copy_sign(zero, d);
            recalc = true;
        }
        if (recalc) {
            x = mul_rn(infinity<F>(), sub_rn(mul_rn(a, c), mul_rn(b, d)));
            y = mul_rn(infinity<F>(), add_rn(mul_rn(a, d), mul_rn(b, c)));
        }
    }
    C r;
    r.re = x;
    r.im = y;
    return r;
}

struct op_prod {
    template <class U> COLLAR_HD static U apply(U a, U b)
    {
        return (U)((typename uwide<U>::type)b * a);
    }
    COLLAR_HD static float  apply(float a, float b)   { return mul_rn(b, a); }
    COLLAR_HD static double apply(double a, double b) { return mul_rn(b, a); }
    COLLAR_HD static f16_t apply(f16_t a, f16_t b)
    {
        return f16_narrow(mul_rn(f16_widen(b), f16_widen(a)));
    }
    COLLAR_HD static bf16_t apply(bf16_t a, bf16_t b)
    {
        return bf16_narrow(mul_rn(bf16_widen(b), bf16_widen(a)));
    }
    COLLAR_HD static cfloat_t apply(cfloat_t a, cfloat_t b)
    {
        return complex_mul<cfloat_t, float>(b, a);
    }
    COLLAR_HD static cdouble_t apply(cdouble_t a, cdouble_t b)
    {
        return complex_mul<cdouble_t, double>(b, a);
    }
};

/* MIN / MAX: plain comparisons, `in` wins on equal or unordered values
 * (see the top of device_reduce.cu); 16-bit floats compare as floats and
 * keep the chosen encoding unchanged. */
struct op_min {
    template <class T> COLLAR_HD static T apply(T a, T b) { return (b < a) ? b : a; }
    COLLAR_HD static f16_t apply(f16_t a, f16_t b)
    {
        return (f16_widen(b) < f16_widen(a)) ? b : a;
    }
    COLLAR_HD static bf16_t apply(bf16_t a, bf16_t b)
    {
        return (bf16_widen(b) < bf16_widen(a)) ? b : a;
    }
};

struct op_max {
    template <class T> COLLAR_HD static T apply(T a, T b) { return (b > a) ? b : a; }
    COLLAR_HD static f16_t apply(f16_t a, f16_t b)
    {
        return (f16_widen(b) > f16_widen(a)) ? b : a;
    }
    COLLAR_HD static bf16_t apply(bf16_t a, bf16_t b)
    {
        return (bf16_widen(b) > bf16_widen(a)) ? b : a;
    }
};

/* Logical ops give 0 or 1; any nonzero value is true. */
struct op_land {
    template <class U> COLLAR_HD static U apply(U a, U b) { return (U)(b != 0 && a != 0); }
};
struct op_lor {
    template <class U> COLLAR_HD static U apply(U a, U b) { return (U)(b != 0 || a != 0); }
};
struct op_lxor {
    template <class U> COLLAR_HD static U apply(U a, U b) { return (U)((b != 0) != (a != 0)); }
};
struct op_band {
    template <class U> COLLAR_HD static U apply(U a, U b) { return (U)(b & a); }
};
struct op_bor {
    template <class U> COLLAR_HD static U apply(U a, U b) { return (U)(b | a); }
};
struct op_bxor {
    template <class U> COLLAR_HD static U apply(U a, U b) { return (U)(b ^ a); }
};

/* ----------------------------------------------------------- the plan */

#define REDUCE_VEC_BYTES 16     /* one uint4 */
#define REDUCE_BLOCK     256    /* threads per block */
#define REDUCE_MAX_GRID  2048   /* blocks; the loops stride over the rest */

enum reduce_mode {
    REDUCE_MODE_VECTOR,     /* head, 16-byte vectors, tail */
    REDUCE_MODE_ALIGNED,    /* every element a typed load */
    REDUCE_MODE_BYTES       /* every element through memcpy (unaligned) */
};

/* The kernel's argument: the buffers and how they are cut. */
struct reduce_plan {
    char       *io;
    const char *in;
    size_t      count;      /* elements */
    size_t      head;       /* VECTOR: scalar elements before the first vector */
    size_t      nvec;       /* VECTOR: 16-byte vectors after the head */
    int         mode;
    size_t      work;       /* units of the longest loop, for the grid size */
};

/*
 * The 16-byte vector path needs both pointers at the same offset modulo 16,
 * an offset that is a whole number of elements (every element size divides
 * 16), and at least one whole vector after the head.  Otherwise elements are
 * loaded as T when both pointers are aligned for T, else byte by byte.
 */
template <class T>
__host__ reduce_plan reduce_plan_make(void *io, const void *in, size_t count)
{
    static_assert(REDUCE_VEC_BYTES % sizeof(T) == 0, "element size divides 16");
    const size_t per_vec = REDUCE_VEC_BYTES / sizeof(T);
    uintptr_t mo = (uintptr_t)io % REDUCE_VEC_BYTES;
    uintptr_t mi = (uintptr_t)in % REDUCE_VEC_BYTES;
    reduce_plan p;

    p.io = (char *)io;
    p.in = (const char *)in;
    p.count = count;
    p.head = 0;
    p.nvec = 0;
    p.work = count;
    if (mo == mi && mo % sizeof(T) == 0) {
        size_t head = ((REDUCE_VEC_BYTES - mo) % REDUCE_VEC_BYTES) / sizeof(T);
        if (head < count && (count - head) / per_vec > 0) {
            p.head = head;
            p.nvec = (count - head) / per_vec;
            p.mode = REDUCE_MODE_VECTOR;
            p.work = p.nvec;
            return p;
        }
    }
    if ((uintptr_t)io % alignof(T) == 0 && (uintptr_t)in % alignof(T) == 0)
        p.mode = REDUCE_MODE_ALIGNED;
    else
        p.mode = REDUCE_MODE_BYTES;
    return p;
}

/* Blocks for a plan: one unit per thread up to REDUCE_MAX_GRID blocks. */
static inline __host__ unsigned reduce_plan_grid(const reduce_plan &p)
{
    size_t blocks = p.work / REDUCE_BLOCK + (p.work % REDUCE_BLOCK != 0);
    if (blocks == 0)
        blocks = 1;
    return blocks < REDUCE_MAX_GRID ? (unsigned)blocks : REDUCE_MAX_GRID;
}

/* --------------------------------------------------- loads and stores */

#ifndef __CUDA_ARCH__
static inline void reduce_emu_check_align(const void *p, size_t align)
{
    if ((uintptr_t)p % align != 0) {
        fprintf(stderr, "kernel emulation: %p is not aligned to %zu bytes\n",
                p, align);
        abort();
    }
}
#endif

/* An element at a pointer aligned for T. */
template <class T> COLLAR_HD T load_aligned(const char *p)
{
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const T *>(p);
#else
    T v;
    reduce_emu_check_align(p, alignof(T));
    memcpy(&v, p, sizeof v);
    return v;
#endif
}

template <class T> COLLAR_HD void store_aligned(char *p, T v)
{
#ifdef __CUDA_ARCH__
    *reinterpret_cast<T *>(p) = v;
#else
    reduce_emu_check_align(p, alignof(T));
    memcpy(p, &v, sizeof v);
#endif
}

/* An element anywhere. */
template <class T> COLLAR_HD T load_bytes(const char *p)
{
    T v;
    memcpy(&v, p, sizeof v);
    return v;
}

template <class T> COLLAR_HD void store_bytes(char *p, T v)
{
    memcpy(p, &v, sizeof v);
}

/* ---------------------------------------------------- one thread's loops */

/*
 * for (i = first; i < n; i += stride) without wrapping past SIZE_MAX, which a
 * plain `i += stride` could do for n close to SIZE_MAX.
 */
#define REDUCE_STRIDE_LOOP(i, first, n, stride)                              \
    for (size_t i = (first); i < (n); i = ((n) - i > (stride)) ? i + (stride) : (n))

template <class T, class Op>
COLLAR_HD void reduce_thread(const reduce_plan &p, size_t tid, size_t nthreads)
{
    const size_t esz = sizeof(T);

    switch (p.mode) {
    case REDUCE_MODE_VECTOR: {
        const size_t per_vec = REDUCE_VEC_BYTES / esz;
        const size_t body = p.head * esz;                 /* vectors start here */
        const size_t tail = p.head + p.nvec * per_vec;    /* first tail element */

        REDUCE_STRIDE_LOOP(i, tid, p.head, nthreads) {
            T a = load_aligned<T>(p.in + i * esz);
            T b = load_aligned<T>(p.io + i * esz);
            store_aligned<T>(p.io + i * esz, Op::apply(a, b));
        }
        REDUCE_STRIDE_LOOP(v, tid, p.nvec, nthreads) {
            const size_t off = body + v * REDUCE_VEC_BYTES;
            uint4 va = load_aligned<uint4>(p.in + off);
            uint4 vb = load_aligned<uint4>(p.io + off);
            T a[REDUCE_VEC_BYTES / sizeof(T)], b[REDUCE_VEC_BYTES / sizeof(T)];
            memcpy(a, &va, sizeof a);
            memcpy(b, &vb, sizeof b);
            for (size_t k = 0; k < per_vec; k++)
                b[k] = Op::apply(a[k], b[k]);
            memcpy(&vb, b, sizeof b);
            store_aligned<uint4>(p.io + off, vb);
        }
        REDUCE_STRIDE_LOOP(i, tail + tid, p.count, nthreads) {
            T a = load_aligned<T>(p.in + i * esz);
            T b = load_aligned<T>(p.io + i * esz);
            store_aligned<T>(p.io + i * esz, Op::apply(a, b));
        }
        break;
    }
    case REDUCE_MODE_ALIGNED:
        REDUCE_STRIDE_LOOP(i, tid, p.count, nthreads) {
            T a = load_aligned<T>(p.in + i * esz);
            T b = load_aligned<T>(p.io + i * esz);
            store_aligned<T>(p.io + i * esz, Op::apply(a, b));
        }
        break;
    default:
        REDUCE_STRIDE_LOOP(i, tid, p.count, nthreads) {
            T a = load_bytes<T>(p.in + i * esz);
            T b = load_bytes<T>(p.io + i * esz);
            store_bytes<T>(p.io + i * esz, Op::apply(a, b));
        }
        break;
    }
}

/* ------------------------------------------------ n inputs, one output */

/*
 * dst = src[n-1] op (... op (src[1] op src[0])), every input read once and
 * dst written once: the bits of a copy of src[0] followed by the pairwise
 * kernel for src[1] .. src[n-1] (Op::apply(in, inout) in that order).  The
 * plan is the pairwise one with every pointer in the place of `in`: the
 * vector path when all n + 1 sit at the same offset modulo 16, typed loads
 * when all are aligned for T, bytes otherwise.  dst may be src[0].
 */
struct reduce_n_plan {
    char       *dst;
    const char *src[COLLAR_REDUCE_N_MAX];
    int         n;
    size_t      count, head, nvec, work;
    int         mode;
};

template <class T>
__host__ reduce_n_plan reduce_n_plan_make(void *dst, const void *const *src, int n,
                                          size_t count)
{
    reduce_n_plan p;
    memset(&p, 0, sizeof p);
    p.dst = (char *)dst;
    p.n = n;
    p.count = count;
    p.work = count;
    int same16 = 1, aligned = (uintptr_t)dst % alignof(T) == 0;
    for (int k = 0; k < n; k++) {
        p.src[k] = (const char *)src[k];
        same16 &= (uintptr_t)src[k] % REDUCE_VEC_BYTES == (uintptr_t)dst % REDUCE_VEC_BYTES;
        aligned &= (uintptr_t)src[k] % alignof(T) == 0;
    }
    /* The pairwise plan of (dst, dst) says where the vectors start. */
    reduce_plan q = reduce_plan_make<T>(dst, dst, count);
    if (same16 && q.mode == REDUCE_MODE_VECTOR) {
        p.mode = REDUCE_MODE_VECTOR;
        p.head = q.head;
        p.nvec = q.nvec;
        p.work = q.work;
    } else {
        p.mode = aligned ? REDUCE_MODE_ALIGNED : REDUCE_MODE_BYTES;
    }
    return p;
}

template <class T, class Op>
COLLAR_HD void reduce_n_element(const reduce_n_plan &p, size_t i, int typed)
{
    const size_t off = i * sizeof(T);
    T acc = typed ? load_aligned<T>(p.src[0] + off) : load_bytes<T>(p.src[0] + off);
    for (int k = 1; k < p.n; k++) {
        T a = typed ? load_aligned<T>(p.src[k] + off) : load_bytes<T>(p.src[k] + off);
        acc = Op::apply(a, acc);
    }
    if (typed)
        store_aligned<T>(p.dst + off, acc);
    else
        store_bytes<T>(p.dst + off, acc);
}

template <class T, class Op>
COLLAR_HD void reduce_n_thread(const reduce_n_plan &p, size_t tid, size_t nthreads)
{
    if (p.mode != REDUCE_MODE_VECTOR) {
        const int typed = p.mode == REDUCE_MODE_ALIGNED;
        REDUCE_STRIDE_LOOP(i, tid, p.count, nthreads)
            reduce_n_element<T, Op>(p, i, typed);
        return;
    }
    const size_t per_vec = REDUCE_VEC_BYTES / sizeof(T);
    const size_t body = p.head * sizeof(T);
    const size_t tail = p.head + p.nvec * per_vec;
    REDUCE_STRIDE_LOOP(i, tid, p.head, nthreads)
        reduce_n_element<T, Op>(p, i, 1);
    REDUCE_STRIDE_LOOP(v, tid, p.nvec, nthreads) {
        const size_t off = body + v * REDUCE_VEC_BYTES;
        T acc[REDUCE_VEC_BYTES / sizeof(T)], a[REDUCE_VEC_BYTES / sizeof(T)];
        uint4 va = load_aligned<uint4>(p.src[0] + off);
        memcpy(acc, &va, sizeof acc);
        for (int k = 1; k < p.n; k++) {
            va = load_aligned<uint4>(p.src[k] + off);
            memcpy(a, &va, sizeof a);
            for (size_t e = 0; e < per_vec; e++)
                acc[e] = Op::apply(a[e], acc[e]);
        }
        memcpy(&va, acc, sizeof acc);
        store_aligned<uint4>(p.dst + off, va);
    }
    REDUCE_STRIDE_LOOP(i, tail + tid, p.count, nthreads)
        reduce_n_element<T, Op>(p, i, 1);
}

/* Blocks for a plan of n inputs (as reduce_plan_grid). */
static inline __host__ unsigned reduce_n_plan_grid(const reduce_n_plan &p)
{
    size_t blocks = p.work / REDUCE_BLOCK + (p.work % REDUCE_BLOCK != 0);
    if (blocks == 0)
        blocks = 1;
    return blocks < REDUCE_MAX_GRID ? (unsigned)blocks : REDUCE_MAX_GRID;
}

/* --------------------------------------------------------- the pairs */

/*
 * reduce_dispatch(dt, op, visitor) calls visitor.template run<T, Op>() for
 * the element type and op of a supported pair and returns its result, or
 * returns -1.  Signed integers share the unsigned kernels except for MIN and
 * MAX; bool and byte are bytes (the uint8 logical and bitwise kernels).
 */
template <class U, class V> __host__ int reduce_dispatch_int(collar_op_t op, V &v)
{
    switch (op) {
    case COLLAR_OP_SUM:  return v.template run<U, op_sum>();
    case COLLAR_OP_PROD: return v.template run<U, op_prod>();
    case COLLAR_OP_MIN:  return v.template run<U, op_min>();
    case COLLAR_OP_MAX:  return v.template run<U, op_max>();
    case COLLAR_OP_LAND: return v.template run<U, op_land>();
    case COLLAR_OP_LOR:  return v.template run<U, op_lor>();
    case COLLAR_OP_LXOR: return v.template run<U, op_lxor>();
    case COLLAR_OP_BAND: return v.template run<U, op_band>();
    case COLLAR_OP_BOR:  return v.template run<U, op_bor>();
    case COLLAR_OP_BXOR: return v.template run<U, op_bxor>();
    default:             return -1;
    }
}

template <class S, class U, class V> __host__ int reduce_dispatch_signed(collar_op_t op, V &v)
{
    switch (op) {
    case COLLAR_OP_MIN: return v.template run<S, op_min>();
    case COLLAR_OP_MAX: return v.template run<S, op_max>();
    default:            return reduce_dispatch_int<U>(op, v);
    }
}

template <class F, class V> __host__ int reduce_dispatch_float(collar_op_t op, V &v)
{
    switch (op) {
    case COLLAR_OP_SUM:  return v.template run<F, op_sum>();
    case COLLAR_OP_PROD: return v.template run<F, op_prod>();
    case COLLAR_OP_MIN:  return v.template run<F, op_min>();
    case COLLAR_OP_MAX:  return v.template run<F, op_max>();
    default:             return -1;
    }
}

template <class C, class V> __host__ int reduce_dispatch_complex(collar_op_t op, V &v)
{
    switch (op) {
    case COLLAR_OP_SUM:  return v.template run<C, op_sum>();
    case COLLAR_OP_PROD: return v.template run<C, op_prod>();
    default:             return -1;
    }
}

template <class V> __host__ int reduce_dispatch(collar_dtype_t dt, collar_op_t op, V &v)
{
    if (!collar_cuda_reduce_supported(dt, op))
        return -1;
    switch (dt) {
    case COLLAR_DT_INT8:           return reduce_dispatch_signed<int8_t, uint8_t>(op, v);
    case COLLAR_DT_INT16:          return reduce_dispatch_signed<int16_t, uint16_t>(op, v);
    case COLLAR_DT_INT32:          return reduce_dispatch_signed<int32_t, uint32_t>(op, v);
    case COLLAR_DT_INT64:          return reduce_dispatch_signed<int64_t, uint64_t>(op, v);
    case COLLAR_DT_UINT8:
    case COLLAR_DT_BOOL:
    case COLLAR_DT_BYTE:           return reduce_dispatch_int<uint8_t>(op, v);
    case COLLAR_DT_UINT16:         return reduce_dispatch_int<uint16_t>(op, v);
    case COLLAR_DT_UINT32:         return reduce_dispatch_int<uint32_t>(op, v);
    case COLLAR_DT_UINT64:         return reduce_dispatch_int<uint64_t>(op, v);
    case COLLAR_DT_FLOAT16:        return reduce_dispatch_float<f16_t>(op, v);
    case COLLAR_DT_BFLOAT16:       return reduce_dispatch_float<bf16_t>(op, v);
    case COLLAR_DT_FLOAT:          return reduce_dispatch_float<float>(op, v);
    case COLLAR_DT_DOUBLE:         return reduce_dispatch_float<double>(op, v);
    case COLLAR_DT_FLOAT_COMPLEX:  return reduce_dispatch_complex<cfloat_t>(op, v);
    case COLLAR_DT_DOUBLE_COMPLEX: return reduce_dispatch_complex<cdouble_t>(op, v);
    default:                       return -1;
    }
}

#endif /* COLLAR_DEVICE_REDUCE_BODY_CUH */
