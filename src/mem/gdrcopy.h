/*
 * collar - GDRCopy: small copies between device memory and host memory by
 * the CPU, through a mapping of the device memory (gdrcopy.c).
 *
 * libgdrapi.so.2 (or COLLAR_GDRCOPY_LIBRARY) is loaded at run time, at the
 * first copy that may use it: no build or link dependency.  A mapping is
 * made once per device allocation (the pointer cache's answer: base, size,
 * buffer id) and kept, bounded, until the allocation is seen to be gone
 * (another buffer id at its base), it is evicted, or collar_gdr_finalize.
 * Used by the cuda backend (cuda.c), which orders the copy after the
 * caller's device work first.
 */
#ifndef COLLAR_GDRCOPY_H
#define COLLAR_GDRCOPY_H

#include "ptrcache.h"

/* The buffer id of the allocation at ptr now (0: none): the backend's. */
typedef unsigned long long (*collar_gdr_id_fn)(const void *ptr);

/* Load the library and open its driver, once (COLLAR_GDRCOPY permitting):
 * 1 when GDRCopy is in use; else 0 and *why says why not (may be NULL). */
int collar_gdr_available(const char **why);

/*
 * Copy `bytes` between host memory `host` and device memory at `dev` (in
 * the allocation `alloc` describes: base, size, buffer id) by the CPU:
 * to_dev 1 host -> device, 0 device -> host.  COLLAR_ERR_UNAVAILABLE
 * when it cannot (GDRCopy not in use, the allocation unknown or too large,
 * the driver refused the pin); nothing was copied then.  `id_now` checks
 * the other mappings' allocations when a new one is pinned.
 */
collar_status_t collar_gdr_copy(const collar_ptr_info_t *alloc, void *dev,
                                void *host, size_t bytes, int to_dev,
                                collar_gdr_id_fn id_now);

/* Unmap and unpin everything, close the driver (the backend's finalize). */
void collar_gdr_finalize(void);

#endif /* COLLAR_GDRCOPY_H */
