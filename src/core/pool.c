/*
 * collar - the staging pools, and what stands in when they run dry.
 *
 * Pinned host buffers and device scratch are slow to allocate (driver calls
 * that map pages), so they are kept for reuse: one free list per size class
 * and per kind (device scratch also per GPU: the
 * backend's scratch_device), at most COLLAR_STAGING_POOL bytes kept in each
 * pool.  A buffer that would exceed the bound is freed when
 * returned.  Everything is freed at MPI_Finalize.
 *
 * A shortage of pinned memory is collar's, not the application's: staging
 * (collar_staging_get) then takes pageable host memory, which carries the
 * data as well, only more slowly (every backend copies to and from it), and
 * the call succeeds.  Only where not even that can be had does a call
 * fail, and then it still issues its messages, on drain memory
 * (collar_drain_get), so that no other rank waits for them.
 */
#include "config.h"
#include "core.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * Size classes: powers of two from 4 KiB to 4 MiB (small buffers, many
 * sizes, few bytes lost), then multiples of 2 MiB: a power of two would
 * double a large message's memory (1 GiB + 4 bytes took 2 GiB), a 2 MiB
 * multiple adds at most 2 MiB (0.2% of 1 GiB).  The large ones share one
 * list, matched on their exact rounded size.
 */
#define POOL_MIN_SHIFT 12   /* 4 KiB */
#define POOL_POW2_MAX  ((size_t)4 << 20)
#define POOL_STEP      ((size_t)2 << 20)
#define POOL_CLASSES   12   /* 4 KiB .. 4 MiB, then the large list */
#define POOL_LARGE     (POOL_CLASSES - 1)

typedef struct pool_buf {
    struct pool_buf *next;
    void            *ptr;
    size_t           size;     /* rounded */
    int              device;   /* scratch: the GPU it lives on */
} pool_buf_t;

typedef struct {
    const char            *what;   /* for messages */
    pool_buf_t            *free[POOL_CLASSES];
    size_t                 cached;
    const collar_device_t *dev;    /* the device the buffers came from */
} pool_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
/* Drain memory's block (collar_drain_get), once made. */
static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
static int             drain_fd = -1;
static pool_t          pools[2] = {
    { .what = "staging" },         /* pinned host */
    { .what = "device scratch" },
};

/* What a request of `bytes` allocates (0: too large to round). */
size_t collar_pool_round(size_t bytes)
{
    if (bytes <= POOL_POW2_MAX) {
        size_t r = (size_t)1 << POOL_MIN_SHIFT;
        while (r < bytes) {
            r <<= 1;
        }
        return r;
    }
    if (bytes > SIZE_MAX - POOL_STEP) {
        return 0;
    }
    return (bytes + POOL_STEP - 1) / POOL_STEP * POOL_STEP;
}

static unsigned size_class(size_t rounded)
{
    unsigned c = 0;
    while (c < POOL_LARGE && ((size_t)1 << (c + POOL_MIN_SHIFT)) < rounded) {
        c++;
    }
    return c;
}

static collar_status_t pool_alloc(const collar_device_t *dev, int scratch,
                                  size_t bytes, void **ptr)
{
    return scratch ? dev->dev_alloc(bytes, ptr) : dev->host_alloc(bytes, ptr);
}

static void pool_free(const collar_device_t *dev, int scratch, void *ptr)
{
    if (scratch) {
        dev->dev_free(ptr);
    } else {
        dev->host_free(ptr);
    }
}

/* Device scratch is kept per GPU: a buffer of another device would be
 * handed to a kernel that cannot use it.  Pinned host memory is portable. */
static int buf_device(int scratch, const collar_device_t *dev, const void *ptr)
{
    return scratch && dev->scratch_device != NULL ? dev->scratch_device(ptr) : 0;
}

static collar_status_t pool_get(int scratch, const collar_device_t *dev,
                                size_t bytes, void **ptr)
{
    const size_t size = collar_pool_round(bytes);
    if (size == 0) {
        return COLLAR_ERR_NO_MEMORY;
    }
    pool_t *p = &pools[scratch];
    unsigned c = size_class(size);
    const int device = buf_device(scratch, dev, NULL);
    pthread_mutex_lock(&pool_lock);
    pool_buf_t **at = &p->free[c];
    while (*at != NULL && ((*at)->device != device || (*at)->size != size)) {
        at = &(*at)->next;
    }
    pool_buf_t *b = *at;
    if (b != NULL) {
        *at = b->next;
        p->cached -= size;
    }
    p->dev = dev;
    pthread_mutex_unlock(&pool_lock);
    if (b != NULL) {
        *ptr = b->ptr;
        free(b);
        return COLLAR_OK;
    }
    collar_status_t st = pool_alloc(dev, scratch, size, ptr);
    if (st != COLLAR_OK) {
        /* (The callers fall back, and say so once.) */
        collar_debug(MEM, "cannot allocate %zu bytes of %s memory on %s: %s",
                     size, p->what, dev->name, collar_status_string(st));
        return st;
    }
    collar_debug(MEM, "%s buffer of %zu bytes allocated", p->what, size);
    return COLLAR_OK;
}

static void pool_put(int scratch, const collar_device_t *dev, void *ptr,
                     size_t bytes)
{
    pool_t *p = &pools[scratch];
    const size_t size = collar_pool_round(bytes);
    unsigned c = size_class(size);
    pool_buf_t *b = malloc(sizeof(*b));
    const int device = b != NULL ? buf_device(scratch, dev, ptr) : 0;
    pthread_mutex_lock(&pool_lock);
    if (b != NULL && p->cached + size <= collar_cfg.staging_pool) {
        b->ptr = ptr;
        b->size = size;
        b->device = device;
        b->next = p->free[c];
        p->free[c] = b;
        p->cached += size;
        b = NULL;
        ptr = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    free(b);
    if (ptr != NULL) {
        pool_free(dev, scratch, ptr);
    }
}

collar_status_t collar_pool_get(const collar_device_t *dev, size_t bytes,
                                void **ptr)
{
    return pool_get(0, dev, bytes, ptr);
}

void collar_pool_put(const collar_device_t *dev, void *ptr, size_t bytes)
{
    pool_put(0, dev, ptr, bytes);
}

collar_status_t collar_scratch_get(const collar_device_t *dev, size_t bytes,
                                   void **ptr)
{
    return pool_get(1, dev, bytes, ptr);
}

void collar_scratch_put(const collar_device_t *dev, void *ptr, size_t bytes)
{
    pool_put(1, dev, ptr, bytes);
}

void collar_pool_release_all(void)
{
    pthread_mutex_lock(&pool_lock);
    for (int scratch = 0; scratch < 2; scratch++) {
        pool_t *p = &pools[scratch];
        for (unsigned c = 0; c < POOL_CLASSES; c++) {
            while (p->free[c] != NULL) {
                pool_buf_t *b = p->free[c];
                p->free[c] = b->next;
                pool_free(p->dev, scratch, b->ptr);
                free(b);
            }
        }
        p->cached = 0;
    }
    pthread_mutex_unlock(&pool_lock);
    /* (Drain memory still mapped keeps the block.) */
    pthread_mutex_lock(&drain_lock);
    if (drain_fd >= 0) {
        close(drain_fd);
        drain_fd = -1;
    }
    pthread_mutex_unlock(&drain_lock);
}

/* ------------------------------------------------ the pageable fallback */

/* The fallback as the log and the statistics name it. */
static const char staging_why[] = "pinned staging -> pageable host memory: "
                                  "no pinned memory to be had";

void collar_staging_count_fallback(void)
{
    collar_stats_fallback(staging_why);
}

collar_status_t collar_staging_get(const collar_device_t *dev, size_t bytes,
                                   void **ptr, collar_staging_kind_t *kind)
{
    if (collar_pool_get(dev, bytes, ptr) == COLLAR_OK) {
        *kind = COLLAR_STAGING_PINNED;
        return COLLAR_OK;
    }
    if (collar_fault(COLLAR_FAULT_HEAP)
        || posix_memalign(ptr, 64, bytes ? bytes : 1) != 0) {
        *ptr = NULL;
        collar_debug(MEM, "no pinned and no pageable host memory for %zu bytes",
                     bytes);
        return COLLAR_ERR_NO_MEMORY;
    }
    *kind = COLLAR_STAGING_HEAP;
    if (collar_log_first("staging-pageable")) {
        collar_info(MEM, "fallback %s (%zu bytes on %s): the data is staged "
                    "there, copies are slower (said once per process)",
                    staging_why, bytes, dev->name);
    } else {
        collar_debug(MEM, "%zu bytes of pageable staging memory", bytes);
    }
    return COLLAR_OK;
}

void collar_staging_put(const collar_device_t *dev, void *ptr, size_t bytes,
                        collar_staging_kind_t kind)
{
    switch (kind) {
    case COLLAR_STAGING_PINNED:
        collar_pool_put(dev, ptr, bytes);
        break;
    case COLLAR_STAGING_HEAP:
        free(ptr);
        break;
    case COLLAR_STAGING_DRAIN:
        collar_drain_put(ptr, bytes);
        break;
    }
}

/* -------------------------------------------------------- drain memory */

/*
 * One block of shared memory (a memfd, allocated in full when first
 * needed, kept until MPI_Finalize) mapped over and over across the
 * request: whatever a drain's size, it costs one block of memory, the
 * pages of its last DRAIN_TAIL bytes, and address space of its size.
 * Those last pages are private memory of their own: a staged allreduce
 * carries its status agreement as the last element of the message
 * (collar_sched_fold_agree), which must reach the other ranks as written,
 * never overwritten through another view of the block.
 */
#define DRAIN_BLOCK ((size_t)2 << 20)
#define DRAIN_TAIL  ((size_t)8192)

static int drain_block(void)
{
    pthread_mutex_lock(&drain_lock);
    if (drain_fd < 0) {
        int fd = memfd_create("collar-drain", MFD_CLOEXEC);
        /* Its pages now, not at a first write (where tmpfs would answer a
         * shortage with SIGBUS). */
        if (fd >= 0 && (ftruncate(fd, (off_t)DRAIN_BLOCK) != 0
                        || fallocate(fd, 0, 0, (off_t)DRAIN_BLOCK) != 0)) {
            close(fd);
            fd = -1;
        }
        if (fd < 0) {
            collar_debug(MEM, "no drain memory: %m");
        }
        drain_fd = fd;
    }
    const int fd = drain_fd;
    pthread_mutex_unlock(&drain_lock);
    return fd;
}

static size_t page_round(size_t bytes, size_t page)
{
    return bytes > SIZE_MAX - page ? 0 : (bytes + page - 1) / page * page;
}

void *collar_drain_get(size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t total = page_round(bytes ? bytes : 1, page);
    const int fd = total != 0 ? drain_block() : -1;
    if (fd < 0) {
        return NULL;
    }
    /* The address space first (no memory behind it), then the views. */
    char *base = mmap(NULL, total, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        return NULL;
    }
    /* The pages that hold the last DRAIN_TAIL bytes are private. */
    const size_t shared = bytes > DRAIN_TAIL ? (bytes - DRAIN_TAIL) / page * page : 0;
    int ok = 1;
    for (size_t off = 0; ok && off < shared; off += DRAIN_BLOCK) {
        const size_t len = shared - off < DRAIN_BLOCK ? shared - off : DRAIN_BLOCK;
        ok = mmap(base + off, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                  fd, 0) != MAP_FAILED;
    }
    if (ok) {
        ok = mmap(base + shared, total - shared, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED;
    }
    if (!ok) {
        collar_debug(MEM, "cannot map %zu bytes of drain memory: %m", total);
        munmap(base, total);
        return NULL;
    }
    return base;
}

void collar_drain_put(void *ptr, size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (ptr != NULL) {
        munmap(ptr, page_round(bytes ? bytes : 1, page));
    }
}
