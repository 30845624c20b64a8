# SPDX-License-Identifier: LGPL-2.1-or-later
"""bus1-broker under a real systemd: the shipped user units run by this
machine's own systemd (a `systemd --user` manager started for the test), not
by a stand-in. It checks what the other tests can only simulate: that
systemd accepts the bus' fd-store entries and hands them back, so that
"systemctl restart" keeps every client (broker/upgrade/fdstore.h, bus1-broker(1),
RE-EXECUTION), and what clients see on stop and on a crash.

The manager and its units: systemd_user.py. The bus is switched on as a
user would: "systemctl --user enable bus1-broker.service" makes it
dbus.service (Alias=), started by dbus.socket.

Cases (two clients A and B, each owning a well-known name, with match rules
for their signals and for the driver's NameOwnerChanged):
  restart   "systemctl --user restart --no-block"; B keeps calling A until
            the new process is up (calls sent while no bus runs wait in the
            sockets); a call A received before the restart is answered
            after it; every call is answered once and in order, a pipe fd
            rides along; same GetId, names and owners; the new process took
            the store ("fd store: resumed") and emptied it (NFileDescriptor-
            Store=0); new clients connect one after another through the
            socket unit's socket, which systemd made blocking for the new
            process; four times in a row
  reexec    "systemctl --user kill --kill-whom=main -s SIGUSR2": the same
            pid, "re-exec: resumed", the same checks; again without
            --kill-whom=main (every process of the unit is signalled, the
            new program's state check too, which must not fail of it)
  reload    "systemctl --user reload" (ExecReload=, SIGHUP) succeeds
  stop      "systemctl --user stop": the store is discarded, A and B see
            their connection close; the next client starts a new bus
            through the socket unit (another GetId)
  crash     SIGKILL, then SIGSEGV, then SIGABRT of the main process: nothing
            is handed over, but the crash journal is in the store
            (broker/objects/journal.h) and systemd starts the bus again
            (Restart=on-failure): the client keeps its connection, unique
            name, well-known name and match rules, the bus its GetId, and a
            new client is answered by the new process
  disable   "systemctl --user disable" while the bus runs (its daemon-reload
            included): the running bus keeps the name dbus.service (the
            runtime link bus1-broker-alias made at its start), so the
            manager stays on it (it owns org.freedesktop.systemd1), and
            clients keep their names; enabled again, the cases above go on;
            at the end, disable and stop: the runtime link goes with the bus
            and dbus.service is no longer bus1-broker.service
And neither A nor B ever sees a NameOwnerChanged about its names, nor a
disconnect, before "stop".

  test_systemd_user.py BUS_BINARY UNIT_BUILD_DIR

Needs root (unshare, mount) and /lib/systemd/systemd; without either it
exits 77 (skipped), never passes.
"""

import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rawclient  # noqa: E402
from systemd_user import UNIT, Fatal, UserManager, check, enter_namespace, failures  # noqa: E402
from rawclient import (ERROR, FIELD_DESTINATION, FIELD_MEMBER, FIELD_REPLY_SERIAL,  # noqa: E402
                       FIELD_SENDER, FIELD_UNIX_FDS, METHOD_CALL, METHOD_RETURN, SIGNAL)

DBUS = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")
IFACE = "org.bus1.SystemdTest"
# systemd's default start limit (DefaultStartLimitBurst=5 in 10 s) fails
# the sixth start in a row, and with it the socket unit: the test stays below
# it and resets the counter (reset-failed) before it starts the bus again.
RESTARTS = 4

# --------------------------------------------------------------------------
# Clients


class Client(rawclient.Raw):
    """A raw client that owns a name and remembers what it must never see."""

    def __init__(self, address, name):
        super().__init__(address)
        self.wk = name
        self.pending = []        # messages received but not yet consumed
        self.bad = []            # NameOwnerChanged about A/B, NameLost, ...
        self.started = False
        self.driver("RequestName", "su", (name, 4))
        self.driver("AddMatch", "s", ("type='signal',interface='%s'" % IFACE,))
        self.driver("AddMatch", "s", ("type='signal',sender='org.freedesktop.DBus'",))
        self.started = True

    def driver(self, member, sig="", args=()):
        s = self.call(*DBUS, member, sig, args)
        m = self.wait_for(lambda m: m[0] in (METHOD_RETURN, ERROR) and
                          m[3].get(FIELD_REPLY_SERIAL) == s)
        if m[0] == ERROR:
            raise Fatal("%s %s: %s" % (self.wk, member, m[3]))
        return m

    def note(self, m):
        """Remember any driver signal about A's or B's names once set up."""
        if not self.started or m[0] != SIGNAL or m[3].get(FIELD_SENDER) != DBUS[0]:
            return
        member = m[3].get(FIELD_MEMBER)
        args = rawclient.body_strings(m[4])
        if member != "NameOwnerChanged" or (args and args[0] in WATCHED):
            self.bad.append("%s %s" % (member, args))

    def wait_for(self, pred, timeout=10):
        for i, m in enumerate(self.pending):
            if pred(m):
                return self.pending.pop(i)
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise Fatal("%s: timed out waiting for a message" % self.wk)
            m = self.recv(left)
            self.note(m)
            if pred(m):
                return m
            self.pending.append(m)

    def reply(self, call, sig="", args=()):
        fields = {FIELD_REPLY_SERIAL: call[2], FIELD_DESTINATION: call[3][FIELD_SENDER]}
        self.send_raw(rawclient.marshal(METHOD_RETURN, self.next_serial(), fields, sig, args))

    def take_fds(self, m):
        """The fds of m: the next UNIX_FDS of those received, in order (all
        the messages with fds are consumed in the order they arrived)."""
        n = m[3].get(FIELD_UNIX_FDS, 0)
        fds, self.fds = self.fds[:n], self.fds[n:]
        return fds


WATCHED = set()


def read_fd(fd):
    try:
        return os.read(fd, 4096).decode(errors="replace")
    finally:
        os.close(fd)


def echo_call(b, a, tag, with_fd):
    """B calls A.Echo(tag), with a pipe fd holding tag when with_fd."""
    fds = ()
    if with_fd:
        r, w = os.pipe()
        os.write(w, tag.encode())
        os.close(w)
        fds = (r,)
    s = b.call(a.wk, "/", IFACE, "Echo", "s", (tag,), fds=fds)
    for fd in fds:
        os.close(fd)
    return s


def serve_echo(a, want_tags, timeout=15):
    """A answers every Echo call in want_tags, in the order asserted."""
    got = []
    for tag in want_tags:
        m = a.wait_for(lambda m: m[0] == METHOD_CALL and m[3].get(FIELD_MEMBER) == "Echo",
                       timeout)
        arg = rawclient.body_strings(m[4])[0]
        got.append(arg)
        fds = a.take_fds(m)
        payload = read_fd(fds[0]) if fds else None
        for fd in fds[1:]:
            os.close(fd)
        if payload is not None and payload != arg:
            got.append("fd held %r" % payload)
        a.reply(m, "s", ("echo " + arg,))
    return got


def collect_replies(b, serials, timeout=15):
    out = []
    for s in serials:
        m = b.wait_for(lambda m, s=s: m[0] in (METHOD_RETURN, ERROR) and
                       m[3].get(FIELD_REPLY_SERIAL) == s, timeout)
        out.append(rawclient.body_strings(m[4])[0] if m[0] == METHOD_RETURN else
                   "error %s" % m[3])
    return out


def get_id(c):
    return rawclient.body_strings(c.driver("GetId")[4])[0]


def owner(c, name):
    return rawclient.body_strings(c.driver("GetNameOwner", "s", (name,))[4])[0]


def bus_state(c, a, b):
    names = rawclient.body_string_array(c.driver("ListNames")[4])
    return (get_id(c), a.wk in names and b.wk in names and a.name in names and b.name in names,
            owner(c, a.wk), owner(c, b.wk))


def check_traffic(um, a, b, state0, what, switch, wait_new):
    """One switch of the bus under traffic: a call A holds across it, calls
    B keeps sending until the new process is up, a signal after it."""
    held_tag = "held-" + what
    held = echo_call(b, a, held_tag, True)
    held_call = a.wait_for(lambda m: m[0] == METHOD_CALL and
                           rawclient.body_strings(m[4]) == [held_tag])
    held_fds = a.take_fds(held_call)
    switch()
    tags, serials = [], []
    end = time.monotonic() + 30
    while not wait_new():
        if time.monotonic() > end:
            raise Fatal("%s: the bus did not come back: %s" % (what, um.tail(um.bus_log)))
        tag = "%s-%d" % (what, len(tags))
        tags.append(tag)
        serials.append(echo_call(b, a, tag, len(tags) % 3 == 0))
        time.sleep(0.005)
    for i in range(5):
        tag = "%s-after-%d" % (what, i)
        tags.append(tag)
        serials.append(echo_call(b, a, tag, i % 2 == 0))
    check(len(held_fds) == 1 and read_fd(held_fds[0]) == held_tag,
          "%s: the fd of the held call arrived before the switch" % what)
    a.reply(held_call, "s", ("echo " + held_tag,))
    check(collect_replies(b, [held]) == ["echo " + held_tag],
          "%s: the call A held across the switch got its reply" % what)
    got = serve_echo(a, tags)
    check(got == tags, "%s: A got all %d calls sent across the switch, once, in order, "
          "fds intact%s" % (what, len(tags), "" if got == tags else ": %s" % got))
    replies = collect_replies(b, serials)
    check(replies == ["echo " + t for t in tags],
          "%s: B got every reply, in order (%d)" % (what, len(replies)))
    a.signal("/", IFACE, "Tick", "s", (what,))
    sig = b.wait_for(lambda m: m[0] == SIGNAL and m[3].get(FIELD_MEMBER) == "Tick")
    check(rawclient.body_strings(sig[4]) == [what] and sig[3].get(FIELD_SENDER) == a.name,
          "%s: a signal after the switch reaches a match rule set before it" % what)
    check(bus_state(b, a, b) == state0, "%s: same GetId, names and owners" % what)
    check(not a.bad and not b.bad, "%s: no NameOwnerChanged/NameLost seen (%s %s)" % (
        what, a.bad, b.bad))
    return len(tags)


def run(um):
    um.start()
    # the switch, as documented: the alias makes dbus.socket start this unit
    um.ctl("enable", UNIT)
    check(os.path.realpath(os.path.join(um.units, "dbus.service")) ==
          os.path.realpath(os.path.join(um.units, UNIT)),
          "systemctl --user enable made bus1-broker.service the user's dbus.service")
    um.ctl("start", "dbus.socket")
    a = Client(um.address, "org.bus1.SystemdTest.A")
    b = Client(um.address, "org.bus1.SystemdTest.B")
    WATCHED.update((a.name, b.name, a.wk, b.wk))
    for c in (a, b):    # what the bus said of A and B while they set up
        c.driver("GetId")
        c.bad.clear()
    state0 = bus_state(b, a, b)
    check(state0[1], "A and B hold their names")
    pid0 = um.wait_active()
    check(um.prop("FileDescriptorStoreMax") == "1024",
          "FileDescriptorStoreMax=1024 from the unit")
    check(um.prop("Restart") == "on-failure", "Restart=on-failure from the unit")

    # restart through the fd store, several times
    pid = pid0
    for i in range(RESTARTS):
        def switch():
            um.ctl("restart", "--no-block", UNIT)

        def wait_new(old=pid):
            p = um.main_pid()
            return p and p != old and um.prop("ActiveState") == "active"

        n = check_traffic(um, a, b, state0, "restart%d" % (i + 1), switch, wait_new)
        new = um.main_pid()
        check(new != pid, "restart%d: a new process (%d -> %d), %d calls across" % (
            i + 1, pid, new, n))
        pid = new
        # The hand-over is taken out; the crash journal stays: one snapshot
        # (its memfd and socket), the records' files since (two per Hello).
        n_store = int(um.prop("NFileDescriptorStore"))
        check(n_store <= 2 + 2 * 8, "restart%d: the store holds the crash journal only (%d)" %
              (i + 1, n_store))
        # systemd made the socket unit's socket blocking for the new process
        # (NonBlocking=no): one accept() too many would stall the whole bus.
        fresh = []
        try:
            for _ in range(3):
                fresh.append(rawclient.Raw(um.address))
                fresh[-1].call(*DBUS, "GetId")
                ok = rawclient.body_strings(fresh[-1].wait_reply(fresh[-1].serial)[4])
        except OSError as e:
            ok = [repr(e)]
        check(len(fresh) == 3 and ok == [state0[0]],
              "restart%d: new clients connect and are answered (%s)" % (i + 1, ok))
        for c in fresh:
            c.close()
    resumed = um.bus_lines("fd store: resumed")
    check(len(resumed) == RESTARTS, "every restart went through the fd store (%d lines: %s)" %
          (len(resumed), resumed[-1:] or um.tail(um.bus_log)))
    check(not um.bus_lines("cannot be used"), "no handed-over state was refused")

    # re-exec in place (SIGUSR2): as documented, to the main process only,
    # then as a plain "systemctl kill", which signals every process of the
    # unit, the new program checking the state included
    for what, whom in (("reexec", ["--kill-whom=main"]), ("reexec-all", [])):
        before = len(um.bus_lines("re-exec: resumed"))

        def reexec(whom=whom):
            um.ctl("kill", *whom, "-s", "SIGUSR2", UNIT)

        check_traffic(um, a, b, state0, what, reexec,
                      lambda before=before: len(um.bus_lines("re-exec: resumed")) > before)
        check(um.main_pid() == pid, "%s: the same process" % what)
    check(not um.bus_lines("re-exec refused"), "no re-exec was refused")

    # disable while the bus runs (docs/switching.md, Undo): until it stops, the
    # bus keeps the name dbus.service, and the manager stays on it
    pin = os.path.join(um.run, "systemd", "user.control", "dbus.service")
    check(os.path.realpath(pin) == os.path.realpath(os.path.join(um.units, UNIT)),
          "the running bus made the runtime link dbus.service -> %s" % UNIT)
    check("org.freedesktop.systemd1" in rawclient.body_string_array(a.driver("ListNames")[4]),
          "the manager is on the bus (org.freedesktop.systemd1)")
    um.ctl("disable", UNIT)
    check(not os.path.lexists(os.path.join(um.units, "dbus.service")),
          "disable: the alias link is gone")
    check(um.prop("Id", "dbus.service") == UNIT and
          um.prop("ActiveState", "dbus.service") == "active" and um.main_pid() == pid,
          "disable: after its daemon-reload dbus.service is still the running %s" % UNIT)
    time.sleep(1)
    check("org.freedesktop.systemd1" in rawclient.body_string_array(a.driver("ListNames")[4]),
          "disable: the manager stays on the bus")
    check(bus_state(b, a, b) == state0, "disable: same GetId, names and owners")
    um.ctl("enable", UNIT)

    # reload (ExecReload=)
    r = um.ctl("reload", UNIT, check_rc=False)
    check(r.returncode == 0, "systemctl reload succeeds (%s)" % r.stderr.strip())
    check(bus_state(b, a, b) == state0, "reload: same GetId, names and owners")
    check(um.prop("ActiveState") == "active" and um.main_pid() == pid,
          "reload: still active, same process")

    # stop: the store is discarded, the clients see the end
    um.ctl("reset-failed", UNIT)
    um.ctl("stop", UNIT)
    check(a.is_closed(10) and b.is_closed(10), "stop: A and B see their connection close")
    check(um.prop("NFileDescriptorStore") == "0", "stop: nothing left in the store")
    a.close()
    b.close()
    c = Client(um.address, "org.bus1.SystemdTest.C")
    pid_c = um.wait_active(not_pid=pid)
    check(get_id(c) != state0[0], "after stop: the socket starts a new bus (new GetId)")

    # crash: nothing handed over, the crash journal resumes the bus
    guid_c = get_id(c)
    pid = pid_c
    for sig in ("SIGKILL", "SIGSEGV", "SIGABRT"):
        um.ctl("reset-failed", UNIT)
        resumed_before = len(um.bus_lines("the bus restarted after a crash"))
        handed_before = len(um.bus_lines("fd store: resumed"))
        # Not in the instant after a reply: until the bus sees a write
        # complete, its connection counts as cut (journal.h).
        time.sleep(0.3)
        t0 = time.monotonic()
        um.ctl("kill", "--kill-whom=main", "-s", sig, UNIT)
        # The first answer after the kill (a figure for the notes, not a limit).
        probe = rawclient.Raw(um.address)
        probe.wait_reply(probe.call(*DBUS, "GetId"))
        print("crash %s: kill to first answer %.0f ms" % (sig, 1000 * (time.monotonic() - t0)))
        probe.close()
        new = um.wait_active(not_pid=pid)
        check(new and new != pid, "crash %s: systemd started the bus again (%s -> %s)" %
              (sig, pid, new))
        pid = new
        check(len(um.bus_lines("the bus restarted after a crash")) == resumed_before + 1 and
              len(um.bus_lines("fd store: resumed")) == handed_before,
              "crash %s: the new bus resumed from the crash journal, not a hand-over" % sig)
        check(get_id(c) == guid_c and owner(c, c.wk) == c.name,
              "crash %s: the client keeps its connection, name and the bus its GetId" % sig)
        d = Client(um.address, "org.bus1.SystemdTest.D")
        names = rawclient.body_string_array(d.driver("ListNames")[4])
        check(names.count(d.wk) == 1 and names.count(c.wk) == 1 and c.name in names,
              "crash %s: a new client is served beside it" % sig)
        d.close()
    # (A and B were of the bus before the stop: their unique names are D's now.)
    own = [x for x in c.bad if c.name in x or c.wk in x or not x.startswith("NameOwnerChanged")]
    check(not own, "crash: the client saw no NameLost or NameOwnerChanged of its own (%s)" %
          own[:3])
    c.close()

    # disable, then stop (what "disable --now" does): the runtime link goes
    # with the bus, and dbus.socket no longer starts bus1-broker
    um.ctl("disable", UNIT)
    check(os.path.islink(pin), "disable: the runtime link stays while the bus runs")
    um.ctl("stop", UNIT)
    check(not os.path.lexists(pin), "stop after disable: the runtime link is gone")
    check(um.prop("Id", "dbus.service") != UNIT,
          "stop after disable: dbus.service is no longer %s (%s)" % (
              UNIT, um.prop("Id", "dbus.service")))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    bus = os.path.abspath(sys.argv[1])
    enter_namespace(__file__, sys.argv[1:])
    tmp = tempfile.mkdtemp(prefix="bus1-systemd-user.")
    um = UserManager(tmp, bus, os.path.abspath(sys.argv[2]))
    keep = False
    try:
        run(um)
    except (Fatal, OSError, EOFError) as e:
        check(False, "%s: %s" % (type(e).__name__, e))
    finally:
        um.stop()
        lines = um.bus_lines("")
        # The crash case's `systemctl kill -s SIGSEGV`: ASan reports the SEGV
        # it was sent while the loop slept (frame #0 in epoll_wait(), which
        # cannot fault); that one report is ours.
        sent = [i for i, line in enumerate(lines)
                if "ERROR: AddressSanitizer: SEGV" in line and
                any("#0 " in x and "epoll_wait" in x for x in lines[i + 1:i + 4])][:1]
        reports = [line for i, line in enumerate(lines) if i not in sent and re.search(
            "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:", line)]
        check(not reports, "no sanitizer report in the bus log %s" % reports[:3])
        if failures:
            keep = True
            print("--- bus log\n" + um.tail(um.bus_log, 40))
            print("--- systemd log\n" + um.tail(um.log, 40))
            print("(kept %s)" % tmp)
    if not keep:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
