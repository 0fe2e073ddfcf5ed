/* proto main: PROTO_MARK=1 processes put the marker before MPI_Init; after
 * it, each of them reads every rank's; then an allreduce of the application
 * (every rank) checks the answers against the truth. */
#include "kvs.h"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

int main(int argc, char **argv)
{
    const char *m = getenv("PROTO_MARK");
    int mark = m != NULL && atoi(m) == 1;
    double t0 = now(), t_put = 0, t_get = 0;
    int put = mark ? kvs_put_marker() : -1;
    t_put = now() - t0;
    double ti = now();
    MPI_Init(&argc, &argv);
    double t_init = now() - ti;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *has = calloc(size, sizeof(int)), *truth = calloc(size, sizeof(int));
    int rc = -2;
    if (mark && put == 0) {
        if (getenv("PROTO_SLEEP")) sleep(atoi(getenv("PROTO_SLEEP")));   /* is the store late, or incomplete? */
        double t1 = now();
        rc = kvs_read_markers(size, has);
        t_get = now() - t1;
        kvs_done();
    }
    /* the application's own collective: the truth, to check against */
    MPI_Allgather(&mark, 1, MPI_INT, truth, 1, MPI_INT, MPI_COMM_WORLD);
    if (mark) {
        int right = rc == 0;
        char buf[256]; int n = 0;
        for (int r = 0; r < size; r++) {
            right &= has[r] == truth[r];
            n += snprintf(buf + n, sizeof(buf) - n, "%d", has[r]);
        }
        printf("proto %s: rank %d of %d put=%d read=%d sees [%s] %s put %.1f us get %.1f us (%.2f us/peer) init %.1f us\n",
               kvs_name(), rank, size, put, rc, buf, right ? "RIGHT" : "WRONG",
               t_put * 1e6, t_get * 1e6, t_get * 1e6 / size, t_init * 1e6);
    } else {
        printf("proto %s: rank %d of %d without the marker init %.1f us\n", kvs_name(), rank, size, (now() - t0) * 1e6);
    }
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
