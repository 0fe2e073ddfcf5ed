/*
 * Unit test of the cuda backend (src/mem/cuda.c, compiled in here) against
 * a fake CUDA runtime and driver that record what collar asks of them
 * (tests/fake/fake_cuda.h: four GPUs, a per-thread current context as the
 * driver keeps it, device allocations in a table).  Runs without a GPU.
 * Checks that
 *   - nothing touches a GPU at init;
 *   - COLLAR_SYNC=device synchronises only the device the application's
 *     buffers live on (no context is created on any other GPU);
 *   - every entry point puts the application's current context back as it
 *     found it, "no context" included (copies, reductions, the device
 *     ordering, scratch and staging allocation, finalize);
 *   - device scratch goes to, and is pooled on, the device of the call's
 *     buffers;
 *   - IPC memory goes to the device of the call, its handle opens with
 *     lazy peer access on that device, reachability follows the PCI bus id
 *     and cudaDeviceCanAccessPeer (a device this process does not see is
 *     left to cudaIpcOpenMemHandle), and closing and freeing reach the
 *     runtime;
 *   - no runtime call runs without a context current (which would make
 *     device 0's current, fake_cuda.h): event queries, frees of device,
 *     pinned and IPC memory on a thread without one (the progress thread)
 *     select the device of what they touch, and leave no context behind.
 */
#include "mem/cuda.c"
#include "unit.h"

#include "../fake/fake_cuda.h"

/* ------------------------------------------------------------------ tests */

static const collar_device_t *dev = &collar_device_cuda;

static void test_sync_and_current(void)
{
    UNIT_CHECK(dev->init() == COLLAR_OK, "init");
    UNIT_CHECK(touched == 0 && cur_ctx == NULL,
               "init touched GPUs %#x", touched);

    /* The application works on device 2; its buffer is on device 1. */
    cur_ctx = ctx_of(2);
    touched = 1u << 2;
    fake_alloc_t *buf = fake_map(1 << 20, 1, 0);
    collar_mem_kind_t kind;
    UNIT_CHECK(dev->mem_query(buf->base, &kind) == COLLAR_OK
               && kind == COLLAR_MEM_DEVICE, "device buffer");
    char host[64];
    UNIT_CHECK(dev->mem_query(host, &kind) == COLLAR_OK && kind == COLLAR_MEM_HOST,
               "host buffer");

    collar_cfg.sync = COLLAR_SYNC_DEVICE;
    synced = 0;
    UNIT_CHECK(dev->order_after_caller() == COLLAR_OK, "order");
    UNIT_CHECK(synced == 1u << 1, "synchronised devices %#x, expected only "
               "device 1 (the buffer's)", synced);
    UNIT_CHECK((touched & ~((1u << 1) | (1u << 2))) == 0,
               "contexts made current on devices %#x", touched);
    UNIT_CHECK(cur_ctx == ctx_of(2), "the current device after the ordering "
               "is %d, expected the application's 2", ctx_device(cur_ctx));

    /* No current context: none afterwards. */
    cur_ctx = NULL;
    UNIT_CHECK(dev->order_after_caller() == COLLAR_OK, "order");
    UNIT_CHECK(cur_ctx == NULL, "a context (device %d) left current where "
               "there was none", ctx_device(cur_ctx));

    /* COLLAR_SYNC=stream with an MPI library that does not read device
     * buffers, and none: no host synchronisation at all. */
    nsync = 0;
    collar_cfg.mpi_cuda_aware = 2;   /* no */
    collar_cfg.sync = COLLAR_SYNC_STREAM;
    dev->order_after_caller();
    collar_cfg.sync = COLLAR_SYNC_NONE;
    dev->order_after_caller();
    UNIT_CHECK(nsync == 0, "%d synchronisations with COLLAR_SYNC=stream/none", nsync);
    collar_cfg.sync = COLLAR_SYNC_DEVICE;

    /* A copy from the device-1 buffer: issued on device 1, context put back. */
    cur_ctx = ctx_of(2);
    collar_event_t ev;
    UNIT_CHECK(dev->copy_async(host, buf->base, sizeof(host), 0, &ev) == COLLAR_OK,
               "copy");
    UNIT_CHECK(memcpy_device == 1, "copy issued on device %d, expected 1",
               memcpy_device);
    UNIT_CHECK(cur_ctx == ctx_of(2), "current device after a copy: %d",
               ctx_device(cur_ctx));
    while (dev->event_query(&ev) == COLLAR_INPROGRESS) {
    }
    cur_ctx = NULL;
    UNIT_CHECK(dev->reduce_async(buf->base, buf->base, 4, COLLAR_DT_INT32,
                                 COLLAR_OP_SUM, 1, &ev) == COLLAR_OK, "reduce");
    UNIT_CHECK(cur_ctx == NULL, "a reduction left device %d current",
               ctx_device(cur_ctx));
    while (dev->event_query(&ev) == COLLAR_INPROGRESS) {
    }
    const void *src[2] = { buf->base, (char *)buf->base + 16 };
    UNIT_CHECK(dev->reduce_n_async(buf->base, src, 2, 4, COLLAR_DT_INT32,
                                   COLLAR_OP_SUM, 1, &ev) == COLLAR_OK, "reduce_n");
    UNIT_CHECK(cur_ctx == NULL, "a reduction of n inputs left device %d current",
               ctx_device(cur_ctx));
    while (dev->event_query(&ev) == COLLAR_INPROGRESS) {
    }
}

/* COLLAR_SYNC=stream with a CUDA-aware MPI library: it reads device
 * buffers outside collar's streams, so the host waits for the legacy
 * stream of the buffers' device (only). */
static void test_stream_aware(void)
{
    /* The answer is asked once per init. */
    dev->finalize();
    collar_cfg.mpi_cuda_aware = 1;   /* yes */
    UNIT_CHECK(dev->init() == COLLAR_OK, "init");
    fake_alloc_t *buf = fake_map(4096, 1, 0);
    collar_mem_kind_t kind;
    dev->mem_query(buf->base, &kind);
    collar_cfg.sync = COLLAR_SYNC_STREAM;
    stream_synced = 0;
    synced = 0;
    cur_ctx = ctx_of(2);
    UNIT_CHECK(dev->order_after_caller() == COLLAR_OK, "order");
    UNIT_CHECK(stream_synced == 1u << 1 && synced == 0, "stream mode with a "
               "CUDA-aware MPI: legacy streams waited for %#x, devices %#x; "
               "expected the legacy stream of device 1 only", stream_synced,
               synced);
    UNIT_CHECK(cur_ctx == ctx_of(2), "current device after the ordering: %d",
               ctx_device(cur_ctx));
    collar_cfg.sync = COLLAR_SYNC_DEVICE;
}

static void test_ipc(void)
{
    /* The call's buffer is on device 1, device 2 is current. */
    fake_alloc_t *b1 = fake_map(4096, 1, 0);
    collar_mem_kind_t kind;
    cur_ctx = ctx_of(2);
    dev->mem_query(b1->base, &kind);
    void *own = NULL, *mapped = NULL;
    collar_ipc_handle_t h;
    UNIT_CHECK(dev->ipc_alloc(8192, &own, &h) == COLLAR_OK && own != NULL,
               "IPC allocation");
    UNIT_CHECK(malloc_device == 1, "IPC memory allocated on device %d, "
               "expected 1", malloc_device);
    char where[COLLAR_IPC_WHERE_BYTES];
    dev->ipc_where(own, where, sizeof(where));
    UNIT_CHECK(strcmp(where, "0000:11:00.0") == 0, "IPC memory on %s", where);
    UNIT_CHECK(dev->ipc_reachable(where), "the same device is reachable");
    UNIT_CHECK(dev->ipc_reachable("0000:10:00.0"), "a peer device is reachable");
    UNIT_CHECK(!dev->ipc_reachable("0000:12:00.0"), "device 2 has no peer "
               "access to device 1");
    /* A device this process does not see: cudaIpcOpenMemHandle can open
     * its handles, so it decides. */
    UNIT_CHECK(dev->ipc_reachable("0000:99:00.0"), "a device this process "
               "does not see is refused before its handle is tried");
    UNIT_CHECK(dev->ipc_open(&h, &mapped) == COLLAR_OK && mapped == own,
               "IPC open");
    UNIT_CHECK(ipc_opens == 1 && ipc_open_device == 1, "opened %d times, on "
               "device %d", ipc_opens, ipc_open_device);
    UNIT_CHECK(cur_ctx == ctx_of(2), "current device after the IPC open: %d",
               ctx_device(cur_ctx));
    dev->ipc_published(own);
    /* Closed and freed on a thread without a context (the progress
     * thread): on the memory's device, and none is left current. */
    cur_ctx = NULL;
    dev->ipc_close(mapped);
    UNIT_CHECK(ipc_closes == 1, "closed %d times", ipc_closes);
    dev->ipc_free(own);
    UNIT_CHECK(fake_find(own) == NULL, "IPC memory freed");
    UNIT_CHECK(cur_ctx == NULL && atomic_load(&fake_implicit_n) == 0,
               "closing and freeing IPC memory without a current context "
               "made device %d current (%s)", ctx_device(cur_ctx),
               atomic_load(&fake_implicit_n) ? atomic_load(&fake_implicit[0]) : "");
}

static void test_scratch(void)
{
    /* The call's buffer is on device 3: scratch and staging go there. */
    fake_alloc_t *b3 = fake_map(4096, 3, 0);
    fake_alloc_t *b1 = fake_map(4096, 1, 0);
    collar_mem_kind_t kind;
    cur_ctx = ctx_of(2);
    dev->mem_query(b3->base, &kind);
    void *s3, *h;
    UNIT_CHECK(collar_scratch_get(dev, 100000, &s3) == COLLAR_OK, "scratch");
    UNIT_CHECK(malloc_device == 3, "scratch allocated on device %d, expected 3",
               malloc_device);
    UNIT_CHECK(collar_pool_get(dev, 100000, &h) == COLLAR_OK, "staging");
    UNIT_CHECK(hostalloc_device == 3, "pinned memory allocated with device %d "
               "current, expected 3", hostalloc_device);
    UNIT_CHECK(cur_ctx == ctx_of(2), "current device after allocations: %d",
               ctx_device(cur_ctx));
    collar_scratch_put(dev, s3, 100000);
    collar_pool_put(dev, h, 100000);

    /* A call on device 1 must not get device 3's scratch back. */
    dev->mem_query(b1->base, &kind);
    void *s1;
    malloc_device = -1;
    UNIT_CHECK(collar_scratch_get(dev, 100000, &s1) == COLLAR_OK, "scratch");
    UNIT_CHECK(s1 != s3 && malloc_device == 1, "scratch for a device-1 call: "
               "%s", s1 == s3 ? "device 3's buffer" : "allocated elsewhere");
    collar_scratch_put(dev, s1, 100000);
    /* And device 3's call gets its own back. */
    dev->mem_query(b3->base, &kind);
    void *again;
    UNIT_CHECK(collar_scratch_get(dev, 100000, &again) == COLLAR_OK && again == s3,
               "device 3's scratch reused");
    collar_scratch_put(dev, again, 100000);
    /* The pools given back on a thread without a context. */
    cur_ctx = NULL;
    collar_pool_release_all();
    UNIT_CHECK(cur_ctx == NULL && atomic_load(&fake_implicit_n) == 0,
               "freeing scratch and pinned memory without a current context "
               "made device %d current (%s)", ctx_device(cur_ctx),
               atomic_load(&fake_implicit_n) ? atomic_load(&fake_implicit[0]) : "");
    UNIT_CHECK((atomic_load(&fake_contexts) & 1u) == 0, "a context on device 0, "
               "which no buffer of the test is on");

    cur_ctx = ctx_of(2);
    dev->finalize();
    UNIT_CHECK(cur_ctx == ctx_of(2), "current device after finalize: %d",
               ctx_device(cur_ctx));
}

int main(void)
{
    collar_config_load();
    test_sync_and_current();
    test_stream_aware();
    test_ipc();
    test_scratch();
    return unit_finish("test_cuda");
}
