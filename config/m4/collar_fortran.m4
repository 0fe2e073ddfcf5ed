# COLLAR_CHECK_FORTRAN: the Fortran entry points (src/interpose/fortran.c).
#
# They are compiled in when the MPI library behind CC has a Fortran layer
# (a library that links with CC and defines mpi_init_: Open MPI's
# libmpi_mpifh, MPICH's libmpifort or Debian's libmpichfort) and collar
# knows that library's Fortran sentinels (MPI_IN_PLACE, MPI_BOTTOM): Open
# MPI (COLLAR_FORTRAN_OMPI) or MPICH (COLLAR_FORTRAN_MPICH).  collar does
# not link the Fortran library: its symbols are weak references, resolved in
# a Fortran program that loads it.  --disable-fortran leaves them out.
#
# MPIFC, the MPI Fortran compiler wrapper of the same library (default: the
# name of MPICC with mpicc replaced by mpifort, then mpif90), builds the
# Fortran tests; when it cannot compile a `use mpi` program (no wrapper, no
# Fortran compiler) MPIFC is empty and those tests are skipped.
AC_DEFUN([COLLAR_CHECK_FORTRAN], [
    AC_ARG_ENABLE([fortran],
        [AS_HELP_STRING([--disable-fortran],
            [no Fortran entry points (default: when the MPI library has a Fortran layer)])],
        [], [enable_fortran=auto])
    AC_ARG_VAR([MPIFC], [MPI Fortran compiler wrapper for the Fortran tests (default: matches MPICC)])

    collar_fortran=no
    collar_fortran_lib=""
    AS_IF([test "x$enable_fortran" != xno], [
        AC_MSG_CHECKING([for the Fortran layer of the MPI library])
        collar_save_LIBS=$LIBS
        AS_CASE([$collar_mpi_flavor],
            [Open*], [collar_fortran_cands="mpi_mpifh"],
            [MPICH], [collar_fortran_cands="mpifort mpichfort"],
            [collar_fortran_cands=""])
        for collar_l in $collar_fortran_cands; do
            LIBS="-l$collar_l $collar_save_LIBS"
            AC_LINK_IFELSE([AC_LANG_PROGRAM([[void mpi_init_(int *);]],
                                            [[int e; mpi_init_(&e);]])],
                           [collar_fortran_lib=lib$collar_l; break])
        done
        LIBS=$collar_save_LIBS
        AS_IF([test -n "$collar_fortran_lib"],
              [AC_MSG_RESULT([$collar_fortran_lib])],
              [AC_MSG_RESULT([none])])
        AS_IF([test -n "$collar_fortran_lib"], [
            AS_CASE([$collar_mpi_flavor],
                [Open*], [collar_fortran=ompi
                          AC_DEFINE([COLLAR_FORTRAN_OMPI], [1],
                                    [Fortran sentinels of Open MPI (mpi_fortran_in_place_)])],
                [MPICH], [collar_fortran=mpich
                          AC_DEFINE([COLLAR_FORTRAN_MPICH], [1],
                                    [Fortran sentinels of MPICH (MPIR_F_MPI_IN_PLACE)])])
        ])
        AS_IF([test "x$enable_fortran" = xyes && test "x$collar_fortran" = xno],
              [AC_MSG_ERROR([--enable-fortran: no Fortran layer of $collar_mpi_flavor found with $CC])])
    ])
    AM_CONDITIONAL([COLLAR_FORTRAN], [test "x$collar_fortran" != xno])

    # MPI_Allreduce_init (MPI-4; Open MPI 5 has it and says MPI_VERSION 3).
    AS_IF([test "x$collar_fortran" != xno], [
        AC_MSG_CHECKING([for MPI_Allreduce_init])
        AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[
            MPI_Request r;
            int x = 0;
            (void)MPI_Allreduce_init(&x, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                                     MPI_INFO_NULL, &r);]])],
            [AC_MSG_RESULT([yes])
             AC_DEFINE([COLLAR_HAVE_MPI_ALLREDUCE_INIT], [1],
                       [the MPI library has MPI_Allreduce_init])],
            [AC_MSG_RESULT([no])])
    ])

    # The compiler wrapper for the tests.
    AS_IF([test -z "$MPIFC"], [
        collar_mpicc_base=`basename "$MPICC"`
        collar_mpifc_cands="`echo "$collar_mpicc_base" | sed 's/mpicc/mpifort/'` `echo "$collar_mpicc_base" | sed 's/mpicc/mpif90/'`"
        AC_PATH_PROGS([MPIFC], [$collar_mpifc_cands], [])
    ])
    AS_IF([test -n "$MPIFC" && test "x$collar_fortran" != xno], [
        AC_MSG_CHECKING([whether $MPIFC compiles `use mpi' programs])
        cat > conftest_mpi.f90 <<'EOF'
program conftest
    use mpi
    implicit none
    integer :: ierr
    call MPI_Init(ierr)
    call MPI_Finalize(ierr)
end program conftest
EOF
        AS_IF([$MPIFC -o conftest_mpi conftest_mpi.f90 >&AS_MESSAGE_LOG_FD 2>&1],
              [AC_MSG_RESULT([yes])],
              [AC_MSG_RESULT([no])
               MPIFC=""])
        rm -f conftest_mpi conftest_mpi.f90 conftest_mpi.o mpi.mod
    ])
    AS_IF([test "x$collar_fortran" = xno], [MPIFC=""])
    AS_CASE([$collar_fortran],
        [no], [collar_fortran_summary="no"],
        [collar_fortran_summary="$collar_fortran_lib, $collar_mpi_flavor sentinels; tests: ${MPIFC:-none}"])
])
