# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the LSM matrices (apparmor_matrix.py, selinux_matrix.py) share: the
clients, a bus run with its log of LSM decisions, and the comparison."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from timefactor import time_factor  # noqa: E402

PEER = os.path.join(HERE, "lsm_peer.py")
PY = "/usr/bin/python3"
DAEMON = "/usr/bin/dbus-daemon"
AD = "org.freedesktop.DBus.Error.AccessDenied"

SVC = "org.bus1.Lsm.Service"
LSM_PATH, LSM_IFACE = "/org/bus1/Lsm", "org.bus1.Lsm"
SIGNAL_PATH = "/org/bus1/Lsm/Signal"


def write_bus_config(bus_dir, svcdir, lsm_xml):
    """The one configuration of every bus of the matrices (open policy, a
    service directory), with @lsm_xml (<apparmor .../>, <selinux>...)."""
    conf = os.path.join(bus_dir, "bus.conf")
    with open(conf, "w") as f:
        f.write("""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s/bus</listen>
  <auth>EXTERNAL</auth>
  %s
  <servicedir>%s</servicedir>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
""" % (bus_dir, lsm_xml, svcdir))
    return conf


class Client:
    """A client process: lsm_peer.py, or @native (lsm-native), started under
    @wrap (e.g. aa-exec -p PROFILE --, runcon CONTEXT) as @uid. With
    @refusable, a Hello the bus refuses is an outcome, not a failure:
    .connected says "connected" or "refused: ERROR"."""

    def __init__(self, address, wrap, uid, native=None, refusable=False):
        argv = list(wrap or [])
        if uid:
            argv += ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"]
        argv += [native, address] if native else [PY, PEER, address]
        self.native = native
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.ready = json.loads(self.proc.stdout.readline() or '{"ready": null}')
        refused = self.ready.get("refused")
        self.connected = "refused: " + refused if refused else "connected"
        if not self.ready.get("ready") and not (refusable and refused):
            self.close()
            raise RuntimeError("client %s did not connect: %s" % (wrap, self.ready))

    def do(self, op, **kw):
        if self.native:
            order = {"own": ["name"], "call": ["dest", "path", "iface", "member"],
                     "match": ["rule"], "emit": ["path", "iface", "member"]}
            line = " ".join([op] + [kw[k] for k in order.get(op, [])])
        else:
            kw["op"] = op
            line = json.dumps(kw)
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        return json.loads(line)["result"] if line else "client died"

    def close(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.proc.wait(10)


def before_hello(address, wrap, uid):
    """A socket client under @wrap as @uid that calls GetId before Hello,
    then Hello: "GetId: OUTCOME, then Hello: OUTCOME"."""
    argv = list(wrap or [])
    if uid:
        argv += ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"]
    p = subprocess.run(argv + [PY, PEER, "--before-hello", address], stdout=subprocess.PIPE,
                       text=True, timeout=120 * time_factor())
    try:
        r = json.loads(p.stdout)
    except ValueError:
        return "client failed: %r" % p.stdout
    return "GetId: %s, then Hello: %s" % (r["before_hello"], r["then_hello"])


def call(c, dest, member="Allowed", path=LSM_PATH, iface=LSM_IFACE):
    return c.do("call", dest=dest, path=path, iface=iface, member=member)


class SyslogCatcher:
    """/dev/log for the length of one bus: dbus-daemon syslog()s its LSM
    decisions when it may not write to audit."""

    def __init__(self):
        self.lines = []
        if os.path.exists("/dev/log"):
            os.unlink("/dev/log")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("/dev/log")
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            self.lines.append(data.decode(errors="replace"))

    def close(self):
        # Let what is in flight arrive, then stop.
        time.sleep(0.2)
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(5)
        os.unlink("/dev/log")


# The parts of a decision line that differ between two runs of the same
# cases: pids, unique names, the number of the policy load.
NORMALIZE = [(re.compile(r"\b(pid|peer_pid|spid|tpid|seqno)=\d+"), r"\1=N"),
             (re.compile(r":1\.\d+"), ":1.N")]


def decisions(text, marker):
    """The LSM decision lines in @text (from @marker on), normalized, sorted."""
    out = []
    for line in text.splitlines():
        i = line.find(marker)
        if i < 0:
            continue
        line = line[i:].strip()
        for rx, repl in NORMALIZE:
            line = rx.sub(repl, line)
        out.append(line)
    return sorted(out)


class Bus:
    """One bus process for one run of the cases, without CAP_AUDIT_WRITE so
    that both buses log their decisions where they can be compared:
    dbus-daemon to syslog (/dev/log, caught here), bus1-broker to its log."""

    def __init__(self, argv, conf, bus_dir, wrap=None, env=None):
        self.argv = argv
        self.syslog = SyslogCatcher()
        self.log = open(os.path.join(bus_dir, "bus.log"), "w")
        drop = ["setpriv", "--inh-caps=-audit_write", "--bounding-set=-audit_write"]
        self.proc = subprocess.Popen(
            list(wrap or []) + drop + argv +
            ["--config-file=" + conf, "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE, stderr=self.log, text=True,
            env=dict(os.environ, **(env or {})))
        self.address = self.proc.stdout.readline().strip()
        if not self.address:
            self.stop()
            raise RuntimeError("%s did not start (see %s)" % (argv[0], self.log.name))

    def reexec(self):
        """bus1-broker re-executes (SIGUSR2); None for dbus-daemon, which cannot."""
        if self.argv[0] == DAEMON:
            return None

        def run():
            self.proc.send_signal(signal.SIGUSR2)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                with open(self.log.name) as f:
                    if "re-exec: resumed" in f.read():
                        return
                time.sleep(0.2)
            raise RuntimeError("%s did not resume after SIGUSR2 (see %s)" %
                               (self.argv[0], self.log.name))
        return run

    def stop(self):
        # The bus' CPU time (user + system), read while it still runs.
        self.cpu = 0.0
        try:
            with open("/proc/%d/stat" % self.proc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            self.cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()
        self.syslog.close()

    def decisions(self, marker):
        with open(self.log.name) as f:
            text = f.read()
        return decisions(text + "\n" + "\n".join(self.syslog.lines), marker)


def run_bus(argv, bus_dir, conf, cases, marker, wrap=None, env=None, distinct=None):
    """Run @cases(address, reexec) on a bus started from @argv with @conf;
    then, as one more case, the decision lines it logged (@marker: where a
    line starts), which must be the same on both buses and some. @distinct:
    compare the set of distinct @distinct(line) instead of every line."""
    start = time.monotonic()
    bus = Bus(argv, conf, bus_dir, wrap, env)
    try:
        out = cases(bus.address, bus.reexec())
    finally:
        bus.stop()
    # Where a matrix' time goes, bus by bus, with the bus' own CPU time.
    print("# time: %s (%s): %.1f s, bus CPU %.2f s" % (
        os.path.basename(argv[0]), os.path.basename(bus_dir), time.monotonic() - start,
        bus.cpu), flush=True)
    lines = bus.decisions(marker)
    if distinct:
        lines = sorted(set(distinct(line) for line in lines))
    out.append(("log: the decisions logged, in dbus-daemon's form", lines,
                lines if lines else "some %s lines" % marker))
    return out


def parse_args(argv, n_fixed):
    """[FIXED...] [LSM_NATIVE] [--uid UID] -> (fixed args, native or None, uid).
    Native clients need /dev/bus1."""
    args = list(argv)
    uid = 0
    if "--uid" in args:
        i = args.index("--uid")
        uid = int(args[i + 1])
        del args[i:i + 2]
    native = args[n_fixed] if len(args) > n_fixed and os.path.exists("/dev/bus1") else None
    return args[:n_fixed], native, uid


def compare(title, ref, runs):
    """Print each case of @ref (dbus-daemon: [(name, outcome, expected)]) next
    to each run in @runs ([(label, cases)]). Return the number of failures:
    a dbus-daemon outcome other than expected, or a bus that differs."""
    failures = 0
    for label, got in runs:
        print("# %s: dbus-daemon | %s" % (title, label))
        for (name, r, expected), (name2, b, _) in zip(ref, got):
            ok = r == expected and b == r and name == name2
            failures += not ok
            print("%s %s: %s | %s%s" % ("ok  " if ok else "FAIL", name, json.dumps(r),
                                       json.dumps(b), "" if r == expected else
                                       " (expected %s)" % json.dumps(expected)))
        if len(ref) != len(got):
            failures += 1
            print("FAIL the buses ran %d and %d cases" % (len(ref), len(got)))
    return failures
