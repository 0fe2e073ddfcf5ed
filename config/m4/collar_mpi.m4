# COLLAR_PROG_MPICC: use the MPI compiler wrapper as CC.
# MPICC=... selects it; default: mpicc.
AC_DEFUN([COLLAR_PROG_MPICC], [
    AC_ARG_VAR([MPICC], [MPI C compiler wrapper (default: mpicc)])
    AC_ARG_VAR([MPIRUN], [MPI launcher used by the tests (default: matches MPICC)])
    AS_IF([test -z "$MPICC"], [MPICC=mpicc])
    AS_CASE([$MPICC],
        [/*], [AS_IF([test -x "$MPICC"], [collar_mpicc_path=$MPICC], [collar_mpicc_path=no])],
        [AC_PATH_PROG([collar_mpicc_path], [$MPICC], [no])])
    AS_IF([test "x$collar_mpicc_path" = xno],
          [AC_MSG_ERROR([MPI compiler wrapper '$MPICC' not found: install an MPI library (Debian: apt-get install libopenmpi-dev openmpi-bin) or set MPICC])])
    CC="$MPICC"
])

# COLLAR_CHECK_MPI: check that CC compiles and links MPI programs with the
# profiling interface and MPI-3 nonblocking collectives; find the launcher.
AC_DEFUN([COLLAR_CHECK_MPI], [
    AC_MSG_CHECKING([whether $CC builds MPI-3 programs with PMPI])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[
        MPI_Request r;
        int x = 0;
        (void)PMPI_Iallreduce(&x, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
        (void)PMPI_Grequest_start(0, 0, 0, 0, &r);
        return MPI_VERSION >= 3 ? 0 : 1;]])],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([$CC cannot build MPI-3 programs with the profiling interface])])

    AC_MSG_CHECKING([which MPI library $CC uses])
    collar_mpi_flavor=unknown
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[
#ifndef OPEN_MPI
#error not Open MPI
#endif
        ]])], [collar_mpi_flavor="Open MPI"])
    # The MPI-5 standard ABI (MPICH's mpicc_abi: libmpi_abi.so) before
    # MPICH: its mpi.h is the standard's, with no MPICH macros.
    AS_IF([test "x$collar_mpi_flavor" = xunknown],
      [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[
#if !defined(MPI_ABI_VERSION) || defined(MPICH_VERSION)
#error not the MPI ABI
#endif
        ]])], [collar_mpi_flavor="MPI-5 ABI"])])
    AS_IF([test "x$collar_mpi_flavor" = xunknown],
      [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[
#ifndef MPICH
#error not MPICH
#endif
        ]])], [collar_mpi_flavor="MPICH"])])
    AC_MSG_RESULT([$collar_mpi_flavor])

    # A wrapper outside the system's directories (an MPI in a prefix of its
    # own, the venv of an MPI wheel from the Python package index) has its
    # launcher beside it; Debian's mpicc.mpich and mpicc.openmpi share
    # /usr/bin, where the name says which launcher matches (below).
    AS_IF([test -z "$MPIRUN"], [
        collar_mpicc_dir=`dirname "$collar_mpicc_path"`
        AS_CASE([$collar_mpicc_dir], [/usr/bin|/bin], [], [
            for collar_launcher in mpiexec mpirun; do
                AS_IF([test -x "$collar_mpicc_dir/$collar_launcher"],
                      [MPIRUN=$collar_mpicc_dir/$collar_launcher; break])
            done])
    ])

    # The launcher must belong to the same library as the wrapper.
    AS_IF([test -z "$MPIRUN"], [
        AS_CASE([$collar_mpi_flavor],
          [MPICH|MPI-5*], [AC_PATH_PROGS([MPIRUN], [mpirun.mpich mpiexec.mpich mpiexec.hydra mpirun mpiexec], [no])],
          [Open*], [AC_PATH_PROGS([MPIRUN], [mpirun.openmpi orterun mpirun mpiexec], [no])],
          [AC_PATH_PROGS([MPIRUN], [mpirun mpiexec], [no])])
    ])
    AS_IF([test "x$MPIRUN" = xno],
          [AC_MSG_WARN([no MPI launcher found: MPI tests will be skipped])])
    collar_mpi_version_line=`$MPIRUN --version 2>/dev/null | sed -n '/./{p;q;}'`
    # MPICH's hydra starts with "HYDRA build details:"; its version follows.
    AS_CASE([$collar_mpi_version_line], [HYDRA*],
        [collar_mpi_version_line="hydra `$MPIRUN --version 2>/dev/null | sed -n 's/^ *Version: *//p' | sed -n 1p`"])
    AS_IF([test -z "$collar_mpi_version_line"], [collar_mpi_version_line="version unknown"])
    AM_CONDITIONAL([COLLAR_OPEN_MPI], [test "x$collar_mpi_flavor" = "xOpen MPI"])
    AC_SUBST([collar_mpi_flavor])
])
