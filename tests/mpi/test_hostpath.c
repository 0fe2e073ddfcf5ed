/*
 * Host-buffer allreduce with the cuda backend active: the short way and its
 * limits.  Run by hostpath.test under tests/fake/.libs/libcollar_fakecuda.so
 * (collar's objects, the cuda backend on a fake driver), on 2 ranks.
 *
 * The program defines PMPI_Comm_test_inter, PMPI_Comm_size, PMPI_Type_size
 * and PMPI_Type_size_x itself (linked -rdynamic, so that collar's calls to
 * them come here) and counts them: the questions collar asks the MPI
 * library before selection (intercommunicator, type size) and for it
 * (communicator size).  With --expect fast, a host-buffer call (stack,
 * [heap], static data, a 1 MiB malloc; blocking, nonblocking, in place, on
 * an intercommunicator) asks none of them, and on stack, heap and static
 * data not even the driver; with --expect stats (COLLAR_STATS=1) only the
 * type size, once a call, for the record; with --expect slow
 * (COLLAR_CHECK=1, COLLAR_LOG=info, a host rule that is not native) each
 * call takes the full way and asks.  Device buffers (from the fake
 * driver's collar_fakecuda_malloc) always take collar's way and are staged.
 * The staged collectives (MPI_Bcast, MPI_Allgather) on host buffers ask
 * nothing either (fast), and stage device buffers.  Results are checked
 * everywhere.
 *
 * Usage: test_hostpath --expect fast|stats|slow [--any-queries]
 *   --any-queries: do not require zero driver queries on the stack and the
 *   heap (under valgrind they are not the [stack] and [heap] mappings)
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ------------------------------------------------- the counted questions */

static long n_inter, n_csize, n_tsize;

typedef int (*test_inter_fn)(MPI_Comm, int *);
typedef int (*comm_size_fn)(MPI_Comm, int *);
typedef int (*type_size_fn)(MPI_Datatype, int *);
typedef int (*type_size_x_fn)(MPI_Datatype, MPI_Count *);

static void *next_symbol(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "test_hostpath: %s not found\n", name);
        abort();
    }
    return f;
}

int PMPI_Comm_test_inter(MPI_Comm comm, int *flag)
{
    static test_inter_fn next;
    if (next == NULL) {
        next = (test_inter_fn)next_symbol("PMPI_Comm_test_inter");
    }
    n_inter++;
    return next(comm, flag);
}

int PMPI_Comm_size(MPI_Comm comm, int *size)
{
    static comm_size_fn next;
    if (next == NULL) {
        next = (comm_size_fn)next_symbol("PMPI_Comm_size");
    }
    n_csize++;
    return next(comm, size);
}

int PMPI_Type_size(MPI_Datatype type, int *size)
{
    static type_size_fn next;
    if (next == NULL) {
        next = (type_size_fn)next_symbol("PMPI_Type_size");
    }
    n_tsize++;
    return next(type, size);
}

int PMPI_Type_size_x(MPI_Datatype type, MPI_Count *size)
{
    static type_size_x_fn next;
    if (next == NULL) {
        next = (type_size_x_fn)next_symbol("PMPI_Type_size_x");
    }
    n_tsize++;
    return next(type, size);
}

/* ------------------------------------------------------------ the calls */

typedef void *(*fake_malloc_fn)(size_t, int);
typedef void (*fake_free_fn)(void *);
typedef void (*fake_queries_fn)(unsigned long *, unsigned long *);

static fake_queries_fn fake_queries;

static unsigned long queries(void)
{
    unsigned long full = 0, single = 0;
    fake_queries(&full, &single);
    return full + single;
}

enum { EXPECT_FAST, EXPECT_STATS, EXPECT_SLOW };
static int expect = EXPECT_FAST;
static int any_queries;

enum { N = 16, CALLS = 20 };

/* Initialised, so in .data: a file mapping. */
static double static_s[N] = { 1 }, static_r[N] = { 1 };

typedef enum { FORM_BLOCKING, FORM_NONBLOCKING, FORM_IN_PLACE } form_t;
static const char *const form_names[] = { "blocking", "nonblocking", "in place" };

/* CALLS allreduces of N doubles on (s, r) over comm, in one form, each
 * checked: rank k contributes k + 1 + i * 0.5 at i; `peers`, the ranks
 * whose data is reduced (all of comm's, or the remote group's), sum to
 * `ranksum` (sum of k + 1) over `npeers` ranks. */
static void run_calls(const char *what, MPI_Comm comm, double *s, double *r,
                      form_t form, int rank, int ranksum, int npeers)
{
    char name[160];
    snprintf(name, sizeof(name), "%s, %s", what, form_names[form]);
    for (int c = 0; c < CALLS; c++) {
        double *in = form == FORM_IN_PLACE ? r : s;
        for (int i = 0; i < N; i++) {
            in[i] = rank + 1 + i * 0.5;
            if (form != FORM_IN_PLACE) {
                r[i] = -1.0;
            }
        }
        const void *sbuf = form == FORM_IN_PLACE ? MPI_IN_PLACE : s;
        int rc;
        if (form == FORM_NONBLOCKING) {
            MPI_Request req = MPI_REQUEST_NULL;
            rc = MPI_Iallreduce(sbuf, r, N, MPI_DOUBLE, MPI_SUM, comm, &req);
            if (rc == MPI_SUCCESS) {
                rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
        } else {
            rc = MPI_Allreduce(sbuf, r, N, MPI_DOUBLE, MPI_SUM, comm);
        }
        tu_check_rc(rc, name);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            bad += r[i] != ranksum + npeers * i * 0.5;
        }
        tu_check(bad == 0, name, "call %d: %d wrong elements (r[0] = %g, "
                 "expected %g)", c, bad, r[0], (double)ranksum);
    }
}

/* The calls on host buffers: the questions asked of the MPI library and
 * the driver's queries, per call, as expected. */
static void host_calls(const char *what, MPI_Comm comm, double *s, double *r,
                       int cached, int rank, int ranksum, int npeers)
{
    for (int f = FORM_BLOCKING; f <= FORM_IN_PLACE; f++) {
        char name[160];
        snprintf(name, sizeof(name), "%s, %s", what, form_names[f]);
        /* The first call learns the buffers' mappings. */
        double w = 0, wr = 0;
        MPI_Allreduce(&w, &wr, 1, MPI_DOUBLE, MPI_SUM, comm);
        MPI_Allreduce(s, r, 1, MPI_DOUBLE, MPI_SUM, comm);
        const long inter0 = n_inter, csize0 = n_csize, tsize0 = n_tsize;
        const unsigned long q0 = queries();
        run_calls(what, comm, s, r, (form_t)f, rank, ranksum, npeers);
        const long inter = n_inter - inter0, csize = n_csize - csize0;
        const long tsize = n_tsize - tsize0;
        const unsigned long q = queries() - q0;
        switch (expect) {
        case EXPECT_FAST:
            tu_check(inter == 0 && csize == 0 && tsize == 0, name,
                     "%d host calls asked MPI_Comm_test_inter %ld, "
                     "MPI_Comm_size %ld, MPI_Type_size %ld times; expected "
                     "none", CALLS, inter, csize, tsize);
            break;
        case EXPECT_STATS:
            tu_check(inter == 0 && csize == 0 && tsize == CALLS, name,
                     "%d host calls with statistics asked "
                     "MPI_Comm_test_inter %ld, MPI_Comm_size %ld, "
                     "MPI_Type_size %ld times; expected 0, 0, %d", CALLS,
                     inter, csize, tsize, CALLS);
            break;
        default:
            tu_check(inter >= CALLS && csize >= CALLS, name,
                     "%d calls on the full way asked MPI_Comm_test_inter "
                     "%ld and MPI_Comm_size %ld times; expected at least "
                     "once a call each", CALLS, inter, csize);
            break;
        }
        if (cached && !any_queries) {
            tu_check(q == 0, name, "%lu driver queries for %d calls on "
                     "cached host ranges", q, CALLS);
        }
    }
}

/* MPI_Bcast of N doubles from rank 0 into r, then MPI_Allgather of one
 * double from s into r (which holds `size`): right, and on host buffers
 * (fast) without MPI_Comm_test_inter; on device memory ("device": staged)
 * with it. */
static void colls_calls(const char *what, double *s, double *r, int rank,
                        int size)
{
    const int device = strcmp(what, "device") == 0;
    const long inter0 = n_inter;
    int bad = 0;
    for (int c = 0; c < CALLS; c++) {
        for (int i = 0; i < N; i++) {
            r[i] = rank == 0 ? c + i : -1.0;
        }
        tu_check_rc(MPI_Bcast(r, N, MPI_DOUBLE, 0, MPI_COMM_WORLD), "bcast");
        for (int i = 0; i < N; i++) {
            bad += r[i] != c + i;
        }
        s[0] = rank * 10.0 + c;
        tu_check_rc(MPI_Allgather(s, 1, MPI_DOUBLE, r, 1, MPI_DOUBLE,
                                  MPI_COMM_WORLD), "allgather");
        for (int k = 0; k < size; k++) {
            bad += r[k] != k * 10.0 + c;
        }
    }
    tu_check(bad == 0, what, "bcast and allgather: %d wrong elements", bad);
    if (device) {
        tu_check(n_inter - inter0 >= 2 * CALLS, what, "%d staged bcasts and "
                 "allgathers asked MPI_Comm_test_inter %ld times", 2 * CALLS,
                 n_inter - inter0);
    } else if (expect == EXPECT_FAST) {
        tu_check(n_inter == inter0, what, "%d host bcasts and allgathers "
                 "asked MPI_Comm_test_inter %ld times", 2 * CALLS,
                 n_inter - inter0);
    }
}

static int finish(void)
{
    const int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_hostpath");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc) {
            const char *e = argv[++i];
            expect = strcmp(e, "stats") == 0 ? EXPECT_STATS
                     : strcmp(e, "slow") == 0 ? EXPECT_SLOW : EXPECT_FAST;
        } else if (strcmp(argv[i], "--any-queries") == 0) {
            any_queries = 1;
        }
    }
    const int rank = tu_world_rank(), size = tu_world_size();
    const char *(*device_name)(void) =
        (const char *(*)(void))dlsym(RTLD_DEFAULT, "collar_device_name");
    fake_malloc_fn fake_malloc = (fake_malloc_fn)dlsym(RTLD_DEFAULT, "collar_fakecuda_malloc");
    fake_free_fn fake_free = (fake_free_fn)dlsym(RTLD_DEFAULT, "collar_fakecuda_free");
    fake_queries = (fake_queries_fn)dlsym(RTLD_DEFAULT, "collar_fakecuda_queries");
    if (device_name == NULL || fake_malloc == NULL || fake_free == NULL
        || fake_queries == NULL) {
        tu_fail("setup", "not under libcollar_fakecuda.so");
        return finish();
    }
    if (!tu_check(strcmp(device_name(), "cuda") == 0, "setup",
                  "device backend %s, expected cuda", device_name())) {
        return finish();
    }
    const int ranksum = size * (size + 1) / 2;

    double stack_s[N], stack_r[N];
    double *heap_s = malloc(N * sizeof(double)), *heap_r = malloc(N * sizeof(double));
    /* Above malloc's mmap threshold: anonymous mappings, which the driver
     * is asked about every time. */
    double *big_s = malloc(1 << 20), *big_r = malloc(1 << 20);
    if (heap_s == NULL || heap_r == NULL || big_s == NULL || big_r == NULL) {
        tu_fail("setup", "no memory");
        return finish();
    }
    host_calls("stack", MPI_COMM_WORLD, stack_s, stack_r, 1, rank, ranksum, size);
    host_calls("heap", MPI_COMM_WORLD, heap_s, heap_r, 1, rank, ranksum, size);
    host_calls("static", MPI_COMM_WORLD, static_s, static_r, 1, rank, ranksum, size);
    host_calls("1 MiB malloc", MPI_COMM_WORLD, big_s, big_r, 0, rank, ranksum, size);
    host_calls("stack, MPI_COMM_SELF", MPI_COMM_SELF, stack_s, stack_r, 1, rank,
               rank + 1, 1);

    /* An intercommunicator (the even and the odd ranks): the MPI
     * library's own call, on the short way too.  Each side gets the sum
     * over the other side. */
    if (size >= 2) {
        MPI_Comm half, inter;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 7, &inter);
        int remote_sum = 0, remote_n = 0;
        for (int k = 0; k < size; k++) {
            if (k % 2 != rank % 2) {
                remote_sum += k + 1;
                remote_n++;
            }
        }
        for (int f = FORM_BLOCKING; f <= FORM_NONBLOCKING; f++) {
            const long inter0 = n_inter;
            run_calls("intercommunicator", inter, heap_s, heap_r, (form_t)f, rank,
                      remote_sum, remote_n);
            if (expect == EXPECT_FAST) {
                tu_check(n_inter == inter0, "intercommunicator",
                         "MPI_Comm_test_inter asked %ld times on the short "
                         "way", n_inter - inter0);
            }
        }
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }

    /* The staged collectives: on host buffers nothing to stage, the MPI
     * library's call with no question asked (fast); on device buffers
     * staged (below). */
    colls_calls("heap", heap_s, heap_r, rank, size);
    colls_calls("stack", stack_s, stack_r, rank, size);

    /* Count 0: nothing to move, success. */
    tu_check_rc(MPI_Allreduce(stack_s, stack_r, 0, MPI_DOUBLE, MPI_SUM,
                              MPI_COMM_WORLD), "count 0");

    /* Device buffers: collar's way (the questions are asked), staged (the
     * fake driver is asked about them), right. */
    double *dev_s = fake_malloc(N * sizeof(double), 0);
    double *dev_r = fake_malloc(N * sizeof(double), 0);
    if (dev_s == NULL || dev_r == NULL) {
        tu_fail("device", "collar_fakecuda_malloc failed");
        return finish();
    }
    struct {
        const char *what;
        double *s, *r;
    } dev_cases[] = {
        { "device", dev_s, dev_r },
        { "host to device", heap_s, dev_r },
        { "device to host", dev_s, heap_r },
    };
    for (size_t k = 0; k < sizeof(dev_cases) / sizeof(dev_cases[0]); k++) {
        for (int f = FORM_BLOCKING; f <= FORM_IN_PLACE; f++) {
            if (f == FORM_IN_PLACE && dev_cases[k].r != dev_r) {
                continue;
            }
            const long inter0 = n_inter;
            const unsigned long q0 = queries();
            run_calls(dev_cases[k].what, MPI_COMM_WORLD, dev_cases[k].s,
                      dev_cases[k].r, (form_t)f, rank, ranksum, size);
            tu_check(n_inter - inter0 >= CALLS && queries() > q0,
                     dev_cases[k].what, "%s: MPI_Comm_test_inter asked %ld "
                     "times, %lu driver queries for %d calls: not collar's "
                     "way", form_names[f], n_inter - inter0, queries() - q0,
                     CALLS);
        }
    }
    double *dev_big = fake_malloc(N * sizeof(double) * (size_t)size, 0);
    if (dev_big != NULL) {
        colls_calls("device", dev_s, dev_big, rank, size);
        fake_free(dev_big);
    }
    fake_free(dev_s);
    fake_free(dev_r);
    free(heap_s);
    free(heap_r);
    free(big_s);
    free(big_r);
    return finish();
}
