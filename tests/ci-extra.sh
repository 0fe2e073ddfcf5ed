#!/bin/bash
# CI, the stages after the README's two commands (.ci/run runs them first,
# then this script, from the top of the tree):
#
#   deps    apt-get what these stages need (mpich libmpich-dev clang
#           libclang-rt-dev) when missing, keeping mpicc/mpirun on Open MPI
#   asan    build-asan/: ../configure --enable-asan --without-cuda, make
#           check (unit and MPI suites under AddressSanitizer + UBSan)
#   mpich   build-mpich/: ../configure MPICC=mpicc.mpich --without-cuda,
#           make check (the tests launch with mpirun.mpich)
#   (both: TEST_SKIP="$skip_again" / "$skip_mpich", see below)
#   matrix  tests/matrix/run.sh: collar built against each MPI library
#           users run (Debian's Open MPI 4.1 and MPICH 4.0: build/ and
#           build-mpich/ reused; Open MPI 5.0, MPICH 5.0, Intel MPI 2021
#           and the MPI-5 standard ABI from the package index's wheels, each
#           in build-matrix/NAME/), two C tests against each wheel, and
#           tests/python/test_clients.py under collar for each (library,
#           mpi4py) pair, under LD_PRELOAD and again loaded by
#           mpi4py.profile (the +profile rows, about 5 s in all); a wheel
#           that cannot be installed is a SKIP in the table, one that
#           installs and fails a FAIL (docs/mpi-libraries.md)
#   cudaemu collar's cuda backend on the CUDA emulation, in build/ (the
#           README build, with the CUDA toolkit): mpi/cudaemu.test with
#           TEST_CUDAEMU_FULL=1 (every algorithm on every rank layout and
#           progress mode, more injected failures; the README suite runs a
#           part of it), then tests/gpu/run.sh rehearsed on the emulation
#           (GPU_EMULATE=1 GPU_BUILD=build); skipped where build/ has no
#           cuda backend
#   fuzz    the tuning-table fuzzer (tests/fuzz/fuzz_table.c) for
#           FUZZ_SECONDS (30) on a scratch copy of the committed corpus, in
#           build-fuzz/; a crash fails CI and stays in build-fuzz/
#   cudaemu-programs
#           the MPI test programs and mpi4py on device memory of the CUDA
#           emulation (mpi/cudaemu_programs.test, mpi/cudaemu_clients.test):
#           every part at every rank count in build/ (TEST_CUDAEMU_FULL=1;
#           the README suite runs 2 and 3 ranks, 16 + 3 s), then MPI-4's
#           persistent collectives over MPICH with the cuda backend
#           (build-mpich-cuda/: collar and the emulation only), and the
#           semantics corpus there (mpi/semantics/sem_cudaemu.test, whose
#           sem_persist needs MPICH's persistent collectives)
#   nodes   tests/cluster/nodes.sh: ranks on different nodes of a cluster
#           made on this machine (tests/cluster/cluster.sh: UTS namespaces
#           with host names of their own, an ssh stand-in, traffic on
#           loopback): hier, the built-in rules against collar-info
#           --explain, the CUDA emulation and the README's launcher lines
#           on 2x2, 4x2 and 4x4 ranks, Open MPI and MPICH
#
# Each stage prints a header and its time; a summary comes last.  Measured
# on 2 cores (nothing else running): deps 0-1 min, asan 554 s, mpich 377 s,
# matrix 114 s with the wheels cached (about 5 min more for their first
# download and install), cudaemu 110 s, fuzz 33 s, cudaemu-programs 150 s
# (build-mpich-cuda/ built for one architecture), nodes 130 s.
# CI_EXTRA_STAGES="asan fuzz" runs some stages only (deps always runs).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
jobs=$(nproc)
summary=""
stage_name=""
stage_t0=$SECONDS

stage_begin() {
    stage_name=$1
    stage_t0=$SECONDS
    echo
    echo "=================== ci-extra: $stage_name ($(date '+%H:%M:%S'))"
}

stage_end() {
    local t=$((SECONDS - stage_t0))
    echo "=================== ci-extra: $stage_name: ok in ${t} s"
    summary="$summary  $stage_name: ok, ${t} s"$'\n'
    stage_name=""
}

on_error() {
    [ -n "$stage_name" ] || return 0
    echo "=================== ci-extra: $stage_name: FAILED after $((SECONDS - stage_t0)) s"
    printf '%s' "$summary"
}
trap on_error ERR

wanted() {
    case " ${CI_EXTRA_STAGES:-asan mpich matrix cudaemu cudaemu-programs fuzz nodes} " in *" $1 "*) return 0 ;; esac
    return 1
}

# make check in build dir $1; on failure the tail of the suite's log.
check_in() {
    make -C "$1" check || {
        tail -300 "$1/tests/test-suite.log" 2>/dev/null || true
        return 1
    }
    sh tests/slowest-tests.sh "$1" 8
}

# The suites run again under ASan and MPICH, less what they would add
# nothing to, to keep CI within its time: the Python tests (Debian's mpi4py
# and the Horovod build are Open MPI's and uninstrumented), collar-tune's
# timing runs, and the 64 MiB repeats of code paths the other tests cover
# at smaller sizes.  The CUDA backend is left out of both builds (no GPU
# here: its code cannot run; the README build compiles and tests what can).
skip_again="horovod mpi4py tune allreduce_large chunked_large huge"
# The MPICH stage also leaves out the longest runs of the algorithms' own
# arithmetic (chunk and segment boundaries, every type and op, stress
# loops, ipc's protocol within a node, whose only MPI calls hier makes
# too), which do not depend on the library: the README suite and the ASan
# stage run them.  What MPICH answers differently (bindings, persistent and
# large-count forms, progress, errors, one-rank failures, Fortran, ABI,
# node and cross-node communicators) stays.
skip_mpich="$skip_again chunked ring ipc stress allreduce_staged_nonblocking"
# Both stages also run with TEST_QUICK=1 (tests/run-test.sh): the tests
# that repeat their matrix over many rank counts or node shapes keep every
# code path with fewer repeats.

# ------------------------------------------------------------------ deps
stage_begin deps
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
missing=""
for p in mpich libmpich-dev clang libclang-rt-dev python3-venv python3-numpy python3-mpi4py; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
# Installing MPICH registers it in the mpi and mpirun alternatives; Open MPI
# has the higher priority on amd64, but a machine in manual mode (or another
# architecture) could switch.  The README build (build/) is Open MPI's:
# whatever mpicc/mpirun pointed to before stays.
mpicc_before=$(readlink -f "$(command -v mpicc)")
mpirun_before=$(readlink -f "$(command -v mpirun)")
if [ -n "$missing" ]; then
    echo "ci-extra: installing$missing"
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi
mpicc_after=$(readlink -f "$(command -v mpicc)")
mpirun_after=$(readlink -f "$(command -v mpirun)")
if [ "$mpicc_after" != "$mpicc_before" ]; then
    echo "ci-extra: installing MPICH switched mpicc to $mpicc_after; back to $mpicc_before"
    $sudo update-alternatives --set mpi "$mpicc_before"
fi
if [ "$mpirun_after" != "$mpirun_before" ]; then
    echo "ci-extra: installing MPICH switched mpirun to $mpirun_after; back to $mpirun_before"
    $sudo update-alternatives --set mpirun "$mpirun_before"
fi
update-alternatives --display mpi | sed -n '1,3p'
update-alternatives --display mpirun | sed -n '1,3p'
mpirun --version 2>&1 | sed -n 1p
# The README build must be Open MPI's: its configure found the launcher
# matching the library behind mpicc.
readme_mpirun=$(sed -n 's/^MPIRUN = //p' build/tests/Makefile)
echo "ci-extra: the README build (build/) tests with $readme_mpirun"
if ! "$readme_mpirun" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
    echo "ci-extra: FAIL: build/ was configured against $readme_mpirun, not Open MPI:" \
         "mpicc points to $(readlink -f "$(command -v mpicc)") (update-alternatives --auto mpi)"
    false
fi
for tool in mpicc.mpich mpirun.mpich clang; do
    command -v "$tool" >/dev/null || { echo "ci-extra: FAIL: $tool not found"; false; }
done
stage_end

# ------------------------------------------------------------------ asan
if wanted asan; then
    stage_begin "asan (AddressSanitizer + UBSan, build-asan/)"
    rm -rf build-asan
    mkdir build-asan
    # No --enable-werror here: gcc 12 gives false -Warray-bounds warnings
    # under -fsanitize=address (tests/unit/test_tuning.c, an unchecked
    # malloc); the plain and MPICH builds keep warnings fatal.
    (cd build-asan && ../configure --enable-asan --without-cuda >configure.out) \
        || { tail -40 build-asan/config.log; false; }
    sed -n '/^collar .* configured/,$p' build-asan/configure.out
    make -C build-asan -j"$jobs" >build-asan/make.out 2>&1 || { tail -60 build-asan/make.out; false; }
    TEST_QUICK=1 TEST_SKIP="$skip_again" check_in build-asan
    # A report that did not fail its test (there should be none) still fails CI.
    if grep -l "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:" \
            build-asan/tests/*.log build-asan/tests/*/*.log 2>/dev/null | grep -v test-suite.log; then
        echo "ci-extra: FAIL: sanitizer reports in the logs above"
        false
    fi
    stage_end
fi

# ------------------------------------------------------------------ mpich
if wanted mpich; then
    stage_begin "mpich (MPICC=mpicc.mpich, build-mpich/)"
    rm -rf build-mpich
    mkdir build-mpich
    (cd build-mpich && ../configure MPICC=mpicc.mpich --without-cuda >configure.out) \
        || { tail -40 build-mpich/config.log; false; }
    sed -n '/^collar .* configured/,$p' build-mpich/configure.out
    grep -q "^MPIRUN = .*mpich" build-mpich/tests/Makefile \
        || { echo "ci-extra: FAIL: build-mpich does not launch with MPICH's mpirun"; false; }
    make -C build-mpich -j"$jobs" >build-mpich/make.out 2>&1 || { tail -60 build-mpich/make.out; false; }
    TEST_QUICK=1 TEST_SKIP="$skip_mpich" check_in build-mpich
    stage_end
fi

# ------------------------------------------------------------------ matrix
if wanted matrix; then
    stage_begin "matrix (MPI libraries x clients, build-matrix/)"
    # The Debian libraries' builds come from the README build and the mpich
    # stage when they ran; the table of results is the last thing printed.
    bash tests/matrix/run.sh
    stage_end
fi

# ---------------------------------------------------------------- cudaemu
if wanted cudaemu; then
    stage_begin "cudaemu (the cuda backend on the CUDA emulation, build/)"
    if make -C build/tests -n cudaemu >/dev/null 2>&1; then
        make -C build/tests -j"$jobs" cudaemu gpu/test_device >/dev/null
        TEST_CUDAEMU_FULL=1 make -C build check TESTS=mpi/cudaemu.test \
            || { tail -200 build/tests/mpi/cudaemu.log; false; }
        grep "^test time" build/tests/mpi/cudaemu.log
        GPU_EMULATE=1 GPU_BUILD=build GPU_WORK="$top/build-cudaemu" bash tests/gpu/run.sh
    else
        echo "ci-extra: SKIP: build/ has no cuda backend (no CUDA toolkit at configure)"
    fi
    stage_end
fi

# ------------------------------------------------------------------ fuzz
if wanted fuzz; then
    fuzz_s=${FUZZ_SECONDS:-30}
    stage_begin "fuzz (tuning-table parser, ${fuzz_s} s, build-fuzz/)"
    rm -rf build-fuzz
    mkdir build-fuzz
    # The build line of tests/fuzz/fuzz_table.c's header, warnings on and
    # UBSan fatal (a report is then a crash that libFuzzer saves).
    # shellcheck disable=SC2046
    clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Wall -Wextra -Werror \
        -Ibuild -Isrc -Iinclude $(mpicc.openmpi --showme:compile) \
        tests/fuzz/fuzz_table.c src/core/tuning.c src/core/config.c src/core/fault.c \
        src/core/log.c src/core/status.c -pthread -o build-fuzz/fuzz_table
    cp -R tests/fuzz/corpus build-fuzz/corpus
    mkdir build-fuzz/artifacts
    ncorpus=$(find build-fuzz/corpus -type f | wc -l)
    echo "ci-extra: fuzzing for ${fuzz_s} s from $ncorpus corpus files (a scratch copy)"
    if ! build-fuzz/fuzz_table -max_len=8192 -max_total_time="$fuzz_s" -print_final_stats=1 \
            -artifact_prefix="$top/build-fuzz/artifacts/" build-fuzz/corpus \
            >build-fuzz/fuzz.log 2>&1; then
        tail -80 build-fuzz/fuzz.log
        echo "ci-extra: FAIL: the fuzzer found a crash; input(s):"
        for f in build-fuzz/artifacts/*; do
            [ -f "$f" ] || continue
            echo "--- $f"
            od -c "$f" | head -20
        done
        echo "reproduce: build-fuzz/fuzz_table <input>"
        false
    fi
    grep -E "^(#[0-9]+ +DONE|Done [0-9]+ runs|stat::number_of_executed_units)" build-fuzz/fuzz.log || true
    echo "ci-extra: corpus grew from $ncorpus to $(find build-fuzz/corpus -type f | wc -l) files" \
         "(new inputs stay in build-fuzz/corpus; tests/fuzz/corpus is unchanged)"
    stage_end
fi

# ------------------------------------------------------------ cudaemu-programs
if wanted cudaemu-programs; then
    stage_begin "cudaemu-programs (the MPI test programs on the CUDA emulation)"
    emu_tests="mpi/cudaemu_programs.test mpi/cudaemu_clients.test mpi/semantics/sem_cudaemu.test"
    # The README build (Open MPI 4.1): every part, every rank count.
    TEST_CUDAEMU_FULL=1 make -C build check TESTS="$emu_tests" \
        || { tail -300 build/tests/test-suite.log; false; }
    # MPI-4's persistent collectives (test_persist, the persistent and
    # large-count forms of test_colls, test_mix --lifetime's persistent
    # allreduce, mpi4py 4's persistent calls, nccl.test's persistent part,
    # the semantics corpus's sem_persist) need MPICH: a build with the
    # cuda backend, of collar, the emulation and the three programs only (the kernels compiled for one architecture: the
    # emulation runs their host build), and only those parts.
    rm -rf build-mpich-cuda
    mkdir build-mpich-cuda
    (cd build-mpich-cuda && ../configure MPICC=mpicc.mpich --with-cuda-arch=90 >configure.out) \
        || { tail -40 build-mpich-cuda/config.log; false; }
    { make -C build-mpich-cuda/src -j"$jobs" &&
      make -C build-mpich-cuda/tests -j"$jobs" cudaemu mpi/test_colls mpi/test_persist mpi/test_mix \
          mpi/test_nbstart mpi/test_iallreduce mpi/test_half gpu/test_device \
          mpi/semantics/sem_progress mpi/semantics/sem_persist mpi/semantics/sem_nbstart \
          mpi/semantics/sem_examples; } \
        >build-mpich-cuda/make.out 2>&1 || { tail -60 build-mpich-cuda/make.out; false; }
    TEST_CUDAEMU_FULL=1 TEST_CUDAEMU_PARTS="forms mix persist" \
        make -C build-mpich-cuda/tests check TESTS="$emu_tests mpi/nccl.test" check_PROGRAMS= check_LTLIBRARIES= \
        || { tail -300 build-mpich-cuda/tests/test-suite.log; false; }
    stage_end
fi

# ------------------------------------------------------------------ nodes
if wanted nodes; then
    stage_begin "nodes (ranks on different nodes of a cluster made on this machine)"
    # tests/cluster/: 2, 4 nodes (UTS namespaces with host names of their
    # own, launched through an ssh stand-in) under Open MPI (build/) and
    # MPICH (build-mpich/; build-mpich-cuda/ for the CUDA emulation).
    tests/cluster/nodes.sh
    stage_end
fi

echo
echo "=================== ci-extra: all stages passed"
printf '%s' "$summary"
