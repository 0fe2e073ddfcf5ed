/*
 * collar - which MPI library collar was built for, and which the program
 * runs.
 *
 * libcollar.so is linked against one MPI library (libmpi.so.40 for Open
 * MPI, libmpi.so.12 / libmpich.so.12 for MPICH and Intel MPI, libmpi_abi.so.1
 * for the MPI-5 standard ABI).  Preloaded into a program that runs another,
 * collar's handles and constants mean nothing to the program's library:
 * collar must stay out of the way.  abi.c finds out when collar loads (an
 * ELF constructor) and again when asked, warns once, and points every MPI
 * reference of collar, of the program and of the program's MPI library that
 * the dynamic linker bound to collar or to collar's MPI library at the
 * program's MPI library instead: from then on no call reaches collar's
 * wrappers or collar's MPI library.
 */
#ifndef COLLAR_ABI_H
#define COLLAR_ABI_H

/* 1 when the program runs the MPI library collar was built for, one of the
 * same ABI, or no other MPI library is loaded yet; 0 when it runs one of
 * another ABI.  Call it in MPI_Init
 * and MPI_Init_thread before anything else: on 0, return PMPI_Init(...)
 * straight away (collar stays off; MPI_Finalize and every other wrapper
 * then see collar off).  The first call that finds a mismatch warns and
 * redirects the references (see above); later calls return the answer. */
int collar_abi_ok(void);

/* 1 when an MPI library was already loaded when libcollar.so loaded (a
 * dlopen of collar after the MPI library's, as mpi4py.profile after
 * `from mpi4py import MPI` does): the calls bound to the MPI library before
 * collar came, MPI_Init's among them, do not reach collar. */
int collar_abi_loaded_after_mpi(void);

/* The soname of the MPI library collar was linked against ("libmpi.so.40"),
 * or "unknown". */
const char *collar_abi_built_soname(void);

#endif /* COLLAR_ABI_H */
