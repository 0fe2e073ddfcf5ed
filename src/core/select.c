/*
 * collar - algorithm selection.
 *
 * A pure function of what every rank agrees on (collective, memory kind,
 * communicator size, bytes, whether collar can reduce the op and type) and of
 * the configuration, so that all ranks make the same choice.
 *
 * Sources, strongest first:
 *   1. COLLAR_ALGORITHM forces one algorithm for every call;
 *   2. the built-in rules: host memory -> native, device memory -> staged.
 *
 * Message size ("bytes") is always one rank's contribution: count times the
 * size of the datatype (MPI_Type_size), gaps of derived types not counted.
 */
#include "config.h"
#include "core.h"

void collar_select(const collar_select_key_t *key, collar_plan_t *plan)
{
    plan->chunk = 0;
    if (collar_cfg.algorithm != COLLAR_ALG_AUTO) {
        plan->alg = collar_cfg.algorithm;
        plan->reason = "forced by COLLAR_ALGORITHM";
        return;
    }
    if (key->mem == COLLAR_MEM_HOST) {
        plan->alg = COLLAR_ALG_NATIVE;
        plan->reason = "built-in rule: host memory";
    } else {
        plan->alg = COLLAR_ALG_STAGED;
        plan->reason = "built-in rule: device memory";
    }
}
