#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# guest-batch.sh - run several kmod test programs in one guest boot (run-guest.sh --module KO),
# each against a freshly loaded module: after each program, whatever it left running is killed
# and the module is unloaded (a failed rmmod is a leaked reference: the batch stops there) and
# loaded again for the next. run-guest.sh's checks then cover the whole batch: the kernel log,
# the taint flags and kmemleak (its scans run once, after the last program), and the last rmmod.
#
# The kmod suite runs this way on every kernel (test/vm/meson.build): a boot costs about 6 s of
# CPU under TCG on Debian's kernels, and about 50 s on the debug kernel with its kmemleak scans,
# where the programs themselves often take less.
#
# Usage (in the guest, as run-guest.sh's command): guest-batch.sh KO PROGRAM[:CASE]...
# Status: 0 if every program passed (or skipped), else 1.

set -u
ko=$1
shift
name=$(basename "$ko" .ko)
fails=0
n=0
for entry in "$@"; do
	prog=${entry%%:*}
	args=()
	[ "$entry" = "$prog" ] || args=("${entry#*:}")
	n=$((n + 1))
	echo "==== guest-batch: $n/$# $(basename "$prog") ${args[*]}"
	rc=0
	"$prog" "${args[@]}" || rc=$?
	case $rc in
	0) echo "==== guest-batch: ok $(basename "$prog") ${args[*]}" ;;
	77) echo "==== guest-batch: skipped $(basename "$prog") ${args[*]}" ;;
	*) echo "==== guest-batch: FAIL $(basename "$prog") ${args[*]} (status $rc)"
		fails=$((fails + 1)) ;;
	esac
	[ $n -lt $# ] || break
	# Everything but PID 1 (run-guest's stage 2) and this script. A process still dying may
	# hold the module for a moment: rmmod gets 10 s (times the machine's slowness,
	# BUS1_TIME_FACTOR) before a reference counts as leaked.
	kill -KILL -1 2>/dev/null
	tries=$((100 * ${BUS1_TIME_FACTOR:-1}))
	for ((i = 0; i < tries; i++)); do
		rmmod "$name" 2>/dev/null && break
		sleep 0.1
	done
	if ((i == tries)) && ! rmmod "$name"; then
		echo "==== guest-batch: FAIL rmmod $name after $(basename "$prog") (a leaked reference)"
		exit 1
	fi
	if ! insmod "$ko"; then
		echo "==== guest-batch: FAIL insmod $ko"
		exit 1
	fi
done
echo "==== guest-batch: $((n - fails))/$n programs passed"
[ $fails = 0 ]
