/*
 * collar - erroneous MPI_Allreduce / MPI_Iallreduce calls.
 *
 * Under MPI_ERRORS_RETURN, each invalid call is made through the normal
 * entry point (MPI_Allreduce, which a shim may intercept) and through the
 * profiling entry point (PMPI_Allreduce, which always reaches the MPI
 * library directly).  Both return codes are converted with MPI_Error_class;
 * the classes must be equal, and not MPI_SUCCESS.  Where the library itself
 * accepts a call (returns MPI_SUCCESS through PMPI_), the test only records
 * that both entry points agree (and rank 0 prints a note).  The same for
 * MPI_Iallreduce versus PMPI_Iallreduce; a request returned with
 * MPI_SUCCESS is completed (MPI_Wait resp. PMPI_Wait).
 *
 * Invalid calls: MPI_COMM_NULL, negative count, MPI_DATATYPE_NULL,
 * MPI_OP_NULL, predefined ops invalid for the datatype, an uncommitted
 * derived datatype.  Afterwards valid MPI_Allreduce and MPI_Iallreduce calls
 * must still work and give correct results.
 *
 * MPI_ERRORS_RETURN is set on MPI_COMM_WORLD, and also on MPI_COMM_SELF:
 * errors not tied to a communicator (MPI_COMM_NULL) are raised on
 * MPI_COMM_WORLD in MPI-3 but on MPI_COMM_SELF in MPI-4.
 * All calls are made identically on every rank, so a call the library
 * accepts is a matching collective everywhere.
 *
 * Library quirks of MPICH 4.0.2, whose cases are skipped when building
 * against MPICH (rank 0 prints a note):
 *   - a negative count is not checked in MPI_Allreduce / MPI_Iallreduce: the
 *     call goes ahead and corrupts memory (one rank: writes before the
 *     receive buffer) or fails an internal assertion (several ranks);
 *   - MPI_LAND on MPI_DOUBLE passes the argument checks, then the reduction
 *     aborts ("Assertion failed in file src/mpi/coll/op/opland.c").
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    MPI_Comm comm;
    int count;
    MPI_Datatype dt;
    MPI_Op op;
    const char *mpich_skip; /* why MPICH cannot run it, or NULL */
} ecase_t;

static int err_class(int rc)
{
    int cls = -1;

    if (PMPI_Error_class(rc, &cls) != MPI_SUCCESS)
        return -1;
    return cls;
}

static const char *class_str(int cls, char *buf, size_t n)
{
    snprintf(buf, n, "%s", cls == -1 ? "(not a valid error code)" : tu_errstr(cls));
    return buf;
}

static void note_accepted(const char *call, const char *name)
{
    if (tu_world_rank() == 0)
        printf("note: the MPI library accepts %s with %s (both entry points agree)\n", call,
               name);
}

/* buffers big enough for count 1 of any type used here */
static double g_sbuf[16], g_rbuf[16];

static void run_blocking(const ecase_t *c)
{
    char what[160], s1[MPI_MAX_ERROR_STRING], s2[MPI_MAX_ERROR_STRING];
    int rc1, rc2, c1, c2;

    snprintf(what, sizeof what, "MPI_Allreduce with %s", c->name);
    rc1 = MPI_Allreduce(g_sbuf, g_rbuf, c->count, c->dt, c->op, c->comm);
    rc2 = PMPI_Allreduce(g_sbuf, g_rbuf, c->count, c->dt, c->op, c->comm);
    c1 = err_class(rc1);
    c2 = err_class(rc2);
    tu_check(c1 == c2, what, "MPI_Allreduce: rc %d class %d %s; PMPI_Allreduce: rc %d class "
             "%d %s", rc1, c1, class_str(c1, s1, sizeof s1), rc2, c2,
             class_str(c2, s2, sizeof s2));
    if (c2 == MPI_SUCCESS)
        note_accepted("MPI_Allreduce", c->name);
    else
        tu_check(c1 != MPI_SUCCESS, what, "MPI_Allreduce returned MPI_SUCCESS");
}

static void run_nonblocking(const ecase_t *c)
{
    char what[160], s1[MPI_MAX_ERROR_STRING], s2[MPI_MAX_ERROR_STRING];
    MPI_Request r1 = MPI_REQUEST_NULL, r2 = MPI_REQUEST_NULL;
    int rc1, rc2, c1, c2, rc;

    snprintf(what, sizeof what, "MPI_Iallreduce with %s", c->name);
    rc1 = MPI_Iallreduce(g_sbuf, g_rbuf, c->count, c->dt, c->op, c->comm, &r1);
    if (rc1 == MPI_SUCCESS && r1 != MPI_REQUEST_NULL) {
        rc = MPI_Wait(&r1, MPI_STATUS_IGNORE);
        tu_check(rc == MPI_SUCCESS, what, "MPI_Wait returned %d (%s)", rc, tu_errstr(rc));
    }
    rc2 = PMPI_Iallreduce(g_sbuf, g_rbuf, c->count, c->dt, c->op, c->comm, &r2);
    if (rc2 == MPI_SUCCESS && r2 != MPI_REQUEST_NULL) {
        rc = PMPI_Wait(&r2, MPI_STATUS_IGNORE);
        tu_check(rc == MPI_SUCCESS, what, "PMPI_Wait returned %d (%s)", rc, tu_errstr(rc));
    }
    c1 = err_class(rc1);
    c2 = err_class(rc2);
    tu_check(c1 == c2, what, "MPI_Iallreduce: rc %d class %d %s; PMPI_Iallreduce: rc %d class "
             "%d %s", rc1, c1, class_str(c1, s1, sizeof s1), rc2, c2,
             class_str(c2, s2, sizeof s2));
    if (c2 == MPI_SUCCESS)
        note_accepted("MPI_Iallreduce", c->name);
    else
        tu_check(c1 != MPI_SUCCESS, what, "MPI_Iallreduce returned MPI_SUCCESS");
}

/* user op for the uncommitted-datatype case (so that the predefined-op rule
 * for derived types is not what fails): inout |= in on the ints */
static void user_or(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int i;

    (void)dt;
    for (i = 0; i < 2 * *len; i++)
        ((int *)inout)[i] |= ((int *)in)[i];
}

/* a valid call after the errors */
static void check_valid(int nonblocking)
{
    int n, r, i, rc, in[100], out[100], bad = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    const char *what = nonblocking ? "valid MPI_Iallreduce after the errors"
                                   : "valid MPI_Allreduce after the errors";

    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    for (i = 0; i < 100; i++) {
        in[i] = (int)tu_gen_int(r, (size_t)i, 0xe77, -1000, 1000);
        out[i] = -7;
    }
    if (nonblocking) {
        rc = MPI_Iallreduce(in, out, 100, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
        tu_check(rc == MPI_SUCCESS, what, "MPI_Iallreduce returned %d (%s)", rc, tu_errstr(rc));
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        tu_check(rc == MPI_SUCCESS && req == MPI_REQUEST_NULL, what, "MPI_Wait returned %d, "
                 "request %s", rc, req == MPI_REQUEST_NULL ? "null" : "not null");
    } else {
        rc = MPI_Allreduce(in, out, 100, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        tu_check(rc == MPI_SUCCESS, what, "MPI_Allreduce returned %d (%s)", rc, tu_errstr(rc));
    }
    for (i = 0; i < 100; i++) {
        int e = 0, k;
        for (k = 0; k < n; k++)
            e += (int)tu_gen_int(k, (size_t)i, 0xe77, -1000, 1000);
        if (out[i] != e && bad++ == 0)
            tu_fail(what, "index %d: expected %d got %d", i, e, out[i]);
    }
    tu_check(bad == 0, what, "%d of 100 elements wrong", bad);
}

int main(int argc, char **argv)
{
    MPI_Datatype uncommitted;
    MPI_Op uop;
    int rc, i, k;

    MPI_Init(&argc, &argv);
    tu_init("test_errors");
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            if (tu_world_rank() == 0)
                printf("usage: test_errors\n"
                       "Invalid MPI_(I)allreduce calls must fail like PMPI_(I)allreduce.\n");
            MPI_Finalize();
            return 0;
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Type_contiguous(2, MPI_INT, &uncommitted); /* deliberately not committed */
    MPI_Op_create(user_or, 1, &uop);
    memset(g_sbuf, 0, sizeof g_sbuf);

    {
        const ecase_t cases[] = {
            { "MPI_COMM_NULL", MPI_COMM_NULL, 1, MPI_INT, MPI_SUM, NULL },
            { "count -1", MPI_COMM_WORLD, -1, MPI_INT, MPI_SUM,
              "not checked, the call corrupts memory" },
            { "MPI_DATATYPE_NULL", MPI_COMM_WORLD, 1, MPI_DATATYPE_NULL, MPI_SUM, NULL },
            { "MPI_OP_NULL", MPI_COMM_WORLD, 1, MPI_INT, MPI_OP_NULL, NULL },
            { "MPI_BAND on MPI_FLOAT", MPI_COMM_WORLD, 1, MPI_FLOAT, MPI_BAND, NULL },
            { "MPI_LAND on MPI_DOUBLE", MPI_COMM_WORLD, 1, MPI_DOUBLE, MPI_LAND,
              "passes the argument checks, then the reduction aborts" },
            { "MPI_MINLOC on MPI_INT", MPI_COMM_WORLD, 1, MPI_INT, MPI_MINLOC, NULL },
            { "MPI_MAX on MPI_C_DOUBLE_COMPLEX", MPI_COMM_WORLD, 1, MPI_C_DOUBLE_COMPLEX,
              MPI_MAX, NULL },
            { "MPI_SUM on MPI_2INT", MPI_COMM_WORLD, 1, MPI_2INT, MPI_SUM, NULL },
            { "MPI_SUM on MPI_C_BOOL", MPI_COMM_WORLD, 1, MPI_C_BOOL, MPI_SUM, NULL },
            { "MPI_SUM on MPI_BYTE", MPI_COMM_WORLD, 1, MPI_BYTE, MPI_SUM, NULL },
            { "an uncommitted datatype (user op)", MPI_COMM_WORLD, 1, uncommitted, uop, NULL },
        };
        const int ncases = (int)(sizeof cases / sizeof cases[0]);

        for (k = 0; k < ncases; k++) {
#if defined(MPICH_VERSION)
            if (cases[k].mpich_skip != NULL) {
                if (tu_world_rank() == 0)
                    printf("note: skipping '%s': MPICH %s quirk: %s\n", cases[k].name,
                           MPICH_VERSION, cases[k].mpich_skip);
                continue;
            }
#endif
            run_blocking(&cases[k]);
            run_nonblocking(&cases[k]);
        }
    }
    MPI_Type_free(&uncommitted);
    MPI_Op_free(&uop);

    check_valid(0);
    check_valid(1);

    rc = tu_finish();
    MPI_Finalize();
    return rc;
}
