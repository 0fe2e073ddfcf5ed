# COLLAR_CHECK_NVTX: the NVTX v3 header (nvtx3/nvToolsExt.h, header-only,
# shipped with the CUDA toolkit), for collar's NVTX ranges (COLLAR_NVTX).
#   --with-nvtx=DIR    the directory that holds nvtx3/ (required there)
#   --without-nvtx     no NVTX ranges
#   (default)          the CUDA toolkit's include directory (also when the
#                      CUDA backend is not built), else /usr/include
# Without the header the ranges are compiled out; nothing is vendored.
# Substitutes NVTX_CPPFLAGS; defines COLLAR_HAVE_NVTX.
AC_DEFUN([COLLAR_CHECK_NVTX], [
    AC_ARG_WITH([nvtx],
        [AS_HELP_STRING([--with-nvtx=DIR],
            [the directory holding nvtx3/nvToolsExt.h (default: the CUDA toolkit's include directory, else /usr/include)])],
        [], [with_nvtx=guess])
    collar_have_nvtx=no
    collar_nvtx_summary="no"
    NVTX_CPPFLAGS=""
    AS_CASE([$with_nvtx],
        [no], [collar_nvtx_summary="no (disabled)"; collar_nvtx_dirs=""],
        [yes|guess], [collar_nvtx_dirs="${collar_cuda_dir:-/usr/local/cuda}/include /usr/local/cuda/include /usr/include"],
        [collar_nvtx_dirs=$with_nvtx])
    AS_IF([test -n "$collar_nvtx_dirs"], [
        AC_MSG_CHECKING([for nvtx3/nvToolsExt.h])
        for d in $collar_nvtx_dirs; do
            AS_IF([test "x$collar_have_nvtx" = xno && test -r "$d/nvtx3/nvToolsExt.h"], [
                collar_have_nvtx=yes
                AS_IF([test "x$d" != x/usr/include], [NVTX_CPPFLAGS="-I$d"])
                collar_nvtx_summary="yes ($d/nvtx3)"
            ])
        done
        AC_MSG_RESULT([$collar_have_nvtx])
        AS_IF([test "x$collar_have_nvtx" = xno && test "x$with_nvtx" != xguess],
              [AC_MSG_ERROR([--with-nvtx: no nvtx3/nvToolsExt.h in $collar_nvtx_dirs])])
        AS_IF([test "x$collar_have_nvtx" = xno],
              [collar_nvtx_summary="no (no nvtx3/nvToolsExt.h: ranges compiled out)"])
    ])
    AS_IF([test "x$collar_have_nvtx" = xyes], [
        AC_DEFINE([COLLAR_HAVE_NVTX], [1], [Define to 1 when the NVTX v3 header was found])
        AC_SEARCH_LIBS([dlopen], [dl])
    ])
    AM_CONDITIONAL([COLLAR_HAVE_NVTX], [test "x$collar_have_nvtx" = xyes])
    AC_SUBST([NVTX_CPPFLAGS])
])
