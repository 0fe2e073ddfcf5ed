/*
 * collar - the `sim` device backend.
 *
 * Host memory that behaves like a device, so that every device code path of
 * collar runs (and is tested) on a machine without a GPU:
 *   - every user buffer counts as device memory;
 *   - copies and reductions are queued on a stream and executed, in order, by
 *     that stream's worker thread; an event completes when the worker has
 *     finished the operation it was recorded for;
 *   - COLLAR_SIM_JITTER adds a random delay before each operation, so that a
 *     schedule that reads a buffer before waiting for the copy into it reads
 *     stale bytes, and the tests catch it;
 *   - COLLAR_SIM_FAIL="alloc:N,copy:M" (either or both, each at most once,
 *     N, M >= 1) injects failures, counted per process: the N-th host_alloc
 *     (staging allocation) returns COLLAR_ERR_NO_MEMORY; the M-th copy is
 *     accepted and queued like any other, but is not performed and its
 *     event reports COLLAR_ERR_DEVICE when it completes.  Failing the event
 *     rather than copy_async models an asynchronous device error (the way a
 *     CUDA copy fails) and exercises the schedule's error path with other
 *     steps in flight.  A malformed value is one warning and no injection.
 *     "ipcopen:K" makes the K-th opening of a peer's IPC memory in this
 *     process fail (put it on one rank to test the agreement on falling
 *     back); "ipckill:L" kills the process (SIGKILL) in its L-th IPC
 *     allocation, before any peer has opened the memory (a rank killed
 *     during the registration: tests/mpi/ipckill.test);
 *   - device scratch (dev_alloc) and IPC memory are registered, so that
 *     COLLAR_SIM_STRICT=1 catches them being handed to an MPI library that
 *     does not take device pointers (collar_sched_check_pmpi);
 *   - copies between host staging (host_alloc) and anything else take the
 *     time of the host-device link (COLLAR_SIM_BANDWIDTH, COLLAR_SIM_LATENCY);
 *     copies between device buffers and reductions take the time of device
 *     memory (COLLAR_SIM_DEVICE_BANDWIDTH; a reduction moves three times its
 *     bytes: two reads and a write; one of n inputs, reduce_n_async,
 *     n + 1 times).  Host staging is registered to tell the
 *     two apart;
 *   - IPC memory (ipc_alloc) is an anonymous file (memfd_create), mapped
 *     shared.  It has no name: the handle carries the owner's PID and
 *     descriptor, and a peer opens /proc/PID/fd/FD and maps that.  The
 *     owner closes the descriptor once every peer has opened it
 *     (ipc_published); the mappings alone keep the memory then, and the
 *     kernel frees it with the last of them however the processes end, so
 *     a rank killed during the registration (after ipc_alloc, before
 *     ipc_published) leaves nothing behind.  Why no names: a named object
 *     in /dev/shm outlives an owner killed before unlinking it, and
 *     removing such names at a later run would need the owner's PID, start
 *     time, boot and PID namespace in each name, would wait for a later
 *     run that may never come, and would delete files by inference.
 *     Opening /proc/PID/fd/FD takes ptrace read access to the owner (the
 *     same user, or root; not a process made non-dumpable), which Yama's
 *     ptrace_scope does not restrict; pidfd_getfd (Linux 5.6) would take
 *     attach access, which ptrace_scope=1 denies between the sibling
 *     processes of a job.  A PID names the owner only in the owner's PID
 *     namespace (containers may share a node but not PIDs): the handle
 *     carries that namespace (the inode of /proc/self/ns/pid) and the
 *     file's inode, and a peer in another namespace, or one that finds
 *     another file at the path (the owner gone, its PID and descriptor
 *     reused), does not map it: the open fails and ipc falls back on every
 *     rank.
 *   - the application's buffers, for ipc's zero-copy (ipc_export): the
 *     sim device has no allocations, so a buffer exports the pages that
 *     hold it (the handle: owner's PID, its PID namespace, the address and
 *     length; the id is the length, so a longer buffer at the same address
 *     is a new "allocation").  A peer's ipc_open checks that it may read
 *     the owner's memory (process_vm_readv of one byte: cross-memory
 *     attach takes ptrace attach access, which Yama's ptrace_scope=1 or a
 *     seccomp filter may deny) and reserves an inaccessible range
 *     (PROT_NONE) as the mapping, so that touching it other than through
 *     this device's copies and reductions faults at once.  The stream
 *     workers read the owner's pages with process_vm_readv; a read that
 *     fails (the owner gone) fails the operation's event.  Peer reads take
 *     the time of device memory, as reads of a peer's IPC memory do.
 *     "export:K" in COLLAR_SIM_FAIL makes the K-th export fail (a buffer
 *     that cannot be exported, as managed or host memory on CUDA).
 * Worker threads start on the first operation, so a process that never
 * stages anything never has them.  Under COLLAR_SIM_INLINE=1 there are
 * none: each copy or reduction runs at once in the calling thread, under
 * its stream's lock (so operations of one stream still run in order), and
 * its event is complete when copy_async or reduce_async returns; failure
 * injection, jitter and the modelled link and memory times apply as
 * before.  That mode takes the worker threads' hand-offs out of a call's
 * time, so that collar's own cost can be measured apart from the device's
 * (tests/bench/run-owncost.sh).
 */
#include "config.h"
#include "mem.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SIM_MAX_STREAMS 16

typedef enum { SIM_COPY, SIM_REDUCE } sim_kind_t;

static int sim_is_host_staging(const void *ptr, size_t bytes);

typedef struct sim_op {
    struct sim_op *next;
    sim_kind_t     kind;
    int            fail;    /* injected failure: skip the operation */
    uint64_t       ticket;
    void          *dst;
    const void    *src;
    size_t         bytes;   /* SIM_COPY */
    size_t         count;   /* SIM_REDUCE: elements; SIM_COPY: 1 over the link */
    collar_dtype_t dt;
    collar_op_t    op;
    int            nsrc;    /* SIM_REDUCE: srcs[0 .. nsrc - 1] */
    const void    *srcs[COLLAR_REDUCE_N_MAX];
    /* A source in a peer's exported buffer (SIM_COPY: index 0): the
     * owner's PID (0: a local source) and the address there. */
    int32_t        rpid[COLLAR_REDUCE_N_MAX];
    const void    *raddr[COLLAR_REDUCE_N_MAX];
} sim_op_t;

/* When the last SIM_TIMES operations of a stream ran (event_times), by
 * ticket modulo SIM_TIMES; written by the worker before it completes the
 * ticket, read after. */
#define SIM_TIMES 256
typedef struct {
    _Atomic uint64_t ticket;
    _Atomic uint64_t start, end;
    _Atomic int      failed;   /* a peer read failed (event_query) */
} sim_time_t;

struct collar_stream {
    sim_time_t       times[SIM_TIMES];
    pthread_t        thread;
    pthread_mutex_t  lock;
    pthread_cond_t   cond;
    sim_op_t        *head;
    sim_op_t        *tail;
    uint64_t         enqueued;     /* tickets handed out (under lock) */
    _Atomic uint64_t completed;    /* last ticket finished */
    int              stop;
    unsigned         rng;
};

static struct collar_stream sim_streams[SIM_MAX_STREAMS];
static int                  sim_nstreams;
static int                  sim_started;
static pthread_mutex_t      sim_start_lock = PTHREAD_MUTEX_INITIALIZER;

/* COLLAR_SIM_FAIL (src/core/fault.c): the event of a failed copy points
 * its handle here. */
static char             sim_failed_marker;

static void sim_sleep_ns(uint64_t ns)
{
    if (ns == 0) {
        return;
    }
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void sim_jitter(struct collar_stream *s)
{
    long max_us = collar_cfg.sim_jitter_us;
    if (max_us <= 0) {
        return;
    }
    sim_sleep_ns((uint64_t)(rand_r(&s->rng) % (max_us + 1)) * 1000u);
}

/* The time a copy of `bytes` takes on the modelled link, beyond memcpy's:
 * COLLAR_SIM_LATENCY + bytes / COLLAR_SIM_BANDWIDTH. */
static void sim_link_time(size_t bytes, uint64_t memcpy_ns)
{
    uint64_t ns = (uint64_t)collar_cfg.sim_latency_us * 1000u;
    if (collar_cfg.sim_bandwidth != 0) {
        ns += (uint64_t)((double)bytes * 1e9 / (double)collar_cfg.sim_bandwidth);
    }
    if (ns > memcpy_ns) {
        sim_sleep_ns(ns - memcpy_ns);
    }
}

/* The time of `bytes` of device memory traffic:
 * bytes / COLLAR_SIM_DEVICE_BANDWIDTH. */
static void sim_device_time(size_t bytes, uint64_t work_ns)
{
    if (collar_cfg.sim_device_bandwidth == 0) {
        return;
    }
    const uint64_t ns = (uint64_t)((double)bytes * 1e9
                                   / (double)collar_cfg.sim_device_bandwidth);
    if (ns > work_ns) {
        sim_sleep_ns(ns - work_ns);
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* `bytes` at `raddr` in process `pid` (a peer's exported buffer) into
 * dst; 0 when they cannot be read. */
static int sim_peer_read(void *dst, int32_t pid, const void *raddr, size_t bytes)
{
    while (bytes > 0) {
        struct iovec local = { dst, bytes };
        struct iovec remote = { (void *)raddr, bytes };
        const ssize_t n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
        if (n <= 0) {
            collar_debug(MEM, "sim: cannot read %zu bytes of process %ld: %m",
                         bytes, (long)pid);
            return 0;
        }
        dst = (char *)dst + n;
        raddr = (const char *)raddr + n;
        bytes -= (size_t)n;
    }
    return 1;
}

/* dst = src[n-1] op (... op (src[1] op src[0])), a block at a time so
 * that the block of dst stays in cache while every input is added: the
 * bits of a copy and n-1 pairwise reductions, one pass over memory.  A
 * peer's block is read into `bounce` first.  0 when a peer read failed. */
static int sim_reduce_n(const sim_op_t *op)
{
    const size_t esize = collar_dtype_size(op->dt);
    const size_t block = esize < 16384 ? 16384 / esize : 1;
    char *dst = op->dst;
    char bounce[16384 + 64];
    for (size_t first = 0; first < op->count; first += block) {
        const size_t cnt = op->count - first < block ? op->count - first : block;
        const size_t off = first * esize;
        const char *src0 = (const char *)op->srcs[0] + off;
        if (op->rpid[0] != 0) {
            if (!sim_peer_read(dst + off, op->rpid[0],
                               (const char *)op->raddr[0] + off, cnt * esize)) {
                return 0;
            }
        } else if (dst + off != src0) {
            memcpy(dst + off, src0, cnt * esize);
        }
        for (int k = 1; k < op->nsrc; k++) {
            const char *in = (const char *)op->srcs[k] + off;
            if (op->rpid[k] != 0) {
                /* (esize <= 64: one element fits when block is 1) */
                if (!sim_peer_read(bounce, op->rpid[k],
                                   (const char *)op->raddr[k] + off, cnt * esize)) {
                    return 0;
                }
                in = bounce;
            }
            /* The pair was checked by sim_reduce_n_async. */
            (void)collar_reduce_host(dst + off, in, cnt, op->dt, op->op);
        }
    }
    return 1;
}

/* Perform `op` (or, injected, fail it), then record its times and complete
 * its ticket.  Called by the stream's worker, or under COLLAR_SIM_INLINE by
 * the caller holding the stream's lock. */
static void sim_run(struct collar_stream *s, const sim_op_t *op)
{
    sim_jitter(s);
    const uint64_t start = now_ns();
    int ok = 1;
    if (op->fail) {
        /* Injected failure: nothing is done; the event reports it. */
    } else if (op->kind == SIM_COPY) {
        /* count: crosses the host-device link.  The clock is read for the
         * work's time only where a model stretches it (two reads an op
         * are a good part of an inline 8-byte copy). */
        const int modelled = op->count ? collar_cfg.sim_latency_us != 0
                                         || collar_cfg.sim_bandwidth != 0
                                       : collar_cfg.sim_device_bandwidth != 0;
        const uint64_t t0 = modelled ? now_ns() : 0;
        if (op->rpid[0] != 0) {
            ok = sim_peer_read(op->dst, op->rpid[0], op->raddr[0], op->bytes);
        } else if (op->bytes != 0 && op->dst != op->src) {
            memmove(op->dst, op->src, op->bytes);
        }
        if (modelled && op->count) {
            sim_link_time(op->bytes, now_ns() - t0);
        } else if (modelled) {
            sim_device_time(op->bytes, now_ns() - t0);
        }
    } else {
        const int modelled = collar_cfg.sim_device_bandwidth != 0;
        const uint64_t t0 = modelled ? now_ns() : 0;
        ok = sim_reduce_n(op);
        if (modelled) {
            sim_device_time((size_t)(op->nsrc + 1) * op->count
                            * collar_dtype_size(op->dt), now_ns() - t0);
        }
    }
    sim_time_t *tm = &s->times[op->ticket % SIM_TIMES];
    atomic_store_explicit(&tm->ticket, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&tm->failed, !ok, memory_order_relaxed);
    atomic_store_explicit(&tm->start, start, memory_order_relaxed);
    atomic_store_explicit(&tm->end, now_ns(), memory_order_relaxed);
    atomic_store_explicit(&tm->ticket, op->ticket, memory_order_release);
    atomic_store_explicit(&s->completed, op->ticket, memory_order_release);
}

static void *sim_worker(void *arg)
{
    struct collar_stream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->head == NULL && !s->stop) {
            pthread_cond_wait(&s->cond, &s->lock);
        }
        if (s->head == NULL) {
            break;  /* stopped and drained */
        }
        sim_op_t *op = s->head;
        s->head = op->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        pthread_mutex_unlock(&s->lock);

        sim_run(s, op);
        free(op);

        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static collar_status_t sim_start_workers(void)
{
    collar_status_t st = COLLAR_OK;
    pthread_mutex_lock(&sim_start_lock);
    if (!sim_started) {
        int n;
        for (n = 0; n < sim_nstreams; n++) {
            struct collar_stream *s = &sim_streams[n];
            if (pthread_create(&s->thread, NULL, sim_worker, s) != 0) {
                collar_error(MEM, "sim: cannot start the worker thread of stream %d", n);
                st = COLLAR_ERR_DEVICE;
                break;
            }
            /* Named, so that a test can count them (/proc/self/task). */
            char name[16];
            snprintf(name, sizeof(name), "collar-sim-%d", n);
            (void)pthread_setname_np(s->thread, name);
        }
        if (st == COLLAR_OK) {
            sim_started = 1;
            collar_debug(MEM, "sim: %d stream worker threads started", n);
        } else {
            sim_nstreams = n;  /* keep what did start; they are joined at close */
            sim_started = n > 0;
            st = n > 0 ? COLLAR_OK : st;
        }
    }
    pthread_mutex_unlock(&sim_start_lock);
    return st;
}

static collar_status_t sim_init(void)
{
    sim_nstreams = (int)collar_cfg.sim_streams;
    if (sim_nstreams < 1 || sim_nstreams > SIM_MAX_STREAMS) {
        sim_nstreams = 2;
    }
    for (int i = 0; i < sim_nstreams; i++) {
        struct collar_stream *s = &sim_streams[i];
        memset(s, 0, sizeof(*s));
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        s->rng = (unsigned)collar_cfg.sim_seed * 2654435761u
                 ^ (unsigned)getpid() * 40503u ^ (unsigned)i;
    }
    sim_started = 0;
    if (collar_cfg.sim_jitter_us > 0) {
        collar_debug(MEM, "sim device: jitter up to %ld us per operation",
                     collar_cfg.sim_jitter_us);
    }
    return COLLAR_OK;
}

static void sim_finalize(void)
{
    pthread_mutex_lock(&sim_start_lock);
    for (int i = 0; i < sim_nstreams; i++) {
        struct collar_stream *s = &sim_streams[i];
        if (sim_started) {
            pthread_mutex_lock(&s->lock);
            s->stop = 1;
            pthread_cond_signal(&s->cond);
            pthread_mutex_unlock(&s->lock);
            pthread_join(s->thread, NULL);
        }
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
    }
    sim_started = 0;
    sim_nstreams = 0;
    pthread_mutex_unlock(&sim_start_lock);
}

static collar_status_t sim_mem_query(const void *ptr, collar_mem_kind_t *kind)
{
    (void)ptr;
    *kind = COLLAR_MEM_DEVICE;
    return COLLAR_OK;
}

/*
 * Registries of address ranges: host staging (copies to and from it cross
 * the host-device link), device scratch and IPC memory (COLLAR_SIM_STRICT).
 * Grown as needed; looked up by a linear scan (the pools keep a few dozen
 * buffers).
 */
typedef struct {
    const char *lo;
    size_t      len;
} sim_range_t;

typedef struct {
    pthread_mutex_t lock;
    sim_range_t    *r;
    int             n, cap;
} sim_ranges_t;

static sim_ranges_t sim_host = { .lock = PTHREAD_MUTEX_INITIALIZER };
static sim_ranges_t sim_scratch = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void sim_range_add(sim_ranges_t *rs, const void *lo, size_t len)
{
    pthread_mutex_lock(&rs->lock);
    if (rs->n == rs->cap) {
        const int cap = rs->cap ? 2 * rs->cap : 32;
        sim_range_t *r = realloc(rs->r, (size_t)cap * sizeof(*r));
        if (r == NULL) {
            pthread_mutex_unlock(&rs->lock);
            return;  /* not registered: only the timing model and the
                      * strict check miss it */
        }
        rs->r = r;
        rs->cap = cap;
    }
    rs->r[rs->n].lo = lo;
    rs->r[rs->n].len = len;
    rs->n++;
    pthread_mutex_unlock(&rs->lock);
}

static void sim_range_remove(sim_ranges_t *rs, const void *lo)
{
    pthread_mutex_lock(&rs->lock);
    for (int i = 0; i < rs->n; i++) {
        if (rs->r[i].lo == lo) {
            rs->r[i] = rs->r[--rs->n];
            break;
        }
    }
    pthread_mutex_unlock(&rs->lock);
}

static int sim_range_overlaps(sim_ranges_t *rs, const void *ptr, size_t bytes)
{
    const char *p = ptr;
    int hit = 0;
    pthread_mutex_lock(&rs->lock);
    for (int i = 0; i < rs->n && !hit; i++) {
        const char *lo = rs->r[i].lo;
        hit = p < lo + rs->r[i].len && (bytes ? p + bytes : p + 1) > lo;
    }
    pthread_mutex_unlock(&rs->lock);
    return hit;
}

static int sim_is_host_staging(const void *ptr, size_t bytes)
{
    return sim_range_overlaps(&sim_host, ptr, bytes);
}

static collar_status_t sim_host_alloc(size_t bytes, void **ptr)
{
    if (collar_fault(COLLAR_FAULT_ALLOC)) {
        *ptr = NULL;
        return COLLAR_ERR_NO_MEMORY;
    }
    if (posix_memalign(ptr, 64, bytes ? bytes : 1) != 0) {
        return COLLAR_ERR_NO_MEMORY;
    }
    sim_range_add(&sim_host, *ptr, bytes ? bytes : 1);
    return COLLAR_OK;
}

static void sim_host_free(void *ptr)
{
    sim_range_remove(&sim_host, ptr);
    free(ptr);
}

/*
 * Device scratch is host memory here (not subject to COLLAR_SIM_FAIL), so an
 * MPI library that does not take device pointers reads and writes it
 * without complaint.  The registry of the scratch ranges (and of IPC
 * memory, own and mapped) lets the schedule engine tell it from host memory
 * (COLLAR_SIM_STRICT).
 */
static collar_status_t sim_dev_alloc(size_t bytes, void **ptr)
{
    if (posix_memalign(ptr, 64, bytes ? bytes : 1) != 0) {
        return COLLAR_ERR_NO_MEMORY;
    }
    sim_range_add(&sim_scratch, *ptr, bytes ? bytes : 1);
    return COLLAR_OK;
}

static void sim_dev_free(void *ptr)
{
    sim_range_remove(&sim_scratch, ptr);
    free(ptr);
}

static int sim_is_dev_scratch(const void *ptr, size_t bytes)
{
    return sim_range_overlaps(&sim_scratch, ptr, bytes);
}

/* ------------------------------------------------------------ IPC memory */

/* The handle: the size, where a peer finds the file (the owner's PID and
 * descriptor), and what the file must be when found (its inode, and the
 * owner's PID namespace, in which that PID means the owner). */
typedef struct {
    uint64_t bytes;
    uint64_t ino;       /* st_ino and st_dev of the memfd */
    uint64_t dev;
    uint64_t pidns;     /* st_ino of the owner's /proc/self/ns/pid */
    int32_t  pid;
    int32_t  fd;
    uint64_t addr;      /* ipc_export: the pages' address (fd -1), else 0 */
} sim_ipc_handle_t;

_Static_assert(sizeof(sim_ipc_handle_t) <= sizeof(collar_ipc_handle_t),
               "the sim IPC handle fits collar_ipc_handle_t");

/* Mappings, own and of peers; fd: an own memfd until published, else -1.
 * A peer's exported buffer: pid is the owner's, addr its address there
 * (ptr is the inaccessible range that stands for it here). */
typedef struct sim_ipc_map {
    struct sim_ipc_map *next;
    void               *ptr;
    size_t              len;
    int                 fd;
    int32_t             pid;
    uint64_t            addr;
} sim_ipc_map_t;

static sim_ipc_map_t   *sim_ipc_maps;
static pthread_mutex_t  sim_ipc_lock = PTHREAD_MUTEX_INITIALIZER;

static void sim_ipc_remember(void *ptr, size_t len, int fd)
{
    sim_ipc_map_t *m = calloc(1, sizeof(*m));
    if (m != NULL) {
        m->ptr = ptr;
        m->len = len;
        m->fd = fd;
        pthread_mutex_lock(&sim_ipc_lock);
        m->next = sim_ipc_maps;
        sim_ipc_maps = m;
        pthread_mutex_unlock(&sim_ipc_lock);
    } else if (fd >= 0) {
        /* Not remembered: nowhere to keep the descriptor until it is
         * published, so no peer can open the memory (they fall back). */
        close(fd);
    }
    sim_range_add(&sim_scratch, ptr, len);
}

/* Take the mapping of `ptr` off the list (NULL: not one of ours). */
static sim_ipc_map_t *sim_ipc_take(void *ptr)
{
    pthread_mutex_lock(&sim_ipc_lock);
    sim_ipc_map_t **pp = &sim_ipc_maps;
    while (*pp != NULL && (*pp)->ptr != ptr) {
        pp = &(*pp)->next;
    }
    sim_ipc_map_t *m = *pp;
    if (m != NULL) {
        *pp = m->next;
    }
    pthread_mutex_unlock(&sim_ipc_lock);
    return m;
}

/* This process's PID namespace (0: /proc has no ns/pid to tell), looked
 * up once: every export of a buffer names it. */
static uint64_t sim_pidns(void)
{
    static _Atomic uint64_t ns;   /* the inode + 1; 0: not looked up */
    uint64_t v = atomic_load_explicit(&ns, memory_order_relaxed);
    if (v == 0) {
        struct stat st;
        v = (stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0) + 1;
        atomic_store_explicit(&ns, v, memory_order_relaxed);
    }
    return v - 1;
}

/* COLLAR_SIM_FAIL=ipckill:L: the process dies (SIGKILL: no handler, no
 * atexit) in its L-th IPC allocation, after the memory exists and before
 * any peer has opened it, as a rank killed during the registration. */
static void sim_fail_ipckill(void)
{
    if (collar_fault(COLLAR_FAULT_IPCKILL)) {
        raise(SIGKILL);
    }
}

static collar_status_t sim_ipc_alloc(size_t bytes, void **ptr,
                                     collar_ipc_handle_t *handle)
{
    sim_ipc_handle_t h;
    memset(&h, 0, sizeof(h));
    memset(handle, 0, sizeof(*handle));
    h.bytes = bytes ? bytes : 1;
    int fd = memfd_create("collar-ipc", MFD_CLOEXEC);
    if (fd < 0) {
        collar_debug(MEM, "sim: memfd_create failed: %m");
        return COLLAR_ERR_NO_MEMORY;
    }
    void *p = MAP_FAILED;
    struct stat st;
    if (ftruncate(fd, (off_t)h.bytes) == 0 && fstat(fd, &st) == 0) {
        p = mmap(NULL, (size_t)h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (p == MAP_FAILED) {
        collar_debug(MEM, "sim: cannot map %llu bytes of IPC memory: %m",
                     (unsigned long long)h.bytes);
        close(fd);
        return COLLAR_ERR_NO_MEMORY;
    }
    h.ino = (uint64_t)st.st_ino;
    h.dev = (uint64_t)st.st_dev;
    h.pidns = sim_pidns();
    h.pid = (int32_t)getpid();
    h.fd = fd;
    sim_ipc_remember(p, (size_t)h.bytes, fd);
    memcpy(handle->bytes, &h, sizeof(h));
    *ptr = p;
    sim_fail_ipckill();
    return COLLAR_OK;
}

static void sim_ipc_where(const void *ptr, char *where, size_t len)
{
    (void)ptr;
    snprintf(where, len, "sim");
}

static int sim_ipc_reachable(const char *peer_where)
{
    /* One simulated device a node: every peer of the node is reachable. */
    return strcmp(peer_where, "sim") == 0;
}

static collar_status_t sim_export_open(const sim_ipc_handle_t *h, void **ptr);

static collar_status_t sim_ipc_open(const collar_ipc_handle_t *handle, void **ptr)
{
    sim_ipc_handle_t h;
    memcpy(&h, handle->bytes, sizeof(h));
    if (h.addr != 0) {
        return sim_export_open(&h, ptr);
    }
    if (collar_fault(COLLAR_FAULT_IPCOPEN)) {
        return COLLAR_ERR_DEVICE;
    }
    if (h.pid <= 0 || h.fd < 0 || h.bytes == 0) {
        return COLLAR_ERR_INVALID;
    }
    if (h.pidns != sim_pidns()) {
        /* The PID would name another process here, or none. */
        collar_debug(MEM, "sim: the IPC memory of process %ld is in another "
                     "PID namespace", (long)h.pid);
        return COLLAR_ERR_DEVICE;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/fd/%ld", (long)h.pid, (long)h.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        collar_debug(MEM, "sim: cannot open %s: %m", path);
        return COLLAR_ERR_DEVICE;
    }
    /* The owner may be gone and its PID and descriptor number reused:
     * map only the very file it published. */
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != h.ino
        || (uint64_t)st.st_dev != h.dev || st.st_size < 0
        || (uint64_t)st.st_size < h.bytes) {
        collar_debug(MEM, "sim: %s is not the IPC memory published", path);
    } else {
        p = mmap(NULL, (size_t)h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            collar_debug(MEM, "sim: cannot map %s: %m", path);
        }
    }
    close(fd);
    if (p == MAP_FAILED) {
        return COLLAR_ERR_DEVICE;
    }
    sim_ipc_remember(p, (size_t)h.bytes, -1);
    *ptr = p;
    return COLLAR_OK;
}

static void sim_ipc_published(void *ptr)
{
    pthread_mutex_lock(&sim_ipc_lock);
    for (sim_ipc_map_t *m = sim_ipc_maps; m != NULL; m = m->next) {
        if (m->ptr == ptr && m->fd >= 0) {
            close(m->fd);
            m->fd = -1;
        }
    }
    pthread_mutex_unlock(&sim_ipc_lock);
}

static void sim_ipc_unmap(void *ptr)
{
    sim_ipc_map_t *m = sim_ipc_take(ptr);
    if (m == NULL) {
        return;
    }
    sim_range_remove(&sim_scratch, ptr);
    if (m->fd >= 0) {
        close(m->fd);
    }
    munmap(m->ptr, m->len);
    free(m);
}

static collar_status_t sim_ipc_close(void *ptr)
{
    sim_ipc_unmap(ptr);
    return COLLAR_OK;
}

/* ------------------------------------------- the application's buffers */

static collar_status_t sim_ipc_export(const void *ptr, size_t bytes,
                                      collar_ipc_handle_t *handle,
                                      uint64_t *base, size_t *offset,
                                      uint64_t *id)
{
    if (collar_fault(COLLAR_FAULT_EXPORT)) {
        return COLLAR_ERR_UNAVAILABLE;
    }
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t b = (uintptr_t)ptr & ~(page - 1);
    const uintptr_t e = ((uintptr_t)ptr + (bytes ? bytes : 1) + page - 1) & ~(page - 1);
    if (ptr == NULL || b == 0) {
        return COLLAR_ERR_UNAVAILABLE;
    }
    sim_ipc_handle_t h;
    memset(&h, 0, sizeof(h));
    memset(handle, 0, sizeof(*handle));
    h.bytes = (uint64_t)(e - b);
    h.pidns = sim_pidns();
    h.pid = (int32_t)getpid();
    h.fd = -1;
    h.addr = (uint64_t)b;
    memcpy(handle->bytes, &h, sizeof(h));
    *base = (uint64_t)b;
    *offset = (size_t)((uintptr_t)ptr - b);
    *id = h.bytes;
    return COLLAR_OK;
}

/* ipc_open of an exported buffer: the owner's pages must be readable from
 * here (the same PID namespace, and cross-memory attach allowed); the
 * mapping is an inaccessible reservation the device's operations
 * translate (sim_remote). */
static collar_status_t sim_export_open(const sim_ipc_handle_t *h, void **ptr)
{
    if (collar_fault(COLLAR_FAULT_IPCOPEN)) {
        return COLLAR_ERR_DEVICE;
    }
    if (h->pid <= 0 || h->bytes == 0 || h->pidns != sim_pidns()) {
        return COLLAR_ERR_DEVICE;
    }
    char probe;
    if (!sim_peer_read(&probe, h->pid, (const void *)(uintptr_t)h->addr, 1)) {
        return COLLAR_ERR_DEVICE;   /* EPERM, ESRCH: say so, fall back */
    }
    void *p = mmap(NULL, (size_t)h->bytes, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        return COLLAR_ERR_NO_MEMORY;
    }
    sim_ipc_map_t *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        munmap(p, (size_t)h->bytes);
        return COLLAR_ERR_NO_MEMORY;
    }
    m->ptr = p;
    m->len = (size_t)h->bytes;
    m->fd = -1;
    m->pid = h->pid;
    m->addr = h->addr;
    pthread_mutex_lock(&sim_ipc_lock);
    m->next = sim_ipc_maps;
    sim_ipc_maps = m;
    pthread_mutex_unlock(&sim_ipc_lock);
    *ptr = p;
    return COLLAR_OK;
}

/* Where [ptr, ptr + bytes) lies when it is in a peer's exported buffer
 * mapped here: *pid (else 0) and *addr in that process. */
static void sim_remote(const void *ptr, size_t bytes, int32_t *pid,
                       const void **addr)
{
    *pid = 0;
    *addr = NULL;
    const uintptr_t p = (uintptr_t)ptr;
    pthread_mutex_lock(&sim_ipc_lock);
    for (sim_ipc_map_t *m = sim_ipc_maps; m != NULL; m = m->next) {
        const uintptr_t b = (uintptr_t)m->ptr;
        if (m->pid != 0 && p >= b && p - b < m->len) {
            if (bytes <= m->len - (p - b)) {
                *pid = m->pid;
                *addr = (const void *)(uintptr_t)(m->addr + (p - b));
            }
            break;
        }
    }
    pthread_mutex_unlock(&sim_ipc_lock);
}

static int sim_nstreams_fn(void)
{
    return sim_nstreams;
}

/* Hand `op` (the caller's) to its stream: run it at once under
 * COLLAR_SIM_INLINE, or queue a copy of it for the stream's worker. */
static collar_status_t sim_enqueue(const sim_op_t *op, int stream,
                                   collar_event_t *done)
{
    struct collar_stream *s;
    uint64_t ticket;
    if (collar_cfg.sim_inline) {
        s = &sim_streams[(unsigned)stream % (unsigned)sim_nstreams];
        sim_op_t run = *op;
        pthread_mutex_lock(&s->lock);
        ticket = run.ticket = ++s->enqueued;
        sim_run(s, &run);
        pthread_mutex_unlock(&s->lock);
    } else {
        if (!sim_started) {
            collar_status_t st = sim_start_workers();
            if (st != COLLAR_OK) {
                return st;
            }
        }
        sim_op_t *q = malloc(sizeof(*q));
        if (q == NULL) {
            return COLLAR_ERR_NO_MEMORY;
        }
        *q = *op;
        s = &sim_streams[(unsigned)stream % (unsigned)sim_nstreams];
        pthread_mutex_lock(&s->lock);
        /* Once queued, q belongs to the worker, which frees it when done:
         * keep the ticket in a local. */
        ticket = q->ticket = ++s->enqueued;
        q->next = NULL;
        if (s->tail != NULL) {
            s->tail->next = q;
        } else {
            s->head = q;
        }
        s->tail = q;
        pthread_cond_signal(&s->cond);
        pthread_mutex_unlock(&s->lock);
    }
    if (done == NULL) {
        /* The host waits for it (device.h), as cuda's stream wait. */
        while (atomic_load_explicit(&s->completed, memory_order_acquire) < ticket) {
            sched_yield();
        }
        return op->fail ? COLLAR_ERR_DEVICE : COLLAR_OK;
    }
    done->stream = s;
    done->ticket = ticket;
    done->handle = op->fail ? &sim_failed_marker : NULL;
    return COLLAR_OK;
}

static collar_status_t sim_copy_async(void *dst, const void *src, size_t bytes,
                                      int stream, collar_event_t *done)
{
    sim_op_t op = { .kind = SIM_COPY, .dst = dst, .src = src, .bytes = bytes };
    sim_remote(src, bytes, &op.rpid[0], &op.raddr[0]);
    /* count, for a copy: 1 when it crosses the host-device link. */
    op.count = sim_is_host_staging(dst, bytes) || sim_is_host_staging(src, bytes);
    if (collar_fault(COLLAR_FAULT_COPY)) {
        op.fail = 1;
    }
    return sim_enqueue(&op, stream, done);
}

static collar_status_t sim_reduce_n_async(void *dst, const void *const *src,
                                          int n, size_t count, collar_dtype_t dt,
                                          collar_op_t op_id, int stream,
                                          collar_event_t *done)
{
    if (!collar_reduce_supported(dt, op_id)) {
        return COLLAR_ERR_UNSUPPORTED;
    }
    if (n < 2 || n > COLLAR_REDUCE_N_MAX) {
        return COLLAR_ERR_INVALID;
    }
    sim_op_t op = { .kind = SIM_REDUCE, .dst = dst, .nsrc = n,
                    .count = count, .dt = dt, .op = op_id };
    const size_t bytes = count * collar_dtype_size(dt);
    for (int k = 0; k < n; k++) {
        op.srcs[k] = src[k];
        sim_remote(src[k], bytes, &op.rpid[k], &op.raddr[k]);
    }
    return sim_enqueue(&op, stream, done);
}

/* The pair inout = in op inout is the reduction of the two inputs
 * {inout, in} into inout (in may be inout itself: sim_reduce_n reduces
 * a block of dst with itself then, as collar_reduce_host allows). */
static collar_status_t sim_reduce_async(void *inout, const void *in,
                                        size_t count, collar_dtype_t dt,
                                        collar_op_t op_id, int stream,
                                        collar_event_t *done)
{
    const void *src[2] = { inout, in };
    return sim_reduce_n_async(inout, src, 2, count, dt, op_id, stream, done);
}

static collar_status_t sim_event_query(collar_event_t *ev)
{
    struct collar_stream *s = ev->stream;
    if (s == NULL) {
        return COLLAR_OK;
    }
    uint64_t done = atomic_load_explicit(&s->completed, memory_order_acquire);
    if (done < ev->ticket) {
        return COLLAR_INPROGRESS;
    }
    if (ev->handle == &sim_failed_marker) {
        return COLLAR_ERR_DEVICE;
    }
    /* A failed peer read, known while its time slot is not reused. */
    sim_time_t *tm = &s->times[ev->ticket % SIM_TIMES];
    if (atomic_load_explicit(&tm->ticket, memory_order_acquire) == ev->ticket
        && atomic_load_explicit(&tm->failed, memory_order_relaxed)) {
        return COLLAR_ERR_DEVICE;
    }
    return COLLAR_OK;
}

static int sim_event_times(const collar_event_t *ev, uint64_t *start,
                           uint64_t *end)
{
    struct collar_stream *s = ev->stream;
    if (s == NULL) {
        return 0;
    }
    sim_time_t *tm = &s->times[ev->ticket % SIM_TIMES];
    if (atomic_load_explicit(&tm->ticket, memory_order_acquire) != ev->ticket) {
        return 0;
    }
    *start = atomic_load_explicit(&tm->start, memory_order_relaxed);
    *end = atomic_load_explicit(&tm->end, memory_order_relaxed);
    /* Not overwritten meanwhile by an operation SIM_TIMES later. */
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&tm->ticket, memory_order_relaxed) == ev->ticket;
}

static collar_status_t sim_order_after_caller(void)
{
    /* Nothing of the caller's is ever queued on a simulated device. */
    return COLLAR_OK;
}

const collar_device_t collar_device_sim = {
    .name               = "sim",
    .init               = sim_init,
    .finalize           = sim_finalize,
    .mem_query          = sim_mem_query,
    .host_alloc         = sim_host_alloc,
    .host_free          = sim_host_free,
    .dev_alloc          = sim_dev_alloc,
    .dev_free           = sim_dev_free,
    .nstreams           = sim_nstreams_fn,
    .copy_async         = sim_copy_async,
    .reduce_supported   = collar_reduce_supported,
    .reduce_async       = sim_reduce_async,
    .reduce_n_async     = sim_reduce_n_async,
    .event_query        = sim_event_query,
    .event_times        = sim_event_times,
    .order_after_caller = sim_order_after_caller,
    .is_dev_scratch     = sim_is_dev_scratch,
    .ipc_alloc          = sim_ipc_alloc,
    .ipc_where          = sim_ipc_where,
    .ipc_reachable      = sim_ipc_reachable,
    .ipc_open           = sim_ipc_open,
    .ipc_published      = sim_ipc_published,
    .ipc_close          = sim_ipc_close,
    .ipc_free           = sim_ipc_unmap,
    .ipc_export         = sim_ipc_export,
    .ipc_export_keep    = 1,
};
