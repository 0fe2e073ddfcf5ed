/*
 * collar - configuration.
 *
 * ONE table holds every COLLAR_* variable: name, type, default, help text and
 * the field of collar_cfg it fills.  The same table feeds the parser, the
 * unknown-name check, collar-info and docs/variables.md.  Parsed once at
 * MPI_Init; a value the user set is logged at info level; a bad value is one
 * warning naming the variable and the expected form, and the default stays.
 */
#include "config.h"
#include "core.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

collar_config_t collar_cfg;

typedef enum {
    CFG_BOOL,
    CFG_LONG,
    CFG_SIZE,
    CFG_ENUM,
    CFG_STRING,
    CFG_SUBSYS,
    CFG_LIST      /* a bit per choice: all, none or a comma-separated list */
} cfg_type_t;

typedef struct {
    const char  *name;
    cfg_type_t   type;
    const char  *dflt;
    const char  *help;
    size_t       offset;      /* into collar_config_t */
    const char  *const *choices;  /* CFG_ENUM: NULL-terminated names */
    long         min, max;    /* CFG_LONG bounds */
} cfg_row_t;

static const char *const log_levels[] = {
    "none", "error", "warn", "info", "debug", "trace", NULL
};
static const char *const device_kinds[] = {
    "auto", "cuda", "sim", "none", NULL
};
/* Indexed by collar_alg_t. */
static const char *const alg_names[] = {
    "auto", "native", "staged", "chunked", "ring", "ipc", "hier", "nccl", NULL
};
static const char *const yes_no_auto[] = {
    "auto", "yes", "no", NULL
};
/* Indexed by collar_sync_t. */
static const char *const sync_modes[] = {
    "device", "stream", "none", NULL
};
/* Indexed by collar_ptr_cache_t. */
static const char *const ptr_cache_modes[] = {
    "0", "1", "trust", NULL
};
/* Indexed by collar_gdrcopy_mode_t. */
static const char *const gdrcopy_modes[] = {
    "auto", "1", "0", NULL
};
/* Indexed by collar_progress_mode_t. */
static const char *const progress_modes[] = {
    "auto", "thread", "wait", NULL
};
static const char *const stats_modes[] = {
    "0", "1", "callsites", NULL
};
static const char *const stats_formats[] = {
    "text", "json", NULL
};
/* Indexed by collar_nvtx_level_t. */
static const char *const nvtx_levels[] = {
    "off", "coll", "steps", NULL
};
static const char *const subsys_names[] = {
    "init", "env", "tuning", "coll", "mem", "stats", NULL
};
/* Indexed by collar_coll_t; COLLAR_COLLECTIVES lists those from bcast on. */
static const char *const coll_names[] = {
    "allreduce", "bcast", "allgather", "allgatherv", "alltoall", "alltoallv",
    "reduce_scatter", "reduce_scatter_block", "reduce", "gather", "gatherv",
    "scatter", "scatterv", NULL
};

const char *collar_coll_name(collar_coll_t coll)
{
    if ((int)coll < 0 || coll >= COLLAR_COLL_COUNT) {
        return "unknown";
    }
    return coll_names[coll];
}

const char *collar_alg_name(collar_alg_t alg)
{
    if ((int)alg < 0 || alg >= COLLAR_ALG_COUNT) {
        return "unknown";
    }
    return alg_names[alg];
}

int collar_alg_from_name(const char *name, size_t len)
{
    for (int a = COLLAR_ALG_AUTO + 1; a < COLLAR_ALG_COUNT; a++) {
        if (strlen(alg_names[a]) == len && strncmp(alg_names[a], name, len) == 0) {
            return a;
        }
    }
    return -1;
}

#define FIELD(f) offsetof(collar_config_t, f)

static const cfg_row_t table[] = {
    { "COLLAR_DISABLE", CFG_BOOL, "0",
      "Pass every MPI call straight to the MPI library (collar does nothing).",
      FIELD(disable), NULL, 0, 0 },
    { "COLLAR_LOG", CFG_ENUM, "warn",
      "Log level: none, error, warn, info (says which algorithm runs), debug, trace.",
      FIELD(log_level), log_levels, 0, 0 },
    { "COLLAR_LOG_SUBSYS", CFG_SUBSYS, "all",
      "Subsystems to log, comma-separated: init, env, tuning, coll, mem, stats, or all.",
      FIELD(log_subsys), subsys_names, 0, 0 },
    { "COLLAR_LOG_FILE", CFG_STRING, "stderr",
      "Log destination; %h, %p, %r expand to host, pid, rank.",
      FIELD(log_file), NULL, 0, 0 },
    { "COLLAR_DEVICE", CFG_ENUM, "auto",
      "Device backend: auto (cuda when it is built in and a GPU is usable, "
      "else none), cuda, sim (host memory posing as device memory, for "
      "testing), none.",
      FIELD(device), device_kinds, 0, 0 },
    { "COLLAR_SYNC", CFG_ENUM, "device",
      "How a call orders after the device work the caller queued before it: "
      "device (wait for the whole device: safe for work on any stream), "
      "stream (only the legacy default stream's work), none (the caller "
      "synchronised).",
      FIELD(sync), sync_modes, 0, 0 },
    { "COLLAR_PTR_CACHE", CFG_ENUM, "1",
      "Cache of device allocations in front of the driver's pointer query: 1 "
      "(on; a hit is checked against the allocation's buffer id), trust (on, "
      "no check: for programs that never free device memory mid-run), 0 (off).",
      FIELD(ptr_cache), ptr_cache_modes, 0, 0 },
    { "COLLAR_ALGORITHM", CFG_ENUM, "auto",
      "Force one allreduce algorithm for every call: auto (the rules decide), "
      "native, staged, chunked, ring, ipc, hier, nccl.",
      FIELD(algorithm), alg_names, 0, 0 },
    { "COLLAR_ALLREDUCE_RULES", CFG_STRING, "",
      "Allreduce rules inline, separated by ';', in the tuning-table format "
      "(docs/tuning.md); stronger than COLLAR_TUNING_FILE.",
      FIELD(allreduce_rules), NULL, 0, 0 },
    { "COLLAR_IPC_ZEROCOPY", CFG_BOOL, "1",
      "ipc reads the peers' buffers in place (their allocations mapped "
      "through IPC handles, cached) instead of copying every input into "
      "IPC memory first, where every rank's buffers can be exported; 0: "
      "always copy in (docs/ipc.md).",
      FIELD(ipc_zerocopy), NULL, 0, 0 },
    { "COLLAR_IPC_ZEROCOPY_MIN", CFG_SIZE, "256K",
      "ipc zero-copy from this message size up (the largest of the ranks'); "
      "below it the inputs are copied in, which costs less than exchanging "
      "and mapping the buffers (docs/ipc.md).",
      FIELD(ipc_zerocopy_min), NULL, 0, 0 },
    { "COLLAR_IPC_MAPS", CFG_LONG, "64",
      "ipc zero-copy: how many peers' buffer allocations a process keeps "
      "mapped; the least recently used one not in use is closed beyond it.",
      FIELD(ipc_maps), NULL, 1, 65536 },
    { "COLLAR_TUNING_FILE", CFG_STRING, "",
      "A tuning table (collar-tune writes them); stronger than the site default.",
      FIELD(tuning_file), NULL, 0, 0 },
    { "COLLAR_TUNING_DIR", CFG_STRING, "",
      "Directory of the site default table default.table (empty: the "
      "installed share/collar/tuning).",
      FIELD(tuning_dir), NULL, 0, 0 },
    { "COLLAR_NCCL_LIBRARY", CFG_STRING, "",
      "The NCCL library the nccl algorithm loads (empty: libnccl.so.2, "
      "found as the dynamic loader finds libraries).",
      FIELD(nccl_library), NULL, 0, 0 },
    { "COLLAR_GDRCOPY", CFG_ENUM, "auto",
      "Copy small device buffers (up to a staged rule's gdrcopy=, default "
      "8K) by the CPU through a GDRCopy mapping (their bytes from the first "
      "64 KiB boundary inside their allocation): auto (where libgdrapi.so.2 "
      "loads and its driver opens), 1 (the same, with a warning where it "
      "cannot), 0 (never).",
      FIELD(gdrcopy), gdrcopy_modes, 0, 0 },
    { "COLLAR_GDRCOPY_LIBRARY", CFG_STRING, "",
      "The GDRCopy library COLLAR_GDRCOPY loads (empty: libgdrapi.so.2, "
      "found as the dynamic loader finds libraries).",
      FIELD(gdrcopy_library), NULL, 0, 0 },
    { "COLLAR_CHUNK_SIZE", CFG_SIZE, "0",
      "Chunk size of chunked algorithms, overriding the rule's chunk= (0: the "
      "rule's, else 1M); from 1K (a smaller one is raised to 1K, said once) "
      "to 1G, as in tuning tables.",
      FIELD(chunk_size), NULL, 0, COLLAR_CHUNK_MAX },
    { "COLLAR_MPI_CUDA_AWARE", CFG_ENUM, "auto",
      "Whether the MPI library takes device pointers: auto (ask it), yes, no. "
      "native on device memory needs yes.",
      FIELD(mpi_cuda_aware), yes_no_auto, 0, 0 },
    { "COLLAR_STAGING_POOL", CFG_SIZE, "256M",
      "Most pinned host memory kept for reuse between calls (K, M, G suffixes).",
      FIELD(staging_pool), NULL, 0, 0 },
    { "COLLAR_COLLECTIVES", CFG_LIST, "all",
      "Collectives whose device buffers collar stages through host memory when "
      "the MPI library does not take device pointers (docs/collectives.md): "
      "all, none, or a comma-separated list of bcast, allgather, allgatherv, "
      "alltoall, alltoallv, reduce_scatter, reduce_scatter_block, reduce, "
      "gather, gatherv, scatter, scatterv; the others go straight to the MPI "
      "library.",
      FIELD(collectives), &coll_names[COLLAR_COLL_BCAST], 0, 0 },
    { "COLLAR_CHECK", CFG_BOOL, "0",
      "Verify on every call that all ranks agree (count, datatype size, op, "
      "memory kind, rules in force); a mismatch fails with a message naming "
      "what differs and where, instead of a hang.  Costs one small collective "
      "per call.  Set it alike on every rank.",
      FIELD(check), NULL, 0, 0 },
    { "COLLAR_STATS", CFG_ENUM, "0",
      "Statistics report at MPI_Finalize, from rank 0: 0 (off), 1 (per "
      "algorithm, memory kind and size), callsites (and per call site).",
      FIELD(stats), stats_modes, 0, 0 },
    { "COLLAR_STATS_FILE", CFG_STRING, "stderr",
      "Where the report goes; %h, %p, %r expand to host, pid, rank.",
      FIELD(stats_file), NULL, 0, 0 },
    { "COLLAR_STATS_FORMAT", CFG_ENUM, "text",
      "Report format: text (fixed section headings) or json (docs/stats.md).",
      FIELD(stats_format), stats_formats, 0, 0 },
    { "COLLAR_STATS_DEPTH", CFG_LONG, "1",
      "Call-site depth: how many of the application's frames name a call site.",
      FIELD(stats_depth), NULL, 1, COLLAR_STATS_MAX_DEPTH },
    { "COLLAR_NVTX", CFG_ENUM, "coll",
      "NVTX ranges in the domain collar, for Nsight Systems: off, coll (one "
      "range per collective collar runs: name, algorithm, bytes), steps "
      "(and one per step: copies, MPI calls, reductions, signals). Nothing "
      "is recorded unless a tool is attached (docs/stats.md).",
      FIELD(nvtx), nvtx_levels, 0, 0 },
    { "COLLAR_TRACE", CFG_STRING, "",
      "Write each rank's timeline of collectives and steps as Chrome-trace "
      "JSON (Perfetto, chrome://tracing) to this file at MPI_Finalize; %h, "
      "%p, %r expand to host, pid, rank; empty: off (docs/stats.md).",
      FIELD(trace), NULL, 0, 0 },
    { "COLLAR_TRACE_EVENTS", CFG_LONG, "65536",
      "Events COLLAR_TRACE keeps: the last this many (a ring buffer).",
      FIELD(trace_events), NULL, 16, 1L << 24 },
    { "COLLAR_PROGRESS", CFG_ENUM, "auto",
      "How collar's operations advance while the application is in other "
      "MPI calls, and so the form of a nonblocking device allreduce: auto (a "
      "progress thread where the program asked for MPI_THREAD_MULTIPLE; "
      "none below that, the thread level never raised), thread (a progress "
      "thread in every program: collar asks the MPI library for "
      "MPI_THREAD_MULTIPLE at MPI_Init where a device backend can be "
      "active, and every MPI call then pays for that level), wait (no "
      "thread). Where every rank of the communicator runs the thread, a "
      "nonblocking allreduce runs collar's algorithm (ipc, chunked, ...); "
      "elsewhere it is the MPI library's own nonblocking collective on host "
      "copies (copied in at the start, out at the completion call), which "
      "the library alone carries: no MPI call a rank waits in can stall it. "
      "The trade (make -C build/tests bench-forms, sim device, 12 GB/s "
      "link): without the thread the start takes the copy-in (64 MiB: about "
      "55 ms, 64 KiB: 0.1 ms) and little of the allreduce hides behind "
      "computation; with it the start takes microseconds and a 64 MiB one "
      "ends about 3 times sooner. Persistent allreduces are always the "
      "library's persistent collective, matched at their init.",
      FIELD(progress), progress_modes, 0, 0 },
    { "COLLAR_PROGRESS_INTERVAL", CFG_LONG, "20",
      "Microseconds the progress thread sleeps between passes over "
      "outstanding operations (0: it only yields the processor).",
      FIELD(progress_interval_us), NULL, 0, 1000000 },
    { "COLLAR_SIM_JITTER", CFG_LONG, "0",
      "sim device: random delay of up to this many microseconds before each "
      "copy or reduction, to expose missing waits.",
      FIELD(sim_jitter_us), NULL, 0, 1000000 },
    { "COLLAR_SIM_SEED", CFG_LONG, "1",
      "sim device: seed of the jitter's random numbers (mixed with the process id).",
      FIELD(sim_seed), NULL, 0, LONG_MAX },
    { "COLLAR_SIM_BANDWIDTH", CFG_SIZE, "0",
      "sim device: copy bandwidth in bytes per second (K, M, G suffixes; "
      "e.g. 10G to model a PCIe link); 0: as fast as memcpy.",
      FIELD(sim_bandwidth), NULL, 0, 0 },
    { "COLLAR_SIM_LATENCY", CFG_LONG, "0",
      "sim device: fixed cost of each copy in microseconds (a copy launch).",
      FIELD(sim_latency_us), NULL, 0, 1000000 },
    { "COLLAR_SIM_DEVICE_BANDWIDTH", CFG_SIZE, "0",
      "sim device: bandwidth of device memory in bytes per second (K, M, G "
      "suffixes): device-to-device copies, reductions (which move three times "
      "their bytes; of n inputs, n + 1 times) and reads of a peer's IPC "
      "memory take that long; COLLAR_SIM_BANDWIDTH is the link between host "
      "and device; 0: as fast as memcpy.",
      FIELD(sim_device_bandwidth), NULL, 0, 0 },
    { "COLLAR_SIM_NODE_SIZE", CFG_LONG, "0",
      "processes are taken to be on nodes of this many consecutive ranks "
      "of MPI_COMM_WORLD (within the real node), so that one machine can "
      "pose as several nodes (to test hier, on any device backend); 0: the "
      "real nodes.",
      FIELD(sim_node_size), NULL, 0, INT_MAX },
    { "COLLAR_SIM_FAIL", CFG_STRING, "",
      "inject failures into this process, for tests: KIND:N fails the N-th "
      "event of KIND, e.g. alloc:3,copy:10 (the 3rd allocation of pinned "
      "staging memory, where pageable memory then stands in, and the 10th "
      "copy, sim device), ipcopen:1 (the first opening of a peer's "
      "IPC memory, sim), ipckill:1 (the process is killed in its first IPC "
      "allocation, sim), export:1 (the first export of an application's "
      "buffer for ipc's zero-copy, sim); on any backend: thread:1 (the "
      "progress thread cannot start), nodes:1 (no memory for the table of "
      "nodes), shape:1 (no memory for a communicator's node shape), "
      "agree:N (collar's N-th agreement collective fails here with an MPI "
      "error), split:N (the N-th of collar's communicators, its own or nccl's "
      "set-up one, cannot be made here), "
      "zcalloc:1 (no memory for ipc zero-copy's bookkeeping), query:N (the "
      "cuda backend's N-th pointer query fails as after a sticky error), "
      "heap:N (the N-th time pageable memory is to stand in for pinned "
      "staging memory, there is none either: the call fails, on every rank), "
      "store:1 (the launcher's key-value store is not read at MPI_Init: "
      "collar cannot tell which ranks have it, nor their settings), "
      "sched:N (no memory for collar's N-th schedule), greq:N (the request "
      "of collar's N-th nonblocking operation cannot be made).",
      FIELD(sim_fail), NULL, 0, 0 },
    { "COLLAR_SIM_STRICT", CFG_BOOL, "0",
      "sim device: before each schedule runs, abort if a buffer it hands to "
      "the MPI library is device scratch while the MPI library does not take "
      "device pointers (sim scratch is host memory, so such a mix-up would "
      "otherwise pass unseen), for tests.",
      FIELD(sim_strict), NULL, 0, 0 },
    { "COLLAR_SIM_STREAMS", CFG_LONG, "2",
      "sim device: number of streams, each run by a worker thread.",
      FIELD(sim_streams), NULL, 1, 16 },
    { "COLLAR_SIM_INLINE", CFG_BOOL, "0",
      "sim device: run each copy and reduction at once in the calling "
      "thread (its event is complete on return) instead of on the streams' "
      "worker threads, which are then never started; to measure collar's "
      "own cost per call apart from the hand-offs to the device.",
      FIELD(sim_inline), NULL, 0, 0 },
};

#define NROWS (sizeof(table) / sizeof(table[0]))

/* ------------------------------------------------------------ value parsers */

collar_status_t collar_parse_bool(const char *s, int *out)
{
    static const char *const yes[] = { "1", "yes", "y", "true", "on", NULL };
    static const char *const no[]  = { "0", "no", "n", "false", "off", NULL };
    for (int i = 0; yes[i] != NULL; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return COLLAR_OK;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return COLLAR_OK;
        }
    }
    return COLLAR_ERR_INVALID;
}

collar_status_t collar_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    if (*s == '\0' || isspace((unsigned char)*s)) {
        return COLLAR_ERR_INVALID;
    }
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return COLLAR_ERR_INVALID;
    }
    *out = v;
    return COLLAR_OK;
}

/* "4096", "64K", "1M", "2G", "1T" (binary multiples; case-insensitive,
 * an optional trailing "B" or "iB"). */
collar_status_t collar_parse_size(const char *s, size_t *out)
{
    const char *p = s;
    if (!isdigit((unsigned char)*p)) {
        return COLLAR_ERR_INVALID;
    }
    unsigned long long v = 0;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (ULLONG_MAX - d) / 10) {
            return COLLAR_ERR_INVALID;
        }
        v = v * 10 + d;
    }
    /* "4 MiB" as people write it (one space, then the unit), as well as
     * "4MiB", "4M", "4194304". */
    if (p[0] == ' ' && p[1] != '\0' && strchr("KMGTBkmgtb", p[1]) != NULL) {
        p++;
    }
    unsigned shift = 0;
    switch (toupper((unsigned char)*p)) {
    case 'K': shift = 10; p++; break;
    case 'M': shift = 20; p++; break;
    case 'G': shift = 30; p++; break;
    case 'T': shift = 40; p++; break;
    default: break;
    }
    if (shift != 0 && (p[0] == 'i' || p[0] == 'I')) {
        p++;
    }
    if (p[0] == 'b' || p[0] == 'B') {
        p++;
    }
    if (*p != '\0') {
        return COLLAR_ERR_INVALID;
    }
    if (shift != 0 && v > (SIZE_MAX >> shift)) {
        return COLLAR_ERR_INVALID;
    }
    if (v > SIZE_MAX) {
        return COLLAR_ERR_INVALID;
    }
    *out = (size_t)(v << shift);
    return COLLAR_OK;
}

void collar_format_size(size_t v, char *buf, size_t len)
{
    static const struct { unsigned shift; char suffix; } units[] = {
        { 40, 'T' }, { 30, 'G' }, { 20, 'M' }, { 10, 'K' },
    };
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (sizeof(size_t) * CHAR_BIT > units[i].shift && v != 0
            && (v & (((size_t)1 << units[i].shift) - 1)) == 0) {
            snprintf(buf, len, "%zu%c", v >> units[i].shift, units[i].suffix);
            return;
        }
    }
    snprintf(buf, len, "%zu", v);
}

void collar_format_bytes(size_t v, char *buf, size_t len)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double d = (double)v;
    int u = 0;
    while (d >= 1024 && u < 4) {
        d /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.4g %s" : "%.0f %s", d, units[u]);
}

void collar_format_bytes_exact(size_t v, char *buf, size_t len)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    int u = 0;
    while (v != 0 && v % 1024 == 0 && u < 6) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%zu %s", v, units[u]);
}

void collar_format_range(size_t bytes, char *buf, size_t len)
{
    if (bytes <= 1) {
        snprintf(buf, len, "%zu B", bytes);
        return;
    }
    size_t low = 1;
    while (low <= bytes / 2) {
        low *= 2;
    }
    char lo[32], hi[32];
    collar_format_bytes_exact(low, lo, sizeof(lo));
    if (low > SIZE_MAX / 2) {
        snprintf(buf, len, "%s and up", lo);
        return;
    }
    collar_format_bytes_exact(low * 2, hi, sizeof(hi));
    snprintf(buf, len, "%s to under %s", lo, hi);
}

void collar_format_call(collar_coll_t coll, int comm_size, size_t bytes,
                        collar_mem_kind_t mem, char *buf, size_t len)
{
    char range[80];
    collar_format_range(bytes, range, sizeof(range));
    snprintf(buf, len, "%s on %d rank%s, %s, %s memory", collar_coll_name(coll),
             comm_size, collar_plural(comm_size), range,
             collar_mem_kind_name(mem));
}

static collar_status_t parse_enum(const char *s, const char *const *choices,
                                  int *out)
{
    for (int i = 0; choices[i] != NULL; i++) {
        if (strcasecmp(s, choices[i]) == 0) {
            *out = i;
            return COLLAR_OK;
        }
    }
    return COLLAR_ERR_INVALID;
}

/* "all", or a comma-separated list of `choices` (bit i for choices[i]);
 * with allow_none, "none" too (no bit).  On error `bad` names the token
 * that is not a choice ("" when the list itself is malformed). */
static collar_status_t parse_list(const char *s, const char *const *choices,
                                  int allow_none, unsigned *out, char *bad,
                                  size_t badlen)
{
    bad[0] = '\0';
    unsigned all = 0;
    for (int i = 0; choices[i] != NULL; i++) {
        all |= 1u << i;
    }
    if (strcasecmp(s, "all") == 0) {
        *out = all;
        return COLLAR_OK;
    }
    if (allow_none && strcasecmp(s, "none") == 0) {
        *out = 0;
        return COLLAR_OK;
    }
    unsigned mask = 0;
    const char *p = s;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        int found = 0;
        for (int i = 0; choices[i] != NULL; i++) {
            if (n == strlen(choices[i]) && strncasecmp(p, choices[i], n) == 0) {
                mask |= 1u << i;
                found = 1;
            }
        }
        if (!found) {
            snprintf(bad, badlen, "%.*s", (int)(n < 64 ? n : 64), p);
            return COLLAR_ERR_INVALID;
        }
        p += n;
        if (*p == ',') {
            p++;
            if (*p == '\0') {
                return COLLAR_ERR_INVALID;
            }
        }
    }
    if (mask == 0) {
        return COLLAR_ERR_INVALID;
    }
    *out = mask;
    return COLLAR_OK;
}

/* ----------------------------------------------------------------- the table */

static void expected_form(const cfg_row_t *row, char *buf, size_t len)
{
    switch (row->type) {
    case CFG_BOOL:
        snprintf(buf, len, "a boolean (0/1, yes/no, true/false, on/off)");
        break;
    case CFG_LONG:
        snprintf(buf, len, "an integer from %ld to %ld", row->min, row->max);
        break;
    case CFG_SIZE:
        if (row->max > 0) {
            char hi[32];
            collar_format_size((size_t)row->max, hi, sizeof(hi));
            snprintf(buf, len, "a size in bytes from 0 to %s with an optional "
                     "K, M, G or T suffix", hi);
        } else {
            snprintf(buf, len, "a size in bytes with an optional K, M, G or T suffix");
        }
        break;
    case CFG_ENUM:
    case CFG_SUBSYS:
    case CFG_LIST: {
        size_t o = (size_t)snprintf(buf, len, "%s", row->type == CFG_SUBSYS
                                    ? "a comma-separated list of: all, "
                                    : row->type == CFG_LIST
                                    ? "all, none, or a comma-separated list of: "
                                    : "one of: ");
        for (int i = 0; row->choices[i] != NULL && o < len; i++) {
            o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "",
                                  row->choices[i]);
        }
        break;
    }
    case CFG_STRING:
        snprintf(buf, len, "a string");
        break;
    }
}

/* Parse `s` for `row` into collar_cfg; on error `bad` may name the token
 * that is wrong. */
static collar_status_t apply_to(collar_config_t *cfg, const cfg_row_t *row,
                                const char *s, char *bad, size_t badlen)
{
    bad[0] = '\0';
    char *field = (char *)cfg + row->offset;
    switch (row->type) {
    case CFG_BOOL: {
        int v;
        COLLAR_CHECK(collar_parse_bool(s, &v));
        *(int *)field = v;
        return COLLAR_OK;
    }
    case CFG_LONG: {
        long v;
        COLLAR_CHECK(collar_parse_long(s, row->min, row->max, &v));
        *(long *)field = v;
        return COLLAR_OK;
    }
    case CFG_SIZE: {
        size_t v;
        COLLAR_CHECK(collar_parse_size(s, &v));
        if (row->max > 0 && v > (size_t)row->max) {
            return COLLAR_ERR_INVALID;  /* max 0: unbounded */
        }
        *(size_t *)field = v;
        return COLLAR_OK;
    }
    case CFG_ENUM: {
        int v;
        COLLAR_CHECK(parse_enum(s, row->choices, &v));
        *(int *)field = v;
        return COLLAR_OK;
    }
    case CFG_SUBSYS:
    case CFG_LIST: {
        unsigned v;
        COLLAR_CHECK(parse_list(s, row->choices, row->type == CFG_LIST, &v,
                                bad, badlen));
        *(unsigned *)field = v;
        return COLLAR_OK;
    }
    case CFG_STRING: {
        char *copy = strdup(s);
        if (copy == NULL) {
            return COLLAR_ERR_NO_MEMORY;
        }
        free(*(char **)field);
        *(char **)field = copy;
        return COLLAR_OK;
    }
    }
    return COLLAR_ERR_INVALID;
}

static collar_status_t apply(const cfg_row_t *row, const char *s, char *bad,
                             size_t badlen)
{
    return apply_to(&collar_cfg, row, s, bad, badlen);
}

static const cfg_row_t *find_row(const char *name, size_t len)
{
    for (size_t i = 0; i < NROWS; i++) {
        if (strlen(table[i].name) == len && strncmp(table[i].name, name, len) == 0) {
            return &table[i];
        }
    }
    return NULL;
}

static void load_row(const cfg_row_t *row, int quiet)
{
    char bad[80];
    if (apply(row, row->dflt, bad, sizeof(bad)) != COLLAR_OK) {
        abort();  /* a default that does not parse is a bug in this table */
    }
    const char *s = getenv(row->name);
    if (s == NULL) {
        return;
    }
    collar_status_t st = apply(row, s, bad, sizeof(bad));
    if (st == COLLAR_OK) {
        if (quiet) {
            collar_debug(ENV, "%s=%s", row->name, s);
        } else {
            collar_info(ENV, "%s=%s", row->name, s);
        }
        return;
    }
    char form[512];
    expected_form(row, form, sizeof(form));
    char what[128] = "";
    if (bad[0] != '\0') {
        snprintf(what, sizeof(what), " ('%s' is not one of them)", bad);
    }
    if (quiet) {
        collar_debug(ENV, "%s='%.64s' is invalid: expected %s%s; using the default '%s'",
                     row->name, s, form, what, row->dflt);
    } else {
        collar_warn(ENV, "%s='%.64s' is invalid: expected %s%s; using the default '%s'",
                    row->name, s, form, what, row->dflt);
    }
}

/* Letters compared as the same whatever their case: the environment is
 * case-sensitive, so collar_log is a name collar never reads. */
static int same_char(char a, char b)
{
    return toupper((unsigned char)a) == toupper((unsigned char)b);
}

/*
 * The edit distance between a[0..la) and b[0..lb): insertions, deletions,
 * substitutions and transpositions of two neighbours (ALGORTIHM), each one
 * edit (the optimal string alignment distance), up to `most`: most + 1
 * when it is larger.
 */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb,
                            size_t most)
{
    enum { MAXLEN = 64 };
    if ((la > lb ? la - lb : lb - la) > most || la >= MAXLEN || lb >= MAXLEN) {
        return most + 1;
    }
    size_t rows[3][MAXLEN];   /* i - 2, i - 1, i */
    size_t *before = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++) {
        prev[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t d = prev[j - 1] + !same_char(a[i - 1], b[j - 1]);
            if (prev[j] + 1 < d) {
                d = prev[j] + 1;
            }
            if (cur[j - 1] + 1 < d) {
                d = cur[j - 1] + 1;
            }
            if (i > 1 && j > 1 && same_char(a[i - 1], b[j - 2])
                && same_char(a[i - 2], b[j - 1]) && before[j - 2] + 1 < d) {
                d = before[j - 2] + 1;
            }
            cur[j] = d;
        }
        size_t *t = before;
        before = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb] > most ? most + 1 : prev[lb];
}

/* a[0..la) is a prefix of b (case aside). */
static int is_prefix(const char *a, size_t la, const char *b)
{
    size_t i = 0;
    while (i < la && b[i] != '\0' && same_char(a[i], b[i])) {
        i++;
    }
    return i == la;
}

/*
 * The known name an unknown COLLAR_* name was probably meant to be, or
 * NULL.  On the parts after COLLAR_ (u of the unknown name, k of a known
 * one), the first rule that finds one:
 *   1. a typo: k at most max(1, |u| / 4) edits from u (edit_distance), the
 *      closest (the first of those as close), so that a short name must be
 *      nearly right (ALGO is 2 edits from LOG, not a typo of it);
 *   2. a name cut short: u (3 letters or more) a prefix of k, the shortest
 *      such k (CHUNK: CHUNK_SIZE; STAT: STATS; ALGO: ALGORITHM);
 *   3. a name with a part too many: k followed by '_' a prefix of u, the
 *      longest such k (LOG_LEVEL: LOG).
 * Letters compare whatever their case.
 */
const char *collar_config_suggest(const char *name, size_t len)
{
    static const char pre[] = "COLLAR_";
    const size_t npre = sizeof(pre) - 1;
    if (len < npre || !is_prefix(name, npre, pre)) {
        return NULL;
    }
    const char *u = name + npre;
    const size_t lu = len - npre;
    const size_t most = lu / 4 > 1 ? lu / 4 : 1;
    const char *typo = NULL, *cut = NULL, *longer = NULL;
    size_t typo_d = most + 1, cut_len = SIZE_MAX, longer_len = 0;
    for (size_t i = 0; i < NROWS; i++) {
        const char *k = table[i].name + npre;
        const size_t lk = strlen(k);
        const size_t d = edit_distance(u, lu, k, lk, most);
        if (d < typo_d) {
            typo = table[i].name;
            typo_d = d;
        }
        if (lu >= 3 && lk > lu && is_prefix(u, lu, k) && lk < cut_len) {
            cut = table[i].name;
            cut_len = lk;
        }
        if (lu > lk + 1 && is_prefix(k, lk, u) && u[lk] == '_' && lk > longer_len) {
            longer = table[i].name;
            longer_len = lk;
        }
    }
    return typo != NULL ? typo : cut != NULL ? cut : longer;
}

static int config_loaded;

void collar_config_load_quiet(int quiet)
{
    if (config_loaded) {
        return;
    }
    config_loaded = 1;
    /* The log level and subsystems first, so that the other rows log as
     * asked. */
    const cfg_row_t *log_row = find_row("COLLAR_LOG", strlen("COLLAR_LOG"));
    const cfg_row_t *sub_row = find_row("COLLAR_LOG_SUBSYS", strlen("COLLAR_LOG_SUBSYS"));
    load_row(log_row, quiet);
    collar_log_level = collar_cfg.log_level;
    load_row(sub_row, quiet);
    collar_log_subsys = collar_cfg.log_subsys;
    for (size_t i = 0; i < NROWS; i++) {
        if (&table[i] != log_row && &table[i] != sub_row) {
            load_row(&table[i], quiet);
        }
    }

    collar_fault_init(collar_cfg.sim_fail);
    if (collar_cfg.chunk_size != 0 && collar_cfg.chunk_size < COLLAR_CHUNK_MIN) {
        if (quiet) {
            collar_debug(ENV, "COLLAR_CHUNK_SIZE=%zu is below the least chunk, "
                         "1K: raised to 1K", collar_cfg.chunk_size);
        } else {
            collar_warn(ENV, "COLLAR_CHUNK_SIZE=%zu is below the least chunk, 1K "
                        "(every chunk costs copies and an MPI call: a 1-byte "
                        "chunk made a 512 KiB allreduce last minutes): raised "
                        "to 1K", collar_cfg.chunk_size);
        }
        collar_cfg.chunk_size = COLLAR_CHUNK_MIN;
    }
    /* A typo must not pass silently. */
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, "COLLAR_", 7) != 0) {
            continue;
        }
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (find_row(*e, len) != NULL) {
            continue;
        }
        /* A typo, or a name cut short or too long: the known one meant. */
        const char *near = collar_config_suggest(*e, len);
        char hint[96] = "";
        if (near != NULL) {
            snprintf(hint, sizeof(hint), "did you mean %s? ", near);
        }
        if (quiet) {
            collar_debug(ENV, "unknown variable %.*s is ignored (%scollar-info "
                         "lists the known ones)", (int)len, *e, hint);
        } else {
            collar_warn(ENV, "unknown variable %.*s is ignored (%scollar-info "
                        "lists the known ones)", (int)len, *e, hint);
        }
    }
}

int collar_config_env_choice(const char *name)
{
    const cfg_row_t *row = find_row(name, strlen(name));
    int choice = 0;
    if (row == NULL || row->type != CFG_ENUM
        || parse_enum(row->dflt, row->choices, &choice) != COLLAR_OK) {
        return 0;
    }
    const char *s = getenv(name);
    if (s != NULL) {
        parse_enum(s, row->choices, &choice);
    }
    return choice;
}

void collar_config_load(void)
{
    collar_config_load_quiet(0);
}

static void format_value_of(const collar_config_t *cfg, const cfg_row_t *row,
                            char *buf, size_t len)
{
    const char *field = (const char *)cfg + row->offset;
    switch (row->type) {
    case CFG_BOOL:
        snprintf(buf, len, "%d", *(const int *)field);
        break;
    case CFG_LONG:
        snprintf(buf, len, "%ld", *(const long *)field);
        break;
    case CFG_SIZE:
        collar_format_size(*(const size_t *)field, buf, len);
        break;
    case CFG_ENUM:
        snprintf(buf, len, "%s", row->choices[*(const int *)field]);
        break;
    case CFG_SUBSYS:
    case CFG_LIST: {
        unsigned mask = *(const unsigned *)field, all = 0;
        for (int i = 0; row->choices[i] != NULL; i++) {
            all |= 1u << i;
        }
        if (mask == all || mask == 0) {
            snprintf(buf, len, "%s", mask == all ? "all" : "none");
            break;
        }
        size_t o = 0;
        buf[0] = '\0';
        for (int i = 0; row->choices[i] != NULL && o < len; i++) {
            if (mask & (1u << i)) {
                o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? "," : "",
                                      row->choices[i]);
            }
        }
        break;
    }
    case CFG_STRING:
        snprintf(buf, len, "%s", *(char *const *)field);
        break;
    }
}

static void format_value(const cfg_row_t *row, char *buf, size_t len)
{
    format_value_of(&collar_cfg, row, buf, len);
}

void collar_config_env_value(const char *name, char *buf, size_t len)
{
    buf[0] = '\0';
    const cfg_row_t *row = find_row(name, strlen(name));
    if (row == NULL || len == 0) {
        return;
    }
    collar_config_t tmp;
    memset(&tmp, 0, sizeof(tmp));
    char bad[80];
    if (apply_to(&tmp, row, row->dflt, bad, sizeof(bad)) != COLLAR_OK) {
        return;
    }
    const char *s = getenv(name);
    if (s != NULL) {
        (void)apply_to(&tmp, row, s, bad, sizeof(bad));
    }
    format_value_of(&tmp, row, buf, len);
    if (row->type == CFG_STRING) {
        free(*(char **)((char *)&tmp + row->offset));
    }
}

void collar_config_print(FILE *out, int markdown)
{
    if (markdown) {
        fprintf(out, "| variable | default | meaning |\n| --- | --- | --- |\n");
    }
    for (size_t i = 0; i < NROWS; i++) {
        const cfg_row_t *row = &table[i];
        char value[256];
        format_value(row, value, sizeof(value));
        if (markdown) {
            fprintf(out, "| `%s` | `%s` | %s |\n", row->name, row->dflt, row->help);
        } else {
            fprintf(out, "  %-22s = %-10s (default %s%s)\n      %s\n", row->name,
                    value, row->dflt, getenv(row->name) ? ", set" : "", row->help);
        }
    }
}
