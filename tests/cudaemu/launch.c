/*
 * collar - the CUDA emulation's kernel registration and launch (tests
 * only): the entry points nvcc's host code calls (__cudaRegisterFatBinary,
 * __cudaRegisterFunction, the <<<>>> configuration, __cudaGetKernel,
 * __cudaLaunchKernel), cudaLaunchKernel, and the driver entry points a
 * program looks up by name (cudaGetDriverEntryPoint, cuGetProcAddress).
 * A launch resolves the host stub to the kernel's device name and hands it
 * to the kernel half (cudaemu_kernel_launch).
 */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

/* nvcc's registration entry points (crt/host_runtime.h declares them for
 * C++ only). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun,
                            char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar,
                       char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global);
void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                              char *deviceAddress, const char *deviceName,
                              int ext, size_t size, int constant, int global);
char __cudaInitModule(void **fatCubinHandle);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim,
                                     size_t sharedMem, struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
                                       size_t *sharedMem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                               void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim,
                                    dim3 blockDim, void **args, size_t sharedMem,
                                    cudaStream_t stream);

/* The kernel half's launch, until it is linked in. */
__attribute__((weak)) cudaError_t
cudaemu_kernel_launch(const char *name, void **args, dim3 grid, dim3 block,
                      size_t shared_mem, cudaStream_t stream)
{
    (void)name;
    (void)args;
    (void)grid;
    (void)block;
    (void)shared_mem;
    (void)stream;
    return cudaemu_set_error(cudaErrorInvalidDeviceFunction);
}

/* ------------------------------------------------------------ registration */

/* A registered kernel: cudaKernel_t points at one. */
struct CUkern_st {
    const void       *stub;     /* the host stub */
    const char       *name;     /* the device (mangled) name */
    struct CUkern_st *next;
};
static struct CUkern_st *kernels;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int fatbin_handle;

void **__cudaRegisterFatBinary(void *fatCubin)
{
    (void)fatCubin;
    emu_init();
    return (void **)&fatbin_handle;
}

void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    (void)fatCubinHandle;
}

void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    (void)fatCubinHandle;
}

char __cudaInitModule(void **fatCubinHandle)
{
    (void)fatCubinHandle;
    return 1;
}

void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun,
                            char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)fatCubinHandle;
    (void)deviceName;
    (void)thread_limit;
    (void)tid;
    (void)bid;
    (void)bDim;
    (void)gDim;
    (void)wSize;
    struct CUkern_st *k = malloc(sizeof(*k));
    if (k == NULL) {
        return;
    }
    k->stub = hostFun;
    k->name = deviceFun;   /* the mangled name: the kernel half's key */
    pthread_mutex_lock(&reg_lock);
    k->next = kernels;
    kernels = k;
    pthread_mutex_unlock(&reg_lock);
}

/* Device variables are accepted and never read by the runtime half. */
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar,
                       char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global)
{
    (void)fatCubinHandle;
    (void)hostVar;
    (void)deviceAddress;
    (void)deviceName;
    (void)ext;
    (void)size;
    (void)constant;
    (void)global;
}

void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                              char *deviceAddress, const char *deviceName,
                              int ext, size_t size, int constant, int global)
{
    __cudaRegisterVar(fatCubinHandle, (char *)hostVarPtrAddress, deviceAddress,
                      deviceName, ext, size, constant, global);
}

static struct CUkern_st *kernel_of(const void *stub)
{
    pthread_mutex_lock(&reg_lock);
    struct CUkern_st *k;
    for (k = kernels; k != NULL && k->stub != stub; k = k->next) {
    }
    pthread_mutex_unlock(&reg_lock);
    return k;
}

/* ----------------------------------------------------------------- launch */

/* The <<<>>> configuration, pushed by the call site and popped by the stub. */
static _Thread_local struct {
    dim3          grid, block;
    size_t        shared;
    cudaStream_t  stream;
    int           set;
} config;

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim,
                                     size_t sharedMem, struct CUstream_st *stream)
{
    config.grid = gridDim;
    config.block = blockDim;
    config.shared = sharedMem;
    config.stream = stream;
    config.set = 1;
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
                                       size_t *sharedMem, void *stream)
{
    if (!config.set) {
        return cudaErrorMissingConfiguration;
    }
    *gridDim = config.grid;
    *blockDim = config.block;
    *sharedMem = config.shared;
    *(cudaStream_t *)stream = config.stream;
    config.set = 0;
    return cudaSuccess;
}

static cudaError_t launch(const struct CUkern_st *k, dim3 grid, dim3 block,
                          void **args, size_t shared, cudaStream_t stream)
{
    EMU_ENTER("cudaLaunchKernel");
    if (k == NULL) {
        return emu_error(cudaErrorInvalidDeviceFunction);
    }
    if (emu_device() < 0) {
        return cudaErrorNoDevice;
    }
    return cudaemu_kernel_launch(k->name, args, grid, block, shared, stream);
}

/* CUDA Runtime API, cudaLaunchKernel: "Invokes the kernel func on gridDim
 * ... blocks"; a func that is no registered kernel is
 * cudaErrorInvalidDeviceFunction. */
cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim,
                             void **args, size_t sharedMem, cudaStream_t stream)
{
    return launch(kernel_of(func), gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
    struct CUkern_st *k = kernel_of(func);
    *kernel = k;
    return k != NULL ? cudaSuccess : cudaErrorInvalidDeviceFunction;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                               void **args, size_t sharedMem, cudaStream_t stream)
{
    return launch(kernel, gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim,
                                    dim3 blockDim, void **args, size_t sharedMem,
                                    cudaStream_t stream)
{
    return launch(kernel, gridDim, blockDim, args, sharedMem,
                  stream == NULL ? cudaStreamPerThread : stream);
}

/* ----------------------------------------------------- driver entry points */

#define ENTRY(f) { #f, (void *)f }
static const struct {
    const char *name;
    void       *fn;
} entries[] = {
    ENTRY(cuInit), ENTRY(cuDriverGetVersion), ENTRY(cuDeviceGet),
    ENTRY(cuDeviceGetCount), ENTRY(cuDeviceGetName), ENTRY(cuDeviceGetAttribute),
    ENTRY(cuDeviceGetPCIBusId),
    { "cuDeviceTotalMem", (void *)cuDeviceTotalMem },
    ENTRY(cuDevicePrimaryCtxRetain),
    { "cuDevicePrimaryCtxRelease", (void *)cuDevicePrimaryCtxRelease },
    ENTRY(cuDevicePrimaryCtxGetState),
    ENTRY(cuCtxGetCurrent), ENTRY(cuCtxSetCurrent), ENTRY(cuCtxGetDevice),
    ENTRY(cuCtxSynchronize),
    ENTRY(cuPointerGetAttribute), ENTRY(cuPointerGetAttributes),
    { "cuMemGetAddressRange", (void *)cuMemGetAddressRange },
    ENTRY(cuMemCreate), ENTRY(cuMemRelease), ENTRY(cuMemAddressReserve),
    ENTRY(cuMemAddressFree), ENTRY(cuMemMap), ENTRY(cuMemUnmap),
    ENTRY(cuMemSetAccess), ENTRY(cuMemGetAllocationGranularity),
    ENTRY(cuGetErrorString), ENTRY(cuGetErrorName),
};
#undef ENTRY

static void *entry_point(const char *symbol)
{
    if (symbol == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        if (strcmp(entries[i].name, symbol) == 0) {
            return entries[i].fn;
        }
    }
    return NULL;
}

/* CUDA Runtime API, cudaGetDriverEntryPointByVersion: "Returns the
 * requested driver API function pointer"; a symbol the driver does not
 * have is cudaSuccess with cudaDriverEntryPointSymbolNotFound. */
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                             unsigned int cudaVersion,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus)
{
    (void)cudaVersion;
    (void)flags;
    EMU_ENTER("cudaGetDriverEntryPoint");
    if (symbol == NULL || funcPtr == NULL) {
        return emu_error(cudaErrorInvalidValue);
    }
    *funcPtr = entry_point(symbol);
    if (driverStatus != NULL) {
        *driverStatus = *funcPtr != NULL ? cudaDriverEntryPointSuccess
                                         : cudaDriverEntryPointSymbolNotFound;
    }
    return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                    unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return cudaGetDriverEntryPointByVersion(symbol, funcPtr, CUDART_VERSION,
                                            flags, driverStatus);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                          cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    (void)cudaVersion;
    (void)flags;
    emu_init();
    if (symbol == NULL || pfn == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pfn = entry_point(symbol);
    if (symbolStatus != NULL) {
        *symbolStatus = *pfn != NULL ? CU_GET_PROC_ADDRESS_SUCCESS
                                     : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return *pfn != NULL ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
