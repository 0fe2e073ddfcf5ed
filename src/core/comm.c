/*
 * collar - private communicators.
 *
 * Internal traffic never runs on the user's communicator: each communicator
 * collar works on gets a private duplicate, made on first use (collectively:
 * every rank reaches the same first call) and cached on the user's
 * communicator as an attribute.
 *
 * The duplicate is made with PMPI_Comm_split (one color, ranks in order),
 * not PMPI_Comm_dup: a dup runs the copy callbacks of the user's attributes
 * on it, which the application never asked for (and collar's own attribute
 * is not copied either way).
 *
 * Lifetime: the state is reference-counted.  The user's communicator holds
 * one reference, dropped by the attribute's delete callback (MPI_Comm_free,
 * or MPI_Finalize for the predefined ones); every schedule holds one from
 * collar_sched_create to collar_sched_destroy.  MPI allows
 * MPI_Iallreduce(c); MPI_Comm_free(&c); MPI_Wait: the operation outlives
 * the handle, and the private duplicate is freed with the last reference.
 *
 * The errors of such an operation go through the communicator's error
 * handler, or, once it is freed, through the handler it had then: a second
 * attribute (collar_usercomm_t, made locally, also for the collectives
 * that need no private duplicate) keeps it.
 *
 * Nodes: when the state is made, MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)
 * of the private communicator gives the ranks of this rank's node, and one
 * MPI_MIN allreduce whether the whole communicator is one node.  With
 * COLLAR_SIM_NODE_SIZE=k on the sim device the node is cut into pseudo-nodes
 * of k consecutive ranks (by rank in MPI_COMM_WORLD, so that a process is
 * on the same pseudo-node in every communicator), so that tests on one
 * machine see several nodes.  A communicator that spans nodes also gets
 * the two communicators of `hier` (comm_cross_nodes).  This happens on the
 * first call, when no
 * operation of the communicator is outstanding, so these collectives cannot
 * come between a schedule's.
 */
#include "config.h"
#include "core.h"

#include <pthread.h>
#include <stdlib.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

static int comm_keyval = MPI_KEYVAL_INVALID;
static int usercomm_keyval = MPI_KEYVAL_INVALID;
static MPI_Comm probe_comm = MPI_COMM_NULL;

struct collar_usercomm {
    int            refs;        /* atomic: the communicator's, operations' */
    int            freed;       /* the application freed it (usercomm_lock) */
    MPI_Errhandler errhandler;  /* its handler then (a reference) */
};

/* Between creating the attribute, raising an error on the communicator and
 * the application freeing it.  Recursive: a handler may free a
 * communicator. */
static pthread_mutex_t usercomm_lock;
static pthread_once_t  usercomm_once = PTHREAD_ONCE_INIT;

static void usercomm_lock_init(void)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&usercomm_lock, &attr);
    pthread_mutexattr_destroy(&attr);
}

static void usercomm_lock_take(void)
{
    pthread_once(&usercomm_once, usercomm_lock_init);
    pthread_mutex_lock(&usercomm_lock);
}

int collar_mpi_cuda_aware(void)
{
    if (collar_cfg.mpi_cuda_aware == 1) {
        return 1;
    }
    if (collar_cfg.mpi_cuda_aware == 2) {
        return 0;
    }
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support();
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    int yes = 0;   /* MPICH 4 */
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) == MPI_SUCCESS && yes;
#else
    return 0;
#endif
}

MPI_Comm collar_comm_probe(void)
{
    return probe_comm;
}

collar_status_t collar_comm_dup_private(MPI_Comm comm, MPI_Comm *out)
{
    int rank = 0;
    int rc = PMPI_Comm_rank(comm, &rank);
    if (rc == MPI_SUCCESS) {
        /* Same group, same order; works on intercommunicators too (both
         * groups pass the one color).  No attribute is copied. */
        rc = PMPI_Comm_split(comm, 0, rank, out);
    }
    if (rc != MPI_SUCCESS) {
        *out = MPI_COMM_NULL;
        return COLLAR_ERR_MPI;
    }
    PMPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    return COLLAR_OK;
}

void collar_comm_ref(collar_comm_t *c)
{
    __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

void collar_comm_unref(collar_comm_t *c)
{
    if (c == NULL || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0) {
        return;
    }
    if (c->ipc != NULL && c->ipc_release != NULL) {
        c->ipc_release(c->ipc);
    }
    MPI_Comm *mine[3] = { &c->node_comm, &c->node_sched, &c->cross_comm };
    for (int i = 0; i < 3; i++) {
        if (*mine[i] != MPI_COMM_NULL) {
            PMPI_Comm_free(mine[i]);
        }
    }
    if (c->private_comm != MPI_COMM_NULL) {
        /* MPI_Comm_free is not collective in effect: each rank frees its
         * handle when its own last operation is done. */
        PMPI_Comm_free(&c->private_comm);
    }
    free(c);
}

static int comm_delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    collar_comm_unref(attr);
    return MPI_SUCCESS;
}

void collar_usercomm_unref(collar_usercomm_t *u)
{
    if (u == NULL || __atomic_sub_fetch(&u->refs, 1, __ATOMIC_ACQ_REL) != 0) {
        return;
    }
    if (u->errhandler != MPI_ERRHANDLER_NULL) {
        PMPI_Errhandler_free(&u->errhandler);
    }
    free(u);
}

/* The application frees the communicator (MPI_Finalize: the predefined
 * ones): operations that still hold the state keep its error handler. */
static int usercomm_delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)keyval;
    (void)extra;
    collar_usercomm_t *u = attr;
    if (__atomic_load_n(&u->refs, __ATOMIC_ACQUIRE) > 1) {
        usercomm_lock_take();
        if (PMPI_Comm_get_errhandler(comm, &u->errhandler) != MPI_SUCCESS) {
            u->errhandler = MPI_ERRHANDLER_NULL;
        }
        u->freed = 1;
        pthread_mutex_unlock(&usercomm_lock);
    }
    collar_usercomm_unref(u);
    return MPI_SUCCESS;
}

collar_usercomm_t *collar_usercomm_get(MPI_Comm comm)
{
    if (usercomm_keyval == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL) {
        return NULL;
    }
    void *attr = NULL;
    int flag = 0;
    if (PMPI_Comm_get_attr(comm, usercomm_keyval, &attr, &flag) != MPI_SUCCESS) {
        return NULL;
    }
    if (!flag) {
        usercomm_lock_take();
        if (PMPI_Comm_get_attr(comm, usercomm_keyval, &attr, &flag) == MPI_SUCCESS
            && !flag) {
            collar_usercomm_t *u = calloc(1, sizeof(*u));
            if (u != NULL) {
                u->refs = 1;   /* the communicator's */
                u->errhandler = MPI_ERRHANDLER_NULL;
                if (PMPI_Comm_set_attr(comm, usercomm_keyval, u) == MPI_SUCCESS) {
                    attr = u;
                    flag = 1;
                } else {
                    free(u);
                }
            }
        }
        pthread_mutex_unlock(&usercomm_lock);
        if (!flag) {
            return NULL;
        }
    }
    collar_usercomm_t *u = attr;
    __atomic_add_fetch(&u->refs, 1, __ATOMIC_RELAXED);
    return u;
}

int collar_usercomm_raise(collar_usercomm_t *u, MPI_Comm comm, int error)
{
    usercomm_lock_take();
    if (u == NULL || !u->freed) {
        /* Under the lock: the application does not free it meanwhile. */
        PMPI_Comm_call_errhandler(comm, error);
        pthread_mutex_unlock(&usercomm_lock);
        return error;
    }
    const MPI_Errhandler eh = u->errhandler;
    pthread_mutex_unlock(&usercomm_lock);
    MPI_Comm self = MPI_COMM_NULL;
    if (eh == MPI_ERRHANDLER_NULL
        || PMPI_Comm_dup(MPI_COMM_SELF, &self) != MPI_SUCCESS) {
        collar_error(COLL, "cannot raise MPI error %d: its communicator is freed",
                     error);
        return error;
    }
    PMPI_Comm_set_errhandler(self, eh);
    PMPI_Comm_call_errhandler(self, error);
    PMPI_Comm_free(&self);
    return error;
}

collar_status_t collar_comm_init(void)
{
    if (comm_keyval != MPI_KEYVAL_INVALID) {
        return COLLAR_OK;
    }
    int rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete_fn,
                                     &comm_keyval, NULL);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, usercomm_delete_fn,
                                     &usercomm_keyval, NULL);
    }
    if (rc != MPI_SUCCESS) {
        collar_error(INIT, "cannot create a communicator attribute key (MPI error %d)", rc);
        return COLLAR_ERR_MPI;
    }
    if (PMPI_Comm_dup(MPI_COMM_SELF, &probe_comm) == MPI_SUCCESS) {
        PMPI_Comm_set_errhandler(probe_comm, MPI_ERRORS_RETURN);
    } else {
        probe_comm = MPI_COMM_NULL;
    }
    return COLLAR_OK;
}

void collar_comm_finalize(void)
{
    if (comm_keyval == MPI_KEYVAL_INVALID) {
        return;
    }
    /* Free the private duplicates of the predefined communicators now, while
     * every MPI call is still allowed. */
    MPI_Comm predefined[2] = { MPI_COMM_WORLD, MPI_COMM_SELF };
    int *keyvals[2] = { &comm_keyval, &usercomm_keyval };
    for (int k = 0; k < 2; k++) {
        if (*keyvals[k] == MPI_KEYVAL_INVALID) {
            continue;
        }
        for (int i = 0; i < 2; i++) {
            void *attr;
            int flag = 0;
            if (PMPI_Comm_get_attr(predefined[i], *keyvals[k], &attr, &flag) == MPI_SUCCESS
                && flag) {
                PMPI_Comm_delete_attr(predefined[i], *keyvals[k]);
            }
        }
        PMPI_Comm_free_keyval(keyvals[k]);
        *keyvals[k] = MPI_KEYVAL_INVALID;
    }
    if (probe_comm != MPI_COMM_NULL) {
        PMPI_Comm_free(&probe_comm);
    }
}

/* The communicators of `hier` on a communicator that spans nodes, every
 * node holding at least c->node_min ranks: node_sched (the node's ranks,
 * for schedules) and cross_comm (the ranks with this node_rank on every
 * node, for node_rank < node_min).  Collective over the private
 * communicator; on failure both stay MPI_COMM_NULL, on every rank alike
 * (an MPI_MIN of the outcome), and `hier` falls back. */
static void comm_cross_nodes(collar_comm_t *c)
{
    int ok = 1, all = 0;
    const int color = c->node_rank < c->node_min ? c->node_rank : MPI_UNDEFINED;
    if (PMPI_Comm_split(c->private_comm, color, c->rank, &c->cross_comm)
        != MPI_SUCCESS) {
        c->cross_comm = MPI_COMM_NULL;
        ok = color == MPI_UNDEFINED;
    }
    if (PMPI_Comm_split(c->node_comm, 0, c->node_rank, &c->node_sched)
        != MPI_SUCCESS) {
        c->node_sched = MPI_COMM_NULL;
        ok = 0;
    }
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->private_comm)
        != MPI_SUCCESS) {
        all = 0;
    }
    if (!all) {
        collar_info(COLL, "cannot make the communicators of hier (per node "
                    "and across nodes); hier falls back");
        if (c->cross_comm != MPI_COMM_NULL) {
            PMPI_Comm_free(&c->cross_comm);
        }
        if (c->node_sched != MPI_COMM_NULL) {
            PMPI_Comm_free(&c->node_sched);
        }
        c->node_min = 0;
        return;
    }
    if (c->cross_comm != MPI_COMM_NULL) {
        PMPI_Comm_set_errhandler(c->cross_comm, MPI_ERRORS_RETURN);
    }
    PMPI_Comm_set_errhandler(c->node_sched, MPI_ERRORS_RETURN);
}

/* c->node_*: the node this rank is on, collectively over the private
 * communicator.  On failure: no node communicator, not one node. */
static void comm_find_node(collar_comm_t *c)
{
    MPI_Comm shared = MPI_COMM_NULL;
    c->node_comm = MPI_COMM_NULL;
    c->node_sched = MPI_COMM_NULL;
    c->cross_comm = MPI_COMM_NULL;
    c->node_min = 0;
    c->node_rank = 0;
    c->node_size = 1;
    c->one_node = 0;
    int inter = 0;
    PMPI_Comm_test_inter(c->private_comm, &inter);
    if (inter) {
        return;   /* nodes of intercommunicators are not looked for */
    }
    int rc = PMPI_Comm_split_type(c->private_comm, MPI_COMM_TYPE_SHARED, c->rank,
                                  MPI_INFO_NULL, &shared);
    const long k = collar_cfg.sim_node_size;
    if (rc == MPI_SUCCESS && k > 0
        && collar_cfg.device == COLLAR_DEVICE_SIM) {
        /* By rank in MPI_COMM_WORLD: a node is a property of the process,
         * the same in every communicator. */
        int wrank = 0;
        PMPI_Comm_rank(MPI_COMM_WORLD, &wrank);
        MPI_Comm pseudo = MPI_COMM_NULL;
        rc = PMPI_Comm_split(shared, (int)(wrank / k), c->rank, &pseudo);
        PMPI_Comm_free(&shared);
        shared = pseudo;
    }
    int mine = 0;
    if (rc == MPI_SUCCESS) {
        PMPI_Comm_set_errhandler(shared, MPI_ERRORS_RETURN);
        PMPI_Comm_rank(shared, &c->node_rank);
        PMPI_Comm_size(shared, &c->node_size);
        c->node_comm = shared;
        mine = c->node_size == c->size;
    }
    /* {whole communicator on this node, ranks on this node}: MPI_MIN of
     * both.  A rank without a node, or without a device (COLLAR_DEVICE=none:
     * no IPC), says 0 ranks, so that nobody builds the communicators of
     * `hier`. */
    int in[2] = { mine, c->node_comm != MPI_COMM_NULL
                        && collar_cfg.device != COLLAR_DEVICE_NONE
                        ? c->node_size : 0 };
    int all[2] = { 0, 0 };
    if (PMPI_Allreduce(in, all, 2, MPI_INT, MPI_MIN, c->private_comm)
        != MPI_SUCCESS) {
        all[0] = all[1] = 0;
    }
    c->one_node = all[0];
    c->node_min = all[1];
    if (!c->one_node && c->node_min > 0) {
        comm_cross_nodes(c);
    }
    collar_debug(COLL, "node: rank %d of %d on this node%s", c->node_rank,
                 c->node_size, all[0] ? " (the whole communicator)" : "");
}

collar_status_t collar_comm_get(MPI_Comm comm, collar_comm_t **state)
{
    void *attr = NULL;
    int flag = 0;
    if (comm_keyval == MPI_KEYVAL_INVALID) {
        return COLLAR_ERR_UNAVAILABLE;
    }
    int rc = PMPI_Comm_get_attr(comm, comm_keyval, &attr, &flag);
    if (rc != MPI_SUCCESS) {
        return COLLAR_ERR_MPI;
    }
    if (flag) {
        *state = attr;
        return COLLAR_OK;
    }

    collar_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    c->refs = 1;   /* the user's communicator's */
    /* Errors of internal traffic come back to collar, which reports them
     * through the user's communicator. */
    if (collar_comm_dup_private(comm, &c->private_comm) != COLLAR_OK) {
        collar_error(COLL, "cannot duplicate the communicator for internal "
                     "traffic");
        free(c);
        return COLLAR_ERR_MPI;
    }
    PMPI_Comm_size(comm, &c->size);
    PMPI_Comm_rank(comm, &c->rank);
    comm_find_node(c);
    int *ub = NULL;
    c->tag_ub = 32767;
    if (PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS
        && flag && *ub > 0) {
        c->tag_ub = *ub;
    }
    rc = PMPI_Comm_set_attr(comm, comm_keyval, c);
    if (rc != MPI_SUCCESS) {
        collar_comm_unref(c);   /* the only reference: frees everything */
        return COLLAR_ERR_MPI;
    }
    collar_debug(COLL, "new private communicator: %d ranks, this is rank %d",
                 c->size, c->rank);
    *state = c;
    return COLLAR_OK;
}
