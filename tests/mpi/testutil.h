/*
 * collar - shared helpers for the MPI correctness test programs.
 *
 * The programs under tests/mpi are plain MPI programs: they must give the
 * same verdict with and without the collar LD_PRELOAD shim.  This header
 * provides
 *
 *   - a check/count facility: every check counts; a failed check prints
 *       rank R: FAIL <what>: <detail>
 *     on stdout (at most TU_MAX_FAIL_LINES lines per rank, or the value of
 *     the environment variable TU_MAX_FAIL_LINES, then one line saying that
 *     further lines are suppressed; they are still counted);
 *   - deterministic value generators keyed by (rank, index, seed), so that
 *     every rank can recompute any other rank's input locally;
 *   - tu_finish(), which sums checks and failures over MPI_COMM_WORLD with
 *     PMPI_Allreduce (the profiling entry point, so the test's own
 *     bookkeeping never goes through the shim under test), has rank 0 print
 *     exactly one line
 *       <program>: N passed, N failed
 *     and returns the exit status (0 ok, 1 failed);
 *   - tu_skip(), for the automake convention "exit 77 = skipped";
 *   - a device-memory layer (tu_dev_*, TU_DEVICE=cuda): the programs' user
 *     buffers in CUDA device memory, host memory otherwise.
 *
 * The counters are C11 atomics and the print is one fprintf per line, so
 * tu_check() may be called from several threads at once.
 */
#ifndef COLLAR_TESTS_MPI_TESTUTIL_H
#define COLLAR_TESTS_MPI_TESTUTIL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#define TU_EXIT_SKIP 77
#define TU_MAX_FAIL_LINES 200

#if defined(__GNUC__)
#define TU_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define TU_NORETURN __attribute__((noreturn))
#else
#define TU_PRINTF(f, a)
#define TU_NORETURN
#endif

/* Call once, right after MPI_Init / MPI_Init_thread. */
void tu_init(const char *progname);

const char *tu_progname(void);
int tu_world_rank(void);
int tu_world_size(void);

/* Count one check; if !ok count a failure and print the FAIL line.
 * Returns ok (normalised to 0/1). */
int tu_check(int ok, const char *what, const char *fmt, ...) TU_PRINTF(3, 4);

/* Shorthands: an unconditional failure, and "rc must be MPI_SUCCESS". */
void tu_fail(const char *what, const char *fmt, ...) TU_PRINTF(2, 3);
int tu_check_rc(int rc, const char *what);

/* Byte-wise comparison, e.g. "send buffer unchanged"; reports the first
 * differing byte offset and the number of differing bytes. */
int tu_check_same_bytes(const void *got, const void *want, size_t n,
                        const char *what);

/* An int MPI_SUM over `nranks` ranks: buf[i] must be the sum of
 * value(r, i, round) over r, for every i < count; reports the number of
 * wrong elements and the first. */
int tu_check_int_sum(const int *buf, int count, int nranks,
                     int (*value)(int r, int i, int round), int round,
                     const char *what);

/* Current counters of this rank (for progress messages). */
long long tu_checks(void);
long long tu_failures(void);

/* Sum over all ranks (PMPI_Allreduce on MPI_COMM_WORLD), rank 0 prints the
 * summary line.  A program that ran no check at all is counted as failed.
 * Returns 0 if no rank failed, 1 otherwise; the same value on all ranks.
 * Does not finalize MPI. */
int tu_finish(void);

/* Rank 0 prints "<program>: SKIP: <reason>"; all ranks finalize MPI and
 * exit with status 77.  Must be called collectively. */
TU_NORETURN void tu_skip(const char *fmt, ...) TU_PRINTF(1, 2);

/* This process's resident set in KiB (/proc/self/statm), -1 if unknown. */
long tu_rss_kb(void);

/* MPI_Error_string of rc (thread-local buffer). */
const char *tu_errstr(int rc);

/* MPI_STATUSES_IGNORE, returned from another translation unit: MPICH
 * declares the statuses parameters as arrays and gcc 12 then warns
 * (-Wstringop-overflow) about the constant (MPI_Status *)1 it passes. */
MPI_Status *tu_statuses_ignore(void);

/* ---- deterministic generators ---------------------------------------- */

/* 64-bit hash of (rank, index, seed); well mixed (splitmix64 rounds). */
uint64_t tu_hash(uint64_t rank, uint64_t index, uint64_t seed);
/* Combine a seed with more numbers / a string, to derive per-case seeds. */
uint64_t tu_seed(uint64_t seed, uint64_t a, uint64_t b);
uint64_t tu_seed_str(uint64_t seed, const char *s);

/* Uniform integer in [lo, hi] (inclusive; lo <= hi). */
int64_t tu_gen_int(int rank, size_t index, uint64_t seed, int64_t lo, int64_t hi);
/* Uniform unsigned integer in [0, hi]. */
uint64_t tu_gen_uint(int rank, size_t index, uint64_t seed, uint64_t hi);
/* 64 random bits. */
uint64_t tu_gen_bits(int rank, size_t index, uint64_t seed);
/* Uniform double in [lo, hi). */
double tu_gen_real(int rank, size_t index, uint64_t seed, double lo, double hi);

/* Fill n bytes with pseudo-random garbage derived from seed. */
void tu_fill_garbage(void *buf, size_t n, uint64_t seed);

/* Seconds a progress loop (MPI_Test* spin) may run before the test gives up:
 * the loop reports a FAIL and calls MPI_Abort, so that a lost completion
 * shows up as a failure rather than a hang.  Env TU_PROGRESS_TIMEOUT. */
double tu_progress_timeout(void);
/* Call inside spin loops with the loop's start time; aborts on timeout. */
void tu_progress_guard(double t0, const char *what);

/* ---- device memory (TU_DEVICE) ---------------------------------------
 *
 * With TU_DEVICE=cuda in the environment, the programs put the buffers they
 * pass to collectives in CUDA device memory: cudaMalloc, cudaFree,
 * cudaMemcpy and cudaDeviceSynchronize are found with dlsym(RTLD_DEFAULT)
 * in the process (a preloaded CUDA runtime: tests/cudaemu/libcudaemu.so),
 * so the programs need no CUDA to build and run everywhere as before.
 * The first allocation makes device (node-local rank % device count)
 * current, unless the program chose one with tu_dev_select().
 * The host cannot read device memory: a program fills a host buffer, hands
 * MPI its device mirror (put before the call), and checks the host buffer
 * after getting the mirror back.  Without TU_DEVICE (or TU_DEVICE=host) the
 * mirror of a host buffer is the buffer itself and put/get do nothing: the
 * programs run exactly as they did without this layer.  A missing runtime
 * or a failing CUDA call prints "rank R: FAIL device: ..." and aborts. */

/* 1 when the buffers are device memory (TU_DEVICE=cuda). */
int tu_dev_on(void);
/* Make `device` current for this thread's allocations (nothing without
 * the layer). */
void tu_dev_select(int device);
/* n bytes of device memory (malloc without the layer), and its release. */
void *tu_dev_alloc(size_t n);
void tu_dev_free(void *dev);
/* A device copy of host[0, n) (n may be 0); without the layer, host itself. */
void *tu_dev_mirror(const void *host, size_t n);
/* Release a mirror (nothing without the layer). */
void tu_dev_unmirror(void *dev, const void *host);
/* host[0, n) to its mirror, complete on the device before the return. */
void tu_dev_put(void *dev, const void *host, size_t n);
/* The mirror's bytes back into host[0, n). */
void tu_dev_get(void *host, const void *dev, size_t n);

#endif /* COLLAR_TESTS_MPI_TESTUTIL_H */
