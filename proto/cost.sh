#!/bin/bash
# The cost of the marker: put (before MPI_Init) and reading every rank's
# (after it), per library, at 2, 4 and 8 processes on this machine, every
# process marked; medians over the ranks of REPS runs.  MPI_Init's own time
# with and without the marker beside it.
#   proto/cost.sh [REPS]
cd "$(dirname "$0")"
reps=${1:-3}
V=${COLLAR_CACHE_DIR:-$HOME/.cache/collar}/mpi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
med() { sort -g | awk '{a[NR]=$1} END {if (NR) printf "%.0f", a[int((NR+1)/2)]; else printf "-"}'; }
run() {   # NAME LAUNCH PROG
    local name=$1 launch=$2 prog=$3
    for n in 2 4 8; do
        local with="" without=""
        for i in $(seq "$reps"); do
            with+=$(timeout 120 $launch -np $n env PROTO_MARK=1 $prog 2>/dev/null)$'\n'
            without+=$(timeout 120 $launch -np $n $prog 2>/dev/null)$'\n'
        done
        local ok put get per init base
        ok=$(grep -c RIGHT <<<"$with")
        put=$(grep -o 'put [0-9.]* us' <<<"$with" | awk '{print $2}' | med)
        get=$(grep -o 'get [0-9.]* us' <<<"$with" | awk '{print $2}' | med)
        per=$(grep -o '([0-9.]* us/peer)' <<<"$with" | tr -d '(' | awk '{print $1}' | med)
        init=$(grep -o 'init [0-9.]* us' <<<"$with" | awk '{print $2}' | med)
        base=$(grep -o 'init [0-9.]* us' <<<"$without" | awk '{print $2}' | med)
        printf '%-8s n=%d right %2d/%-2d put %6s us  read %6s us (%4s us/peer)  MPI_Init %7s us (without: %7s us)\n' \
            "$name" $n "$ok" $((n * reps)) "$put" "$get" "$per" "$init" "$base"
    done
}
run ompi41 "mpirun --oversubscribe" ./main_pmix
run mpich4 "mpirun.mpich" ./main_pmi1
[ -x "$V/ompi5/venv/bin/mpirun" ] && run ompi5 "$V/ompi5/venv/bin/mpirun --oversubscribe" ./main_pmix_ompi5
[ -x "$V/mpich5/venv/bin/mpiexec" ] && run mpich5 "$V/mpich5/venv/bin/mpiexec" ./main_pmi1_mpich5
[ -x "$V/impi/venv/bin/mpiexec" ] && I_MPI_ROOT=$V/impi/venv run impi "$V/impi/venv/bin/mpiexec" ./main_pmi1_impi
