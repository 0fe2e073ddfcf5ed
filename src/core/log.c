/*
 * collar - logging.
 *
 * Lines look like
 *   collar host:1234:0 WARN ENV  COLLAR_LOG='loud' is invalid ... (config.c:210)
 * i.e. host, pid and rank, level, subsystem, message; warnings and errors
 * carry the source location.  Output goes to stderr or COLLAR_LOG_FILE.
 */
#include "config.h"
#include "core.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
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

void collar_log_open(const char *pattern)
{
    if (pattern == NULL || pattern[0] == '\0' || strcmp(pattern, "stderr") == 0) {
        return;
    }
    char path[4096];
    collar_expand_pattern(pattern, log_rank, path, sizeof(path));
    FILE *f = fopen(path, "a");
    if (f == NULL) {
        collar_warn(ENV, "cannot open COLLAR_LOG_FILE '%s' for appending: %m; "
                    "logging to stderr", path);
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

void collar_log_write(collar_log_level_t level, unsigned subsys,
                      const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    char where[128] = "";
    if (level <= COLLAR_LOG_WARN || level >= COLLAR_LOG_DEBUG) {
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
