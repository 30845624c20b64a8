# SPDX-License-Identifier: LGPL-2.1-or-later
"""Small helpers for the integration tests: python3-dbus (libdbus) clients
on the bus named by DBUS_SESSION_BUS_ADDRESS, a GLib loop to wait for
messages, and a minimal test runner. Run with /usr/bin/python3."""

import os
import sys
import traceback

import dbus
import dbus.bus
import dbus.lowlevel
from dbus.mainloop.glib import DBusGMainLoop

from glibloop import pump, wait_for  # noqa: F401 (for the tests)
from timefactor import time_factor

DBusGMainLoop(set_as_default=True)

ADDRESS = os.environ["DBUS_SESSION_BUS_ADDRESS"]
DRIVER = "org.freedesktop.DBus"
DPATH = "/org/freedesktop/DBus"
DIFACE = "org.freedesktop.DBus"
E = "org.freedesktop.DBus.Error."
# Some checks cover deliberate differences from dbus-daemon (see
# docs/bus1-broker.1); they are skipped when the tests run against it.
BUS1 = os.environ.get("BUS_BINARY", "").endswith("bus1-broker")

_clients = []


class Client:
    """One connection. Records every message it receives except replies to
    its own blocking calls; answers method calls registered in .methods."""

    def __init__(self, hello=True):
        self.conn = dbus.bus.BusConnection(ADDRESS)
        self.name = self.conn.get_unique_name()
        self.received = []
        self.methods = {}
        self.conn.add_message_filter(self._filter)
        _clients.append(self)

    def _filter(self, conn, msg):
        self.received.append(msg)
        if isinstance(msg, dbus.lowlevel.MethodCallMessage):
            fn = self.methods.get(msg.get_member())
            if fn is not None:
                fn(self, msg)
                return dbus.lowlevel.HANDLER_RESULT_HANDLED
        return dbus.lowlevel.HANDLER_RESULT_NOT_YET_HANDLED

    def call(self, dest, path, iface, member, sig="", args=(), timeout=5.0 * time_factor()):
        return self.conn.call_blocking(dest, path, iface, member, sig, args,
                                       timeout=timeout)

    def acall(self, dest, path, iface, member, sig="", args=(), timeout=5.0 * time_factor()):
        """Call without blocking the GLib loop (the callee may be in this
        process); returns the reply's value(s) or raises DBusException."""
        res = []
        self.conn.call_async(dest, path, iface, member, sig, args,
                             reply_handler=lambda *a: res.append(("ok", a)),
                             error_handler=lambda e: res.append(("err", e)),
                             timeout=timeout)
        wait_for(lambda: res, timeout + 1, "reply to " + member)
        kind, val = res[0]
        if kind == "err":
            raise val
        return val[0] if len(val) == 1 else val

    def drv(self, member, sig="", *args, iface=DIFACE, path=DPATH):
        return self.call(DRIVER, path, iface, member, sig, args)

    def add_match(self, rule):
        self.drv("AddMatch", "s", rule)

    def request_name(self, name, flags=0):
        return int(self.drv("RequestName", "su", name, flags))

    def release_name(self, name):
        return int(self.drv("ReleaseName", "s", name))

    def signals(self, member=None, iface=None):
        out = []
        for m in self.received:
            if not isinstance(m, dbus.lowlevel.SignalMessage):
                continue
            if member is not None and m.get_member() != member:
                continue
            if iface is not None and m.get_interface() != iface:
                continue
            out.append(m)
        return out

    def emit(self, path, iface, member, sig="", args=(), dest=None):
        m = dbus.lowlevel.SignalMessage(path, iface, member)
        if dest is not None:
            m.set_destination(dest)
        if sig:
            m.append(*args, signature=sig)
        self.conn.send_message(m)
        self.conn.flush()

    def clear(self):
        self.received = []

    def close(self):
        try:
            self.conn.close()
        except Exception:
            pass
        if self in _clients:
            _clients.remove(self)


def noc(client, name):
    """The NameOwnerChanged signals @client received about @name, as tuples."""
    out = []
    for m in client.signals("NameOwnerChanged", DIFACE):
        a = m.get_args_list()
        if a[0] == name:
            out.append((str(a[0]), str(a[1]), str(a[2])))
    return out


def expect_error(name, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except dbus.exceptions.DBusException as e:
        if e.get_dbus_name() != name:
            raise AssertionError("expected %s, got %s: %s" %
                                 (name, e.get_dbus_name(), e.get_dbus_message()))
        return e
    raise AssertionError("expected error %s, got success" % name)


def eq(a, b, what=""):
    if a != b:
        raise AssertionError("%s: expected %r, got %r" % (what or "value", b, a))


def run(tests):
    """Run test functions in order; report; exit 1 on any failure."""
    only = sys.argv[1:]
    failed = 0
    for t in tests:
        if only and t.__name__ not in only:
            continue
        try:
            t()
            print("ok   %s" % t.__name__)
        except Exception:
            failed += 1
            print("FAIL %s" % t.__name__)
            traceback.print_exc()
        for c in list(_clients):
            c.close()
        pump(0.01)
    print("%d failed" % failed)
    sys.exit(1 if failed else 0)
