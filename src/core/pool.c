/*
 * collar - the staging pools.
 *
 * Pinned host buffers and device scratch are slow to allocate (driver calls
 * that map pages), so they are kept for reuse: one free list per size class
 * and per kind (device scratch also per GPU: the
 * backend's scratch_device), at most COLLAR_STAGING_POOL bytes kept in each
 * pool.  A buffer that would exceed the bound is freed when
 * returned.  Everything is freed at MPI_Finalize.
 */
#include "config.h"
#include "core.h"

#include <pthread.h>
#include <stdlib.h>

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
        collar_warn(MEM, "cannot allocate %zu bytes of %s memory on %s: %s",
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
}
