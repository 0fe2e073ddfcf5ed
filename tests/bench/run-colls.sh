#!/bin/sh
# MPI_Bcast through collar against PMPI_Bcast on the same buffer (bench_colls),
# 2 ranks, 1 KiB to 16 MiB: with no device (both are the MPI library's call:
# the cost of collar's fast path), on the sim device (staged through host
# memory, copies at memcpy speed) and on the sim device with copies timed
# like a link of BANDWIDTH bytes/s plus LATENCY us per copy (a model of a
# GPU's copies, not a GPU).
# Usage: make -C build/tests bench-colls   (or MPIRUN=... LIBCOLLAR=... run-colls.sh PROGRAM)
set -eu
prog=$1
bw=${BANDWIDTH:-10G}
lat=${LATENCY:-10}
sizes=${SIZES:-"1K 16K 256K 1M 4M 16M"}
opts=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    opts="--oversubscribe"
fi
for dev in none sim "sim $bw"; do
    set -- COLLAR_DEVICE=${dev%% *}
    [ "$dev" = "sim $bw" ] && set -- "$@" COLLAR_SIM_BANDWIDTH="$bw" COLLAR_SIM_LATENCY="$lat"
    echo "== MPI_Bcast, 2 ranks, $*"
    # shellcheck disable=SC2086
    "$MPIRUN" $opts -np 2 env LD_PRELOAD="$LIBCOLLAR" "$@" "$prog" $sizes
done
