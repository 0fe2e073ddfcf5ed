/*
 * collar - core layer: the device interface and the staging pools.
 *
 * collar_device_t is what the schedule engine (schedule.c) drives: memory
 * kinds, streams, asynchronous copies and reductions, events.  The backends
 * that implement it live in the memory and device layer (src/mem/, mem.h).
 * The staging pools (pool.c) keep pinned host buffers and device scratch of
 * a device for reuse.  Included by core.h.
 */
#ifndef COLLAR_DEVICE_H
#define COLLAR_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "../reduce/reduce.h"
#include "status.h"

typedef enum {
    COLLAR_MEM_HOST,
    COLLAR_MEM_DEVICE,
    COLLAR_MEM_MANAGED
} collar_mem_kind_t;

const char *collar_mem_kind_name(collar_mem_kind_t kind);

typedef struct collar_stream collar_stream_t;  /* defined by each backend */

/* What another process on the node needs to map a buffer from ipc_alloc:
 * opaque bytes, sized for cudaIpcMemHandle_t. */
#define COLLAR_IPC_HANDLE_BYTES 64
typedef struct {
    unsigned char bytes[COLLAR_IPC_HANDLE_BYTES];
} collar_ipc_handle_t;

/* Names the device an IPC buffer lives on, for ipc_reachable. */
#define COLLAR_IPC_WHERE_BYTES 32

/* Completion of one asynchronous device operation. */
typedef struct {
    collar_stream_t *stream;
    uint64_t         ticket;
    void            *handle;
} collar_event_t;

/*
 * What the schedule engine needs of a device.  Asynchronous operations are
 * queued on a stream in order and fill `done`, which event_query() polls.
 * `done` NULL (copy_async, reduce_async, reduce_n_async): the host waits
 * for the operation, and what is queued on its stream before it, before
 * the call returns (cuda: cudaStreamSynchronize, no event recorded); an
 * error of the operation is the call's.
 */
typedef struct collar_device {
    const char *name;
    /* COLLAR_ERR_UNAVAILABLE when the backend cannot run here. */
    collar_status_t (*init)(void);
    void (*finalize)(void);
    /* Memory kind of the buffer at `ptr`. */
    collar_status_t (*mem_query)(const void *ptr, collar_mem_kind_t *kind);
    /* Host memory the device can copy to and from quickly (pinned). */
    collar_status_t (*host_alloc)(size_t bytes, void **ptr);
    void (*host_free)(void *ptr);
    /* Device memory for scratch (the sim device's is host memory). */
    collar_status_t (*dev_alloc)(size_t bytes, void **ptr);
    void (*dev_free)(void *ptr);
    /* Streams are numbered 0 .. nstreams() - 1. */
    int (*nstreams)(void);
    collar_status_t (*copy_async)(void *dst, const void *src, size_t bytes,
                                  int stream, collar_event_t *done);
    /* Optional (NULL: never).  Copy `bytes` between a device buffer of
     * the application and host memory by the CPU, now (cuda: through a
     * GDRCopy mapping): COLLAR_OK when done, COLLAR_ERR_UNAVAILABLE when
     * the backend cannot here (the caller queues copy_async instead), or
     * an error.  The caller's ordering is as for copy_async: the step
     * that ordered after the caller's device work is done, and nothing
     * collar queued that touches these bytes is outstanding; the backend
     * adds what a CPU access needs beyond what a stream copy does. */
    collar_status_t (*copy_now)(void *dst, const void *src, size_t bytes);
    /* 1 when reduce_async can do the pair. */
    int (*reduce_supported)(collar_dtype_t dt, collar_op_t op);
    collar_status_t (*reduce_async)(void *inout, const void *in, size_t count,
                                    collar_dtype_t dt, collar_op_t op,
                                    int stream, collar_event_t *done);
    /* Optional (NULL: the caller copies src[0] and reduces the others
     * into it one by one).  dst[i] = src[n-1][i] op (... op (src[1][i] op
     * src[0][i])) for i < count, 2 <= n <= COLLAR_REDUCE_N_MAX (reduce.h): the bits of
     * a copy of src[0] followed by reduce_async of src[1] .. src[n-1] into
     * it, in one pass over memory (every input read once, dst written
     * once).  dst may be src[0] and must not overlap the other inputs;
     * `src` is read before the call returns. */
    collar_status_t (*reduce_n_async)(void *dst, const void *const *src, int n,
                                      size_t count, collar_dtype_t dt,
                                      collar_op_t op, int stream,
                                      collar_event_t *done);
    /* COLLAR_OK when complete, COLLAR_INPROGRESS when not, or an error. */
    collar_status_t (*event_query)(collar_event_t *ev);
    /* Optional (NULL: unknown): when the complete operation of `ev`
     * actually ran on its stream, in CLOCK_MONOTONIC nanoseconds; 0 when
     * no longer known.  For the timeline (COLLAR_TRACE). */
    int (*event_times)(const collar_event_t *ev, uint64_t *start,
                       uint64_t *end);
    /* Make later stream work see what the caller queued on the device. */
    collar_status_t (*order_after_caller)(void);
    /* Optional (NULL: one device, 0).  The device ordinal of the scratch
     * buffer at `ptr`, or for ptr NULL the device new scratch for the call
     * being set up in this thread goes to: the scratch pool keeps buffers
     * per device. */
    int (*scratch_device)(const void *ptr);
    /* Optional (NULL: cannot tell): 1 when [ptr, ptr + bytes) overlaps
     * device scratch from dev_alloc.  The sim device keeps a registry of
     * its scratch, so that COLLAR_SIM_STRICT can catch device scratch
     * handed to an MPI library that does not take device pointers. */
    int (*is_dev_scratch)(const void *ptr, size_t bytes);
    /*
     * Optional, all or none (NULL: the backend has no native streams, e.g.
     * sim).  For another library's work (the nccl algorithm's NCCL calls):
     *   stream_new   a stream of its own on the device of the buffer at
     *                `ptr` (cuda: a cudaStream_t ordered like collar's
     *                streams), apart from collar's: work that waits for
     *                other processes (an NCCL allreduce) never holds up
     *                another communicator's on a shared stream;
     *   issue_async  with that stream's device current in the calling
     *                thread, fn(native, arg) where `native` is the
     *                backend's own handle of the stream, then `done`
     *                recorded after it on the stream; the thread's current
     *                device restored; fn's error returned (nothing
     *                recorded);
     *   stream_free  the stream, once nothing queued on it is needed.
     */
    collar_status_t (*stream_new)(const void *ptr, collar_stream_t **stream);
    collar_status_t (*issue_async)(collar_stream_t *stream,
                                   collar_status_t (*fn)(void *native, void *arg),
                                   void *arg, collar_event_t *done);
    void (*stream_free)(collar_stream_t *stream);

    /*
     * Optional, all or none (NULL: the backend cannot share memory between
     * processes).  Device memory that other processes of the node can map:
     *   ipc_alloc      `bytes` of device memory (on the device of the call
     *                  being set up, as dev_alloc) and its handle;
     *   ipc_where      a name of the device the buffer lives on (at most
     *                  COLLAR_IPC_WHERE_BYTES with the NUL), to send to peers;
     *   ipc_reachable  0 when this process is known not to be able to map
     *                  memory of the device a peer named (cuda: a device it
     *                  sees that is neither the same nor a peer); a device
     *                  it does not see is left to ipc_open;
     *   ipc_open       map a peer's handle into this process;
     *   ipc_published  every peer has opened (or given up on) the handle of
     *                  `ptr`: the backend may drop what made it openable
     *                  (the sim device closes the descriptor that peers
     *                  open its memory through);
     *   ipc_close      unmap what ipc_open mapped; not COLLAR_OK when the
     *                  mapping may still be open (a process whose context
     *                  a sticky error broke cannot close it): the owner
     *                  must then never free that memory;
     *   ipc_free       free what ipc_alloc allocated (src/algo/ipc.c calls
     *                  it only once every peer has closed it).
     */
    collar_status_t (*ipc_alloc)(size_t bytes, void **ptr,
                                 collar_ipc_handle_t *handle);
    void (*ipc_where)(const void *ptr, char *where, size_t len);
    int (*ipc_reachable)(const char *peer_where);
    collar_status_t (*ipc_open)(const collar_ipc_handle_t *handle, void **ptr);
    void (*ipc_published)(void *ptr);
    collar_status_t (*ipc_close)(void *ptr);
    void (*ipc_free)(void *ptr);
    /*
     * Optional (NULL: only ipc_alloc's memory can be shared).  The
     * application's buffer [ptr, ptr + bytes) for peers to read in place
     * (ipc's zero-copy, src/algo/ipc_user.c): the handle of the allocation
     * that holds it (opened by peers with ipc_open, closed with ipc_close;
     * what they map is only read), the allocation's address in this
     * process (*base), the buffer's offset in it, and an id that changes
     * when the allocation is freed and another made at the same address
     * (a peer's mapping of the old one is stale).  COLLAR_ERR_UNAVAILABLE
     * when that memory cannot be exported (the call then copies in).
     */
    collar_status_t (*ipc_export)(const void *ptr, size_t bytes,
                                  collar_ipc_handle_t *handle, uint64_t *base,
                                  size_t *offset, uint64_t *id);
    /* 1 when a peer may keep such a mapping open after the call, across
     * the owner's free of the allocation (the sim device: it reads the
     * owner's pages as they are); 0 when every mapping must be closed
     * before the owner may free (CUDA: a cudaFree of an allocation still
     * opened elsewhere is undefined), so peers close theirs before the
     * call's status agreement, and open them again at the next call. */
    int ipc_export_keep;
} collar_device_t;

/* ------------------------------------------------------------------ pools */

/* Staging pool (pinned host memory from the device), bounded and reused. */
collar_status_t collar_pool_get(const collar_device_t *dev, size_t bytes,
                                void **ptr);
void collar_pool_put(const collar_device_t *dev, void *ptr, size_t bytes);
/* The same for device scratch (dev->dev_alloc). */
collar_status_t collar_scratch_get(const collar_device_t *dev, size_t bytes,
                                   void **ptr);
void collar_scratch_put(const collar_device_t *dev, void *ptr, size_t bytes);
/*
 * Staging: host memory that carries data between the device and the MPI
 * library.  From the staging pool; else pageable host memory, which every
 * backend copies to and from, more slowly (a fallback: said once per
 * process at info level; COLLAR_SIM_FAIL=heap:N fails it).  *kind says
 * which, for collar_staging_put; a call that staged through pageable
 * memory counts the fallback once (collar_staging_count_fallback).
 * COLLAR_ERR_NO_MEMORY when neither can be had.  Not for memory a device
 * kernel reads: a kernel cannot read pageable memory (device scratch falls
 * back to collar_pool_get alone).
 */
typedef enum {
    COLLAR_STAGING_PINNED,   /* the staging pool */
    COLLAR_STAGING_HEAP,     /* pageable host memory */
    COLLAR_STAGING_DRAIN     /* collar_drain_get */
} collar_staging_kind_t;
collar_status_t collar_staging_get(const collar_device_t *dev, size_t bytes,
                                   void **ptr, collar_staging_kind_t *kind);
void collar_staging_put(const collar_device_t *dev, void *ptr, size_t bytes,
                        collar_staging_kind_t kind);
/* One call staged through pageable memory, for the statistics. */
void collar_staging_count_fallback(void);
/*
 * Drain memory: `bytes` of address space for a failed operation to issue
 * its messages on (the other ranks wait for them) when not even pageable
 * memory can be had; what is written there is lost, and what is read is
 * whatever some other part of it last held, except in its last 8 KiB,
 * which hold what was written there.  One block of 2 MiB made at the first
 * need and kept, mapped again and again: it costs no memory of its size.
 * NULL when not even that can be had.  Freed with collar_drain_put.
 */
void *collar_drain_get(size_t bytes);
void collar_drain_put(void *ptr, size_t bytes);
/* Free what both pools keep (MPI_Finalize). */
void collar_pool_release_all(void);
/* The size the pools allocate for `bytes`: the next power of two from
 * 4 KiB up to 4 MiB, the next multiple of 2 MiB above; 0 when too large. */
size_t collar_pool_round(size_t bytes);

#endif /* COLLAR_DEVICE_H */
