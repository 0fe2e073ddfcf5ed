/*
 * collar - the timeline of COLLAR_TRACE: each collective collar runs and
 * each of its steps (copies per stream, MPI calls, reductions, signals,
 * waits), with start and end times, bytes and algorithm, kept in a ring
 * buffer of the last COLLAR_TRACE_EVENTS events and written at MPI_Finalize
 * as Chrome-trace JSON (Perfetto, chrome://tracing), one file per rank;
 * collar-trace-merge joins the ranks' files into one timeline.
 *
 * Times are CLOCK_MONOTONIC: a collective's from its start to the progress
 * pass that saw it finished; an MPI step's from its issue to the test that
 * saw it complete; a device step's when it actually ran on its stream
 * where the device knows (the sim device's workers record it), else issue
 * to observed completion.  The file's times count from the moment every
 * rank left the collective of MPI_Init (collar_observe_init), so that the
 * ranks' timelines line up within that collective's skew.
 *
 * Recording takes a slot with one atomic increment; the buffer is only
 * read at MPI_Finalize, with nothing outstanding.
 */
#include "config.h"
#include "observe_int.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static collar_trace_event_t *ring;
static uint64_t              ring_cap;
static atomic_ullong         ring_next;   /* events recorded so far */
static int                   trace_rank;
static uint64_t              trace_sync;

int collar_trace_init(int rank, uint64_t sync)
{
    ring_cap = (uint64_t)collar_cfg.trace_events;
    ring = calloc(ring_cap, sizeof(*ring));
    if (ring == NULL) {
        collar_warn(INIT, "COLLAR_TRACE: no memory for %llu events; no trace",
                    (unsigned long long)ring_cap);
        return 0;
    }
    atomic_store(&ring_next, 0);
    trace_rank = rank;
    trace_sync = sync;
    return 1;
}

void collar_trace_record(const collar_trace_event_t *ev)
{
    const uint64_t n = atomic_fetch_add_explicit(&ring_next, 1, memory_order_relaxed);
    ring[n % ring_cap] = *ev;
}

static int by_start(const void *a, const void *b)
{
    const collar_trace_event_t *x = a, *y = b;
    if (x->start != y->start) {
        return x->start < y->start ? -1 : 1;
    }
    return x->end > y->end ? -1 : x->end < y->end;   /* outer first */
}

/* Rows of the timeline: per track, lanes of events that do not overlap
 * (Chrome-trace slices of one thread must nest). */
#define LANES 16
#define TRACKS (COLLAR_TRACK_STREAM + 16)

static const char *track_name(int track, char *buf, size_t len)
{
    switch (track) {
    case COLLAR_TRACK_COLL: return "collectives";
    case COLLAR_TRACK_MPI:  return "MPI";
    case COLLAR_TRACK_HOST: return "host";
    default:
        snprintf(buf, len, "stream %d", track - COLLAR_TRACK_STREAM);
        return buf;
    }
}

/* Microseconds from the aligned moment (events before it: negative). */
static double trace_us(uint64_t t)
{
    return ((double)t - (double)trace_sync) / 1000.0;
}

static void write_events(FILE *f, collar_trace_event_t *evs, uint64_t n)
{
    static uint64_t lane_end[TRACKS][LANES];
    static int used[TRACKS][LANES];
    memset(lane_end, 0, sizeof(lane_end));
    memset(used, 0, sizeof(used));
    qsort(evs, n, sizeof(*evs), by_start);
    for (uint64_t i = 0; i < n; i++) {
        const collar_trace_event_t *e = &evs[i];
        const int track = e->track < TRACKS ? e->track : TRACKS - 1;
        int lane = 0;
        while (lane < LANES - 1 && used[track][lane] && lane_end[track][lane] > e->start) {
            lane++;
        }
        used[track][lane] = 1;
        if (e->end > lane_end[track][lane]) {
            lane_end[track][lane] = e->end;
        }
        /* A collective is named as its NVTX range: "allreduce chunked". */
        char name[64];
        if (e->phase < COLLAR_PHASE_COUNT) {
            snprintf(name, sizeof(name), "%s", collar_phase_name((collar_phase_t)e->phase));
        } else {
            snprintf(name, sizeof(name), "%s %s", collar_coll_name((collar_coll_t)e->coll),
                     collar_alg_name((collar_alg_t)e->alg));
        }
        fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\","
                "\"cat\":\"%s\",\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"op\":%u,"
                "\"coll\":\"%s\",\"alg\":\"%s\",\"bytes\":%llu",
                trace_rank, track * LANES + lane, name,
                e->phase < COLLAR_PHASE_COUNT ? "step" : "collective",
                trace_us(e->start), (double)(e->end - e->start) / 1000.0,
                e->op, collar_coll_name((collar_coll_t)e->coll),
                collar_alg_name((collar_alg_t)e->alg), (unsigned long long)e->bytes);
        if (e->index >= 0) {
            fprintf(f, ",\"step\":%d", e->index);
        }
        if (track >= COLLAR_TRACK_STREAM) {
            fprintf(f, ",\"stream\":%d", track - COLLAR_TRACK_STREAM);
        }
        fputs("}}", f);
    }
    for (int t = 0; t < TRACKS; t++) {
        for (int l = 0; l < LANES; l++) {
            if (!used[t][l]) {
                continue;
            }
            char buf[32];
            const char *tn = track_name(t, buf, sizeof(buf));
            if (l == 0) {
                fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
                        "\"thread_name\",\"args\":{\"name\":\"%s\"}}",
                        trace_rank, t * LANES, tn);
            } else {
                fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
                        "\"thread_name\",\"args\":{\"name\":\"%s (%d)\"}}",
                        trace_rank, t * LANES + l, tn, l + 1);
            }
            fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":"
                    "\"thread_sort_index\",\"args\":{\"sort_index\":%d}}",
                    trace_rank, t * LANES + l, t * LANES + l);
        }
    }
}

/* A host name as a JSON string needs no escapes: other bytes become '?'. */
static void safe_host(char *host, size_t len)
{
    if (gethostname(host, len) != 0) {
        snprintf(host, len, "unknown");
    }
    host[len - 1] = '\0';
    for (char *p = host; *p != '\0'; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_')) {
            *p = '?';
        }
    }
}

void collar_trace_finalize(void)
{
    if (ring == NULL) {
        return;
    }
    const uint64_t total = atomic_load(&ring_next);
    const uint64_t n = total < ring_cap ? total : ring_cap;
    char path[4096];
    collar_expand_pattern(collar_cfg.trace, trace_rank, path, sizeof(path));
    FILE *f = collar_open_output(path, 0, "COLLAR_TRACE", "no trace");
    if (f == NULL) {
        free(ring);
        ring = NULL;
        return;
    }
    /* The oldest kept event first (not needed for sorting, but it keeps
     * the buffer's order when the ring wrapped). */
    collar_trace_event_t *evs = ring;
    if (total > ring_cap) {
        evs = malloc(n * sizeof(*evs));
        if (evs != NULL) {
            const uint64_t first = total % ring_cap;
            memcpy(evs, ring + first, (ring_cap - first) * sizeof(*evs));
            memcpy(evs + (ring_cap - first), ring, first * sizeof(*evs));
        } else {
            evs = ring;
        }
    }
    char host[256];
    safe_host(host, sizeof(host));
    int size = 1;
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"collar\":\"%s\","
            "\"rank\":%d,\"ranks\":%d,\"host\":\"%s\",\"pid\":%ld,"
            "\"clock\":\"CLOCK_MONOTONIC\",\"sync_ns\":%llu,"
            "\"events\":%llu,\"recorded\":%llu,\"capacity\":%llu,"
            "\"wrapped\":%s,\"dropped\":%llu},\n\"traceEvents\":[\n"
            "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":"
            "{\"name\":\"rank %d (%s, pid %ld)\"}},\n"
            "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_sort_index\",\"args\":"
            "{\"sort_index\":%d}}",
            PACKAGE_VERSION, trace_rank, size, host, (long)getpid(),
            (unsigned long long)trace_sync, (unsigned long long)n,
            (unsigned long long)total, (unsigned long long)ring_cap,
            total > ring_cap ? "true" : "false",
            (unsigned long long)(total - n), trace_rank, trace_rank, host,
            (long)getpid(), trace_rank, trace_rank);
    write_events(f, evs, n);
    fputs("\n]}\n", f);
    if (fclose(f) != 0) {
        collar_warn(INIT, "COLLAR_TRACE: error writing %s", path);
    } else if (trace_rank == 0) {
        collar_info(INIT, "COLLAR_TRACE: %llu events written to %s%s",
                    (unsigned long long)n, path,
                    total > ring_cap ? " (the ring buffer wrapped: the oldest "
                                       "were dropped)" : "");
    }
    if (evs != ring) {
        free(evs);
    }
    free(ring);
    ring = NULL;
}
