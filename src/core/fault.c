/*
 * collar - injected failures, for tests (COLLAR_SIM_FAIL).
 *
 * COLLAR_SIM_FAIL="kind:N,kind:M,...": the N-th event of each kind named
 * in this process fails, once.  The kinds (collar_fault_t) are the places
 * where a local failure could make one rank issue other collectives than
 * its peers, and the sim device's own (an allocation, a copy, an IPC
 * mapping); each test sets the variable on one rank to check that the
 * failure is agreed on (docs/reliability.md, "Failure on one rank").
 *
 * Parsed once at MPI_Init (collar_fault_init, from the configuration);
 * a malformed value is reported once and injects nothing.  Counting costs
 * one relaxed load on a path whose kind is not armed.
 */
#include "config.h"
#include "core.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const char *const fault_names[COLLAR_FAULT_COUNT] = {
    [COLLAR_FAULT_ALLOC] = "alloc",
    [COLLAR_FAULT_COPY] = "copy",
    [COLLAR_FAULT_IPCOPEN] = "ipcopen",
    [COLLAR_FAULT_IPCKILL] = "ipckill",
    [COLLAR_FAULT_EXPORT] = "export",
    [COLLAR_FAULT_THREAD] = "thread",
    [COLLAR_FAULT_NODES] = "nodes",
    [COLLAR_FAULT_SHAPE] = "shape",
    [COLLAR_FAULT_AGREE] = "agree",
    [COLLAR_FAULT_SPLIT] = "split",
    [COLLAR_FAULT_ZEROCOPY] = "zcalloc",
    [COLLAR_FAULT_QUERY] = "query",
    [COLLAR_FAULT_HEAP] = "heap",
    [COLLAR_FAULT_STORE] = "store",
    [COLLAR_FAULT_SCHED] = "sched",
    [COLLAR_FAULT_GREQ] = "greq",
};

/* The event that fails, by kind (0: none), and the events so far. */
static uint64_t         fault_at[COLLAR_FAULT_COUNT];
static _Atomic uint64_t fault_seen[COLLAR_FAULT_COUNT];
static int              fault_any;

const char *collar_fault_name(collar_fault_t kind)
{
    return kind >= 0 && kind < COLLAR_FAULT_COUNT ? fault_names[kind] : "?";
}

/* One "kind:N" item into at[]; 0 when malformed, unknown or repeated. */
static int fault_item(const char *p, size_t len, uint64_t *at)
{
    const char *colon = memchr(p, ':', len);
    if (colon == NULL) {
        return 0;
    }
    const size_t klen = (size_t)(colon - p);
    int kind = -1;
    for (int k = 0; k < COLLAR_FAULT_COUNT; k++) {
        if (strlen(fault_names[k]) == klen && strncmp(p, fault_names[k], klen) == 0) {
            kind = k;
        }
    }
    if (kind < 0 || at[kind] != 0 || klen + 1 >= len) {
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = klen + 1; i < len; i++) {
        if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - 9) / 10) {
            return 0;
        }
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v == 0) {
        return 0;
    }
    at[kind] = v;
    return 1;
}

void collar_fault_init(const char *spec)
{
    uint64_t at[COLLAR_FAULT_COUNT] = { 0 };
    for (int k = 0; k < COLLAR_FAULT_COUNT; k++) {
        fault_at[k] = 0;
        atomic_store(&fault_seen[k], 0);
    }
    fault_any = 0;
    if (spec == NULL || spec[0] == '\0') {
        return;
    }
    for (const char *p = spec;;) {
        const size_t n = strcspn(p, ",");
        if (!fault_item(p, n, at)) {
            char kinds[200] = "";
            for (int k = 0; k < COLLAR_FAULT_COUNT; k++) {
                strncat(kinds, fault_names[k], sizeof(kinds) - strlen(kinds) - 1);
                strncat(kinds, k + 1 < COLLAR_FAULT_COUNT ? ", " : "",
                        sizeof(kinds) - strlen(kinds) - 1);
            }
            collar_warn_lead(ENV, "COLLAR_SIM_FAIL='%.64s' is invalid at '%.*s': "
                             "expected KIND:N items, comma-separated, each kind "
                             "at most once, N from 1 (e.g. alloc:3,copy:10), "
                             "KIND one of %s; no failure is injected",
                             spec, (int)(n < 32 ? n : 32), p, kinds);
            return;
        }
        if (p[n] == '\0') {
            break;
        }
        p += n + 1;
    }
    for (int k = 0; k < COLLAR_FAULT_COUNT; k++) {
        fault_at[k] = at[k];
        if (at[k] != 0) {
            fault_any = 1;
            collar_debug(ENV, "COLLAR_SIM_FAIL: event %llu of %s fails",
                         (unsigned long long)at[k], fault_names[k]);
        }
    }
}

int collar_fault(collar_fault_t kind)
{
    if (!fault_any || fault_at[kind] == 0) {
        return 0;
    }
    if (atomic_fetch_add(&fault_seen[kind], 1) + 1 != fault_at[kind]) {
        return 0;
    }
    collar_info(ENV, "COLLAR_SIM_FAIL: %s %llu fails here (injected)",
                fault_names[kind], (unsigned long long)fault_at[kind]);
    return 1;
}

uint64_t collar_fault_at(collar_fault_t kind)
{
    return fault_at[kind];
}
