/*
 * collar - the requests collar completes itself, found by handle.
 *
 * A nonblocking operation collar runs gives the application a generalized
 * request (progress.c); a persistent one, a persistent receive that collar
 * completes (persist.c).  The MPI library completes either kind, and for
 * both it knows nothing of the operation's communicator: were the library
 * to report the operation's error, it would raise it on MPI_COMM_WORLD or
 * MPI_COMM_SELF.  So the library's completion says success, and collar's
 * completion calls (complete.c) report the error the way MPI reports that
 * of its own requests: through the error handler of the operation's
 * communicator, once, as the call's return code or in the statuses.
 *
 * Every such request is in one table, keyed by its handle, from the moment
 * the application gets it until the library frees it (a generalized
 * request: its free_fn; a persistent one: MPI_Request_free).  A completion
 * call first holds collar's requests among its arguments (collar_watch_begin:
 * a reference, and `watched`); then the library completes them; then collar
 * reads the error of each one the call completed from what it holds.  The
 * lookup is made while the application's handle still names the request:
 * once the library has freed it, it may hand the same handle out again for
 * another request (of another thread), and a lookup by handle then would
 * find that one.
 *
 * Cost: with none of collar's requests in existence, collar_watch_begin is
 * one atomic load.  Otherwise one lock and one hash lookup per request of
 * the call.
 */
#include "config.h"
#include "engine_int.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUEST_BUCKETS_MIN 64

static pthread_mutex_t    table_lock = PTHREAD_MUTEX_INITIALIZER;
static collar_request_t  *table_min[REQUEST_BUCKETS_MIN];
static collar_request_t **table = table_min;
static size_t             table_size = REQUEST_BUCKETS_MIN;   /* a power of 2 */
static atomic_int         table_count;

static size_t bucket_of(MPI_Request handle, size_t size)
{
    uint64_t key = 0;
    memcpy(&key, &handle, sizeof(handle) < sizeof(key) ? sizeof(handle) : sizeof(key));
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 32;
    return (size_t)(key & (size - 1));
}

/* Called with table_lock held: twice the buckets when the chains grow
 * long; on no memory the table stays as it is (longer chains). */
static void table_grow_locked(void)
{
    const size_t size = table_size * 2;
    collar_request_t **grown = calloc(size, sizeof(*grown));
    if (grown == NULL) {
        return;
    }
    for (size_t b = 0; b < table_size; b++) {
        while (table[b] != NULL) {
            collar_request_t *r = table[b];
            table[b] = r->next;
            const size_t nb = bucket_of(r->handle, size);
            r->next = grown[nb];
            grown[nb] = r;
        }
    }
    if (table != table_min) {
        free(table);
    }
    table = grown;
    table_size = size;
}

/* Called with table_lock held. */
static collar_request_t *lookup_locked(MPI_Request handle)
{
    for (collar_request_t *r = table[bucket_of(handle, table_size)]; r != NULL;
         r = r->next) {
        if (r->handle == handle) {
            return r;
        }
    }
    return NULL;
}

void collar_request_init(collar_request_t *r, collar_request_kind_t kind,
                         MPI_Comm comm, void (*release)(collar_request_t *r))
{
    r->kind = kind;
    r->handle = MPI_REQUEST_NULL;
    r->comm = comm;
    r->ucomm = collar_usercomm_get(comm);
    atomic_init(&r->error, MPI_SUCCESS);
    atomic_init(&r->watched, 0);
    atomic_init(&r->refs, 1);
    r->release = release;
    r->next = NULL;
    r->listed = 0;
}

void collar_request_ref(collar_request_t *r)
{
    atomic_fetch_add(&r->refs, 1);
}

void collar_request_unref(collar_request_t *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1) {
        return;
    }
    collar_usercomm_t *ucomm = r->ucomm;
    r->release(r);
    collar_usercomm_unref(ucomm);
}

void collar_request_add(collar_request_t *r, MPI_Request handle)
{
    pthread_mutex_lock(&table_lock);
    if ((size_t)atomic_load(&table_count) >= 2 * table_size) {
        table_grow_locked();
    }
    r->handle = handle;
    const size_t b = bucket_of(handle, table_size);
    r->next = table[b];
    table[b] = r;
    r->listed = 1;
    atomic_fetch_add(&table_count, 1);
    pthread_mutex_unlock(&table_lock);
}

void collar_request_remove(collar_request_t *r)
{
    pthread_mutex_lock(&table_lock);
    if (r->listed) {
        collar_request_t **pp = &table[bucket_of(r->handle, table_size)];
        while (*pp != NULL && *pp != r) {
            pp = &(*pp)->next;
        }
        if (*pp == r) {
            *pp = r->next;
        }
        r->next = NULL;
        r->listed = 0;
        atomic_fetch_sub(&table_count, 1);
    }
    pthread_mutex_unlock(&table_lock);
}

collar_request_t *collar_request_find(MPI_Request handle)
{
    if (atomic_load_explicit(&table_count, memory_order_relaxed) == 0
        || handle == MPI_REQUEST_NULL) {
        return NULL;
    }
    pthread_mutex_lock(&table_lock);
    collar_request_t *r = lookup_locked(handle);
    pthread_mutex_unlock(&table_lock);
    return r;
}

void collar_request_set_error(collar_request_t *r, int error)
{
    atomic_store(&r->error, error);
}

int collar_request_is_watched(const collar_request_t *r)
{
    return atomic_load(&r->watched) > 0;
}

/* ------------------------------------------------------------ completion */

void collar_watch_begin(collar_watch_t *w, int count, const MPI_Request requests[])
{
    w->count = 0;
    w->found = 0;
    w->reqs = w->local;
    if (atomic_load_explicit(&table_count, memory_order_relaxed) == 0
        || requests == NULL || count <= 0) {
        return;
    }
    if ((size_t)count > sizeof(w->local) / sizeof(w->local[0])) {
        w->reqs = malloc((size_t)count * sizeof(*w->reqs));
        if (w->reqs == NULL) {
            /* Unwatched, the requests' errors are the library's to
             * report (progress.c: greq_query_fn). */
            collar_warn(COLL, "no memory to look up %d requests; errors of "
                        "collar's operations among them go through the MPI "
                        "library's handler", count);
            w->reqs = w->local;
            return;
        }
    }
    w->count = count;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < count; i++) {
        collar_request_t *r = requests[i] == MPI_REQUEST_NULL
                              ? NULL : lookup_locked(requests[i]);
        if (r != NULL) {
            collar_request_ref(r);
            atomic_fetch_add(&r->watched, 1);
            w->found++;
        }
        w->reqs[i] = r;
    }
    pthread_mutex_unlock(&table_lock);
    if (w->found == 0) {
        /* Nothing to hold: the wrappers skip collar_watch_end then. */
        collar_watch_end(w);
    }
}

void collar_watch_end(collar_watch_t *w)
{
    for (int i = 0; i < w->count && w->found > 0; i++) {
        collar_request_t *r = w->reqs[i];
        if (r != NULL) {
            atomic_fetch_sub(&r->watched, 1);
            collar_request_unref(r);
        }
    }
    if (w->reqs != w->local) {
        free(w->reqs);
    }
    w->reqs = w->local;
    w->count = 0;
    w->found = 0;
}

int collar_watch_is_collar(const collar_watch_t *w, int i)
{
    return w->found > 0 && i >= 0 && i < w->count && w->reqs[i] != NULL;
}

int collar_watch_take(collar_watch_t *w, int i)
{
    if (!collar_watch_is_collar(w, i)) {
        return MPI_SUCCESS;
    }
    collar_request_t *r = w->reqs[i];
    const int error = atomic_exchange(&r->error, MPI_SUCCESS);
    if (error != MPI_SUCCESS) {
        collar_usercomm_raise(r->ucomm, r->comm, error);
    }
    return error;
}

int collar_watch_peek(const collar_watch_t *w, int i)
{
    if (!collar_watch_is_collar(w, i)) {
        return MPI_SUCCESS;
    }
    return atomic_load(&w->reqs[i]->error);
}
