/*
 * The tests' LD_PRELOAD library, libcollar_fakecuda.so: libcollar.so's own
 * objects (the exported MPI_* symbols, the core) with the cuda backend
 * (src/mem/cuda.c, compiled in here) on the fake CUDA runtime and driver of
 * fake_cuda.h.  In an MPI program on a machine without a GPU it behaves as
 * libcollar.so on a GPU node: COLLAR_DEVICE=auto opens the cuda backend,
 * host buffers are classified by the pointer cache in front of the
 * (fake) driver's pointer query, and buffers from collar_fakecuda_malloc
 * are device memory, staged through "pinned" (here pageable) memory.
 *
 * Built for the tests only (tests/Makefile.am, never installed): its three
 * functions below are what a test program finds with dlsym.
 */
#include "mem/cuda.c"
#include "interpose/interpose.h"

#include "fake_cuda.h"

/* "Device" memory on fake GPU `device`: host memory the fake driver
 * answers as a device allocation for (NULL past FAKE_ALLOCS buffers). */
COLLAR_EXPORT void *collar_fakecuda_malloc(size_t bytes, int device)
{
    void *p = NULL;
    if (nalloc < FAKE_ALLOCS && device >= 0 && device < NDEV) {
        p = fake_map(bytes ? bytes : 1, device, 0)->base;
    }
    return p;
}

COLLAR_EXPORT void collar_fakecuda_free(void *ptr)
{
    cudaFree(ptr);
}

/* Pointer queries the driver has answered so far: full queries
 * (cuPointerGetAttributes) and single attributes (cuPointerGetAttribute,
 * the buffer-id checks of cached device ranges). */
COLLAR_EXPORT void collar_fakecuda_queries(unsigned long *full,
                                           unsigned long *single)
{
    *full = atomic_load(&fake_nqueries);
    *single = atomic_load(&fake_nattr);
}
