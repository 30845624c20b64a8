# SPDX-License-Identifier: LGPL-2.1-or-later
"""A restart by systemd that keeps the bus in the service's fd store
(broker/upgrade/fdstore.h), against a stand-in for the service manager: it owns
$NOTIFY_SOCKET, keeps what FDSTORE=1 sends (by FDNAME), drops what
FDSTOREREMOVE=1 names, and starts the next bus with the store as
LISTEN_FDS / LISTEN_FDNAMES, as systemd does for a service with
FileDescriptorStoreMax=. Cases:

  handover  SIGTERM, bus gone, client traffic meanwhile, next bus: same
            GetId, names, match rules, call in flight answered, no signal
            of a disconnect, the store emptied again
  socket    the same with the listening socket of a .socket unit
            (--address=systemd:) passed alongside, which the stand-in
            makes blocking (and inheritable) before each start as systemd
            does (NonBlocking=no): the same open file as the listener in
            the state; then several new clients connect one after another
  replaced  the .socket unit restarted while the bus was handed over: a
            new listening socket on the same path; the restored bus serves
            it (new clients) and keeps the carried ones
  user      (as root) <user> and <pidfile> in the configuration: the new
            process of a hand-over runs as that user again and writes its
            own pid
  garbage   a state that cannot be used: its clients are disconnected,
            the new bus serves on its sockets, the store is emptied
  inherited a bus that only inherited the service's environment (another
            $SYSTEMD_EXEC_PID) stops on SIGTERM and stores nothing
  crash     SIGKILL: nothing handed over, but the crash journal
            (broker/objects/journal.h) is in the store: the next bus
            resumes, the client keeps its name; a journal that crashed a
            start is discarded and a new bus starts clean, on the .socket
            unit's listening socket (never shut down, held once); so is
            one with a record that does not parse, in the same start
  native    (with /dev/bus1 and $BUS1_NATIVE_HELPER, in the guest) a native
            service across three hand-overs and a crash (SIGKILL), calls
            sent while no bus runs; its signal sent to the dead bus is
            delivered by the next one

  test_fdstore.py BUS_BINARY [CASE...]
"""

import array
import mmap
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rawclient  # noqa: E402
from rawclient import FIELD_MEMBER, FIELD_SENDER, METHOD_CALL, METHOD_RETURN, SIGNAL  # noqa: E402

DBUS = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")

failures = []
started = []  # every bus pid: none may outlive the test, whatever failed


def check(cond, what):
    if cond:
        print("ok   " + what)
    else:
        print("FAIL " + what)
        failures.append(what)
    return cond


HANDOVER_NAMES = ("bus1-fds", "bus1-state")


class Manager:
    """The part of systemd the bus talks to: $NOTIFY_SOCKET and the fd store,
    read as systemd reads it, all the time (a thread): the bus does not wait
    for it."""

    def __init__(self, tmp):
        self.path = os.path.join(tmp, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.store = []          # [(name, fd)] in the order stored
        self.lines = []
        self.lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            with self.lock:
                self._pump(0.01)
            time.sleep(0.005)

    def pump(self, timeout=0.0):
        """Let the thread read what is there (and wait @timeout)."""
        time.sleep(max(timeout, 0.03))

    def _pump(self, timeout):
        self.sock.settimeout(timeout if timeout > 0 else 0.001)
        while True:
            try:
                msg, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(253 * 4))
            except (socket.timeout, BlockingIOError):
                return
            fds = array.array("i")
            for level, typ, data in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    fds.frombytes(data[:len(data) - len(data) % 4])
            kv = dict(line.split("=", 1) for line in msg.decode().split("\n") if "=" in line)
            self.lines.append(kv)
            name = kv.get("FDNAME", "stored")
            if kv.get("FDSTORE") == "1":
                self.store.extend((name, fd) for fd in fds)
            else:
                for fd in fds:
                    os.close(fd)
            if kv.get("FDSTOREREMOVE") == "1":
                for n, fd in [e for e in self.store if e[0] == name]:
                    os.close(fd)
                self.store = [e for e in self.store if e[0] != name]
            self.sock.settimeout(0.001)

    def wait_for(self, key, value, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            self.pump(0.05)
            if any(kv.get(key) == value for kv in self.lines):
                return True
        return False

    def names(self):
        with self.lock:
            return sorted(n for n, _ in self.store)

    def handover_names(self):
        """The entries of a hand-over, without the crash journal's."""
        return [n for n in self.names() if n in HANDOVER_NAMES]

    def journal_names(self):
        return sorted(set(n for n in self.names() if n not in HANDOVER_NAMES))

    def discard(self):
        with self.lock:
            for _, fd in self.store:
                os.close(fd)
            self.store = []


class Bus:
    """bus1-broker started as systemd starts a service: store fds at 3..."""

    def __init__(self, binary, tmp, manager, args, passed=()):
        self.log_path = os.path.join(tmp, "bus-%d.log" % time.monotonic_ns())
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with manager.lock:
            entries = list(passed) + list(manager.store)
            manager.lines = []
        env = dict(os.environ, NOTIFY_SOCKET=manager.path, FDSTORE="1024")
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        for k in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
            env.pop(k, None)
        if entries:
            env["LISTEN_FDS"] = str(len(entries))
            env["LISTEN_FDNAMES"] = ":".join(n for n, _ in entries)
        # systemd's exec: a .socket unit's sockets lose O_NONBLOCK (NonBlocking=no),
        # on the open file itself, shared with whoever else holds it.
        for _, fd in passed:
            os.set_blocking(fd, True)
        pid = os.fork()
        if pid == 0:
            try:
                high = [os.dup2(fd, 200 + i) for i, (_, fd) in enumerate(entries)]
                for i, fd in enumerate(high):
                    os.dup2(fd, 3 + i)
                os.dup2(log, 2)
                os.closerange(3 + len(entries), 65536)
                if entries:
                    env["LISTEN_PID"] = str(os.getpid())
                env["SYSTEMD_EXEC_PID"] = str(os.getpid())
                os.execve(binary, [binary] + args, env)
            finally:
                os._exit(127)
        os.close(log)
        self.pid = pid
        started.append(pid)
        # The store's copies stay with the manager (systemd keeps them too).
        check(manager.wait_for("READY", "1"), "bus %d says READY=1" % pid)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def wait(self, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            p, status = os.waitpid(self.pid, os.WNOHANG)
            if p:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.02)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        return None


def call(c, member, sig="", args=()):
    m = c.wait_reply(c.call(*DBUS, member, sig, args))
    return m


def get_id(c):
    return rawclient.body_strings(call(c, "GetId")[4])[0]


def name_owner(c, name):
    m = call(c, "GetNameOwner", "s", (name,))
    return rawclient.body_strings(m[4])[0] if m[0] == rawclient.METHOD_RETURN else None


def drain(c, timeout=0.2):
    """Every message that arrives within @timeout: [(type, member, sender)]."""
    out = []
    try:
        while True:
            m = c.recv(timeout)
            out.append((m[0], m[3].get(FIELD_MEMBER), m[3].get(FIELD_SENDER), m))
    except socket.timeout:
        return out


def scenario_handover(binary, tmp, socket_unit):
    what = "socket" if socket_unit else "handover"
    mgr = Manager(tmp)
    path = os.path.join(tmp, "bus-" + what)
    passed = []
    if socket_unit:
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(path)
        ls.listen(64)
        passed = [("dbus.socket", ls.fileno())]
        args = ["--config-file=" + conf(tmp, ""), "--address=systemd:", "--nofork"]
    else:
        args = ["--config-file=" + conf(tmp, "<listen>unix:path=%s</listen>" % path), "--nofork"]
    address = "unix:path=" + path
    bus = Bus(binary, tmp, mgr, args, passed)
    a = rawclient.Raw(address)
    b = rawclient.Raw(address)
    watcher = rawclient.Raw(address)
    guid = get_id(a)
    call(a, "RequestName", "su", ("com.example.A", 4))
    call(watcher, "AddMatch", "s", ("type='signal',sender='org.freedesktop.DBus'",))
    call(b, "AddMatch", "s", ("type='signal',interface='com.example.Tick'",))
    # A call from a to b, read by b and not answered yet.
    serial = a.call(b.name, "/", "com.example.Echo", "Echo", "s", ("in flight",))
    m = b.recv()
    check(m[0] == METHOD_CALL and m[3].get(FIELD_MEMBER) == "Echo", what + ": b got the call")
    drain(watcher)

    os.kill(bus.pid, signal.SIGTERM)
    check(bus.wait() == 0, what + ": the old bus exits 0 on SIGTERM")
    mgr.pump(0.1)
    check(mgr.handover_names() == ["bus1-fds", "bus1-state"],
          what + ": store holds bus1-fds and bus1-state (%s)" % mgr.names())
    check("bus1-journal-a" in mgr.names() or "bus1-journal-b" in mgr.names(),
          what + ": and the crash journal (%s)" % mgr.names())
    check("fd store: bus handed over" in bus.log(), what + ": the old bus logged the hand-over")
    check(os.path.exists(path), what + ": the socket file stays")
    # Nobody serves now: a call and a signal wait in the sockets.
    ping = a.call(*DBUS, "GetNameOwner", "s", ("com.example.A",))
    a.signal("/", "com.example.Tick", "Tick", "s", ("while down",))

    bus2 = Bus(binary, tmp, mgr, args, passed)
    log = bus2.log()
    check("fd store: resumed, 3 peers carried over" in log, what + ": resumed, 3 peers (log)")
    m = a.wait_reply(ping)
    check(rawclient.body_strings(m[4]) == [a.name], what + ": the call sent while down is answered")
    got = drain(b, 0.5)
    ticks = [g for g in got if g[0] == SIGNAL and g[1] == "Tick"]
    check(len(ticks) == 1, what + ": the signal sent while down arrives once (%d)" % len(ticks))
    reply = rawclient.marshal(rawclient.METHOD_RETURN, b.next_serial(),
                              {rawclient.FIELD_REPLY_SERIAL: serial,
                               rawclient.FIELD_DESTINATION: a.name}, "s", ("out",))
    b.send_raw(reply)
    m = a.wait_reply(serial)
    check(m[0] == rawclient.METHOD_RETURN and rawclient.body_strings(m[4]) == ["out"],
          what + ": the call in flight gets its reply")
    check(get_id(b) == guid, what + ": GetId unchanged")
    check(name_owner(b, "com.example.A") == a.name, what + ": com.example.A still a's")
    sigs = drain(watcher, 0.3)
    check(not [s for s in sigs if s[1] in ("NameOwnerChanged", "NameLost", "NameAcquired")],
          what + ": no NameOwnerChanged/NameLost/NameAcquired (%s)" % [s[1] for s in sigs])
    c = rawclient.Raw(address)
    ids = [int(x.name.split(".")[1]) for x in (a, b, watcher)]
    check(int(c.name.split(".")[1]) > max(ids), what + ": a new client gets a new unique id")
    # One accept() past the last pending client must not block the bus.
    news = []
    for i in range(4):
        news.append(rawclient.Raw(address))
        check(get_id(news[-1]) == guid, what + ": new client %d after the hand-over answered" % i)
    check(name_owner(a, "com.example.A") == a.name, what + ": a old client still answered")
    for x in news:
        x.close()
    mgr.pump(0.2)
    check(mgr.handover_names() == [],
          what + ": the new bus took the hand-over out of the store (%s)" % mgr.names())
    os.kill(bus2.pid, signal.SIGTERM)
    check(bus2.wait() == 0, what + ": the new bus exits 0 on SIGTERM")
    # That SIGTERM handed over again; a stop discards the store: clients see the end.
    mgr.pump(0.1)
    mgr.discard()
    check(a.is_closed(2), what + ": after a stop (store discarded) the client sees EOF")
    for x in (a, b, watcher, c):
        x.close()
    if socket_unit:
        ls.close()


def scenario_replaced(binary, tmp):
    """The .socket unit restarted while no bus ran: a new socket on the path."""
    mgr = Manager(tmp)
    path = os.path.join(tmp, "bus-replaced")
    address = "unix:path=" + path

    def listening():
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(path)
        ls.listen(64)
        return ls

    ls = listening()
    args = ["--config-file=" + conf(tmp, ""), "--address=systemd:", "--nofork"]
    bus = Bus(binary, tmp, mgr, args, [("dbus.socket", ls.fileno())])
    a = rawclient.Raw(address)
    guid = get_id(a)
    call(a, "RequestName", "su", ("com.example.A", 4))
    os.kill(bus.pid, signal.SIGTERM)
    check(bus.wait() == 0, "replaced: the old bus exits 0 on SIGTERM")
    mgr.pump(0.1)
    # systemctl restart of the socket unit: its socket closed, the file replaced.
    ls.close()
    os.unlink(path)
    ls = listening()
    bus = Bus(binary, tmp, mgr, args, [("dbus.socket", ls.fileno())])
    check("the socket unit passed a new socket" in bus.log(),
          "replaced: the new bus says it serves the new socket")
    check(name_owner(a, "com.example.A") == a.name, "replaced: the carried client keeps its name")
    for i in range(3):
        c = rawclient.Raw(address)
        check(get_id(c) == guid, "replaced: new client %d through the new socket" % i)
        c.close()
    os.kill(bus.pid, signal.SIGTERM)
    check(bus.wait() == 0, "replaced: the new bus exits 0 on SIGTERM")
    mgr.pump(0.1)
    mgr.discard()
    a.close()
    ls.close()


def add_server(c):
    """Containers1.AddServer("org.example.Sandbox", "org.example.App", {}, {})
    by raw client @c: the instance's path and its socket's address."""
    body = bytearray()
    rawclient._put(body, "s", "org.example.Sandbox")
    rawclient._put(body, "s", "org.example.App")
    for _ in range(2):		# two empty a{sv}: a length, then padding to 8
        rawclient._pad(body, 4)
        body += struct.pack("<I", 0)
        rawclient._pad(body, 8)
    c.send_raw(rawclient.marshal(rawclient.METHOD_CALL, c.next_serial(), {
        rawclient.FIELD_PATH: "/org/freedesktop/DBus",
        rawclient.FIELD_INTERFACE: "org.freedesktop.DBus.Containers1",
        rawclient.FIELD_MEMBER: "AddServer", rawclient.FIELD_DESTINATION: "org.freedesktop.DBus"},
        "ssa{sv}a{sv}", body=bytes(body)))
    m = c.wait_reply(c.serial)
    path, pos = rawclient._get_str(m[4], 0)
    pos = (pos + 3) & ~3
    n = struct.unpack_from("<I", m[4], pos)[0]
    address, _ = rawclient._get_str(m[4], pos + 4 + n)
    return path, address


def instance_of(c, name):
    """GetConnectionInstance(@name)'s path, or the error's name."""
    m = c.wait_reply(c.call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                            "org.freedesktop.DBus.Containers1", "GetConnectionInstance", "s",
                            (name,)))
    if m[0] == rawclient.ERROR:
        return m[3].get(rawclient.FIELD_ERROR_NAME)
    return rawclient._get_str(m[4], 0)[0]


def scenario_containers(binary, tmp):
    """A container instance, its member and its socket through a restart by
    the fd store (container-state.c)."""
    mgr = Manager(tmp)
    path = os.path.join(tmp, "bus-containers")
    address = "unix:path=" + path
    args = ["--config-file=" + conf(tmp, "<listen>%s</listen>" % address), "--nofork",
            "--containers"]
    env_runtime = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = tmp
    try:
        bus = Bus(binary, tmp, mgr, args)
    finally:
        if env_runtime is None:
            os.environ.pop("XDG_RUNTIME_DIR")
        else:
            os.environ["XDG_RUNTIME_DIR"] = env_runtime
    a = rawclient.Raw(address)
    instance, inner = add_server(a)
    member = rawclient.Raw(inner)
    check(instance_of(a, member.name) == instance, "containers: the member is in %s" % instance)
    os.kill(bus.pid, signal.SIGTERM)
    check(bus.wait() == 0, "containers: the old bus exits 0 on SIGTERM")
    mgr.pump(0.1)
    bus = Bus(binary, tmp, mgr, args)
    check("fd store: resumed" in bus.log(), "containers: the new bus resumed from the store")
    check(instance_of(a, member.name) == instance,
          "containers: after the restart the member is still in its instance")
    c = rawclient.Raw(inner)
    check(instance_of(a, c.name) == instance,
          "containers: the instance's socket takes a new member after the restart")
    c.close()
    member.close()
    a.close()
    os.kill(bus.pid, signal.SIGTERM)
    check(bus.wait() == 0, "containers: the new bus exits 0 on SIGTERM")
    mgr.pump(0.1)
    mgr.discard()


def scenario_user(binary, tmp):
    """<user> and <pidfile>: the new process of a hand-over is started as root
    by systemd and has a new pid; it must become the bus user and say its pid."""
    import pwd
    nobody = pwd.getpwnam("nobody").pw_uid
    # The bus, as nobody, must reach the notify socket to hand over.
    os.chmod(os.path.dirname(tmp), 0o755)
    os.chmod(tmp, 0o755)
    mgr = Manager(tmp)
    os.chmod(mgr.path, 0o777)
    path = os.path.join(tmp, "bus-user")
    pidfile = os.path.join(tmp, "bus.pid")
    args = ["--config-file=" + conf(tmp, "<listen>unix:path=%s</listen>" % path,
                                    "<user>nobody</user>", "<pidfile>%s</pidfile>" % pidfile,
                                    '<policy context="default"><allow user="*"/></policy>'),
            "--nofork"]
    address = "unix:path=" + path

    def uids(pid):
        with open("/proc/%d/status" % pid) as f:
            line = [x for x in f if x.startswith("Uid:")][0]
        return [int(u) for u in line.split()[1:]]

    def pid_in_file():
        with open(pidfile) as f:
            return int(f.read().strip())

    bus = Bus(binary, tmp, mgr, args)
    a = rawclient.Raw(address)
    check(uids(bus.pid) == [nobody] * 4, "user: the first bus runs as nobody (%s)" % uids(bus.pid))
    check(pid_in_file() == bus.pid, "user: the first bus wrote its pid")
    os.kill(bus.pid, signal.SIGTERM)
    check(bus.wait() == 0, "user: the old bus exits 0 on SIGTERM")
    mgr.pump(0.1)
    check(mgr.handover_names() == ["bus1-fds", "bus1-state"], "user: the store holds the bus (%s)" %
          mgr.names())
    bus = Bus(binary, tmp, mgr, args)
    check("fd store: resumed" in bus.log(), "user: the new bus resumed")
    check(uids(bus.pid) == [nobody] * 4,
          "user: the new process runs as nobody again (%s)" % uids(bus.pid))
    check(pid_in_file() == bus.pid, "user: the new process wrote its own pid")
    check(get_id(a) == get_id(rawclient.Raw(address)), "user: old and new clients served")
    os.kill(bus.pid, signal.SIGKILL)
    bus.wait()
    mgr.pump(0.1)
    mgr.discard()
    a.close()


def scenario_garbage(binary, tmp):
    mgr = Manager(tmp)
    path = os.path.join(tmp, "bus-garbage")
    address = "unix:path=" + path
    args = ["--config-file=" + conf(tmp, "<listen>unix:path=%s</listen>" % path), "--nofork"]
    # A client socket pair whose bus end is handed over with a broken state.
    client, bus_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    carrier, carried = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    carrier.sendmsg([array.array("i", [7]).tobytes()],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [bus_end.fileno()]))])
    carrier.close()
    bus_end.close()
    state = os.memfd_create("state")
    os.write(state, b"this is not a state of bus1-broker")
    mgr.store = [("bus1-fds", os.dup(carried.fileno())), ("bus1-state", state)]
    carried.close()
    bus = Bus(binary, tmp, mgr, args)
    log = bus.log()
    check("cannot be used; starting a new bus" in log, "garbage: logged, started afresh")
    client.settimeout(3)
    try:
        eof = client.recv(1) == b""
    except OSError:
        eof = True
    check(eof, "garbage: the carried client is disconnected")
    mgr.pump(0.2)
    check(mgr.handover_names() == [], "garbage: the store is emptied (%s)" % mgr.names())
    c = rawclient.Raw(address)
    check(c.name == ":1.0", "garbage: a new bus serves on the configured path (%s)" % c.name)
    c.close()
    os.kill(bus.pid, signal.SIGKILL)
    bus.wait()
    mgr.discard()

    # A bus that merely inherited the service's environment stops on SIGTERM.
    env = dict(os.environ, NOTIFY_SOCKET=mgr.path, FDSTORE="1024", SYSTEMD_EXEC_PID="1")
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    mgr.lines = []
    with open(os.path.join(tmp, "inherited.log"), "w") as log:
        p = subprocess.Popen([binary] + args, stderr=log, env=env)
        check(mgr.wait_for("READY", "1"), "inherited: READY=1")
        p.send_signal(signal.SIGTERM)
        check(p.wait(10) == 0, "inherited: exit 0 on SIGTERM")
    mgr.pump(0.2)
    check(mgr.names() == [], "inherited: nothing handed over (%s)" % mgr.names())



def crash_after_name(bus, mgr, c, name):
    """@c requests @name, then the bus is killed (SIGKILL): not in the
    instant after the reply, for until the bus sees its write complete the
    connection counts as cut (journal.h)."""
    call(c, "RequestName", "su", (name, 4))
    time.sleep(0.2)
    os.kill(bus.pid, signal.SIGKILL)
    bus.wait()
    mgr.pump(0.1)


def process_fd_pid(address, name):
    """The "Pid:" of the ProcessFD the bus gives in @name's credentials, or None."""
    import dbus
    bus = dbus.bus.BusConnection(address)
    try:
        d = bus.call_blocking(*DBUS, "GetConnectionCredentials", "s", (name,))
        if "ProcessFD" not in d:
            return None
        fd = d["ProcessFD"].take()
        try:
            with open("/proc/self/fdinfo/%d" % fd) as f:
                for line in f:
                    if line.startswith("Pid:"):
                        return int(line.split()[1])
        finally:
            os.close(fd)
    finally:
        bus.close()
    return None


def listener_fds(pid, ino):
    """How many fds of process @pid are the socket with inode @ino."""
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "socket:[%d]" % ino
        except OSError:
            pass
    return n


def scenario_crash(binary, tmp):
    """SIGKILL hands nothing over, but the crash journal is in the store. As
    under systemd: the listening socket is the .socket unit's, passed to
    every start, so the bus must never shut it down."""
    mgr = Manager(tmp)
    path = os.path.join(tmp, "bus-crash")
    address = "unix:path=" + path
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(64)
    passed = [("dbus.socket", ls.fileno())]
    ino = os.fstat(ls.fileno()).st_ino
    args = ["--config-file=" + conf(tmp, '<limit name="reply_timeout">400</limit>'),
            "--address=systemd:", "--nofork"]
    bus = Bus(binary, tmp, mgr, args, passed)
    c = rawclient.Raw(address)
    crash_after_name(bus, mgr, c, "com.example.Crash")
    check(mgr.handover_names() == [] and mgr.journal_names(),
          "crash: no hand-over, the journal in the store (%s)" % mgr.names())
    bus = Bus(binary, tmp, mgr, args, passed)
    check("the bus restarted after a crash; 1 connection resumed, 0 closed" in bus.log(),
          "crash: the next bus resumed from the journal (log: %s)" % bus.log())
    check(name_owner(c, "com.example.Crash") == c.name, "crash: the client keeps its name")
    check(process_fd_pid(address, c.name) == os.getpid(),
          "crash: its ProcessFD names its process still (the store's pidfd, or the socket's)")
    c2 = rawclient.Raw(address)
    check(int(c2.name.split(".")[1]) > int(c.name.split(".")[1]),
          "crash: a new client gets a new unique id (%s)" % c2.name)
    check(listener_fds(bus.pid, ino) == 1,
          "crash: the bus holds the listening socket once (%d)" % listener_fds(bus.pid, ino))
    # A call that expired before a crash is closed in the journal too: the
    # restored bus does not send its NoReply a second time.
    hang = c.call(c2.name, "/", "com.example.Hang", "Hang")
    m = c.wait_reply(hang, timeout=3)
    check(m[0] == rawclient.ERROR and
          m[3].get(rawclient.FIELD_ERROR_NAME) == "org.freedesktop.DBus.Error.NoReply",
          "crash: a call nobody answers expires (NoReply)")
    # Another, still waiting at the crash: it expires after the restore.
    hang2 = c.call(c2.name, "/", "com.example.Hang", "Hang")
    time.sleep(0.2)
    os.kill(bus.pid, signal.SIGKILL)
    bus.wait()
    mgr.pump(0.1)
    bus = Bus(binary, tmp, mgr, args, passed)
    errors = [x[3][3] for x in drain(c, 1.0) if x[0] == rawclient.ERROR]
    serials = [f.get(rawclient.FIELD_REPLY_SERIAL) for f in errors]
    check(serials == [hang2] and
          errors[0].get(rawclient.FIELD_ERROR_NAME) == "org.freedesktop.DBus.Error.NoReply",
          "crash: a call in flight across the crash expires after it (NoReply), and the one "
          "that expired before does not again (%s; %s, %s)" % (serials, hang, hang2))
    # A start from the journal that dies: the next one starts clean.
    os.kill(bus.pid, signal.SIGKILL)
    bus.wait()
    mgr.pump(0.1)
    with mgr.lock:
        for n, fd in mgr.store:
            if n.startswith("bus1-journal-") and stat.S_ISREG(os.fstat(fd).st_mode):
                # The header's attempt count (struct journal_header, journal.c:
                # two u32, eight u64, two u32), as a start that died leaves it.
                off = 2 * 4 + 8 * 8 + 2 * 4
                mm = mmap.mmap(fd, 4096)
                mm[off:off + 4] = struct.pack("=I", 1)
                mm.close()
    bus = Bus(binary, tmp, mgr, args, passed)
    check("the start from it before this one died" in bus.log(),
          "crash: a journal whose start died is discarded (log)")
    check(c.is_closed(2) and c2.is_closed(2), "crash: then its clients see their connections end")
    try:
        c3 = rawclient.Raw(address)
        check(c3.name == ":1.0", "crash: and a new bus starts clean (%s)" % c3.name)
        c3.close()
    except OSError as e:
        check(False, "crash: the new bus cannot be reached on the .socket unit's socket: %r" % e)
    check(listener_fds(bus.pid, ino) == 1,
          "crash: the new bus holds the listening socket once (%d)" % listener_fds(bus.pid, ino))

    # A record whose CRC holds but that does not parse (a RequestName read as
    # an AddMatch: the name is no rule, its flags are left over): the journal
    # is refused before anything is applied, in this start.
    d = rawclient.Raw(address)
    crash_after_name(bus, mgr, d, "com.example.Crash")
    # JOURNAL_REC_MATCH_ADD (journal.h)
    check(retype_last_record(mgr, 5), "crash: the last record retyped (CRC made to fit)")
    bus = Bus(binary, tmp, mgr, args, passed)
    log = bus.log()
    check("does not parse" in log and "cannot resume the bus from it" in log,
          "crash: a record that does not parse refuses the journal at once (log: %s)" %
          log.strip().splitlines()[-2:])
    check(d.is_closed(2), "crash: its client sees the end")
    c4 = rawclient.Raw(address)
    check(c4.name == ":1.0", "crash: a new bus starts clean (%s)" % c4.name)
    check(listener_fds(bus.pid, ino) == 1,
          "crash: and holds the listening socket once (%d)" % listener_fds(bus.pid, ino))
    c4.close()
    os.kill(bus.pid, signal.SIGKILL)
    bus.wait()
    mgr.discard()
    ls.close()


def retype_last_record(mgr, rtype):
    """Give the newest journal's last record the type @rtype, its CRC made
    to fit (struct journal_rec_header, journal.c: u32 len, crc, type, n_map,
    u64 n_payload; the CRC covers all after itself)."""
    best = None
    with mgr.lock:
        for n, fd in mgr.store:
            if n.startswith("bus1-journal-") and stat.S_ISREG(os.fstat(fd).st_mode):
                gen = struct.unpack("=Q", os.pread(fd, 8, 8))[0]
                if best is None or gen > best[0]:
                    best = (gen, fd)
        if best is None:
            return False
        fd = best[1]
        # struct journal_header: records_off is the ninth field (two u32, then u64s).
        pos = struct.unpack("=Q", os.pread(fd, 8, 8 + 6 * 8))[0]
        last = None
        while True:
            n = struct.unpack("=I", os.pread(fd, 4, pos))[0]
            if n == 0:
                break
            last, pos = (pos, n), pos + n
        if last is None:
            return False
        rec = bytearray(os.pread(fd, last[1], last[0]))
        n_map, n_payload = struct.unpack_from("=IQ", rec, 12)
        struct.pack_into("=I", rec, 8, rtype)
        end = 24 + 32 * n_map + n_payload
        struct.pack_into("=I", rec, 4, rawclient.crc32c(bytes(rec[8:end])))
        os.pwrite(fd, bytes(rec), last[0])
    return True


def scenario_native(binary, tmp):
    """A native (bus1) service across the hand-over: the bus' bus1 peer goes
    through the store with the sockets, and the service never notices."""
    helper = os.environ["BUS1_NATIVE_HELPER"]
    mgr = Manager(tmp)
    path = os.path.join(tmp, "bus-native")
    args = ["--config-file=" + conf(tmp, "<listen>unix:path=%s</listen>" % path), "--nofork"]
    address = "unix:path=" + path
    bus = Bus(binary, tmp, mgr, args)
    end = time.time() + 5
    while "native clients accepted" not in bus.log() and time.time() < end:
        time.sleep(0.05)
    check("native clients accepted" in bus.log(), "native: the bus serves /dev/bus1 (%s)" %
          bus.log().strip().splitlines()[-1:])
    svc = subprocess.Popen([helper, "serve", "com.example.Native"], stdout=subprocess.PIPE,
                           text=True, env=dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address))
    line = svc.stdout.readline().split()
    check(line[:1] == ["ready"], "native: the native service is up (%s)" % line)
    unique = line[1] if len(line) > 1 else None
    a = rawclient.Raw(address)
    watcher = rawclient.Raw(address)
    call(watcher, "AddMatch", "s", ("type='signal',sender='org.freedesktop.DBus'",))
    guid = get_id(a)
    iface = ("com.example.Native", "/org/bus1/test", "org.bus1.test.Echo")

    def echo(text):
        m = a.wait_reply(a.call(*iface, "Echo", "s", (text,)))
        return rawclient.body_strings(m[4]) if m[0] == METHOD_RETURN else m[3]

    check(echo("before") == ["before"], "native: a socket client calls the native service")
    check(name_owner(a, "com.example.Native") == unique, "native: it owns its name")
    drain(watcher)
    for i in range(3):
        os.kill(bus.pid, signal.SIGTERM)
        check(bus.wait() == 0, "native %d: the old bus exits 0 on SIGTERM" % i)
        mgr.pump(0.1)
        check(mgr.handover_names() == ["bus1-fds", "bus1-state"],
              "native %d: the store holds the bus" % i)
        serial = a.call(*iface, "Echo", "s", ("while down %d" % i,))
        bus = Bus(binary, tmp, mgr, args)
        check("fd store: resumed, 3 peers carried over" in bus.log(),
              "native %d: resumed, 3 peers (the native one too)" % i)
        m = a.wait_reply(serial)
        check(rawclient.body_strings(m[4]) == ["while down %d" % i],
              "native %d: the call sent while no bus ran reaches the native service" % i)
        check(echo("after %d" % i) == ["after %d" % i], "native %d: and the next one" % i)
        check(name_owner(a, "com.example.Native") == unique and get_id(a) == guid,
              "native %d: same owner, same GetId" % i)
        check(svc.poll() is None, "native %d: the native service is still connected" % i)
        mgr.pump(0.2)
    # A crash: nothing handed over, the bus' bus1 peer kept alive by the store
    # with the crash journal. Meanwhile a socket client calls the service, and
    # the service emits a signal: it waits in the bus1 queue of the dead bus.
    sigs = drain(watcher, 0.3)
    call(watcher, "AddMatch", "s", ("type='signal',interface='org.bus1.test.Echo'",))
    # A second native service, connected since the last snapshot: its
    # bootstrap and Hello are in the journal only.
    svc2 = subprocess.Popen([helper, "serve", "com.example.Native2"], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address))
    line = svc2.stdout.readline().split()
    check(line[:1] == ["ready"], "native crash: a second native service is up (%s)" % line)
    time.sleep(0.2)  # not in the instant after a write (journal.h's marks)
    os.kill(bus.pid, signal.SIGKILL)
    bus.wait()
    mgr.pump(0.1)
    check(mgr.handover_names() == [] and mgr.journal_names(),
          "native crash: no hand-over, the journal in the store (%s)" % mgr.names())
    serial = a.call(*iface, "Echo", "s", ("while crashed",))
    svc.send_signal(signal.SIGUSR1)
    check(svc.stdout.readline().split() == ["poked", "1"],
          "native crash: the service emits a signal while no bus runs")
    bus = Bus(binary, tmp, mgr, args)
    check("the bus restarted after a crash; 4 connections resumed, 0 closed" in bus.log(),
          "native crash: resumed, 4 connections (log: %s)" % bus.log().strip().splitlines()[-1:])
    m = a.wait_reply(serial)
    check(rawclient.body_strings(m[4]) == ["while crashed"],
          "native crash: the call sent while no bus ran reaches the native service")
    check(echo("after the crash") == ["after the crash"], "native crash: and the next one")
    check(name_owner(a, "com.example.Native") == unique and get_id(a) == guid,
          "native crash: same owner, same GetId")
    check(svc.poll() is None, "native crash: the native service is still connected")
    m = a.wait_reply(a.call("com.example.Native2", "/org/bus1/test", "org.bus1.test.Echo",
                            "Echo", "s", ("second",)))
    check(m[0] == METHOD_RETURN and rawclient.body_strings(m[4]) == ["second"],
          "native crash: the second native service is still connected and answers")
    a.call("com.example.Native2", "/org/bus1/test", "org.bus1.test.Echo", "Quit")
    check(svc2.wait(10) == 0, "native crash: the second one quits normally (never dropped)")
    sigs += drain(watcher, 0.5)
    check([s for s in sigs if s[1] == "Poked"],
          "native crash: its signal, queued to the dead bus, is delivered (%s)" %
          [s[1] for s in sigs])
    # The second service's own come and go aside: nothing about the first's names.
    ours = [s for s in sigs if s[1] in ("NameOwnerChanged", "NameLost", "NameAcquired") and
            set(rawclient.body_strings(s[3][4])) & {"com.example.Native", unique}]
    check(not ours, "native: no NameOwnerChanged of the first service (%s)" %
          [rawclient.body_strings(s[3][4]) for s in ours])
    a.call(*iface, "Quit")
    check(svc.wait(10) == 0, "native: the native service quits normally (never dropped)")
    os.kill(bus.pid, signal.SIGTERM)
    check(bus.wait() == 0, "native: the last bus exits 0 on SIGTERM")
    mgr.discard()
    for x in (a, watcher):
        x.close()


def conf(tmp, *elements):
    p = os.path.join(tmp, "bus-%d.conf" % time.monotonic_ns())
    with open(p, "w") as f:
        f.write(rawclient.session_config(*elements))
    return p


def main():
    binary = sys.argv[1]
    only = sys.argv[2:]
    cases = [("handover", lambda d: scenario_handover(binary, d, False)),
             ("socket", lambda d: scenario_handover(binary, d, True)),
             ("replaced", lambda d: scenario_replaced(binary, d)),
             ("garbage", lambda d: scenario_garbage(binary, d)),
             ("crash", lambda d: scenario_crash(binary, d)),
             ("containers", lambda d: scenario_containers(binary, d))]
    # Changing to another user needs root (CI runs as root).
    if os.geteuid() == 0:
        cases.append(("user", lambda d: scenario_user(binary, d)))
    # In the guest (test/native/meson.build): /dev/bus1 and a native service.
    if os.path.exists("/dev/bus1") and os.environ.get("BUS1_NATIVE_HELPER"):
        cases.append(("native", lambda d: scenario_native(binary, d)))
    if only and sorted(only) != sorted(n for n, _ in cases if n in only):
        print("unknown or unavailable case in %s" % only)
        sys.exit(1)
    with tempfile.TemporaryDirectory(prefix="bus1-fdstore.") as tmp:
        for name, fn in cases:
            if only and name not in only:
                continue
            print("# " + name)
            sub = os.path.join(tmp, name)
            os.mkdir(sub)
            try:
                fn(sub)
            except Exception as e:  # a hang or a protocol error fails the case
                import traceback
                traceback.print_exc()
                failures.append("%s: %r" % (name, e))
    for pid in started:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("all fdstore checks passed")


if __name__ == "__main__":
    main()
