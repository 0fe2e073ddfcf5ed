# COLLAR_CHECK_CUDA: optional CUDA toolkit.
#   --with-cuda        require CUDA in the default place (/usr/local/cuda)
#   --with-cuda=DIR    require CUDA in DIR
#   --without-cuda     do not use CUDA
#   (default)          use /usr/local/cuda when it is there
# Needs cuda_runtime.h, the static runtime (libcudart_static.a) and nvcc.
AC_DEFUN([COLLAR_CHECK_CUDA], [
    AC_ARG_WITH([cuda],
        [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
            [build the CUDA device backend (default: use /usr/local/cuda if present)])],
        [], [with_cuda=guess])
    collar_have_cuda=no
    collar_cuda_summary="no"
    AS_CASE([$with_cuda],
        [no], [collar_cuda_summary="no (disabled)"],
        [yes|guess], [collar_cuda_dir=/usr/local/cuda],
        [collar_cuda_dir=$with_cuda])
    AS_IF([test "x$with_cuda" != xno], [
        AC_MSG_CHECKING([for CUDA in $collar_cuda_dir])
        collar_cuda_missing=""
        AS_IF([test -r "$collar_cuda_dir/include/cuda_runtime.h"], [],
              [collar_cuda_missing="$collar_cuda_missing include/cuda_runtime.h"])
        collar_cuda_libdir=""
        for d in "$collar_cuda_dir/lib64" "$collar_cuda_dir/lib" "$collar_cuda_dir/targets/x86_64-linux/lib"; do
            AS_IF([test -z "$collar_cuda_libdir" && test -r "$d/libcudart_static.a"], [collar_cuda_libdir=$d])
        done
        AS_IF([test -n "$collar_cuda_libdir"], [],
              [collar_cuda_missing="$collar_cuda_missing lib64/libcudart_static.a"])
        AS_IF([test -x "$collar_cuda_dir/bin/nvcc"], [NVCC="$collar_cuda_dir/bin/nvcc"],
              [collar_cuda_missing="$collar_cuda_missing bin/nvcc"])
        AS_IF([test -z "$collar_cuda_missing"], [
            AC_MSG_RESULT([yes])
            collar_have_cuda=yes
            CUDA_CPPFLAGS="-I$collar_cuda_dir/include"
            CUDA_LDFLAGS="-L$collar_cuda_libdir"
            CUDA_LIBS="-lcudart_static -ldl -lrt -lstdc++"
            collar_cuda_version=`"$NVCC" --version 2>/dev/null | sed -n 's/.*release \([[0-9.]]*\).*/\1/p'`
            collar_cuda_summary="yes ($collar_cuda_dir, CUDA $collar_cuda_version; backend not built yet)"
        ], [
            AC_MSG_RESULT([no (missing:$collar_cuda_missing)])
            AS_IF([test "x$with_cuda" != xguess],
                  [AC_MSG_ERROR([--with-cuda was given but CUDA is incomplete in $collar_cuda_dir (missing:$collar_cuda_missing)])])
            collar_cuda_summary="no (not found in $collar_cuda_dir)"
        ])
    ])
    AS_IF([test "x$collar_have_cuda" = xyes],
          [AC_DEFINE([COLLAR_HAVE_CUDA], [1], [Define to 1 when the CUDA toolkit was found])])
    AM_CONDITIONAL([COLLAR_HAVE_CUDA], [test "x$collar_have_cuda" = xyes])
    AC_SUBST([NVCC])
    AC_SUBST([CUDA_CPPFLAGS])
    AC_SUBST([CUDA_LDFLAGS])
    AC_SUBST([CUDA_LIBS])
])
