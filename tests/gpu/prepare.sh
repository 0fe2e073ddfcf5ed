#!/bin/bash
# Prepare what tests/gpu/run.sh needs on a GPU machine that has no network
# and perhaps no MPI, in .gpu/ at the top of the tree (ignored by git; give
# it to the machine with the tree):
#   .gpu/collar-VERSION.tar.gz   the distribution tarball (make dist): it
#                                builds with ./configure && make, no autotools
#   .gpu/mpich-*.whl             MPICH from the Python package index: a
#                                relocatable build (bin/mpicc, bin/mpiexec,
#                                include/, lib/) that run.sh unpacks when the
#                                machine has no mpicc; not CUDA-aware, which is
#                                the case collar is for
#   .gpu/mpi4py-*.whl            mpi4py 4.1 (binary, for Python 3.12): the
#                                client run.sh runs on CuPy arrays
# About 15 MB in all.  Needs a configured build/ (./bootstrap.sh; BUILD_DIR
# names another) and pip.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
mkdir -p .gpu
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
build=${BUILD_DIR:-build}
rm -f .gpu/collar-*.tar.gz
make -C "$build" dist >/dev/null
mv "$build"/collar-*.tar.gz .gpu/
if ! ls .gpu/mpich-*.whl >/dev/null 2>&1; then
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --python-version 3.12 --implementation cp -d .gpu "mpich==5.0.2"
fi
if ! ls .gpu/mpi4py-*.whl >/dev/null 2>&1; then
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 \
        --python-version 3.12 --implementation cp -d .gpu "mpi4py==4.1.*"
fi
ls -la "$top/.gpu"
echo "prepare: done; on the GPU machine run: bash tests/gpu/run.sh (with .gpu carried)"
