/*
 * collar - unit test of the CUDA emulation's kernel half (emu_kernels.cu)
 * on its own, over the stand-in runtime of stub_runtime.c.
 *
 * Launches go through the real host stubs of src/reduce/device_reduce.cu
 * (compiled here by nvcc: __cudaRegisterFunction at load time, then
 * __cudaPushCallConfiguration / __cudaLaunchKernel per launch), so the names
 * looked up are the ones nvcc registered.  Checked:
 *   - every kernel device_reduce.cu registers has a host build; an unknown
 *     name is cudaErrorInvalidDeviceFunction (and the last error);
 *   - results of collar_cuda_reduce_launch / _n_launch equal
 *     collar_reduce_host bit for bit, for several (type, op) pairs and the
 *     three layouts (16-byte vectors with a head, typed, unaligned bytes),
 *     bytes around the range untouched;
 *   - the documented launch limits (cudaErrorInvalidConfiguration, the
 *     kernels' launch bounds) and a grid with y extent run as a GPU runs it;
 *   - in forked children: a kernel reading or writing past a device
 *     allocation, or host memory, aborts with "kernel access out of bounds";
 *     a typed or vector access at a misaligned address with "misaligned
 *     address".
 * Last line: "test_emu_kernels: N passed, N failed".
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reduce/device_reduce_body.cuh"

#include "cudaemu_int.h"
#include "stub_runtime.h"
#include "../unit/rng.h"
#include "../unit/unit.h"

/* nvcc's name of reduce_kernel<uint32_t, op_sum>(reduce_plan). */
static const char U32_SUM[] = "_Z13reduce_kernelIj6op_sumEv11reduce_plan";

static void fill(void *p, size_t bytes)
{
    unsigned char *c = (unsigned char *)p;
    for (size_t i = 0; i < bytes; i++)
        c[i] = (unsigned char)rnd();
}

/* ------------------------------------------------------------- names */

static void test_names(void)
{
    const char **names;
    const int n = stub_registered(&names);
    int found = 0, u32_sum = 0;
    for (int i = 0; i < n; i++) {
        /* A zero grid: the name is resolved first, then the configuration
         * refused, so nothing runs. */
        cudaError_t e = cudaemu_kernel_launch(names[i], NULL, dim3(0), dim3(1), 0, 0);
        UNIT_CHECK(e == cudaErrorInvalidConfiguration, "%s has no host build (%d)",
                   names[i], (int)e);
        found += e == cudaErrorInvalidConfiguration;
        u32_sum += strcmp(names[i], U32_SUM) == 0;
    }
    cudaGetLastError();
    printf("test_emu_kernels: %d of %d registered kernels have a host build\n",
           found, n);
    /* Two kernels per (element type, op) instantiation. */
    UNIT_CHECK(n >= 60 && n % 2 == 0, "registered kernels: %d", n);
    UNIT_CHECK(u32_sum == 1, "%s registered", U32_SUM);

    const char *unknown[] = {
        "_Z3foov",
        "_Z13reduce_kernelIe6op_sumEv11reduce_plan",    /* long double */
        "_Z13reduce_kernelIj9op_minlocEv11reduce_plan", /* no such op */
        "not a mangled name",
    };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        cudaError_t e = cudaemu_kernel_launch(unknown[i], NULL, dim3(1), dim3(1), 0, 0);
        UNIT_CHECK(e == cudaErrorInvalidDeviceFunction, "%s: %d", unknown[i], (int)e);
        UNIT_CHECK(cudaGetLastError() == cudaErrorInvalidDeviceFunction &&
                   cudaGetLastError() == cudaSuccess, "%s: last error", unknown[i]);
    }
    UNIT_CHECK(cudaemu_kernel_launch(NULL, NULL, dim3(1), dim3(1), 0, 0) ==
               cudaErrorInvalidDeviceFunction, "no name");
    cudaGetLastError();
}

/* ------------------------------------------------------------ values */

static const struct { collar_dtype_t dt; collar_op_t op; } pairs[] = {
    { COLLAR_DT_INT32, COLLAR_OP_SUM },
    { COLLAR_DT_INT64, COLLAR_OP_MIN },
    { COLLAR_DT_UINT8, COLLAR_OP_BXOR },
    { COLLAR_DT_INT16, COLLAR_OP_PROD },
    { COLLAR_DT_FLOAT, COLLAR_OP_SUM },
    { COLLAR_DT_DOUBLE, COLLAR_OP_PROD },
    { COLLAR_DT_FLOAT16, COLLAR_OP_MAX },
    { COLLAR_DT_BFLOAT16, COLLAR_OP_SUM },
    { COLLAR_DT_DOUBLE_COMPLEX, COLLAR_OP_PROD },
    { COLLAR_DT_BOOL, COLLAR_OP_LOR },
};

/* Byte offsets of (inout, in) from a 256-byte boundary: both at an element
 * offset (16-byte vectors after a head), element-aligned at different
 * offsets modulo 16 (typed loads), and unaligned (bytes) where the element
 * is wider than one byte. */
static void layouts(size_t esz, size_t off[3][2])
{
    off[0][0] = esz;     off[0][1] = 16 + esz;
    off[1][0] = 0;       off[1][1] = esz < 16 ? esz : 0;
    off[2][0] = 1;       off[2][1] = 3;
}

static void test_pair_values(void)
{
    const size_t counts[] = { 1, 37, 1000 };
    const size_t guard = 32;

    rng_seed(1);
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++) {
        const collar_dtype_t dt = pairs[pi].dt;
        const collar_op_t op = pairs[pi].op;
        const size_t esz = collar_dtype_size(dt);
        size_t off[3][2];
        layouts(esz, off);
        for (int l = 0; l < 3; l++) {
            for (size_t ci = 0; ci < 3; ci++) {
                const size_t n = counts[ci], bytes = n * esz + 2 * guard + 32;
                char *dio = (char *)stub_device_alloc(bytes);
                char *din = (char *)stub_device_alloc(bytes);
                char *want = (char *)malloc(bytes);
                if (!dio || !din || !want) {
                    UNIT_CHECK(0, "allocation");
                    return;
                }
                fill(dio, bytes);
                fill(din, bytes);
                char *io = dio + guard + off[l][0], *in = din + guard + off[l][1];
                memcpy(want, dio, bytes);
                collar_reduce_host(want + (io - dio), in, n, dt, op);
                int rc = collar_cuda_reduce_launch(io, in, n, dt, op, NULL);
                UNIT_CHECK(rc == 0, "%s %s: launch %d", collar_dtype_name(dt),
                           collar_op_name(op), rc);
                UNIT_CHECK(memcmp(dio, want, bytes) == 0,
                           "%s %s count %zu layout %d: result differs from the host loop",
                           collar_dtype_name(dt), collar_op_name(op), n, l);
                stub_device_free(dio);
                stub_device_free(din);
                free(want);
            }
        }
    }
}

static void test_n_values(void)
{
    const int nin = 3;
    const size_t n = 301;

    rng_seed(2);
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++) {
        const collar_dtype_t dt = pairs[pi].dt;
        const collar_op_t op = pairs[pi].op;
        const size_t esz = collar_dtype_size(dt), bytes = n * esz + 64;
        for (int shift = 0; shift < 2; shift++) {
            /* shift 0: all at one offset (vectors); 1: bytes apart. */
            char *dst = (char *)stub_device_alloc(bytes);
            char *want = (char *)malloc(bytes);
            const void *src[3];
            char *bufs[3];
            for (int k = 0; k < nin; k++) {
                bufs[k] = (char *)stub_device_alloc(bytes);
                fill(bufs[k], bytes);
                src[k] = bufs[k] + 16 + (shift ? k + 1 : 0);
            }
            fill(dst, bytes);
            char *d = dst + 16;
            memcpy(want, dst, bytes);
            memcpy(want + 16, src[0], n * esz);
            for (int k = 1; k < nin; k++)
                collar_reduce_host(want + 16, src[k], n, dt, op);
            int rc = collar_cuda_reduce_n_launch(d, src, nin, n, dt, op, NULL);
            UNIT_CHECK(rc == 0, "reduce_n %s %s: launch %d", collar_dtype_name(dt),
                       collar_op_name(op), rc);
            UNIT_CHECK(memcmp(dst, want, bytes) == 0,
                       "reduce_n %s %s shift %d: result differs from the host loops",
                       collar_dtype_name(dt), collar_op_name(op), shift);
            for (int k = 0; k < nin; k++)
                stub_device_free(bufs[k]);
            stub_device_free(dst);
            free(want);
        }
    }
}

/* ---------------------------------------------------- configurations */

static cudaError_t launch_u32_sum(reduce_plan p, dim3 grid, dim3 block, size_t shmem)
{
    void *args[1] = { &p };
    return cudaemu_kernel_launch(U32_SUM, args, grid, block, shmem, 0);
}

static void test_config(void)
{
    const size_t n = 1000;
    uint32_t *io = (uint32_t *)stub_device_alloc(n * 4);
    uint32_t *in = (uint32_t *)stub_device_alloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        io[i] = (uint32_t)i;
        in[i] = 7;
    }
    reduce_plan p = reduce_plan_make<uint32_t>(io, in, n);

    static const struct { dim3 grid, block; size_t shmem; cudaError_t want; } c[] = {
        { dim3(1), dim3(1025), 0, cudaErrorInvalidConfiguration },
        { dim3(1), dim3(32, 32, 2), 0, cudaErrorInvalidConfiguration },
        { dim3(1), dim3(1, 1, 65), 0, cudaErrorInvalidConfiguration },
        { dim3(1), dim3(0), 0, cudaErrorInvalidConfiguration },
        { dim3(1, 65536, 1), dim3(32), 0, cudaErrorInvalidConfiguration },
        { dim3(1, 1, 0), dim3(32), 0, cudaErrorInvalidConfiguration },
        { dim3(1), dim3(32), 48 * 1024 + 1, cudaErrorInvalidConfiguration },
        /* Valid for the device, above the kernels' __launch_bounds__. */
        { dim3(1), dim3(512), 0, cudaErrorLaunchOutOfResources },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        cudaError_t e = launch_u32_sum(p, c[i].grid, c[i].block, c[i].shmem);
        UNIT_CHECK(e == c[i].want, "configuration %zu: %d, want %d", i, (int)e,
                   (int)c[i].want);
        UNIT_CHECK(cudaGetLastError() == c[i].want, "configuration %zu: last error", i);
    }
    for (size_t i = 0; i < n; i++)
        UNIT_CHECK(io[i] == i, "a refused launch wrote element %zu", i);

    /* Any grid is a grid-stride loop over every element: 3 blocks of 64. */
    UNIT_CHECK(launch_u32_sum(p, dim3(3), dim3(64), 48 * 1024) == cudaSuccess,
               "3 x 64 threads");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += io[i] != i + 7;
    UNIT_CHECK(bad == 0, "3 x 64 threads: %zu elements wrong", bad);

    /* A y extent of 2 runs the x-indexed threads twice, as a GPU does. */
    UNIT_CHECK(launch_u32_sum(p, dim3(2, 1, 1), dim3(64, 2, 1), 0) == cudaSuccess,
               "2 x (64, 2) threads");
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += io[i] != i + 21;
    UNIT_CHECK(bad == 0, "y extent 2: %zu elements not reduced twice", bad);

    void *none[1] = { NULL };
    UNIT_CHECK(cudaemu_kernel_launch(U32_SUM, none, dim3(1), dim3(1), 0, 0) ==
               cudaErrorInvalidValue, "no parameter");
    cudaGetLastError();
    stub_device_free(io);
    stub_device_free(in);
}

/* ------------------------------------------------------------- rules */

/* Run fn in a child with stderr captured: 1 when it died of SIGABRT and
 * printed `rule`. */
static int child_breaks(const char *what, const char *rule, void (*fn)(void))
{
    int fds[2];
    if (pipe(fds) != 0)
        return 0;
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        signal(SIGABRT, SIG_DFL);
        fn();
        _exit(0);
    }
    close(fds[1]);
    char msg[1024];
    size_t len = 0;
    ssize_t r;
    while ((r = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0)
        len += (size_t)r;
    msg[len] = '\0';
    close(fds[0]);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return 0;
    printf("%s: child %s: %s", what,
           WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exited",
           len ? msg : "(no message)\n");
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
           strstr(msg, rule) != NULL;
}

static void past_end(void)
{
    /* Space for 99 floats, a launch over 100. */
    float *io = (float *)stub_device_alloc(99 * 4);
    float *in = (float *)stub_device_alloc(100 * 4);
    collar_cuda_reduce_launch(io, in, 100, COLLAR_DT_FLOAT, COLLAR_OP_SUM, NULL);
}

static void host_input(void)
{
    static double in[64];
    double *io = (double *)stub_device_alloc(sizeof in);
    collar_cuda_reduce_launch(io, in, 64, COLLAR_DT_DOUBLE, COLLAR_OP_SUM, NULL);
}

static void n_input_past_end(void)
{
    char *a = (char *)stub_device_alloc(256), *b = (char *)stub_device_alloc(128);
    const void *src[2] = { a, b };
    collar_cuda_reduce_n_launch(a, src, 2, 64, COLLAR_DT_INT32, COLLAR_OP_SUM, NULL);
}

static void typed_misaligned(void)
{
    char *io = (char *)stub_device_alloc(400), *in = (char *)stub_device_alloc(408);
    reduce_plan p = reduce_plan_make<uint32_t>(io, in + 4, 100);   /* typed */
    p.in = in + 6;                                                  /* not by 4 */
    launch_u32_sum(p, dim3(1), dim3(256), 0);
}

static void vector_misaligned(void)
{
    char *io = (char *)stub_device_alloc(400), *in = (char *)stub_device_alloc(400);
    reduce_plan p = reduce_plan_make<uint32_t>(io + 4, in + 4, 90);
    p.head = 0;     /* vectors from io + 4: aligned to 4 bytes, not 16 */
    launch_u32_sum(p, dim3(1), dim3(256), 0);
}

static void test_rules(void)
{
    UNIT_CHECK(child_breaks("past the end", "kernel access out of bounds", past_end),
               "a kernel past its allocation aborts with the rule");
    UNIT_CHECK(child_breaks("host input", "kernel access out of bounds", host_input),
               "a kernel reading host memory aborts with the rule");
    UNIT_CHECK(child_breaks("n inputs", "kernel access out of bounds", n_input_past_end),
               "reduce_n past an input aborts with the rule");
    UNIT_CHECK(child_breaks("typed", "misaligned address", typed_misaligned),
               "a misaligned typed access aborts with the rule");
    UNIT_CHECK(child_breaks("vector", "misaligned address", vector_misaligned),
               "a misaligned vector access aborts with the rule");
}

int main(void)
{
    test_names();
    test_pair_values();
    test_n_values();
    test_config();
    test_rules();
    return unit_finish("test_emu_kernels");
}
