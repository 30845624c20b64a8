# SPDX-License-Identifier: LGPL-2.1-or-later
"""The log lines of the bus against /usr/bin/dbus-daemon (issue 43, item 8):
their form and the limits they tell of. The same scenario runs on a private
bus of each program with the same configuration, and each bus' standard
error is read:

- the form: every line is "TAG[PID]: CONTEXT" and the message, TAG the name
  the program was invoked by (bus1-broker started through a link named
  dbus-daemon says "dbus-daemon"), PID the bus' pid, CONTEXT from <type>:
  "[session uid=UID pid=PID] " with the bus' own uid and pid, "[system] ",
  nothing without a <type>; the same after ReloadConfig and, on bus1-broker,
  after a re-exec (SIGUSR2);
- the limits: each is hit once or more (max_names_per_connection,
  max_match_rules_per_connection, max_replies_per_connection,
  max_outgoing_bytes, pending_fd_timeout, auth_timeout,
  service_start_timeout, max_pending_service_starts, max_message_size,
  max_message_unix_fds, max_connections_per_user,
  max_completed_connections), and the set of distinct messages must be the
  same on both buses and hold dbus-daemon 1.14's lines in EXPECTED (so that
  a scenario that hits nothing fails). Normalised: the tag, the bus' pid,
  the time in auth_timeout's "elapsed: Nms" (a measurement);
- rate limits: bus1-broker logs at most a burst of a connection's limit lines
  per window and then how many it left out; dbus-daemon logs each;
- priorities (as root: the buses also log to a /dev/log of the test's own,
  in a private mount namespace, as test_syslog_parity.py): the same syslog
  priority and facility for each message, and the same form there.

Lines only one bus logs, by design: dbus-daemon's about raising its fd limit
(its environment, DD_ONLY); bus1-broker's own info lines for a connection it
closes where dbus-daemon closes it silently (max_message_size,
max_message_unix_fds), its count of lines left out by its rate limit, and its
re-exec (BUS1_ONLY).

  test_log_parity.py BUS1_BROKER
"""

import ast
import contextlib
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from rawclient import (FIELD_DESTINATION, FIELD_INTERFACE, FIELD_MEMBER, FIELD_PATH,  # noqa: E402
                       FIELD_UNIX_FDS, METHOD_CALL, HelloRefused, Raw, marshal)
from test_driver_parity import DAEMON  # noqa: E402
from timefactor import time_factor  # noqa: E402

D, P, I = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
IFACE = "org.bus1.Test.Log"
CHUNK = 32 * 1024
N_NAMES = 15            # RequestName calls of one connection: 2 granted, 13 refused
BURST = 10              # PEER_REFUSAL_LOG_BURST


def config(listen, bus_type, *elements):
    return ('<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"\n'
            ' "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">\n<busconfig>\n' +
            ("  <type>%s</type>\n" % bus_type if bus_type else "") +
            "  %s\n" % listen + "".join("  %s\n" % e for e in elements) +
            '  <policy context="default">\n    <allow send_destination="*"/>\n'
            '    <allow receive_sender="*"/>\n    <allow own="*"/>\n  </policy>\n'
            '</busconfig>\n')


def limit(name, value):
    return '<limit name="%s">%d</limit>' % (name, value)


@contextlib.contextmanager
def bus(argv, tmp, name, bus_type, *elements):
    """A bus run by @argv on @tmp/@name: (address, pid, stderr file)."""
    conf = os.path.join(tmp, name + ".conf")
    with open(conf, "w") as f:
        f.write(config("<listen>unix:path=%s/%s</listen>" % (tmp, name), bus_type, *elements))
    log = os.path.join(tmp, name + ".log")
    with open(log, "w") as err:
        p = subprocess.Popen(argv + ["--config-file=" + conf, "--nofork", "--print-address=1"],
                             stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        addr = p.stdout.readline().strip()
        if not addr:
            raise AssertionError("%s did not start (%s)" % (argv, name))
        yield addr, p.pid, log
    finally:
        p.terminate()
        status = p.wait()
        if status not in (0, -signal.SIGTERM):
            with open(log) as f:
                sys.stderr.write(f.read()[-4000:])
            raise AssertionError("%s (%s) exited with status %d" % (argv, name, status))


def drain(raw, timeout=0.3):
    try:
        while True:
            raw.recv(timeout)
    except socket.timeout:
        return False
    except (EOFError, ConnectionResetError, BrokenPipeError):
        return True


def call(raw, member, sig="", args=()):
    return raw.wait_reply(raw.call(D, P, I, member, sig, args))


def wait_for(path, text, count, timeout):
    """Until @path holds @text @count times (bus1-broker's re-exec)."""
    end = time.monotonic() + timeout * time_factor()
    while time.monotonic() < end:
        with open(path) as f:
            if f.read().count(text) >= count:
                return True
        time.sleep(0.05)
    return False


def to_peer(raw, dest, member, flags=0, body=b"", sig="", fds=(), n_fds=None):
    fields = {FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: member,
              FIELD_DESTINATION: dest}
    if n_fds:
        fields[FIELD_UNIX_FDS] = n_fds
    try:
        raw.send_raw(marshal(METHOD_CALL, raw.next_serial(), fields, sig, body=body,
                             flags=flags), fds)
    except OSError:
        pass


def limits_scenario(addr, reexec):
    """Every limit of the session bus, on the bus at @addr; @reexec(): re-executes it
    (bus1-broker) or does nothing."""
    # auth_timeout: one connection that never authenticates, one that never says Hello
    idle, lazy = Raw(addr, auth=False), Raw(addr, hello=False)
    start = time.monotonic()

    # max_names_per_connection (its unique name counts): one connection, well past the burst
    n = Raw(addr)
    for i in range(N_NAMES):
        call(n, "RequestName", "su", ("org.bus1.LogTest.N%d" % i, 0))
    # max_match_rules_per_connection
    m = Raw(addr)
    for i in range(3):
        call(m, "AddMatch", "s", ("member='M%d'" % i,))
    # max_replies_per_connection: calls nobody answers
    caller, callee = Raw(addr), Raw(addr)
    for _ in range(3):
        caller.call(callee.name, "/", IFACE, "Hang")
    drain(caller, 0.3)
    # max_outgoing_bytes: calls that expect no reply to a receiver that does not read
    sender, full = Raw(addr), Raw(addr)
    body = struct.pack("<I", CHUNK) + b"x" * CHUNK
    for _ in range(40):
        to_peer(sender, full.name, "Fill", flags=1, body=body, sig="ay")
        time.sleep(0.01)
    drain(sender, 0.5)
    # pending_fd_timeout: an fd that no message declares
    fd_holder = Raw(addr)
    r, w = os.pipe()
    to_peer(fd_holder, callee.name, "Fd", flags=1, fds=[r])
    # max_message_unix_fds: 5 fds in one message; max_message_size: 70000 bytes
    many, big = Raw(addr), Raw(addr)
    to_peer(many, callee.name, "Fds", flags=1, sig="hhhhh",
            body=struct.pack("<5I", 0, 1, 2, 3, 4), fds=[r] * 5, n_fds=5)
    to_peer(big, callee.name, "Big", flags=1, sig="ay",
            body=struct.pack("<I", 70000) + b"x" * 70000)
    os.close(r)
    os.close(w)
    # service_start_timeout, max_pending_service_starts
    starter = Raw(addr)
    for i in range(2):
        starter.call(D, P, I, "StartServiceByName", "su", ("org.bus1.LogTest.Slow%d" % i, 0))
    drain(starter, 1.0)
    # Bounds that only catch a bus that does not close them: a closed one returns at once.
    slack = 2.0 * time_factor()
    closed = {"pending fd": fd_holder.is_closed(slack), "5 fds": many.is_closed(slack),
              "too big": big.is_closed(slack)}
    time.sleep(max(0, start + 1.3 - time.monotonic()))
    closed["no auth"] = idle.is_closed(slack)
    closed["no Hello"] = lazy.is_closed(slack)

    # The context stays across ReloadConfig and a re-exec: one more match rule each time.
    call(m, "ReloadConfig")
    call(m, "AddMatch", "s", ("member='M9'",))
    reexec()
    call(m, "AddMatch", "s", ("member='M9'",))

    for c in (idle, lazy, n, m, caller, callee, sender, full, fd_holder, many, big, starter):
        c.close()
    # Closed connections tell what their rate limit left out.
    time.sleep(0.3)
    return closed


def connections_scenario(addr):
    got = []
    conns = []
    for _ in range(3):
        try:
            conns.append(Raw(addr))
            got.append("ok")
        except HelloRefused as e:
            got.append(str(e))
    time.sleep(0.1)
    for c in conns:
        c.close()
    return got


def run(binary, tag, tmp, syslog_args, link_as_daemon):
    """All buses of @binary, whose lines say @tag: ({bus: (stderr file, pid, expected
    tag, expected context)}, what the clients met)."""
    out = {}
    argv = [binary] + syslog_args
    uid = os.geteuid()
    services = os.path.join(tmp, "services")
    os.makedirs(services, exist_ok=True)
    for i in range(2):
        with open(os.path.join(services, "org.bus1.LogTest.Slow%d.service" % i), "w") as f:
            f.write("[D-BUS Service]\nName=org.bus1.LogTest.Slow%d\nExec=/bin/sleep 30\n" % i)
    label = "dd" if binary == DAEMON else "b1"

    with bus(argv, tmp, label + "-limits", "session", "<servicedir>%s</servicedir>" % services,
             limit("max_names_per_connection", 3), limit("max_match_rules_per_connection", 2),
             limit("max_replies_per_connection", 2), limit("max_outgoing_bytes", 4 * CHUNK),
             limit("pending_fd_timeout", 500), limit("auth_timeout", 1000),
             limit("max_message_size", 65536), limit("max_message_unix_fds", 4),
             limit("service_start_timeout", 500),
             limit("max_pending_service_starts", 1)) as (addr, pid, log):
        def reexec():
            # Not under run-under-valgrind.sh's wrapper: the re-executed bus
            # would leave valgrind, whose log would end without its summary.
            if binary != DAEMON and not os.environ.get("BUS_BINARY_OVERRIDE"):
                os.kill(pid, signal.SIGUSR2)
                if not wait_for(log, "re-exec: resumed", 1, 10):
                    raise AssertionError("%s: the re-exec did not end" % binary)
        closed = limits_scenario(addr, reexec)
    out["session"] = (log, pid, tag, "[session uid=%d pid=%d] " % (uid, pid))

    # No <type>: no context. bus1-broker through a link named dbus-daemon says so.
    link_argv = argv
    link_tag = tag
    if link_as_daemon:
        link = os.path.join(tmp, "link", "dbus-daemon")
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.abspath(binary), link)
        link_argv, link_tag = [link] + syslog_args, "dbus-daemon"
    with bus(link_argv, tmp, label + "-none", None,
             limit("max_connections_per_user", 2)) as (addr, pid, log):
        per_user = connections_scenario(addr)
    out["no type"] = (log, pid, link_tag, "")

    with bus(argv, tmp, label + "-system", "system",
             limit("max_completed_connections", 2)) as (addr, pid, log):
        completed = connections_scenario(addr)
    out["system"] = (log, pid, tag, "[system] ")
    return out, {"closed": closed, "per user": per_user, "completed": completed}


LINE = re.compile(r"^(?P<tag>[^\[\s]+)\[(?P<pid>\d+)\]: "
                  r"(?P<context>\[system\] |\[session uid=\d+ pid=\d+\] )?(?P<msg>.*)$")


def normalise(msg):
    return re.sub(r"elapsed: \d+ms", "elapsed: Nms", msg)


# Not the bus's lines: ASan's warning when an activation's child (forked from
# an instrumented bus) leaves through a noreturn call before it executes the
# service; it shares the bus's stderr. A real report ends the bus with an
# error status, which bus() fails on.
ASAN_CHILD_NOISE = re.compile(r"^==\d+==WARNING: ASan is ignoring requested "
                              r"__asan_handle_no_return|^False positive error reports may "
                              r"follow$|^For details see https://github.com/google/sanitizers/"
                              r"issues/189$")


def parse(logs, report):
    """{bus: [messages]} of @logs; a line not in its expected form goes to @report."""
    out = {}
    for name, (path, pid, tag, context) in logs.items():
        msgs = []
        with open(path) as f:
            for line in f.read().splitlines():
                if ASAN_CHILD_NOISE.match(line):
                    continue
                m = LINE.match(line)
                if not m or m["tag"] != tag or int(m["pid"]) != pid or \
                        (m["context"] or "") != context:
                    report.append("%s: %r is not %s[%d]: %r" % (name, line, tag, pid, context))
                    continue
                msgs.append(normalise(m["msg"]))
        out[name] = msgs
    return out


# (bus, message): dbus-daemon 1.14's lines for the limits of the scenario
# (":1.N" in the order the scenario connects), with their syslog priority:
# 28 = LOG_DAEMON | LOG_WARNING, 37 = LOG_AUTH | LOG_NOTICE, 30 = LOG_DAEMON | LOG_INFO.
LOGINFO = r'\(uid=%d pid=\d+ comm="[^"]*"\)' % os.geteuid()
EXPECTED = [
    ("session", r'Connection ":1.0" is not allowed to own more services \(increase limits in '
                r'configuration file if required; max_names_per_connection=3\)', 28),
    ("session", r'Connection ":1.1" is not allowed to add more match rules \(increase limits '
                r'in configuration file if required; max_match_rules_per_connection=2\)', 28),
    ("session", r'The maximum number of pending replies for ":1.2" %s has been reached '
                r'\(max_replies_per_connection=2\)' % LOGINFO, 28),
    ("session", r'Rejected: destination has a full message queue, 0 matched rules; '
                r'type="method_call", sender=":1.4" %s interface="org.bus1.Test.Log" '
                r'member="Fill" error name="\(unset\)" requested_reply="0" '
                r'destination=":1.5" %s' % (LOGINFO, LOGINFO), 37),
    ("session", r'Connection ":1.6" %s has had Unix fds pending for too long, closing it '
                r'\(pending_fd_timeout=500 ms\)' % LOGINFO, 28),
    ("session", r"Connection has not authenticated soon enough, closing it "
                r"\(auth_timeout=1000ms, elapsed: Nms\)", 28),
    ("session", r"Failed to activate service 'org.bus1.LogTest.Slow0': timed out "
                r"\(service_start_timeout=500ms\)", 37),
    ("session", r"Activating service name='org.bus1.LogTest.Slow0' requested by ':1.9' %s"
     % LOGINFO, 30),
    ("no type", r"The maximum number of active connections for UID %d has been reached "
                r"\(max_connections_per_user=2\)" % os.geteuid(), 28),
    ("system", r"The maximum number of active connections has been reached "
               r"\(max_completed_connections=2\)", 28),
]
DD_ONLY = [re.compile(r"Failed to set fd limit")]
CLOSING = re.compile(r"^closing connection :1\.\d+ \(uid \d+ pid \d+\): (sent more file "
                     r"descriptors than max_message_unix_fds|message exceeds max_message_size)$")
BUS1_ONLY = [
    CLOSING,
    re.compile(r"^\d+ more refusals of :1\.\d+ \(.*\) were not logged$"),
    re.compile(r"^re-exec: "),
]


class SyslogReader:
    """The datagrams on /dev/log as they come: a bus blocks in syslog() once
    the socket holds max_dgram_qlen of them (10 by default)."""

    def __init__(self, sock):
        self.sock, self.data, self.stop = sock, [], False
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        self.sock.settimeout(0.1)
        while not self.stop:
            try:
                self.data.append(self.sock.recv(65536).decode(errors="replace"))
            except socket.timeout:
                pass

    def take(self):
        """{(tag, pid): [(priority, text after "TAG[PID]: ")]} of what came so far."""
        time.sleep(0.2)
        out = {}
        data, self.data = self.data, []
        for d in data:
            m = re.match(r"^<(\d+)>(?:\w{3} [ \d]\d \d\d:\d\d:\d\d )?([^\[\s]+)\[(\d+)\]: (.*)$",
                         d.rstrip("\n"), re.S)
            if m:
                out.setdefault((m[2], int(m[3])), []).append((int(m[1]), m[4]))
            else:
                out.setdefault(("?", 0), []).append((0, d))
        return out

    def close(self):
        self.stop = True
        self.thread.join()


def run_both(bus1, tmp, sock):
    """Both programs, one after the other, in this process (the clients' pid
    is the same in both logs). Returns what main() compares."""
    override = os.environ.get("BUS_BINARY_OVERRIDE")
    args = ["--syslog"] if sock else []
    res = {}
    for label, binary in (("bus1-broker", override or bus1), ("dbus-daemon", DAEMON)):
        d = os.path.join(tmp, label)
        os.mkdir(d)
        # Through a link only when the binary is the program itself (not a valgrind wrapper).
        tag = label if binary == DAEMON else os.path.basename(bus1)
        logs, outcomes = run(binary, tag, d, args, label == "bus1-broker" and not override)
        report = []
        msgs = parse(logs, report)
        prios = None
        if sock:
            prios = {}
            got = sock.take()
            for name, (_, pid, tag, context) in logs.items():
                for prio, text in got.pop((tag, pid), []):
                    if not text.startswith(context):
                        report.append("syslog of %s: %r does not start with %r" %
                                      (name, text, context))
                    prios.setdefault(normalise(text[len(context):]), set()).add(prio)
            for key, lines in got.items():
                report.append("syslog: a line of no bus of the test %r: %r" % (key, lines[:3]))
            prios = {k: sorted(v) for k, v in prios.items()}
        res[label] = {"msgs": msgs, "report": report, "outcomes": outcomes, "prios": prios}
    return res


def inside(bus1, tmp):
    """As root, in a private mount namespace: a /dev/log of the test's own."""
    from test_syslog_parity import private_dev
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", tmp], check=True)
    private_dev(tmp)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("/dev/log")
    reader = SyslogReader(sock)
    try:
        return run_both(bus1, tmp, reader)
    finally:
        reader.close()
        sock.close()


def known(patterns, msg):
    return any(p.search(msg) for p in patterns)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--inside":
        print(repr(inside(sys.argv[2], sys.argv[3])))
        return 0
    if not os.path.exists(DAEMON):
        print("no %s to compare with" % DAEMON)
        return 77
    start = time.monotonic()
    if os.getuid() == 0:
        tmp = tempfile.mkdtemp(prefix="bus1-log-parity.")
        try:
            p = subprocess.run(["unshare", "--mount", "--propagation", "private",
                                sys.executable, os.path.abspath(__file__), "--inside",
                                sys.argv[1], tmp], capture_output=True, text=True,
                               timeout=120 * time_factor())
        finally:
            os.rmdir(tmp)
        if p.returncode != 0:
            print(p.stdout[-3000:] + p.stderr[-3000:])
            return 1
        res = ast.literal_eval(p.stdout.strip().splitlines()[-1])
    else:
        print("not root: no private /dev/log, the syslog priorities are not compared")
        with tempfile.TemporaryDirectory(prefix="bus1-log-parity.") as tmp:
            res = run_both(sys.argv[1], tmp, None)
    b1, dd = res["bus1-broker"], res["dbus-daemon"]
    failed = []

    def check(ok, what):
        print("%-4s %s" % ("ok" if ok else "FAIL", what))
        if not ok:
            failed.append(what)

    for label in ("dbus-daemon", "bus1-broker"):
        r = res[label]
        check(not r["report"], "%s: every line is TAG[PID]: CONTEXT, on stderr%s" % (
            label, " and syslog" if r["prios"] is not None else ""))
        for x in r["report"][:10]:
            print("       " + x)
    check(b1["outcomes"] == dd["outcomes"], "the clients met the limits alike: %s" % (
        dd["outcomes"],))

    for name in ("session", "no type", "system"):
        ref = {x for x in dd["msgs"][name] if not known(DD_ONLY, x)}
        got = set(b1["msgs"][name])
        extra = {x for x in got - ref if not known(BUS1_ONLY, x)}
        check(ref <= got and not extra, "%s bus: the same messages on both buses (%d)" % (
            name, len(ref)))
        for x in sorted(ref - got):
            print("       only dbus-daemon: %s" % x)
        for x in sorted(extra):
            print("       only bus1-broker: %s" % x)
    for name, rx, prio in EXPECTED:
        rx = re.compile("^" + rx + "$")
        hits = [x for x in dd["msgs"][name] if rx.match(x)]
        check(hits and any(rx.match(x) for x in b1["msgs"][name]),
              "%s: %s" % (name, rx.pattern[1:60]))
        if dd["prios"] is not None and hits:
            check(dd["prios"].get(hits[0]) == b1["prios"].get(hits[0]) == [prio],
                  "   at priority %d on both (dbus-daemon %s, bus1-broker %s)" % (
                      prio, dd["prios"].get(hits[0]), b1["prios"].get(hits[0])))

    # dbus-daemon logs every refusal; bus1-broker a burst per connection, then the count.
    names = re.compile("^" + EXPECTED[0][1] + "$")
    n_dd = sum(bool(names.match(x)) for x in dd["msgs"]["session"])
    n_b1 = sum(bool(names.match(x)) for x in b1["msgs"]["session"])
    left = [x for x in b1["msgs"]["session"] if x.startswith("%d more refusals of :1.0 " %
                                                            (N_NAMES - 2 - BURST))]
    check(n_dd == N_NAMES - 2 and n_b1 == BURST and len(left) == 1,
          "max_names_per_connection %d times: dbus-daemon logs %d lines, bus1-broker %d and "
          "\"%d more refusals of :1.0 ... were not logged\"" % (N_NAMES - 2, n_dd, n_b1,
                                                               N_NAMES - 2 - BURST))
    if b1["prios"] is not None:
        extra = {x: p for x, p in b1["prios"].items() if known([CLOSING], x)}
        check(extra and all(p == [30] for p in extra.values()),
              "bus1-broker's own lines for connections it closes are info: %s" % (
                  sorted(set(sum(extra.values(), []))),))
    print("%s in %.1f s" % ("FAIL" if failed else "the buses log alike",
                            time.monotonic() - start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
