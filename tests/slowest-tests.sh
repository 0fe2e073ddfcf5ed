#!/bin/sh
# The N (default 12) slowest tests of the last `make check` in build
# directory DIR, from the "test time: S s" line tests/run-test.sh ends
# every log with; CI prints it after each suite to keep an eye on its time.
# Usage: tests/slowest-tests.sh DIR [N]
dir=${1:?usage: slowest-tests.sh BUILD_DIR [N]}
n=${2:-12}
find "$dir/tests" -name '*.log' ! -name test-suite.log -print 2>/dev/null |
while read -r log; do
    t=$(sed -n 's/^test time: \([0-9]*\) s$/\1/p' "$log" | tail -1)
    [ -n "$t" ] && echo "$t ${log#"$dir"/tests/}"
done | sort -rn | awk -v n="$n" '
    { total += $1; if (NR <= n) line[NR] = sprintf("%6d s  %s", $1, $2) }
    END { printf "slowest tests (of %d, %d s in all):\n", NR, total
          for (i = 1; i <= n && i <= NR; i++) print line[i] }'
