/*
 * The cost of one selection (collar_select) on the rules every call goes
 * through: the built-in rules, and behind an inline source and a tuning
 * file that do not match (the worst case: three sources scanned).
 * No MPI run.  Prints ns per lookup, best of 5 runs of 2 million lookups.
 */
#include "config.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double run(void)
{
    enum { N = 2000000 };
    struct timespec t0, t1;
    unsigned sink = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < N; i++) {
        collar_select_key_t key = { .coll = COLLAR_COLL_ALLREDUCE,
                                    .mem = COLLAR_MEM_DEVICE,
                                    .comm_size = 2 + (i & 3),
                                    .bytes = (size_t)(i & 0xfffff) << 6,
                                    .reducible = 1 };
        collar_plan_t plan;
        collar_select(&key, &plan);
        sink += (unsigned)plan.alg;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (sink == 12345) {
        printf(" ");
    }
    return ((double)(t1.tv_sec - t0.tv_sec) * 1e9
            + (double)(t1.tv_nsec - t0.tv_nsec)) / N;
}

static double best_of(int n)
{
    double best = 1e30;
    for (int i = 0; i < n; i++) {
        double t = run();
        best = t < best ? t : best;
    }
    return best;
}

int main(void)
{
    collar_config_load();
    free(collar_cfg.tuning_dir);
    collar_cfg.tuning_dir = strdup("/nonexistent");
    if (collar_select_init() != COLLAR_OK) {
        return 1;
    }
    printf("selection, built-in rules only        : %.1f ns per call\n", best_of(5));
    free(collar_cfg.allreduce_rules);
    collar_cfg.allreduce_rules = strdup(
        "allreduce host 1-inf 0-inf native; allreduce device 64-128 0-inf staged;"
        "allreduce device 1-1 0-inf staged");
    if (collar_select_init() != COLLAR_OK) {
        return 1;
    }
    printf("selection, 2 sources before a match   : %.1f ns per call\n", best_of(5));
    collar_select_finalize();
    return 0;
}
