# SPDX-License-Identifier: LGPL-2.1-or-later
"""Routing: calls to unique and well-known names, replies only when
expected, NoReply when the callee goes away, ServiceUnknown/NameHasNoOwner,
NO_REPLY_EXPECTED, unicast signals, fd passing."""

import os
import tempfile

import dbus
import dbus.lowlevel

from dbustest import BUS1, DRIVER, E, Client, eq, expect_error, pump, wait_for, run
from rawclient import (ERROR, FIELD_ERROR_NAME, FIELD_REPLY_SERIAL, FIELD_SENDER,
                       METHOD_CALL, METHOD_RETURN, SIGNAL, Raw, body_strings)

IFACE = "org.bus1.Test.Routing"


def echo(client, msg):
    r = dbus.lowlevel.MethodReturnMessage(msg)
    r.append(*msg.get_args_list(), signature=msg.get_signature())
    client.conn.send_message(r)


def test_call_unique_and_well_known():
    a, b = Client(), Client()
    b.methods["Echo"] = echo
    b.request_name("org.bus1.Test.Callee")
    eq(str(a.acall(b.name, "/", IFACE, "Echo", "s", ("hi",))), "hi")
    eq(str(a.acall("org.bus1.Test.Callee", "/", IFACE, "Echo", "s", ("wk",))), "wk")
    calls = [m for m in b.received if isinstance(m, dbus.lowlevel.MethodCallMessage)]
    eq([str(m.get_sender()) for m in calls], [a.name, a.name], "sender is stitched")
    eq(str(calls[1].get_destination()), "org.bus1.Test.Callee", "destination kept")


def test_errors_for_missing_names():
    a = Client()
    expect_error(E + "ServiceUnknown", a.call, "org.bus1.Test.Nobody", "/", IFACE, "X")
    expect_error(E + "ServiceUnknown", a.call, ":1.999999", "/", IFACE, "X")
    m = dbus.lowlevel.MethodCallMessage("org.bus1.Test.Nobody", "/", IFACE, "X")
    m.set_auto_start(False)
    try:
        a.conn.send_message_with_reply_and_block(m, 5)
        raise AssertionError("expected NameHasNoOwner")
    except dbus.exceptions.DBusException as e:
        eq(e.get_dbus_name(), E + "NameHasNoOwner")


def test_no_reply_on_callee_exit():
    a, b = Client(), Client()
    got = []
    b.methods["Hang"] = lambda c, m: None
    a.conn.call_async(b.name, "/", IFACE, "Hang", "", (), reply_handler=lambda *x: got.append("ok"),
                      error_handler=lambda e: got.append(e.get_dbus_name()), timeout=10)
    wait_for(lambda: any(isinstance(m, dbus.lowlevel.MethodCallMessage) for m in b.received),
             what="call delivered")
    b.close()
    wait_for(lambda: got, what="NoReply")
    eq(got, [E + "NoReply"])


def test_no_reply_expected():
    """NO_REPLY_EXPECTED: the callee sees the flag; the bus' error to such a
    call comes back all the same (ServiceUnknown for a missing name), as
    dbus-daemon sends it (test_daemon_parity.py compares the two); the
    callee's reply answers no pending call, and the session policy lets such
    a reply through (dbus-daemon's rule): the caller gets it."""
    a, b = Client(), Client()
    b.methods["Echo"] = echo
    m = dbus.lowlevel.MethodCallMessage(b.name, "/", IFACE, "Echo")
    m.append("x", signature="s")
    m.set_no_reply(True)
    a.conn.send_message(m)
    # and to a missing name: ServiceUnknown comes back, flag or not
    m = dbus.lowlevel.MethodCallMessage("org.bus1.Test.Nobody", "/", IFACE, "X")
    m.set_no_reply(True)
    missing_serial = a.conn.send_message(m)
    a.call(DRIVER, "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId")
    wait_for(lambda: any(isinstance(x, dbus.lowlevel.MethodCallMessage) for x in b.received),
             what="call delivered")
    call = [x for x in b.received if isinstance(x, dbus.lowlevel.MethodCallMessage)][0]
    eq(call.get_no_reply(), True, "flag passed on")
    pump(0.2)
    got = [(x.get_error_name() if isinstance(x, dbus.lowlevel.ErrorMessage) else "return",
            x.get_reply_serial())
           for x in a.received if isinstance(x, (dbus.lowlevel.ErrorMessage,
                                                 dbus.lowlevel.MethodReturnMessage))]
    eq([g for g in got if g[1] == missing_serial],
       [("org.freedesktop.DBus.Error.ServiceUnknown", missing_serial)],
       "ServiceUnknown for the call that expects no reply")
    wait_for(lambda: any(isinstance(x, dbus.lowlevel.MethodReturnMessage) and
                         x.get_reply_serial() == call.get_serial() for x in a.received),
             what="the callee's reply, unrequested, passed back")


def next_reply(raw):
    """The next method return or error @raw receives (signals skipped)."""
    while True:
        m = raw.recv()
        if m[0] in (METHOD_RETURN, ERROR):
            return m


def test_unrequested_replies_by_policy():
    """A reply nobody asked for, or a second reply, is judged by the policy as
    unrequested (requested_reply false), as dbus-daemon judges it: the
    session policy of this bus lets both through, as dbus-daemon's does
    (test_daemon_parity.py); one that denies them: test_policy.py."""
    a = Raw()
    b = Raw()
    # b forges a reply to a serial a never used for a call to b
    b.send_raw(__import__("rawclient").marshal(
        METHOD_RETURN, b.next_serial(), {FIELD_REPLY_SERIAL: 77,
                                        __import__("rawclient").FIELD_DESTINATION: a.name}))
    r = next_reply(a)
    eq((r[0], r[3].get(FIELD_REPLY_SERIAL)), (METHOD_RETURN, 77), "the forged reply delivered")
    # a real call: both replies go through
    s = a.call(b.name, "/", IFACE, "Hi")
    while True:
        m = b.recv()
        if m[0] == METHOD_CALL:
            break
    rc = __import__("rawclient")
    for _ in range(2):
        b.send_raw(rc.marshal(METHOD_RETURN, b.next_serial(),
                              {FIELD_REPLY_SERIAL: m[2], rc.FIELD_DESTINATION: a.name}))
    r = a.wait_reply(s)
    eq(r[0], METHOD_RETURN)
    eq(r[3][FIELD_SENDER], b.name)
    r = next_reply(a)
    eq((r[0], r[3].get(FIELD_REPLY_SERIAL)), (METHOD_RETURN, s), "the second reply delivered")
    a.close()
    b.close()


def test_unicast_signal():
    a, b, c = Client(), Client(), Client()
    c.add_match("type='signal',interface='%s'" % IFACE)
    b.add_match("type='signal',interface='%s'" % IFACE)
    a.emit("/", IFACE, "Uni", "s", ("x",), dest=b.name)
    a.emit("/", IFACE, "Broad", "s", ("y",))
    wait_for(lambda: b.signals("Broad") and c.signals("Broad"), what="broadcast")
    eq([m.get_member() for m in b.signals(iface=IFACE)], ["Uni", "Broad"])
    eq([m.get_member() for m in c.signals(iface=IFACE)], ["Broad"])
    eq(str(b.signals("Uni")[0].get_destination()), b.name)


def test_fd_passing():
    a, b = Client(), Client()
    got = []

    def take_fd(client, msg):
        fd = msg.get_args_list()[0].take()
        got.append(os.read(fd, 100))
        os.close(fd)
        client.conn.send_message(dbus.lowlevel.MethodReturnMessage(msg))

    b.methods["TakeFd"] = take_fd
    with tempfile.TemporaryFile() as f:
        f.write(b"through the bus")
        f.flush()
        f.seek(0)
        a.acall(b.name, "/", IFACE, "TakeFd", "h", (dbus.types.UnixFd(f.fileno()),))
    eq(got, [b"through the bus"])


def test_fd_to_client_without_fd_support():
    a = Client()
    raw = Raw(negotiate_fds=False)
    r, w = os.pipe()
    try:
        expect_error(E + "NotSupported", a.call, raw.name, "/", IFACE, "X", "h",
                     (dbus.types.UnixFd(r),))
        # a broadcast with fds skips it silently
        raw.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                 "AddMatch", "s", ("interface='%s'" % IFACE,))
        raw.wait_reply(raw.serial)
        a.emit("/", IFACE, "WithFd", "h", (dbus.types.UnixFd(w),))
        a.emit("/", IFACE, "Plain", "s", ("x",))
        while True:
            m = raw.recv()
            if m[0] == SIGNAL and m[3].get(3) in ("WithFd", "Plain"):
                break
        eq(m[3][3], "Plain", "fd signal skipped")
        eq(raw.fds, [])
    finally:
        os.close(r)
        os.close(w)
        raw.close()


def test_fds_without_negotiation_disconnects():
    raw = Raw(negotiate_fds=False)
    r, w = os.pipe()
    try:
        try:
            raw.signal("/", IFACE, "X", "h", (0,), fds=[r])
        except OSError:
            pass
        assert raw.is_closed(), "connection still open"
    finally:
        os.close(r)
        os.close(w)
        raw.close()
    Client().drv("GetId")


def test_first_message_must_be_hello():
    """As with dbus-daemon, a driver call before Hello gets AccessDenied and
    the connection stays (Hello still works); a signal before Hello
    disconnects (test_daemon_parity.py has every case)."""
    raw = Raw(hello=False)
    s = raw.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                 "ListNames")
    r = raw.wait_reply(s)
    eq(r[0], ERROR)
    eq(r[3][FIELD_ERROR_NAME], E + "AccessDenied")
    s = raw.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                 "Hello")
    eq(raw.wait_reply(s)[0], METHOD_RETURN)
    raw.close()
    raw = Raw(hello=False)
    raw.signal("/", IFACE, "X")
    assert raw.is_closed(), "connection still open"
    raw.close()


def test_sender_cannot_be_forged():
    a = Raw()
    b = Client()
    b.add_match("interface='%s'" % IFACE)
    rc = __import__("rawclient")
    a.send_raw(rc.marshal(SIGNAL, a.next_serial(),
                          {rc.FIELD_PATH: "/", rc.FIELD_INTERFACE: IFACE,
                           rc.FIELD_MEMBER: "Forged", FIELD_SENDER: "org.freedesktop.DBus"}))
    wait_for(lambda: b.signals("Forged"), what="signal")
    eq(str(b.signals("Forged")[0].get_sender()), a.name)
    a.close()


def test_peer_methods_without_destination():
    a = Raw()
    s = a.call(None, "/", "org.freedesktop.DBus.Peer", "Ping")
    eq(a.wait_reply(s)[0], METHOD_RETURN)
    s = a.call(None, "/", "org.bus1.Nope", "Foo")
    r = a.wait_reply(s)
    eq(r[0], ERROR)
    eq(r[3][FIELD_ERROR_NAME], E + "UnknownMethod")
    a.close()


run([test_call_unique_and_well_known, test_errors_for_missing_names,
     test_no_reply_on_callee_exit, test_no_reply_expected, test_unrequested_replies_by_policy,
     test_unicast_signal, test_fd_passing, test_fd_to_client_without_fd_support,
     test_fds_without_negotiation_disconnects, test_first_message_must_be_hello,
     test_sender_cannot_be_forged, test_peer_methods_without_destination])
