# COLLAR_CHECK_PTHREAD: POSIX threads (the sim device's workers, locks).
AC_DEFUN([COLLAR_CHECK_PTHREAD], [
    collar_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -pthread"
    AC_MSG_CHECKING([whether $CC accepts -pthread])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <pthread.h>]],
                                    [[pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
                                      return pthread_mutex_lock(&m);]])],
        [AC_MSG_RESULT([yes]); PTHREAD_CFLAGS=-pthread],
        [AC_MSG_RESULT([no]); AC_MSG_ERROR([POSIX threads are required])])
    CFLAGS=$collar_save_CFLAGS
    AC_SUBST([PTHREAD_CFLAGS])
])
