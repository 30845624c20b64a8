# SPDX-License-Identifier: LGPL-2.1-or-later
"""Monitors: BecomeMonitor with and without filters, what monitors see, a
monitor that sends is disconnected; dbus-monitor and busctl monitor show
the traffic."""

import os
import subprocess
import time

from dbustest import DIFACE, E, Client, eq, expect_error, pump, wait_for, run
from rawclient import METHOD_CALL, METHOD_RETURN, SIGNAL, Raw, body_strings

IFACE = "org.bus1.Test.Monitor"


def raw_monitor(rules):
    """A raw connection that became a monitor with @rules."""
    import struct
    from rawclient import marshal, FIELD_DESTINATION, FIELD_PATH, FIELD_INTERFACE, FIELD_MEMBER
    m = Raw()
    body = bytearray()
    arr = bytearray()
    for r in rules:
        while (4 + len(arr)) % 4:
            arr.append(0)
        b = r.encode()
        arr += struct.pack("<I", len(b)) + b + b"\0"
    body += struct.pack("<I", len(arr)) + arr
    while len(body) % 4:
        body.append(0)
    body += struct.pack("<I", 0)
    msg = marshal(METHOD_CALL, m.next_serial(),
                  {FIELD_DESTINATION: "org.freedesktop.DBus", FIELD_PATH: "/org/freedesktop/DBus",
                   FIELD_INTERFACE: "org.freedesktop.DBus.Monitoring",
                   FIELD_MEMBER: "BecomeMonitor"}, "asu", body=bytes(body))
    m.send_raw(msg)
    r = m.wait_reply(m.serial)
    eq(r[0], METHOD_RETURN, "BecomeMonitor reply")
    return m


def seen(mon, until_member, timeout=5):
    """Members of the messages a monitor saw, until one with @until_member."""
    out = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        msg = mon.recv(timeout)
        out.append((msg[0], msg[3].get(3), msg[3].get(7), msg[3].get(6)))
        if msg[3].get(3) == until_member:
            return out
    raise AssertionError("monitor did not see " + until_member)


def test_monitor_sees_everything():
    mon = raw_monitor([])
    a, b = Client(), Client()
    b.methods["Echo"] = lambda c, m: c.conn.send_message(
        __import__("dbus").lowlevel.MethodReturnMessage(m))
    a.acall(b.name, "/", IFACE, "Echo")
    a.emit("/", IFACE, "Uni", dest=b.name)
    a.emit("/", IFACE, "End")
    got = seen(mon, "End")
    kinds = [(t, m) for t, m, _, _ in got]
    assert (METHOD_CALL, "Echo") in kinds, kinds
    assert (METHOD_RETURN, None) in kinds, kinds
    assert (SIGNAL, "Uni") in kinds, kinds
    # messages to and from the driver, too
    assert (METHOD_CALL, "Hello") in kinds, kinds
    assert (SIGNAL, "NameOwnerChanged") in kinds, kinds
    echo = [g for g in got if g[1] == "Echo"][0]
    eq(echo[2], a.name, "sender stitched")
    mon.close()


def test_monitor_filters():
    mon = raw_monitor(["type='signal',interface='%s',member='Wanted'" % IFACE,
                       "type='method_call',member='AlsoWanted'"])
    a, b = Client(), Client()
    a.emit("/", IFACE, "Unwanted")
    a.emit("/", IFACE, "Wanted", dest=b.name)
    try:
        a.acall(b.name, "/", IFACE, "AlsoWanted", timeout=0.2)
    except Exception:
        pass
    a.emit("/", IFACE, "Wanted")
    got = seen(mon, "Wanted")
    # the monitor's own NameLost (its unique name) is sent to it directly
    eq([g[1] for g in got if g[1] != "NameLost"], ["Wanted"], "first filtered message")
    got = seen(mon, "Wanted")
    eq([g[1] for g in got], ["AlsoWanted", "Wanted"])
    mon.close()


def test_monitor_loses_names_and_cannot_send():
    o = Client()
    o.add_match("type='signal',member='NameOwnerChanged'")
    m = Raw()
    m.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
           "RequestName", "su", ("org.bus1.Test.WillMonitor", 0))
    m.wait_reply(m.serial)
    name = m.name
    m.close()
    mon = raw_monitor([])
    wait_for(lambda: any(str(s.get_args_list()[0]) == mon.name and str(s.get_args_list()[2]) == ""
                         for s in o.signals("NameOwnerChanged")), what="monitor's name gone")
    names = [str(x) for x in o.drv("ListNames")]
    assert mon.name not in names, names
    # a monitor may not send anything
    mon.signal("/", IFACE, "FromMonitor")
    assert mon.is_closed(), "monitor that sent was not disconnected"
    mon.close()
    o.drv("GetId")


def test_become_monitor_privileged_and_errors():
    c = Client()
    expect_error(E + "InvalidArgs", c.drv, "BecomeMonitor", "asu", [], 2,
                 iface="org.freedesktop.DBus.Monitoring")
    expect_error(E + "MatchRuleInvalid", c.drv, "BecomeMonitor", "asu", ["bogus"], 0,
                 iface="org.freedesktop.DBus.Monitoring")


def _tool_sees(cmd, marker, timeout=30):
    """The tool prints @marker's signal. It subscribes at a time of its own
    (slow under valgrind or in a guest), so emit until it shows up."""
    env = dict(os.environ)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    os.set_blocking(p.stdout.fileno(), False)
    out = b""
    try:
        a = Client()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            a.emit("/org/bus1/test", IFACE, marker, "s", ("payload-" + marker,))
            pump(0.2)
            try:
                out += p.stdout.read() or b""
            except BlockingIOError:
                pass
            text = out.decode(errors="replace")
            if marker in text and "payload-" + marker in text:
                return
    finally:
        p.terminate()
        out += p.communicate(timeout=5)[0] or b""
    text = out.decode(errors="replace")
    assert marker in text and "payload-" + marker in text, text[-2000:]


def test_dbus_monitor_tool():
    _tool_sees(["dbus-monitor", "--session"], "SeenByDbusMonitor")


def test_busctl_monitor_tool():
    _tool_sees(["stdbuf", "-oL", "busctl", "--user", "monitor"], "SeenByBusctl")


run([test_monitor_sees_everything, test_monitor_filters, test_monitor_loses_names_and_cannot_send,
     test_become_monitor_privileged_and_errors, test_dbus_monitor_tool, test_busctl_monitor_tool])
