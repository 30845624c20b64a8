#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# scenario-deb.sh - the Debian packages on a booted system, in five boots of the same disk
# (run-deb-suite.sh; JOB_PHASE says which boot this is). The packages are in
# /bus1test/files/debs, the upgrade (the same bus1-broker with a higher version) in
# /bus1test/files/debs-v2, Debian's dbus-broker in /bus1test/files/other. What a boot must carry
# to the next one is in /var/lib/bus1test. Each boot checks that PID 1, logind, bus1user's
# `systemd --user` and its accessibility bus are reachable, not only is-system-running (which
# says "running" on a system without a bus).
#
#   install  on dbus-daemon: the reference checks (busctl, loginctl, hostnamectl, timedatectl,
#            pkcheck as bus1user, the failed units, the boot time, bus1user's accessibility bus
#            served by dbus-daemon); `apt-get install` of dbus-broker, whose postinst enables
#            its aliases (the system bus and users' are dbus-broker's from the next boot on);
#            the file lists of the root and of /lib/modules; `apt-get install ./*.deb` (DKMS
#            builds bus1.ko), which switches nothing and records dbus-broker as the system's
#            bus; `systemctl enable bus1-broker.service` refuses over dbus-broker's alias, and
#            `enable --force` (and `--global enable --force`) switches, as docs/switching.md says
#   bus1     on bus1-broker: bus1.ko loaded by modules-load.d, /dev/bus1 with mode 0666 and open
#            in the bus, the same checks with the same results and no failed unit the reference
#            did not have; bus1user's session bus is bus1-broker, and so is its accessibility
#            bus (at-spi2-core's launcher in the package's unit); an upgrade (`apt-get install`
#            of debs-v2, the units reloaded before the hand-over: no "changed on disk" warning)
#            while clients hold a name and a call is in flight drops nobody; then, with
#            bus1user's session running, `systemctl disable` (both) while the buses run: PID 1,
#            logind and bus1user's `systemd --user` stay on their buses until the reboot
#   off      after a disable and a reboot: dbus-broker again (its aliases came back when the
#            disabled bus stopped), system and session bus; `systemctl enable --force` again
#   again    on bus1-broker: `apt-get remove` of bus1-broker and bus1-dkms while the buses
#            run: PID 1, logind and bus1user's manager stay on them, the aliases are
#            dbus-broker's again, bus1.ko stays loaded (in use)
#   back     after the removal and a reboot: dbus-broker serves the system, session and
#            accessibility buses; `apt-get purge` of every package leaves no file behind in
#            the root or in /lib/modules
#
# Output and exit status as scenario-restart.sh (the checks are in scenario-lib.sh).

export BUS1_BROKER=/usr/bin/bus1-broker
# shellcheck source=test/systemd/scenario-lib.sh
. "$(dirname "$0")/scenario-lib.sh"

phase=${JOB_PHASE:?JOB_PHASE not set}
S=/var/lib/bus1test
mkdir -p $S
F=/bus1test/files
kver=$(uname -r)
packages=(bus1-broker bus1-dkms libbus1-0 libbus1-client0 libbus1-dev)
export DEBIAN_FRONTEND=noninteractive

as_user() { runuser -u bus1user -- env XDG_RUNTIME_DIR=/run/user/1000 "$@"; }

# The accessibility bus of bus1user's session (org.a11y.Bus of at-spi2-core, activated on the
# session bus): the program that serves it must be one of the programs given, by inode
# (bus1-broker-at-spi.service runs bus1-broker bind-mounted at /usr/bin/dbus-daemon).
check_a11y_bus() {
	local phase=$1 addr pid want
	shift
	addr=$(as_user busctl --user --timeout=30 call org.a11y.Bus /org/a11y/bus org.a11y.Bus \
		GetAddress 2>&1 | value)
	pid=$(as_user busctl --address="$addr" --timeout=10 call org.freedesktop.DBus \
		/org/freedesktop/DBus org.freedesktop.DBus GetConnectionUnixProcessID s \
		org.freedesktop.DBus 2>&1 | value)
	for want in "$@"; do
		if [ -n "$pid" ] && [ "$(stat -L -c %d:%i "/proc/$pid/exe" 2>&1)" = "$(stat -c %d:%i "$want")" ]; then
			ok "$phase: bus1user's accessibility bus ($addr) is served by $want (pid $pid)"
			return
		fi
	done
	fail "$phase: bus1user's accessibility bus '$addr' is served by pid '$pid' ($(readlink "/proc/$pid/exe" 2>&1)), not $*"
}

# What the checks of every boot print, compared across boots: "NAME: rc OUTPUT".
probe() {
	local out rc
	out=$(timeout $((30 * factor)) busctl --timeout=20 list --no-legend 2>&1 | awk '{ print $1 }' |
		grep -c '^org\.freedesktop\.' 2>&1)
	echo "busctl-list: well-known org.freedesktop names $out"
	out=$(timeout $((30 * factor)) loginctl --no-legend list-sessions 2>&1 >/dev/null); rc=$?
	echo "loginctl: $rc $out"
	out=$(timeout $((30 * factor)) hostnamectl --static 2>&1); rc=$?
	echo "hostnamectl: $rc $out"
	out=$(timeout $((30 * factor)) timedatectl show -p Timezone --value 2>&1); rc=$?
	echo "timedatectl: $rc $out"
	# an unprivileged user asks polkit (the stock policy: not allowed without authentication)
	# shellcheck disable=SC2016  # ($$ is the user's shell)
	out=$(timeout $((30 * factor)) runuser -u bus1user -- sh -c 'exec pkcheck --process $$ \
		--action-id org.freedesktop.hostname1.set-static-hostname' 2>&1); rc=$?
	echo "pkcheck: $rc $(echo "$out" | head -n 1)"
}

# Run the probes, compare them with the reference boot's.
check_probes() {
	local name=$1 line
	probe >"$S/probe-$name"
	while read -r line; do note "$name: $line"; done <"$S/probe-$name"
	if [ "$name" = reference ]; then
		grep -q '^loginctl: 0' "$S/probe-$name" && grep -q '^hostnamectl: 0 bus1-guest' "$S/probe-$name" &&
			grep -q '^timedatectl: 0' "$S/probe-$name" && ok "reference: loginctl, hostnamectl and timedatectl answer"
		return
	fi
	if diff -u "$S/probe-reference" "$S/probe-$name" >"$S/probe-$name.diff"; then
		ok "$name: busctl, loginctl, hostnamectl, timedatectl and pkcheck (as bus1user) give the reference's results"
	else
		fail "$name: the probes differ from the reference: $(tail -n +3 "$S/probe-$name.diff" | tr '\n' ' ')"
	fi
}

# The failed units, compared with the reference's (a unit that fails on dbus-daemon too is not
# the bus's doing).
check_failed_units() {
	local name=$1 new
	systemctl list-units --state=failed --no-legend --plain 2>&1 | awk '{ print $1 }' | sort >"$S/failed-$name"
	note "$name: failed units: $(tr '\n' ' ' <"$S/failed-$name")"
	[ "$name" = reference ] && return
	new=$(comm -13 "$S/failed-reference" "$S/failed-$name" | tr '\n' ' ')
	if [ -z "$new" ]; then
		ok "$name: no failed unit that the reference did not have"
	else
		fail "$name: units failed that did not on dbus-daemon: $new"
	fi
}

boot_time() {
	local t
	t=$(systemd-analyze 2>/dev/null | head -n 1)
	note "$1: $t"
	t=$(awk '/Startup finished/ { for (i = 1; i <= NF; i++) if ($i == "=") { print $(i + 1); exit } }' <<<"$t")
	note "time boot-$1 ${t%s}"
}

# Files of the root and of /lib/modules/KVER, less what a boot or the package manager changes
# anyway.
file_list() {
	find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp \
		-o -path /bus1test -o -path /var/lib/bus1test -o -path /var/log -o -path /var/cache \
		-o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/lib/systemd \
		-o -path /var/tmp -o -path /usr/src -o -path /home/bus1user \) -prune -o -print | sort
}
module_list() { find "/usr/lib/modules/$kver" | sort; }

# check_user_bus PHASE EXE: bus1user's session bus answers, and its dbus.service runs EXE.
check_user_bus() {
	local phase=$1 want=$2 pid
	if wait_for 30 as_user busctl --user --timeout=5 call org.freedesktop.DBus /org/freedesktop/DBus \
		org.freedesktop.DBus GetId >/dev/null 2>&1; then
		pid=$(as_user systemctl --user show -p MainPID --value dbus.service)
		if [ "$(bus_exe "$pid")" = "$want" ]; then
			ok "$phase: bus1user's session bus is ${want##*/} (pid $pid)"
		else
			fail "$phase: bus1user's dbus.service runs '$(bus_exe "$pid")'"
		fi
	else
		fail "$phase: bus1user's session bus does not answer"
	fi
}

# systemd_on_bus system|user PHASE: systemd (PID 1, or bus1user's manager) is on its bus:
# busctl lists org.freedesktop.systemd1 with a pid (not only as activatable), and it answers
# there.
systemd_on_bus() {
	local who=$1 what=$2 pid run=() scope=--system
	[ "$who" = user ] && run=(as_user) && scope=--user
	pid=$("${run[@]}" timeout $((30 * factor)) busctl $scope --timeout=20 list --no-legend 2>&1 |
		awk '$1 == "org.freedesktop.systemd1" { print $2 }')
	case $pid in
	[0-9]*) ;;
	*) fail "$what: $who's systemd is not on its bus (org.freedesktop.systemd1: '$pid')"; return ;;
	esac
	if "${run[@]}" timeout $((30 * factor)) busctl $scope --timeout=20 get-property \
		org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager \
		Version >/dev/null 2>&1; then
		ok "$what: $who's systemd is on its bus and answers there (pid $pid)"
	else
		fail "$what: $who's systemd (pid $pid) does not answer on its bus"
	fi
}

# After a way out taken while bus1-broker serves (PHASE): PID 1, logind, new clients and
# bus1user's manager are still on the running buses, which systemd still calls dbus.service.
check_still_served() {
	local phase=$1 pid id
	pid=$(bus_pid)
	id=$(systemctl show -p Id --value dbus.service)
	if [ "$id" = bus1-broker.service ] && [ "$pid" = "$bus_pid0" ]; then
		ok "$phase: dbus.service is still the running bus1-broker.service (pid $pid)"
	else
		fail "$phase: dbus.service is '$id' with pid '$pid', not bus1-broker.service with pid $bus_pid0"
	fi
	systemd_on_bus system "$phase"
	check_new_clients "$phase"
	if timeout $((30 * factor)) loginctl --no-legend list-sessions >/dev/null 2>&1; then
		ok "$phase: loginctl answers"
	else
		fail "$phase: loginctl does not answer"
	fi
	systemd_on_bus user "$phase"
}

# switch PHASE enable|disable [--force]: the system bus and every user's, as
# docs/switching.md says.
switch() {
	local phase=$1 out
	shift
	if out=$(systemctl "$@" bus1-broker.service 2>&1 &&
		systemctl --global "$@" bus1-broker.service 2>&1); then
		ok "$phase: systemctl $* and systemctl --global $* bus1-broker.service"
	else
		fail "$phase: systemctl $* bus1-broker.service failed: $(echo "$out" | tr '\n' ' ')"
	fi
}

# check_aliases PHASE UNIT: the system's and the users' dbus.service aliases in /etc both name
# UNIT.
check_aliases() {
	local phase=$1 unit=$2 sys usr
	sys=$(readlink /etc/systemd/system/dbus.service)
	usr=$(readlink /etc/systemd/user/dbus.service)
	if [ "${sys##*/}" = "$unit" ] && [ "${usr##*/}" = "$unit" ]; then
		ok "$phase: the system's and the users' dbus.service are $unit"
	else
		fail "$phase: dbus.service aliases are '$sys' (system) and '$usr' (users), not $unit"
	fi
}

# The boots on dbus-broker (PHASE): the system bus, bus1user's session and accessibility buses,
# PID 1 and bus1user's manager on their buses, the probes as on dbus-daemon.
check_dbus_broker_boot() {
	local phase=$1 uid
	bus=dbus-broker
	wait_running "$phase"
	boot_time "$phase"
	check_bus_process "$phase"
	check_probes "$phase"
	check_failed_units "$phase"
	systemd_on_bus system "$phase"
	check_new_clients "$phase"
	uid=$(id -u bus1user)
	systemctl start "user@$uid.service"
	check_user_bus "$phase" /usr/bin/dbus-broker-launch
	systemd_on_bus user "$phase"
	# at-spi-bus-launcher runs dbus-broker-launch where the session bus is dbus-broker
	check_a11y_bus "$phase" /usr/bin/dbus-broker-launch
	systemctl stop "user@$uid.service"
}

wait_running() {
	local state
	state=$(timeout $((180 * factor)) systemctl is-system-running --wait 2>&1)
	case "$state" in
	running|degraded) ok "$1: the system came up ($state)" ;;
	*) fail "$1: is-system-running says '$state'" ;;
	esac
}

phase_install() {
	local t0 out rc
	bus=dbus-daemon
	wait_running install
	boot_time reference
	check_bus_process install
	check_probes reference
	check_failed_units reference
	systemctl start user@1000.service
	check_a11y_bus reference /usr/bin/dbus-daemon
	systemctl stop user@1000.service
	# a system whose bus is dbus-broker (from the next boot on): its postinst enables the aliases
	out=$(apt-get install -y -q $F/other/dbus-broker_*.deb 2>&1); rc=$?
	if [ $rc = 0 ]; then
		ok "install: apt-get install of dbus-broker"
	else
		fail "install: apt-get install of dbus-broker failed: $(echo "$out" | tail -n 10 | tr '\n' ' ')"
	fi
	check_aliases dbus-broker dbus-broker.service
	file_list >$S/files-before
	module_list >$S/modules-before
	t0=$SECONDS
	out=$(apt-get install -y -q $F/debs/*.deb 2>&1); rc=$?
	note "install: apt-get install took $((SECONDS - t0))s, status $rc"
	if [ $rc = 0 ]; then
		ok "install: apt-get install of ${packages[*]} (DKMS built bus1.ko)"
	else
		fail "install: apt-get install failed: $(echo "$out" | tail -n 15 | tr '\n' ' ')"
		for f in /var/lib/dkms/bus1/*/build/make.log; do
			[ -f "$f" ] && note "$f: $(tail -n 25 "$f" | tr '\n' ' ')"
		done
		return
	fi
	if [ -n "$(find "/usr/lib/modules/$kver" -name 'bus1.ko*')" ]; then
		ok "install: DKMS installed bus1.ko for $kver"
	else
		fail "install: no bus1.ko for $kver after the install: $(dkms status 2>&1 | tr '\n' ' ')"
	fi
	# (the running dbus.service stays dbus-daemon's until the reboot, dbus-broker's alias or not)
	if [ "$(bus_exe "$(bus_pid)")" = /usr/bin/dbus-daemon ] &&
		[ "$(systemctl is-enabled bus1-broker.service 2>&1)" = disabled ]; then
		ok "install: installing switched nothing (dbus-daemon serves, bus1-broker.service disabled)"
	else
		fail "install: after the install dbus.service runs '$(bus_exe "$(bus_pid)")', bus1-broker.service is '$(systemctl is-enabled bus1-broker.service 2>&1)'"
	fi
	check_aliases install dbus-broker.service
	out=$(cat /var/lib/bus1-broker/previous-system /var/lib/bus1-broker/previous-user 2>&1)
	if [ "$(echo "$out" | sed 's|.*/||' | sort -u)" = dbus-broker.service ]; then
		ok "install: the package recorded dbus-broker as the system's and the users' bus"
	else
		fail "install: the package recorded '$(echo "$out" | tr '\n' ' ')', not dbus-broker.service"
	fi
	# docs/switching.md: over dbus-broker's alias, a plain enable refuses; --force switches
	if out=$(systemctl enable bus1-broker.service 2>&1); then
		fail "install: systemctl enable bus1-broker.service replaced dbus-broker's alias without --force"
	else
		ok "install: systemctl enable bus1-broker.service refuses over dbus-broker's alias: $(echo "$out" | head -n 1)"
	fi
	switch install enable --force
	check_aliases install bus1-broker.service
}

phase_bus1() {
	local pid0 pid1 mode uid out
	bus=bus1
	module=1
	wait_running bus1
	boot_time bus1
	if [ -e /sys/module/bus1 ]; then
		ok "bus1: bus1.ko was loaded at boot (modules-load.d)"
	else
		fail "bus1: bus1.ko is not loaded"
	fi
	mode=$(stat -c %a /dev/bus1 2>&1)
	[ "$mode" = 666 ] && ok "bus1: /dev/bus1 has mode 0666 (udev rule)" ||
		fail "bus1: /dev/bus1 mode '$mode'"
	check_bus_process bus1
	check_probes bus1
	check_failed_units bus1
	check_new_clients bus1
	# bus1user's session: its own systemd --user, whose dbus.service is the package's
	uid=$(id -u bus1user)
	systemctl start "user@$uid.service"
	check_user_bus bus1 /usr/bin/bus1-broker
	out=$(as_user systemctl --user show -p Id --value at-spi-dbus-bus.service 2>&1)
	[ "$out" = bus1-broker-at-spi.service ] &&
		ok "bus1: bus1user's accessibility bus unit is bus1-broker-at-spi.service" ||
		fail "bus1: at-spi-dbus-bus.service of bus1user is '$out'"
	check_a11y_bus bus1 /usr/bin/bus1-broker
	systemctl stop "user@$uid.service"

	# an upgrade under live clients
	logind_owner0=$(logind_owner)
	logind_pid0=$(logind_pid "$logind_owner0")
	start_clients || return
	pid0=$(bus_pid)
	send_slow upgrade
	out=$(apt-get install -y -q $F/debs-v2/bus1-broker_*.deb 2>&1) ||
		fail "upgrade: apt-get install failed: $(echo "$out" | tail -n 10 | tr '\n' ' ')"
	note "upgrade: bus1-broker $(dpkg-query -W -f='${Version}' bus1-broker) installed"
	pid1=$(bus_pid)
	[ "$pid1" != "$pid0" ] && ok "upgrade: the postinst restarted the bus (pid $pid0 -> $pid1)" ||
		fail "upgrade: the bus was not restarted (pid $pid0)"
	if echo "$out" | grep -q "changed on disk"; then
		fail "upgrade: systemd warned: $(echo "$out" | grep "changed on disk" | head -n 1)"
	else
		ok "upgrade: the units were reloaded before the hand-over (no \"changed on disk\")"
	fi
	after_phase upgrade
	kill "$pid_a" "$pid_b" 2>/dev/null

	# the ways out while the buses run: bus1user's session up, its bus started
	systemctl start "user@$uid.service"
	wait_for 30 as_user busctl --user --timeout=5 call org.freedesktop.DBus /org/freedesktop/DBus \
		org.freedesktop.DBus GetId >/dev/null 2>&1 ||
		fail "bus1: bus1user's session bus does not answer"
	bus_pid0=$(bus_pid)
	switch disable-live disable
	check_still_served disable-live
	systemctl stop "user@$uid.service"
}

# After a disable and a reboot: the bus the system had, and the switch again.
phase_off() {
	check_dbus_broker_boot off
	switch off enable --force
	check_aliases off bus1-broker.service
}

# bus1-broker again, and the package removed under it.
phase_again() {
	local uid out
	bus=bus1
	module=1
	wait_running again
	check_bus_process again
	check_new_clients again
	uid=$(id -u bus1user)
	systemctl start "user@$uid.service"
	check_user_bus again /usr/bin/bus1-broker
	bus_pid0=$(bus_pid)
	out=$(apt-get remove -y -q bus1-broker bus1-dkms 2>&1) ||
		fail "remove: apt-get remove failed: $(echo "$out" | tail -n 10 | tr '\n' ' ')"
	note "remove: $(echo "$out" | grep -i -E "warn|error|bus1" | tr '\n' ' ')"
	check_still_served remove
	check_aliases remove dbus-broker.service
	if [ ! -e /etc/systemd/user/at-spi-dbus-bus.service ]; then
		ok "remove: the accessibility bus alias is gone"
	else
		fail "remove: /etc/systemd/user/at-spi-dbus-bus.service is left"
	fi
	if [ -e /sys/module/bus1 ]; then
		ok "remove: bus1.ko stays loaded while the bus holds it"
	else
		fail "remove: bus1.ko was unloaded under the running bus"
	fi
	systemctl stop "user@$uid.service"
}

phase_back() {
	local out rc left
	check_dbus_broker_boot back
	if [ ! -e /sys/module/bus1 ]; then
		ok "back: bus1.ko is not loaded (bus1-dkms was removed)"
	else
		fail "back: bus1.ko is loaded after bus1-dkms was removed"
	fi
	out=$(apt-get purge -y -q "${packages[@]}" 2>&1); rc=$?
	if [ $rc = 0 ]; then
		ok "back: apt-get purge of ${packages[*]}"
	else
		fail "back: apt-get purge failed: $(echo "$out" | tail -n 10 | tr '\n' ' ')"
	fi
	check_aliases purge dbus-broker.service
	left=$(file_list | comm -13 $S/files-before - | tr '\n' ' ')
	if [ -z "$left" ]; then
		ok "back: no file left in the root that was not there before the install"
	else
		fail "back: left behind: $left"
	fi
	left=$(module_list | comm -13 $S/modules-before - | tr '\n' ' ')
	if [ -z "$left" ]; then
		ok "back: nothing left in /lib/modules/$kver"
	else
		fail "back: left in /lib/modules/$kver: $left"
	fi
}

note "deb: phase $phase, kernel $kver"
case "$phase" in
install) phase_install ;;
bus1) phase_bus1 ;;
off) phase_off ;;
again) phase_again ;;
back) phase_back ;;
*) fail "unknown phase $phase" ;;
esac
note "done at uptime $(now)s: $fails failed check(s)"
[ $fails = 0 ]
