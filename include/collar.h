/*
 * collar - collective algorithm router for MPI programs.
 *
 * collar is used through LD_PRELOAD and needs no change to the program:
 *
 *     LD_PRELOAD=libcollar.so mpirun -np 8 ./app
 *
 * A program that links libcollar (or finds these symbols with dlsym) can ask
 * whether collar is active.
 */
#ifndef COLLAR_H
#define COLLAR_H

#define COLLAR_VERSION_MAJOR 0
#define COLLAR_VERSION_MINOR 1
#define COLLAR_VERSION_PATCH 0

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, e.g. "0.1.0". */
const char *collar_version(void);

/* 1 between MPI_Init and MPI_Finalize when collar is taking part (not
 * disabled by COLLAR_DISABLE=1), else 0. */
int collar_active(void);

/* The device backend in use: "cuda", "sim" or "none" ("none" also when
 * collar is not active). */
const char *collar_device_name(void);

/*
 * Force the allreduce algorithm for the calls that follow in this process,
 * as COLLAR_ALGORITHM and COLLAR_CHUNK_SIZE would: name is "native",
 * "staged", "chunked", "ring", "ipc", "hier" or "auto" (back to the
 * rules); chunk is the chunk size
 * in bytes (0: the rule's or the default).  Every rank must make the same
 * call between the same collectives, or they would choose differently.
 * For tools and benchmarks (collar-tune uses it).  Returns 0, or -1 for an
 * unknown name or when collar is not active (nothing changes then).
 */
int collar_set_algorithm(const char *name, size_t chunk);

/*
 * The algorithm that ran the calling thread's last MPI_Allreduce (any
 * binding) that collar selected an algorithm for, after every fallback
 * (of a nonblocking ipc or hier call whose IPC memory is still being
 * registered: the algorithm selected, before that registration's outcome):
 * "native", "staged", "chunked", "ring", "ipc" or "hier"; NULL before the
 * first.  Every rank of the communicator gets the same answer (fallbacks
 * are agreed).  For tools: collar-tune checks with it that the candidate
 * it measures is the one that ran.
 */
const char *collar_last_algorithm(void);

/*
 * The communicators collar holds now for the application's: one private
 * duplicate per communicator that carried a device allreduce (none for
 * communicators with host buffers only), plus hier's two on a
 * communicator that spans nodes once hier has run there.  For tests and
 * for a program that counts its context ids.
 */
int collar_communicators(void);

#ifdef __cplusplus
}
#endif

#endif /* COLLAR_H */
