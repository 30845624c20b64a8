#!/bin/bash
# Install build dependencies, build, and run the bus in the foreground on a
# private session socket. Prints DBUS_SESSION_BUS_ADDRESS=... once it accepts
# connections; stop it with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh build
[ -d build ] || meson setup build >/dev/null
meson compile -C build >/dev/null
dir=$(mktemp -d /tmp/bus1-broker.XXXXXX)
exec build/broker/bus1-broker --session --nofork --address="unix:path=$dir/bus" \
    --print-address=1 --print-env
