/*
 * collar - the CUDA emulation's runtime half, its own internal header
 * (tests only, never installed): the state shared by devices.c (devices,
 * contexts, errors, error injection, the context ledger), memory.c
 * (allocations, pointer attributes, IPC, VMM), stream.c (streams, events,
 * copies) and launch.c (nvcc's registration entry points, launches).  The
 * interface to the kernel half is cudaemu_int.h.
 */
#ifndef COLLAR_CUDAEMU_EMU_H
#define COLLAR_CUDAEMU_EMU_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>

#include "cudaemu_int.h"

#pragma GCC visibility push(hidden)

#define EMU_MAXDEV 16

/* ----------------------------------------------------------------- rules */

/* The rules of rules.c's table, by index. */
enum emu_rule {
    EMU_R_IPC_OWN_PROCESS,
    EMU_R_IPC_FREE_WHILE_OPEN,
    EMU_R_STREAM_DESTROYED,
    EMU_R_EVENT_DESTROYED,
    EMU_R_UNUSED_DEVICE,
    EMU_R_HOST_ACCESS,
    EMU_R_CALL_IN_HOST_FUNC,
    EMU_R_COUNT
};

void emu_break(enum emu_rule r, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* -------------------------------------------------- devices and contexts */

/* A primary context; CUcontext points at one. */
struct CUctx_st {
    int      phys;     /* the node's device index */
    int      retained; /* cuDevicePrimaryCtxRetain count */
};

extern int emu_nphys;                /* CUDAEMU_DEVICES */
extern int emu_nvis;                 /* devices this process sees */
extern int emu_vis[EMU_MAXDEV];      /* ordinal -> node's device index */
extern struct CUctx_st emu_ctx[EMU_MAXDEV];

/* Load the configuration once (every entry point calls it through
 * emu_enter). */
void emu_init(void);

/*
 * Every entry point starts here: names the call (for the ledger), checks
 * the rule against calls from host functions, and returns the sticky error
 * in force, if any (then the entry point returns it).
 */
cudaError_t emu_enter(const char *api);
/* emu_enter for a call that an entry point makes on the program's behalf
 * (a launch's enqueue): the same checks, not counted again. */
cudaError_t emu_enter_again(const char *api);
/* One more call of `api` in this process's counts (emu_enter counts every
 * entry point it names; entry points that need no emu_enter call this). */
void emu_count(const char *api);
#define EMU_ENTER(api) do { cudaError_t e_ = emu_enter(api); \
                            if (e_ != cudaSuccess) return e_; } while (0)

/* The thread's current context's ordinal; makes the current device's
 * primary context current where the thread has none (implicitly). */
int emu_device(void);
/* Make `ordinal`'s primary context current on this thread. */
void emu_make_current(int ordinal, int explicit_);
int emu_ordinal_of_phys(int phys);     /* -1: not visible */
int emu_ctx_ordinal(CUcontext c);      /* -1: not a context of ours */
CUcontext emu_current_ctx(void);
void emu_set_current_ctx(CUcontext c);

/* The per-thread last error and the sticky one. */
cudaError_t emu_error(cudaError_t err);      /* record and return */
void emu_set_sticky(cudaError_t err);
cudaError_t emu_sticky(void);
CUresult emu_cu(cudaError_t err);            /* the driver's code */

/* Error injection (CUDAEMU_FAIL): 1 when this call of `kind` must fail. */
enum emu_fail { EMU_F_MALLOC, EMU_F_HOSTALLOC, EMU_F_LAUNCH, EMU_F_STICKY,
                EMU_F_IPCOPEN, EMU_F_COUNT };
int emu_inject(enum emu_fail kind);

/* Set on a stream worker while it runs a host function. */
extern _Thread_local int emu_in_host_func;

/* ------------------------------------------------------------------ memory */

enum emu_kind {
    EMU_DEVICE,      /* cudaMalloc */
    EMU_ASYNC,       /* cudaMallocAsync (device memory of a pool) */
    EMU_VMM,         /* cuMemMap of a cuMemCreate handle */
    EMU_IPC,         /* a peer's cudaMalloc, opened here */
    EMU_MANAGED,     /* cudaMallocManaged */
    EMU_PINNED,      /* cudaMallocHost, cudaHostAlloc */
    EMU_REGISTERED,  /* cudaHostRegister */
};

typedef struct {
    enum emu_kind      kind;
    char              *base;      /* the address the program uses */
    size_t             size;
    char              *span;      /* where the emulation reads and writes */
    int                phys;      /* the node's device it lives on / was current */
    unsigned long long id;        /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
    unsigned           flags;     /* cudaHostAlloc's */
} emu_alloc_t;

/* The allocation holding p (a copy, under the table's lock); 0 if none. */
int emu_lookup(const void *p, emu_alloc_t *out);

/* Where the emulation reads/writes [p, p+n): the span of device memory, p
 * for host memory; NULL when [p, p+n) crosses the end of an allocation. */
void *emu_host_view(const void *p, size_t n, int *is_device, int *pinned);

/* ----------------------------------------------------------------- streams */

struct emu_task;

struct CUstream_st {
    uint32_t           magic;
    int                ordinal;
    int                phys;
    unsigned           flags;        /* cudaStreamNonBlocking */
    int                legacy;       /* the device's legacy default stream */
    int                destroyed;
    pthread_t          worker;
    int                running;      /* the worker exists */
    struct emu_task   *head, *tail;
    uint64_t           enqueued, completed;   /* under emu_sched_lock */
    struct CUstream_st *next;        /* every stream of the process */
};

/* The state of an event; in shared memory for interprocess events. */
typedef struct {
    uint64_t recorded;    /* records issued */
    uint64_t completed;   /* the last record that completed */
    int64_t  when_ns;     /* CLOCK_MONOTONIC of that completion */
} emu_evstate_t;

struct CUevent_st {
    uint32_t        magic;
    unsigned        flags;
    int             ordinal;
    int             destroyed;
    int             ipc_fd;       /* memfd of an interprocess event, else -1 */
    emu_evstate_t  *st;
    emu_evstate_t   local;
};

extern pthread_mutex_t emu_sched_lock;

/* The stream a handle names (0, legacy, per-thread, created), for the
 * current device; a destroyed one breaks the rule, an unknown one is
 * NULL. */
struct CUstream_st *emu_stream(cudaStream_t s);
/* Queue fn(arg) on s; arg is freed after the run. */
void emu_enqueue(struct CUstream_st *s, void (*fn)(void *), void *arg);
/* Wait until the work queued on s so far is done. */
void emu_stream_wait(struct CUstream_st *s);
/* Wait for all work of the device (node's index), or of every device
 * (phys -1). */
void emu_device_wait(int phys);

#pragma GCC visibility pop

/* The calls of `api` this process made so far, every entry point's name
 * (the names emu_enter takes: cudaEventCreate counts cudaEventCreate and
 * cudaEventCreateWithFlags) added up; NULL: of all of them.  Exported for
 * programs on the emulation, which find it with dlsym
 * (tests/gpu/small_allreduce.c --count). */
unsigned long cudaemu_count(const char *api) __attribute__((visibility("default")));

#endif
