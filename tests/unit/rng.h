/* splitmix64 for the unit tests: deterministic, reseeded per case so that
 * failures reproduce. */
#ifndef COLLAR_UNIT_RNG_H
#define COLLAR_UNIT_RNG_H

#include <stdint.h>

static uint64_t rng_state;

static void rng_seed(uint64_t s)
{
    rng_state = s * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
}

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif
