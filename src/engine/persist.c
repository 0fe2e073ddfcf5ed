/*
 * collar - persistent collectives that collar runs itself.
 *
 * MPI_Allreduce_init on device memory, and the other persistent collectives
 * whose device buffers collar stages, return a request the application
 * keeps across MPI_Start calls.  No kind of request the MPI library lets a
 * layer above it complete is persistent (generalized requests are freed
 * once complete), so the handle is a persistent receive of an empty
 * message, posted on collar's own duplicate of MPI_COMM_SELF with a tag of
 * its own.  That duplicate is the one collar made at MPI_Init
 * (collar_comm_probe), whose point-to-point messages are these alone: a
 * persistent init takes no new communicator (no context id), which an
 * application that has used up its communicators may not have to give
 * (MPICH has 2048 a process), where the MPI library's own persistent
 * collective takes none either.  Only where MPI_Init gave collar none is
 * one made, at the first init, its failure heard by no error handler but
 * the init's own: without a handle collar has no persistent request to
 * give, and the library's on the host copies would leave the device
 * buffers as they were (colls.c, op_pinit).
 *
 *   MPI_Start(h)     PMPI_Start(h) posts the receive; collar starts its
 *                    operation (copies in, starts its schedule: the
 *                    library's collective on the host copies, then the
 *                    copies back)
 *   ...              collar's progress runs the schedule
 *   finished         collar sends the empty message to itself: the
 *                    receive, and so the application's request, completes
 *   MPI_Wait(h) ...  the MPI library's own completion of h
 *
 * The message is sent only once the copies back are done, and only
 * collar's code does them: collar's completion calls (the Wait/Test family,
 * MPI_Request_get_status; collar's Fortran bindings call them), its
 * blocking point-to-point wrappers, and its progress thread.  So:
 *
 *   - with the progress thread (the MPI library at MPI_THREAD_MULTIPLE:
 *     COLLAR_PROGRESS=auto in a program that asked for it, or thread),
 *     any completion call completes h, including a PMPI_Wait or a
 *     PMPI_Test loop that bypasses collar (a tool, the mpi_f08 binding);
 *   - without it, a completion that bypasses collar never completes h: a
 *     PMPI_Wait waits for ever and a PMPI_Test loop never sees it complete,
 *     although the library's collective is over and no other rank waits
 *     for this one (unless another thread of the rank meanwhile enters
 *     one of collar's calls above).  docs/reliability.md, "Known
 *     limitations".
 *
 * The empty message is matched inside the MPI_Isend that sends it, in the
 * thread that finishes the operation, which with the progress thread is
 * rarely the one that waits.  MPICH 4.0.2's blocking wait looks at its
 * request again only when its progress counter moves, which its progress
 * engine does on events and the library does when it frees a request: a
 * receive matched in another thread's send moves nothing, and the waiting
 * thread would spin for ever on a complete request.  That is the hang
 * that kept these schedules from the progress thread before ("MPICH 4.0.2
 * hangs now and then when the progress thread tests a persistent
 * collective while the application completes others": the application
 * then sat in the library's wait for the handle).  So at
 * MPI_THREAD_MULTIPLE collar then completes and frees a generalized
 * request of its own (wake_waiters_locked); a PMPI_Wait, and the
 * library's wait inside collar's, return (tests/mpi/pmpi_wait.test).
 *
 * The operation's error, if any, is kept with the request in collar's table
 * of requests (request.c) and returned by collar's completion calls, through
 * the operation's communicator's handler (the library's completion says
 * success).
 *
 * Completed in one call with other requests (the library's own persistent
 * collectives, point-to-point and generalized requests): to the library the
 * receive is one of its persistent receives, and its completion calls treat
 * it as such.  What failed was collar's wait around them: while collar has
 * operations outstanding, MPI_Waitall is a loop of progress and a test, and
 * that test was the library's MPI_Testall.  MPICH 4.0's returns
 * MPI_ERR_IN_STATUS when one of its own persistent collective requests
 * (MPI_Barrier_init) is complete, or inactive, next to a request that is
 * not (no status holds an error; the others say MPI_ERR_PENDING), where its
 * MPI_Waitall waits and succeeds: collar's MPI_Waitall returned that error
 * with its operation still running (a broadcast's data not yet copied
 * back).  The test is now collar's (complete.c, test_all): completion
 * asked of MPI_Request_get_status, which changes no request, then the
 * library's MPI_Waitall once every request is complete.  So MPI_Waitall,
 * and MPI_Testall over collar's requests, return what the library's
 * MPI_Waitall returns, once collar's operations among the requests have
 * finished (tests/mpi/persist_mix.test).
 *
 * MPI_Request_free on an active request: collar marks the operation freed
 * and hands MPI_REQUEST_NULL back at once; the library's receive stays
 * posted (and its tag reserved) until the operation finishes, when collar
 * sends the empty message, completes the receive itself (PMPI_Wait: the
 * message is local and already sent) and frees it and its own state.  The
 * library is never asked to free a receive of collar's that is still
 * posted: MPICH 4.0.2 frees the receive's memory at once there, and the
 * empty message then completes whichever request reused it (a send of the
 * next operation: wrong data, or an assertion in MPICH's completion
 * counter).
 */
#include "config.h"
#include "engine_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

/* persist_lock: the list of every persistent operation (for tags and
 * MPI_Finalize), self_comm, and each operation's active and freed. */
static pthread_mutex_t persist_lock = PTHREAD_MUTEX_INITIALIZER;
static collar_persist_t *persist_head;
static atomic_int persist_count;
/* The communicator of the handles: collar_comm_probe's, or one made here
 * (self_owned) where there is none. */
static MPI_Comm self_comm = MPI_COMM_NULL;
static int self_owned;
static int next_tag;
static int tag_ub = 32767;

/* Called with persist_lock held: off the list. */
static void unlink_locked(collar_persist_t *p)
{
    collar_persist_t **pp = &persist_head;
    while (*pp != NULL && *pp != p) {
        pp = &(*pp)->next;
    }
    if (*pp == p) {
        *pp = p->next;
        p->next = NULL;
        atomic_fetch_sub(&persist_count, 1);
    }
}

/* The operation behind `handle` when it is one of collar's persistent
 * operations, else NULL. */
static collar_persist_t *persist_find(MPI_Request handle)
{
    collar_request_t *r = collar_request_find(handle);
    if (r == NULL || r->kind != COLLAR_REQUEST_PERSISTENT) {
        return NULL;
    }
    return (collar_persist_t *)((char *)r - offsetof(collar_persist_t, req));
}

/* The request's last reference: the owner's state goes. */
static void persist_release(collar_request_t *r)
{
    collar_persist_t *p = (collar_persist_t *)((char *)r - offsetof(collar_persist_t, req));
    p->destroy(p);
}

int collar_persist_create(collar_persist_t *p, MPI_Request *request)
{
    pthread_mutex_lock(&persist_lock);
    if (self_comm == MPI_COMM_NULL) {
        self_comm = collar_comm_probe();
        if (self_comm == MPI_COMM_NULL) {
            int rc = collar_comm_dup_quiet(MPI_COMM_SELF, &self_comm);
            if (rc != MPI_SUCCESS) {
                pthread_mutex_unlock(&persist_lock);
                return rc;
            }
            self_owned = 1;
        }
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
        for (const collar_persist_t *q = persist_head; q != NULL; q = q->next) {
            if (q->tag == tag) {
                used = 1;
                break;
            }
        }
        if (!used) {
            break;
        }
    }
    p->tag = tag;
    p->active = 0;
    p->freed = 0;
    MPI_Request handle = MPI_REQUEST_NULL;
    int rc = PMPI_Recv_init(NULL, 0, MPI_BYTE, 0, tag, self_comm, &handle);
    if (rc != MPI_SUCCESS) {
        pthread_mutex_unlock(&persist_lock);
        return rc;
    }
    p->next = persist_head;
    persist_head = p;
    atomic_fetch_add(&persist_count, 1);
    pthread_mutex_unlock(&persist_lock);
    /* Outside persist_lock: a handler collar calls while it holds the
     * lock of collar_usercomm_raise may call MPI_Start. */
    collar_request_init(&p->req, COLLAR_REQUEST_PERSISTENT, p->comm,
                        persist_release);
    collar_request_add(&p->req, handle);
    *request = handle;
    return MPI_SUCCESS;
}

/* The generalized request of wake_waiters_locked: complete at once,
 * nothing to free or cancel. */
static int wake_query(void *extra, MPI_Status *status)
{
    (void)extra;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int wake_free(void *extra)
{
    (void)extra;
    return MPI_SUCCESS;
}

static int wake_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/*
 * After the empty message, where another thread may sit in the library's
 * own wait for the handle (see the top of this file): a request made,
 * completed and freed, which moves MPICH's progress counter.  A
 * generalized request: it touches no communicator, no message queue and
 * no other rank.  (A persistent send to MPI_PROC_NULL, made and freed
 * unstarted, did the same, but MPICH 4.0.2 and Intel MPI 2021 at
 * MPI_THREAD_MULTIPLE then lost the next persistent allreduce made after
 * a nonblocking all-to-all on three ranks: every rank waited for ever;
 * tests/mpi/persist.test.)  Called with persist_lock held.
 */
static void wake_waiters_locked(void)
{
    if (!collar_engine.thread_multiple) {
        return;
    }
    MPI_Request r = MPI_REQUEST_NULL;
    if (PMPI_Grequest_start(wake_query, wake_free, wake_cancel, NULL, &r)
        == MPI_SUCCESS) {
        PMPI_Grequest_complete(r);
        PMPI_Request_free(&r);
    }
}

/* The schedule's on_finish: complete the application's request. */
void collar_persist_finished(collar_persist_t *p, int error)
{
    pthread_mutex_lock(&persist_lock);
    collar_trace(COLL, "persistent %s (tag %d): finished, error %d",
                 collar_coll_name(p->coll), p->tag, error);
    collar_request_set_error(&p->req, error);
    p->active = 0;
    const int freed = p->freed;
    if (freed) {
        unlink_locked(p);   /* listed until now: its tag stays reserved */
    }
    MPI_Request sreq = MPI_REQUEST_NULL;
    if (PMPI_Isend(NULL, 0, MPI_BYTE, 0, p->tag, self_comm, &sreq) == MPI_SUCCESS) {
        PMPI_Request_free(&sreq);
        if (!freed) {
            wake_waiters_locked();
        }
    } else {
        collar_error(COLL, "cannot complete a persistent %s request",
                     collar_coll_name(p->coll));
    }
    pthread_mutex_unlock(&persist_lock);
    if (freed) {
        /* The application freed the request while it was active: collar
         * completes and frees the receive (see the top of this file). */
        MPI_Request handle = p->req.handle;
        PMPI_Wait(&handle, MPI_STATUS_IGNORE);
        PMPI_Request_free(&handle);
        collar_request_unref(&p->req);
    }
}

static int start_one(MPI_Request *request)
{
    collar_persist_t *p = persist_find(*request);
    if (p == NULL) {
        return PMPI_Start(request);
    }
    if (p->active) {
        /* Erroneous (an active request started again): the library's
         * answer for its own request in that state. */
        return PMPI_Start(request);
    }
    int rc = PMPI_Start(request);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    p->active = 1;
    collar_request_set_error(&p->req, MPI_SUCCESS);
    collar_trace(COLL, "persistent %s (tag %d): start", collar_coll_name(p->coll), p->tag);
    p->start(p);
    return MPI_SUCCESS;
}

int collar_persist_start(MPI_Request *request)
{
    if (atomic_load_explicit(&persist_count, memory_order_relaxed) == 0
        || request == NULL) {
        return PMPI_Start(request);
    }
    return start_one(request);
}

int collar_persist_startall(int count, MPI_Request requests[])
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

int collar_persist_request_free(MPI_Request *request)
{
    collar_persist_t *p = request != NULL && atomic_load_explicit(
                              &persist_count, memory_order_relaxed) != 0
                          ? persist_find(*request) : NULL;
    if (p == NULL) {
        return PMPI_Request_free(request);
    }
    collar_request_remove(&p->req);
    pthread_mutex_lock(&persist_lock);
    if (p->active) {
        /* collar_persist_finished frees the receive and collar's state when
         * the operation ends; `p` may be gone once the lock is released. */
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
    int rc = PMPI_Wait(request, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Request_free(request);
    }
    *request = MPI_REQUEST_NULL;
    collar_request_unref(&p->req);
    return rc;
}

void collar_persist_finalize(void)
{
    pthread_mutex_lock(&persist_lock);
    while (persist_head != NULL) {
        collar_persist_t *p = persist_head;
        unlink_locked(p);
        collar_request_remove(&p->req);
        if (!p->active) {
            MPI_Request handle = p->req.handle;
            PMPI_Request_free(&handle);
            pthread_mutex_unlock(&persist_lock);
            collar_request_unref(&p->req);
            pthread_mutex_lock(&persist_lock);
        }
    }
    if (self_owned) {
        PMPI_Comm_free(&self_comm);   /* (collar_comm_probe's: comm.c frees it) */
        self_owned = 0;
    }
    self_comm = MPI_COMM_NULL;
    pthread_mutex_unlock(&persist_lock);
}
