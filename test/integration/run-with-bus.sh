#!/bin/bash
# Start a bus on a private socket, run one test command against it, stop it.
#
#   run-with-bus.sh BUS_BINARY [--config FILE] -- COMMAND [ARGS...]
#
# The bus runs with --session (or --config-file=FILE) --nofork and listens on
# unix:tmpdir=<private dir>; its address is taken from --print-address. The
# command sees DBUS_SESSION_BUS_ADDRESS (and DBUS_STARTER_ADDRESS), BUS_PID and
# BUS_BINARY. The test fails if the command fails, if the bus died during
# the test (a crash must never pass), or if the bus, stopped with SIGTERM
# afterwards, does not exit with status 0 within BUS_STOP_TIMEOUT seconds
# (default 60; both limits are stretched by BUS1_TIME_FACTOR) or its log shows a sanitizer report (ASan, LSan, UBSan): a leak
# or error in the bus, found at exit, fails the test it happened in. Set
# BUS_BINARY_OVERRIDE=dbus-daemon to run the same test against the reference
# implementation.
set -u
bus="${BUS_BINARY_OVERRIDE:-$1}"
shift
config=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
    --config) config=(--config-file="$2"); shift 2 ;;
    *) echo "run-with-bus: unknown option $1" >&2; exit 2 ;;
    esac
done
shift
[ ${#config[@]} -eq 0 ] && config=(--session)

dir=$(mktemp -d /tmp/bus1-test.XXXXXX)
cleanup() {
    [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

exec 3>"$dir/address"
"$bus" "${config[@]}" --nofork --address="unix:tmpdir=$dir" --print-address=3 \
    2>"$dir/bus.log" &
pid=$!
exec 3>&-
# A bus prints its address at once; under valgrind on a busy machine it took more than 5 s.
# The bound only catches a bus that hangs, so it is long and stretched by the machine's
# slowness (BUS1_TIME_FACTOR, tools/time-factor.sh).
factor=${BUS1_TIME_FACTOR:-1}
start_limit=$((60 * factor))
SECONDS=0
while [ "$SECONDS" -lt "$start_limit" ]; do
    [ -s "$dir/address" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
if ! [ -s "$dir/address" ]; then
    echo "run-with-bus: the bus did not print its address (within ${start_limit} s, or it died)" >&2
    cat "$dir/bus.log" >&2
    exit 1
fi
DBUS_SESSION_BUS_ADDRESS=$(head -n1 "$dir/address")
export DBUS_SESSION_BUS_ADDRESS DBUS_STARTER_ADDRESS="$DBUS_SESSION_BUS_ADDRESS"
export BUS_PID=$pid BUS_BINARY="$bus" BUS_DIR="$dir"
unset DBUS_SYSTEM_BUS_ADDRESS

"$@"
rc=$?

if ! kill -0 "$pid" 2>/dev/null; then
    echo "run-with-bus: the bus died during the test" >&2
    rc=1
fi

# Stop the bus the way a session manager does and look at how it ends: the
# sanitizers' exit-time checks (LeakSanitizer) only run on a clean exit. An
# exited child stays a zombie (state Z) until it is waited for.
kill -TERM "$pid" 2>/dev/null
state=R
stop_limit=$((${BUS_STOP_TIMEOUT:-60} * factor))
for _ in $(seq 1 $((stop_limit * 10))); do
    state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null)
    [ -z "$state" ] || [ "$state" = Z ] && break
    sleep 0.1
done
if [ -n "$state" ] && [ "$state" != Z ]; then
    echo "run-with-bus: the bus did not exit within ${stop_limit} s of SIGTERM" >&2
    kill -KILL "$pid" 2>/dev/null
fi
wait "$pid"
status=$?
pid=
if [ $status -ne 0 ]; then
    if [ $status -gt 128 ]; then
        echo "run-with-bus: the bus was killed by signal $((status - 128)) after SIGTERM" >&2
    else
        echo "run-with-bus: the bus exited with status $status on SIGTERM" >&2
    fi
    rc=1
fi
if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: UndefinedBehaviorSanitizer" \
        "$dir/bus.log"; then
    echo "run-with-bus: sanitizer report in the bus log" >&2
    rc=1
fi
if [ $rc -ne 0 ]; then
    echo "--- bus log ---" >&2
    cat "$dir/bus.log" >&2
fi
exit $rc
