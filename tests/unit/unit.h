/* A few lines of test bookkeeping shared by the unit tests. */
#ifndef COLLAR_UNIT_H
#define COLLAR_UNIT_H

#include <stdio.h>

static int unit_passed, unit_failed;

#define UNIT_CHECK(cond, ...)                                                 \
    do {                                                                      \
        if (cond) {                                                           \
            unit_passed++;                                                    \
        } else {                                                              \
            unit_failed++;                                                    \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
            printf(__VA_ARGS__);                                              \
            printf("\n");                                                     \
        }                                                                     \
    } while (0)

static inline int unit_finish(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, unit_passed, unit_failed);
    return unit_failed == 0 ? 0 : 1;
}

#endif
