# SPDX-License-Identifier: LGPL-2.1-or-later
"""The limits of session.conf and system.conf that a client meets over time,
against /usr/bin/dbus-daemon (issue 28's systematic pass). Each scenario runs
on a private bus of each program with the same configuration; its outcomes
(what each client got, who stayed connected, what was lost) must be the same
on both, and dbus-daemon's must be the ones written in EXPECTED, so that a
scenario that measures nothing fails:

- reply_timeout: a call nobody answers gets NoReply once it expires; the late
  reply is then an unrequested one, which the policy (open here) lets through.
- max_outgoing_bytes, max_outgoing_unix_fds: a receiver that does not read;
  once the bus holds more than the limit for it, further messages to it are
  refused with LimitsExceeded; nothing that was accepted is lost, and once it
  reads, it is reachable again.
- max_pending_service_starts, service_start_timeout: the start beyond the
  limit is refused, the others time out, and the service's process is
  killed.
- max_incomplete_connections: the bus stops accepting while that many
  connections have not authenticated, and accepts again when one leaves.
- max_completed_connections: the connection beyond it is refused at Hello.

One difference is deliberate and asserted as such (DIFFERENT): a subscriber
whose queue is full when a broadcast it asked for arrives is disconnected by
bus1-broker, and silently misses the signal on dbus-daemon; so is a caller
whose queue is full when its reply comes (dbus-daemon drops the reply).

max_incoming_bytes and max_incoming_unix_fds are not here: both buses only
pause reading a connection whose read but undispatched messages exceed them,
and both dispatch each message as it is read, so no client can see them.

  test_limits_parity.py BUS1_BROKER
"""

import os
import socket
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rawclient  # noqa: E402
from rawclient import (ERROR, FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,  # noqa: E402
                       FIELD_MEMBER, FIELD_PATH, FIELD_REPLY_SERIAL, FIELD_SENDER,
                       METHOD_CALL, METHOD_RETURN, Raw, body_strings, marshal)
from test_daemon_parity import alive  # noqa: E402
from test_driver_parity import DAEMON, bus  # noqa: E402

D, P, I = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
E = I + ".Error."
IFACE = "org.bus1.Test.Limits"


def drain(raw, timeout=0.3):
    """Every message @raw gets until none comes for @timeout; and whether the
    bus closed it meanwhile."""
    out = []
    try:
        while True:
            out.append(raw.recv(timeout))
    except socket.timeout:
        return out, False
    except (EOFError, ConnectionResetError, BrokenPipeError):
        return out, True


def error_of(m):
    """The error name of @m, or "return"."""
    return m[3].get(FIELD_ERROR_NAME) if m[0] == ERROR else "return"


def first_clause(m):
    """The error text up to its first comma: the part both buses word alike
    (dbus-daemon appends the message's header, bus1-broker its own summary)."""
    return body_strings(m[4])[0].split(",")[0] if m[0] == ERROR and m[4] else None


# -------------------------------------------------------------- reply_timeout

def reply_timeout(addr, out):
    a, b = Raw(addr), Raw(addr)
    drain(a, 0.1)
    drain(b, 0.1)
    start = time.monotonic()
    s = a.call(b.name, "/", IFACE, "Hang")
    call = [m for m in drain(b, 0.3)[0] if m[3].get(FIELD_MEMBER) == "Hang"][0]
    try:
        r = a.wait_reply(s, 4)
        out["reply_timeout: the caller got"] = [error_of(r), first_clause(r)]
        out["reply_timeout: after 1 to 3 s"] = 0.9 <= time.monotonic() - start <= 3.0
    except socket.timeout:
        out["reply_timeout: the caller got"] = "nothing within 4 s"
    # The late reply answers a call the bus no longer waits for.
    b.send_raw(marshal(METHOD_RETURN, b.next_serial(), {
        FIELD_REPLY_SERIAL: call[2], FIELD_DESTINATION: a.name}))
    got, _ = drain(a, 0.5)
    out["reply_timeout: the late reply reaches the caller"] = [
        [error_of(m), m[3].get(FIELD_SENDER) == b.name] for m in got]
    out["reply_timeout: the replier got"] = [error_of(m) for m in drain(b, 0.3)[0]]
    out["reply_timeout: both still connected"] = alive(a) and alive(b)
    a.close()
    b.close()


# ------------------------------------------------- max_outgoing_bytes and _fds

CHUNK = 32 * 1024


def big_call(raw, dest, n, fds=()):
    """A call "Fill" of @n bytes ("ay") and @fds ("h" each) to @dest."""
    body = bytearray(struct.pack("<I", n) + b"x" * n)
    for i in range(len(fds)):
        body += bytes(-len(body) % 4) + struct.pack("<I", i)
    fields = {FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: "Fill",
              FIELD_DESTINATION: dest}
    if fds:
        fields[rawclient.FIELD_UNIX_FDS] = len(fds)
    raw.send_raw(marshal(METHOD_CALL, raw.next_serial(), fields, "ay" + "h" * len(fds),
                         body=bytes(body)), fds)
    return raw.serial


def outgoing(addr, out, what, n_calls, size, nfds):
    """@n_calls calls of @size bytes (and @nfds fds each) to a receiver that
    reads nothing until they are all answered or refused."""
    recv, a = Raw(addr), Raw(addr)
    drain(recv, 0.1)
    drain(a, 0.1)
    r, w = os.pipe()
    serials = []
    for _ in range(n_calls):
        serials.append(big_call(a, recv.name, size, [r] * nfds))
        time.sleep(0.01)
    os.close(r)
    os.close(w)
    answers = {}
    for m in drain(a, 1.0)[0]:
        answers[m[3].get(FIELD_REPLY_SERIAL)] = m
    refused = [i for i, s in enumerate(serials) if s in answers]
    out[what + ": the refusals"] = [list(x) for x in sorted({
        (error_of(answers[serials[i]]), first_clause(answers[serials[i]])) for i in refused})]
    out[what + ": some accepted, then refused"] = bool(refused) and refused[0] > 0
    got, closed = drain(recv, 1.0)
    delivered = [m for m in got if m[3].get(FIELD_MEMBER) == "Fill"]
    out[what + ": every accepted call delivered, no refused one"] = \
        sorted(m[3].get(FIELD_SENDER) == a.name and serials.index(m[2]) for m in delivered) == \
        [i for i in range(n_calls) if i not in refused]
    out[what + ": the receiver was kept"] = not closed
    s = big_call(a, recv.name, size)
    got, _ = drain(recv, 0.5)
    out[what + ": once it read, the next call is delivered"] = \
        [m[2] for m in got if m[3].get(FIELD_MEMBER) == "Fill"] == [s] and \
        not [m for m in drain(a, 0.2)[0] if m[3].get(FIELD_REPLY_SERIAL) == s]
    out[what + ": the sender was kept"] = alive(a)
    a.close()
    recv.close()
    print("%s: calls %s of %d refused" % (what, refused[:3] + ["..."] if refused else [],
                                          n_calls))


def full_signals(addr, out):
    """Broadcast signals to a subscriber that reads nothing, past
    max_outgoing_bytes: where the buses differ on purpose (DIFFERENT)."""
    recv, a = Raw(addr), Raw(addr)
    recv.wait_reply(recv.call(D, P, I, "AddMatch", "s", ("member='Tick'",)))
    drain(recv, 0.1)
    drain(a, 0.1)
    body = struct.pack("<I", CHUNK) + b"x" * CHUNK
    for _ in range(40):
        try:
            a.send_raw(marshal(rawclient.SIGNAL, a.next_serial(), {
                FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: "Tick"}, "ay", body=body))
        except OSError:
            break
        time.sleep(0.01)
    out["full signals: the sender got"] = [error_of(m) for m in drain(a, 0.5)[0]]
    out["full signals: the sender was kept"] = alive(a)
    got, closed = drain(recv, 1.0)
    out["full signals: the subscriber was kept"] = not closed and alive(recv)
    a.close()
    recv.close()


def full_reply(addr, out):
    """A reply to a caller whose queue is full (filled by a third party's
    calls it does not read): where the buses differ on purpose."""
    a, b, c = Raw(addr), Raw(addr), Raw(addr)
    for x in (a, b, c):
        drain(x, 0.1)
    a.call(b.name, "/", IFACE, "Work")
    call = [m for m in drain(b, 0.3)[0] if m[3].get(FIELD_MEMBER) == "Work"][0]
    serials = [big_call(c, a.name, CHUNK) for _ in range(40)]
    refused = [m for m in drain(c, 1.0)[0] if m[3].get(FIELD_REPLY_SERIAL) in serials]
    out["full reply: the caller's queue filled"] = bool(refused)
    b.send_raw(marshal(METHOD_RETURN, b.next_serial(), {
        FIELD_REPLY_SERIAL: call[2], FIELD_DESTINATION: a.name}))
    out["full reply: the replier got"] = [error_of(m) for m in drain(b, 0.5)[0]]
    out["full reply: the caller was kept"] = not drain(a, 1.0)[1] and alive(a)
    for x in (a, b, c):
        x.close()


# ------------------------------- max_pending_service_starts, service_start_timeout

def sleep_seconds(tag, i):
    """A number of seconds no other sleep(1) of this machine is likely to
    have: the command line that finds service @i of @tag."""
    return 100000 + tag * 10 + i


def write_services(tmp, tag):
    """Three activatable names whose program starts and never claims them."""
    d = os.path.join(tmp, "services-%d" % tag)
    os.makedirs(d)
    for i in range(3):
        with open(os.path.join(d, "org.bus1.Slow%d.service" % i), "w") as f:
            f.write("[D-BUS Service]\nName=org.bus1.Slow%d\nExec=/bin/sleep %d\n" % (
                i, sleep_seconds(tag, i)))
    return d


def sleepers(tag):
    """How many of the services' processes run."""
    mine = {("/bin/sleep\0%d\0" % sleep_seconds(tag, i)).encode() for i in range(3)}
    n = 0
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                n += f.read() in mine
        except OSError:
            pass
    return n


def service_starts(addr, out, tag):
    a = Raw(addr)
    serials = [a.call(D, P, I, "StartServiceByName", "su", ("org.bus1.Slow%d" % i, 0))
               for i in range(3)]
    start = time.monotonic()
    answers = {}
    counted = False
    while len(answers) < 3 and time.monotonic() < start + 6:
        if not counted and time.monotonic() >= start + 0.7:
            out["service starts: processes running 0.7 s later"] = sleepers(tag)
            counted = True
        try:
            m = a.recv(0.1)
        except socket.timeout:
            continue
        if m[3].get(FIELD_REPLY_SERIAL) in serials:
            answers[m[3][FIELD_REPLY_SERIAL]] = (time.monotonic() - start, m)
    out["service starts: the answers"] = [
        [error_of(answers[s][1]), first_clause(answers[s][1])] if s in answers else "none"
        for s in serials]
    out["service starts: the third refused at once, the others after 1 to 4 s"] = \
        len(answers) == 3 and answers[serials[2]][0] < 0.9 and \
        all(0.9 <= answers[s][0] <= 4 for s in serials[:2])
    time.sleep(0.3)
    out["service starts: processes running once they timed out"] = sleepers(tag)
    out["service starts: the caller still connected"] = alive(a)
    a.close()


# ---------------------------------------------------- max_incomplete_connections

def incomplete_connections(addr, out):
    idle = [Raw(addr, auth=False) for _ in range(2)]
    time.sleep(0.3)
    third = Raw(addr, auth=False)
    third.sock.settimeout(1.0)
    try:
        third.sock.sendall(rawclient.sasl_auth_line())
        line, _ = rawclient.sasl_line(third.sock)
        out["incomplete: the third answered while two wait"] = line[:3].decode()
    except socket.timeout:
        out["incomplete: the third answered while two wait"] = "not within 1 s"
    idle[0].close()
    third.sock.settimeout(3.0)
    try:
        line, _ = rawclient.sasl_line(third.sock)
        out["incomplete: once one left, the third answered"] = line[:3].decode()
    except (socket.timeout, AssertionError, OSError) as e:
        out["incomplete: once one left, the third answered"] = type(e).__name__
    for c in idle[1:] + [third]:
        c.close()


# -------------------------------------------------------------------- driver

def completed_connections(addr, out):
    conns, got = [], []
    for _ in range(4):
        try:
            conns.append(Raw(addr))
            got.append("Hello answered")
        except rawclient.HelloRefused as e:
            got.append("Hello refused: %s" % e)
    out["max_completed_connections 3: 4 connections"] = got
    for c in conns:
        c.close()


def limit(name, value):
    return '<limit name="%s">%d</limit>' % (name, value)


def run(binary):
    out = {}
    with tempfile.TemporaryDirectory(prefix="bus1-limits-parity.") as tmp:
        with bus(binary, tmp, "timeout", limit("reply_timeout", 1000)) as addr:
            reply_timeout(addr, out)
        with bus(binary, tmp, "bytes", limit("max_outgoing_bytes", 4 * CHUNK)) as addr:
            outgoing(addr, out, "max_outgoing_bytes", 40, CHUNK, 0)
            full_signals(addr, out)
            full_reply(addr, out)
        with bus(binary, tmp, "fds", limit("max_outgoing_unix_fds", 8),
                 limit("max_outgoing_bytes", 64 << 20)) as addr:
            outgoing(addr, out, "max_outgoing_unix_fds", 40, CHUNK, 4)
        tag = os.getpid() * 2 + (binary == DAEMON)
        with bus(binary, tmp, "starts", "<servicedir>%s</servicedir>" % write_services(tmp, tag),
                 limit("max_pending_service_starts", 2),
                 limit("service_start_timeout", 1500)) as addr:
            service_starts(addr, out, tag)
        with bus(binary, tmp, "incomplete", limit("max_incomplete_connections", 2)) as addr:
            incomplete_connections(addr, out)
        with bus(binary, tmp, "completed", limit("max_completed_connections", 3)) as addr:
            completed_connections(addr, out)
    return out


_FULL = [[E + "LimitsExceeded", "Rejected: destination has a full message queue"]]
EXPECTED = {
    "reply_timeout: the caller got": [E + "NoReply", "Message did not receive a reply "
                                      "(timeout by message bus)"],
    "reply_timeout: after 1 to 3 s": True,
    "reply_timeout: the late reply reaches the caller": [["return", True]],
    "reply_timeout: the replier got": [],
    "reply_timeout: both still connected": True,
    "max_outgoing_bytes: the refusals": _FULL,
    "max_outgoing_bytes: some accepted, then refused": True,
    "max_outgoing_bytes: every accepted call delivered, no refused one": True,
    "max_outgoing_bytes: the receiver was kept": True,
    "max_outgoing_bytes: once it read, the next call is delivered": True,
    "max_outgoing_bytes: the sender was kept": True,
    "max_outgoing_unix_fds: the refusals": _FULL,
    "max_outgoing_unix_fds: some accepted, then refused": True,
    "max_outgoing_unix_fds: every accepted call delivered, no refused one": True,
    "max_outgoing_unix_fds: the receiver was kept": True,
    "max_outgoing_unix_fds: once it read, the next call is delivered": True,
    "max_outgoing_unix_fds: the sender was kept": True,
    "service starts: processes running 0.7 s later": 2,
    "service starts: the answers": [
        [E + "TimedOut", "Failed to activate service 'org.bus1.Slow0': timed out (service_start_timeout=1500ms)"],
        [E + "TimedOut", "Failed to activate service 'org.bus1.Slow1': timed out (service_start_timeout=1500ms)"],
        [E + "LimitsExceeded", "The maximum number of pending activations has been reached"]],
    "service starts: the third refused at once, the others after 1 to 4 s": True,
    "service starts: processes running once they timed out": 0,
    "service starts: the caller still connected": True,
    "incomplete: the third answered while two wait": "not within 1 s",
    "incomplete: once one left, the third answered": "OK ",
    "max_completed_connections 3: 4 connections": ["Hello answered"] * 3 + [
        "Hello refused: " + E + "LimitsExceeded"],
}


# Deliberate (bus1-broker(1), DIFFERENCES FROM DBUS-DAEMON): a subscriber that
# cannot take a broadcast it asked for is disconnected, as dbus-broker does,
# instead of losing the signal silently and staying on the bus out of step.
# The same for a reply to a caller whose queue is full: dbus-daemon drops the
# reply (the caller waits for it in vain) and tells the replier.
DIFFERENT = {
    "full signals: the subscriber was kept": (False, True),
    "full reply: the replier got": ([], [E + "LimitsExceeded"]),
    "full reply: the caller was kept": (False, True),
}
EXPECTED.update({
    "full reply: the caller's queue filled": True,
    "full signals: the sender got": [],
    "full signals: the sender was kept": True,
})


def main():
    if not os.path.exists(DAEMON):
        print("no %s to compare with" % DAEMON)
        return 77
    results = {"bus1-broker": run(os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1]),
               "dbus-daemon": run(DAEMON)}
    failed = 0
    for key in sorted(set(results["dbus-daemon"]) | set(results["bus1-broker"]) | set(EXPECTED)):
        ref, got = results["dbus-daemon"].get(key), results["bus1-broker"].get(key)
        if key in DIFFERENT:
            ok = (got, ref) == DIFFERENT[key]
        else:
            ok = ref == got and (key not in EXPECTED or ref == EXPECTED[key])
        failed += not ok
        print("%-4s %-70s %s" % ("ok" if ok else "DIFF", key, ref))
        if not ok:
            print("       bus1-broker %s\n       expected    %s" % (
                got, DIFFERENT.get(key, EXPECTED.get(key))))
    print("FAIL" if failed else "bus1-broker and dbus-daemon agree on %d outcomes, and differ "
          "as documented on %d" % (len(EXPECTED), len(DIFFERENT)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
