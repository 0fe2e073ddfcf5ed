/*
 * collar - src/reduce/device_reduce.cu compiled as it is for the CUDA
 * emulation's libraries (libcollar_cudaemu.so, test_emu_kernels): the same
 * host stubs, which register each kernel with __cudaRegisterFunction and
 * launch it through __cudaPushCallConfiguration / __cudaLaunchKernel.  PTX
 * for one architecture only: the emulation runs the host builds of the
 * bodies (emu_kernels.cu), never the device code.
 */
#include "reduce/device_reduce.cu"
