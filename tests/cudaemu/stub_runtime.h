/*
 * collar - what test_emu_kernels asks of its stand-in runtime half
 * (stub_runtime.c, test only).
 */
#ifndef COLLAR_CUDAEMU_STUB_RUNTIME_H
#define COLLAR_CUDAEMU_STUB_RUNTIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "Device" memory the kernel half may touch (NULL when the table is full). */
void *stub_device_alloc(size_t bytes);
void stub_device_free(void *p);

/* The device names nvcc's host code registered, in order; their number. */
int stub_registered(const char ***names);

#ifdef __cplusplus
}
#endif

#endif
