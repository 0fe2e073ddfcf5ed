/*
 * collar - the CUDA reduction kernels run on the CPU, for test_kernels.
 *
 * The same plan, dispatch and per-thread loops as the kernels
 * (src/reduce/device_reduce_body.cuh), with blockIdx / threadIdx emulated:
 * every thread of a grid runs in turn.  A thread only writes its own
 * elements, so the order does not change the result.  On the host the
 * loads abort when a pointer lacks the alignment the device would need.
 */
#include "reduce/device_reduce_body.cuh"

#include "kernel_emu.h"

namespace {

/* Every thread of the grid (0: the launch's own) in turn; the plan's mode
 * as a KERNEL_EMU_* into *mode. */
template <class Plan, class Thread>
void emu_grid(const Plan &p, unsigned default_grid, unsigned grid, unsigned block,
              int *mode, Thread thread)
{
    unsigned g = grid ? grid : default_grid;
    unsigned b = block ? block : REDUCE_BLOCK;
    size_t nthreads = (size_t)g * b;

    for (unsigned bid = 0; bid < g; bid++)
        for (unsigned tid = 0; tid < b; tid++)
            thread(p, (size_t)bid * b + tid, nthreads);
    if (mode)
        *mode = p.mode == REDUCE_MODE_VECTOR  ? KERNEL_EMU_VECTOR
              : p.mode == REDUCE_MODE_ALIGNED ? KERNEL_EMU_ALIGNED
                                              : KERNEL_EMU_BYTES;
}

struct reduce_emulator {
    void       *io;
    const void *in;
    size_t      count;
    unsigned    grid, block;
    int        *mode;

    template <class T, class Op> int run()
    {
        reduce_plan p = reduce_plan_make<T>(io, in, count);
        emu_grid(p, reduce_plan_grid(p), grid, block, mode, reduce_thread<T, Op>);
        return 0;
    }
};

struct reduce_n_emulator {
    void              *dst;
    const void *const *src;
    int                n;
    size_t             count;
    unsigned           grid, block;
    int               *mode;

    template <class T, class Op> int run()
    {
        reduce_n_plan p = reduce_n_plan_make<T>(dst, src, n, count);
        emu_grid(p, reduce_n_plan_grid(p), grid, block, mode, reduce_n_thread<T, Op>);
        return 0;
    }
};

}  // namespace

extern "C" int kernel_emu_reduce_n(void *dst, const void *const *src, int n,
                                   size_t count, collar_dtype_t dt, collar_op_t op,
                                   unsigned grid, unsigned block, int *mode)
{
    if (n < 2 || n > COLLAR_REDUCE_N_MAX)
        return -1;
    reduce_n_emulator e;
    e.dst = dst;
    e.src = src;
    e.n = n;
    e.count = count;
    e.grid = grid;
    e.block = block;
    e.mode = mode;
    return reduce_dispatch(dt, op, e);
}

extern "C" int kernel_emu_reduce(void *inout, const void *in, size_t count,
                                 collar_dtype_t dt, collar_op_t op,
                                 unsigned grid, unsigned block, int *mode)
{
    reduce_emulator e;
    e.io = inout;
    e.in = in;
    e.count = count;
    e.grid = grid;
    e.block = block;
    e.mode = mode;
    return reduce_dispatch(dt, op, e);
}
