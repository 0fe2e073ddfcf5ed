/*
 * collar - the CUDA emulation's internal interface (tests only, never
 * installed): what the kernel half (kernels registered by nvcc's host code
 * and run as host builds of the same bodies) needs from the runtime half
 * (devices, contexts, memory, streams, rules).  Both halves link into
 * libcudaemu.so.
 */
#ifndef COLLAR_CUDAEMU_INT_H
#define COLLAR_CUDAEMU_INT_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A broken documented rule: print
 *   cudaemu: RULE <rule>: <what> (<source>)
 * on stderr, with the process id and the calling thread's device, and
 * abort().  `source` names where the rule is documented (e.g. "CUDA
 * Runtime API, cudaIpcOpenMemHandle").  Never returns.
 */
void cudaemu_rule(const char *rule, const char *source, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

/*
 * The calling thread's current device, making the device's primary context
 * current (and recording that this process made a context on it) where the
 * thread has none, as the runtime does on the first call that needs one.
 * -1 (and the error recorded for cudaGetLastError) when that fails.
 */
int cudaemu_current_device(void);

/*
 * Is [p, p + bytes) device memory that a kernel running on `device` may
 * touch (an allocation of that device, or of a peer through an opened IPC
 * handle or peer access)?  Returns the address the emulation's host code
 * reads and writes those bytes at (the same as p where device memory is
 * mapped at its device address), or NULL when it is not.
 */
void *cudaemu_device_span(int device, const void *p, size_t bytes);

/*
 * Run fn(arg) on `stream` in stream order (after all work queued on it
 * before, and, for the legacy default stream, with its synchronisation with
 * the other blocking streams of the device), on the emulation's worker for
 * that stream.  The stream must be valid for the current device (0, the
 * legacy or per-thread default stream, or a created one not destroyed; a
 * destroyed one is a rule).  Returns cudaSuccess, or the error to return
 * from the launch (also recorded for cudaGetLastError): an injected launch
 * failure, a sticky error in force.  `arg` is owned by the callee after a
 * successful call and freed with free() once fn has run.
 */
cudaError_t cudaemu_stream_enqueue(cudaStream_t stream, void (*fn)(void *arg),
                                   void *arg);

/* Record `err` as the thread's last error (cudaGetLastError / PeekAtLastError)
 * and return it; a sticky error also poisons the process's context. */
cudaError_t cudaemu_set_error(cudaError_t err);

/*
 * The kernel half: launch the host build of the kernel whose device-side
 * (mangled) name is `name`, as cudaLaunchKernel (or the <<<>>> syntax,
 * through __cudaPushCallConfiguration) asked.  The runtime half's
 * __cudaRegisterFunction maps each host stub to its device name, and its
 * cudaLaunchKernel resolves the stub and calls this on the launching
 * thread.  The kernel half checks the launch configuration (documented
 * limits: block of at most 1024 threads, dimensions, shared memory),
 * copies the parameters out of `args` (they live on the caller's stack),
 * checks the pointers it will touch with cudaemu_device_span, and queues
 * the run with cudaemu_stream_enqueue.  Returns cudaSuccess, or the launch
 * error (cudaErrorInvalidDeviceFunction for a name without a host build,
 * cudaErrorInvalidConfiguration, ...), recorded with cudaemu_set_error.
 */
cudaError_t cudaemu_kernel_launch(const char *name, void **args, dim3 grid,
                                  dim3 block, size_t shared_mem,
                                  cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
