#!/bin/sh
# chunked against staged on the sim device with copies that take as long as
# on a modelled link (COLLAR_SIM_BANDWIDTH, default 10G bytes/s, plus
# COLLAR_SIM_LATENCY per copy, default 10 us): 2 ranks, 1, 16 and 64 MiB,
# staged and chunked with 256K, 1M and 4M chunks, ROUNDS rounds alternating
# the configurations so that all see the same machine.  Prints each
# configuration's median time per size and, per size, the ratio
# staged / best chunked and the chunk that won.
# This is a model of a GPU's copies, not a GPU measurement.
# Usage: make -C build/tests bench-chunked   (or MPIRUN=... LIBCOLLAR=... run-chunked.sh PROGRAM)
set -eu
prog=$1
rounds=${ROUNDS:-3}
bw=${BANDWIDTH:-10G}
lat=${LATENCY:-10}
sizes=${SIZES:-"1M 16M 64M"}
configs="staged chunked:256K chunked:1M chunked:4M"
opts=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    opts="--oversubscribe"
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for r in $(seq "$rounds"); do
    for c in $configs; do
        alg=${c%%:*}
        chunk=0
        [ "$alg" = "$c" ] || chunk=${c#*:}
        # shellcheck disable=SC2086
        "$MPIRUN" $opts -np 2 env LD_PRELOAD="$LIBCOLLAR" COLLAR_DEVICE=sim \
            COLLAR_SIM_BANDWIDTH="$bw" COLLAR_SIM_LATENCY="$lat" \
            COLLAR_ALGORITHM="$alg" COLLAR_CHUNK_SIZE="$chunk" "$prog" $sizes |
            awk -v c="$c" '/^bytes/ {print c, $2, $4} /WRONG/ {print "WRONG"; exit 1}' >> "$results"
    done
done
if grep -q WRONG "$results"; then
    echo "FAIL: a run computed a wrong result"
    exit 1
fi
echo "allreduce, 2 ranks, sim device: copies at $bw bytes/s + $lat us each; median of $rounds rounds (us)"
awk -v sizes="$sizes" -v configs="$configs" '
function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((n + 1) / 2)]
}
{ key = $1 " " $2; v[key] = v[key] " " $3; seen[$2] = 1 }
END {
    nc = split(configs, cs, " ")
    printf "%-10s", "bytes"
    for (i = 1; i <= nc; i++) printf " %14s", cs[i]
    printf " %9s %8s\n", "ratio", "chunk"
    for (b in seen) order[++nb] = b + 0
    for (i = 1; i <= nb; i++) for (j = i + 1; j <= nb; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
    for (k = 1; k <= nb; k++) {
        b = order[k]; printf "%-10d", b
        best = 0; bestc = ""
        for (i = 1; i <= nc; i++) {
            m[i] = median(v[cs[i] " " b]); printf " %14.1f", m[i]
            if (i > 1 && (best == 0 || m[i] < best)) { best = m[i]; bestc = cs[i] }
        }
        sub("chunked:", "", bestc)
        printf " %8.2fx %8s\n", m[1] / best, bestc
    }
    print "(ratio = staged / best chunked: above 1, chunked is faster)"
}' "$results"
