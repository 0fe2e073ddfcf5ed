#!/bin/sh
# Host-buffer MPI_Allreduce through collar with the cuda backend active,
# against PMPI_Allreduce on the same buffers (bench_hostpath): 1 rank on
# MPI_COMM_SELF, then 2 ranks on MPI_COMM_WORLD; stack, [heap], static and
# 1 MiB malloc() buffers; 8 B, 64 B, 1 KiB.  Without a GPU the library is the
# tests' libcollar_fakecuda.so (collar's objects, the cuda backend on a fake
# driver whose pointer queries cost nothing: what collar adds around them);
# on a GPU node, LIBCOLLAR=.../libcollar.so measures the real driver.
# CALLGRIND=1: instead of times, instructions per call (valgrind
# --tool=callgrind, 1 rank, 8 bytes on MPI_COMM_SELF, per buffer): stable
# where times are not (a shared machine); COUNT= calls (20000).
# Usage (from the build tree): make -C tests bench-hostpath [PAIRS=N ITERS=N CALLGRIND=1]
#   or: MPIRUN=mpirun LIBCOLLAR=tests/fake/.libs/libcollar_fakecuda.so run-hostpath.sh PROGRAM
set -eu
prog=$1
opts=""
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI\|OpenRTE"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    opts="--oversubscribe"
fi
if [ "${CALLGRIND:-0}" = 1 ]; then
    command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null \
        || { echo "CALLGRIND=1 needs valgrind and callgrind_annotate"; exit 1; }
    count=${COUNT:-20000}
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    echo "instructions per 8-byte MPI_Allreduce on MPI_COMM_SELF, $count calls (valgrind --tool=callgrind)"
    printf '%-8s %10s %10s %10s %8s\n' buffer collar pmpi added queries
    for buf in stack heap static mmap; do
        # shellcheck disable=SC2086
        q=$("$MPIRUN" $opts -np 1 env LD_PRELOAD="$LIBCOLLAR" valgrind -q --tool=callgrind \
            --callgrind-out-file="$dir/cg.$buf" "$prog" --count "$count" --buf $buf \
            | sed -n 's/.*: \([0-9.]*\) driver queries.*/\1/p')
        callgrind_annotate --inclusive=yes "$dir/cg.$buf" 2>/dev/null \
            | awk -v n="$count" -v buf="$buf" -v q="${q:--}" '
                /:hostpath_collar / { gsub(",", "", $1); c = $1 / n }
                /:hostpath_pmpi / { gsub(",", "", $1); p = $1 / n }
                END { printf "%-8s %10.0f %10.0f %10.0f %8s\n", buf, c, p, c - p, q }'
    done
    echo "(under valgrind the stack and the heap are not /proc/self/maps' [stack]"
    echo " and [heap] and take the path of anonymous mappings, as mmap does;"
    echo " static, a file mapping, takes the path of cached host ranges;"
    echo " queries: the fake driver's pointer queries per MPI_Allreduce)"
    exit 0
fi
# 2 ranks: short batches (a 2000-call batch of 1 us calls spans a
# scheduler time slice, and a shared machine preempts one rank in many),
# many of them.
"$MPIRUN" $opts -np 1 env LD_PRELOAD="$LIBCOLLAR" "$prog" --comm self \
    --pairs "${PAIRS:-51}" --iters "${ITERS:-2000}"
"$MPIRUN" $opts -np 2 env LD_PRELOAD="$LIBCOLLAR" "$prog" --comm world \
    --pairs "${PAIRS:-301}" --iters "${ITERS:-200}"
