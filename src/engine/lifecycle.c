/*
 * collar - start-up and shut-down of the engine, around the application's
 * MPI_Init / MPI_Init_thread and MPI_Finalize (src/interpose/init.c), and
 * what collar's own API (collar.h) asks of it.
 *
 * MPI_Init starts the MPI library (at the thread level collar needs, see
 * collar_engine_init_thread), then reads the configuration, opens the
 * device backend, learns the nodes, makes MPI_COMM_WORLD's private
 * communicator where it is wanted and decides the short ways of the
 * allreduce's entry points (collar_paths).  MPI_Finalize drains and frees
 * everything collar holds before the library's own MPI_Finalize.
 */
#include "config.h"
#include "engine_int.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

collar_paths_t collar_paths = { .state = COLLAR_STATE_OFF, .straight = 1 };
collar_engine_t collar_engine = { .dev = &collar_device_none };

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
 * None of them under COLLAR_CHECK (every call is checked across ranks), nor
 * where what runs is said (info level, subsystem coll): host calls then
 * take the whole way, to selection and its line
 * (collar_algo_log_choice).
 */
static void decide_paths(void)
{
    const int host_native = collar_select_host_native() && !collar_cfg.check
                            && !collar_log_enabled(COLLAR_LOG_INFO, COLLAR_SUB_COLL);
    collar_engine.pass_all = collar_engine.dev == &collar_device_none
                             && host_native;
    collar_paths.straight = collar_engine.pass_all && !collar_stats_on;
    collar_engine.host_direct = collar_engine.dev != &collar_device_none
                                && host_native;
    collar_paths.host_straight = collar_engine.host_direct && !collar_stats_on;
}

/* Thread levels: what the MPI library gave, what the application is told
 * (see collar_engine_init_thread); -1 before MPI_Init. */
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
static int progress_level(void)
{
    int level = lib_level;
    if (level < 0 && PMPI_Query_thread(&level) != MPI_SUCCESS) {
        level = MPI_THREAD_SINGLE;
    }
    return level;
}

static void start_progress(int rank)
{
    if (collar_cfg.progress == COLLAR_PROGRESS_WAIT) {
        return;
    }
    collar_progress_calls_enable();
    const int level = progress_level();
    if (level >= MPI_THREAD_MULTIPLE) {
        collar_progress_thread_enable(collar_cfg.progress_interval_us);
        return;
    }
    if (rank == 0 && collar_cfg.progress == COLLAR_PROGRESS_THREAD) {
        collar_info(INIT, "no progress thread: the MPI library gives thread "
                    "level %d, not MPI_THREAD_MULTIPLE (%s); collar's "
                    "operations progress inside MPI_Wait*/MPI_Test* and the "
                    "blocking point-to-point calls (COLLAR_PROGRESS)", level,
                    collar_engine.dev == &collar_device_none ? "no device backend, so "
                    "collar did not ask for it" : "the library's choice");
    }
}

/* What fixes a job where some ranks have no collar: the launcher's way to
 * set LD_PRELOAD on every rank, with this library's path. */
static void launcher_hint(char *out, size_t len)
{
    const char *preload = getenv("LD_PRELOAD");
    Dl_info self;
    const char *path = "/path/to/libcollar.so";
    if (preload != NULL && strstr(preload, "collar") != NULL) {
        path = preload;
    } else if (dladdr((void *)collar_engine_pmix_init, &self) != 0
               && self.dli_fname != NULL) {
        path = self.dli_fname;
    }
    if (getenv("SLURM_STEP_ID") != NULL) {
        snprintf(out, len, "srun --export=ALL,LD_PRELOAD=%s ...", path);
    } else if (getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_NAMESPACE") != NULL) {
        snprintf(out, len, "mpirun -x LD_PRELOAD=%s ...", path);
    } else if (getenv("PMI_FD") != NULL) {
        snprintf(out, len, "mpiexec -genv LD_PRELOAD %s ...", path);
    } else {
        snprintf(out, len, "LD_PRELOAD=%s in every rank's environment", path);
    }
}

/*
 * Some ranks run without collar (src/core/presence.c): collar makes no
 * collective at all, on any rank that has it, and every call goes straight
 * to the MPI library, which is always safe.  The lowest rank with collar
 * says so once.
 */
static void stay_out(const collar_presence_t *p, int rank, int size)
{
    char hint[PATH_MAX + 64];
    launcher_hint(hint, sizeof(hint));
    collar_log_(rank == p->lowest ? COLLAR_LOG_WARN : COLLAR_LOG_DEBUG, COLLAR_SUB_INIT,
                "collar is not loaded on %d of %d ranks (%s %s%s%s, seen through "
                "the launcher's %s key-value store): collar stays out of the "
                "way and every MPI call goes straight to the MPI library on "
                "every rank; to run collar, load it on every rank: %s",
                p->missing, size, p->missing == 1 ? "rank" : "ranks", p->ranks,
                p->hosts[0] ? ", on " : "", p->hosts, p->store, hint);
}

/*
 * Every rank has collar, with settings that make different collectives
 * (src/core/presence.c, settings[]): the same way out, and the setting
 * named.
 */
static void stay_out_settings(const collar_presence_t *p, int rank)
{
    collar_log_(rank == p->lowest ? COLLAR_LOG_WARN : COLLAR_LOG_DEBUG, COLLAR_SUB_INIT,
                "%s (seen through the launcher's %s key-value store): collar "
                "would make different collectives on different ranks, so it "
                "stays out of the way and every MPI call goes straight to the "
                "MPI library on every rank; set collar's variables alike on "
                "every rank (mpirun -x NAME=VALUE, mpiexec -genv NAME VALUE, "
                "srun --export=ALL,NAME=VALUE pass them to all)",
                p->what, p->store);
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
        collar_paths.state = COLLAR_STATE_DISABLED;
        return;
    }
    collar_config_load_quiet(rank != 0);
    collar_log_open(collar_cfg.log_file);
    /* Before any collective of collar's: does every rank have collar? */
    collar_presence_t presence;
    collar_presence_learn(rank, size, &presence);
    if (presence.state == COLLAR_PRESENCE_PARTIAL) {
        stay_out(&presence, rank, size);
        collar_paths.state = COLLAR_STATE_DISABLED;
        return;
    }
    if (presence.state == COLLAR_PRESENCE_DIFFERENT) {
        stay_out_settings(&presence, rank);
        collar_paths.state = COLLAR_STATE_DISABLED;
        return;
    }
    if (presence.state == COLLAR_PRESENCE_UNKNOWN) {
        collar_debug(INIT, "cannot tell whether every rank has collar (%s); "
                     "collar runs as if they all had", presence.why);
    } else {
        collar_debug(INIT, "collar is loaded on %s%d rank%s (the launcher's "
                     "%s key-value store)", size > 1 ? "all " : "", size,
                     collar_plural(size), presence.store);
    }
    if (collar_select_init() != COLLAR_OK) {
        collar_paths.state = COLLAR_STATE_DISABLED;
        collar_warn(INIT, "collar cannot start; every call passes through");
        return;
    }
    collar_engine.dev = collar_device_open(collar_cfg.device);
    if (collar_comm_init(collar_engine.dev != &collar_device_none) != COLLAR_OK) {
        collar_device_close();
        collar_engine.dev = &collar_device_none;
        collar_select_finalize();
        collar_paths.state = COLLAR_STATE_DISABLED;
        collar_warn(INIT, "collar cannot start; every call passes through");
        return;
    }
    /* Right after collar_comm_init's collective over MPI_COMM_WORLD: the
     * moment the ranks' timelines are aligned on. */
    collar_observe_init(rank);
    collar_paths.host_ranges = collar_mem_host_ranges();
    collar_engine.mpi_cuda_aware = collar_mpi_cuda_aware();
    collar_engine.thread_multiple = progress_level() >= MPI_THREAD_MULTIPLE;
    /* Progress outside the waits, decided before any private
     * communicator is made: whether every rank runs the progress thread is
     * agreed there (collar_progress_thread_ready). */
    start_progress(rank);
    /* MPI_COMM_WORLD's private duplicate, here where every process is in
     * MPI_Init: the communicator most nonblocking allreduces run on gets
     * collar's algorithms from its first call (other communicators get
     * theirs from their first blocking allreduce, collar_comm_get).  Where
     * some process has a device backend, or an algorithm is forced (alike
     * on every process). */
    if (collar_comm_world_wanted()
        || (collar_cfg.algorithm != COLLAR_ALG_AUTO
            && collar_cfg.algorithm != COLLAR_ALG_NATIVE)) {
        collar_progress_thread_ready();
        collar_comm_t *world = NULL;
        (void)collar_comm_get(MPI_COMM_WORLD, 1, &world);
    }
    collar_stats_init();
    collar_stats_set_tuning_source(collar_select_sources());
    decide_paths();
    collar_paths.state = COLLAR_STATE_ACTIVE;
    collar_colls_start(collar_engine.dev, collar_engine.mpi_cuda_aware);
    if (rank == 0) {
        collar_info(INIT, "collar %s active: %d rank%s, device %s, algorithm %s, "
                    "MPI %s device pointers", PACKAGE_VERSION, size,
                    collar_plural(size), collar_engine.dev->name,
                    collar_alg_name(collar_cfg.algorithm),
                    collar_engine.mpi_cuda_aware ? "takes" : "does not take");
    }
}

static void collar_shutdown(void)
{
    collar_paths.straight = 1;
    collar_paths.host_straight = 0;
    collar_progress_thread_stop();
    collar_colls_stop();
    if (collar_paths.state != COLLAR_STATE_ACTIVE) {
        collar_paths.state = COLLAR_STATE_FINALIZED;
        return;
    }
    collar_run_drain();
    /* What failed starts left: every rank has made its calls by now. */
    collar_leftover_drain(MPI_COMM_NULL);
    collar_persist_finalize();
    collar_observe_finalize();
    collar_stats_report(MPI_COMM_WORLD);
    collar_comm_finalize();
    collar_algo_nccl_finalize();
    /* Every process is here (MPI_Finalize), every schedule is over. */
    collar_ipc_finalize(collar_comm_world_wanted());
    collar_pool_release_all();
    collar_paths.host_ranges = NULL;
    collar_device_close();
    collar_select_finalize();
    collar_paths.state = COLLAR_STATE_FINALIZED;
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

/* Before the MPI library starts: this process's key in the launcher's
 * key-value store, for the other ranks to see that it has collar and with
 * which settings (under COLLAR_DISABLE=1 too: such a rank makes no
 * collective of collar's, and the others must know). */
static void announce(void)
{
    collar_presence_announce();
}

int collar_engine_pmix_init(void *proc, void *info, size_t ninfo)
{
    return collar_presence_pmix_init(proc, info, ninfo);
}

int collar_engine_init_thread(int *argc, char ***argv, int required,
                              int *provided)
{
    announce();
    const int level = raise_thread_level(required) ? MPI_THREAD_MULTIPLE
                                                   : required;
    int got = MPI_THREAD_SINGLE;
    int rc = PMPI_Init_thread(argc, argv, level, &got);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    lib_level = got;
    app_level = level != required && got >= required ? required : got;
    collar_app_thread_level = app_level;
    if (provided != NULL) {
        *provided = app_level;
    }
    collar_startup();
    return rc;
}

void collar_engine_off(void)
{
    collar_paths.state = COLLAR_STATE_DISABLED;
}

int collar_engine_init(int *argc, char ***argv)
{
    if (!raise_thread_level(MPI_THREAD_SINGLE)) {
        announce();
        int rc = PMPI_Init(argc, argv);
        if (rc == MPI_SUCCESS) {
            collar_startup();
        }
        return rc;
    }
    return collar_engine_init_thread(argc, argv, MPI_THREAD_SINGLE, NULL);
}

void collar_engine_finalize(void)
{
    collar_shutdown();
}

int collar_engine_query_thread(int *provided)
{
    if (app_level < 0 || provided == NULL) {
        return PMPI_Query_thread(provided);
    }
    *provided = app_level;
    return MPI_SUCCESS;
}

/* This process's rank in MPI_COMM_WORLD: the MPI library's while MPI is
 * up, else the launcher's (the process's exit, after MPI_Finalize). */
static int process_rank(void)
{
    int init = 0, fin = 0, rank = 0;
    if (PMPI_Initialized(&init) == MPI_SUCCESS && init
        && PMPI_Finalized(&fin) == MPI_SUCCESS && !fin
        && PMPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS) {
        return rank;
    }
    static const char *vars[] = { "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK" };
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *r = getenv(vars[i]);
        if (r != NULL) {
            return atoi(r);
        }
    }
    return 0;
}

/* Say once, from the first rank, that collar is not active and why; `hint`:
 * add how to load it in time, with this library's path. */
static void inactive(collar_log_level_t level, const char *why, int hint)
{
    static int said;
    if (said || collar_paths.state != COLLAR_STATE_OFF) {
        return;
    }
    said = 1;
    const int rank = process_rank();
    collar_log_set_rank(rank);
    collar_config_load_quiet(rank != 0);
    collar_log_open(collar_cfg.log_file);
    char how[2 * PATH_MAX + 256] = "";
    if (hint) {
        /* This very library, as the program would name it. */
        Dl_info self;
        char dir[PATH_MAX] = "...";
        const char *path = "libcollar.so";
        if (dladdr((void *)collar_engine_inactive, &self) != 0
            && self.dli_fname != NULL && strchr(self.dli_fname, '/') != NULL) {
            path = self.dli_fname;
            snprintf(dir, sizeof(dir), "%.*s",
                     (int)(strrchr(path, '/') - path), path);
        }
        snprintf(how, sizeof(how), "; load collar before MPI starts: "
                 "mpi4py.profile('collar', path=['%s']) before `from mpi4py "
                 "import MPI`, or LD_PRELOAD=%s", dir, path);
    }
    if (rank == 0) {
        collar_log_(level, COLLAR_SUB_INIT, "collar is not active: %s; every "
                    "MPI call goes straight to the MPI library%s", why, how);
    }
    collar_log_close();
}

void collar_engine_inactive(const char *why)
{
    inactive(COLLAR_LOG_INFO, why, 0);
}

/* An MPI library was loaded before collar (collar_engine_loaded). */
static int loaded_after_mpi;

/*
 * When libcollar.so loads (the after_mpi of src/interpose/abi.c): where MPI
 * is initialised already, collar's MPI_Init will never run, and collar
 * starts there: say so now, while the program can still be told which
 * call loaded collar too late.  A warning: whoever loaded collar asked
 * for it.  Nothing in a process that has not started MPI (the usual
 * LD_PRELOAD, mpirun).
 */
void collar_engine_loaded(int after_mpi)
{
    int init = 0;
    loaded_after_mpi = after_mpi;
    if (collar_paths.state != COLLAR_STATE_OFF
        || PMPI_Initialized(&init) != MPI_SUCCESS || !init) {
        return;
    }
    inactive(COLLAR_LOG_WARN, "libcollar.so was loaded after MPI_Init had run "
             "(mpi4py.profile called after `from mpi4py import MPI`, or a "
             "dlopen after MPI_Init), and collar starts in MPI_Init", 1);
}

/*
 * At exit: MPI was started, but not through collar's MPI_Init.  The MPI
 * library's own MPI_Init was called directly: by a program whose MPI
 * library was loaded before collar (collar loaded with dlopen later: the
 * program's calls were bound to the MPI library), by a library loaded with
 * RTLD_DEEPBIND or linked with -Bsymbolic against the MPI library, by a
 * statically linked MPI, or by a Fortran layer collar does not know.  (A
 * library loaded after collar, with dlopen, reaches collar's MPI_Init like
 * the program itself: tests/mpi/dlopen.test.)  A warning, as above.
 * Nothing at all is said in a process that never started MPI (mpirun, a
 * shell).
 */
void collar_engine_unseen_init(void)
{
    int init = 0;
    if (collar_paths.state != COLLAR_STATE_OFF
        || PMPI_Initialized(&init) != MPI_SUCCESS || !init) {
        return;
    }
    if (loaded_after_mpi) {
        inactive(COLLAR_LOG_WARN, "libcollar.so was loaded after the MPI "
                 "library (with dlopen: mpi4py.profile after mpi4py loaded "
                 "its MPI module), so MPI_Init went to the MPI library, not "
                 "to collar", 1);
        return;
    }
    inactive(COLLAR_LOG_WARN, "MPI_Init was called without reaching collar's "
             "MPI_Init (a library bound to the MPI library directly: "
             "RTLD_DEEPBIND, -Bsymbolic, a static MPI, or a Fortran layer "
             "collar does not wrap)", 0);
}

/* ------------------------------------------------------ collar's own API */

int collar_engine_active(void)
{
    return collar_paths.state == COLLAR_STATE_ACTIVE;
}

const char *collar_engine_device_name(void)
{
    return collar_paths.state == COLLAR_STATE_ACTIVE ? collar_engine.dev->name
                                                     : "none";
}

int collar_engine_set_algorithm(const char *name, size_t chunk)
{
    if (collar_paths.state != COLLAR_STATE_ACTIVE || name == NULL) {
        return -1;
    }
    int alg = strcmp(name, "auto") == 0 ? COLLAR_ALG_AUTO
                                        : collar_alg_from_name(name, strlen(name));
    if (alg < 0) {
        return -1;
    }
    collar_cfg.algorithm = (collar_alg_t)alg;
    if (chunk != 0 && chunk < COLLAR_CHUNK_MIN) {
        collar_warn(COLL, "collar_set_algorithm: chunk %zu is below the least "
                    "chunk, 1K: raised to 1K", chunk);
        chunk = COLLAR_CHUNK_MIN;
    }
    collar_cfg.chunk_size = chunk;
    decide_paths();
    collar_debug(COLL, "algorithm set to %s, chunk %zu", name, chunk);
    return 0;
}
