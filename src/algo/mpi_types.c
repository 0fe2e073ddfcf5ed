/*
 * collar - predefined MPI datatypes and ops -> reductions-layer enums.
 *
 * Handles are compared with ==, which is valid for both handle
 * representations: pointers to predefined objects in Open MPI, integer
 * constants in MPICH.  Some predefined names are aliases of others
 * (MPI_LONG_LONG of MPI_LONG_LONG_INT, MPI_C_COMPLEX of MPI_C_FLOAT_COMPLEX in
 * both libraries); both names are tested anyway, in separate statements
 * (no -Wlogical-op), and the compiler drops the duplicate.
 *
 * C types whose width varies (short, int, long, long long, MPI_Aint,
 * MPI_Offset, MPI_Count) map by sizeof to the fixed-width enum of the same
 * signedness, so e.g. MPI_LONG and MPI_INT64_T give the same loop on LP64.
 */
#include "mpi_types.h"

#include <stddef.h>

/* The fixed-width integer type of `size` bytes and the given signedness. */
static inline collar_dtype_t int_dtype(size_t size, int is_signed)
{
    switch (size) {
    case 1:  return is_signed ? COLLAR_DT_INT8  : COLLAR_DT_UINT8;
    case 2:  return is_signed ? COLLAR_DT_INT16 : COLLAR_DT_UINT16;
    case 4:  return is_signed ? COLLAR_DT_INT32 : COLLAR_DT_UINT32;
    case 8:  return is_signed ? COLLAR_DT_INT64 : COLLAR_DT_UINT64;
    default: return COLLAR_DT_NONE;
    }
}

collar_dtype_t collar_dtype_from_mpi(MPI_Datatype dt)
{
    /* The common ones first. */
    if (dt == MPI_FLOAT)                 return COLLAR_DT_FLOAT;
    if (dt == MPI_DOUBLE)                return COLLAR_DT_DOUBLE;
    if (dt == MPI_INT)                   return int_dtype(sizeof(int), 1);
    if (dt == MPI_LONG)                  return int_dtype(sizeof(long), 1);
    if (dt == MPI_UNSIGNED_LONG)         return int_dtype(sizeof(unsigned long), 0);
    if (dt == MPI_LONG_LONG_INT)         return int_dtype(sizeof(long long), 1);
    if (dt == MPI_LONG_LONG)             return int_dtype(sizeof(long long), 1);
    if (dt == MPI_UNSIGNED_LONG_LONG)    return int_dtype(sizeof(unsigned long long), 0);
    if (dt == MPI_UNSIGNED)              return int_dtype(sizeof(unsigned), 0);
    if (dt == MPI_INT32_T)               return COLLAR_DT_INT32;
    if (dt == MPI_INT64_T)               return COLLAR_DT_INT64;
    if (dt == MPI_UINT32_T)              return COLLAR_DT_UINT32;
    if (dt == MPI_UINT64_T)              return COLLAR_DT_UINT64;
    if (dt == MPI_BYTE)                  return COLLAR_DT_BYTE;
    if (dt == MPI_C_BOOL)                return COLLAR_DT_BOOL;
    if (dt == MPI_DOUBLE_INT)            return COLLAR_DT_DOUBLE_INT;
    if (dt == MPI_2INT)                  return COLLAR_DT_2INT;
    if (dt == MPI_FLOAT_INT)             return COLLAR_DT_FLOAT_INT;
    if (dt == MPI_LONG_INT)              return COLLAR_DT_LONG_INT;
    if (dt == MPI_C_DOUBLE_COMPLEX)      return COLLAR_DT_DOUBLE_COMPLEX;
    if (dt == MPI_C_FLOAT_COMPLEX)       return COLLAR_DT_FLOAT_COMPLEX;
    if (dt == MPI_C_COMPLEX)             return COLLAR_DT_FLOAT_COMPLEX;
#ifdef MPIX_C_FLOAT16
    if (dt == MPIX_C_FLOAT16)            return COLLAR_DT_FLOAT16;
#endif
#ifdef MPIX_BFLOAT16
    if (dt == MPIX_BFLOAT16)             return COLLAR_DT_BFLOAT16;
#endif

    /* The rest of the C integers. */
    if (dt == MPI_SHORT)                 return int_dtype(sizeof(short), 1);
    if (dt == MPI_UNSIGNED_SHORT)        return int_dtype(sizeof(unsigned short), 0);
    if (dt == MPI_SIGNED_CHAR)           return COLLAR_DT_INT8;
    if (dt == MPI_UNSIGNED_CHAR)         return COLLAR_DT_UINT8;
    if (dt == MPI_INT8_T)                return COLLAR_DT_INT8;
    if (dt == MPI_INT16_T)               return COLLAR_DT_INT16;
    if (dt == MPI_UINT8_T)               return COLLAR_DT_UINT8;
    if (dt == MPI_UINT16_T)              return COLLAR_DT_UINT16;
    if (dt == MPI_AINT)                  return int_dtype(sizeof(MPI_Aint), 1);
    if (dt == MPI_OFFSET)                return int_dtype(sizeof(MPI_Offset), 1);
    if (dt == MPI_COUNT)                 return int_dtype(sizeof(MPI_Count), 1);

    /* The rest of the floating point, complex and pair types. */
    if (dt == MPI_LONG_DOUBLE)           return COLLAR_DT_LONG_DOUBLE;
    if (dt == MPI_C_LONG_DOUBLE_COMPLEX) return COLLAR_DT_LONG_DOUBLE_COMPLEX;
    if (dt == MPI_SHORT_INT)             return COLLAR_DT_SHORT_INT;
    if (dt == MPI_LONG_DOUBLE_INT)       return COLLAR_DT_LONG_DOUBLE_INT;

    /* MPI_CHAR is a character type, not valid in reductions; it, like
     * MPI_DATATYPE_NULL and every derived type, ends up here. */
    return COLLAR_DT_NONE;
}

collar_op_t collar_op_from_mpi(MPI_Op op)
{
    if (op == MPI_SUM)    return COLLAR_OP_SUM;
    if (op == MPI_MAX)    return COLLAR_OP_MAX;
    if (op == MPI_MIN)    return COLLAR_OP_MIN;
    if (op == MPI_PROD)   return COLLAR_OP_PROD;
    if (op == MPI_BOR)    return COLLAR_OP_BOR;
    if (op == MPI_BAND)   return COLLAR_OP_BAND;
    if (op == MPI_BXOR)   return COLLAR_OP_BXOR;
    if (op == MPI_LOR)    return COLLAR_OP_LOR;
    if (op == MPI_LAND)   return COLLAR_OP_LAND;
    if (op == MPI_LXOR)   return COLLAR_OP_LXOR;
    if (op == MPI_MAXLOC) return COLLAR_OP_MAXLOC;
    if (op == MPI_MINLOC) return COLLAR_OP_MINLOC;
    /* MPI_REPLACE, MPI_NO_OP, MPI_OP_NULL, user-defined ops. */
    return COLLAR_OP_NONE;
}
