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

/* Completion of one asynchronous device operation. */
typedef struct {
    collar_stream_t *stream;
    uint64_t         ticket;
    void            *handle;
} collar_event_t;

/*
 * What the schedule engine needs of a device.  Asynchronous operations are
 * queued on a stream in order and fill `done`, which event_query() polls.
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
    /* 1 when reduce_async can do the pair. */
    int (*reduce_supported)(collar_dtype_t dt, collar_op_t op);
    collar_status_t (*reduce_async)(void *inout, const void *in, size_t count,
                                    collar_dtype_t dt, collar_op_t op,
                                    int stream, collar_event_t *done);
    /* COLLAR_OK when complete, COLLAR_INPROGRESS when not, or an error. */
    collar_status_t (*event_query)(collar_event_t *ev);
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
/* Free what both pools keep (MPI_Finalize). */
void collar_pool_release_all(void);
/* The size the pools allocate for `bytes`: the next power of two from
 * 4 KiB up to 4 MiB, the next multiple of 2 MiB above; 0 when too large. */
size_t collar_pool_round(size_t bytes);

#endif /* COLLAR_DEVICE_H */
