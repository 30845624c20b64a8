# SPDX-License-Identifier: LGPL-2.1-or-later
"""The <policy> rules of the configuration (policy.conf): send, receive and
own denials, for calls, unicast and broadcast signals and driver calls; a
reply that answers no pending call, judged with requested_reply false."""

import socket

import dbus

import rawclient
from dbustest import E, Client, eq, expect_error, wait_for, run


def echo(client, msg):
    client.conn.send_message(dbus.lowlevel.MethodReturnMessage(msg))


def test_send_denied():
    a, b = Client(), Client()
    b.methods["Call"] = echo
    a.acall(b.name, "/", "org.bus1.Test.Allowed", "Call")
    expect_error(E + "AccessDenied", a.acall, b.name, "/", "org.bus1.Test.CannotSend", "Call")
    calls = [m for m in b.received if isinstance(m, dbus.lowlevel.MethodCallMessage)]
    eq([m.get_interface() for m in calls], ["org.bus1.Test.Allowed"])


def test_receive_denied():
    a, b = Client(), Client()
    b.methods["Call"] = echo
    expect_error(E + "AccessDenied", a.acall, b.name, "/", "org.bus1.Test.CannotReceive",
                 "Call")


def test_broadcast_filtered():
    a, b = Client(), Client()
    b.add_match("type='signal'")
    a.emit("/", "org.bus1.Test.CannotSend", "X")
    a.emit("/", "org.bus1.Test.CannotReceive", "Y")
    a.emit("/", "org.bus1.Test.Allowed", "Z")
    wait_for(lambda: b.signals("Z"), what="allowed signal")
    eq([m.get_member() for m in b.signals() if m.get_interface().startswith("org.bus1")],
       ["Z"])


def test_own_denied():
    a = Client()
    expect_error(E + "AccessDenied", a.request_name, "org.bus1.Test.Forbidden")
    expect_error(E + "AccessDenied", a.request_name, "org.bus1.Test.Forbidden.Sub")
    eq(a.request_name("org.bus1.Test.ForbiddenNot"), 1)


def test_driver_call_denied():
    a = Client()
    expect_error(E + "AccessDenied", a.drv, "GetId")
    a.drv("ListNames")


def test_unrequested_reply_denied():
    """<deny send_type="method_return"/> (requested_reply false by default for
    a deny) denies a reply nobody waits for, and a second reply; the
    requested reply goes through."""
    a, b = rawclient.Raw(), rawclient.Raw()
    forged = rawclient.marshal(rawclient.METHOD_RETURN, b.next_serial(), {
        rawclient.FIELD_REPLY_SERIAL: 77, rawclient.FIELD_DESTINATION: a.name})
    b.send_raw(forged)
    err = b.wait_reply(b.serial)
    eq(err[3].get(rawclient.FIELD_ERROR_NAME), E + "AccessDenied", "the forged reply denied")
    s = a.call(b.name, "/", "org.bus1.Test.Allowed", "Hi")
    while True:
        m = b.recv()
        if m[0] == rawclient.METHOD_CALL:
            break
    for _ in range(2):
        b.send_raw(rawclient.marshal(rawclient.METHOD_RETURN, b.next_serial(), {
            rawclient.FIELD_REPLY_SERIAL: m[2], rawclient.FIELD_DESTINATION: a.name}))
    eq(a.wait_reply(s)[0], rawclient.METHOD_RETURN, "the requested reply delivered")
    err = b.wait_reply(b.serial)
    eq(err[3].get(rawclient.FIELD_ERROR_NAME), E + "AccessDenied", "the second reply denied")
    try:
        extra = a.recv(0.3)
    except socket.timeout:
        extra = None
    eq(extra, None, "nothing else reached the caller")
    a.close()
    b.close()


run([test_send_denied, test_receive_denied, test_broadcast_filtered, test_own_denied,
     test_driver_call_denied, test_unrequested_reply_denied])
