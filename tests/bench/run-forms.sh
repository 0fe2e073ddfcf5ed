#!/bin/sh
# The two forms of a nonblocking allreduce on the sim device with its link
# modelled (COLLAR_SIM_BANDWIDTH, default 12G bytes/s, plus
# COLLAR_SIM_LATENCY per copy, default 10 us; device memory at
# DEVICE_BANDWIDTH, default 120G): 2 ranks, 64 KiB, 4 MiB and 64 MiB, in
# separate runs alternating over ROUNDS rounds so that both see the same
# machine:
#   library  the default (COLLAR_PROGRESS=auto) in a program at
#            MPI_THREAD_SINGLE: the MPI library's own MPI_Iallreduce on
#            host copies, copied in at the start, out at the wait
#   thread   COLLAR_PROGRESS=thread: collar's algorithm (the rules' or
#            ALG's) as a schedule its progress thread carries
# Prints each form's medians (the start, start + wait alone, with as much
# computation between them) and the part of the allreduce the computation
# hid, per size, and the ratios library / thread.
# This is a model of a GPU's copies, not a GPU measurement.
# Usage: make -C build/tests bench-forms   (or MPIRUN=... LIBCOLLAR=... run-forms.sh PROGRAM)
set -eu
prog=$1
rounds=${ROUNDS:-3}
bw=${BANDWIDTH:-12G}
dbw=${DEVICE_BANDWIDTH:-120G}
lat=${LATENCY:-10}
sizes=${SIZES:-"64K 4M 64M"}
alg=${ALG:-auto}
reps=${REPS:-5}
opts=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    opts="--oversubscribe"
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for r in $(seq "$rounds"); do
    for form in library thread; do
        progress=auto
        [ "$form" = thread ] && progress=thread
        # shellcheck disable=SC2086
        "$MPIRUN" $opts -np 2 env LD_PRELOAD="$LIBCOLLAR" COLLAR_DEVICE=sim \
            COLLAR_SIM_BANDWIDTH="$bw" COLLAR_SIM_LATENCY="$lat" \
            COLLAR_SIM_DEVICE_BANDWIDTH="$dbw" COLLAR_ALGORITHM="$alg" \
            COLLAR_PROGRESS="$progress" "$prog" --reps "$reps" $sizes |
            awk -v f="$form" '/^bytes/ {print f, $2, $4, $6, $10, $12} /WRONG/ {print "WRONG"; exit 1}' >> "$results"
    done
done
if grep -q WRONG "$results"; then
    echo "FAIL: a run computed a wrong result"
    exit 1
fi
echo "MPI_Iallreduce, 2 ranks, sim device (algorithm $alg): copies at $bw bytes/s + $lat us each,"
echo "device memory at $dbw bytes/s; median of $rounds rounds of $reps (us; hidden: the part of the"
echo "allreduce hidden by as much computation between the start and the wait)"
awk -v sizes="$sizes" '
function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((n + 1) / 2)]
}
{ k = $1 " " $2; st[k] = st[k] " " $3; al[k] = al[k] " " $4; ov[k] = ov[k] " " $5; hi[k] = hi[k] " " $6; seen[$2] = 1 }
END {
    printf "%-9s %-8s %10s %10s %12s %7s\n", "bytes", "form", "start", "alone", "overlapped", "hidden"
    for (b in seen) order[++nb] = b + 0
    for (i = 1; i <= nb; i++) for (j = i + 1; j <= nb; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
    for (k = 1; k <= nb; k++) {
        b = order[k]
        for (f = 1; f <= 2; f++) {
            form = f == 1 ? "library" : "thread"
            key = form " " b
            s[f] = median(st[key]); a[f] = median(al[key]); o[f] = median(ov[key])
            printf "%-9d %-8s %10.1f %10.1f %12.1f %7.2f\n", b, form, s[f], a[f], o[f], median(hi[key])
        }
        printf "%-9d %-8s %10.2f %10.2f %12.2f\n", b, "ratio", s[1] / s[2], a[1] / a[2], o[1] / o[2]
    }
}' "$results"
