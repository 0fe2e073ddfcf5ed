# COLLAR_CHECK_CUDA: optional CUDA toolkit.
#   --with-cuda        require CUDA in the default place (/usr/local/cuda)
#   --with-cuda=DIR    require CUDA in DIR
#   --without-cuda     do not use CUDA
#   (default)          use /usr/local/cuda when it is there
# Needs cuda_runtime.h, the static runtime (libcudart_static.a) and nvcc.
#
#   --with-cuda-arch="75 80 90"   GPU architectures of the reduction kernels:
#                      SASS for each (sm_NN), PTX for the last (compute_NN)
#                      so that newer GPUs can JIT it; each must be one that
#                      this nvcc builds (CUDA 13: 75 and newer).
#   NVCCFLAGS          extra nvcc flags (precious; default -O3)
# Substitutes NVCC_ARCH_FLAGS (the -gencode list) and NVCC_PTX_FLAGS (PTX of
# the first architecture, for .cu files without kernels); see config/cuda.am.
AC_DEFUN([COLLAR_CHECK_CUDA], [
    AC_ARG_WITH([cuda],
        [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
            [build the CUDA device backend (default: use /usr/local/cuda if present)])],
        [], [with_cuda=guess])
    AC_ARG_WITH([cuda-arch],
        [AS_HELP_STRING([--with-cuda-arch="NN NN ..."],
            [GPU architectures for the CUDA kernels: SASS for each, PTX for the last (default: "75 80 90")])],
        [], [with_cuda_arch="75 80 90"])
    AC_ARG_VAR([NVCCFLAGS], [flags for nvcc (default: -O3)])
    AS_IF([test "x${NVCCFLAGS+set}" != xset], [NVCCFLAGS="-O3"])
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
            COLLAR_CUDA_ARCH_FLAGS
            collar_cuda_summary="yes ($collar_cuda_dir, CUDA $collar_cuda_version, kernels for $collar_cuda_arch_list)"
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
    AC_SUBST([NVCC_ARCH_FLAGS])
    AC_SUBST([NVCC_PTX_FLAGS])
])

# COLLAR_CUDA_ARCH_FLAGS: $with_cuda_arch -> NVCC_ARCH_FLAGS, checked against
# the architectures $NVCC lists (nvcc --list-gpu-code) when it can list them.
AC_DEFUN([COLLAR_CUDA_ARCH_FLAGS], [
    AC_MSG_CHECKING([for the GPU architectures of the CUDA kernels])
    collar_cuda_arch_list=`echo "$with_cuda_arch" | tr ',' ' '`
    collar_cuda_known=`"$NVCC" --list-gpu-code 2>/dev/null | tr '
' ' '`
    NVCC_ARCH_FLAGS=""
    NVCC_PTX_FLAGS=""
    collar_cuda_last=""
    for collar_a in $collar_cuda_arch_list; do
        collar_a=`echo "$collar_a" | sed -e 's/^sm_//' -e 's/^compute_//'`
        AS_CASE([$collar_a],
            [[[1-9][0-9]]|[[1-9][0-9][0-9]]|[[1-9][0-9]][[af]]|[[1-9][0-9][0-9]][[af]]], [],
            [AC_MSG_ERROR([--with-cuda-arch: '$collar_a' is not an architecture number such as 80 or 90a])])
        AS_IF([test -n "$collar_cuda_known"], [
            collar_a_base=`echo "$collar_a" | sed 's/[[af]]$//'`
            AS_CASE([" $collar_cuda_known "], [*" sm_$collar_a_base "*], [],
                [AC_MSG_ERROR([--with-cuda-arch: $NVCC cannot build sm_$collar_a (it builds:$collar_cuda_known)])])
        ])
        NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode=arch=compute_$collar_a,code=sm_$collar_a"
        AS_IF([test -z "$NVCC_PTX_FLAGS"],
              [NVCC_PTX_FLAGS="-gencode=arch=compute_$collar_a,code=compute_$collar_a"])
        collar_cuda_last=$collar_a
    done
    AS_IF([test -z "$collar_cuda_last"],
          [AC_MSG_ERROR([--with-cuda-arch: no architecture given])])
    NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode=arch=compute_$collar_cuda_last,code=compute_$collar_cuda_last"
    AC_MSG_RESULT([$collar_cuda_arch_list (PTX: compute_$collar_cuda_last)])
])
