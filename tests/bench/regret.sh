#!/bin/sh
# Regret of a table made by collar-tune (not part of make check).
#
#   tests/bench/regret.sh [-n NP] [-t TABLE] [-m MIN] [-M MAX] [BUILDDIR]
#
# Tunes a table on NP ranks (default 2) of the sim device with modelled copy
# costs (COLLAR_SIM_BANDWIDTH, default 10G; COLLAR_SIM_LATENCY, default 10
# us), unless -t names one, then measures, in one run of
# `collar-tune --compare`, at the sizes between the tuned points (the
# geometric midpoints of the x2 grid: 6K, 12K, 24K, ... 3M), every candidate
# and the table's choice side by side:
#
#     regret = time of the table's choice / time of the best candidate - 1
#
# per size, and the largest.  Exit 0 when the largest is within 15%.
set -eu
np=2 table="" min=4K max=4M
while getopts n:t:m:M: o; do
    case $o in
    n) np=$OPTARG ;;
    t) table=$OPTARG ;;
    m) min=$OPTARG ;;
    M) max=$OPTARG ;;
    *) echo "usage: $0 [-n NP] [-t TABLE] [-m MIN] [-M MAX] [BUILDDIR]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
builddir=${1:-$(dirname "$0")/../../build}
builddir=$(cd "$builddir" && pwd)
tune=$builddir/src/collar-tune
lib=$builddir/src/.libs/libcollar.so
[ -x "$tune" ] && [ -r "$lib" ] || { echo "$0: build collar first ($builddir)" >&2; exit 2; }
: "${MPIRUN:=mpirun}"
: "${COLLAR_SIM_BANDWIDTH:=10G}" "${COLLAR_SIM_LATENCY:=10}"
export COLLAR_DEVICE=sim COLLAR_SIM_BANDWIDTH COLLAR_SIM_LATENCY
opts=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    opts="--oversubscribe --mca op ^avx"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bytes() {
    case $1 in
    *K) echo $(( ${1%K} * 1024 )) ;;
    *M) echo $(( ${1%M} * 1048576 )) ;;
    *) echo "$1" ;;
    esac
}

if [ -z "$table" ]; then
    table=$work/tuned.table
    echo "== tuning on $np ranks, $min to $max (sim: $COLLAR_SIM_BANDWIDTH/s, $COLLAR_SIM_LATENCY us)"
    # shellcheck disable=SC2086
    "$MPIRUN" $opts -np "$np" env LD_PRELOAD="$lib" "$tune" --ranks "$np" \
        --min "$min" --max "$max" --output "$table" </dev/null
fi
grep "^allreduce" "$table"

# The midpoints of the x2 grid: 1.5 x 2^k, from min to max.
lo=$(bytes "$min") hi=$(bytes "$max") sizes=""
s=$lo
while [ $((s * 2)) -le "$hi" ]; do
    sizes="$sizes${sizes:+,}$((s * 3 / 2))"
    s=$((s * 2))
done
echo "== regret at $sizes bytes"
# shellcheck disable=SC2086
"$MPIRUN" $opts -np "$np" env LD_PRELOAD="$lib" COLLAR_TUNING_FILE="$table" \
    "$tune" --ranks "$np" --compare "$sizes" </dev/null | tee "$work/out"
max=$(sed -n 's/^max regret: \(-\{0,1\}[0-9.]*\)%.*/\1/p' "$work/out")
[ -n "$max" ] || { echo "no result"; exit 1; }
if awk "BEGIN { exit !($max <= 15) }"; then
    echo "regret within 15%: $max%"
else
    echo "regret above 15%: $max%"
    exit 1
fi
