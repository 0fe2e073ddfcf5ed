/*
 * collar - private communicators.
 *
 * Internal traffic never runs on the user's communicator: each communicator
 * collar runs an algorithm on gets one private duplicate, made at the first
 * call that needs it and cached on the user's communicator as an
 * attribute.  Communicators that only ever see host buffers (or only the
 * staged collectives, which run on the user's communicator) get none.
 *
 * Making it never waits for another rank where the application does not:
 * it is made inside a blocking allreduce (every rank is in the same call,
 * in the application's order of collectives on the communicator), by
 * PMPI_Comm_split, which runs none of the user's attribute copy callbacks,
 * and one MPI_MIN allreduce of its outcome.  A nonblocking or persistent
 * start on a communicator without one makes none (COLLAR_COMM_LATER): it is
 * staged through host memory on the user's communicator, in the
 * application's own nonblocking collective (src/engine/colls.c), until a
 * blocking allreduce has made the duplicate.  MPI_Comm_idup would make it
 * at the start without waiting, but Open MPI 4.1 crashes when an idup is in
 * flight while the application creates a communicator of its own (its
 * nonblocking context id allocation, ompi issue 2025) or tests requests from
 * a second thread.  The user's error handler is not called: the user's
 * communicator returns errors (MPI_ERRORS_RETURN) for the length of the
 * split, and its handler is put back.  When the MPI library refuses (no
 * context id left: MPICH has 2048 for a process), the state says
 * COLLAR_COMM_NONE, collar says so once, and the communicator's calls are
 * staged on the user's communicator.
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
 * Nodes, without communication: at MPI_Init every process learns the node
 * of every process of MPI_COMM_WORLD (MPI_Comm_split_type with
 * MPI_COMM_TYPE_SHARED and one allgather, inside MPI_Init), and whether it
 * has a device backend.  A communicator's nodes then follow from its group
 * (MPI_Group_translate_ranks), and with them the node shape that selection
 * matches rules against (collar_comm_shape: nodes spanned, fewest and most
 * ranks on one).  With COLLAR_SIM_NODE_SIZE=k each node is
 * cut into pseudo-nodes of k consecutive ranks of MPI_COMM_WORLD, so that
 * tests on one machine see several nodes (on any device backend: hier on
 * the cuda backend over the CUDA emulation too).  The
 * communicators of `hier` are made only when hier runs, at its first
 * blocking allreduce on a communicator that spans nodes
 * (collar_comm_make_hier).
 */
#include "config.h"
#include "core.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

static int comm_keyval = MPI_KEYVAL_INVALID;
static int usercomm_keyval = MPI_KEYVAL_INVALID;
static MPI_Comm probe_comm = MPI_COMM_NULL;

/* The node of every process of MPI_COMM_WORLD (a key: the node's first
 * world rank, and the pseudo-node), and whether it has a device backend;
 * NULL when it could not be learnt. */
typedef struct {
    int leader, sub, device;
} node_card_t;
static node_card_t *world_nodes;
static int          world_size;

/* Communicators collar holds for the application's (collar_comm_count). */
static int comms_held;

/* Some process of MPI_COMM_WORLD has a device backend (from the table of
 * nodes: the same answer everywhere). */
static int world_any_device;

struct collar_usercomm {
    int            refs;        /* atomic: the communicator's, operations' */
    uint64_t       checks;      /* atomic: calls COLLAR_CHECK checked on it */
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

int collar_comm_dup_quiet(MPI_Comm comm, MPI_Comm *out)
{
    MPI_Errhandler user = MPI_ERRHANDLER_NULL;
    const int swapped = PMPI_Comm_get_errhandler(comm, &user) == MPI_SUCCESS
                        && PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)
                           == MPI_SUCCESS;
    int rank = 0;
    int rc = PMPI_Comm_rank(comm, &rank);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Comm_split(comm, 0, rank, out);
    }
    if (swapped) {
        PMPI_Comm_set_errhandler(comm, user);
    }
    if (user != MPI_ERRHANDLER_NULL) {
        PMPI_Errhandler_free(&user);
    }
    if (rc != MPI_SUCCESS) {
        *out = MPI_COMM_NULL;
        return rc;
    }
    PMPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    return MPI_SUCCESS;
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

/* Free one of collar's communicators (counted). */
static void comm_free_counted(MPI_Comm *c)
{
    if (*c != MPI_COMM_NULL) {
        PMPI_Comm_free(c);
        __atomic_sub_fetch(&comms_held, 1, __ATOMIC_RELAXED);
    }
}

void collar_comm_unref(collar_comm_t *c)
{
    if (c == NULL || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0) {
        return;
    }
    if (c->kept != NULL && c->kept_release != NULL) {
        c->kept_release(c->kept);
    }
    if (c->ipc != NULL && c->ipc_release != NULL) {
        c->ipc_release(c->ipc);
    }
    if (c->nccl != NULL && c->nccl_release != NULL) {
        c->nccl_release(c->nccl);
    }
    comm_free_counted(&c->node_sched);
    comm_free_counted(&c->cross_comm);
    /* MPI_Comm_free is not collective in effect: each rank frees its
     * handle when its own last operation is done. */
    comm_free_counted(&c->private_comm);
    free(c->node_peers);
    free(c);
}

int collar_comm_count(void)
{
    return __atomic_load_n(&comms_held, __ATOMIC_RELAXED);
}

static int comm_delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)keyval;
    (void)extra;
    collar_comm_t *c = attr;
    /* What failed starts left on it, before it goes (a collective call:
     * every rank has made its own start by now). */
    collar_leftover_drain(comm);
    if (c->ipc != NULL && c->ipc_freed != NULL) {
        c->ipc_freed(c->ipc, comm);   /* collective: see src/algo/ipc.c */
    }
    collar_comm_unref(c);
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
    collar_leftover_drain(comm);   /* as comm_delete_fn */
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

uint64_t collar_usercomm_count_check(collar_usercomm_t *u)
{
    return u == NULL ? 0 : __atomic_add_fetch(&u->checks, 1, __ATOMIC_RELAXED);
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
    /* A communicator of one process to call the handler on: a copy of
     * collar's own (probe_comm, whose errors return), else of
     * MPI_COMM_SELF; the MPI library may have none to give (no context
     * id left), and that shortage is collar's, reported by no handler. */
    MPI_Comm self = MPI_COMM_NULL;
    if (eh == MPI_ERRHANDLER_NULL
        || collar_comm_dup_quiet(probe_comm != MPI_COMM_NULL ? probe_comm
                                                            : MPI_COMM_SELF,
                                 &self) != MPI_SUCCESS) {
        collar_error(COLL, "cannot raise MPI error %d: its communicator is "
                     "freed%s", error, eh == MPI_ERRHANDLER_NULL ? ""
                     : " and the MPI library gives collar no communicator "
                       "to call its error handler on");
        return error;
    }
    PMPI_Comm_set_errhandler(self, eh);
    PMPI_Comm_call_errhandler(self, error);
    PMPI_Comm_free(&self);
    return error;
}

void collar_agree(const int *mine, int *out, int n, MPI_Op op, MPI_Comm comm,
                  const char *what)
{
    int rc = PMPI_Allreduce(mine, out, n, MPI_INT, op, comm);
    if (rc == MPI_SUCCESS && collar_fault(COLLAR_FAULT_AGREE)) {
        rc = MPI_ERR_OTHER;   /* injected: the collective did run */
    }
    if (rc == MPI_SUCCESS) {
        return;
    }
    char why[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (PMPI_Error_string(rc, why, &len) != MPI_SUCCESS) {
        why[0] = '\0';
    }
    char msg[MPI_MAX_ERROR_STRING + 200];
    snprintf(msg, sizeof(msg), "the agreement with the other ranks on %s (MPI "
             "error %d: %s; this rank cannot know what they decided)", what, rc,
             why);
    collar_fail_stop(comm, rc, msg);
}

void collar_fail_stop(MPI_Comm comm, int code, const char *what)
{
    collar_error(COLL, "%s failed on this rank: the other ranks could wait "
                 "for ever in collectives it would not issue, so collar ends "
                 "the job (MPI_Abort)", what);
    PMPI_Abort(comm, code);
}

/* The table of nodes: collective over MPI_COMM_WORLD, inside MPI_Init. */
static void learn_nodes(int has_device)
{
    int wrank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm shared = MPI_COMM_NULL;
    node_card_t mine = { .leader = -1, .device = has_device };
    if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wrank,
                             MPI_INFO_NULL, &shared) == MPI_SUCCESS) {
        if (PMPI_Allreduce(&wrank, &mine.leader, 1, MPI_INT, MPI_MIN, shared)
            != MPI_SUCCESS) {
            mine.leader = -1;
        }
        PMPI_Comm_free(&shared);
    }
    const long k = collar_cfg.sim_node_size;
    if (k > 0) {
        /* By rank in MPI_COMM_WORLD: a node is a property of the process,
         * the same in every communicator. */
        mine.sub = (int)(wrank / k);
    }
    /* The table on every process or on none (a process without one would
     * select other algorithms than its peers), agreed before the gather;
     * and whether some process has a device backend, which decides the
     * private communicator of MPI_COMM_WORLD (collar_comm_world_wanted),
     * known even without the table. */
    world_nodes = collar_fault(COLLAR_FAULT_NODES)
                  ? NULL : calloc((size_t)world_size, sizeof(*world_nodes));
    int mine_ok[2] = { world_nodes != NULL, -(has_device != 0) }, all_ok[2];
    collar_agree(mine_ok, all_ok, 2, MPI_MIN, MPI_COMM_WORLD, "the table of nodes");
    world_any_device = all_ok[1] < 0;
    if (!all_ok[0]) {
        if (world_nodes == NULL) {
            collar_warn(INIT, "no memory for the table of nodes (%d processes): "
                        "no process knows the nodes, so ipc and hier do not run",
                        world_size);
        }
        free(world_nodes);
        world_nodes = NULL;
        return;
    }
    int got = PMPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, world_nodes,
                             (int)sizeof(mine), MPI_BYTE, MPI_COMM_WORLD)
              == MPI_SUCCESS, all_got = 0;
    collar_agree(&got, &all_got, 1, MPI_MIN, MPI_COMM_WORLD, "the table of nodes");
    if (!all_got) {
        free(world_nodes);
        world_nodes = NULL;
        return;
    }
    for (int i = 0; world_nodes != NULL && i < world_size; i++) {
        if (world_nodes[i].leader < 0) {
            free(world_nodes);   /* some process has no node: none known */
            world_nodes = NULL;
        }
    }
}

collar_status_t collar_comm_init(int has_device)
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
    /* The communicator that asks the library about derived datatypes
     * (collar_call_validate), made here, where a context id is still free,
     * and only where collar's algorithms can run: a device backend, or one
     * forced.  Without it a derived datatype is not collar's (the library's
     * own call takes it). */
    if ((has_device || (collar_cfg.algorithm != COLLAR_ALG_AUTO
                        && collar_cfg.algorithm != COLLAR_ALG_NATIVE))
        && PMPI_Comm_dup(MPI_COMM_SELF, &probe_comm) == MPI_SUCCESS) {
        PMPI_Comm_set_errhandler(probe_comm, MPI_ERRORS_RETURN);
    } else {
        probe_comm = MPI_COMM_NULL;
    }
    if (collar_cfg.device != COLLAR_DEVICE_NONE) {
        /* COLLAR_DEVICE=none (the same on every process): no IPC, no
         * nodes to know, and nothing for MPI_Init to wait for. */
        learn_nodes(has_device);
    }
    return COLLAR_OK;
}

int collar_comm_world_wanted(void)
{
    return world_any_device;
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
    free(world_nodes);
    world_nodes = NULL;
}

/* The communicators of `hier` on a communicator that spans nodes, every
 * node holding at least c->node_min ranks: node_sched (the node's ranks,
 * for schedules) and cross_comm (the ranks with this node_rank on every
 * node, for node_rank < node_min).  Collective over the private
 * communicator, in its turn; on failure both stay MPI_COMM_NULL, on every
 * rank alike (an MPI_MIN of the outcome), and `hier` falls back. */
void collar_comm_make_hier(collar_comm_t *c)
{
    int ok = 1, all = 0;
    const int color = c->node_rank < c->node_min ? c->node_rank : MPI_UNDEFINED;
    if (PMPI_Comm_split(c->private_comm, color, c->rank, &c->cross_comm)
        != MPI_SUCCESS) {
        c->cross_comm = MPI_COMM_NULL;
        ok = 0;
    }
    /* The node's color: its first rank in the communicator. */
    if (PMPI_Comm_split(c->private_comm, c->node_first, c->node_rank,
                        &c->node_sched) != MPI_SUCCESS) {
        c->node_sched = MPI_COMM_NULL;
        ok = 0;
    }
    __atomic_add_fetch(&comms_held, (c->cross_comm != MPI_COMM_NULL)
                                    + (c->node_sched != MPI_COMM_NULL),
                       __ATOMIC_RELAXED);
    collar_agree(&ok, &all, 1, MPI_MIN, c->private_comm,
                 "hier's communicators");
    if (!all) {
        collar_info(COLL, "cannot make the communicators of hier (per node "
                    "and across nodes); hier falls back");
        comm_free_counted(&c->cross_comm);
        comm_free_counted(&c->node_sched);
        c->hier_made = -1;
        return;
    }
    if (c->cross_comm != MPI_COMM_NULL) {
        PMPI_Comm_set_errhandler(c->cross_comm, MPI_ERRORS_RETURN);
    }
    PMPI_Comm_set_errhandler(c->node_sched, MPI_ERRORS_RETURN);
    c->hier_made = 1;
}

static int cmp_key(const void *a, const void *b)
{
    const long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The node of communicator rank i (its key: the node's first world rank
 * and the pseudo-node), and whether it has a device; -1 for a process
 * outside MPI_COMM_WORLD. */
static long long node_key(MPI_Group group, MPI_Group world, int i, int *device)
{
    int w = MPI_UNDEFINED;
    if (PMPI_Group_translate_ranks(group, 1, &i, world, &w) != MPI_SUCCESS
        || w == MPI_UNDEFINED || w < 0 || w >= world_size) {
        return -1;
    }
    *device = world_nodes[w].device != 0;
    return ((long long)world_nodes[w].leader << 32) | (unsigned)world_nodes[w].sub;
}

/*
 * The node shape where the arrays of comm_find_node cannot be had (no
 * memory): the same answers, with none, one translation at a time (n^2 of
 * them).  The shape decides the algorithm, alike on every rank, so it
 * must not depend on one rank's memory; the node's peers (node_peers),
 * which ipc and hier need, stay NULL, and the ranks agree on that when
 * collar's communicator is made (node_peers_everywhere).
 */
static void shape_without_memory(collar_comm_t *c, MPI_Group group, MPI_Group world)
{
    const int n = c->size;
    int dev = 0, device_everywhere = 1, nodes = 0, smallest = n, largest = 0;
    const long long mine = node_key(group, world, c->rank, &dev);
    if (mine < 0) {
        return;
    }
    c->node_size = 0;
    c->node_first = -1;
    for (int i = 0; i < n; i++) {
        const long long k = node_key(group, world, i, &dev);
        if (k < 0) {
            return;   /* (node_known stays 0) */
        }
        device_everywhere &= dev;
        if (k == mine) {
            c->node_rank += i < c->rank;
            c->node_size++;
            if (c->node_first < 0) {
                c->node_first = i;
            }
        }
        int first = 1, count = 0;
        for (int j = 0; j < n; j++) {
            if (node_key(group, world, j, &dev) == k) {
                first &= j >= i;
                count++;
            }
        }
        if (first) {
            nodes++;
            smallest = count < smallest ? count : smallest;
            largest = count > largest ? count : largest;
        }
    }
    c->one_node = c->node_size == n;
    c->nnodes = nodes;
    c->ppn_min = smallest;
    c->ppn_max = largest;
    c->node_min = device_everywhere ? smallest : 0;
    c->node_known = 1;
    collar_warn(MEM, "no memory for the node peers of %s %d-rank communicator: "
                "ipc and hier do not run on it", collar_article_n(n), n);
}

/* c->node_*, from the table of nodes, with no communication.  Unknown
 * (node_known 0) when a process of the communicator is not in this
 * process's MPI_COMM_WORLD: then every rank of it sees one that is not. */
static void comm_find_node(collar_comm_t *c, MPI_Comm comm)
{
    c->node_known = 0;
    c->node_rank = 0;
    c->node_size = 1;
    c->node_first = c->rank;
    c->one_node = 0;
    c->node_min = 0;
    c->node_sched = MPI_COMM_NULL;
    c->cross_comm = MPI_COMM_NULL;
    if (world_nodes == NULL) {
        return;
    }
    const int n = c->size;
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    if (PMPI_Comm_group(comm, &group) != MPI_SUCCESS
        || PMPI_Comm_group(MPI_COMM_WORLD, &world) != MPI_SUCCESS) {
        if (group != MPI_GROUP_NULL) {
            PMPI_Group_free(&group);
        }
        return;
    }
    const int fail = collar_fault(COLLAR_FAULT_SHAPE);
    int *ranks = fail ? NULL : malloc(2 * (size_t)n * sizeof(int));
    long long *keys = fail ? NULL : malloc((size_t)n * sizeof(long long));
    int *peers = fail ? NULL : malloc(2 * (size_t)n * sizeof(int));
    if (ranks == NULL || keys == NULL || peers == NULL) {
        free(ranks);
        free(keys);
        free(peers);
        shape_without_memory(c, group, world);
        PMPI_Group_free(&group);
        PMPI_Group_free(&world);
        return;
    }
    int *wranks = ranks + n;
    for (int i = 0; i < n; i++) {
        ranks[i] = i;
    }
    int ok = PMPI_Group_translate_ranks(group, n, ranks, world, wranks) == MPI_SUCCESS;
    int device_everywhere = 1;
    for (int i = 0; ok && i < n; i++) {
        if (wranks[i] == MPI_UNDEFINED || wranks[i] < 0 || wranks[i] >= world_size) {
            ok = 0;
            break;
        }
        const node_card_t *nc = &world_nodes[wranks[i]];
        keys[i] = ((long long)nc->leader << 32) | (unsigned)nc->sub;
        device_everywhere &= nc->device != 0;
    }
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
    if (!ok) {
        free(ranks);
        free(keys);
        free(peers);
        return;
    }
    /* This node's ranks, in communicator rank order (the node rank). */
    const long long mine = keys[c->rank];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (keys[i] == mine) {
            if (i == c->rank) {
                c->node_rank = m;
            }
            peers[n + m] = wranks[i];
            peers[m++] = i;
        }
    }
    c->node_size = m;
    c->node_peers = peers;
    c->node_world = peers + n;
    c->node_first = peers[0];
    c->one_node = m == n;
    /* The smallest node: runs of equal keys. */
    qsort(keys, (size_t)n, sizeof(*keys), cmp_key);
    int smallest = n, largest = 0, nodes = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && keys[j] == keys[i]) {
            j++;
        }
        smallest = j - i < smallest ? j - i : smallest;
        largest = j - i > largest ? j - i : largest;
        nodes++;
        i = j;
    }
    c->nnodes = nodes;
    c->ppn_min = smallest;
    c->ppn_max = largest;
    /* A rank without a device (no IPC) makes nobody try hier. */
    c->node_min = device_everywhere ? smallest : 0;
    c->node_known = 1;
    free(ranks);
    free(keys);
    collar_debug(COLL, "node: rank %d of %d on this node%s", c->node_rank,
                 c->node_size, c->one_node ? " (the whole communicator)" : "");
}

void collar_comm_shape(const collar_comm_t *c, collar_select_key_t *key)
{
    const int known = c != NULL && c->node_known;
    key->nodes = known ? c->nnodes : 0;
    key->ppn_min = known ? c->ppn_min : 0;
    key->ppn_max = known ? c->ppn_max : 0;
}

/* The private duplicate of `comm` (see the top of this file), inside a
 * blocking allreduce: sets c->setup and c->private_comm. */
int collar_comm_threaded_progress;
int collar_app_thread_level = MPI_THREAD_SINGLE;

static void comm_make_private(collar_comm_t *c, MPI_Comm comm)
{
    MPI_Errhandler user = MPI_ERRHANDLER_NULL;
    const int swapped = PMPI_Comm_get_errhandler(comm, &user) == MPI_SUCCESS
                        && PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)
                           == MPI_SUCCESS;
    c->private_comm = MPI_COMM_NULL;
    /* Same group, same order; no attribute is copied. */
    int rc = PMPI_Comm_split(comm, 0, c->rank, &c->private_comm);
    if (rc == MPI_SUCCESS && collar_fault(COLLAR_FAULT_SPLIT)) {
        PMPI_Comm_free(&c->private_comm);   /* injected: this rank has none */
        rc = MPI_ERR_OTHER;
    }
    int ok = rc == MPI_SUCCESS, all = 0;
    /* The same outcome on every rank, or ranks would take different
     * paths; and whether every rank runs the progress thread: a rank
     * blocked in the MPI library's allreduce advances none of collar's
     * other operations, which a peer may be waiting for (MPI's progress
     * rule), unless that thread does (collar_sched_block_colls). */
    const size_t zc_min = collar_cfg.ipc_zerocopy_min < (size_t)INT_MAX
                          ? collar_cfg.ipc_zerocopy_min : (size_t)INT_MAX;
    int mine[5] = { ok, __atomic_load_n(&collar_comm_threaded_progress,
                                        __ATOMIC_RELAXED),
                    collar_cfg.ipc_zerocopy != 0, -(int)zc_min,
                    c->node_peers != NULL || !c->node_known };
    int agreed[5] = { 0, 0, 0, 0, 0 };
    collar_agree(mine, agreed, 5, MPI_MIN, comm, "its communicator");
    all = agreed[0];
    c->all_threaded = all && agreed[1];
    c->ipc_zerocopy = all && agreed[2];
    c->ipc_zerocopy_min = (size_t)-(long long)agreed[3];
    c->node_peers_everywhere = all && agreed[4] && c->node_known;
    if (ok && !all) {
        PMPI_Comm_free(&c->private_comm);
        rc = MPI_ERR_OTHER;
    }
    if (swapped) {
        PMPI_Comm_set_errhandler(comm, user);
    }
    if (user != MPI_ERRHANDLER_NULL) {
        PMPI_Errhandler_free(&user);
    }
    if (!all) {
        c->setup = COLLAR_COMM_NONE;
        c->private_comm = MPI_COMM_NULL;
        if (collar_log_first("comm-none")) {
            collar_warn(COLL, "the MPI library gives collar no communicator "
                        "(MPI error %d, e.g. no context id left); collar stages "
                        "the device allreduces of such communicators through "
                        "host memory on the application's communicator", rc);
        }
        return;
    }
    c->setup = COLLAR_COMM_READY;
    __atomic_add_fetch(&comms_held, 1, __ATOMIC_RELAXED);
    PMPI_Comm_set_errhandler(c->private_comm, MPI_ERRORS_RETURN);
    collar_debug(COLL, "new private communicator: %d rank%s, this is rank %d",
                 c->size, collar_plural(c->size), c->rank);
}

collar_status_t collar_comm_get(MPI_Comm comm, int blocking,
                                collar_comm_t **state)
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
        collar_comm_t *c = attr;
        if (c->setup == COLLAR_COMM_LATER && blocking) {
            comm_make_private(c, comm);
        }
        *state = c;
        return COLLAR_OK;
    }

    collar_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    c->refs = 1;   /* the user's communicator's */
    c->private_comm = MPI_COMM_NULL;
    c->setup = COLLAR_COMM_LATER;
    PMPI_Comm_size(comm, &c->size);
    PMPI_Comm_rank(comm, &c->rank);
    comm_find_node(c, comm);
    int *ub = NULL;
    c->tag_ub = 32767;
    if (PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS
        && flag && *ub > 0) {
        c->tag_ub = *ub;
    }
    if (blocking) {
        comm_make_private(c, comm);
    }
    rc = PMPI_Comm_set_attr(comm, comm_keyval, c);
    if (rc != MPI_SUCCESS) {
        collar_comm_unref(c);   /* the only reference: frees everything */
        return COLLAR_ERR_MPI;
    }
    *state = c;
    return COLLAR_OK;
}
