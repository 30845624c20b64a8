# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# watchdog.sh - the time limits of a qemu guest, sourced by run-guest.sh and
# test/systemd/run-systemd-guest.sh: a guest that makes progress is left alone however slow the
# machine is; one that makes none for a stated time is stopped, and says where it stood.
#
# Progress is any of the watched files growing (the console, the command's output, the guest's
# timing stamps: the results share is mounted uncached, so the host sees each write at once) or
# qemu using at least a fifth of a CPU. A guest whose tasks all sleep costs qemu 2-3% of a CPU
# under TCG; one that computes, boots, compiles or shuts down costs 40-100%.
#
# Every limit is multiplied by the time factor (tools/time-factor.sh): BUS1_TIME_FACTOR, the
# slowness of this machine measured at the start of the run, or the slowness measured again as
# the guest boots if that is greater (the run's other lanes, or other load, came since).

# vm_time_factor: the factor, checked: the greater of BUS1_TIME_FACTOR (default 1) and a new
# measurement (time-factor.sh --quick: about a quarter of a second of every CPU;
# BUS1_VM_REMEASURE=0 skips it).
vm_time_factor() {
	local f=${BUS1_TIME_FACTOR:-1} now tf
	tf=$(dirname "${BASH_SOURCE[0]}")/../../tools/time-factor.sh
	case $f in *[!0-9]* | '' | 0*) f=1 ;; esac
	if [ "${BUS1_VM_REMEASURE:-1}" != 0 ] && [ -x "$tf" ]; then
		now=$(BUS1_TIME_FACTOR='' "$tf" --quick 2>/dev/null) || now=1
		case $now in *[!0-9]* | '' | 0*) now=1 ;; esac
		if ((now > f)); then
			echo "watchdog: the machine is slower now than at the start of the run: time factor $now, not $f" >&2
			f=$now
		fi
	fi
	echo "$f"
}

# vm_cpu_ticks PID: user + system clock ticks of PID so far (0 once it is gone).
vm_cpu_ticks() {
	local st
	{ read -r -a st <"/proc/$1/stat"; } 2>/dev/null || { echo 0; return; }
	# Fields 14 and 15 (utime, stime); the command name, field 2, has no blank for qemu.
	echo $((st[13] + st[14]))
}

# vm_watch PID STALL LIMIT STOPFILE GRACE FILE...
# Watch the guest's qemu PID until it exits. When it made no progress for STALL seconds, or
# LIMIT seconds passed in all (0 = no limit), create STOPFILE (the guest then stops its command,
# reports and powers off) and kill qemu if it still runs GRACE seconds later. Sets
# vm_watch_verdict: "" (qemu exited by itself), "stalled" or "limit"; vm_watch_quiet: the
# longest time without progress seen, in seconds.
vm_watch() {
	local pid=$1 stall=$2 limit=$3 stopfile=$4 grace=$5
	shift 5
	local hz start now last_progress sig prev_sig ticks prev_ticks kill_at=
	hz=$(getconf CLK_TCK)
	start=$SECONDS
	last_progress=$SECONDS
	prev_sig=
	prev_ticks=$(vm_cpu_ticks "$pid")
	vm_watch_verdict=
	vm_watch_quiet=0
	while kill -0 "$pid" 2>/dev/null; do
		sleep 2
		now=$SECONDS
		sig=$(stat -c %s "$@" 2>/dev/null | tr "\n" " " || true)
		ticks=$(vm_cpu_ticks "$pid")
		# At least a fifth of a CPU over the 2 s just passed.
		if [ "$sig" != "$prev_sig" ] || ((ticks - prev_ticks >= 2 * hz / 5)); then
			last_progress=$now
		fi
		prev_sig=$sig
		prev_ticks=$ticks
		((now - last_progress > vm_watch_quiet)) && vm_watch_quiet=$((now - last_progress))
		if [ -n "$kill_at" ]; then
			((now >= kill_at)) && kill -KILL "$pid" 2>/dev/null
			continue
		fi
		if ((now - last_progress >= stall)); then
			vm_watch_verdict=stalled
		elif ((limit > 0 && now - start >= limit)); then
			vm_watch_verdict=limit
		else
			continue
		fi
		touch "$stopfile"
		kill_at=$((now + grace))
	done
}

# vm_watch_say WHAT STALL LIMIT FILE: explain the verdict of vm_watch on stderr, with the last
# lines of FILE (the command's output or the console).
vm_watch_say() {
	local what=$1 stall=$2 limit=$3 file=$4
	case $vm_watch_verdict in
	stalled) echo "$what: no progress for ${stall}s (no output, no console line, qemu idle):" \
		"stopped; its last output:" >&2 ;;
	limit) echo "$what: still busy after ${limit}s, the most it may take on this machine:" \
		"stopped; its last output:" >&2 ;;
	*) return 0 ;;
	esac
	if [ -s "$file" ]; then
		tail -n 20 "$file" | sed 's/^/    /' >&2
	else
		echo "    (none)" >&2
	fi
}
