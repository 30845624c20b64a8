#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# time-factor.sh - how much slower this machine runs a fixed piece of work, right now, than the
# 2-core machine of this project's CI kind did when idle: the factor by which the test run
# stretches the time limits it must have (tools/run-tests.sh exports it as BUS1_TIME_FACTOR).
#
# The work: one arithmetic loop in awk on each CPU at once (about 0.9 s of CPU time each on the
# reference machine, idle). The factor is the slowest copy's wall time over that reference,
# rounded up, at least 1: a slower CPU and CPUs shared with other load both raise it.
# Prints the integer factor on stdout and the measurement on stderr.
#
# Usage: time-factor.sh [--quick]   (BUS1_TIME_FACTOR set already: printed as it is)
#   --quick   a quarter of the loop (about 0.25 s of each CPU): what a guest measures as it boots
#             (test/vm/watchdog.sh), rougher but cheap enough to repeat

set -euo pipefail

if [ -n "${BUS1_TIME_FACTOR:-}" ]; then
	case $BUS1_TIME_FACTOR in
	*[!0-9]* | 0*) echo "time-factor: BUS1_TIME_FACTOR must be a positive integer" >&2; exit 2 ;;
	esac
	echo "$BUS1_TIME_FACTOR"
	exit 0
fi

# Wall seconds of the loop, measured on the reference machine with nothing else running.
reference=0.93
iterations=5e6
if [ "${1:-}" = --quick ]; then
	reference=0.23
	iterations=1.25e6
fi
loop() {
	local t0=$EPOCHREALTIME
	awk -v n="$iterations" 'BEGIN { for (i = 0; i < n; i++) s += i * i % 7 }'
	awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f\n", b - a }'
}

n=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((i = 0; i < n; i++)); do
	loop >"$tmp/$i" &
done
wait
slowest=$(sort -n "$tmp"/* | tail -n 1)
factor=$(awk -v s="$slowest" -v r="$reference" \
	'BEGIN { f = s / r; i = int(f); if (i < f - 0.15) i++; if (i < 1) i = 1; print i }')
echo "time-factor: the loop took ${slowest}s on the slowest of $n CPUs (reference ${reference}s):" \
	"factor $factor" >&2
echo "$factor"
