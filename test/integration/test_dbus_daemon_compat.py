# SPDX-License-Identifier: LGPL-2.1-or-later
"""bus1-broker and /usr/bin/dbus-daemon side by side, each started with the
same configuration in a private temporary directory (--config-file,
--nofork, --print-address): every check runs against both and must give the
same outcome, and the outcome dbus-daemon 1.14 gives (written out below, so
that the checks still mean something where dbus-daemon is not installed).

  - stats: org.freedesktop.DBus.Debug.Stats GetStats and GetConnectionStats
    report dbus-daemon's keys, and its values along a scenario of names,
    queued owners, match rules, a monitor and an incomplete connection.
  - features: the Features property and the introspection XML list
    ActivatableServicesChanged.
  - activatable: ActivatableServicesChanged is broadcast after ReloadConfig
    (before its reply), SIGHUP, a failed reload and a change in a service
    directory.
  - startlog: what a start prints on stderr with two .service files for one
    name, an invalid one and a misnamed one in the strict (transient)
    directory: bus1-broker prints nothing dbus-daemon does not, apart from
    the documented transport line of a bus1 kernel (bus1-broker(1), LOGGING).
  - activationlog: two names with one Exec= that fails: one failure logged;
    each activation names its requester with (uid= pid= comm=).
  - monitorlog: BecomeMonitor is logged, naming the connection alike.

  test_dbus_daemon_compat.py BUS_BINARY [CHECK...]
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback

import dbus
import dbus.bus
import dbus.lowlevel
from dbus.mainloop.glib import DBusGMainLoop

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawclient  # noqa: E402
from glibloop import pump, wait_for  # noqa: E402

DBusGMainLoop(set_as_default=True)

DD = "/usr/bin/dbus-daemon"
DRIVER = "org.freedesktop.DBus"
DPATH = "/org/freedesktop/DBus"
STATS = "org.freedesktop.DBus.Debug.Stats"
E = "org.freedesktop.DBus.Error."

class Daemon:
    """One bus on DIR/sock with DIR/services; @files: {relative path: text}."""

    def __init__(self, binary, files=None, extra="", env=None):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="bus1-compat.")
        for sub in ("services", "run", "home", "data"):
            os.mkdir(os.path.join(self.dir, sub))
        for rel, text in (files or {}).items():
            path = os.path.join(self.dir, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text % {"dir": self.dir})
        self.config = os.path.join(self.dir, "bus.conf")
        self.write_config(rawclient.session_config(
            "<listen>unix:path=%s/sock</listen>" % self.dir,
            "<servicedir>%s/services</servicedir>" % self.dir, extra))
        self.errpath = os.path.join(self.dir, "stderr")
        self.err = open(self.errpath, "w")
        e = dict(os.environ)
        # The standard session directories, without the host's files.
        e.update(XDG_RUNTIME_DIR=os.path.join(self.dir, "run"),
                 XDG_DATA_HOME=os.path.join(self.dir, "home"),
                 XDG_DATA_DIRS=os.path.join(self.dir, "data"))
        e.pop("BUS1_BROKER_DEVICE", None)
        e.pop("DBUS_VERBOSE", None)
        e.update(env or {})
        self.proc = subprocess.Popen(
            [binary, "--config-file=" + self.config, "--nofork", "--print-address=1",
             "--print-pid=1"],
            stdout=subprocess.PIPE, stderr=self.err, env=e, text=True)
        self.address = self.proc.stdout.readline().strip()
        pid = self.proc.stdout.readline().strip()
        if not self.address or not pid:
            self.proc.wait(10)
            raise AssertionError("%s did not start: %s" % (binary, self.stderr()))
        self.pid = int(pid)

    def write_config(self, text):
        with open(self.config, "w") as f:
            f.write(text)

    def stderr(self):
        if not self.err.closed:
            self.err.flush()
        with open(self.errpath) as f:
            return f.read()

    def stop(self):
        """Stop the bus; return what it printed on stderr."""
        try:
            if self.proc.poll() is not None:
                raise AssertionError("%s died during the test: %s" %
                                     (self.binary, self.stderr()))
            self.proc.terminate()
            self.proc.wait(30)
            self.err.close()
            return self.stderr()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.dir, ignore_errors=True)


def connect(d):
    return dbus.bus.BusConnection(d.address)


def drv(c, member, sig="", args=(), iface=DRIVER):
    return c.call_blocking(DRIVER, DPATH, iface, member, sig, args, timeout=30)


def plain(v):
    if isinstance(v, dbus.String):
        return str(v)
    if isinstance(v, dbus.Array):
        return [plain(x) for x in v]
    return int(v)


# ------------------------------------------------------------------- stats

GET_STATS_KEYS = sorted([
    "Serial", "ListMemPoolUsedBytes", "ListMemPoolCachedBytes", "ListMemPoolAllocatedBytes",
    "ActiveConnections", "IncompleteConnections", "MatchRules", "PeakMatchRules",
    "PeakMatchRulesPerConnection", "BusNames", "PeakBusNames", "PeakBusNamesPerConnection"])
CONN_STATS_KEYS = sorted([
    "Serial", "MatchRules", "PeakMatchRules", "BusNames", "PeakBusNames", "UniqueName",
    "IncomingMessages", "IncomingBytes", "IncomingFDs", "PeakIncomingBytes", "PeakIncomingFDs",
    "OutgoingMessages", "OutgoingBytes", "OutgoingFDs", "PeakOutgoingBytes", "PeakOutgoingFDs"])
# bus1-broker's own keys after dbus-daemon's (docs/bus1-broker.1, STATISTICS): it may add
# these (UnixUserID and ProcessID when known), never lose one of dbus-daemon's.
CONN_STATS_OWN_KEYS = {"UnixUserID", "ProcessID", "AnswerBytes", "InputPaused",
                       "PendingReplies", "ActivationMessages", "RefusedLimits", "RefusedPolicy",
                       "DroppedMessages"}
# GetStats: what the bus refused, and the log lines it left out (uint64 counts).
GET_STATS_OWN_KEYS = {"RefusedLimits", "RefusedPolicy", "DroppedMessages",
                      "QueueFullDisconnects", "LogLinesSuppressed"}
# The values compared (ListMemPool* and byte counts depend on the implementation).
G = ["ActiveConnections", "IncompleteConnections", "BusNames", "PeakBusNames",
     "PeakBusNamesPerConnection", "MatchRules", "PeakMatchRules", "PeakMatchRulesPerConnection"]


def check_stats(binary):
    d = Daemon(binary)
    out = []
    n_get = [0, 0]  # GetStats / GetConnectionStats calls made: their Serial

    def get_stats(c):
        s = drv(c, "GetStats", iface=STATS)
        own = GET_STATS_OWN_KEYS if binary != DD else set()
        if sorted(str(k) for k in s) != sorted(set(GET_STATS_KEYS) | own):
            raise AssertionError("GetStats keys: %s" % sorted(str(k) for k in s))
        for k, v in s.items():
            if not isinstance(v, dbus.UInt64 if str(k) in own else dbus.UInt32):
                raise AssertionError("GetStats %s is not a uint%d: %r" % (
                    k, 64 if str(k) in own else 32, v))
        if int(s["Serial"]) != n_get[0]:
            raise AssertionError("GetStats Serial %d, expected %d" % (s["Serial"], n_get[0]))
        n_get[0] += 1
        return s

    def step(what, c):
        s = get_stats(c)
        out.append((what, tuple((k, int(s[k])) for k in G)))
        return s

    def conn_stats(c, who, what, self_call=False):
        s = drv(c, "GetConnectionStats", "s", (who,), iface=STATS)
        keys = {str(k) for k in s}
        own = keys - set(CONN_STATS_KEYS)
        if not set(CONN_STATS_KEYS) <= keys or (own and binary == DD) or \
                not own <= CONN_STATS_OWN_KEYS:
            raise AssertionError("GetConnectionStats keys: %s" % sorted(keys))
        # dbus-daemon's keys only are compared.
        s = {k: x for k, x in s.items() if str(k) in CONN_STATS_KEYS}
        if int(s["Serial"]) != n_get[1]:
            raise AssertionError("GetConnectionStats Serial %d, expected %d" %
                                 (s["Serial"], n_get[1]))
        n_get[1] += 1
        v = {str(k): plain(x) for k, x in s.items()}
        # What the bus holds of the caller's messages: its own call, for itself.
        if self_call != (v["IncomingBytes"] > 0):
            raise AssertionError("%s: IncomingBytes %d" % (what, v["IncomingBytes"]))
        if v["PeakIncomingBytes"] < v["IncomingBytes"] or v["PeakOutgoingBytes"] <= 0:
            raise AssertionError("%s: peaks %s" % (what, v))
        for k in ("IncomingBytes", "PeakIncomingBytes", "PeakOutgoingBytes", "Serial"):
            del v[k]
        out.append((what, tuple(sorted(v.items()))))

    try:
        a = connect(d)
        s = step("one connection, its unique name only", a)
        for k in ("ListMemPoolUsedBytes", "ListMemPoolCachedBytes", "ListMemPoolAllocatedBytes"):
            if int(s[k]) < 0:
                raise AssertionError(k)
        step("again", a)
        drv(a, "RequestName", "su", ("org.example.One", 0))
        drv(a, "RequestName", "su", ("org.example.Two", 0))
        b = connect(d)
        if int(drv(b, "RequestName", "su", ("org.example.One", 0))) != 2:
            raise AssertionError("B is not queued")
        step("A owns 2 names, B queued for one", a)
        for i in range(3):
            drv(a, "AddMatch", "s", ("type='signal',member='M%d'" % i,))
        drv(b, "AddMatch", "s", ("type='signal',member='X'",))
        drv(b, "AddMatch", "s", ("type='signal',member='X'",))
        step("A 3 rules, B the same rule twice", a)
        drv(a, "RemoveMatch", "s", ("type='signal',member='M0'",))
        drv(a, "RemoveMatch", "s", ("type='signal',member='M1'",))
        step("A removed 2 rules", a)
        conn_stats(a, b.get_unique_name(), "GetConnectionStats of B")
        conn_stats(a, a.get_unique_name(), "GetConnectionStats of itself", self_call=True)
        conn_stats(a, "org.example.Two", "GetConnectionStats by well-known name",
                   self_call=True)
        b.close()
        # The bus notices the disconnect when it gets to it.
        wait_for(lambda: int(get_stats(a)["ActiveConnections"]) == 1, 10, "B to go")
        step("B disconnected", a)
        m = connect(d)
        # A monitor must not answer what it sees (the bus would drop it): no
        # method calls, and a filter that takes everything.
        m.add_message_filter(lambda conn, msg: dbus.lowlevel.HANDLER_RESULT_HANDLED)
        m.call_blocking(DRIVER, DPATH, "org.freedesktop.DBus.Monitoring", "BecomeMonitor",
                        "asu", (["type='signal'", "type='signal',member='X'", "type='error'",
                                 "type='method_return'"], 0), timeout=30)
        step("a monitor with 4 rules", a)
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.connect(os.path.join(d.dir, "sock"))
        wait_for(lambda: int(get_stats(a)["IncompleteConnections"]) == 1, 10,
                 "the raw connection to be accepted")
        step("an unauthenticated connection", a)
        raw.close()
        m.close()
        wait_for(lambda: int(get_stats(a)["ActiveConnections"]) == 1 and
                 int(get_stats(a)["IncompleteConnections"]) == 0, 10, "monitor and raw to go")
        step("monitor and unauthenticated connection gone", a)
        drv(a, "ReleaseName", "s", ("org.example.One",))
        step("A released a name", a)
        c = connect(d)
        conn_stats(a, c.get_unique_name(), "GetConnectionStats of a new connection")
        a.close()
        c.close()
    finally:
        d.stop()
    return out


def s(active, incomplete, names, peak_names, peak_names_conn, rules, peak_rules, peak_rules_conn):
    return tuple(zip(G, (active, incomplete, names, peak_names, peak_names_conn, rules,
                         peak_rules, peak_rules_conn)))


def cs(unique, rules, peak_rules, names, peak_names):
    v = dict(UniqueName=unique, MatchRules=rules, PeakMatchRules=peak_rules, BusNames=names,
             PeakBusNames=peak_names, IncomingMessages=0, IncomingFDs=0, PeakIncomingFDs=0,
             OutgoingMessages=0, OutgoingBytes=0, OutgoingFDs=0, PeakOutgoingFDs=0)
    return tuple(sorted(v.items()))


# dbus-daemon 1.14.10: BusNames counts unique names and queued owners, MatchRules
# the monitors' filters; monitors are active connections.
EXPECT_STATS = [
    ("one connection, its unique name only", s(1, 0, 1, 1, 1, 0, 0, 0)),
    ("again", s(1, 0, 1, 1, 1, 0, 0, 0)),
    ("A owns 2 names, B queued for one", s(2, 0, 5, 5, 3, 0, 0, 0)),
    ("A 3 rules, B the same rule twice", s(2, 0, 5, 5, 3, 5, 5, 3)),
    ("A removed 2 rules", s(2, 0, 5, 5, 3, 3, 5, 3)),
    ("GetConnectionStats of B", cs(":1.1", 2, 2, 2, 2)),
    ("GetConnectionStats of itself", cs(":1.0", 1, 3, 3, 3)),
    ("GetConnectionStats by well-known name", cs(":1.0", 1, 3, 3, 3)),
    ("B disconnected", s(1, 0, 3, 5, 3, 1, 5, 3)),
    ("a monitor with 4 rules", s(2, 0, 3, 5, 3, 5, 5, 4)),
    ("an unauthenticated connection", s(2, 1, 3, 5, 3, 5, 5, 4)),
    ("monitor and unauthenticated connection gone", s(1, 0, 3, 5, 3, 1, 5, 4)),
    ("A released a name", s(1, 0, 2, 5, 3, 1, 5, 4)),
    ("GetConnectionStats of a new connection", cs(":1.3", 0, 0, 1, 1)),
]

# ---------------------------------------------------------------- features


def check_features(binary):
    d = Daemon(binary)
    try:
        c = connect(d)
        feats = plain(drv(c, "Get", "ss", (DRIVER, "Features"),
                          iface="org.freedesktop.DBus.Properties"))
        xml = str(drv(c, "Introspect", iface="org.freedesktop.DBus.Introspectable"))
        c.close()
    finally:
        d.stop()
    # Security modules dbus-daemon may have found on this host (not mediated here).
    feats = [f for f in feats if f not in ("AppArmor", "SELinux")]
    iface = xml[xml.index('<interface name="org.freedesktop.DBus">'):]
    iface = iface[:iface.index("</interface>")]
    signals = re.findall(r'<signal name="([A-Za-z]+)">', iface)
    if '<signal name="ActivatableServicesChanged">\n    </signal>' not in iface:
        raise AssertionError("no ActivatableServicesChanged without arguments: " + iface)
    return [("Features", feats), ("signals of org.freedesktop.DBus", signals)]


EXPECT_FEATURES = [
    ("Features", ["ActivatableServicesChanged", "HeaderFiltering"]),
    ("signals of org.freedesktop.DBus",
     ["NameOwnerChanged", "NameLost", "NameAcquired", "ActivatableServicesChanged"]),
]

# ------------------------------------------------------------- activatable


def check_activatable(binary):
    d = Daemon(binary, files={"services/org.example.Old.service":
                              "[D-BUS Service]\nName=org.example.Old\nExec=/bin/false\n"})
    out = []
    try:
        c = connect(d)
        other = connect(d)  # no match rule: gets nothing
        got = []

        def filt(conn, msg):
            if isinstance(msg, dbus.lowlevel.SignalMessage) and \
                    msg.get_member() == "ActivatableServicesChanged":
                got.append(("signal", str(msg.get_sender()), str(msg.get_path()),
                            str(msg.get_interface()), msg.get_destination(),
                            str(msg.get_signature())))
            return dbus.lowlevel.HANDLER_RESULT_NOT_YET_HANDLED

        others = []
        other.add_message_filter(
            lambda conn, msg: others.append(msg.get_member()) or
            dbus.lowlevel.HANDLER_RESULT_NOT_YET_HANDLED)
        c.add_message_filter(filt)
        drv(c, "AddMatch", "s", ("type='signal',interface='org.freedesktop.DBus',"
                                 "member='ActivatableServicesChanged'",))

        def reload():
            res = []
            c.call_async(DRIVER, DPATH, DRIVER, "ReloadConfig", "", (),
                         reply_handler=lambda *a: got.append(("reply",)) or res.append(1),
                         error_handler=lambda e: got.append(("error", e.get_dbus_name())) or
                         res.append(1), timeout=30)
            wait_for(lambda: res, 30, "the ReloadConfig reply")
            pump(0.2)

        def record(what):
            out.append((what, list(got)))
            del got[:]

        reload()
        record("ReloadConfig: the signal, then the reply")
        os.kill(d.pid, signal.SIGHUP)
        wait_for(lambda: got, 10, "the signal after SIGHUP")
        pump(0.2)
        record("SIGHUP")
        good = open(d.config).read()
        d.write_config("<busconfig><not-an-element/></busconfig>\n")
        reload()
        record("ReloadConfig of an invalid file: the old one stays, the signal anyway")
        d.write_config(good)
        with open(os.path.join(d.dir, "services", "org.example.New.service"), "w") as f:
            f.write("[D-BUS Service]\nName=org.example.New\nExec=/bin/false\n")
        # dbus-daemon reloads per inotify event batch, bus1-broker after a quiet delay.
        wait_for(lambda: got, 10, "the signal after a new service file")
        pump(0.5)
        if any(g != got[0] for g in got):
            raise AssertionError("after a new service file: %s" % got)
        del got[1:]
        record("a new file in the service directory")
        names = plain(drv(c, "ListActivatableNames"))
        out.append(("activatable after the change",
                    sorted(n for n in names if n.startswith("org.example."))))
        pump(0.2)
        out.append(("a connection without a match rule got", [m for m in others
                                                            if m != "NameAcquired"]))
        c.close()
        other.close()
    finally:
        d.stop()
    return out


SIG = ("signal", DRIVER, DPATH, DRIVER, None, "")
EXPECT_ACTIVATABLE = [
    ("ReloadConfig: the signal, then the reply", [SIG, ("reply",)]),
    ("SIGHUP", [SIG]),
    ("ReloadConfig of an invalid file: the old one stays, the signal anyway",
     [SIG, ("error", E + "Failed")]),
    ("a new file in the service directory", [SIG]),
    ("activatable after the change", ["org.example.New", "org.example.Old"]),
    ("a connection without a match rule got", []),
]

# --------------------------------------------------------------- logging

PREFIXES = [
    re.compile(r"^dbus-daemon\[\d+\]: (\[[a-z]+ uid=\d+ pid=\d+\] )?"),
    re.compile(r"^bus1-broker\[\d+\]: (\[[a-z]+ uid=\d+ pid=\d+\] )?"),
]
# Printed by dbus-daemon only, about its environment, not the configuration.
DD_ONLY = [re.compile(r"Failed to set fd limit")]
# Documented in bus1-broker(1), LOGGING: the transport of a bus1 kernel, and a
# missing device named by BUS1_BROKER_DEVICE (the guest suites' wrapper sets it).
BUS1_DOCUMENTED = [re.compile(r"^bus1 transport on \S+: native clients accepted$"),
                   re.compile(r"^\S+ not found: serving socket clients only$")]


def log_lines(text):
    lines = []
    for line in text.splitlines():
        if not line.strip():
            continue
        for p in PREFIXES:
            line = p.sub("", line)
        if any(p.search(line) for p in DD_ONLY):
            continue
        lines.append(line)
    return lines


STARTLOG_FILES = {
    # Two notification daemons installed: two files for one name.
    "services/dunst.service":
        "[D-BUS Service]\nName=org.freedesktop.Notifications\nExec=/usr/bin/dunst\n",
    "services/xfce4-notifyd.service":
        "[D-BUS Service]\nName=org.freedesktop.Notifications\n"
        "Exec=/usr/lib/xfce4/notifyd/xfce4-notifyd\n",
    "services/broken.service": "[D-BUS Service]\nExec=/bin/false\n",
    "services/garbage.service": "not a key file\n",
    # The transient directory ($XDG_RUNTIME_DIR/dbus-1/services) has strict naming.
    "run/dbus-1/services/wrong.service":
        "[D-BUS Service]\nName=org.example.Wrong\nExec=/bin/false\n",
}


def check_startlog(binary):
    d = Daemon(binary, files=STARTLOG_FILES, extra="<standard_session_servicedirs/>")
    try:
        c = connect(d)
        names = plain(drv(c, "ListActivatableNames"))
        c.close()
    finally:
        text = d.stop()
    lines = log_lines(text)
    print("  %s printed: %r" % (os.path.basename(binary), text))
    wrong = 'Service file "%s/run/dbus-1/services/wrong.service" should have been named ' \
            '"org.example.Wrong.service": not loading it' % d.dir
    # (The standard directories include /usr/share/dbus-1/services: only ours.)
    out = [("activatable", sorted(n for n in names if n in ("org.freedesktop.Notifications",
                                                             "org.example.Wrong")))]
    out.append(("the misnamed transient file is reported", wrong in lines))
    rest = [l.replace(d.dir, "DIR") for l in lines if l != wrong]
    return out, rest


EXPECT_STARTLOG = [
    ("activatable", ["org.freedesktop.Notifications"]),
    ("the misnamed transient file is reported", True),
]

ACTIVATION_FILES = {
    "fail.sh": "#!/bin/sh\nsleep 0.3\nexit 3\n",
    "services/org.example.A.service":
        "[D-BUS Service]\nName=org.example.A\nExec=/bin/sh %(dir)s/fail.sh\n",
    "services/org.example.B.service":
        "[D-BUS Service]\nName=org.example.B\nExec=/bin/sh %(dir)s/fail.sh\n",
}


def check_activationlog(binary):
    d = Daemon(binary, files=ACTIVATION_FILES)
    res = []
    try:
        c = connect(d)
        for n in ("org.example.A", "org.example.B"):
            c.call_async(DRIVER, DPATH, DRIVER, "StartServiceByName", "su", (n, 0),
                         reply_handler=lambda *a, n=n: res.append((n, "ok")),
                         error_handler=lambda e, n=n: res.append((n, e.get_dbus_name())),
                         timeout=30)
        wait_for(lambda: len(res) == 2, 30, "both activations to fail")
        # The other child exits too: nothing more to report about it.
        pump(1.5)
        c.close()
    finally:
        text = d.stop()
    print("  %s printed: %r" % (os.path.basename(binary), text))
    lines = []
    for l in log_lines(text):
        if any(p.search(l) for p in BUS1_DOCUMENTED):
            continue
        l = re.sub(r"org\.example\.[AB]", "NAME", l)
        lines.append(loginfo_masked(l))
    out = [("replies", sorted(res)),
           ("log", sorted(lines))]
    return out, []


EXPECT_ACTIVATIONLOG = [
    ("replies", [("org.example.A", E + "Spawn.ChildExited"),
                 ("org.example.B", E + "Spawn.ChildExited")]),
    ("log", ["Activated service 'NAME' failed: Process NAME exited with status 3",
             "Activating service name='NAME' requested by ':1.0' (LOGINFO)",
             "Activating service name='NAME' requested by ':1.0' (LOGINFO)"]),
]


def loginfo_masked(line):
    """A connection's (uid=U pid=P comm="...") in a log line, as dbus-daemon writes it,
    checked for this process and made LOGINFO."""
    def mask(m):
        ok = m.group(1) == str(os.getuid()) and m.group(2) == str(os.getpid())
        return "(LOGINFO)" if ok else "(LOGINFO of another process: %s)" % m.group(0)
    return re.sub(r"\(uid=(\d+) pid=(\d+) comm=\"[^\"]*\"(?: label=\"[^\"]*\")?\)", mask, line)


def check_monitorlog(binary):
    """BecomeMonitor is logged, naming the connection as the activation lines do."""
    d = Daemon(binary)
    try:
        c = connect(d)
        name = c.get_unique_name()
        drv(c, "BecomeMonitor", "asu", ([], 0), iface="org.freedesktop.DBus.Monitoring")
        pump(0.3)
        c.close()
    finally:
        text = d.stop()
    print("  %s printed: %r" % (os.path.basename(binary), text))
    lines = [loginfo_masked(l.replace(name, "NAME")) for l in log_lines(text)
             if "monitor" in l]
    return [("log", lines)], []


EXPECT_MONITORLOG = [
    ("log", ["Connection NAME (LOGINFO) became a monitor."]),
]

CHECKS = [
    ("stats", check_stats, EXPECT_STATS),
    ("features", check_features, EXPECT_FEATURES),
    ("activatable", check_activatable, EXPECT_ACTIVATABLE),
    ("startlog", check_startlog, EXPECT_STARTLOG),
    ("activationlog", check_activationlog, EXPECT_ACTIVATIONLOG),
    ("monitorlog", check_monitorlog, EXPECT_MONITORLOG),
]


def diff(a, b):
    lines = []
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x != y:
            lines.append("    %r\n != %r" % (x, y))
    return "\n".join(lines)


def main():
    # run-under-valgrind.sh points BUS_BINARY_OVERRIDE at its valgrind wrapper
    bus1 = os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1]
    only = sys.argv[2:]
    binaries = [bus1]
    if os.path.exists(DD):
        binaries.append(DD)
    else:
        print("no %s: bus1-broker against dbus-daemon's recorded outcomes only" % DD)
    failed = 0
    for name, fn, expect in CHECKS:
        if only and name not in only:
            continue
        try:
            results = {}
            extra = {}
            for b in binaries:
                r = fn(b)
                if isinstance(r, tuple):
                    r, extra[b] = r
                results[b] = r
                if r != expect:
                    raise AssertionError("%s: %s differs from dbus-daemon 1.14:\n%s" %
                                         (name, b, diff(r, expect)))
            # Log lines: bus1-broker prints nothing dbus-daemon does not.
            if extra.get(bus1):
                allowed = extra.get(DD, [])
                bad = [l for l in extra[bus1] if l not in allowed and
                       not any(p.search(l) for p in BUS1_DOCUMENTED)]
                if bad:
                    raise AssertionError("%s: bus1-broker printed what dbus-daemon does not "
                                         "(%s): %s" % (name, DD if DD in extra else
                                                       "which prints nothing", bad))
            print("ok   %s" % name)
        except Exception:
            failed += 1
            print("FAIL %s" % name)
            traceback.print_exc()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
