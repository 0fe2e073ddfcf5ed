/*
 * collar - memory and device layer: the device backends behind the
 * collar_device_t interface (declared in core.h) and memory-kind
 * classification of user buffers.
 *
 * Backends:
 *   none  no device; every buffer is host memory; copies are memcpy.
 *   sim   host memory that behaves like a device: every user buffer counts as
 *         device memory, copies and reductions run asynchronously on a worker
 *         thread per stream, events complete when the worker reaches them.
 *   cuda  (when built with CUDA) NVIDIA GPUs through the CUDA runtime,
 *         linked statically; memory kinds from the driver behind the
 *         pointer cache (ptrcache.h).
 */
#ifndef COLLAR_MEM_H
#define COLLAR_MEM_H

#include "../core/core.h"
#include "ranges.h"

extern const collar_device_t collar_device_none;
extern const collar_device_t collar_device_sim;
#ifdef COLLAR_HAVE_CUDA
extern const collar_device_t collar_device_cuda;
/* Why the cuda backend's init() failed: the driver's error, or "the driver
 * sees 0 devices". */
const char *collar_cuda_unavailable_reason(void);
/* The cuda backend's host ranges (NULL before init). */
collar_ranges_t *collar_cuda_host_ranges(void);
/* Whether the driver sees a GPU (cudaGetDeviceCount: no context is
 * created); callable before MPI starts. */
int collar_cuda_probe(void);
#endif

/*
 * Open the backend for COLLAR_DEVICE: auto picks cuda when it is built and a
 * GPU is usable, else none; an explicit choice that is unavailable falls back
 * to none with a warning.  Never fails.
 */
const collar_device_t *collar_device_open(collar_device_kind_t kind);
void collar_device_close(void);
/* Whether collar_device_open(kind) would open a device backend (not none):
 * decided before MPI starts, without creating a context anywhere. */
int collar_device_may_open(collar_device_kind_t kind);
/* The open backend (none before collar_device_open). */
const collar_device_t *collar_device_current(void);
/* Names of the backends built into this library, e.g. "none sim". */
const char *collar_device_builtin(void);

/* The open backend's host ranges: address ranges it answers "host memory"
 * for, with no device memory possible in them (ranges.h); NULL when it has
 * none (none, sim).  Valid until collar_device_close. */
collar_ranges_t *collar_mem_host_ranges(void);

/* 1 when a and b (a call's buffers; the same pointer twice for one) are in
 * `ranges` (the open backend's): host memory, what its mem_query would
 * answer, known without a call.  0: ask mem_query.  The pointers are only
 * compared, never read. */
static inline int collar_mem_known_host(collar_ranges_t *ranges, const void *a,
                                        const void *b)
{
    if (ranges == NULL
        || !collar_ranges_probe_pair(ranges, (uintptr_t)a, (uintptr_t)b)) {
        return 0;
    }
    collar_ranges_count_hits(ranges, a == b ? 1 : 2);
    return 1;
}

/* Memory kind of a user buffer, as the open backend sees it. */
static inline collar_status_t collar_mem_classify(const collar_device_t *dev,
                                                  const void *ptr,
                                                  collar_mem_kind_t *kind)
{
    return dev->mem_query(ptr, kind);
}

#endif /* COLLAR_MEM_H */
