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
 *
 * With FAKECUDA_REPORT=PREFIX each process writes PREFIX.PID at
 * exit: the devices the application's buffers are on, the devices that
 * got a context, and the runtime functions that made device 0's context
 * current on a thread without one (fake_cuda.h), one line each:
 *   buffers 1 2
 *   contexts 1 2
 *   implicit cudaEventQuery cudaFree
 */
#include "mem/cuda.c"
#include "interpose/interpose.h"

#include "fake_cuda.h"

#include <stdio.h>

/* bit d: the application has a buffer on device d. */
static _Atomic unsigned fake_buffers;

/* "Device" memory on fake GPU `device`: host memory the fake driver
 * answers as a device allocation for (NULL past FAKE_ALLOCS buffers). */
COLLAR_EXPORT void *collar_fakecuda_malloc(size_t bytes, int device)
{
    void *p = NULL;
    if (nalloc < FAKE_ALLOCS && fake_phys(device) >= 0) {
        p = fake_map(bytes ? bytes : 1, device, 0)->base;
        atomic_fetch_or(&fake_buffers, 1u << device);
    }
    return p;
}

/* The application's cudaFree, with the buffer's device current (as an
 * application has it): collar's own calls are what the context report
 * is about. */
COLLAR_EXPORT void collar_fakecuda_free(void *ptr)
{
    const CUcontext saved = cur_ctx;
    const fake_alloc_t *a = fake_find(ptr);
    if (a != NULL) {
        cur_ctx = ctx_of(a->device);
    }
    cudaFree(ptr);
    cur_ctx = saved;
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

static void fake_report_devices(FILE *f, const char *what, unsigned bits)
{
    fputs(what, f);
    for (int d = 0; d < NDEV; d++) {
        if (bits & (1u << d)) {
            fprintf(f, " %d", d);
        }
    }
    fputc('\n', f);
}

__attribute__((destructor)) static void fake_report(void)
{
    const char *prefix = getenv("FAKECUDA_REPORT");
    if (prefix == NULL || *prefix == '\0') {
        return;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s.%ld", prefix, (long)getpid());
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return;
    }
    fake_report_devices(f, "buffers", atomic_load(&fake_buffers));
    fake_report_devices(f, "contexts", atomic_load(&fake_contexts));
    fputs("implicit", f);
    const unsigned n = atomic_load(&fake_implicit_n);
    for (unsigned i = 0; i < n && i < 16; i++) {
        fprintf(f, " %s", atomic_load(&fake_implicit[i]));
    }
    fputc('\n', f);
    fclose(f);
}
