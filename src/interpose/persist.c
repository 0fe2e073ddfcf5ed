/*
 * collar - persistent collectives that collar runs itself.
 *
 * MPI_Allreduce_init on device memory, and the other persistent collectives
 * whose device buffers collar stages, return a request the application
 * keeps across MPI_Start calls.  No kind of request the MPI library lets a
 * layer above it complete is persistent (generalized requests are freed
 * once complete), so the handle is a persistent receive of an empty
 * message, posted on collar's own duplicate of MPI_COMM_SELF with a tag of
 * its own:
 *
 *   MPI_Start(h)     PMPI_Start(h) posts the receive; collar starts its
 *                    operation (copies in, starts its schedule)
 *   ...              collar's progress (the progress thread, the waits)
 *   finished         collar sends the empty message to itself: the
 *                    receive, and so the application's request, completes
 *   MPI_Wait(h) ...  the MPI library's own completion of h, whichever
 *                    completion call the application uses (any of the
 *                    Wait/Test family, MPI_Request_get_status, a Fortran
 *                    binding that calls PMPI_Wait directly)
 *
 * The operation's error, if any, is returned by collar's MPI_Wait, MPI_Test,
 * MPI_Waitall and MPI_Testall (the library's completion says success).
 * MPI_Request_free on an active request: collar marks the operation freed
 * and hands MPI_REQUEST_NULL back at once; the library's receive stays
 * posted until the operation finishes, when collar sends the empty message,
 * completes the receive itself (PMPI_Wait: the message is local and already
 * sent) and frees it and its own state.  The library never frees a receive
 * of collar's that is still posted: MPICH 4.0.2 frees the receive's memory
 * at once there, and the empty message then completes whichever request
 * reused it (a send of the next operation, seen as wrong data and an
 * assertion in MPICH's completion counter).
 */
#include "config.h"
#include "interpose.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PERSIST_BUCKETS 64

static pthread_mutex_t persist_lock = PTHREAD_MUTEX_INITIALIZER;
static collar_persist_t *buckets[PERSIST_BUCKETS];
static atomic_int persist_count;
static MPI_Comm self_comm = MPI_COMM_NULL;
static int next_tag;
static int tag_ub = 32767;

static unsigned bucket_of(MPI_Request handle)
{
    uint64_t key = 0;
    memcpy(&key, &handle, sizeof(handle) < sizeof(key) ? sizeof(handle) : sizeof(key));
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 32;
    return (unsigned)(key % PERSIST_BUCKETS);
}

/* Called with persist_lock held. */
static collar_persist_t *lookup_locked(MPI_Request handle)
{
    for (collar_persist_t *p = buckets[bucket_of(handle)]; p != NULL; p = p->next) {
        if (p->handle == handle) {
            return p;
        }
    }
    return NULL;
}

/* Called with persist_lock held. */
static void unlink_locked(collar_persist_t *p)
{
    collar_persist_t **pp = &buckets[bucket_of(p->handle)];
    while (*pp != NULL && *pp != p) {
        pp = &(*pp)->next;
    }
    if (*pp == p) {
        *pp = p->next;
        p->next = NULL;
        atomic_fetch_sub(&persist_count, 1);
    }
}

collar_persist_t *collar_persist_find(MPI_Request handle)
{
    if (atomic_load_explicit(&persist_count, memory_order_relaxed) == 0
        || handle == MPI_REQUEST_NULL) {
        return NULL;
    }
    pthread_mutex_lock(&persist_lock);
    collar_persist_t *p = lookup_locked(handle);
    if (p != NULL && p->freed) {
        p = NULL;   /* the application's handle is MPI_REQUEST_NULL now */
    }
    pthread_mutex_unlock(&persist_lock);
    return p;
}

int collar_persist_create(collar_persist_t *p, MPI_Request *request)
{
    pthread_mutex_lock(&persist_lock);
    if (self_comm == MPI_COMM_NULL) {
        int rc = PMPI_Comm_dup(MPI_COMM_SELF, &self_comm);
        if (rc != MPI_SUCCESS) {
            pthread_mutex_unlock(&persist_lock);
            return rc;
        }
        PMPI_Comm_set_errhandler(self_comm, MPI_ERRORS_RETURN);
        int *ub = NULL, flag = 0;
        if (PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS
            && flag && ub != NULL && *ub > 0) {
            tag_ub = *ub;
        }
    }
    /* A tag no live operation uses (there are far fewer than tag_ub). */
    int tag = next_tag;
    for (int tries = 0; tries <= tag_ub; tries++) {
        tag = next_tag;
        next_tag = next_tag >= tag_ub ? 0 : next_tag + 1;
        int used = 0;
        for (int b = 0; b < PERSIST_BUCKETS && !used; b++) {
            for (const collar_persist_t *q = buckets[b]; q != NULL; q = q->next) {
                if (q->tag == tag) {
                    used = 1;
                    break;
                }
            }
        }
        if (!used) {
            break;
        }
    }
    p->tag = tag;
    p->active = 0;
    p->freed = 0;
    p->error = MPI_SUCCESS;
    int rc = PMPI_Recv_init(NULL, 0, MPI_BYTE, 0, tag, self_comm, &p->handle);
    if (rc != MPI_SUCCESS) {
        pthread_mutex_unlock(&persist_lock);
        return rc;
    }
    unsigned b = bucket_of(p->handle);
    p->next = buckets[b];
    buckets[b] = p;
    atomic_fetch_add(&persist_count, 1);
    pthread_mutex_unlock(&persist_lock);
    *request = p->handle;
    return MPI_SUCCESS;
}

/* The schedule's on_finish: complete the application's request. */
void collar_persist_finished(collar_persist_t *p, int error)
{
    pthread_mutex_lock(&persist_lock);
    collar_trace(COLL, "persistent %s (tag %d): finished, error %d",
                 collar_coll_name(p->coll), p->tag, error);
    p->error = error;
    p->active = 0;
    const int freed = p->freed;
    if (freed) {
        unlink_locked(p);   /* kept until now: its tag stays reserved */
    }
    MPI_Request sreq = MPI_REQUEST_NULL;
    if (PMPI_Isend(NULL, 0, MPI_BYTE, 0, p->tag, self_comm, &sreq) == MPI_SUCCESS) {
        PMPI_Request_free(&sreq);
    } else {
        collar_error(COLL, "cannot complete a persistent %s request",
                     collar_coll_name(p->coll));
    }
    pthread_mutex_unlock(&persist_lock);
    if (freed) {
        /* The application freed the request while it was active: collar
         * completes and frees the receive (see the top of this file). */
        PMPI_Wait(&p->handle, MPI_STATUS_IGNORE);
        PMPI_Request_free(&p->handle);
        p->destroy(p);
    }
}

static int start_one(MPI_Request *request)
{
    collar_persist_t *p = collar_persist_find(*request);
    if (p == NULL) {
        return PMPI_Start(request);
    }
    if (p->active) {
        /* Erroneous (an active request started again): the library's
         * answer for its own request in that state. */
        return PMPI_Start(request);
    }
    int rc = PMPI_Start(&p->handle);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    p->active = 1;
    p->error = MPI_SUCCESS;
    collar_trace(COLL, "persistent %s (tag %d): start", collar_coll_name(p->coll), p->tag);
    p->start(p);
    return MPI_SUCCESS;
}

COLLAR_EXPORT int MPI_Start(MPI_Request *request)
{
    if (atomic_load_explicit(&persist_count, memory_order_relaxed) == 0
        || request == NULL) {
        return PMPI_Start(request);
    }
    return start_one(request);
}

COLLAR_EXPORT int MPI_Startall(int count, MPI_Request requests[])
{
    if (atomic_load_explicit(&persist_count, memory_order_relaxed) == 0
        || requests == NULL) {
        return PMPI_Startall(count, requests);
    }
    for (int i = 0; i < count; i++) {
        int rc = start_one(&requests[i]);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
    }
    return MPI_SUCCESS;
}

COLLAR_EXPORT int MPI_Request_free(MPI_Request *request)
{
    collar_persist_t *p = request != NULL ? collar_persist_find(*request) : NULL;
    if (p == NULL) {
        return PMPI_Request_free(request);
    }
    pthread_mutex_lock(&persist_lock);
    if (p->active) {
        /* collar_persist_finished frees the receive and collar's state when
         * the operation ends; `p` may be gone once the lock is released.
         * It stays listed until then, so that no new operation takes its
         * tag while its receive is posted. */
        p->freed = 1;
        pthread_mutex_unlock(&persist_lock);
        *request = MPI_REQUEST_NULL;
        return MPI_SUCCESS;
    }
    unlink_locked(p);
    pthread_mutex_unlock(&persist_lock);
    /* Inactive for collar, but the application may not have completed the
     * last start: its empty message is sent, so this wait returns at once
     * (and at once for a request never started or already completed). */
    int rc = PMPI_Wait(&p->handle, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Request_free(&p->handle);
    }
    *request = MPI_REQUEST_NULL;
    p->destroy(p);
    return rc;
}

void collar_persist_finalize(void)
{
    pthread_mutex_lock(&persist_lock);
    for (int b = 0; b < PERSIST_BUCKETS; b++) {
        while (buckets[b] != NULL) {
            collar_persist_t *p = buckets[b];
            unlink_locked(p);
            if (!p->active) {
                PMPI_Request_free(&p->handle);
                pthread_mutex_unlock(&persist_lock);
                p->destroy(p);
                pthread_mutex_lock(&persist_lock);
            }
        }
    }
    if (self_comm != MPI_COMM_NULL) {
        PMPI_Comm_free(&self_comm);
    }
    pthread_mutex_unlock(&persist_lock);
}
