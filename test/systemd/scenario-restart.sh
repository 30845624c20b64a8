#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# scenario-restart.sh - runs in the systemd guest of run-systemd-guest.sh (as bus1test.service,
# root): restart and re-execute the system bus under systemd while clients hold names and calls
# are in flight, and check after each step that the system works on.
#
# Environment (from the job): JOB_BUS=bus1|dbus-daemon, JOB_MODULE=1 when bus1.ko is loaded.
#
# Steps: wait for the boot (`systemctl is-system-running --wait`); start two clients
# (bus1test-client.py): A owns org.bus1test.Holder and serves Slow (replies after 4 s) and Ping,
# B calls A's Slow. Then three phases, each with one Slow call of B in flight:
#   restart   `systemctl restart dbus.service` three times in a row, each timed from the command
#             to the first answered GetId (the restart-to-answer time);
#   sigusr2   `systemctl kill --kill-whom=main -s SIGUSR2 dbus.service` (bus1 only: dbus-daemon
#             does not re-execute);
#   replace   the bus binary replaced the way dpkg does (a copy renamed over it), then a restart;
#   crash     the bus killed: `systemctl kill --kill-whom=main -s KILL`, then -s SEGV, then by the
#             kernel's OOM killer (SysRq f with the bus' oom_score_adj at 1000), each timed from
#             the kill to the first answered GetId (the kill-to-answer time); all three with
#             bus1.ko, KILL alone without it, KILL and the OOM kill for dbus-daemon. bus1:
#             systemd restarts it and it resumes from its crash journal (bus1-broker(1), CRASH
#             RECOVERY). dbus-daemon: every client is dropped; dbus.socket starts a new bus.
# After each phase: new clients connect and call (several in a row; with bus1.ko, a native one
# too, and a native monitor started at the beginning is still connected and sees the Pings),
# logind (same unique name
# and pid as at boot), hostnamed and polkit answer, B got its reply, A still owns its name under
# the same unique name and answers Ping, no unit failed, the system is "running". With
# dbus-daemon a restart or a crash drops every client (the reference behaviour): A and B must see their
# connection close, and are started anew for the next phase; logind's new name is recorded.
#
# Output: one "ok NAME" or "FAIL NAME: why" line per check, "#" lines with what was measured
# (run-suite.sh reads "# time NAME SECONDS"). Exit status 1 if any check failed. The checks are
# in scenario-lib.sh.

# shellcheck source=test/systemd/scenario-lib.sh
. "$(dirname "$0")/scenario-lib.sh"

phase_restart() {
	local pid0
	pid0=$(bus_pid)
	send_slow restart
	restart_and_time restart-1
	restart_and_time restart-2
	restart_and_time restart-3
	note "restart: bus pid $pid0 -> $(bus_pid)"
	after_phase restart
}

phase_sigusr2() {
	local pid0 pid1 t0
	if [ "$bus" != bus1 ]; then
		note "sigusr2: skipped (dbus-daemon does not re-execute on SIGUSR2)"
		return
	fi
	pid0=$(bus_pid)
	send_slow sigusr2
	t0=$(now)
	systemctl kill --kill-whom=main -s SIGUSR2 dbus.service
	if wait_for 20 answers; then
		note "time sigusr2 $(since "$t0") (SIGUSR2-to-answer)"
		ok "sigusr2: the bus answers after the re-execution"
	else
		fail "sigusr2: the bus does not answer 20 s after SIGUSR2"
		bus_diag
	fi
	pid1=$(bus_pid)
	if [ "$pid1" = "$pid0" ]; then
		ok "sigusr2: the bus kept its pid $pid0"
	else
		fail "sigusr2: the bus pid changed from $pid0 to $pid1"
	fi
	after_phase sigusr2
}

phase_replace() {
	local bin tmp
	[ "$bus" = bus1 ] && bin=/usr/local/bin/bus1-broker || bin=/usr/bin/dbus-daemon
	send_slow replace
	# What dpkg does: unpack next to the file, rename over it (the running one keeps its inode).
	tmp=$(mktemp "$bin.dpkg-new.XXXXXX")
	cp -p "$bin" "$tmp" && mv -f "$tmp" "$bin"
	note "replace: $bin replaced by a new file (inode $(stat -c %i "$bin"))"
	restart_and_time replace
	after_phase replace
}

# crash SIGNAL: the bus dies without a word. KILL and SEGV through `systemctl kill
# --kill-whom=main -s SIGNAL`; OOM through the kernel's OOM killer: the bus' oom_score_adj
# raised to 1000, then SysRq f (a manual OOM run, which kills the task with the highest score:
# the kernel counts it as an OOM kill in the unit's cgroup, so OOMPolicy= applies). One Slow call
# of B is in flight. bus1-broker: systemd starts it again at once (Restart=on-failure), it
# resumes from its crash journal in the fd store and must keep every client. dbus-daemon, the
# reference: its unit is not restarted, dbus.socket starts a new one for the next client, and
# every client is dropped (check_clients and check_services record what it did).
phase_crash() {
	local sig=$1 name pid0 pid1 t0 n0 n1 restored0 restored
	name=crash-$(tr '[:upper:]' '[:lower:]' <<<"$sig")
	pid0=$(bus_pid)
	n0=$(systemctl show -p NRestarts --value dbus.service)
	restored0=$(crash_restores | wc -l)
	send_slow "$name"
	t0=$(now)
	case $sig in
	OOM)
		echo 1000 >"/proc/$pid0/oom_score_adj"
		echo f >/proc/sysrq-trigger
		;;
	*) systemctl kill --kill-whom=main -s "$sig" dbus.service ;;
	esac
	if ! wait_for 10 bus_pid_is_not "$pid0"; then
		fail "$name: the bus (pid $pid0) still runs 10 s after the $sig"
		return
	fi
	if [ "$sig" = OOM ]; then
		if dmesg | grep -q "Killed process $pid0 "; then
			ok "$name: the kernel's OOM killer killed the bus (pid $pid0)"
		else
			fail "$name: no OOM kill of pid $pid0 in the kernel log: $(dmesg | grep -i oom | tail -n 2)"
		fi
	fi
	if wait_for 20 answers; then
		note "time $name $(since "$t0") (kill-to-answer)"
		ok "$name: a bus answers after the $sig"
	else
		fail "$name: no bus answers 20 s after the $sig"
		return
	fi
	pid1=$(bus_pid)
	n1=$(systemctl show -p NRestarts --value dbus.service)
	note "$name: bus pid $pid0 -> $pid1, unit $(systemctl show -p Result,NRestarts dbus.service | tr '\n' ' ')"
	if [ "$bus" = bus1 ]; then
		if [ "$n1" = $((n0 + 1)) ]; then
			ok "$name: systemd restarted the bus (NRestarts $n0 -> $n1)"
		else
			fail "$name: NRestarts went from $n0 to $n1, not up by one"
		fi
		restored=$(crash_restores | tail -n 1)
		if [ "$(crash_restores | wc -l)" -gt "$restored0" ]; then
			ok "$name: the new bus resumed from the crash journal"
			note "$name: bus log: $restored"
		else
			fail "$name: the new bus did not resume from its crash journal: $(bus_log | tail -n 3 | tr '\n' ' ')"
		fi
	else
		note "$name: dbus-daemon: $(bus_log | tail -n 4 | tr '\n' ' ')"
	fi
	after_phase "$name"
}

phase_crash_kill() { phase_crash KILL; }
phase_crash_segv() { phase_crash SEGV; }
phase_crash_oom() { phase_crash OOM; }

bus_pid_is_not() { local p; p=$(bus_pid); [ -n "$p" ] && [ "$p" != "$1" ]; }
# The bus' own log (under its unit's name: bus1-broker.service is dbus.service by an alias).
bus_log() { journalctl -b -u "$(systemctl show -p Id --value dbus.service)" -o cat --no-pager; }
# bus1-broker's log line of each start from a crash journal.
crash_restores() { bus_log | grep 'the bus restarted after a crash'; }

# ---- main -----------------------------------------------------------------------------------------

note "bus: $bus, bus1.ko $([ "$module" = 1 ] && echo loaded || echo "not loaded"), kernel $(uname -r)"
t0=$(now)
state=$(timeout $((180 * factor)) systemctl is-system-running --wait 2>&1)
note "boot: is-system-running says '$state' (waited $(since "$t0")s, uptime $(now)s)"
failed=$(systemctl list-units --state=failed --no-legend --plain 2>&1)
[ -z "$failed" ] || note "boot: failed units: $(echo "$failed" | awk '{ print $1 }' | tr '\n' ' ')"
case "$state" in
running|degraded) ok "boot: the system came up ($state)" ;;
*) fail "boot: is-system-running says '$state'" ;;
esac

check_bus_process boot
if ! answers; then
	fail "boot: the bus does not answer GetId"
fi
logind_owner0=$(logind_owner)
logind_pid0=$(logind_pid "$logind_owner0")
note "boot: logind is $logind_owner0, pid $logind_pid0"

# The crash phases: all three with bus1.ko (the native transport too); one without it (the
# socket path is the same); for dbus-daemon, KILL and the OOM kill (SIGSEGV is another fatal
# signal to it, and every one of its phases costs logind a restart). The suite's budget.
if [ "$bus" != bus1 ]; then
	crashes="crash_kill crash_oom"
elif [ "$module" = 1 ]; then
	crashes="crash_kill crash_segv crash_oom"
else
	crashes="crash_kill"
fi
start_native_monitor
if start_clients; then
	for p in restart sigusr2 replace $crashes; do
		if [ $wedged = 1 ]; then
			fail "$p: not run, the bus is wedged"
		else
			"phase_$p"
		fi
	done
fi

kill "$pid_a" "$pid_b" ${pid_m:+"$pid_m"} 2>/dev/null
note "done at uptime $(now)s: $fails failed check(s)"
[ $fails = 0 ]
