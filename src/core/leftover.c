/*
 * collar - what a failed start leaves behind (collar_leftover_t, core.h).
 *
 * A nonblocking or persistent start that fails here after it has issued
 * collectives (COLLAR_CHECK's check, the MPI library's allreduce on host
 * copies and its status agreement) returns its error at once: a start
 * never waits for another rank, and those collectives complete only once
 * the other ranks, which match them with theirs, have made their own
 * start.  They are kept here, with the memory they use, and completed
 * later: tested by collar's progress (the completion calls that advance
 * collar's operations, each checked call), waited for where MPI lets a
 * call wait for the other ranks, MPI_Comm_free of their communicator (a
 * collective) and MPI_Finalize.
 *
 * The list is taken whole under the lock and walked outside it: what an
 * entry does when it is over (free memory, drop a communicator, which may
 * free it and run this file again through its delete callback) never
 * runs under the lock.
 */
#include "config.h"
#include "core.h"

#include <pthread.h>
#include <stdatomic.h>

static pthread_mutex_t   left_lock = PTHREAD_MUTEX_INITIALIZER;
static collar_leftover_t *left_head;
static atomic_int        left_count;

void collar_leftover_add(collar_leftover_t *l, MPI_Comm comm,
                         collar_leftover_fn_t advance)
{
    l->comm = comm;
    l->advance = advance;
    pthread_mutex_lock(&left_lock);
    l->next = left_head;
    left_head = l;
    atomic_fetch_add(&left_count, 1);
    pthread_mutex_unlock(&left_lock);
}

/* Take the entries on `comm` (MPI_COMM_NULL: all) off the list. */
static collar_leftover_t *take(MPI_Comm comm)
{
    collar_leftover_t *taken = NULL;
    pthread_mutex_lock(&left_lock);
    collar_leftover_t **pp = &left_head;
    while (*pp != NULL) {
        collar_leftover_t *l = *pp;
        if (comm == MPI_COMM_NULL || l->comm == comm) {
            *pp = l->next;
            l->next = taken;
            taken = l;
            atomic_fetch_sub(&left_count, 1);
        } else {
            pp = &l->next;
        }
    }
    pthread_mutex_unlock(&left_lock);
    return taken;
}

void collar_leftover_poll(void)
{
    if (atomic_load_explicit(&left_count, memory_order_relaxed) == 0) {
        return;
    }
    collar_leftover_t *l = take(MPI_COMM_NULL);
    while (l != NULL) {
        collar_leftover_t *next = l->next;
        if (!l->advance(l, 0)) {
            collar_leftover_add(l, l->comm, l->advance);
        }
        l = next;
    }
}

void collar_leftover_drain(MPI_Comm comm)
{
    if (atomic_load(&left_count) == 0) {
        return;
    }
    collar_leftover_t *l = take(comm);
    while (l != NULL) {
        collar_leftover_t *next = l->next;
        (void)l->advance(l, 1);
        l = next;
    }
}
