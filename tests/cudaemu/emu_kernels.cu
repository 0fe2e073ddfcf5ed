/*
 * collar - the CUDA emulation's kernel half: cudaemu_kernel_launch(), the
 * host builds of the reduction kernels of src/reduce/device_reduce.cu.
 *
 * nvcc's host code registers each kernel under its device-side (mangled)
 * name; the runtime half maps a launched host stub to that name and calls
 * cudaemu_kernel_launch().  This file owns the rest of a launch:
 *   - the name -> host build table: every (element type, op) instantiation
 *     that reduce_dispatch() in device_reduce_body.cuh has, each entered
 *     under the demangled signature the compiler itself gives it (typeid of
 *     the template arguments), so a registered name is demangled and looked
 *     up; nothing is spelled by hand, and a kernel added to the dispatch is
 *     found without a change here;
 *   - the documented launch limits (cudaErrorInvalidConfiguration,
 *     cudaErrorLaunchOutOfResources for the kernels' __launch_bounds__);
 *   - the copy of the parameter (the plan struct) out of `args`;
 *   - in stream order, on the emulation's worker: every byte range the plan
 *     makes the kernel touch must lie in device memory the launching device
 *     may access (else the rule "kernel access out of bounds", where a GPU
 *     raises cudaErrorIllegalAddress) and every typed or vector access must
 *     be naturally aligned at its device address (else "misaligned
 *     address", cudaErrorMisalignedAddress); then every thread of every
 *     block runs the kernel's own body (reduce_thread / reduce_n_thread) on
 *     the host addresses cudaemu_device_span gives.
 * Compiled by nvcc for the host, like tests/unit/kernel_emu.cu, from the
 * same device_reduce_body.cuh as the kernels.
 */
#include <cxxabi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <typeinfo>

/*
 * reduce_dispatch() first asks device_reduce.cu's collar_cuda_reduce_supported()
 * whether a pair has a kernel at run time.  The instantiations, hence the
 * registered kernels, are every arm of its switches whatever that answers,
 * and this library must not need libcollar: here the guard lets every pair
 * through, so that walking all (type, op) pairs reaches every arm.
 */
#define collar_cuda_reduce_supported cudaemu_every_pair
#include "reduce/device_reduce_body.cuh"
#undef collar_cuda_reduce_supported

#include "cudaemu_int.h"

extern "C" int cudaemu_every_pair(collar_dtype_t, collar_op_t)
{
    return 1;
}

namespace {

/* Documented limits of every supported device (compute capability 7.5 and
 * newer; CUDA C++ Programming Guide, "Compute Capabilities", technical
 * specifications table). */
const unsigned EMU_MAX_BLOCK_THREADS = 1024;
const unsigned EMU_MAX_BLOCK_X = 1024, EMU_MAX_BLOCK_Y = 1024, EMU_MAX_BLOCK_Z = 64;
const unsigned EMU_MAX_GRID_X = 2147483647u, EMU_MAX_GRID_YZ = 65535;
/* Dynamic shared memory a launch may ask without opting in through
 * cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize); the
 * reduction kernels have no static shared memory and never opt in. */
const size_t EMU_MAX_SHARED_DEFAULT = 48 * 1024;

const char SRC_ILLEGAL[] =
    "CUDA Runtime API, cudaErrorIllegalAddress: \"a load or store instruction "
    "on an invalid memory address\"";
const char SRC_MISALIGNED[] =
    "CUDA Runtime API, cudaErrorMisalignedAddress; CUDA C++ Programming Guide, "
    "Device Memory Accesses: \"the data is naturally aligned\"";

struct emu_job;
typedef void (*emu_run_fn)(emu_job *job);

/* One host build: the kernel's demangled signature and how to run it. */
struct emu_kernel {
    char       sig[128];
    size_t     esz, align;     /* element size, alignment of a typed access */
    size_t     param_size;     /* the kernel's one parameter */
    emu_run_fn run;
};

/* A queued launch, owned by the stream worker once queued. */
struct emu_job {
    const emu_kernel *k;
    int               device;
    dim3              grid, block;
    union {
        reduce_plan   pair;
        reduce_n_plan n;
    } p;
};

/* 2 kernels per distinct (T, Op) of the dispatch (68 of them); room to grow. */
enum { EMU_MAX_KERNELS = 256 };
emu_kernel     emu_table[EMU_MAX_KERNELS];
int            emu_nkernels;
pthread_once_t emu_table_once = PTHREAD_ONCE_INIT;

/* ---------------------------------------------------- running a grid */

/*
 * The kernels index with blockIdx.x * blockDim.x + threadIdx.x over
 * gridDim.x * blockDim.x threads; the y and z extents of a launch run the
 * same x-indexed threads again, as a GPU would.
 */
template <class Plan>
void emu_grid(const emu_job *job, const Plan &p,
              void (*thread)(const Plan &, size_t, size_t))
{
    const dim3 g = job->grid, b = job->block;
    const size_t nthreads = (size_t)g.x * b.x;
    const unsigned long long repeat =
        (unsigned long long)g.y * g.z * b.y * b.z;

    for (unsigned long long r = 0; r < repeat; r++)
        for (unsigned bx = 0; bx < g.x; bx++)
            for (unsigned tx = 0; tx < b.x; tx++)
                thread(p, (size_t)bx * b.x + tx, nthreads);
}

[[noreturn]] void emu_out_of_bounds(const emu_job *job, const char *what,
                                    const void *p, size_t bytes)
{
    cudaemu_rule("kernel access out of bounds", SRC_ILLEGAL,
                 "%s reads or writes %s [%p, +%zu bytes), not device memory "
                 "that device %d may access", job->k->sig, what, p, bytes,
                 job->device);
}

/* The host address of [p, p + count * esz), which the kernel touches, or
 * the rule.  count 0: nothing is touched (p may be anything). */
char *emu_span(const emu_job *job, const char *what, const char *p, size_t count)
{
    const size_t esz = job->k->esz;
    if (count == 0)
        return (char *)p;
    if (count > SIZE_MAX / esz)
        emu_out_of_bounds(job, what, p, SIZE_MAX);
    void *h = cudaemu_device_span(job->device, p, count * esz);
    if (!h)
        emu_out_of_bounds(job, what, p, count * esz);
    if ((uintptr_t)h % REDUCE_VEC_BYTES != (uintptr_t)p % REDUCE_VEC_BYTES) {
        /* The body checks alignment again at the host address. */
        fprintf(stderr, "cudaemu: device address %p is mapped at %p, another "
                "offset modulo %d bytes\n", (const void *)p, h, REDUCE_VEC_BYTES);
        abort();
    }
    return (char *)h;
}

void emu_check_align(const emu_job *job, const char *what, const char *p,
                     size_t align, const char *access)
{
    if ((uintptr_t)p % align != 0)
        cudaemu_rule("misaligned address", SRC_MISALIGNED,
                     "%s makes a %zu-byte %s access to %s at %p", job->k->sig,
                     align, access, what, (const void *)p);
}

/*
 * The accesses a plan makes to one buffer of `extent` elements at device
 * address p: VECTOR: typed head and tail, 16-byte vectors from element
 * `head`; ALIGNED: typed; BYTES: byte-wise (any address).
 */
void emu_check_plan_align(const emu_job *job, const char *what, const char *p,
                          int mode, size_t head, size_t nvec, size_t extent)
{
    const size_t esz = job->k->esz;
    if (extent == 0 || mode == REDUCE_MODE_BYTES)
        return;
    if (mode == REDUCE_MODE_VECTOR) {
        const size_t vec_end = head + nvec * (REDUCE_VEC_BYTES / esz);
        if (head > 0 || extent > vec_end)
            emu_check_align(job, what, p, job->k->align, "element");
        if (nvec > 0)
            emu_check_align(job, what, p + head * esz, REDUCE_VEC_BYTES, "vector");
        return;
    }
    emu_check_align(job, what, p, job->k->align, "element");
}

/* Elements a plan's loops reach: the count, or past it where a (broken)
 * plan's vectors overrun it; SIZE_MAX when that does not fit. */
size_t emu_extent(const emu_job *job, int mode, size_t count, size_t head,
                  size_t nvec)
{
    if (mode != REDUCE_MODE_VECTOR)
        return count;
    const size_t per_vec = REDUCE_VEC_BYTES / job->k->esz;
    if (nvec > (SIZE_MAX - head) / per_vec)
        return SIZE_MAX;
    const size_t end = head + nvec * per_vec;
    return end > count ? end : count;
}

template <class T, class Op> void emu_run_pair(emu_job *job)
{
    reduce_plan p = job->p.pair;
    const size_t extent = emu_extent(job, p.mode, p.count, p.head, p.nvec);
    char *io = emu_span(job, "inout", p.io, extent);
    const char *in = emu_span(job, "in", p.in, extent);
    emu_check_plan_align(job, "inout", p.io, p.mode, p.head, p.nvec, extent);
    emu_check_plan_align(job, "in", p.in, p.mode, p.head, p.nvec, extent);
    p.io = io;
    p.in = in;
    emu_grid(job, p, reduce_thread<T, Op>);
}

template <class T, class Op> void emu_run_n(emu_job *job)
{
    reduce_n_plan p = job->p.n;
    const size_t extent = emu_extent(job, p.mode, p.count, p.head, p.nvec);
    /* The kernel reads src[0] .. src[n-1] of its parameter (src[0] always). */
    if (p.n > COLLAR_REDUCE_N_MAX)
        cudaemu_rule("kernel access out of bounds", SRC_ILLEGAL,
                     "%s reads %d inputs from a parameter that holds %d",
                     job->k->sig, p.n, COLLAR_REDUCE_N_MAX);
    char *dst = emu_span(job, "dst", p.dst, extent);
    emu_check_plan_align(job, "dst", p.dst, p.mode, p.head, p.nvec, extent);
    for (int k = 0; k < (p.n > 1 ? p.n : 1); k++) {
        char what[16];
        snprintf(what, sizeof what, "src[%d]", k);
        const char *s = emu_span(job, what, p.src[k], extent);
        emu_check_plan_align(job, what, p.src[k], p.mode, p.head, p.nvec, extent);
        p.src[k] = s;
    }
    p.dst = dst;
    emu_grid(job, p, reduce_n_thread<T, Op>);
}

void emu_job_run(void *arg)
{
    emu_job *job = (emu_job *)arg;
    job->k->run(job);
}

/* ---------------------------------------------------- the name table */

/* The demangled name of a type as this compiler mangles it. */
void emu_type_name(const std::type_info &t, char *out, size_t size)
{
    int status = 0;
    char *d = abi::__cxa_demangle(t.name(), NULL, NULL, &status);
    snprintf(out, size, "%s", status == 0 && d ? d : t.name());
    free(d);
}

void emu_add(const char *kernel, const char *T, const char *Op,
             const char *param, size_t esz, size_t align, size_t param_size,
             emu_run_fn run)
{
    char sig[sizeof emu_table[0].sig];
    snprintf(sig, sizeof sig, "void %s<%s, %s>(%s)", kernel, T, Op, param);
    for (int i = 0; i < emu_nkernels; i++)
        if (strcmp(emu_table[i].sig, sig) == 0)
            return;     /* signed types share the unsigned kernels */
    if (emu_nkernels == EMU_MAX_KERNELS) {
        fprintf(stderr, "cudaemu: more than %d kernels\n", EMU_MAX_KERNELS);
        abort();
    }
    emu_kernel *k = &emu_table[emu_nkernels++];
    memcpy(k->sig, sig, sizeof sig);
    k->esz = esz;
    k->align = align;
    k->param_size = param_size;
    k->run = run;
}

/* The reduce_dispatch() visitor: the two kernels of each (T, Op). */
struct emu_table_builder {
    template <class T, class Op> int run()
    {
        char t[48], op[48];
        emu_type_name(typeid(T), t, sizeof t);
        emu_type_name(typeid(Op), op, sizeof op);
        emu_add("reduce_kernel", t, op, "reduce_plan", sizeof(T), alignof(T),
                sizeof(reduce_plan), emu_run_pair<T, Op>);
        emu_add("reduce_n_kernel", t, op, "reduce_n_plan", sizeof(T), alignof(T),
                sizeof(reduce_n_plan), emu_run_n<T, Op>);
        return 0;
    }
};

void emu_table_build(void)
{
    emu_table_builder b;
    for (int dt = 0; dt < COLLAR_DT_COUNT; dt++)
        for (int op = 0; op < COLLAR_OP_COUNT; op++)
            reduce_dispatch((collar_dtype_t)dt, (collar_op_t)op, b);
}

const emu_kernel *emu_lookup(const char *name)
{
    pthread_once(&emu_table_once, emu_table_build);
    if (!name)
        return NULL;
    int status = 0;
    char *sig = abi::__cxa_demangle(name, NULL, NULL, &status);
    const emu_kernel *found = NULL;
    if (status == 0 && sig)
        for (int i = 0; i < emu_nkernels && !found; i++)
            if (strcmp(emu_table[i].sig, sig) == 0)
                found = &emu_table[i];
    free(sig);
    return found;
}

/* The launch limits: cudaErrorInvalidConfiguration ("requesting more shared
 * memory per block than the device supports ... as will requesting too many
 * threads or blocks"); a block larger than the kernels' __launch_bounds__
 * (REDUCE_BLOCK) cannot be launched: cudaErrorLaunchOutOfResources ("the
 * kernel launch specifies too many threads for the kernel's register
 * count"). */
cudaError_t emu_check_config(dim3 grid, dim3 block, size_t shared_mem)
{
    if (block.x == 0 || block.y == 0 || block.z == 0 ||
        block.x > EMU_MAX_BLOCK_X || block.y > EMU_MAX_BLOCK_Y ||
        block.z > EMU_MAX_BLOCK_Z ||
        (unsigned long long)block.x * block.y * block.z > EMU_MAX_BLOCK_THREADS)
        return cudaErrorInvalidConfiguration;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > EMU_MAX_GRID_X ||
        grid.y > EMU_MAX_GRID_YZ || grid.z > EMU_MAX_GRID_YZ)
        return cudaErrorInvalidConfiguration;
    if (shared_mem > EMU_MAX_SHARED_DEFAULT)
        return cudaErrorInvalidConfiguration;
    if ((unsigned long long)block.x * block.y * block.z > REDUCE_BLOCK)
        return cudaErrorLaunchOutOfResources;
    return cudaSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default")))
cudaError_t cudaemu_kernel_launch(const char *name, void **args, dim3 grid,
                                  dim3 block, size_t shared_mem,
                                  cudaStream_t stream)
{
    const emu_kernel *k = emu_lookup(name);
    if (!k)
        return cudaemu_set_error(cudaErrorInvalidDeviceFunction);
    cudaError_t err = emu_check_config(grid, block, shared_mem);
    if (err != cudaSuccess)
        return cudaemu_set_error(err);
    /* Every reduction kernel has one parameter, its plan. */
    if (!args || !args[0])
        return cudaemu_set_error(cudaErrorInvalidValue);
    const int device = cudaemu_current_device();
    if (device < 0)
        return cudaPeekAtLastError();

    emu_job *job = (emu_job *)calloc(1, sizeof *job);
    if (!job)
        return cudaemu_set_error(cudaErrorMemoryAllocation);
    job->k = k;
    job->device = device;
    job->grid = grid;
    job->block = block;
    memcpy(&job->p, args[0], k->param_size);
    err = cudaemu_stream_enqueue(stream, emu_job_run, job);
    if (err != cudaSuccess)
        free(job);
    return err;
}
