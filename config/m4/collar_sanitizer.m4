# COLLAR_CHECK_SANITIZERS: --enable-asan / --enable-tsan.
#
#   --enable-asan  AddressSanitizer + UndefinedBehaviorSanitizer
#   --enable-tsan  ThreadSanitizer
#
# The flags go into CFLAGS and LDFLAGS, so that everything built (the
# library, the tools, every test program) is instrumented; libtool passes
# -fsanitize=* through to the link of libcollar.so.  The two cannot be
# combined (the compilers refuse -fsanitize=address,thread): asking for both
# is an error.
#
# Substitutes:
#   COLLAR_SANITIZER          asan, tsan or none (tests/Makefile.am exports it
#                             to tests/run-test.sh)
#   COLLAR_SANITIZER_RUNTIME  the sanitizer's shared runtime ($CC
#                             -print-file-name=libasan.so / libtsan.so): an
#                             instrumented libcollar.so in LD_PRELOAD needs it
#                             loaded first, ahead of itself.
# Automake conditional COLLAR_ASAN (tests/Makefile.am: sanitizer options).
# Sets collar_sanitizer_summary for the configure summary.
AC_DEFUN([COLLAR_CHECK_SANITIZERS], [
    AC_ARG_ENABLE([asan],
        [AS_HELP_STRING([--enable-asan],
            [build with AddressSanitizer and UndefinedBehaviorSanitizer (-fsanitize=address,undefined)])],
        [], [enable_asan=no])
    AC_ARG_ENABLE([tsan],
        [AS_HELP_STRING([--enable-tsan],
            [build with ThreadSanitizer (-fsanitize=thread); not with --enable-asan])],
        [], [enable_tsan=no])

    COLLAR_SANITIZER=none
    COLLAR_SANITIZER_RUNTIME=
    collar_sanitizer_summary=none
    collar_san_flags=
    collar_san_lib=
    AS_IF([test "x$enable_asan" = xyes && test "x$enable_tsan" = xyes],
          [AC_MSG_ERROR([--enable-asan and --enable-tsan cannot be combined: configure one build directory for each])])
    AS_IF([test "x$enable_asan" = xyes],
          [COLLAR_SANITIZER=asan
           collar_san_flags="-fsanitize=address,undefined -fno-omit-frame-pointer -g"
           collar_san_lib=libasan.so],
          [test "x$enable_tsan" = xyes],
          [COLLAR_SANITIZER=tsan
           collar_san_flags="-fsanitize=thread -fno-omit-frame-pointer -g"
           collar_san_lib=libtsan.so])

    AS_IF([test "x$COLLAR_SANITIZER" != xnone], [
        collar_save_CFLAGS=$CFLAGS
        collar_save_LDFLAGS=$LDFLAGS
        CFLAGS="$CFLAGS $collar_san_flags"
        LDFLAGS="$LDFLAGS $collar_san_flags"
        AC_MSG_CHECKING([whether $CC builds with $collar_san_flags])
        AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <stdlib.h>]],
                                        [[char *p = malloc(8); free(p); return 0;]])],
            [AC_MSG_RESULT([yes])],
            [AC_MSG_RESULT([no])
             CFLAGS=$collar_save_CFLAGS
             LDFLAGS=$collar_save_LDFLAGS
             AC_MSG_ERROR([$CC cannot build with $collar_san_flags (Debian: the sanitizer runtimes come with gcc, package libgcc-12-dev)])])
        AC_MSG_CHECKING([for the $COLLAR_SANITIZER shared runtime])
        COLLAR_SANITIZER_RUNTIME=`$CC -print-file-name=$collar_san_lib 2>/dev/null`
        AS_CASE([$COLLAR_SANITIZER_RUNTIME],
            [/*], [AS_IF([test -r "$COLLAR_SANITIZER_RUNTIME"], [],
                         [COLLAR_SANITIZER_RUNTIME=])],
            [COLLAR_SANITIZER_RUNTIME=])
        AS_IF([test -n "$COLLAR_SANITIZER_RUNTIME"],
              [AC_MSG_RESULT([$COLLAR_SANITIZER_RUNTIME])],
              [AC_MSG_RESULT([not found])
               AC_MSG_ERROR([$CC -print-file-name=$collar_san_lib gives no readable file: the MPI tests preload it ahead of libcollar.so])])
        collar_sanitizer_summary="$COLLAR_SANITIZER ($collar_san_flags)"
    ])
    AM_CONDITIONAL([COLLAR_ASAN], [test "x$COLLAR_SANITIZER" = xasan])
    AC_SUBST([COLLAR_SANITIZER])
    AC_SUBST([COLLAR_SANITIZER_RUNTIME])
])
