/*
 * collar - outstanding operations and their progress.
 *
 * Every running schedule (blocking or not) is on one list, in start order.
 * Whichever thread enters collar's progress advances all of them, under one
 * lock, so that internal collectives are issued in start order per
 * communicator on every rank.  A finished nonblocking operation completes its
 * generalized request; a finished blocking one is picked up by its caller.
 *
 * Progress comes from the MPI_Wait* / MPI_Test* wrappers, from the
 * blocking point-to-point wrappers (blocking.c; not with COLLAR_PROGRESS=
 * wait), and from a progress thread where the MPI library gives
 * MPI_THREAD_MULTIPLE (COLLAR_PROGRESS=auto: when the application asked for
 * it; thread: collar asks for it when a device backend can be active).  The
 * thread is what keeps MPI's progress rule in every call: a rank blocked in
 * MPI_Barrier, a Fortran PMPI_Wait or any other call collar does not see
 * still issues its next chunk or segment, so the peers that wait for it
 * finish.  It sleeps on a condition variable while
 * nothing is outstanding (no core spins when idle); while operations are
 * outstanding it makes a pass every COLLAR_PROGRESS_INTERVAL microseconds.
 * The application's own waits still progress at full speed: the thread is
 * the backstop, not the engine.
 */
#include "config.h"
#include "engine_int.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <stdatomic.h>
#include <stdlib.h>

/* The state behind a generalized request is its entry in collar's table of
 * requests (request.c), with two references at first: the schedule's
 * (dropped when it completes the request) and MPI's (dropped in free_fn,
 * which also takes it out of the table). */
typedef collar_request_t greq_state_t;

static pthread_mutex_t prog_lock = PTHREAD_MUTEX_INITIALIZER;
static collar_sched_t *run_head;
static collar_sched_t *run_tail;
static atomic_int      run_count;

/* The progress thread: started before the first agreement that counts on
 * it (collar_progress_thread_ready), woken by run_add. */
static pthread_mutex_t thr_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  thr_cond = PTHREAD_COND_INITIALIZER;
static int             thr_enabled;   /* may run (set at start-up) */
static int             thr_running;
static int             thr_stop;
static pthread_t       thr_id;
static long            thr_interval_us;

/* The blocking point-to-point wrappers may progress (set at start-up). */
static atomic_int      calls_enabled;

static void greq_release(collar_request_t *r)
{
    free(r);
}

/*
 * The library's completion of the request (MPI_Wait, MPI_Test, ...,
 * MPI_Request_get_status).  Through collar's completion calls, which hold
 * the request, it says success and collar reports the operation's error
 * on the operation's communicator (complete.c).  A completion collar does
 * not see (a direct PMPI_Wait, Fortran's mpi_f08 module) gets the error
 * from here, and the library raises it where it raises errors of
 * generalized requests (MPI_COMM_WORLD's handler, in Open MPI 4.1 and
 * MPICH 4.0).
 */
static int greq_query_fn(void *extra, MPI_Status *status)
{
    greq_state_t *g = extra;
    const int error = collar_request_is_watched(g) ? MPI_SUCCESS
                                                   : atomic_load(&g->error);
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    status->MPI_ERROR = error;
    return error;
}

static int greq_free_fn(void *extra)
{
    greq_state_t *g = extra;
    collar_request_remove(g);
    collar_request_unref(g);
    return MPI_SUCCESS;
}

static int greq_cancel_fn(void *extra, int complete)
{
    /* A collective cannot be cancelled; the request completes normally. */
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* Called with prog_lock held: take `s` off the list.  The count of
 * outstanding operations is the caller's to lower (run_finish), after the
 * operation's request is complete. */
static int run_unlink(collar_sched_t *s)
{
    collar_sched_t **pp = &run_head;
    collar_sched_t *prev = NULL;
    while (*pp != NULL && *pp != s) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp == NULL) {
        return 0;
    }
    *pp = s->next;
    if (run_tail == s) {
        run_tail = prev;
    }
    s->next = NULL;
    return 1;
}

/*
 * Called with prog_lock held: a finished nonblocking schedule completes its
 * request and goes away; a persistent one completes its request and stays;
 * a blocking one stays for its caller.  The count of outstanding operations
 * drops only after the request is complete: a waiting thread that sees no
 * operation outstanding enters the library's own wait, and the request it
 * waits for must then be complete already (MPICH 4.0 does not always wake
 * a thread waiting in PMPI_Wait for a completion made by another thread).
 */
static void run_finish(collar_sched_t *s)
{
    const int listed = run_unlink(s);
    if (s->stats_on && (s->owner != NULL || s->on_finish != NULL)) {
        s->stats.seconds = PMPI_Wtime() - s->stats_t0;
        collar_stats_record(&s->stats);
    }
    greq_state_t *g = s->on_finish == NULL ? s->owner : NULL;
    if (s->on_finish != NULL) {
        s->on_finish(s);   /* a persistent operation: it stays (or is freed) */
    } else if (g != NULL) {
        collar_request_set_error(g, s->status == COLLAR_OK ? MPI_SUCCESS
                                                           : s->mpi_error);
        const MPI_Request request = g->handle;
        collar_sched_destroy(s);
        PMPI_Grequest_complete(request);
        collar_request_unref(g);
    } else if (s->detached) {
        collar_sched_destroy(s);   /* no one waits for it */
    }
    if (listed) {
        atomic_fetch_sub(&run_count, 1);
    }
}

static void progress_locked(void)
{
    collar_sched_t *s = run_head;
    while (s != NULL) {
        collar_sched_t *next = s->next;
        if (collar_sched_progress(s) == COLLAR_OK) {
            run_finish(s);
        }
        s = next;
    }
}

int collar_progress_all(void)
{
    collar_leftover_poll();
    if (atomic_load_explicit(&run_count, memory_order_relaxed) == 0) {
        return 0;
    }
    pthread_mutex_lock(&prog_lock);
    progress_locked();
    pthread_mutex_unlock(&prog_lock);
    return 1;
}

void collar_progress_calls_enable(void)
{
    atomic_store(&calls_enabled, 1);
}

int collar_progress_in_calls(void)
{
    return atomic_load_explicit(&run_count, memory_order_relaxed) != 0
           && atomic_load_explicit(&calls_enabled, memory_order_relaxed);
}

static void *progress_thread(void *arg)
{
    (void)arg;
    const struct timespec pause = {
        .tv_sec = thr_interval_us / 1000000,
        .tv_nsec = (thr_interval_us % 1000000) * 1000,
    };
    pthread_mutex_lock(&thr_lock);
    while (!thr_stop) {
        if (atomic_load(&run_count) == 0) {
            pthread_cond_wait(&thr_cond, &thr_lock);
            continue;
        }
        pthread_mutex_unlock(&thr_lock);
        pthread_mutex_lock(&prog_lock);
        progress_locked();
        pthread_mutex_unlock(&prog_lock);
        if (thr_interval_us > 0) {
            nanosleep(&pause, NULL);
        } else {
            sched_yield();
        }
        pthread_mutex_lock(&thr_lock);
    }
    pthread_mutex_unlock(&thr_lock);
    return NULL;
}

void collar_progress_thread_enable(long interval_us)
{
    pthread_mutex_lock(&thr_lock);
    thr_enabled = 1;
    thr_stop = 0;
    thr_interval_us = interval_us;
    pthread_mutex_unlock(&thr_lock);
}

int collar_progress_thread_ready(void)
{
    pthread_mutex_lock(&thr_lock);
    if (thr_enabled && !thr_running && !thr_stop) {
        /* Signals go to the application's threads, not to this one. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (!collar_fault(COLLAR_FAULT_THREAD)
            && pthread_create(&thr_id, NULL, progress_thread, NULL) == 0) {
            thr_running = 1;
            collar_debug(INIT, "progress thread started");
        } else {
            thr_enabled = 0;
            collar_warn(INIT, "cannot start the progress thread; collar's "
                        "nonblocking operations run as the MPI library's own "
                        "on host copies (COLLAR_PROGRESS)");
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    const int running = thr_running;
    pthread_mutex_unlock(&thr_lock);
    __atomic_store_n(&collar_comm_threaded_progress, running, __ATOMIC_RELAXED);
    return running;
}

/* Wake the thread, if it runs, for a new operation. */
static void thread_wake(void)
{
    pthread_mutex_lock(&thr_lock);
    pthread_cond_signal(&thr_cond);
    pthread_mutex_unlock(&thr_lock);
}

void collar_progress_thread_stop(void)
{
    atomic_store(&calls_enabled, 0);
    pthread_mutex_lock(&thr_lock);
    const int running = thr_running;
    thr_stop = 1;
    thr_enabled = 0;
    pthread_cond_signal(&thr_cond);
    pthread_mutex_unlock(&thr_lock);
    if (running) {
        pthread_join(thr_id, NULL);
    }
    pthread_mutex_lock(&thr_lock);
    thr_running = 0;
    pthread_mutex_unlock(&thr_lock);
}

/* Put a started schedule on the list and give it a first push. */
static void run_add(collar_sched_t *s)
{
    pthread_mutex_lock(&prog_lock);
    s->next = NULL;
    if (run_tail != NULL) {
        run_tail->next = s;
    } else {
        run_head = s;
    }
    run_tail = s;
    atomic_fetch_add(&run_count, 1);
    progress_locked();
    pthread_mutex_unlock(&prog_lock);
    thread_wake();
}

/*
 * A schedule whose collectives block (collar_sched_block_colls): run by the
 * calling thread alone, off the list and outside the lock, so that while it
 * waits in the MPI library's allreduce the progress thread and the other
 * threads go on with the operations that are listed.  Between its steps it
 * advances those too, as a blocking call does; inside the library's
 * allreduce only the progress thread does (docs/reliability.md, "Progress
 * without a progress thread").  Its turn among the schedules of its
 * communicator is kept as theirs: comm->coll_turn is atomic.
 */
static collar_status_t run_blocking_here(collar_sched_t *s)
{
    for (unsigned spins = 0;; spins++) {
        if (collar_sched_progress(s) == COLLAR_OK) {
            return s->status;
        }
        collar_progress_all();
        if (spins > 64) {
            sched_yield();
        }
    }
}

collar_status_t collar_run_blocking(collar_sched_t *s)
{
    s->blocking = 1;   /* its caller waits: serial device steps are waited for */
    if (s->run_here) {
        return run_blocking_here(s);
    }
    run_add(s);
    for (unsigned spins = 0;; spins++) {
        pthread_mutex_lock(&prog_lock);
        if (!s->finished) {
            progress_locked();
        }
        int done = s->finished;
        pthread_mutex_unlock(&prog_lock);
        if (done) {
            return s->status;
        }
        if (spins > 64) {
            sched_yield();
        }
    }
}

void collar_run_persistent(collar_sched_t *s)
{
    run_add(s);
}

void collar_run_detached(collar_sched_t *s)
{
    s->detached = 1;
    run_add(s);
}

collar_status_t collar_run_nonblocking(collar_sched_t *s, MPI_Comm comm,
                                       MPI_Request *request)
{
    greq_state_t *g = collar_fault(COLLAR_FAULT_GREQ) ? NULL : malloc(sizeof(*g));
    if (g == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    collar_request_init(g, COLLAR_REQUEST_NONBLOCKING, comm, greq_release);
    collar_request_ref(g);   /* MPI's, dropped in free_fn */
    int rc = PMPI_Grequest_start(greq_query_fn, greq_free_fn, greq_cancel_fn, g,
                                 request);
    if (rc != MPI_SUCCESS) {
        collar_request_unref(g);
        collar_request_unref(g);
        return COLLAR_ERR_MPI;
    }
    collar_request_add(g, *request);
    s->owner = g;
    run_add(s);
    return COLLAR_OK;
}

collar_status_t collar_run_in_turn(collar_comm_t *c, void (*fn)(collar_comm_t *c))
{
    /* Inside a blocking call: the calling thread starts no other operation
     * on `c` meanwhile (MPI orders collectives per communicator). */
    const uint64_t ticket = c->next_ticket++;
    for (unsigned spins = 0;; spins++) {
        pthread_mutex_lock(&prog_lock);
        progress_locked();
        const int turn = c->coll_turn == ticket;
        pthread_mutex_unlock(&prog_lock);
        if (turn) {
            break;
        }
        if (spins > 64) {
            sched_yield();
        }
    }
    /* The turn is held: no schedule of `c` issues a collective until fn
     * has made its own, outside the lock (the other communicators' go on). */
    if (c->setup == COLLAR_COMM_READY) {
        fn(c);
    }
    pthread_mutex_lock(&prog_lock);
    c->coll_turn++;
    pthread_mutex_unlock(&prog_lock);
    return c->setup == COLLAR_COMM_READY ? COLLAR_OK : COLLAR_ERR_UNAVAILABLE;
}

void collar_run_drain(void)
{
    while (collar_progress_all()) {
        sched_yield();
    }
}
