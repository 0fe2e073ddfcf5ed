/*
 * collar - a minimal stand-in for the CUDA emulation's runtime half, for
 * test_emu_kernels only (never in a library): the functions of
 * cudaemu_int.h other than cudaemu_kernel_launch, and nvcc's registration
 * and launch entry points, so that the kernel half runs on its own through
 * the same host stubs as in libcollar.
 *
 * One device (0); "device memory" is host memory handed out by
 * stub_device_alloc and known to cudaemu_device_span at the same address;
 * every stream runs its work at once on the launching thread.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaemu_int.h"
#include "stub_runtime.h"

/* ------------------------------------------------------------ memory */

enum { STUB_ALLOCS = 64 };
static struct { char *base; size_t bytes; } stub_allocs[STUB_ALLOCS];

void *stub_device_alloc(size_t bytes)
{
    for (int i = 0; i < STUB_ALLOCS; i++) {
        if (!stub_allocs[i].base) {
            /* 256-byte aligned as cudaMalloc's (CUDA C++ Programming
             * Guide, Device Memory Accesses). */
            void *p = NULL;
            if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0)
                return NULL;
            stub_allocs[i].base = p;
            stub_allocs[i].bytes = bytes;
            return p;
        }
    }
    return NULL;
}

void stub_device_free(void *p)
{
    for (int i = 0; i < STUB_ALLOCS; i++) {
        if (p && stub_allocs[i].base == p) {
            free(p);
            stub_allocs[i].base = NULL;
        }
    }
}

void *cudaemu_device_span(int device, const void *p, size_t bytes)
{
    const uintptr_t a = (uintptr_t)p;
    if (device != 0)
        return NULL;
    for (int i = 0; i < STUB_ALLOCS; i++) {
        const uintptr_t b = (uintptr_t)stub_allocs[i].base;
        if (b && a >= b && a - b <= stub_allocs[i].bytes &&
            bytes <= stub_allocs[i].bytes - (a - b))
            return (void *)p;
    }
    return NULL;
}

/* ------------------------------------------------- errors, rules, device */

static _Thread_local cudaError_t stub_last_error;

cudaError_t cudaemu_set_error(cudaError_t err)
{
    stub_last_error = err;
    return err;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = stub_last_error;
    stub_last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return stub_last_error;
}

void cudaemu_rule(const char *rule, const char *source, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "cudaemu: RULE %s: ", rule);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (%s)\n", source);
    abort();
}

int cudaemu_current_device(void)
{
    return 0;
}

cudaError_t cudaemu_stream_enqueue(cudaStream_t stream, void (*fn)(void *arg),
                                   void *arg)
{
    (void)stream;
    fn(arg);
    free(arg);
    return cudaSuccess;
}

/* --------------------------------------- nvcc's registration and launch */

enum { STUB_KERNELS = 256 };
static struct { const void *host; const char *name; } stub_kernels[STUB_KERNELS];
static int stub_nkernels;

int stub_registered(const char ***names)
{
    static const char *list[STUB_KERNELS];
    for (int i = 0; i < stub_nkernels; i++)
        list[i] = stub_kernels[i].name;
    *names = list;
    return stub_nkernels;
}

static void *stub_fatbin_handle;

void **__cudaRegisterFatBinary(void *fatCubin)
{
    (void)fatCubin;
    return &stub_fatbin_handle;
}

void __cudaRegisterFatBinaryEnd(void **handle)
{
    (void)handle;
}

void __cudaUnregisterFatBinary(void **handle)
{
    (void)handle;
}

void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid,
                            uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)handle; (void)deviceName; (void)thread_limit; (void)tid; (void)bid;
    (void)bDim; (void)gDim; (void)wSize;
    if (stub_nkernels < STUB_KERNELS) {
        stub_kernels[stub_nkernels].host = hostFun;
        stub_kernels[stub_nkernels].name = deviceFun;
        stub_nkernels++;
    }
}

static _Thread_local struct {
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
} stub_config;

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared,
                                     struct CUstream_st *stream)
{
    stub_config.grid = grid;
    stub_config.block = block;
    stub_config.shared = shared;
    stub_config.stream = stream;
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shared,
                                       void *stream)
{
    *grid = stub_config.grid;
    *block = stub_config.block;
    *shared = stub_config.shared;
    *(cudaStream_t *)stream = stub_config.stream;
    return cudaSuccess;
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block,
                             void **args, size_t shared, cudaStream_t stream)
{
    for (int i = 0; i < stub_nkernels; i++)
        if (stub_kernels[i].host == func)
            return cudaemu_kernel_launch(stub_kernels[i].name, args, grid, block,
                                         shared, stream);
    return cudaemu_set_error(cudaErrorInvalidDeviceFunction);
}

/* CUDA 13's nvcc host stubs: a handle per kernel, then a launch by handle
 * (crt/host_runtime.h, __cudaLaunch); the handle here is the host stub. */
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
    *kernel = (cudaKernel_t)(uintptr_t)func;
    return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block,
                               void **args, size_t shared, cudaStream_t stream)
{
    return cudaLaunchKernel((const void *)kernel, grid, block, args, shared,
                            stream);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block,
                                    void **args, size_t shared,
                                    cudaStream_t stream)
{
    return __cudaLaunchKernel(kernel, grid, block, args, shared, stream);
}
