#!/bin/sh
# Regenerate the build system (configure, Makefile.in) from configure.ac and
# the Makefile.am files.  Needs autoconf, automake and libtool.
set -e
cd "$(dirname "$0")"
mkdir -p config/aux config/m4
autoreconf --install --force --warnings=all,no-obsolete
