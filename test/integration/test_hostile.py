# SPDX-License-Identifier: LGPL-2.1-or-later
"""Hostile and greedy clients against a bus with small limits
(small-limits.conf): each is cut off or refused, and the others carry on."""

import os
import socket
import struct
import time

from dbustest import BUS1, E, Client, eq, expect_error, pump, wait_for, run
from rawclient import (FIELD_DESTINATION, FIELD_INTERFACE, FIELD_MEMBER, FIELD_PATH,
                       FIELD_SIGNATURE, FIELD_UNIX_FDS, METHOD_CALL, SIGNAL, ERROR, Raw,
                       marshal, socket_path)

IFACE = "org.bus1.Test.Hostile"
FIELD_ERROR_NAME = 4


def bystander():
    """A well-behaved client that must keep working."""
    c = Client()
    c.add_match("type='signal',interface='%s'" % IFACE)
    return c


def still_fine(c):
    eq(len(str(c.drv("GetId"))), 32, "bystander works")


def bus_fd_count():
    pid = os.environ.get("BUS_PID")
    return len(os.listdir("/proc/%s/fd" % pid)) if pid else 0


def test_garbage_after_auth():
    by = bystander()
    r = Raw(hello=False)
    r.send_raw(b"GARBAGE!" * 100)
    assert r.is_closed(), "garbage accepted"
    r.close()
    r = Raw()
    r.send_raw(b"l\x01\x00\x01" + b"\xff" * 60)
    assert r.is_closed(), "garbage after Hello accepted"
    r.close()
    still_fine(by)


def test_garbage_during_auth():
    by = bystander()
    r = Raw(auth=False)
    r.send_raw(b"AUTH EXTERNAL 30\r\n")  # no leading NUL byte
    assert r.is_closed(), "no NUL accepted"
    r.close()
    r = Raw(auth=False)
    try:
        r.send_raw(b"\0" + b"A" * 70000)  # an endless line
    except (BrokenPipeError, ConnectionResetError):
        pass  # cut off while still writing: what is being tested
    assert r.is_closed(), "endless SASL line accepted"
    r.close()
    still_fine(by)


def test_invalid_message():
    by = bystander()
    r = Raw()
    # a signal without member
    r.send_raw(marshal(SIGNAL, r.next_serial(), {FIELD_PATH: "/", FIELD_INTERFACE: IFACE}))
    assert r.is_closed(), "invalid message accepted"
    r.close()
    r = Raw()
    # body does not match the signature
    r.send_raw(marshal(SIGNAL, r.next_serial(), {FIELD_PATH: "/", FIELD_INTERFACE: IFACE,
                                                 FIELD_MEMBER: "X", FIELD_SIGNATURE: "u"},
                       body=b"\x01"))
    assert r.is_closed(), "truncated body accepted"
    r.close()
    still_fine(by)


def test_oversized_message():
    by = bystander()
    r = Raw()
    big = 1024 * 1024
    head = marshal(SIGNAL, r.next_serial(), {FIELD_PATH: "/", FIELD_INTERFACE: IFACE,
                                             FIELD_MEMBER: "Big"}, "s", body=b"")
    # claim a 1 MiB body (max_message_size is 64 KiB) and send only the header
    head = head[:4] + struct.pack("<I", big) + head[8:]
    r.send_raw(head)
    t0 = time.monotonic()
    assert r.is_closed(), "oversized message accepted"
    assert time.monotonic() - t0 < 3, "bus waited for the body"
    r.close()
    still_fine(by)


def test_too_many_fds_in_one_message():
    by = bystander()
    r = Raw()
    fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(5)]
    try:
        r.signal("/", IFACE, "Fds", "hhhhh", (0, 1, 2, 3, 4), fds=fds)
        assert r.is_closed(), "5 fds accepted (max_message_unix_fds=4)"
    finally:
        for fd in fds:
            os.close(fd)
        r.close()
    still_fine(by)


def test_fd_flood_to_non_reader():
    """fds sent to a peer that never reads stay in the bus only up to the
    receiver's fd quota; then calls fail with LimitsExceeded."""
    by = bystander()
    sink = Raw()          # never reads
    src = Raw()
    before = bus_fd_count()
    fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(4)]
    errors = 0
    try:
        for _ in range(40):
            s = src.call(sink.name, "/", IFACE, "TakeFds", "hhhh", (0, 1, 2, 3), fds=fds)
            # the bus answers at once only when it refuses
        src.sock.settimeout(0.5)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                m = src.recv(0.5)
            except socket.timeout:
                break
            if m[0] == ERROR:
                eq(m[3][FIELD_ERROR_NAME], E + "LimitsExceeded")
                errors += 1
    finally:
        for fd in fds:
            os.close(fd)
    during = bus_fd_count()
    assert errors > 0, "no LimitsExceeded for an fd flood"
    if before:
        assert during - before <= 64 + 16, (before, during)
    sink.close()
    src.close()
    time.sleep(0.2)
    if before:
        assert bus_fd_count() <= before + 4, (before, bus_fd_count())
    still_fine(by)


BYSTANDER = r"""
import sys, time
sys.path.insert(0, %r)
from dbustest import Client, wait_for
by = Client()
by.add_match("type='signal',interface='org.bus1.Test.Hostile',member='Flood'")
print("ready", flush=True)
try:
    wait_for(lambda: len(by.signals("Flood")) == int(sys.argv[1]), timeout=60)
except AssertionError:
    pass
print(len(by.signals("Flood")), flush=True)
"""


def test_non_reader_is_disconnected():
    """A client that stops reading while signals pile up is cut off at its
    queue limit (max_outgoing_bytes); a reader in another process gets every
    signal."""
    import subprocess
    import sys
    n = 120
    by = subprocess.Popen([sys.executable, "-c", BYSTANDER % os.path.dirname(
        os.path.abspath(__file__)), str(n)], stdout=subprocess.PIPE, text=True)
    eq(by.stdout.readline().strip(), "ready")
    sink = Raw()
    sink.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
              "AddMatch", "s", ("type='signal',interface='%s'" % IFACE,))
    sink.wait_reply(sink.serial)
    src = Client()
    payload = "x" * 30000
    for i in range(n):
        src.emit("/", IFACE, "Flood", "s", (payload,))
        # paced so that the (slow, python) reader is never 1 MiB behind:
        # only the client that does not read at all hits its queue limit
        time.sleep(0.01)
    eq(int(by.stdout.readline().strip()), n, "signals the reader got")
    by.wait()
    # the sink is gone: after draining what it was sent, it reads EOF
    assert sink.is_closed(timeout=5), "non-reading client not disconnected"
    sink.close()
    c = Client()
    names = [str(x) for x in c.drv("ListNames")]
    assert sink.name not in names
    still_fine(c)


def test_limits_exceeded():
    c = Client()
    for i in range(20):
        c.add_match("member='M%d'" % i)
    expect_error(E + "LimitsExceeded", c.add_match, "member='M20'")
    c.drv("RemoveMatch", "s", "member='M0'")
    c.add_match("member='M21'")
    # max_names_per_connection=10, and the unique name counts (as in dbus-daemon)
    for i in range(9):
        eq(c.request_name("org.bus1.Test.L%d" % i), 1)
    expect_error(E + "LimitsExceeded", c.request_name, "org.bus1.Test.L9")
    eq(c.request_name("org.bus1.Test.L0"), 4, "already owned name is fine")
    # long match rule
    expect_error(E + "LimitsExceeded" if BUS1 else E + "MatchRuleInvalid", c.add_match,
                 "member='%s'" % ("a" * 2000))


def test_pending_replies_limit():
    caller = Raw()
    callee = Raw()  # never answers
    serials = [caller.call(callee.name, "/", IFACE, "Hang") for _ in range(9)]
    m = caller.wait_reply(serials[-1])
    eq(m[0], ERROR)
    eq(m[3][FIELD_ERROR_NAME], E + "LimitsExceeded")
    callee.close()
    # the 8 pending calls fail with NoReply
    got = 0
    for s in serials[:8]:
        m = caller.wait_reply(s)
        eq(m[3][FIELD_ERROR_NAME], E + "NoReply")
        got += 1
    eq(got, 8)
    caller.close()


def test_reply_timeout():
    """reply_timeout=1500 ms: a call nobody answers fails with NoReply."""
    caller = Raw()
    callee = Raw()
    t0 = time.monotonic()
    s = caller.call(callee.name, "/", IFACE, "Hang")
    m = caller.wait_reply(s, timeout=5)
    eq(m[3][FIELD_ERROR_NAME], E + "NoReply")
    assert 1.0 < time.monotonic() - t0 < 4, time.monotonic() - t0
    # the late reply answers no pending call any more: the policy judges it
    # as unrequested, and this bus' (session.conf's) lets it through, as
    # dbus-daemon does (test_daemon_parity.py); the caller gets it
    callee_call = None
    while callee_call is None:
        x = callee.recv()
        if x[0] == METHOD_CALL:
            callee_call = x
    import rawclient as rc
    callee.send_raw(rc.marshal(rc.METHOD_RETURN, callee.next_serial(),
                               {rc.FIELD_REPLY_SERIAL: callee_call[2],
                                FIELD_DESTINATION: caller.name}))
    late = caller.recv(5)
    eq((late[0], late[3].get(rc.FIELD_REPLY_SERIAL)), (rc.METHOD_RETURN, s),
       "the late reply, unrequested, delivered")
    caller.close()
    callee.close()


def test_auth_timeout():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(socket_path(os.environ["DBUS_SESSION_BUS_ADDRESS"]))
    s.settimeout(5)
    t0 = time.monotonic()
    try:
        eq(s.recv(10), b"", "closed")
    except ConnectionResetError:
        pass
    assert time.monotonic() - t0 < 4, "auth_timeout not applied"
    s.close()


def test_pending_fd_timeout():
    """pending_fd_timeout (1 s here): a client that sends the start of a
    message carrying an fd and stalls is disconnected; one that completes its
    message in time, or stalls without fds, is not."""
    c = bystander()
    fds_before = bus_fd_count()
    r, w = os.pipe()
    m = marshal(METHOD_CALL, 7, {FIELD_PATH: "/org/freedesktop/DBus",
                                 FIELD_INTERFACE: "org.freedesktop.DBus.Peer",
                                 FIELD_MEMBER: "Ping", FIELD_DESTINATION: "org.freedesktop.DBus",
                                 FIELD_UNIX_FDS: 1}, "h", (0,))

    # completed in time: served, and still connected after the timeout
    ok = Raw()
    ok.send_raw(m[:20], [r])
    time.sleep(0.3)
    ok.send_raw(m[20:])
    eq(ok.wait_reply(7)[3].get(5), 7, "a completed message is answered")
    assert not ok.is_closed(1.5), "disconnected although its message was complete"

    # stalled without fds: not this limit's business
    nofd = Raw()
    nofd.send_raw(m[:20])

    # stalled with an fd: disconnected after about a second
    bad = Raw()
    t0 = time.monotonic()
    bad.send_raw(m[:20], [r])
    assert bad.is_closed(8), "fds held in an incomplete message past pending_fd_timeout"
    held = time.monotonic() - t0
    assert 0.8 <= held < 6, held
    assert not nofd.is_closed(0.2), "a partial message without fds was cut off"
    os.close(r)
    os.close(w)
    for x in (ok, nofd, bad):
        x.close()
    wait_for(lambda: bus_fd_count() <= fds_before, what="the bus let go of the fds")
    still_fine(c)


run([test_garbage_after_auth, test_garbage_during_auth, test_invalid_message,
     test_oversized_message, test_too_many_fds_in_one_message, test_fd_flood_to_non_reader,
     test_non_reader_is_disconnected, test_limits_exceeded, test_pending_replies_limit,
     test_reply_timeout, test_auth_timeout, test_pending_fd_timeout])
