#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# scenario-lib.sh - what the scenarios of the systemd guest (scenario-restart.sh,
# scenario-switch.sh) share, sourced by them: bounded bus calls, waits, the checks of the bus
# process, of new clients, of logind, hostnamed and polkit, of the clients A and B
# (bus1test-client.py), and of the system's state. The checks expect the bus named by $bus
# (bus1 or dbus-daemon): a scenario that switches buses sets it as it goes.
#
# Environment (from the job): JOB_BUS=bus1|dbus-daemon, JOB_MODULE=1 when bus1.ko is loaded,
# JOB_TIME_FACTOR: how much slower than the reference machine the host is (tools/time-factor.sh);
# every wait below (wait_for, svc_call) is that many times longer.
#
# Output: one "ok NAME" or "FAIL NAME: why" line per check, "#" lines with what was measured
# (run-suite.sh reads "# time NAME SECONDS"); $fails counts the failed checks.

set -u
export SYSTEMD_PAGER='' SYSTEMD_COLORS=0

bus=${JOB_BUS:-bus1}
# where the bus1-broker under test is installed (meson install; the Debian package: /usr/bin)
bus1_broker=${BUS1_BROKER:-/usr/local/bin/bus1-broker}
# installed beside it (meson install, or the Debian package)
bus1ctl=${bus1_broker%/*}/bus1ctl
module=${JOB_MODULE:-0}
factor=${JOB_TIME_FACTOR:-1}
client=/usr/local/libexec/bus1test/bus1test-client.py
D=/run/bus1test
mkdir -p "$D"
fails=0

ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
note() { echo "#    $*"; }
# Uptime in seconds (a builtin read: forks are slow under TCG).
now() { local u _; read -r u _ </proc/uptime; echo "$u"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# Every bus call is bounded: a wedged bus must fail a check, not hang the scenario.
bctl() { timeout -k 2 7 busctl --timeout=6 "$@" 2>&1; }
# svc_call SECONDS BUSCTL-ARGS...: a call to a service that may have to be (re)started first
# (activation under TCG on a busy host takes seconds): retried for up to SECONDS, as long as the
# bus itself answers.
svc_call() {
	local out end=$((SECONDS + $1 * factor))
	shift
	while :; do
		out=$(timeout -k 2 22 busctl --timeout=20 "$@" 2>&1) && { echo "$out"; return 0; }
		if ((SECONDS >= end)) || ! answers; then
			echo "$out"
			return 1
		fi
		sleep 0.5
	done
}
dbus_call() { bctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus "$@"; }
# "s "x"" -> x ; "u 42" -> 42
value() { sed -n 's/^[a-z] "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' | head -n 1; }

# wait_for SECONDS COMMAND...: run COMMAND every 0.2 s until it succeeds, for up to SECONDS
# times the time factor. Status 1 on timeout.
wait_for() {
	local end
	end=$(awk -v a="$(now)" -v b="$1" -v f="$factor" 'BEGIN { print a + b * f }')
	shift
	until "$@"; do
		awk -v a="$(now)" -v b="$end" 'BEGIN { exit !(a >= b) }' && return 1
		sleep 0.2
	done
}
log_has() { grep -q -- "$2" "$D/$1.log" 2>/dev/null; }
answers() { dbus_call GetId >/dev/null; }

bus_pid() { systemctl show -p MainPID --value dbus.service; }
bus_exe() { readlink "/proc/$1/exe" 2>/dev/null; }

has_bus1_fd() {
	local f
	for f in /proc/"$1"/fd/*; do
		[ "$(readlink "$f")" = /dev/bus1 ] && return 0
	done
	return 1
}

# The fds of process $1 that are the listening socket of the system bus, with their O_NONBLOCK:
# "fd 3 nonblocking fd 7 BLOCKING". (/proc/net/unix: listening entries have flags 00010000.)
listen_fds() {
	local pid=$1 inode f fl out=""
	inode=$(awk '$4 == "00010000" && $8 == "/run/dbus/system_bus_socket" { print $7; exit }' /proc/net/unix)
	[ -n "$inode" ] || { echo "no listening socket"; return; }
	for f in /proc/"$pid"/fd/*; do
		[ "$(readlink "$f")" = "socket:[$inode]" ] || continue
		fl=$(awk '$1 == "flags:" { print $2 }' "/proc/$pid/fdinfo/${f##*/}")
		if (((8#$fl & 8#4000) != 0)); then
			out+="fd ${f##*/} nonblocking "
		else
			out+="fd ${f##*/} BLOCKING "
		fi
	done
	echo "${out:-the bus holds no fd of it}"
}

# What the bus process is doing when it does not answer.
bus_diag() {
	local pid sc
	pid=$(bus_pid)
	read -r sc _ <"/proc/$pid/syscall" 2>/dev/null
	note "bus pid $pid: in syscall ${sc:-?} (288 = accept4, 232 = epoll_wait), wchan $(cat "/proc/$pid/wchan" 2>/dev/null); listening socket: $(listen_fds "$pid")"
}

# What a service that does not answer is doing.
unit_diag() {
	local pid sc
	pid=$(systemctl show -p MainPID --value "$1")
	read -r sc _ <"/proc/$pid/syscall" 2>/dev/null
	note "$1: $(systemctl show -p ActiveState,SubState,NRestarts,MainPID "$1" | tr '\n' ' ')syscall ${sc:-?} wchan $(cat "/proc/$pid/wchan" 2>/dev/null)"
}

# The bus process: the expected program, and (bus1.ko loaded) its /dev/bus1 peer.
check_bus_process() {
	local phase=$1 pid exe want
	pid=$(bus_pid)
	exe=$(bus_exe "$pid")
	case $bus in
	bus1) want=$bus1_broker ;;
	dbus-broker) want=/usr/bin/dbus-broker-launch ;;
	*) want=/usr/bin/dbus-daemon ;;
	esac
	if [ "$exe" = "$want" ]; then
		ok "$phase: dbus.service runs $want (pid $pid)"
		note "$phase: listening socket in pid $pid: $(listen_fds "$pid")"
	else
		fail "$phase: dbus.service main pid '$pid' runs '$exe', not $want"
	fi
	[ "$bus" = bus1 ] || return 0
	if [ "$module" = 1 ]; then
		if has_bus1_fd "$pid"; then
			ok "$phase: the bus has /dev/bus1 open (native transport)"
		else
			fail "$phase: bus1.ko is loaded but the bus has no /dev/bus1 open"
		fi
	fi
}

# Several new connections in a row, each must be answered.
check_new_clients() {
	local phase=$1 _i n=0 out
	for _i in 1 2 3 4 5; do
		answers || break
		n=$((n + 1))
	done
	if [ $n = 5 ]; then
		ok "$phase: 5 new clients in a row connect and call GetId"
	else
		fail "$phase: of 5 new clients in a row, number $((n + 1)) got no answer"
		bus_diag
	fi
	[ "$bus" = bus1 ] && [ "$module" = 1 ] || return 0
	# Removed with the package while the bus runs on (scenario-deb.sh's remove): no native tool.
	if [ ! -x "$bus1ctl" ]; then
		note "$phase: no $bus1ctl (removed): no new native client"
		return 0
	fi
	# A new native client (through /dev/bus1, after the bootstrap on the socket) calls the bus
	# (not A, which a scenario that switches buses has dropped by now).
	out=$(timeout -k 2 10 "$bus1ctl" --address unix:path=/run/dbus/system_bus_socket \
		--timeout 8 list 2>&1)
	if grep -q '"org.freedesktop.DBus"' <<<"$out"; then
		ok "$phase: a new native client (bus1ctl) calls ListNames"
	else
		fail "$phase: a new native client (bus1ctl) cannot call ListNames: $out"
	fi
}

logind_owner() { dbus_call GetNameOwner s org.freedesktop.login1 | value; }
logind_pid() { dbus_call GetConnectionUnixProcessID s "$1" | value; }

check_services() {
	local phase=$1 owner pid out t0
	# A wedged bus: say so for each service rather than wait out each one's retries.
	if ! answers; then
		for out in "logind does not answer" "logind's name and pid unknown" \
			"hostnamed does not answer" "polkit does not answer"; do
			fail "$phase: $out (the bus itself does not answer GetId)"
		done
		return
	fi
	# dbus-daemon: a restart while logind starts up again (after the previous restart dropped
	# it) can leave the new logind waiting, off the bus, until systemd kills it at its start
	# timeout (90 s) and starts it once more: the system recovers, but only then.
	if svc_call 3 call org.freedesktop.login1 /org/freedesktop/login1 \
		org.freedesktop.login1.Manager ListSessions >/dev/null; then
		ok "$phase: logind answers ListSessions"
	elif [ "$bus" = dbus-daemon ]; then
		unit_diag systemd-logind.service
		t0=$SECONDS
		if out=$(svc_call 120 call org.freedesktop.login1 /org/freedesktop/login1 \
			org.freedesktop.login1.Manager ListSessions); then
			ok "$phase: logind answers ListSessions (after $((SECONDS - t0))s more: dbus-daemon left it hanging until systemd restarted it)"
		else
			fail "$phase: logind does not answer, 120 s on: $out"
			unit_diag systemd-logind.service
		fi
	else
		out=$(svc_call 30 call org.freedesktop.login1 /org/freedesktop/login1 \
			org.freedesktop.login1.Manager ListSessions)
		fail "$phase: logind does not answer: $out"
		unit_diag systemd-logind.service
	fi
	owner=$(logind_owner)
	pid=$(logind_pid "$owner")
	if [ "$owner" = "$logind_owner0" ] && [ "$pid" = "$logind_pid0" ]; then
		ok "$phase: logind keeps its unique name $owner and pid $pid"
	elif [ "$bus" = bus1 ]; then
		fail "$phase: logind was $logind_owner0 (pid $logind_pid0), is now '$owner' (pid '$pid')"
	else
		note "$phase: logind was $logind_owner0 (pid $logind_pid0), is now $owner (pid $pid) (the bus dropped it)"
	fi
	if out=$(svc_call 30 get-property org.freedesktop.hostname1 /org/freedesktop/hostname1 \
		org.freedesktop.hostname1 Hostname) && [ "$(value <<<"$out")" = bus1-guest ]; then
		ok "$phase: hostnamed answers (Hostname bus1-guest)"
	else
		fail "$phase: hostnamed does not answer: $out"
	fi
	if out=$(svc_call 30 call org.freedesktop.PolicyKit1 /org/freedesktop/PolicyKit1/Authority \
		org.freedesktop.DBus.Properties Get ss org.freedesktop.PolicyKit1.Authority BackendName); then
		ok "$phase: polkit answers (BackendName ${out#v s })"
	else
		fail "$phase: polkit does not answer: $out"
	fi
}

check_system() {
	local phase=$1 failed state
	failed=$(systemctl list-units --state=failed --no-legend --plain 2>&1)
	if [ -z "$failed" ]; then
		ok "$phase: no failed unit"
	else
		fail "$phase: failed units: $(echo "$failed" | awk '{ print $1 }' | tr '\n' ' ')"
	fi
	state=$(timeout $((60 * factor)) systemctl is-system-running --wait 2>&1)
	if [ "$state" = running ]; then
		ok "$phase: the system is running"
	else
		fail "$phase: the system is '$state', not running"
	fi
}

# ---- the clients --------------------------------------------------------------------------------

gen=0
start_clients() {
	gen=$((gen + 1))
	rm -f "$D/A.log" "$D/B.log"
	/usr/bin/python3 "$client" holder "$D/A.log" 4 2>>"$D/A.err" &
	pid_a=$!
	/usr/bin/python3 "$client" caller "$D/B.log" 2>>"$D/B.err" &
	pid_b=$!
	slow_n=0
	if wait_for 40 log_has A ' owner$' && wait_for 40 log_has B ' unique '; then
		unique_a=$(awk '$2 == "unique" { print $3; exit }' "$D/A.log")
		unique_b=$(awk '$2 == "unique" { print $3; exit }' "$D/B.log")
		ok "clients (set $gen): A is $unique_a and owns org.bus1test.Holder, B is $unique_b"
		return 0
	fi
	fail "clients (set $gen) did not start: A: $(cat "$D/A.log" "$D/A.err" 2>&1 | tail -n 3) B: $(cat "$D/B.log" "$D/B.err" 2>&1 | tail -n 3)"
	return 1
}

# With bus1.ko: a native client that stays, a monitor (bus1ctl monitor, through /dev/bus1) of
# every Ping call: after each phase it must still be connected and see the new Pings.
pid_m=
mon_pings=0
mon_count() { grep -c 'member=Ping' "$D/M.log" 2>/dev/null || true; }
mon_grew() { [ "$(mon_count)" -gt "$mon_pings" ]; }
start_native_monitor() {
	[ "$bus" = bus1 ] && [ "$module" = 1 ] || return 0
	rm -f "$D/M.log"
	"$bus1ctl" --address unix:path=/run/dbus/system_bus_socket monitor \
		"type='method_call',interface='org.bus1test.Holder',member='Ping'" >"$D/M.log" 2>&1 &
	pid_m=$!
	if wait_for 20 log_has M 'monitoring as'; then
		ok "native monitor: bus1ctl monitors natively ($(head -n 1 "$D/M.log"))"
	else
		fail "native monitor: bus1ctl monitor did not start: $(tail -n 2 "$D/M.log")"
		pid_m=
	fi
}

check_native_monitor() {
	local phase=$1
	[ -n "$pid_m" ] || return 0
	if wait_for 5 mon_grew && kill -0 "$pid_m" 2>/dev/null; then
		ok "$phase: the native monitor is still connected and saw the new Pings ($(mon_count) so far)"
	else
		fail "$phase: the native monitor $(kill -0 "$pid_m" 2>/dev/null && echo "saw no new Ping" || echo "is gone"): $(tail -n 2 "$D/M.log" | tr '\n' ' ')"
	fi
	mon_pings=$(mon_count)
}

# B sends one more Slow call; returns once A got it (the call is in flight in the bus).
send_slow() {
	local phase=$1
	slow_n=$((slow_n + 1))
	kill -USR1 "$pid_b" 2>/dev/null
	if wait_for 20 log_has A "slow-received $slow_n\$"; then
		ok "$phase: B's Slow call #$slow_n reached A and is in flight"
	else
		fail "$phase: B's Slow call #$slow_n did not reach A"
	fi
}

check_clients() {
	local phase=$1 owner out
	if [ "$bus" = dbus-daemon ]; then
		# The reference: a restart of dbus-daemon drops every client.
		if wait_for 10 log_has A ' dropped ' && wait_for 10 log_has B ' dropped '; then
			ok "$phase: A and B saw their connections close (dbus-daemon drops its clients)"
		else
			fail "$phase: A and B should have been dropped by dbus-daemon: A: $(tail -n 1 "$D/A.log") B: $(tail -n 1 "$D/B.log")"
		fi
		wait "$pid_a" "$pid_b" 2>/dev/null
		# New clients on the new bus: owning a name and serving calls works.
		start_clients || return
		if out=$(bctl call org.bus1test.Holder /org/bus1test org.bus1test.Holder Ping) &&
			[ "$out" = 's "pong"' ]; then
			ok "$phase: the new A answers Ping from a new client"
		else
			fail "$phase: the new A does not answer Ping: $out"
		fi
		return
	fi
	if wait_for 15 log_has B "slow-reply $slow_n slow\$"; then
		ok "$phase: B got the reply to its Slow call #$slow_n"
	else
		fail "$phase: B got no reply to Slow call #$slow_n: $(tail -n 2 "$D/B.log" | tr '\n' ' ')"
	fi
	for c in A B; do
		if log_has $c ' dropped '; then
			fail "$phase: client $c was dropped: $(grep ' dropped ' "$D/$c.log")"
		fi
	done
	kill -0 "$pid_a" "$pid_b" 2>/dev/null && ! log_has A ' dropped ' && ! log_has B ' dropped ' &&
		ok "$phase: A and B are still connected"
	owner=$(dbus_call GetNameOwner s org.bus1test.Holder | value)
	if [ "$owner" = "$unique_a" ]; then
		ok "$phase: A still owns org.bus1test.Holder as $unique_a"
	else
		fail "$phase: org.bus1test.Holder is owned by '$owner', not by A ($unique_a)"
	fi
	if out=$(bctl call org.bus1test.Holder /org/bus1test org.bus1test.Holder Ping) &&
		[ "$out" = 's "pong"' ]; then
		ok "$phase: A answers Ping from a new client"
	else
		fail "$phase: A does not answer Ping: $out"
	fi
	check_native_monitor "$phase"
}

# restart_and_time NAME: `systemctl restart dbus.service`, then the time until GetId is answered.
restart_and_time() {
	local name=$1 t0 rc t_ctl
	t0=$(now)
	timeout $((60 * factor)) systemctl restart dbus.service
	rc=$?
	t_ctl=$(since "$t0")
	if wait_for 20 answers; then
		note "time $name $(since "$t0") (restart-to-answer; systemctl restart took ${t_ctl}s)"
		ok "$name: the bus answers after the restart"
	else
		fail "$name: the bus does not answer 20 s after 'systemctl restart dbus.service' (status $rc after ${t_ctl}s)"
		bus_diag
	fi
}

# After each phase. A bus that still does not answer at the end is wedged: the next phases
# would only repeat the same failures (and each costs minutes of timeouts), they are not run.
wedged=0
after_phase() {
	check_bus_process "$1"
	check_new_clients "$1"
	check_services "$1"
	check_clients "$1"
	check_system "$1"
	answers || wedged=1
}

