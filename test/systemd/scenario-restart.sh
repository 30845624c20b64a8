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
#   replace   the bus binary replaced the way dpkg does (a copy renamed over it), then a restart.
# After each phase: new clients connect and call (several in a row), logind (same unique name
# and pid as at boot), hostnamed and polkit answer, B got its reply, A still owns its name under
# the same unique name and answers Ping, no unit failed, the system is "running". With
# dbus-daemon a restart drops every client (the reference behaviour): A and B must see their
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

if start_clients; then
	for p in restart sigusr2 replace; do
		if [ $wedged = 1 ]; then
			fail "$p: not run, the bus is wedged"
		else
			phase_$p
		fi
	done
fi

kill "$pid_a" "$pid_b" 2>/dev/null
note "done at uptime $(now)s: $fails failed check(s)"
[ $fails = 0 ]
