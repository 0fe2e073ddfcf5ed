#!/bin/sh
# collar's own cost per call, apart from the device: an allreduce of 8 B,
# 64 B and 1 KiB (MPI_INT, MPI_SUM) on 2 ranks, in separate runs of
# bench_passthrough alternating (ROUNDS rounds, 7):
#   baseline  the same call on host buffers, collar not preloaded;
#   staged    collar on the sim device (every buffer is device memory) with
#             COLLAR_SIM_INLINE=1, COLLAR_ALGORITHM=staged;
#   ipc       likewise, COLLAR_ALGORITHM=ipc (one-shot at these sizes).
# Inline, the sim device's copies and reductions are memcpy and a loop in
# the calling thread, no hand-off to a worker; what remains above the
# baseline is collar's own work (classification, selection, the schedule,
# statistics, the status agreement) plus those few copies.  Prints, per
# size, the median us per call of each setting and collar's own cost: the
# median over rounds of (collar - baseline).
# SIZES="8 64 1024" (the default) sets the sizes (tests/gpu/run.sh adds 8192).
# Batches are short (ITERS 200 calls, BATCHES 41 of them): on a loaded
# machine a rank descheduled for milliseconds spoils the batch it falls
# in, and the median over many short batches leaves those out.
# PROGRESS=thread runs collar with its progress thread (MPI_THREAD_MULTIPLE
# asked of the library), the mode in which its internal collectives block
# in the library (docs/latency.md); the default auto polls them.
# Usage (from the build tree): make -C tests bench-owncost [ROUNDS=N ITERS=N PROGRESS=thread]
#   or: MPIRUN=mpirun LIBCOLLAR=src/.libs/libcollar.so run-owncost.sh PROGRAM
set -eu
prog=$1
rounds=${ROUNDS:-7}
. "$(dirname "$0")/bench_lib.sh"

# run BYTES PRELOAD [VAR=VALUE ...]: one run; prints its us per call.
run() {
    bytes=$1
    preload=$2
    shift 2
    # shellcheck disable=SC2086
    "$MPIRUN" $opts -np 2 env ${preload:+LD_PRELOAD=$preload} "$@" "$prog" \
        --bytes "$bytes" --type int --iters "${ITERS:-200}" --batches "${BATCHES:-41}" \
        | sed -n 's/^\([0-9.]*\) us, library thread level [0-9]*$/\1/p'
}

sim="COLLAR_DEVICE=sim COLLAR_SIM_INLINE=1 COLLAR_PROGRESS=${PROGRESS:-auto}"
echo "allreduce (MPI_INT, MPI_SUM) on 2 ranks, $rounds rounds of separate runs, COLLAR_PROGRESS=${PROGRESS:-auto}"
echo "alternating; median us per call; own: median over rounds of collar - baseline"
echo
echo "| bytes | baseline |   staged | own staged |      ipc |  own ipc |"
echo "| ----- | -------- | -------- | ---------- | -------- | -------- |"
for bytes in ${SIZES:-8 64 1024}; do
    dir=$(mktemp -d)
    i=0
    while [ $i -lt "$rounds" ]; do
        # shellcheck disable=SC2086
        b=$(run "$bytes" "")
        # shellcheck disable=SC2086
        s=$(run "$bytes" "$LIBCOLLAR" $sim COLLAR_ALGORITHM=staged)
        # shellcheck disable=SC2086
        p=$(run "$bytes" "$LIBCOLLAR" $sim COLLAR_ALGORITHM=ipc)
        echo "$b $s $p" >>"$dir/runs"
        i=$((i + 1))
    done
    printf '| %5s | %8.3f | %8.3f | %10.3f | %8.3f | %8.3f |\n' "$bytes" \
        "$(cut -d' ' -f1 "$dir/runs" | median)" \
        "$(cut -d' ' -f2 "$dir/runs" | median)" \
        "$(awk '{ print $2 - $1 }' "$dir/runs" | median)" \
        "$(cut -d' ' -f3 "$dir/runs" | median)" \
        "$(awk '{ print $3 - $1 }' "$dir/runs" | median)"
    rm -rf "$dir"
done
