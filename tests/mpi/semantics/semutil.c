/*
 * collar - helpers shared by the semantics corpus.  See semutil.h.
 */
#include "config.h"
#include "semutil.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_phase[256];
/* The watchdog's whole line, made when the phase begins: the handler only
 * writes it (write and _exit are async-signal-safe). */
static char g_hang_line[512];
static size_t g_hang_len;
static unsigned g_phase_timeout = 20;

static void on_alarm(int sig)
{
    (void)sig;
    if (write(STDOUT_FILENO, g_hang_line, g_hang_len) < 0) {
        /* nothing more can be done here */
    }
    _exit(3);
}

int sc_init(int *argc, char ***argv, const char *progname)
{
    int asked = MPI_THREAD_SINGLE;
    for (int i = 1; i + 1 < *argc; i++) {
        if (strcmp((*argv)[i], "--thread") == 0) {
            if (strcmp((*argv)[i + 1], "multiple") == 0) {
                asked = MPI_THREAD_MULTIPLE;
            } else if (strcmp((*argv)[i + 1], "single") != 0) {
                fprintf(stderr, "%s: --thread single|multiple, not %s\n",
                        progname, (*argv)[i + 1]);
                exit(2);
            }
            for (int j = i; j + 2 <= *argc; j++) {
                (*argv)[j] = (*argv)[j + 2];
            }
            *argc -= 2;
            break;
        }
    }
    int provided = -1;
    MPI_Init_thread(argc, argv, asked, &provided);
    tu_init(progname);
    if (provided < asked) {
        tu_skip("asked for MPI_THREAD_MULTIPLE, the library gives level %d",
                provided);
    }
    const char *env = getenv("TU_PHASE_TIMEOUT");
    if (env != NULL && *env != '\0') {
        g_phase_timeout = (unsigned)atoi(env);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    return asked;
}

void sc_phase_begin(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_phase, sizeof(g_phase), fmt, ap);
    va_end(ap);
    int n = snprintf(g_hang_line, sizeof(g_hang_line),
                     "rank %d: FAIL hang: %s: %s: not finished after %u s "
                     "(TU_PHASE_TIMEOUT); ending the process\n",
                     tu_world_rank(), tu_progname(), g_phase, g_phase_timeout);
    g_hang_len = n < 0 ? 0 : (size_t)n < sizeof(g_hang_line)
                                 ? (size_t)n : sizeof(g_hang_line) - 1;
    alarm(g_phase_timeout);
}

void sc_phase_end(void)
{
    alarm(0);
    g_phase[0] = '\0';
}

const char *sc_phase(void)
{
    return g_phase;
}

void sc_sync(MPI_Comm comm)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size < 2) {
        return;
    }
    MPI_Request *reqs = malloc(2 * (size_t)size * sizeof(MPI_Request));
    if (reqs == NULL) {
        tu_fail("sc_sync", "no memory");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = 0;
    for (int r = 0; r < size; r++) {
        if (r == rank) {
            continue;
        }
        MPI_Irecv(NULL, 0, MPI_BYTE, r, SC_SYNC_TAG, comm, &reqs[n++]);
        MPI_Isend(NULL, 0, MPI_BYTE, r, SC_SYNC_TAG, comm, &reqs[n++]);
    }
    tu_check_rc(MPI_Waitall(n, reqs, tu_statuses_ignore()), "sc_sync");
    free(reqs);
}

int sc_list_has(const char *list, const char *name)
{
    if (list == NULL || strcmp(list, "all") == 0) {
        return 1;
    }
    const size_t len = strlen(name);
    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, ',');
        const size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, len) == 0) {
            return 1;
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    return 0;
}

const char *sc_arg(int argc, char **argv, const char *name, const char *dflt)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            return argv[i + 1];
        }
    }
    return dflt;
}
