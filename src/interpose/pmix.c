/*
 * collar - PMIx_Init, in front of the PMIx library's.
 *
 * Through LD_PRELOAD, collar's definition comes before libpmix's, so the
 * MPI library's call inside MPI_Init (Open MPI 4.1's pmix component, Open
 * MPI 5's runtime) reaches it: it runs the PMIx library's PMIx_Init and,
 * inside collar's MPI_Init only, adds collar's key to what the library's
 * start-up exchange carries, so that every process learns which processes
 * have collar without a message of collar's own (src/core/presence.c).
 * The types are pmix_proc_t * and pmix_info_t[] (no PMIx header needed).
 */
#include "config.h"
#include "interpose.h"

COLLAR_EXPORT int PMIx_Init(void *proc, void *info, size_t ninfo)
{
    return collar_engine_pmix_init(proc, info, ninfo);
}
