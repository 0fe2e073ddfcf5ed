/*
 * collar - core layer: status codes (status.h), logging, configuration, the
 * device interface the schedule engine drives and the staging pools
 * (device.h), private communicators, selection and the schedule engine
 * itself.
 *
 * The core knows MPI (through PMPI_* only) and the reductions layer; device
 * backends (src/mem/) implement the collar_device_t interface of device.h,
 * algorithms (src/algo/) build schedules, the engine (src/engine/) conducts
 * each operation over them, and the entry points (src/interpose/) tie it
 * all to the exported MPI_* symbols.
 */
#ifndef COLLAR_CORE_H
#define COLLAR_CORE_H

#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>

#include "../reduce/reduce.h"

/* Status codes: status.h.  The device interface and the staging pools:
 * device.h.  Both are part of the core and come with this header. */
#include "status.h"

/* ------------------------------------------------------------------ logging */

typedef enum {
    COLLAR_LOG_NONE,
    COLLAR_LOG_ERROR,
    COLLAR_LOG_WARN,
    COLLAR_LOG_INFO,
    COLLAR_LOG_DEBUG,
    COLLAR_LOG_TRACE
} collar_log_level_t;

/* Subsystems, a bit each (COLLAR_LOG_SUBSYS=init,coll,...). */
enum {
    COLLAR_SUB_INIT   = 1u << 0,
    COLLAR_SUB_ENV    = 1u << 1,
    COLLAR_SUB_TUNING = 1u << 2,
    COLLAR_SUB_COLL   = 1u << 3,
    COLLAR_SUB_MEM    = 1u << 4,
    COLLAR_SUB_STATS  = 1u << 5,
    COLLAR_SUB_ALL    = (1u << 6) - 1
};

extern collar_log_level_t collar_log_level;
extern unsigned           collar_log_subsys;

void collar_log_set_rank(int rank);
/* 1 in the process that reports job-wide warnings (rank 0 of
 * MPI_COMM_WORLD, or any process before MPI_Init). */
extern int collar_log_lead;
/* Opens COLLAR_LOG_FILE (with %h, %p, %r expanded) once the rank is known. */
void collar_log_open(const char *pattern);
void collar_log_close(void);
/*
 * A file collar writes (COLLAR_LOG_FILE, COLLAR_STATS_FILE, COLLAR_TRACE),
 * opened for appending or truncated, created 0644.  Never through a
 * symbolic link someone else could have planted (a link is followed only
 * where it is this user's or root's, in a directory no other user can
 * change it in), and never another user's file (a device or pipe of
 * root's, such as /dev/null, is fine).  NULL after one warning naming
 * `what` (the variable), the reason and `instead` (what happens then).
 */
FILE *collar_open_output(const char *path, int append, const char *what,
                         const char *instead);
void collar_log_write(collar_log_level_t level, unsigned subsys,
                      const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Expand %h (host), %p (pid), %r (rank), %% in a file name pattern. */
void collar_expand_pattern(const char *pattern, int rank, char *out,
                           size_t outlen);
/* 1 the first time `key` is seen in this process, 0 afterwards. */
int collar_log_first(const char *key);

/* Words in messages: "s" where n is not 1 ("%d rank%s"), and the article
 * of a word ("%s %s rule": "an ipc rule", "a staged rule"). */
static inline const char *collar_plural(long n)
{
    return n == 1 ? "" : "s";
}
const char *collar_article(const char *word);
/* The same for a number as it is read ("an 8-rank", "an 11-rank", "a
 * 2-rank communicator"). */
const char *collar_article_n(long n);

#define collar_log_enabled(level, sub)                                        \
    ((level) <= collar_log_level && ((sub) & collar_log_subsys))

#define collar_log_(level, sub, ...)                                          \
    do {                                                                      \
        if (collar_log_enabled(level, sub)) {                                 \
            collar_log_write(level, sub, __FILE__, __LINE__, __VA_ARGS__);    \
        }                                                                     \
    } while (0)

#define collar_error(sub, ...) collar_log_(COLLAR_LOG_ERROR, COLLAR_SUB_##sub, __VA_ARGS__)
#define collar_warn(sub, ...)  collar_log_(COLLAR_LOG_WARN,  COLLAR_SUB_##sub, __VA_ARGS__)
#define collar_info(sub, ...)  collar_log_(COLLAR_LOG_INFO,  COLLAR_SUB_##sub, __VA_ARGS__)
#define collar_debug(sub, ...) collar_log_(COLLAR_LOG_DEBUG, COLLAR_SUB_##sub, __VA_ARGS__)
#define collar_trace(sub, ...) collar_log_(COLLAR_LOG_TRACE, COLLAR_SUB_##sub, __VA_ARGS__)
/* A warning every rank would give alike: from the lead process only, at
 * debug level elsewhere, so that a job prints it once. */
#define collar_warn_lead(sub, ...)                                            \
    collar_log_(collar_log_lead ? COLLAR_LOG_WARN : COLLAR_LOG_DEBUG,         \
                COLLAR_SUB_##sub, __VA_ARGS__)

/* ------------------------------------------------------------ configuration */

typedef enum {
    COLLAR_DEVICE_AUTO,
    COLLAR_DEVICE_CUDA,
    COLLAR_DEVICE_SIM,
    COLLAR_DEVICE_NONE
} collar_device_kind_t;

/* COLLAR_SYNC: what a call waits for before it reads device buffers. */
typedef enum {
    COLLAR_SYNC_DEVICE,   /* everything queued on the device */
    COLLAR_SYNC_STREAM,   /* the legacy default stream */
    COLLAR_SYNC_NONE
} collar_sync_t;

/* COLLAR_PTR_CACHE. */
typedef enum {
    COLLAR_PTR_CACHE_OFF,
    COLLAR_PTR_CACHE_ON,     /* hits checked against the buffer id */
    COLLAR_PTR_CACHE_TRUST   /* hits not checked */
} collar_ptr_cache_t;

/* COLLAR_GDRCOPY: small device copies by the CPU through GDRCopy. */
typedef enum {
    COLLAR_GDRCOPY_AUTO,     /* where libgdrapi loads and gdr_open works */
    COLLAR_GDRCOPY_ON,       /* the same, and a warning where it does not */
    COLLAR_GDRCOPY_OFF
} collar_gdrcopy_mode_t;

/* The gdrcopy= limit of a rule or plan (staged, chunked): 0 when absent
 * (COLLAR_GDRCOPY_DEFAULT applies), COLLAR_GDRCOPY_NEVER for gdrcopy=0.
 * The default is MVAPICH2-GDR's published crossover (MV2_GDRCOPY_LIMIT). */
#define COLLAR_GDRCOPY_DEFAULT ((size_t)8192)
#define COLLAR_GDRCOPY_NEVER   ((size_t)-1)

/* Allreduce algorithms.  AUTO means "let the rules decide". */
typedef enum {
    COLLAR_ALG_AUTO,
    COLLAR_ALG_NATIVE,
    COLLAR_ALG_STAGED,
    COLLAR_ALG_CHUNKED,
    COLLAR_ALG_RING,
    COLLAR_ALG_IPC,       /* through device memory mapped between the ranks of a node */
    COLLAR_ALG_HIER,      /* ipc within each node, an allreduce across nodes */
    COLLAR_ALG_NCCL,      /* ncclAllReduce, NCCL loaded at run time */
    COLLAR_ALG_COUNT
} collar_alg_t;

const char *collar_alg_name(collar_alg_t alg);
/* The algorithm named `name` (case-sensitive, not "auto"), or -1. */
int collar_alg_from_name(const char *name, size_t len);

/* The largest chunk (COLLAR_CHUNK_SIZE, a table's chunk=): 1G. */
#define COLLAR_CHUNK_MAX (1L << 30)
/* The least chunk (and ring segment) a call runs with: every chunk costs
 * copies and an MPI call, and a 1-byte chunk made a 512 KiB chunked
 * allreduce last minutes.  A smaller COLLAR_CHUNK_SIZE, chunk= or
 * collar_set_algorithm chunk is said once and raised to it. */
#define COLLAR_CHUNK_MIN ((size_t)1 << 10)

/* Every COLLAR_* variable lands in one field here (see config.c's table). */
typedef struct {
    int                  disable;
    collar_log_level_t   log_level;
    unsigned             log_subsys;
    char                *log_file;
    collar_device_kind_t device;
    int                  sync;           /* collar_sync_t */
    int                  ptr_cache;      /* collar_ptr_cache_t */
    collar_alg_t         algorithm;
    long                 sim_jitter_us;
    long                 sim_seed;
    long                 sim_streams;
    int                  sim_inline;     /* COLLAR_SIM_INLINE: no workers */
    size_t               sim_bandwidth;  /* bytes/s of a copy; 0: unlimited */
    long                 sim_latency_us; /* fixed cost of each copy */
    size_t               sim_device_bandwidth; /* bytes/s on the device */
    long                 sim_node_size;  /* ranks per pseudo-node; 0: real */
    size_t               staging_pool;
    char                *allreduce_rules;
    char                *tuning_file;
    char                *tuning_dir;
    char                *nccl_library;   /* COLLAR_NCCL_LIBRARY */
    int                  gdrcopy;        /* collar_gdrcopy_mode_t */
    char                *gdrcopy_library; /* COLLAR_GDRCOPY_LIBRARY */
    int                  ipc_zerocopy;   /* COLLAR_IPC_ZEROCOPY */
    size_t               ipc_zerocopy_min; /* COLLAR_IPC_ZEROCOPY_MIN */
    long                 ipc_maps;       /* COLLAR_IPC_MAPS: peers' buffers
                                            kept mapped */
    size_t               chunk_size;
    int                  mpi_cuda_aware; /* 0 auto, 1 yes, 2 no */
    int                  check;          /* COLLAR_CHECK: verify agreement */
    char                *sim_fail;       /* COLLAR_SIM_FAIL: fault injection */
    int                  sim_strict;     /* COLLAR_SIM_STRICT: canary checks */
    unsigned             collectives;    /* COLLAR_COLLECTIVES: see above */
    int                  stats;          /* collar_stats_mode_t */
    char                *stats_file;
    int                  stats_format;   /* 0 text, 1 json */
    long                 stats_depth;
    int                  progress;       /* collar_progress_mode_t */
    long                 progress_interval_us;
    int                  nvtx;           /* collar_nvtx_level_t */
    char                *trace;          /* COLLAR_TRACE: file pattern */
    long                 trace_events;
} collar_config_t;

/* COLLAR_PROGRESS: who advances collar's outstanding operations. */
typedef enum {
    COLLAR_PROGRESS_AUTO,     /* the thread where the library already gives
                               * MPI_THREAD_MULTIPLE; else the waits, tests
                               * and blocking point-to-point calls */
    COLLAR_PROGRESS_THREAD,   /* a progress thread too (MPI_THREAD_MULTIPLE,
                               * asked for when a device backend can be
                               * active) */
    COLLAR_PROGRESS_WAIT      /* only in the application's waits and tests */
} collar_progress_mode_t;

extern collar_config_t collar_cfg;

/*
 * Parse every COLLAR_* variable of the environment into collar_cfg.  A bad
 * value is one warning naming the variable and the expected form, and the
 * default stays; an unknown COLLAR_* name is one warning.  Idempotent.
 */
void collar_config_load(void);
/* The same; quiet != 0 demotes its warnings to debug (ranks other than 0
 * of MPI_COMM_WORLD, so that a job prints each warning once). */
void collar_config_load_quiet(int quiet);
/* Before MPI starts (and the configuration is loaded): the choice the
 * environment makes for enumerated variable `name`, as an index into its
 * choices; the default's when unset or invalid (said when it is loaded). */
int collar_config_env_choice(const char *name);
/* The same for any variable, as collar would read it (the default's when
 * unset or invalid), formatted as collar-info prints values. */
void collar_config_env_value(const char *name, char *buf, size_t len);
/* For an unknown COLLAR_* name name[0..len): the known name it was
 * probably meant to be (a typo of it, it cut short, or it with a part too
 * many), or NULL. */
const char *collar_config_suggest(const char *name, size_t len);
/* Print the table: name, value in force, default, help. */
void collar_config_print(FILE *out, int markdown);

/* Value parsers, shared by the configuration table and the tools. */
collar_status_t collar_parse_bool(const char *s, int *out);
collar_status_t collar_parse_size(const char *s, size_t *out);
collar_status_t collar_parse_long(const char *s, long min, long max, long *out);
/* The largest exact binary suffix, as tables write sizes: 65536 -> "64K",
 * 1536 -> "1536", 0 -> "0". */
void collar_format_size(size_t bytes, char *buf, size_t len);
/* For people: "4 KiB", "1.5 MiB", "12 B". */
void collar_format_bytes(size_t bytes, char *buf, size_t len);
/* For people, exactly: the largest binary unit that divides: "4 KiB",
 * "1536 KiB", "1100 B". */
void collar_format_bytes_exact(size_t bytes, char *buf, size_t len);
/* The power-of-two size range `bytes` falls in, [2^k, 2^(k+1)), for
 * people: "4 MiB to under 8 MiB", "1 B", "0 B". */
void collar_format_range(size_t bytes, char *buf, size_t len);

/* ------------------------------------------------------- injected failures */

/*
 * COLLAR_SIM_FAIL (src/core/fault.c), for tests: "kind:N" makes the N-th
 * event of that kind in this process fail, once.  The sim device's kinds
 * (an allocation of staging memory, a copy, an IPC open, an IPC allocation
 * that kills the process, an export of a user buffer) and the places where
 * a local failure changes what a rank would issue: the progress thread's
 * creation, the table of nodes, a communicator's node shape, collar's
 * agreement collectives (a local MPI error), the split of collar's
 * communicator, ipc zero-copy's bookkeeping, the cuda backend's pointer
 * query (a sticky error); the pageable memory that stands in for staging
 * memory that cannot be had (collar_staging_get); the launcher's key-value
 * store (as where there is none); and the places where a start fails
 * after it has issued collectives: the memory of a schedule, the
 * generalized request of a nonblocking operation.
 */
typedef enum {
    COLLAR_FAULT_ALLOC, COLLAR_FAULT_COPY, COLLAR_FAULT_IPCOPEN,
    COLLAR_FAULT_IPCKILL, COLLAR_FAULT_EXPORT, COLLAR_FAULT_THREAD,
    COLLAR_FAULT_NODES, COLLAR_FAULT_SHAPE, COLLAR_FAULT_AGREE,
    COLLAR_FAULT_SPLIT, COLLAR_FAULT_ZEROCOPY, COLLAR_FAULT_QUERY,
    COLLAR_FAULT_HEAP, COLLAR_FAULT_STORE, COLLAR_FAULT_SCHED, COLLAR_FAULT_GREQ,
    COLLAR_FAULT_COUNT
} collar_fault_t;

/* Parse the specification (NULL or empty: none); a malformed one is one
 * warning and injects nothing. */
void collar_fault_init(const char *spec);
/* Count one event of `kind`: 1 when it is the one to fail (said at info
 * level). */
int collar_fault(collar_fault_t kind);
/* The event of `kind` that fails (0: none). */
uint64_t collar_fault_at(collar_fault_t kind);
const char *collar_fault_name(collar_fault_t kind);

#include "device.h"

/* ----------------------------------------------------- private communicator */

/* Where the private communicator of a collar_comm_t stands. */
typedef enum {
    COLLAR_COMM_READY = 0,  /* private_comm usable (MPI_COMM_NULL for the
                               states that need none, e.g. the staged
                               collectives') */
    COLLAR_COMM_LATER,      /* none yet: made by the next blocking
                               allreduce; until then calls are staged on
                               the user's communicator */
    COLLAR_COMM_NONE        /* the MPI library refused collar a
                               communicator: calls on it are staged on the
                               user's communicator */
} collar_comm_setup_t;

/*
 * collar's state for a user communicator, cached on it as an attribute: a
 * private duplicate for internal traffic and the counters that keep
 * concurrent operations apart.  Reference-counted: the user's communicator
 * holds one reference (dropped when it is freed), each schedule another
 * (collar_sched_create .. collar_sched_destroy), so that an operation
 * outlives MPI_Comm_free of its communicator, as MPI allows.
 */
typedef struct collar_comm {
    int      refs;         /* atomic (collar_comm_ref / collar_comm_unref) */
    int      setup;        /* collar_comm_setup_t */
    MPI_Comm private_comm;
    int      size;
    int      rank;
    int      tag_ub;
    uint64_t next_seq;     /* operations created on this communicator */
    uint64_t next_ticket;  /* operations with internal collectives */
    /* Ticket whose collectives may be issued now; atomic, since a blocking
     * call runs its own schedule outside the progress lock
     * (collar_sched_block_colls). */
    _Atomic uint64_t coll_turn;
    /* The ranks of this rank's node, known without communication from the
     * table of nodes every process learnt at MPI_Init (collar_comm_init;
     * COLLAR_SIM_NODE_SIZE cuts nodes further).  node_known = 0 for a
     * communicator with processes outside MPI_COMM_WORLD (every rank of it
     * sees one) or without the table: then one node per rank, not one_node,
     * node_min 0. */
    int      node_known;
    int      node_rank;
    int      node_size;
    int     *node_peers;   /* node_size ranks (in this communicator) of the
                              node, in node rank order; node_peers[node_rank]
                              is this rank */
    int     *node_world;   /* the same processes' ranks in MPI_COMM_WORLD
                              (in node_peers' allocation) */
    int      node_first;   /* the node's first rank in the communicator */
    int      one_node;     /* every rank of the communicator is on one node */
    /* Every rank has its node_peers (agreed when the private communicator
     * is made; a rank without memory for them has none): ipc and hier
     * need them. */
    int      node_peers_everywhere;
    /* Every rank runs collar's progress thread (agreed when the private
     * communicator is made).  Only then may a nonblocking allreduce run
     * collar's own schedule (without it, it is the MPI library's own
     * collective on host copies: src/engine/allreduce.c, the form), and
     * collar's internal collectives block in the MPI library
     * (collar_sched_block_colls). */
    int      all_threaded;
    /* COLLAR_IPC_ZEROCOPY and COLLAR_IPC_ZEROCOPY_MIN as every rank sees
     * them (agreed with all_threaded: zero-copy only where every rank
     * allows it, from the largest threshold), so that a variable set
     * differently on one rank cannot make the ranks issue different
     * collectives. */
    int      ipc_zerocopy;
    size_t   ipc_zerocopy_min;
    int      nnodes;       /* nodes the communicator spans (node_known) */
    int      ppn_min;      /* the fewest and most ranks on one of them */
    int      ppn_max;
    int      node_min;     /* ranks on the smallest node of the communicator,
                              0 when some rank has no device backend */
    /* Made by `hier` at its first blocking allreduce on a communicator that
     * spans nodes (collar_comm_make_hier), never before: node_sched holds
     * the ranks of this node, for the collectives of schedules (issued in
     * their turn); cross_comm the ranks with this rank's node_rank on every
     * node (MPI_COMM_NULL where node_rank >= node_min).  hier_made: 0 not
     * yet, 1 made, -1 could not be made (on every rank alike). */
    int      hier_made;
    MPI_Comm node_sched;
    MPI_Comm cross_comm;
    /* Owned by the ipc algorithm (src/algo/ipc.c): its buffers, released
     * with the state; ipc_freed runs in the attribute's delete callback
     * (MPI_Comm_free, MPI_Finalize for the predefined communicators),
     * collective over the application's communicator. */
    void    *ipc;
    void   (*ipc_release)(void *ipc);
    /* Owned by the nccl algorithm (src/algo/nccl.c): its NCCL communicator,
     * made at nccl's first blocking allreduce on the communicator, in its
     * turn.  nccl_made: 0 not yet, 1 made, -1 could not be made (on every
     * rank alike; nccl_why says why).  Released with the state. */
    int      nccl_made;
    const char *nccl_why;
    void    *nccl;
    void   (*nccl_release)(void *nccl);
    void   (*ipc_freed)(void *ipc, MPI_Comm comm);
    /* Owned by the allreduce conductor (src/engine/allreduce.c): the last
     * small blocking schedule it ran on the communicator, kept for the
     * next call with the same arguments; released with the state. */
    void    *kept;
    void   (*kept_release)(void *kept);
} collar_comm_t;

/*
 * Find or create the state of `comm`; with `blocking` (the caller is inside
 * a blocking allreduce on comm, which every rank reaches in the same
 * order), make its private duplicate if it has none yet: PMPI_Comm_split
 * and an MPI_MIN agreement of the outcome, the user's error handler not
 * called.  Without `blocking` nothing is made (a nonblocking or persistent
 * start never waits for another rank): a new state says COLLAR_COMM_LATER.
 * When the MPI library refuses collar a communicator, COLLAR_COMM_NONE,
 * said once.  The pointer is good while the caller is inside an MPI call
 * on `comm`; what keeps it longer takes a reference.
 */
collar_status_t collar_comm_get(MPI_Comm comm, int blocking,
                                collar_comm_t **state);
/* The communicators of `hier` (node_sched, cross_comm), collectively over
 * the private communicator, blocking: call in the communicator's turn, from
 * a blocking allreduce.  Sets hier_made to 1, or -1 on every rank alike. */
void collar_comm_make_hier(collar_comm_t *state);
/*
 * An agreement: an allreduce of n ints over `comm` whose result decides
 * which collectives the ranks issue next (collar's communicator, hier's,
 * NCCL's, the table of nodes).  A local MPI failure of it leaves this rank
 * unable to know what the others decided, and so to issue what they
 * issue: collar says so and ends the job (PMPI_Abort on comm) rather than
 * leave the ranks hung in different collectives (docs/reliability.md).
 * `what`: the message's name for it.
 */
void collar_agree(const int *mine, int *out, int n, MPI_Op op, MPI_Comm comm,
                  const char *what);
/* This rank cannot issue what its peers will (`what` failed here): said,
 * then the job ends (PMPI_Abort on comm with `code`). */
void collar_fail_stop(MPI_Comm comm, int code, const char *what);
/* Communicators collar holds now for the application's (private
 * duplicates, hier's), for tests and collar-info. */
/* This process runs collar's progress thread (set by the engine before a
 * private duplicate is made, collar_progress_thread_ready; read when it is
 * made, and agreed there: all_threaded). */
extern int collar_comm_threaded_progress;
/* The thread level the application asked MPI_Init_thread for (set by the
 * engine at MPI_Init; MPI_THREAD_SINGLE before). */
extern int collar_app_thread_level;
int collar_comm_count(void);
void collar_comm_ref(collar_comm_t *state);
/* Drop a reference; the last one frees the private duplicate and state. */
void collar_comm_unref(collar_comm_t *state);
/* A communicator with the group of `comm`, in the same order, for collar's
 * own traffic: collective, copies none of the user's attributes (no copy
 * callback runs), errors return (MPI_ERRORS_RETURN). */
collar_status_t collar_comm_dup_private(MPI_Comm comm, MPI_Comm *out);
/* The same (PMPI_Comm_split), where the MPI library may have none to give
 * (no context id left, MPICH has 2048 a process): that shortage is
 * collar's, so no error handler hears of it; `comm` returns errors for the
 * length of the call and gets its handler back.  The MPI error, and
 * *out = MPI_COMM_NULL, when there is none. */
int collar_comm_dup_quiet(MPI_Comm comm, MPI_Comm *out);
/* ---------------------------------------------------------------- presence
 * Whether collar is loaded on every process of MPI_COMM_WORLD, learnt
 * through the launcher's key-value store with no message of collar's own
 * (src/core/presence.c), so that no collective of collar's meets a process
 * without it. */
typedef enum {
    COLLAR_PRESENCE_UNKNOWN,   /* no store answered: as if every process had it */
    COLLAR_PRESENCE_ALL,
    COLLAR_PRESENCE_PARTIAL,   /* some process has no collar */
    COLLAR_PRESENCE_DIFFERENT  /* every one has it, with settings that make
                                * different collectives (what) */
} collar_presence_state_t;

typedef struct {
    collar_presence_state_t state;
    const char *store;         /* "PMIx", "PMI-1"; NULL where none */
    const char *why;           /* UNKNOWN: why */
    int  lowest;               /* the lowest rank with collar */
    int  missing;              /* how many ranks have none */
    char ranks[192];           /* those ranks: "0,2-5" */
    char hosts[192];           /* their hosts where known, else "" */
    char what[512];            /* DIFFERENT: which setting, on which ranks */
} collar_presence_t;

/* In MPI_Init, before the MPI library starts: put this process's key
 * (PMI-1), or let the library's PMIx_Init put it (PMIx). */
void collar_presence_announce(void);
/* The PMIx_Init collar exports in front of the PMIx library's: runs it, and
 * puts the key inside collar's MPI_Init (types: pmix_proc_t *,
 * pmix_info_t []). */
int collar_presence_pmix_init(void *proc, void *info, size_t ninfo);
/* After the MPI library's MPI_Init, before any collective of collar's:
 * every rank's key, read without communication. */
void collar_presence_learn(int rank, int size, collar_presence_t *out);

/* At MPI_Init, after the device backend is open (has_device: not none):
 * the attribute keys, and the node of every process of MPI_COMM_WORLD
 * (collective over MPI_COMM_WORLD, the only communication collar does
 * outside the application's collectives). */
collar_status_t collar_comm_init(int has_device);
/* Some process of MPI_COMM_WORLD has a device backend (known alike on
 * every process after collar_comm_init). */
int collar_comm_world_wanted(void);
void collar_comm_finalize(void);
/* A duplicate of MPI_COMM_SELF whose errors return to collar, made at
 * MPI_Init (MPI_COMM_NULL where the library gave none): for asking the MPI
 * library, with one-rank calls, whether it accepts arguments, and for the
 * handles of collar's persistent requests (src/engine/persist.c, its
 * point-to-point messages to itself, on tags of its own). */
MPI_Comm collar_comm_probe(void);
/*
 * The application's communicator as the errors of collar's operations on it
 * need it: cached on it as an attribute (made locally, on the first
 * operation that needs it), reference-counted like collar_comm_t.  When
 * the application frees the communicator while operations still hold a
 * reference, it keeps the error handler the communicator had then.
 */
typedef struct collar_usercomm collar_usercomm_t;
/* The state of `comm` with a reference for the caller, or NULL (no memory,
 * or before MPI_Init): then errors are raised on `comm` directly. */
collar_usercomm_t *collar_usercomm_get(MPI_Comm comm);
void collar_usercomm_unref(collar_usercomm_t *u);
/* Raise `error` on the application's communicator `comm` (u: its state,
 * or NULL): through its error handler; once the application has freed it,
 * through the handler it had then, called on a duplicate of MPI_COMM_SELF.
 * Returns error. */
int collar_usercomm_raise(collar_usercomm_t *u, MPI_Comm comm, int error);
/* The number of the next allreduce COLLAR_CHECK checks on it, from 1 (0
 * without a state). */
uint64_t collar_usercomm_count_check(collar_usercomm_t *u);

/* Does the MPI library take device pointers?  COLLAR_MPI_CUDA_AWARE, else
 * the library's own answer where it has one (Open MPI's MPIX extension,
 * MPICH 4's MPIX_GPU_query_support).  After MPI_Init. */
int collar_mpi_cuda_aware(void);

/* -------------------------------------------------------------- selection */

/* Collectives.  Tuning tables and selection know allreduce only; the others
 * are staged through host memory on device buffers (src/engine/colls.c)
 * and appear in statistics and COLLAR_COLLECTIVES. */
typedef enum {
    COLLAR_COLL_ALLREDUCE,
    COLLAR_COLL_BCAST,
    COLLAR_COLL_ALLGATHER,
    COLLAR_COLL_ALLGATHERV,
    COLLAR_COLL_ALLTOALL,
    COLLAR_COLL_ALLTOALLV,
    COLLAR_COLL_REDUCE_SCATTER,
    COLLAR_COLL_REDUCE_SCATTER_BLOCK,
    COLLAR_COLL_REDUCE,
    COLLAR_COLL_GATHER,
    COLLAR_COLL_GATHERV,
    COLLAR_COLL_SCATTER,
    COLLAR_COLL_SCATTERV,
    COLLAR_COLL_COUNT
} collar_coll_t;

/* "allreduce", "bcast", ..., "scatterv"; "unknown" out of range. */
const char *collar_coll_name(collar_coll_t coll);
/* "allreduce on 2 ranks, 4 MiB to under 8 MiB, device memory": what the
 * info line that says what ran is about (the call's collective,
 * communicator size, size range of `bytes` and memory kind). */
void collar_format_call(collar_coll_t coll, int comm_size, size_t bytes,
                        collar_mem_kind_t mem, char *buf, size_t len);
/* COLLAR_COLLECTIVES: bit (coll - COLLAR_COLL_BCAST) for each collective
 * from bcast to scatterv. */
#define COLLAR_COLLS_STAGEABLE (COLLAR_COLL_COUNT - COLLAR_COLL_BCAST)

/* What all ranks agree on for one call: the input of selection. */
typedef struct {
    collar_coll_t     coll;
    collar_mem_kind_t mem;
    int               comm_size;
    size_t            bytes;     /* one rank's contribution: count x size */
    int               reducible; /* predefined op and type: collar can reduce */
    /* The communicator's node shape (collar_comm_shape): nodes spanned, and
     * the fewest and most ranks on one of them.  nodes 0: unknown, and only
     * rules without a shape match. */
    int               nodes;
    int               ppn_min;
    int               ppn_max;
} collar_select_key_t;

/* The node shape of the key of a call on c (nodes spanned, fewest and most
 * ranks on one node), known locally; nodes 0 when c's nodes are unknown. */
void collar_comm_shape(const collar_comm_t *c, collar_select_key_t *key);

struct collar_rule_s;

typedef struct {
    collar_alg_t                alg;
    size_t                      chunk;    /* 0: algorithm default */
    size_t                      oneshot;  /* ipc: one-shot below; 0: default */
    size_t                      gdrcopy;  /* gdrcopy= (COLLAR_GDRCOPY_DEFAULT) */
    const char                 *reason;   /* "forced by COLLAR_ALGORITHM", ... */
    const struct collar_rule_s *rule;     /* the rule that matched, if any */
    const char                 *source;   /* and where it comes from */
    const char                 *fallback; /* set when eligibility changed alg */
    int                         device_pointers_ok; /* PMPI takes them */
    int                         mpi_cuda_aware;     /* for device memory */
} collar_plan_t;

/* Load the rule sources (after collar_config_load); warns about and skips a
 * source that does not parse.  Fails only if the built-in rules do not. */
collar_status_t collar_select_init(void);
void collar_select_finalize(void);
/* "COLLAR_ALLREDUCE_RULES, then file x.table, then built-in rules". */
const char *collar_select_sources(void);
/* A hash of every rule in force (all ranks must agree). */
uint64_t collar_select_hash(void);
/* The sources of the rules as collar_select_init found them, strongest
 * first after COLLAR_ALGORITHM (collar-info): i = 0 COLLAR_ALLREDUCE_RULES,
 * 1 COLLAR_TUNING_FILE, 2 the site default, 3 the built-in rules; 0 past
 * the last. */
typedef enum {
    COLLAR_SOURCE_UNSET,      /* not given (the site default: no file) */
    COLLAR_SOURCE_IN_FORCE,
    COLLAR_SOURCE_REJECTED    /* did not parse: ignored whole */
} collar_source_state_t;
struct collar_table_s;
typedef struct {
    const char                  *what;   /* "COLLAR_TUNING_FILE", ... */
    const char                  *name;   /* its file's path, or NULL */
    int                          state;  /* collar_source_state_t */
    const struct collar_table_s *table;  /* in force */
    const char                  *error;  /* rejected: the first error */
} collar_rule_source_t;
int collar_select_source(int i, collar_rule_source_t *out);
/* A pure function of the key and the configuration. */
void collar_select(const collar_select_key_t *key, collar_plan_t *plan);
/* 1 when every rule any source has for host memory says native and nothing
 * is forced: host buffers can go straight to the MPI library. */
int collar_select_host_native(void);
/* "file x.table line 4", or the reason when no rule matched. */
void collar_plan_describe(const collar_plan_t *plan, char *buf, size_t len);

/* ------------------------------------------------------------ tuning table */

/*
 * A tuning table: rules "collective memory ranks bytes algorithm [options]".
 * Rank ranges are inclusive ("2-8" includes 8; "4" is 4-4; "2-inf"); byte
 * ranges are half-open ("0-64K" is [0, 65536); "16M-inf").  Memory is host,
 * device or any.  Format and error messages: docs/tuning.md.
 */
#define COLLAR_MEM_ANY (-1)

typedef struct collar_rule_s {
    collar_coll_t coll;
    int           mem;         /* collar_mem_kind_t, or COLLAR_MEM_ANY */
    int           ranks_lo;    /* inclusive */
    int           ranks_hi;    /* inclusive; INT_MAX for inf */
    size_t        bytes_lo;    /* inclusive */
    size_t        bytes_hi;    /* exclusive; SIZE_MAX for inf */
    collar_alg_t  alg;
    size_t        chunk;       /* chunk=SIZE option; 0 when absent */
    size_t        oneshot;     /* oneshot=SIZE option (ipc); 0 when absent */
    size_t        gdrcopy;     /* gdrcopy=SIZE (staged, chunked): see
                                  COLLAR_GDRCOPY_DEFAULT */
    /* The node shape (version 2): nodes=N[-M] and ppn=N[-M], inclusive;
     * lo 0 when the key is absent.  A rule with either is "shaped". */
    int           nodes_lo, nodes_hi;
    int           ppn_lo, ppn_hi;
    int           line;        /* line in its source (1-based) */
} collar_rule_t;

typedef struct collar_table_s {
    collar_rule_t *rules;
    int            nrules;
    int            version;       /* 1 or 2 (inline rules: 0 without a version line) */
    char           system[256];   /* from a "# ... system: TEXT" comment */
    uint64_t       hash;          /* FNV-1a of the canonical rules */
} collar_table_t;

/*
 * Parse a table from `text` (`len` bytes, need not be NUL-terminated).
 * *table is overwritten, not freed first.  Limits: 4096 rules, lines of
 * 4096 bytes, chunk= up to 1G; an `inf` upper bound includes SIZE_MAX.
 * `name` names the source in messages (a file path, "COLLAR_ALLREDUCE_RULES").
 * inline_rules != 0: ';' also separates lines and the version line is
 * optional (the form of COLLAR_ALLREDUCE_RULES).
 * On error: nothing is kept (table is empty), COLLAR_ERR_INVALID is returned
 * and `err` holds one message "NAME:LINE:COLUMN: what was expected" (the
 * first error).  Never reads outside [text, text + len).
 */
collar_status_t collar_table_parse(const char *text, size_t len,
                                   const char *name, int inline_rules,
                                   collar_table_t *table, char *err,
                                   size_t errlen);
/* Read and parse a file (at most COLLAR_TABLE_MAX_BYTES). */
#define COLLAR_TABLE_MAX_BYTES (1u << 20)
collar_status_t collar_table_load(const char *path, collar_table_t *table,
                                  char *err, size_t errlen);
void collar_table_free(collar_table_t *table);
/* The rule matching a call whose node shape is unknown (only rules
 * without nodes= or ppn= match), or NULL. */
const collar_rule_t *collar_table_match(const collar_table_t *table,
                                        collar_coll_t coll,
                                        collar_mem_kind_t mem, int ranks,
                                        size_t bytes);
/* The rule matching the call of `key` (its coll, comm_size, bytes and node
 * shape; memory `mem`): a shaped rule whose nodes= and ppn= hold the
 * communicator's shape, else a rule without a shape, else NULL.  Rules of
 * one kind never overlap, so at most one of each matches. */
const collar_rule_t *collar_table_match_key(const collar_table_t *table,
                                            const collar_select_key_t *key,
                                            collar_mem_kind_t mem);
/* 1 when the rule has nodes= or ppn=. */
int collar_rule_shaped(const collar_rule_t *rule);
/* Write the table back in the file format: a system comment, "version 1"
 * (or 2 when a rule has a node shape),
 * one canonical rule a line; parsing it gives the same rules and hash. */
void collar_table_write(const collar_table_t *table, FILE *out);
/* 1 when both tables hold the same rules, in the same order (lines and
 * comments aside). */
int collar_table_same_rules(const collar_table_t *a, const collar_table_t *b);
/* One rule, canonical: "allreduce device 2-8 0-64K chunked chunk=1M". */
void collar_rule_format(const collar_rule_t *rule, char *buf, size_t len);

/* -------------------------------------------------------------- statistics */

/*
 * COLLAR_STATS: what ran, how often, how long and from where, reported by
 * rank 0 at MPI_Finalize (src/core/stats.c, docs/stats.md).
 */
typedef enum {
    COLLAR_STATS_OFF,
    COLLAR_STATS_SUMMARY,
    COLLAR_STATS_CALLSITES
} collar_stats_mode_t;

#define COLLAR_STATS_MAX_DEPTH 8

/* One completed call. */
typedef struct {
    collar_coll_t      coll;
    collar_alg_t       alg;
    collar_mem_kind_t  mem;
    size_t             bytes;      /* message size, as for selection */
    double             seconds;    /* from the call to completion */
    int                npcs;       /* call site: return addresses, caller */
    void              *pcs[COLLAR_STATS_MAX_DEPTH]; /* first (0 if none) */
} collar_stats_call_t;

/* Start recording per collar_cfg (after collar_config_load).  Nonzero when
 * statistics are on; with them off every other function is a no-op. */
int collar_stats_init(void);
extern int collar_stats_on;
/* Thread-safe; exact counts under MPI_THREAD_MULTIPLE. */
void collar_stats_record(const collar_stats_call_t *call);
/* The application's call site: up to collar_cfg.stats_depth return
 * addresses.  `skip` counts frames above collar_stats_callsite (1: its
 * caller); frames inside libcollar.so are skipped as well. */
int collar_stats_callsite(void **pcs, int max, int skip);
/* A fallback happened (e.g. "chunked -> staged: datatype with gaps"). */
void collar_stats_fallback(const char *what);
/* Where the selection rules come from, for the report. */
void collar_stats_set_tuning_source(const char *source);
/* Collective over `comm` (MPI_COMM_WORLD), before PMPI_Finalize: gather,
 * and print the report from rank 0.  Frees everything. */
void collar_stats_report(MPI_Comm comm);

/* ------------------------------------------------------------- observation */

/*
 * What collar ran, shown to tools (src/core/observe.c, nvtx.c, trace.c;
 * docs/stats.md): NVTX ranges for Nsight Systems (COLLAR_NVTX), and the
 * timeline COLLAR_TRACE writes.  The schedule engine and the conductors
 * report each collective and each step; with nothing observing, a step
 * costs one load of collar_observe.
 */
typedef enum {
    COLLAR_NVTX_OFF,
    COLLAR_NVTX_COLL,     /* a range per collective */
    COLLAR_NVTX_STEPS     /* and per step */
} collar_nvtx_level_t;

/* Bits of collar_observe: who is listening. */
enum {
    COLLAR_OBS_NVTX       = 1u << 0,   /* ranges per collective */
    COLLAR_OBS_NVTX_STEPS = 1u << 1,   /* ranges per step */
    COLLAR_OBS_TRACE      = 1u << 2,   /* COLLAR_TRACE */
    COLLAR_OBS_STEPS      = COLLAR_OBS_NVTX_STEPS | COLLAR_OBS_TRACE
};
extern int collar_observe;

/* The phases of an operation, as tools name them (collar_phase_name). */
typedef enum {
    COLLAR_PHASE_COPY_IN,      /* from the application's buffer */
    COLLAR_PHASE_COPY_OUT,     /* into the application's buffer */
    COLLAR_PHASE_COPY,         /* between collar's own buffers */
    COLLAR_PHASE_REDUCE,       /* on the device */
    COLLAR_PHASE_HOST_REDUCE,
    COLLAR_PHASE_MPI_ALLREDUCE,
    COLLAR_PHASE_MPI_SEND,
    COLLAR_PHASE_MPI_RECV,
    COLLAR_PHASE_MPI_COLL,     /* the MPI library's collective on host copies */
    COLLAR_PHASE_SIGNAL,       /* a one-int allreduce between ranks (ipc) */
    COLLAR_PHASE_AGREE,        /* the status agreement */
    COLLAR_PHASE_ORDER,        /* ordering after the caller's device work */
    COLLAR_PHASE_CALL,         /* set-up (registration, continuation) */
    COLLAR_PHASE_COUNT
} collar_phase_t;

const char *collar_phase_name(collar_phase_t phase);

/* A span being observed: its start (ns, CLOCK_MONOTONIC; 0: not begun)
 * and its NVTX range.  Zeroed, it is not begun. */
typedef struct {
    uint64_t t0;
    uint64_t range;
    uint32_t id;      /* an operation's number in this process */
    uint16_t coll;    /* an operation's collar_coll_t, collar_alg_t */
    uint16_t alg;
} collar_obs_t;

/* Where a phase ran in the timeline. */
typedef enum {
    COLLAR_TRACK_COLL,        /* the collectives */
    COLLAR_TRACK_MPI,         /* MPI calls */
    COLLAR_TRACK_HOST,        /* host work */
    COLLAR_TRACK_STREAM       /* device stream n: COLLAR_TRACK_STREAM + n */
} collar_track_t;

/* At MPI_Init, after the configuration and right after a collective over
 * MPI_COMM_WORLD (the moment every rank's timeline is aligned on): the
 * NVTX domain when a tool is attached, the trace's ring buffer. */
void collar_observe_init(int rank);
/* At MPI_Finalize, with nothing outstanding: write the trace, end. */
void collar_observe_finalize(void);
uint64_t collar_obs_now(void);
/* An operation (an id for its steps: the trace's op number). */
void collar_obs_coll_begin(collar_obs_t *o, collar_coll_t coll,
                           collar_alg_t alg, size_t bytes);
void collar_obs_coll_end(collar_obs_t *o, collar_coll_t coll, collar_alg_t alg,
                         size_t bytes);
/* A phase of the operation `op` (the t0 of its collar_obs_t).  `start`,
 * `end`: when the work actually ran, where known (0: the begin and end
 * calls' times); `index`: the step's number in its schedule (-1: none). */
void collar_obs_phase_begin(collar_obs_t *o, collar_phase_t phase,
                            size_t bytes);
void collar_obs_phase_end(collar_obs_t *o, collar_phase_t phase, size_t bytes,
                          int track, const collar_obs_t *op, int index,
                          uint64_t start, uint64_t end);

/* ------------------------------------------------------- consistency check */

/*
 * COLLAR_CHECK=1 (src/core/check.c, docs/reliability.md): before collar
 * issues anything of an allreduce, all ranks of the communicator verify
 * that they agree on what this call is and on what collar runs for it.
 *
 * What the fingerprint holds is every input that decides which
 * collectives collar issues for the call, on which communicator, in
 * which order: the call's arguments, and each rank-local setting that
 * reaches that decision, resolved as it is used:
 *   the memory kind of the buffers    COLLAR_DEVICE, the buffers
 *   the rules in force (their hash)   COLLAR_TUNING_FILE, COLLAR_TUNING_DIR,
 *                                     COLLAR_ALLREDUCE_RULES
 *   the algorithm after eligibility   COLLAR_ALGORITHM (and the above)
 *   the chunk of chunked and ring     COLLAR_CHUNK_SIZE
 *   whether the MPI library takes     COLLAR_MPI_CUDA_AWARE: native or
 *   device pointers (device calls)    staged, ring's and hier's direct
 *                                     messages, and whether the library's
 *                                     form copies to the host, runs on
 *                                     collar's communicator and adds a
 *                                     status agreement
 *   the form (form below)             the effect of all of them on the
 *                                     library's form
 * Settings that do not appear are agreed by collar where they matter
 * (COLLAR_PROGRESS: whether every rank runs the progress thread; ipc's
 * zero-copy settings; NCCL's availability; collar's communicator), or
 * change no collective (logging, statistics, the staging pool, copies).
 * A new input that changes what collar issues belongs here.
 */
typedef enum {
    COLLAR_CHECK_FORM_NONE = 0,    /* not said (collar's core used alone) */
    COLLAR_CHECK_FORM_SCHEDULE,    /* collar's schedule */
    COLLAR_CHECK_FORM_LIBRARY,     /* the MPI library's allreduce on the
                                    * buffers, on the application's
                                    * communicator */
    COLLAR_CHECK_FORM_STAGED_APP,  /* the MPI library's allreduce on host
                                    * copies, then a status agreement, on
                                    * the application's communicator */
    COLLAR_CHECK_FORM_STAGED_OWN,  /* the same on collar's communicator */
} collar_check_form_t;

typedef struct {
    int               nonblocking;  /* MPI_Iallreduce */
    int               persistent;   /* MPI_Allreduce_init */
    MPI_Count         count;        /* whole: the _c bindings take 64 bits */
    MPI_Datatype      dtype;        /* compared by MPI_Type_size_x */
    MPI_Op            op;           /* predefined ops by identity */
    collar_mem_kind_t mem;          /* as collar classified the buffers:
                                     * device if either is not host */
    collar_mem_kind_t smem, rmem;   /* each buffer's (in place: smem = rmem),
                                     * named in the message, not compared */
    collar_alg_t      alg;          /* selected, after eligibility */
    size_t            chunk;        /* in force for chunked and ring, else 0 */
    int               devptr;       /* a device call: 2 the MPI library
                                     * takes device pointers, 1 it does not
                                     * (COLLAR_MPI_CUDA_AWARE, resolved);
                                     * 0 a host call */
    collar_check_form_t form;       /* as far as it is decided when the
                                     * check is issued (a blocking call's
                                     * is before collar's communicator) */
} collar_check_call_t;

/* Advances collar's outstanding operations; nonzero if any is outstanding. */
typedef int (*collar_check_progress_fn_t)(void);

/* A blocking call: collective over `comm` (an intercommunicator is not
 * checked), on comm itself: MPI_SUCCESS when every rank agrees; otherwise
 * one message on every rank naming what differs and which ranks have which
 * value, then the error through comm's error handler, returned
 * (MPI_ERR_ARG: the arguments differ; MPI_ERR_OTHER: only collar's
 * configuration does).  `progress` runs while it waits. */
int collar_check_allreduce(MPI_Comm comm, const collar_check_call_t *call,
                           collar_check_progress_fn_t progress);

/* A nonblocking or persistent start: the check travels with the operation.
 * collar_check_start issues its collective on comm, the same nonblocking
 * collective as every other call's (a persistent call's at its init,
 * once: its arguments are fixed there), and gives the check (NULL: not
 * checked, an intercommunicator); an error is returned, not raised.  Once
 * its request (collar_check_request) is complete, collar_check_result says
 * MPI_SUCCESS, or logs the message and gives the error for the operation
 * to end with. */
typedef struct collar_check collar_check_t;
int collar_check_start(MPI_Comm comm, const collar_check_call_t *call,
                       collar_check_t **out);
MPI_Request *collar_check_request(collar_check_t *ck);
int collar_check_result(const collar_check_t *ck);
void collar_check_free(collar_check_t *ck);

/* ---------------------------------------------------------------- leftovers */

/*
 * What a nonblocking or persistent start that failed here leaves behind
 * (src/core/leftover.c): collectives it issued before the failure, which
 * the other ranks match with theirs.  The start returns its error without
 * waiting for them; they are tested by collar_leftover_poll (collar's
 * progress) and waited for by collar_leftover_drain (MPI_Comm_free of
 * their communicator, MPI_Finalize), then `advance` releases what they
 * hold.  The entry lives in what it describes: adding one cannot fail.
 */
typedef struct collar_leftover collar_leftover_t;
/* Test (wait: complete) what `l` left; 1 when it is over and released. */
typedef int (*collar_leftover_fn_t)(collar_leftover_t *l, int wait);
struct collar_leftover {
    collar_leftover_t   *next;
    collar_leftover_fn_t advance;
    MPI_Comm             comm;     /* the application's communicator */
};
void collar_leftover_add(collar_leftover_t *l, MPI_Comm comm,
                         collar_leftover_fn_t advance);
void collar_leftover_poll(void);
/* Complete every entry on `comm` (MPI_COMM_NULL: every entry). */
void collar_leftover_drain(MPI_Comm comm);

/* ---------------------------------------------------------------- schedule */

typedef enum {
    COLLAR_STEP_COPY,         /* device copy (either direction) */
    COLLAR_STEP_DEV_REDUCE,   /* reduction on the device stream */
    COLLAR_STEP_DEV_REDUCE_N, /* n inputs into one output, on the device
                                 stream (dev->reduce_n_async) */
    COLLAR_STEP_HOST_REDUCE,  /* reduction on the host, inline */
    COLLAR_STEP_IALLREDUCE,   /* PMPI_Iallreduce on the private comm */
    COLLAR_STEP_ISEND,        /* PMPI_Isend on the private comm */
    COLLAR_STEP_IRECV,        /* PMPI_Irecv on the private comm */
    COLLAR_STEP_ORDER,        /* order after the caller's device work */
    COLLAR_STEP_REQUEST,      /* an MPI request issued outside the schedule
                                 (the user's collective on host copies):
                                 taken from *u.request.req when the step is
                                 reached, then polled */
    COLLAR_STEP_AGREE,        /* status agreement: MPI_MAX of "failed here" */
    COLLAR_STEP_CALL          /* a function of the builder's, polled until
                                 it says done; it may append steps (a
                                 continuation: u.call.extends) */
} collar_step_kind_t;

#define COLLAR_STEP_MAX_DEPS 4

struct collar_sched;
/* A CALL step's function: COLLAR_OK when done, COLLAR_INPROGRESS to be
 * called again at the next progress, an error to fail the schedule.  It
 * runs under the schedules' lock, also while the schedule drains (it sees
 * s->status), and may append steps with collar_sched_add when the step
 * was added with u.call.extends set. */
typedef collar_status_t (*collar_step_fn_t)(struct collar_sched *s, void *arg);

/* The communicator of an IALLREDUCE step (collar_comm_t): the private one
 * unless the step says otherwise. */
typedef enum {
    COLLAR_STEP_ON_PRIVATE,   /* private_comm: every rank */
    COLLAR_STEP_ON_NODE,      /* node_sched: the ranks of this node */
    COLLAR_STEP_ON_CROSS      /* cross_comm: this node_rank on every node */
} collar_step_comm_t;

typedef struct {
    collar_step_kind_t kind;
    uint8_t            state;  /* collar_step_state_t, private to schedule.c */
    uint8_t            ndeps;
    uint8_t            once;   /* done once for good: collar_sched_rewind
                                  leaves it done (set-up steps of a
                                  persistent operation) */
    int                deps[COLLAR_STEP_MAX_DEPS];
    union {
        /* cpu: the backend may do it by the CPU at issue (copy_now). */
        struct {
            void *dst; const void *src; size_t bytes; int stream; int cpu;
        } copy;
        struct {
            void *inout; const void *in; size_t count;
            collar_dtype_t dt; collar_op_t op; int stream;
        } reduce;
        struct {
            const void *sbuf; void *rbuf; int count;
            MPI_Datatype dt; MPI_Op op;
            int ord;  /* set by collar_sched_add: n-th collective step */
            int on;   /* collar_step_comm_t: which communicator */
            /* The status agreement folded into this allreduce
             * (collar_sched_fold_agree): the element at `fold`, of type
             * fold_dt, is 1 on a rank that failed and 0 on the others when
             * fold_fail is 1 (MPI_SUM, MAX, BOR, LOR), the other way round
             * when it is 0 (PROD, MIN, BAND, LAND); NULL: none. */
            void *fold;
            collar_dtype_t fold_dt;
            int fold_fail;
            /* Issued as the blocking PMPI_Allreduce
             * (collar_sched_block_colls). */
            int blocking;
        } allreduce;
        struct {
            void *dst; const void *src[COLLAR_REDUCE_N_MAX]; int n;
            size_t count; collar_dtype_t dt; collar_op_t op; int stream;
        } reduce_n;
        struct { void *buf; int count; MPI_Datatype dt; int peer; int tag; } p2p;
        /* agree: the step is (part of) the status agreement, for tools. */
        struct { const MPI_Request *req; int agree; } request;
        struct { collar_step_fn_t fn; void *arg; int extends; int agree; } call;
    } u;
    MPI_Request    req;
    collar_event_t ev;
    collar_obs_t   obs;    /* while COLLAR_OBS_STEPS observe it */
} collar_step_t;

typedef struct collar_sched collar_sched_t;
typedef void (*collar_sched_cleanup_fn_t)(collar_sched_t *s);

/* What a schedule's buffer is: staging of one of its kinds, or device
 * scratch. */
enum {
    COLLAR_SLOT_PINNED = COLLAR_STAGING_PINNED,
    COLLAR_SLOT_HEAP = COLLAR_STAGING_HEAP,
    COLLAR_SLOT_DRAIN = COLLAR_STAGING_DRAIN,
    COLLAR_SLOT_SCRATCH
};

struct collar_sched {
    collar_step_t         *steps;
    int                    nsteps;
    int                    cap;
    int                    ndone;
    int                    first_open;   /* steps below are all done */
    int                    ncoll;        /* collective steps in the schedule */
    int                    coll_issued;  /* collective steps issued so far */
    int                    nactive;      /* steps issued, not yet complete */
    int                    nextend;      /* CALL steps that may still append
                                            steps (the turn is held for
                                            them) */
    int                    extending;    /* a CALL step is appending now */
    collar_comm_t         *comm;
    uint64_t               seq;          /* tags: per-communicator number */
    uint64_t               ticket;       /* order of internal collectives */
    int                    started;
    int                    turn_done;    /* passed coll_turn on */
    const collar_device_t *dev;
    collar_status_t        status;       /* first error, or OK */
    int                    mpi_error;    /* MPI error code of that error */
    int                    finished;
    int                    pmpi_device_ok; /* PMPI may be handed device scratch */
    int                    agree_in;     /* this rank failed (AGREE step) */
    int                    agree_out;    /* some rank failed */
    /* Buffers from the staging pools, released by collar_sched_destroy. */
    void                  *staging[4];
    size_t                 staging_len[4];
    unsigned char          staging_kind[4];     /* COLLAR_SLOT_* */
    int                    nstaging;
    /* Called by collar_sched_destroy (e.g. to free what the builder owns). */
    collar_sched_cleanup_fn_t cleanup;
    void                  *cleanup_arg;
    /* Bookkeeping owned by the layer that runs it. */
    collar_sched_t        *next;
    void                  *owner;
    /* Called when the schedule finishes, instead of completing a request
     * (persistent operations: the schedule is run again). */
    collar_sched_cleanup_fn_t on_finish;
    /* No request and no caller: destroyed when it finishes
     * (collar_run_detached). */
    int                    detached;
    /* Set by the builder: each device step (copy, kernel) of the schedule
     * is the only thing it can do until that step is done (one copy in,
     * a host allreduce, one copy out: staged; ipc one-shot).  In a
     * blocking call (`blocking`, set by the engine) the host then waits
     * for each such step as it issues it, with no event to record and
     * poll (docs/cuda.md, "Synchronisations per call"). */
    int                    serial_device;
    /* The caller waits for it (collar_run_blocking): serial device steps
     * are waited for as they are issued. */
    int                    blocking;
    /* Its collectives block (collar_sched_block_colls): the calling thread
     * runs it, off the list of outstanding operations. */
    int                    run_here;
    int                    stats_on;     /* record `stats` when finished */
    double                 stats_t0;
    /* What the operation is (coll, alg, bytes: set whether statistics
     * are on or not), for statistics and observation. */
    collar_stats_call_t    stats;
    /* COLLAR_CHECK on a nonblocking or persistent start (freed with the
     * schedule): nothing of the schedule is issued until the check's
     * request is complete and every rank agrees.  A disagreement, the same
     * on every rank, ends the schedule at once with its error (abandoned:
     * none of its steps was issued, and what the caller started before it,
     * the library's own collective, is left to the library). */
    collar_check_t        *check;
    int                    check_done;
    int                    abandoned;
    /* Observation (collar_observe): the operation's span (begun by the
     * conductor, else by collar_sched_start), and the application's
     * buffers, which tell a copy-in from a copy-out. */
    collar_obs_t           obs;
    const void            *obs_send;
    size_t                 obs_send_len;
    const void            *obs_recv;
    size_t                 obs_recv_len;
};

/* An empty schedule for an operation on `comm` (takes the next seq). */
collar_status_t collar_sched_create(collar_comm_t *comm,
                                    const collar_device_t *dev,
                                    collar_sched_t **sched);
void collar_sched_destroy(collar_sched_t *s);
/* Append a step; returns its index in *index (for dependencies).  Before
 * collar_sched_start, or from a CALL step added with u.call.extends. */
collar_status_t collar_sched_add(collar_sched_t *s, const collar_step_t *step,
                                 int *index);
/* A staging buffer owned by the schedule (freed with it): pinned, else
 * pageable host memory (collar_staging_get), either of which carries the
 * data.  When there is neither, the schedule fails (the error it finishes
 * with) and drains: it gets drain memory (collar_drain_get) for its
 * messages, so that it still issues the messages and collectives the other
 * ranks expect of it, and they learn of the failure from the status
 * agreement.  Not even drain memory: the job ends (collar_fail_stop), as
 * the other ranks would wait for this one (an error where the schedule
 * has no peers). */
collar_status_t collar_sched_staging(collar_sched_t *s, size_t bytes,
                                     void **ptr);
/* Device scratch owned by the schedule; when the device has none to give,
 * pinned host memory (which device kernels can read), with one warning;
 * when there is none of that either, the schedule fails and drains, as
 * collar_sched_staging without any host memory. */
collar_status_t collar_sched_scratch(collar_sched_t *s, size_t bytes,
                                     void **ptr);
/*
 * Mark the schedule complete to build: from here its internal collectives
 * take their turn on the communicator, in the order schedules were started,
 * so that every rank issues them in the same order whatever order the
 * application waits in.
 */
void collar_sched_start(collar_sched_t *s);
/*
 * Make a finished (or never started) schedule runnable again, with the same
 * steps, buffers and tags: every step pending, no error.  For persistent
 * operations; collar_sched_start then takes a new turn.
 */
void collar_sched_rewind(collar_sched_t *s);
/* Mark a schedule failed before it starts (a failure of the layer that
 * built it, e.g. staging): it drains like one whose step failed. */
void collar_sched_fail(collar_sched_t *s, collar_status_t st);
/*
 * Under COLLAR_SIM_STRICT=1, collar_sched_start first checks that no buffer
 * a step hands to PMPI overlaps device scratch (dev->is_dev_scratch) unless
 * s->pmpi_device_ok, and aborts with a message if one does.  The check
 * alone: COLLAR_OK, or COLLAR_ERR_INVALID naming the first such step.
 */
collar_status_t collar_sched_check_pmpi(const collar_sched_t *s);
/* The application's buffers of the operation (observation only: a copy
 * from `send` is a copy-in, one into `recv` a copy-out). */
void collar_sched_observe_buffers(collar_sched_t *s, const void *send,
                                  size_t send_len, const void *recv,
                                  size_t recv_len);
/* 1 when steps [first, first + n) are all done (for CALL steps that wait
 * for more steps than COLLAR_STEP_MAX_DEPS). */
int collar_sched_steps_done(const collar_sched_t *s, int first, int n);
/*
 * Append the status agreement, the schedule's last collective step: a
 * nonblocking MPI_MAX allreduce of one int, "this rank has failed", on the
 * private communicator.  A rank whose own steps all worked but that learns
 * of a failure elsewhere finishes with MPI_ERR_OTHER instead of a result
 * built on a failed rank's data.  after_all = 0: issued right after the
 * schedule's other collectives (when they carry the rank's whole
 * contribution, as in staged and chunked); 1: once every other step is
 * done (the ring, whose every reduction feeds what it sends).
 */
collar_status_t collar_sched_add_agree(collar_sched_t *s, int after_all);
/* Whether the status agreement can ride in an allreduce of (dt, op) on
 * `comm_size` ranks as one more element (collar_sched_fold_agree). */
int collar_sched_can_fold(collar_dtype_t dt, collar_op_t op, int comm_size);
/* Fold the status agreement into allreduce step `index`, whose last
 * element (at `flag`, of type dt, reduced with op) is collar's: written at
 * issue, read at completion (out of place: at the same offset in the
 * receive buffer). */
void collar_sched_fold_agree(collar_sched_t *s, int index, void *flag,
                             collar_dtype_t dt, collar_op_t op);
/*
 * Issue every collective step of `s` as the blocking PMPI_Allreduce instead
 * of PMPI_Iallreduce and a loop of tests: for a schedule of a blocking call
 * (collar_call_t.blocking, the same on every rank) in which nothing else
 * overlaps its collectives, so that nothing is lost by waiting in the MPI
 * library.  The builder decides it from the call alone, alike on every
 * rank: a blocking collective does not match a nonblocking one.  The
 * caller's thread runs such a schedule itself (collar_run_blocking),
 * outside the progress lock, so that other threads and the progress thread
 * go on while it waits in the MPI library.
 */
void collar_sched_block_colls(collar_sched_t *s);
/* Collective step `index` alone, in a schedule its builder set to run in
 * the calling thread (s->run_here: before collar_sched_start, decided
 * from the call alone); may be called from a continuation.  Nothing else
 * of the schedule may be in flight when the step is issued. */
void collar_sched_block_coll(collar_sched_t *s, int index);
/*
 * Advance: issue every step whose dependencies are done, complete what has
 * completed.  Returns COLLAR_OK when the schedule is finished (successfully
 * or not: see s->status), COLLAR_INPROGRESS otherwise.
 */
collar_status_t collar_sched_progress(collar_sched_t *s);

#endif /* COLLAR_CORE_H */
