#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-suite.sh - the systemd guest suite: four boots of a real Debian 12 with systemd as PID 1
# (run-systemd-guest.sh), one after the other. scenario-restart.sh in three of them:
#   bus1+ko      bus1-broker as the system bus, bus1.ko loaded (native transport open)
#   bus1         bus1-broker as the system bus, no bus1.ko
#   dbus-daemon  Debian's own dbus.service (the reference: restarts drop every client)
# and scenario-switch.sh in the fourth:
#   switch       booted on dbus-daemon with bus1-broker installed (and bus1.ko loaded, if
#                MODULE): `systemctl enable --now`, a restart, `systemctl disable --now`
# Fails if any boot fails; prints a summary with the restart-to-answer times.
#
# Usage: run-suite.sh BUILD KVER [MODULE]
#   BUILD   meson build directory (bus1-broker and its units are installed from it)
#   KVER    kernel version to boot (/boot/vmlinuz-KVER, /lib/modules/KVER)
#   MODULE  bus1.ko built for KVER (default BUILD/kmod/bus1.ko; "" = skip the bus1+ko boot)
# Environment: BUS1_SYSTEMD_RESULTS=DIR keeps each boot's output, journal and console in
# DIR/NAME (default: a temporary directory, removed at the end).

set -euo pipefail

me=run-suite
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -ge 2 ] || { echo "usage: $me BUILD KVER [MODULE]" >&2; exit 2; }
build=$1
kver=$2
module=${3-$build/kmod/bus1.ko}

keep_results=${BUS1_SYSTEMD_RESULTS:-}
if [ -n "$keep_results" ]; then
	resdir=$keep_results
	mkdir -p "$resdir"
else
	resdir=$(mktemp -d)
	trap 'rm -rf "$resdir"' EXIT
fi

# The root first, so that its one-time build (about a minute) is not counted in a boot.
root=$("$here/build-root.sh")

boots=()
[ -z "$module" ] || boots+=("bus1+ko")
boots+=(bus1 dbus-daemon switch)
declare -A status secs
suite_start=$(date +%s)
for b in "${boots[@]}"; do
	args=(--build "$build" --kver "$kver" --root "$root" --outdir "$resdir/$b")
	case $b in
	bus1+ko) args+=(--bus bus1 --module "$module") ;;
	bus1) args+=(--bus bus1) ;;
	dbus-daemon) args+=(--bus dbus-daemon) ;;
	switch) args+=(--bus dbus-daemon --stage-bus1 --scenario "$here/scenario-switch.sh")
		[ -z "$module" ] || args+=(--module "$module") ;;
	esac
	echo "==== $me: $b ($kver) ===="
	t0=$(date +%s)
	rc=0
	"$here/run-systemd-guest.sh" "${args[@]}" || rc=$?
	status[$b]=$rc
	secs[$b]=$(($(date +%s) - t0))
done

# "#    time NAME SECONDS (...)" lines of the scenario output.
time_of() {
	awk -v n="$2" '$1 == "#" && $2 == "time" && $3 == n { print $4; exit }' \
		"$resdir/$1/output" 2>/dev/null || true
}
echo
echo "==== $me: summary ($kver; restart-, SIGUSR2- and kill-to-answer in seconds, guest clock) ===="
printf '%-12s %-7s %6s %6s %6s %6s %7s %6s %6s %6s %7s %6s %6s\n' boot result restart1 restart2 \
	restart3 sigusr2 replace kill segv oom checks poweroff wall
fail=0
for b in "${boots[@]}"; do
	rc=${status[$b]}
	case $rc in
	0) result=ok ;;
	124) result=TIMEOUT; fail=1 ;;
	*) result=FAIL; fail=1 ;;
	esac
	nok=$(grep -c '^ok ' "$resdir/$b/output" 2>/dev/null || true)
	nfail=$(grep -c '^FAIL ' "$resdir/$b/output" 2>/dev/null || true)
	poweroff=$(sed -n 's/^poweroff_s=//p' "$resdir/$b/timing" 2>/dev/null || true)
	printf '%-12s %-7s %6s %6s %6s %6s %7s %6s %6s %6s %7s %6s %6s\n' "$b" "$result" \
		"$(time_of "$b" restart-1)" "$(time_of "$b" restart-2)" "$(time_of "$b" restart-3)" \
		"$(time_of "$b" sigusr2)" "$(time_of "$b" replace)" "$(time_of "$b" crash-kill)" \
		"$(time_of "$b" crash-segv)" "$(time_of "$b" crash-oom)" "${nok:-0}/$((${nok:-0} + ${nfail:-0}))" \
		"${poweroff:--}" "${secs[$b]}s"
done
echo "total wall time: $(($(date +%s) - suite_start))s"
[ -z "$keep_results" ] || echo "results (output, journal, console) in $resdir"
exit $fail
