# SPDX-License-Identifier: LGPL-2.1-or-later
"""SIGUSR2 re-executes bus1-broker in place (broker/upgrade/reexec.h, bus1-broker(1)
RE-EXECUTION). Every case starts its own bus on a private socket with a
config (and service files) written into a temp dir, and checks what the
clients see across the switch:

  state      names with their queues and flags, match rules, a monitor, the
             bus id and the unique-id counter carried; no signal to anyone;
             the bus executes the program BUS1_BROKER_REEXEC names (a copy)
  partial    a method call sent in pieces around two re-execs; 1 MiB the bus
             could not write yet to a client that does not read
  inflight   calls read by the callee but not answered yet: the replies
             (return, error) go through after, a second reply is refused,
             the callee leaving gives NoReply
  gdbus      a GDBus connection calls the driver and a service before,
             during and after 10 re-execs: never closed, same unique name
  upgrade    the program file replaced on disk (renamed over, as dpkg does):
             the same process runs the new file, clients keep everything
  fallback   the new program passes the check but cannot read (or restore)
             the state after all (BUS1_BROKER_RESTORE_FAIL): it executes the
             previous program, which takes over with every fd and all state
  refusal    a state version the new program cannot read, a binary that
             exits at once, a binary that does not exist: refused and
             logged (twice), same pid, clients served, no "resumed"
  sasl       a client between AUTH and BEGIN (SASL_EXPECTATION: what the bus
             does then); a client stuck in SASL until auth_timeout
  child      an activated service still running is carried; the new
             process reaps it when it exits; activation works after
  pending    an activation whose service is not up yet, with calls and a
             StartServiceByName queued, is carried and answered after
  limits     a call never answered ends in NoReply at its reply_timeout
             deadline, not one counted from the re-exec; the connections
             per user and the rules per connection carried are counted
             against their limits, and given back when they go

  test_reexec.py BUS_BINARY [CASE...]  (run by /usr/bin/python3: gi for GDBus)
  test_reexec.py BUS_BINARY --from OLD_BINARY [CASE...]
      across versions: every bus starts as OLD_BINARY (another version's
      program, test/state/build-old-broker.sh) and its first SIGUSR2
      executes BUS_BINARY, which must take the state OLD_BINARY wrote
      (cases: CROSS_VERSION_CASES unless named)
  test_reexec.py OLD_BINARY --capture FILE
      write the state OLD_BINARY hands to a re-exec (names, a queue, rules,
      a monitor, replies in flight, a frame in pieces, an fd queued) to
      FILE and refuse that re-exec: how test/state/state-v1.bin was made

Each case must finish in CASE_TIMEOUT s; it prints what it checked and the
time from SIGUSR2 to the log line that ends the re-exec.
"""

import os
import re
import select
import shutil
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
import rawclient  # noqa: E402
from rawclient import (ERROR, FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,  # noqa: E402
                       FIELD_MEMBER, FIELD_PATH, FIELD_REPLY_SERIAL, FIELD_SENDER,
                       METHOD_CALL, METHOD_RETURN, SIGNAL)
from timefactor import time_factor  # noqa: E402

# What SIGUSR2 does while a client is between AUTH and BEGIN:
#   "refused"  re-exec refused ("... authenticating"), the next one succeeds
#   "waits"    the bus holds new clients in the backlog until the client
#              finished SASL, then re-executes (broker/upgrade/reexec.h today)
#   "carried"  re-executes at once, the client's SASL state carried over
SASL_EXPECTATION = "waits"

CASE_TIMEOUT = 30
DRIVER, DPATH, DIFACE = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
DBUS = (DRIVER, DPATH, DIFACE)
E = "org.freedesktop.DBus.Error."
RESUMED, REFUSED, EXECUTING = "re-exec: resumed", "re-exec refused", "re-exec: executing "
WAITING = "re-exec: waiting for"
FALLBACK = "going back to the previous program"

# An activatable service: waits for its gate file (if any), owns its name
# and answers every call with "pong PID"; exits after Quit (or when the bus
# goes, or after 30 s of nothing).
SERVICE = """import os, sys, time
sys.path.insert(0, %(here)r)
import rawclient
gate = %(gate)r
end = time.monotonic() + 30
while gate and not os.path.exists(gate):
    if time.monotonic() > end:
        sys.exit(3)
    time.sleep(0.02)
c = rawclient.Raw(os.environ["DBUS_STARTER_ADDRESS"])
c.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
       "RequestName", "su", (%(name)r, 4))
while True:
    try:
        m = c.recv(30)
    except (EOFError, OSError):
        sys.exit(0)
    if m[0] != rawclient.METHOD_CALL:
        continue
    reply = rawclient.marshal(rawclient.METHOD_RETURN, c.next_serial(),
                              {rawclient.FIELD_REPLY_SERIAL: m[2],
                               rawclient.FIELD_DESTINATION: m[3][rawclient.FIELD_SENDER]},
                              "s", ("pong %%d" %% os.getpid(),))
    c.send_raw(reply)
    if m[3].get(rawclient.FIELD_MEMBER) == "Quit":
        sys.exit(0)
"""


class CaseTimeout(Exception):
    pass


FAILURES = []


def check(cond, what):
    """A check: printed, and recorded if it fails (the case goes on; an
    exception, a timeout included, ends it)."""
    if cond:
        print("  ok   " + what)
    else:
        print("  FAIL " + what)
        FAILURES.append(what)
    return bool(cond)


def eq(got, want, what):
    return check(got == want, "%s (got %r, want %r)" % (what, got, want) if got != want else what)


# ------------------------------------------------------------------ messages

def body_u(body):
    return struct.unpack_from("<I", body, 0)[0]


body_as = rawclient.body_string_array   # an 'as' body


def describe(m):
    kind = {METHOD_CALL: "call", METHOD_RETURN: "return", ERROR: "error", SIGNAL: "signal"}
    f = m[3]
    what = f.get(FIELD_ERROR_NAME) or "%s.%s" % (f.get(FIELD_INTERFACE), f.get(FIELD_MEMBER))
    try:
        args = rawclient.body_strings(m[4]) if f.get(rawclient.FIELD_SIGNATURE, "").strip("s") == "" else "..."
    except Exception:
        args = "?"
    return "%s %s from %s %r" % (kind.get(m[0], m[0]), what, f.get(FIELD_SENDER), args)


def is_signal(m, member, iface=DIFACE):
    return m[0] == SIGNAL and m[3].get(FIELD_MEMBER) == member and \
        m[3].get(FIELD_INTERFACE) == iface


class Client(rawclient.Raw):
    """rawclient.Raw that keeps what arrives while it waits for a reply."""

    def __init__(self, address, **kw):
        self.inbox = []
        super().__init__(address, **kw)
        if self.name:
            self.sync()     # the NameAcquired for the unique name
            self.inbox = []

    def wait_reply(self, serial, timeout=5):
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise socket.timeout("no reply to serial %d in %.1f s" % (serial, timeout))
            m = self.recv(left)
            if m[0] in (METHOD_RETURN, ERROR) and m[3].get(FIELD_REPLY_SERIAL) == serial:
                return m
            self.inbox.append(m)

    def driver(self, member, sig="", args=(), timeout=5):
        """The driver's answer body; AssertionError on an error."""
        m = self.wait_reply(self.call(*DBUS, member, sig, args), timeout)
        if m[0] == ERROR:
            raise AssertionError("%s(%r) by %s: %s %r" % (member, args, self.name,
                                                          m[3].get(FIELD_ERROR_NAME),
                                                          rawclient.body_strings(m[4])))
        return m[4]

    def sync(self, timeout=5):
        """A Peer.Ping round trip: everything the bus queued for us before is in the inbox."""
        m = self.wait_reply(self.call(DRIVER, DPATH, "org.freedesktop.DBus.Peer", "Ping"),
                            timeout)
        if m[0] != METHOD_RETURN:
            raise AssertionError("Peer.Ping of %s: %s" % (self.name, describe(m)))

    def take(self):
        out, self.inbox = self.inbox, []
        return out

    def reply(self, call, sig="", args=(), error=None):
        f = {FIELD_REPLY_SERIAL: call[2], FIELD_DESTINATION: call[3][FIELD_SENDER]}
        if error:
            f[FIELD_ERROR_NAME] = error
        self.send_raw(rawclient.marshal(ERROR if error else METHOD_RETURN, self.next_serial(),
                                        f, sig, args))
        return self.serial


def new_monitor(bus):
    """A client that became a monitor of everything (BecomeMonitor, no rule)."""
    mon = Client(bus.address)
    s = mon.next_serial()
    mon.send_raw(rawclient.marshal(METHOD_CALL, s, {
        FIELD_PATH: DPATH, FIELD_INTERFACE: "org.freedesktop.DBus.Monitoring",
        FIELD_MEMBER: "BecomeMonitor", FIELD_DESTINATION: DRIVER},
        "asu", body=struct.pack("<II", 0, 0)))
    eq(mon.wait_reply(s)[0], METHOD_RETURN, "M became a monitor")
    return mon


def unique_id(name):
    m = re.match(r"^:1\.(\d+)$", name or "")
    if not m:
        raise AssertionError("not a unique name of this bus: %r" % name)
    return int(m.group(1))


# ----------------------------------------------------------------------- bus

TMP = None
BUSES = []
# --from: the program every bus starts as (BUS_BINARY comes in at the first re-exec)
FROM = None
CROSS_VERSION_CASES = ("state", "partial", "inflight", "gdbus", "child", "pending", "limits")


class Bus:
    """A bus1-broker on a private socket in its own temp dir."""

    def __init__(self, binary, name, env=None, auth_timeout=5000, limits=None):
        self.binary = binary
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=name + ".", dir=TMP)
        os.mkdir(os.path.join(self.dir, "services"))
        conf = os.path.join(self.dir, "bus.conf")
        with open(conf, "w") as f:
            # A reply that answers no pending call is denied (as system.conf
            # does): the inflight case sees the reply slots carried over.
            f.write(rawclient.session_config(
                "<listen>unix:path=%s/bus</listen>" % self.dir,
                "<servicedir>%s/services</servicedir>" % self.dir,
                '<limit name="auth_timeout">%d</limit>' % auth_timeout,
                *('<limit name="%s">%d</limit>' % kv for kv in (limits or {}).items())
            ).replace("  </policy>", '    <deny send_type="method_return"/>\n'
                                     '    <deny send_type="error"/>\n  </policy>'))
        self.log_path = os.path.join(self.dir, "bus.log")
        self.log_file = open(self.log_path, "w")
        e = dict(os.environ)
        for k in ("DBUS_SESSION_BUS_ADDRESS", "DBUS_STARTER_ADDRESS", "BUS1_BROKER_REEXEC",
                  "BUS1_BROKER_STATE_VERSION"):
            e.pop(k, None)
        if FROM:
            # The old program starts; its re-exec runs the one under test.
            e["BUS1_BROKER_REEXEC"] = binary
            binary = FROM
        e.update(env or {})
        self.crossed = not FROM
        self.proc = subprocess.Popen([binary, "--config-file=" + conf, "--nofork",
                                      "--print-address=1"], stdout=subprocess.PIPE,
                                     stderr=self.log_file, env=e, text=True)
        BUSES.append(self)
        self.pid = self.proc.pid
        ready, _, _ = select.select([self.proc.stdout], [], [],
                                     10 * time_factor())
        self.address = self.proc.stdout.readline().strip() if ready else ""
        if not self.address:
            self.kill()
            raise AssertionError("%s did not start: %s" % (binary, self.log()))
        self.stopped = False
        self.fallbacks = 0      # re-execs expected to go back to the previous program

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def count(self, text):
        return self.log().count(text)

    def wait_log(self, text, count=1, timeout=15):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.count(text) >= count:
                return True
            if self.proc.poll() is not None:
                raise AssertionError("the bus died (status %s) waiting for %r:\n%s" %
                                     (self.proc.returncode, text, self.log()))
            time.sleep(0.005)
        return False

    def alive(self):
        """Same process, running (not a zombie)."""
        if self.proc.poll() is not None:
            return False
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    def reexec(self, expect=RESUMED, timeout=15):
        """SIGUSR2; wait for the next @expect line (fail early on another
        outcome). Returns the ms from the signal to the line."""
        outcomes = (RESUMED, REFUSED, WAITING)
        before = {o: self.count(o) for o in outcomes}
        t0 = time.monotonic()
        os.kill(self.pid, signal.SIGUSR2)
        end = t0 + timeout
        while True:
            log = self.log()
            if log.count(expect) > before[expect]:
                took = (time.monotonic() - t0) * 1000
                if expect == RESUMED:
                    self.check_crossed()
                return took
            for o in outcomes:
                if o != expect and log.count(o) > before[o]:
                    raise AssertionError("SIGUSR2: expected %r, got %r:\n%s" %
                                         (expect, last_line(log, o), tail(log)))
            if self.proc.poll() is not None:
                raise AssertionError("the bus died at SIGUSR2 (status %s):\n%s" %
                                     (self.proc.returncode, tail(log)))
            if time.monotonic() > end:
                raise AssertionError("SIGUSR2: no %r within %d s:\n%s" % (expect, timeout, tail(log)))
            time.sleep(0.002)

    def check_crossed(self):
        """--from: after the first re-exec the process runs the program under test."""
        if self.crossed:
            return
        exe = os.path.realpath("/proc/%d/exe" % self.pid)
        check(exe != os.path.realpath(FROM),
              "%s: the old program handed its state to %s" % (self.name, exe))
        self.crossed = True

    def service(self, name, gate=None):
        script = os.path.join(self.dir, name + ".py")
        with open(script, "w") as f:
            f.write(SERVICE % {"here": HERE, "gate": gate, "name": name})
        with open(os.path.join(self.dir, "services", name + ".service"), "w") as f:
            f.write("[D-BUS Service]\nName=%s\nExec=/usr/bin/python3 %s\n" % (name, script))

    def stop(self):
        """SIGTERM: the bus must exit 0, with no sanitizer report and no fallback."""
        self.stopped = True
        if self.proc.poll() is not None:
            raise AssertionError("the bus died during the test (status %s):\n%s" %
                                 (self.proc.returncode, tail(self.log())))
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("the bus did not exit on SIGTERM within 10 s")
        self.log_file.close()
        log = self.log()
        eq(rc, 0, "%s: the bus exits 0 on SIGTERM" % self.name)
        check(not re.search("ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|"
                            "SUMMARY: UndefinedBehaviorSanitizer", log),
              "%s: no sanitizer report" % self.name)
        eq(log.count(FALLBACK), self.fallbacks,
           "%s: %d re-exec(s) fell back to the previous program" % (self.name, self.fallbacks))

    def kill(self):
        """Cleanup after a failure: SIGTERM, then SIGKILL."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if not self.log_file.closed:
            self.log_file.close()


def last_line(log, text):
    lines = [l for l in log.splitlines() if text in l]
    return lines[-1] if lines else None


def tail(log, n=25):
    return "\n".join("    | " + l for l in log.splitlines()[-n:])


def proc_state(pid):
    """(state letter, PPid) of @pid, or None if it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            st = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
    except FileNotFoundError:
        return None
    return st["State"].split()[0], int(st["PPid"])


def wait_until(fn, timeout=5, step=0.01):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


def ms(x):
    return "%.1f ms" % x


# --------------------------------------------------------------------- cases

def case_state(binary):
    """Names, queues, flags, match rules, a monitor, the id and the counter."""
    # The new program is a copy: what an upgrade does, and the log must name it.
    new = os.path.join(TMP, "bus1-broker-new")
    if not os.path.exists(new):
        shutil.copy2(binary, new)
    bus = Bus(binary, "state", env={"BUS1_BROKER_REEXEC": new})
    a, b, c, d = (Client(bus.address) for _ in range(4))
    eq(body_u(a.driver("RequestName", "su", ("com.example.Q", 0))), 1, "A owns com.example.Q")
    # B: ALLOW_REPLACEMENT|REPLACE_EXISTING, queued (A does not allow replacement)
    eq(body_u(b.driver("RequestName", "su", ("com.example.Q", 3))), 2, "B queued behind A")
    eq(body_u(c.driver("RequestName", "su", ("com.example.R", 1))), 1,
       "C owns com.example.R (AllowReplacement)")
    d.driver("AddMatch", "s", ("type='signal',interface='com.example.Test'",))
    d.driver("AddMatch", "s", ("type='signal',sender='org.freedesktop.DBus',"
                               "member='NameOwnerChanged'",))
    b.driver("AddMatch", "s", ("type='signal',interface='com.example.Test',member='Arg',"
                               "arg0='yes'",))
    mon = new_monitor(bus)
    clients = {"A": a, "B": b, "C": c, "D": d}
    names = {k: v.name for k, v in clients.items()}
    names["M"] = mon.name

    def snapshot():
        return {
            "id": rawclient.body_strings(a.driver("GetId"))[0],
            "names": sorted(body_as(a.driver("ListNames"))),
            "queue Q": body_as(a.driver("ListQueuedOwners", "s", ("com.example.Q",))),
            "queue R": body_as(a.driver("ListQueuedOwners", "s", ("com.example.R",))),
            "owner Q": rawclient.body_strings(a.driver("GetNameOwner", "s", ("com.example.Q",)))[0],
            "owner R": rawclient.body_strings(a.driver("GetNameOwner", "s", ("com.example.R",)))[0],
            "owner of B": rawclient.body_strings(a.driver("GetNameOwner", "s", (b.name,)))[0],
        }

    def monitor_until(member, timeout=5):
        """What the monitor gets up to (and with) a com.example.Test @member signal."""
        got = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                m = mon.recv(max(0.01, end - time.monotonic()))
            except socket.timeout:
                break
            got.append(m)
            if is_signal(m, member, "com.example.Test"):
                return got, True
        return got, False

    before = snapshot()
    eq(before["queue Q"], [a.name, b.name], "queue of com.example.Q")
    check(mon.name not in before["names"] and
          body_u(a.driver("NameHasOwner", "s", (mon.name,))) == 0,
          "the monitor's unique name is no bus name (BecomeMonitor released it)")
    a.signal("/", "com.example.Test", "Before")
    a.sync()
    d.sync()
    eq(sum(is_signal(m, "Before", "com.example.Test") for m in d.take()), 1,
       "D's rule delivers before the re-exec")
    check(monitor_until("Before")[1], "the monitor sees traffic before the re-exec")
    for x in clients.values():
        x.sync()
        x.take()
    while True:   # drain the monitor
        try:
            mon.recv(0.2)
        except socket.timeout:
            break

    t = bus.reexec()
    print("  state: SIGUSR2 -> resumed %s (5 peers, names, rules, a monitor)" % ms(t))
    log = bus.log()
    check(EXECUTING + new in log, "the bus executed the program BUS1_BROKER_REEXEC names")
    check(bus.alive() and bus.proc.pid == bus.pid, "same bus process (pid %d)" % bus.pid)
    eq(os.path.realpath("/proc/%d/exe" % bus.pid), os.path.realpath(new),
       "the process runs the new program")
    m = re.search(r"re-exec: resumed, (\d+) peers? carried over", log)
    eq(m and int(m.group(1)), 5, "the log counts the peers carried")

    eq(body_u(a.driver("NameHasOwner", "s", (mon.name,))), 0,
       "the monitor's unique name is still no bus name (NameHasOwner)")
    after = snapshot()
    for k in before:
        eq(after[k], before[k], "%s unchanged" % k)
    for k, x in clients.items():
        x.sync()
        eq([describe(m) for m in x.take()], [],
           "%s got nothing from the re-exec (no NameOwnerChanged/NameLost/NameAcquired)" % k)

    a.signal("/", "com.example.Test", "After")
    a.signal("/", "com.example.Test", "Arg", "s", ("no",))
    a.signal("/", "com.example.Test", "Arg", "s", ("yes",))
    a.sync()
    d.sync()
    b.sync()
    dm = d.take()
    eq(sum(is_signal(m, "After", "com.example.Test") for m in dm), 1,
       "D's match rule delivers the signal exactly once")
    eq(sum(is_signal(m, "Arg", "com.example.Test") for m in dm), 2, "D gets both Arg signals")
    bm = b.take()
    eq([rawclient.body_strings(m[4]) for m in bm if is_signal(m, "Arg", "com.example.Test")],
       [["yes"]], "B's arg0 rule still matches only arg0='yes'")
    got, seen = monitor_until("After")
    check(seen, "the monitor still sees traffic (%d messages up to the signal)" % len(got))
    eq([describe(m) for m in got if m[0] == SIGNAL and m[3].get(FIELD_SENDER) == DRIVER], [],
       "the monitor saw no signal of the bus from the re-exec")

    e = Client(bus.address)
    old_ids = [unique_id(n) for n in names.values()]
    eq(unique_id(e.name), max(old_ids) + 1,
       "a new client gets the next unique id (%s; old %s)" % (e.name, sorted(old_ids)))
    check(e.name not in names.values(), "no unique name is reused")
    e.sync()
    d.sync()
    eq([rawclient.body_strings(m[4]) for m in d.take() if is_signal(m, "NameOwnerChanged")],
       [[e.name, "", e.name]], "D sees the new client's NameOwnerChanged")

    # Flags carried: C allowed replacement, so E takes com.example.R.
    eq(body_u(e.driver("RequestName", "su", ("com.example.R", 2))), 1,
       "E replaces C as owner of com.example.R (C's AllowReplacement carried)")
    c.sync()
    eq([rawclient.body_strings(m[4]) for m in c.take() if is_signal(m, "NameLost")],
       [["com.example.R"]], "C gets NameLost for com.example.R")
    # The queue carried: A releases, B gets it.
    eq(body_u(a.driver("ReleaseName", "s", ("com.example.Q",))), 1, "A releases com.example.Q")
    b.sync()
    eq([rawclient.body_strings(m[4]) for m in b.take() if is_signal(m, "NameAcquired")],
       [["com.example.Q"]], "B (queued before the re-exec) gets NameAcquired")
    eq(rawclient.body_strings(a.driver("GetNameOwner", "s", ("com.example.Q",)))[0], b.name,
       "B owns com.example.Q")
    d.sync()
    eq([rawclient.body_strings(m[4]) for m in d.take() if is_signal(m, "NameOwnerChanged")],
       [["com.example.R", c.name, e.name], ["com.example.Q", a.name, b.name]],
       "D sees both changes of owner")
    # B's queued flags carried: ALLOW_REPLACEMENT, so E can take it from B.
    eq(body_u(e.driver("RequestName", "su", ("com.example.Q", 2))), 1,
       "E replaces B (B's AllowReplacement from its queue entry carried)")
    eq(body_as(a.driver("ListQueuedOwners", "s", ("com.example.Q",))), [e.name, b.name],
       "B is queued again behind E")
    for x in list(clients.values()) + [mon, e]:
        x.close()
    bus.stop()


def case_partial(binary):
    """A call in pieces around two re-execs; output the bus could not write yet."""
    bus = Bus(binary, "partial")
    p = Client(bus.address)
    s1 = p.next_serial()
    m1 = rawclient.marshal(METHOD_CALL, s1, {
        FIELD_PATH: DPATH, FIELD_INTERFACE: DIFACE, FIELD_MEMBER: "GetNameOwner",
        FIELD_DESTINATION: DRIVER}, "s", (p.name,))
    s2 = p.next_serial()
    m2 = rawclient.marshal(METHOD_CALL, s2, {
        FIELD_PATH: DPATH, FIELD_INTERFACE: DIFACE, FIELD_MEMBER: "GetNameOwner",
        FIELD_DESTINATION: DRIVER}, "s", (DRIVER,))
    p.send_raw(m1[:7])                 # inside the fixed header
    time.sleep(0.05)
    t1 = bus.reexec()
    p.send_raw(m1[7:] + m2[:-3])       # the rest, and a second call but its last bytes
    time.sleep(0.05)
    t2 = bus.reexec()
    p.send_raw(m2[-3:])
    r1 = p.wait_reply(s1)
    eq((r1[0], rawclient.body_strings(r1[4])), (METHOD_RETURN, [p.name]),
       "the call cut after 7 bytes is answered right")
    r2 = p.wait_reply(s2)
    eq((r2[0], rawclient.body_strings(r2[4])), (METHOD_RETURN, [DRIVER]),
       "the call cut 3 bytes before its end is answered right")
    eq(p.take(), [], "nothing else came")
    print("  partial: SIGUSR2 -> resumed %s, %s (a frame in pieces)" % (ms(t1), ms(t2)))

    # The other way: a client that does not read, 4 x 256 KiB queued for it.
    x = Client(bus.address)
    y = Client(bus.address)
    y.sync()
    y.take()
    y.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    size = 256 * 1024
    for i in range(4):
        x.signal("/", "com.example.Big", "Chunk", "s", (chr(ord("a") + i) * size,), dest=y.name)
    x.sync()
    t = bus.reexec()
    print("  partial: SIGUSR2 -> resumed %s (1 MiB unwritten to a client)" % ms(t))
    y.sync(timeout=10)
    chunks = [m for m in y.take() if is_signal(m, "Chunk", "com.example.Big")]
    eq([(m[3].get(FIELD_SENDER), rawclient.body_strings(m[4])[0][:1],
         len(rawclient.body_strings(m[4])[0])) for m in chunks],
       [(x.name, chr(ord("a") + i), size) for i in range(4)],
       "the client gets the 4 messages whole and in order")
    check(all(rawclient.body_strings(m[4])[0] == chr(ord("a") + i) * size
              for i, m in enumerate(chunks)), "their bodies are intact")
    for c in (p, x, y):
        c.close()
    bus.stop()


def case_inflight(binary):
    """Calls the callee has read but not answered when the bus re-executes."""
    bus = Bus(binary, "inflight")
    x = Client(bus.address)
    y = Client(bus.address)
    eq(body_u(x.driver("RequestName", "su", ("com.example.X", 4))), 1, "X owns com.example.X")
    s_ok = y.call("com.example.X", "/x", "com.example.X", "Work", "s", ("one",))
    s_err = y.call("com.example.X", "/x", "com.example.X", "Fail")
    s_hang = y.call(x.name, "/x", "com.example.X", "Hang")
    calls = {}
    end = time.monotonic() + 5
    while len(calls) < 3 and time.monotonic() < end:
        m = x.recv(max(0.01, end - time.monotonic()))
        if m[0] == METHOD_CALL:
            calls[m[3][FIELD_MEMBER]] = m
    eq(sorted(calls), ["Fail", "Hang", "Work"], "X has read the three calls")
    t = bus.reexec()
    print("  inflight: SIGUSR2 -> resumed %s (3 replies pending)" % ms(t))
    x.reply(calls["Work"], "s", ("done one",))
    x.reply(calls["Fail"], "s", ("nope",), error="com.example.Error.Failed")
    r = y.wait_reply(s_ok)
    eq((r[0], r[3].get(FIELD_SENDER), rawclient.body_strings(r[4])),
       (METHOD_RETURN, x.name, ["done one"]), "Y gets X's reply")
    r = y.wait_reply(s_err)
    eq((r[0], r[3].get(FIELD_ERROR_NAME), rawclient.body_strings(r[4])),
       (ERROR, "com.example.Error.Failed", ["nope"]), "Y gets X's error")
    # the slot is used up: a second reply is refused as without a re-exec
    s = x.reply(calls["Work"], "s", ("again",))
    r = x.wait_reply(s)
    eq((r[0], r[3].get(FIELD_ERROR_NAME)), (ERROR, E + "AccessDenied"),
       "a second reply is refused (AccessDenied)")
    y.sync()
    eq([describe(m) for m in y.take()], [], "Y got no second reply")
    # the callee goes: the pending call carried ends in NoReply
    x.close()
    r = y.wait_reply(s_hang)
    eq((r[0], r[3].get(FIELD_ERROR_NAME)), (ERROR, E + "NoReply"),
       "the call still pending gets NoReply when X leaves")
    y.close()
    bus.stop()


def case_gdbus(binary):
    """A GDBus connection (and a rawclient service) across 10 re-execs."""
    try:
        from gi.repository import Gio, GLib
    except ImportError as e:
        raise AssertionError("python3-gi is needed (run by /usr/bin/python3): %s" % e)
    bus = Bus(binary, "gdbus")
    svc = Client(bus.address)
    eq(body_u(svc.driver("RequestName", "su", ("com.example.Echo", 4))), 1,
       "the rawclient service owns com.example.Echo")
    stop = threading.Event()
    served = []

    def serve():
        while not stop.is_set():
            try:
                m = svc.recv(0.1)
            except socket.timeout:
                continue
            except (EOFError, OSError) as e:
                served.append(e)
                return
            if m[0] == METHOD_CALL and m[3].get(FIELD_MEMBER) == "Echo":
                served.append(m[3][FIELD_SENDER])    # before the reply: no race with the count
                svc.reply(m, "s", ("echo " + rawclient.body_strings(m[4])[0],))

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    closed = []
    try:
        flags = (Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT |
                 Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION)
        conn = Gio.DBusConnection.new_for_address_sync(bus.address, flags, None, None)
        conn.connect("closed", lambda *a: closed.append(a[1:]))
        ctx = GLib.MainContext.default()
        name = conn.get_unique_name()

        def call(dest, path, iface, member, args, rtype):
            v = conn.call_sync(dest, path, iface, member, args, GLib.VariantType(rtype),
                               Gio.DBusCallFlags.NONE, 5000, None)
            while ctx.pending():
                ctx.iteration(False)
            return v.unpack()

        def gid():
            return call(*DBUS, "GetId", None, "(s)")[0]

        def echo(s):
            return call("com.example.Echo", "/", "com.example.Echo", "Echo",
                        GLib.Variant("(s)", (s,)), "(s)")[0]

        guid = gid()
        eq(call(*DBUS, "RequestName", GLib.Variant("(su)", ("com.example.GDBusClient", 4)),
                "(u)")[0], 1, "the GDBus client owns com.example.GDBusClient")
        eq(echo("before"), "echo before", "GDBus calls the service before")
        stalls = []
        for i in range(10):
            t0 = time.monotonic()
            os.kill(bus.pid, signal.SIGUSR2)
            g1 = gid()                       # may cross the switch in flight
            e1 = echo("during %d" % i)
            check(bus.wait_log(RESUMED, i + 1), "re-exec %d resumed" % (i + 1))
            bus.check_crossed()
            stalls.append((time.monotonic() - t0) * 1000)
            eq((g1, e1, gid(), echo("after %d" % i)),
               (guid, "echo during %d" % i, guid, "echo after %d" % i),
               "GDBus: GetId and Echo answered around re-exec %d" % (i + 1))
        print("  gdbus: 10 re-execs with calls in flight, SIGUSR2 -> resumed and "
              "answered: median %s, max %s" % (ms(sorted(stalls)[5]), ms(max(stalls))))
        eq(served.count(name), 21, "the service answered all 21 calls of the GDBus client")
        check(not conn.get_property("closed") and not conn.is_closed() and not closed,
              "the GDBus connection never closed")
        eq(conn.get_unique_name(), name, "its unique name unchanged")
        eq(call(*DBUS, "GetNameOwner", GLib.Variant("(s)", ("com.example.GDBusClient",)),
                "(s)")[0], name, "the bus still knows the GDBus client by that name")
        other = Client(bus.address)
        eq(body_u(other.driver("GetConnectionUnixProcessID", "s", (name,))), os.getpid(),
           "that name is still this process's connection")
        other.close()
        conn.close_sync(None)
    finally:
        stop.set()
        th.join(5)
    check(not [x for x in served if isinstance(x, Exception)], "the service was never cut off")
    last = Client(bus.address)
    eq(unique_id(last.name), unique_id(svc.name) + 3,
       "the unique-id counter went on across 10 re-execs")
    last.close()
    svc.close()
    bus.stop()


def case_refusal(binary):
    """Refused re-execs: logged, nothing changes, twice."""
    for what, env, reason in (
            ("state version 999", {"BUS1_BROKER_STATE_VERSION": "999"},
             "%s --check-state exited with status 1" % binary),
            ("/bin/false", {"BUS1_BROKER_REEXEC": "/bin/false"},
             "/bin/false --check-state exited with status 1"),
            ("a missing binary", {"BUS1_BROKER_REEXEC": os.path.join(TMP, "nonexistent",
                                                                     "bus1-broker")},
             "nonexistent/bus1-broker --check-state exited with status 127")):
        print("  -- %s" % what)
        bus = Bus(binary, "refusal", env)
        c = Client(bus.address)
        eq(body_u(c.driver("RequestName", "su", ("com.example.Kept", 4))), 1,
           "a client owns com.example.Kept")
        guid = rawclient.body_strings(c.driver("GetId"))[0]
        c.take()    # NameAcquired com.example.Kept
        for i in (1, 2):
            t = bus.reexec(REFUSED)
            line = last_line(bus.log(), REFUSED)
            print("  %s: SIGUSR2 -> refused %s: %s" % (what, ms(t), line))
            check(reason in line, "%s: refused (%d) for the reason %r" % (what, i, reason))
            check(bus.alive(), "%s: same process after refusal %d" % (what, i))
            eq(rawclient.body_strings(c.driver("GetId"))[0], guid,
               "%s: the client is still served (%d)" % (what, i))
            eq(rawclient.body_strings(c.driver("GetNameOwner", "s", ("com.example.Kept",)))[0],
               c.name, "%s: its name kept (%d)" % (what, i))
        log = bus.log()
        if "STATE_VERSION" in str(env):
            check("version 999" in log, "%s: the check names the version it cannot read" % what)
        check(RESUMED not in log and EXECUTING not in log,
              "%s: no \"executing\", no \"resumed\"" % what)
        d = Client(bus.address)
        eq(d.name, ":1.%d" % (unique_id(c.name) + 1), "%s: a new client connects" % what)
        d.sync()
        c.sync()
        eq([describe(m) for m in c.take()], [], "%s: the old client got nothing" % what)
        c.close()
        d.close()
        bus.stop()


def case_upgrade(binary):
    """The program file replaced on disk, as a package upgrade does: SIGUSR2 runs the new one."""
    d = tempfile.mkdtemp(prefix="upgrade.", dir=TMP)
    path = os.path.join(d, "bus1-broker")
    shutil.copy2(binary, path)
    bus = Bus(path, "upgrade")
    c = Client(bus.address)
    eq(body_u(c.driver("RequestName", "su", ("com.example.Kept", 4))), 1,
       "a client owns com.example.Kept")
    guid = rawclient.body_strings(c.driver("GetId"))[0]
    old_ino = os.stat("/proc/%d/exe" % bus.pid).st_ino
    # dpkg's way: the new file under another name, renamed over the old one
    shutil.copy2(binary, path + ".new")
    os.rename(path + ".new", path)
    new_ino = os.stat(path).st_ino
    check(os.readlink("/proc/%d/exe" % bus.pid).endswith(" (deleted)"),
          "the running program's file is gone from disk")
    t = bus.reexec()
    print("  upgrade: SIGUSR2 -> resumed %s" % ms(t))
    eq(os.stat("/proc/%d/exe" % bus.pid).st_ino, new_ino,
       "the same process now runs the new file (inode %d -> %d)" % (old_ino, new_ino))
    check(EXECUTING + path in bus.log(), "it executed the path it was started from")
    eq(rawclient.body_strings(c.driver("GetId"))[0], guid, "GetId unchanged")
    eq(rawclient.body_strings(c.driver("GetNameOwner", "s", ("com.example.Kept",)))[0],
       c.name, "the client keeps its name")
    c.close()
    bus.stop()


def fd_targets(pid):
    """What the open fds of @pid refer to, event loop fds (anon inodes) left out."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except FileNotFoundError:
            continue
        if not t.startswith("anon_inode:"):
            out.append(t)
    return sorted(out)


def case_fallback(binary):
    """The new program passes the check but cannot restore: the previous one takes over."""
    for hook in ("load", "restore"):
        print("  -- BUS1_BROKER_RESTORE_FAIL=%s" % hook)
        bus = Bus(binary, "fallback-" + hook, {"BUS1_BROKER_RESTORE_FAIL": hook})
        x = Client(bus.address)
        y = Client(bus.address)
        eq(body_u(x.driver("RequestName", "su", ("com.example.X", 4))), 1, "X owns com.example.X")
        y.driver("AddMatch", "s", ("type='signal',interface='com.example.X'",))
        guid = rawclient.body_strings(x.driver("GetId"))[0]
        r, w = os.pipe()
        os.write(w, b"carried")
        os.close(w)
        s_call = y.call("com.example.X", "/x", "com.example.X", "Work", "s", ("one",), fds=(r,))
        os.close(r)
        call = x.recv(5)
        eq((call[0], call[3].get(FIELD_MEMBER)), (METHOD_CALL, "Work"), "X has read Y's call")
        y.send_raw(rawclient.marshal(METHOD_CALL, 77, {
            FIELD_PATH: "/x", FIELD_MEMBER: "Later", FIELD_INTERFACE: "com.example.X",
            FIELD_DESTINATION: "com.example.X"}, "s", ("half",))[:24])
        time.sleep(0.1)
        bus.fallbacks = 1
        t = bus.reexec()
        print("  fallback-%s: SIGUSR2 -> resumed %s" % (hook, ms(t)))
        log = bus.log()
        eq(log.count(FALLBACK), 1, "the new program went back to the previous one, once")
        check(bus.alive(), "the same process")
        # the rest of the message Y had half sent, before anything else from Y
        y.send_raw(rawclient.marshal(METHOD_CALL, 77, {
            FIELD_PATH: "/x", FIELD_MEMBER: "Later", FIELD_INTERFACE: "com.example.X",
            FIELD_DESTINATION: "com.example.X"}, "s", ("half",))[24:])
        eq(rawclient.body_strings(y.driver("GetId"))[0], guid, "GetId unchanged")
        x.reply(call, "s", ("done",))
        m = y.wait_reply(s_call)
        eq((m[0], rawclient.body_strings(m[4])), (METHOD_RETURN, ["done"]),
           "the call in flight across both execs gets its reply")
        fds = x.fds[:]
        eq(len(fds), 1, "X got the call's fd")
        if fds:
            eq(os.read(fds[0], 16), b"carried", "the fd is intact")
        m = x.recv(5)
        eq((m[3].get(FIELD_MEMBER), rawclient.body_strings(m[4])), ("Later", ["half"]),
           "a message half read before goes on where it stopped")
        x.signal("/x", "com.example.X", "Tick", "s", ("t",))
        m = y.recv(5)
        eq((m[0], m[3].get(FIELD_MEMBER)), (SIGNAL, "Tick"), "Y's match rule still delivers")
        # What the fds refer to after the way back and after a plain
        # re-exec (which would close a leaked one) must be the same. Event
        # loop fds (anon inodes: sd-event makes timerfds when it first needs
        # one) are left out; sockets, pipes and files, the bus' own program
        # file among them, are compared.
        fds_back = fd_targets(bus.pid)
        bus.reexec()
        eq(bus.count(FALLBACK), 1, "the hook is used once: the next re-exec is a plain one")
        # Answered from the loop, so after the restore closed the state's memfd
        # (it logs "resumed" just before).
        x.sync()
        eq(fds_back, fd_targets(bus.pid),
           "the way back leaked no fd (the same sockets and files as after a plain re-exec)")
        x.close()
        y.close()
        bus.stop()


def case_broken_config(binary):
    """The configuration file broken on disk: refused, the bus keeps serving."""
    bus = Bus(binary, "broken-config")
    c = Client(bus.address)
    guid = rawclient.body_strings(c.driver("GetId"))[0]
    conf = os.path.join(bus.dir, "bus.conf")
    with open(conf) as f:
        good = f.read()
    with open(conf, "w") as f:
        f.write("<busconfig><listen>this is not closed")
    t = bus.reexec(REFUSED)
    line = last_line(bus.log(), REFUSED)
    print("  SIGUSR2 -> refused %s: %s" % (ms(t), line))
    check("--check-state exited with status 1" in line, "broken config: refused by the check")
    check(bus.alive(), "broken config: same process")
    eq(rawclient.body_strings(c.driver("GetId"))[0], guid, "broken config: the client is served")
    with open(conf, "w") as f:
        f.write(good)
    bus.reexec(RESUMED)
    eq(rawclient.body_strings(c.driver("GetId"))[0], guid,
       "broken config: repaired, the re-exec goes through")
    c.close()
    bus.stop()


def case_sasl(binary):
    """A client between AUTH and BEGIN; one stuck in SASL until auth_timeout."""
    print("  (SASL_EXPECTATION = %r)" % SASL_EXPECTATION)
    bus = Bus(binary, "sasl")
    c = Client(bus.address)
    guid = rawclient.body_strings(c.driver("GetId"))[0]
    half = Client(bus.address, auth=False)
    half.send_raw(rawclient.sasl_auth_line())
    line, half.buf = rawclient.sasl_line(half.sock)
    check(line.startswith(b"OK "), "the client is between OK and BEGIN")
    late = None
    if SASL_EXPECTATION == "refused":
        t = bus.reexec(REFUSED)
        check("authenticating" in last_line(bus.log(), REFUSED),
              "refused: %s (%s)" % (last_line(bus.log(), REFUSED), ms(t)))
    elif SASL_EXPECTATION == "waits":
        t0 = time.monotonic()
        bus.reexec(WAITING)
        check("1 client to finish authenticating" in last_line(bus.log(), WAITING),
              "the re-exec waits: %s" % last_line(bus.log(), WAITING))
        # a client connecting meanwhile waits in the backlog: no SASL answer yet
        late = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        late.settimeout(5)
        late.connect(rawclient.socket_path(bus.address))
        late.sendall(rawclient.sasl_auth_line())
        late.settimeout(0.3)
        try:
            got = late.recv(100)
        except socket.timeout:
            got = None
        eq(got, None, "a client connecting meanwhile is not answered yet")
        check(RESUMED not in bus.log() and bus.alive(), "nothing else while the client authenticates")
        check(rawclient.body_strings(c.driver("GetId"))[0] == guid,
              "clients already there are served while it waits")
    elif SASL_EXPECTATION == "carried":
        t = bus.reexec(RESUMED)
        print("  sasl: SIGUSR2 -> resumed %s (a client in SASL)" % ms(t))
    else:
        raise AssertionError("SASL_EXPECTATION %r" % SASL_EXPECTATION)
    t_begin = time.monotonic()
    half.send_raw(b"BEGIN\r\n")
    s = half.call(*DBUS, "Hello")
    if SASL_EXPECTATION == "waits":
        check(bus.wait_log(RESUMED), "the re-exec happens once the client finished")
        now = time.monotonic()
        print("  sasl: BEGIN -> resumed %s (SIGUSR2 -> resumed %s, the client's pause in it)" %
              (ms((now - t_begin) * 1000), ms((now - t0) * 1000)))
    m = half.wait_reply(s)
    eq(m[0], METHOD_RETURN, "its Hello is answered")
    half.name = rawclient.body_strings(m[4])[0]
    eq(unique_id(half.name), unique_id(c.name) + 1, "with the next unique name")
    if late:
        late.settimeout(5)
        line, buf = rawclient.sasl_line(late)
        check(line.startswith(b"OK "), "the client from the backlog gets its SASL answer")
        late.sendall(b"BEGIN\r\n")
        late.close()
    t = bus.reexec(RESUMED)
    print("  sasl: second SIGUSR2 -> resumed %s" % ms(t))
    eq(rawclient.body_strings(half.driver("GetId"))[0], guid, "the client that was in SASL is served")
    eq(rawclient.body_strings(c.driver("GetId"))[0], guid, "GetId unchanged")
    c.close()
    half.close()
    bus.stop()

    if SASL_EXPECTATION != "waits":
        return
    # A client that never finishes: dropped at auth_timeout, then the re-exec goes.
    bus = Bus(binary, "sasl-stuck", auth_timeout=1000)
    c = Client(bus.address)
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.settimeout(5)
    stuck.connect(rawclient.socket_path(bus.address))
    stuck.sendall(b"\0")
    t0 = time.monotonic()
    bus.reexec(WAITING)
    check(bus.wait_log(RESUMED, timeout=5), "a client stuck in SASL does not block it past "
          "auth_timeout (resumed after %s)" % ms((time.monotonic() - t0) * 1000))
    check(stuck.recv(100) == b"", "the stuck client was dropped")
    c.sync()
    stuck.close()
    c.close()
    bus.stop()


def wait_gone(pid, timeout=5):
    """True once @pid is reaped; else its last state."""
    end = time.monotonic() + timeout
    while True:
        st = proc_state(pid)
        if st is None:
            return True, None
        if time.monotonic() > end:
            return False, st
        time.sleep(0.01)


def ping(c, name, member="Ping", timeout=10):
    m = c.wait_reply(c.call(name, "/", name, member), timeout)
    if m[0] != METHOD_RETURN:
        raise AssertionError("%s.%s: %s" % (name, member, describe(m)))
    out = rawclient.body_strings(m[4])[0]
    check(out.startswith("pong "), "%s %s answered: %r" % (name, member, out))
    return int(out.split()[1])


def case_child(binary):
    """An activated service running across the re-exec; reaped by the new process."""
    bus = Bus(binary, "child")
    name = "com.example.Activated"
    bus.service(name)
    c = Client(bus.address)
    pid = ping(c, name)
    st = proc_state(pid)
    eq(st and st[1], bus.pid, "the service is the bus's child (PPid)")
    t = bus.reexec()
    print("  child: SIGUSR2 -> resumed %s (an activated service running)" % ms(t))
    eq(ping(c, name), pid, "the same service answers after")
    st = proc_state(pid)
    eq(st and st[1], bus.pid, "the service is still the bus's child")
    eq(ping(c, name, "Quit"), pid, "the service quits")
    gone, st = wait_gone(pid)
    check(gone, "the new bus process reaps the service (last state %r)" % (st,))
    check(wait_until(lambda: body_u(c.driver("NameHasOwner", "s", (name,))) == 0),
          "its name is gone")
    # activation still works in the new process, and a second re-exec carries that child
    pid2 = ping(c, name)
    check(pid2 != pid and proc_state(pid2) and proc_state(pid2)[1] == bus.pid,
          "activated again after the re-exec: a new child of the bus")
    t = bus.reexec()
    print("  child: second SIGUSR2 -> resumed %s" % ms(t))
    eq(ping(c, name, "Quit"), pid2, "the second service answers after the second re-exec")
    gone, st = wait_gone(pid2)
    check(gone, "reaped too (last state %r)" % (st,))
    c.close()
    bus.stop()


def case_pending(binary):
    """A pending activation (its service not up yet) carried with what waits for it."""
    bus = Bus(binary, "pending")
    name = "com.example.Slow"
    gate = os.path.join(bus.dir, "gate")
    bus.service(name, gate)
    try:
        c = Client(bus.address)
        d = Client(bus.address)
        s_ping = c.call(name, "/", name, "Ping")
        s_start = d.call(*DBUS, "StartServiceByName", "su", (name, 0))
        check(bus.wait_log("Activating service name='%s'" % name), "the activation is pending")
        t = bus.reexec()
        print("  pending: SIGUSR2 -> resumed %s (an activation pending)" % ms(t))
        check(bus.alive(), "same bus process")
        s_ping2 = c.call(name, "/", name, "Ping")     # queued on the carried activation
        time.sleep(0.1)
        check(body_u(c.driver("NameHasOwner", "s", (name,))) == 0, "still pending after")
        open(gate, "w").close()
        m = c.wait_reply(s_ping, 15)
        check(m[0] == METHOD_RETURN and rawclient.body_strings(m[4])[0].startswith("pong "),
              "the call queued before the re-exec reaches the service: %s" % describe(m))
        pid = int(rawclient.body_strings(m[4])[0].split()[1])
        m = c.wait_reply(s_ping2, 5)
        eq((m[0], rawclient.body_strings(m[4])), (METHOD_RETURN, ["pong %d" % pid]),
           "the call queued after the re-exec too")
        m = d.wait_reply(s_start, 5)
        eq((m[0], m[4][:4]), (METHOD_RETURN, b"\x01\0\0\0"), "StartServiceByName answers SUCCESS")
        st = proc_state(pid)
        eq(st and st[1], bus.pid, "the service is the bus's child")
        eq(ping(c, name, "Quit"), pid, "the service quits")
        gone, st = wait_gone(pid)
        check(gone, "the new process reaps it (last state %r)" % (st,))
        c.close()
        d.close()
    finally:
        if not os.path.exists(gate):
            open(gate, "w").close()
    bus.stop()


def case_limits(binary):
    """A reply deadline and the per-user accounting cross a re-exec as they are."""
    bus = Bus(binary, "limits", limits={"reply_timeout": 3000, "max_connections_per_user": 4,
                                         "max_match_rules_per_connection": 3})
    x = Client(bus.address)
    y = Client(bus.address)
    z = Client(bus.address)
    for i in range(3):
        x.driver("AddMatch", "s", ("type='signal',member='M%d'" % i,))
    t_call = time.monotonic()
    s_hang = y.call(x.name, "/x", "com.example.X", "Hang")
    m = x.recv(5)
    eq((m[0], m[3].get(FIELD_MEMBER)), (METHOD_CALL, "Hang"), "X has the call it never answers")
    time.sleep(max(0.0, 2.0 - (time.monotonic() - t_call)))
    t = bus.reexec()
    print("  limits: SIGUSR2 -> resumed %s, %.2f s after the call" % (
        ms(t), time.monotonic() - t_call))
    # three connections of this uid are carried: a fourth fits, a fifth not
    w = Client(bus.address)
    v = Client(bus.address, hello=False)
    r = v.wait_reply(v.call(*DBUS, "Hello"))
    eq((r[0], r[3].get(FIELD_ERROR_NAME)), (ERROR, E + "LimitsExceeded"),
       "the fifth connection of the uid is refused at Hello, as before the re-exec")
    m = x.wait_reply(x.call(*DBUS, "AddMatch", "s", ("type='signal',member='M3'",)))
    eq((m[0], m[3].get(FIELD_ERROR_NAME)), (ERROR, E + "LimitsExceeded"),
       "X's three carried rules are counted: a fourth is refused")
    r = y.wait_reply(s_hang, timeout=5)
    took = time.monotonic() - t_call
    eq((r[0], r[3].get(FIELD_ERROR_NAME)), (ERROR, E + "NoReply"),
       "the unanswered call ends in NoReply")
    # carried: 3 s after the call (+ the loop's timer slack, 250 ms); counted
    # again from the re-exec it would come 5 s after the call
    check(2.8 <= took <= 4.5, "at its deadline, 3 s after the call, not 3 s after the "
          "re-exec (%.2f s)" % took)
    # what the carried objects hold is given back once, when they go
    x.driver("RemoveMatch", "s", ("type='signal',member='M0'",))
    x.driver("AddMatch", "s", ("type='signal',member='M3'",))
    w.close()
    end = time.monotonic() + 5
    while True:
        r = v.wait_reply(v.call(*DBUS, "Hello"))
        if r[0] == METHOD_RETURN or time.monotonic() > end:
            break
        time.sleep(0.05)
    eq(r[0], METHOD_RETURN, "a connection that left gives its place back (Hello retried)")
    bus.reexec()
    r = v.wait_reply(v.call(*DBUS, "AddMatch", "s", ("type='signal',member='V'",)))
    eq(r[0], METHOD_RETURN, "the connection whose Hello succeeded late is carried too")
    for c in (x, y, z, v):
        c.close()
    bus.stop()


CASES = (("state", case_state), ("partial", case_partial), ("inflight", case_inflight),
         ("gdbus", case_gdbus), ("refusal", case_refusal),
         ("upgrade", case_upgrade), ("fallback", case_fallback), ("broken-config", case_broken_config), ("sasl", case_sasl),
         ("child", case_child), ("pending", case_pending), ("limits", case_limits))


CAPTURE = """#!/bin/sh
# Stands in for the new program: keeps the state it is asked to check, refuses.
for a; do
    case "$a" in --check-state=*) cat "/proc/self/fd/${a#--check-state=}" >"$BUS1_STATE_CAPTURE" ;; esac
done
exit 1
"""


def capture_state(binary, out):
    """A bus with some of everything the state holds; its state to @out."""
    script = os.path.join(TMP, "capture.sh")
    with open(script, "w") as f:
        f.write(CAPTURE)
    os.chmod(script, 0o755)
    bus = Bus(binary, "capture", env={"BUS1_BROKER_REEXEC": script,
                                      "BUS1_STATE_CAPTURE": os.path.abspath(out)})
    a, b, c, d, x, y = (Client(bus.address) for _ in range(6))
    eq(body_u(a.driver("RequestName", "su", ("com.example.Q", 0))), 1, "A owns com.example.Q")
    eq(body_u(b.driver("RequestName", "su", ("com.example.Q", 3))), 2, "B queued behind A")
    eq(body_u(c.driver("RequestName", "su", ("com.example.R", 1))), 1, "C owns com.example.R")
    d.driver("AddMatch", "s", ("type='signal',interface='com.example.Test'",))
    b.driver("AddMatch", "s", ("type='signal',interface='com.example.Test',arg0='yes'",))
    entry = struct.pack("<I", 7) + b"FIXTURE\0" + struct.pack("<I", 1) + b"1\0"
    s = a.next_serial()
    a.send_raw(rawclient.marshal(METHOD_CALL, s, {
        FIELD_PATH: DPATH, FIELD_INTERFACE: DIFACE, FIELD_MEMBER: "UpdateActivationEnvironment",
        FIELD_DESTINATION: DRIVER}, "a{ss}",
        body=struct.pack("<I", len(entry)) + b"\0" * 4 + entry))
    eq(a.wait_reply(s)[0], METHOD_RETURN, "A set FIXTURE=1 in the activation environment")
    mon = new_monitor(bus)
    # A call X has read and not answered: a reply slot.
    y.call(x.name, "/x", "com.example.X", "Hang")
    end = time.monotonic() + 5
    while time.monotonic() < end:
        m = x.recv(5)
        if m[0] == METHOD_CALL and m[3].get(FIELD_MEMBER) == "Hang":
            break
    # An fd queued for a client that does not read (after filling its socket).
    y.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    for i in range(30):
        x.signal("/", "com.example.Big", "Chunk", "s", ("z" * 8192,), dest=y.name)
    with open("/dev/null") as null:
        x.signal("/", "com.example.Big", "Fd", "h", (0,), dest=y.name, fds=(null.fileno(),))
    x.sync()
    # A frame in pieces: 7 bytes of a call.
    x.send_raw(rawclient.marshal(METHOD_CALL, x.next_serial(), {
        FIELD_PATH: DPATH, FIELD_INTERFACE: DIFACE, FIELD_MEMBER: "GetId",
        FIELD_DESTINATION: DRIVER})[:7])
    time.sleep(0.1)
    if os.path.exists(out):
        os.unlink(out)
    bus.reexec(expect=REFUSED)
    check(os.path.getsize(out) > 0, "the state was captured to %s (%d bytes)" %
          (out, os.path.getsize(out)))
    for cl in (a, b, c, d, x, y, mon):
        cl.close()
    bus.stop()
    return 0 if not FAILURES else 1


def alarm(signum, frame):
    raise CaseTimeout("the case took more than %d s" % CASE_TIMEOUT)


def main():
    global TMP
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    global FROM
    binary = os.path.abspath(sys.argv[1])
    only = sys.argv[2:]
    if only[:1] == ["--capture"] and len(only) == 2:
        TMP = tempfile.mkdtemp(prefix="bus1-reexec.")
        try:
            return capture_state(binary, only[1])
        finally:
            for b in BUSES:
                b.kill()
            shutil.rmtree(TMP, ignore_errors=True)
    if only[:1] == ["--from"] and len(only) >= 2:
        FROM = os.path.abspath(only[1])
        only = only[2:] or list(CROSS_VERSION_CASES)
    unknown = [x for x in only if x not in dict(CASES)]
    if unknown:
        print("unknown case(s): %s" % " ".join(unknown))
        return 2
    signal.signal(signal.SIGALRM, alarm)
    TMP = tempfile.mkdtemp(prefix="bus1-reexec.")
    failed = []
    t_all = time.monotonic()
    try:
        for name, fn in CASES:
            if only and name not in only:
                continue
            print("# %s: %s" % (name, fn.__doc__))
            del BUSES[:]
            t0 = time.monotonic()
            del FAILURES[:]
            signal.alarm(CASE_TIMEOUT)
            why = None
            try:
                fn(binary)
                signal.alarm(0)
                if FAILURES:
                    why = "%d check(s) failed: %s" % (len(FAILURES), "; ".join(FAILURES))
            except BaseException as e:   # noqa: B902 (CaseTimeout, socket errors, ...)
                signal.alarm(0)
                if isinstance(e, KeyboardInterrupt):
                    raise
                import traceback
                traceback.print_exc(limit=3, file=sys.stdout)
                why = "%s: %s" % (type(e).__name__, e)
                if FAILURES:
                    why += " (and %d failed check(s) before)" % len(FAILURES)
            finally:
                signal.alarm(0)
                for b in BUSES:
                    b.kill()
            if why:
                print("FAIL %s (%.2f s): %s" % (name, time.monotonic() - t0, why))
                for b in BUSES:
                    print("  log of bus %s (pid %d):\n%s" % (b.name, b.pid, tail(b.log())))
                failed.append(name)
            else:
                print("ok   %s (%.2f s)" % (name, time.monotonic() - t0))
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print("%.1f s" % (time.monotonic() - t_all))
    if failed:
        print("FAILED: %s" % " ".join(failed))
        return 1
    print("all re-exec cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
