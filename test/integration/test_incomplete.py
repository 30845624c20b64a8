# SPDX-License-Identifier: LGPL-2.1-or-later
"""<limit name="max_incomplete_connections"> (incomplete-limit.conf: 2): while
two connections have not finished authenticating, the bus stops accepting, as
dbus-daemon does: a third client waits in the listen backlog (not refused),
and is served once one of the stalled ones goes away. Completed connections
do not count. BUS_BINARY_OVERRIDE=/usr/bin/dbus-daemon passes too."""

import socket

from dbustest import ADDRESS, Client, eq, run
from rawclient import sasl_auth_line

PATH = dict(kv.split("=", 1) for kv in ADDRESS[len("unix:"):].split(","))["path"]


def raw():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(PATH)
    s.settimeout(10)
    return s


def auth_reply(s, timeout):
    """Send an AUTH EXTERNAL line; return the bus' answer or None if none came."""
    s.sendall(sasl_auth_line())
    s.settimeout(timeout)
    try:
        return s.recv(256)
    except socket.timeout:
        return None


def accepted_incomplete():
    """A connection the bus has accepted (it answered) but which stays unauthenticated."""
    s = raw()
    s.sendall(b"\0AUTH\r\n")  # no mechanism: the bus lists its mechanisms
    got = s.recv(256)
    assert got.startswith(b"REJECTED"), got
    return s


def test_stalled_ones_block_accept():
    a = accepted_incomplete()
    b = accepted_incomplete()
    c = raw()  # connect() succeeds: the kernel's backlog
    eq(auth_reply(c, 0.7), None, "a third connection was served at the limit")
    # a stalled one goes away: the waiting client is accepted and served
    a.close()
    got = auth_reply(c, 10) or b""
    if not got.startswith(b"OK "):
        # its AUTH line was sent before accept(); it is read now
        c.settimeout(10)
        got += c.recv(256)
    assert got.startswith(b"OK "), got
    # b is still there, untouched
    b.settimeout(0.2)
    try:
        data = b.recv(1)
    except socket.timeout:
        data = None
    eq(data, None, "the other incomplete connection was closed")
    b.close()
    c.close()


def test_completed_do_not_count():
    clients = [Client() for _ in range(5)]
    for cl in clients:
        cl.drv("GetId")
    # Five completed connections beside: both incomplete places are still free.
    a = accepted_incomplete()
    b = accepted_incomplete()
    c = raw()
    eq(auth_reply(c, 0.7), None, "a third incomplete connection was served at the limit")
    for s in (a, b, c):
        s.close()
    for cl in clients:
        eq(len(cl.drv("GetId")), 32, "a completed client is served")


run([test_stalled_ones_block_accept, test_completed_do_not_count])
