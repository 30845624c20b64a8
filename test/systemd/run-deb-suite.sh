#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-deb-suite.sh - the Debian packages on a real Debian 12 booted with systemd
# (scenario-deb.sh): five boots of one disk (run-systemd-guest.sh --disk), each one going on
# from what the previous one left:
#   install  dbus-daemon (the reference checks), `apt-get install` of Debian's dbus-broker (the
#            system's bus from then on), then of the packages (DKMS builds bus1.ko in the
#            guest, against the host's headers of KVER), `systemctl enable --force` and
#            `systemctl --global enable --force bus1-broker.service`
#   bus1     bus1-broker as the system and the user's bus, bus1.ko loaded, the same checks; an
#            upgrade to a higher version under live clients; `systemctl disable` (both) while
#            the buses run: systemd stays on them
#   off      dbus-broker again after the reboot (system and session); enabled again
#   again    bus1-broker; `apt-get remove` while the buses run: systemd stays on them
#   back     dbus-broker again after the reboot (system, session and accessibility buses);
#            `apt-get purge` leaves nothing behind
# Only the first boot builds bus1.ko.
# Fails if any boot fails; prints the boot times of the reference and of bus1-broker.
#
# Usage: run-deb-suite.sh KVER [DEBDIR]
#   KVER    kernel version to boot (/boot/vmlinuz-KVER, /lib/modules/KVER, and its headers in
#           /usr/src, which DKMS builds against)
#   DEBDIR  the packages of tools/build-deb.sh (default: built now with --no-lintian)
# Environment: BUS1_SYSTEMD_RESULTS=DIR keeps each boot's output, journal and console in
# DIR/NAME (default: a temporary directory, removed at the end).

set -euo pipefail

me=run-deb-suite
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: $me KVER [DEBDIR]" >&2; exit 2; }
kver=$1
debdir=${2:-}

work=$(mktemp -d)
keep_results=${BUS1_SYSTEMD_RESULTS:-}
resdir=${keep_results:-$work/results}
mkdir -p "$resdir"
trap 'rm -rf "$work"' EXIT

for t in mkfs.ext4 dpkg-deb; do
	command -v $t >/dev/null || { echo "$me: SKIP: $t not installed" >&2; exit 77; }
done
if [ -z "$debdir" ]; then
	debdir=$work/built
	"$top/tools/build-deb.sh" --no-lintian "$debdir" >"$work/build-deb.log" 2>&1 ||
		{ tail -n 30 "$work/build-deb.log" >&2; echo "$me: tools/build-deb.sh failed" >&2; exit 1; }
fi

# The guest's files: the packages (no debug symbols), and the upgrade: bus1-broker again with a
# higher version (unpacked and packed anew, as a rebuild would give).
files=$work/files
mkdir -p "$files/debs" "$files/debs-v2"
for p in bus1-broker bus1-dkms libbus1-0 libbus1-client0 libbus1-dev; do
	f=$(find "$debdir" -maxdepth 1 -name "${p}_*.deb" | sort | tail -n 1)
	[ -n "$f" ] || { echo "$me: no ${p}_*.deb in $debdir" >&2; exit 1; }
	cp "$f" "$files/debs/"
done
v1=$(dpkg-deb -f "$files/debs/"bus1-broker_*.deb Version)
dpkg-deb -R "$files/debs/"bus1-broker_*.deb "$work/v2"
sed -i "s/^Version: .*/Version: $v1+bus1test1/" "$work/v2/DEBIAN/control"
dpkg-deb -b -Zxz "$work/v2" "$files/debs-v2/bus1-broker_${v1}+bus1test1_amd64.deb" >/dev/null

# Debian's dbus-broker, the version the host has (tools/deps.sh installs it): the guest has no
# network.
mkdir -p "$files/other"
v=$(dpkg-query -W -f='${Version}' dbus-broker 2>/dev/null) ||
	{ echo "$me: dbus-broker is not installed on the host (tools/deps.sh test)" >&2; exit 1; }
(cd "$files/other" && apt-get download -q "dbus-broker=$v" >/dev/null 2>&1) ||
	cp "/var/cache/apt/archives/dbus-broker_${v/:/%3a}_amd64.deb" "$files/other/" 2>/dev/null ||
	{ echo "$me: cannot get dbus-broker $v (apt-get download failed, not in apt's cache)" >&2; exit 1; }

# One disk for the five boots: the overlay's upper layer.
truncate -s 4G "$work/disk.img"
mkfs.ext4 -q -F "$work/disk.img"

root=$("$here/build-root.sh")
declare -A status secs
suite_start=$(date +%s)
fail=0
for phase in install bus1 off again back; do
	echo "==== $me: $phase ($kver) ===="
	t0=$(date +%s)
	rc=0
	"$here/run-systemd-guest.sh" --bus dbus-daemon --kver "$kver" --root "$root" \
		--disk "$work/disk.img" --headers --files "$files" --phase "$phase" --kernel-check \
		--scenario "$here/scenario-deb.sh" --timeout 900 --outdir "$resdir/$phase" || rc=$?
	status[$phase]=$rc
	secs[$phase]=$(($(date +%s) - t0))
	if [ $rc != 0 ]; then
		fail=1
		# the next boots build on this one
		break
	fi
done

time_of() {
	awk -v n="$2" '$1 == "#" && $2 == "time" && $3 == n { print $4; exit }' \
		"$resdir/$1/output" 2>/dev/null || true
}
count() { grep -c "$1" "$resdir/$2/output" 2>/dev/null || true; }
echo
echo "==== $me: summary ($kver) ===="
for phase in install bus1 off again back; do
	if [ -z "${status[$phase]+x}" ]; then
		result="not run"
	elif [ "${status[$phase]}" = 0 ]; then
		result=ok
	else
		result=FAIL
	fi
	n_ok=$(count '^ok ' "$phase")
	n_fail=$(count '^FAIL ' "$phase")
	printf '%-8s %-8s %5ss  %s ok, %s failed\n' "$phase" "$result" "${secs[$phase]:--}" \
		"${n_ok:-0}" "${n_fail:-0}"
done
echo "boot to default target (systemd-analyze, guest): dbus-daemon $(time_of install boot-reference)s, bus1-broker $(time_of bus1 boot-bus1)s, dbus-broker $(time_of off boot-off)s"
echo "total wall time: $(($(date +%s) - suite_start))s"
[ -z "$keep_results" ] || echo "results (output, journal, console) in $resdir"
exit $fail
