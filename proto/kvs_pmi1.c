/* The PMI-1 wire protocol ("simple" PMI: Hydra, MPICH's and Intel MPI's
 * mpiexec) spoken on the launcher's socket PMI_FD, before and after the MPI
 * library's own PMI client uses it (no library function: libmpich.so.12
 * does not export its PMI_* symbols). */
#include "kvs.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fd = -1;
static char kvsname[256];
const char *kvs_name(void) { return "pmi1"; }

static int send_all(const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        s += w; n -= (size_t)w;
    }
    return 0;
}

/* One line of the answer, exactly (the rest stays for its reader). */
static int recv_line(char *buf, size_t len)
{
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t p = recv(fd, buf + got, len - 1 - got, MSG_PEEK);
        if (p < 0 && errno == EINTR) continue;
        if (p <= 0) return -1;
        char *nl = memchr(buf + got, '\n', (size_t)p);
        size_t take = nl ? (size_t)(nl - (buf + got)) + 1 : (size_t)p;
        ssize_t r;
        do { r = read(fd, buf + got, take); } while (r < 0 && errno == EINTR);
        if (r != (ssize_t)take) return -1;
        got += take;
        if (nl) { buf[got] = 0; return 0; }
    }
    return -1;
}

static int ask(const char *req, char *ans, size_t len)
{
    return send_all(req) == 0 && recv_line(ans, len) == 0 ? 0 : -1;
}

static const char *field(const char *line, const char *name, char *out, size_t len)
{
    size_t n = strlen(name);
    for (const char *p = line; (p = strstr(p, name)) != NULL; p++) {
        if ((p == line || p[-1] == ' ') && p[n] == '=') {
            p += n + 1;
            size_t k = strcspn(p, " \n");
            if (k >= len) k = len - 1;
            memcpy(out, p, k); out[k] = 0;
            return out;
        }
    }
    return NULL;
}

int kvs_put_marker(void)
{
    const char *f = getenv("PMI_FD"), *r = getenv("PMI_RANK");
    if (f == NULL || r == NULL) return -1;
    fd = atoi(f);
    char ans[1024], v[256], req[512];
    if (ask("cmd=init pmi_version=1 pmi_subversion=1\n", ans, sizeof(ans)) != 0
        || field(ans, "rc", v, sizeof(v)) == NULL || strcmp(v, "0") != 0) {
        fprintf(stderr, "init: %s\n", ans); return -1;
    }
    if (ask("cmd=get_my_kvsname\n", ans, sizeof(ans)) != 0
        || field(ans, "kvsname", kvsname, sizeof(kvsname)) == NULL) {
        fprintf(stderr, "kvsname: %s\n", ans); return -1;
    }
    snprintf(req, sizeof(req), "cmd=put kvsname=%s key=collar.%s value=1\n", kvsname, r);
    if (ask(req, ans, sizeof(ans)) != 0 || field(ans, "rc", v, sizeof(v)) == NULL
        || strcmp(v, "0") != 0) {
        fprintf(stderr, "put: %s\n", ans); return -1;
    }
    return 0;
}

int kvs_read_markers(int size, int *has)
{
    if (fd < 0) return -1;
    int ok = 0;
    for (int r = 0; r < size; r++) {
        char req[512], ans[1024], v[64];
        snprintf(req, sizeof(req), "cmd=get kvsname=%s key=collar.%d\n", kvsname, r);
        if (ask(req, ans, sizeof(ans)) != 0 || field(ans, "rc", v, sizeof(v)) == NULL) {
            has[r] = -1; ok = -1; continue;
        }
        has[r] = strcmp(v, "0") == 0;
        if (getenv("PROTO_DEBUG")) fprintf(stderr, "get %d: %s", r, ans);
    }
    return ok;
}

void kvs_done(void) {}
