/*
 * collar - the cuda backend of libcollar_cudaemu.so: src/mem/cuda.c
 * compiled as it is, on the CUDA emulation (libcudaemu.so) in place of the
 * static CUDA runtime.  The rest of the library is libcollar's own objects
 * (tests/cudaemu/kernels.am).
 */
#include "mem/cuda.c"
