# SPDX-License-Identifier: LGPL-2.1-or-later
"""ProcessFD in GetConnectionCredentials: a pidfd of the peer process, as
dbus-daemon >= 1.15.8 and dbus-broker >= 35 return it (key "ProcessFD", type
'h', the fd attached to the reply), only to callers that negotiated fd
passing. Run by run-with-bus.sh; also against dbus-daemon
(BUS_BINARY_OVERRIDE): a dbus-daemon without ProcessFD (1.14) may leave the
key out, bus1-broker must return it and it must name the right process.
"""

import os
import subprocess
import sys
import time

from dbustest import ADDRESS, BUS1, DIFACE, DPATH, DRIVER, Client, eq, run, wait_for
import rawclient as rc
from gi.repository import Gio, GLib

BUS_PID = int(os.environ["BUS_PID"])


def fd_pid(fd):
    """The "Pid:" of a pidfd (-1: the process is gone), None if @fd is none."""
    with open("/proc/self/fdinfo/%d" % fd) as f:
        for line in f:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    return None


def creds(client, name):
    return client.call(DRIVER, DPATH, DIFACE, "GetConnectionCredentials", "s", (name,))


def take_process_fd(d, what):
    """The fd of d["ProcessFD"] (python-dbus UnixFd), or None where it is absent
    on a daemon that does not have the key."""
    if "ProcessFD" not in d:
        if BUS1:
            raise AssertionError("%s: no ProcessFD: %r" % (what, dict(d)))
        return None
    return d["ProcessFD"].take()


def test_own_process_fd():
    """A libdbus client asks for its own credentials: the fd names itself."""
    c = Client()
    d = creds(c, c.name)
    eq(int(d["ProcessID"]), os.getpid(), "ProcessID")
    fd = take_process_fd(d, "own credentials")
    if fd is None:
        return
    try:
        eq(fd_pid(fd), os.getpid(), "Pid: of the ProcessFD")
    finally:
        os.close(fd)


def test_peer_process_fd():
    """The credentials of another process' connection name that process."""
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import dbus, sys; c = dbus.bus.BusConnection(sys.argv[1]); "
         "print(c.get_unique_name(), flush=True); sys.stdin.read()", ADDRESS],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        name = child.stdout.readline().strip()
        c = Client()
        d = creds(c, name)
        eq(int(d["ProcessID"]), child.pid, "ProcessID of the child")
        fd = take_process_fd(d, "the child's credentials")
        if fd is None:
            return
        try:
            eq(fd_pid(fd), child.pid, "Pid: of the child's ProcessFD")
            # A pidfd: it polls readable once the process exits, and then
            # no longer resolves (Pid: -1), unlike a pid that may be reused.
            child.stdin.close()
            child.wait(10)
            eq(fd_pid(fd), -1, "Pid: of the ProcessFD after the child exited")
        finally:
            os.close(fd)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_bus_process_fd():
    """org.freedesktop.DBus has the bus' own process."""
    c = Client()
    d = creds(c, DRIVER)
    eq(int(d["ProcessID"]), BUS_PID, "the bus' ProcessID")
    fd = take_process_fd(d, "the bus' credentials")
    if fd is None:
        return
    try:
        eq(fd_pid(fd), BUS_PID, "Pid: of the bus' ProcessFD")
    finally:
        os.close(fd)


def test_gdbus_process_fd():
    """GDBus gets the fd in the reply's fd list; the 'h' value indexes it."""
    conn = Gio.DBusConnection.new_for_address_sync(
        ADDRESS, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT |
        Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
    try:
        reply, fdlist = conn.call_with_unix_fd_list_sync(
            DRIVER, DPATH, DIFACE, "GetConnectionCredentials",
            GLib.Variant("(s)", (conn.get_unique_name(),)), GLib.VariantType("(a{sv})"),
            Gio.DBusCallFlags.NONE, 5000, None, None)
        d = reply.unpack()[0]
        if "ProcessFD" not in d:
            if BUS1:
                raise AssertionError("GDBus: no ProcessFD: %r" % d)
            return
        fd = fdlist.get(d["ProcessFD"])
        try:
            eq(fd_pid(fd), os.getpid(), "Pid: of GDBus' ProcessFD")
        finally:
            os.close(fd)
    finally:
        conn.close_sync(None)


def test_no_fds_no_process_fd():
    """A client that did not negotiate fd passing gets no ProcessFD and no fd."""
    r = rc.Raw(negotiate_fds=False)
    other = Client()
    for name in (r.name, other.name, DRIVER):
        serial = r.call(DRIVER, DPATH, DIFACE, "GetConnectionCredentials", "s", (name,))
        m = r.wait_reply(serial)
        eq(m[0], rc.METHOD_RETURN, "reply type for %s" % name)
        eq(m[3].get(rc.FIELD_UNIX_FDS), None, "UNIX_FDS of the reply for %s" % name)
        eq(b"ProcessFD" in m[4], False, "ProcessFD in the reply for %s" % name)
        eq(b"ProcessID" in m[4], True, "ProcessID in the reply for %s" % name)
    eq(r.fds, [], "fds received")
    eq(r.is_closed(0.2), False, "connection still open")
    r.close()


def bus_pidfds():
    """pidfds the bus holds (by /proc/BUS_PID/fd: readable as root or as its user)."""
    n = 0
    base = "/proc/%d/fd" % BUS_PID
    for fd in os.listdir(base):
        try:
            if "pidfd" in os.readlink(os.path.join(base, fd)):
                n += 1
        except OSError:
            pass
    return n


def settled_pidfds():
    """bus_pidfds() once it stops changing (copies in written replies are closed)."""
    last, same = bus_pidfds(), 0
    while same < 3:
        time.sleep(0.05)
        n = bus_pidfds()
        same = same + 1 if n == last else 0
        last = n
    return last


def test_one_pidfd_per_connection():
    """The bus holds one pidfd per connection, closed at disconnect; the fds it
    sends in replies are not kept."""
    if not BUS1:
        return  # the fd counts are bus1-broker's
    creds(Client(), DRIVER)  # the bus' own pidfd, opened once
    base = settled_pidfds()
    clients = [rc.Raw() for _ in range(10)]
    wait_for(lambda: bus_pidfds() == base + 10, 5, "10 more pidfds in the bus")
    asker = Client()
    wait_for(lambda: bus_pidfds() == base + 11, 5, "one pidfd for the asker")
    for _ in range(20):
        for c in clients[:3] + [asker]:
            d = creds(asker, c.name)
            os.close(take_process_fd(d, "credentials"))
    # The copy a reply carries is closed once it is written (the client may
    # read the reply a moment before that): back to one per connection.
    wait_for(lambda: bus_pidfds() == base + 11, 5,
             "one pidfd per connection after 80 replies with a ProcessFD")
    for c in clients:
        c.close()
    asker.close()
    wait_for(lambda: bus_pidfds() == base, 5, "pidfds released at disconnect")


if __name__ == "__main__":
    run([test_own_process_fd, test_peer_process_fd, test_bus_process_fd,
         test_gdbus_process_fd, test_no_fds_no_process_fd, test_one_pidfd_per_connection])
