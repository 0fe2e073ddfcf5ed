/*
 * Unit test of the schedule engine and the staging pool on the sim device,
 * without MPI: dependencies are honoured under jitter (a step that ran
 * before the copy it depends on had landed would read stale bytes), the
 * first failing step stops the schedule and what is in flight is waited for;
 * a copy the builder lets the CPU do is offered to the device's copy_now
 * first, and done by copy_async when declined.
 */
#include "config.h"
#include "core/core.h"
#include "mem/mem.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

static const collar_device_t *dev = &collar_device_sim;

static collar_status_t run(collar_sched_t *s)
{
    collar_sched_start(s);
    while (collar_sched_progress(s) == COLLAR_INPROGRESS) {
    }
    return s->status;
}

static int add_copy(collar_sched_t *s, void *dst, const void *src, size_t n,
                    int stream, int dep)
{
    collar_step_t t = { .kind = COLLAR_STEP_COPY };
    if (dep >= 0) {
        t.ndeps = 1;
        t.deps[0] = dep;
    }
    t.u.copy.dst = dst;
    t.u.copy.src = src;
    t.u.copy.bytes = n;
    t.u.copy.stream = stream;
    int idx = -1;
    UNIT_CHECK(collar_sched_add(s, &t, &idx) == COLLAR_OK, "add copy");
    return idx;
}

static int add_reduce(collar_sched_t *s, collar_step_kind_t kind, int *inout,
                      const int *in, size_t n, collar_op_t op, int stream,
                      int dep1, int dep2)
{
    collar_step_t t = { .kind = kind, .ndeps = 2, .deps = { dep1, dep2 } };
    t.u.reduce.inout = inout;
    t.u.reduce.in = in;
    t.u.reduce.count = n;
    t.u.reduce.dt = COLLAR_DT_INT32;
    t.u.reduce.op = op;
    t.u.reduce.stream = stream;
    int idx = -1;
    UNIT_CHECK(collar_sched_add(s, &t, &idx) == COLLAR_OK, "add reduce");
    return idx;
}

/*
 * a --copy(stream 0)--> b;  c --copy(stream 1)--> d;
 * d += b on the device (stream 1, after both copies);
 * e += d on the host (after that);  d --copy(stream 0)--> f.
 * Expected: f = d = c + a; e = e0 + c + a.
 */
static void test_chain(collar_comm_t *comm, int rounds)
{
    enum { N = 4099 };
    int *a = malloc(N * sizeof(int)), *b = malloc(N * sizeof(int));
    int *c = malloc(N * sizeof(int)), *d = malloc(N * sizeof(int));
    int *e = malloc(N * sizeof(int)), *f = malloc(N * sizeof(int));
    int bad = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < N; i++) {
            a[i] = i + r;
            c[i] = 3 * i - r;
            b[i] = d[i] = f[i] = -7;
            e[i] = 1000 + i;
        }
        collar_sched_t *s;
        UNIT_CHECK(collar_sched_create(comm, dev, &s) == COLLAR_OK, "create");
        int ab = add_copy(s, b, a, N * sizeof(int), 0, -1);
        int cd = add_copy(s, d, c, N * sizeof(int), 1, -1);
        int red = add_reduce(s, COLLAR_STEP_DEV_REDUCE, d, b, N, COLLAR_OP_SUM, 1, ab, cd);
        add_reduce(s, COLLAR_STEP_HOST_REDUCE, e, d, N, COLLAR_OP_SUM, 0, red, red);
        add_copy(s, f, d, N * sizeof(int), 0, red);
        collar_status_t st = run(s);
        UNIT_CHECK(st == COLLAR_OK, "round %d: status %d", r, st);
        for (int i = 0; i < N; i++) {
            int want = a[i] + c[i];
            if (d[i] != want || f[i] != want || e[i] != 1000 + i + want) {
                if (bad++ == 0) {
                    printf("round %d index %d: d=%d f=%d e=%d want %d / %d\n", r, i,
                           d[i], f[i], e[i], want, 1000 + i + want);
                }
                break;
            }
        }
        collar_sched_destroy(s);
    }
    UNIT_CHECK(bad == 0, "%d of %d rounds read stale data", bad, rounds);
    free(a); free(b); free(c); free(d); free(e); free(f);
}

/* A step that cannot run fails the schedule; steps after it never start,
 * the copy in flight before it completes. */
static void test_failure(collar_comm_t *comm)
{
    char src[64], dst[64], never[64];
    memset(src, 'x', sizeof(src));
    memset(dst, 0, sizeof(dst));
    memset(never, 0, sizeof(never));
    collar_sched_t *s;
    UNIT_CHECK(collar_sched_create(comm, dev, &s) == COLLAR_OK, "create");
    int c1 = add_copy(s, dst, src, sizeof(src), 0, -1);
    collar_step_t t = { .kind = COLLAR_STEP_HOST_REDUCE };
    t.u.reduce.inout = dst;
    t.u.reduce.in = src;
    t.u.reduce.count = 8;
    t.u.reduce.dt = COLLAR_DT_FLOAT;
    t.u.reduce.op = COLLAR_OP_BXOR;    /* not defined for floats */
    int bad = -1;
    UNIT_CHECK(collar_sched_add(s, &t, &bad) == COLLAR_OK, "add");
    add_copy(s, never, src, sizeof(src), 0, bad);
    (void)c1;
    collar_status_t st = run(s);
    UNIT_CHECK(st == COLLAR_ERR_UNSUPPORTED, "status %d", st);
    UNIT_CHECK(s->finished && s->nactive == 0, "finished with nothing in flight");
    UNIT_CHECK(dst[0] == 'x' && dst[63] == 'x', "the earlier copy completed");
    UNIT_CHECK(never[0] == 0, "the step after the failure did not run");
    collar_sched_destroy(s);

    /* Bad dependencies are refused at build time. */
    UNIT_CHECK(collar_sched_create(comm, dev, &s) == COLLAR_OK, "create");
    collar_step_t fwd = { .kind = COLLAR_STEP_ORDER, .ndeps = 1, .deps = { 0 } };
    UNIT_CHECK(collar_sched_add(s, &fwd, NULL) == COLLAR_ERR_INVALID,
               "a dependency on a later step is refused");
    collar_sched_destroy(s);
}

/* copy_now of the sim device with a CPU path: copies of up to 64 bytes
 * done at once, up to 128 declined, larger ones a device error. */
static int now_calls, now_done;

static collar_status_t fake_copy_now(void *dst, const void *src, size_t bytes)
{
    now_calls++;
    if (bytes > 128) {
        return COLLAR_ERR_DEVICE;
    }
    if (bytes > 64) {
        return COLLAR_ERR_UNAVAILABLE;
    }
    memcpy(dst, src, bytes);
    now_done++;
    return COLLAR_OK;
}

static int add_cpu_copy(collar_sched_t *s, void *dst, const void *src, size_t n,
                        int dep)
{
    const int i = add_copy(s, dst, src, n, 0, dep);
    s->steps[i].u.copy.cpu = 1;
    return i;
}

static void test_copy_now(collar_comm_t *comm)
{
    collar_device_t cpu_dev = *dev;
    cpu_dev.copy_now = fake_copy_now;
    char a[256], b[256], c[256], d[256];
    memset(a, 'a', sizeof(a));
    memset(b, 0, sizeof(b));
    memset(c, 0, sizeof(c));
    memset(d, 0, sizeof(d));
    collar_sched_t *s;
    /* a -(cpu, 64)-> b -(cpu, declined)-> c -(not cpu)-> d */
    UNIT_CHECK(collar_sched_create(comm, &cpu_dev, &s) == COLLAR_OK, "create");
    int ab = add_cpu_copy(s, b, a, 64, -1);
    memset(a + 64, 'z', 64);
    int bc = add_cpu_copy(s, c, a + 64, 100, ab);
    add_copy(s, d, c, 100, 1, bc);
    UNIT_CHECK(run(s) == COLLAR_OK, "status");
    UNIT_CHECK(now_calls == 2 && now_done == 1,
               "copy_now asked for the cpu copies only (%d calls, %d done)",
               now_calls, now_done);
    UNIT_CHECK(b[0] == 'a' && b[63] == 'a' && b[64] == 0, "the CPU's copy");
    UNIT_CHECK(c[0] == 'z' && c[99] == 'a' && d[0] == 'z' && d[99] == 'a',
               "the declined copy went on a stream, and the step after it saw it");
    collar_sched_destroy(s);

    /* An error of copy_now fails the schedule; the step after it never runs. */
    memset(d, 0, sizeof(d));
    UNIT_CHECK(collar_sched_create(comm, &cpu_dev, &s) == COLLAR_OK, "create");
    int bad = add_cpu_copy(s, c, a, 200, -1);
    add_copy(s, d, a, 8, 0, bad);
    UNIT_CHECK(run(s) == COLLAR_ERR_DEVICE, "status of a failed copy_now");
    UNIT_CHECK(d[0] == 0, "the step after the failure did not run");
    collar_sched_destroy(s);
}

static void test_pool(void)
{
    void *p1, *p2, *p3;
    UNIT_CHECK(collar_pool_get(dev, 5000, &p1) == COLLAR_OK, "get");
    memset(p1, 1, 5000);
    collar_pool_put(dev, p1, 5000);
    UNIT_CHECK(collar_pool_get(dev, 8192, &p2) == COLLAR_OK, "get again");
    UNIT_CHECK(p2 == p1, "a returned buffer of the same class is reused");
    /* The bound: with a 16 KiB pool, a 1 MiB buffer is not kept. */
    collar_cfg.staging_pool = 16384;
    UNIT_CHECK(collar_pool_get(dev, 1 << 20, &p3) == COLLAR_OK, "get 1 MiB");
    collar_pool_put(dev, p3, 1 << 20);
    collar_pool_put(dev, p2, 8192);
    collar_pool_release_all();
}

int main(void)
{
    collar_config_load();
    collar_cfg.sim_jitter_us = 200;
    collar_cfg.sim_streams = 2;
    UNIT_CHECK(dev->init() == COLLAR_OK, "sim init");
    collar_comm_t comm = { .refs = 1, .private_comm = MPI_COMM_NULL, .size = 1 };
    test_chain(&comm, 300);
    test_failure(&comm);
    test_copy_now(&comm);
    test_pool();
    dev->finalize();
    return unit_finish("test_sched");
}
