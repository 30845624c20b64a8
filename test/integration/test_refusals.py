# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the bus refuses, counted and logged (broker/objects/log-limit.h, user.h's
enum refusal; bus1-broker(1), LOGGING and STATISTICS): a client the policy
refuses 100 calls gets 100 AccessDenied errors, and its RefusedPolicy, its
uid's and the bus's count them all; one whose calls meet a full queue gets a
LimitsExceeded for each, counted as RefusedLimits. The bus's log holds at
most a burst of the refusal lines of one actor per window (a connection, or
a container instance as a whole), in dbus-daemon's words, and after the
window one line with how many it left out; another actor's first refusal is
logged all the same. A signal with an fd for a connection that takes none
is refused and counted as dropped for it, a subscriber that stops reading as disconnected.

  test_refusals.py BUS1_BROKER
"""

import os
import re
import signal
import socket
import struct
import sys
import tempfile
import time

import dbus
import dbus.mainloop.glib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from rawclient import (ERROR, FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,  # noqa: E402
                       FIELD_MEMBER, FIELD_PATH, FIELD_REPLY_SERIAL, METHOD_CALL, Raw,
                       body_strings, marshal)
from test_driver_parity import bus  # noqa: E402
from timefactor import time_factor  # noqa: E402

D, P = "org.freedesktop.DBus", "/org/freedesktop/DBus"
E = D + ".Error."
STATS = D + ".Debug.Stats"
DENIED = "org.bus1.Test.Denied"
IFACE = "org.bus1.Test.Refusals"
# broker/objects/peer.h: PEER_REFUSAL_LOG_BURST lines per PEER_REFUSAL_LOG_WINDOW_USEC per actor.
BURST = 10
WINDOW = 5.0
N_DENIED = 100
failures = []


def check(ok, what):
    print("%-4s %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def drv(c, member, sig="", args=(), iface=STATS):
    return c.call_blocking(D, P, iface, member, sig, args, timeout=30 * time_factor())


def conn_stats(c, name):
    return {str(k): int(v) for k, v in drv(c, "GetConnectionStats", "s", (name,)).items()
            if not isinstance(v, dbus.String)}


def uid_stats(c):
    users = {int(u): s for u, s in drv(c, "GetUserStats")}
    return {str(k): int(v) for k, v in users[os.getuid()].items()
            if not isinstance(v, dbus.String)}


def bus_stats(c):
    return {str(k): int(v) for k, v in drv(c, "GetStats").items()}


KEYS = ["RefusedLimits", "RefusedPolicy", "DroppedMessages", "QueueFullDisconnects"]


def delta(after, before, keys=KEYS):
    return {k: after[k] - before[k] for k in keys if k in after}


def answers(raw, n, timeout=10.0):
    """The next @n errors or replies @raw gets: [(error name or "ok", text)]."""
    out = []
    end = time.monotonic() + timeout * time_factor()
    while len(out) < n and time.monotonic() < end:
        try:
            m = raw.recv(1.0)
        except socket.timeout:
            continue
        if FIELD_REPLY_SERIAL not in m[3]:
            continue
        text = body_strings(m[4])[0] if m[0] == ERROR and m[4] else ""
        out.append((m[3].get(FIELD_ERROR_NAME, "ok"), text))
    return out


def denied_calls(raw, dest, n):
    """@n calls at @dest that the policy denies; the errors they got."""
    for _ in range(n):
        raw.call(dest, "/", DENIED, "Nope")
    return answers(raw, n)


# A line of the session bus, as dbus-daemon's (bus1-broker(1), LOGGING).
LOG_PREFIX = re.compile(r"^bus1-broker\[\d+\]: \[session uid=\d+ pid=\d+\] ")


def log_lines(path):
    with open(path, errors="replace") as f:
        return f.read().splitlines()


def refusal_lines(path, sender):
    return [l for l in log_lines(path) if 'sender="%s"' % sender in l and "Rejected" in l]


def not_logged(path, who):
    """The counts of the "N more refusals of WHO ... were not logged" lines."""
    pat = re.compile(r"(\d+) more refusals of %s .*were not logged" % re.escape(who))
    return [int(m.group(1)) for m in map(pat.search, log_lines(path)) if m]


def wait_for_log(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def big_call(raw, dest, size):
    """A call of @size bytes ("ay") at @dest that expects no reply."""
    body = struct.pack("<I", size) + b"x" * size
    raw.send_raw(marshal(METHOD_CALL, raw.next_serial(), {
        FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: "Fill",
        FIELD_DESTINATION: dest}, "ay", body=body, flags=1))


def run(address, log):
    stats = dbus.bus.BusConnection(address)
    bus0, uid0 = bus_stats(stats), uid_stats(stats)
    suppressed0 = bus0["LogLinesSuppressed"]
    target = Raw(address)

    # --- One client, 100 calls the policy denies, fast: one window.
    a = Raw(address)
    start = time.monotonic()
    got = denied_calls(a, target.name, N_DENIED)
    flood_time = time.monotonic() - start
    check(len(got) == N_DENIED and all(e == E + "AccessDenied" for e, _ in got),
          "the client got %d AccessDenied errors for its %d denied calls" % (
              sum(e == E + "AccessDenied" for e, _ in got), N_DENIED))
    s = conn_stats(stats, a.name)
    check(s["RefusedPolicy"] == N_DENIED and s["RefusedLimits"] == 0,
          "its RefusedPolicy counts them all (%d), RefusedLimits none (%d)" % (
              s["RefusedPolicy"], s["RefusedLimits"]))
    lines = refusal_lines(log, a.name)
    check(bool(lines) and bool(got) and LOG_PREFIX.match(lines[0]) and
          LOG_PREFIX.sub("", lines[0]) == got[0][1] and
          got[0][1].startswith("Rejected send message, "),
          "its first refusal is logged in dbus-daemon's words, its error's text")
    if flood_time < WINDOW:
        check(len(lines) == BURST, "the burst of its window is logged, no more: %d lines (%d "
              "calls in %.2f s)" % (len(lines), N_DENIED, flood_time))
    else:
        check(len(lines) <= BURST * (1 + int(flood_time / WINDOW) + 1),
              "a burst per window is logged: %d lines in %.1f s" % (len(lines), flood_time))

    # --- Another client, at once: its first refusal is logged (per actor, not global).
    c = Raw(address)
    got_c = denied_calls(c, target.name, 1)
    check([e for e, _ in got_c] == [E + "AccessDenied"], "a second client is denied too")
    check(len(refusal_lines(log, c.name)) == 1,
          "the second client's first refusal is logged while the first one is suppressed")

    # --- Calls at a full queue (max_outgoing_bytes 64 KiB): LimitsExceeded, each counted.
    sink = Raw(address)  # never reads
    d = Raw(address)
    n_calls = 200
    for _ in range(n_calls):
        big_call(d, sink.name, 8192)
    got_d = answers(d, n_calls, timeout=3.0)
    limited = sum(e == E + "LimitsExceeded" for e, _ in got_d)
    check(limited >= 50 and len(got_d) == limited,
          "calls at a full queue: %d of %d refused with LimitsExceeded, nothing else" % (
              limited, n_calls))
    s = conn_stats(stats, d.name)
    check(s["RefusedLimits"] == limited and s["RefusedPolicy"] == 0,
          "their caller's RefusedLimits counts each (%d of %d)" % (s["RefusedLimits"], limited))
    check(len(refusal_lines(log, d.name)) <= BURST + 1,
          "at most a burst of its full-queue lines is logged (%d)" %
          len(refusal_lines(log, d.name)))

    # --- A container instance is one actor: its connections share one burst.
    cc = dbus.bus.BusConnection(address)
    _, _, inside = dbus.Interface(cc.get_object(D, P), D + ".Containers1").AddServer(
        "org.example.Sandbox", "org.example.App", dbus.Dictionary({}, signature="sv"),
        dbus.Dictionary({}, signature="sv"))
    e1, e2 = Raw(str(inside)), Raw(str(inside))
    got_e = denied_calls(e1, target.name, BURST + 5) + denied_calls(e2, target.name, 1)
    check(len(got_e) == BURST + 6 and all(e == E + "AccessDenied" for e, _ in got_e),
          "two connections of an instance are denied %d calls" % len(got_e))
    n1, n2 = len(refusal_lines(log, e1.name)), len(refusal_lines(log, e2.name))
    check(n1 == BURST and n2 == 0, "the instance's burst is shared: %d lines of the first "
          "connection, %d of the second" % (n1, n2))
    check(conn_stats(stats, e2.name)["RefusedPolicy"] == 1,
          "the suppressed line's refusal is counted all the same")

    # --- A signal with an fd for a connection that takes none: refused with
    # NotSupported (as by dbus-daemon), counted as dropped for the receiver.
    nofds = Raw(address, negotiate_fds=False)
    sender = Raw(address)
    r, w = os.pipe()
    sender.signal("/", IFACE, "WithFd", "h", (0,), dest=nofds.name, fds=[r])
    os.close(r)
    os.close(w)
    m = sender.recv()
    while m[0] != ERROR:                # NameAcquired first
        m = sender.recv()
    check(m[3].get(FIELD_ERROR_NAME) == E + "NotSupported",
          "a signal with an fd for a connection without fds gets NotSupported: %s" % (m[:4],))
    check(conn_stats(stats, nofds.name)["DroppedMessages"] == 1,
          "a signal with an fd for a connection without fds is counted as dropped")

    # --- A subscriber that stops reading is disconnected once its queue is full.
    deaf = Raw(address)
    deaf.call(D, P, D, "AddMatch", "s", ("type='signal',interface='%s'" % IFACE,))
    answers(deaf, 1)
    for _ in range(64):
        sender.signal("/", IFACE, "Fill", "s", ("y" * 16384,))
    # Its signals are routed in order: once the bus answers this, the queue was full.
    answers(sender, 0)
    sender.call(D, P, "org.freedesktop.DBus.Peer", "Ping")
    answers(sender, 1)
    check(deaf.is_closed(5.0), "a subscriber that does not read is disconnected")

    # --- The window ends: how many were left out, once per actor, without another refusal.
    timeout = (WINDOW + 3.0) * time_factor()
    missing = [a.name, "container instance"] + ([d.name] if len(
        refusal_lines(log, d.name)) < limited else [])
    check(wait_for_log(lambda: all(not_logged(log, who) for who in missing), timeout),
          "after the window the log tells how many refusals it left out, for %s" %
          ", ".join(missing))
    told_a = not_logged(log, a.name)
    check(len(told_a) == 1 and told_a[0] + len(refusal_lines(log, a.name)) == N_DENIED,
          "logged and left out add up to the %d refusals: %d + %s" % (
              N_DENIED, len(refusal_lines(log, a.name)), told_a))
    check(not_logged(log, "container instance") == [6],
          "the instance's line counts both connections' left-out refusals: %s" %
          not_logged(log, "container instance"))
    check(not not_logged(log, c.name), "nothing of the second client was left out")
    # A new window: the first one's flood does not silence it for good.
    denied_calls(a, target.name, 1)
    check(len(refusal_lines(log, a.name)) == len(lines) + 1,
          "the next window logs the client's refusal again")

    # --- The uid's and the bus's counts: the sums of what every connection got.
    conns = [a, c, d, e1, e2, nofds]
    per_conn = {k: sum(conn_stats(stats, x.name)[k] for x in conns)
                for k in KEYS if k != "QueueFullDisconnects"}
    want = {"RefusedPolicy": N_DENIED + 1 + 1 + BURST + 6, "RefusedLimits": limited,
            "DroppedMessages": 1}
    check(per_conn == want, "per connection: %s" % per_conn)
    want["QueueFullDisconnects"] = 1
    got_uid = delta(uid_stats(stats), uid0)
    bus1 = bus_stats(stats)
    got_bus = delta(bus1, bus0)
    check(got_uid == want, "the uid's counts: %s (expected %s)" % (got_uid, want))
    check(got_bus == want, "the bus's counts: %s (expected %s)" % (got_bus, want))
    n_lines = sum(len(refusal_lines(log, x.name)) for x in conns)
    check(bus1["LogLinesSuppressed"] - suppressed0 == want["RefusedPolicy"] + limited - n_lines,
          "LogLinesSuppressed counts every refusal line left out (%d)" %
          (bus1["LogLinesSuppressed"] - suppressed0))
    for x in conns + [target, sink, sender]:
        x.close()
    cc.close()
    stats.close()


def gone_from(c, name):
    try:
        conn_stats(c, name)
        return False
    except dbus.exceptions.DBusException:
        return True


def reexec(binary, config, tmp):
    """A re-exec keeps the counts of every connection and of the bus; a uid's
    start again from those of its connections."""
    log = os.path.join(tmp, "reexec.log")
    with bus(binary, tmp, "reexec", config=config, log=log) as address:
        stats = dbus.bus.BusConnection(address)
        target, a = Raw(address), Raw(address)
        gone = Raw(address)
        denied_calls(a, target.name, 3 * BURST)
        denied_calls(gone, target.name, 2)
        gone.close()
        check(wait_for_log(lambda: gone_from(stats, gone.name), 10 * time_factor()),
              "re-exec: a connection went before it")
        before, mine = bus_stats(stats), conn_stats(stats, a.name)
        pid = int(stats.call_blocking(D, P, D, "GetConnectionUnixProcessID", "s", (D,)))
        os.kill(pid, signal.SIGUSR2)
        check(wait_for_log(lambda: any("re-exec: resumed" in l for l in log_lines(log)),
                           30 * time_factor()), "re-exec: resumed")
        after = bus_stats(stats)
        check(delta(after, before, KEYS + ["LogLinesSuppressed"]) ==
              dict.fromkeys(KEYS + ["LogLinesSuppressed"], 0),
              "re-exec: the bus's counts carried: %s" % {k: after[k] for k in KEYS})
        check(conn_stats(stats, a.name)["RefusedPolicy"] == mine["RefusedPolicy"] == 3 * BURST,
              "re-exec: a connection's counts carried")
        check(uid_stats(stats)["RefusedPolicy"] == 3 * BURST,
              "re-exec: the uid's counts are its connections' again")
        check(not_logged(log, a.name) == [2 * BURST],
              "re-exec: the lines left out are told before it: %s" % not_logged(log, a.name))
        for x in (target, a):
            x.close()
        stats.close()


def main():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    # Under valgrind (test/stress/run-under-valgrind.sh) the first case runs wrapped.
    binary = os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1]
    config = ('<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"\n'
              ' "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">\n'
              "<busconfig>\n  <type>session</type>\n  %s\n"
              '  <policy context="default">\n'
              '    <allow send_destination="*" eavesdrop="true"/>\n'
              '    <allow eavesdrop="true"/>\n'
              '    <allow own="*"/>\n'
              '    <deny send_interface="' + DENIED + '"/>\n'
              "  </policy>\n"
              '  <limit name="max_outgoing_bytes">65536</limit>\n'
              "</busconfig>\n")
    with tempfile.TemporaryDirectory(prefix="bus1-refusals.") as tmp:
        os.chmod(tmp, 0o755)
        os.environ["XDG_RUNTIME_DIR"] = tmp
        log = os.path.join(tmp, "bus.log")
        with bus(binary, tmp, "refusals", config=config, log=log,
                 args=["--containers"]) as address:
            run(address, log)
        # The program itself: a re-exec would leave a wrapper (valgrind) behind.
        reexec(sys.argv[1], config, tmp)
    print("FAIL: %d" % len(failures) if failures else "all refusal checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
