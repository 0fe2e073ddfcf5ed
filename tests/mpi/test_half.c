/*
 * collar - allreduces of 16-bit floats (MPIX_C_FLOAT16, where the MPI
 * library defines it): sum, prod, min and max, blocking and nonblocking
 * (--blocking: blocking only), in place and not, on counts from 1 to
 * 65537, each result compared bit for bit on every rank with the float64
 * reference rounded to half.
 *
 * The values are exact in half precision and so are their sums and
 * products (quarters up to 25 in magnitude; factors of +-0.5, 1 and 2), so
 * the result does not depend on the order of the reduction.  Under nccl
 * (nccl.test) a blocking MPI_INT allreduce on the communicator comes first,
 * so that NCCL's communicator exists for every blocking half-precision
 * call: a fallback would hand the halves to the MPI library, which may not
 * reduce them (MPICH 4.0 aborts); nccl runs blocking calls only, so there
 * the program runs with --blocking.  With TU_DEVICE=cuda the buffers are device
 * memory (tests/mpi/testutil.h).
 *
 * Exits 77 where the MPI library has no MPIX_C_FLOAT16.
 */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MPIX_C_FLOAT16

/* IEEE 754 binary16 of a double that is one exactly (normal or 0). */
static uint16_t half_of(double v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    v = fabs(v);
    if (v == 0.0) {
        return sign;
    }
    int e;
    const double m = frexp(v, &e);            /* v = m 2^e, m in [0.5, 1) */
    const unsigned frac = (unsigned)((2.0 * m - 1.0) * 1024.0);
    return (uint16_t)(sign | (unsigned)(e + 14) << 10 | frac);
}

static double half_value(uint16_t h)
{
    const int e = (h >> 10) & 0x1f;
    const double f = h & 0x3ff;
    const double v = e == 0 ? ldexp(f, -24) : ldexp(1.0 + f / 1024.0, e - 15);
    return (h & 0x8000) ? -v : v;
}

static double element(MPI_Op op, int rank, size_t i)
{
    static const double factors[] = { -2.0, -1.0, -0.5, 0.5, 1.0, 2.0 };
    if (op == MPI_PROD) {
        return factors[tu_gen_uint(rank, i, 7, 5)];
    }
    return 0.25 * (double)tu_gen_int(rank, i, 11, -100, 100);
}

static void one_case(MPI_Comm comm, MPI_Op op, const char *opname, size_t count,
                     int in_place, int nonblocking)
{
    int nranks, rank;
    MPI_Comm_size(comm, &nranks);
    MPI_Comm_rank(comm, &rank);
    uint16_t *send = malloc(count * sizeof(uint16_t));
    uint16_t *recv = malloc(count * sizeof(uint16_t));
    uint16_t *want = malloc(count * sizeof(uint16_t));
    if (send == NULL || recv == NULL || want == NULL) {
        tu_fail("memory", "cannot allocate %zu halves", count);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < count; i++) {
        send[i] = half_of(element(op, rank, i));
        double acc = element(op, 0, i);
        for (int r = 1; r < nranks; r++) {
            const double x = element(op, r, i);
            acc = op == MPI_SUM ? acc + x : op == MPI_PROD ? acc * x
                : op == MPI_MIN ? (x < acc ? x : acc) : (x > acc ? x : acc);
        }
        want[i] = half_of(acc);
        if (half_value(want[i]) != acc) {
            tu_fail("reference", "%s element %zu: %g is not a half", opname, i, acc);
        }
    }
    tu_fill_garbage(recv, count * sizeof(uint16_t), count);
    void *dsend = tu_dev_mirror(send, count * sizeof(uint16_t));
    void *drecv = tu_dev_mirror(in_place ? send : recv, count * sizeof(uint16_t));
    const void *sbuf = in_place ? MPI_IN_PLACE : dsend;
    int rc;
    if (nonblocking) {
        MPI_Request req;
        rc = MPI_Iallreduce(sbuf, drecv, (int)count, MPIX_C_FLOAT16, op, comm, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    } else {
        rc = MPI_Allreduce(sbuf, drecv, (int)count, MPIX_C_FLOAT16, op, comm);
    }
    char what[96];
    snprintf(what, sizeof(what), "%s count %zu%s%s", opname, count,
             in_place ? " in place" : "", nonblocking ? " nonblocking" : "");
    if (tu_check_rc(rc, what)) {
        tu_dev_get(recv, drecv, count * sizeof(uint16_t));
        tu_check_same_bytes(recv, want, count * sizeof(uint16_t), what);
    }
    tu_dev_unmirror(drecv, in_place ? send : recv);
    tu_dev_unmirror(dsend, send);
    free(send);
    free(recv);
    free(want);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_half");
    const int blocking_only = argc > 1 && strcmp(argv[1], "--blocking") == 0;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    /* A blocking allreduce first (nccl makes its communicator there). */
    int one = 1, n = 0;
    int *d_one = tu_dev_mirror(&one, sizeof(one));
    int *d_n = tu_dev_mirror(&n, sizeof(n));
    if (tu_check_rc(MPI_Allreduce(d_one, d_n, 1, MPI_INT, MPI_SUM, comm), "warm-up")) {
        tu_dev_get(&n, d_n, sizeof(n));
        tu_check(n == tu_world_size(), "warm-up", "sum %d, want %d", n, tu_world_size());
    }
    tu_dev_unmirror(d_n, &n);
    tu_dev_unmirror(d_one, &one);

    static const struct { MPI_Op op; const char *name; } ops[] = {
        { MPI_SUM, "sum" }, { MPI_PROD, "prod" }, { MPI_MIN, "min" }, { MPI_MAX, "max" },
    };
    static const size_t counts[] = { 1, 7, 1000, 65537 };
    for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            for (int form = 0; form < 4; form++) {
                if (blocking_only && (form >> 1)) {
                    continue;
                }
                one_case(comm, ops[o].op, ops[o].name, counts[c], form & 1, form >> 1);
            }
        }
    }
    MPI_Comm_free(&comm);
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

#else

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_half");
    tu_skip("the MPI library has no MPIX_C_FLOAT16");
}

#endif
