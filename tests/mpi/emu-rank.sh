#!/bin/sh
# emu-rank.sh [--own] DEVICES -- PROGRAM [ARGS]
# One rank's devices on the CUDA emulation (cudaemu.test): the rank's device
# is entry (node-local rank modulo the count) of the comma-separated list
# DEVICES of the machine's device numbers (the node-local rank as the
# launcher gives it: Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, MPICH's
# MPI_LOCALRANKID).  The rank may make contexts on that device only
# (CUDAEMU_STRICT_DEVICES), writes its own report of its contexts to
# $EMU_REPORTS/rank.R when EMU_REPORTS is set (CUDAEMU_REPORT), and runs
# PROGRAM with "--device ORDINAL" appended.  --own: the rank sees that
# device alone (CUDA_VISIBLE_DEVICES, as a per-task binding sets it), as
# ordinal 0.
own=no
[ "$1" = --own ] && { own=yes; shift; }
devices=$1
shift 2
local=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
n=$(echo "$devices" | tr ',' '\n' | wc -l)
dev=$(echo "$devices" | cut -d, -f$((local % n + 1)))
export CUDAEMU_STRICT_DEVICES="$dev"
[ -n "${EMU_REPORTS:-}" ] && export CUDAEMU_REPORT="$EMU_REPORTS/rank.$rank"
ordinal=$dev
if [ $own = yes ]; then
    export CUDA_VISIBLE_DEVICES="$dev"
    ordinal=0
fi
exec "$@" --device "$ordinal"
