/*
 * collar - is collar loaded on every process of the job?
 *
 * A launcher that does not pass LD_PRELOAD on to every node (Open MPI's
 * `LD_PRELOAD=... mpirun`, whose remote nodes get only the -x variables)
 * starts some processes with collar and some without.  collar's own
 * collectives (the table of nodes and MPI_COMM_WORLD's private communicator
 * inside MPI_Init, the statistics at MPI_Finalize, a private communicator in
 * a blocking allreduce) would then meet collectives the other processes
 * never make, and the MPI library fails (MPI_ERR_TRUNCATE) or hangs.
 *
 * So each process learns, without a message or a collective of collar's
 * own, which processes have collar: through the launcher's key-value store,
 * written before the MPI library's start-up exchange inside MPI_Init (its
 * fence or barrier carries the key to everyone) and read after it.
 *
 *   PMIx (Open MPI 4.1 and 5, Slurm's --mpi=pmix): the MPI library calls
 *   PMIx_Init inside MPI_Init; collar's PMIx_Init (src/interpose/pmix.c,
 *   through LD_PRELOAD ahead of libpmix) runs the library's and then puts
 *   "collar.present" (the host name), which the library's PMIx_Commit and
 *   fence carry.  collar calls no PMIx_Init of its own: Open MPI 5 skips its
 *   PMIx_Init where PMIx is initialised already, and then has no process
 *   name; finalising before MPI_Init breaks both 4.1 and 5.  libpmix is not
 *   linked: its functions come from the object that holds the real
 *   PMIx_Init, and its structures are declared here (the PMIx ABI).
 *   After MPI_Init each rank is read with PMIX_OPTIONAL (the local store
 *   only: a rank that never put the key answers "not found" at once).
 *   The local store holds every rank of this node, and every rank of the
 *   job where the library collected all data in its fence: Open MPI 4.x by
 *   default (pmix_base_collect_data true, pmix_base_async_modex false,
 *   read through MPI_T).  Elsewhere (Open MPI 5.0 leaves other nodes' data
 *   on their servers) a rank of another node not found locally is fetched
 *   from its server (PMIx_Get_nb, all at once), which answers at once for a
 *   rank that put the key and at PMIX_TIMEOUT for one that did not.
 *
 *   PMI-1 (Hydra: MPICH's and Intel MPI's mpiexec): the MPI library's PMI
 *   client is not exported, so collar speaks the wire protocol on the
 *   launcher's socket (PMI_FD) before the library does: init (which Hydra
 *   answers the same way twice), get_my_kvsname, put "collar.RANK".  The
 *   barrier inside MPI_Init flushes the key to every node; after MPI_Init a
 *   get of each rank's key answers from the node's proxy, "not found" at
 *   once for a rank without collar.
 *
 *   Not on a PMI-2 server (Slurm's srun --mpi=pmi2, which sets PMI_JOBID
 *   beside PMI_FD): it answers PMI-1's init with an error and the socket
 *   is then of no use to the MPI library either (every rank was killed).
 *
 * Neither reached (a singleton, another launcher, a PMI-2 server, a
 * PMIx_Init collar did not see): the state is unknown and collar runs as
 * if every process had it, as before (docs/reliability.md: what was
 * measured and ruled out).
 */
#include "config.h"
#include "core.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The key each process with collar puts (PMIx; PMI-1: KEY.RANK). */
#define PRESENCE_KEY "collar.present"
/* How long a fetch from another node's server may wait for a rank's key
 * (PMIx stores without every rank's data): a rank that put it answers at
 * once, one that did not at this timeout. */
#define PRESENCE_FETCH_TIMEOUT_S 5
/* How long a PMI-1 answer may take (Hydra answers at once). */
#define PRESENCE_PMI_TIMEOUT_MS 30000
/* The longest value a process puts: its host and its settings. */
#define SETTINGS_MAX 384

/* ------------------------------------------------------------ PMIx's ABI */

typedef struct {
    char     nspace[256];
    uint32_t rank;
} pmix_proc_abi_t;

typedef struct {
    uint16_t type;
    union {
        bool     flag;
        int      integer;
        char    *string;
        uint8_t  pad[24];
    } data;
} pmix_value_abi_t;

typedef struct {
    char             key[512];
    uint32_t         flags;
    pmix_value_abi_t value;
} pmix_info_abi_t;

enum {
    PMIX_ABI_BOOL = 1,
    PMIX_ABI_STRING = 3,
    PMIX_ABI_INT = 6,
    PMIX_ABI_GLOBAL = 3,            /* pmix_scope_t: every process */
    PMIX_ABI_ERROR = -1,
    PMIX_ABI_ERR_NOT_FOUND = -46
};

typedef int (*pmix_init_fn)(pmix_proc_abi_t *, pmix_info_abi_t *, size_t);
typedef int (*pmix_put_fn)(int, const char *, pmix_value_abi_t *);
typedef int (*pmix_get_fn)(const pmix_proc_abi_t *, const char *,
                           const pmix_info_abi_t *, size_t, pmix_value_abi_t **);
typedef void (*pmix_value_cb_fn)(int, pmix_value_abi_t *, void *);
typedef int (*pmix_get_nb_fn)(const pmix_proc_abi_t *, const char *,
                              const pmix_info_abi_t *, size_t,
                              pmix_value_cb_fn, void *);

/* What happened before MPI_Init finished. */
typedef enum {
    STORE_NONE,      /* no store (yet) */
    STORE_PMIX,      /* the key put through the library's PMIx_Init */
    STORE_PMI1       /* the key put on PMI_FD */
} store_t;

static struct {
    int             armed;      /* inside collar's MPI_Init */
    store_t         store;
    const char     *why;        /* no store: why not */
    pmix_proc_abi_t me;
    pmix_get_fn     get;
    pmix_get_nb_fn  get_nb;
    int             pmi_fd;
    char            kvsname[256];
    char            value[SETTINGS_MAX];  /* this process's: host/settings */
} pr = { .why = "no launcher key-value store found (neither PMIx nor "
                "PMI_FD in the environment)", .pmi_fd = -1 };

/* -------------------------------------------------------------- settings
 *
 * The settings that decide which collectives collar makes, on which
 * communicator, or how it cuts a message: two ranks that differ in one of
 * them make different collectives for the same call of the application,
 * and the job hangs or fails inside the MPI library.  Each process puts
 * them with its key, and a difference is found before any collective of
 * collar's, as a missing collar is.  Values as collar reads them (a bad
 * value counts as the default it falls back to); the rules in force as a
 * hash of the inline rules and of the bytes of the tuning file and of the
 * site default (a copy that differs, even in a comment, is a difference:
 * the tables must be the same file on every node).  COLLAR_PROGRESS,
 * COLLAR_IPC_ZEROCOPY(_MIN) and the node shape are agreed by collectives
 * of their own; the rest (logging, pools, pointer cache, synchronisation,
 * fault injection) stays inside the process.
 */
static const struct {
    const char *name;       /* the variable, or a description */
    const char *says;       /* how the message names it */
    int         plural;     /* "differ", not "differs" */
} settings[] = {
    { "version",                "collar's version", 0 },
    { "COLLAR_DISABLE",         "COLLAR_DISABLE", 0 },
    { "COLLAR_DEVICE",          "COLLAR_DEVICE (none or a device backend)", 0 },
    { "COLLAR_ALGORITHM",       "COLLAR_ALGORITHM", 0 },
    { "rules",                  "the allreduce rules (COLLAR_ALLREDUCE_RULES, "
                                "COLLAR_TUNING_FILE's or the site default's contents)", 1 },
    { "COLLAR_CHUNK_SIZE",      "COLLAR_CHUNK_SIZE", 0 },
    { "COLLAR_MPI_CUDA_AWARE",  "COLLAR_MPI_CUDA_AWARE", 0 },
    { "COLLAR_CHECK",           "COLLAR_CHECK", 0 },
    { "COLLAR_STATS",           "COLLAR_STATS", 0 },
    { "COLLAR_STATS_DEPTH",     "COLLAR_STATS_DEPTH", 0 },
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))
#define SETTINGS_VERSION "s1"

/* FNV-1a over a file's bytes (or its absence). */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 0x100000001b3ull;
    }
    return h;
}

static uint64_t hash_file(uint64_t h, const char *path)
{
    FILE *f = path != NULL && path[0] != '\0' ? fopen(path, "rb") : NULL;
    if (f == NULL) {
        return hash_bytes(h, "-", 1);
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        h = hash_bytes(h, buf, n);
    }
    fclose(f);
    return hash_bytes(h, "+", 1);
}

/* One field as it travels: no separator of the value's, no character a
 * PMI-1 value cannot hold. */
static void field_clean(char *v)
{
    for (; *v != '\0'; v++) {
        if (strchr(" =:/\n\t", *v) != NULL) {
            *v = '_';
        }
    }
}

/* This process's settings, ':' between the fields of settings[]. */
static void settings_string(char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    const int disabled = collar_config_env_choice("COLLAR_DISABLE") != 0;
    for (size_t i = 0; i < NSETTINGS && n < len; i++) {
        char v[96];
        const char *name = settings[i].name;
        if (strcmp(name, "version") == 0) {
            snprintf(v, sizeof(v), "%s", SETTINGS_VERSION);
        } else if (disabled && strcmp(name, "COLLAR_DISABLE") != 0) {
            v[0] = '\0';  /* a disabled collar makes no collective */
        } else if (strcmp(name, "rules") == 0) {
            char dir[512], site[600], tf[512];
            const char *inl = getenv("COLLAR_ALLREDUCE_RULES");
            uint64_t h = 0xcbf29ce484222325ull;
            h = hash_bytes(h, inl != NULL ? inl : "", inl != NULL ? strlen(inl) + 1 : 0);
            collar_config_env_value("COLLAR_TUNING_FILE", tf, sizeof(tf));
            h = hash_file(h, tf);
            collar_config_env_value("COLLAR_TUNING_DIR", dir, sizeof(dir));
            snprintf(site, sizeof(site), "%s/default.table",
                     dir[0] != '\0' ? dir : COLLAR_TUNINGDIR);
            h = hash_file(h, site);
            snprintf(v, sizeof(v), "%016llx", (unsigned long long)h);
        } else if (strcmp(name, "COLLAR_DEVICE") == 0) {
            collar_config_env_value(name, v, sizeof(v));
            if (strcmp(v, "none") != 0) {
                snprintf(v, sizeof(v), "device");
            }
        } else {
            collar_config_env_value(name, v, sizeof(v));
        }
        field_clean(v);
        n += (size_t)snprintf(out + n, len - n, "%s%s", i ? ":" : "", v);
    }
}

/* The key's value: "host/settings". */
static void make_value(void)
{
    char host[256], set[SETTINGS_MAX];
    if (gethostname(host, sizeof(host) - 1) != 0) {
        strcpy(host, "?");
    }
    host[sizeof(host) - 1] = '\0';
    field_clean(host);
    settings_string(set, sizeof(set));
    snprintf(pr.value, sizeof(pr.value), "%.*s/%s", 64, host, set);
}

/* Field i of a value ("" past its end) into out. */
static void value_field(const char *value, size_t i, char *out, size_t len)
{
    out[0] = '\0';
    const char *p = value != NULL ? strchr(value, '/') : NULL;
    if (p == NULL) {
        return;
    }
    p++;
    for (size_t k = 0; k < i; k++) {
        p = strchr(p, ':');
        if (p == NULL) {
            return;
        }
        p++;
    }
    const size_t n = strcspn(p, ":");
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), p);
}

/* ------------------------------------------------------------------ PMIx */

/* The PMIx_Init collar's stands in front of: the next definition after
 * libcollar.so, or libpmix.so.2 already loaded (Open MPI 4.1 opens it with
 * a component of its own, outside the global scope). */
static pmix_init_fn pmix_real_init(void)
{
    static pmix_init_fn real;
    if (real == NULL) {
        real = (pmix_init_fn)dlsym(RTLD_NEXT, "PMIx_Init");
    }
    if (real == NULL) {
        void *lib = dlopen("libpmix.so.2", RTLD_NOW | RTLD_NOLOAD);
        if (lib != NULL) {
            real = (pmix_init_fn)dlsym(lib, "PMIx_Init");
        }
    }
    return real;
}

/* PMIx_Put of the marker, right after the library's PMIx_Init: its
 * PMIx_Commit and fence inside MPI_Init carry it. */
static void pmix_put_marker(pmix_init_fn real, const pmix_proc_abi_t *proc)
{
    Dl_info where;
    void *lib = NULL;
    if (dladdr((void *)real, &where) != 0 && where.dli_fname != NULL) {
        lib = dlopen(where.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    }
    if (lib == NULL) {
        pr.why = "the PMIx library's functions were not found";
        return;
    }
    pmix_put_fn put = (pmix_put_fn)dlsym(lib, "PMIx_Put");
    pr.get = (pmix_get_fn)dlsym(lib, "PMIx_Get");
    pr.get_nb = (pmix_get_nb_fn)dlsym(lib, "PMIx_Get_nb");
    if (put == NULL || pr.get == NULL || pr.get_nb == NULL) {
        pr.why = "the PMIx library's functions were not found";
        return;
    }
    pmix_value_abi_t v = { .type = PMIX_ABI_STRING, .data.string = pr.value };
    const int rc = put(PMIX_ABI_GLOBAL, PRESENCE_KEY, &v);
    if (rc != 0) {
        pr.why = "PMIx_Put failed";
        return;
    }
    pr.me = *proc;
    pr.store = STORE_PMIX;
}

int collar_presence_pmix_init(void *proc, void *info, size_t ninfo)
{
    const pmix_init_fn real = pmix_real_init();
    if (real == NULL) {
        return PMIX_ABI_ERROR;
    }
    const int rc = real(proc, info, ninfo);
    if (rc == 0 && proc != NULL && pr.armed && pr.store == STORE_NONE) {
        pmix_put_marker(real, proc);
    }
    return rc;
}

/* One value of rank r's (the local store only), or NULL. */
static pmix_value_abi_t *pmix_get_local(uint32_t r, const char *key, int *rc)
{
    pmix_info_abi_t optional;
    memset(&optional, 0, sizeof(optional));
    strcpy(optional.key, "pmix.optional");
    optional.value.type = PMIX_ABI_BOOL;
    optional.value.data.flag = true;
    pmix_proc_abi_t p = pr.me;
    p.rank = r;
    pmix_value_abi_t *v = NULL;
    *rc = pr.get(&p, key, &optional, 1, &v);
    return *rc == 0 ? v : NULL;
}

/* A value PMIx_Get returned (PMIX_VALUE_RELEASE: the ones collar asks
 * for are strings). */
static void pmix_value_free(pmix_value_abi_t *v)
{
    if (v != NULL && v->type == PMIX_ABI_STRING) {
        free(v->data.string);
    }
    free(v);
}

/* Rank r's host name as PMIx knows it (job data, local) in out; 0 when
 * known. */
static int pmix_host(uint32_t r, char *out, size_t len)
{
    int rc;
    pmix_value_abi_t *v = pmix_get_local(r, "pmix.hname", &rc);
    const int ok = v != NULL && v->type == PMIX_ABI_STRING && v->data.string != NULL;
    if (ok) {
        snprintf(out, len, "%s", v->data.string);
    }
    pmix_value_free(v);
    return ok ? 0 : -1;
}

/* Whether the MPI library collected every process's data in its start-up
 * fence, so that a key not in the local store was never put: Open MPI
 * before 5 with its defaults (MPI_T control variables). */
static int mpit_bool(const char *name, int *value)
{
    int idx = -1, count = 0, ok = 0;
    MPI_T_cvar_handle h;
    if (PMPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS
        || PMPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS) {
        return 0;
    }
    union { int i; unsigned char b; char pad[64]; } buf;
    memset(&buf, 0, sizeof(buf));
    if (count == 1 && PMPI_T_cvar_read(h, &buf) == MPI_SUCCESS) {
        /* A bool is an MPI_INT or a one-byte type: either reads as zero
         * or not from its first bytes, the rest cleared. */
        *value = buf.i != 0;
        ok = 1;
    }
    PMPI_T_cvar_handle_free(&h);
    return ok;
}

static int pmix_store_complete(void)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    PMPI_Get_library_version(version, &len);
    const char *v = strstr(version, "Open MPI v");
    if (v == NULL || atoi(v + strlen("Open MPI v")) >= 5) {
        return 0;
    }
    /* At the library's own level: Open MPI's MPI_T_init_thread sets the
     * level MPI_Query_thread then answers. */
    int level = MPI_THREAD_SINGLE, provided = 0, collect = 0, async = 1;
    PMPI_Query_thread(&level);
    if (PMPI_T_init_thread(level, &provided) != MPI_SUCCESS) {
        return 0;
    }
    const int known = mpit_bool("pmix_base_collect_data", &collect)
                      && mpit_bool("pmix_base_async_modex", &async);
    PMPI_T_finalize();
    return known && collect && !async;
}

/* The fetches of ranks of other nodes not in the local store. */
typedef struct {
    int   status;
    int   done;
    char *value;    /* a copy of the rank's value */
} fetch_t;

static void fetch_done(int status, pmix_value_abi_t *kv, void *cbdata)
{
    /* kv is the library's, released after the callback: copied. */
    fetch_t *f = cbdata;
    if (status == 0 && kv != NULL && kv->type == PMIX_ABI_STRING
        && kv->data.string != NULL) {
        f->value = strdup(kv->data.string);
    }
    f->status = status;
    __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
}

/* has[r] (and values[r]) for the ranks marked -1 (on another node, not
 * found locally). */
static void pmix_fetch(int size, int *has, char **values)
{
    int n = 0;
    for (int r = 0; r < size; r++) {
        n += has[r] < 0;
    }
    if (n == 0) {
        return;
    }
    /* Not freed where a fetch is still out at the deadline: its callback
     * may come later. */
    fetch_t *f = calloc((size_t)size, sizeof(*f));
    if (f == NULL) {
        return;   /* they stay unknown */
    }
    pmix_info_abi_t timeout;
    memset(&timeout, 0, sizeof(timeout));
    strcpy(timeout.key, "pmix.timeout");
    timeout.value.type = PMIX_ABI_INT;
    timeout.value.data.integer = PRESENCE_FETCH_TIMEOUT_S;
    for (int r = 0; r < size; r++) {
        if (has[r] < 0) {
            pmix_proc_abi_t p = pr.me;
            p.rank = (uint32_t)r;
            const int rc = pr.get_nb(&p, PRESENCE_KEY, &timeout, 1, fetch_done, &f[r]);
            if (rc != 0) {
                fetch_done(rc, NULL, &f[r]);
            }
        }
    }
    struct timespec now, end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += PRESENCE_FETCH_TIMEOUT_S + 5;
    int left = n;
    while (left > 0) {
        left = 0;
        for (int r = 0; r < size; r++) {
            if (has[r] < 0 && !__atomic_load_n(&f[r].done, __ATOMIC_ACQUIRE)) {
                left++;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (left == 0 || now.tv_sec > end.tv_sec) {
            break;
        }
        const struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    for (int r = 0; r < size; r++) {
        if (has[r] < 0 && __atomic_load_n(&f[r].done, __ATOMIC_ACQUIRE)) {
            /* Found, or not put within the timeout: absent. */
            has[r] = f[r].status == 0;
            values[r] = f[r].value;
            f[r].value = NULL;
        }
    }
    if (left == 0) {
        free(f);
    }
}

/* has[r]: 1 collar, 0 none, -1 not known; values[r]: a copy of rank r's
 * value where found.  Returns 0 when the store answered for this rank
 * itself. */
static int pmix_read(int size, int *has, char **values)
{
    char mine[256], host[256];
    const int mine_known = pmix_host(pr.me.rank, mine, sizeof(mine)) == 0;
    const int complete = pmix_store_complete();
    for (int r = 0; r < size; r++) {
        int rc;
        pmix_value_abi_t *v = pmix_get_local((uint32_t)r, PRESENCE_KEY, &rc);
        if (rc == 0 && v != NULL && v->type == PMIX_ABI_STRING && v->data.string != NULL) {
            values[r] = strdup(v->data.string);
        }
        pmix_value_free(v);
        if (rc == 0) {
            has[r] = 1;
        } else if (rc != PMIX_ABI_ERR_NOT_FOUND) {
            has[r] = -1;
        } else {
            /* This node's ranks are always in the local store. */
            const int local = mine_known && pmix_host((uint32_t)r, host, sizeof(host)) == 0
                              && strcmp(mine, host) == 0;
            has[r] = complete || local ? 0 : -1;
        }
    }
    pmix_fetch(size, has, values);
    return has[pr.me.rank] == 1 ? 0 : -1;
}

/* ----------------------------------------------------------------- PMI-1 */

static int pmi_send(const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        const ssize_t w = write(pr.pmi_fd, s, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One line of the answer, exactly: what follows it is the MPI library's. */
static int pmi_recv_line(char *buf, size_t len)
{
    size_t got = 0;
    while (got + 1 < len) {
        struct pollfd p = { .fd = pr.pmi_fd, .events = POLLIN };
        const int ready = poll(&p, 1, PRESENCE_PMI_TIMEOUT_MS);
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready <= 0) {
            return -1;
        }
        const ssize_t peek = recv(pr.pmi_fd, buf + got, len - 1 - got, MSG_PEEK);
        if (peek < 0 && errno == EINTR) {
            continue;
        }
        if (peek <= 0) {
            return -1;
        }
        const char *nl = memchr(buf + got, '\n', (size_t)peek);
        const size_t take = nl != NULL ? (size_t)(nl - (buf + got)) + 1 : (size_t)peek;
        ssize_t r;
        do {
            r = read(pr.pmi_fd, buf + got, take);
        } while (r < 0 && errno == EINTR);
        if (r != (ssize_t)take) {
            return -1;
        }
        got += take;
        if (nl != NULL) {
            buf[got] = '\0';
            return 0;
        }
    }
    return -1;
}

/* The value of NAME=value in an answer line, or NULL. */
static const char *pmi_field(const char *line, const char *name, char *out,
                             size_t len)
{
    const size_t n = strlen(name);
    for (const char *p = line; (p = strstr(p, name)) != NULL; p++) {
        if ((p == line || p[-1] == ' ') && p[n] == '=') {
            p += n + 1;
            size_t k = strcspn(p, " \n");
            k = k < len ? k : len - 1;
            memcpy(out, p, k);
            out[k] = '\0';
            return out;
        }
    }
    return NULL;
}

/* Ask and read the answer; 0 when it says rc=0. */
static int pmi_ask(const char *req, char *ans, size_t len)
{
    char rc[16];
    if (pmi_send(req) != 0 || pmi_recv_line(ans, len) != 0) {
        return -1;
    }
    return pmi_field(ans, "rc", rc, sizeof(rc)) == NULL || strcmp(rc, "0") == 0 ? 0 : 1;
}

static void pmi_put_marker(const char *fd, const char *rank)
{
    char ans[1024], req[768];
    pr.pmi_fd = atoi(fd);
    if (pmi_ask("cmd=init pmi_version=1 pmi_subversion=1\n", ans, sizeof(ans)) != 0
        || pmi_ask("cmd=get_my_kvsname\n", ans, sizeof(ans)) != 0
        || pmi_field(ans, "kvsname", pr.kvsname, sizeof(pr.kvsname)) == NULL) {
        pr.why = "the launcher's PMI-1 server (PMI_FD) did not answer";
        return;
    }
    snprintf(req, sizeof(req), "cmd=put kvsname=%s key=%s.%d value=%s\n",
             pr.kvsname, PRESENCE_KEY, atoi(rank), pr.value);
    if (pmi_ask(req, ans, sizeof(ans)) != 0) {
        pr.why = "the launcher's PMI-1 server (PMI_FD) refused the key";
        return;
    }
    pr.store = STORE_PMI1;
}

static int pmi_read(int rank, int size, int *has, char **values)
{
    for (int r = 0; r < size; r++) {
        char req[512], ans[1024], value[SETTINGS_MAX];
        snprintf(req, sizeof(req), "cmd=get kvsname=%s key=%s.%d\n", pr.kvsname,
                 PRESENCE_KEY, r);
        const int rc = pmi_ask(req, ans, sizeof(ans));
        has[r] = rc == 0 ? 1 : rc > 0 ? 0 : -1;
        if (rc == 0 && pmi_field(ans, "value", value, sizeof(value)) != NULL) {
            values[r] = strdup(value);
        }
    }
    return has[rank] == 1 ? 0 : -1;
}

/* ------------------------------------------------------------------ both */

void collar_presence_announce(void)
{
    if (pr.armed) {
        return;
    }
    pr.armed = 1;
    make_value();
    const char *fd = getenv("PMI_FD"), *rank = getenv("PMI_RANK");
    if (getenv("PMIX_NAMESPACE") != NULL && getenv("PMIX_RANK") != NULL) {
        pr.why = "the MPI library's PMIx_Init did not reach collar's";
        return;   /* the key goes in with the library's PMIx_Init */
    }
    if (fd != NULL && rank != NULL && getenv("PMI_JOBID") != NULL) {
        /* Slurm's srun --mpi=pmi2 (it alone sets PMI_JOBID beside PMI_FD):
         * a PMI-2 server, which takes PMI-1's init as an error and leaves
         * the socket unusable to the MPI library after it; collar says
         * nothing on it. */
        pr.why = "the launcher's PMI server is PMI-2 (Slurm's srun --mpi=pmi2), "
                 "which collar does not speak";
        return;
    }
    if (fd != NULL && rank != NULL) {
        pmi_put_marker(fd, rank);
    }
}

/* "0,2-5,9", cut with "..." at len. */
static void list_ranks(const int *has, int size, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (int r = 0; r < size; r++) {
        if (has[r] != 0) {
            continue;
        }
        int e = r;
        while (e + 1 < size && has[e + 1] == 0) {
            e++;
        }
        char one[32];
        if (e > r) {
            snprintf(one, sizeof(one), "%s%d-%d", n ? "," : "", r, e);
        } else {
            snprintf(one, sizeof(one), "%s%d", n ? "," : "", r);
        }
        if (n + strlen(one) + 4 >= len) {
            snprintf(out + n, len - n, ",...");
            return;
        }
        n += (size_t)snprintf(out + n, len - n, "%s", one);
        r = e;
    }
}

/* The hosts of the ranks without collar, where PMIx knows them. */
static void list_hosts(const int *has, int size, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    if (pr.store != STORE_PMIX) {
        return;
    }
    for (int r = 0; r < size; r++) {
        char h[256];
        if (has[r] != 0 || pmix_host((uint32_t)r, h, sizeof(h)) != 0 || strlen(h) > 64) {
            continue;
        }
        char item[80];
        snprintf(item, sizeof(item), ",%s,", h);
        char seen[512];
        snprintf(seen, sizeof(seen), ",%s,", out);
        if (strstr(seen, item) != NULL) {
            continue;
        }
        if (n + strlen(h) + 5 >= len) {
            snprintf(out + n, len - n, n ? ",..." : "...");
            return;
        }
        n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "," : "", h);
    }
}

/* Where the ranks' settings differ: the first field of settings[] in
 * which a rank differs from this one, the ranks by their value of it, in
 * out->what.  Returns 1 when they differ. */
static int settings_differ(int size, const int *has, char *const *values,
                           collar_presence_t *out)
{
    size_t field = NSETTINGS;
    char mine[96], theirs[96];
    for (int r = 0; r < size; r++) {
        if (has[r] != 1 || values[r] == NULL) {
            continue;   /* unknown: as if alike */
        }
        for (size_t i = 0; i < field; i++) {
            value_field(pr.value, i, mine, sizeof(mine));
            value_field(values[r], i, theirs, sizeof(theirs));
            if (strcmp(mine, theirs) != 0) {
                field = i;
                break;
            }
        }
    }
    if (field == NSETTINGS) {
        return 0;
    }
    /* The ranks by value, in order of first appearance, up to four. */
    int *sel = malloc((size_t)size * sizeof(*sel));
    char *done = calloc((size_t)size, 1);
    size_t n = (size_t)snprintf(out->what, sizeof(out->what), "%s differ%s between ranks:",
                                settings[field].says, settings[field].plural ? "" : "s");
    int groups = 0;
    for (int r = 0; sel != NULL && done != NULL && r < size; r++) {
        if (done[r] || has[r] != 1 || values[r] == NULL) {
            continue;
        }
        char v[96];
        value_field(values[r], field, v, sizeof(v));
        for (int q = r; q < size; q++) {
            sel[q] = 1;
            if (!done[q] && has[q] == 1 && values[q] != NULL) {
                value_field(values[q], field, theirs, sizeof(theirs));
                if (strcmp(v, theirs) == 0) {
                    sel[q] = 0;
                    done[q] = 1;
                }
            }
        }
        for (int q = 0; q < r; q++) {
            sel[q] = 1;
        }
        char ranks[128];
        list_ranks(sel, size, ranks, sizeof(ranks));
        const int many = strchr(ranks, ',') != NULL || strchr(ranks, '-') != NULL;
        if (groups == 4) {
            n += (size_t)snprintf(out->what + n, n < sizeof(out->what) ? sizeof(out->what) - n : 0,
                                  "; ...");
            break;
        }
        if (strcmp(settings[field].name, "rules") == 0) {
            n += (size_t)snprintf(out->what + n, n < sizeof(out->what) ? sizeof(out->what) - n : 0,
                                  "%s %s on rank%s %s", groups ? ";" : "",
                                  groups ? "others" : "one set", many ? "s" : "", ranks);
        } else {
            n += (size_t)snprintf(out->what + n, n < sizeof(out->what) ? sizeof(out->what) - n : 0,
                                  "%s %s on rank%s %s", groups ? ";" : "",
                                  v[0] != '\0' ? v : "(none)", many ? "s" : "", ranks);
        }
        groups++;
    }
    free(sel);
    free(done);
    return 1;
}

void collar_presence_learn(int rank, int size, collar_presence_t *out)
{
    memset(out, 0, sizeof(*out));
    out->state = COLLAR_PRESENCE_UNKNOWN;
    out->lowest = rank;
    pr.armed = 0;
    out->why = pr.why;
    if (collar_fault(COLLAR_FAULT_STORE)) {
        out->why = "COLLAR_SIM_FAIL=store:1";
        return;
    }
    if (pr.store == STORE_NONE || size <= 1) {
        out->why = size <= 1 ? "one process" : pr.why;
        return;
    }
    out->store = pr.store == STORE_PMIX ? "PMIx" : "PMI-1";
    if (pr.store == STORE_PMIX && pr.me.rank != (uint32_t)rank) {
        out->why = "the PMIx rank is not the rank in MPI_COMM_WORLD";
        return;
    }
    int *has = malloc((size_t)size * sizeof(*has));
    char **values = calloc((size_t)size, sizeof(*values));
    if (has == NULL || values == NULL) {
        out->why = "no memory";
        free(has);
        free(values);
        return;
    }
    const int self = pr.store == STORE_PMIX ? pmix_read(size, has, values)
                                            : pmi_read(rank, size, has, values);
    if (self != 0) {
        out->why = "the key-value store does not hold this process's own key";
    } else {
        int missing = 0, lowest = -1;
        for (int r = 0; r < size; r++) {
            /* A rank the store could not answer for counts as having
             * collar: as before this check existed.  A rank with
             * COLLAR_DISABLE=1 puts its key too, and says nothing. */
            missing += has[r] == 0;
            char off[8];
            value_field(values[r], 1, off, sizeof(off));
            if (lowest < 0 && has[r] != 0 && strcmp(off, "1") != 0) {
                lowest = r;
            }
        }
        out->lowest = lowest;
        out->missing = missing;
        out->state = missing ? COLLAR_PRESENCE_PARTIAL : COLLAR_PRESENCE_ALL;
        if (missing) {
            list_ranks(has, size, out->ranks, sizeof(out->ranks));
            list_hosts(has, size, out->hosts, sizeof(out->hosts));
        } else if (settings_differ(size, has, values, out)) {
            out->state = COLLAR_PRESENCE_DIFFERENT;
        }
    }
    for (int r = 0; r < size; r++) {
        free(values[r]);
    }
    free(values);
    free(has);
}
