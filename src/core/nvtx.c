/*
 * collar - NVTX ranges (COLLAR_NVTX): each collective collar runs, and at
 * the level `steps` each of its steps, as a range of the domain "collar",
 * for Nsight Systems and any other NVTX tool.
 *
 * NVTX v3 is the toolkit's header-only nvtx3/nvToolsExt.h (configure looks
 * for it beside CUDA, and on its own when CUDA is not used); without it the
 * ranges are compiled out.  Its first call looks for a tool
 * (NVTX_INJECTION64_PATH, or one already in the process); without one
 * every NVTX call is a no-op and creating the domain gives NULL, so collar
 * then never calls NVTX again: with no tool attached a range costs nothing.
 *
 * Ranges are start/end ranges (nvtxDomainRangeStartEx / End), not push/pop:
 * a nonblocking operation and its steps start in one thread and may end in
 * another (the progress thread, a later MPI_Wait), and the steps of a
 * pipeline overlap without nesting.  Names are registered strings; the
 * bytes are the range's payload; categories (named) group collectives,
 * copies, MPI calls, reductions, signals and host work.
 */
#include "config.h"
#include "observe_int.h"

#ifdef COLLAR_HAVE_NVTX

#include <nvtx3/nvToolsExt.h>

enum {
    CAT_COLL = 1, CAT_COPY, CAT_MPI, CAT_REDUCE, CAT_SIGNAL, CAT_HOST
};

static nvtxDomainHandle_t nvtx_domain;
static nvtxStringHandle_t coll_strings[COLLAR_COLL_COUNT][COLLAR_ALG_COUNT];
static nvtxStringHandle_t phase_strings[COLLAR_PHASE_COUNT];

static uint32_t phase_category(collar_phase_t phase)
{
    switch (phase) {
    case COLLAR_PHASE_COPY_IN:
    case COLLAR_PHASE_COPY_OUT:
    case COLLAR_PHASE_COPY:
        return CAT_COPY;
    case COLLAR_PHASE_REDUCE:
    case COLLAR_PHASE_HOST_REDUCE:
        return CAT_REDUCE;
    case COLLAR_PHASE_SIGNAL:
    case COLLAR_PHASE_AGREE:
        return CAT_SIGNAL;
    case COLLAR_PHASE_MPI_ALLREDUCE:
    case COLLAR_PHASE_MPI_SEND:
    case COLLAR_PHASE_MPI_RECV:
    case COLLAR_PHASE_MPI_COLL:
        return CAT_MPI;
    default:
        return CAT_HOST;
    }
}

static const uint32_t category_colors[] = {
    0, 0xff4c72b0, 0xff55a868, 0xffc44e52, 0xff8172b2, 0xffccb974, 0xff8c8c8c
};

int collar_nvtx_init(int level, int rank)
{
    nvtx_domain = nvtxDomainCreateA("collar");
    if (nvtx_domain == NULL) {
        if (rank == 0) {
            collar_debug(INIT, "NVTX: no tool attached; no ranges");
        }
        return 0;
    }
    static const char *const categories[] = {
        NULL, "collective", "copy", "MPI", "reduction", "signal", "host"
    };
    for (uint32_t c = CAT_COLL; c <= CAT_HOST; c++) {
        nvtxDomainNameCategoryA(nvtx_domain, c, categories[c]);
    }
    for (int c = 0; c < COLLAR_COLL_COUNT; c++) {
        for (int a = 0; a < COLLAR_ALG_COUNT; a++) {
            char name[64];
            snprintf(name, sizeof(name), "%s %s", collar_coll_name((collar_coll_t)c),
                     collar_alg_name((collar_alg_t)a));
            coll_strings[c][a] = nvtxDomainRegisterStringA(nvtx_domain, name);
        }
    }
    for (int p = 0; p < COLLAR_PHASE_COUNT; p++) {
        phase_strings[p] = nvtxDomainRegisterStringA(nvtx_domain,
                                                     collar_phase_name((collar_phase_t)p));
    }
    if (rank == 0) {
        collar_info(INIT, "NVTX: ranges of %s in the domain collar",
                    level == COLLAR_NVTX_STEPS ? "collectives and steps"
                                               : "collectives");
    }
    return COLLAR_OBS_NVTX | (level == COLLAR_NVTX_STEPS ? COLLAR_OBS_NVTX_STEPS : 0);
}

static uint64_t range_start(nvtxStringHandle_t name, uint32_t category,
                            size_t bytes)
{
    nvtxEventAttributes_t attr = { 0 };
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.category = category;
    attr.colorType = NVTX_COLOR_ARGB;
    attr.color = category_colors[category];
    attr.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    attr.payload.ullValue = bytes;
    attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attr.message.registered = name;
    return nvtxDomainRangeStartEx(nvtx_domain, &attr);
}

uint64_t collar_nvtx_coll_start(collar_coll_t coll, collar_alg_t alg,
                                size_t bytes)
{
    if ((int)coll < 0 || coll >= COLLAR_COLL_COUNT || (int)alg < 0
        || alg >= COLLAR_ALG_COUNT) {
        return 0;
    }
    return range_start(coll_strings[coll][alg], CAT_COLL, bytes);
}

uint64_t collar_nvtx_phase_start(collar_phase_t phase, size_t bytes)
{
    if ((int)phase < 0 || phase >= COLLAR_PHASE_COUNT) {
        return 0;
    }
    return range_start(phase_strings[phase], phase_category(phase), bytes);
}

void collar_nvtx_end(uint64_t range)
{
    nvtxDomainRangeEnd(nvtx_domain, range);
}

#else /* !COLLAR_HAVE_NVTX */

int collar_nvtx_init(int level, int rank)
{
    (void)level;
    if (rank == 0) {
        collar_debug(INIT, "NVTX: not built in (configure found no "
                     "nvtx3/nvToolsExt.h); no ranges");
    }
    return 0;
}

uint64_t collar_nvtx_coll_start(collar_coll_t coll, collar_alg_t alg,
                                size_t bytes)
{
    (void)coll;
    (void)alg;
    (void)bytes;
    return 0;
}

uint64_t collar_nvtx_phase_start(collar_phase_t phase, size_t bytes)
{
    (void)phase;
    (void)bytes;
    return 0;
}

void collar_nvtx_end(uint64_t range)
{
    (void)range;
}

#endif /* COLLAR_HAVE_NVTX */
