/*
 * collar - a collar built for one MPI library in a program that runs another.
 *
 * libcollar.so is linked against the MPI library it was built with (its
 * DT_NEEDED names that library's soname).  Preloaded into a program linked
 * against another MPI (an Open MPI program, libmpi.so.40, under a collar
 * built for MPICH, libmpi.so.12, or the MPI-5 ABI's libmpi_abi.so.1), two
 * MPI libraries are loaded, and the dynamic linker binds each MPI name to
 * the first definition in the global scope:
 *
 *   - the program's MPI_Init, MPI_Allreduce, ... to collar's wrappers
 *     (preloaded, so first);
 *   - collar's PMPI_* references to the program's library when the program
 *     is linked against it (its DT_NEEDED entries come before collar's), but
 *     to collar's library when the program loads its MPI with dlopen
 *     (RTLD_LOCAL: a Python extension module such as mpi4py's);
 *   - in the second case also every MPI call of the extension module that
 *     collar does not wrap, to collar's library.
 *
 * Collar's handles (MPI_COMM_WORLD, MPI_INT, ...) mean nothing to the other
 * library, and the other library's handles nothing to collar's: the first
 * call crashes or aborts.
 *
 * What this file does: find the MPI libraries loaded (the objects that
 * define PMPI_Init), compare their sonames with the one collar was linked
 * against, and on a mismatch warn once and rewrite the GOT entries of
 * collar, of the objects linked against the program's MPI library and of
 * that library itself whose symbol the dynamic linker resolves (or would
 * resolve) to collar or to collar's MPI library, to the program's library's
 * own definition.  From then on every MPI call of the program goes to its
 * own library unchanged, without passing through collar, and whatever still
 * reaches a collar wrapper (a call made before the check) passes on to the
 * program's library, as collar's own PMPI_* references now point there.
 *
 * Two sonames of one ABI (Debian's libmpich.so.12, MPICH's and Intel MPI's
 * libmpi.so.12) are no mismatch: collar's handles are the program's, so
 * collar stays on and only the entries that resolve into collar's own copy
 * of the library are pointed at the program's.
 *
 * The check runs when libcollar.so loads (an ELF constructor: a program
 * linked against its MPI library is then fully redirected before main) and
 * again from collar_abi_ok(), which MPI_Init calls: by then a program that
 * loads its MPI library with dlopen has loaded it.  The rewriting knows the
 * relocation types of x86-64 and AArch64; elsewhere collar_abi_ok() still
 * says 0 and the wrappers pass every call on.
 */
#define _GNU_SOURCE
#include "config.h"
#include "abi.h"
#include "../core/core.h"

#include <mpi.h>

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ABI_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define ABI_R_GLOB_DAT  R_X86_64_GLOB_DAT
#define ABI_R_ADDEND    0
#elif defined(__aarch64__)
#define ABI_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define ABI_R_GLOB_DAT  R_AARCH64_GLOB_DAT
#define ABI_R_ADDEND    1
#endif

/* The MPI library collar was compiled against, in words. */
#if defined(I_MPI_VERSION)
#define ABI_BUILT_NAME "Intel MPI " I_MPI_VERSION
#elif defined(OPEN_MPI) && defined(OMPI_MAJOR_VERSION)
#define ABI_STR_(x) #x
#define ABI_STR(x) ABI_STR_(x)
#define ABI_BUILT_NAME "Open MPI " ABI_STR(OMPI_MAJOR_VERSION) "." \
    ABI_STR(OMPI_MINOR_VERSION) "." ABI_STR(OMPI_RELEASE_VERSION)
#elif defined(MPI_ABI_VERSION)
#define ABI_BUILT_NAME "the MPI-5 standard ABI"
#elif defined(MPICH_VERSION)
#define ABI_BUILT_NAME "MPICH " MPICH_VERSION
#else
#define ABI_BUILT_NAME "an MPI library"
#endif

#define ABI_MAX_OBJS 1024

typedef struct {
    const char *path;            /* "" for the program itself */
    ElfW(Addr) base;
    const ElfW(Phdr) *phdr;
    ElfW(Half) phnum;
    const ElfW(Dyn) *dyn;
    const char *strtab;
    const ElfW(Sym) *symtab;
    const ElfW(Rela) *rela, *jmprel;
    size_t relasz, pltrelsz;
    int pltrel_is_rela;
    const char *soname;
} abi_obj_t;

static abi_obj_t objs[ABI_MAX_OBJS];
static int nobjs;

/* -1 not yet known, 1 ok, 0 mismatch (final). */
static int abi_state = -1;
static char built_soname[128] = "unknown";
/* Two MPI libraries were found and the references redirected. */
static int checked_pair;
/* At the first check (collar's load): an MPI library was loaded before
 * collar (-1 before that check). */
static int after_mpi = -1;

static int collect(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (nobjs == ABI_MAX_OBJS) {
        return 1;
    }
    abi_obj_t *o = &objs[nobjs];
    memset(o, 0, sizeof(*o));
    o->path = info->dlpi_name ? info->dlpi_name : "";
    o->base = info->dlpi_addr;
    o->phdr = info->dlpi_phdr;
    o->phnum = info->dlpi_phnum;
    for (ElfW(Half) i = 0; i < o->phnum; i++) {
        if (o->phdr[i].p_type == PT_DYNAMIC) {
            o->dyn = (const ElfW(Dyn) *)(o->base + o->phdr[i].p_vaddr);
        }
    }
    /* The vDSO's dynamic section is not relocated and has nothing for us. */
    if (o->dyn == NULL || strncmp(o->path, "linux-vdso", 10) == 0
        || strncmp(o->path, "linux-gate", 10) == 0) {
        return 0;
    }
    nobjs++;
    return 0;
}

/* The dynamic linker relocates the address entries of a writable dynamic
 * section in place; a read-only one keeps them relative to the base. */
static uintptr_t dyn_addr(const abi_obj_t *o, ElfW(Addr) v)
{
    return v < o->base ? (uintptr_t)(v + o->base) : (uintptr_t)v;
}

static void parse_dynamic(abi_obj_t *o)
{
    ElfW(Addr) soname_off = 0;
    int have_soname = 0;
    for (const ElfW(Dyn) *d = o->dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_STRTAB:   o->strtab = (const char *)dyn_addr(o, d->d_un.d_ptr); break;
        case DT_SYMTAB:   o->symtab = (const ElfW(Sym) *)dyn_addr(o, d->d_un.d_ptr); break;
        case DT_RELA:     o->rela = (const ElfW(Rela) *)dyn_addr(o, d->d_un.d_ptr); break;
        case DT_RELASZ:   o->relasz = d->d_un.d_val; break;
        case DT_JMPREL:   o->jmprel = (const ElfW(Rela) *)dyn_addr(o, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: o->pltrelsz = d->d_un.d_val; break;
        case DT_PLTREL:   o->pltrel_is_rela = d->d_un.d_val == DT_RELA; break;
        case DT_SONAME:   soname_off = d->d_un.d_val; have_soname = 1; break;
        default: break;
        }
    }
    if (o->strtab != NULL && have_soname) {
        o->soname = o->strtab + soname_off;
    } else {
        const char *slash = strrchr(o->path, '/');
        o->soname = slash ? slash + 1 : o->path;
    }
}

static int contains(const abi_obj_t *o, const void *p)
{
    uintptr_t a = (uintptr_t)p;
    for (ElfW(Half) i = 0; i < o->phnum; i++) {
        const ElfW(Phdr) *ph = &o->phdr[i];
        if (ph->p_type == PT_LOAD && a >= o->base + ph->p_vaddr
            && a < o->base + ph->p_vaddr + ph->p_memsz) {
            return 1;
        }
    }
    return 0;
}

static int find_obj(const void *p)
{
    for (int i = 0; i < nobjs; i++) {
        if (contains(&objs[i], p)) {
            return i;
        }
    }
    return -1;
}

static void *open_obj(const abi_obj_t *o)
{
    return dlopen(o->path[0] != '\0' ? o->path : NULL, RTLD_LAZY | RTLD_NOLOAD);
}

/* The address of `name` when object o itself defines it, else NULL. */
static void *own_symbol(const abi_obj_t *o, void *handle, const char *name)
{
    void *p = handle ? dlsym(handle, name) : NULL;
    return p != NULL && contains(o, p) ? p : NULL;
}

static int needs(const abi_obj_t *o, const char *soname)
{
    if (o->strtab == NULL) {
        return 0;
    }
    for (const ElfW(Dyn) *d = o->dyn; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_NEEDED && strcmp(o->strtab + d->d_un.d_val, soname) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The binary interface a soname stands for: MPICH's libmpich.so.12 (Debian),
 * MPICH's and Intel MPI's libmpi.so.12 are one ABI (the MPICH ABI
 * initiative); Open MPI's libmpi.so.40 another (4.x and 5.0); the MPI-5
 * standard ABI's libmpi_abi.so.1 a third. */
static const char *abi_family(const char *soname)
{
    if (strcmp(soname, "libmpich.so.12") == 0 || strcmp(soname, "libmpi.so.12") == 0) {
        return "MPICH ABI (libmpi.so.12)";
    }
    return soname;
}

#ifdef ABI_R_JUMP_SLOT
/* Write one GOT entry, making a RELRO page writable for the time of it. */
static void write_slot(const abi_obj_t *o, uintptr_t *slot, uintptr_t value)
{
    int relro = 0;
    for (ElfW(Half) i = 0; i < o->phnum; i++) {
        const ElfW(Phdr) *ph = &o->phdr[i];
        uintptr_t a = (uintptr_t)slot;
        if (ph->p_type == PT_GNU_RELRO && a >= o->base + ph->p_vaddr
            && a < o->base + ph->p_vaddr + ph->p_memsz) {
            relro = 1;
        }
    }
    long pagesz = sysconf(_SC_PAGESIZE);
    uintptr_t page = (uintptr_t)slot & ~((uintptr_t)pagesz - 1);
    if (relro && mprotect((void *)page, (size_t)pagesz, PROT_READ | PROT_WRITE) != 0) {
        return;
    }
    *slot = value;
    if (relro) {
        (void)mprotect((void *)page, (size_t)pagesz, PROT_READ);
    }
}

/* Point the entries of o that resolve into collar (self; NULL: not those)
 * or collar's MPI library (built) at the program's library (prog) where it
 * defines the symbol.  Returns the number of entries changed. */
static int redirect_table(const abi_obj_t *o, const ElfW(Rela) *r, size_t bytes,
                          const abi_obj_t *self, const abi_obj_t *built,
                          const abi_obj_t *prog, void *prog_handle)
{
    int changed = 0;
    for (size_t i = 0; i < bytes / sizeof(*r); i++) {
        unsigned long type = ELF64_R_TYPE(r[i].r_info);
        unsigned long sym = ELF64_R_SYM(r[i].r_info);
        if ((type != ABI_R_JUMP_SLOT && type != ABI_R_GLOB_DAT) || sym == 0) {
            continue;
        }
        const char *name = o->strtab + o->symtab[sym].st_name;
        if (name[0] == '\0') {
            continue;
        }
        void *now = dlsym(RTLD_DEFAULT, name);
        if (now == NULL || !((self && contains(self, now)) || contains(built, now))) {
            continue;
        }
        void *want = own_symbol(prog, prog_handle, name);
        if (want == NULL) {
            continue;
        }
        uintptr_t value = (uintptr_t)want + (ABI_R_ADDEND ? (uintptr_t)r[i].r_addend : 0);
        uintptr_t *slot = (uintptr_t *)(o->base + r[i].r_offset);
        if (*slot != value) {
            write_slot(o, slot, value);
            changed++;
        }
    }
    return changed;
}
#endif

static int redirect(const abi_obj_t *o, const abi_obj_t *self, const abi_obj_t *built,
                    const abi_obj_t *prog, void *prog_handle)
{
#ifdef ABI_R_JUMP_SLOT
    if (o->strtab == NULL || o->symtab == NULL) {
        return 0;
    }
    int n = 0;
    if (o->jmprel != NULL && o->pltrel_is_rela) {
        n += redirect_table(o, o->jmprel, o->pltrelsz, self, built, prog, prog_handle);
    }
    if (o->rela != NULL) {
        n += redirect_table(o, o->rela, o->relasz, self, built, prog, prog_handle);
    }
    return n;
#else
    (void)o; (void)self; (void)built; (void)prog; (void)prog_handle;
    return 0;
#endif
}

/* The first rank of the job (or a process not started by a launcher). */
static int lead_process(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                 "MPI_LOCALRANKID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL) {
            return strcmp(v, "0") == 0;
        }
    }
    return 1;
}

/* The first line of the program's library's MPI_Get_library_version (which
 * MPI allows before MPI_Init). */
static void library_version(void *handle, const abi_obj_t *prog, char *out, size_t len)
{
    typedef int (*get_version_fn)(char *, int *);
    snprintf(out, len, "%s", prog->soname);
    void *p = own_symbol(prog, handle, "PMPI_Get_library_version");
    if (p == NULL) {
        return;
    }
    static char buf[16384];
    int n = 0;
    get_version_fn fn;
    memcpy(&fn, &p, sizeof(fn));
    if (fn(buf, &n) != 0) {
        return;
    }
    buf[sizeof(buf) - 1] = '\0';
    buf[strcspn(buf, "\n,")] = '\0';
    /* One space for each run of blanks ("MPICH Version:\t4.0.2"). */
    size_t l = 0;
    for (const char *c = buf; *c != '\0' && l + 1 < len; c++) {
        int blank = *c == ' ' || *c == '\t';
        if (!blank || (l > 0 && out[l - 1] != ' ')) {
            out[l++] = blank ? ' ' : *c;
        }
    }
    while (l > 0 && out[l - 1] == ' ') {
        l--;
    }
    out[l] = '\0';
    if (l == 0) {
        snprintf(out, len, "%s", prog->soname);
    }
    /* libmpi.so.12 and libmpi_abi.so.1 of one MPICH say the same. */
    if (strncmp(prog->soname, "libmpi_abi.", 11) == 0) {
        char tmp[256];
        snprintf(tmp, sizeof(tmp), "the MPI-5 standard ABI of %.200s", out);
        snprintf(out, len, "%s", tmp);
    }
}

static void check(void)
{
    nobjs = 0;
    dl_iterate_phdr(collect, NULL);
    int self = find_obj((const void *)&collar_abi_ok);
    if (self < 0) {
        return;
    }
    for (int i = 0; i < nobjs; i++) {
        parse_dynamic(&objs[i]);
    }
    /* The MPI libraries: the objects that define PMPI_Init themselves. */
    int mpi[ABI_MAX_OBJS];
    void *handles[ABI_MAX_OBJS];
    int nmpi = 0;
    for (int i = 0; i < nobjs; i++) {
        if (i == self) {
            continue;
        }
        void *h = open_obj(&objs[i]);
        if (h != NULL && own_symbol(&objs[i], h, "PMPI_Init") != NULL) {
            mpi[nmpi] = i;
            handles[nmpi++] = h;
        } else if (h != NULL) {
            dlclose(h);
        }
    }
    /* dl_iterate_phdr lists the objects in load order: an MPI library
     * ahead of collar was loaded first (collar loaded with dlopen after it),
     * and whatever bound to its MPI_* names before collar came does not
     * reach collar's. */
    if (after_mpi < 0) {
        after_mpi = nmpi > 0 && mpi[0] < self;
    }
    int built = -1, prog = -1;
    void *prog_handle = NULL;
    for (int k = 0; k < nmpi; k++) {
        if (built < 0 && needs(&objs[self], objs[mpi[k]].soname)) {
            built = mpi[k];
            snprintf(built_soname, sizeof(built_soname), "%s", objs[built].soname);
        }
    }
    for (int k = 0; k < nmpi; k++) {
        if (prog < 0 && mpi[k] != built) {
            prog = mpi[k];
            prog_handle = handles[k];
        }
    }
    if (built >= 0 && prog >= 0) {
        /* Two MPI libraries: whatever the dynamic linker bound to collar's
         * goes to the program's.  Of one ABI (Debian's libmpich.so.12 and a
         * wheel's libmpi.so.12), collar's handles are the program's: collar
         * stays on, its own MPI calls to the program's library.  Else it
         * stays off, and the program's calls skip its wrappers too. */
        int same = strcmp(abi_family(objs[built].soname), abi_family(objs[prog].soname)) == 0;
        abi_state = same ? 1 : 0;
        char version[256];
        library_version(prog_handle, &objs[prog], version, sizeof(version));
        const abi_obj_t *skip_to = same ? NULL : &objs[self];
        int n = redirect(&objs[self], skip_to, &objs[built], &objs[prog], prog_handle);
        for (int i = 0; i < nobjs; i++) {
            if (i != self && i != built
                && (i == prog || needs(&objs[i], objs[prog].soname))) {
                n += redirect(&objs[i], skip_to, &objs[built], &objs[prog], prog_handle);
            }
        }
        const char *path = objs[prog].path[0] ? objs[prog].path : "the program";
        if (!same && lead_process()) {
            collar_log_write(COLLAR_LOG_WARN, COLLAR_SUB_INIT, __FILE__, __LINE__,
                "collar was built for %s (%s) but this program uses %s (%s, %s): "
                "collar stays off and every MPI call goes to the program's MPI library "
                "unchanged; build collar with that library's mpicc (see README)",
                ABI_BUILT_NAME, objs[built].soname, version, objs[prog].soname, path);
        }
        collar_debug(INIT, "collar built for %s, the program uses %s (%s): %s; "
                     "%d MPI references redirected to it", objs[built].soname,
                     objs[prog].soname, path, same ? "one ABI, collar stays on"
                     : "another ABI, collar stays off", n);
        /* Checked once: the redirection is done. */
        checked_pair = 1;
    } else if (built >= 0 || nmpi == 0) {
        abi_state = 1;
    }
    /* Leave an unknown state unknown: a program that loads its MPI library
     * later is checked again from MPI_Init. */
    for (int k = 0; k < nmpi; k++) {
        if (handles[k] != prog_handle || abi_state != 0) {
            dlclose(handles[k]);
        }
    }
}

int collar_abi_ok(void)
{
    if (abi_state != 0 && !checked_pair) {
        check();
    }
    return abi_state != 0;
}

int collar_abi_loaded_after_mpi(void)
{
    return after_mpi == 1;
}

const char *collar_abi_built_soname(void)
{
    return built_soname;
}

/* Once at load, whichever of collar's constructors asks first (init.c's
 * asks too): a second check() would warn twice. */
__attribute__((constructor)) static void collar_abi_load(void)
{
    (void)collar_abi_ok();
}
