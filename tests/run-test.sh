#!/bin/sh
# Test driver (LOG_COMPILER of the *.test files): runs one test file with
# these functions defined, from the tests build directory.
#
#   mpi_run NP [VAR=VALUE ...] -- PROGRAM [ARGS]
#       PROGRAM on NP ranks under collar (LD_PRELOAD), with the variables set.
#   mpi_run_plain NP [VAR=VALUE ...] -- PROGRAM [ARGS]
#       the same without collar: the MPI library alone.
#   mpi_expect PATTERN
#       the output of the last mpi_run must contain PATTERN (grep -E).
#   skip "why"
#       exit 77: the test is skipped (automake reports SKIP).
#
# Environment (from the Makefile): MPIRUN, LIBCOLLAR, MPI_TRANSPORT
# (optional: "tcp" runs Open MPI over its TCP transport), TEST_TIMEOUT.
# Open MPI runs as root (OMPI_ALLOW_RUN_AS_ROOT), oversubscribed, and with
# its op/avx component off: Open MPI 4.1.4 saturates 8-bit integer sums in it
# (ompi issue 8045), and the tests compare against exact results.
set -u

test_file=$1
: "${MPIRUN:?MPIRUN is not set}"
: "${LIBCOLLAR:?LIBCOLLAR is not set}"
timeout_s=${TEST_TIMEOUT:-300}
last_output=$(mktemp)
trap 'rm -f "$last_output"' EXIT

skip() {
    echo "SKIP: $*"
    exit 77
}

[ -x "$MPIRUN" ] || command -v "$MPIRUN" >/dev/null 2>&1 || skip "no MPI launcher ($MPIRUN)"
[ -r "$LIBCOLLAR" ] || { echo "FAIL: $LIBCOLLAR not built"; exit 1; }

launcher_opts=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    launcher_opts="--oversubscribe --mca op ^avx"
    if [ "${MPI_TRANSPORT:-}" = tcp ]; then
        launcher_opts="$launcher_opts --mca btl tcp,self"
    fi
    mpi_flavor=openmpi
else
    mpi_flavor=mpich
fi

# run_common PRELOAD NP [VAR=VALUE ...] -- PROGRAM [ARGS]: the variables go
# into the environment of mpirun, which local ranks inherit (values may
# contain spaces); LD_PRELOAD is set for the ranks only, not for mpirun.
run_common() {
    (
        preload=$1; np=$2; shift 2
        shown=""
        while [ $# -gt 0 ] && [ "$1" != "--" ]; do
            export "$1"
            shown="$shown '$1'"
            shift
        done
        [ $# -gt 0 ] && shift
        echo "+ mpirun -np $np${preload:+ LD_PRELOAD=libcollar.so}$shown $*"
        # shellcheck disable=SC2086
        timeout -k 10 "$timeout_s" "$MPIRUN" $launcher_opts -np "$np" \
            env ${preload:+LD_PRELOAD=$preload} "$@" >"$last_output" 2>&1
        rc=$?
        cat "$last_output"
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            echo "FAIL: timed out after ${timeout_s}s"
        fi
        exit $rc
    )
}

mpi_run() {
    run_common "$LIBCOLLAR" "$@"
}

mpi_run_plain() {
    run_common "" "$@"
}

mpi_expect() {
    if ! grep -Eq "$1" "$last_output"; then
        echo "FAIL: expected output matching '$1'"
        return 1
    fi
}

set -e
. "$test_file"
