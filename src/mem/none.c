/*
 * collar - the `none` device backend: no device, every buffer is host
 * memory, copies and reductions happen at once on the calling thread.
 */
#include "config.h"
#include "mem.h"

#include <stdlib.h>
#include <string.h>

static collar_status_t none_init(void)
{
    return COLLAR_OK;
}

static void none_finalize(void)
{
}

static collar_status_t none_mem_query(const void *ptr, collar_mem_kind_t *kind)
{
    (void)ptr;
    *kind = COLLAR_MEM_HOST;
    return COLLAR_OK;
}

static collar_status_t none_host_alloc(size_t bytes, void **ptr)
{
    if (posix_memalign(ptr, 64, bytes ? bytes : 1) != 0) {
        return COLLAR_ERR_NO_MEMORY;
    }
    return COLLAR_OK;
}

static void none_host_free(void *ptr)
{
    free(ptr);
}

static collar_status_t none_dev_alloc(size_t bytes, void **ptr)
{
    return none_host_alloc(bytes, ptr);
}

static void none_dev_free(void *ptr)
{
    free(ptr);
}

static int none_nstreams(void)
{
    return 1;
}

static collar_status_t none_copy_async(void *dst, const void *src, size_t bytes,
                                       int stream, collar_event_t *done)
{
    (void)stream;
    if (bytes != 0 && dst != src) {
        memmove(dst, src, bytes);
    }
    if (done != NULL) {   /* NULL: nothing to wait for, it is done */
        done->stream = NULL;
        done->ticket = 0;
    }
    return COLLAR_OK;
}

static collar_status_t none_reduce_async(void *inout, const void *in,
                                         size_t count, collar_dtype_t dt,
                                         collar_op_t op, int stream,
                                         collar_event_t *done)
{
    (void)stream;
    if (done != NULL) {
        done->stream = NULL;
        done->ticket = 0;
    }
    return collar_reduce_host(inout, in, count, dt, op) == 0
           ? COLLAR_OK : COLLAR_ERR_UNSUPPORTED;
}

static collar_status_t none_event_query(collar_event_t *ev)
{
    (void)ev;
    return COLLAR_OK;
}

static collar_status_t none_order_after_caller(void)
{
    return COLLAR_OK;
}

const collar_device_t collar_device_none = {
    .name               = "none",
    .init               = none_init,
    .finalize           = none_finalize,
    .mem_query          = none_mem_query,
    .host_alloc         = none_host_alloc,
    .host_free          = none_host_free,
    .dev_alloc          = none_dev_alloc,
    .dev_free           = none_dev_free,
    .nstreams           = none_nstreams,
    .copy_async         = none_copy_async,
    .reduce_supported   = collar_reduce_supported,
    .reduce_async       = none_reduce_async,
    .event_query        = none_event_query,
    .order_after_caller = none_order_after_caller,
};
