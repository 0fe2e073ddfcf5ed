#!/bin/sh
# The pass-through cost of collar as a whole: an 8-byte MPI_Allreduce on
# host buffers, 2 ranks, in a program that asks for MPI_THREAD_SINGLE
# (bench_passthrough), in separate runs without and with collar preloaded,
# alternating (PAIRS pairs, 5), so that what collar asks of the MPI library
# at MPI_Init (the thread level) is measured too.  Per setting: the median
# time per call of the runs without and with collar, and the median of the
# pairs' ratios (with / without).  Settings: no device backend (COLLAR_DEVICE
# =auto on a machine without a GPU), the cuda backend active on the fake
# driver (libcollar_fakecuda.so, when built), each with the default
# COLLAR_PROGRESS=auto and with COLLAR_PROGRESS=thread (which asks the
# library for MPI_THREAD_MULTIPLE where a device backend can be active).
# Usage (from the build tree): make -C tests bench-passthrough [PAIRS=N ITERS=N BYTES=N]
#   or: MPIRUN=mpirun LIBCOLLAR=src/.libs/libcollar.so [FAKECUDA=...so] run-passthrough.sh PROGRAM
set -eu
prog=$1
pairs=${PAIRS:-5}
args="--bytes ${BYTES:-8} --iters ${ITERS:-2000} --batches ${BATCHES:-31}"
. "$(dirname "$0")/bench_lib.sh"

# run PRELOAD [VAR=VALUE ...]: one run; prints "<us> <library level>".
run() {
    preload=$1
    shift
    # shellcheck disable=SC2086
    "$MPIRUN" $opts -np 2 env ${preload:+LD_PRELOAD=$preload} "$@" "$prog" $args \
        | sed -n 's/^\([0-9.]*\) us, library thread level \([0-9]*\)$/\1 \2/p'
}

# setting LABEL PRELOAD [VAR=VALUE ...]
setting() {
    label=$1
    shift
    dir=$(mktemp -d)
    i=0
    while [ $i -lt "$pairs" ]; do
        run "" >>"$dir/without"
        run "$@" >>"$dir/with"
        i=$((i + 1))
    done
    paste "$dir/without" "$dir/with" | awk '{ print $3 / $1 }' >"$dir/ratio"
    printf '| %-44s | %7.3f | %7.3f | %5s | %6.3f |\n' "$label" \
        "$(cut -d' ' -f1 "$dir/without" | median)" \
        "$(cut -d' ' -f1 "$dir/with" | median)" \
        "$(cut -d' ' -f2 "$dir/with" | sort -u | tr '\n' ' ' | sed 's/ $//')" \
        "$(median <"$dir/ratio")"
    rm -rf "$dir"
}

echo "8-byte MPI_Allreduce on host buffers, 2 ranks, the program at MPI_THREAD_SINGLE;"
echo "$pairs alternating pairs of runs without and with collar (median us per call)"
echo
echo "| setting                                      | without |    with | level | ratio  |"
echo "| -------------------------------------------- | ------- | ------- | ----- | ------ |"
setting "no device (auto, no GPU)" "$LIBCOLLAR"
setting "no device, COLLAR_PROGRESS=thread" "$LIBCOLLAR" COLLAR_PROGRESS=thread
if [ -n "${FAKECUDA:-}" ] && [ -r "$FAKECUDA" ]; then
    setting "cuda (fake driver)" "$FAKECUDA"
    setting "cuda (fake driver), COLLAR_PROGRESS=thread" "$FAKECUDA" COLLAR_PROGRESS=thread
fi
echo
echo "(level: the MPI library's thread level with collar, PMPI_Query_thread: 0 single, 3 multiple;"
echo " ratio: median over pairs of with / without)"
