#!/bin/bash
# The command-line tools against the bus (run under run-with-bus.sh):
# dbus-send, gdbus, busctl, dbus-update-activation-environment.
set -eu
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$(dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.ListNames)
grep -q '"org.freedesktop.DBus"' <<<"$out" || fail "dbus-send ListNames: $out"

out=$(dbus-send --session --print-reply --dest=org.bus1.Nobody / org.bus1.X.Y 2>&1) &&
    fail "dbus-send to a missing name succeeded"
grep -q ServiceUnknown <<<"$out" || fail "dbus-send error: $out"

out=$(gdbus call --session -d org.freedesktop.DBus -o /org/freedesktop/DBus \
    -m org.freedesktop.DBus.GetId)
[[ "$out" =~ ^\(\'[0-9a-f]{32}\',\)$ ]] || fail "gdbus GetId: $out"

out=$(gdbus introspect --session -d org.freedesktop.DBus -o /org/freedesktop/DBus)
grep -q "RequestName" <<<"$out" || fail "gdbus introspect: $out"

out=$(busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
    GetNameOwner s org.freedesktop.DBus)
[ "$out" = 's "org.freedesktop.DBus"' ] || fail "busctl call: $out"

out=$(busctl --user list --no-pager)
grep -q "org.freedesktop.DBus" <<<"$out" || fail "busctl list: $out"

out=$(busctl --user introspect --no-pager org.freedesktop.DBus /org/freedesktop/DBus)
grep -q "NameOwnerChanged" <<<"$out" || fail "busctl introspect: $out"

out=$(busctl --user get-property org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus Interfaces)
grep -q "org.freedesktop.DBus.Monitoring" <<<"$out" || fail "busctl get-property: $out"

dbus-update-activation-environment BUS1_TEST=1 || fail "dbus-update-activation-environment"

# a name owned by one tool is seen by the others
gdbus call --session -d org.freedesktop.DBus -o /org/freedesktop/DBus \
    -m org.freedesktop.DBus.NameHasOwner org.bus1.NotOwned | grep -q false ||
    fail "NameHasOwner"
echo "tools ok"
