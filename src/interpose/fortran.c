/*
 * collar - the Fortran entry points (`use mpi`, `include 'mpif.h'`).
 *
 * Open MPI's Fortran library (libmpi_mpifh) implements mpi_allreduce_ and
 * the others by calling PMPI_Allreduce: a Fortran program never reaches the
 * C MPI_* symbols, and collar never starts (its mpi_init_ calls PMPI_Init).
 * collar therefore exports the Fortran symbols itself, under every name
 * mangling the MPI libraries export (mpi_allreduce, mpi_allreduce_,
 * mpi_allreduce__, MPI_ALLREDUCE), for MPI_Init(_thread), MPI_Finalize, the
 * collectives collar handles with their nonblocking forms, MPI_Allreduce_init
 * (where the library has it: configure's COLLAR_HAVE_MPI_ALLREDUCE_INIT) and
 * the calls that complete requests.  Each one converts the Fortran handles
 * and sentinels and calls the C binding MPI_X, not PMPI_X: the C wrapper of
 * collar when there is one, so that Fortran gets everything collar does in
 * C; the MPI library's own entry point when not.
 * The return code of the C call is the ierror argument, as the MPI library's
 * own Fortran binding gives it.
 *
 * The Fortran sentinels MPI_IN_PLACE, MPI_BOTTOM and MPI_STATUS(ES)_IGNORE
 * are addresses of the library's Fortran objects:
 *
 *   Open MPI  the common blocks mpi_fortran_in_place_, mpi_fortran_bottom_
 *             (in libmpi; every mangling is tried), MPI_F_STATUS(ES)_IGNORE
 *   MPICH     pointers MPIR_F_MPI_IN_PLACE, MPIR_F_MPI_BOTTOM and
 *             MPI_F_STATUS(ES)_IGNORE, filled in by the Fortran library's
 *             mpirinitf_ once (MPIR_F_NeedInit), which collar then calls
 *             itself, as the library's own bindings do
 *
 * They are weak references: in a C program (no Fortran library loaded) they
 * stay null and nothing here runs.  configure compiles this file only when
 * the MPI library has a Fortran layer, with its scheme
 * (COLLAR_FORTRAN_OMPI or COLLAR_FORTRAN_MPICH).
 *
 * INTEGER is MPI_Fint, which must be a C int (count and displacement arrays
 * are passed on as they are, and stay valid for nonblocking calls); LOGICAL
 * .true. is 1 (gfortran, flang, and the low bit Intel Fortran tests).
 */
#include "config.h"
#include "interpose.h"

#include <stdlib.h>

_Static_assert(sizeof(MPI_Fint) == sizeof(int),
               "collar's Fortran entry points need MPI_Fint to be a C int");

#ifdef MPI_F_STATUS_SIZE
#define F_STATUS_SIZE MPI_F_STATUS_SIZE
#else
#define F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif

#define F_TRUE 1

/* ------------------------------------------------------------ sentinels */

#define WEAK __attribute__((weak))

#if defined(COLLAR_FORTRAN_OMPI)
extern int mpi_fortran_in_place WEAK, mpi_fortran_in_place_ WEAK,
           mpi_fortran_in_place__ WEAK, MPI_FORTRAN_IN_PLACE WEAK;
extern int mpi_fortran_bottom WEAK, mpi_fortran_bottom_ WEAK,
           mpi_fortran_bottom__ WEAK, MPI_FORTRAN_BOTTOM WEAK;

static inline void f_init(void)
{
}

static inline int f_is_in_place(const void *p)
{
    return p == &mpi_fortran_in_place_ || p == &mpi_fortran_in_place
           || p == &mpi_fortran_in_place__ || p == &MPI_FORTRAN_IN_PLACE;
}

static inline int f_is_bottom(const void *p)
{
    return p == &mpi_fortran_bottom_ || p == &mpi_fortran_bottom
           || p == &mpi_fortran_bottom__ || p == &MPI_FORTRAN_BOTTOM;
}

#elif defined(COLLAR_FORTRAN_MPICH)
extern int MPIR_F_NeedInit WEAK;
extern void *MPIR_F_MPI_IN_PLACE WEAK;
extern void *MPIR_F_MPI_BOTTOM WEAK;
extern void mpirinitf_(void) WEAK;

static inline void f_init(void)
{
    if (&MPIR_F_NeedInit != NULL && MPIR_F_NeedInit && mpirinitf_ != NULL) {
        mpirinitf_();
        MPIR_F_NeedInit = 0;
    }
}

static inline int f_is_in_place(const void *p)
{
    return &MPIR_F_MPI_IN_PLACE != NULL && MPIR_F_MPI_IN_PLACE != NULL
           && p == MPIR_F_MPI_IN_PLACE;
}

static inline int f_is_bottom(const void *p)
{
    return &MPIR_F_MPI_BOTTOM != NULL && MPIR_F_MPI_BOTTOM != NULL
           && p == MPIR_F_MPI_BOTTOM;
}

#else
#error "fortran.c needs COLLAR_FORTRAN_OMPI or COLLAR_FORTRAN_MPICH"
#endif

/* A buffer argument: the C constant for a Fortran sentinel.  A null pointer
 * (a weak sentinel that is absent compares equal to it) stays null. */
static inline void *f_buf(void *p)
{
    if (p == NULL) {
        return p;
    }
    if (f_is_in_place(p)) {
        return MPI_IN_PLACE;
    }
    if (f_is_bottom(p)) {
        return MPI_BOTTOM;
    }
    return p;
}

static inline int f_status_ignore(const MPI_Fint *s)
{
    return s == NULL || s == MPI_F_STATUS_IGNORE;
}

static inline int f_statuses_ignore(const MPI_Fint *s)
{
    return s == NULL || s == MPI_F_STATUSES_IGNORE;
}

static inline void f_ret(MPI_Fint *ierr, int rc)
{
    if (ierr != NULL) {
        *ierr = (MPI_Fint)rc;
    }
}

/* Every mangling of one Fortran name, as aliases of the function `impl`. */
#define F_ALIAS(name, impl) \
    extern __typeof__(impl) name \
        __attribute__((alias(#impl), visibility("default")))
#define F_NAMES(lower, upper, impl) \
    F_ALIAS(lower, impl); \
    F_ALIAS(lower##_, impl); \
    F_ALIAS(lower##__, impl); \
    F_ALIAS(upper, impl)

/* ------------------------------------------------------- init, finalize */

static void f_mpi_init(MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Init(NULL, NULL));
}
F_NAMES(mpi_init, MPI_INIT, f_mpi_init);

static void f_mpi_init_thread(MPI_Fint *required, MPI_Fint *provided,
                              MPI_Fint *ierr)
{
    int prov = MPI_THREAD_SINGLE;
    f_init();
    int rc = MPI_Init_thread(NULL, NULL, (int)*required, &prov);
    if (rc == MPI_SUCCESS) {
        *provided = (MPI_Fint)prov;
    }
    f_ret(ierr, rc);
}
F_NAMES(mpi_init_thread, MPI_INIT_THREAD, f_mpi_init_thread);

static void f_mpi_finalize(MPI_Fint *ierr)
{
    f_ret(ierr, MPI_Finalize());
}
F_NAMES(mpi_finalize, MPI_FINALIZE, f_mpi_finalize);

/* ---------------------------------------------------------- collectives */

#define COMM(c) MPI_Comm_f2c(*(c))
#define TYPE(t) MPI_Type_f2c(*(t))
#define OP(o) MPI_Op_f2c(*(o))

/* A nonblocking call: its request back to Fortran. */
static inline void f_req_out(MPI_Fint *freq, int rc, MPI_Request req)
{
    if (rc == MPI_SUCCESS) {
        *freq = MPI_Request_c2f(req);
    }
}

static void f_allreduce(void *sbuf, void *rbuf, MPI_Fint *count,
                        MPI_Fint *dt, MPI_Fint *op, MPI_Fint *comm,
                        MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Allreduce(f_buf(sbuf), f_buf(rbuf), *count, TYPE(dt),
                              OP(op), COMM(comm)));
}
F_NAMES(mpi_allreduce, MPI_ALLREDUCE, f_allreduce);

static void f_iallreduce(void *sbuf, void *rbuf, MPI_Fint *count,
                         MPI_Fint *dt, MPI_Fint *op, MPI_Fint *comm,
                         MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Iallreduce(f_buf(sbuf), f_buf(rbuf), *count, TYPE(dt),
                            OP(op), COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_iallreduce, MPI_IALLREDUCE, f_iallreduce);

#ifdef COLLAR_HAVE_MPI_ALLREDUCE_INIT
static void f_allreduce_init(void *sbuf, void *rbuf, MPI_Fint *count,
                             MPI_Fint *dt, MPI_Fint *op, MPI_Fint *comm,
                             MPI_Fint *info, MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Allreduce_init(f_buf(sbuf), f_buf(rbuf), *count, TYPE(dt),
                                OP(op), COMM(comm), MPI_Info_f2c(*info), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_allreduce_init, MPI_ALLREDUCE_INIT, f_allreduce_init);
#endif

static void f_bcast(void *buf, MPI_Fint *count, MPI_Fint *dt, MPI_Fint *root,
                    MPI_Fint *comm, MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Bcast(f_buf(buf), *count, TYPE(dt), *root, COMM(comm)));
}
F_NAMES(mpi_bcast, MPI_BCAST, f_bcast);

static void f_ibcast(void *buf, MPI_Fint *count, MPI_Fint *dt, MPI_Fint *root,
                     MPI_Fint *comm, MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Ibcast(f_buf(buf), *count, TYPE(dt), *root, COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_ibcast, MPI_IBCAST, f_ibcast);

static void f_allgather(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt,
                        void *rbuf, MPI_Fint *rcount, MPI_Fint *rdt,
                        MPI_Fint *comm, MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Allgather(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                              *rcount, TYPE(rdt), COMM(comm)));
}
F_NAMES(mpi_allgather, MPI_ALLGATHER, f_allgather);

static void f_iallgather(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt,
                         void *rbuf, MPI_Fint *rcount, MPI_Fint *rdt,
                         MPI_Fint *comm, MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Iallgather(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                            *rcount, TYPE(rdt), COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_iallgather, MPI_IALLGATHER, f_iallgather);

static void f_allgatherv(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt,
                         void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs,
                         MPI_Fint *rdt, MPI_Fint *comm, MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Allgatherv(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                               rcounts, displs, TYPE(rdt), COMM(comm)));
}
F_NAMES(mpi_allgatherv, MPI_ALLGATHERV, f_allgatherv);

static void f_iallgatherv(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt,
                          void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs,
                          MPI_Fint *rdt, MPI_Fint *comm, MPI_Fint *freq,
                          MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Iallgatherv(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                             rcounts, displs, TYPE(rdt), COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_iallgatherv, MPI_IALLGATHERV, f_iallgatherv);

static void f_alltoall(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt,
                       void *rbuf, MPI_Fint *rcount, MPI_Fint *rdt,
                       MPI_Fint *comm, MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Alltoall(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                             *rcount, TYPE(rdt), COMM(comm)));
}
F_NAMES(mpi_alltoall, MPI_ALLTOALL, f_alltoall);

static void f_ialltoall(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt,
                        void *rbuf, MPI_Fint *rcount, MPI_Fint *rdt,
                        MPI_Fint *comm, MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Ialltoall(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                           *rcount, TYPE(rdt), COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_ialltoall, MPI_IALLTOALL, f_ialltoall);

static void f_alltoallv(void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls,
                        MPI_Fint *sdt, void *rbuf, MPI_Fint *rcounts,
                        MPI_Fint *rdispls, MPI_Fint *rdt, MPI_Fint *comm,
                        MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Alltoallv(f_buf(sbuf), scounts, sdispls, TYPE(sdt),
                              f_buf(rbuf), rcounts, rdispls, TYPE(rdt),
                              COMM(comm)));
}
F_NAMES(mpi_alltoallv, MPI_ALLTOALLV, f_alltoallv);

static void f_ialltoallv(void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls,
                         MPI_Fint *sdt, void *rbuf, MPI_Fint *rcounts,
                         MPI_Fint *rdispls, MPI_Fint *rdt, MPI_Fint *comm,
                         MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Ialltoallv(f_buf(sbuf), scounts, sdispls, TYPE(sdt),
                            f_buf(rbuf), rcounts, rdispls, TYPE(rdt),
                            COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_ialltoallv, MPI_IALLTOALLV, f_ialltoallv);

static void f_reduce_scatter(void *sbuf, void *rbuf, MPI_Fint *rcounts,
                             MPI_Fint *dt, MPI_Fint *op, MPI_Fint *comm,
                             MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Reduce_scatter(f_buf(sbuf), f_buf(rbuf), rcounts, TYPE(dt),
                                   OP(op), COMM(comm)));
}
F_NAMES(mpi_reduce_scatter, MPI_REDUCE_SCATTER, f_reduce_scatter);

static void f_ireduce_scatter(void *sbuf, void *rbuf, MPI_Fint *rcounts,
                              MPI_Fint *dt, MPI_Fint *op, MPI_Fint *comm,
                              MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Ireduce_scatter(f_buf(sbuf), f_buf(rbuf), rcounts, TYPE(dt),
                                 OP(op), COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_ireduce_scatter, MPI_IREDUCE_SCATTER, f_ireduce_scatter);

static void f_reduce_scatter_block(void *sbuf, void *rbuf, MPI_Fint *rcount,
                                   MPI_Fint *dt, MPI_Fint *op, MPI_Fint *comm,
                                   MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Reduce_scatter_block(f_buf(sbuf), f_buf(rbuf), *rcount,
                                         TYPE(dt), OP(op), COMM(comm)));
}
F_NAMES(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK,
        f_reduce_scatter_block);

static void f_ireduce_scatter_block(void *sbuf, void *rbuf, MPI_Fint *rcount,
                                    MPI_Fint *dt, MPI_Fint *op, MPI_Fint *comm,
                                    MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Ireduce_scatter_block(f_buf(sbuf), f_buf(rbuf), *rcount,
                                       TYPE(dt), OP(op), COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK,
        f_ireduce_scatter_block);

static void f_reduce(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *dt,
                     MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm,
                     MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Reduce(f_buf(sbuf), f_buf(rbuf), *count, TYPE(dt), OP(op),
                           *root, COMM(comm)));
}
F_NAMES(mpi_reduce, MPI_REDUCE, f_reduce);

static void f_ireduce(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *dt,
                      MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm,
                      MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Ireduce(f_buf(sbuf), f_buf(rbuf), *count, TYPE(dt), OP(op),
                         *root, COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_ireduce, MPI_IREDUCE, f_ireduce);

static void f_gather(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt, void *rbuf,
                     MPI_Fint *rcount, MPI_Fint *rdt, MPI_Fint *root,
                     MPI_Fint *comm, MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Gather(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                           *rcount, TYPE(rdt), *root, COMM(comm)));
}
F_NAMES(mpi_gather, MPI_GATHER, f_gather);

static void f_igather(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt, void *rbuf,
                      MPI_Fint *rcount, MPI_Fint *rdt, MPI_Fint *root,
                      MPI_Fint *comm, MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Igather(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                         *rcount, TYPE(rdt), *root, COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_igather, MPI_IGATHER, f_igather);

static void f_gatherv(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt, void *rbuf,
                      MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rdt,
                      MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Gatherv(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                            rcounts, displs, TYPE(rdt), *root, COMM(comm)));
}
F_NAMES(mpi_gatherv, MPI_GATHERV, f_gatherv);

static void f_igatherv(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt,
                       void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs,
                       MPI_Fint *rdt, MPI_Fint *root, MPI_Fint *comm,
                       MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Igatherv(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                          rcounts, displs, TYPE(rdt), *root, COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_igatherv, MPI_IGATHERV, f_igatherv);

static void f_scatter(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt, void *rbuf,
                      MPI_Fint *rcount, MPI_Fint *rdt, MPI_Fint *root,
                      MPI_Fint *comm, MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Scatter(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                            *rcount, TYPE(rdt), *root, COMM(comm)));
}
F_NAMES(mpi_scatter, MPI_SCATTER, f_scatter);

static void f_iscatter(void *sbuf, MPI_Fint *scount, MPI_Fint *sdt,
                       void *rbuf, MPI_Fint *rcount, MPI_Fint *rdt,
                       MPI_Fint *root, MPI_Fint *comm, MPI_Fint *freq,
                       MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Iscatter(f_buf(sbuf), *scount, TYPE(sdt), f_buf(rbuf),
                          *rcount, TYPE(rdt), *root, COMM(comm), &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_iscatter, MPI_ISCATTER, f_iscatter);

static void f_scatterv(void *sbuf, MPI_Fint *scounts, MPI_Fint *displs,
                       MPI_Fint *sdt, void *rbuf, MPI_Fint *rcount,
                       MPI_Fint *rdt, MPI_Fint *root, MPI_Fint *comm,
                       MPI_Fint *ierr)
{
    f_init();
    f_ret(ierr, MPI_Scatterv(f_buf(sbuf), scounts, displs, TYPE(sdt),
                             f_buf(rbuf), *rcount, TYPE(rdt), *root,
                             COMM(comm)));
}
F_NAMES(mpi_scatterv, MPI_SCATTERV, f_scatterv);

static void f_iscatterv(void *sbuf, MPI_Fint *scounts, MPI_Fint *displs,
                        MPI_Fint *sdt, void *rbuf, MPI_Fint *rcount,
                        MPI_Fint *rdt, MPI_Fint *root, MPI_Fint *comm,
                        MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    f_init();
    int rc = MPI_Iscatterv(f_buf(sbuf), scounts, displs, TYPE(sdt),
                           f_buf(rbuf), *rcount, TYPE(rdt), *root, COMM(comm),
                           &req);
    f_req_out(freq, rc, req);
    f_ret(ierr, rc);
}
F_NAMES(mpi_iscatterv, MPI_ISCATTERV, f_iscatterv);

/* ----------------------------------------------------------- completion */

/* C copies of a Fortran request array (and its statuses): on the stack up
 * to F_STACK, else on the heap. */
#define F_STACK 16

typedef struct {
    MPI_Request *req;
    MPI_Status *st;
    MPI_Request req_local[F_STACK];
    MPI_Status st_local[F_STACK];
} f_reqs_t;

/* 0, or MPI_ERR_NO_MEM (through MPI_COMM_WORLD's error handler, as the MPI
 * library reports its own allocation failures).  A negative count gets
 * empty arrays, and the MPI library then reports the count. */
static int f_reqs_get(f_reqs_t *r, int n, const MPI_Fint *freqs)
{
    r->req = r->req_local;
    r->st = r->st_local;
    if (n > F_STACK) {
        r->req = malloc((size_t)n * sizeof(*r->req));
        r->st = malloc((size_t)n * sizeof(*r->st));
        if (r->req == NULL || r->st == NULL) {
            free(r->req);
            free(r->st);
            r->req = NULL;
            r->st = NULL;
            (void)MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
            return MPI_ERR_NO_MEM;
        }
    }
    for (int i = 0; i < n; i++) {
        r->req[i] = MPI_Request_f2c(freqs[i]);
    }
    return MPI_SUCCESS;
}

/* The requests back to Fortran (completed ones are MPI_REQUEST_NULL now). */
static void f_reqs_put(f_reqs_t *r, int n, MPI_Fint *freqs)
{
    for (int i = 0; i < n; i++) {
        freqs[i] = MPI_Request_c2f(r->req[i]);
    }
}

static void f_reqs_free(f_reqs_t *r)
{
    if (r->req != r->req_local) {
        free(r->req);
        free(r->st);
    }
}

static inline void f_status_out(MPI_Fint *fst, const MPI_Status *st)
{
    MPI_Status_c2f(st, fst);
}

/* Success or an error of class MPI_ERR_IN_STATUS: the statuses carry the
 * outcome of each request. */
static int f_has_statuses(int rc)
{
    int cls = MPI_ERR_OTHER;
    if (rc == MPI_SUCCESS) {
        return 1;
    }
    return MPI_Error_class(rc, &cls) == MPI_SUCCESS && cls == MPI_ERR_IN_STATUS;
}

static void f_wait(MPI_Fint *freq, MPI_Fint *fst, MPI_Fint *ierr)
{
    MPI_Request req = MPI_Request_f2c(*freq);
    MPI_Status st = { 0 };
    f_init();
    const int ignore = f_status_ignore(fst);
    /* Also on an error: a failed operation's request is complete (freed,
     * MPI_REQUEST_NULL), and its status says the error. */
    int rc = MPI_Wait(&req, ignore ? MPI_STATUS_IGNORE : &st);
    *freq = MPI_Request_c2f(req);
    if (!ignore) {
        f_status_out(fst, &st);
    }
    f_ret(ierr, rc);
}
F_NAMES(mpi_wait, MPI_WAIT, f_wait);

static void f_test(MPI_Fint *freq, MPI_Fint *flag, MPI_Fint *fst,
                   MPI_Fint *ierr)
{
    MPI_Request req = MPI_Request_f2c(*freq);
    MPI_Status st = { 0 };
    int cflag = 0;
    f_init();
    const int ignore = f_status_ignore(fst);
    /* An error of a completed operation comes with flag set (as MPI_Wait). */
    int rc = MPI_Test(&req, &cflag, ignore ? MPI_STATUS_IGNORE : &st);
    *flag = cflag ? F_TRUE : 0;
    *freq = MPI_Request_c2f(req);
    if (cflag && !ignore) {
        f_status_out(fst, &st);
    }
    f_ret(ierr, rc);
}
F_NAMES(mpi_test, MPI_TEST, f_test);

static void f_waitall(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *fsts,
                      MPI_Fint *ierr)
{
    f_reqs_t r;
    const int n = *count;
    f_init();
    int rc = f_reqs_get(&r, n, freqs);
    if (rc != MPI_SUCCESS) {
        f_ret(ierr, rc);
        return;
    }
    const int ignore = f_statuses_ignore(fsts);
    rc = MPI_Waitall(n, r.req, ignore ? MPI_STATUSES_IGNORE : r.st);
    if (f_has_statuses(rc)) {
        f_reqs_put(&r, n, freqs);
        for (int i = 0; i < n && !ignore; i++) {
            f_status_out(fsts + (size_t)i * F_STATUS_SIZE, &r.st[i]);
        }
    }
    f_reqs_free(&r);
    f_ret(ierr, rc);
}
F_NAMES(mpi_waitall, MPI_WAITALL, f_waitall);

static void f_testall(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *flag,
                      MPI_Fint *fsts, MPI_Fint *ierr)
{
    f_reqs_t r;
    const int n = *count;
    int cflag = 0;
    f_init();
    int rc = f_reqs_get(&r, n, freqs);
    if (rc != MPI_SUCCESS) {
        f_ret(ierr, rc);
        return;
    }
    const int ignore = f_statuses_ignore(fsts);
    rc = MPI_Testall(n, r.req, &cflag, ignore ? MPI_STATUSES_IGNORE : r.st);
    if (f_has_statuses(rc)) {
        *flag = cflag ? F_TRUE : 0;
        f_reqs_put(&r, n, freqs);
        for (int i = 0; i < n && !ignore && cflag; i++) {
            f_status_out(fsts + (size_t)i * F_STATUS_SIZE, &r.st[i]);
        }
    }
    f_reqs_free(&r);
    f_ret(ierr, rc);
}
F_NAMES(mpi_testall, MPI_TESTALL, f_testall);

/* Fortran indices count from 1; MPI_UNDEFINED stays. */
static inline MPI_Fint f_index(int i)
{
    return i == MPI_UNDEFINED ? (MPI_Fint)MPI_UNDEFINED : (MPI_Fint)(i + 1);
}

static void f_waitany(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *index,
                      MPI_Fint *fst, MPI_Fint *ierr)
{
    f_reqs_t r;
    const int n = *count;
    int idx = MPI_UNDEFINED;
    f_init();
    int rc = f_reqs_get(&r, n, freqs);
    if (rc != MPI_SUCCESS) {
        f_ret(ierr, rc);
        return;
    }
    const int ignore = f_status_ignore(fst);
    /* Also on an error: the index of the failed operation's request,
     * which is complete. */
    rc = MPI_Waitany(n, r.req, &idx, ignore ? MPI_STATUS_IGNORE : &r.st[0]);
    if (rc == MPI_SUCCESS || idx != MPI_UNDEFINED) {
        f_reqs_put(&r, n, freqs);
        *index = f_index(idx);
        if (!ignore) {
            f_status_out(fst, &r.st[0]);
        }
    }
    f_reqs_free(&r);
    f_ret(ierr, rc);
}
F_NAMES(mpi_waitany, MPI_WAITANY, f_waitany);

static void f_testany(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *index,
                      MPI_Fint *flag, MPI_Fint *fst, MPI_Fint *ierr)
{
    f_reqs_t r;
    const int n = *count;
    int idx = MPI_UNDEFINED, cflag = 0;
    f_init();
    int rc = f_reqs_get(&r, n, freqs);
    if (rc != MPI_SUCCESS) {
        f_ret(ierr, rc);
        return;
    }
    const int ignore = f_status_ignore(fst);
    rc = MPI_Testany(n, r.req, &idx, &cflag,
                     ignore ? MPI_STATUS_IGNORE : &r.st[0]);
    if (rc == MPI_SUCCESS || (cflag && idx != MPI_UNDEFINED)) {
        f_reqs_put(&r, n, freqs);
        *index = f_index(idx);
        *flag = cflag ? F_TRUE : 0;
        if (cflag && !ignore) {
            f_status_out(fst, &r.st[0]);
        }
    }
    f_reqs_free(&r);
    f_ret(ierr, rc);
}
F_NAMES(mpi_testany, MPI_TESTANY, f_testany);

/* MPI_Waitsome and MPI_Testsome: `test` picks which. */
static void f_some(int test, MPI_Fint *incount, MPI_Fint *freqs,
                   MPI_Fint *outcount, MPI_Fint *indices, MPI_Fint *fsts,
                   MPI_Fint *ierr)
{
    f_reqs_t r;
    const int n = *incount;
    int out = MPI_UNDEFINED;
    f_init();
    int rc = f_reqs_get(&r, n, freqs);
    if (rc != MPI_SUCCESS) {
        f_ret(ierr, rc);
        return;
    }
    const int ignore = f_statuses_ignore(fsts);
    /* The indices land in the Fortran array (MPI_Fint is int), counted
     * from 0, and are shifted afterwards. */
    rc = (test ? MPI_Testsome : MPI_Waitsome)(n, r.req, &out, indices,
                                              ignore ? MPI_STATUSES_IGNORE : r.st);
    if (f_has_statuses(rc)) {
        f_reqs_put(&r, n, freqs);
        *outcount = (MPI_Fint)out;
        for (int i = 0; out != MPI_UNDEFINED && i < out; i++) {
            if (!ignore) {
                f_status_out(fsts + (size_t)i * F_STATUS_SIZE, &r.st[i]);
            }
            indices[i] += 1;
        }
    }
    f_reqs_free(&r);
    f_ret(ierr, rc);
}

static void f_waitsome(MPI_Fint *incount, MPI_Fint *freqs, MPI_Fint *outcount,
                       MPI_Fint *indices, MPI_Fint *fsts, MPI_Fint *ierr)
{
    f_some(0, incount, freqs, outcount, indices, fsts, ierr);
}
F_NAMES(mpi_waitsome, MPI_WAITSOME, f_waitsome);

static void f_testsome(MPI_Fint *incount, MPI_Fint *freqs, MPI_Fint *outcount,
                       MPI_Fint *indices, MPI_Fint *fsts, MPI_Fint *ierr)
{
    f_some(1, incount, freqs, outcount, indices, fsts, ierr);
}
F_NAMES(mpi_testsome, MPI_TESTSOME, f_testsome);

static void f_start(MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_Request_f2c(*freq);
    f_init();
    int rc = MPI_Start(&req);
    if (rc == MPI_SUCCESS) {
        *freq = MPI_Request_c2f(req);
    }
    f_ret(ierr, rc);
}
F_NAMES(mpi_start, MPI_START, f_start);

static void f_startall(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *ierr)
{
    f_reqs_t r;
    const int n = *count;
    f_init();
    int rc = f_reqs_get(&r, n, freqs);
    if (rc != MPI_SUCCESS) {
        f_ret(ierr, rc);
        return;
    }
    rc = MPI_Startall(n, r.req);
    if (rc == MPI_SUCCESS) {
        f_reqs_put(&r, n, freqs);
    }
    f_reqs_free(&r);
    f_ret(ierr, rc);
}
F_NAMES(mpi_startall, MPI_STARTALL, f_startall);

static void f_request_free(MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_Request_f2c(*freq);
    f_init();
    int rc = MPI_Request_free(&req);
    if (rc == MPI_SUCCESS) {
        *freq = MPI_Request_c2f(MPI_REQUEST_NULL);
    }
    f_ret(ierr, rc);
}
F_NAMES(mpi_request_free, MPI_REQUEST_FREE, f_request_free);
