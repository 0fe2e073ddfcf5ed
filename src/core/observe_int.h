/*
 * collar - inside observation (src/core/observe.c): what the NVTX ranges
 * (nvtx.c) and the trace's ring buffer (trace.c) offer the dispatcher.
 */
#ifndef COLLAR_OBSERVE_INT_H
#define COLLAR_OBSERVE_INT_H

#include "core.h"

/* ---- nvtx.c */
/* The collar domain at `level` (collar_nvtx_level_t): the bits of
 * collar_observe it sets, 0 when no NVTX tool is attached (or NVTX was not
 * built in): then no NVTX call is ever made again. */
int collar_nvtx_init(int level, int rank);
uint64_t collar_nvtx_coll_start(collar_coll_t coll, collar_alg_t alg,
                                size_t bytes);
uint64_t collar_nvtx_phase_start(collar_phase_t phase, size_t bytes);
void collar_nvtx_end(uint64_t range);

/* ---- trace.c */
/* One event of the timeline. */
typedef struct {
    uint64_t start, end;      /* ns, CLOCK_MONOTONIC */
    uint64_t bytes;
    uint32_t op;              /* the operation's number (collar_obs_t.id) */
    int32_t  index;           /* the step's in its schedule; -1: the op */
    uint16_t track;           /* collar_track_t (+ stream) */
    uint8_t  phase;           /* collar_phase_t; COLLAR_PHASE_COUNT: the op */
    uint8_t  coll, alg;
} collar_trace_event_t;

/* COLLAR_TRACE set: the ring buffer (COLLAR_TRACE_EVENTS events); `sync`
 * the aligned moment.  Nonzero when recording. */
int collar_trace_init(int rank, uint64_t sync);
void collar_trace_record(const collar_trace_event_t *ev);
/* Write the file, free the buffer. */
void collar_trace_finalize(void);

#endif /* COLLAR_OBSERVE_INT_H */
