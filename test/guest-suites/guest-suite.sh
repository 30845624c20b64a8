#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# guest-suite.sh - run one of the bus's userspace suites inside the qemu guest (run-guest.sh, with
# bus1.ko loaded), so that every bus1-broker the suite starts finds /dev/bus1, opens it and holds
# the bus's well-known node, and check from the brokers' own log lines that they did.
#
#   guest-suite.sh [--without-bus1] integration BUILD_DIR [MESON TEST ARGS...]
#   guest-suite.sh [--without-bus1] reference BUILD_DIR [test/reference/run ARGS...]
#
# integration: `meson test --no-rebuild --suite integration` in BUILD_DIR, exactly what the host
#              runs (the test list, commands, environments and timeouts come from meson).
# reference:   test/reference/run --daemon BUILD_DIR/broker/bus1-broker (dbus-daemon first as its
#              baseline, then the broker, in this guest).
#
# Only runs in the guest (BUS1_VM_GUEST=1): it replaces BUILD_DIR/broker/bus1-broker in the guest's
# tmpfs overlay (the host file is untouched) with a wrapper that copies each broker's stderr into a
# log of its own, so that the path the tests see, and the name they check (BUS_BINARY ends with
# "bus1-broker"), stay the same. If run-guest.sh --outdir gave a directory ($BUS1_VM_OUT), the
# meson test log (JSON and text) or the reference results, and the broker logs, are copied there.
#
# --without-bus1 is the control run in the same guest without the module (run-guest.sh
# --module ""): then every broker must serve sockets only, and none may open /dev/bus1.
#
# Exit status: the suite's status; 1 if /dev/bus1 is missing, if any broker that set up a bus
# served sockets only, or if no broker opened /dev/bus1 at all (reversed with --without-bus1).

set -u
me=guest-suite

die() { echo "$me: $*" >&2; exit 1; }

[ "${BUS1_VM_GUEST:-}" = 1 ] || die "runs only inside the guest (test/vm/run-guest.sh)"
# The broker is replaced below, which must only ever happen in the guest's tmpfs overlay: PID 1
# must be run-guest.sh's stage 2 and / an overlay.
grep -qa 'vm-results/stage2.sh' /proc/1/cmdline 2>/dev/null &&
	[ "$(stat -f -c %T /)" = overlayfs ] || die "not in a run-guest.sh guest: refusing to run"
with_bus1=1
if [ "${1:-}" = --without-bus1 ]; then
	with_bus1=0
	shift
fi
[ $# -ge 2 ] || die "usage: guest-suite.sh integration|reference BUILD_DIR [ARGS...]"
suite=$1
build=$(realpath "$2")
shift 2
srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
broker=$build/broker/bus1-broker
out=${BUS1_VM_OUT:-}

[ -x "$broker" ] || die "$broker missing"
if [ $with_bus1 = 1 ]; then
	[ -c /dev/bus1 ] || die "/dev/bus1 is missing: bus1.ko not loaded (run-guest.sh --module)"
else
	[ -e /dev/bus1 ] && die "/dev/bus1 exists, but --without-bus1 was asked for"
fi

# ---- writable scratch space: all of it tmpfs in the guest ---------------------------------------
# / is a tmpfs overlay on the read-only host root, /run a fresh tmpfs (guest-stage2.sh). Runtime
# directories and HOME must not point at host paths that mean nothing here.
scratch=/run/guest-suite
mkdir -p "$scratch/logs" "$scratch/home" "$scratch/runtime"
chmod 0755 "$scratch" "$scratch/logs"
chmod 0700 "$scratch/runtime"
# Brokers may run as messagebus/nobody (reference cases switch uid): their logs are world-writable.
chmod 1777 "$scratch/logs"
export HOME=$scratch/home XDG_RUNTIME_DIR=$scratch/runtime TMPDIR=/tmp
unset DBUS_SESSION_BUS_ADDRESS DBUS_SYSTEM_BUS_ADDRESS DBUS_STARTER_ADDRESS DBUS_STARTER_BUS_TYPE
touch /tmp/.guest-suite-probe && rm -f /tmp/.guest-suite-probe || die "/tmp is not writable"
# The guest has only a loopback interface, and getaddrinfo() with AI_ADDRCONFIG (test-fdpass
# resolves "127.0.0.1" that way) finds no IPv4 address then: it counts addresses other than
# 127.0.0.1, whatever their interface. One documentation-range address on lo, as the host has a
# configured interface.
ip -4 addr show | grep -q 'inet ' || ip link set lo up
ip -4 addr show | grep -v 'inet 127\.' | grep -q 'inet ' ||
	ip addr add 192.0.2.254/32 dev lo || die "cannot add an IPv4 address to lo"

# ---- the broker wrapper -------------------------------------------------------------------------
real=$scratch/bus1-broker.real
cp "$broker" "$real" || die "cannot copy $broker"
chmod 0755 "$real"
cat >"$broker" <<EOF
#!/bin/bash
# Written by test/guest-suites/guest-suite.sh in the guest's overlay only.
log=$scratch/logs/broker.\$\$.log
# Named explicitly, a missing device is logged ("serving socket clients only", counted below).
export BUS1_BROKER_DEVICE=\${BUS1_BROKER_DEVICE:-/dev/bus1}
{ printf 'argv:'; printf ' %q' "\$0" "\$@"; printf '\n'; } >"\$log" 2>/dev/null
# With a closed stdin/stdout/stderr (a case may test exactly that), run the broker unchanged:
# a pipe in place of a closed descriptor would change what is tested. The same when stderr is
# a journal stream (JOURNAL_STREAM names its device and inode; the broker checks them).
if ! [ -e /proc/\$\$/fd/0 ] || ! [ -e /proc/\$\$/fd/1 ] || ! [ -e /proc/\$\$/fd/2 ] ||
   [ -n "\${JOURNAL_STREAM:-}" ]; then
	echo 'stdio: closed or a journal stream, stderr not captured' >>"\$log" 2>/dev/null
	exec -a "\$0" $real "\$@"
fi
# The broker's stderr is a regular file (run-with-bus.sh's bus.log, a test's own log file): it
# stays as it is, and a follower copies what the broker appends into the log until the broker
# exits. Anything but a pipe or socket (/dev/null, a tty): not captured.
# Neither helper may hold the caller's other descriptors: a reader waiting for EOF on the
# --print-address pipe (dbus-run-session) would wait for it too.
closefds() {
	local f n
	for f in /proc/\$BASHPID/fd/*; do
		n=\${f##*/}
		[ "\$n" -gt 2 ] && [ -e "\$f" ] && exec {n}>&-
	done
}
# The file is opened here, before the broker runs: a broker may be gone before the follower
# starts (process start-up is slow under TCG).
if [ -f /proc/\$\$/fd/2 ] && [ -r /proc/\$\$/fd/2 ] && exec {rfd}</proc/\$\$/fd/2; then
	size=\$(stat -L -c %s /proc/\$\$/fd/2 2>/dev/null || echo 0)
	(
		exec <&\$rfd
		closefds
		exec tail -f -s 0.1 --pid=\$\$ -c +\$((size + 1)) /proc/self/fd/0 >>"\$log" 2>/dev/null
	) &
	exec {rfd}<&-
	exec -a "\$0" $real "\$@"
fi
case "\$(readlink /proc/\$\$/fd/2)" in
pipe:*|socket:*) ;;
*)
	echo "stderr: \$(readlink /proc/\$\$/fd/2), not captured" >>"\$log" 2>/dev/null
	exec -a "\$0" $real "\$@"
	;;
esac
# A pipe or socket: readers wait for EOF, which tee passes on after the last byte, so a fifo and
# tee in between change nothing they can see (a fifo, not a process substitution: the broker
# inherits no extra descriptor).
mkfifo -m 0600 "\$log.fifo" || exec -a "\$0" $real "\$@"
(
	closefds
	exec tee -a "\$log" <"\$log.fifo" >&2
) &
exec 2>"\$log.fifo"
rm -f "\$log.fifo"
exec -a "\$0" $real "\$@"
EOF
chmod 0755 "$broker"

# ---- the suite ----------------------------------------------------------------------------------
start=$SECONDS
case "$suite" in
integration)
	cd "$build" || die "cannot enter $build"
	# meson rereads the build's test list; --no-rebuild: the tree was built on the host.
	meson test -C "$build" --no-rebuild --suite integration --logbase guest-integration "$@"
	rc=$?
	if [ -n "$out" ]; then
		cp "$build/meson-logs/guest-integration.json" "$out/testlog.json" 2>/dev/null
		cp "$build/meson-logs/guest-integration.txt" "$out/testlog.txt" 2>/dev/null
	fi
	;;
reference)
	# The results directory must be reachable by messagebus and nobody (see its README).
	res=$scratch/reference
	# Under TCG a case takes up to 10x longer: the runner's hang limit (45 s on the host) scales
	# up; the programs' own GLib timeouts still apply. A later --case-timeout in "$@" wins.
	/usr/bin/python3 "$srcdir/test/reference/run" --daemon "$broker" --results-dir "$res" \
		--case-timeout 120 "$@"
	rc=$?
	if [ -n "$out" ]; then
		mkdir -p "$out/reference"
		cp -R "$res/." "$out/reference/" 2>/dev/null
	fi
	;;
*)
	die "unknown suite '$suite' (integration or reference)"
	;;
esac
echo "$me: $suite suite status $rc, $((SECONDS - start)) s in the guest"

# ---- did the brokers hold the bus1 node? --------------------------------------------------------
native=0 socketonly=0 nobus=0 closed=0 total=0
for f in "$scratch"/logs/broker.*.log; do
	[ -e "$f" ] || continue
	total=$((total + 1))
	if grep -q 'bus1 transport on /dev/bus1: native clients accepted' "$f"; then
		native=$((native + 1))
	elif grep -q 'serving socket clients only' "$f"; then
		socketonly=$((socketonly + 1))
		if [ $with_bus1 = 1 ]; then
			echo "$me: a broker served sockets only: $(head -n1 "$f")" >&2
			grep 'serving socket clients only' "$f" >&2
		fi
	elif grep -q '^stdio: closed or a journal stream' "$f"; then
		closed=$((closed + 1))
	else
		# --version, --help, bad options or configs, --fork after detaching: no bus was set
		# up, or its log went elsewhere.
		nobus=$((nobus + 1))
	fi
done
echo "$me: brokers started: $total; on /dev/bus1: $native; socket-only: $socketonly;" \
	"closed stdio or journal stream (not captured): $closed;" \
	"no transport line (no bus set up): $nobus"
if [ -n "$out" ]; then
	mkdir -p "$out/broker-logs"
	cp "$scratch"/logs/broker.*.log "$out/broker-logs/" 2>/dev/null
fi

if [ $with_bus1 = 1 ] && [ $socketonly != 0 ]; then
	echo "$me: FAILED: $socketonly broker(s) did not open /dev/bus1" >&2
	[ $rc = 0 ] && rc=1
fi
if [ $with_bus1 = 1 ] && [ $native = 0 ]; then
	echo "$me: FAILED: no broker logged that it opened /dev/bus1" >&2
	[ $rc = 0 ] && rc=1
fi
if [ $with_bus1 = 0 ] && { [ $native != 0 ] || [ $socketonly = 0 ]; }; then
	echo "$me: FAILED: without bus1.ko, every broker must serve sockets only" >&2
	[ $rc = 0 ] && rc=1
fi
exit $rc
