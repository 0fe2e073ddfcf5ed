/*
 * collar - GDRCopy's ABI as collar declares it (gdrapi.h of GDRCopy 2.x,
 * its documented API): the types and the entry points that src/mem/gdrcopy.c
 * looks up with dlsym, so that building collar needs no gdrapi.h.  The
 * tests' stand-in library (tests/cudaemu/gdrapi_stub.c) defines them from
 * this header, so that its definitions and collar's calls agree.
 */
#ifndef COLLAR_GDRAPI_ABI_H
#define COLLAR_GDRAPI_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef struct gdr *gdr_t;
typedef struct { unsigned long h; } gdr_mh_t;

/* gdr_info_v2; gdr_info (v1, GDRCopy before 2.3) stops before
 * mapping_type. */
typedef struct {
    uint64_t va;
    uint64_t mapped_size;
    uint32_t page_size;
    uint64_t tm_cycles;
    uint32_t cycles_per_ms;
    unsigned mapped : 1;
    unsigned wc_mapping : 1;
    int      mapping_type;   /* gdr_mapping_type_t: 1 is write-combining */
} gdr_info_t;

/* The GPU page: gdr_map needs a pinned address aligned to it. */
#define GDR_GPU_PAGE ((uintptr_t)1 << 16)

gdr_t gdr_open(void);
int gdr_close(gdr_t g);
int gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, uint64_t p2p_token,
                   uint32_t va_space, gdr_mh_t *handle);
int gdr_unpin_buffer(gdr_t g, gdr_mh_t handle);
int gdr_get_info_v2(gdr_t g, gdr_mh_t handle, gdr_info_t *info);
int gdr_map(gdr_t g, gdr_mh_t handle, void **va, size_t size);
int gdr_unmap(gdr_t g, gdr_mh_t handle, void *va, size_t size);
int gdr_copy_to_mapping(gdr_mh_t handle, void *map_d_ptr, const void *h_ptr,
                        size_t size);
int gdr_copy_from_mapping(gdr_mh_t handle, void *h_ptr, const void *map_d_ptr,
                          size_t size);

#endif /* COLLAR_GDRAPI_ABI_H */
