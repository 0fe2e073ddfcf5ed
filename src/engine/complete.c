/*
 * collar - the completion calls (MPI_Wait*, MPI_Test*,
 * MPI_Request_get_status) with collar's operations outstanding.
 * The errors of collar's requests among those a call completes are
 * reported as the MPI library reports its own (request.c: the library's
 * completion of collar's requests says success).
 */
#include "config.h"
#include "engine_int.h"

#include <sched.h>

/*
 * While collar has operations outstanding, a wait becomes a loop of progress
 * and the matching test, so that collar's schedules advance while the
 * application waits (for them or for anything else).  With nothing
 * outstanding, the MPI library's own wait runs.  MPI_Waitall's test, and
 * MPI_Testall's over collar's requests, is collar's own (test_all): the
 * library's MPI_Testall does not always answer as its MPI_Waitall does.
 */
void collar_wait_pause(unsigned *spins)
{
    if (++*spins > 64) {
        sched_yield();
    }
}

static int error_class(int rc)
{
    int cls = MPI_ERR_UNKNOWN;
    PMPI_Error_class(rc, &cls);
    return cls;
}

static int status_ignored(const MPI_Status *status)
{
    return status == MPI_STATUS_IGNORE || status == NULL;
}

/*
 * The errors of collar's operations (request.c: the library's completion
 * of collar's requests says success).  Each wrapper holds collar's
 * requests among its arguments (collar_watch_begin) before the library
 * completes them, then reports the error of each one the call completed,
 * through its communicator's handler, as MPI reports its own.
 */

/* One request completed by MPI_Wait, MPI_Test, MPI_Waitany or MPI_Testany
 * with rc: its error as the return code, in the status too. */
static int result_one(collar_watch_t *w, int i, int rc, MPI_Status *status)
{
    if (rc != MPI_SUCCESS || !collar_watch_is_collar(w, i)) {
        return rc;
    }
    const int err = collar_watch_take(w, i);
    if (err != MPI_SUCCESS && !status_ignored(status)) {
        status->MPI_ERROR = err;
    }
    return err;
}

/* Statuses of MPI_ERR_IN_STATUS: from the first error collar adds to a
 * call that succeeded, every status says how its request ended. */
static void statuses_clear(MPI_Status statuses[], int n)
{
    for (int j = 0; j < n; j++) {
        statuses[j].MPI_ERROR = MPI_SUCCESS;
    }
}

/* After MPI_Waitall or MPI_Testall with rc (all complete, or
 * MPI_ERR_IN_STATUS): MPI_ERR_IN_STATUS when one of collar's operations
 * failed, its error in its status, MPI_SUCCESS in the others'. */
static int result_all(collar_watch_t *w, int rc, int count,
                      const MPI_Request requests[], MPI_Status statuses[])
{
    const int in_status = rc != MPI_SUCCESS && error_class(rc) == MPI_ERR_IN_STATUS;
    if (w->found == 0 || (rc != MPI_SUCCESS && !in_status)) {
        return rc;
    }
    const int ignore = statuses == MPI_STATUSES_IGNORE;
    int failed = 0;
    for (int i = 0; i < count; i++) {
        if (!collar_watch_is_collar(w, i)) {
            continue;
        }
        /* After MPI_ERR_IN_STATUS the library may have left requests
         * active (MPICH: MPI_ERR_PENDING); a nonblocking one it completed
         * is freed. */
        if (in_status && (ignore ? requests[i] != MPI_REQUEST_NULL
                                 : error_class(statuses[i].MPI_ERROR) == MPI_ERR_PENDING)) {
            continue;
        }
        const int err = collar_watch_take(w, i);
        if (err == MPI_SUCCESS || ignore) {
            failed |= err != MPI_SUCCESS;
            continue;
        }
        if (!failed && !in_status) {
            statuses_clear(statuses, count);
        }
        failed = 1;
        statuses[i].MPI_ERROR = err;
    }
    return in_status ? rc : failed ? MPI_ERR_IN_STATUS : MPI_SUCCESS;
}

/* After MPI_Waitsome or MPI_Testsome with rc: the same for the outcount
 * requests completed, statuses in the order of indices. */
static int result_some(collar_watch_t *w, int rc, int outcount,
                       const int indices[], MPI_Status statuses[])
{
    const int in_status = rc != MPI_SUCCESS && error_class(rc) == MPI_ERR_IN_STATUS;
    if (w->found == 0 || (rc != MPI_SUCCESS && !in_status)
        || outcount == MPI_UNDEFINED) {
        return rc;
    }
    const int ignore = statuses == MPI_STATUSES_IGNORE;
    int failed = 0;
    for (int j = 0; j < outcount; j++) {
        const int i = indices[j];
        if (!collar_watch_is_collar(w, i)) {
            continue;
        }
        const int err = collar_watch_take(w, i);
        if (err == MPI_SUCCESS || ignore) {
            failed |= err != MPI_SUCCESS;
            continue;
        }
        if (!failed && !in_status) {
            statuses_clear(statuses, outcount);
        }
        failed = 1;
        statuses[j].MPI_ERROR = err;
    }
    return in_status ? rc : failed ? MPI_ERR_IN_STATUS : MPI_SUCCESS;
}

int collar_wait_progress(MPI_Request *request, MPI_Status *status)
{
    unsigned spins = 0;
    for (;;) {
        if (!collar_progress_all()) {
            return PMPI_Wait(request, status);
        }
        int flag = 0;
        int rc = PMPI_Test(request, &flag, status);
        if (rc != MPI_SUCCESS || flag) {
            return rc;
        }
        collar_wait_pause(&spins);
    }
}

int collar_complete_wait(MPI_Request *request, MPI_Status *status)
{
    collar_watch_t w;
    collar_watch_begin(&w, request != NULL ? 1 : 0, request);
    int rc = collar_wait_progress(request, status);
    if (w.found != 0) {
        rc = result_one(&w, 0, rc, status);
        collar_watch_end(&w);
    }
    return rc;
}

/*
 * MPI_Testall with the library's waits: whether every request is complete
 * comes from PMPI_Request_get_status, which completes, deactivates and
 * frees nothing (stopping at the first one that is not); once they all
 * are, the library's own MPI_Waitall completes them, at once, with the
 * statuses and the return code it gives without collar.  Not the
 * library's MPI_Testall: MPICH 4.0's reports MPI_ERR_IN_STATUS when one of
 * its own persistent collective requests (MPI_Barrier_init), complete or
 * inactive, is in the array with a request not yet complete (it knows no
 * error of that kind of request; no status holds an error, the others
 * say MPI_ERR_PENDING), where its MPI_Waitall waits and succeeds.  collar
 * made that MPI_Waitall a loop of MPI_Testall, and so returned the error
 * with its own operations still running (a broadcast's data not yet
 * copied back).  An invalid request: the library's error, from
 * PMPI_Request_get_status, raised there once.
 */
static int test_all(int count, MPI_Request requests[], int *flag,
                    MPI_Status statuses[])
{
    *flag = 0;
    for (int i = 0; i < count; i++) {
        if (requests[i] == MPI_REQUEST_NULL) {
            continue;
        }
        int done = 0;
        const int rc = PMPI_Request_get_status(requests[i], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || !done) {
            return rc;
        }
    }
    *flag = 1;
    return PMPI_Waitall(count, requests, statuses);
}

/* Every request complete before the library completes them: collar's
 * operations among them are over when the call returns, whatever it
 * returns (MPICH's MPI_Waitall marks the requests after a failed one
 * MPI_ERR_PENDING and leaves them for the application to complete). */
static int wait_all(int count, MPI_Request requests[], MPI_Status statuses[],
                    collar_watch_t *w)
{
    unsigned spins = 0;
    for (;;) {
        if (!collar_progress_all()) {
            return result_all(w, PMPI_Waitall(count, requests, statuses),
                              count, requests, statuses);
        }
        int flag = 0;
        const int rc = test_all(count, requests, &flag, statuses);
        if (rc != MPI_SUCCESS || flag) {
            return result_all(w, rc, count, requests, statuses);
        }
        collar_wait_pause(&spins);
    }
}

int collar_complete_waitall(int count, MPI_Request requests[],
                            MPI_Status statuses[])
{
    collar_watch_t w;
    collar_watch_begin(&w, count, requests);
    const int rc = wait_all(count, requests, statuses, &w);
    collar_watch_end(&w);
    return rc;
}

static int wait_any(int count, MPI_Request requests[], int *index,
                    MPI_Status *status)
{
    unsigned spins = 0;
    for (;;) {
        if (!collar_progress_all()) {
            return PMPI_Waitany(count, requests, index, status);
        }
        int flag = 0;
        int rc = PMPI_Testany(count, requests, index, &flag, status);
        if (rc != MPI_SUCCESS || flag) {
            return rc;
        }
        collar_wait_pause(&spins);
    }
}

int collar_complete_waitany(int count, MPI_Request requests[], int *index,
                            MPI_Status *status)
{
    collar_watch_t w;
    collar_watch_begin(&w, count, requests);
    int rc = wait_any(count, requests, index, status);
    if (w.found != 0) {
        if (index != NULL && *index != MPI_UNDEFINED) {
            rc = result_one(&w, *index, rc, status);
        }
        collar_watch_end(&w);
    }
    return rc;
}

static int wait_some(int incount, MPI_Request requests[], int *outcount,
                     int indices[], MPI_Status statuses[])
{
    unsigned spins = 0;
    for (;;) {
        if (!collar_progress_all()) {
            return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
        }
        int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
        if (rc != MPI_SUCCESS || *outcount != 0) {
            return rc;
        }
        collar_wait_pause(&spins);
    }
}

int collar_complete_waitsome(int incount, MPI_Request requests[],
                             int *outcount, int indices[],
                             MPI_Status statuses[])
{
    collar_watch_t w;
    collar_watch_begin(&w, incount, requests);
    int rc = wait_some(incount, requests, outcount, indices, statuses);
    if (w.found != 0) {
        rc = result_some(&w, rc, outcount != NULL ? *outcount : MPI_UNDEFINED,
                         indices, statuses);
        collar_watch_end(&w);
    }
    return rc;
}

int collar_complete_test(MPI_Request *request, int *flag, MPI_Status *status)
{
    collar_watch_t w;
    collar_watch_begin(&w, request != NULL ? 1 : 0, request);
    collar_progress_all();
    int rc = PMPI_Test(request, flag, status);
    if (w.found != 0) {
        if (rc == MPI_SUCCESS && *flag) {
            rc = result_one(&w, 0, rc, status);
        }
        collar_watch_end(&w);
    }
    return rc;
}

int collar_complete_testall(int count, MPI_Request requests[], int *flag,
                            MPI_Status statuses[])
{
    collar_watch_t w;
    collar_watch_begin(&w, count, requests);
    collar_progress_all();
    if (w.found == 0) {
        return PMPI_Testall(count, requests, flag, statuses);
    }
    int rc = test_all(count, requests, flag, statuses);
    if (rc != MPI_SUCCESS || *flag) {
        rc = result_all(&w, rc, count, requests, statuses);
    }
    collar_watch_end(&w);
    return rc;
}

int collar_complete_testany(int count, MPI_Request requests[], int *index,
                            int *flag, MPI_Status *status)
{
    collar_watch_t w;
    collar_watch_begin(&w, count, requests);
    collar_progress_all();
    int rc = PMPI_Testany(count, requests, index, flag, status);
    if (w.found != 0) {
        if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED) {
            rc = result_one(&w, *index, rc, status);
        }
        collar_watch_end(&w);
    }
    return rc;
}

int collar_complete_testsome(int incount, MPI_Request requests[],
                             int *outcount, int indices[],
                             MPI_Status statuses[])
{
    collar_watch_t w;
    collar_watch_begin(&w, incount, requests);
    collar_progress_all();
    int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    if (w.found != 0) {
        rc = result_some(&w, rc, outcount != NULL ? *outcount : MPI_UNDEFINED,
                         indices, statuses);
        collar_watch_end(&w);
    }
    return rc;
}

/* The request stays: its error is put in the status, and reported by the
 * completion call that frees or deactivates the request. */
int collar_complete_get_status(MPI_Request request, int *flag,
                               MPI_Status *status)
{
    collar_watch_t w;
    collar_watch_begin(&w, 1, &request);
    collar_progress_all();
    int rc = PMPI_Request_get_status(request, flag, status);
    if (w.found != 0) {
        if (rc == MPI_SUCCESS && *flag && !status_ignored(status)) {
            const int err = collar_watch_peek(&w, 0);
            if (err != MPI_SUCCESS) {
                status->MPI_ERROR = err;
            }
        }
        collar_watch_end(&w);
    }
    return rc;
}
