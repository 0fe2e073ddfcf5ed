/* collar's tools: the libcollar.so their messages name (libpath.h). */
#include "config.h"
#include "libpath.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* `path` when it is a readable file, into buf: its directory made absolute
 * and tidy ("bin/../lib"), its name as it is (libcollar.so, not the file
 * the link names). */
static int take(const char *path, char *buf, size_t len)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (access(path, R_OK) != 0 || slash == NULL
        || (size_t)(slash - path) >= sizeof(dir)) {
        return 0;
    }
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    if (realpath(dir[0] ? dir : "/", real) == NULL) {
        return 0;
    }
    snprintf(buf, len, "%s%s", strcmp(real, "/") == 0 ? "" : real, slash);
    return 1;
}

void collar_tool_library_path(char *buf, size_t len)
{
    /* Loaded here: collar's API is the library's alone (the tools link
     * only the core). */
    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, "collar_version");
    if (sym != NULL && dladdr(sym, &info) != 0 && info.dli_fname != NULL
        && strstr(info.dli_fname, "libcollar") != NULL
        && take(info.dli_fname, buf, len)) {
        return;
    }
    /* Beside this program: the build tree's src/ (or a libtool
     * wrapper's .libs/); then the configured libdir; then lib/ beside an
     * installation's bin/ moved elsewhere. */
    static const char *const beside[] = {
        ".libs/libcollar.so", "libcollar.so", NULL, "../lib/libcollar.so",
    };
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash = NULL;
    if (n > 0) {
        exe[n] = '\0';
        slash = strrchr(exe, '/');
    }
    if (slash != NULL) {
        *slash = '\0';
    }
    char path[PATH_MAX + 32];
    for (size_t i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
        if (beside[i] == NULL) {
            snprintf(path, sizeof(path), "%s/libcollar.so", LIBDIR);
        } else if (slash != NULL) {
            snprintf(path, sizeof(path), "%s/%s", exe, beside[i]);
        } else {
            continue;
        }
        if (take(path, buf, len)) {
            return;
        }
    }
    /* Not installed yet: where `make install` puts it. */
    snprintf(buf, len, "%s/libcollar.so", LIBDIR);
}
