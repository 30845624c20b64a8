#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# scenario-switch.sh - runs in the systemd guest of run-systemd-guest.sh (as bus1test.service,
# root), booted on Debian's dbus-daemon with bus1-broker installed but not switched on
# (--bus dbus-daemon --stage-bus1): the switch on a running system as docs/switching.md
# describes it, and the way back.
#
#   enable-now   `systemctl enable --now bus1-broker.service` while dbus-daemon serves: it
#                succeeds and changes nothing yet: dbus.service keeps dbus-daemon's pid, no
#                client is dropped (B's Slow call in flight is answered, A keeps its name),
#                nothing fails; systemd now calls the running unit bus1-broker.service;
#   restart      `systemctl restart dbus.service`: bus1-broker takes over dbus.socket (with
#                bus1.ko loaded, it has /dev/bus1 open); dbus-daemon's clients are dropped as
#                by any restart of it; logind, hostnamed, polkit and new clients work on the new
#                bus, nothing failed, the system is running;
#   disable-now  `systemctl disable --now bus1-broker.service`: the alias is gone and the bus
#                stops (its clients are dropped); the next client starts dbus-daemon from
#                dbus.socket, and the system recovers as above.
#
# Output and exit status as scenario-restart.sh (the checks are in scenario-lib.sh).

# shellcheck source=test/systemd/scenario-lib.sh
. "$(dirname "$0")/scenario-lib.sh"

# The unit systemd runs under the name dbus.service, and its state.
unit_state() {
	systemctl show -p Id,ActiveState,MainPID dbus.service | tr '\n' ' '
}

# A restart of dbus-daemon, or a stop of the bus, drops every client: the checks of the
# reference (scenario-lib.sh's dbus-daemon mode) then apply whichever bus serves next, and
# logind may take its restart to come back.
after_drop() {
	local phase=$1
	check_bus_process "$phase"
	check_new_clients "$phase"
	bus=dbus-daemon check_services "$phase"
	bus=dbus-daemon check_clients "$phase"
	check_system "$phase"
	logind_owner0=$(logind_owner)
	logind_pid0=$(logind_pid "$logind_owner0")
}

phase_enable_now() {
	local pid0 pid1 out rc
	pid0=$(bus_pid)
	send_slow enable-now
	out=$(timeout $((60 * factor)) systemctl enable --now bus1-broker.service 2>&1)
	rc=$?
	note "enable-now: systemctl said (status $rc): $(echo "$out" | tr '\n' ' ')"
	if [ $rc = 0 ]; then
		ok "enable-now: systemctl enable --now bus1-broker.service succeeds"
	else
		fail "enable-now: systemctl enable --now bus1-broker.service failed with $rc"
	fi
	if [ "$(readlink -f /etc/systemd/system/dbus.service)" = \
		/usr/local/lib/systemd/system/bus1-broker.service ]; then
		ok "enable-now: /etc/systemd/system/dbus.service links to bus1-broker.service"
	else
		fail "enable-now: /etc/systemd/system/dbus.service is '$(readlink /etc/systemd/system/dbus.service)'"
	fi
	pid1=$(bus_pid)
	note "enable-now: dbus.service is now: $(unit_state)"
	if [ "$pid1" = "$pid0" ] && [ "$(bus_exe "$pid1")" = /usr/bin/dbus-daemon ]; then
		ok "enable-now: dbus-daemon serves on, same pid $pid0 (the switch waits for a restart)"
	else
		fail "enable-now: the bus was pid $pid0 (dbus-daemon), is now '$pid1' ($(bus_exe "$pid1"))"
	fi
	if [ "$(systemctl show -p Id --value dbus.service)" = bus1-broker.service ]; then
		ok "enable-now: systemd calls the running unit bus1-broker.service"
	else
		fail "enable-now: dbus.service is '$(systemctl show -p Id --value dbus.service)'"
	fi
	check_new_clients enable-now
	# nobody was dropped: B's call in flight is answered, A keeps its name
	bus=bus1 check_clients enable-now
	bus=bus1 check_services enable-now
	check_system enable-now
}

phase_restart() {
	restart_and_time restart
	note "restart: dbus.service is now: $(unit_state)"
	bus=bus1
	after_drop restart
}

phase_disable_now() {
	local out rc
	out=$(timeout $((60 * factor)) systemctl disable --now bus1-broker.service 2>&1)
	rc=$?
	note "disable-now: systemctl said (status $rc): $(echo "$out" | tr '\n' ' ')"
	if [ $rc = 0 ] && [ ! -e /etc/systemd/system/dbus.service ]; then
		ok "disable-now: systemctl disable --now bus1-broker.service removed the alias"
	else
		fail "disable-now: status $rc, /etc/systemd/system/dbus.service: $(ls -l /etc/systemd/system/dbus.service 2>&1)"
	fi
	bus=dbus-daemon
	if wait_for 30 answers; then
		ok "disable-now: the next client starts a bus from dbus.socket"
	else
		fail "disable-now: no bus answers 30 s after the stop"
	fi
	note "disable-now: dbus.service is now: $(unit_state)"
	after_drop disable-now
}

note "switch: booted on dbus-daemon, bus1-broker installed, bus1.ko $([ "$module" = 1 ] && echo loaded || echo "not loaded"), kernel $(uname -r)"
state=$(timeout $((180 * factor)) systemctl is-system-running --wait 2>&1)
case "$state" in
running) ok "boot: the system came up ($state)" ;;
*) fail "boot: is-system-running says '$state'" ;;
esac
bus=dbus-daemon
check_bus_process boot
logind_owner0=$(logind_owner)
logind_pid0=$(logind_pid "$logind_owner0")
note "boot: logind is $logind_owner0, pid $logind_pid0"

if start_clients; then
	phase_enable_now
	phase_restart
	phase_disable_now
fi

kill "$pid_a" "$pid_b" 2>/dev/null
note "done at uptime $(now)s: $fails failed check(s)"
[ $fails = 0 ]
