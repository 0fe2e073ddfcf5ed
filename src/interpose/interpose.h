/*
 * collar - what the entry points of src/interpose/ share: the engine's
 * interface (src/engine/engine.h) and the mark of an exported symbol.
 *
 * src/interpose/ holds only what the MPI library's users call: the
 * exported MPI_* entry points (each describes its call and hands it to the
 * engine, or straight to the MPI library), collar's own API (collar.h),
 * and the check at load that collar was built for the MPI library it runs
 * with (abi.c).  Nothing below it includes this header.
 */
#ifndef COLLAR_INTERPOSE_H
#define COLLAR_INTERPOSE_H

#include "../engine/engine.h"

#define COLLAR_EXPORT __attribute__((visibility("default")))

#endif /* COLLAR_INTERPOSE_H */
