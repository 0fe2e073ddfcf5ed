#!/bin/bash
# The prototypes' answers on 3 processes, marker on rank 0 only, on all but
# rank 0, on all; and on a simulated second node (fakessh: a UTS namespace
# with another host name) with the marker on one node only.  Each marked
# rank must see exactly the marked ranks (RIGHT), and nothing may hang.
#   proto/check.sh        (build first: see README.md)
cd "$(dirname "$0")"
V=${COLLAR_CACHE_DIR:-$HOME/.cache/collar}/mpi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail=0
verdict() {   # NAME CASE OUTPUT EXPECTED-RIGHT
    local right wrong
    right=$(grep -c RIGHT <<<"$3"); wrong=$(grep -c WRONG <<<"$3")
    if [ "$right" -eq "$4" ] && [ "$wrong" -eq 0 ]; then r=PASS; else r=FAIL; fail=1; fi
    printf '%-7s %-28s %s (%d marked ranks right, %d wrong)\n' "$1" "$2" "$r" "$right" "$wrong"
}
cases() {   # NAME LAUNCH PROG HOSTOPTS-NODE-A HOSTOPTS-NODE-B
    local name=$1 l=$2 p=$3 m="env PROTO_MARK=1"
    verdict "$name" "rank 0 only" "$(timeout 60 $l -np 1 $m $p : -np 2 $p 2>&1)" 1
    verdict "$name" "all but rank 0" "$(timeout 60 $l -np 1 $p : -np 2 $m $p 2>&1)" 2
    verdict "$name" "all" "$(timeout 60 $l -np 3 $m $p 2>&1)" 3
    verdict "$name" "none" "$(timeout 60 $l -np 3 $p 2>&1)" 0
    if [ -n "$4" ]; then
        verdict "$name" "2 nodes, node A only" "$(timeout 60 $l $4 -np 2 $m $p : $5 -np 2 $p 2>&1)" 2
        verdict "$name" "2 nodes, node B only" "$(timeout 60 $l $4 -np 2 $p : $5 -np 2 $m $p 2>&1)" 2
        verdict "$name" "2 nodes, both" "$(timeout 60 $l $4 -np 2 $m $p : $5 -np 2 $m $p 2>&1)" 4
    fi
}
me=$(hostname)
hosts=$(mktemp)
trap 'rm -f "$hosts"' EXIT
printf '%s slots=2\nnodeb slots=2\n' "$me" >"$hosts"
ompi_nodes="--mca plm_rsh_agent $PWD/fakessh --hostfile $hosts"
cases ompi41 "mpirun --oversubscribe" ./main_pmix "$ompi_nodes --host $me:2" "--host nodeb:2"
hydra_nodes="-launcher ssh -launcher-exec $PWD/fakessh -hosts $me:2,nodeb:2"
cases mpich4 "mpirun.mpich" ./main_pmi1 "$hydra_nodes" ""
[ -x main_pmix_ompi5 ] && cases ompi5 "$V/ompi5/venv/bin/mpirun --oversubscribe" ./main_pmix_ompi5 "$ompi_nodes --host $me:2" "--host nodeb:2"
[ -x main_pmi1_mpich5 ] && cases mpich5 "$V/mpich5/venv/bin/mpiexec" ./main_pmi1_mpich5 "$hydra_nodes" ""
[ -x main_pmi1_impi ] && I_MPI_ROOT=$V/impi/venv cases impi "$V/impi/venv/bin/mpiexec" ./main_pmi1_impi "$hydra_nodes" ""
exit $fail
