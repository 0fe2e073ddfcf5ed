#!/bin/sh
# ipc against staged, chunked and ring on the sim device, with copies and
# reductions timed on a model: the host-device link at COLLAR_SIM_BANDWIDTH
# (default 12G bytes/s, a PCIe-like link) plus COLLAR_SIM_LATENCY a copy
# (default 10 us), device memory at COLLAR_SIM_DEVICE_BANDWIDTH (default
# ten times the link).  2 and 4 ranks, 8 B, 64 KiB, 1 MiB and 64 MiB;
# ROUNDS rounds (default 3), each running every algorithm in turn, so that
# all see the same machine.  Prints each algorithm's median time per size
# and the ratio chunked / ipc.  ipc's one-shot threshold is its default
# (256K); chunked and ring run their default 1M chunks.  The `hier` column
# is the same job cut into two pseudo-nodes (COLLAR_SIM_NODE_SIZE=ranks/2),
# hier running ipc within each and the MPI library between them: the
# cost of leaving the node, against `ipc` on one node.
# ALGS= picks the columns (default "staged chunked ring ipc hier"; the
# ratio needs chunked and ipc); `ipc-copyin` is ipc with
# COLLAR_IPC_ZEROCOPY=0, which copies every input into IPC memory first.
# This is a model of a GPU node, not a GPU measurement: the sim device's
# copies and reductions are memcpy and host loops on the CPU, so on a
# machine with few cores the CPU time of the MPI library's host allreduce
# and of the memcpys is part of every number.
# Usage: make -C build/tests bench-ipc   (or MPIRUN=... LIBCOLLAR=... run-ipc.sh PROGRAM)
set -eu
prog=$1
rounds=${ROUNDS:-3}
bw=${BANDWIDTH:-12G}
dbw=${DEVICE_BANDWIDTH:-120G}
lat=${LATENCY:-10}
sizes=${SIZES:-"8 64K 1M 64M"}
ranks=${RANKS:-"2 4"}
algs=${ALGS:-"staged chunked ring ipc hier"}
opts=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    opts="--oversubscribe"
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for np in $ranks; do
    for r in $(seq "$rounds"); do
        for alg in $algs; do
            nodes=0
            [ "$alg" = hier ] && nodes=$((np / 2))
            run=$alg zc=1
            [ "$alg" = ipc-copyin ] && run=ipc zc=0
            # shellcheck disable=SC2086
            "$MPIRUN" $opts -np "$np" env LD_PRELOAD="$LIBCOLLAR" COLLAR_DEVICE=sim \
                COLLAR_SIM_NODE_SIZE="$nodes" \
                COLLAR_SIM_BANDWIDTH="$bw" COLLAR_SIM_DEVICE_BANDWIDTH="$dbw" \
                COLLAR_SIM_LATENCY="$lat" COLLAR_IPC_ZEROCOPY="$zc" \
                COLLAR_ALGORITHM="$run" "$prog" --reps 5 $sizes |
                awk -v c="$alg" -v np="$np" '/^bytes/ {print np, c, $2, $4} /WRONG/ {print "WRONG"; exit 1}' >> "$results"
        done
    done
done
if grep -q WRONG "$results"; then
    echo "FAIL: a run computed a wrong result"
    exit 1
fi
echo "allreduce float sum, sim device: link $bw bytes/s + $lat us a copy, device memory $dbw bytes/s; median of $rounds rounds (us)"
awk -v algs="$algs" '
function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((n + 1) / 2)]
}
{ key = $1 " " $2 " " $3; v[key] = v[key] " " $4; seen[$1 " " $3] = 1 }
END {
    na = split(algs, as, " ")
    printf "%-5s %-10s", "ranks", "bytes"
    for (i = 1; i <= na; i++) printf " %12s", as[i]
    printf " %16s\n", "chunked/ipc"
    for (k in seen) order[++nk] = k
    for (i = 1; i <= nk; i++) for (j = i + 1; j <= nk; j++) {
        split(order[i], x, " "); split(order[j], y, " ")
        if (y[1] + 0 < x[1] + 0 || (y[1] == x[1] && y[2] + 0 < x[2] + 0)) { t = order[i]; order[i] = order[j]; order[j] = t }
    }
    for (k = 1; k <= nk; k++) {
        split(order[k], x, " ")
        printf "%-5d %-10d", x[1], x[2]
        for (i = 1; i <= na; i++) { m[as[i]] = median(v[x[1] " " as[i] " " x[2]]); printf " %12.1f", m[as[i]] }
        printf " %15.2fx\n", m["chunked"] / m["ipc"]
    }
}' "$results"
