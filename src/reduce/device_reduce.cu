/*
 * collar - CUDA reduction kernels: inout[i] = in[i] (op) inout[i] on the
 * device, bit for bit the results of the host loops (host_reduce.c).
 *
 * Build.  Only when configure found CUDA: src/Makefile.am compiles this file
 * with nvcc through libtool (the `.cu.lo` rule of config/cuda.am, where
 * config/nvcc-libtool turns libtool's -fPIC into -Xcompiler=-fPIC) into
 * libcollar_core.la, hence into libcollar.so, with SASS for each
 * --with-cuda-arch (default 75 80 90) and PTX for the last, host symbols
 * hidden; NVCCFLAGS (default -O3) is added.  No relocatable device code, no
 * device library: each kernel is self-contained.  About 17-19 s of CPU for
 * the default four targets (68 kernels).
 *
 * Kernels.  Two kernels per (element type, op): a pair (inout op= in) and
 * n inputs into one output (reduce_n: up to COLLAR_REDUCE_N_MAX inputs, the
 * same bits as a copy and n - 1 pairwise kernels, one pass over memory, for
 * the ipc and hier allreduces), instantiated only for the
 * pairs that reduce_dispatch() in device_reduce_body.cuh lists; signed
 * integers share the unsigned kernels except for MIN / MAX, bool and byte
 * use the uint8 kernels.  The body of every kernel (ops, loops, the plan of
 * a launch) is __host__ __device__ code in device_reduce_body.cuh so that
 * tests/unit/test_kernels runs it on the CPU too, without a GPU.
 *
 * Vectorised.  When `in` and `inout` sit at the same offset modulo 16 bytes,
 * a whole number of elements from a 16-byte boundary, the middle of the
 * buffers moves in 16-byte loads and stores (uint4: 16 int8, 8 halves,
 * 4 floats, 2 doubles, 1 double complex), with at most 15 bytes of head and
 * tail done element by element; memory-bound kernels need the wide
 * transactions.  Otherwise every element is one typed load (both pointers
 * aligned for the type) or a byte-wise copy (buffers that are not: device
 * loads must be naturally aligned, and reduce.h allows unaligned buffers).
 * Every loop is grid-stride with size_t indices that cannot wrap, so any
 * count up to SIZE_MAX / element size works with a grid of at most 2048
 * blocks of 256 threads.
 *
 * MIN / MAX are `(inout < in) ? inout : in` (and `>`), not fminf / fmaxf.
 * fmin returns the other operand when one is NaN and may order -0 below +0;
 * the MPI libraries (Open MPI, MPICH) and the host loops keep `in` whenever
 * the values compare equal or are unordered: MIN(in = 1, inout = NaN) = 1,
 * MIN(in = NaN, inout = 1) = NaN, MIN(in = -0, inout = +0) = -0.  A result
 * must not depend on whether the host or the device reduced it.
 *
 * Floating point.  float / double SUM and PROD use the _rn intrinsics, so
 * nvcc never contracts them into FMAs (which would round differently from
 * the host, notably in the complex product); denormals are kept (no
 * -ftz).  Complex PROD follows C Annex G as GCC does (infinities recovered
 * from NaN results).  16-bit floats widen to float, combine, and round back
 * to nearest even, as the host loops do.  One difference is left: a NaN
 * produced by device arithmetic is the canonical NaN, where the host keeps
 * an input NaN's payload; both are NaN.
 */
#include "device_reduce_body.cuh"

template <class T, class Op>
__global__ void __launch_bounds__(REDUCE_BLOCK) reduce_kernel(reduce_plan p)
{
    reduce_thread<T, Op>(p, (size_t)blockIdx.x * blockDim.x + threadIdx.x,
                         (size_t)gridDim.x * blockDim.x);
}

template <class T, class Op>
__global__ void __launch_bounds__(REDUCE_BLOCK) reduce_n_kernel(reduce_n_plan p)
{
    reduce_n_thread<T, Op>(p, (size_t)blockIdx.x * blockDim.x + threadIdx.x,
                           (size_t)gridDim.x * blockDim.x);
}

namespace {

/* The visitor that launches the kernel of n inputs. */
struct reduce_n_launcher {
    void              *dst;
    const void *const *src;
    int                n;
    size_t             count;
    cudaStream_t       stream;

    template <class T, class Op> int run()
    {
        reduce_n_plan p = reduce_n_plan_make<T>(dst, src, n, count);
        reduce_n_kernel<T, Op><<<reduce_n_plan_grid(p), REDUCE_BLOCK, 0, stream>>>(p);
        return (int)cudaGetLastError();
    }
};

/* The visitor of reduce_dispatch() that launches the pair's kernel. */
struct reduce_launcher {
    void         *io;
    const void   *in;
    size_t        count;
    cudaStream_t  stream;

    template <class T, class Op> int run()
    {
        reduce_plan p = reduce_plan_make<T>(io, in, count);
        reduce_kernel<T, Op><<<reduce_plan_grid(p), REDUCE_BLOCK, 0, stream>>>(p);
        return (int)cudaGetLastError();
    }
};

/* The visitor that only says whether a pair has a kernel. */
struct reduce_probe {
    template <class T, class Op> int run() { return 0; }
};

}  // namespace

extern "C" int collar_cuda_reduce_supported(collar_dtype_t dt, collar_op_t op)
{
    if (dt == COLLAR_DT_LONG_DOUBLE || dt == COLLAR_DT_LONG_DOUBLE_COMPLEX)
        return 0;
    if (op == COLLAR_OP_MINLOC || op == COLLAR_OP_MAXLOC)
        return 0;
    return collar_reduce_supported(dt, op);
}

extern "C" int collar_cuda_reduce_launch(void *inout, const void *in,
                                         size_t count, collar_dtype_t dt,
                                         collar_op_t op, void *stream)
{
    reduce_probe probe;
    if (reduce_dispatch(dt, op, probe) != 0)
        return -1;
    if (count == 0)
        return 0;

    reduce_launcher l;
    l.io = inout;
    l.in = in;
    l.count = count;
    /* Explicit, so that --default-stream per-thread cannot change it. */
    l.stream = stream ? (cudaStream_t)stream : cudaStreamLegacy;
    return reduce_dispatch(dt, op, l);
}

extern "C" int collar_cuda_reduce_n_launch(void *dst, const void *const *src, int n,
                                           size_t count, collar_dtype_t dt,
                                           collar_op_t op, void *stream)
{
    reduce_probe probe;
    if (n < 2 || n > COLLAR_REDUCE_N_MAX || reduce_dispatch(dt, op, probe) != 0)
        return -1;
    if (count == 0)
        return 0;

    reduce_n_launcher l;
    l.dst = dst;
    l.src = src;
    l.n = n;
    l.count = count;
    l.stream = stream ? (cudaStream_t)stream : cudaStreamLegacy;
    return reduce_dispatch(dt, op, l);
}
