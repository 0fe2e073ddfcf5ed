#!/bin/bash
# Build the prototypes: Debian's Open MPI 4.1 and MPICH 4.0, and the wheels
# of tests/matrix/setup.sh (ompi5, mpich5, impi) where they are installed.
cd "$(dirname "$0")"
V=${COLLAR_CACHE_DIR:-$HOME/.cache/collar}/mpi
set -e
mpicc.openmpi -O2 -Wall -Wextra -rdynamic -o main_pmix main.c kvs_pmix.c -ldl
mpicc.mpich -O2 -Wall -Wextra -o main_pmi1 main.c kvs_pmi1.c
mpicc.openmpi -o ruled_out_ompi ruled_out.c
mpicc.mpich -o ruled_out_mpich ruled_out.c
[ ! -x "$V/ompi5/venv/bin/mpicc" ] || {
    "$V/ompi5/venv/bin/mpicc" -O2 -rdynamic -o main_pmix_ompi5 main.c kvs_pmix.c -ldl
    "$V/ompi5/venv/bin/mpicc" -o ompi5_init_first ompi5_init_first.c -ldl; }
[ ! -x "$V/mpich5/venv/bin/mpicc" ] || "$V/mpich5/venv/bin/mpicc" -O2 -o main_pmi1_mpich5 main.c kvs_pmi1.c
[ ! -x "$V/impi/venv/bin/mpicc" ] || I_MPI_ROOT=$V/impi/venv "$V/impi/venv/bin/mpicc" -O2 -o main_pmi1_impi main.c kvs_pmi1.c
