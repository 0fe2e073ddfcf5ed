/*
 * collar - observation: the collectives and steps collar runs, reported by
 * the schedule engine and the conductors, handed to whoever listens: NVTX
 * ranges for Nsight Systems (COLLAR_NVTX, nvtx.c) and the timeline of
 * COLLAR_TRACE (trace.c).  collar_observe says who listens; with nobody,
 * callers test it and call nothing (one load per step).
 */
#include "config.h"
#include "observe_int.h"

#include <stdatomic.h>
#include <time.h>

int collar_observe;

static atomic_uint next_op;

static const char *const phase_names[COLLAR_PHASE_COUNT] = {
    [COLLAR_PHASE_COPY_IN]       = "copy-in",
    [COLLAR_PHASE_COPY_OUT]      = "copy-out",
    [COLLAR_PHASE_COPY]          = "copy",
    [COLLAR_PHASE_REDUCE]        = "reduction",
    [COLLAR_PHASE_HOST_REDUCE]   = "host reduction",
    [COLLAR_PHASE_MPI_ALLREDUCE] = "MPI allreduce",
    [COLLAR_PHASE_MPI_SEND]      = "MPI send",
    [COLLAR_PHASE_MPI_RECV]      = "MPI receive",
    [COLLAR_PHASE_MPI_COLL]      = "MPI collective",
    [COLLAR_PHASE_SIGNAL]        = "IPC signal",
    [COLLAR_PHASE_AGREE]         = "status agreement",
    [COLLAR_PHASE_ORDER]         = "wait for caller",
    [COLLAR_PHASE_CALL]          = "set-up",
};

const char *collar_phase_name(collar_phase_t phase)
{
    return (int)phase >= 0 && phase < COLLAR_PHASE_COUNT ? phase_names[phase]
                                                         : "step";
}

uint64_t collar_obs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void collar_observe_init(int rank)
{
    const uint64_t sync = collar_obs_now();
    int bits = 0;
    if (collar_cfg.nvtx != COLLAR_NVTX_OFF) {
        bits |= collar_nvtx_init(collar_cfg.nvtx, rank);
    }
    if (collar_cfg.trace != NULL && collar_cfg.trace[0] != '\0'
        && collar_trace_init(rank, sync)) {
        bits |= COLLAR_OBS_TRACE;
    }
    collar_observe = bits;
}

void collar_observe_finalize(void)
{
    const int bits = collar_observe;
    collar_observe = 0;
    if (bits & COLLAR_OBS_TRACE) {
        collar_trace_finalize();
    }
}

void collar_obs_coll_begin(collar_obs_t *o, collar_coll_t coll,
                           collar_alg_t alg, size_t bytes)
{
    o->id = atomic_fetch_add_explicit(&next_op, 1, memory_order_relaxed) + 1;
    o->coll = (uint16_t)coll;
    o->alg = (uint16_t)alg;
    o->range = collar_observe & COLLAR_OBS_NVTX
               ? collar_nvtx_coll_start(coll, alg, bytes) : 0;
    o->t0 = collar_obs_now();
}

void collar_obs_coll_end(collar_obs_t *o, collar_coll_t coll, collar_alg_t alg,
                         size_t bytes)
{
    const uint64_t end = collar_obs_now();
    if (collar_observe & COLLAR_OBS_NVTX) {
        collar_nvtx_end(o->range);
    }
    if (collar_observe & COLLAR_OBS_TRACE) {
        const collar_trace_event_t ev = {
            .start = o->t0, .end = end, .bytes = bytes, .op = o->id,
            .index = -1, .track = COLLAR_TRACK_COLL, .phase = COLLAR_PHASE_COUNT,
            .coll = (uint8_t)coll, .alg = (uint8_t)alg,
        };
        collar_trace_record(&ev);
    }
    o->t0 = 0;
    o->range = 0;
}

void collar_obs_phase_begin(collar_obs_t *o, collar_phase_t phase, size_t bytes)
{
    o->range = collar_observe & COLLAR_OBS_NVTX_STEPS
               ? collar_nvtx_phase_start(phase, bytes) : 0;
    o->t0 = collar_obs_now();
}

void collar_obs_phase_end(collar_obs_t *o, collar_phase_t phase, size_t bytes,
                          int track, const collar_obs_t *op, int index,
                          uint64_t start, uint64_t end)
{
    if (collar_observe & COLLAR_OBS_NVTX_STEPS) {
        collar_nvtx_end(o->range);
    }
    if (collar_observe & COLLAR_OBS_TRACE) {
        if (start == 0 || end < start) {
            start = o->t0;
            end = collar_obs_now();
        }
        const collar_trace_event_t ev = {
            .start = start, .end = end, .bytes = bytes, .op = op->id,
            .index = index, .track = (uint16_t)track, .phase = (uint8_t)phase,
            .coll = (uint8_t)op->coll, .alg = (uint8_t)op->alg,
        };
        collar_trace_record(&ev);
    }
    o->t0 = 0;
    o->range = 0;
}
