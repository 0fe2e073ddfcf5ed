/*
 * collar - helpers shared by the semantics corpus (tests/mpi/semantics).
 *
 * The corpus is a set of valid MPI programs that must behave the same with
 * and without collar.  Besides testutil.h (checks, generators, device
 * memory) they share:
 *
 *   - sc_init(): MPI_Init_thread at the level named by "--thread single"
 *     (the default) or "--thread multiple" (removed from argv), and
 *     tu_init(); a library that does not give MPI_THREAD_MULTIPLE when it
 *     was asked for skips the program (exit 77);
 *   - a watchdog per phase: sc_phase_begin() names the phase and arms a
 *     timer (SIGALRM, TU_PHASE_TIMEOUT seconds, default 20; 0: off),
 *     sc_phase_end() disarms it.  A phase that does not finish in time
 *     prints "rank R: FAIL hang: <phase> ..." and ends the process, so that
 *     a hang fails fast and names the case that hung (the launcher then
 *     ends the job);
 *   - sc_sync(): a synchronisation of all ranks of a communicator made of
 *     point-to-point messages only (no MPI_Barrier, which some cases test):
 *     every rank sends an empty message to every other rank and receives
 *     one from each, on a tag no case uses;
 *   - sc_list_has(): whether a comma-separated selection names a case.
 */
#ifndef COLLAR_TESTS_MPI_SEMANTICS_SEMUTIL_H
#define COLLAR_TESTS_MPI_SEMANTICS_SEMUTIL_H

#include "../testutil.h"

/* A tag no case of the corpus uses (MPI_TAG_UB is at least 32767). */
#define SC_SYNC_TAG 32700

/* MPI_Init_thread + tu_init; returns the level the program asked for
 * (MPI_THREAD_SINGLE or MPI_THREAD_MULTIPLE), which the library gave. */
int sc_init(int *argc, char ***argv, const char *progname);

/* Name the phase that starts now and arm the watchdog; printf format. */
void sc_phase_begin(const char *fmt, ...) TU_PRINTF(1, 2);
/* The phase finished: disarm the watchdog. */
void sc_phase_end(void);
/* The current phase's name ("" outside phases). */
const char *sc_phase(void);

/* Every rank of comm sends an empty message to every other one and
 * receives one from each (MPI_Isend/MPI_Irecv, MPI_Waitall). */
void sc_sync(MPI_Comm comm);

/* 1 when `list` is NULL or "all", or names `name` among its commas. */
int sc_list_has(const char *list, const char *name);

/* The value of "--name VALUE" in argv, or `dflt`. */
const char *sc_arg(int argc, char **argv, const char *name, const char *dflt);

#endif /* COLLAR_TESTS_MPI_SEMANTICS_SEMUTIL_H */
