/*
 * Unit test of the schedule builders on the sim device, without MPI: the
 * schedules are built, not run, and their steps inspected.
 *   - counts above 2^31 elements (the large-count bindings): every internal
 *     PMPI call takes at most INT_MAX elements, and the steps of staged,
 *     chunked and ring cover the message exactly;
 *   - ring segments of a chunk larger than INT_MAX elements (8G, 16G);
 *   - the ring's tags with a small MPI_TAG_UB and many ranks: every tag in
 *     [0, tag_ub], in the operation's window, unique within the operation,
 *     and the windows of operations in flight together disjoint;
 *   - the ring on host buffers hands no device scratch to PMPI and runs no
 *     device reduction (collar_sched_check_pmpi, the COLLAR_SIM_STRICT
 *     check);
 *   - the sim device's IPC memory, between this process and a child: what
 *     one writes the other reads; once published, the handle opens nothing,
 *     not even another file put at the owner's descriptor number.
 *   - a device call with a different mix of host and device buffers on
 *     each rank: the same algorithm, fallback and messages on every mix,
 *     and no device reduction on a host buffer (test_mixes).
 */
#include "config.h"
#include "algo/algo.h"
#include "algo/ipc_int.h"
#include "mem/mem.h"
#include "unit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static const collar_device_t *dev = &collar_device_sim;

/* A dense call of `count` elements of `size` bytes.  Never run: the
 * addresses need not be memory (steps are compared against them). */
static collar_call_t dense_call(MPI_Count count, int size, collar_dtype_t cdt,
                                MPI_Datatype dtype, char *sbuf, char *rbuf)
{
    collar_call_t c = {
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype,
        .op = MPI_SUM, .in_place = 0, .type_size = size,
        .bytes = (size_t)count * (size_t)size, .lo = 0,
        .span = (size_t)count * (size_t)size, .dense = 1, .extent = size,
        .true_extent = size, .cdt = cdt, .cop = COLLAR_OP_SUM,
        .mem = COLLAR_MEM_DEVICE, .rmem = COLLAR_MEM_DEVICE, .dev = dev,
    };
    return c;
}

typedef struct {
    long long ar_elems, send_elems, recv_elems, reduce_elems;
    long long copy_bytes;
    int       max_count, min_count, nsteps, dev_reduces, host_reduces;
} tally_t;

static void tally(const collar_sched_t *s, tally_t *t)
{
    memset(t, 0, sizeof(*t));
    t->min_count = INT_MAX;
    for (int i = 0; i < s->nsteps; i++) {
        const collar_step_t *st = &s->steps[i];
        int c = -1;
        switch (st->kind) {
        case COLLAR_STEP_IALLREDUCE:
            c = st->u.allreduce.count;
            t->ar_elems += c;
            break;
        case COLLAR_STEP_ISEND:
            c = st->u.p2p.count;
            t->send_elems += c;
            break;
        case COLLAR_STEP_IRECV:
            c = st->u.p2p.count;
            t->recv_elems += c;
            break;
        case COLLAR_STEP_DEV_REDUCE:
        case COLLAR_STEP_HOST_REDUCE:
            t->reduce_elems += (long long)st->u.reduce.count;
            if (st->kind == COLLAR_STEP_DEV_REDUCE) {
                t->dev_reduces++;
            } else {
                t->host_reduces++;
            }
            break;
        case COLLAR_STEP_COPY:
            t->copy_bytes += (long long)st->u.copy.bytes;
            break;
        default:
            break;
        }
        if (c >= 0) {
            if (c > t->max_count) {
                t->max_count = c;
            }
            if (c < t->min_count) {
                t->min_count = c;
            }
        }
    }
    t->nsteps = s->nsteps;
}

static collar_sched_t *build(collar_comm_t *comm, collar_algo_build_fn_t fn,
                             const collar_call_t *call, size_t chunk,
                             collar_status_t *st)
{
    collar_plan_t plan = { .chunk = chunk, .device_pointers_ok = 0 };
    collar_sched_t *s = NULL;
    UNIT_CHECK(collar_sched_create(comm, dev, &s) == COLLAR_OK, "create");
    *st = fn(call, &plan, s);
    return s;
}

/* More than 2^31 one-byte elements (2 GiB + 5): staged, chunked, ring. */
static void test_large_count(void)
{
    const MPI_Count count = ((MPI_Count)1 << 31) + 5;
    char *sb = (char *)((uintptr_t)1 << 44), *rb = (char *)((uintptr_t)1 << 45);
    collar_call_t call = dense_call(count, 1, COLLAR_DT_INT8, MPI_INT8_T, sb, rb);
    collar_comm_t comm = { .private_comm = MPI_COMM_NULL, .refs = 1, .size = 2, .rank = 0,
                           .tag_ub = 32767 };
    collar_status_t st;
    tally_t t;

    collar_sched_t *s = build(&comm, collar_algo_staged_build, &call, 0, &st);
    UNIT_CHECK(st == COLLAR_OK, "staged: build status %d", st);
    tally(s, &t);
    UNIT_CHECK(t.ar_elems == count, "staged: allreduces cover %lld of %lld",
               t.ar_elems, (long long)count);
    UNIT_CHECK(t.max_count <= INT_MAX && t.min_count > 0,
               "staged: counts %d .. %d", t.min_count, t.max_count);
    UNIT_CHECK(t.copy_bytes == 2 * (long long)count, "staged: copies %lld bytes",
               t.copy_bytes);
    /* The pieces: consecutive, each after the previous one. */
    const char *next = NULL;
    int prev = -1, chained = 1;
    for (int i = 0; i < s->nsteps; i++) {
        const collar_step_t *x = &s->steps[i];
        if (x->kind != COLLAR_STEP_IALLREDUCE) {
            continue;
        }
        if (next != NULL && (const char *)x->u.allreduce.rbuf != next) {
            chained = 0;
        }
        if (prev >= 0 && !(x->ndeps >= 1 && x->deps[0] == prev)) {
            chained = 0;
        }
        next = (const char *)x->u.allreduce.rbuf + x->u.allreduce.count;
        prev = i;
    }
    UNIT_CHECK(chained, "staged: pieces consecutive and in order");
    collar_sched_destroy(s);

    s = build(&comm, collar_algo_chunked_build, &call, (size_t)1 << 30, &st);
    UNIT_CHECK(st == COLLAR_OK, "chunked: build status %d", st);
    tally(s, &t);
    UNIT_CHECK(t.ar_elems == count, "chunked: allreduces cover %lld", t.ar_elems);
    UNIT_CHECK(t.max_count == 1 << 30 && t.min_count == 5,
               "chunked: counts %d .. %d", t.min_count, t.max_count);
    UNIT_CHECK(t.copy_bytes == 2 * (long long)count, "chunked: copies %lld bytes",
               t.copy_bytes);
    collar_sched_destroy(s);

    /* Ring on 2 ranks, rank 0: sends block 0 then block 1 (final), receives
     * block 1 (reduced into acc) then block 0.  Blocks: 2^30 + 3, 2^30 + 2. */
    const long long b1 = ((long long)1 << 30) + 2;
    static const size_t chunks[] = { (size_t)1 << 20, (size_t)1 << 30,
                                     (size_t)8 << 30, (size_t)16 << 30 };
    for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
        s = build(&comm, collar_algo_ring_build, &call, chunks[c], &st);
        UNIT_CHECK(st == COLLAR_OK, "ring chunk %zu: build status %d", chunks[c], st);
        tally(s, &t);
        UNIT_CHECK(t.send_elems == count && t.recv_elems == count,
                   "ring chunk %zu: sends %lld, receives %lld of %lld", chunks[c],
                   t.send_elems, t.recv_elems, (long long)count);
        UNIT_CHECK(t.reduce_elems == b1, "ring chunk %zu: reduces %lld, want %lld",
                   chunks[c], t.reduce_elems, b1);
        UNIT_CHECK(t.max_count <= INT_MAX && t.min_count > 0,
                   "ring chunk %zu: counts %d .. %d", chunks[c], t.min_count,
                   t.max_count);
        collar_sched_destroy(s);
    }
}

/* Chunks of more than INT_MAX elements on a small message: one segment a
 * block, every element sent and received once per phase. */
static void test_huge_chunk(void)
{
    int sbuf[1000], rbuf[1000];
    collar_call_t call = dense_call(1000, 4, COLLAR_DT_INT32, MPI_INT,
                                    (char *)sbuf, (char *)rbuf);
    for (int n = 2; n <= 5; n++) {
        collar_comm_t comm = { .private_comm = MPI_COMM_NULL, .refs = 1, .size = n,
                               .rank = 1, .tag_ub = 32767 };
        static const size_t chunks[] = { (size_t)8 << 30, (size_t)16 << 30,
                                         SIZE_MAX };
        for (size_t c = 0; c < 3; c++) {
            collar_status_t st;
            collar_sched_t *s = build(&comm, collar_algo_ring_build, &call,
                                      chunks[c], &st);
            UNIT_CHECK(st == COLLAR_OK, "n %d chunk %zu: status %d", n, chunks[c], st);
            tally_t t;
            tally(s, &t);
            /* 2 (n - 1) messages each way, blocks of 1000 / n elements. */
            UNIT_CHECK(t.min_count >= 1000 / n && t.max_count <= 1000 / n + 1,
                       "n %d chunk %zu: message counts %d .. %d", n, chunks[c],
                       t.min_count, t.max_count);
            const long long lo = 2LL * (n - 1) * (1000 / n), hi = lo + 2LL * (n - 1);
            UNIT_CHECK(t.send_elems >= lo && t.send_elems <= hi
                       && t.recv_elems >= lo && t.recv_elems <= hi,
                       "n %d chunk %zu: sends %lld receives %lld", n, chunks[c],
                       t.send_elems, t.recv_elems);
            collar_sched_destroy(s);
        }
    }
}

/* The tag windows themselves. */
static void test_tag_windows(void)
{
    static const int ubs[] = { 32767, 65535, 4095, 1000, 100, 63, 31, 2,
                               INT_MAX };
    for (size_t u = 0; u < sizeof(ubs) / sizeof(ubs[0]); u++) {
        for (int n = 1; n <= 80; n++) {
            collar_ring_tags_t a, b;
            const int ok = collar_ring_tags(ubs[u], n, 0, &a);
            const long long need = n > 1 ? 2LL * (n - 1) : 1;
            UNIT_CHECK(ok == (need <= (long long)ubs[u] + 1),
                       "tag_ub %d n %d: fits %d", ubs[u], n, ok);
            if (!ok) {
                continue;
            }
            UNIT_CHECK(a.nwin >= 1 && a.nwin <= COLLAR_RING_TAG_OPS
                       && a.nseg_max >= 1 && (long long)a.nseg_max * need <= a.span
                       && (long long)a.nwin * a.span <= (long long)ubs[u] + 1,
                       "tag_ub %d n %d: nwin %d span %d nseg %d", ubs[u], n,
                       a.nwin, a.span, a.nseg_max);
            for (uint64_t seq = 0; seq < 3000; seq += 7) {
                collar_ring_tags(ubs[u], n, seq, &a);
                collar_ring_tags(ubs[u], n, seq + 1, &b);
                UNIT_CHECK(a.base >= 0
                           && (long long)a.base + a.span - 1 <= ubs[u],
                           "tag_ub %d n %d seq %llu: window [%d, %d)", ubs[u], n,
                           (unsigned long long)seq, a.base, a.base + a.span);
                if (a.nwin > 1) {
                    UNIT_CHECK(a.base + a.span <= b.base || b.base + b.span <= a.base,
                               "tag_ub %d n %d seq %llu: windows overlap", ubs[u],
                               n, (unsigned long long)seq);
                }
            }
        }
    }
}

/* The tags of built ring schedules: 17 and more ranks, MPI_TAG_UB at the
 * standard's minimum (32767) and below, many segments. */
static void test_ring_tags(void)
{
    static const struct { int ub, n; size_t chunk; int count; } cases[] = {
        { 32767, 17, 4, 100000 }, { 32767, 17, 1 << 20, 1000 },
        { 32767, 33, 4, 200000 }, { 32767, 64, 64, 50000 },
        { 4095, 20, 4, 100000 }, { 255, 17, 4, 10000 }, { 63, 17, 4, 1000 },
        { 65535, 2, 4, 400000 }, { INT_MAX, 17, 4, 100000 },
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const int n = cases[c].n, ub = cases[c].ub;
        int *sbuf = calloc((size_t)cases[c].count, sizeof(int));
        int *rbuf = calloc((size_t)cases[c].count, sizeof(int));
        collar_call_t call = dense_call(cases[c].count, 4, COLLAR_DT_INT32, MPI_INT,
                                        (char *)sbuf, (char *)rbuf);
        unsigned char *seen = calloc((size_t)ub + 1, 2);  /* send, recv */
        for (int rank = 0; rank < n; rank += n - 1) {
            collar_comm_t comm = { .private_comm = MPI_COMM_NULL, .refs = 1, .size = n,
                                   .rank = rank, .tag_ub = ub };
            for (uint64_t seq = 0; seq < 2; seq++) {
                comm.next_seq = seq == 0 ? 0 : 12345;
                collar_status_t st;
                collar_sched_t *s = build(&comm, collar_algo_ring_build, &call,
                                          cases[c].chunk, &st);
                UNIT_CHECK(st == COLLAR_OK, "ub %d n %d: status %d", ub, n, st);
                collar_ring_tags_t w;
                collar_ring_tags(ub, n, s->seq, &w);
                int out = 0, dup = 0, nmsg = 0;
                memset(seen, 0, ((size_t)ub + 1) * 2);
                for (int i = 0; i < s->nsteps; i++) {
                    const collar_step_t *x = &s->steps[i];
                    if (x->kind != COLLAR_STEP_ISEND && x->kind != COLLAR_STEP_IRECV) {
                        continue;
                    }
                    nmsg++;
                    const int tag = x->u.p2p.tag;
                    if (tag < w.base || tag >= w.base + w.span || tag > ub || tag < 0) {
                        out++;
                        continue;
                    }
                    unsigned char *m = &seen[(size_t)tag * 2
                                             + (x->kind == COLLAR_STEP_IRECV)];
                    dup += *m;
                    *m = 1;
                }
                UNIT_CHECK(nmsg > 0 && out == 0 && dup == 0,
                           "ub %d n %d rank %d seq %llu: %d of %d tags outside "
                           "[%d, %d) or above the bound, %d repeated", ub, n, rank,
                           (unsigned long long)s->seq, out, nmsg, w.base,
                           w.base + w.span, dup);
                collar_sched_destroy(s);
            }
        }
        free(seen);
        free(sbuf);
        free(rbuf);
    }
}

/* The ring on host buffers (a host call under COLLAR_ALGORITHM=ring): no
 * device scratch goes to PMPI, no device reduction; on device buffers over
 * a library that takes device pointers, the scratch may go to PMPI. */
static void test_ring_host(void)
{
    enum { N = 4099 };
    int *sbuf = calloc(N, sizeof(int)), *rbuf = calloc(N, sizeof(int));
    for (int n = 2; n <= 4; n++) {
        collar_comm_t comm = { .private_comm = MPI_COMM_NULL, .refs = 1, .size = n, .rank = 1,
                               .tag_ub = 32767 };
        for (int host = 0; host < 2; host++) {
            for (int aware = 0; aware < 2; aware++) {
                collar_call_t call = dense_call(N, 4, COLLAR_DT_INT32, MPI_INT,
                                                (char *)sbuf, (char *)rbuf);
                if (host) {
                    call.mem = call.rmem = COLLAR_MEM_HOST;
                }
                collar_plan_t plan = { .alg = COLLAR_ALG_RING, .chunk = 1024 };
                collar_algo_eligible(&call, aware, &plan);
                UNIT_CHECK(plan.alg == COLLAR_ALG_RING, "ring eligible");
                collar_sched_t *s = NULL;
                UNIT_CHECK(collar_sched_create(&comm, dev, &s) == COLLAR_OK, "create");
                collar_status_t st = collar_algo_ring_build(&call, &plan, s);
                UNIT_CHECK(st == COLLAR_OK, "build %d", st);
                tally_t t;
                tally(s, &t);
                UNIT_CHECK(collar_sched_check_pmpi(s) == COLLAR_OK,
                           "n %d host %d aware %d: device scratch handed to PMPI",
                           n, host, aware);
                UNIT_CHECK(host ? t.dev_reduces == 0 && t.host_reduces > 0
                                : t.dev_reduces > 0 && t.host_reduces == 0,
                           "n %d host %d aware %d: %d device, %d host reductions",
                           n, host, aware, t.dev_reduces, t.host_reduces);
                collar_sched_destroy(s);
            }
        }
    }
    free(sbuf);
    free(rbuf);
}

/* The canary itself: device scratch handed to PMPI is caught. */
static void test_canary(void)
{
    collar_comm_t comm = { .private_comm = MPI_COMM_NULL, .refs = 1, .size = 2, .rank = 0,
                           .tag_ub = 32767 };
    collar_sched_t *s = NULL;
    UNIT_CHECK(collar_sched_create(&comm, dev, &s) == COLLAR_OK, "create");
    void *scratch = NULL, *host = NULL;
    UNIT_CHECK(collar_sched_scratch(s, 4096, &scratch) == COLLAR_OK, "scratch");
    UNIT_CHECK(collar_sched_staging(s, 4096, &host) == COLLAR_OK, "staging");
    collar_step_t t = { .kind = COLLAR_STEP_IRECV };
    t.u.p2p.buf = host;
    t.u.p2p.count = 1024;
    t.u.p2p.dt = MPI_INT;
    UNIT_CHECK(collar_sched_add(s, &t, NULL) == COLLAR_OK, "add");
    UNIT_CHECK(collar_sched_check_pmpi(s) == COLLAR_OK, "host staging is fine");
    t.u.p2p.buf = (char *)scratch + 4000;  /* overlaps the end */
    UNIT_CHECK(collar_sched_add(s, &t, NULL) == COLLAR_OK, "add");
    UNIT_CHECK(collar_sched_check_pmpi(s) == COLLAR_ERR_INVALID, "scratch caught");
    s->pmpi_device_ok = 1;
    UNIT_CHECK(collar_sched_check_pmpi(s) == COLLAR_OK,
               "allowed when the MPI library takes device pointers");
    collar_sched_destroy(s);
}

/* With an argument, only the tests whose names contain it. */
static int want(int argc, char **argv, const char *name)
{
    return argc < 2 || strstr(name, argv[1]) != NULL;
}

/* ipc: what the call shows (a device call, a reduction collar has) and a
 * communicator that spans nodes fall back to chunked and say why; the
 * block arithmetic ipc shares with the ring puts remainders on the low
 * blocks. */
static void test_ipc_eligible(void)
{
    int sbuf[16], rbuf[16];
    for (int host = 0; host < 3; host++) {
        collar_call_t call = dense_call(16, 4, COLLAR_DT_INT32, MPI_INT,
                                        (char *)sbuf, (char *)rbuf);
        if (host == 1) {
            call.mem = call.rmem = COLLAR_MEM_HOST;
        } else if (host == 2) {
            call.rmem = COLLAR_MEM_HOST;   /* a device call all the same */
        }
        collar_plan_t plan = { .alg = COLLAR_ALG_IPC };
        collar_algo_eligible(&call, 0, &plan);
        UNIT_CHECK(host == 1 ? plan.alg == COLLAR_ALG_CHUNKED && plan.fallback != NULL
                               && strstr(plan.fallback, "device buffers only") != NULL
                             : plan.alg == COLLAR_ALG_IPC && plan.fallback == NULL,
                   "memory case %d: %s (%s)", host, collar_alg_name(plan.alg),
                   plan.fallback ? plan.fallback : "no fallback");
    }
    collar_call_t user = dense_call(16, 4, COLLAR_DT_INT32, MPI_INT,
                                    (char *)sbuf, (char *)rbuf);
    user.cop = COLLAR_OP_NONE;
    collar_plan_t plan = { .alg = COLLAR_ALG_IPC };
    collar_algo_eligible(&user, 0, &plan);
    UNIT_CHECK(plan.alg == COLLAR_ALG_CHUNKED && plan.fallback != NULL
               && strstr(plan.fallback, "reduces by itself") != NULL,
               "a user op: %s", collar_alg_name(plan.alg));

    collar_call_t call = dense_call(16, 4, COLLAR_DT_INT32, MPI_INT,
                                    (char *)sbuf, (char *)rbuf);
    collar_comm_t comm = { .private_comm = MPI_COMM_NULL, .node_known = 1,
                           .refs = 1, .size = 4, .rank = 1, .node_size = 2,
                           .one_node = 0 };
    plan = (collar_plan_t){ .alg = COLLAR_ALG_IPC };
    collar_algo_ipc_eligible(&call, &comm, &plan);
    UNIT_CHECK(plan.alg == COLLAR_ALG_CHUNKED && plan.fallback != NULL
               && strstr(plan.fallback, "more than one node") != NULL,
               "two nodes: %s", collar_alg_name(plan.alg));
    UNIT_CHECK(comm.ipc == NULL, "no IPC state for a communicator across nodes");
    plan = (collar_plan_t){ .alg = COLLAR_ALG_IPC };
    UNIT_CHECK(collar_algo_ipc_oneshot(&plan) == COLLAR_IPC_ONESHOT_DEFAULT,
               "default one-shot threshold");
    plan.oneshot = 1000;
    UNIT_CHECK(collar_algo_ipc_oneshot(&plan) == 1000, "oneshot= in force");

    const MPI_Count counts[] = { 0, 1, 3, 4, 7, 1031 };
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        for (int n = 1; n <= 5; n++) {
            MPI_Count next = 0;
            for (int b = 0; b < n; b++) {
                MPI_Count first, len;
                collar_block_range(counts[c], n, b, &first, &len);
                const MPI_Count want = counts[c] / n + (b < counts[c] % n ? 1 : 0);
                UNIT_CHECK(first == next && len == want, "count %lld n %d block "
                           "%d: [%lld, +%lld)", (long long)counts[c], n, b,
                           (long long)first, (long long)len);
                next = first + len;
            }
            UNIT_CHECK(next == counts[c], "blocks cover count %lld", (long long)counts[c]);
        }
    }
}

/* Node rank r's view of a region of n ranks whose areas are peer[0 .. n-1]
 * (never run: only the schedules' pointers matter). */
static ipc_region_t fake_region(int n, int r, char **peer)
{
    ipc_region_t g = { .refs = 1, .dev = dev, .n = n, .rank = r,
                       .cap = IPC_MIN_CAP, .own = peer[r], .peer = peer,
                       .done = 1, .code = IPC_OK };
    return g;
}

/*
 * A device call (device when either buffer is) as rank r passes it in mix
 * `mix`: 0 send host / receive device, 1 send device / receive host, 2 both
 * device, 3 in place on a device buffer.  Ranks may pass different mixes
 * in one call.
 */
enum { MIX_SH_RD, MIX_SD_RH, MIX_BOTH, MIX_IN_PLACE, NMIX };
static const char *const mix_names[NMIX] = {
    "send host/recv device", "send device/recv host", "both device", "in place"
};

static collar_call_t mix_call(int mix, collar_call_t c)
{
    c.mem = COLLAR_MEM_DEVICE;
    c.rmem = mix == MIX_SD_RH ? COLLAR_MEM_HOST : COLLAR_MEM_DEVICE;
    if (mix == MIX_IN_PLACE) {
        c.sbuf = MPI_IN_PLACE;
        c.in_place = 1;
    }
    return c;
}

/* What the other ranks see of a schedule: its messages and collectives, in
 * order (kind, count, peer, tag, communicator), as text. */
static void comm_shape(const collar_sched_t *s, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < s->nsteps && at + 64 < len; i++) {
        const collar_step_t *t = &s->steps[i];
        int n = 0;
        if (t->kind == COLLAR_STEP_ISEND || t->kind == COLLAR_STEP_IRECV) {
            n = snprintf(out + at, len - at, "%c%d>%d#%d ",
                         t->kind == COLLAR_STEP_ISEND ? 's' : 'r', t->u.p2p.count,
                         t->u.p2p.peer, t->u.p2p.tag);
        } else if (t->kind == COLLAR_STEP_IALLREDUCE) {
            n = snprintf(out + at, len - at, "a%d@%d ", t->u.allreduce.count,
                         (int)t->u.allreduce.on);
        } else if (t->kind == COLLAR_STEP_AGREE) {
            n = snprintf(out + at, len - at, "agree ");
        }
        at += (size_t)n;
    }
}

/* [p, p + bytes) overlaps [buf, buf + len)? */
static int overlaps(const void *p, size_t bytes, const void *buf, size_t len)
{
    return (const char *)p < (const char *)buf + len
           && (const char *)buf < (const char *)p + bytes;
}

/* Checks one schedule of mix `mix` against the host buffers of its rank:
 * no device reduction reads or writes a host buffer (a kernel cannot touch
 * pageable memory), and a host receive buffer is written whole by copies. */
static void mix_check_steps(const char *what, int mix, const collar_call_t *call,
                            const collar_sched_t *s)
{
    const size_t esize = (size_t)call->type_size, bytes = call->bytes;
    const void *host = mix == MIX_SH_RD ? call->sbuf
                     : mix == MIX_SD_RH ? (const void *)call->rbuf : NULL;
    size_t copied = 0;
    for (int i = 0; i < s->nsteps; i++) {
        const collar_step_t *t = &s->steps[i];
        if (t->kind == COLLAR_STEP_DEV_REDUCE) {
            const size_t b = t->u.reduce.count * esize;
            UNIT_CHECK(host == NULL || (!overlaps(t->u.reduce.inout, b, host, bytes)
                                        && !overlaps(t->u.reduce.in, b, host, bytes)),
                       "%s, %s: a device reduction on the host buffer", what,
                       mix_names[mix]);
        } else if (t->kind == COLLAR_STEP_DEV_REDUCE_N) {
            const size_t b = t->u.reduce_n.count * esize;
            int bad = host != NULL && overlaps(t->u.reduce_n.dst, b, host, bytes);
            for (int k = 0; k < t->u.reduce_n.n; k++) {
                bad |= host != NULL && overlaps(t->u.reduce_n.src[k], b, host, bytes);
            }
            UNIT_CHECK(!bad, "%s, %s: a device reduction of n inputs on the host "
                       "buffer", what, mix_names[mix]);
        } else if (t->kind == COLLAR_STEP_COPY
                   && overlaps(t->u.copy.dst, t->u.copy.bytes, call->rbuf, bytes)) {
            copied += t->u.copy.bytes;
        }
    }
    UNIT_CHECK(mix != MIX_SD_RH || copied == bytes, "%s, %s: %zu of %zu bytes "
               "copied into the host receive buffer", what, mix_names[mix], copied,
               bytes);
}

/*
 * Different mixes of host and device buffers on different ranks: every
 * algorithm (forced, or a rule's) stays the same on every mix, with the
 * same fallback reason, and its schedule exchanges the same messages and
 * collectives, so that the ranks of one call always match.  Device
 * reductions never touch a host buffer: ring and ipc one-shot reduce into
 * device memory and copy a host receive buffer's result out.
 */
static void test_mixes(void)
{
    enum { COUNT = 4099, ESIZE = 4 };
    static char peers[4][2 * IPC_MIN_CAP];
    char *peer[4] = { peers[0], peers[1], peers[2], peers[3] };
    int *sbuf = calloc(COUNT, ESIZE), *rbuf = calloc(COUNT, ESIZE);
    const collar_alg_t algs[] = { COLLAR_ALG_NATIVE, COLLAR_ALG_STAGED,
                                  COLLAR_ALG_CHUNKED, COLLAR_ALG_RING,
                                  COLLAR_ALG_IPC, COLLAR_ALG_HIER };
    /* Eligibility: a reducible dense call, a user op, a type with gaps. */
    for (int variant = 0; variant < 3; variant++) {
        for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
            for (int aware = 0; aware < 2; aware++) {
                collar_plan_t want_plan = { 0 };
                for (int mix = 0; mix < NMIX; mix++) {
                    collar_call_t call = mix_call(mix, dense_call(
                        COUNT, ESIZE, COLLAR_DT_INT32, MPI_INT, (char *)sbuf,
                        (char *)rbuf));
                    if (variant == 1) {
                        call.cop = COLLAR_OP_NONE;
                    } else if (variant == 2) {
                        call.dense = 0;
                        call.span = call.bytes + ESIZE;
                    }
                    collar_plan_t plan = { .alg = algs[a], .chunk = 1024 };
                    collar_algo_eligible(&call, aware, &plan);
                    /* then the communicator's part, on one node with a
                     * region large enough (no registration) */
                    ipc_region_t region = fake_region(2, 0, peer);
                    ipc_state_t st = { .region = &region };
                    collar_comm_t comm = {
                        .private_comm = MPI_COMM_NULL, .refs = 1, .size = 2,
                        .node_size = 2, .one_node = 1, .node_known = 1,
                        .node_peers_everywhere = 1, .ipc = &st, .tag_ub = 32767,
                    };
                    collar_algo_ipc_eligible(&call, &comm, &plan);
                    collar_algo_hier_eligible(&call, &comm, 1, NULL, &plan);
                    if (mix == 0) {
                        want_plan = plan;
                        continue;
                    }
                    UNIT_CHECK(plan.alg == want_plan.alg && plan.fallback == want_plan.fallback
                               && plan.device_pointers_ok == want_plan.device_pointers_ok,
                               "%s forced, variant %d, aware %d: %s runs %s (%s), "
                               "%s runs %s (%s)", collar_alg_name(algs[a]), variant,
                               aware, mix_names[0], collar_alg_name(want_plan.alg),
                               want_plan.fallback ? want_plan.fallback : "no fallback",
                               mix_names[mix], collar_alg_name(plan.alg),
                               plan.fallback ? plan.fallback : "no fallback");
                    UNIT_CHECK(variant != 0 || plan.fallback == NULL
                               || algs[a] == COLLAR_ALG_NATIVE
                               || algs[a] == COLLAR_ALG_HIER,
                               "%s forced on a device call falls back: %s",
                               collar_alg_name(algs[a]), plan.fallback);
                }
            }
        }
    }

    /* The schedules: ring on 2 to 4 ranks, ipc one- and two-shot and hier
     * on 1 to 4 ranks a node, staged and chunked. */
    char *want_shape = malloc(1 << 20), *got = malloc(1 << 20);
    for (int n = 1; n <= 4; n++) {
        for (int kind = 0; kind < 6; kind++) {
            for (int aware = 0; aware < 2; aware++) {
                for (int mix = 0; mix < NMIX; mix++) {
                    const int r = n / 2;
                    ipc_region_t region = fake_region(n, r, peer);
                    ipc_state_t st = { .region = &region };
                    collar_comm_t comm = {
                        .private_comm = MPI_COMM_NULL, .refs = 1, .size = 2 * n,
                        .rank = r, .node_rank = r, .node_size = n, .node_min = n,
                        .one_node = kind != 5, .node_known = 1,
                        .node_peers_everywhere = 1,
                        .node_sched = MPI_COMM_WORLD, .hier_made = 1,
                        .cross_comm = MPI_COMM_WORLD, .ipc = &st, .tag_ub = 32767,
                    };
                    if (kind == 0) {
                        comm.size = n + 1;   /* the ring: 2 to 5 ranks */
                    }
                    const collar_call_t call = mix_call(mix, dense_call(
                        COUNT, ESIZE, COLLAR_DT_INT32, MPI_INT, (char *)sbuf,
                        (char *)rbuf));
                    static const collar_alg_t kinds[6] = {
                        COLLAR_ALG_RING, COLLAR_ALG_IPC, COLLAR_ALG_IPC,
                        COLLAR_ALG_STAGED, COLLAR_ALG_CHUNKED, COLLAR_ALG_HIER
                    };
                    collar_plan_t plan = { .alg = kinds[kind], .chunk = 1024,
                                           .oneshot = kind == 2 ? 1 : 0,
                                           .device_pointers_ok = aware,
                                           .mpi_cuda_aware = aware };
                    collar_sched_t *s = NULL;
                    UNIT_CHECK(collar_sched_create(&comm, dev, &s) == COLLAR_OK, "create");
                    const collar_status_t bst = collar_algo_builder(plan.alg)(&call, &plan, s);
                    char what[96];
                    snprintf(what, sizeof(what), "%s%s, %d ranks, aware %d",
                             collar_alg_name(plan.alg),
                             kind == 1 ? " one-shot" : kind == 2 ? " two-shot" : "",
                             comm.size, aware);
                    UNIT_CHECK(bst == COLLAR_OK, "%s, %s: build %d", what,
                               mix_names[mix], bst);
                    UNIT_CHECK(collar_sched_check_pmpi(s) == COLLAR_OK,
                               "%s, %s: device scratch handed to PMPI", what,
                               mix_names[mix]);
                    mix_check_steps(what, mix, &call, s);
                    comm_shape(s, mix == 0 ? want_shape : got, 1 << 20);
                    UNIT_CHECK(mix == 0 || strcmp(want_shape, got) == 0,
                               "%s: %s and %s exchange different messages", what,
                               mix_names[0], mix_names[mix]);
                    collar_sched_destroy(s);
                }
            }
        }
    }
    free(want_shape);
    free(got);
    free(sbuf);
    free(rbuf);
}

/*
 * hier's schedule for every node shape of up to 4 ranks a node: node rank r
 * of a node of n ranks, m ranks on the smallest node.  The owners (r < m)
 * reduce their slice and allreduce it on the cross communicator in pieces
 * of the chunk, whole elements, the pieces adding up to the slice; the
 * others issue no cross allreduce; the three signals run on the node; the
 * gathers copy the whole message; nothing handed to PMPI is device memory.
 */
static void test_hier_build(void)
{
    enum { COUNT = 1031, ESIZE = 4 };
    static char peers[4][2 * IPC_MIN_CAP];
    char *peer[4] = { peers[0], peers[1], peers[2], peers[3] };
    int *sbuf = calloc(COUNT, ESIZE), *rbuf = calloc(COUNT, ESIZE);
    const size_t chunks[] = { 0, 64, 1 };
    for (int n = 1; n <= 4; n++) {
        for (int m = 1; m <= n; m++) {
            for (int r = 0; r < n; r++) {
                for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
                    ipc_region_t region = fake_region(n, r, peer), *g = &region;
                    ipc_state_t st = { .region = g };
                    collar_comm_t comm = {
                        .private_comm = MPI_COMM_NULL, .refs = 1, .size = 2 * n,
                        .rank = r, .node_rank = r, .node_size = n, .node_min = m,
                        .node_sched = MPI_COMM_WORLD, .cross_comm = MPI_COMM_WORLD,
                        .ipc = &st, .tag_ub = 32767,
                    };
                    collar_call_t call = dense_call(COUNT, ESIZE, COLLAR_DT_INT32,
                                                    MPI_INT, (char *)sbuf,
                                                    (char *)rbuf);
                    collar_status_t bst;
                    collar_sched_t *s = build(&comm, collar_algo_hier_build, &call,
                                              chunks[c], &bst);
                    UNIT_CHECK(bst == COLLAR_OK, "n %d m %d r %d: build %d", n, m,
                               r, bst);
                    UNIT_CHECK(g->refs == 2, "the schedule holds the region");
                    MPI_Count first, cnt;
                    collar_block_range(COUNT, m, r, &first, &cnt);
                    const size_t chunk = chunks[c] ? chunks[c] : COLLAR_DEFAULT_CHUNK;
                    const long long per = chunk / ESIZE ? (long long)(chunk / ESIZE) : 1;
                    long long cross = 0, cross_elems = 0, gathered = 0;
                    int node = 0, priv = 0, agree = 0, c2 = -1;
                    for (int i = 0; i < s->nsteps; i++) {
                        const collar_step_t *t = &s->steps[i];
                        if (t->kind == COLLAR_STEP_IALLREDUCE) {
                            if (t->u.allreduce.on == COLLAR_STEP_ON_CROSS) {
                                cross++;
                                cross_elems += t->u.allreduce.count;
                                UNIT_CHECK(t->u.allreduce.count <= per
                                           && t->u.allreduce.sbuf == MPI_IN_PLACE,
                                           "a piece of at most %lld elements, in "
                                           "place", per);
                            } else if (t->u.allreduce.on == COLLAR_STEP_ON_NODE) {
                                if (++node == 3) {
                                    c2 = i;
                                }
                            } else {
                                priv++;
                            }
                        } else if (t->kind == COLLAR_STEP_AGREE) {
                            agree++;
                        } else if (t->kind == COLLAR_STEP_COPY
                                   && (char *)t->u.copy.dst >= (char *)rbuf
                                   && (char *)t->u.copy.dst < (char *)(rbuf + COUNT)) {
                            gathered += (long long)t->u.copy.bytes;
                            /* a slice is read once every owner says it
                             * is final */
                            UNIT_CHECK(c2 >= 0 && t->ndeps >= 1 && t->deps[0] == c2,
                                       "n %d m %d r %d: a gather before the last "
                                       "signal", n, m, r);
                        }
                    }
                    const long long want_cross = r < m ? (cnt + per - 1) / per : 0;
                    UNIT_CHECK(cross == want_cross && cross_elems == (r < m ? cnt : 0),
                               "n %d m %d r %d chunk %zu: %lld cross allreduces of "
                               "%lld elements, expected %lld of %lld", n, m, r,
                               chunk, cross, cross_elems, want_cross,
                               (long long)(r < m ? cnt : 0));
                    UNIT_CHECK(node == 3 && priv == 0 && agree == 1,
                               "n %d m %d r %d: %d node signals, %d private, %d "
                               "agreements", n, m, r, node, priv, agree);
                    UNIT_CHECK(gathered == (long long)call.bytes,
                               "n %d m %d r %d: %lld bytes gathered", n, m, r,
                               gathered);
                    UNIT_CHECK(collar_sched_check_pmpi(s) == COLLAR_OK,
                               "n %d m %d r %d: device memory handed to PMPI", n,
                               m, r);
                    collar_sched_destroy(s);
                    UNIT_CHECK(g->refs == 1, "the schedule gave the region back");
                }
            }
        }
    }
    /* Over an MPI library that takes device pointers: one allreduce of the
     * slice in IPC memory, no staging copies. */
    {
        ipc_region_t g = fake_region(2, 1, peer);
        ipc_state_t st = { .region = &g };
        collar_comm_t comm = {
            .private_comm = MPI_COMM_NULL, .refs = 1, .size = 4, .rank = 1,
            .node_rank = 1, .node_size = 2, .node_min = 2,
            .node_sched = MPI_COMM_WORLD, .cross_comm = MPI_COMM_WORLD,
            .ipc = &st, .tag_ub = 32767,
        };
        collar_call_t call = dense_call(COUNT, ESIZE, COLLAR_DT_INT32, MPI_INT,
                                        (char *)sbuf, (char *)rbuf);
        collar_plan_t plan = { .chunk = 64, .mpi_cuda_aware = 1,
                               .device_pointers_ok = 1 };
        collar_sched_t *s = NULL;
        UNIT_CHECK(collar_sched_create(&comm, dev, &s) == COLLAR_OK, "create");
        UNIT_CHECK(collar_algo_hier_build(&call, &plan, s) == COLLAR_OK, "build");
        MPI_Count first, cnt;
        collar_block_range(COUNT, 2, 1, &first, &cnt);
        int cross = 0, copies = 0;
        for (int i = 0; i < s->nsteps; i++) {
            const collar_step_t *t = &s->steps[i];
            if (t->kind == COLLAR_STEP_IALLREDUCE
                && t->u.allreduce.on == COLLAR_STEP_ON_CROSS) {
                cross++;
                UNIT_CHECK(t->u.allreduce.rbuf == peer[1] + IPC_MIN_CAP
                                                   + first * ESIZE
                           && t->u.allreduce.count == cnt,
                           "the device slice itself, whole");
            } else if (t->kind == COLLAR_STEP_COPY) {
                copies++;
            }
        }
        /* copy in and two gathers (the slice's reduction of both inputs
         * is one step, no first copy) */
        UNIT_CHECK(cross == 1 && copies == 3 && s->pmpi_device_ok,
                   "direct: %d cross allreduces, %d copies", cross, copies);
        collar_sched_destroy(s);
    }
    /* Without the communicators of hier the builder refuses. */
    collar_comm_t none = { .private_comm = MPI_COMM_NULL, .refs = 1, .size = 4,
                           .node_sched = MPI_COMM_NULL, .cross_comm = MPI_COMM_NULL };
    collar_call_t call = dense_call(COUNT, ESIZE, COLLAR_DT_INT32, MPI_INT,
                                    (char *)sbuf, (char *)rbuf);
    collar_status_t bst;
    collar_sched_t *s = build(&none, collar_algo_hier_build, &call, 0, &bst);
    UNIT_CHECK(bst == COLLAR_ERR_INVALID, "no hier communicators: %d", bst);
    collar_sched_destroy(s);
    /* Eligibility without the communicators: chunked, and why. */
    collar_plan_t plan = { .alg = COLLAR_ALG_HIER };
    collar_algo_hier_eligible(&call, &none, 1, NULL, &plan);
    UNIT_CHECK(plan.alg == COLLAR_ALG_CHUNKED && plan.fallback != NULL
               && strstr(plan.fallback, "grouped by node") != NULL,
               "hier without node communicators: %s", collar_alg_name(plan.alg));
    free(sbuf);
    free(rbuf);
}

/*
 * ipc's reductions of n inputs (dev->reduce_n_async): the schedule reduces
 * every node rank's input exactly once, in node rank order, in groups of
 * at most COLLAR_REDUCE_N_MAX where a later group goes on from dst; one-
 * and two-shot, 1 to 11 ranks.  Then the sim device's reduce_n itself,
 * run: the bits of a copy and pairwise reductions (float sums, whose
 * order shows; int MIN; double-int MAXLOC), counts across its block,
 * unaligned buffers, dst the same as src[0].
 */
static void test_ipc_reduce_n(void)
{
    enum { COUNT = 1031, ESIZE = 4 };
    static char peers[11][2 * IPC_MIN_CAP];
    char *peer[11];
    for (int i = 0; i < 11; i++) {
        peer[i] = peers[i];
    }
    int *sbuf = calloc(COUNT, ESIZE), *rbuf = calloc(COUNT, ESIZE);
    for (int n = 1; n <= 11; n++) {
        for (int twoshot = 0; twoshot < 2; twoshot++) {
            const int r = n / 2;
            ipc_region_t region = fake_region(n, r, peer), *g = &region;
            ipc_state_t st = { .region = g };
            collar_comm_t comm = { .private_comm = MPI_COMM_NULL, .refs = 1, .size = n,
                                   .rank = r, .node_rank = r, .node_size = n,
                                   .one_node = 1, .ipc = &st, .tag_ub = 32767 };
            collar_call_t call = dense_call(COUNT, ESIZE, COLLAR_DT_INT32, MPI_INT,
                                            (char *)sbuf, (char *)rbuf);
            collar_plan_t plan = { .alg = COLLAR_ALG_IPC, .oneshot = twoshot ? 1 : 0 };
            collar_sched_t *s = NULL;
            UNIT_CHECK(collar_sched_create(&comm, dev, &s) == COLLAR_OK, "create");
            UNIT_CHECK(collar_algo_ipc_build(&call, &plan, s) == COLLAR_OK, "build");
            MPI_Count first = 0, cnt = COUNT;
            if (twoshot && n > 1) {
                collar_block_range(COUNT, n, r, &first, &cnt);
            }
            const size_t off = (size_t)first * ESIZE;
            int next = 0, groups = 0, pairwise = 0, prev = -1;
            void *dst = NULL;
            for (int i = 0; i < s->nsteps; i++) {
                const collar_step_t *t = &s->steps[i];
                if (t->kind == COLLAR_STEP_DEV_REDUCE) {
                    pairwise++;
                }
                if (t->kind != COLLAR_STEP_DEV_REDUCE_N) {
                    continue;
                }
                int k = 0;
                if (groups++ > 0) {
                    UNIT_CHECK(t->u.reduce_n.src[0] == dst && t->u.reduce_n.dst == dst
                               && t->ndeps == 1 && t->deps[0] == prev,
                               "n %d: a later group goes on from dst, after the "
                               "one before", n);
                    k = 1;
                }
                dst = t->u.reduce_n.dst;
                prev = i;
                UNIT_CHECK(t->u.reduce_n.n >= 2 && t->u.reduce_n.n <= COLLAR_REDUCE_N_MAX
                           && t->u.reduce_n.count == (size_t)cnt,
                           "n %d: %d inputs of %zu elements", n, t->u.reduce_n.n,
                           t->u.reduce_n.count);
                for (; k < t->u.reduce_n.n; k++, next++) {
                    UNIT_CHECK(next < n && t->u.reduce_n.src[k] == peer[next] + off,
                               "n %d two-shot %d: input %d of group %d is not node "
                               "rank %d's", n, twoshot, k, groups, next);
                }
            }
            UNIT_CHECK(dst == (n > 1 ? (twoshot ? (void *)(peer[r] + IPC_MIN_CAP + off)
                                                : (void *)rbuf)
                                     : NULL),
                       "n %d two-shot %d: the reductions' output", n, twoshot);
            UNIT_CHECK(next == (n > 1 ? n : 0) && pairwise == 0,
                       "n %d two-shot %d: %d inputs reduced, %d pairwise steps", n,
                       twoshot, next, pairwise);
            UNIT_CHECK(groups == (n > 1 ? 1 + (n - 1) / COLLAR_REDUCE_N_MAX : 0),
                       "n %d: %d groups", n, groups);
            collar_sched_destroy(s);
        }
    }
    free(sbuf);
    free(rbuf);

    /* The sim device's reduce_n against a copy and pairwise reductions. */
    enum { NMAX = COLLAR_REDUCE_N_MAX };
    const struct { collar_dtype_t dt; collar_op_t op; } pairs[] = {
        { COLLAR_DT_FLOAT, COLLAR_OP_SUM },
        { COLLAR_DT_INT32, COLLAR_OP_MIN },
        { COLLAR_DT_DOUBLE_INT, COLLAR_OP_MAXLOC },
        { COLLAR_DT_UINT8, COLLAR_OP_BXOR },
    };
    const size_t counts[] = { 0, 1, 4095, 4096, 4097, 40000 };
    unsigned seed = 12345;
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
        const size_t esize = collar_dtype_size(pairs[p].dt);
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            for (int n = 2; n <= NMAX; n += 3) {
                for (int same = 0; same < 2; same++) {
                    const size_t bytes = counts[c] * esize;
                    char *in[NMAX], *want = malloc(bytes + 1), *got = malloc(bytes + 8);
                    const void *src[NMAX];
                    for (int k = 0; k < n; k++) {
                        in[k] = malloc(bytes + 3);
                        src[k] = in[k] + (k % 3);   /* unaligned ones too */
                        for (size_t b = 0; b < bytes; b++) {
                            in[k][k % 3 + b] = (char)(rand_r(&seed) >> 7);
                        }
                        if (pairs[p].dt == COLLAR_DT_FLOAT) {   /* no NaN, mixed scale */
                            for (size_t e = 0; e < counts[c]; e++) {
                                float v = (float)(rand_r(&seed) % 20001 - 10000)
                                          / (float)(1 + rand_r(&seed) % 997);
                                memcpy(in[k] + k % 3 + e * esize, &v, sizeof(v));
                            }
                        }
                    }
                    memcpy(want, src[0], bytes);
                    for (int k = 1; k < n; k++) {
                        collar_reduce_host(want, src[k], counts[c], pairs[p].dt,
                                           pairs[p].op);
                    }
                    /* dst: src[0] itself, or a buffer 5 bytes in */
                    char *dst = same ? (char *)src[0] : got + 5;
                    collar_event_t ev;
                    UNIT_CHECK(dev->reduce_n_async(dst, src, n, counts[c], pairs[p].dt,
                                                   pairs[p].op, 1, &ev) == COLLAR_OK,
                               "reduce_n queued");
                    collar_status_t est;
                    while ((est = dev->event_query(&ev)) == COLLAR_INPROGRESS) {
                    }
                    UNIT_CHECK(est == COLLAR_OK, "reduce_n completed");
                    UNIT_CHECK(bytes == 0 || memcmp(dst, want, bytes) == 0,
                               "%s %s count %zu n %d dst=src0 %d: not the bits of "
                               "pairwise reductions", collar_dtype_name(pairs[p].dt),
                               collar_op_name(pairs[p].op), counts[c], n, same);
                    for (int k = 0; k < n; k++) {
                        free(in[k]);
                    }
                    free(want);
                    free(got);
                }
            }
        }
    }
    const void *one[2] = { peers[0], peers[2] };
    collar_event_t ev;
    UNIT_CHECK(dev->reduce_n_async(peers[1], one, 1, 4, COLLAR_DT_INT32, COLLAR_OP_SUM,
                                   0, &ev) == COLLAR_ERR_INVALID, "one input refused");
    UNIT_CHECK(dev->reduce_n_async(peers[1], one, 2, 4, COLLAR_DT_FLOAT,
                                   COLLAR_OP_BXOR, 0, &ev) == COLLAR_ERR_UNSUPPORTED,
               "an invalid pair refused");
}

/* In a child process (a peer: another PID, the path through /proc taken
 * for real): open the handle, and when it opens, check the owner's bytes
 * and write the peer's.  Returns the child's exit code: 0 opened and
 * checked, 2 not opened, 1 wrong bytes or no child. */
static int sim_ipc_peer(const collar_ipc_handle_t *h, size_t bytes)
{
    const pid_t pid = fork();
    if (pid == 0) {
        void *p = NULL;
        if (dev->ipc_open(h, &p) != COLLAR_OK) {
            _exit(2);
        }
        char *c = p;
        int ok = c[0] == 'o' && c[bytes - 1] == 'O';
        c[0] = 'p';
        c[bytes - 1] = 'P';
        dev->ipc_close(p);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        return 1;
    }
    return WEXITSTATUS(status);
}

static void test_sim_ipc(void)
{
    const size_t bytes = 3 * 4096 + 5;
    void *own = NULL;
    collar_ipc_handle_t h;
    UNIT_CHECK(dev->ipc_alloc(bytes, &own, &h) == COLLAR_OK && own != NULL,
               "sim ipc_alloc");
    if (own == NULL) {
        return;
    }
    char *c = own;
    c[0] = 'o';
    c[bytes - 1] = 'O';
    UNIT_CHECK(sim_ipc_peer(&h, bytes) == 0, "a peer process maps the memory "
               "and reads the owner's bytes");
    UNIT_CHECK(c[0] == 'p' && c[bytes - 1] == 'P', "the owner reads the peer's "
               "bytes");
    /* Published: the owner's descriptor is closed, and the lowest free
     * number, the one the handle names, goes to the next file opened. */
    dev->ipc_published(own);
    const int other = memfd_create("not-collar", MFD_CLOEXEC);
    UNIT_CHECK(other >= 0 && ftruncate(other, (off_t)bytes) == 0,
               "another file");
    c[0] = 'o';
    c[bytes - 1] = 'O';
    UNIT_CHECK(sim_ipc_peer(&h, bytes) == 2, "after ipc_published, the handle "
               "opens nothing (another file at its descriptor is refused)");
    UNIT_CHECK(c[0] == 'o', "the owner's memory is untouched");
    if (other >= 0) {
        close(other);
    }
    dev->ipc_free(own);
}

/* The internal collectives of a staged schedule: data allreduces and
 * status agreements; *folded: an allreduce carries the agreement. */
static void count_colls(const collar_sched_t *s, int *ar, int *agree, int *folded)
{
    *ar = *agree = *folded = 0;
    for (int i = 0; i < s->nsteps; i++) {
        const collar_step_t *t = &s->steps[i];
        *ar += t->kind == COLLAR_STEP_IALLREDUCE;
        *agree += t->kind == COLLAR_STEP_AGREE;
        *folded += t->kind == COLLAR_STEP_IALLREDUCE && t->u.allreduce.fold != NULL;
    }
}

/* staged, one chunk, an op that keeps a flag: the status agreement is one
 * more element of the data's allreduce (one internal collective a call);
 * an exclusive or, a narrow sum and several chunks keep it apart. */
static void test_fold_agree(void)
{
    char *sb = (char *)((uintptr_t)1 << 44), *rb = (char *)((uintptr_t)1 << 45);
    collar_comm_t comm = { .private_comm = MPI_COMM_NULL, .refs = 1, .size = 2,
                           .rank = 0, .tag_ub = 32767 };
    static const struct {
        collar_dtype_t cdt; int size; collar_op_t cop; size_t chunk; int folds;
    } cases[] = {
        { COLLAR_DT_INT32, 4, COLLAR_OP_SUM, 0, 1 },
        { COLLAR_DT_DOUBLE, 8, COLLAR_OP_MIN, 0, 1 },
        { COLLAR_DT_UINT64, 8, COLLAR_OP_BAND, 0, 1 },
        { COLLAR_DT_INT32, 4, COLLAR_OP_BXOR, 0, 0 },
        { COLLAR_DT_INT8, 1, COLLAR_OP_SUM, 0, 0 },
        { COLLAR_DT_INT32, 4, COLLAR_OP_SUM, 64, 0 },   /* chunked, 16 chunks */
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        collar_call_t call = dense_call(256, cases[k].size, cases[k].cdt,
                                        MPI_DATATYPE_NULL, sb, rb);
        call.cop = cases[k].cop;
        collar_status_t st;
        collar_sched_t *s = build(&comm, cases[k].chunk ? collar_algo_chunked_build
                                                        : collar_algo_staged_build,
                                  &call, cases[k].chunk, &st);
        UNIT_CHECK(st == COLLAR_OK, "case %zu: build status %d", k, st);
        int ar, agree, folded;
        count_colls(s, &ar, &agree, &folded);
        if (cases[k].folds) {
            UNIT_CHECK(ar == 1 && agree == 0 && folded == 1
                       && s->steps[s->nsteps - 1].kind == COLLAR_STEP_COPY,
                       "case %zu: %d allreduces (%d folded), %d agreements",
                       k, ar, folded, agree);
            for (int i = 0; i < s->nsteps; i++) {
                const collar_step_t *t = &s->steps[i];
                if (t->kind == COLLAR_STEP_IALLREDUCE) {
                    UNIT_CHECK(t->u.allreduce.count == 257
                               && (char *)t->u.allreduce.fold
                                  == (char *)t->u.allreduce.rbuf + 256 * cases[k].size,
                               "case %zu: the flag is element 257", k);
                }
            }
        } else {
            UNIT_CHECK(agree == 1 && folded == 0,
                       "case %zu: %d agreements, %d folded", k, agree, folded);
        }
        collar_sched_destroy(s);
    }
}

/* Which schedules run in the calling thread and issue their collectives
 * blocking: a blocking call's one-chunk staged or chunked allreduce
 * (folded or not), every collective of it, where every rank runs the
 * progress thread (comm.all_threaded); without it the same schedules
 * run in the calling thread with nonblocking collectives; never a
 * nonblocking call's, nor a pipeline of several chunks. */
static void test_block_colls(void)
{
    char *sb = (char *)((uintptr_t)1 << 44), *rb = (char *)((uintptr_t)1 << 45);
    collar_comm_t comm = { .private_comm = MPI_COMM_NULL, .refs = 1, .size = 2,
                           .rank = 0, .tag_ub = 32767 };
    static const struct {
        int blocking; collar_op_t cop; size_t chunk; int may; int here; int blocks;
    } cases[] = {
        { 1, COLLAR_OP_SUM, 0, 1, 1, 1 },     /* folded: one allreduce */
        { 1, COLLAR_OP_BXOR, 0, 1, 1, 1 },    /* and the agreement apart */
        { 1, COLLAR_OP_SUM, 4096, 1, 1, 1 },  /* chunked, one chunk */
        { 0, COLLAR_OP_SUM, 0, 1, 0, 0 },     /* nonblocking */
        { 1, COLLAR_OP_SUM, 64, 1, 0, 0 },    /* chunked, 16 chunks */
        { 1, COLLAR_OP_SUM, 0, 0, 1, 0 },     /* no progress thread */
        { 1, COLLAR_OP_BXOR, 0, 0, 1, 0 },
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        comm.all_threaded = cases[k].may;
        collar_call_t call = dense_call(256, 4, COLLAR_DT_INT32,
                                        MPI_DATATYPE_NULL, sb, rb);
        call.cop = cases[k].cop;
        call.blocking = cases[k].blocking;
        collar_status_t st;
        collar_sched_t *s = build(&comm, cases[k].chunk ? collar_algo_chunked_build
                                                        : collar_algo_staged_build,
                                  &call, cases[k].chunk, &st);
        UNIT_CHECK(st == COLLAR_OK, "case %zu: build status %d", k, st);
        int colls = 0, blocked = 0;
        for (int i = 0; i < s->nsteps; i++) {
            const collar_step_t *t = &s->steps[i];
            if (t->kind == COLLAR_STEP_IALLREDUCE || t->kind == COLLAR_STEP_AGREE) {
                colls++;
                blocked += t->u.allreduce.blocking != 0;
            }
        }
        UNIT_CHECK(s->run_here == cases[k].here
                   && blocked == (cases[k].blocks ? colls : 0),
                   "case %zu: run here %d, %d of %d collectives block", k,
                   s->run_here, blocked, colls);
        collar_sched_destroy(s);
    }
}

int main(int argc, char **argv)
{
    collar_config_load();
    collar_cfg.log_level = COLLAR_LOG_ERROR;
    collar_log_level = COLLAR_LOG_NONE;
    /* ipc's steps as built: the copy-in's.  Zero-copy's are appended at run
     * time, after the exchange (tests/mpi/ipc.test, test_zerocopy). */
    collar_cfg.ipc_zerocopy = 0;
    UNIT_CHECK(dev->init() == COLLAR_OK, "sim init");
    if (want(argc, argv, "test_large_count")) {
        test_large_count();
    }
    if (want(argc, argv, "test_fold_agree")) {
        test_fold_agree();
    }
    if (want(argc, argv, "test_block_colls")) {
        test_block_colls();
    }
    if (want(argc, argv, "test_huge_chunk")) {
        test_huge_chunk();
    }
    if (want(argc, argv, "test_tag_windows")) {
        test_tag_windows();
    }
    if (want(argc, argv, "test_ring_tags")) {
        test_ring_tags();
    }
    if (want(argc, argv, "test_ring_host")) {
        test_ring_host();
    }
    if (want(argc, argv, "test_ipc_eligible")) {
        test_ipc_eligible();
    }
    if (want(argc, argv, "test_hier_build")) {
        test_hier_build();
    }
    if (want(argc, argv, "test_ipc_reduce_n")) {
        test_ipc_reduce_n();
    }
    if (want(argc, argv, "test_mixes")) {
        test_mixes();
    }
    if (want(argc, argv, "test_canary")) {
        test_canary();
    }
    if (want(argc, argv, "test_sim_ipc")) {
        test_sim_ipc();
    }
    collar_pool_release_all();
    dev->finalize();
    return unit_finish("test_algo");
}
