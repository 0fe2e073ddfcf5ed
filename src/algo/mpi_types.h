/*
 * collar - mapping of predefined MPI datatypes and ops to the reductions
 * layer's enums (src/reduce/reduce.h).
 */
#ifndef COLLAR_MPI_TYPES_H
#define COLLAR_MPI_TYPES_H

#include <mpi.h>

#include "../reduce/reduce.h"

/*
 * The collar element type of a predefined C datatype that MPI reductions
 * accept; COLLAR_DT_NONE for everything else: MPI_CHAR (not a reduction
 * type), MPI_DATATYPE_NULL, derived types, Fortran and C++ types.  Cheap: a
 * chain of handle comparisons, most common types first.
 */
collar_dtype_t collar_dtype_from_mpi(MPI_Datatype dt);

/*
 * The collar op of one of the 12 predefined reduction ops; COLLAR_OP_NONE for
 * MPI_REPLACE, MPI_NO_OP, MPI_OP_NULL and user-defined ops.
 */
collar_op_t collar_op_from_mpi(MPI_Op op);

#endif /* COLLAR_MPI_TYPES_H */
