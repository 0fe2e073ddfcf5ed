/* Helpers shared by the MPI benchmarks (plain MPI programs: no collar code). */
#ifndef COLLAR_BENCH_UTIL_H
#define COLLAR_BENCH_UTIL_H

#include <stdlib.h>

/* "4096", "64K", "16M", "1G" -> bytes. */
static inline size_t bench_parse_size(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': case 'k': v <<= 10; break;
    case 'M': case 'm': v <<= 20; break;
    case 'G': case 'g': v <<= 30; break;
    default: break;
    }
    return v;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif /* COLLAR_BENCH_UTIL_H */
