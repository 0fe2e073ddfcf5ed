/*
 * collar - CUDA reduction kernels (device_reduce.cu), callable from C.
 *
 * The same semantics as the host loops of reduce.h: inout[i] = in[i] (op)
 * inout[i], MIN / MAX keep `in` on equal or unordered values, count 0 touches
 * nothing, buffers may be unaligned, `in` and `inout` are the same buffer or
 * do not overlap.  Both must be device memory (or memory the device can
 * address).  Built only when configure found CUDA (COLLAR_HAVE_CUDA).
 *
 * Pairs with a kernel: every pair of collar_reduce_supported() except the
 * long double types (no device arithmetic for them) and MINLOC / MAXLOC; for
 * those the caller falls back to another path.
 */
#ifndef COLLAR_DEVICE_REDUCE_H
#define COLLAR_DEVICE_REDUCE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "reduce.h"

/* 1 when a device kernel exists for the pair. */
int collar_cuda_reduce_supported(collar_dtype_t dt, collar_op_t op);

/*
 * Queue inout[i] = in[i] op inout[i], i < count, on `stream` (a cudaStream_t
 * passed as void *; NULL = the legacy default stream).  Returns 0 when
 * queued (count 0 queues nothing and returns 0), -1 for an unsupported pair
 * (nothing queued), or a positive cudaError_t code when the launch failed
 * (the code of cudaGetLastError() after the launch).
 */
int collar_cuda_reduce_launch(void *inout, const void *in, size_t count,
                              collar_dtype_t dt, collar_op_t op, void *stream);

/*
 * Queue dst[i] = src[n-1][i] op (... op (src[1][i] op src[0][i])), i <
 * count, on `stream`, 2 <= n <= COLLAR_REDUCE_N_MAX: the bits of a copy of
 * src[0] and collar_cuda_reduce_launch of src[1] .. src[n-1] into it, each
 * input read once.  dst may be src[0] and must not overlap the others; the
 * pointers are passed by value (`src` may be reused on return).  Returns
 * as collar_cuda_reduce_launch (-1 also for n out of range).
 */
int collar_cuda_reduce_n_launch(void *dst, const void *const *src, int n,
                                size_t count, collar_dtype_t dt, collar_op_t op,
                                void *stream);

#ifdef __cplusplus
}
#endif

#endif /* COLLAR_DEVICE_REDUCE_H */
