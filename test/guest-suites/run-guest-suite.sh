#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-guest-suite.sh - run the integration or the reference suite in a qemu guest with bus1.ko
# loaded (guest-suite.sh, through test/vm/run-guest.sh), and compare every case with the same
# suite run on the host without bus1.ko; optionally also in the guest without bus1.ko (the
# control run: separates the guest's slowness from bus1).
#
#   run-guest-suite.sh [OPTIONS] SUITE BUILD_DIR -- RUN_GUEST_ARGS...
#
#   SUITE            integration or reference
#   --outdir DIR     where logs and results go (default BUILD_DIR/test/guest-suites/SUITE)
#   --no-host        do not run the suite on the host (compare with DIR/host if it is there)
#   --control        also run it in the guest without bus1.ko
#   --smp N          guest CPUs (default 2)
#   --timeout SEC    limit of one guest command (default 1200 integration, 3600 reference)
#   --               the rest goes to run-guest.sh (--kver, --cache, --module KO)
#
# DIR gets host/, guest/ (and guest-nomod/), each with the suite's per-case results
# (testlog.json or reference/cases.txt) and, from the guest, every broker's log (broker-logs/),
# and compare.txt. Exit status: 0 if the guest with bus1.ko passed and no case differs from the
# host, else 1.

set -u
me=run-guest-suite
srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
topsrc=$(cd "$srcdir/../.." && pwd)

outdir= host=1 control=0 smp=2 timeout_s=
while [ $# -gt 0 ]; do
	case "$1" in
	--outdir) outdir=$2; shift 2 ;;
	--no-host) host=0; shift ;;
	--control) control=1; shift ;;
	--smp) smp=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	-*) echo "$me: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
if [ $# -lt 2 ]; then
	echo "usage: $me [OPTIONS] integration|reference BUILD_DIR -- RUN_GUEST_ARGS" >&2
	exit 2
fi
suite=$1
build=$(realpath "$2")
shift 2
[ "${1:-}" = -- ] && shift
vmargs=("$@")
case "$suite" in
integration) : "${timeout_s:=1200}" ;;
reference) : "${timeout_s:=3600}" ;;
*) echo "$me: unknown suite $suite" >&2; exit 2 ;;
esac
[ -n "$outdir" ] || outdir=$build/test/guest-suites/$suite
mkdir -p "$outdir"
outdir=$(realpath "$outdir")
# Reference cases run the bus as messagebus/nobody: results must be reachable by them.
chmod 0755 "$outdir"

# The module argument (the last --module of vmargs) is replaced by "" for the control run.
nomod=()
skipnext=0
for a in "${vmargs[@]}"; do
	if [ $skipnext = 1 ]; then skipnext=0; nomod+=(""); continue; fi
	[ "$a" = --module ] && skipnext=1
	nomod+=("$a")
done

now() { date +%s; }

guest() {
	local dir=$1 t0 rc
	shift
	rm -rf "${outdir:?}/$dir"
	mkdir -p "$outdir/$dir"
	t0=$(now)
	echo "$me: $suite in the guest ($dir) ..."
	# The machine is shared, and TCG eats a whole core per guest CPU: be nice.
	nice -n 10 "$topsrc/test/vm/run-guest.sh" --smp "$smp" --timeout "$timeout_s" \
		--outdir "$outdir/$dir" --verbose "$@" >"$outdir/$dir/output.txt" 2>&1
	rc=$?
	echo "$me: $dir: status $rc, $(($(now) - t0)) s wall (output: $outdir/$dir/output.txt)"
	grep -E '^guest-suite: ' "$outdir/$dir/output.txt" | sed 's/^/    /'
	return $rc
}

grc=0
case "$suite" in
integration)
	# As the host runs it in CI: two tests at a time.
	guest guest "${vmargs[@]}" -- "$srcdir/guest-suite.sh" integration "$build" \
		--num-processes 2 || grc=$?
	[ $control = 0 ] || guest guest-nomod "${nomod[@]}" -- "$srcdir/guest-suite.sh" \
		--without-bus1 integration "$build" --num-processes 2
	if [ $host = 1 ]; then
		mkdir -p "$outdir/host"
		t0=$(now)
		nice -n 10 meson test -C "$build" --no-rebuild --suite integration --num-processes 2 \
			--logbase guest-suites-host >"$outdir/host/output.txt" 2>&1
		echo "$me: host: status $?, $(($(now) - t0)) s wall"
		cp "$build/meson-logs/guest-suites-host.json" "$outdir/host/testlog.json"
	fi
	files=("$outdir/host/testlog.json" "$outdir/guest/testlog.json")
	[ $control = 0 ] || files+=("$outdir/guest-nomod/testlog.json")
	;;
reference)
	guest guest "${vmargs[@]}" -- "$srcdir/guest-suite.sh" reference "$build" \
		--report-only || grc=$?
	[ $control = 0 ] || guest guest-nomod "${nomod[@]}" -- "$srcdir/guest-suite.sh" \
		--without-bus1 reference "$build" --report-only
	if [ $host = 1 ]; then
		rm -rf "$outdir/host"
		mkdir -p "$outdir/host"
		chmod 0755 "$outdir/host"
		t0=$(now)
		nice -n 10 /usr/bin/python3 "$topsrc/test/reference/run" --report-only \
			--daemon "$build/broker/bus1-broker" --results-dir "$outdir/host/reference" \
			>"$outdir/host/output.txt" 2>&1
		echo "$me: host: status $?, $(($(now) - t0)) s wall"
	fi
	files=("$outdir/host/reference/cases.txt" "$outdir/guest/reference/cases.txt")
	[ $control = 0 ] || files+=("$outdir/guest-nomod/reference/cases.txt")
	;;
esac

"$srcdir/compare" "$suite" "${files[@]}" | tee "$outdir/compare.txt"
crc=${PIPESTATUS[0]}
echo "$me: results in $outdir"
if [ $grc != 0 ] || [ $crc != 0 ]; then
	echo "$me: FAILED: guest with bus1.ko: status $grc; differences from the host:" \
		"$([ "$crc" = 0 ] && echo none || echo "see $outdir/compare.txt")"
	exit 1
fi
exit 0
