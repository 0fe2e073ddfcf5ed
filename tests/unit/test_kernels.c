/*
 * collar - unit test of the CUDA reduction kernels (src/reduce/device_reduce.cu)
 * against the host loops (collar_reduce_host), bit for bit.
 *
 * Emulation half (always, no GPU needed): the kernels' own per-thread code,
 * compiled for the host (kernel_emu.cu), runs over emulated grids for every
 * pair with a kernel, on random data with the special values of each type
 * (NaN, infinities, -0, denormals; integer extremes), counts 0, 1, odd and
 * larger, every misalignment 0..15 of both pointers, in == inout, and grids
 * from one thread up.  Bytes around the reduced range must stay untouched.
 *
 * Device half (when cudaGetDeviceCount finds a GPU): the same cases through
 * collar_cuda_reduce_launch on cudaMalloc'ed buffers, and one count above
 * 2^32.  NaNs produced by device arithmetic are canonical, so for SUM and
 * PROD of floating types a NaN matches any NaN; everything else must match
 * bit for bit.  Without a GPU this half prints that it was skipped.
 *
 * Last line: "test_kernels: N passed, N failed"; exit 0 when nothing failed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "reduce/device_reduce.h"
#include "kernel_emu.h"
#include "rng.h"
#include "unit.h"

/* ------------------------------------------------------------ operands */

/* A 16-, 32- or 64-bit float encoding: special, random bits, denormal or a
 * value of moderate magnitude (so that sums and products round). */
static uint64_t rnd_float_bits(int bits)
{
    static const uint16_t sp16[] = { 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00,
                                     0x7C01, 0xFE55, 0x0001, 0x83FF, 0x7BFF,
                                     0x3C00, 0xBC00, 0x0400 };
    static const uint16_t spb16[] = { 0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0,
                                      0x7F81, 0xFFD5, 0x0001, 0x807F, 0x7F7F,
                                      0x3F80, 0xBF80, 0x0080 };
    static const uint32_t sp32[] = { 0x00000000u, 0x80000000u, 0x7F800000u,
                                     0xFF800000u, 0x7FC00000u, 0x7F800001u,
                                     0xFFC12345u, 0x00000001u, 0x807FFFFFu,
                                     0x7F7FFFFFu, 0x3F800000u, 0xBF800000u,
                                     0x00800000u };
    static const uint64_t sp64[] = { 0, 0x8000000000000000ull,
                                     0x7FF0000000000000ull, 0xFFF0000000000000ull,
                                     0x7FF8000000000000ull, 0x7FF0000000000001ull,
                                     0xFFF8123456789ABCull, 1, 0x800FFFFFFFFFFFFFull,
                                     0x7FEFFFFFFFFFFFFFull, 0x3FF0000000000000ull,
                                     0xBFF0000000000000ull, 0x0010000000000000ull };
    uint64_t r = rnd();
    unsigned kind = (unsigned)(r & 7);
    r >>= 3;
    /* bits 16: float16 (-16: bfloat16) */
    switch (bits) {
    case 16:
        if (kind == 0) return sp16[r % (sizeof sp16 / sizeof sp16[0])];
        if (kind == 1) return r & 0xFFFF;
        if (kind == 2) return (r & 0x83FF);                        /* denormal */
        return (r & 0x83FF) | (((r >> 16) % 10 + 10) << 10);       /* ~2^-5..2^4 */
    case -16:
        if (kind == 0) return spb16[r % (sizeof spb16 / sizeof spb16[0])];
        if (kind == 1) return r & 0xFFFF;
        if (kind == 2) return (r & 0x807F);
        return (r & 0x807F) | (((r >> 16) % 40 + 107) << 7);
    case 32:
        if (kind == 0) return sp32[r % (sizeof sp32 / sizeof sp32[0])];
        if (kind == 1) return r & 0xFFFFFFFFu;
        if (kind == 2) return r & 0x807FFFFFu;
        return (r & 0x807FFFFFu) | (((r >> 32) % 60 + 97) << 23);
    default:
        if (kind == 0) return sp64[r % (sizeof sp64 / sizeof sp64[0])];
        if (kind == 1) return rnd();
        if (kind == 2) return rnd() & 0x800FFFFFFFFFFFFFull;
        return (rnd() & 0x800FFFFFFFFFFFFFull) | ((uint64_t)(r % 120 + 963) << 52);
    }
}

/* An integer of `size` bytes: random bits or an extreme. */
static uint64_t rnd_int_bits(size_t size)
{
    uint64_t r = rnd(), top = 1ull << (size * 8 - 1);
    uint64_t mask = size == 8 ? ~0ull : (1ull << (size * 8)) - 1;
    static const int nx = 7;
    switch ((r & 15) < (unsigned)nx ? (int)(r & 15) : -1) {
    case 0:  return 0;
    case 1:  return 1;
    case 2:  return mask;               /* -1 */
    case 3:  return top;                /* INT_MIN */
    case 4:  return top - 1;            /* INT_MAX */
    case 5:  return 2;
    case 6:  return top + 1;
    default: return (r >> 4) & mask;
    }
}

static void put(unsigned char *p, uint64_t v, size_t size)
{
    for (size_t i = 0; i < size; i++)   /* little endian, as x86 and the GPU */
        p[i] = (unsigned char)(v >> (8 * i));
}

/* n elements of type dt at p (p may be unaligned). */
static void fill(unsigned char *p, size_t n, collar_dtype_t dt)
{
    size_t size = collar_dtype_size(dt);
    for (size_t k = 0; k < n; k++, p += size) {
        switch (dt) {
        case COLLAR_DT_FLOAT16:  put(p, rnd_float_bits(16), 2); break;
        case COLLAR_DT_BFLOAT16: put(p, rnd_float_bits(-16), 2); break;
        case COLLAR_DT_FLOAT:    put(p, rnd_float_bits(32), 4); break;
        case COLLAR_DT_DOUBLE:   put(p, rnd_float_bits(64), 8); break;
        case COLLAR_DT_FLOAT_COMPLEX:
            put(p, rnd_float_bits(32), 4);
            put(p + 4, rnd_float_bits(32), 4);
            break;
        case COLLAR_DT_DOUBLE_COMPLEX:
            put(p, rnd_float_bits(64), 8);
            put(p + 8, rnd_float_bits(64), 8);
            break;
        case COLLAR_DT_BOOL:
            /* 0 and 1, sometimes another nonzero byte */
            *p = (rnd() & 7) ? (unsigned char)(rnd() & 1) : (unsigned char)rnd();
            break;
        default:
            put(p, rnd_int_bits(size), size);
            break;
        }
    }
}

/* -------------------------------------------------------------- compare */

static uint64_t get(const unsigned char *p, size_t size)
{
    uint64_t v = 0;
    for (size_t i = 0; i < size; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Is the float encoding of `bits` bits (-16: bfloat16) a NaN? */
static int nan_bits(uint64_t v, int bits)
{
    switch (bits) {
    case 16:  return (v & 0x7C00) == 0x7C00 && (v & 0x3FF);
    case -16: return (v & 0x7F80) == 0x7F80 && (v & 0x7F);
    case 32:  return (v & 0x7F800000u) == 0x7F800000u && (v & 0x7FFFFFu);
    default:  return (v & 0x7FF0000000000000ull) == 0x7FF0000000000000ull &&
                     (v & 0xFFFFFFFFFFFFFull);
    }
}

/*
 * Does element x (computed) match y (the host's), given the operands a (in)
 * and b (inout) it came from?  Bit for bit, except that two NaNs match:
 *   - on the device (`device`), for SUM and PROD, as device arithmetic
 *     returns the canonical NaN;
 *   - in the emulation, when two or more NaN operands feed the component:
 *     which NaN an x86 add or multiply returns then depends on the order in
 *     which the compiler placed its operands, for the host loop as well.
 */
static int elem_match(const unsigned char *x, const unsigned char *y,
                      const unsigned char *a, const unsigned char *b,
                      collar_dtype_t dt, collar_op_t op, int device)
{
    size_t size = collar_dtype_size(dt), part = size;
    int bits = 0, complex = 0;

    if (memcmp(x, y, size) == 0)
        return 1;
    if (op != COLLAR_OP_SUM && op != COLLAR_OP_PROD)
        return 0;
    switch (dt) {
    case COLLAR_DT_FLOAT16:        bits = 16; break;
    case COLLAR_DT_BFLOAT16:       bits = -16; break;
    case COLLAR_DT_FLOAT:          bits = 32; break;
    case COLLAR_DT_DOUBLE:         bits = 64; break;
    case COLLAR_DT_FLOAT_COMPLEX:  bits = 32; part = 4; complex = 1; break;
    case COLLAR_DT_DOUBLE_COMPLEX: bits = 64; part = 8; complex = 1; break;
    default:                       return 0;
    }
    for (size_t o = 0; o < size; o += part) {
        uint64_t u = get(x + o, part), v = get(y + o, part);
        int nans = 0;
        if (u == v)
            continue;
        if (!nan_bits(u, bits) || !nan_bits(v, bits))
            return 0;
        if (device)
            continue;
        /* A complex product mixes all four parts; elsewhere part o of each
         * operand feeds part o of the result. */
        for (size_t q = 0; q < size; q += part)
            if ((complex && op == COLLAR_OP_PROD) || q == o)
                nans += nan_bits(get(a + q, part), bits) + nan_bits(get(b + q, part), bits);
        if (nans < 2)
            return 0;
    }
    return 1;
}

/* An element's bytes in hex, most significant first (size <= 16). */
static void hex(char *out, const unsigned char *p, size_t size)
{
    for (size_t i = 0; i < size; i++)
        sprintf(out + 2 * i, "%02x", p[size - 1 - i]);
}

#define PAD 64  /* bytes kept around every range, checked untouched */

/* Compare whole buffers (the range at `off` and its surroundings); a and b
 * are the operands of the range; report the first difference. */
static void compare(const unsigned char *got, const unsigned char *want,
                    const unsigned char *a, const unsigned char *b,
                    size_t total, size_t off, size_t count, collar_dtype_t dt,
                    collar_op_t op, int device, const char *what)
{
    size_t size = collar_dtype_size(dt), end = off + count * size;
    int ok = 1;

    for (size_t i = 0; i < total && ok; i++) {
        if (i >= off && i < end) {
            if (!elem_match(got + i, want + i, a + (i - off), b + (i - off),
                            dt, op, device)) {
                char gx[40], wx[40];
                hex(gx, got + i, size);
                hex(wx, want + i, size);
                UNIT_CHECK(0, "%s %s/%s count %zu: element %zu is %s, not %s",
                           what, collar_dtype_name(dt), collar_op_name(op),
                           count, (i - off) / size, gx, wx);
                ok = 0;
            }
            i += size - 1;
        } else if (got[i] != want[i]) {
            UNIT_CHECK(0, "%s %s/%s count %zu: byte %zd outside the range written",
                       what, collar_dtype_name(dt), collar_op_name(op), count,
                       (ptrdiff_t)i - (ptrdiff_t)off);
            ok = 0;
        }
    }
    if (ok)
        UNIT_CHECK(1, "%s", what);
}

/* ------------------------------------------------------------- emulation */

static const unsigned grids[][2] = { { 0, 0 }, { 1, 1 }, { 2, 3 }, { 3, 32 } };
#define NGRIDS (sizeof grids / sizeof grids[0])

static unsigned long n_vector_cases;

/*
 * The buffers of one case: `count` elements of `in` at byte offset oi and of
 * `inout` at oo past PAD bytes of 16-byte-aligned allocations, random bytes
 * around them; ref: inout as the host loop leaves it; orig, in0: the
 * operands as they were.  alias: in == inout.
 */
struct case_bufs {
    unsigned char *in, *io, *ref, *orig, *in0;
    size_t total, oi, oo;
    int alias;
};

static void case_setup(struct case_bufs *c, collar_dtype_t dt, collar_op_t op,
                       size_t count, size_t oi, size_t oo, int alias)
{
    size_t total = (PAD + 16 + count * collar_dtype_size(dt) + PAD + 15) / 16 * 16;

    c->in = aligned_alloc(16, total);
    c->io = aligned_alloc(16, total);
    c->ref = aligned_alloc(16, total);
    c->orig = aligned_alloc(16, total);
    c->in0 = aligned_alloc(16, total);
    c->total = total;
    c->oi = oi;
    c->oo = oo;
    c->alias = alias;
    for (size_t i = 0; i < total; i++) {
        c->in[i] = (unsigned char)rnd();
        c->io[i] = (unsigned char)rnd();
    }
    fill(c->in + PAD + oi, count, dt);
    fill(c->io + PAD + oo, count, dt);
    memcpy(c->ref, c->io, total);
    memcpy(c->orig, c->io, total);
    memcpy(c->in0, c->in, total);
    UNIT_CHECK(collar_reduce_host(c->ref + PAD + oo,
                                  alias ? c->ref + PAD + oo : c->in + PAD + oi,
                                  count, dt, op) == 0,
               "host loop of %s/%s", collar_dtype_name(dt), collar_op_name(op));
}

/* Check c->io against the host's result, and that `in` was not written. */
static void case_check(const struct case_bufs *c, size_t count, collar_dtype_t dt,
                       collar_op_t op, int device, const char *what)
{
    compare(c->io, c->ref,
            c->alias ? c->orig + PAD + c->oo : c->in0 + PAD + c->oi,
            c->orig + PAD + c->oo, c->total, PAD + c->oo, count, dt, op,
            device, what);
    UNIT_CHECK(memcmp(c->in, c->in0, c->total) == 0, "%s %s/%s: `in` was written",
               what, collar_dtype_name(dt), collar_op_name(op));
}

static void case_free(struct case_bufs *c)
{
    free(c->in);
    free(c->io);
    free(c->ref);
    free(c->orig);
    free(c->in0);
}

/* One case on the CPU, over grid g of `grids`. */
static void emu_case(collar_dtype_t dt, collar_op_t op, size_t count,
                     size_t oi, size_t oo, int alias, unsigned g)
{
    struct case_bufs c;
    int mode = -1;
    char what[96];

    case_setup(&c, dt, op, count, oi, oo, alias);
    int rc = kernel_emu_reduce(c.io + PAD + oo, alias ? c.io + PAD + oo : c.in + PAD + oi,
                               count, dt, op, grids[g][0], grids[g][1], &mode);
    UNIT_CHECK(rc == 0, "emulation of %s/%s: %d", collar_dtype_name(dt),
               collar_op_name(op), rc);
    n_vector_cases += mode == KERNEL_EMU_VECTOR;
    snprintf(what, sizeof what, "emulation grid %ux%u offsets %zu/%zu%s",
             grids[g][0], grids[g][1], oi, oo, alias ? " aliased" : "");
    case_check(&c, count, dt, op, 0, what);
    case_free(&c);
}

static void emu_pair(collar_dtype_t dt, collar_op_t op)
{
    static const size_t small[] = { 0, 1, 2, 3, 17, 37 };
    static const size_t large[] = { 1000, 4099, 70001 };
    unsigned g = 0;

    for (size_t c = 0; c < sizeof small / sizeof small[0]; c++)
        for (size_t oi = 0; oi < 16; oi++)
            for (size_t oo = 0; oo < 16; oo++)
                emu_case(dt, op, small[c], oi, oo, 0, g++ % NGRIDS);
    for (size_t oo = 0; oo < 16; oo++)
        emu_case(dt, op, 37, oo, oo, 1, g++ % NGRIDS);
    for (size_t c = 0; c < sizeof large / sizeof large[0]; c++) {
        static const size_t offs[][2] = { { 0, 0 }, { 8, 8 }, { 4, 12 }, { 1, 1 }, { 3, 7 } };
        for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++)
            emu_case(dt, op, large[c], offs[k][0], offs[k][1], 0, (unsigned)(k % 2) * 3);
    }
}

/*
 * The kernel of n inputs against a copy of src[0] and the pairwise kernel
 * for the others (both emulated), bit for bit: n = 2, 3, 8 inputs, counts
 * around the vector length, every input at the same 16-byte offset (the
 * vector path), at different offsets (typed loads), unaligned (bytes), and
 * dst the same buffer as src[0].  Bytes around dst stay as they were.
 */
static unsigned long n_reduce_n_cases;

static void emu_n_case(collar_dtype_t dt, collar_op_t op, int n, size_t count,
                       int layout, unsigned g)
{
    const size_t esz = collar_dtype_size(dt);
    const size_t total = PAD + 16 + count * esz + PAD + 16;
    unsigned char *in[COLLAR_REDUCE_N_MAX], *want = aligned_alloc(16, (total + 15) / 16 * 16),
                  *got = aligned_alloc(16, (total + 15) / 16 * 16);
    const void *src[COLLAR_REDUCE_N_MAX];
    /* layout 0: all at offset 4*esz % 16; 1: src at k*esz; 2: k bytes;
     * 3: dst is src[0] */
    const size_t od = layout == 2 ? 3 : (4 * esz) % 16;
    for (int k = 0; k < n; k++) {
        in[k] = aligned_alloc(16, (total + 15) / 16 * 16);
        size_t o = layout == 1 ? ((size_t)k * esz) % 16 : layout == 2 ? (size_t)k + 1 : od;
        for (size_t i = 0; i < total; i++)
            in[k][i] = (unsigned char)rnd();
        fill(in[k] + PAD + o, count, dt);
        src[k] = in[k] + PAD + o;
    }
    for (size_t i = 0; i < total; i++)
        got[i] = want[i] = (unsigned char)rnd();
    unsigned char *dst_want = want + PAD + od, *dst_got = got + PAD + od;
    if (layout == 3) {
        memcpy(want, in[0], total);
        dst_got = (unsigned char *)src[0];
    }
    for (size_t i = 0; i < count * esz; i++)   /* (a memcpy: a false gcc 12 warning) */
        dst_want[i] = in[0][(size_t)((const unsigned char *)src[0] - in[0]) + i];
    for (int k = 1; k < n; k++)
        kernel_emu_reduce(dst_want, src[k], count, dt, op, 0, 0, NULL);
    int mode = -1;
    int rc = kernel_emu_reduce_n(dst_got, src, n, count, dt, op, grids[g][0],
                                 grids[g][1], &mode);
    UNIT_CHECK(rc == 0, "emulation of %s/%s of %d inputs: %d", collar_dtype_name(dt),
               collar_op_name(op), n, rc);
    n_reduce_n_cases += mode == KERNEL_EMU_VECTOR;
    const unsigned char *res = layout == 3 ? in[0] : got;
    const size_t lo = (size_t)(dst_want - want), hi = lo + count * esz;
    int same = memcmp(res, want, lo) == 0 && memcmp(res + hi, want + hi, total - hi) == 0;
    /* (device = 1: two NaNs of a sum or product match, as the chain's
     * operands are not tracked) */
    for (size_t i = 0; same && i < count; i++)
        same = elem_match(res + lo + i * esz, want + lo + i * esz, NULL, NULL, dt, op, 1);
    UNIT_CHECK(same,
               "%s/%s, %d inputs, count %zu, layout %d, grid %ux%u: not the bits of "
               "a copy and pairwise kernels", collar_dtype_name(dt), collar_op_name(op),
               n, count, layout, grids[g][0], grids[g][1]);
    for (int k = 0; k < n; k++)
        free(in[k]);
    free(want);
    free(got);
}

static void emu_n(collar_dtype_t dt, collar_op_t op)
{
    static const size_t counts[] = { 0, 1, 17, 1000, 4099 };
    static const int ns[] = { 2, 3, COLLAR_REDUCE_N_MAX };
    unsigned g = 0;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (int layout = 0; layout < 4; layout++)
                emu_n_case(dt, op, ns[k], counts[c], layout, g++ % NGRIDS);
}

/* Every 16-bit float encoding as `in`, for the conversions. */
static void emu_sweep16(collar_dtype_t dt, collar_op_t op)
{
    size_t n = 65536, total = 2 * n;
    unsigned char *in = malloc(total), *io = malloc(total), *ref = malloc(total);
    unsigned char *orig = malloc(total);

    for (size_t i = 0; i < n; i++)
        put(in + 2 * i, i, 2);
    fill(io, n, dt);
    memcpy(ref, io, total);
    memcpy(orig, io, total);
    collar_reduce_host(ref, in, n, dt, op);
    kernel_emu_reduce(io, in, n, dt, op, 0, 0, NULL);
    compare(io, ref, in, orig, total, 0, n, dt, op, 0,
            "emulation sweep of every encoding");
    free(orig);
    free(in);
    free(io);
    free(ref);
}

/* ---------------------------------------------------------------- device */

#define DEV_CHECK(call)                                                       \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        UNIT_CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_)); \
        if (e_ != cudaSuccess)                                                \
            return;                                                           \
    } while (0)

static unsigned char *dev_in, *dev_io;
static size_t dev_bytes;

static void dev_case(collar_dtype_t dt, collar_op_t op, size_t count,
                     size_t oi, size_t oo, int alias, cudaStream_t stream)
{
    struct case_bufs c;
    char what[96];

    case_setup(&c, dt, op, count, oi, oo, alias);
    if (c.total > dev_bytes) {
        UNIT_CHECK(0, "device buffers too small for %zu bytes", c.total);
        goto out;
    }
    if (cudaMemcpy(dev_in, c.in, c.total, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(dev_io, c.io, c.total, cudaMemcpyHostToDevice) != cudaSuccess) {
        UNIT_CHECK(0, "cudaMemcpy to the device failed");
        goto out;
    }
    int rc = collar_cuda_reduce_launch(dev_io + PAD + oo,
                                       alias ? dev_io + PAD + oo : dev_in + PAD + oi,
                                       count, dt, op, stream);
    cudaError_t e = cudaStreamSynchronize(stream);
    UNIT_CHECK(rc == 0 && e == cudaSuccess, "%s/%s count %zu offsets %zu/%zu: launch %d, %s",
               collar_dtype_name(dt), collar_op_name(op), count, oi, oo, rc,
               cudaGetErrorString(e));
    if (rc != 0 || e != cudaSuccess)
        goto out;
    if (cudaMemcpy(c.io, dev_io, c.total, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(c.in, dev_in, c.total, cudaMemcpyDeviceToHost) != cudaSuccess) {
        UNIT_CHECK(0, "cudaMemcpy from the device failed");
        goto out;
    }
    snprintf(what, sizeof what, "device offsets %zu/%zu%s", oi, oo,
             alias ? " aliased" : "");
    case_check(&c, count, dt, op, 1, what);
out:
    case_free(&c);
}

static void dev_pair(collar_dtype_t dt, collar_op_t op, cudaStream_t stream)
{
    static const size_t small[] = { 0, 1, 3, 37 };

    for (size_t c = 0; c < sizeof small / sizeof small[0]; c++)
        for (size_t oi = 0; oi < 16; oi++)
            for (size_t oo = 0; oo < 16; oo++)
                dev_case(dt, op, small[c], oi, oo, 0, NULL);
    for (size_t oo = 0; oo < 16; oo += 3)
        dev_case(dt, op, 4099, oo, oo, 1, stream);
    dev_case(dt, op, 1000003, 0, 0, 0, stream);
    dev_case(dt, op, 1000003, 5, 5, 0, NULL);
    dev_case(dt, op, 1000003, 2, 9, 0, stream);
}

/* uint8 SUM over 2^32 + 17 elements: indices past 32 bits. */
static void dev_huge(void)
{
    size_t n = (1ull << 32) + 17, total = n + PAD;
    unsigned char *a = NULL, *b = NULL, got[PAD];

    if (cudaMalloc((void **)&a, total) != cudaSuccess ||
        cudaMalloc((void **)&b, total) != cudaSuccess) {
        printf("test_kernels: device count above 2^32 skipped (not enough device memory)\n");
        cudaFree(a);
        cudaGetLastError();
        return;
    }
    DEV_CHECK(cudaMemset(a, 1, total));
    DEV_CHECK(cudaMemset(b, 2, total));
    UNIT_CHECK(collar_cuda_reduce_launch(b, a, n, COLLAR_DT_UINT8, COLLAR_OP_SUM, NULL) == 0,
               "launch of 2^32 + 17 bytes");
    DEV_CHECK(cudaDeviceSynchronize());
    static const size_t at[] = { 0, (1ull << 31) - 8, (1ull << 32) - 8, (1ull << 32) + 17 - PAD };
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        DEV_CHECK(cudaMemcpy(got, b + at[k], PAD, cudaMemcpyDeviceToHost));
        int ok = 1;
        for (size_t i = 0; i < PAD; i++)
            ok &= got[i] == 3;
        UNIT_CHECK(ok, "2^32 + 17 bytes: wrong sum near byte %zu", at[k]);
    }
    DEV_CHECK(cudaMemcpy(got, b + n, PAD, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (size_t i = 0; i < PAD; i++)
        ok &= got[i] == 2;
    UNIT_CHECK(ok, "2^32 + 17 bytes: written past the end");
    cudaFree(a);
    cudaFree(b);
}

/*
 * On the device: the kernel of n inputs against a device copy and the
 * pairwise kernels, for a few pairs, n = 2, 3 and 8, aligned (vector) and
 * unaligned inputs; the results compared on the host with elem_match.
 */
static void dev_reduce_n(cudaStream_t stream)
{
    static const struct { collar_dtype_t dt; collar_op_t op; } pairs[] = {
        { COLLAR_DT_FLOAT, COLLAR_OP_SUM }, { COLLAR_DT_INT32, COLLAR_OP_MIN },
        { COLLAR_DT_DOUBLE, COLLAR_OP_MAX }, { COLLAR_DT_BFLOAT16, COLLAR_OP_SUM },
    };
    const size_t count = 100003;
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        const collar_dtype_t dt = pairs[p].dt;
        const size_t esz = collar_dtype_size(dt), bytes = count * esz;
        const size_t slot = bytes + 64;   /* each input in its own slot */
        for (int n = 2; n <= COLLAR_REDUCE_N_MAX; n = n == 3 ? COLLAR_REDUCE_N_MAX : n + 1) {
            for (int unaligned = 0; unaligned < 2; unaligned++) {
                unsigned char *d = NULL, *host = malloc(slot);
                unsigned char *want = malloc(bytes), *got = malloc(bytes);
                DEV_CHECK(cudaMalloc((void **)&d, (size_t)(n + 2) * slot));
                const void *src[COLLAR_REDUCE_N_MAX];
                for (int k = 0; k < n; k++) {
                    fill(host, count, dt);
                    unsigned char *at = d + (size_t)k * slot + (unaligned ? (size_t)k % 4 : 0);
                    DEV_CHECK(cudaMemcpy(at, host, bytes, cudaMemcpyHostToDevice));
                    src[k] = at;
                }
                unsigned char *ref = d + (size_t)n * slot, *out = ref + slot;
                DEV_CHECK(cudaMemcpy(ref, src[0], bytes, cudaMemcpyDeviceToDevice));
                for (int k = 1; k < n; k++)
                    UNIT_CHECK(collar_cuda_reduce_launch(ref, src[k], count, dt, pairs[p].op,
                                                         stream) == 0, "pairwise launch");
                UNIT_CHECK(collar_cuda_reduce_n_launch(out, src, n, count, dt, pairs[p].op,
                                                       stream) == 0, "launch of n inputs");
                DEV_CHECK(cudaStreamSynchronize(stream));
                DEV_CHECK(cudaMemcpy(want, ref, bytes, cudaMemcpyDeviceToHost));
                DEV_CHECK(cudaMemcpy(got, out, bytes, cudaMemcpyDeviceToHost));
                int same = 1;
                for (size_t i = 0; same && i < count; i++)
                    same = elem_match(got + i * esz, want + i * esz, NULL, NULL, dt,
                                      pairs[p].op, 1);
                UNIT_CHECK(same, "device: %s/%s of %d inputs%s: not the bits of pairwise "
                           "kernels", collar_dtype_name(dt), collar_op_name(pairs[p].op), n,
                           unaligned ? " (unaligned)" : "");
                cudaFree(d);
                free(host);
                free(want);
                free(got);
            }
        }
    }
}

/* ------------------------------------------------------------------ main */

int main(void)
{
    int npairs = 0;

    /* Which pairs have a kernel: every host pair but long double and the
     * MINLOC / MAXLOC pair types; the rest return -1 and queue nothing. */
    for (int dt = 0; dt < COLLAR_DT_COUNT; dt++) {
        for (int op = 0; op < COLLAR_OP_COUNT; op++) {
            int want = collar_reduce_supported(dt, op) &&
                       dt != COLLAR_DT_LONG_DOUBLE &&
                       dt != COLLAR_DT_LONG_DOUBLE_COMPLEX &&
                       op != COLLAR_OP_MINLOC && op != COLLAR_OP_MAXLOC;
            int got = collar_cuda_reduce_supported(dt, op);
            UNIT_CHECK(got == want, "supported(%s, %s) = %d",
                       collar_dtype_name(dt), collar_op_name(op), got);
            npairs += got;
            if (!got) {
                UNIT_CHECK(collar_cuda_reduce_launch(NULL, NULL, 5, dt, op, NULL) == -1,
                           "launch of %s/%s", collar_dtype_name(dt), collar_op_name(op));
                UNIT_CHECK(kernel_emu_reduce(NULL, NULL, 5, dt, op, 1, 1, NULL) == -1,
                           "emulation of %s/%s", collar_dtype_name(dt), collar_op_name(op));
            }
        }
    }
    UNIT_CHECK(collar_cuda_reduce_supported(COLLAR_DT_NONE, COLLAR_OP_SUM) == 0, "dtype none");
    UNIT_CHECK(collar_cuda_reduce_supported(COLLAR_DT_FLOAT, COLLAR_OP_NONE) == 0, "op none");
    UNIT_CHECK(npairs == 106, "%d pairs with a kernel", npairs);

    /* Emulation half. */
    for (int dt = 0; dt < COLLAR_DT_COUNT; dt++) {
        for (int op = 0; op < COLLAR_OP_COUNT; op++) {
            if (!collar_cuda_reduce_supported(dt, op))
                continue;
            rng_seed((uint64_t)dt * 100 + (uint64_t)op);
            emu_pair(dt, op);
            emu_n(dt, op);
            if (dt == COLLAR_DT_FLOAT16 || dt == COLLAR_DT_BFLOAT16)
                emu_sweep16(dt, op);
        }
    }
    UNIT_CHECK(n_vector_cases > 0, "no case took the vector path");
    UNIT_CHECK(n_reduce_n_cases > 0, "no case of n inputs took the vector path");
    {
        const void *two[2] = { NULL, NULL };
        UNIT_CHECK(kernel_emu_reduce_n(NULL, two, 1, 5, COLLAR_DT_FLOAT, COLLAR_OP_SUM, 1, 1,
                                       NULL) == -1
                   && collar_cuda_reduce_n_launch(NULL, two, 1, 5, COLLAR_DT_FLOAT,
                                                  COLLAR_OP_SUM, NULL) == -1
                   && collar_cuda_reduce_n_launch(NULL, two, 2, 5, COLLAR_DT_LONG_DOUBLE,
                                                  COLLAR_OP_SUM, NULL) == -1,
                   "one input, or a pair without a kernel, is refused");
    }
    printf("test_kernels: emulation: %d pairs, %lu cases on the vector path\n",
           npairs, n_vector_cases);

    /* Device half. */
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        /* No device to launch on: the launch must fail with a CUDA code. */
        float x[4] = { 0 };
        int rc = collar_cuda_reduce_launch(x, x, 4, COLLAR_DT_FLOAT, COLLAR_OP_SUM, NULL);
        UNIT_CHECK(rc > 0, "launch without a GPU returned %d", rc);
        printf("test_kernels: device half skipped: %s (a launch returns %d: %s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "no GPU", rc,
               rc > 0 ? cudaGetErrorName((cudaError_t)rc) : "?");
        return unit_finish("test_kernels");
    }
    cudaStream_t stream;
    dev_bytes = PAD + 16 + 1000003 * 16 + PAD + 16;
    if (cudaMalloc((void **)&dev_in, dev_bytes) != cudaSuccess ||
        cudaMalloc((void **)&dev_io, dev_bytes) != cudaSuccess ||
        cudaStreamCreate(&stream) != cudaSuccess) {
        UNIT_CHECK(0, "device buffers");
        return unit_finish("test_kernels");
    }
    for (int dt = 0; dt < COLLAR_DT_COUNT; dt++) {
        for (int op = 0; op < COLLAR_OP_COUNT; op++) {
            if (!collar_cuda_reduce_supported(dt, op))
                continue;
            rng_seed((uint64_t)dt * 100 + (uint64_t)op + 7);
            dev_pair(dt, op, stream);
        }
    }
    dev_reduce_n(stream);
    dev_huge();
    cudaStreamDestroy(stream);
    cudaFree(dev_in);
    cudaFree(dev_io);
    printf("test_kernels: device half ran on %d GPU(s)\n", ndev);
    return unit_finish("test_kernels");
}
