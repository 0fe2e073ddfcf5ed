/*
 * collar - the CUDA emulation's devices, contexts and errors (tests only):
 * the node's devices (CUDAEMU_DEVICES, default 4, the same set in every
 * process of the machine), the ones this process sees (CUDA_VISIBLE_DEVICES),
 * a primary context per device and the calling thread's current context,
 * the ledger of the contexts this process made (CUDAEMU_REPORT) and the
 * devices it may make them on (CUDAEMU_STRICT_DEVICES), the count of every
 * entry point's calls (cudaemu_count, CUDAEMU_COUNTS), the per-thread last
 * error and the process's sticky error, error injection (CUDAEMU_FAIL), and
 * the driver entry points that programs look up by name.
 */
#define _GNU_SOURCE
#include "emu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int emu_nphys;
int emu_nvis;
int emu_vis[EMU_MAXDEV];
struct CUctx_st emu_ctx[EMU_MAXDEV];
_Thread_local int emu_in_host_func;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned strict_mask;          /* 0: no CUDAEMU_STRICT_DEVICES */
static int strict_set;
static const char *report_path;
static const char *counts_path;

/* The thread's runtime state: its current context, the device the runtime
 * would make current (cudaSetDevice, default 0), the call being made, its
 * last error. */
static _Thread_local struct CUctx_st *tl_ctx;
static _Thread_local int tl_dev;
static _Thread_local const char *tl_api;
static _Thread_local cudaError_t tl_err;
static cudaError_t sticky;            /* atomic */

/* The ledger: which devices got a context in this process, and how. */
static struct {
    int         made;
    int         explicit_;
    const char *first;
} ledger[EMU_MAXDEV];
static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------ injection */

static const char *const fail_names[EMU_F_COUNT] = {
    [EMU_F_MALLOC] = "malloc", [EMU_F_HOSTALLOC] = "hostalloc",
    [EMU_F_LAUNCH] = "launch", [EMU_F_STICKY] = "sticky",
    [EMU_F_IPCOPEN] = "ipcopen",
};
static struct {
    int      on;
    unsigned nth;       /* 0: every call */
    int      from;      /* 1: the nth call and every later one */
    unsigned calls;     /* atomic */
} fail[EMU_F_COUNT];

static long my_rank(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                        "PMIX_RANK", "SLURM_PROCID" };
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v != '\0') {
            return strtol(v, NULL, 10);
        }
    }
    return -1;
}

/* CUDAEMU_FAIL=kind[:N[+]][@rank],...  kind: malloc (device allocations:
 * cudaMalloc, cudaMallocAsync, cudaMallocManaged, cuMemCreate), hostalloc
 * (cudaMallocHost, cudaHostAlloc, cudaHostRegister), launch (a kernel
 * launch returns cudaErrorLaunchFailure), sticky (a kernel faults when it
 * runs: cudaErrorIllegalAddress from then on, for every call), ipcopen
 * (cudaIpcOpenMemHandle returns cudaErrorMapBufferObjectFailed).  N: only
 * the Nth call of that kind (counted from 1); N+: the Nth and every later
 * one; no N: every call.  @rank: only in the process of that MPI rank. */
static void parse_fail(const char *spec)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        char *at = strchr(tok, '@');
        if (at != NULL) {
            *at = '\0';
            if (strtol(at + 1, NULL, 10) != my_rank()) {
                continue;
            }
        }
        char *colon = strchr(tok, ':');
        unsigned nth = 0;
        int from = 0;
        if (colon != NULL) {
            *colon = '\0';
            char *end;
            nth = (unsigned)strtoul(colon + 1, &end, 10);
            from = *end == '+';
        }
        int k;
        for (k = 0; k < EMU_F_COUNT; k++) {
            if (strcmp(tok, fail_names[k]) == 0) {
                break;
            }
        }
        if (k == EMU_F_COUNT) {
            fprintf(stderr, "cudaemu: CUDAEMU_FAIL: unknown kind '%s'\n", tok);
            continue;
        }
        fail[k].on = 1;
        fail[k].nth = nth;
        fail[k].from = from;
    }
}

int emu_inject(enum emu_fail kind)
{
    emu_init();
    if (!fail[kind].on) {
        return 0;
    }
    const unsigned n = __atomic_add_fetch(&fail[kind].calls, 1, __ATOMIC_RELAXED);
    return fail[kind].nth == 0 || n == fail[kind].nth
           || (fail[kind].from && n > fail[kind].nth);
}

/* --------------------------------------------------------------- counts */

/* Calls per entry point, keyed by the name's address (each entry point
 * passes a string literal; one name may have several addresses, one per
 * object file, which cudaemu_count adds up).  Open addressing, filled
 * without a lock: a slot's name is set once, by compare-and-swap. */
#define EMU_NCOUNTS 512
static struct {
    const char   *api;
    unsigned long n;
} counts[EMU_NCOUNTS];

void emu_count(const char *api)
{
    size_t h = ((uintptr_t)api >> 3) % EMU_NCOUNTS;
    for (size_t i = 0; i < EMU_NCOUNTS; i++, h = (h + 1) % EMU_NCOUNTS) {
        const char *cur = __atomic_load_n(&counts[h].api, __ATOMIC_ACQUIRE);
        if (cur == NULL
            && __atomic_compare_exchange_n(&counts[h].api, &cur, api, 0,
                                           __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            cur = api;
        }
        if (cur == api) {
            __atomic_add_fetch(&counts[h].n, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

unsigned long cudaemu_count(const char *api)
{
    unsigned long n = 0;
    for (size_t i = 0; i < EMU_NCOUNTS; i++) {
        const char *cur = __atomic_load_n(&counts[i].api, __ATOMIC_ACQUIRE);
        if (cur != NULL && (api == NULL || strcmp(cur, api) == 0)) {
            n += __atomic_load_n(&counts[i].n, __ATOMIC_RELAXED);
        }
    }
    return n;
}

/* CUDAEMU_COUNTS: one line at exit, "pid=P api=N api=N ...", every entry
 * point this process called, in no particular order. */
static void write_counts(void)
{
    int fd = open(counts_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) {
        return;
    }
    char line[8192];
    size_t len = (size_t)snprintf(line, sizeof(line), "pid=%ld", (long)getpid());
    for (size_t i = 0; i < EMU_NCOUNTS && len < sizeof(line); i++) {
        const char *api = counts[i].api;
        int dup = api == NULL;
        for (size_t j = 0; j < i && !dup; j++) {
            dup = counts[j].api != NULL && strcmp(counts[j].api, api) == 0;
        }
        if (!dup) {
            len += (size_t)snprintf(line + len, sizeof(line) - len, " %s=%lu",
                                    api, cudaemu_count(api));
        }
    }
    if (len >= sizeof(line)) {
        len = sizeof(line) - 1;
    }
    line[len++] = '\n';
    if (write(fd, line, len) != (ssize_t)len) {
        /* nothing to do at exit */
    }
    close(fd);
}

/* --------------------------------------------------------------- ledger */

static void write_report(void)
{
    if (report_path == NULL) {
        return;
    }
    /* O_APPEND: every process of a run may write to the same file. */
    int fd = open(report_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) {
        return;
    }
    for (int p = 0; p < emu_nphys; p++) {
        if (!ledger[p].made) {
            continue;
        }
        char line[256];
        int n = snprintf(line, sizeof(line),
                         "pid=%ld device=%d ordinal=%d how=%s first=%s\n",
                         (long)getpid(), p, emu_ordinal_of_phys(p),
                         ledger[p].explicit_ ? "explicit" : "implicit",
                         ledger[p].first ? ledger[p].first : "?");
        if (write(fd, line, (size_t)n) != n) {
            break;
        }
    }
    close(fd);
}

/* A context of node device `phys` became current on this thread: record
 * the first one per device, against the devices the process may use. */
static void note_context(int phys, int explicit_)
{
    pthread_mutex_lock(&ledger_lock);
    const int first = !ledger[phys].made;
    if (first) {
        ledger[phys].made = 1;
        ledger[phys].explicit_ = explicit_;
        ledger[phys].first = tl_api;
    }
    pthread_mutex_unlock(&ledger_lock);
    if (first && strict_set && !(strict_mask & (1u << phys))) {
        emu_break(EMU_R_UNUSED_DEVICE, "%s made a context on device %d "
                  "(ordinal %d) %s; this process may use only the devices "
                  "of CUDAEMU_STRICT_DEVICES", tl_api ? tl_api : "a call",
                  phys, emu_ordinal_of_phys(phys),
                  explicit_ ? "explicitly" : "implicitly (a thread without a "
                  "current context)");
    }
}

/* --------------------------------------------------------------- config */

static void load(void)
{
    const char *v = getenv("CUDAEMU_DEVICES");
    emu_nphys = v != NULL ? atoi(v) : 4;
    if (emu_nphys < 0) {
        emu_nphys = 0;
    }
    if (emu_nphys > EMU_MAXDEV) {
        emu_nphys = EMU_MAXDEV;
    }
    for (int p = 0; p < EMU_MAXDEV; p++) {
        emu_ctx[p].phys = p;
    }
    /* CUDA Programming Guide, CUDA Environment Variables:
     * CUDA_VISIBLE_DEVICES is a comma-separated sequence of GPU
     * identifiers; "If one of the indices is invalid, only the devices
     * whose index precedes the invalid index are visible". */
    v = getenv("CUDA_VISIBLE_DEVICES");
    if (v == NULL) {
        for (int p = 0; p < emu_nphys; p++) {
            emu_vis[emu_nvis++] = p;
        }
    } else {
        const char *s = v;
        while (*s != '\0' && emu_nvis < EMU_MAXDEV) {
            char *end;
            long p = strtol(s, &end, 10);
            int dup = 0;
            for (int i = 0; i < emu_nvis; i++) {
                dup |= emu_vis[i] == p;
            }
            if (end == s || (*end != ',' && *end != '\0') || p < 0
                || p >= emu_nphys || dup) {
                break;
            }
            emu_vis[emu_nvis++] = (int)p;
            s = *end == ',' ? end + 1 : end;
        }
    }
    v = getenv("CUDAEMU_STRICT_DEVICES");
    if (v != NULL) {
        strict_set = 1;
        for (const char *s = v; *s != '\0';) {
            char *end;
            long p = strtol(s, &end, 10);
            if (end == s) {
                break;
            }
            if (p >= 0 && p < EMU_MAXDEV) {
                strict_mask |= 1u << p;
            }
            s = *end == ',' ? end + 1 : end;
        }
    }
    v = getenv("CUDAEMU_FAIL");
    if (v != NULL) {
        parse_fail(v);
    }
    report_path = getenv("CUDAEMU_REPORT");
    if (report_path != NULL) {
        atexit(write_report);
    }
    counts_path = getenv("CUDAEMU_COUNTS");
    if (counts_path != NULL) {
        atexit(write_counts);
    }
}

void emu_init(void)
{
    pthread_once(&once, load);
}

cudaError_t emu_enter(const char *api)
{
    emu_count(api);
    return emu_enter_again(api);
}

cudaError_t emu_enter_again(const char *api)
{
    emu_init();
    if (emu_in_host_func) {
        emu_break(EMU_R_CALL_IN_HOST_FUNC, "%s called from a host function "
                  "running on a stream", api);
    }
    tl_api = api;
    cudaError_t s = __atomic_load_n(&sticky, __ATOMIC_ACQUIRE);
    if (s != cudaSuccess) {
        tl_err = s;
    }
    return s;
}

/* ------------------------------------------------------------- contexts */

int emu_ordinal_of_phys(int phys)
{
    emu_init();
    for (int i = 0; i < emu_nvis; i++) {
        if (emu_vis[i] == phys) {
            return i;
        }
    }
    return -1;
}

int emu_ctx_ordinal(CUcontext c)
{
    if (c < &emu_ctx[0] || c >= &emu_ctx[EMU_MAXDEV]) {
        return -1;
    }
    return emu_ordinal_of_phys(c->phys);
}

CUcontext emu_current_ctx(void)
{
    return tl_ctx;
}

void emu_set_current_ctx(CUcontext c)
{
    if (c != NULL) {
        note_context(c->phys, 1);
        tl_dev = emu_ctx_ordinal(c);
    }
    tl_ctx = c;
}

void emu_make_current(int ordinal, int explicit_)
{
    const int phys = emu_vis[ordinal];
    note_context(phys, explicit_);
    tl_ctx = &emu_ctx[phys];
    tl_dev = ordinal;
}

int emu_device(void)
{
    emu_init();
    if (tl_ctx == NULL) {
        if (emu_nvis == 0) {
            emu_error(cudaErrorNoDevice);
            return -1;
        }
        /* CUDA Runtime API, Initialization: "the runtime ... initializes
         * the primary context for the device ... when a runtime function
         * that needs one is called" on a thread without a current
         * context: the current device's (0 unless cudaSetDevice chose
         * another).  This is the implicit context the ledger records. */
        emu_make_current(tl_dev < emu_nvis ? tl_dev : 0, 0);
    }
    return emu_ctx_ordinal(tl_ctx);
}

int cudaemu_current_device(void)
{
    return emu_device();
}

/* --------------------------------------------------------------- errors */

cudaError_t emu_error(cudaError_t err)
{
    if (err != cudaSuccess) {
        tl_err = err;
    }
    return err;
}

cudaError_t cudaemu_set_error(cudaError_t err)
{
    if (err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure
        || err == cudaErrorHardwareStackError || err == cudaErrorIllegalInstruction
        || err == cudaErrorMisalignedAddress || err == cudaErrorInvalidPc) {
        emu_set_sticky(err);
    }
    return emu_error(err);
}

void emu_set_sticky(cudaError_t err)
{
    cudaError_t none = cudaSuccess;
    __atomic_compare_exchange_n(&sticky, &none, err, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
}

cudaError_t emu_sticky(void)
{
    return __atomic_load_n(&sticky, __ATOMIC_ACQUIRE);
}

CUresult emu_cu(cudaError_t err)
{
    switch (err) {
    case cudaSuccess: return CUDA_SUCCESS;
    case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorNoDevice: return CUDA_ERROR_NO_DEVICE;
    case cudaErrorInvalidDevice: return CUDA_ERROR_INVALID_DEVICE;
    case cudaErrorNotReady: return CUDA_ERROR_NOT_READY;
    case cudaErrorInvalidResourceHandle: return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorNotSupported: return CUDA_ERROR_NOT_SUPPORTED;
    default: return (CUresult)err;   /* 700s: the same numbers */
    }
}

/* CUDA Runtime API, cudaGetLastError: "Returns the last error that has
 * been produced by any of the runtime calls in the same instance of the
 * CUDA Runtime library in the host thread and resets it to cudaSuccess";
 * a sticky error is not reset ("the CUDA context ... is in an unusable
 * state"). */
cudaError_t cudaGetLastError(void)
{
    emu_init();
    cudaError_t e = tl_err;
    tl_err = emu_sticky();
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    emu_init();
    return tl_err;
}

#define ERR(code, text) case code: return name ? #code : text
static const char *err_text(cudaError_t e, int name)
{
    switch (e) {
    ERR(cudaSuccess, "no error");
    ERR(cudaErrorInvalidValue, "invalid argument");
    ERR(cudaErrorMemoryAllocation, "out of memory");
    ERR(cudaErrorInitializationError, "initialization error");
    ERR(cudaErrorInvalidConfiguration, "invalid configuration argument");
    ERR(cudaErrorInvalidDevicePointer, "invalid device pointer");
    ERR(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy");
    ERR(cudaErrorNoDevice, "no CUDA-capable device is detected");
    ERR(cudaErrorInvalidDevice, "invalid device ordinal");
    ERR(cudaErrorInvalidDeviceFunction, "invalid device function");
    ERR(cudaErrorInvalidResourceHandle, "invalid resource handle");
    ERR(cudaErrorNotReady, "device not ready");
    ERR(cudaErrorIllegalAddress, "an illegal memory access was encountered");
    ERR(cudaErrorLaunchFailure, "unspecified launch failure");
    ERR(cudaErrorLaunchOutOfResources, "too many resources requested for launch");
    ERR(cudaErrorMisalignedAddress, "misaligned address");
    ERR(cudaErrorMissingConfiguration, "__global__ function call is not configured");
    ERR(cudaErrorHardwareStackError, "hardware stack error");
    ERR(cudaErrorIllegalInstruction, "an illegal instruction was encountered");
    ERR(cudaErrorInvalidPc, "invalid program counter");
    ERR(cudaErrorMapBufferObjectFailed, "mapping of buffer object failed");
    ERR(cudaErrorNotSupported, "operation not supported");
    ERR(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled");
    ERR(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled");
    ERR(cudaErrorHostMemoryAlreadyRegistered,
        "part or all of the requested memory range is already mapped");
    ERR(cudaErrorHostMemoryNotRegistered,
        "pointer does not correspond to a registered memory region");
    ERR(cudaErrorInvalidSymbol, "invalid device symbol");
    ERR(cudaErrorInvalidPitchValue, "invalid pitch argument");
    ERR(cudaErrorSymbolNotFound, "named symbol not found");
    ERR(cudaErrorUnknown, "unknown error");
    default: return name ? "cudaErrorUnknown" : "unrecognized error code";
    }
}
#undef ERR

const char *cudaGetErrorString(cudaError_t error)
{
    return err_text(error, 0);
}

const char *cudaGetErrorName(cudaError_t error)
{
    return err_text(error, 1);
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    *pStr = err_text((cudaError_t)(error == CUDA_ERROR_OUT_OF_MEMORY
                                   ? cudaErrorMemoryAllocation : error), 0);
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    *pStr = err_text((cudaError_t)(error == CUDA_ERROR_OUT_OF_MEMORY
                                   ? cudaErrorMemoryAllocation : error), 1);
    return CUDA_SUCCESS;
}

/* ----------------------------------------------------- runtime: devices */

/* An ordinal of this process's devices? */
static int valid_device(int ordinal)
{
    emu_init();
    return ordinal >= 0 && ordinal < emu_nvis;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    EMU_ENTER("cudaGetDeviceCount");
    /* Documented to create no context: only the count. */
    *count = emu_nvis;
    return emu_nvis == 0 ? emu_error(cudaErrorNoDevice) : cudaSuccess;
}

/* CUDA Runtime API, cudaSetDevice: "Sets device as the current device for
 * the calling host thread"; since CUDA 12.0 it also initializes the
 * device's primary context ("cudaSetDevice will now explicitly initialize
 * the runtime"), so it counts as an explicit context in the ledger. */
cudaError_t cudaSetDevice(int device)
{
    EMU_ENTER("cudaSetDevice");
    if (!valid_device(device)) {
        return emu_error(cudaErrorInvalidDevice);
    }
    emu_make_current(device, 1);
    return cudaSuccess;
}

cudaError_t cudaInitDevice(int device, unsigned int deviceFlags,
                           unsigned int flags)
{
    (void)deviceFlags;
    (void)flags;
    EMU_ENTER("cudaInitDevice");
    if (!valid_device(device)) {
        return emu_error(cudaErrorInvalidDevice);
    }
    note_context(emu_vis[device], 1);
    return cudaSuccess;
}

/* The runtime's current device: the current context's, or the one the
 * next call would make current; asking makes no context. */
cudaError_t cudaGetDevice(int *device)
{
    EMU_ENTER("cudaGetDevice");
    *device = tl_ctx != NULL ? emu_ctx_ordinal(tl_ctx) : tl_dev;
    return cudaSuccess;
}

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    (void)flags;
    EMU_ENTER("cudaSetDeviceFlags");
    return emu_device() < 0 ? cudaErrorNoDevice : cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
    EMU_ENTER("cudaGetDeviceFlags");
    *flags = cudaDeviceScheduleAuto;
    return cudaSuccess;
}

static void bus_id(int phys, char *out, int len)
{
    /* Distinct bus numbers, the same in every process of the node. */
    snprintf(out, (size_t)len, "0000:%02X:00.0", 0x17 + 0x10 * phys);
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    EMU_ENTER("cudaDeviceGetPCIBusId");
    if (!valid_device(device)) {
        return emu_error(cudaErrorInvalidDevice);
    }
    if (pciBusId == NULL || len < 13) {
        return emu_error(cudaErrorInvalidValue);
    }
    bus_id(emu_vis[device], pciBusId, len);
    return cudaSuccess;
}

/* CUDA Runtime API, cudaDeviceGetByPCIBusId: "Returns a handle to a compute
 * device" among those of this process: a device hidden by
 * CUDA_VISIBLE_DEVICES is not found (cudaErrorInvalidDevice). */
cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *pciBusId)
{
    EMU_ENTER("cudaDeviceGetByPCIBusId");
    if (device == NULL || pciBusId == NULL) {
        return emu_error(cudaErrorInvalidValue);
    }
    for (int i = 0; i < emu_nvis; i++) {
        char id[16];
        bus_id(emu_vis[i], id, sizeof(id));
        if (strcasecmp(id, pciBusId) == 0) {
            *device = i;
            return cudaSuccess;
        }
    }
    return emu_error(cudaErrorInvalidDevice);
}

static int attr_value(enum cudaDeviceAttr attr, int ordinal)
{
    switch ((int)attr) {
    case cudaDevAttrMaxThreadsPerBlock: return 1024;
    case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: return 1024;
    case cudaDevAttrMaxBlockDimZ: return 64;
    case cudaDevAttrMaxGridDimX: return 2147483647;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: return 65535;
    case cudaDevAttrMaxSharedMemoryPerBlock: return 48 * 1024;
    case cudaDevAttrWarpSize: return 32;
    case cudaDevAttrMultiProcessorCount: return 4;
    case cudaDevAttrComputeCapabilityMajor: return 9;
    case cudaDevAttrComputeCapabilityMinor: return 0;
    case cudaDevAttrUnifiedAddressing: return 1;
    case cudaDevAttrManagedMemory: return 1;
    case cudaDevAttrConcurrentManagedAccess: return 1;
    case cudaDevAttrMemoryPoolsSupported: return 1;
    case cudaDevAttrCanUseHostPointerForRegisteredMem: return 1;
    case cudaDevAttrPciBusId: return 0x17 + 0x10 * emu_vis[ordinal];
    case cudaDevAttrPciDeviceId: case cudaDevAttrPciDomainId: return 0;
    case cudaDevAttrComputeMode: return cudaComputeModeDefault;
    case cudaDevAttrIntegrated: return 0;
    case cudaDevAttrCanMapHostMemory: return 1;
    case cudaDevAttrAsyncEngineCount: return 2;
    case cudaDevAttrConcurrentKernels: return 1;
    default: return 0;
    }
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    EMU_ENTER("cudaDeviceGetAttribute");
    if (!valid_device(device)) {
        return emu_error(cudaErrorInvalidDevice);
    }
    *value = attr_value(attr, device);
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    EMU_ENTER("cudaGetDeviceProperties");
    if (!valid_device(device)) {
        return emu_error(cudaErrorInvalidDevice);
    }
    memset(prop, 0, sizeof(*prop));
    snprintf(prop->name, sizeof(prop->name), "cudaemu device %d", emu_vis[device]);
    prop->totalGlobalMem = (size_t)16 << 30;
    prop->sharedMemPerBlock = 48 * 1024;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->major = 9;
    prop->multiProcessorCount = 4;
    prop->unifiedAddressing = 1;
    prop->managedMemory = 1;
    prop->pciBusID = 0x17 + 0x10 * emu_vis[device];
    return cudaSuccess;
}

/* Every pair of the node's devices can access each other (as on an NVLink
 * machine); a device cannot be its own peer. */
cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    EMU_ENTER("cudaDeviceCanAccessPeer");
    if (device < 0 || device >= emu_nvis || peerDevice < 0
        || peerDevice >= emu_nvis) {
        return emu_error(cudaErrorInvalidDevice);
    }
    *canAccessPeer = device != peerDevice;
    return cudaSuccess;
}

static unsigned peer_enabled[EMU_MAXDEV];   /* bit p: ordinal -> phys p */

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    EMU_ENTER("cudaDeviceEnablePeerAccess");
    const int d = emu_device();
    if (d < 0) {
        return cudaErrorNoDevice;
    }
    if (flags != 0 || peerDevice < 0 || peerDevice >= emu_nvis) {
        return emu_error(peerDevice < 0 || peerDevice >= emu_nvis
                         ? cudaErrorInvalidDevice : cudaErrorInvalidValue);
    }
    const unsigned bit = 1u << emu_vis[peerDevice];
    if (__atomic_fetch_or(&peer_enabled[emu_vis[d]], bit, __ATOMIC_RELAXED) & bit) {
        return emu_error(cudaErrorPeerAccessAlreadyEnabled);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
    EMU_ENTER("cudaDeviceDisablePeerAccess");
    const int d = emu_device();
    if (d < 0 || peerDevice < 0 || peerDevice >= emu_nvis) {
        return emu_error(cudaErrorInvalidDevice);
    }
    const unsigned bit = 1u << emu_vis[peerDevice];
    if (!(__atomic_fetch_and(&peer_enabled[emu_vis[d]], ~bit, __ATOMIC_RELAXED) & bit)) {
        return emu_error(cudaErrorPeerAccessNotEnabled);
    }
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    cuDriverGetVersion(driverVersion);
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    emu_init();
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDeviceReset(void)
{
    EMU_ENTER("cudaDeviceReset");
    const int d = emu_device();
    if (d >= 0) {
        emu_device_wait(emu_vis[d]);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    EMU_ENTER("cudaDeviceSynchronize");
    const int d = emu_device();
    if (d < 0) {
        return cudaErrorNoDevice;
    }
    emu_device_wait(emu_vis[d]);
    return emu_error(emu_sticky());
}

/* ----------------------------------------------------- driver: devices */

CUresult cuInit(unsigned int flags)
{
    if (flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    emu_init();
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    emu_init();
    *driverVersion = CUDA_VERSION;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    emu_init();
    *count = emu_nvis;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    emu_init();
    if (!valid_device(ordinal)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    snprintf(name, (size_t)len, "cudaemu device %d", emu_vis[dev]);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    /* The driver's attribute numbers are the runtime's. */
    *pi = attr_value((enum cudaDeviceAttr)attrib, dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    bus_id(emu_vis[dev], pciBusId, len);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *bytes = (size_t)16 << 30;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------- driver: contexts */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (emu_enter("cuDevicePrimaryCtxRetain") != cudaSuccess) {
        return emu_cu(emu_sticky());
    }
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    struct CUctx_st *c = &emu_ctx[emu_vis[dev]];
    note_context(c->phys, 1);
    __atomic_add_fetch(&c->retained, 1, __ATOMIC_RELAXED);
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    struct CUctx_st *c = &emu_ctx[emu_vis[dev]];
    if (__atomic_load_n(&c->retained, __ATOMIC_RELAXED) <= 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    __atomic_sub_fetch(&c->retained, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    if (!valid_device(dev)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_lock(&ledger_lock);
    *active = ledger[emu_vis[dev]].made;
    pthread_mutex_unlock(&ledger_lock);
    *flags = 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    emu_init();
    emu_count("cuCtxGetCurrent");
    *pctx = tl_ctx;
    return CUDA_SUCCESS;
}

/* CUDA Driver API, cuCtxSetCurrent: "Binds the specified CUDA context to the
 * calling CPU thread ... If ctx is NULL then this will unbind" it. */
CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (emu_enter("cuCtxSetCurrent") != cudaSuccess) {
        return emu_cu(emu_sticky());
    }
    if (ctx != NULL && emu_ctx_ordinal(ctx) < 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    emu_set_current_ctx(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    emu_init();
    if (tl_ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *device = emu_ctx_ordinal(tl_ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    emu_init();
    if (tl_ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    emu_device_wait(tl_ctx->phys);
    return emu_cu(emu_sticky());
}
