/*
 * collar - tests of the stand-in GDRCopy (tests/cudaemu/gdrapi_stub.c) on
 * the CUDA emulation: what it does right (a CPU copy through the mapping,
 * at the offset gdr_get_info gives, reads and writes the device bytes) and
 * each documented rule it enforces (the process must die with SIGABRT and
 * name the rule), each case in a fresh process of this program.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    exit(1); } } while (0)

/* GDRCopy's API (gdrapi.h), as the stub exports it. */
typedef struct gdr *gdr_t;
typedef struct { unsigned long h; } gdr_mh_t;
typedef struct {
    uint64_t va, mapped_size;
    uint32_t page_size;
    uint64_t tm_cycles;
    uint32_t cycles_per_ms;
    unsigned mapped : 1, wc_mapping : 1;
    int      mapping_type;
} gdr_info_t;
gdr_t gdr_open(void);
int gdr_close(gdr_t g);
int gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, uint64_t token,
                   uint32_t va_space, gdr_mh_t *mh);
int gdr_unpin_buffer(gdr_t g, gdr_mh_t mh);
int gdr_get_info_v2(gdr_t g, gdr_mh_t mh, gdr_info_t *info);
int gdr_map(gdr_t g, gdr_mh_t mh, void **va, size_t size);
int gdr_unmap(gdr_t g, gdr_mh_t mh, void *va, size_t size);
int gdr_copy_to_mapping(gdr_mh_t mh, void *map, const void *h, size_t n);
int gdr_copy_from_mapping(gdr_mh_t mh, void *h, const void *map, size_t n);

#define PAGE ((uintptr_t)1 << 16)

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
} mapped_t;

static void map_alloc(mapped_t *m, size_t n)
{
    memset(m, 0, sizeof(*m));
    m->g = gdr_open();
    CHECK(m->g != NULL);
    CHECK(cudaMalloc((void **)&m->d, n) == cudaSuccess);
    m->n = n;
    m->lo = (uintptr_t)m->d & ~(PAGE - 1);
    m->pinned = (((uintptr_t)m->d + n + PAGE - 1) & ~(PAGE - 1)) - m->lo;
    CHECK(gdr_pin_buffer(m->g, m->lo, m->pinned, 0, 0, &m->mh) == 0);
    CHECK(gdr_map(m->g, m->mh, (void **)&m->map, m->pinned) == 0);
    CHECK(gdr_get_info_v2(m->g, m->mh, &m->info) == 0);
    CHECK(m->info.va == m->lo && m->info.mapped_size == m->pinned);
}

/* Where device address p is in the mapping (gdrapi.h: gdr_map's address
 * plus p - info.va). */
static char *at(const mapped_t *m, const void *p)
{
    return m->map + ((uintptr_t)p - m->info.va);
}

/* A cudaMalloc that does not begin on a GPU page. */
static char *unaligned_alloc(size_t n)
{
    for (int i = 0; i < 64; i++) {
        char *d;
        CHECK(cudaMalloc((void **)&d, n) == cudaSuccess);
        if ((uintptr_t)d & (PAGE - 1)) {
            return d;
        }
    }
    fprintf(stderr, "no unaligned allocation in 64 tries\n");
    exit(1);
}

static void case_copy(void)
{
    mapped_t m;
    map_alloc(&m, 100000 + 3);
    unsigned char h[100003], back[100003];
    for (size_t i = 0; i < sizeof(h); i++) {
        h[i] = (unsigned char)(i * 7 + 1);
    }
    CHECK(gdr_copy_to_mapping(m.mh, at(&m, m.d), h, sizeof(h)) == 0);
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
    CHECK(gdr_copy_from_mapping(m.mh, back + 10, at(&m, m.d + 10), 9) == 0);
    CHECK(memcmp(back + 10, h + 10, 9) == 0);
    CHECK(gdr_unmap(m.g, m.mh, m.map, m.pinned) == 0);
    CHECK(gdr_unpin_buffer(m.g, m.mh) == 0);
    CHECK(cudaFree(m.d) == cudaSuccess);
    CHECK(gdr_close(m.g) == 0);
}

static void case_pin_refused(void)
{
    gdr_t g = gdr_open();
    CHECK(g != NULL);
    gdr_mh_t mh;
    char *host = malloc(1 << 20);
    CHECK(host != NULL);
    uintptr_t h = ((uintptr_t)host + PAGE - 1) & ~(PAGE - 1);
    CHECK(gdr_pin_buffer(g, h, PAGE, 0, 0, &mh) == EINVAL);
    char *d;
    CHECK(cudaMalloc((void **)&d, 1000) == cudaSuccess);
    const uintptr_t lo = (uintptr_t)d & ~(PAGE - 1);
    CHECK(gdr_pin_buffer(g, lo, 3 * PAGE, 0, 0, &mh) == EINVAL);   /* beyond */
    void *managed;
    CHECK(cudaMallocManaged(&managed, 1000, cudaMemAttachGlobal) == cudaSuccess);
    CHECK(gdr_pin_buffer(g, (uintptr_t)managed, 1000, 0, 0, &mh) == EINVAL);
    CHECK(gdr_pin_buffer(g, lo, PAGE, 0, 0, &mh) == 0);
    CHECK(gdr_close(g) == 0);
}

static void case_no_driver(void)
{
    CHECK(gdr_open() == NULL);
}

static void case_map_unaligned(void)
{
    gdr_t g = gdr_open();
    char *d = unaligned_alloc(1000);
    gdr_mh_t mh;
    void *map;
    CHECK(gdr_pin_buffer(g, (uintptr_t)d, 1000, 0, 0, &mh) == 0);
    gdr_map(g, mh, &map, 1000);
}

static void case_map_twice(void)
{
    mapped_t m;
    map_alloc(&m, 1000);
    void *again;
    gdr_map(m.g, m.mh, &again, m.pinned);
}

static void case_unmap_first(void)
{
    mapped_t m;
    map_alloc(&m, 1000);
    gdr_unpin_buffer(m.g, m.mh);
}

static void case_after_unpin(void)
{
    mapped_t m;
    map_alloc(&m, 1000);
    CHECK(gdr_unmap(m.g, m.mh, m.map, m.pinned) == 0);
    CHECK(gdr_unpin_buffer(m.g, m.mh) == 0);
    gdr_info_t info;
    gdr_get_info_v2(m.g, m.mh, &info);
}

static void case_copy_range(void)
{
    mapped_t m;
    map_alloc(&m, 1000);
    char h[16];
    gdr_copy_from_mapping(m.mh, h, at(&m, m.d + 1000 - 8), 16);
}

static void case_copy_freed(void)
{
    mapped_t m;
    map_alloc(&m, 1000);
    CHECK(cudaFree(m.d) == cudaSuccess);
    char h[8];
    gdr_copy_from_mapping(m.mh, h, at(&m, m.d), 8);
}

typedef struct {
    const char *name;
    void      (*fn)(void);
    const char *rule;   /* NULL: must exit 0 */
    const char *env;
} case_t;

static const case_t cases[] = {
    { "copy", case_copy, NULL, NULL },
    { "pin-refused", case_pin_refused, NULL, NULL },
    { "no-driver", case_no_driver, NULL, "GDRSTUB_NO_DRIVER=1" },
    { "map-unaligned", case_map_unaligned, "map-unaligned", NULL },
    { "map-twice", case_map_twice, "map-twice", NULL },
    { "unmap-first", case_unmap_first, "unmap-first", NULL },
    { "use-after-unpin", case_after_unpin, "use-after-unpin", NULL },
    { "copy-range", case_copy_range, "copy-range", NULL },
    { "copy-freed", case_copy_freed, "copy-freed", NULL },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Run case c in a fresh process; its output in out. */
static int run_case(const char *self, const case_t *c, char *out, size_t len)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (c->env != NULL) {
            putenv((char *)c->env);
        }
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        alarm(20);   /* a hang fails the case */
        execl(self, self, c->name, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while ((r = read(fds[0], out + n, len - 1 - n)) > 0) {
        n += (size_t)r;
    }
    out[n] = '\0';
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    return st;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        for (size_t i = 0; i < NCASES; i++) {
            if (strcmp(cases[i].name, argv[1]) == 0) {
                cases[i].fn();
                return 0;
            }
        }
        return 2;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    CHECK(n > 0);
    self[n] = '\0';
    int failures = 0;
    for (size_t i = 0; i < NCASES; i++) {
        const case_t *c = &cases[i];
        char out[8192], want[128];
        const int st = run_case(self, c, out, sizeof(out));
        int ok;
        if (c->rule == NULL) {
            ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        } else {
            snprintf(want, sizeof(want), "gdrapi_stub: RULE %s:", c->rule);
            ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT
                 && strstr(out, want) != NULL;
        }
        printf("%s: %s\n", ok ? "PASS" : "FAIL", c->name);
        if (!ok) {
            printf("---- output\n%s----\n", out);
            failures++;
        }
    }
    return failures ? 1 : 0;
}
