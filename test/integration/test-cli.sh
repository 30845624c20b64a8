#!/bin/bash
# dbus-daemon's command line: --version, --help, --introspect, --print-address
# and --print-pid (to a descriptor, as one and as two words), --fork with
# readiness and the daemon's own pid (as dbus-daemon), --nopidfile, a config <pidfile> (an existing one refused, as by
# dbus-daemon), <user>, exit on SIGTERM, bad options.
#
#   test-cli.sh BUS_BINARY
set -u
bus=$1
dir=$(mktemp -d /tmp/bus1-cli.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bus" --version | grep -q "1.14" || fail "--version"
"$bus" --help | grep -q -- "--print-address" || fail "--help"
"$bus" --introspect | grep -q '<interface name="org.freedesktop.DBus">' || fail "--introspect"
"$bus" --bogus 2>/dev/null && fail "unknown option accepted"
# An unknown option: status 1, as dbus-daemon's; --help: 0 (dbus-daemon 1,
# a deliberate difference, bus1-broker(1) DIFFERENCES).
"$bus" --bogus >/dev/null 2>&1; [ $? = 1 ] || fail "unknown option: status not 1"
if [ -x /usr/bin/dbus-daemon ]; then
    /usr/bin/dbus-daemon --bogus >/dev/null 2>&1
    [ $? = 1 ] || fail "dbus-daemon's status for an unknown option is no longer 1"
    /usr/bin/dbus-daemon --help >/dev/null 2>&1
    [ $? = 1 ] || fail "dbus-daemon's --help no longer exits 1: update DIFFERENCES"
fi
"$bus" --nofork --fork 2>/dev/null && fail "--fork --nofork accepted"
"$bus" --nofork 2>/dev/null && fail "no config accepted"
"$bus" --config-file="$dir/missing.conf" --nofork 2>/dev/null && fail "missing config accepted"

# --print-address FD --print-pid FD as separate words (dbus-run-session style)
exec 5>"$dir/addr" 6>"$dir/pid"
"$bus" --session --nofork --address="unix:tmpdir=$dir" --print-address 5 --print-pid 6 &
pids+=($!)
exec 5>&- 6>&-
for _ in $(seq 100); do [ -s "$dir/pid" ] && [ -s "$dir/addr" ] && break; sleep 0.05; done
addr=$(cat "$dir/addr")
[[ "$addr" =~ ^unix:path=$dir/dbus-[A-Za-z0-9]+,guid=[0-9a-f]{32}$ ]] || fail "address: $addr"
[ "$(cat "$dir/pid")" = "${pids[0]}" ] || fail "pid: $(cat "$dir/pid") vs ${pids[0]}"
DBUS_SESSION_BUS_ADDRESS=$addr dbus-send --session --print-reply --dest=org.freedesktop.DBus \
    / org.freedesktop.DBus.GetId >/dev/null || fail "bus not usable"
kill -TERM "${pids[0]}"
wait "${pids[0]}"; rc=$?
[ $rc -eq 0 ] || fail "exit status after SIGTERM: $rc"
sock=${addr#unix:path=}; sock=${sock%%,*}
[ -e "$sock" ] && fail "socket file left behind"

# --fork: the parent exits once the address is printed; the child serves
cat >"$dir/fork.conf" <<CONF
<busconfig>
  <type>session</type>
  <listen>unix:path=$dir/forked</listen>
  <pidfile>$dir/bus.pid</pidfile>
  <auth>EXTERNAL</auth>
  <policy context="default"><allow send_destination="*"/><allow receive_sender="*"/><allow own="*"/></policy>
</busconfig>
CONF
out=$("$bus" --config-file="$dir/fork.conf" --fork --print-address=1 --print-pid=1) ||
    fail "--fork failed"
addr=$(sed -n 1p <<<"$out")
pid=$(sed -n 2p <<<"$out")
pids+=("$pid")
[ "$addr" = "unix:path=$dir/forked,guid=${addr##*guid=}" ] || fail "forked address: $addr"
kill -0 "$pid" || fail "forked bus not running"
[ "$(cat "$dir/bus.pid")" = "$pid" ] || fail "pidfile"
DBUS_SESSION_BUS_ADDRESS=$addr busctl --user call org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus GetId >/dev/null || fail "forked bus not usable"
kill -INT "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "SIGINT did not stop the bus"
[ -e "$dir/bus.pid" ] && fail "pidfile left behind"

# --fork: the bus names its own pid, the daemon's, not the parent's that
# exited (GetConnectionUnixProcessID and GetConnectionCredentials of
# org.freedesktop.DBus); both buses, the same outcome (issue 28, item 4).
sed "s|<listen>.*</listen>|<listen>unix:tmpdir=$dir</listen>|; /<pidfile>/d
     s|<policy context=\"default\">.*</policy>|<policy context=\"default\"><allow send_destination=\"*\" eavesdrop=\"true\"/><allow eavesdrop=\"true\"/><allow own=\"*\"/></policy>|" \
    "$dir/fork.conf" >"$dir/fork2.conf"
forked_pid() {  # forked_pid BUS -> "own pid" or what it said instead
    local out addr p said creds cwd
    out=$("$1" --config-file="$dir/fork2.conf" --fork --print-address=1 --print-pid=1) ||
        { echo "--fork failed"; return; }
    addr=$(sed -n 1p <<<"$out")
    p=$(sed -n 2p <<<"$out")
    said=$(DBUS_SESSION_BUS_ADDRESS=$addr busctl --user call org.freedesktop.DBus \
        /org/freedesktop/DBus org.freedesktop.DBus GetConnectionUnixProcessID s \
        org.freedesktop.DBus 2>&1)
    creds=$(DBUS_SESSION_BUS_ADDRESS=$addr busctl --user call org.freedesktop.DBus \
        /org/freedesktop/DBus org.freedesktop.DBus GetConnectionCredentials s \
        org.freedesktop.DBus 2>&1)
    cwd=$(readlink "/proc/$p/cwd")
    kill "$p" 2>/dev/null
    [ "$said" = "u $p" ] || { echo "GetConnectionUnixProcessID: $said (daemon $p)"; return; }
    # The daemon leaves the directory it was started from (issue 43, item 6).
    [ "$cwd" = / ] || { echo "cwd $cwd"; return; }
    grep -q "\"ProcessID\" u $p\b" <<<"$creds" ||
        { echo "GetConnectionCredentials: $creds (daemon $p)"; return; }
    echo "own pid"
}
got=$(forked_pid "$bus")
[ "$got" = "own pid" ] || fail "--fork: $got"
if [ -x /usr/bin/dbus-daemon ]; then
    ref=$(forked_pid /usr/bin/dbus-daemon)
    [ "$ref" = "$got" ] || fail "--fork pid: dbus-daemon $ref, bus1-broker $got"
fi

# --fork: the pid file follows the umask the bus was started with (the
# daemon's own is 022), as dbus-daemon's parent writes it (issue 43, item 9).
sed "s|<listen>.*</listen>|<listen>unix:tmpdir=$dir</listen>|; s|bus.pid|mode.pid|" \
    "$dir/fork.conf" >"$dir/mode.conf"
pidfile_mode() {  # pidfile_mode BUS -> the pid file's mode under umask 077
    local p mode
    p=$( (umask 077; "$1" --config-file="$dir/mode.conf" --fork --print-pid=1) ) ||
        { echo "--fork failed"; return; }
    mode=$(stat -c %a "$dir/mode.pid" 2>/dev/null)
    kill "$p" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    rm -f "$dir/mode.pid"
    echo "${mode:-none}"
}
got=$(pidfile_mode "$bus")
[ "$got" = 600 ] || fail "pid file mode under umask 077: $got"
if [ -x /usr/bin/dbus-daemon ]; then
    ref=$(pidfile_mode /usr/bin/dbus-daemon)
    [ "$ref" = "$got" ] || fail "pid file mode: dbus-daemon $ref, bus1-broker $got"
fi

# --nopidfile: the config's pidfile is not written
"$bus" --config-file="$dir/fork.conf" --nofork --nopidfile --print-address=1 >"$dir/a2" &
pids+=($!)
for _ in $(seq 100); do [ -s "$dir/a2" ] && break; sleep 0.05; done
[ -e "$dir/bus.pid" ] && fail "--nopidfile wrote the pidfile"
# a second bus on the same live socket path fails
"$bus" --config-file="$dir/fork.conf" --nofork --nopidfile 2>/dev/null &&
    fail "second bus on a live socket started"
# An existing pid file: the bus refuses to start and leaves the file alone, as
# dbus-daemon does (issue 28, item 5); both buses, the same outcome.
sed "s|<listen>.*</listen>|<listen>unix:tmpdir=$dir</listen>|" "$dir/fork.conf" >"$dir/pid.conf"
pidfile_exists() {  # pidfile_exists BUS -> "refused" or what happened instead
    echo 12345 >"$dir/bus.pid"
    timeout 10 "$1" --config-file="$dir/pid.conf" --nofork --print-address=1 \
        >"$dir/a3" 2>"$dir/e3" &
    local p=$! rc
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$p" 2>/dev/null; then
        kill "$p"; wait "$p"; echo "started"; return
    fi
    wait "$p"; rc=$?
    [ "$(cat "$dir/bus.pid")" = 12345 ] || { echo "pid file rewritten"; return; }
    grep -q "The pid file \"$dir/bus.pid\" exists, if the message bus is not running, remove this file" \
        "$dir/e3" || { echo "status $rc: $(cat "$dir/e3")"; return; }
    [ $rc -ne 0 ] && echo refused || echo "status 0"
}
got=$(pidfile_exists "$bus")
[ "$got" = refused ] || fail "existing pid file: $got"
if [ -x /usr/bin/dbus-daemon ]; then
    ref=$(pidfile_exists /usr/bin/dbus-daemon)
    [ "$ref" = "$got" ] || fail "existing pid file: dbus-daemon $ref, bus1-broker $got"
fi
rm -f "$dir/bus.pid"

# <user>: started as root, the bus serves as that user once it listens
if [ "$(id -u)" = 0 ] && nobody_uid=$(id -u nobody 2>/dev/null); then
    cat >"$dir/user.conf" <<EOF
<busconfig>
  <type>session</type>
  <user>nobody</user>
  <listen>unix:tmpdir=$dir</listen>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
    exec 5>"$dir/uaddr"
    "$bus" --config-file="$dir/user.conf" --nofork --print-address=5 &
    upid=$!
    pids+=($upid)
    exec 5>&-
    for _ in $(seq 100); do [ -s "$dir/uaddr" ] && break; sleep 0.05; done
    [ "$(stat -c %u /proc/$upid)" = "$nobody_uid" ] || fail "<user>: bus runs as $(stat -c %u /proc/$upid)"
    got=$(dbus-send --bus="$(cat "$dir/uaddr")" --print-reply=literal --dest=org.freedesktop.DBus \
        / org.freedesktop.DBus.GetConnectionUnixUser string:org.freedesktop.DBus) ||
        fail "<user>: bus not usable"
    [ "$(echo $got | awk '{print $2}')" = "$nobody_uid" ] || fail "<user>: driver uid $got"
    kill "$upid"
else
    echo "not root: <user> check not run"
fi

echo "cli ok"
