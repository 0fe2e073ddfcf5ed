#!/bin/sh
# on-rank.sh RANK VAR=VALUE [VAR=VALUE ...] -- PROGRAM [ARGS]
# Run PROGRAM with the variables set on rank RANK of MPI_COMM_WORLD only
# (the rank as the launcher gives it: Open MPI's OMPI_COMM_WORLD_RANK,
# MPICH's PMI_RANK), so that one rank has an environment of its own, as with
# "mpirun -np 1 env VAR=VALUE PROGRAM : -np 1 PROGRAM".  RANK ^N: every rank
# but N.  A variable may be LD_PRELOAD itself (partial.test: collar on some
# ranks only); an empty argument is skipped.
rank=$1
shift
me=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}
case $rank in
    ^*) [ "$me" != "${rank#^}" ] && mine=1 || mine=0 ;;
    *) [ "$me" = "$rank" ] && mine=1 || mine=0 ;;
esac
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    [ "$mine" = 1 ] && [ -n "$1" ] && export "$1"
    shift
done
[ $# -gt 0 ] && shift
exec "$@"
