# Shared by the scripts that compare separate runs of a benchmark
# (run-passthrough.sh, run-nvtx.sh); sourced, with MPIRUN set.
#   $opts        the launcher's options: Open MPI runs as root, oversubscribed
#   median       the median of the numbers on stdin, one a line
opts=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    opts="--oversubscribe"
fi

median() {
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
