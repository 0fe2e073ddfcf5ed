/*
 * Device calls with a different mix of host and device buffers on each
 * rank.  Run by mix.test under tests/fake/.libs/libcollar_fakecuda.so
 * (collar's objects, the cuda backend on a fake driver whose "device"
 * memory is what collar_fakecuda_malloc returns, whose kernels fail on any
 * other memory and whose IPC memory is shared between processes).
 *
 * A call is a device call when either buffer is device memory; its mix is
 * one of: send host / receive device, send device / receive host, both
 * device, in place on a device buffer.  Rank r takes mix (r + p) % 4,
 * (3 - (r + p) % 4), (2 r + p) % 4, or p (every rank alike), for p = 0..3:
 * sixteen ways of giving the ranks different mixes.  For each, MPI_INT
 * (bit-exact), MPI_FLOAT and MPI_DOUBLE (against a double reference) sums
 * of every count of --counts, blocking and nonblocking, and then every rank
 * must have the right values, MPI_SUCCESS, and run the same algorithm
 * (collar_last_algorithm, compared over the ranks; with --expect ALG, that
 * one).  Under a forced algorithm, ranks that chose differently would wait
 * for each other's messages forever: mix.test bounds each run.
 *
 * --devices LIST puts rank r's device buffers on device LIST[r % n] (by
 * default 0) of the fake driver.  --lifetime runs, instead of the sixteen
 * arrangements, what creates and frees collar's device state: on a
 * duplicate of MPI_COMM_WORLD, blocking and nonblocking calls of growing
 * sizes (a larger message makes ipc register a larger region), then
 * MPI_Comm_free, twice; an MPI_Iallreduce whose communicator is freed
 * before MPI_Wait; a persistent allreduce (where the MPI library has
 * them) freed with its communicator; calls of growing sizes on
 * MPI_COMM_WORLD, whose state goes at MPI_Finalize.  mix.test runs it
 * under the fake driver's checks (IPC memory freed while a peer has it
 * open, contexts on devices the buffers are not on).
 *
 * With TU_DEVICE=cuda (testutil.h; mpi/cudaemu_programs.test, under
 * libcollar_cudaemu.so and the CUDA emulation) the device buffers are
 * cudaMalloc memory of the selected device instead, filled and read
 * through a host buffer with cudaMemcpy.
 *
 * Usage: test_mix [--expect ALG] [--counts LIST] [--devices LIST] [--lifetime]
 */
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "testutil.h"

enum { MIX_SH_RD, MIX_SD_RH, MIX_BOTH, MIX_IN_PLACE, NMIX };
static const char *const mix_names[NMIX] = {
    "send host/recv device", "send device/recv host", "both device", "in place"
};

typedef void *(*fake_malloc_fn)(size_t, int);
typedef void (*fake_free_fn)(void *);
typedef const char *(*last_alg_fn)(void);

static last_alg_fn last_alg;

/* The buffers, for the largest count: two device, two host (the fake
 * driver's table of allocations is small: no allocation a call). */
static void *dsend, *drecv, *hsend, *hrecv;
/* Under TU_DEVICE=cuda: the host side of a device buffer's fill or check. */
static void *scratch;

static int on_device(const void *buf)
{
    return tu_dev_on() && (buf == dsend || buf == drecv);
}

/* The communicator of one_call. */
static MPI_Comm on_comm;

/* Rank k's input at element i: small integers, exact in every type. */
static double input(int k, long i)
{
    return (double)((k + 1) * 3 + i % 17) - 8.0;
}

/* The mix rank r takes in arrangement a (0..15). */
static int mix_of(int a, int r)
{
    const int p = a % 4;
    switch (a / 4) {
    case 0:
        return (r + p) % 4;
    case 1:
        return 3 - (r + p) % 4;
    case 2:
        return (2 * r + p) % 4;
    default:
        return p;
    }
}

static void fill(void *buf, MPI_Datatype dt, long n, int k)
{
    for (long i = 0; i < n; i++) {
        const double v = input(k, i);
        if (dt == MPI_INT) {
            ((int *)buf)[i] = (int)v;
        } else if (dt == MPI_FLOAT) {
            ((float *)buf)[i] = (float)v;
        } else {
            ((double *)buf)[i] = v;
        }
    }
}

static size_t type_bytes(MPI_Datatype dt, long n)
{
    int esize;
    MPI_Type_size(dt, &esize);
    return (size_t)n * (size_t)esize;
}

/* fill(), or memset with `byte` when k < 0, of any of the buffers. */
static void fill_any(void *buf, MPI_Datatype dt, long n, int k, int byte)
{
    void *at = on_device(buf) ? scratch : buf;
    if (k < 0) {
        memset(at, byte, type_bytes(dt, n));
    } else {
        fill(at, dt, n, k);
    }
    if (at != buf) {
        tu_dev_put(buf, at, type_bytes(dt, n));
    }
}

/* Wrong elements of buf against the sum over `size` ranks. */
static long wrong(const void *buf, MPI_Datatype dt, long n, int size, long *first)
{
    long bad = 0;
    if (on_device(buf)) {
        tu_dev_get(scratch, buf, type_bytes(dt, n));
        buf = scratch;
    }
    *first = -1;
    for (long i = 0; i < n; i++) {
        double want = 0.0;
        for (int k = 0; k < size; k++) {
            want += input(k, i);
        }
        int ok;
        if (dt == MPI_INT) {
            ok = ((const int *)buf)[i] == (int)want;   /* bit-exact */
        } else if (dt == MPI_FLOAT) {
            ok = fabs(((const float *)buf)[i] - want) <= 1e-5 * (fabs(want) + 1);
        } else {
            ok = fabs(((const double *)buf)[i] - want) <= 1e-12 * (fabs(want) + 1);
        }
        if (!ok && bad++ == 0) {
            *first = i;
        }
    }
    return bad;
}

/* Every rank ran the same algorithm (and `expect`, when given). */
static void check_alg(const char *what, const char *expect)
{
    char mine[16] = "none", *all;
    const char *ran = last_alg != NULL ? last_alg() : NULL;
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (ran != NULL) {
        snprintf(mine, sizeof(mine), "%s", ran);
    }
    all = calloc((size_t)size, sizeof(mine));
    PMPI_Allgather(mine, sizeof(mine), MPI_CHAR, all, sizeof(mine), MPI_CHAR,
                   MPI_COMM_WORLD);
    for (int k = 0; k < size; k++) {
        const char *theirs = all + (size_t)k * sizeof(mine);
        tu_check(strcmp(theirs, mine) == 0, what, "rank %d ran %s, this rank %s",
                 k, theirs, mine);
    }
    if (expect != NULL) {
        tu_check(strcmp(mine, expect) == 0, what, "ran %s, expected %s", mine,
                 expect);
    }
    free(all);
}

static void one_call(int arrangement, MPI_Datatype dt, long n, int nonblocking,
                     const char *expect)
{
    int rank, size, esize;
    MPI_Comm_rank(on_comm, &rank);
    MPI_Comm_size(on_comm, &size);
    MPI_Type_size(dt, &esize);
    const int mix = mix_of(arrangement, rank);
    const size_t bytes = (size_t)n * (size_t)esize;
    void *send = mix == MIX_SH_RD ? hsend : dsend;
    void *recv = mix == MIX_SD_RH ? hrecv : drecv;
    fill_any(mix == MIX_IN_PLACE ? recv : send, dt, n, rank, 0);
    if (mix != MIX_IN_PLACE) {
        fill_any(recv, MPI_BYTE, (long)bytes, -1, 0x5a);
    }
    const void *sbuf = mix == MIX_IN_PLACE ? MPI_IN_PLACE : send;

    char what[200];
    const char *tname = dt == MPI_INT ? "int" : dt == MPI_FLOAT ? "float" : "double";
    snprintf(what, sizeof(what), "arrangement %d (this rank %s), %s x %ld, %s",
             arrangement, mix_names[mix], tname, n,
             nonblocking ? "nonblocking" : "blocking");
    int rc;
    if (nonblocking) {
        MPI_Request req = MPI_REQUEST_NULL;
        rc = MPI_Iallreduce(sbuf, recv, (int)n, dt, MPI_SUM, on_comm, &req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    } else {
        rc = MPI_Allreduce(sbuf, recv, (int)n, dt, MPI_SUM, on_comm);
    }
    if (tu_check_rc(rc, what)) {
        long first;
        const long bad = wrong(recv, dt, n, size, &first);
        tu_check(bad == 0, what, "%ld of %ld elements wrong, the first at %ld",
                 bad, n, first);
    }
    check_alg(what, expect);
}

/* Values of an in-place sum of `n` doubles on device memory, after the
 * operation; `what` names it. */
static void check_sum(const char *what, int rc, long n)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (tu_check_rc(rc, what)) {
        long first;
        const long bad = wrong(drecv, MPI_DOUBLE, n, size, &first);
        tu_check(bad == 0, what, "%ld of %ld elements wrong, the first at %ld",
                 bad, n, first);
    }
}

/* See the top of the file. */
static void lifetime(const char *expect, const long *counts, int ncounts)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const long most = counts[ncounts - 1];
    for (int round = 0; round < 2; round++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &on_comm);
        for (int c = 0; c < ncounts; c++) {
            one_call(round, MPI_DOUBLE, counts[c], 0, expect);
            one_call(round + 1, MPI_DOUBLE, counts[c], 1, expect);
        }
        MPI_Comm_free(&on_comm);
    }
    /* The operation outlives its communicator's handle. */
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    fill_any(drecv, MPI_DOUBLE, 7, rank, 0);
    int rc = MPI_Allreduce(MPI_IN_PLACE, drecv, 7, MPI_DOUBLE, MPI_SUM, c);
    check_sum("blocking call before the communicator's free", rc, 7);
    fill_any(drecv, MPI_DOUBLE, most, rank, 0);
    MPI_Request req = MPI_REQUEST_NULL;
    rc = MPI_Iallreduce(MPI_IN_PLACE, drecv, (int)most, MPI_DOUBLE, MPI_SUM, c, &req);
    MPI_Comm_free(&c);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    check_sum("MPI_Iallreduce, MPI_Comm_free, MPI_Wait", rc, most);
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    fill_any(drecv, MPI_DOUBLE, 7, rank, 0);
    rc = MPI_Allreduce(MPI_IN_PLACE, drecv, 7, MPI_DOUBLE, MPI_SUM, c);
    check_sum("blocking call before a persistent one", rc, 7);
    rc = MPI_Allreduce_init(MPI_IN_PLACE, drecv, (int)most, MPI_DOUBLE, MPI_SUM, c,
                            MPI_INFO_NULL, &req);
    for (int k = 0; k < 2 && rc == MPI_SUCCESS; k++) {
        fill_any(drecv, MPI_DOUBLE, most, rank, 0);
        rc = MPI_Start(&req);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        check_sum("persistent allreduce", rc, most);
    }
    if (req != MPI_REQUEST_NULL) {
        MPI_Request_free(&req);
    }
    MPI_Comm_free(&c);
#endif
    on_comm = MPI_COMM_WORLD;
    for (int c = 0; c < ncounts; c++) {
        one_call(2, MPI_DOUBLE, counts[c], c % 2, expect);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_mix");
    const char *expect = NULL;
    long counts[8] = { 1, 7, 1031, 40000 };
    int ncounts = 4, lives = 0, rank;
    int devices[8] = { 0 }, ndevices = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    on_comm = MPI_COMM_WORLD;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc) {
            expect = argv[++i];
        } else if (strcmp(argv[i], "--lifetime") == 0) {
            lives = 1;
        } else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) {
            char *p = argv[++i];
            for (ndevices = 0; ndevices < 8 && *p != '\0'; ndevices++) {
                devices[ndevices] = (int)strtol(p, &p, 10);
                p += *p == ',';
            }
        } else if (strcmp(argv[i], "--counts") == 0 && i + 1 < argc) {
            char *p = argv[++i];
            for (ncounts = 0; ncounts < 8 && *p != '\0'; ncounts++) {
                counts[ncounts] = strtol(p, &p, 10);
                p += *p == ',';
            }
        }
    }
    fake_malloc_fn fake_malloc =
        (fake_malloc_fn)dlsym(RTLD_DEFAULT, "collar_fakecuda_malloc");
    fake_free_fn fake_free = (fake_free_fn)dlsym(RTLD_DEFAULT, "collar_fakecuda_free");
    last_alg = (last_alg_fn)dlsym(RTLD_DEFAULT, "collar_last_algorithm");
    if ((!tu_dev_on() && (fake_malloc == NULL || fake_free == NULL)) ||
        last_alg == NULL) {
        tu_skip("not under libcollar_fakecuda.so (no fake device memory) "
                "nor collar with TU_DEVICE=cuda");
    }
    long most = 1;
    for (int c = 0; c < ncounts; c++) {
        most = counts[c] > most ? counts[c] : most;
    }
    const size_t bytes = (size_t)most * sizeof(double);
    const int device = devices[rank % (ndevices > 0 ? ndevices : 1)];
    if (tu_dev_on()) {
        tu_dev_select(device);
        dsend = tu_dev_alloc(bytes);
        drecv = tu_dev_alloc(bytes);
    } else {
        dsend = fake_malloc(bytes, device);
        drecv = fake_malloc(bytes, device);
    }
    hsend = malloc(bytes);
    hrecv = malloc(bytes);
    scratch = malloc(bytes);
    if (dsend == NULL || drecv == NULL || hsend == NULL || hrecv == NULL ||
        scratch == NULL) {
        tu_fail("setup", "no memory for %zu bytes", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (lives) {
        lifetime(expect, counts, ncounts);
    }
    const MPI_Datatype types[] = { MPI_INT, MPI_FLOAT, MPI_DOUBLE };
    for (int a = 0; a < 16 && !lives; a++) {
        for (int t = 0; t < 3; t++) {
            for (int c = 0; c < ncounts; c++) {
                for (int nb = 0; nb < 2; nb++) {
                    one_call(a, types[t], counts[c], nb, expect);
                }
            }
        }
    }
    if (tu_dev_on()) {
        tu_dev_free(dsend);
        tu_dev_free(drecv);
    } else {
        fake_free(dsend);
        fake_free(drecv);
    }
    free(hsend);
    free(hrecv);
    free(scratch);
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}
