#!/bin/sh
# The cost of NVTX ranges with no tool attached (COLLAR_NVTX=coll, the
# default, against off): an 8-byte MPI_Allreduce, 2 ranks, collar preloaded
# in both runs of a pair, in separate runs alternating (PAIRS pairs, 5), on
# the host path (no device backend: the MPI library's call) and on the sim
# device (every buffer device memory: a staged allreduce collar runs).  Per
# setting: the median time per call of each side and the median of the
# pairs' ratios (B / A).  With INJECT set (the tests' NVTX injection
# library, tests/nvtx), a row with a tool attached shows what the ranges
# cost when they are recorded; and a row for COLLAR_TRACE.  A control row
# (the same setting in A and B) shows what order and noise alone give.
# Usage (from the build tree): make -C tests bench-nvtx [PAIRS=N ITERS=N]
#   or: MPIRUN=mpirun LIBCOLLAR=src/.libs/libcollar.so [INJECT=...so] run-nvtx.sh PROGRAM
set -eu
prog=$1
pairs=${PAIRS:-5}
args="--bytes 8 --iters ${ITERS:-2000} --batches ${BATCHES:-31}"
. "$(dirname "$0")/bench_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run "VAR=VALUE ...": one run's median us per call.
run() {
    # shellcheck disable=SC2086
    "$MPIRUN" $opts -np 2 env LD_PRELOAD="$LIBCOLLAR" $1 "$prog" $args \
        | sed -n 's/^\([0-9.]*\) us, library thread level.*$/\1/p'
}

# setting LABEL "A's variables" "B's variables"
setting() {
    i=0
    : >"$tmp/a"
    : >"$tmp/b"
    while [ $i -lt "$pairs" ]; do
        run "$2" >>"$tmp/a"
        run "$3" >>"$tmp/b"
        i=$((i + 1))
    done
    paste "$tmp/a" "$tmp/b" | awk '{ print $2 / $1 }' >"$tmp/ratio"
    printf '| %-46s | %7.3f | %7.3f | %6.3f |\n' "$1" "$(median <"$tmp/a")" \
        "$(median <"$tmp/b")" "$(median <"$tmp/ratio")"
}

echo "8-byte MPI_Allreduce, 2 ranks, collar preloaded; $pairs alternating pairs"
echo "of runs A and B (median us per call; ratio: median over pairs of B / A)"
echo
echo "| B against A                                    |       A |       B | ratio  |"
echo "| ---------------------------------------------- | ------- | ------- | ------ |"
# The same settings in A and B: what order and noise alone give.
setting "control, host path: off vs off" \
    "COLLAR_DEVICE=none COLLAR_NVTX=off" "COLLAR_DEVICE=none COLLAR_NVTX=off"
setting "host path: COLLAR_NVTX=coll vs off" \
    "COLLAR_DEVICE=none COLLAR_NVTX=off" "COLLAR_DEVICE=none COLLAR_NVTX=coll"
setting "sim device (staged): COLLAR_NVTX=coll vs off" \
    "COLLAR_DEVICE=sim COLLAR_NVTX=off" "COLLAR_DEVICE=sim COLLAR_NVTX=coll"
setting "sim device: COLLAR_NVTX=steps vs off" \
    "COLLAR_DEVICE=sim COLLAR_NVTX=off" "COLLAR_DEVICE=sim COLLAR_NVTX=steps"
if [ -n "${INJECT:-}" ] && [ -r "$INJECT" ]; then
    setting "sim device: steps, a tool attached, vs off" \
        "COLLAR_DEVICE=sim COLLAR_NVTX=off" \
        "COLLAR_DEVICE=sim COLLAR_NVTX=steps NVTX_INJECTION64_PATH=$INJECT NVTX_TEST_OUT=/dev/null"
fi
setting "sim device: COLLAR_TRACE vs off" \
    "COLLAR_DEVICE=sim COLLAR_NVTX=off" \
    "COLLAR_DEVICE=sim COLLAR_NVTX=off COLLAR_TRACE=$tmp/trace.%r.json"
echo
echo "(no tool attached unless said: NVTX_INJECTION64_PATH unset)"
