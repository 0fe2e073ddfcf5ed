/*
 * collar - tests of the CUDA emulation's runtime half (libcudaemu.so): each
 * behaviour a CUDA program relies on (values copied right, stream order,
 * the legacy default stream's synchronisation, event states, pointer kinds,
 * buffer ids, IPC between processes, visible devices, the context ledger,
 * errors and their injection) and each rule (the process must die with
 * SIGABRT and name the rule); and the stand-in GDRCopy's (gdrapi_stub.c)
 * copies and rules.  Every case runs in a fresh process of this
 * program (it runs itself with the case's name and environment), so that
 * each sees its own CUDAEMU_* and CUDA_VISIBLE_DEVICES from its first call.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cudaemu_int.h"
#include "../../src/mem/gdrapi_abi.h"

static const char *self;
static int failures;

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    exit(1); } } while (0)
#define OK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
            cudaGetErrorName(e_)); exit(1); } } while (0)

/* -------------------------------------------------------------- helpers */

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* A gate a host function on a stream waits at: the stream is busy until
 * the test opens it. */
static volatile int gate_open;

static void gate_fn(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&gate_open, __ATOMIC_ACQUIRE)) {
        sleep_ms(1);
    }
}

static void *open_gate_later(void *arg)
{
    sleep_ms((int)(intptr_t)arg);
    __atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void set_flag(void *arg)
{
    __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
}

static void sleep_then_set(void *arg)
{
    sleep_ms(60);
    set_flag(arg);
}

struct seen {
    const int *flag;
    int        value;
};

static void see_flag(void *arg)
{
    struct seen *s = arg;
    s->value = __atomic_load_n(s->flag, __ATOMIC_ACQUIRE);
}

/* Run this program with `name` and the environment `env` (NULL-ended
 * NAME=VALUE list) in a fresh process; its stderr goes to `err`. */
static pid_t spawn(const char *name, char *const *env, const char *arg,
                   int out_fd, int in_fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; env != NULL && env[i] != NULL; i++) {
            putenv(env[i]);
        }
        if (out_fd >= 0) {
            dup2(out_fd, 1);
        }
        if (in_fd >= 0) {
            dup2(in_fd, 0);
        }
        execl(self, self, name, arg, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void to_hex(const void *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
    }
}

static void from_hex(const char *s, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(s + 2 * i, "%2x", &v);
        ((unsigned char *)p)[i] = (unsigned char)v;
    }
}

/* A new cudaMalloc of n bytes and its IPC handle, in hex for a peer's
 * command line. */
static void *exported(size_t n, char *hex)
{
    void *d;
    OK(cudaMalloc(&d, n));
    cudaIpcMemHandle_t handle;
    OK(cudaIpcGetMemHandle(&handle, d));
    to_hex(&handle, sizeof(handle), hex);
    return d;
}

/* A peer process running case `name` with `arg`; its stdout is read here
 * (line by line) and its stdin is a pipe the test closes to let it go. */
typedef struct {
    pid_t pid;
    FILE *out;
    int   in;
} peer_t;

static void peer_start(peer_t *p, const char *name, char *const *env,
                       const char *arg)
{
    int o[2], i[2];
    CHECK(pipe2(o, O_CLOEXEC) == 0 && pipe2(i, O_CLOEXEC) == 0);
    p->pid = spawn(name, env, arg, o[1], i[0]);
    close(o[1]);
    close(i[0]);
    p->out = fdopen(o[0], "r");
    p->in = i[1];
}

static void peer_expect(peer_t *p, const char *word)
{
    char line[128] = "";
    CHECK(fgets(line, sizeof(line), p->out) != NULL);
    if (strncmp(line, word, strlen(word)) != 0) {
        fprintf(stderr, "peer said '%s', expected '%s'\n", line, word);
        exit(1);
    }
}

static int peer_end(peer_t *p)
{
    close(p->in);
    int st;
    waitpid(p->pid, &st, 0);
    fclose(p->out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The peer's side: say `word`, then wait until the test closes stdin. */
static void say(const char *word)
{
    printf("%s\n", word);
    fflush(stdout);
}

static void hold(void)
{
    char c;
    while (read(0, &c, 1) > 0) {
    }
}

/* ------------------------------------------------------------ behaviours */

static void case_copies(void)
{
    enum { N = 1 << 16 };
    unsigned char *h = malloc(N), *back = malloc(N), *pin, *d1, *d2, *m;
    for (int i = 0; i < N; i++) {
        h[i] = (unsigned char)(i * 7 + 1);
    }
    OK(cudaMalloc((void **)&d1, N));
    OK(cudaMalloc((void **)&d2, N));
    OK(cudaMallocHost((void **)&pin, N));
    OK(cudaMallocManaged((void **)&m, N, cudaMemAttachGlobal));
    OK(cudaMemcpy(d1, h, N, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(d2, d1, N, cudaMemcpyDefault));
    OK(cudaMemcpy(pin, d2, N, cudaMemcpyDeviceToHost));
    CHECK(memcmp(pin, h, N) == 0);
    /* An interior pointer of an allocation, as caching allocators hand out. */
    OK(cudaMemset(d2 + 100, 0xab, 50));
    OK(cudaMemcpy(back, d2, N, cudaMemcpyDefault));
    CHECK(back[99] == h[99] && back[100] == 0xab && back[149] == 0xab
          && back[150] == h[150]);
    OK(cudaMemcpy(m, d1, N, cudaMemcpyDefault));
    CHECK(memcmp(m, h, N) == 0);   /* managed memory: the host reads it */
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    OK(cudaMemsetAsync(d1, 3, N, s));
    OK(cudaMemcpyAsync(pin, d1, N, cudaMemcpyDeviceToHost, s));
    OK(cudaStreamSynchronize(s));
    CHECK(pin[0] == 3 && pin[N - 1] == 3);
    /* Past the end of an allocation: an error, nothing written. */
    CHECK(cudaMemcpy(d1 + N - 10, h, 20, cudaMemcpyDefault) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    /* An explicit kind that names device memory where there is none. */
    CHECK(cudaMemcpy(back, h, 16, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    cudaGetLastError();
    OK(cudaStreamDestroy(s));
    OK(cudaFree(d1));
    OK(cudaFree(d2));
    OK(cudaFree(m));
    OK(cudaFreeHost(pin));
    CHECK(cudaFree(d1) == cudaErrorInvalidValue);   /* freed twice */
}

struct order {
    int log[64];
    int n;
};
struct order_step {
    struct order *o;
    int           i;
};

static void log_step(void *arg)
{
    struct order_step *s = arg;
    if (s->i % 7 == 0) {
        sleep_ms(2);
    }
    s->o->log[s->o->n++] = s->i;
}

static void case_stream_order(void)
{
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    static struct order o;
    static struct order_step steps[64];
    for (int i = 0; i < 64; i++) {
        steps[i] = (struct order_step){ &o, i };
        OK(cudaLaunchHostFunc(s, log_step, &steps[i]));
    }
    OK(cudaStreamSynchronize(s));
    CHECK(o.n == 64);
    for (int i = 0; i < 64; i++) {
        CHECK(o.log[i] == i);
    }
    CHECK(cudaStreamQuery(s) == cudaSuccess);
    OK(cudaStreamDestroy(s));
}

static void case_legacy_stream(void)
{
    cudaStream_t blocking, nonblocking;
    OK(cudaStreamCreate(&blocking));
    OK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    static int a, b, c;
    static struct seen sa = { &a, -1 }, sb = { &b, -1 }, sc = { &c, -1 };
    /* The legacy stream waits for the earlier work of a blocking stream,
     * not for a non-blocking stream's (held at a closed gate). */
    OK(cudaLaunchHostFunc(blocking, sleep_then_set, &a));
    OK(cudaLaunchHostFunc(nonblocking, gate_fn, NULL));
    OK(cudaLaunchHostFunc(nonblocking, set_flag, &b));
    OK(cudaLaunchHostFunc(0, see_flag, &sa));
    OK(cudaLaunchHostFunc(cudaStreamLegacy, see_flag, &sb));
    OK(cudaStreamSynchronize(0));
    CHECK(sa.value == 1);
    CHECK(sb.value == 0);
    gate_open = 1;
    /* A blocking stream's later work waits for the legacy stream's. */
    OK(cudaLaunchHostFunc(0, sleep_then_set, &c));
    OK(cudaLaunchHostFunc(blocking, see_flag, &sc));
    OK(cudaStreamSynchronize(blocking));
    CHECK(sc.value == 1);
    /* The per-thread default stream is a blocking stream. */
    static int d;
    static struct seen sd = { &d, -1 };
    OK(cudaLaunchHostFunc(cudaStreamPerThread, sleep_then_set, &d));
    OK(cudaLaunchHostFunc(0, see_flag, &sd));
    OK(cudaDeviceSynchronize());
    CHECK(sd.value == 1);
    OK(cudaStreamDestroy(blocking));
    OK(cudaStreamDestroy(nonblocking));
}

static void case_events(void)
{
    cudaStream_t s1, s2;
    cudaEvent_t ev, t0, t1;
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    OK(cudaEventCreate(&t0));
    OK(cudaEventCreate(&t1));
    CHECK(cudaEventQuery(ev) == cudaSuccess);   /* never recorded */
    OK(cudaEventRecord(t0, s1));
    OK(cudaLaunchHostFunc(s1, gate_fn, NULL));
    OK(cudaEventRecord(ev, s1));
    OK(cudaEventRecord(t1, s1));
    CHECK(cudaEventQuery(ev) == cudaErrorNotReady);
    CHECK(cudaGetLastError() == cudaSuccess);   /* not an error */
    static int after;
    static struct seen seen = { (const int *)&gate_open, -1 };
    OK(cudaStreamWaitEvent(s2, ev, 0));
    OK(cudaLaunchHostFunc(s2, see_flag, &seen));
    OK(cudaLaunchHostFunc(s2, set_flag, &after));
    sleep_ms(30);
    CHECK(__atomic_load_n(&after, __ATOMIC_ACQUIRE) == 0);   /* s2 waits */
    pthread_t th;
    pthread_create(&th, NULL, open_gate_later, (void *)(intptr_t)20);
    OK(cudaEventSynchronize(ev));
    CHECK(gate_open == 1);
    CHECK(cudaEventQuery(ev) == cudaSuccess);
    OK(cudaStreamSynchronize(s2));
    CHECK(seen.value == 1);
    float ms = -1;
    /* t1 was recorded after ev: done only once s1 reaches it
     * (cudaEventElapsedTime: cudaErrorNotReady until both are). */
    OK(cudaEventSynchronize(t1));
    OK(cudaEventElapsedTime(&ms, t0, t1));
    CHECK(ms > 0.0f);   /* t1 completed after the gate opened */
    CHECK(cudaEventElapsedTime(&ms, t0, ev) == cudaErrorInvalidResourceHandle);
    cudaGetLastError();
    pthread_join(th, NULL);
    OK(cudaEventDestroy(ev));
    OK(cudaEventDestroy(t0));
    OK(cudaEventDestroy(t1));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
}

/* cudaMemcpyAsync to pinned memory returns at once; from pageable memory
 * the source is taken at the call; to pageable memory it returns when the
 * copy is done; cudaFree waits for the device. */
static void case_async_copies(void)
{
    enum { N = 4096 };
    unsigned char *d, *pin, *pageable = malloc(N);
    OK(cudaMalloc((void **)&d, N));
    OK(cudaMallocHost((void **)&pin, N));
    OK(cudaMemset(d, 5, N));
    OK(cudaDeviceSynchronize());
    cudaStream_t s;
    OK(cudaStreamCreate(&s));

    memset(pin, 0, N);
    OK(cudaLaunchHostFunc(s, gate_fn, NULL));
    OK(cudaMemcpyAsync(pin, d, N, cudaMemcpyDeviceToHost, s));
    CHECK(pin[0] == 0);                    /* asynchronous: not yet */
    gate_open = 1;
    OK(cudaStreamSynchronize(s));
    CHECK(pin[0] == 5);

    gate_open = 0;
    memset(pageable, 9, N);
    OK(cudaLaunchHostFunc(s, gate_fn, NULL));
    OK(cudaMemcpyAsync(d, pageable, N, cudaMemcpyHostToDevice, s));
    memset(pageable, 1, N);                /* the source was staged */
    gate_open = 1;
    OK(cudaStreamSynchronize(s));
    OK(cudaMemcpy(pin, d, N, cudaMemcpyDeviceToHost));
    CHECK(pin[0] == 9 && pin[N - 1] == 9);

    gate_open = 0;
    memset(pageable, 0, N);
    pthread_t th;
    pthread_create(&th, NULL, open_gate_later, (void *)(intptr_t)30);
    OK(cudaLaunchHostFunc(s, gate_fn, NULL));
    OK(cudaMemcpyAsync(pageable, d, N, cudaMemcpyDeviceToHost, s));
    CHECK(gate_open == 1 && pageable[0] == 9);   /* returned when done */
    pthread_join(th, NULL);

    static int flag;
    unsigned char *other;
    OK(cudaMalloc((void **)&other, 64));
    OK(cudaLaunchHostFunc(s, sleep_then_set, &flag));
    OK(cudaFree(other));
    CHECK(__atomic_load_n(&flag, __ATOMIC_ACQUIRE) == 1);   /* it waited */
    OK(cudaStreamDestroy(s));
    OK(cudaFree(d));
    OK(cudaFreeHost(pin));
    free(pageable);
}

static void attrs(const void *p, unsigned *type, unsigned *managed, int *ord,
                  unsigned long long *id, CUdeviceptr *start, size_t *size,
                  unsigned *ipc)
{
    CUpointer_attribute a[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_BUFFER_ID,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
    };
    void *data[] = { type, managed, ord, id, start, size, ipc };
    CHECK(cuPointerGetAttributes(7, a, data, (CUdeviceptr)(uintptr_t)p)
          == CUDA_SUCCESS);
}

static void case_pointer_kinds(void)
{
    unsigned type, managed, ipc;
    int ord;
    unsigned long long id;
    CUdeviceptr start;
    size_t size;
    struct cudaPointerAttributes pa;
    cudaIpcMemHandle_t h;

    OK(cudaSetDevice(1));
    char *d;
    OK(cudaMalloc((void **)&d, 1 << 20));
    attrs(d + 4096, &type, &managed, &ord, &id, &start, &size, &ipc);
    CHECK(type == CU_MEMORYTYPE_DEVICE && !managed && ord == 1 && id != 0
          && start == (CUdeviceptr)(uintptr_t)d && size == 1 << 20 && ipc);
    OK(cudaPointerGetAttributes(&pa, d + 4096));
    CHECK(pa.type == cudaMemoryTypeDevice && pa.device == 1
          && pa.devicePointer == d + 4096 && pa.hostPointer == NULL);
    CHECK(cudaemu_device_span(1, d, 1 << 20) != NULL);
    CHECK(cudaemu_device_span(1, d, (1 << 20) + 1) == NULL);

    char *m;
    OK(cudaMallocManaged((void **)&m, 4096, cudaMemAttachGlobal));
    attrs(m, &type, &managed, &ord, &id, &start, &size, &ipc);
    CHECK(managed && ord == 1 && !ipc);
    OK(cudaPointerGetAttributes(&pa, m));
    CHECK(pa.type == cudaMemoryTypeManaged && pa.hostPointer == m);

    char *pin, *mapped, *dev_alias;
    OK(cudaMallocHost((void **)&pin, 4096));
    OK(cudaHostAlloc((void **)&mapped, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
    OK(cudaHostGetDevicePointer((void **)&dev_alias, mapped, 0));
    CHECK(dev_alias == mapped);
    attrs(pin, &type, &managed, &ord, &id, &start, &size, &ipc);
    CHECK(type == CU_MEMORYTYPE_HOST && !managed && ord == 1);
    OK(cudaPointerGetAttributes(&pa, mapped));
    CHECK(pa.type == cudaMemoryTypeHost && pa.hostPointer == mapped);
    unsigned flags;
    OK(cudaHostGetFlags(&flags, mapped));
    CHECK(flags == (cudaHostAllocMapped | cudaHostAllocPortable));

    char *reg = malloc(8192);
    OK(cudaHostRegister(reg, 8192, cudaHostRegisterDefault));
    CHECK(cudaHostRegister(reg + 100, 10, 0) == cudaErrorHostMemoryAlreadyRegistered);
    cudaGetLastError();
    OK(cudaPointerGetAttributes(&pa, reg + 10));
    CHECK(pa.type == cudaMemoryTypeHost);
    OK(cudaHostUnregister(reg));

    /* Pageable: no error, type unregistered (CUDA 11 and later). */
    OK(cudaPointerGetAttributes(&pa, reg));
    CHECK(pa.type == cudaMemoryTypeUnregistered);
    attrs(reg, &type, &managed, &ord, &id, &start, &size, &ipc);
    CHECK(type == 0 && id == 0);
    CHECK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                (CUdeviceptr)(uintptr_t)reg)
          == CUDA_ERROR_INVALID_VALUE);

    /* cudaMallocAsync: device memory, no IPC handle. */
    char *a;
    OK(cudaMallocAsync((void **)&a, 4096, 0));
    attrs(a, &type, &managed, &ord, &id, &start, &size, &ipc);
    CHECK(type == CU_MEMORYTYPE_DEVICE && !ipc);
    CHECK(cudaIpcGetMemHandle(&h, a) == cudaErrorInvalidValue);
    cudaGetLastError();
    OK(cudaFreeAsync(a, 0));
    OK(cudaStreamSynchronize(0));

    /* VMM: device memory, no legacy IPC handle. */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 1;
    size_t gran;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop,
                                        CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
    CUmemGenericAllocationHandle vh;
    CUdeviceptr va;
    CHECK(cuMemCreate(&vh, gran, &prop, 0) == CUDA_SUCCESS);
    CHECK(cuMemAddressReserve(&va, gran, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va, gran, 0, vh, 0) == CUDA_SUCCESS);
    CUmemAccessDesc acc = { .location = prop.location,
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CHECK(cudaemu_device_span(1, (void *)(uintptr_t)va, 16) == NULL);  /* no access yet */
    CHECK(cuMemSetAccess(va, gran, &acc, 1) == CUDA_SUCCESS);
    CHECK(cudaemu_device_span(1, (void *)(uintptr_t)va, 16) != NULL);
    attrs((void *)(uintptr_t)(va + 64), &type, &managed, &ord, &id, &start, &size, &ipc);
    CHECK(type == CU_MEMORYTYPE_DEVICE && !ipc && start == va && size == gran);
    CUdeviceptr base;
    size_t bsize;
    CHECK(cuMemGetAddressRange(&base, &bsize, va + 100) == CUDA_SUCCESS
          && base == va && bsize == gran);
    CHECK(cudaIpcGetMemHandle(&h, (void *)(uintptr_t)va) == cudaErrorInvalidValue);
    cudaGetLastError();
    unsigned char buf[16] = { 1, 2, 3 }, out[16];
    OK(cudaMemcpy((void *)(uintptr_t)va, buf, 16, cudaMemcpyDefault));
    OK(cudaMemcpy(out, (void *)(uintptr_t)va, 16, cudaMemcpyDefault));
    CHECK(memcmp(buf, out, 16) == 0);
    CHECK(cuMemUnmap(va, gran) == CUDA_SUCCESS);
    CHECK(cuMemRelease(vh) == CUDA_SUCCESS);
    CHECK(cuMemAddressFree(va, gran) == CUDA_SUCCESS);

    /* The driver entry points as collar reaches them. */
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    OK(cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &fn, 12000,
                                        cudaEnableDefault, &q));
    CHECK(q == cudaDriverEntryPointSuccess && fn == (void *)cuPointerGetAttributes);
    OK(cudaGetDriverEntryPointByVersion("cuNoSuchThing", &fn, 12000,
                                        cudaEnableDefault, &q));
    CHECK(q == cudaDriverEntryPointSymbolNotFound);
    OK(cudaFree(d));
    OK(cudaFree(m));
    OK(cudaFreeHost(pin));
    OK(cudaFreeHost(mapped));
    free(reg);
}

/* A range freed and handed out again is a new buffer. */
static void case_buffer_id(void)
{
    unsigned long long ids[8];
    void *p[8];
    int reused = 0;
    for (int i = 0; i < 8; i++) {
        OK(cudaMalloc(&p[i], 1 << 16));
        CHECK(cuPointerGetAttribute(&ids[i], CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                    (CUdeviceptr)(uintptr_t)p[i]) == CUDA_SUCCESS);
        for (int k = 0; k < i; k++) {
            CHECK(ids[k] != ids[i]);
            reused |= p[k] == p[i];
        }
        OK(cudaFree(p[i]));
    }
    CHECK(reused);   /* the test saw an address come back */
}

/* The owner: a cudaMalloc whose handle a peer process opens, reads and
 * writes. */
static void case_ipc(void)
{
    enum { N = 1 << 16 };
    OK(cudaSetDevice(2));
    unsigned char *d, *h = malloc(N);
    OK(cudaMalloc((void **)&d, N));
    OK(cudaMemset(d, 0x5a, N));
    OK(cudaDeviceSynchronize());   /* the memset is asynchronous */
    cudaIpcMemHandle_t handle;
    OK(cudaIpcGetMemHandle(&handle, d + 512));   /* names the allocation */
    char hex[2 * sizeof(handle) + 1];
    to_hex(&handle, sizeof(handle), hex);
    /* The peer sees devices 3 and 1 only: device 2 is hidden from it. */
    char *env[] = { "CUDA_VISIBLE_DEVICES=3,1", NULL };
    peer_t p;
    peer_start(&p, "ipc-peer", env, hex);
    peer_expect(&p, "written");
    OK(cudaMemcpy(h, d, N, cudaMemcpyDefault));
    CHECK(h[0] == 0xa5 && h[N - 1] == 0xa5);
    peer_expect(&p, "closed");
    CHECK(peer_end(&p) == 0);
    OK(cudaFree(d));   /* closed by the peer first: no rule */
    free(h);
}

static void case_ipc_peer(const char *hex)
{
    enum { N = 1 << 16 };
    cudaIpcMemHandle_t handle;
    from_hex(hex, &handle, sizeof(handle));
    unsigned char *d, *d2, *h = malloc(N);
    OK(cudaIpcOpenMemHandle((void **)&d, handle, cudaIpcMemLazyEnablePeerAccess));
    OK(cudaIpcOpenMemHandle((void **)&d2, handle, cudaIpcMemLazyEnablePeerAccess));
    CHECK(d2 == d);   /* opened twice: the same pointer, counted */
    OK(cudaMemcpy(h, d, N, cudaMemcpyDefault));
    CHECK(h[0] == 0x5a && h[N - 1] == 0x5a);
    struct cudaPointerAttributes pa;
    OK(cudaPointerGetAttributes(&pa, d));
    CHECK(pa.type == cudaMemoryTypeDevice);
    OK(cudaMemset(d, 0xa5, N));
    OK(cudaDeviceSynchronize());
    say("written");
    OK(cudaIpcCloseMemHandle(d));
    OK(cudaIpcCloseMemHandle(d2));
    CHECK(cudaIpcCloseMemHandle(d) == cudaErrorInvalidValue);
    cudaGetLastError();
    say("closed");
    hold();
    free(h);
}

/* An interprocess event: the peer sees it pending, then done. */
static void case_ipc_event(void)
{
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess) == cudaErrorInvalidValue);
    cudaGetLastError();
    OK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    OK(cudaLaunchHostFunc(s, gate_fn, NULL));
    OK(cudaEventRecord(ev, s));
    cudaIpcEventHandle_t h;
    OK(cudaIpcGetEventHandle(&h, ev));
    char hex[2 * sizeof(h) + 1];
    to_hex(&h, sizeof(h), hex);
    peer_t p;
    peer_start(&p, "ipc-event-peer", NULL, hex);
    peer_expect(&p, "pending");
    gate_open = 1;
    peer_expect(&p, "done");
    CHECK(peer_end(&p) == 0);
    OK(cudaEventDestroy(ev));
    OK(cudaStreamDestroy(s));
}

static void case_ipc_event_peer(const char *hex)
{
    cudaIpcEventHandle_t h;
    from_hex(hex, &h, sizeof(h));
    cudaEvent_t ev;
    OK(cudaIpcOpenEventHandle(&ev, h));
    CHECK(cudaEventQuery(ev) == cudaErrorNotReady);
    say("pending");
    OK(cudaEventSynchronize(ev));
    CHECK(cudaEventQuery(ev) == cudaSuccess);
    say("done");
}

static void bus_id_of(int phys_visible_as, char *out)
{
    OK(cudaDeviceGetPCIBusId(out, 32, phys_visible_as));
}

/* Run with CUDA_VISIBLE_DEVICES=2,0,x,1 and CUDAEMU_DEVICES=3: the entry
 * after the invalid one is hidden too. */
static void case_visible(void)
{
    int n = 0, dev = -1;
    OK(cudaGetDeviceCount(&n));
    CHECK(n == 2);
    char id0[32], id1[32];
    bus_id_of(0, id0);
    bus_id_of(1, id1);
    CHECK(strcmp(id0, id1) != 0);
    OK(cudaDeviceGetByPCIBusId(&dev, id1));
    CHECK(dev == 1);
    CHECK(cudaSetDevice(2) == cudaErrorInvalidDevice);
    CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
    OK(cudaSetDevice(0));
    void *p;
    OK(cudaMalloc(&p, 64));
    int ord = -1;
    CHECK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS);
    CHECK(ord == 0);
    /* Print the bus id of ordinal 0 for the other half of the check. */
    printf("%s\n", id0);
    OK(cudaFree(p));
}

/* All devices visible: ordinal k is node device k.  Prints the bus ids. */
static void case_all_ids(const char *arg)
{
    (void)arg;
    int n = 0;
    OK(cudaGetDeviceCount(&n));
    for (int i = 0; i < n; i++) {
        char id[32];
        bus_id_of(i, id);
        printf("%s\n", id);
    }
}

static void case_no_device(void)
{
    int n = -1;
    CHECK(cudaGetDeviceCount(&n) == cudaErrorNoDevice && n == 0);
    void *p;
    CHECK(cudaMalloc(&p, 16) == cudaErrorNoDevice);
}

static void *helper_malloc(void *arg)
{
    void *p;
    cudaError_t e = cudaMalloc(&p, 64);
    *(cudaError_t *)arg = e;
    return NULL;
}

/* The ledger: device 1 explicitly, device 0 implicitly by a helper thread
 * without a context (what a progress thread does). */
static void case_contexts(void)
{
    OK(cudaSetDevice(1));
    CUcontext c = NULL;
    CHECK(cuCtxGetCurrent(&c) == CUDA_SUCCESS && c != NULL);
    cudaError_t e = cudaErrorUnknown;
    pthread_t th;
    pthread_create(&th, NULL, helper_malloc, &e);
    pthread_join(th, NULL);
    OK(e);
    /* The driver's view: another thread's context is its own. */
    CUcontext none = (CUcontext)1;
    CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
    CHECK(cuCtxGetCurrent(&none) == CUDA_SUCCESS && none == NULL);
    CHECK(cuCtxSetCurrent(c) == CUDA_SUCCESS);
    int d = -1;
    OK(cudaGetDevice(&d));
    CHECK(d == 1);
}

static void case_errors(void)
{
    CHECK(cudaSetDevice(99) == cudaErrorInvalidDevice);
    CHECK(cudaPeekAtLastError() == cudaErrorInvalidDevice);
    CHECK(cudaPeekAtLastError() == cudaErrorInvalidDevice);
    CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(strcmp(cudaGetErrorName(cudaErrorInvalidDevice), "cudaErrorInvalidDevice") == 0);
    /* A stub that no fat binary registered. */
    CHECK(cudaLaunchKernel((const void *)case_errors, (dim3){ 1, 1, 1 },
                           (dim3){ 1, 1, 1 }, NULL, 0, 0)
          == cudaErrorInvalidDeviceFunction);
    CHECK(cudaGetLastError() == cudaErrorInvalidDeviceFunction);
}

static void nothing(void *arg)
{
    (void)arg;
}

/* CUDAEMU_FAIL=malloc:2,launch:1,sticky:2 */
static void case_inject(void)
{
    void *a, *b, *c;
    OK(cudaMalloc(&a, 16));
    CHECK(cudaMalloc(&b, 16) == cudaErrorMemoryAllocation);
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
    OK(cudaMalloc(&c, 16));
    CHECK(cudaemu_stream_enqueue(0, nothing, malloc(1)) == cudaErrorLaunchOutOfResources);
    CHECK(cudaGetLastError() == cudaErrorLaunchOutOfResources);
    OK(cudaDeviceSynchronize());            /* not sticky */
    OK(cudaemu_stream_enqueue(0, nothing, malloc(1)));   /* faults as it runs */
    CHECK(cudaDeviceSynchronize() == cudaErrorIllegalAddress);
    CHECK(cudaMalloc(&b, 16) == cudaErrorIllegalAddress);
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress);   /* sticky */
}

/* CUDAEMU_FAIL=ipcopen@1: the peer of rank 1 is refused, rank 0's is not. */
static void case_inject_ipc(void)
{
    char hex[2 * sizeof(cudaIpcMemHandle_t) + 1];
    void *d = exported(4096, hex);
    for (int rank = 0; rank < 2; rank++) {
        char *env[] = { rank ? "OMPI_COMM_WORLD_RANK=1" : "OMPI_COMM_WORLD_RANK=0",
                        NULL };
        peer_t p;
        peer_start(&p, "ipc-open-try", env, hex);
        peer_expect(&p, rank ? "refused" : "opened");
        CHECK(peer_end(&p) == 0);
    }
    OK(cudaFree(d));
}

static void case_ipc_open_try(const char *hex)
{
    cudaIpcMemHandle_t handle;
    from_hex(hex, &handle, sizeof(handle));
    void *d;
    cudaError_t e = cudaIpcOpenMemHandle(&d, handle, cudaIpcMemLazyEnablePeerAccess);
    if (e == cudaSuccess) {
        OK(cudaIpcCloseMemHandle(d));
    }
    say(e == cudaSuccess ? "opened"
        : e == cudaErrorMapBufferObjectFailed ? "refused" : "other");
}

/* cudaStreamDestroy: the pending work still runs. */
static void case_destroy_pending(void)
{
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    static int flag;
    OK(cudaLaunchHostFunc(s, gate_fn, NULL));
    OK(cudaLaunchHostFunc(s, set_flag, &flag));
    OK(cudaStreamDestroy(s));
    gate_open = 1;
    for (int i = 0; i < 2000 && !__atomic_load_n(&flag, __ATOMIC_ACQUIRE); i++) {
        sleep_ms(1);
    }
    CHECK(flag == 1);
}

/* ----------------------------------------------------------------- rules */

static void rule_stream_destroyed(void)
{
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    OK(cudaStreamDestroy(s));
    cudaStreamSynchronize(s);
}

static void rule_event_destroyed(void)
{
    cudaEvent_t e;
    OK(cudaEventCreate(&e));
    OK(cudaEventDestroy(e));
    cudaEventRecord(e, 0);
}

static void rule_host_access(void)
{
    int *p;
    OK(cudaMalloc((void **)&p, 64));
    p[3] = 1;
}

static void rule_ipc_own(void)
{
    void *d, *o;
    OK(cudaMalloc(&d, 64));
    cudaIpcMemHandle_t h;
    OK(cudaIpcGetMemHandle(&h, d));
    cudaIpcOpenMemHandle(&o, h, cudaIpcMemLazyEnablePeerAccess);
}

/* The owner frees while a peer still has the allocation open. */
static void rule_ipc_free_open(void)
{
    char hex[2 * sizeof(cudaIpcMemHandle_t) + 1];
    void *d = exported(4096, hex);
    peer_t p;
    peer_start(&p, "ipc-hold", NULL, hex);
    peer_expect(&p, "opened");
    cudaFree(d);
    peer_end(&p);
}

static void case_ipc_hold(const char *hex)
{
    cudaIpcMemHandle_t handle;
    from_hex(hex, &handle, sizeof(handle));
    void *d;
    OK(cudaIpcOpenMemHandle(&d, handle, cudaIpcMemLazyEnablePeerAccess));
    say("opened");
    hold();
}

/* CUDAEMU_STRICT_DEVICES=1: a helper thread's implicit context on 0. */
static void rule_unused_device(void)
{
    OK(cudaSetDevice(1));
    void *p;
    OK(cudaMalloc(&p, 64));
    cudaError_t e;
    pthread_t th;
    pthread_create(&th, NULL, helper_malloc, &e);
    pthread_join(th, NULL);
}

static void calls_cuda(void *arg)
{
    (void)arg;
    void *p;
    cudaMalloc(&p, 16);
}

static void rule_call_in_host_func(void)
{
    OK(cudaLaunchHostFunc(0, calls_cuda, NULL));
    cudaDeviceSynchronize();
}

/* ------------------------------------- the stand-in GDRCopy (gdrapi_stub.c) */

/* A pinned and mapped cudaMalloc of n bytes: the GPU pages covering it. */
typedef struct {
    gdr_t      g;
    char      *d;
    size_t     n;
    gdr_mh_t   mh;
    uintptr_t  lo;
    size_t     pinned;
    char      *map;
    gdr_info_t info;
} gdr_mapped_t;

static void gdr_map_alloc(gdr_mapped_t *m, size_t n)
{
    memset(m, 0, sizeof(*m));
    m->g = gdr_open();
    CHECK(m->g != NULL);
    CHECK(cudaMalloc((void **)&m->d, n) == cudaSuccess);
    m->n = n;
    m->lo = (uintptr_t)m->d & ~(GDR_GPU_PAGE - 1);
    m->pinned = (((uintptr_t)m->d + n + GDR_GPU_PAGE - 1) & ~(GDR_GPU_PAGE - 1)) - m->lo;
    CHECK(gdr_pin_buffer(m->g, m->lo, m->pinned, 0, 0, &m->mh) == 0);
    CHECK(gdr_map(m->g, m->mh, (void **)&m->map, m->pinned) == 0);
    CHECK(gdr_get_info_v2(m->g, m->mh, &m->info) == 0);
    CHECK(m->info.va == m->lo && m->info.mapped_size == m->pinned);
}

/* Where device address p is in the mapping (gdrapi.h: gdr_map's address
 * plus p - info.va). */
static char *gdr_at(const gdr_mapped_t *m, const void *p)
{
    return m->map + ((uintptr_t)p - m->info.va);
}

/* A cudaMalloc that does not begin on a GPU page. */
static char *gdr_unaligned_alloc(size_t n)
{
    for (int i = 0; i < 64; i++) {
        char *d;
        CHECK(cudaMalloc((void **)&d, n) == cudaSuccess);
        if ((uintptr_t)d & (GDR_GPU_PAGE - 1)) {
            return d;
        }
    }
    fprintf(stderr, "no unaligned allocation in 64 tries\n");
    exit(1);
}

/* A CPU copy through the mapping, at the offset gdr_get_info gives, reads
 * and writes the device bytes. */
static void gdr_case_copy(void)
{
    gdr_mapped_t m;
    gdr_map_alloc(&m, 100000 + 3);
    unsigned char h[100003], back[100003];
    for (size_t i = 0; i < sizeof(h); i++) {
        h[i] = (unsigned char)(i * 7 + 1);
    }
    CHECK(gdr_copy_to_mapping(m.mh, gdr_at(&m, m.d), h, sizeof(h)) == 0);
    CHECK(cudaMemcpy(back, m.d, sizeof(back), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(h, back, sizeof(h)) == 0);
    for (size_t i = 0; i < sizeof(h); i++) {
        h[i] = (unsigned char)(i * 13 + 5);
    }
    CHECK(cudaMemcpy(m.d, h, sizeof(h), cudaMemcpyHostToDevice) == cudaSuccess);
    /* A copy from pageable memory may return before its DMA is done (CUDA
     * Runtime API, "API synchronization behavior"): the CPU reads after
     * the device is idle, as collar's COLLAR_SYNC orders it. */
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    memset(back, 0, sizeof(back));
    CHECK(gdr_copy_from_mapping(m.mh, back + 10, gdr_at(&m, m.d + 10), 9) == 0);
    CHECK(memcmp(back + 10, h + 10, 9) == 0);
    CHECK(gdr_unmap(m.g, m.mh, m.map, m.pinned) == 0);
    CHECK(gdr_unpin_buffer(m.g, m.mh) == 0);
    CHECK(cudaFree(m.d) == cudaSuccess);
    CHECK(gdr_close(m.g) == 0);
}

/* A pin from a GPU page boundary inside an allocation that begins below
 * it (README: "gdr_pin_buffer() accepts any addresses returned by
 * cudaMalloc"; gdr_map needs the aligned one): the mapping holds the
 * allocation's bytes from that page on; `below` copies a byte of the
 * allocation under the pinned page through it (copy-range). */
static void gdr_inside(int below)
{
    gdr_t g = gdr_open();
    CHECK(g != NULL);
    const size_t n = 3 * GDR_GPU_PAGE;
    char *d = gdr_unaligned_alloc(n);
    const uintptr_t start = ((uintptr_t)d + GDR_GPU_PAGE - 1) & ~(GDR_GPU_PAGE - 1);
    const size_t bytes = (uintptr_t)d + n - start;
    gdr_mh_t mh;
    char *map;
    gdr_info_t info;
    CHECK(gdr_pin_buffer(g, start, bytes, 0, 0, &mh) == 0);
    CHECK(gdr_map(g, mh, (void **)&map, bytes) == 0);
    CHECK(gdr_get_info_v2(g, mh, &info) == 0);
    CHECK(info.va == start && info.mapped_size >= bytes);
    unsigned char h[300], back[300];
    for (size_t i = 0; i < sizeof(h); i++) {
        h[i] = (unsigned char)(i * 11 + 3);
    }
    char *last = d + n - sizeof(h);   /* the allocation's last bytes */
    CHECK(gdr_copy_to_mapping(mh, map + ((uintptr_t)last - info.va), h, sizeof(h)) == 0);
    CHECK(cudaMemcpy(back, last, sizeof(back), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(h, back, sizeof(h)) == 0);
    CHECK(gdr_copy_from_mapping(mh, back, map, 8) == 0);   /* the pinned page */
    if (below) {
        gdr_copy_from_mapping(mh, back, map - 8, 8);
    }
    CHECK(gdr_unmap(g, mh, map, bytes) == 0);
    CHECK(gdr_unpin_buffer(g, mh) == 0);
    CHECK(cudaFree(d) == cudaSuccess);
    CHECK(gdr_close(g) == 0);
}

static void gdr_case_copy_inside(void)
{
    gdr_inside(0);
}

static void gdr_case_copy_below_pin(void)
{
    gdr_inside(1);
}

/* A pin of host, managed or unallocated memory, or of more than the GPU
 * pages of one allocation, is refused (EINVAL), not a rule. */
static void gdr_case_pin_refused(void)
{
    gdr_t g = gdr_open();
    CHECK(g != NULL);
    gdr_mh_t mh;
    char *host = malloc(1 << 20);
    CHECK(host != NULL);
    uintptr_t h = ((uintptr_t)host + GDR_GPU_PAGE - 1) & ~(GDR_GPU_PAGE - 1);
    CHECK(gdr_pin_buffer(g, h, GDR_GPU_PAGE, 0, 0, &mh) == EINVAL);
    char *d;
    CHECK(cudaMalloc((void **)&d, 1000) == cudaSuccess);
    const uintptr_t lo = (uintptr_t)d & ~(GDR_GPU_PAGE - 1);
    CHECK(gdr_pin_buffer(g, lo, 3 * GDR_GPU_PAGE, 0, 0, &mh) == EINVAL);   /* beyond */
    void *managed;
    CHECK(cudaMallocManaged(&managed, 1000, cudaMemAttachGlobal) == cudaSuccess);
    CHECK(gdr_pin_buffer(g, (uintptr_t)managed, 1000, 0, 0, &mh) == EINVAL);
    CHECK(gdr_pin_buffer(g, lo, GDR_GPU_PAGE, 0, 0, &mh) == 0);
    CHECK(gdr_close(g) == 0);
}

static void gdr_case_no_driver(void)
{
    CHECK(gdr_open() == NULL);
}

static void gdr_case_map_unaligned(void)
{
    gdr_t g = gdr_open();
    char *d = gdr_unaligned_alloc(1000);
    gdr_mh_t mh;
    void *map;
    CHECK(gdr_pin_buffer(g, (uintptr_t)d, 1000, 0, 0, &mh) == 0);
    gdr_map(g, mh, &map, 1000);
}

static void gdr_case_map_twice(void)
{
    gdr_mapped_t m;
    gdr_map_alloc(&m, 1000);
    void *again;
    gdr_map(m.g, m.mh, &again, m.pinned);
}

static void gdr_case_unmap_first(void)
{
    gdr_mapped_t m;
    gdr_map_alloc(&m, 1000);
    gdr_unpin_buffer(m.g, m.mh);
}

static void gdr_case_after_unpin(void)
{
    gdr_mapped_t m;
    gdr_map_alloc(&m, 1000);
    CHECK(gdr_unmap(m.g, m.mh, m.map, m.pinned) == 0);
    CHECK(gdr_unpin_buffer(m.g, m.mh) == 0);
    gdr_info_t info;
    gdr_get_info_v2(m.g, m.mh, &info);
}

static void gdr_case_copy_range(void)
{
    gdr_mapped_t m;
    gdr_map_alloc(&m, 1000);
    char h[16];
    gdr_copy_from_mapping(m.mh, h, gdr_at(&m, m.d + 1000 - 8), 16);
}

static void gdr_case_copy_freed(void)
{
    gdr_mapped_t m;
    gdr_map_alloc(&m, 1000);
    CHECK(cudaFree(m.d) == cudaSuccess);
    char h[8];
    gdr_copy_from_mapping(m.mh, h, gdr_at(&m, m.d), 8);
}

/* ---------------------------------------------------------------- driver */

typedef struct {
    const char *name;
    void      (*fn)(void);
    void      (*peer)(const char *arg);
    const char *rule;     /* the rule the case must die of, or NULL */
    const char *env[4];
} case_t;

static const case_t cases[] = {
    { "copies", case_copies, NULL, NULL, { NULL } },
    { "stream-order", case_stream_order, NULL, NULL, { NULL } },
    { "legacy-stream", case_legacy_stream, NULL, NULL, { NULL } },
    { "events", case_events, NULL, NULL, { NULL } },
    { "async-copies", case_async_copies, NULL, NULL, { NULL } },
    { "pointer-kinds", case_pointer_kinds, NULL, NULL, { NULL } },
    { "buffer-id", case_buffer_id, NULL, NULL, { NULL } },
    { "ipc", case_ipc, NULL, NULL, { NULL } },
    { "ipc-event", case_ipc_event, NULL, NULL, { NULL } },
    { "visible", case_visible, NULL, NULL,
      { "CUDAEMU_DEVICES=3", "CUDA_VISIBLE_DEVICES=2,0,x,1", NULL } },
    { "no-device", case_no_device, NULL, NULL, { "CUDA_VISIBLE_DEVICES=", NULL } },
    { "contexts", case_contexts, NULL, NULL, { NULL } },
    { "errors", case_errors, NULL, NULL, { NULL } },
    { "inject", case_inject, NULL, NULL,
      { "CUDAEMU_FAIL=malloc:2,launch:1,sticky:2", NULL } },
    { "inject-ipc", case_inject_ipc, NULL, NULL, { "CUDAEMU_FAIL=ipcopen@1", NULL } },
    { "destroy-pending", case_destroy_pending, NULL, NULL, { NULL } },
    { "rule-stream", rule_stream_destroyed, NULL, "stream-used-after-destroy", { NULL } },
    { "rule-event", rule_event_destroyed, NULL, "event-used-after-destroy", { NULL } },
    { "rule-host-access", rule_host_access, NULL, "host-access-to-device-memory",
      { NULL } },
    { "rule-ipc-own", rule_ipc_own, NULL, "ipc-open-in-own-process", { NULL } },
    { "rule-ipc-free", rule_ipc_free_open, NULL, "ipc-free-while-open", { NULL } },
    { "rule-unused-device", rule_unused_device, NULL, "context-on-unused-device",
      { "CUDAEMU_STRICT_DEVICES=1", NULL } },
    { "rule-host-func", rule_call_in_host_func, NULL, "cuda-call-in-host-function",
      { NULL } },
    /* Peers, run by the cases above. */
    { "ipc-peer", NULL, case_ipc_peer, NULL, { NULL } },
    { "ipc-event-peer", NULL, case_ipc_event_peer, NULL, { NULL } },
    { "ipc-open-try", NULL, case_ipc_open_try, NULL, { NULL } },
    { "ipc-hold", NULL, case_ipc_hold, NULL, { NULL } },
    { "all-ids", NULL, case_all_ids, NULL, { NULL } },
    { "gdr-copy", gdr_case_copy, NULL, NULL, { NULL } },
    { "gdr-pin-refused", gdr_case_pin_refused, NULL, NULL, { NULL } },
    { "gdr-no-driver", gdr_case_no_driver, NULL, NULL, { "GDRSTUB_NO_DRIVER=1", NULL } },
    { "gdr-map-unaligned", gdr_case_map_unaligned, NULL, "map-unaligned", { NULL } },
    { "gdr-map-twice", gdr_case_map_twice, NULL, "map-twice", { NULL } },
    { "gdr-unmap-first", gdr_case_unmap_first, NULL, "unmap-first", { NULL } },
    { "gdr-use-after-unpin", gdr_case_after_unpin, NULL, "use-after-unpin", { NULL } },
    { "gdr-copy-range", gdr_case_copy_range, NULL, "copy-range", { NULL } },
    { "gdr-copy-freed", gdr_case_copy_freed, NULL, "copy-freed", { NULL } },
    { "gdr-copy-inside", gdr_case_copy_inside, NULL, NULL, { NULL } },
    { "gdr-copy-below-pin", gdr_case_copy_below_pin, NULL, "copy-range", { NULL } },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Run a case in a fresh process; its stdout and stderr are returned. */
static int run_case(const case_t *c, char *const *extra, char *out, size_t outlen)
{
    char *env[8];
    int n = 0;
    for (int i = 0; c->env[i] != NULL; i++) {
        env[n++] = (char *)c->env[i];
    }
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        env[n++] = extra[i];
    }
    env[n] = NULL;
    int fds[2];
    CHECK(pipe2(fds, O_CLOEXEC) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; env[i] != NULL; i++) {
            putenv(env[i]);
        }
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        alarm(20);   /* a hang fails the case */
        execl(self, self, c->name, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t r;
    while ((r = read(fds[0], out + len, outlen - 1 - len)) > 0) {
        len += (size_t)r;
    }
    out[len] = '\0';
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    return st;
}

static void verdict(const case_t *c, int ok, const char *why, const char *out)
{
    printf("%s: %s%s%s\n", ok ? "PASS" : "FAIL", c->name, ok ? "" : ": ",
           ok ? "" : why);
    if (!ok) {
        printf("---- output\n%s----\n", out);
        failures++;
    }
}

static const case_t *find_case(const char *name)
{
    for (size_t i = 0; i < NCASES; i++) {
        if (strcmp(cases[i].name, name) == 0) {
            return &cases[i];
        }
    }
    return NULL;
}

/* The ledger of `contexts`: explicit on 1, implicit on 0 from cudaMalloc. */
static void check_ledger(void)
{
    char path[] = "/tmp/cudaemu-ledger-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char var[64], out[8192];
    snprintf(var, sizeof(var), "CUDAEMU_REPORT=%s", path);
    char *extra[] = { var, NULL };
    const case_t *c = find_case("contexts");
    int st = run_case(c, extra, out, sizeof(out));
    FILE *f = fopen(path, "r");
    char ledger[1024] = "";
    size_t n = f != NULL ? fread(ledger, 1, sizeof(ledger) - 1, f) : 0;
    ledger[n] = '\0';
    if (f != NULL) {
        fclose(f);
    }
    unlink(path);
    const int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0
        && strstr(ledger, "device=1 ordinal=1 how=explicit first=cudaSetDevice")
        && strstr(ledger, "device=0 ordinal=0 how=implicit first=cudaMalloc")
        && !strstr(ledger, "device=2") && !strstr(ledger, "device=3");
    verdict(c, ok, "ledger", ledger[0] ? ledger : out);
}

/* `visible` prints the bus id of its ordinal 0: node device 2's. */
static void check_visible(void)
{
    char out[8192], all[8192];
    const case_t *v = find_case("visible");
    int st = run_case(v, NULL, out, sizeof(out));
    char *extra[] = { "CUDAEMU_DEVICES=3", NULL };
    int st2 = run_case(find_case("all-ids"), extra, all, sizeof(all));
    char third[64] = "";
    sscanf(all, "%*s %*s %63s", third);
    const int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && WIFEXITED(st2)
                   && WEXITSTATUS(st2) == 0 && third[0] != '\0'
                   && strncmp(out, third, strlen(third)) == 0;
    verdict(v, ok, "ordinal 0 is not node device 2", out);
}

int main(int argc, char **argv)
{
    self = "/proc/self/exe";
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        self = exe;
    }
    if (argc > 1) {
        const case_t *c = find_case(argv[1]);
        if (c == NULL) {
            fprintf(stderr, "unknown case %s\n", argv[1]);
            return 2;
        }
        if (c->peer != NULL) {
            c->peer(argc > 2 ? argv[2] : "");
        } else {
            c->fn();
        }
        fflush(stdout);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; i < NCASES; i++) {
        const case_t *c = &cases[i];
        if (c->fn == NULL) {
            continue;
        }
        if (strcmp(c->name, "contexts") == 0) {
            check_ledger();
            continue;
        }
        if (strcmp(c->name, "visible") == 0) {
            check_visible();
            continue;
        }
        char out[16384];
        int st = run_case(c, NULL, out, sizeof(out));
        if (c->rule == NULL) {
            verdict(c, WIFEXITED(st) && WEXITSTATUS(st) == 0, "did not exit 0", out);
        } else {
            char want[128];
            snprintf(want, sizeof(want), "cudaemu: RULE %s:", c->rule);
            verdict(c, WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT
                    && strstr(out, want) != NULL, "no abort naming the rule", out);
        }
    }
    return failures ? 1 : 0;
}
