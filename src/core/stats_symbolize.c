/*
 * collar - statistics: naming call sites (COLLAR_STATS=callsites).
 *
 * Each rank turns the program counters of its call sites into (object
 * file, address within the object) with dladdr1(), pc - 1 so that the
 * address lies inside the call instruction -- position-independent
 * executables and shared libraries load at different addresses on
 * different ranks, an object-relative address is the same.  Rank 0 resolves
 * each distinct (object, address) once: addr2line (one process per object
 * for many addresses) for "function (file:line)", else dladdr's symbol,
 * else "object+0xaddress".
 */
#include "config.h"
#include "stats_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Addresses per addr2line process. */
#define A2L_BATCH 128
#define ADDR2LINE "/usr/bin/addr2line"

/* ------------------------------------------- locating frames, per rank */

/*
 * One frame as (object, address in the object, dladdr's symbol): the object
 * the return address lies in, the address minus the object's load bias --
 * what addr2line takes for shared libraries, position-independent and
 * ordinary executables alike.
 */
void collar_stats_locate(void *pc, const char *exe, const char **obj,
                         uint64_t *addr, char *sym, size_t len)
{
    uintptr_t a = (uintptr_t)pc - 1;  /* inside the call instruction */
    Dl_info info;
    struct link_map *lm = NULL;
    sym[0] = '\0';
    if (dladdr1((void *)a, &info, (void **)&lm, RTLD_DL_LINKMAP) == 0 || lm == NULL) {
        *obj = "?";
        *addr = (uint64_t)a;
        return;
    }
    *obj = lm->l_name != NULL && lm->l_name[0] != '\0' ? lm->l_name : exe;
    *addr = (uint64_t)(a - (uintptr_t)lm->l_addr);
    if (info.dli_sname != NULL) {
        snprintf(sym, len, "%s+0x%lx", info.dli_sname,
                 (unsigned long)(a - (uintptr_t)info.dli_saddr));
    }
}

/* ------------------------------------------- naming frames, on rank 0 */

int collar_stats_frame_cmp(const void *a, const void *b)
{
    const frame_t *x = a, *y = b;
    int c = strcmp(x->obj, y->obj);
    if (c != 0) {
        return c;
    }
    return (x->addr > y->addr) - (x->addr < y->addr);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

void collar_stats_sanitize(char *s)
{
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f) {
            *s = '?';
        }
    }
}

/* One frame's name from addr2line's two lines (or NULLs), else from dladdr. */
static char *frame_name(const frame_t *f, const char *func, const char *line)
{
    char buf[2048];
    char where[1024] = "";
    int have_func = func != NULL && func[0] != '\0' && strcmp(func, "??") != 0;
    if (line != NULL && strncmp(line, "??", 2) != 0) {
        snprintf(where, sizeof(where), "%s", base_name(line));
        char *disc = strstr(where, " (discriminator");
        if (disc != NULL) {
            *disc = '\0';
        }
        size_t n = strlen(where);
        if (n < 2 || strcmp(where + n - 2, ":0") == 0 || strcmp(where + n - 2, ":?") == 0) {
            where[0] = '\0';
        }
    }
    const char *obj = base_name(f->obj);
    unsigned long long addr = (unsigned long long)f->addr;
    if (have_func && where[0] != '\0') {
        snprintf(buf, sizeof(buf), "%s (%s)", func, where);
    } else if (have_func) {
        snprintf(buf, sizeof(buf), "%s (%s+0x%llx)", func, obj, addr);
    } else if (where[0] != '\0') {
        snprintf(buf, sizeof(buf), "%s (%s+0x%llx)", where, obj, addr);
    } else if (f->sym[0] != '\0') {
        snprintf(buf, sizeof(buf), "%s (%s+0x%llx)", f->sym, obj, addr);
    } else {
        snprintf(buf, sizeof(buf), "%s+0x%llx", obj, addr);
    }
    char *name = strdup(buf);
    if (name != NULL) {
        collar_stats_sanitize(name);
    }
    return name;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) {
        s[--n] = '\0';
    }
}

/*
 * addr2line -f -C -e OBJECT ADDR...: two lines per address (function, then
 * file:line, "??" where unknown).  Run directly (no shell: object paths are
 * not quoted), without LD_PRELOAD (not collar again), its stderr discarded.
 * posix_spawn does not copy the address space, which matters to MPI
 * libraries with registered memory.  Frames it does not name keep
 * name == NULL.
 */
static void addr2line_batch(frame_t *f, size_t n)
{
    char (*addrs)[24] = calloc(n, sizeof(*addrs));
    char **argv = calloc(n + 6, sizeof(*argv));
    size_t nenv = 0;
    while (environ != NULL && environ[nenv] != NULL) {
        nenv++;
    }
    char **envp = calloc(nenv + 1, sizeof(*envp));
    int fds[2] = { -1, -1 };
    posix_spawn_file_actions_t fa;
    int fa_ok = 0;
    pid_t pid = -1;
    if (addrs == NULL || argv == NULL || envp == NULL || pipe2(fds, O_CLOEXEC) != 0) {
        goto out;
    }
    for (size_t i = 0, e = 0; i < nenv; i++) {
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0) {
            envp[e++] = environ[i];
        }
    }
    argv[0] = "addr2line";
    argv[1] = "-f";
    argv[2] = "-C";
    argv[3] = "-e";
    argv[4] = (char *)f[0].obj;
    for (size_t i = 0; i < n; i++) {
        snprintf(addrs[i], sizeof(addrs[i]), "0x%llx", (unsigned long long)f[i].addr);
        argv[5 + i] = addrs[i];
    }
    if (posix_spawn_file_actions_init(&fa) != 0) {
        goto out;
    }
    fa_ok = 1;
    if (posix_spawn_file_actions_adddup2(&fa, fds[1], 1) != 0
        || posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) != 0
        || posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0) != 0
        || posix_spawn(&pid, ADDR2LINE, &fa, NULL, argv, envp) != 0) {
        pid = -1;
        goto out;
    }
    close(fds[1]);
    fds[1] = -1;
    FILE *in = fdopen(fds[0], "r");
    if (in != NULL) {
        fds[0] = -1;
        char *func = NULL, *line = NULL;
        size_t funclen = 0, linelen = 0;
        for (size_t i = 0; i < n; i++) {
            if (getline(&func, &funclen, in) < 0 || getline(&line, &linelen, in) < 0) {
                break;
            }
            chomp(func);
            chomp(line);
            f[i].name = frame_name(&f[i], func, line);
        }
        free(func);
        free(line);
        fclose(in);
    }
out:
    if (fds[0] >= 0) {
        close(fds[0]);
    }
    if (fds[1] >= 0) {
        close(fds[1]);
    }
    if (pid > 0) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    if (fa_ok) {
        posix_spawn_file_actions_destroy(&fa);
    }
    free(envp);
    free(argv);
    free(addrs);
}

/* Name every distinct frame (sorted by object): addr2line where it can. */
void collar_stats_resolve(frame_t *f, size_t n)
{
    int have_a2l = access(ADDR2LINE, X_OK) == 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && strcmp(f[j].obj, f[i].obj) == 0) {
            j++;
        }
        if (have_a2l && f[i].obj[0] == '/' && access(f[i].obj, R_OK) == 0) {
            for (size_t k = i; k < j; k += A2L_BATCH) {
                addr2line_batch(&f[k], j - k < A2L_BATCH ? j - k : A2L_BATCH);
            }
        }
        for (size_t k = i; k < j; k++) {
            if (f[k].name == NULL) {
                f[k].name = frame_name(&f[k], NULL, NULL);
            }
        }
        i = j;
    }
}

