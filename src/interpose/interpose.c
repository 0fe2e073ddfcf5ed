/*
 * collar - the exported MPI_* symbols.
 *
 * Through the MPI profiling interface: each wrapper does its part and calls
 * the PMPI_* entry point of the MPI library.  Before MPI_Init, after
 * MPI_Finalize, under COLLAR_DISABLE=1 and in a process that never calls MPI
 * (mpirun itself, a shell), every call goes straight to the MPI library.
 */
#include "config.h"
#include "interpose.h"
#include "abi.h"
#include "collar.h"


#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STATE_OFF, STATE_ACTIVE, STATE_DISABLED, STATE_FINALIZED };

static int state = STATE_OFF;
/* Host buffers only and nothing forced: every allreduce is native. */
static int pass_all;
/* Every allreduce goes straight to the MPI library: not active, or pass_all
 * with nothing to record.  One load on the hot path. */
static int straight = 1;
/* A device backend classifies buffers, and a call on host memory is native
 * whatever its size or communicator, with nothing to check or log for it:
 * such a call goes to the MPI library right after the classification of
 * its buffers (collar_allreduce, host_call). */
static int host_direct;
/* host_direct with nothing to record: the wrappers hand such a call on
 * themselves when its buffers are in the backend's host ranges. */
static int host_straight;
static collar_ranges_t *host_ranges;
/* The MPI library takes device pointers (native is eligible for them). */
static int mpi_cuda_aware;
static const collar_device_t *dev = &collar_device_none;

COLLAR_EXPORT const char *collar_version(void)
{
    return PACKAGE_VERSION;
}

COLLAR_EXPORT int collar_active(void)
{
    return state == STATE_ACTIVE;
}

COLLAR_EXPORT const char *collar_device_name(void)
{
    return state == STATE_ACTIVE ? dev->name : "none";
}

/*
 * The short ways through an allreduce, from the configuration and the
 * backend (at MPI_Init and when the algorithm is set):
 *   pass_all       no device and every host rule native: every call is
 *                  native;
 *   straight       pass_all with no statistics: the wrapper is one load;
 *   host_direct    a device backend and every host rule native: a call on
 *                  host memory is native, decided by its classification;
 *   host_straight  host_direct with no statistics: the wrapper classifies
 *                  and calls the MPI library.
 * Not under COLLAR_CHECK (every call is checked across ranks); host_direct
 * not where the choice of each call is logged (info level, subsystem coll).
 */
static void decide_paths(void)
{
    const int host_native = collar_select_host_native() && !collar_cfg.check;
    pass_all = dev == &collar_device_none && host_native;
    straight = pass_all && !collar_stats_on;
    host_direct = dev != &collar_device_none && host_native
                  && !collar_log_enabled(COLLAR_LOG_INFO, COLLAR_SUB_COLL);
    host_straight = host_direct && !collar_stats_on;
}

COLLAR_EXPORT int collar_set_algorithm(const char *name, size_t chunk)
{
    if (state != STATE_ACTIVE || name == NULL) {
        return -1;
    }
    int alg = strcmp(name, "auto") == 0 ? COLLAR_ALG_AUTO
                                        : collar_alg_from_name(name, strlen(name));
    if (alg < 0) {
        return -1;
    }
    collar_cfg.algorithm = (collar_alg_t)alg;
    collar_cfg.chunk_size = chunk;
    decide_paths();
    collar_debug(COLL, "algorithm set to %s, chunk %zu", name, chunk);
    return 0;
}

/* The algorithm of the thread's last selected allreduce (-1: none yet). */
static _Thread_local int last_alg = -1;

COLLAR_EXPORT int collar_communicators(void)
{
    return collar_comm_count();
}

COLLAR_EXPORT const char *collar_last_algorithm(void)
{
    return last_alg < 0 ? NULL : collar_alg_name((collar_alg_t)last_alg);
}

/* ------------------------------------------------------ start-up, shut-down */

/* Thread levels: what the MPI library gave, what the application is told
 * (see init_thread); -1 before MPI_Init. */
static int lib_level = -1;
static int app_level = -1;

/* COLLAR_DISABLE=1 (read before MPI starts, and before the configuration). */
static int disabled_by_env(void)
{
    const char *disable = getenv("COLLAR_DISABLE");
    int off = 0;
    return disable != NULL && collar_parse_bool(disable, &off) == COLLAR_OK && off;
}

/*
 * Progress outside the waits (COLLAR_PROGRESS): the thread where the library
 * gives MPI_THREAD_MULTIPLE (auto: only because the application asked for
 * it; thread: collar asked for it too, see init_thread); and, unless
 * COLLAR_PROGRESS=wait, the blocking point-to-point wrappers (blocking.c).
 */
static void start_progress(int rank)
{
    if (collar_cfg.progress == COLLAR_PROGRESS_WAIT) {
        return;
    }
    collar_progress_calls_enable();
    int level = lib_level;
    if (level < 0 && PMPI_Query_thread(&level) != MPI_SUCCESS) {
        level = MPI_THREAD_SINGLE;
    }
    if (level >= MPI_THREAD_MULTIPLE) {
        collar_progress_thread_enable(collar_cfg.progress_interval_us);
        return;
    }
    if (rank == 0 && collar_cfg.progress == COLLAR_PROGRESS_THREAD) {
        collar_info(INIT, "no progress thread: the MPI library gives thread "
                    "level %d, not MPI_THREAD_MULTIPLE (%s); collar's "
                    "operations progress inside MPI_Wait*/MPI_Test* and the "
                    "blocking point-to-point calls (COLLAR_PROGRESS)", level,
                    dev == &collar_device_none ? "no device backend, so "
                    "collar did not ask for it" : "the library's choice");
    }
}

static void collar_startup(void)
{
    int rank = 0, size = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    collar_log_set_rank(rank);
    /* Disabled means silent: decided before the configuration is read (and
     * logged).  A malformed COLLAR_DISABLE is reported by the table below. */
    if (disabled_by_env()) {
        state = STATE_DISABLED;
        return;
    }
    collar_config_load_quiet(rank != 0);
    collar_log_open(collar_cfg.log_file);
    if (collar_select_init() != COLLAR_OK) {
        state = STATE_DISABLED;
        collar_warn(INIT, "collar cannot start; every call passes through");
        return;
    }
    dev = collar_device_open(collar_cfg.device);
    if (collar_comm_init(dev != &collar_device_none) != COLLAR_OK) {
        collar_device_close();
        dev = &collar_device_none;
        collar_select_finalize();
        state = STATE_DISABLED;
        collar_warn(INIT, "collar cannot start; every call passes through");
        return;
    }
    host_ranges = collar_mem_host_ranges();
    mpi_cuda_aware = collar_mpi_cuda_aware();
    /* MPI_COMM_WORLD's private duplicate, here where every process is in
     * MPI_Init: the communicator most nonblocking allreduces run on gets
     * collar's algorithms from its first call (other communicators get
     * theirs from their first blocking allreduce, collar_comm_get).  Where
     * some process has a device backend, or an algorithm is forced (alike
     * on every process). */
    if (collar_comm_world_wanted()
        || (collar_cfg.algorithm != COLLAR_ALG_AUTO
            && collar_cfg.algorithm != COLLAR_ALG_NATIVE)) {
        collar_comm_t *world = NULL;
        (void)collar_comm_get(MPI_COMM_WORLD, 1, &world);
    }
    collar_stats_init();
    collar_stats_set_tuning_source(collar_select_sources());
    decide_paths();
    state = STATE_ACTIVE;
    collar_colls_start(dev, mpi_cuda_aware);
    start_progress(rank);
    if (rank == 0) {
        collar_info(INIT, "collar %s active: %d ranks, device %s, algorithm %s, "
                    "MPI %s device pointers", PACKAGE_VERSION, size, dev->name,
                    collar_alg_name(collar_cfg.algorithm),
                    mpi_cuda_aware ? "takes" : "does not take");
    }
}

static void collar_shutdown(void)
{
    straight = 1;
    host_straight = 0;
    collar_progress_thread_stop();
    collar_colls_stop();
    if (state != STATE_ACTIVE) {
        state = STATE_FINALIZED;
        return;
    }
    collar_run_drain();
    collar_persist_finalize();
    collar_stats_report(MPI_COMM_WORLD);
    collar_check_finalize();
    collar_comm_finalize();
    collar_pool_release_all();
    host_ranges = NULL;
    collar_device_close();
    collar_select_finalize();
    state = STATE_FINALIZED;
    collar_log_close();
}

/*
 * Thread levels.  The progress thread calls the MPI library beside the
 * application's threads, which needs MPI_THREAD_MULTIPLE, and at that level
 * the library pays for its locks on every call and some components refuse
 * to run (Open MPI's osc pt2pt: MPI_Win_create fails), so collar asks for
 * it only with COLLAR_PROGRESS=thread and only where its operations can run:
 * a device backend can be active (decided here, before MPI starts, from the
 * environment and, for cuda, the driver's device count), or COLLAR_ALGORITHM
 * sends host buffers through collar's own algorithms.  The application is
 * told the level it asked for (which the library then gives: a higher level
 * includes the lower ones), so that MPI_Query_thread answers as it would
 * without collar.
 */
static int raise_thread_level(int required)
{
    if (disabled_by_env()) {
        return 0;
    }
    if (required >= MPI_THREAD_MULTIPLE
        || collar_config_env_choice("COLLAR_PROGRESS") != COLLAR_PROGRESS_THREAD) {
        return 0;
    }
    const int alg = collar_config_env_choice("COLLAR_ALGORITHM");
    if (alg != COLLAR_ALG_AUTO && alg != COLLAR_ALG_NATIVE) {
        return 1;
    }
    return collar_device_may_open(
        (collar_device_kind_t)collar_config_env_choice("COLLAR_DEVICE"));
}

static int init_thread(int *argc, char ***argv, int required, int *provided)
{
    if (!collar_abi_ok()) {
        /* Built for another MPI library (abi.c): collar stays off. */
        state = STATE_DISABLED;
        return PMPI_Init_thread(argc, argv, required, provided);
    }
    const int level = raise_thread_level(required) ? MPI_THREAD_MULTIPLE
                                                   : required;
    int got = MPI_THREAD_SINGLE;
    int rc = PMPI_Init_thread(argc, argv, level, &got);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    lib_level = got;
    app_level = level != required && got >= required ? required : got;
    if (provided != NULL) {
        *provided = app_level;
    }
    collar_startup();
    return rc;
}

COLLAR_EXPORT int MPI_Init(int *argc, char ***argv)
{
    if (!collar_abi_ok()) {
        state = STATE_DISABLED;
        return PMPI_Init(argc, argv);
    }
    if (!raise_thread_level(MPI_THREAD_SINGLE)) {
        int rc = PMPI_Init(argc, argv);
        if (rc == MPI_SUCCESS) {
            collar_startup();
        }
        return rc;
    }
    return init_thread(argc, argv, MPI_THREAD_SINGLE, NULL);
}

COLLAR_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required,
                                  int *provided)
{
    return init_thread(argc, argv, required, provided);
}

/*
 * collar is preloaded but MPI started without collar's MPI_Init: say so,
 * once, at info level, from the first rank (by the launcher's rank
 * variables: MPI_COMM_WORLD may not exist), instead of passing every call
 * on in silence.
 */
static void say_inactive(const char *why)
{
    static int said;
    if (said || state != STATE_OFF) {
        return;
    }
    said = 1;
    const char *r = getenv("PMI_RANK");
    if (r == NULL) {
        r = getenv("OMPI_COMM_WORLD_RANK");
    }
    const int rank = r != NULL ? atoi(r) : 0;
    collar_log_set_rank(rank);
    collar_config_load_quiet(rank != 0);
    collar_log_open(collar_cfg.log_file);
    if (rank == 0) {
        collar_info(INIT, "collar is not active: %s; every call went straight "
                    "to the MPI library", why);
    }
    collar_log_close();
}

#if defined(HAVE_PMPI_SESSION_INIT)
/*
 * MPI-4 sessions: collar starts at MPI_Init / MPI_Init_thread (it needs
 * MPI_COMM_WORLD for its statistics and its configuration's agreement), so
 * a program that only uses sessions runs without collar.
 */
COLLAR_EXPORT int MPI_Session_init(MPI_Info info, MPI_Errhandler errhandler,
                                   MPI_Session *session)
{
    int rc = PMPI_Session_init(info, errhandler, session);
    if (rc == MPI_SUCCESS) {
        say_inactive("the program started MPI with MPI_Session_init, and "
                     "collar starts at MPI_Init or MPI_Init_thread (sessions "
                     "are not supported)");
    }
    return rc;
}
#endif

/*
 * At exit: MPI was started, but not through collar's MPI_Init.  The MPI
 * library's own MPI_Init was called directly: by a library loaded with
 * RTLD_DEEPBIND or linked with -Bsymbolic against the MPI library, by a
 * statically linked MPI, or by a Fortran layer collar does not know.  (A
 * library loaded after collar, with dlopen, reaches collar's MPI_Init like
 * the program itself: tests/mpi/dlopen.test.)  Nothing at all is said in a
 * process that never started MPI (mpirun, a shell).
 */
__attribute__((destructor)) static void collar_unseen_init(void)
{
    int init = 0;
    if (state != STATE_OFF || !collar_abi_ok()
        || PMPI_Initialized(&init) != MPI_SUCCESS || !init) {
        return;
    }
    say_inactive("MPI_Init was called without reaching collar's MPI_Init (a "
                 "library bound to the MPI library directly: RTLD_DEEPBIND, "
                 "-Bsymbolic, a static MPI, or a Fortran layer collar does "
                 "not wrap)");
}

COLLAR_EXPORT int MPI_Query_thread(int *provided)
{
    if (app_level < 0 || provided == NULL) {
        return PMPI_Query_thread(provided);
    }
    *provided = app_level;
    return MPI_SUCCESS;
}

COLLAR_EXPORT int MPI_Finalize(void)
{
    collar_shutdown();
    return PMPI_Finalize();
}

/* ---------------------------------------------------------------- allreduce */

static int comm_rank(MPI_Comm comm)
{
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    return rank;
}

/* What the MPI library would do: for calls collar does not take over, and
 * for bad arguments, so that errors are the MPI library's own. */
static int pass_through(const collar_allreduce_args_t *a)
{
#if defined(HAVE_PMPI_ALLREDUCE_C)
    if (a->large) {
        if (a->persistent) {
            return PMPI_Allreduce_init_c(a->sbuf, a->rbuf, a->count, a->dtype,
                                         a->op, a->comm, a->info, a->request);
        }
        if (a->request != NULL) {
            return PMPI_Iallreduce_c(a->sbuf, a->rbuf, a->count, a->dtype,
                                     a->op, a->comm, a->request);
        }
        return PMPI_Allreduce_c(a->sbuf, a->rbuf, a->count, a->dtype, a->op,
                                a->comm);
    }
#endif
    const int count = (int)a->count;
#if defined(HAVE_PMPI_ALLREDUCE_INIT)
    if (a->persistent) {
        return PMPI_Allreduce_init(a->sbuf, a->rbuf, count, a->dtype, a->op,
                                   a->comm, a->info, a->request);
    }
#endif
    if (a->request != NULL) {
        return PMPI_Iallreduce(a->sbuf, a->rbuf, count, a->dtype, a->op, a->comm,
                               a->request);
    }
    return PMPI_Allreduce(a->sbuf, a->rbuf, count, a->dtype, a->op, a->comm);
}

static void stats_done(collar_stats_call_t *stat, double t0)
{
    stat->seconds = PMPI_Wtime() - t0;
    collar_stats_record(stat);
}

/* COLLAR_CHECK=1: all ranks agree on this call and on what runs for it
 * (plan NULL: native on host memory), before anything of it is issued. */
static int check_agree(const collar_allreduce_args_t *a, collar_mem_kind_t mem,
                       collar_mem_kind_t smem, collar_mem_kind_t rmem,
                       const collar_plan_t *plan)
{
    collar_check_call_t c = {
        .nonblocking = a->request != NULL,
        .count = a->count > INT_MAX ? INT_MAX : (int)a->count, .dtype = a->dtype,
        .op = a->op, .mem = mem, .smem = smem, .rmem = rmem,
        .alg = plan ? plan->alg : COLLAR_ALG_NATIVE,
    };
    if (plan != NULL
        && (plan->alg == COLLAR_ALG_CHUNKED || plan->alg == COLLAR_ALG_RING)) {
        c.chunk = plan->chunk ? plan->chunk : COLLAR_DEFAULT_CHUNK;
    }
    int rc = collar_check_allreduce(a->comm, &c, collar_progress_all);
    if (rc != MPI_SUCCESS && a->request != NULL) {
        *a->request = MPI_REQUEST_NULL;
    }
    return rc;
}

/* A persistent allreduce collar runs: its schedule, built once at
 * MPI_Allreduce_init and run again at each MPI_Start. */
typedef struct {
    collar_persist_t    persist;
    collar_sched_t     *sched;
    collar_stats_call_t stat;
} allreduce_persist_t;

static void allreduce_persist_finish(collar_sched_t *s)
{
    allreduce_persist_t *ap = s->owner;
    ap->stat.alg = s->stats.alg;   /* ipc's or hier's fallback, known now */
    collar_persist_finished(&ap->persist, s->status == COLLAR_OK ? MPI_SUCCESS
                                                                 : s->mpi_error);
}

static void allreduce_persist_start(collar_persist_t *p)
{
    allreduce_persist_t *ap = (allreduce_persist_t *)p;
    collar_sched_t *s = ap->sched;
    collar_sched_rewind(s);
    if (collar_stats_on) {
        s->stats = ap->stat;
        s->stats_on = 1;
        s->stats_t0 = PMPI_Wtime();
    }
    collar_sched_start(s);
    collar_run_persistent(s);
}

static void allreduce_persist_destroy(collar_persist_t *p)
{
    allreduce_persist_t *ap = (allreduce_persist_t *)p;
    collar_sched_destroy(ap->sched);
    free(ap);
}

/* MPI_Allreduce_init on what collar runs: the schedule is built (selection,
 * staging buffers, the private communicator) once, here. */
static int allreduce_persist_create(const collar_allreduce_args_t *a,
                                    collar_sched_t *s,
                                    const collar_stats_call_t *stat)
{
    allreduce_persist_t *ap = calloc(1, sizeof(*ap));
    int rc = MPI_ERR_NO_MEM;
    if (ap != NULL) {
        ap->sched = s;
        if (stat != NULL) {
            ap->stat = *stat;
        }
        ap->persist.coll = COLLAR_COLL_ALLREDUCE;
        ap->persist.comm = a->comm;
        ap->persist.start = allreduce_persist_start;
        ap->persist.destroy = allreduce_persist_destroy;
        s->owner = ap;
        s->on_finish = allreduce_persist_finish;
        rc = collar_persist_create(&ap->persist, a->request);
        if (rc == MPI_SUCCESS) {
            return MPI_SUCCESS;
        }
    }
    collar_error(COLL, "cannot create a persistent allreduce request (MPI error %d)", rc);
    free(ap);
    collar_sched_destroy(s);
    PMPI_Comm_call_errhandler(a->comm, rc);
    return rc;
}

/* Host buffers only (pass_all, host_direct) with statistics on: the MPI
 * library's call, timed from t0 and recorded as native on host memory,
 * without selection. */
static int native_recorded(const collar_allreduce_args_t *a,
                           collar_stats_call_t *stat, double t0)
{
    int rc = pass_through(a);
    MPI_Count size = 0;
    if (rc == MPI_SUCCESS && a->count >= 0 && !a->persistent
        && PMPI_Type_size_x(a->dtype, &size) == MPI_SUCCESS) {
        stat->alg = COLLAR_ALG_NATIVE;
        stat->mem = COLLAR_MEM_HOST;
        stat->bytes = (size_t)a->count * (size_t)size;
        stats_done(stat, t0);
    }
    return rc;
}

/* A call collar does not take over (nothing to move, an intercommunicator,
 * bad arguments): the MPI library's own, counted as native. */
static int pass_counted(const collar_allreduce_args_t *a,
                        collar_stats_call_t *stat, double t0)
{
    const MPI_Count count = a->count;
    if (count == 0 && collar_cfg.check && a->comm != MPI_COMM_NULL
        && a->dtype != MPI_DATATYPE_NULL && a->op != MPI_OP_NULL
        && a->rbuf != MPI_IN_PLACE) {
        /* Count 0 is checked too (intercommunicators are not). */
        int rc = check_agree(a, COLLAR_MEM_HOST, COLLAR_MEM_HOST,
                             COLLAR_MEM_HOST, NULL);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
    }
    int rc = pass_through(a);
    if (stat != NULL && rc == MPI_SUCCESS && count >= 0 && !a->persistent) {
        stat->alg = COLLAR_ALG_NATIVE;
        stat->mem = COLLAR_MEM_HOST;
        if (a->rbuf != MPI_IN_PLACE) {
            collar_mem_classify(dev, a->rbuf, &stat->mem);
        }
        MPI_Count size = 0;
        PMPI_Type_size_x(a->dtype, &size);
        stat->bytes = (size_t)count * (size_t)size;
        stats_done(stat, t0);
    }
    return rc;
}

/* The plan of a call is known: said (ipc and hier say it from their
 * schedule, once their IPC memory is known to work or not:
 * collar_ipc_start), kept for collar_last_algorithm, and in the call's
 * statistics record. */
static void plan_chosen(MPI_Comm comm, const collar_select_key_t *key,
                        const collar_plan_t *plan, const collar_call_t *call,
                        collar_stats_call_t *stat)
{
    if (plan->alg != COLLAR_ALG_IPC && plan->alg != COLLAR_ALG_HIER) {
        collar_algo_log_choice(comm_rank(comm), key, plan);
    }
    last_alg = (int)plan->alg;
    if (stat != NULL) {
        stat->alg = plan->alg;
        stat->mem = call->mem;
        stat->bytes = call->bytes;
        if (plan->fallback != NULL) {
            collar_stats_fallback(plan->fallback);
        }
    }
}

/* An allreduce collar may take over: its buffers are classified (rkind,
 * skind), and it is not a host call that host_direct hands on.  Apart from
 * collar_allreduce so that the short ways there pay for none of this
 * frame. */
__attribute__((noinline))
static int allreduce_run(const collar_allreduce_args_t *a,
                         collar_stats_call_t *stat, double t0,
                         collar_mem_kind_t rkind, collar_mem_kind_t skind)
{
    const void *sbuf = a->sbuf;
    void *rbuf = a->rbuf;
    const MPI_Count count = a->count;
    const MPI_Datatype dtype = a->dtype;
    const MPI_Op op = a->op;
    const MPI_Comm comm = a->comm;
    MPI_Request *request = a->request;
    int inter = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) {
        return pass_counted(a, stat, t0);
    }
    collar_call_t call = {
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op,
        .comm = comm, .in_place = sbuf == MPI_IN_PLACE,
        .persistent = a->persistent,
    };
    if (collar_call_describe(&call) != COLLAR_OK) {
        return pass_through(a);
    }
    call.mem = (rkind != COLLAR_MEM_HOST || skind != COLLAR_MEM_HOST)
               ? COLLAR_MEM_DEVICE : COLLAR_MEM_HOST;
    call.rmem = rkind;
    call.dev = dev;

    collar_select_key_t key = {
        .coll = COLLAR_COLL_ALLREDUCE,
        .mem = call.mem,
        .bytes = call.bytes,
        .reducible = call.cdt != COLLAR_DT_NONE && call.cop != COLLAR_OP_NONE
                     && collar_reduce_supported(call.cdt, call.cop),
    };
    PMPI_Comm_size(comm, &key.comm_size);
    collar_plan_t plan;
    collar_select(&key, &plan);
    collar_algo_eligible(&call, mpi_cuda_aware, &plan);
    if (collar_cfg.check) {
        int rc = check_agree(a, call.mem, call.in_place ? rkind : skind,
                             rkind, &plan);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
    }
    collar_algo_build_fn_t build = collar_algo_builder(plan.alg);
    if (build == NULL) {
        plan_chosen(comm, &key, &plan, &call, stat);
        int rc = pass_through(a);
        if (stat != NULL && !a->persistent) {
            /* For a native MPI_Iallreduce this is the time to start it: the
             * MPI library completes it (docs/stats.md). */
            stats_done(stat, t0);
        }
        return rc;
    }
    if (collar_call_validate(&call) != COLLAR_OK) {
        return pass_through(a);
    }

    /* The private communicator: made by a blocking allreduce, never by a
     * nonblocking or persistent start, which would wait for the other
     * ranks (collar_comm_get). */
    const int blocking = request == NULL;
    collar_comm_t *cstate = NULL;
    collar_status_t st = collar_comm_get(comm, blocking, &cstate);
    if (st == COLLAR_OK && cstate->setup != COLLAR_COMM_READY) {
        /* No communicator of collar's (yet): the application's own
         * collective, on host copies of the device buffers. */
        plan.alg = COLLAR_ALG_STAGED;
        plan.fallback = cstate->setup == COLLAR_COMM_NONE
            ? "staged on the application's communicator: the MPI library "
              "gives collar no communicator of its own"
            : "staged on the application's communicator: collar's own "
              "communicator is made by the first blocking allreduce on it";
        build = NULL;
    } else if (st == COLLAR_OK) {
        /* ipc: one node; hier: its communicators, made by a blocking
         * call.  Both known alike on every rank. */
        collar_algo_ipc_eligible(&call, cstate, &plan);
        collar_algo_hier_eligible(&call, cstate, blocking, collar_run_in_turn,
                                  &plan);
        build = collar_algo_builder(plan.alg);
    }
    plan_chosen(comm, &key, &plan, &call, stat);
    if (build == NULL && st == COLLAR_OK) {
        return collar_colls_allreduce(a);
    }

    collar_sched_t *s = NULL;
    if (st == COLLAR_OK) {
        st = collar_sched_create(cstate, dev, &s);
    }
    if (st == COLLAR_OK) {
        if (stat != NULL) {
            s->stats = *stat;
        }
        /* ipc and hier change it when their IPC memory fails (collar_ipc_start). */
        s->stats.alg = plan.alg;
        st = build(&call, &plan, s);
        if (st == COLLAR_OK && stat != NULL) {
            stat->alg = s->stats.alg;
        }
        last_alg = (int)s->stats.alg;
    }
    if (st != COLLAR_OK) {
        collar_error(COLL, "cannot run allreduce with %s: %s",
                     collar_alg_name(plan.alg), collar_status_string(st));
        collar_sched_destroy(s);
        PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
        return MPI_ERR_OTHER;
    }
    if (a->persistent) {
        return allreduce_persist_create(a, s, stat);
    }
    collar_sched_start(s);

    if (request != NULL) {
        if (stat != NULL) {
            s->stats = *stat;
            s->stats_t0 = t0;
            s->stats_on = 1;
        }
        st = collar_run_nonblocking(s, comm, request);
        if (st != COLLAR_OK) {
            /* The schedule is started: run it so that the other ranks,
             * which issue their side, are not left waiting. */
            collar_error(COLL, "cannot create the request of a nonblocking "
                         "allreduce: %s; completing it before returning",
                         collar_status_string(st));
            collar_run_blocking(s);
            collar_sched_destroy(s);
            PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
            return MPI_ERR_OTHER;
        }
        return MPI_SUCCESS;
    }

    collar_run_blocking(s);
    int rc = s->status == COLLAR_OK ? MPI_SUCCESS : s->mpi_error;
    if (stat != NULL) {
        stat->alg = s->stats.alg;
    }
    last_alg = (int)s->stats.alg;
    collar_sched_destroy(s);
    if (stat != NULL) {
        stats_done(stat, t0);
    }
    if (rc != MPI_SUCCESS) {
        PMPI_Comm_call_errhandler(comm, rc);
    }
    return rc;
}

/* Arguments collar looks at; the others go to the MPI library as they are
 * (pass_counted), so that it reports what is wrong with them. */
static inline int args_usable(const void *rbuf, MPI_Count count,
                              MPI_Datatype dtype, MPI_Op op, MPI_Comm comm)
{
    return comm != MPI_COMM_NULL && count > 0 && dtype != MPI_DATATYPE_NULL
           && op != MPI_OP_NULL && rbuf != MPI_IN_PLACE;
}

/* The memory kinds of a call's buffers (sbuf MPI_IN_PLACE: host, only rbuf
 * is looked at). */
static inline collar_status_t classify_buffers(const void *sbuf,
                                               const void *rbuf,
                                               collar_mem_kind_t *rkind,
                                               collar_mem_kind_t *skind)
{
    *skind = COLLAR_MEM_HOST;
    COLLAR_CHECK(collar_mem_classify(dev, rbuf, rkind));
    return sbuf == MPI_IN_PLACE ? COLLAR_OK : collar_mem_classify(dev, sbuf, skind);
}

/* host_straight's test, in the wrappers: the call's buffers are in the
 * backend's host ranges (the classification's answer for them, without a
 * call; rbuf alone in place).  Other host buffers (anonymous mappings: the
 * backend asks the driver) take host_direct's way in collar_allreduce.
 * Its arguments are not checked: with host_straight, collar hands a call
 * with bad arguments to the MPI library as it is, too. */
static inline int host_call(const void *sbuf, const void *rbuf)
{
    return collar_mem_known_host(host_ranges, rbuf,
                                 sbuf == MPI_IN_PLACE ? rbuf : sbuf);
}

int collar_allreduce(const collar_allreduce_args_t *a, collar_stats_call_t *stat)
{
    const double t0 = stat != NULL ? PMPI_Wtime() : 0.0;
    if (!args_usable(a->rbuf, a->count, a->dtype, a->op, a->comm)) {
        return pass_counted(a, stat, t0);
    }
    collar_mem_kind_t rkind, skind;
    if (classify_buffers(a->sbuf, a->rbuf, &rkind, &skind) != COLLAR_OK) {
        return pass_through(a);
    }
    if (host_direct && rkind == COLLAR_MEM_HOST && skind == COLLAR_MEM_HOST) {
        /* Native whatever the communicator (an intercommunicator too) and
         * the size: the MPI library's call, now, before any other
         * question about the call is asked of the MPI library. */
        return stat != NULL ? native_recorded(a, stat, t0) : pass_through(a);
    }
    return allreduce_run(a, stat, t0, rkind, skind);
}

/* Every exported allreduce entry point.  With statistics on, the call site
 * is taken here (frames inside libcollar.so are not the application's and
 * are skipped). */
static int intercept(const collar_allreduce_args_t *a)
{
    if (!collar_stats_on) {
        return collar_allreduce(a, NULL);
    }
    collar_stats_call_t stat = { .coll = COLLAR_COLL_ALLREDUCE };
    stat.npcs = collar_stats_callsite(stat.pcs, COLLAR_STATS_MAX_DEPTH, 1);
    if (pass_all) {
        return native_recorded(a, &stat, PMPI_Wtime());
    }
    return collar_allreduce(a, &stat);
}

/* The blocking and nonblocking bindings past their short ways (apart, so
 * that those need no stack frame). */
__attribute__((noinline))
static int intercept_call(const void *sbuf, void *rbuf, MPI_Count count,
                          MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                          MPI_Request *request, int large)
{
    const collar_allreduce_args_t a = {
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op,
        .comm = comm, .request = request, .large = large,
    };
    return intercept(&a);
}

COLLAR_EXPORT int MPI_Allreduce(const void *sbuf, void *rbuf, int count,
                                MPI_Datatype dtype, MPI_Op op, MPI_Comm comm)
{
    if (straight || state != STATE_ACTIVE
        || (host_straight && host_call(sbuf, rbuf))) {
        return PMPI_Allreduce(sbuf, rbuf, count, dtype, op, comm);
    }
    return intercept_call(sbuf, rbuf, count, dtype, op, comm, NULL, 0);
}

COLLAR_EXPORT int MPI_Iallreduce(const void *sbuf, void *rbuf, int count,
                                 MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                                 MPI_Request *request)
{
    if (straight || state != STATE_ACTIVE || request == NULL
        || (host_straight && host_call(sbuf, rbuf))) {
        return PMPI_Iallreduce(sbuf, rbuf, count, dtype, op, comm, request);
    }
    return intercept_call(sbuf, rbuf, count, dtype, op, comm, request, 0);
}

#if defined(HAVE_PMPI_ALLREDUCE_INIT)
COLLAR_EXPORT int MPI_Allreduce_init(const void *sbuf, void *rbuf, int count,
                                     MPI_Datatype dtype, MPI_Op op,
                                     MPI_Comm comm, MPI_Info info,
                                     MPI_Request *request)
{
    if (straight || state != STATE_ACTIVE || request == NULL) {
        return PMPI_Allreduce_init(sbuf, rbuf, count, dtype, op, comm, info,
                                   request);
    }
    const collar_allreduce_args_t a = {
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op,
        .comm = comm, .request = request, .persistent = 1, .info = info,
    };
    return intercept(&a);
}
#endif

#if defined(HAVE_PMPI_ALLREDUCE_C)
COLLAR_EXPORT int MPI_Allreduce_c(const void *sbuf, void *rbuf, MPI_Count count,
                                  MPI_Datatype dtype, MPI_Op op, MPI_Comm comm)
{
    if (straight || state != STATE_ACTIVE
        || (host_straight && host_call(sbuf, rbuf))) {
        return PMPI_Allreduce_c(sbuf, rbuf, count, dtype, op, comm);
    }
    return intercept_call(sbuf, rbuf, count, dtype, op, comm, NULL, 1);
}

COLLAR_EXPORT int MPI_Iallreduce_c(const void *sbuf, void *rbuf, MPI_Count count,
                                   MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                                   MPI_Request *request)
{
    if (straight || state != STATE_ACTIVE || request == NULL
        || (host_straight && host_call(sbuf, rbuf))) {
        return PMPI_Iallreduce_c(sbuf, rbuf, count, dtype, op, comm, request);
    }
    return intercept_call(sbuf, rbuf, count, dtype, op, comm, request, 1);
}

#if defined(HAVE_PMPI_ALLREDUCE_INIT)
COLLAR_EXPORT int MPI_Allreduce_init_c(const void *sbuf, void *rbuf,
                                       MPI_Count count, MPI_Datatype dtype,
                                       MPI_Op op, MPI_Comm comm, MPI_Info info,
                                       MPI_Request *request)
{
    if (straight || state != STATE_ACTIVE || request == NULL) {
        return PMPI_Allreduce_init_c(sbuf, rbuf, count, dtype, op, comm, info,
                                     request);
    }
    const collar_allreduce_args_t a = {
        .sbuf = sbuf, .rbuf = rbuf, .count = count, .dtype = dtype, .op = op,
        .comm = comm, .request = request, .persistent = 1, .info = info,
        .large = 1,
    };
    return intercept(&a);
}
#endif
#endif /* HAVE_PMPI_ALLREDUCE_C */

/* ------------------------------------------------- completion and progress */

/*
 * While collar has operations outstanding, a wait becomes a loop of progress
 * and the matching test, so that collar's schedules advance while the
 * application waits (for them or for anything else).  With nothing
 * outstanding, the MPI library's own wait runs.  MPI_Waitall's test, and
 * MPI_Testall's over collar's requests, is collar's own (test_all): the
 * library's MPI_Testall does not always answer as its MPI_Waitall does.
 */
void collar_wait_pause(unsigned *spins)
{
    if (++*spins > 64) {
        sched_yield();
    }
}

static int error_class(int rc)
{
    int cls = MPI_ERR_UNKNOWN;
    PMPI_Error_class(rc, &cls);
    return cls;
}

static int status_ignored(const MPI_Status *status)
{
    return status == MPI_STATUS_IGNORE || status == NULL;
}

/*
 * The errors of collar's operations (request.c: the library's completion
 * of collar's requests says success).  Each wrapper holds collar's
 * requests among its arguments (collar_watch_begin) before the library
 * completes them, then reports the error of each one the call completed,
 * through its communicator's handler, as MPI reports its own.
 */

/* One request completed by MPI_Wait, MPI_Test, MPI_Waitany or MPI_Testany
 * with rc: its error as the return code, in the status too. */
static int result_one(collar_watch_t *w, int i, int rc, MPI_Status *status)
{
    if (rc != MPI_SUCCESS || !collar_watch_is_collar(w, i)) {
        return rc;
    }
    const int err = collar_watch_take(w, i);
    if (err != MPI_SUCCESS && !status_ignored(status)) {
        status->MPI_ERROR = err;
    }
    return err;
}

/* Statuses of MPI_ERR_IN_STATUS: from the first error collar adds to a
 * call that succeeded, every status says how its request ended. */
static void statuses_clear(MPI_Status statuses[], int n)
{
    for (int j = 0; j < n; j++) {
        statuses[j].MPI_ERROR = MPI_SUCCESS;
    }
}

/* After MPI_Waitall or MPI_Testall with rc (all complete, or
 * MPI_ERR_IN_STATUS): MPI_ERR_IN_STATUS when one of collar's operations
 * failed, its error in its status, MPI_SUCCESS in the others'. */
static int result_all(collar_watch_t *w, int rc, int count,
                      const MPI_Request requests[], MPI_Status statuses[])
{
    const int in_status = rc != MPI_SUCCESS && error_class(rc) == MPI_ERR_IN_STATUS;
    if (w->found == 0 || (rc != MPI_SUCCESS && !in_status)) {
        return rc;
    }
    const int ignore = statuses == MPI_STATUSES_IGNORE;
    int failed = 0;
    for (int i = 0; i < count; i++) {
        if (!collar_watch_is_collar(w, i)) {
            continue;
        }
        /* After MPI_ERR_IN_STATUS the library may have left requests
         * active (MPICH: MPI_ERR_PENDING); a nonblocking one it completed
         * is freed. */
        if (in_status && (ignore ? requests[i] != MPI_REQUEST_NULL
                                 : error_class(statuses[i].MPI_ERROR) == MPI_ERR_PENDING)) {
            continue;
        }
        const int err = collar_watch_take(w, i);
        if (err == MPI_SUCCESS || ignore) {
            failed |= err != MPI_SUCCESS;
            continue;
        }
        if (!failed && !in_status) {
            statuses_clear(statuses, count);
        }
        failed = 1;
        statuses[i].MPI_ERROR = err;
    }
    return in_status ? rc : failed ? MPI_ERR_IN_STATUS : MPI_SUCCESS;
}

/* After MPI_Waitsome or MPI_Testsome with rc: the same for the outcount
 * requests completed, statuses in the order of indices. */
static int result_some(collar_watch_t *w, int rc, int outcount,
                       const int indices[], MPI_Status statuses[])
{
    const int in_status = rc != MPI_SUCCESS && error_class(rc) == MPI_ERR_IN_STATUS;
    if (w->found == 0 || (rc != MPI_SUCCESS && !in_status)
        || outcount == MPI_UNDEFINED) {
        return rc;
    }
    const int ignore = statuses == MPI_STATUSES_IGNORE;
    int failed = 0;
    for (int j = 0; j < outcount; j++) {
        const int i = indices[j];
        if (!collar_watch_is_collar(w, i)) {
            continue;
        }
        const int err = collar_watch_take(w, i);
        if (err == MPI_SUCCESS || ignore) {
            failed |= err != MPI_SUCCESS;
            continue;
        }
        if (!failed && !in_status) {
            statuses_clear(statuses, outcount);
        }
        failed = 1;
        statuses[j].MPI_ERROR = err;
    }
    return in_status ? rc : failed ? MPI_ERR_IN_STATUS : MPI_SUCCESS;
}

int collar_wait_progress(MPI_Request *request, MPI_Status *status)
{
    unsigned spins = 0;
    for (;;) {
        if (!collar_progress_all()) {
            return PMPI_Wait(request, status);
        }
        int flag = 0;
        int rc = PMPI_Test(request, &flag, status);
        if (rc != MPI_SUCCESS || flag) {
            return rc;
        }
        collar_wait_pause(&spins);
    }
}

COLLAR_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    collar_watch_t w;
    collar_watch_begin(&w, request != NULL ? 1 : 0, request);
    int rc = collar_wait_progress(request, status);
    if (w.found != 0) {
        rc = result_one(&w, 0, rc, status);
        collar_watch_end(&w);
    }
    return rc;
}

/*
 * MPI_Testall with the library's waits: whether every request is complete
 * comes from PMPI_Request_get_status, which completes, deactivates and
 * frees nothing (stopping at the first one that is not); once they all
 * are, the library's own MPI_Waitall completes them, at once, with the
 * statuses and the return code it gives without collar.  Not the
 * library's MPI_Testall: MPICH 4.0's reports MPI_ERR_IN_STATUS when one of
 * its own persistent collective requests (MPI_Barrier_init), complete or
 * inactive, is in the array with a request not yet complete (it knows no
 * error of that kind of request; no status holds an error, the others
 * say MPI_ERR_PENDING), where its MPI_Waitall waits and succeeds.  collar
 * made that MPI_Waitall a loop of MPI_Testall, and so returned the error
 * with its own operations still running (a broadcast's data not yet
 * copied back).  An invalid request: the library's error, from
 * PMPI_Request_get_status, raised there once.
 */
static int test_all(int count, MPI_Request requests[], int *flag,
                    MPI_Status statuses[])
{
    *flag = 0;
    for (int i = 0; i < count; i++) {
        if (requests[i] == MPI_REQUEST_NULL) {
            continue;
        }
        int done = 0;
        const int rc = PMPI_Request_get_status(requests[i], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || !done) {
            return rc;
        }
    }
    *flag = 1;
    return PMPI_Waitall(count, requests, statuses);
}

/* Every request complete before the library completes them: collar's
 * operations among them are over when the call returns, whatever it
 * returns (MPICH's MPI_Waitall marks the requests after a failed one
 * MPI_ERR_PENDING and leaves them for the application to complete). */
static int wait_all(int count, MPI_Request requests[], MPI_Status statuses[],
                    collar_watch_t *w)
{
    unsigned spins = 0;
    for (;;) {
        if (!collar_progress_all()) {
            return result_all(w, PMPI_Waitall(count, requests, statuses),
                              count, requests, statuses);
        }
        int flag = 0;
        const int rc = test_all(count, requests, &flag, statuses);
        if (rc != MPI_SUCCESS || flag) {
            return result_all(w, rc, count, requests, statuses);
        }
        collar_wait_pause(&spins);
    }
}

COLLAR_EXPORT int MPI_Waitall(int count, MPI_Request requests[],
                              MPI_Status statuses[])
{
    collar_watch_t w;
    collar_watch_begin(&w, count, requests);
    const int rc = wait_all(count, requests, statuses, &w);
    collar_watch_end(&w);
    return rc;
}

static int wait_any(int count, MPI_Request requests[], int *index,
                    MPI_Status *status)
{
    unsigned spins = 0;
    for (;;) {
        if (!collar_progress_all()) {
            return PMPI_Waitany(count, requests, index, status);
        }
        int flag = 0;
        int rc = PMPI_Testany(count, requests, index, &flag, status);
        if (rc != MPI_SUCCESS || flag) {
            return rc;
        }
        collar_wait_pause(&spins);
    }
}

COLLAR_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index,
                              MPI_Status *status)
{
    collar_watch_t w;
    collar_watch_begin(&w, count, requests);
    int rc = wait_any(count, requests, index, status);
    if (w.found != 0) {
        if (index != NULL && *index != MPI_UNDEFINED) {
            rc = result_one(&w, *index, rc, status);
        }
        collar_watch_end(&w);
    }
    return rc;
}

static int wait_some(int incount, MPI_Request requests[], int *outcount,
                     int indices[], MPI_Status statuses[])
{
    unsigned spins = 0;
    for (;;) {
        if (!collar_progress_all()) {
            return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
        }
        int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
        if (rc != MPI_SUCCESS || *outcount != 0) {
            return rc;
        }
        collar_wait_pause(&spins);
    }
}

COLLAR_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[],
                               int *outcount, int indices[],
                               MPI_Status statuses[])
{
    collar_watch_t w;
    collar_watch_begin(&w, incount, requests);
    int rc = wait_some(incount, requests, outcount, indices, statuses);
    if (w.found != 0) {
        rc = result_some(&w, rc, outcount != NULL ? *outcount : MPI_UNDEFINED,
                         indices, statuses);
        collar_watch_end(&w);
    }
    return rc;
}

COLLAR_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    collar_watch_t w;
    collar_watch_begin(&w, request != NULL ? 1 : 0, request);
    collar_progress_all();
    int rc = PMPI_Test(request, flag, status);
    if (w.found != 0) {
        if (rc == MPI_SUCCESS && *flag) {
            rc = result_one(&w, 0, rc, status);
        }
        collar_watch_end(&w);
    }
    return rc;
}

COLLAR_EXPORT int MPI_Testall(int count, MPI_Request requests[], int *flag,
                              MPI_Status statuses[])
{
    collar_watch_t w;
    collar_watch_begin(&w, count, requests);
    collar_progress_all();
    if (w.found == 0) {
        return PMPI_Testall(count, requests, flag, statuses);
    }
    int rc = test_all(count, requests, flag, statuses);
    if (rc != MPI_SUCCESS || *flag) {
        rc = result_all(&w, rc, count, requests, statuses);
    }
    collar_watch_end(&w);
    return rc;
}

COLLAR_EXPORT int MPI_Testany(int count, MPI_Request requests[], int *index,
                              int *flag, MPI_Status *status)
{
    collar_watch_t w;
    collar_watch_begin(&w, count, requests);
    collar_progress_all();
    int rc = PMPI_Testany(count, requests, index, flag, status);
    if (w.found != 0) {
        if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED) {
            rc = result_one(&w, *index, rc, status);
        }
        collar_watch_end(&w);
    }
    return rc;
}

COLLAR_EXPORT int MPI_Testsome(int incount, MPI_Request requests[],
                               int *outcount, int indices[],
                               MPI_Status statuses[])
{
    collar_watch_t w;
    collar_watch_begin(&w, incount, requests);
    collar_progress_all();
    int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    if (w.found != 0) {
        rc = result_some(&w, rc, outcount != NULL ? *outcount : MPI_UNDEFINED,
                         indices, statuses);
        collar_watch_end(&w);
    }
    return rc;
}

/* The request stays: its error is put in the status, and reported by the
 * completion call that frees or deactivates the request. */
COLLAR_EXPORT int MPI_Request_get_status(MPI_Request request, int *flag,
                                         MPI_Status *status)
{
    collar_watch_t w;
    collar_watch_begin(&w, 1, &request);
    collar_progress_all();
    int rc = PMPI_Request_get_status(request, flag, status);
    if (w.found != 0) {
        if (rc == MPI_SUCCESS && *flag && !status_ignored(status)) {
            const int err = collar_watch_peek(&w, 0);
            if (err != MPI_SUCCESS) {
                status->MPI_ERROR = err;
            }
        }
        collar_watch_end(&w);
    }
    return rc;
}
