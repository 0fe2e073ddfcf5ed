/*
 * collar - the staging pool.
 *
 * Pinned host buffers are slow to allocate (a driver call that maps pages),
 * so they are kept for reuse: one free list per power-of-two size class, at
 * most COLLAR_STAGING_POOL bytes kept in all.  A buffer that would exceed the
 * bound is freed when returned.  Everything is freed at MPI_Finalize.
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

static pthread_mutex_t        pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_buf_t            *pool_free[POOL_CLASSES];
static size_t                 pool_cached;
static const collar_device_t *pool_dev;

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

collar_status_t collar_pool_get(const collar_device_t *dev, size_t bytes,
                                void **ptr)
{
    if (bytes > class_bytes(POOL_CLASSES - 1)) {
        return COLLAR_ERR_NO_MEMORY;
    }
    unsigned c = size_class(bytes);
    pthread_mutex_lock(&pool_lock);
    pool_buf_t *b = pool_free[c];
    if (b != NULL) {
        pool_free[c] = b->next;
        pool_cached -= class_bytes(c);
    }
    pool_dev = dev;
    pthread_mutex_unlock(&pool_lock);
    if (b != NULL) {
        *ptr = b->ptr;
        free(b);
        return COLLAR_OK;
    }
    collar_status_t st = dev->host_alloc(class_bytes(c), ptr);
    if (st != COLLAR_OK) {
        collar_warn(MEM, "cannot allocate %zu bytes of staging memory on %s: %s",
                    class_bytes(c), dev->name, collar_status_string(st));
        return st;
    }
    collar_debug(MEM, "staging buffer of %zu bytes allocated", class_bytes(c));
    return COLLAR_OK;
}

void collar_pool_put(const collar_device_t *dev, void *ptr, size_t bytes)
{
    unsigned c = size_class(bytes);
    pool_buf_t *b = malloc(sizeof(*b));
    pthread_mutex_lock(&pool_lock);
    if (b != NULL && pool_cached + class_bytes(c) <= collar_cfg.staging_pool) {
        b->ptr = ptr;
        b->next = pool_free[c];
        pool_free[c] = b;
        pool_cached += class_bytes(c);
        b = NULL;
        ptr = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    free(b);
    if (ptr != NULL) {
        dev->host_free(ptr);
    }
}

void collar_pool_release_all(void)
{
    pthread_mutex_lock(&pool_lock);
    for (unsigned c = 0; c < POOL_CLASSES; c++) {
        while (pool_free[c] != NULL) {
            pool_buf_t *b = pool_free[c];
            pool_free[c] = b->next;
            pool_dev->host_free(b->ptr);
            free(b);
        }
    }
    pool_cached = 0;
    pthread_mutex_unlock(&pool_lock);
}
