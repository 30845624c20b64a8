#!/bin/bash
# GLib's GTestDBus starts "dbus-daemon" from PATH with its own config file and
# --print-address: with bus1-broker in its place, a GDBus client works on it.
#
#   test-gtestdbus.sh BUS_BINARY   (BUS_BINARY_OVERRIDE, if set, replaces it)
set -eu
dir=$(mktemp -d /tmp/bus1-gtd.XXXXXX)
trap 'rm -rf "$dir"' EXIT
ln -s "$(realpath "${BUS_BINARY_OVERRIDE:-$1}")" "$dir/dbus-daemon"
PATH="$dir:$PATH" timeout 60 /usr/bin/python3 - <<'PY'
from gi.repository import Gio
t = Gio.TestDBus.new(Gio.TestDBusFlags.NONE)
t.up()
c = Gio.DBusConnection.new_for_address_sync(
    t.get_bus_address(),
    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT |
    Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
names = c.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus",
                    "org.freedesktop.DBus", "ListNames", None, None, 0, -1,
                    None).unpack()[0]
assert c.get_unique_name() in names, names
v = c.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus",
                "org.freedesktop.DBus", "GetConnectionUnixProcessID",
                __import__("gi.repository.GLib", fromlist=["GLib"]).Variant(
                    "(s)", ("org.freedesktop.DBus",)), None, 0, -1, None).unpack()[0]
assert v > 0
c.close_sync(None)
t.down()
print("gtestdbus ok")
PY
