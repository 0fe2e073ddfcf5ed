#!/bin/sh
# Pass-through cost of collar: an 8-byte MPI_Allreduce on host buffers,
# 2 ranks.  bench_allreduce alternates batches of MPI_Allreduce and
# PMPI_Allreduce in one process and reports the median ratio; it runs once
# without collar (both entry points are the MPI library's: the noise floor)
# and once with collar preloaded (MPI_Allreduce goes through collar).
# Usage (from the build tree): make -C tests bench   [BYTES=8 PAIRS=41]
#   or: MPIRUN=mpirun LIBCOLLAR=src/.libs/libcollar.so run-bench.sh PROGRAM
set -eu
prog=$1
bytes=${BYTES:-8}
pairs=${PAIRS:-41}
opts=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    opts="--oversubscribe"
fi
echo "MPI_Allreduce of $bytes bytes on host buffers, 2 ranks; $pairs alternating batch pairs"
printf '  %-16s ' "without collar:"
"$MPIRUN" $opts -np 2 "$prog" --bytes "$bytes" --pairs "$pairs"
printf '  %-16s ' "with collar:"
"$MPIRUN" $opts -np 2 env LD_PRELOAD="$LIBCOLLAR" "$prog" --bytes "$bytes" --pairs "$pairs"
echo "  (ratio = MPI_Allreduce / PMPI_Allreduce, median over pairs; with collar it is collar's cost)"
