#!/bin/bash
# Start a bus on a private socket, run one test command against it, stop it.
#
#   run-with-bus.sh BUS_BINARY [--config FILE] -- COMMAND [ARGS...]
#
# The bus runs with --session (or --config-file=FILE) --nofork and listens on
# unix:tmpdir=<private dir>; its address is taken from --print-address. The
# command sees DBUS_SESSION_BUS_ADDRESS (and DBUS_STARTER_ADDRESS), BUS_PID and
# BUS_BINARY. The test fails if the command fails or if the bus died during
# the test (a crash must never pass). Set BUS_BINARY_OVERRIDE=dbus-daemon to
# run the same test against the reference implementation.
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
for _ in $(seq 1 100); do
    [ -s "$dir/address" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
if ! [ -s "$dir/address" ]; then
    echo "run-with-bus: the bus did not print its address" >&2
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
if [ $rc -ne 0 ]; then
    echo "--- bus log ---" >&2
    cat "$dir/bus.log" >&2
fi
exit $rc
