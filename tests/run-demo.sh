#!/bin/sh
# The demo: one allreduce of 4 MiB under collar on the sim device, 2 ranks.
# collar says what it chose (COLLAR_LOG=info); the program checks the result.
# Usage: MPIRUN=... LIBCOLLAR=.../libcollar.so run-demo.sh PROGRAM
set -e
prog=$1
launcher_opts=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    launcher_opts="--oversubscribe"
fi
exec "$MPIRUN" $launcher_opts -np 2 env LD_PRELOAD="$LIBCOLLAR" \
    COLLAR_DEVICE=sim COLLAR_LOG=info COLLAR_LOG_SUBSYS=init,coll "$prog"
