# COLLAR_CHECK_LIBUNWIND: optional libunwind, for call sites in statistics.
#   --with-libunwind  require it;  --without-libunwind  do not use it;
#   (default)         use it when libunwind.h and -lunwind are found.
AC_DEFUN([COLLAR_CHECK_LIBUNWIND], [
    AC_ARG_WITH([libunwind],
        [AS_HELP_STRING([--with-libunwind],
            [use libunwind for call sites in statistics (default: if found)])],
        [], [with_libunwind=guess])
    collar_have_unwind=no
    collar_unwind_summary="no (disabled)"
    AS_IF([test "x$with_libunwind" != xno], [
        collar_save_LIBS=$LIBS
        AC_CHECK_HEADER([libunwind.h],
            [AC_CHECK_LIB([unwind], [unw_backtrace],
                [collar_have_unwind=yes])])
        LIBS=$collar_save_LIBS
        AS_IF([test "x$collar_have_unwind" = xyes],
              [UNWIND_LIBS="-lunwind"; collar_unwind_summary="yes"],
              [AS_IF([test "x$with_libunwind" = xyes],
                     [AC_MSG_ERROR([--with-libunwind was given but libunwind was not found (Debian: apt-get install libunwind-dev)])])
               collar_unwind_summary="no (not found)"])
    ])
    AS_IF([test "x$collar_have_unwind" = xyes],
          [AC_DEFINE([COLLAR_HAVE_LIBUNWIND], [1], [Define to 1 when libunwind is used])])
    AM_CONDITIONAL([COLLAR_HAVE_LIBUNWIND], [test "x$collar_have_unwind" = xyes])
    AC_SUBST([UNWIND_LIBS])
])
