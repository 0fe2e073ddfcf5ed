/*
 * collar - the staging pools.
 *
 * Pinned host buffers and device scratch are slow to allocate (driver calls
 * that map pages), so they are kept for reuse: one free list per
 * power-of-two size class and per kind, at most COLLAR_STAGING_POOL bytes
 * kept in each pool.  A buffer that would exceed the bound is freed when
 * returned.  Everything is freed at MPI_Finalize.
 */
#include "config.h"
#include "core.h"

#include <pthread.h>
#include <stdlib.h>

#define POOL_MIN_SHIFT 12   /* 4 KiB */
#define POOL_CLASSES   48

typedef struct pool_buf {
    struct pool_buf *next;
    void            *ptr;
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

static unsigned size_class(size_t bytes)
{
    unsigned c = 0;
    while (c + 1 < POOL_CLASSES && ((size_t)1 << (c + POOL_MIN_SHIFT)) < bytes) {
        c++;
    }
    return c;
}

static size_t class_bytes(unsigned c)
{
    return (size_t)1 << (c + POOL_MIN_SHIFT);
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

static collar_status_t pool_get(int scratch, const collar_device_t *dev,
                                size_t bytes, void **ptr)
{
    if (bytes > class_bytes(POOL_CLASSES - 1)) {
        return COLLAR_ERR_NO_MEMORY;
    }
    pool_t *p = &pools[scratch];
    unsigned c = size_class(bytes);
    pthread_mutex_lock(&pool_lock);
    pool_buf_t *b = p->free[c];
    if (b != NULL) {
        p->free[c] = b->next;
        p->cached -= class_bytes(c);
    }
    p->dev = dev;
    pthread_mutex_unlock(&pool_lock);
    if (b != NULL) {
        *ptr = b->ptr;
        free(b);
        return COLLAR_OK;
    }
    collar_status_t st = pool_alloc(dev, scratch, class_bytes(c), ptr);
    if (st != COLLAR_OK) {
        collar_warn(MEM, "cannot allocate %zu bytes of %s memory on %s: %s",
                    class_bytes(c), p->what, dev->name, collar_status_string(st));
        return st;
    }
    collar_debug(MEM, "%s buffer of %zu bytes allocated", p->what, class_bytes(c));
    return COLLAR_OK;
}

static void pool_put(int scratch, const collar_device_t *dev, void *ptr,
                     size_t bytes)
{
    pool_t *p = &pools[scratch];
    unsigned c = size_class(bytes);
    pool_buf_t *b = malloc(sizeof(*b));
    pthread_mutex_lock(&pool_lock);
    if (b != NULL && p->cached + class_bytes(c) <= collar_cfg.staging_pool) {
        b->ptr = ptr;
        b->next = p->free[c];
        p->free[c] = b;
        p->cached += class_bytes(c);
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
