#!/bin/sh
# The demo: one allreduce of 4 MiB under collar on the sim device, 2 ranks.
# collar says what it chose (COLLAR_LOG=info); the program checks the result.
# First it prints the command it runs, as one line that can be pasted into a
# shell (absolute paths, the launcher's options and variables included).
# Usage: MPIRUN=... LIBCOLLAR=.../libcollar.so run-demo.sh PROGRAM
set -e
prog=$1
launcher_opts=""
root_env=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    launcher_opts="--oversubscribe"
    if [ "$(id -u)" = 0 ]; then
        # Open MPI refuses to run as root without these.
        root_env="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
    fi
fi
mpirun_path=$(command -v "$MPIRUN" || echo "$MPIRUN")
set -- $launcher_opts -np 2 env LD_PRELOAD="$LIBCOLLAR" \
    COLLAR_DEVICE=sim COLLAR_LOG=info COLLAR_LOG_SUBSYS=init,coll "$prog"
echo "demo: ${root_env}$mpirun_path $*"
[ -n "$root_env" ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec "$mpirun_path" "$@"
