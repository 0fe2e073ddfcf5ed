#!/bin/sh
# Set up collar on a fresh Debian (12) machine, in one command:
#   1. install the packages that are missing (apt-get; sudo when not root;
#      libdw-dev names call sites in statistics, COLLAR_STATS=callsites;
#      mpi4py and numpy are for the tests, tests/mpi/mpi4py.test),
#   2. build collar in ./build (autogen, configure, make),
#   3. run the demo: an allreduce under collar on the sim device, 2 ranks,
#      saying which algorithm collar chose and checking the result.
# CONFIGURE_FLAGS passes options to configure (e.g. --without-cuda).
set -eu
cd "$(dirname "$0")"

packages="build-essential autoconf automake libtool pkg-config openmpi-bin
libopenmpi-dev libunwind-dev libdw-dev python3-mpi4py python3-numpy"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
if [ -n "$missing" ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "bootstrap: installing$missing"
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi

./autogen.sh
mkdir -p build
cd build
# shellcheck disable=SC2086
../configure ${CONFIGURE_FLAGS:-}
make -j"$(nproc)"
make demo
