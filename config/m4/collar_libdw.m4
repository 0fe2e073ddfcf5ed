# COLLAR_CHECK_LIBDW: optional libdw (elfutils), to name call sites in
# statistics as "function (file:line)" from the objects' DWARF, separate
# debug files included.
#   --with-libdw  require it;  --without-libdw  do not use it;
#   (default)     use it when elfutils/libdwfl.h and -ldw are found.
# Without it, call sites are named by function only (libunwind), or by
# dladdr's dynamic symbols.
AC_DEFUN([COLLAR_CHECK_LIBDW], [
    AC_ARG_WITH([libdw],
        [AS_HELP_STRING([--with-libdw],
            [use libdw (elfutils) to name call sites in statistics (default: if found)])],
        [], [with_libdw=guess])
    collar_have_libdw=no
    collar_libdw_summary="no (disabled)"
    AS_IF([test "x$with_libdw" != xno], [
        collar_save_LIBS=$LIBS
        AC_CHECK_HEADER([elfutils/libdwfl.h],
            [AC_CHECK_LIB([dw], [dwfl_module_getsrc],
                [collar_have_libdw=yes])])
        LIBS=$collar_save_LIBS
        AS_IF([test "x$collar_have_libdw" = xyes],
              [DW_LIBS="-ldw"; collar_libdw_summary="yes"],
              [AS_IF([test "x$with_libdw" = xyes],
                     [AC_MSG_ERROR([--with-libdw was given but libdw was not found (Debian: apt-get install libdw-dev)])])
               collar_libdw_summary="no (not found; call sites named by function only)"])
    ])
    AS_IF([test "x$collar_have_libdw" = xyes],
          [AC_DEFINE([COLLAR_HAVE_LIBDW], [1], [Define to 1 when libdw names call sites])])
    AC_SUBST([DW_LIBS])
])
