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
#   pick FULL QUICK
#       prints FULL, or QUICK when TEST_QUICK=1: a test's list of rank counts
#       or shapes, shortened where a suite runs again (below).
#
# TEST_SKIP (optional): names of tests to skip, e.g. "horovod stress".
# TEST_QUICK=1 (optional): the CI stages that run the suite again under the
# sanitizers and MPICH (tests/ci-extra.sh) keep every code path of a test
# but fewer repeats of its arithmetic (rank counts, node shapes), which the
# README suite runs in full.
#
# Environment (from the Makefile): MPIRUN, LIBCOLLAR, MPI_TRANSPORT
# (optional: "tcp" runs Open MPI over its TCP transport), TEST_TIMEOUT,
# TEST_SANITIZER (asan, tsan or none: how configure built collar, see
# --enable-asan / --enable-tsan) and TEST_SANITIZER_RUNTIME (the
# sanitizer's shared runtime).
#
# Sanitizer builds: an instrumented libcollar.so in LD_PRELOAD needs the
# sanitizer runtime loaded before it (the runtime must come first in the
# process's library list), so LIBCOLLAR becomes
# "<libasan.so or libtsan.so>:libcollar.so" for the tests (LD_PRELOAD takes
# a list), and the ranks of mpi_run_plain get the runtime alone.  Under ASan, leak
# detection is off for the ranks (ASAN_OPTIONS=detect_leaks=0): Open MPI does
# not free what it allocated when MPI_Finalize returns (hwloc topology, PMIx
# and component tables), and those reports would hide everything else; the
# unit tests (no MPI run) keep leak detection on, see tests/Makefile.am and
# tests/lsan.supp.  UBSan prints a stack and stops at its first report.
#
# COLLAR_TEST_VALGRIND=1 (by hand, slow: minutes per test; tests/Makefile.am
# passes it on as TEST_VALGRIND, as collar warns about unknown COLLAR_*
# variables in the ranks' environment): every rank runs
# under valgrind --error-exitcode=99 --suppressions=tests/valgrind.supp, so a
# memory error fails the test.  Not with a sanitizer build.  TEST_TIMEOUT
# then defaults to 1800 seconds; VALGRIND_OPTS adds valgrind options (e.g.
# --leak-check=full, --track-origins=yes).  See docs/reliability.md.
# Open MPI runs as root (OMPI_ALLOW_RUN_AS_ROOT), oversubscribed, and with
# its op/avx component off: Open MPI 4.1.4 saturates 8-bit integer sums in it
# (ompi issue 8045), and the tests compare against exact results.
set -u

test_file=$1
: "${MPIRUN:?MPIRUN is not set}"
: "${LIBCOLLAR:?LIBCOLLAR is not set}"
sanitizer=${TEST_SANITIZER:-none}
valgrind=${TEST_VALGRIND:-${COLLAR_TEST_VALGRIND:-0}}
unset COLLAR_TEST_VALGRIND
[ "$valgrind" = 0 ] && valgrind=""
if [ -n "$valgrind" ]; then
    timeout_s=${TEST_TIMEOUT:-1800}
else
    timeout_s=${TEST_TIMEOUT:-300}
fi
last_output=$(mktemp)
trap 'rm -f "$last_output"' EXIT

skip() {
    echo "SKIP: $*"
    exit 77
}

pick() {
    if [ "${TEST_QUICK:-0}" = 1 ]; then
        echo "$2"
    else
        echo "$1"
    fi
}

# TEST_SKIP="name ...": tests (file names without .test) to skip, for CI
# stages that run a suite again in another configuration (tests/ci-extra.sh).
test_name=$(basename "$test_file" .test)
case " ${TEST_SKIP:-} " in
    *" $test_name "*) skip "$test_name is in TEST_SKIP (${TEST_SKIP})" ;;
esac

[ -x "$MPIRUN" ] || command -v "$MPIRUN" >/dev/null 2>&1 || skip "no MPI launcher ($MPIRUN)"
[ -r "$LIBCOLLAR" ] || { echo "FAIL: $LIBCOLLAR not built"; exit 1; }

# What goes ahead of libcollar.so in LD_PRELOAD, and the sanitizer options
# (a value the caller exported wins).
preload_first=""
case $sanitizer in
    asan)
        preload_first=${TEST_SANITIZER_RUNTIME:-$(gcc -print-file-name=libasan.so)}
        export ASAN_OPTIONS="suppressions=$TOP_SRCDIR/tests/asan.supp${ASAN_OPTIONS:+:$ASAN_OPTIONS}:detect_leaks=0"
        export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
        ;;
    tsan)
        preload_first=${TEST_SANITIZER_RUNTIME:-$(gcc -print-file-name=libtsan.so)}
        ;;
    none|"") ;;
    *) echo "FAIL: unknown TEST_SANITIZER=$sanitizer (asan, tsan or none)"; exit 1 ;;
esac
if [ -n "$preload_first" ]; then
    [ -r "$preload_first" ] || { echo "FAIL: the $sanitizer runtime $preload_first is not readable"; exit 1; }
    LIBCOLLAR=$preload_first:$LIBCOLLAR
fi

# COLLAR_TEST_VALGRIND=1: each rank runs under valgrind.
rank_wrapper=""
if [ -n "$valgrind" ]; then
    [ "$sanitizer" = none ] || skip "valgrind mode needs a build without sanitizers (this one: $sanitizer)"
    command -v valgrind >/dev/null 2>&1 || skip "valgrind mode: valgrind is not installed"
    rank_wrapper="valgrind -q --error-exitcode=99 --suppressions=$TOP_SRCDIR/tests/valgrind.supp"
    # Open MPI ships suppressions for its own reports.
    ompi_supp=/usr/share/openmpi/openmpi-valgrind.supp
    [ -r "$ompi_supp" ] && rank_wrapper="$rank_wrapper --suppressions=$ompi_supp"
    rank_wrapper="$rank_wrapper ${VALGRIND_OPTS:-}"
fi

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
        # Under valgrind LD_PRELOAD is set for the valgrind launcher, whose
        # tool passes it on to the program.
        echo "+ mpirun -np $np${preload:+ LD_PRELOAD=$(echo "$preload" | sed 's|[^:]*/||g')}$shown${rank_wrapper:+ valgrind} $*"
        # "|| rc=$?": the test file runs under set -e, which would end this
        # subshell at a failing mpirun before its output is shown.
        rc=0
        run_t0=$(date +%s)
        # shellcheck disable=SC2086
        timeout -k 10 "$timeout_s" "$MPIRUN" $launcher_opts -np "$np" \
            env ${preload:+LD_PRELOAD=$preload} $rank_wrapper "$@" >"$last_output" 2>&1 || rc=$?
        cat "$last_output"
        run_s=$(($(date +%s) - run_t0))
        echo "+ ($run_s s)"
        # 137 is also a launcher's code for a rank killed by SIGKILL: only
        # a run that took the whole limit timed out.
        if { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ $run_s -ge "$timeout_s" ]; then
            echo "FAIL: timed out after ${timeout_s}s"
        fi
        exit $rc
    )
}

mpi_run() {
    run_common "$LIBCOLLAR" "$@"
}

mpi_run_plain() {
    run_common "$preload_first" "$@"
}

mpi_expect() {
    if ! grep -Eq "$1" "$last_output"; then
        echo "FAIL: expected output matching '$1'"
        return 1
    fi
}

# The test runs in a subshell under set -e (its own EXIT traps stay its
# own); every log ends with its time, for the CI stages' list of the
# slowest tests (tests/slowest-tests.sh).
test_t0=$(date +%s)
( set -e; . "$test_file" )
rc=$?
echo "test time: $(($(date +%s) - test_t0)) s"
exit $rc
