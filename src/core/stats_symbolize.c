/*
 * collar - statistics: naming call sites (COLLAR_STATS=callsites).
 *
 * The hot path stores raw return addresses (stats.c).  At the report each
 * rank turns them into (object file, address within the object) with
 * dladdr1(), pc - 1 so that the address lies inside the call instruction --
 * position-independent executables and shared libraries load at different
 * addresses on different ranks, an object-relative address is the same.
 * Rank 0 then names each distinct (object, address) once, in process, with
 * no helper program:
 *   - with libdw (elfutils; configure: --with-libdw): "function (file:line)"
 *     from the object's DWARF, found next to the object, through its
 *     .gnu_debuglink or its build id (separate debug files included), else
 *     the function from the object's symbol table;
 *   - without it: the function as the recording rank's libunwind named it
 *     from the symbol table (unw_get_proc_name), else dladdr's dynamic
 *     symbol, else "object+0xaddress".
 */
#include "config.h"
#include "stats_int.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef COLLAR_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#endif
#if defined(COLLAR_HAVE_LIBUNWIND) && !defined(COLLAR_HAVE_LIBDW)
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

/* ------------------------------------------- locating frames, per rank */

/* The function around `a` in this process, as libunwind names it from the
 * object's symbol table (static functions included, which dladdr cannot
 * see), or "" when it cannot. */
static void unwind_name(uintptr_t a, char *sym, size_t len)
{
#if defined(COLLAR_HAVE_LIBUNWIND) && !defined(COLLAR_HAVE_LIBDW)
    unw_context_t ctx;
    unw_cursor_t cursor;
    char name[512];
    unw_word_t off = 0;
    if (unw_getcontext(&ctx) == 0 && unw_init_local(&cursor, &ctx) == 0
        && unw_set_reg(&cursor, UNW_REG_IP, (unw_word_t)a) == 0
        && unw_get_proc_name(&cursor, name, sizeof(name), &off) == 0) {
        snprintf(sym, len, "%s", name);
    }
#else
    (void)a;
    (void)sym;
    (void)len;
#endif
}

/*
 * One frame as (object, address in the object, a symbol: the function, or
 * dladdr's "symbol+0xoffset"): the object the
 * return address lies in, the address minus the object's load bias -- the
 * address in the object's own ELF headers and DWARF, for shared libraries,
 * position-independent and ordinary executables alike.
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
    unwind_name(a, sym, len);
    if (sym[0] == '\0' && info.dli_sname != NULL) {
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

/* One frame's name from its function and source file and line (each may
 * be NULL), else from the symbol the recording rank found. */
static char *frame_name(const frame_t *f, const char *func, const char *file, int line)
{
    char buf[2048];
    char where[1024] = "";
    int have_func = func != NULL && func[0] != '\0';
    if (file != NULL && file[0] != '\0' && line > 0) {
        snprintf(where, sizeof(where), "%s:%d", base_name(file), line);
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

#ifdef COLLAR_HAVE_LIBDW
/* C++ names readable, when the program has a C++ runtime to demangle them
 * (a C program has no mangled names). */
typedef char *(*demangle_fn_t)(const char *, char *, size_t *, int *);

static char *demangle(const char *name)
{
    if (name == NULL || strncmp(name, "_Z", 2) != 0) {
        return NULL;
    }
    demangle_fn_t fn;
    *(void **)&fn = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    int status = -1;
    char *out = fn != NULL ? fn(name, NULL, NULL, &status) : NULL;
    if (status != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

/* The function inlined at `a`, if the address lies in inlined code: the
 * innermost one, whose line dwfl_module_getsrc gives (as addr2line). */
static const char *inlined_name(Dwfl_Module *mod, Dwarf_Addr a)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, a, &bias);
    Dwarf_Die *scopes = NULL;
    const char *name = NULL;
    int n = cu != NULL ? dwarf_getscopes(cu, a - bias, &scopes) : 0;
    for (int i = 0; i < n; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_inlined_subroutine) {
            name = dwarf_diename(&scopes[i]);
            break;
        }
        if (tag == DW_TAG_subprogram) {
            break;
        }
    }
    free(scopes);
    return name;
}

/* Name the frames f[0..n) of one object from its DWARF and symbols. */
static void dwfl_names(frame_t *f, size_t n)
{
    Dwfl *dwfl = dwfl_begin(&offline_callbacks);
    if (dwfl == NULL) {
        return;
    }
    dwfl_report_begin(dwfl);
    Dwfl_Module *mod = dwfl_report_offline(dwfl, f[0].obj, f[0].obj, -1);
    dwfl_report_end(dwfl, NULL, NULL);
    GElf_Addr bias = 0;
    if (mod != NULL && dwfl_module_getelf(mod, &bias) != NULL) {
        for (size_t i = 0; i < n; i++) {
            Dwarf_Addr a = (Dwarf_Addr)f[i].addr + bias;
            const char *func = inlined_name(mod, a);
            if (func == NULL) {
                func = dwfl_module_addrname(mod, a);
            }
            char *readable = demangle(func);
            Dwfl_Line *line = dwfl_module_getsrc(mod, a);
            int lineno = 0;
            const char *file = line != NULL
                               ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
            f[i].name = frame_name(&f[i], readable ? readable : func, file, lineno);
            free(readable);
        }
    }
    dwfl_end(dwfl);
}
#endif

/* Name every distinct frame (sorted by object), each object read once. */
void collar_stats_resolve(frame_t *f, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && strcmp(f[j].obj, f[i].obj) == 0) {
            j++;
        }
#ifdef COLLAR_HAVE_LIBDW
        if (f[i].obj[0] == '/' && access(f[i].obj, R_OK) == 0) {
            dwfl_names(&f[i], j - i);
        }
#endif
        for (size_t k = i; k < j; k++) {
            if (f[k].name == NULL) {
                f[k].name = frame_name(&f[k], NULL, NULL, 0);
            }
        }
        i = j;
    }
}
