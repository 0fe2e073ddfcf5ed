/*
 * collar - the `ipc` allreduce: the ranks of one node reduce in device
 * memory they map from each other (CUDA IPC; shared memory on the sim
 * device), so that no byte crosses the host-device link.
 *
 * Each communicator keeps one IPC region: on every rank a device buffer of
 * two areas, `in` and `out`, of `cap` bytes each, which every other rank of
 * the node has mapped.  It is registered by the first ipc call and grown
 * by the first call with a larger message (every rank sees the same calls
 * and sizes, so all choose alike), as steps of that call's schedule: see
 * "Registration" below.  With n ranks, rank r and peer[i]
 * rank i's region as mapped here (peer[r] is the own one):
 *
 *   one-shot (bytes below oneshot=, default 256K):
 *
 *     C0  allreduce(1 int)     "the last call's buffers are free"
 *     in  copy send -> peer[r].in            (device copy)
 *     C1  allreduce(1 int)     "every input is in place"
 *     red copy peer[0].in -> recv, then recv op= peer[1].in ... peer[n-1].in
 *     AG  status agreement, once every step is done (a blocking call:
 *         none, C1 carries it)
 *
 *          rank 0            rank 1            rank 2
 *     in   a0 -> in0         a1 -> in1         a2 -> in2
 *          ---------------- C1 ------------------------
 *     red  ((in0+in1)+in2)   ((in0+in1)+in2)   ((in0+in1)+in2)
 *
 *   two-shot (bytes from oneshot= up): reduce-scatter then allgather
 *   through IPC memory; the message is cut into n slices of whole elements
 *   (collar_block_range: remainders to the low slices), rank r owns slice r:
 *
 *     C0, in, C1          as above
 *     rs  copy peer[0].in[r] -> peer[r].out[r], then
 *         peer[r].out[r] op= peer[1].in[r] ... peer[n-1].in[r]
 *     C2  allreduce(1 int)     "every slice is reduced"
 *     ag  copy peer[p].out[p] -> recv[p] for every p (spread over streams)
 *     AG  status agreement, once every step is done
 *
 *          rank 0            rank 1            rank 2
 *     in   a -> in0          b -> in1          c -> in2
 *          ---------------- C1 ------------------------
 *     rs   out0[0] =         out1[1] =         out2[2] =
 *          a0+b0+c0          a1+b1+c1          a2+b2+c2
 *          ---------------- C2 ------------------------
 *     ag   recv = out0[0] out1[1] out2[2] on every rank
 *
 * The reductions run in rank order 0 .. n-1 everywhere, so the result is
 * the same bits on every rank.  Cross-process order comes from MPI only
 * (the one-int allreduces on the private communicator, issued in order by
 * the schedule engine), never from a kernel waiting on a peer's flag.
 *
 * Zero-copy (ipc_user.c, COLLAR_IPC_ZEROCOPY): a call that is not
 * persistent reads the peers' buffers in place instead, its card exchange
 * standing for C0, with the rounds above (collar_ipc_add_after_intake) as
 * its fallback when a rank cannot export or map a buffer.
 *
 * Reuse of the region: C0 of a call is issued after this rank issued
 * every collective of the calls before it (the communicator's turn), the
 * last of which, the status agreement, waits for every step of its
 * schedule, reads of peers' memory included (a blocking one-shot call has
 * no agreement, but is over on the rank, reads included, before the rank
 * issues anything of the next call).  So C0 completes only when
 * every rank has finished reading what the previous call left in the
 * region, and only then does the copy-in overwrite it.
 *
 * Buffers: only copies touch the send buffer and, in two-shot, the receive
 * buffer, so either may be host memory on a rank (a device call with a
 * mix of buffers).  One-shot reduces with kernels into the receive buffer
 * when it is device memory, else into the own `out` area and copies the
 * result out: the same signals on every rank whatever its mix.
 *
 * Failure: a step that fails drains as in every schedule, and the status
 * agreement makes every rank return an error (blocking one-shot: a failure
 * up to C1 fails every rank, one after it that rank alone).  A region that cannot be set
 * up (no IPC in the backend, a peer's memory that cannot be mapped, not one
 * node) is known to every rank through the registration's agreement; the
 * call then runs `chunked` (ipc_build_now); not one node is known at the
 * call (collar_algo_ipc_eligible).
 */
#include "config.h"
#include "ipc_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* What a rank tells each other rank at registration. */
#define IPC_NOTICES 32
typedef struct {
    collar_ipc_handle_t handle;
    char                where[COLLAR_IPC_WHERE_BYTES];
    int                 code;     /* IPC_OK etc. */
    int                 nclosed;
    uint64_t            serial;   /* the sender's memory's (see "Freeing") */
    uint64_t            closed[IPC_NOTICES];   /* nclosed: the receiver's
                                                  memories the sender closed */
} ipc_card_t;

const char *collar_ipc_fallback_why(collar_alg_t alg, int code)
{
    if (alg == COLLAR_ALG_HIER) {
        switch (code) {
        case IPC_NO_BACKEND:
            return "hier -> chunked: the device backend cannot share memory "
                   "between processes";
        case IPC_NO_MEMORY:
            return "hier -> chunked: a rank cannot allocate IPC memory";
        default:
            return "hier -> chunked: a rank cannot map the device memory of "
                   "a peer on its node";
        }
    }
    switch (code) {
    case IPC_NO_BACKEND:
        return "ipc -> chunked: the device backend cannot share memory "
               "between processes";
    case IPC_NO_MEMORY:
        return "ipc -> chunked: a rank cannot allocate IPC memory";
    default:
        return "ipc -> chunked: a rank cannot map the device memory of a peer";
    }
}

/*
 * Freeing.  CUDA: "Calling cudaFree on an exported memory region before
 * calling cudaIpcCloseMemHandle in the importing context will result in
 * undefined behavior" (cudaIpcOpenMemHandle).  So a process gives its own
 * memory of a region back only once every peer that could map it has said
 * it closed its mapping, which it learns without waiting for anyone:
 *
 *   - every own memory a process exports has a serial, unique in the
 *     process, and an entry in its list of exports (ipc_exports) with the
 *     MPI_COMM_WORLD ranks of the peers it was offered to;
 *   - a process that drops its last reference on a region closes its
 *     mappings of the peers' memory and posts a notice "closed serial S"
 *     for each owner (an owner is told even of memory it never opened:
 *     the notice means "will never map it");
 *   - the notices ride in the registration cards the process sends next
 *     to that owner, on any communicator (a card is sent to each peer
 *     separately, with that peer's notices); the owner crosses the peer
 *     off the export, and memory whose region has let it go and every
 *     peer has closed is freed, there or when the region lets it go;
 *   - MPI_Comm_free (the attribute's delete callback) only drops the
 *     communicator's reference: nothing waits for another rank there
 *     (MPI_Comm_free is local in the MPI libraries, and valid programs
 *     free communicators in different orders on different ranks, or
 *     between point-to-point calls that pair them, which an agreement
 *     inside MPI_Comm_free would hang).  A program that makes
 *     communicators over and over (dup, allreduce, free) frees the memory
 *     of each at the next one's registration;
 *   - MPI_Finalize (every schedule over, every process there): an MPI_MIN
 *     allreduce on MPI_COMM_WORLD of "closed every mapping"; all 1: every
 *     memory let go is freed.  A process whose close failed (a broken
 *     context) never posts that notice, and makes the agreement fail: its
 *     peers' memory stays allocated until the processes end.
 *
 * Notices are kept for at most IPC_NOTICES_KEPT owners' memories (the
 * oldest dropped: that memory then waits for MPI_Finalize), and a card
 * carries at most IPC_NOTICES of them (the rest go in a later card).  A
 * rank that fails leaves its memory allocated, never freed early.
 */
#define IPC_NOTICES_KEPT 256

typedef struct ipc_export {
    const collar_device_t *dev;
    void                  *own;
    uint64_t               serial;
    int                    n;        /* peers offered it, then: */
    int                   *world;    /* their world ranks, -1 once closed */
    int                    let_go;   /* no region of this process holds it */
    struct ipc_export     *next;
} ipc_export_t;

typedef struct {
    int      owner;    /* MPI_COMM_WORLD rank */
    uint64_t serial;   /* of the owner's memory */
} ipc_notice_t;

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;   /* guards: */
static ipc_export_t *ipc_exports;
static uint64_t      ipc_last_serial;
static ipc_notice_t  ipc_notices[IPC_NOTICES_KEPT];
static int           ipc_nnotices;
/* A close of a peer's memory failed in this process (collar_ipc_finalize). */
static int ipc_close_failed;

static int export_closed(const ipc_export_t *e)
{
    for (int i = 0; i < e->n; i++) {
        if (e->world[i] >= 0) {
            return 0;
        }
    }
    return e->let_go;
}

/* Unlinks the exports let go whose peers have all closed (ipc_lock held);
 * the caller frees them with exports_free, outside the lock. */
static ipc_export_t *exports_take_closed(void)
{
    ipc_export_t *done = NULL;
    for (ipc_export_t **p = &ipc_exports; *p != NULL;) {
        ipc_export_t *e = *p;
        if (export_closed(e)) {
            *p = e->next;
            e->next = done;
            done = e;
        } else {
            p = &e->next;
        }
    }
    return done;
}

static void exports_free(ipc_export_t *list)
{
    while (list != NULL) {
        ipc_export_t *e = list;
        list = e->next;
        collar_debug(COLL, "ipc: memory %llu freed, every peer has closed it",
                     (unsigned long long)e->serial);
        e->dev->ipc_free(e->own);
        free(e->world);
        free(e);
    }
}

/* Records the own memory of g, offered to the node's other ranks: its
 * serial (0 where there is no room to record it: that memory is never
 * freed, the safe side). */
static uint64_t export_add(const ipc_region_t *g)
{
    ipc_export_t *e = calloc(1, sizeof(*e));
    int *world = calloc((size_t)g->n, sizeof(int));
    if (e == NULL || world == NULL) {
        free(e);
        free(world);
        return 0;
    }
    for (int i = 0; i < g->n; i++) {
        world[i] = i == g->rank ? -1 : g->world[i];
    }
    *e = (ipc_export_t){ g->dev, g->own, 0, g->n, world, 0, NULL };
    pthread_mutex_lock(&ipc_lock);
    e->serial = ++ipc_last_serial;
    e->next = ipc_exports;
    ipc_exports = e;
    pthread_mutex_unlock(&ipc_lock);
    return e->serial;
}

/* No region holds memory `serial` any more: freed now if every peer has
 * closed it, else when the last says so. */
static void export_let_go(uint64_t serial)
{
    pthread_mutex_lock(&ipc_lock);
    for (ipc_export_t *e = ipc_exports; e != NULL; e = e->next) {
        if (e->serial == serial) {
            e->let_go = 1;
            break;
        }
    }
    ipc_export_t *done = exports_take_closed();
    pthread_mutex_unlock(&ipc_lock);
    exports_free(done);
}

/* Process `world` says it has closed the memories in `serials`. */
static void exports_heard(int world, const uint64_t *serials, int count)
{
    pthread_mutex_lock(&ipc_lock);
    for (int k = 0; k < count; k++) {
        for (ipc_export_t *e = ipc_exports; e != NULL; e = e->next) {
            if (e->serial != serials[k]) {
                continue;
            }
            for (int i = 0; i < e->n; i++) {
                if (e->world[i] == world) {
                    e->world[i] = -1;
                }
            }
            break;
        }
    }
    ipc_export_t *done = exports_take_closed();
    pthread_mutex_unlock(&ipc_lock);
    exports_free(done);
}

/* A notice for `owner` (ipc_lock held): the oldest is dropped when full. */
static void notice_post(int owner, uint64_t serial)
{
    if (ipc_nnotices == IPC_NOTICES_KEPT) {
        memmove(ipc_notices, ipc_notices + 1,
                (IPC_NOTICES_KEPT - 1) * sizeof(ipc_notices[0]));
        ipc_nnotices--;
    }
    ipc_notices[ipc_nnotices++] = (ipc_notice_t){ owner, serial };
}

/* Moves up to IPC_NOTICES of `owner`'s notices into a card for it. */
static void notices_take(int owner, ipc_card_t *card)
{
    card->nclosed = 0;
    pthread_mutex_lock(&ipc_lock);
    int kept = 0;
    for (int k = 0; k < ipc_nnotices; k++) {
        if (ipc_notices[k].owner == owner && card->nclosed < IPC_NOTICES) {
            card->closed[card->nclosed++] = ipc_notices[k].serial;
        } else {
            ipc_notices[kept++] = ipc_notices[k];
        }
    }
    ipc_nnotices = kept;
    pthread_mutex_unlock(&ipc_lock);
}

static void ipc_state_unref(ipc_state_t *st)
{
    if (__atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        free(st);
    }
}

/* Peers' memory closed (each owner noticed) and the own let go (a
 * registration that did not succeed, or the last reference). */
static void ipc_region_release(ipc_region_t *g)
{
    int closed[g->n > 0 ? g->n : 1];
    for (int i = 0; i < g->n; i++) {
        closed[i] = 1;
        if (i != g->rank && g->peer[i] != NULL
            && g->dev->ipc_close(g->peer[i]) != COLLAR_OK) {
            /* A mapping may still be open (a broken context cannot close
             * it): its owner is never told, so it keeps the memory, and
             * MPI_Finalize frees nothing (collar_ipc_finalize). */
            closed[i] = 0;
            __atomic_store_n(&ipc_close_failed, 1, __ATOMIC_RELAXED);
        }
        g->peer[i] = NULL;
    }
    pthread_mutex_lock(&ipc_lock);
    for (int i = 0; i < g->n; i++) {
        if (i != g->rank && closed[i] && g->peer_serial[i] != 0) {
            notice_post(g->world[i], g->peer_serial[i]);
        }
        g->peer_serial[i] = 0;
    }
    pthread_mutex_unlock(&ipc_lock);
    if (g->own != NULL) {
        g->own = NULL;
        if (g->serial != 0) {
            export_let_go(g->serial);
        }   /* else left allocated: nothing to note it in */
    }
}

void collar_ipc_region_unref(ipc_region_t *g)
{
    if (g == NULL || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0) {
        return;
    }
    ipc_region_release(g);
    ipc_state_unref(g->st);
    free(g->cards);
    free(g->peer);
    free(g);
}

/* The attribute's delete callback (MPI_Comm_free; MPI_Finalize for the
 * predefined communicators): drops the communicator's reference, and
 * waits for no other rank (see "Freeing"). */
static void ipc_state_freed(void *arg, MPI_Comm comm)
{
    (void)comm;
    ipc_state_t *st = arg;
    ipc_region_t *g = st->region;
    st->region = NULL;
    collar_ipc_region_unref(g);   /* the communicator's reference */
}

static void ipc_state_release(void *arg)
{
    ipc_state_t *st = arg;
    collar_ipc_region_unref(st->region);   /* (no delete callback ran) */
    st->region = NULL;
    ipc_state_unref(st);
}

void collar_ipc_finalize(int barrier)
{
    collar_ipc_zc_finalize();
    /* Once every process is here, every mapping is closed (every schedule
     * is over), unless a process could not close one: the MIN of "closed
     * all" over MPI_COMM_WORLD.  Not known (the collective fails), or a
     * mapping left open anywhere: the memory stays allocated (the driver
     * reclaims it when the process ends). */
    int mine = !__atomic_load_n(&ipc_close_failed, __ATOMIC_RELAXED), all = 0;
    MPI_Errhandler user = MPI_ERRHANDLER_NULL;
    const int swapped = barrier
        && PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &user) == MPI_SUCCESS
        && PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
           == MPI_SUCCESS;
    if (barrier && PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN,
                                  MPI_COMM_WORLD) != MPI_SUCCESS) {
        all = 0;
    }
    if (swapped) {
        PMPI_Comm_set_errhandler(MPI_COMM_WORLD, user);
    }
    if (user != MPI_ERRHANDLER_NULL) {
        PMPI_Errhandler_free(&user);
    }
    ipc_export_t *done = NULL;
    pthread_mutex_lock(&ipc_lock);
    if (barrier && all == 1) {
        for (ipc_export_t *e = ipc_exports; e != NULL; e = e->next) {
            for (int i = 0; e->let_go && i < e->n; i++) {
                e->world[i] = -1;
            }
        }
        done = exports_take_closed();
    } else if (barrier) {
        collar_debug(COLL, "ipc: a process could not close a peer's IPC "
                     "memory: this rank's stays allocated until it ends");
    }
    pthread_mutex_unlock(&ipc_lock);
    exports_free(done);
}

/*
 * Registration, as steps of the schedule of the call that needs a region
 * (nothing waits for another rank outside the schedule): this rank has
 * allocated its memory when the schedule was built; it sends its card
 * (handle, device, code) to every peer of its node and receives theirs,
 * point to point on the private communicator; maps every peer's memory
 * (ipc_open_step); all ranks of the communicator agree on the outcome
 * (MPI_MIN of the codes, every node at once for hier); the continuation
 * (ipc_continue) then records it, lets the backend drop what made the
 * handle openable (ipc_published: every peer has opened the handle or given up) and
 * appends the algorithm's steps, or chunked's when the outcome is not
 * IPC_OK.  The steps are `once`: a persistent operation registers at its
 * first start only.
 */

/* A new region of `cap` bytes an area, its own memory allocated and its
 * card filled (a code other than IPC_OK when it cannot take part). */
static ipc_region_t *ipc_region_new(const collar_comm_t *comm, ipc_state_t *st,
                                    const collar_device_t *dev, size_t cap)
{
    const int n = comm->node_size;
    ipc_region_t *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return NULL;
    }
    /* peer, then world and peer_serial in the same allocation; the cards
     * received (n), then those sent (n). */
    g->peer = calloc((size_t)n, sizeof(*g->peer) + sizeof(int) + sizeof(uint64_t));
    g->cards = calloc(2 * (size_t)n, sizeof(ipc_card_t));
    if (g->peer == NULL || g->cards == NULL) {
        free(g->peer);
        free(g->cards);
        free(g);
        return NULL;
    }
    g->peer_serial = (uint64_t *)(g->peer + n);
    g->world = (int *)(g->peer_serial + n);
    for (int i = 0; i < n; i++) {
        g->world[i] = comm->node_world[i];
    }
    g->refs = 1;   /* the communicator's */
    __atomic_add_fetch(&st->refs, 1, __ATOMIC_RELAXED);
    g->st = st;
    g->dev = dev;
    g->n = n;
    g->rank = comm->node_rank;
    g->cap = cap;
    ipc_card_t *mine = &((ipc_card_t *)g->cards)[g->rank];
    mine->code = IPC_OK;
    if (dev->ipc_alloc == NULL) {
        mine->code = IPC_NO_BACKEND;
    } else if (dev->ipc_alloc(2 * cap, (void **)&g->own, &mine->handle) != COLLAR_OK) {
        collar_info(MEM, "ipc: cannot allocate %zu bytes of IPC memory", 2 * cap);
        g->own = NULL;
        mine->code = IPC_NO_MEMORY;
    } else {
        dev->ipc_where(g->own, mine->where, sizeof(mine->where));
        mine->where[sizeof(mine->where) - 1] = '\0';
        g->serial = export_add(g);
        mine->serial = g->serial;
    }
    g->code_in = mine->code;
    ipc_card_t *out = (ipc_card_t *)g->cards + n;
    for (int i = 0; i < n; i++) {
        if (i != g->rank) {
            out[i] = *mine;
            notices_take(g->world[i], &out[i]);
        }
    }
    return g;
}

/* The CALL step that maps the peers' memory, once the exchange is over
 * (op->nexch receives and sends from op->first_recv: the cards are here,
 * and the own card's buffer is free again).  A failure of the exchange
 * is this rank's code, folded in before the agreement. */
static collar_status_t ipc_open_step(collar_sched_t *s, void *arg)
{
    ipc_op_t *op = arg;
    ipc_region_t *g = op->region;
    if (!collar_sched_steps_done(s, op->first_recv, op->nexch)) {
        return COLLAR_INPROGRESS;
    }
    ipc_card_t *cards = g->cards;
    if (s->status != COLLAR_OK && g->code_in > IPC_NO_MAP) {
        g->code_in = IPC_NO_MAP;   /* a message of the exchange failed */
    }
    if (s->status == COLLAR_OK) {
        /* Each peer's serial, and what it has closed of this process's
         * memory: let-go memory may be freed now. */
        for (int i = 0; i < g->n; i++) {
            if (i != g->rank) {
                g->peer_serial[i] = cards[i].serial;
                const int k = cards[i].nclosed;
                exports_heard(g->world[i], cards[i].closed,
                              k < 0 ? 0 : k > IPC_NOTICES ? IPC_NOTICES : k);
            }
        }
    }
    for (int i = 0; g->code_in == IPC_OK && i < g->n; i++) {
        if (i == g->rank) {
            g->peer[i] = g->own;
            continue;
        }
        cards[i].where[sizeof(cards[i].where) - 1] = '\0';
        if (cards[i].code != IPC_OK) {
            break;   /* that rank says why; the agreement takes its code */
        }
        if (!g->dev->ipc_reachable(cards[i].where)) {
            collar_info(MEM, "ipc: rank %d's device (%s) cannot be reached "
                        "from this one", i, cards[i].where);
            g->code_in = IPC_NO_MAP;
        } else if (g->dev->ipc_open(&cards[i].handle, (void **)&g->peer[i])
                   != COLLAR_OK) {
            collar_info(MEM, "ipc: cannot map the IPC memory of rank %d", i);
            g->peer[i] = NULL;
            g->code_in = IPC_NO_MAP;
        }
    }
    return COLLAR_OK;
}

/* Adds the registration of op->region (fresh, this call's) to `s`.  *last:
 * the agreement. */
static collar_status_t ipc_add_registration(collar_sched_t *s, ipc_op_t *op,
                                            int *last)
{
    ipc_region_t *g = op->region;
    const collar_comm_t *comm = s->comm;
    ipc_card_t *cards = g->cards;
    collar_ring_tags_t tags;
    const int tag = collar_ring_tags(comm->tag_ub, comm->size, s->seq, &tags)
                    ? tags.base : 0;
    op->first_recv = s->nsteps;
    op->nexch = 0;
    for (int pass = 0; pass < 2; pass++) {   /* receives first, then sends */
        for (int i = 0; i < g->n; i++) {
            if (i == g->rank) {
                continue;
            }
            collar_step_t t = { .kind = pass == 0 ? COLLAR_STEP_IRECV
                                                  : COLLAR_STEP_ISEND,
                                .once = 1 };
            t.u.p2p.buf = pass == 0 ? (void *)&cards[i] : (void *)&cards[g->n + i];
            t.u.p2p.count = (int)sizeof(ipc_card_t);
            t.u.p2p.dt = MPI_BYTE;
            t.u.p2p.peer = comm->node_peers[i];
            t.u.p2p.tag = tag;
            COLLAR_CHECK(collar_sched_add(s, &t, NULL));
            op->nexch++;   /* the open step waits for both directions */
        }
    }
    collar_step_t open = { .kind = COLLAR_STEP_CALL, .once = 1 };
    open.u.call.fn = ipc_open_step;
    open.u.call.arg = op;
    int opened;
    COLLAR_CHECK(collar_sched_add(s, &open, &opened));
    collar_step_t agree = { .kind = COLLAR_STEP_IALLREDUCE, .once = 1,
                            .ndeps = 1, .deps = { opened } };
    agree.u.allreduce.sbuf = &g->code_in;
    agree.u.allreduce.rbuf = &g->code_out;
    agree.u.allreduce.count = 1;
    agree.u.allreduce.dt = MPI_INT;
    agree.u.allreduce.op = MPI_MIN;
    return collar_sched_add(s, &agree, last);
}

/* The registrar's end of a registration, after the agreement: its outcome
 * on record for every call that waits for it. */
static void ipc_registered(collar_sched_t *s, ipc_region_t *g, collar_alg_t alg)
{
    int code = g->code_out;
    if (s->status != COLLAR_OK) {
        code = IPC_NO_MAP < code ? IPC_NO_MAP : code;  /* the agreement failed */
    }
    if (g->own != NULL) {
        /* Every peer has opened the own handle or given up on it. */
        g->dev->ipc_published(g->own);
    }
    if (code != IPC_OK) {
        ipc_region_release(g);
        if (g->code_in == IPC_OK) {
            collar_info(COLL, "%s: another %s could not set up its IPC memory",
                        collar_alg_name(alg), alg == COLLAR_ALG_HIER ? "node" : "rank");
        }
    } else {
        collar_debug(COLL, "ipc: %d rank%s, %zu bytes of IPC memory each",
                     g->n, collar_plural(g->n), 2 * g->cap);
    }
    free(g->cards);
    g->cards = NULL;
    __atomic_store_n(&g->code, code, __ATOMIC_RELAXED);
    __atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
}

void collar_ipc_log(const collar_sched_t *s, const ipc_op_t *op,
                    const collar_plan_t *plan, const char *how)
{
    collar_select_key_t key = {
        .coll = COLLAR_COLL_ALLREDUCE, .mem = op->call.mem,
        .comm_size = s->comm->size, .bytes = op->call.bytes, .reducible = 1,
    };
    collar_comm_shape(s->comm, &key);
    collar_algo_log_choice(s->comm->rank, &key, plan, how);
}

void collar_ipc_describe(const ipc_op_t *op, int zerocopy, char *buf, size_t len)
{
    if (op->plan.alg == COLLAR_ALG_HIER) {
        /* (hier's slices cross the nodes as add_across cuts them.) */
        char size[32];
        const size_t chunk = op->plan.chunk ? op->plan.chunk : COLLAR_DEFAULT_CHUNK;
        collar_format_bytes_exact(chunk, size, sizeof(size));
        if (op->plan.mpi_cuda_aware) {
            snprintf(buf, len, "hier, each slice across nodes whole, on device "
                     "pointers");
        } else {
            snprintf(buf, len, "hier, each slice across nodes through host "
                     "memory in %s chunks", size);
        }
        return;
    }
    snprintf(buf, len, "ipc %s, %s", collar_ipc_twoshot(op) ? "two-shot" : "one-shot",
             zerocopy ? "zero-copy" : "copy-in");
}

int collar_ipc_twoshot(const ipc_op_t *op)
{
    return op->call.bytes >= collar_algo_ipc_oneshot(&op->plan) && op->region->n > 1;
}

/* The algorithm's steps on a registered region; chunked's (staged's for
 * a datatype that cannot be cut) when the registration failed, the reason
 * said once and counted. */
static collar_status_t ipc_build_now(ipc_op_t *op, collar_sched_t *s)
{
    const int code = op->region->code;
    if (code == IPC_OK) {
        /* Zero-copy says how it runs once every rank has said whether it
         * can (ipc_user.c, zc_go). */
        if (op->plan.alg != COLLAR_ALG_IPC || !collar_ipc_zc_wanted(s->comm, op)) {
            char how[160];
            collar_ipc_describe(op, 0, how, sizeof(how));
            collar_ipc_log(s, op, &op->plan, how);
        }
        return op->steps(&op->call, &op->plan, s, op);
    }
    /* Never blocking collectives (collar_sched_block_colls): this runs at
     * the start on a rank that saw the registration over, in the
     * continuation on one that did not yet, and the ranks must issue the
     * same kind of collective. */
    collar_call_t c = op->call;
    c.blocking = 0;
    const collar_call_t *call = &c;
    collar_plan_t p = op->plan;
    p.fallback = collar_ipc_fallback_why(op->plan.alg, code);
    p.alg = collar_call_chunkable(call) ? COLLAR_ALG_CHUNKED : COLLAR_ALG_STAGED;
    collar_ipc_log(s, op, &p, NULL);
    collar_stats_fallback(p.fallback);
    s->stats.alg = p.alg;   /* what the statistics record */
    return p.alg == COLLAR_ALG_STAGED ? collar_algo_staged_build(call, &p, s)
                                      : collar_algo_chunked_build(call, &p, s);
}

/* The continuation: once the region's outcome is known (this call's
 * registration, or an earlier call's still running), the algorithm's
 * steps, or chunked's. */
static collar_status_t ipc_continue(collar_sched_t *s, void *arg)
{
    ipc_op_t *op = arg;
    if (op->registrar) {
        op->registrar = 0;
        ipc_registered(s, op->region, op->plan.alg);
    }
    if (!__atomic_load_n(&op->region->done, __ATOMIC_ACQUIRE)) {
        return COLLAR_INPROGRESS;
    }
    return ipc_build_now(op, s);
}

static void ipc_op_free(collar_sched_t *s)
{
    ipc_op_t *op = s->cleanup_arg;
    if (op->registrar && op->region != NULL) {
        /* Never reached its agreement (a schedule given up before it ran,
         * the call failing): the calls that wait for the region fall back
         * rather than wait for ever. */
        op->region->code_out = IPC_NO_MAP;
        ipc_registered(s, op->region, op->plan.alg);
    }
    collar_ipc_zc_free(op);
    collar_ipc_region_unref(op->region);
    free(op);
}

/* The region this call uses, decided alike on every rank from what every
 * rank has seen in the same order (the calls on the communicator and their
 * sizes, never the timing): the latest region when it is large enough,
 * registered or not yet, else a new one this call registers.  A failed
 * registration is not tried again until a larger call comes. */
static ipc_region_t *ipc_region_for(collar_comm_t *comm, const collar_call_t *call,
                                    int *fresh)
{
    ipc_state_t *st = comm->ipc;
    *fresh = 0;
    if (st == NULL) {
        st = calloc(1, sizeof(*st));
        if (st == NULL) {
            return NULL;
        }
        st->refs = 1;   /* the communicator's */
        comm->ipc = st;
        comm->ipc_release = ipc_state_release;
        comm->ipc_freed = ipc_state_freed;
    }
    if (st->region == NULL || st->region->cap < call->bytes) {
        /* A persistent allreduce registers a region of its own at its
         * first start: it takes its turn only then, and calls made
         * before that start must not wait for its registration. */
        size_t cap = collar_pool_round(call->bytes);
        if (cap == 0) {
            cap = call->bytes;
        }
        if (cap < IPC_MIN_CAP) {
            cap = IPC_MIN_CAP;
        }
        if (!call->persistent) {
            /* The replaced region first (schedules keep theirs): closed
             * now where no schedule holds it, which the new card says. */
            ipc_region_t *old = st->region;
            st->region = NULL;
            collar_ipc_region_unref(old);
        }
        ipc_region_t *g = ipc_region_new(comm, st, call->dev, cap);
        if (g == NULL) {
            return NULL;
        }
        *fresh = 1;
        if (call->persistent) {
            return g;   /* the operation's reference is the only one */
        }
        st->region = g;
    }
    __atomic_add_fetch(&st->region->refs, 1, __ATOMIC_RELAXED);
    return st->region;
}

collar_status_t collar_ipc_start(const collar_call_t *call,
                                 const collar_plan_t *plan, collar_sched_t *s,
                                 collar_ipc_steps_fn_t steps)
{
    ipc_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return COLLAR_ERR_NO_MEMORY;
    }
    int fresh = 0;
    op->region = ipc_region_for(s->comm, call, &fresh);   /* a reference */
    if (op->region == NULL) {
        free(op);
        return COLLAR_ERR_NO_MEMORY;
    }
    op->call = *call;
    op->plan = *plan;
    op->steps = steps;
    op->registrar = fresh;
    s->cleanup = ipc_op_free;
    s->cleanup_arg = op;
    if (__atomic_load_n(&op->region->done, __ATOMIC_ACQUIRE)) {
        return ipc_build_now(op, s);
    }
    int dep = -1;
    if (fresh) {
        COLLAR_CHECK(ipc_add_registration(s, op, &dep));
    }
    collar_step_t cont = { .kind = COLLAR_STEP_CALL, .once = 1 };
    cont.u.call.fn = ipc_continue;
    cont.u.call.arg = op;
    cont.u.call.extends = 1;
    if (dep >= 0) {
        cont.deps[cont.ndeps++] = dep;
    }
    return collar_sched_add(s, &cont, NULL);
}

void collar_algo_ipc_eligible(const collar_call_t *call,
                              const collar_comm_t *comm, collar_plan_t *plan)
{
    (void)call;
    if (plan->alg != COLLAR_ALG_IPC) {
        return;
    }
    if (!comm->node_known) {
        /* Every rank knows (from the table of nodes of MPI_Init). */
        plan->alg = COLLAR_ALG_CHUNKED;
        plan->fallback = "ipc -> chunked: the nodes of the communicator's "
                         "processes are not known";
    } else if (!comm->one_node) {
        plan->alg = COLLAR_ALG_CHUNKED;
        plan->fallback = "ipc -> chunked: the communicator spans more than "
                         "one node";
    } else if (!comm->node_peers_everywhere) {
        plan->alg = COLLAR_ALG_CHUNKED;
        plan->fallback = "ipc -> chunked: a rank has no memory for its node's "
                         "peers";
    }
}

/* ---------------------------------------------------------------- schedule */

static collar_status_t add_step(collar_sched_t *s, collar_step_t *t, int dep1,
                                int dep2, int *index)
{
    t->ndeps = 0;
    if (dep1 >= 0) {
        t->deps[t->ndeps++] = dep1;
    }
    if (dep2 >= 0) {
        t->deps[t->ndeps++] = dep2;
    }
    return collar_sched_add(s, t, index);
}

collar_status_t collar_ipc_add_copy(collar_sched_t *s, void *dst, const void *src,
                                    size_t bytes, int stream, int dep, int *index)
{
    collar_step_t t = { .kind = COLLAR_STEP_COPY };
    t.u.copy.dst = dst;
    t.u.copy.src = src;
    t.u.copy.bytes = bytes;
    t.u.copy.stream = stream;
    return add_step(s, &t, dep, -1, index);
}

/* A cross-process signal: a one-int allreduce. */
collar_status_t collar_ipc_add_signal(collar_sched_t *s, ipc_op_t *op, int k,
                                      int on, int dep, int *index)
{
    collar_step_t t = { .kind = COLLAR_STEP_IALLREDUCE };
    t.u.allreduce.on = on;
    t.u.allreduce.sbuf = &op->sig_in[k];
    t.u.allreduce.rbuf = &op->sig_out[k];
    t.u.allreduce.count = 1;
    t.u.allreduce.dt = MPI_INT;
    t.u.allreduce.op = MPI_MAX;
    return add_step(s, &t, dep, -1, index);
}

/* dst = src[0] op src[1] ... op src[n-1] (each at byte offset `off`), in
 * rank order, on one stream, after `dep`.  *last: the final step. */
collar_status_t collar_ipc_add_reduce_all(collar_sched_t *s,
                                          const collar_call_t *call,
                                          const ipc_region_t *g, size_t area,
                                          char *dst, size_t off, size_t count,
                                          int stream, int dep, int *last)
{
    const char *src[g->n];
    for (int i = 0; i < g->n; i++) {
        src[i] = g->peer[i] + area + off;
    }
    return collar_ipc_add_reduce_ptrs(s, call, src, g->n, dst, count, stream,
                                      dep, last);
}

collar_status_t collar_ipc_add_reduce_ptrs(collar_sched_t *s,
                                           const collar_call_t *call,
                                           const char *const *src, int n,
                                           char *dst, size_t count, int stream,
                                           int dep, int *last)
{
    const size_t bytes = count * (size_t)call->type_size;
    if (s->dev->reduce_n_async != NULL && n > 1) {
        /* One pass a group of inputs; a later group goes on from dst. */
        int i = 0;
        *last = dep;
        while (i < n) {
            collar_step_t t = { .kind = COLLAR_STEP_DEV_REDUCE_N };
            int k = 0;
            if (i > 0) {
                t.u.reduce_n.src[k++] = dst;
            }
            while (k < COLLAR_REDUCE_N_MAX && i < n) {
                t.u.reduce_n.src[k++] = src[i++];
            }
            t.u.reduce_n.dst = dst;
            t.u.reduce_n.n = k;
            t.u.reduce_n.count = count;
            t.u.reduce_n.dt = call->cdt;
            t.u.reduce_n.op = call->cop;
            t.u.reduce_n.stream = stream;
            COLLAR_CHECK(add_step(s, &t, *last, -1, last));
        }
        return COLLAR_OK;
    }
    COLLAR_CHECK(collar_ipc_add_copy(s, dst, src[0], bytes, stream, dep, last));
    for (int i = 1; i < n; i++) {
        collar_step_t t = { .kind = COLLAR_STEP_DEV_REDUCE };
        t.u.reduce.inout = dst;
        t.u.reduce.in = src[i];
        t.u.reduce.count = count;
        t.u.reduce.dt = call->cdt;
        t.u.reduce.op = call->cop;
        t.u.reduce.stream = stream;
        COLLAR_CHECK(add_step(s, &t, *last, -1, last));
    }
    return COLLAR_OK;
}

size_t collar_algo_ipc_oneshot(const collar_plan_t *plan)
{
    return plan->oneshot != 0 ? plan->oneshot : COLLAR_IPC_ONESHOT_DEFAULT;
}

collar_status_t collar_ipc_add_intake(collar_sched_t *s, ipc_op_t *op,
                                      const collar_call_t *call, int on,
                                      int stream, int *c1)
{
    const void *send = call->in_place ? call->rbuf : call->sbuf;
    int order, c0, copied;
    collar_step_t t = { .kind = COLLAR_STEP_ORDER };
    COLLAR_CHECK(collar_sched_add(s, &t, &order));
    COLLAR_CHECK(collar_ipc_add_signal(s, op, 0, on, order, &c0));
    COLLAR_CHECK(collar_ipc_add_copy(s, op->region->own, send, call->bytes, stream,
                                     c0, &copied));
    return collar_ipc_add_signal(s, op, 1, on, copied, c1);
}

collar_status_t collar_ipc_add_gather(collar_sched_t *s, const collar_call_t *call,
                                      const ipc_region_t *g, int nslices,
                                      int stream, int dep)
{
    const char *from[nslices];
    for (int p = 0; p < nslices; p++) {
        from[p] = g->peer[p] + g->cap;
    }
    return collar_ipc_add_gather_from(s, call, from, nslices, -1, stream, dep);
}

collar_status_t collar_ipc_add_gather_from(collar_sched_t *s,
                                           const collar_call_t *call,
                                           const char *const *from, int nslices,
                                           int skip, int stream, int dep)
{
    const int nstreams = s->dev->nstreams();
    const size_t esize = (size_t)call->type_size;
    char *recv = call->rbuf;
    for (int p = 0; p < nslices; p++) {
        MPI_Count first, cnt;
        collar_block_range(call->count, nslices, p, &first, &cnt);
        if (cnt > 0 && p != skip) {
            const size_t off = (size_t)first * esize;
            int last;
            COLLAR_CHECK(collar_ipc_add_copy(s, recv + off, from[p] + off,
                                             (size_t)cnt * esize,
                                             (stream + p) % nstreams, dep, &last));
        }
    }
    return COLLAR_OK;
}

collar_status_t collar_ipc_add_after_intake(collar_sched_t *s, ipc_op_t *op,
                                           int stream, int c1)
{
    const collar_call_t *call = &op->call;
    const ipc_region_t *g = op->region;
    const size_t in = 0, out = g->cap;
    int last;
    if (!collar_ipc_twoshot(op)) {
        /* A kernel writes the result: into the receive buffer when it is
         * device memory, else into the own `out` area (unused by one-shot,
         * no peer reads it before the next call's C0), copied out from
         * there. */
        const int host = call->rmem == COLLAR_MEM_HOST;
        char *dst = host ? g->own + out : call->rbuf;
        /* Copy in, C1, kernel(s), copy out: each waits for the one before,
         * so in a blocking call the host waits for each device step as it
         * issues it (collar_sched_t.serial_device). */
        s->serial_device = 1;
        COLLAR_CHECK(collar_ipc_add_reduce_all(s, call, g, in, dst, 0,
                                               (size_t)call->count, stream, c1,
                                               &last));
        if (host) {
            COLLAR_CHECK(collar_ipc_add_copy(s, call->rbuf, dst, call->bytes,
                                             stream, last, &last));
        }
        if (call->blocking && op->zc == NULL) {
            /* Nothing of the schedule overlaps C0 or C1: the MPI library's
             * blocking allreduce where every rank runs the progress thread
             * (collar_sched_block_coll; the calling thread runs the
             * schedule, collar_algo_ipc_build). */
            collar_sched_block_coll(s, c1 - 2);   /* C0: intake's order */
            collar_sched_block_coll(s, c1);
            /* A blocking call: C1 carries the status agreement ("this
             * rank's input failed", MPI_MAX), and no agreement follows.
             * Every input is in place or known failed at C1; what fails
             * after it (this rank's reduction, its copy out) fails this
             * rank alone, whose input the others read whole.  The reuse
             * of the region needs no agreement either: this rank issues
             * the next call's C0 only once this call is over here, its
             * reads of the peers' memory included. */
            collar_sched_fold_agree(s, c1, &op->sig_in[1], COLLAR_DT_INT32,
                                    COLLAR_OP_MAX);
            op->agreed = 1;
        }
        return COLLAR_OK;
    }

    /* Two-shot: this rank's slice of every input, reduced into its out. */
    MPI_Count first, cnt;
    collar_block_range(call->count, g->n, g->rank, &first, &cnt);
    int reduced = c1;
    if (cnt > 0) {
        const size_t off = (size_t)first * (size_t)call->type_size;
        COLLAR_CHECK(collar_ipc_add_reduce_all(s, call, g, in, g->own + out + off,
                                               off, (size_t)cnt, stream, c1,
                                               &reduced));
    }
    int c2;
    COLLAR_CHECK(collar_ipc_add_signal(s, op, 2, COLLAR_STEP_ON_PRIVATE, reduced, &c2));
    return collar_ipc_add_gather(s, call, g, g->n, stream, c2);
}

/* ipc's own steps, on a registered region: the peers' buffers read in
 * place where the call allows (ipc_user.c), else through the copy-in. */
static collar_status_t ipc_steps(const collar_call_t *call,
                                 const collar_plan_t *plan, collar_sched_t *s,
                                 ipc_op_t *op)
{
    (void)plan;
    const int stream = (int)(s->seq % (uint64_t)s->dev->nstreams());
    if (collar_ipc_zc_wanted(s->comm, op)) {
        return collar_ipc_zc_add(s, op, stream);
    }
    int c1;
    COLLAR_CHECK(collar_ipc_add_intake(s, op, call, COLLAR_STEP_ON_PRIVATE, stream,
                                       &c1));
    COLLAR_CHECK(collar_ipc_add_after_intake(s, op, stream, c1));
    return op->agreed ? COLLAR_OK : collar_sched_add_agree(s, 1);
}

collar_status_t collar_algo_ipc_build(const collar_call_t *call,
                                      const collar_plan_t *plan,
                                      collar_sched_t *s)
{
    if (!s->comm->one_node || call->type_size <= 0) {
        /* collar_algo_ipc_eligible decides, alike on every rank. */
        return COLLAR_ERR_INVALID;
    }
    if (call->blocking) {
        /* Run by the calling thread (its one-shot collectives block),
         * whenever its steps are added. */
        s->run_here = 1;
    }
    return collar_ipc_start(call, plan, s, ipc_steps);
}

int collar_algo_ipc_eligible_call(const collar_call_t *call)
{
    /* A device call (on every rank: a rank's own mix of buffers does not
     * count, see collar_algo_ipc_build), a reduction collar has, elements
     * without gaps. */
    return call->dev != NULL && call->mem != COLLAR_MEM_HOST && call->dense
           && call->cdt != COLLAR_DT_NONE && call->cop != COLLAR_OP_NONE
           && call->dev->reduce_supported(call->cdt, call->cop);
}
