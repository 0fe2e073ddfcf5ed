/*
 * collar - GDRCopy (see gdrcopy.h): the library loaded at run time, the
 * mappings of device allocations, and the copies through them.
 *
 * GDRCopy's documented API (gdrapi.h, README "Restrictions"), which this
 * file keeps:
 *   gdr_open          opens the driver (/dev/gdrdrv); NULL when it is not
 *                     there: collar then copies as before, one info line.
 *   gdr_pin_buffer    pins GPU pages for mapping; it "accepts any
 *                     addresses returned by cudaMalloc", and gdr_map
 *                     "requires that the pinned address is aligned to the
 *                     GPU page" (64 KiB, GPU_PAGE_SIZE), which cudaMalloc
 *                     does not promise.  A pin and its mapping are the
 *                     pinned allocation's only: "it is unsafe to assume
 *                     that you can use the same CPU VA range from mapping
 *                     CUDA buffer A to access CUDA buffer B" (GDRCopy's
 *                     maintainers), and small allocations share GPU
 *                     pages.  So collar pins from the first GPU page
 *                     boundary inside the allocation to its end, never
 *                     an address below its base (that would pin whatever
 *                     lies there: another allocation, whose bytes alone
 *                     the mapping would then hold), and copies through
 *                     the mapping only bytes of the allocation past that
 *                     boundary; the rest (and an allocation with no
 *                     boundary inside) goes through the copy engine.
 *   gdr_get_info      va and mapped_size of the pinned range: "both might
 *                     be different from the original address passed to
 *                     gdr_pin_buffer due to aligning"; device address p
 *                     is at map + (p - info.va) in the mapping.
 *   gdr_map, gdr_unmap, gdr_unpin_buffer, gdr_close
 *                     "First invoke gdr_unmap() then gdr_unpin_buffer()".
 *   gdr_copy_to_mapping / gdr_copy_from_mapping
 *                     the CPU copy.  A write through the (write-combining)
 *                     mapping is fenced inside gdr_copy_to_mapping (a
 *                     store fence after the stores), so it has left the
 *                     CPU when the call returns: device work launched
 *                     after the collective returns sees it.  Work already
 *                     running on the device is not ordered with it
 *                     ("integrity and ordering of data as observed by
 *                     pre-launched GPU work is not guaranteed"): none may
 *                     touch a receive buffer during the collective (MPI).
 *                     A read sees what device work wrote once that work
 *                     is complete: the backend orders first (cuda.c); a
 *                     synchronous cudaMemcpy from pageable memory that
 *                     returned before its DMA (what
 *                     CU_POINTER_ATTRIBUTE_SYNC_MEMOPS would prevent,
 *                     which collar does not set on the application's
 *                     memory) is covered by the same wait.
 *
 * Mappings: at most GDR_MAPS, and GDR_PINNED_MAX bytes pinned in all
 * (BAR1 space is finite); the least recently used goes first.  Each is
 * keyed by its allocation's base and buffer id (the pointer cache's
 * answer, which checks the buffer id at every hit; the GPUDirect RDMA
 * guide's "buffer ID tag check" of a registration cache): an
 * allocation freed and another made at the same address has another id,
 * and its old mapping is unpinned and the new one pinned.  A mapping whose
 * allocation is gone but never seen again is found when the next one is
 * pinned (every mapping's base is asked for its buffer id then).  A pin
 * the driver refuses is remembered, so that the allocation is not asked
 * again.  One lock over the table and the copies (they are small).
 */
#include "config.h"
#include "gdrapi_abi.h"
#include "gdrcopy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define GDR_PAGE       GDR_GPU_PAGE
#define GDR_MAPS       64
#define GDR_PINNED_MAX ((size_t)1 << 30)

typedef struct {
    uintptr_t          base;      /* the allocation */
    size_t             size;
    unsigned long long id;
    int                failed;    /* the pin was refused: not asked again */
    gdr_mh_t           mh;
    void              *map;       /* gdr_map's address */
    uintptr_t          start;     /* the pinned address: base rounded up */
    size_t             pinned;    /* bytes pinned (and mapped) from start */
    size_t             held;      /* the GPU pages' bytes: BAR1 space */
    uint64_t           va;        /* gdr_get_info: the device address at map */
    uint64_t           mapped;    /* gdr_get_info: bytes from va */
    uint64_t           used;      /* LRU clock */
} gdr_map_t;

static struct {
    pthread_mutex_t lock;
    int             state;      /* 0 not tried, 1 in use, -1 not in use;
                                   atomic: read without the lock */
    char            why[200];   /* state -1 */
    void           *lib;
    gdr_t           g;
    /* The entry points, from dlsym (gdrapi_abi.h's prototypes). */
    __typeof__(gdr_open)              *open;
    __typeof__(gdr_close)             *close;
    __typeof__(gdr_pin_buffer)        *pin;
    __typeof__(gdr_unpin_buffer)      *unpin;
    __typeof__(gdr_get_info_v2)       *info;
    __typeof__(gdr_map)               *map;
    __typeof__(gdr_unmap)             *unmap;
    __typeof__(gdr_copy_to_mapping)   *to;
    __typeof__(gdr_copy_from_mapping) *from;
    gdr_map_t       m[GDR_MAPS];
    int             n;
    size_t          pinned;
    uint64_t        clock;
    uint64_t        copies_to, copies_from, pins, unpins;
} gd = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Not in use, because of `fmt`: said once (info; a warning when
 * COLLAR_GDRCOPY=1 asked for it).  Lock held. */
__attribute__((format(printf, 1, 2)))
static void gdr_off(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(gd.why, sizeof(gd.why), fmt, ap);
    va_end(ap);
    __atomic_store_n(&gd.state, -1, __ATOMIC_RELEASE);   /* after why */
    if (collar_cfg.gdrcopy == COLLAR_GDRCOPY_ON) {
        collar_warn(MEM, "gdrcopy: not in use (%s); small device copies go "
                    "through the copy engine", gd.why);
    } else if (collar_cfg.gdrcopy == COLLAR_GDRCOPY_AUTO) {
        collar_info(MEM, "gdrcopy: not in use (%s); small device copies go "
                    "through the copy engine", gd.why);
    }
}

/* Lock held. */
static void gdr_load(void)
{
    if (collar_cfg.gdrcopy == COLLAR_GDRCOPY_OFF) {
        gdr_off("disabled by COLLAR_GDRCOPY=0");
        return;
    }
    const char *name = collar_cfg.gdrcopy_library != NULL
                       && collar_cfg.gdrcopy_library[0]
                       ? collar_cfg.gdrcopy_library : "libgdrapi.so.2";
    if (gd.lib == NULL) {
        gd.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    }
    if (gd.lib == NULL) {
        const char *e = dlerror();
        gdr_off("library absent: %s", e != NULL ? e : name);
        return;
    }
    *(void **)&gd.open = dlsym(gd.lib, "gdr_open");
    *(void **)&gd.close = dlsym(gd.lib, "gdr_close");
    *(void **)&gd.pin = dlsym(gd.lib, "gdr_pin_buffer");
    *(void **)&gd.unpin = dlsym(gd.lib, "gdr_unpin_buffer");
    /* gdr_get_info is gdr_get_info_v2 from GDRCopy 2.3 on; the v1 struct
     * is the v2 struct's beginning. */
    *(void **)&gd.info = dlsym(gd.lib, "gdr_get_info_v2");
    if (gd.info == NULL) {
        *(void **)&gd.info = dlsym(gd.lib, "gdr_get_info");
    }
    *(void **)&gd.map = dlsym(gd.lib, "gdr_map");
    *(void **)&gd.unmap = dlsym(gd.lib, "gdr_unmap");
    *(void **)&gd.to = dlsym(gd.lib, "gdr_copy_to_mapping");
    *(void **)&gd.from = dlsym(gd.lib, "gdr_copy_from_mapping");
    if (gd.open == NULL || gd.close == NULL || gd.pin == NULL
        || gd.unpin == NULL || gd.info == NULL || gd.map == NULL
        || gd.unmap == NULL || gd.to == NULL || gd.from == NULL) {
        gdr_off("%s lacks gdr_pin_buffer or its companions", name);
        return;
    }
    gd.g = gd.open();
    if (gd.g == NULL) {
        gdr_off("gdr_open failed: the gdrdrv driver is not loaded or not "
                "accessible");
        return;
    }
    __atomic_store_n(&gd.state, 1, __ATOMIC_RELEASE);
    collar_debug(MEM, "gdrcopy: in use (%s)", name);
}

int collar_gdr_available(const char **why)
{
    /* Decided: no lock (every small copy asks, and most machines have no
     * GDRCopy). */
    const int known = __atomic_load_n(&gd.state, __ATOMIC_ACQUIRE);
    if (known != 0) {
        if (why != NULL) {
            *why = known > 0 ? NULL : gd.why;
        }
        return known > 0;
    }
    pthread_mutex_lock(&gd.lock);
    if (gd.state == 0) {
        gdr_load();
    }
    const int in_use = gd.state > 0;
    if (why != NULL) {
        *why = in_use ? NULL : gd.why;
    }
    pthread_mutex_unlock(&gd.lock);
    return in_use;
}

/* Unmap and unpin mapping i and drop it.  Lock held. */
static void gdr_drop(int i)
{
    gdr_map_t *m = &gd.m[i];
    if (!m->failed) {
        if (gd.unmap(gd.g, m->mh, m->map, m->pinned) != 0) {
            collar_debug(MEM, "gdrcopy: gdr_unmap failed");
        }
        if (gd.unpin(gd.g, m->mh) != 0) {
            collar_debug(MEM, "gdrcopy: gdr_unpin_buffer failed");
        }
        gd.pinned -= m->held;
        gd.unpins++;
    }
    gd.m[i] = gd.m[--gd.n];
}

/* Room for `bytes` more pinned: the mappings of allocations that are gone
 * first, then the least recently used.  Lock held. */
static void gdr_make_room(size_t bytes, collar_gdr_id_fn id_now)
{
    for (int i = 0; i < gd.n;) {
        if (id_now((const void *)gd.m[i].base) != gd.m[i].id) {
            gdr_drop(i);
        } else {
            i++;
        }
    }
    while (gd.n > 0 && (gd.n == GDR_MAPS || gd.pinned + bytes > GDR_PINNED_MAX)) {
        int lru = 0;
        for (int i = 1; i < gd.n; i++) {
            if (gd.m[i].used < gd.m[lru].used) {
                lru = i;
            }
        }
        gdr_drop(lru);
    }
}

/* Where a pin of the allocation `a` starts: its first GPU page boundary
 * (not below its base: see the head of this file). */
static uintptr_t gdr_start(const collar_ptr_info_t *a)
{
    return (a->base + GDR_PAGE - 1) & ~(GDR_PAGE - 1);
}

/* Pin and map the allocation `a`, which holds a GPU page boundary, from
 * there to its end into a new table entry.  Lock held. */
static gdr_map_t *gdr_pin(const collar_ptr_info_t *a, collar_gdr_id_fn id_now)
{
    const uintptr_t lo = gdr_start(a);
    const uintptr_t end = a->base + a->size;
    const uintptr_t hi = (end + GDR_PAGE - 1) & ~(GDR_PAGE - 1);
    const size_t bytes = end - lo;
    gdr_make_room(hi - lo, id_now);
    gdr_map_t *m = &gd.m[gd.n];
    memset(m, 0, sizeof(*m));
    m->base = a->base;
    m->size = a->size;
    m->id = a->buffer_id;
    int rc = gd.pin(gd.g, lo, bytes, 0, 0, &m->mh);
    if (rc != 0) {
        collar_debug(MEM, "gdrcopy: gdr_pin_buffer of %zu bytes at %#lx failed "
                     "(%d); that allocation is copied by the copy engine",
                     bytes, (unsigned long)lo, rc);
        m->failed = 1;
        gd.n++;
        return m;
    }
    gdr_info_t info;
    memset(&info, 0, sizeof(info));
    rc = gd.map(gd.g, m->mh, &m->map, bytes);
    if (rc == 0) {
        rc = gd.info(gd.g, m->mh, &info);
        if (rc != 0) {
            gd.unmap(gd.g, m->mh, m->map, bytes);
        }
    }
    if (rc != 0 || info.va > lo || info.va + info.mapped_size < end) {
        collar_debug(MEM, "gdrcopy: gdr_map of %zu bytes at %#lx failed (%d); "
                     "that allocation is copied by the copy engine", bytes,
                     (unsigned long)lo, rc);
        gd.unpin(gd.g, m->mh);
        m->failed = 1;
        gd.n++;
        return m;
    }
    m->start = lo;
    m->pinned = bytes;
    m->held = hi - lo;
    m->va = info.va;
    m->mapped = info.mapped_size;
    gd.pinned += m->held;
    gd.pins++;
    gd.n++;
    return m;
}

collar_status_t collar_gdr_copy(const collar_ptr_info_t *alloc, void *dev,
                                void *host, size_t bytes, int to_dev,
                                collar_gdr_id_fn id_now)
{
    const uintptr_t p = (uintptr_t)dev;
    if (alloc->buffer_id == 0 || alloc->size == 0 || p < alloc->base
        || p - alloc->base > alloc->size || bytes > alloc->size - (p - alloc->base)
        || alloc->size > GDR_PINNED_MAX) {
        return COLLAR_ERR_UNAVAILABLE;   /* cannot tell the allocation */
    }
    if (p < gdr_start(alloc)) {
        return COLLAR_ERR_UNAVAILABLE;   /* below its first GPU page boundary
                                            (or none inside): no pin has it */
    }
    pthread_mutex_lock(&gd.lock);
    if (gd.state == 0) {
        gdr_load();
    }
    if (gd.state < 0) {
        pthread_mutex_unlock(&gd.lock);
        return COLLAR_ERR_UNAVAILABLE;
    }
    gdr_map_t *m = NULL;
    for (int i = 0; i < gd.n; i++) {
        if (gd.m[i].base == alloc->base) {
            if (gd.m[i].id == alloc->buffer_id && gd.m[i].size == alloc->size) {
                m = &gd.m[i];
            } else {
                gdr_drop(i);   /* freed; another allocation is there now */
            }
            break;
        }
    }
    if (m == NULL) {
        m = gdr_pin(alloc, id_now);
    }
    m->used = ++gd.clock;
    /* Inside the allocation's pinned part, and inside the mapping, every
     * time: the table's entry and the caller's answer are the same
     * allocation (base, size, id), so these bytes are that allocation's. */
    collar_status_t st = COLLAR_ERR_UNAVAILABLE;
    if (!m->failed && p >= m->start && p - m->base <= m->size
        && bytes <= m->size - (p - m->base)
        && p >= m->va && p - m->va + bytes <= m->mapped) {
        char *at = (char *)m->map + (p - m->va);
        const int rc = to_dev ? gd.to(m->mh, at, host, bytes)
                              : gd.from(m->mh, host, at, bytes);
        if (rc == 0) {
            st = COLLAR_OK;
            if (to_dev) {
                gd.copies_to++;
            } else {
                gd.copies_from++;
            }
        }
    }
    pthread_mutex_unlock(&gd.lock);
    return st;
}

void collar_gdr_finalize(void)
{
    pthread_mutex_lock(&gd.lock);
    if (gd.state > 0) {
        collar_debug(MEM, "gdrcopy: %llu copies to the device, %llu from it; "
                     "%llu pins, %llu unpins before the %d at finalize",
                     (unsigned long long)gd.copies_to,
                     (unsigned long long)gd.copies_from,
                     (unsigned long long)gd.pins, (unsigned long long)gd.unpins,
                     gd.n);
        while (gd.n > 0) {
            gdr_drop(gd.n - 1);
        }
        gd.close(gd.g);
        gd.g = NULL;
    }
    gd.n = 0;
    gd.pinned = 0;
    __atomic_store_n(&gd.state, 0, __ATOMIC_RELEASE);   /* a later start
                                                           loads again */
    gd.copies_to = gd.copies_from = gd.pins = gd.unpins = 0;
    pthread_mutex_unlock(&gd.lock);
}
