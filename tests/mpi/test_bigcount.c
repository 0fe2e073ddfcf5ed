/*
 * More than 2^31 elements in one call: MPI_Allreduce_c of 2^31 + 5 uint8
 * values (MPI_SUM, wrapping), checked on every rank; and an MPI_Bcast_c of
 * the same count.  Needs the large-count bindings (exit 77 without) and
 * about 4 GiB a rank plus staging (exit 77 below --need-gib of MemAvailable).
 */
#include "config.h"
#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(HAVE_PMPI_ALLREDUCE_C)
static long mem_available_gib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long kb = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "MemAvailable: %ld kB", &kb) == 1) {
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kb < 0 ? -1 : kb >> 20;
}
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_bigcount");
#if !defined(HAVE_PMPI_ALLREDUCE_C)
    (void)argv;
    tu_skip("the MPI library has no large-count bindings");
#else
    long need = argc > 2 && strcmp(argv[1], "--need-gib") == 0 ? atol(argv[2]) : 0;
    long have = mem_available_gib();
    long have_min = have;
    PMPI_Allreduce(&have, &have_min, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    if (have_min >= 0 && have_min < need) {
        tu_skip("%ld GiB available, %ld GiB needed", have_min, need);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const MPI_Count n = ((MPI_Count)1 << 31) + 5;
    uint8_t *s = malloc((size_t)n), *r = malloc((size_t)n);
    if (s == NULL || r == NULL) {
        tu_fail("malloc", "2 x %lld bytes", (long long)n);
        return tu_finish();
    }
    for (MPI_Count i = 0; i < n; i++) {
        s[i] = (uint8_t)(i * 7 + (MPI_Count)rank * 13);
    }
    int rc = MPI_Allreduce_c(s, r, n, MPI_UINT8_T, MPI_SUM, MPI_COMM_WORLD);
    tu_check_rc(rc, "allreduce_c 2^31+5 uint8");
    MPI_Count bad = 0, first = -1;
    for (MPI_Count i = 0; i < n; i++) {
        unsigned want = 0;
        for (int q = 0; q < size; q++) {
            want += (uint8_t)(i * 7 + (MPI_Count)q * 13);
        }
        if (r[i] != (uint8_t)want) {
            if (first < 0) {
                first = i;
            }
            bad++;
        }
    }
    tu_check(bad == 0, "allreduce_c 2^31+5 uint8", "%lld wrong, first at %lld",
             (long long)bad, (long long)first);
    if (rank == 0) {
        printf("bigcount: allreduce_c of %lld uint8 checked\n", (long long)n);
    }
    /* The root's values everywhere. */
    if (rank != 0) {
        memset(s, 0, (size_t)n);
    }
    tu_check_rc(MPI_Bcast_c(s, n, MPI_UINT8_T, 0, MPI_COMM_WORLD), "bcast_c");
    bad = 0;
    for (MPI_Count i = 0; i < n; i++) {
        bad += s[i] != (uint8_t)(i * 7);
    }
    tu_check(bad == 0, "bcast_c 2^31+5 uint8", "%lld wrong", (long long)bad);
    free(s);
    free(r);
    int status = tu_finish();
    MPI_Finalize();
    return status;
#endif
}
