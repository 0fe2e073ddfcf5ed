/*
 * collar - logging.
 *
 * Lines look like
 *   collar host:1234:0 ERROR COLL cannot run allreduce with ipc: ... (allreduce.c:530)
 *   collar host:1234:0 WARN ENV COLLAR_LOG='loud' is invalid ...
 * i.e. host, pid and rank, level, subsystem, message.  Errors, warnings
 * and the debug and trace levels carry collar's source location, for a
 * report of collar's own trouble; a warning about the user's own
 * environment or tables (subsystems ENV and TUNING) does not: it names
 * the variable, file and line to change, and collar's file:line would
 * only be noise (log_where).  Output goes to stderr or COLLAR_LOG_FILE.
 */
#include "config.h"
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

collar_log_level_t collar_log_level  = COLLAR_LOG_WARN;
unsigned           collar_log_subsys = COLLAR_SUB_ALL;

static int             log_rank = -1;
static FILE           *log_out;            /* NULL: stderr */
static char            log_host[64];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *level_name(collar_log_level_t level)
{
    switch (level) {
    case COLLAR_LOG_ERROR: return "ERROR";
    case COLLAR_LOG_WARN:  return "WARN";
    case COLLAR_LOG_INFO:  return "INFO";
    case COLLAR_LOG_DEBUG: return "DEBUG";
    case COLLAR_LOG_TRACE: return "TRACE";
    default:               return "LOG";
    }
}

static const char *subsys_name(unsigned sub)
{
    switch (sub) {
    case COLLAR_SUB_INIT:   return "INIT";
    case COLLAR_SUB_ENV:    return "ENV";
    case COLLAR_SUB_TUNING: return "TUNING";
    case COLLAR_SUB_COLL:   return "COLL";
    case COLLAR_SUB_MEM:    return "MEM";
    case COLLAR_SUB_STATS:  return "STATS";
    default:                return "ALL";
    }
}

static const char *host_name(void)
{
    if (log_host[0] == '\0') {
        if (gethostname(log_host, sizeof(log_host) - 1) != 0) {
            strcpy(log_host, "?");
        }
        log_host[sizeof(log_host) - 1] = '\0';
        char *dot = strchr(log_host, '.');
        if (dot != NULL) {
            *dot = '\0';
        }
    }
    return log_host;
}

int collar_log_lead = 1;

void collar_log_set_rank(int rank)
{
    log_rank = rank;
    collar_log_lead = rank <= 0;
}

void collar_expand_pattern(const char *pattern, int rank, char *out,
                           size_t outlen)
{
    size_t o = 0;
    if (outlen == 0) {
        return;
    }
    for (const char *p = pattern; *p != '\0' && o + 1 < outlen; p++) {
        char piece[80];
        const char *add = piece;
        if (p[0] == '%' && p[1] != '\0') {
            p++;
            switch (*p) {
            case 'h': add = host_name(); break;
            case 'p': snprintf(piece, sizeof(piece), "%ld", (long)getpid()); break;
            case 'r': snprintf(piece, sizeof(piece), "%d", rank); break;
            case '%': strcpy(piece, "%"); break;
            default:  snprintf(piece, sizeof(piece), "%%%c", *p); break;
            }
        } else {
            piece[0] = *p;
            piece[1] = '\0';
        }
        size_t n = strlen(add);
        if (n > outlen - 1 - o) {
            n = outlen - 1 - o;
        }
        memcpy(out + o, add, n);
        o += n;
    }
    out[o] = '\0';
}

/* A symbolic link collar may follow: the process's own user's, or root's
 * (/dev/stdout), in a directory no other user can change it in (not
 * writable by others, or sticky: only the owner replaces an entry). */
static int trusted_link(const char *path, const struct stat *link)
{
    if (link->st_uid != geteuid() && link->st_uid != 0) {
        return 0;
    }
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    struct stat d;
    if (stat(dirname(dir), &d) != 0) {
        return 0;
    }
    return !(d.st_mode & (S_IWGRP | S_IWOTH)) || (d.st_mode & S_ISVTX);
}

FILE *collar_open_output(const char *path, int append, const char *what,
                         const char *instead)
{
    const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : 0);
    int fd = open(path, flags | O_NOFOLLOW, 0644);
    struct stat link;
    if (fd < 0 && (errno == ELOOP || errno == EACCES)
        && lstat(path, &link) == 0 && S_ISLNK(link.st_mode)) {
        /* A symbolic link (Linux's protected_symlinks refuses some with
         * EACCES already): followed only where nobody else planted it. */
        if (trusted_link(path, &link)) {
            fd = open(path, flags, 0644);
        } else {
            collar_warn(ENV, "%s: '%s' is a symbolic link another user could "
                        "have made (owned by uid %d, or in a directory others "
                        "may write to): not followed; %s", what, path,
                        (int)link.st_uid, instead);
            return NULL;
        }
    }
    if (fd < 0) {
        collar_warn(ENV, "%s: cannot open '%s' for %s: %m; %s", what, path,
                    append ? "appending" : "writing", instead);
        return NULL;
    }
    /* What was opened: the process's own file, or a device or pipe of
     * root's (/dev/null, a terminal); never another user's file. */
    struct stat st;
    if (fstat(fd, &st) != 0
        || (st.st_uid != geteuid() && !(st.st_uid == 0 && !S_ISREG(st.st_mode)))) {
        collar_warn(ENV, "%s: '%s' belongs to another user (uid %d): not "
                    "written; %s", what, path, (int)st.st_uid, instead);
        close(fd);
        return NULL;
    }
    FILE *f = NULL;
    if ((append || !S_ISREG(st.st_mode) || ftruncate(fd, 0) == 0)
        && (f = fdopen(fd, append ? "a" : "w")) == NULL) {
        close(fd);
    }
    if (f == NULL) {
        collar_warn(ENV, "%s: cannot write '%s': %m; %s", what, path, instead);
    }
    return f;
}

void collar_log_open(const char *pattern)
{
    if (pattern == NULL || pattern[0] == '\0' || strcmp(pattern, "stderr") == 0) {
        return;
    }
    char path[4096];
    collar_expand_pattern(pattern, log_rank, path, sizeof(path));
    FILE *f = collar_open_output(path, 1, "COLLAR_LOG_FILE", "logging to stderr");
    if (f == NULL) {
        return;
    }
    setvbuf(f, NULL, _IOLBF, 0);
    pthread_mutex_lock(&log_lock);
    log_out = f;
    pthread_mutex_unlock(&log_lock);
}

void collar_log_close(void)
{
    pthread_mutex_lock(&log_lock);
    if (log_out != NULL) {
        fclose(log_out);
        log_out = NULL;
    }
    pthread_mutex_unlock(&log_lock);
}

/* Whether a line carries collar's source location (see the top). */
static int log_where(collar_log_level_t level, unsigned subsys)
{
    if (level == COLLAR_LOG_WARN) {
        return !(subsys & (COLLAR_SUB_ENV | COLLAR_SUB_TUNING));
    }
    return level == COLLAR_LOG_ERROR || level >= COLLAR_LOG_DEBUG;
}

void collar_log_write(collar_log_level_t level, unsigned subsys,
                      const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    char where[128] = "";
    if (log_where(level, subsys)) {
        const char *base = strrchr(file, '/');
        snprintf(where, sizeof(where), " (%s:%d)", base ? base + 1 : file, line);
    }
    char rank[16] = "-";
    if (log_rank >= 0) {
        snprintf(rank, sizeof(rank), "%d", log_rank);
    }

    pthread_mutex_lock(&log_lock);
    FILE *out = log_out ? log_out : stderr;
    fprintf(out, "collar %s:%ld:%s %s %s %s%s\n", host_name(), (long)getpid(),
            rank, level_name(level), subsys_name(subsys), msg, where);
    fflush(out);
    pthread_mutex_unlock(&log_lock);
}

const char *collar_article(const char *word)
{
    return word != NULL && word[0] != '\0' && strchr("aeiouAEIOU", word[0]) != NULL
           ? "an" : "a";
}

const char *collar_article_n(long n)
{
    /* The group of digits read first: "eight", "eleven", "eighteen",
     * "eighty-", "eight hundred" begin with a vowel. */
    if (n < 0) {
        return "a";
    }
    while (n >= 1000) {
        n /= 1000;
    }
    return n == 8 || n == 11 || n == 18 || (n >= 80 && n <= 89)
           || (n >= 800 && n <= 899) ? "an" : "a";
}

/*
 * A small set of keys already logged, for "say it once" messages.  Keys are
 * hashed; once the table is three quarters full, new keys are reported as
 * seen, so that a program with endlessly many distinct keys logs a bounded
 * number of lines.
 */
#define SEEN_SLOTS 1024
static uint64_t seen[SEEN_SLOTS];
static unsigned seen_count;

int collar_log_first(const char *key)
{
    uint64_t h = 1469598103934665603ull;  /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h = (h ^ *p) * 1099511628211ull;
    }
    if (h == 0) {
        h = 1;
    }
    int first = 0;
    pthread_mutex_lock(&log_lock);
    unsigned i = (unsigned)(h % SEEN_SLOTS);
    for (unsigned probe = 0; probe < SEEN_SLOTS; probe++, i = (i + 1) % SEEN_SLOTS) {
        if (seen[i] == h) {
            break;
        }
        if (seen[i] == 0) {
            if (seen_count < SEEN_SLOTS * 3 / 4) {
                seen[i] = h;
                seen_count++;
                first = 1;
            }
            break;
        }
    }
    pthread_mutex_unlock(&log_lock);
    return first;
}
