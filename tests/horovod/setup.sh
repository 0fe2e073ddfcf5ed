#!/bin/bash
# Install Horovod for the Horovod integration test (tests/horovod/horovod.test)
# and print, as the last line of its output, the Python to run it with:
#
#   horovod-setup: python <venv>/bin/python
#
# What it does, each step only when needed:
#   1. apt-get the Debian packages the build and the runs need (sudo when not
#      root): PyTorch (python3-torch, libtorch-dev), cmake, g++, python3-dev,
#      python3-venv, and Horovod's runtime dependencies;
#   2. download Horovod $HOROVOD_VERSION's source from the package index and
#      build it into a wheel, CPU only, with MPI and PyTorch
#      (HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1, no TensorFlow, MXNet or
#      Gloo), against Debian's PyTorch (no build isolation: setup.py runs in
#      a venv that sees the system packages);
#   3. install the wheel into a venv and check that it imports and has MPI.
#
# The wheel and the venv are cached under
#   ${COLLAR_CACHE_DIR:-$HOME/.cache/collar}/horovod/<key>/
# where <key> names the Horovod, Python, PyTorch and MPI versions
# (horovod-0.28.1-py3.11-torch1.13.1-openmpi4.1.4): a later run with the
# same versions reuses them (seconds); another version of any of them builds
# anew.  The build takes about ten minutes on two cores
# (HOROVOD_BUILD_JOBS, default the number of cores, sets its parallelism); its
# log stays in the cache directory.
#
# Exit status: 0 when Horovod is ready; 77 when it cannot be installed (no
# package index, no network, a build failure), with the reason on the last
# line; the caller (horovod.test) then skips.
set -uo pipefail

HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
python=/usr/bin/python3
cache=${COLLAR_CACHE_DIR:-$HOME/.cache/collar}
jobs=${HOROVOD_BUILD_JOBS:-$(nproc)}

say() { echo "horovod-setup: $*"; }
cannot() {
    say "cannot install Horovod $HOROVOD_VERSION: $*"
    exit 77
}

[ -x "$python" ] || cannot "$python is missing (Debian's python3)"
command -v mpicxx >/dev/null 2>&1 || cannot "no mpicxx (libopenmpi-dev)"

# ------------------------------------------------------------ Debian packages
packages="python3-torch libtorch-dev pybind11-dev cmake g++ make python3-dev
python3-venv python3-pip python3-setuptools python3-wheel python3-cloudpickle
python3-psutil python3-yaml python3-packaging python3-numpy"
# One dpkg-query for all: the installed ones ("ii"), the others are missing.
installed=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $packages 2>/dev/null \
    | awk '$1 == "ii" { print $2 }')
missing=$(for p in $packages; do echo "$installed" | grep -qxF "$p" || printf ' %s' "$p"; done)
if [ -n "$missing" ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || cannot "not root and no sudo to install$missing"
        sudo=sudo
    fi
    say "installing$missing"
    $sudo apt-get update -qq || cannot "apt-get update failed (no package index?)"
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing \
        >/dev/null || cannot "apt-get install$missing failed"
fi

# ------------------------------------------------------------ the cache key
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
    || cannot "$python does not run"
torchver=$("$python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null) \
    || cannot "$python cannot import torch (python3-torch)"
mpiver=$(mpirun --version 2>/dev/null | sed -n 's/^mpirun (Open MPI) \([0-9.]*\).*/openmpi\1/p')
[ -n "$mpiver" ] || mpiver=mpi-$(mpicxx -show 2>/dev/null | md5sum | cut -c1-8)
key=horovod-$HOROVOD_VERSION-py$pyver-torch$torchver-$mpiver
dir=$cache/horovod/$key
venv=$dir/venv
mkdir -p "$dir/wheel" || cannot "cannot create the cache directory $dir"
say "cache $dir"

# A ready venv: Horovod imports, with PyTorch and MPI built in.
ready() {
    "$venv/bin/python" - <<EOF >/dev/null 2>&1
import horovod, horovod.torch as hvd
assert horovod.__version__ == "$HOROVOD_VERSION", horovod.__version__
assert hvd.mpi_built()
EOF
}

if [ -x "$venv/bin/python" ] && ready; then
    say "reusing the cached venv"
    say "python $venv/bin/python"
    exit 0
fi

# ------------------------------------------------------------ the wheel
# The source comes from the package index once (pip download) and is built
# in place in the cache directory, so that a build that stopped half-way
# resumes where it was instead of starting over.
wheel=$(ls "$dir"/wheel/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -1)
if [ -z "$wheel" ]; then
    src=$dir/src/horovod-$HOROVOD_VERSION
    if [ ! -f "$src/setup.py" ]; then
        rm -rf "$dir/src"
        mkdir -p "$dir/src"
        say "downloading the source of Horovod $HOROVOD_VERSION"
        if ! "$python" -m pip download --no-deps --no-binary :all: --disable-pip-version-check \
                -q -d "$dir/src" "horovod==$HOROVOD_VERSION" >"$dir/download.log" 2>&1; then
            tail -5 "$dir/download.log"
            cannot "the package index is not reachable (pip download failed, see $dir/download.log)"
        fi
        tar -xzf "$dir/src/horovod-$HOROVOD_VERSION.tar.gz" -C "$dir/src" \
            || cannot "cannot unpack $dir/src/horovod-$HOROVOD_VERSION.tar.gz"
    fi
    if [ ! -x "$dir/build-venv/bin/python" ]; then
        "$python" -m venv --system-site-packages "$dir/build-venv" \
            || cannot "python3 -m venv failed"
    fi
    say "building Horovod $HOROVOD_VERSION into a wheel with $jobs jobs (log: $dir/build.log; minutes)"
    t0=$SECONDS
    # setup.py runs CMake and make (MAKEFLAGS: make's jobs); no build
    # isolation: the venv sees Debian's PyTorch, which the build needs.
    if ! (cd "$src" && env HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 \
            HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_GLOO=1 \
            HOROVOD_CPU_OPERATIONS=MPI MAKEFLAGS="-j$jobs" \
            "$dir/build-venv/bin/python" setup.py bdist_wheel -d "$dir/wheel") \
            >"$dir/build.log" 2>&1; then
        grep -E "error:|Error [0-9]|No such file" "$dir/build.log" | head -10
        cannot "the build failed after $((SECONDS - t0)) s (see $dir/build.log)"
    fi
    wheel=$(ls "$dir"/wheel/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -1)
    [ -n "$wheel" ] || cannot "setup.py bdist_wheel made no wheel (see $dir/build.log)"
    say "built $(basename "$wheel") in $((SECONDS - t0)) s"
    # The wheel is what is kept: the build tree is large.
    rm -rf "$dir/src" "$dir/build-venv"
else
    say "reusing the cached wheel $(basename "$wheel")"
fi

# ------------------------------------------------------------ the venv
# The runtime dependencies (cloudpickle, psutil, pyyaml, packaging) come from
# Debian, so installing from a cached wheel needs no package index.
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv" || cannot "python3 -m venv failed"
"$venv/bin/pip" install --no-index --no-deps --disable-pip-version-check -q "$wheel" \
    || cannot "pip install $wheel failed"
if ! ready; then
    "$venv/bin/python" -c 'import horovod.torch as hvd; print("mpi_built:", hvd.mpi_built())' 2>&1 | tail -5
    cannot "Horovod does not import from $venv, or was built without MPI"
fi
say "python $venv/bin/python"
