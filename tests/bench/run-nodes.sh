#!/bin/sh
# hier against chunked and ring across nodes joined by a shaped link: nodes
# made on this machine (tests/cluster/cluster.sh up --link RATE: a network
# namespace a node, veth links through a bridge, each node's link sending
# at most RATE), the sim device's model of a GPU inside each node (its
# host-device link at BANDWIDTH, 200M bytes/s by default, device memory at
# DEVICE_BANDWIDTH, 2G).  For each link rate (LINKS, tc's notation,
# default 800mbit 1600mbit 6400mbit: the network at 1/2, 1 and 4 times the
# host-device link), each node count (NODES, default "2 4") at PPN ranks a
# node (default 2) and each size (SIZES, default 64K 1M 16M 64M): the
# median time of each algorithm (ALGS, default "hier chunked ring") over
# ROUNDS rounds (default 3), the algorithms taking turns within a round so
# that all see the same machine, and the ratio chunked / hier.  Runs under
# Open MPI's mpirun (the cluster's launcher); needs root.
# This is a model: the sim device's copies and reductions are memcpy and
# host loops, and on a machine with few cores every rank's CPU time is in
# every number.  The link has a rate but no added latency (no netem here).
# Usage: make -C build/tests bench-nodes   (or LIBCOLLAR=... run-nodes.sh PROGRAM)
set -eu
prog=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${ROUNDS:-3}
bw=${BANDWIDTH:-200M}
dbw=${DEVICE_BANDWIDTH:-2G}
links=${LINKS:-800mbit 1600mbit 6400mbit}
nodes_list=${NODES:-2 4}
ppn=${PPN:-2}
sizes=${SIZES:-64K 1M 16M 64M}
algs=${ALGS:-hier chunked ring}
dir=$(mktemp -d /tmp/collar-bench-nodes.XXXXXX)
results=$dir.results
trap '"$top/tests/cluster/cluster.sh" down "$dir" >/dev/null 2>&1; rm -f "$results"' EXIT
: >"$results"
for link in $links; do
    for nodes in $nodes_list; do
        "$top/tests/cluster/cluster.sh" up --link "$link" "$nodes" "$dir" >/dev/null
        np=$((nodes * ppn))
        for r in $(seq "$rounds"); do
            for alg in $algs; do
                # shellcheck disable=SC2086
                CLUSTER_PPN=$ppn "$dir/bin/mpirun" --oversubscribe -np "$np" env \
                    LD_PRELOAD="$LIBCOLLAR" COLLAR_DEVICE=sim COLLAR_SIM_BANDWIDTH="$bw" \
                    COLLAR_SIM_DEVICE_BANDWIDTH="$dbw" COLLAR_ALGORITHM="$alg" \
                    "$prog" --reps 3 $sizes 2>&1 |
                    awk -v l="$link" -v n="$nodes" -v c="$alg" \
                        '/^bytes/ {print l, n, c, $2, $4} /WRONG/ {print "WRONG"; exit 1}' >>"$results"
            done
        done
        "$top/tests/cluster/cluster.sh" down "$dir" >/dev/null
    done
done
if grep -q WRONG "$results"; then
    echo "FAIL: a run computed a wrong result"
    exit 1
fi
echo "allreduce float sum across nodes, $ppn ranks a node; sim device: host-device link $bw bytes/s, device memory $dbw bytes/s; median of $rounds rounds (us)"
awk -v algs="$algs" '
function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((n + 1) / 2)]
}
{ key = $1 " " $2 " " $3 " " $4; v[key] = v[key] " " $5; if (!(($1 " " $2 " " $4) in seen)) { seen[$1 " " $2 " " $4] = 1; order[++nk] = $1 " " $2 " " $4 } }
END {
    na = split(algs, as, " ")
    printf "%-9s %-5s %-10s", "link", "nodes", "bytes"
    for (i = 1; i <= na; i++) printf " %12s", as[i]
    printf " %14s\n", "chunked/hier"
    for (k = 1; k <= nk; k++) {
        split(order[k], x, " ")
        printf "%-9s %-5d %-10d", x[1], x[2], x[3]
        for (i = 1; i <= na; i++) { m[as[i]] = median(v[x[1] " " x[2] " " as[i] " " x[3]]); printf " %12.1f", m[as[i]] }
        if (m["hier"] > 0) printf " %13.2fx", m["chunked"] / m["hier"]
        printf "\n"
    }
}' "$results"
