#!/bin/sh
# on-rank.sh RANK VAR=VALUE [VAR=VALUE ...] -- PROGRAM [ARGS]
# Run PROGRAM with the variables set on rank RANK of MPI_COMM_WORLD only
# (the rank as the launcher gives it: Open MPI's OMPI_COMM_WORLD_RANK,
# MPICH's PMI_RANK), so that one rank has an environment of its own, as with
# "mpirun -np 1 env VAR=VALUE PROGRAM : -np 1 PROGRAM".
rank=$1
shift
me=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    [ "$me" = "$rank" ] && export "$1"
    shift
done
[ $# -gt 0 ] && shift
exec "$@"
