/*
 * collar - the `hier` allreduce: for a communicator that spans nodes.
 * Within each node the ranks reduce-scatter through IPC memory (as `ipc`
 * two-shot does), the owners of a slice allreduce it across nodes, and the
 * node's ranks gather the slices through IPC memory again.  Only a slice of
 * the message crosses the host-device link and the network on each rank.
 *
 * The message is cut into m slices of whole elements, m the number of
 * ranks on the smallest node (collar_block_range: remainders to the low
 * slices); on every node, node rank j < m owns slice j.  Ranks with the
 * same node rank form the cross communicator (comm->cross_comm, made at
 * hier's first blocking allreduce on the communicator, in its turn); node
 * ranks >= m own nothing: on a
 * node larger than the smallest they only give their input and take the
 * result.  With n the node's ranks and peer[i] node rank i's region:
 *
 *   C0  allreduce(1 int) on the node    "the last call's readers are done"
 *   in  copy send -> peer[r].in         (device copy)
 *   C1  allreduce(1 int) on the node    "every input is in place"
 *   rs  r < m: peer[r].out[r] = peer[0].in[r] op ... op peer[n-1].in[r]
 *   X   r < m: slice r across nodes, in pieces of plan->chunk bytes:
 *         d2h   copy peer[r].out[r] piece -> host staging
 *         ar    MPI_Iallreduce in place on the host piece, cross_comm
 *         h2d   copy it back into peer[r].out[r]
 *       (over an MPI library that takes device pointers: only ar, in
 *       place on the device slice)
 *   C2  allreduce(1 int) on the node    "every slice is final"
 *   ag  copy peer[p].out[p] -> recv[p] for every p < m
 *   AG  status agreement on the whole communicator, after every step
 *
 *      node 0 (ranks 0, 1)              node 1 (ranks 2, 3)
 *   rs   out0[0] = a0+b0   out1[1] = a1+b1   out2[0] = c0+d0   out3[1] = c1+d1
 *   X    rank 0 <-> rank 2: slice 0        rank 1 <-> rank 3: slice 1
 *   ag   recv = out0[0] | out1[1]          recv = out2[0] | out3[1]
 *
 * Each node reduces its ranks in node rank order; the MPI library's
 * allreduce of a slice gives the same bits on every node (as MPI advises
 * and the libraries do), and every rank of a node copies the same slices:
 * every rank ends with the same bits.
 *
 * The signals run on comm->node_sched, the cross allreduces on
 * comm->cross_comm, both issued in the schedule's turn like every internal
 * collective, so that the collectives of operations in flight stay in one
 * order on every communicator.  Reuse of the region is safe for the reason
 * given in ipc.c: C0 of a call completes only when every rank of the node
 * has finished the previous call's steps.
 *
 * Falls back (collar_algo_hier_eligible): one node -> ipc; ranks that
 * cannot be grouped by node (a process outside MPI_COMM_WORLD, a rank
 * without a device backend) or whose communicators of hier could not be
 * made or are not made yet (a nonblocking or persistent allreduce before
 * the first blocking one) -> chunked; a node without IPC memory -> chunked
 * on every node (the registration's agreement spans the communicator).
 */
#include "config.h"
#include "ipc_int.h"

void collar_algo_hier_eligible(const collar_call_t *call, collar_comm_t *comm,
                               int blocking, collar_in_turn_fn_t in_turn,
                               collar_plan_t *plan)
{
    if (plan->alg != COLLAR_ALG_HIER) {
        return;
    }
    /* Every rank knows these alike: the nodes from the table of MPI_Init,
     * hier_made from the blocking allreduces before this call. */
    if (comm->one_node && comm->node_known) {
        plan->alg = COLLAR_ALG_IPC;
        plan->fallback = "hier -> ipc: the communicator is one node";
        collar_algo_ipc_eligible(call, comm, plan);
        return;
    }
    if (!comm->node_known || comm->node_min <= 0 || !comm->node_peers_everywhere) {
        plan->alg = COLLAR_ALG_CHUNKED;
        plan->fallback = "hier -> chunked: the ranks cannot be grouped by node";
        return;
    }
    if (comm->hier_made == 0 && blocking && in_turn != NULL) {
        /* A blocking allreduce: every rank is here, in this call. */
        if (in_turn(comm, collar_comm_make_hier) != COLLAR_OK) {
            comm->hier_made = -1;
        }
    }
    if (comm->hier_made == 0) {
        plan->alg = COLLAR_ALG_CHUNKED;
        plan->fallback = "hier -> chunked: hier makes its communicators (per "
                         "node, across nodes) at its first blocking allreduce "
                         "on the communicator, not in a nonblocking or "
                         "persistent one";
    } else if (comm->hier_made < 0) {
        plan->alg = COLLAR_ALG_CHUNKED;
        plan->fallback = "hier -> chunked: the MPI library could not make the "
                         "communicators of hier (per node, across nodes)";
    }
}

/*
 * The owner's part across nodes: `bytes` of the slice at `slice` (device
 * IPC memory) allreduced among the ranks of cross_comm, piece by piece
 * through host staging, after `dep`.  *last: the last step.
 */
static collar_status_t add_across(const collar_call_t *call,
                                  const collar_plan_t *plan, collar_sched_t *s,
                                  char *slice, MPI_Count count, int stream,
                                  int dep, int *last)
{
    const size_t esize = (size_t)call->type_size;
    const int direct = plan->mpi_cuda_aware;
    char *host = slice;
    if (direct) {
        /* The MPI library takes device pointers: it allreduces the slice
         * where it is, after the reduction that wrote it. */
        s->pmpi_device_ok = 1;
    } else {
        COLLAR_CHECK(collar_sched_staging(s, (size_t)count * esize, (void **)&host));
    }

    const size_t chunk = plan->chunk != 0 ? plan->chunk : COLLAR_DEFAULT_CHUNK;
    MPI_Count per = (MPI_Count)(chunk / esize);
    if (per < 1) {
        per = 1;
    }
    if (per > COLLAR_PIECE_MAX || direct) {
        per = COLLAR_PIECE_MAX;   /* direct: the library pipelines itself */
    }
    const int nstreams = s->dev->nstreams();
    int back = -1;
    for (MPI_Count e0 = 0, k = 0; e0 < count; e0 += per, k++) {
        const MPI_Count n = count - e0 < per ? count - e0 : per;
        const size_t off = (size_t)e0 * esize, bytes = (size_t)n * esize;
        int d2h = dep, ar;
        /* Pieces go out on the streams in turn; the copies back queue on
         * the slice's stream, each after the one before. */
        if (!direct) {
            COLLAR_CHECK(collar_ipc_add_copy(s, host + off, slice + off, bytes,
                                             (stream + (int)(k % nstreams)) % nstreams,
                                             dep, &d2h));
        }
        collar_step_t t = { .kind = COLLAR_STEP_IALLREDUCE };
        t.u.allreduce.sbuf = MPI_IN_PLACE;
        t.u.allreduce.rbuf = host + off;
        t.u.allreduce.count = (int)n;
        t.u.allreduce.dt = call->dtype;
        t.u.allreduce.op = call->op;
        t.u.allreduce.on = COLLAR_STEP_ON_CROSS;
        t.deps[t.ndeps++] = d2h;
        if (direct && back >= 0) {
            t.deps[t.ndeps++] = back;   /* one after the other: C2 waits
                                         * for the last, so for all */
        }
        COLLAR_CHECK(collar_sched_add(s, &t, &ar));
        if (direct) {
            back = ar;
            continue;
        }
        collar_step_t c = { .kind = COLLAR_STEP_COPY };
        c.u.copy.dst = slice + off;
        c.u.copy.src = host + off;
        c.u.copy.bytes = bytes;
        c.u.copy.stream = stream;
        c.deps[c.ndeps++] = ar;
        if (back >= 0) {
            c.deps[c.ndeps++] = back;
        }
        COLLAR_CHECK(collar_sched_add(s, &c, &back));
    }
    *last = back;
    return COLLAR_OK;
}

/* hier's own steps, on a registered region. */
static collar_status_t hier_steps(const collar_call_t *call,
                                  const collar_plan_t *plan, collar_sched_t *s,
                                  ipc_op_t *op)
{
    const collar_comm_t *comm = s->comm;
    const ipc_region_t *g = op->region;
    const int m = comm->node_min;
    const int stream = (int)(s->seq % (uint64_t)s->dev->nstreams());
    const size_t in = 0, out = g->cap;

    int c1, c2;
    COLLAR_CHECK(collar_ipc_add_intake(s, op, call, COLLAR_STEP_ON_NODE, stream, &c1));
    int done = c1;
    if (g->rank < m) {
        MPI_Count first, cnt;
        collar_block_range(call->count, m, g->rank, &first, &cnt);
        if (cnt > 0) {
            /* Every rank with this node rank has the same slice: all of
             * cross_comm issue its allreduces, or none. */
            const size_t off = (size_t)first * (size_t)call->type_size;
            char *slice = g->own + out + off;
            int reduced;
            COLLAR_CHECK(collar_ipc_add_reduce_all(s, call, g, in, slice, off,
                                                   (size_t)cnt, stream, c1,
                                                   &reduced));
            COLLAR_CHECK(add_across(call, plan, s, slice, cnt, stream, reduced,
                                    &done));
        }
    }
    COLLAR_CHECK(collar_ipc_add_signal(s, op, 2, COLLAR_STEP_ON_NODE, done, &c2));
    COLLAR_CHECK(collar_ipc_add_gather(s, call, g, m, stream, c2));
    return collar_sched_add_agree(s, 1);
}

collar_status_t collar_algo_hier_build(const collar_call_t *call,
                                       const collar_plan_t *plan,
                                       collar_sched_t *s)
{
    const collar_comm_t *comm = s->comm;
    if (comm->node_sched == MPI_COMM_NULL || comm->node_min <= 0
        || call->type_size <= 0) {
        return COLLAR_ERR_INVALID;   /* collar_algo_hier_eligible decides */
    }
    return collar_ipc_start(call, plan, s, hier_steps);
}
