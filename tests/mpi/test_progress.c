/*
 * MPI's progress rule under collar: a rank blocked in a call that is not a
 * wait or test on collar's operation must not stall its peers.
 *
 * Each case starts a nonblocking allreduce on every rank; then rank 0 blocks
 * in another MPI call (MPI_Recv, MPI_Probe, MPI_Ssend, MPI_Sendrecv,
 * MPI_Barrier, MPI_Bcast, PMPI_Wait on the request itself, a small
 * MPI_Allreduce of device memory on another communicator, which collar
 * runs: its internal collectives block in the library only where every
 * rank runs the progress thread, else it polls them with collar's other
 * operations) that can only
 * return once rank 1 has finished its
 * MPI_Wait on the allreduce, which needs rank 0's chunks.  Without
 * progress outside collar's wait wrappers, this hangs.  The reduced values
 * are checked on every rank afterwards.
 *
 * Usage: test_progress [count [all|p2p [single|multiple]]]
 *   count     floats (default 1 Mi = 4 MiB)
 *   p2p       only the blocking point-to-point cases (Recv, Probe, Ssend,
 *             Sendrecv) and collar's small device allreduce: the calls
 *             that progress without a progress thread
 *   multiple  ask for MPI_THREAD_MULTIPLE (default: MPI_THREAD_SINGLE)
 *
 * With TU_DEVICE=cuda (testutil.h) the allreduce's buffers are device
 * memory; the blocking calls' tokens stay host memory.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK_RECV, BLOCK_PROBE, BLOCK_SSEND, BLOCK_SENDRECV, BLOCK_ALLREDUCE,
       BLOCK_P2P, BLOCK_BARRIER = BLOCK_P2P, BLOCK_BCAST, BLOCK_PMPI_WAIT,
       BLOCK_COUNT };
static const char *const block_names[] = {
    "MPI_Recv", "MPI_Probe", "MPI_Ssend", "MPI_Sendrecv", "MPI_Allreduce",
    "MPI_Barrier", "MPI_Bcast", "PMPI_Wait"
};

static void fill(float *buf, int count, int rank, int round)
{
    for (int i = 0; i < count; i++) {
        buf[i] = (float)((rank + 1) * ((i + round) % 97));
    }
}

static void check(const float *buf, int count, int size, int round,
                  const char *what)
{
    int bad = 0, first = -1;
    for (int i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < size; r++) {
            want += (double)((r + 1) * ((i + round) % 97));
        }
        if ((double)buf[i] != want) {
            if (first < 0) {
                first = i;
            }
            bad++;
        }
    }
    tu_check(bad == 0, what, "%d wrong elements, first at %d", bad, first);
}

/* An allreduce of two ints of device memory, checked: small enough for
 * one chunk, which collar runs as the library's blocking allreduce. */
static void small_allreduce(int *pair, int *dpair, int round, int size,
                            MPI_Comm comm, const char *what)
{
    pair[0] = round;
    pair[1] = 1;
    tu_dev_put(dpair, pair, 2 * sizeof(int));
    tu_check_rc(MPI_Allreduce(MPI_IN_PLACE, dpair, 2, MPI_INT, MPI_SUM, comm),
                what);
    tu_dev_get(pair, dpair, 2 * sizeof(int));
    tu_check(pair[0] == size * round && pair[1] == size, what,
             "small allreduce gave %d %d, want %d %d", pair[0], pair[1],
             size * round, size);
}

int main(int argc, char **argv)
{
    const int asked = argc > 3 && strcmp(argv[3], "multiple") == 0
                      ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE;
    int provided;
    MPI_Init_thread(&argc, &argv, asked, &provided);
    tu_init("test_progress");
    const int rank = tu_world_rank(), size = tu_world_size();
    int count = argc > 1 ? atoi(argv[1]) : 1 << 20;
    const int ncases = argc > 2 && strcmp(argv[2], "p2p") == 0 ? BLOCK_P2P
                                                              : BLOCK_COUNT;
    if (size < 2) {
        tu_skip("needs at least 2 ranks");
    }
    if (asked == MPI_THREAD_MULTIPLE && provided < asked) {
        tu_skip("the MPI library gives thread level %d", provided);
    }
    tu_check(provided == asked, "provided", "asked for %d, told %d", asked,
             provided);
    int queried = -1;
    MPI_Query_thread(&queried);
    tu_check(queried == provided, "MPI_Query_thread",
             "told %d at MPI_Init_thread, %d now", provided, queried);

    float *sbuf = malloc((size_t)count * sizeof(float));
    float *rbuf = malloc((size_t)count * sizeof(float));
    if (sbuf == NULL || rbuf == NULL) {
        tu_fail("malloc", "%d floats", count);
        return tu_finish();
    }
    const size_t bytes = (size_t)count * sizeof(float);
    float *dsbuf = tu_dev_mirror(sbuf, bytes), *drbuf = tu_dev_mirror(rbuf, bytes);
    /* The small allreduce's communicator, made (with collar's own) by a
     * first blocking call, and its device buffer. */
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    int pair[2] = { 1, rank }, *dpair = tu_dev_mirror(pair, sizeof(pair));
    MPI_Allreduce(MPI_IN_PLACE, dpair, 2, MPI_INT, MPI_SUM, dup);
    for (int round = 0; round < 2 * ncases; round++) {
        const int how = round % ncases;
        const int in_place = round >= ncases;
        char what[96];
        snprintf(what, sizeof(what), "%s%s", block_names[how],
                 in_place ? " in place" : "");
        fill(in_place ? rbuf : sbuf, count, rank, round);
        tu_dev_put(in_place ? drbuf : dsbuf, in_place ? rbuf : sbuf, bytes);
        MPI_Request req;
        int rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : dsbuf, drbuf, count,
                                MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        if (!tu_check_rc(rc, what)) {
            break;
        }
        int token = round;
        if (rank == 0) {
            /* Blocked in a call collar does not see as a wait on `req`. */
            switch (how) {
            case BLOCK_RECV:
                MPI_Recv(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                break;
            case BLOCK_PROBE: {
                MPI_Status st;
                MPI_Probe(1, 7, MPI_COMM_WORLD, &st);
                MPI_Recv(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                break;
            }
            case BLOCK_SSEND:
                MPI_Ssend(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
                break;
            case BLOCK_SENDRECV: {
                const int mine = round;
                MPI_Sendrecv(&mine, 1, MPI_INT, 1, 8, &token, 1, MPI_INT, 1, 7,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                break;
            }
            case BLOCK_BARRIER:
                MPI_Barrier(MPI_COMM_WORLD);
                break;
            case BLOCK_BCAST:
                MPI_Bcast(&token, 1, MPI_INT, 1, MPI_COMM_WORLD);
                break;
            case BLOCK_PMPI_WAIT:
                /* A Fortran binding or a library that calls the profiling
                 * entry point directly. */
                PMPI_Wait(&req, MPI_STATUS_IGNORE);
                MPI_Recv(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                break;
            case BLOCK_ALLREDUCE:
                small_allreduce(pair, dpair, round, size, dup, what);
                break;
            }
            tu_check(token == round, what, "token %d, want %d", token, round);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            if (rank == 1) {
                switch (how) {
                case BLOCK_RECV:
                case BLOCK_PROBE:
                case BLOCK_PMPI_WAIT:
                    MPI_Send(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
                    break;
                case BLOCK_SSEND:
                    token = -1;
                    MPI_Recv(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
                    tu_check(token == round, what, "token %d, want %d", token,
                             round);
                    break;
                case BLOCK_SENDRECV: {
                    int theirs = -1;
                    MPI_Sendrecv(&token, 1, MPI_INT, 0, 7, &theirs, 1, MPI_INT,
                                 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    tu_check(theirs == round, what, "token %d, want %d",
                             theirs, round);
                    break;
                }
                default:
                    break;
                }
            }
            if (how == BLOCK_ALLREDUCE) {
                small_allreduce(pair, dpair, round, size, dup, what);
            } else if (how == BLOCK_BARRIER) {
                MPI_Barrier(MPI_COMM_WORLD);
            } else if (how == BLOCK_BCAST) {
                MPI_Bcast(&token, 1, MPI_INT, 1, MPI_COMM_WORLD);
            }
        }
        tu_dev_get(rbuf, drbuf, bytes);
        check(rbuf, count, size, round, what);
    }
    tu_dev_unmirror(dsbuf, sbuf);
    tu_dev_unmirror(drbuf, rbuf);
    tu_dev_unmirror(dpair, pair);
    MPI_Comm_free(&dup);
    free(sbuf);
    free(rbuf);
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
