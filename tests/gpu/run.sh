#!/bin/bash
# collar on a real GPU, in one call (well under 8 minutes): build, check
# correctness on device memory, print a performance table.
#
#   bash tests/gpu/run.sh            (after tests/gpu/prepare.sh made .gpu/)
#
# 1. MPI: the machine's mpicc when there is one, else the MPICH wheel in
#    .gpu/ unpacked to a scratch directory (relocatable, not CUDA-aware).
# 2. collar from .gpu/collar-*.tar.gz: configure --with-cuda, make, install
#    to a scratch prefix; the kernel test (tests/unit/test_kernels) runs the
#    reduction kernels on the GPU against the host loops.
# 3. tests/gpu/test_device.c under collar with 2 and 4 ranks sharing the
#    GPU, with every algorithm forced in turn (auto, staged, chunked, ring,
#    ipc): cudaMalloc, managed, device->pinned, unsynchronised asynchronous
#    fills.  Then a real client: tests/python/test_clients.py (mpi4py 4 from
#    .gpu/, every collective collar handles) on CuPy arrays in device
#    memory, 3 ranks, values checked and collar's statistics compared with
#    the calls made (skipped where python3 has no CuPy).
# 4. Performance: collar-tune --csv on device memory, 2 and 4 ranks, sizes
#    4 B .. 64 MiB: median latency per algorithm (and native where the MPI
#    library takes device pointers), printed as a table of us and GB/s
#    (algorithm bandwidth: bytes / time).
# 5. Small messages: one table of the median latency of 8 B, 64 B, 1 KiB
#    and 8 KiB int sums on device memory (tests/gpu/small_allreduce.c), per rank
#    layout (2 and 4 ranks on one GPU; one rank per GPU where there are
#    several) and per algorithm: staged; staged with GDRCopy (only where
#    collar-info says GDRCopy is in use); ipc one-shot, with and without
#    its zero-copy intake where collar knows COLLAR_IPC_ZEROCOPY; hier
#    (only across nodes); nccl (where NCCL loads and accepts the layout:
#    it refuses two ranks on one GPU); native (where the MPI library takes
#    device pointers); and collar's own cost (tests/bench/run-owncost.sh:
#    the sim device inline, so no device time).  A row that cannot run
#    says why ("skipped: ...").  The kernels also run under
#    compute-sanitizer's memcheck where it is installed.
# 6. The pointer cache: bench_ptrcache (driver query, hit with buffer-id
#    check, trusted hit, host pointer).
# Output goes to stdout and, when $OUT is set, to $OUT/gpu-report.txt.
# With no GPU (GPU_FORCE_SIM=1, or no driver) the same steps run on the sim
# device, so that the script itself is tested on a CPU-only machine;
# GPU_USE_WHEEL=1 uses the MPICH wheel even where an mpicc is installed.
# GPU_EMULATE=1 runs the steps on the CUDA emulation instead (docs/cuda.md,
# "The CUDA emulation (tests)"; the cudaemu stage of tests/ci-extra.sh):
# collar's cuda backend (libcollar_cudaemu.so) and test_device, built
# against the shared runtime as on a GPU, on libcudaemu.so, with
# COLLAR_DEVICE=cuda: the build (plus `make -C tests cudaemu`; GPU_BUILD=DIR
# reuses a configured build tree instead of building from scratch),
# test_device with 2 and 4 ranks under each algorithm (counts up to
# GPU_MAX_COUNT, 65537 by default there), collar-tune on device memory
# (up to 1 MiB) and the pointer cache's host half.  The kernel test runs
# its host half only and the pointer cache bench measures no driver: both
# are linked with the static runtime, which the emulation does not
# replace; the mpi4py client is skipped (CuPy needs a GPU).
set -uo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
work=${GPU_WORK:-/tmp/collar-gpu}
report=${OUT:+$OUT/gpu-report.txt}
report=${report:-$work/gpu-report.txt}
jobs=$(nproc)
t_start=$SECONDS
rm -rf "$work"
mkdir -p "$work"
exec > >(tee "$report") 2>&1
say() { echo "=== gpu: $* ($((SECONDS - t_start)) s)"; }
die() { say "FAILED: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export HYDRA_LAUNCHER=fork
# Open MPI refuses more ranks than cores without it (4 ranks on 2 cores).
export OMPI_MCA_rmaps_base_oversubscribe=1

# ----------------------------------------------------------------- machine
cuda_home=${CUDA_HOME:-/usr/local/cuda}
[ -x "$cuda_home/bin/nvcc" ] || cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
gpu=no
emulate=${GPU_EMULATE:-0}
if [ "$emulate" = 1 ]; then
    gpu=emulated
elif [ "${GPU_FORCE_SIM:-0}" != 1 ] && command -v nvidia-smi >/dev/null \
        && nvidia-smi -L >/dev/null 2>&1; then
    gpu=yes
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
say "GPU: $gpu; CUDA toolkit: $cuda_home ($("$cuda_home/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"

# --------------------------------------------------------------------- MPI
if [ -z "${MPICC:-}" ] && [ "${GPU_USE_WHEEL:-0}" != 1 ] && command -v mpicc >/dev/null; then
    MPICC=$(command -v mpicc)
    MPIEXEC=$(command -v mpiexec)
fi
if [ -z "${MPICC:-}" ]; then
    whl=$(ls .gpu/mpich-*.whl 2>/dev/null | head -1)
    [ -n "$whl" ] || die "no mpicc here and no .gpu/mpich-*.whl (run tests/gpu/prepare.sh)"
    mkdir -p "$work/mpich" && (cd "$work/mpich" && python3 -m zipfile -e "$top/$whl" .)
    mpi_prefix=$(echo "$work"/mpich/mpich-*.data/data)
    chmod +x "$mpi_prefix"/bin/*
    MPICC=$mpi_prefix/bin/mpicc
    MPIEXEC=$mpi_prefix/bin/mpiexec
    export LD_LIBRARY_PATH=$mpi_prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PATH=$mpi_prefix/bin:$PATH
fi
say "MPI: $MPICC ($("$MPICC" -show 2>/dev/null | cut -c1-60 || true)...)"
mpiexec_n() { local n=$1; shift; timeout 300 "$MPIEXEC" -n "$n" "$@"; }

# ------------------------------------------------------------------ build
tarball=$(ls .gpu/collar-*.tar.gz 2>/dev/null | head -1)
build=$work/build
if [ "$emulate" = 1 ] && [ -n "${GPU_BUILD:-}" ]; then
    build=$(cd "$GPU_BUILD" && pwd)
    src=$top/
elif [ -n "$tarball" ]; then
    tar -C "$work" -xzf "$tarball"
    src=$(echo "$work"/collar-*/)
elif [ -x ./configure ]; then
    src=$top/
else
    die "no .gpu/collar-*.tar.gz and no ./configure (run tests/gpu/prepare.sh)"
fi
if [ "$build" = "$work/build" ]; then
    mkdir -p "$build"
    (cd "$build" && "$src/configure" -q --prefix="$work/inst" --with-cuda="$cuda_home" \
         MPICC="$MPICC" >configure.log 2>&1) || { tail -30 "$build/configure.log"; die "configure"; }
fi
make -C "$build" -j"$jobs" >"$work/make.log" 2>&1 || { tail -40 "$work/make.log"; die "make"; }
emu_targets=""
[ "$emulate" = 1 ] && emu_targets=cudaemu
make -C "$build/tests" -j"$jobs" unit/test_kernels bench/bench_ptrcache bench/bench_passthrough $emu_targets \
    >>"$work/make.log" 2>&1 || { tail -20 "$work/make.log"; die "make tests"; }
if [ "$emulate" = 1 ]; then
    # Not installed: the tree's libraries and tools.
    lib="$build/tests/cudaemu/.libs/libcollar_cudaemu.so $build/tests/cudaemu/.libs/libcudaemu.so"
    tune=$build/src/collar-tune
    info=$build/src/collar-info
    plainlib=$build/src/.libs/libcollar.so
else
    make -C "$build" install >/dev/null 2>&1 || die "make install"
    lib=$work/inst/lib/libcollar.so
    tune=$work/inst/bin/collar-tune
    info=$work/inst/bin/collar-info
    plainlib=$lib
fi
say "built $(basename "$src") with CUDA"
fail=0

# ---------------------------------------------------------------- kernels
if [ -x "$build/tests/unit/test_kernels" ]; then
    "$build/tests/unit/test_kernels" | tail -5 || { fail=1; say "kernel test FAILED"; }
fi

sanitizer=$(command -v compute-sanitizer || echo "$cuda_home/bin/compute-sanitizer")
if [ "$gpu" != yes ]; then
    echo "  compute-sanitizer: skipped (no GPU)"
elif [ ! -x "$sanitizer" ]; then
    echo "  compute-sanitizer: skipped (not installed)"
elif [ -x "$build/tests/unit/test_kernels" ]; then
    if timeout 300 "$sanitizer" --tool memcheck --error-exitcode 9 \
            "$build/tests/unit/test_kernels" >"$work/sanitizer.log" 2>&1; then
        echo "  compute-sanitizer memcheck, the kernel test: $(grep -m1 'ERROR SUMMARY' "$work/sanitizer.log")"
    else
        fail=1
        echo "  compute-sanitizer memcheck, the kernel test: FAILED"
        grep -m20 -E "=========|ERROR" "$work/sanitizer.log"
    fi
fi

# ------------------------------------------------------------ correctness
"$MPICC" -O2 -I"$cuda_home/include" "$top/tests/gpu/test_device.c" -o "$work/test_device" \
    -L"$cuda_home/lib64" -lcudart -lm -Wl,-rpath,"$cuda_home/lib64" || die "compile test_device"
dev=cuda
args=()
if [ "$gpu" = no ]; then
    dev=sim
    args=(--host)
elif [ "$emulate" = 1 ]; then
    args=(--max-count "${GPU_MAX_COUNT:-65537}")
elif [ -n "${GPU_MAX_COUNT:-}" ]; then
    args=(--max-count "$GPU_MAX_COUNT")
fi
for n in 2 4; do
    for alg in auto staged chunked ring ipc; do
        if mpiexec_n "$n" env LD_PRELOAD="$lib" COLLAR_DEVICE="$dev" COLLAR_ALGORITHM="$alg" \
                "$work/test_device" "${args[@]}" >"$work/device-$n-$alg.log" 2>&1; then
            echo "  $n ranks, $alg: $(grep '^test_device' "$work/device-$n-$alg.log")"
        else
            fail=1
            echo "  $n ranks, $alg: FAILED"
            head -20 "$work/device-$n-$alg.log"
        fi
    done
done
if [ "$gpu" = yes ]; then
    client_array=cupy
    python3 -c 'import cupy' 2>/dev/null || client_array=""
elif [ "$emulate" = 1 ]; then
    client_array=""
else
    client_array=numpy
fi
whl=$(ls .gpu/mpi4py-*.whl 2>/dev/null | head -1)
if [ "$emulate" = 1 ]; then
    echo "  mpi4py client: SKIP on the emulation (CuPy needs a GPU)"
elif [ -z "$client_array" ]; then
    echo "  mpi4py client: SKIP (python3 has no CuPy)"
elif [ -z "$whl" ] && ! python3 -c 'import mpi4py' 2>/dev/null; then
    echo "  mpi4py client: SKIP (no .gpu/mpi4py-*.whl: run tests/gpu/prepare.sh)"
else
    client=yes
    if [ -n "$whl" ]; then
        if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
                --upgrade --target "$work/site" "$whl" >"$work/pip.log" 2>&1; then
            export PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH}
        elif python3 -c 'import mpi4py' 2>/dev/null; then
            echo "  mpi4py client: $whl does not install here ($(tail -1 "$work/pip.log")); python3's own mpi4py instead"
        else
            echo "  mpi4py client: SKIP ($whl does not install here: $(tail -1 "$work/pip.log"))"
            client=no
        fi
    fi
    for alg in auto ipc; do
        [ "$client" = yes ] || break
        log=$work/client-$alg.log
        if COLLAR_DEVICE="$dev" COLLAR_ALGORITHM="$alg" COLLAR_STATS=1 \
                COLLAR_STATS_FORMAT=json COLLAR_STATS_FILE="$work/client-$alg.json" \
                mpiexec_n 3 env LD_PRELOAD="$lib" python3 "$top/tests/python/test_clients.py" \
                --array="$client_array" >"$log" 2>&1; then
            echo "  mpi4py client, 3 ranks, $alg: $(grep '^clients: mpi4py' "$log"); $(grep '^clients: [0-9]* passed' "$log")"
        else
            fail=1
            echo "  mpi4py client, 3 ranks, $alg: FAILED"
            grep -E "^clients: (FAIL|mpi4py)|MISMATCH|Error|error" "$log" | head -20
        fi
    done
fi
say "correctness done"

# ------------------------------------------------------------ performance
tune_mem=device
tune_max=64M tune_limit=60
[ "$emulate" = 1 ] && tune_max=1M tune_limit=10
for n in 2 4; do
    csv=$work/tune-$n.csv
    mpiexec_n "$n" env LD_PRELOAD="$lib" COLLAR_DEVICE="$dev" \
        "$tune" --memory "$tune_mem" --quick --min 4 --max "$tune_max" \
        --ranks "$n" --chunks 256K,1M,4M --time-limit "$tune_limit" --csv "$csv" \
        --output "$work/tune-$n.table" >"$work/tune-$n.log" 2>&1 \
        || { fail=1; tail -20 "$work/tune-$n.log"; continue; }
    echo
    echo "allreduce on $tune_mem memory, $n ranks on one GPU ($dev device): median us (GB/s)"
    python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
best = {}
for r in rows:
    key = (int(r["bytes"]), r["algorithm"] + ("" if r["chunk"] in ("", "0") else ":" + r["chunk"]))
    best[key] = min(best.get(key, 1e30), float(r["median_us"]))
algs = sorted({a for _, a in best})
sizes = sorted({b for b, _ in best})
print("%10s " % "bytes" + "".join("%20s" % a for a in algs))
for b in sizes:
    cells = []
    for a in algs:
        t = best.get((b, a))
        cells.append("%20s" % ("-" if t is None else "%.1f (%.2f)" % (t, b / t / 1e3)))
    print("%10d " % b + "".join(cells))
PY
    echo "table chosen:"; grep -v '^#' "$work/tune-$n.table" | sed 's/^/  /'
done
say "performance done"

# ---------------------------------------------------------- small messages
lat_sizes=8,64,1024,8192
lat_iters=1000 lat_batches=7
[ "$emulate" = 1 ] && lat_iters=100 lat_batches=1
ngpus=1
if [ "$gpu" = yes ]; then
    ngpus=$(nvidia-smi -L | grep -c '^GPU')
elif [ "$emulate" = 1 ]; then
    ngpus=${CUDAEMU_DEVICES:-4}
fi
info_out=$(env LD_PRELOAD="$lib" COLLAR_DEVICE="$dev" COLLAR_GDRCOPY=auto "$info" 2>&1)
nodes=$(mpiexec_n 2 hostname 2>/dev/null | sort -u | wc -l)
# The stand-in NCCL on the emulation; on a GPU the machine's, if any.
nccl_var=""
if [ "$emulate" = 1 ]; then
    mkdir -p "$work/nccl" && ln -sf "$build/tests/cudaemu/.libs/libnccl_stub.so" "$work/nccl/libnccl.so.2"
    nccl_var=COLLAR_NCCL_LIBRARY=$work/nccl/libnccl.so.2
fi
lat_cell() { printf ' %10s' "$1"; }
# lat_row LABEL NP DEVICE-ARGS PRELOAD [VAR=VALUE ...]: one row of the table.
lat_row() {
    local label=$1 np=$2 devargs=$3 preload=$4
    shift 4
    local log=$work/small-$np-${label//[^a-z0-9]/_}.log
    printf '  %-46s' "$label"
    # shellcheck disable=SC2086
    if ! mpiexec_n "$np" env ${preload:+LD_PRELOAD="$preload"} COLLAR_DEVICE="$dev" COLLAR_LOG=info "$@" \
            "$work/small_allreduce" --sizes "$lat_sizes" --iters "$lat_iters" --batches "$lat_batches" \
            $devargs >"$log" 2>&1 || ! grep -q "^small_allreduce: \(rank 0: values right\|skipped\)" "$log"; then
        fail=1
        echo " FAILED"
        grep -m5 -E "small_allreduce|ERROR|rror" "$log" | sed 's/^/    /'
        return
    fi
    local why
    why=$(grep -m1 -o "skipped: .*" "$log" ||
          grep "fallback" "$log" | grep -v "works on device buffers only" | head -1 | sed 's/.*fallback /skipped: fallback /; s/)$//')
    if [ -n "$why" ]; then
        echo " $why"
        return
    fi
    for b in ${lat_sizes//,/ }; do
        lat_cell "$(sed -n "s/^small_allreduce: bytes $b: \([0-9.]*\) us/\1/p" "$log")"
    done
    echo
}
lat_skip() { printf '  %-46s %s\n' "$1" "$2"; }
if [ "$gpu" = no ]; then
    echo
    echo "small messages: skipped on the sim device (collar's own cost below)"
else
    "$MPICC" -O2 -I"$cuda_home/include" "$top/tests/gpu/small_allreduce.c" -o "$work/small_allreduce" \
        -L"$cuda_home/lib64" -lcudart -ldl -Wl,-rpath,"$cuda_home/lib64" || die "compile small_allreduce"
    native_preload=""
    [ "$emulate" = 1 ] && native_preload=$build/tests/cudaemu/.libs/libcudaemu.so
    layouts="2:one 4:one"
    # (A rehearsal on the emulation: one layout of each kind is enough.)
    [ "$emulate" = 1 ] && layouts="2:one"
    [ "$ngpus" -ge 2 ] && layouts="$layouts $ngpus:each"
    echo
    echo "allreduce latency on device memory ($dev device), int sums: median us per call"
    printf '  %-46s' "ranks, algorithm"
    for b in ${lat_sizes//,/ }; do lat_cell "$b B"; done
    echo
    for layout in $layouts; do
        np=${layout%%:*}
        devargs="--device 0" where="$np ranks, one GPU"
        [ "${layout#*:}" = each ] && devargs="" where="$np ranks, one per GPU"
        lat_row "$where: staged" "$np" "$devargs" "$lib" COLLAR_ALGORITHM=staged
        if echo "$info_out" | grep -i "gdrcopy" | grep -qi "in use"; then
            lat_row "$where: staged, GDRCopy" "$np" "$devargs" "$lib" COLLAR_ALGORITHM=staged COLLAR_GDRCOPY=1
        else
            lat_skip "$where: staged, GDRCopy" "skipped: no GDRCopy"
        fi
        if echo "$info_out" | grep -q "COLLAR_IPC_ZEROCOPY"; then
            lat_row "$where: ipc one-shot, copy-in" "$np" "$devargs" "$lib" COLLAR_ALGORITHM=ipc COLLAR_IPC_ZEROCOPY=0
            # (zero-copy starts at COLLAR_IPC_ZEROCOPY_MIN, 256K by default:
            # from 0 here, to see where it pays on this machine)
            lat_row "$where: ipc one-shot, zero-copy" "$np" "$devargs" "$lib" COLLAR_ALGORITHM=ipc COLLAR_IPC_ZEROCOPY=1 COLLAR_IPC_ZEROCOPY_MIN=0
        else
            lat_row "$where: ipc one-shot" "$np" "$devargs" "$lib" COLLAR_ALGORITHM=ipc
            lat_skip "$where: ipc one-shot, zero-copy" "skipped: this collar has no COLLAR_IPC_ZEROCOPY"
        fi
        if [ "$nodes" -gt 1 ]; then
            lat_row "$where: hier" "$np" "$devargs" "$lib" COLLAR_ALGORITHM=hier
        else
            lat_skip "$where: hier" "skipped: one node"
        fi
        # shellcheck disable=SC2086
        lat_row "$where: nccl" "$np" "$devargs" "$lib" COLLAR_ALGORITHM=nccl $nccl_var
        lat_row "$where: native" "$np" "$devargs --native" "$native_preload"
    done
fi
# collar's own cost: the sim device inline (no device, no worker threads)
# against the MPI library on host buffers, 2 ranks; with COLLAR_PROGRESS
# auto (collectives polled) and thread (blocking where every rank runs the
# thread: docs/latency.md).
own_rounds=3 own_iters=200 own_batches=41
[ "$emulate" = 1 ] && own_rounds=1 own_batches=5
for progress in auto thread; do
    MPIRUN=$MPIEXEC LIBCOLLAR=$plainlib SIZES="${lat_sizes//,/ }" ROUNDS=$own_rounds \
        ITERS=$own_iters BATCHES=$own_batches PROGRESS=$progress \
        timeout 300 sh "$top/tests/bench/run-owncost.sh" "$build/tests/bench/bench_passthrough" \
        >"$work/owncost-$progress.log" 2>&1 || { fail=1; tail -5 "$work/owncost-$progress.log"; }
    for col in 5:staged 7:ipc; do
        printf '  %-46s' "2 ranks: collar's own cost, ${col#*:}, $progress"
        for b in ${lat_sizes//,/ }; do
            lat_cell "$(awk -F'|' -v b="$b" -v c="${col%%:*}" '$2 + 0 == b && $2 ~ /[0-9]/ { gsub(/ /, "", $c); print $c }' "$work/owncost-$progress.log")"
        done
        echo
    done
done
say "small messages done"

# ---------------------------------------------------------- pointer cache
echo
COLLAR_DEVICE=$dev "$build/tests/bench/bench_ptrcache" || fail=1
say "all done: $([ $fail = 0 ] && echo PASS || echo FAILED)"
exit $fail
