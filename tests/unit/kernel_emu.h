/* collar - the CUDA reduction kernels run on the CPU (kernel_emu.cu). */
#ifndef COLLAR_KERNEL_EMU_H
#define COLLAR_KERNEL_EMU_H

#include "reduce/device_reduce.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the plan cut the buffers. */
enum { KERNEL_EMU_VECTOR, KERNEL_EMU_ALIGNED, KERNEL_EMU_BYTES };

/*
 * What collar_cuda_reduce_launch() would compute, on the CPU: the kernel of
 * the pair over `grid` blocks of `block` threads (0: the launch's own
 * geometry).  Runs even for count 0.  Returns 0, or -1 for a pair without a
 * kernel.  *mode (when not NULL) receives the plan's KERNEL_EMU_*.
 */
int kernel_emu_reduce(void *inout, const void *in, size_t count,
                      collar_dtype_t dt, collar_op_t op,
                      unsigned grid, unsigned block, int *mode);

/* The same for collar_cuda_reduce_n_launch(): n inputs into dst. */
int kernel_emu_reduce_n(void *dst, const void *const *src, int n, size_t count,
                        collar_dtype_t dt, collar_op_t op,
                        unsigned grid, unsigned block, int *mode);

#ifdef __cplusplus
}
#endif

#endif
