# SPDX-License-Identifier: LGPL-2.1-or-later
"""Where bus1-broker was stricter than dbus-daemon (issue 14, items 1-3).
The same raw-socket scenarios run on bus1-broker AND on /usr/bin/dbus-daemon
(when installed), each on a private bus of its own (run-with-bus.sh with
parity-limits.conf), and both must give the outcomes in EXPECTED, which are
what dbus-daemon 1.14 does:

1. A first message other than Hello: to org.freedesktop.DBus (of any type,
   even one that expects no reply) it is answered with AccessDenied addressed
   to ":not.active.yet", as monitors see it, and the connection stays: Hello
   still works. Without a destination a method call is answered (Peer) or
   refused (UnknownMethod) and a reply is dropped. A signal without
   destination, or anything for another destination, closes the connection.
2. A unix fd index ('h') beyond the fds of its message is delivered intact
   (also to a match rule on a later argument); the sender stays connected.
3. fds beyond the UNIX_FDS of a message wait for the next messages that
   declare fds (oldest first). Fewer fds than declared, more than
   max_message_unix_fds waiting, or waiting past pending_fd_timeout
   disconnect. The bus's /proc/PID/fd count is back where it was once the
   senders are gone.
4. (issue 28, item 7) The bus' errors reach the sender whatever the message:
   a call with NO_REPLY_EXPECTED, a signal or a reply to a missing name, a
   failing driver call that expects no reply.
5. (issue 28, item 6) A call of exactly max_message_size, or 8 bytes less,
   is delivered although the bus adds SENDER to it; 8 bytes more closes the
   sender.
6. (issue 28, item 1) A connection that authenticated but never says Hello
   counts in IncompleteConnections and is closed at auth_timeout.
7. (issue 28, item 2) A message sent in two pieces with its fd on the later
   one is delivered with its fd, also when that piece starts the next
   message; an fd that comes only with the next message is too late.
8. (issue 28, item 3) A reply or error that answers no pending call, and a
   second reply, are judged by the policy (requested_reply false): the
   session policy here lets them through.
9. (issue 28, systematic pass) Header fields of a message to a peer: unknown
   ones dropped, a forged SENDER replaced, invalid messages (no PATH or
   MEMBER, a signal without INTERFACE, the Local path or interface, a
   SIGNATURE without body, a field of the wrong type) close the sender.
10. (issue 28, systematic pass) Header fields of a message to the bus
   itself: unknown, forged or extra fields do not stop the answer (sent to
   the real sender), signals and replies to the bus are ignored, and a known
   field twice (to the bus or to a peer) closes the sender; an unknown field
   twice does not.

  test_daemon_parity.py BUS1_BROKER        both buses, compare
  test_daemon_parity.py --scenarios FILE   inside run-with-bus.sh: one bus
"""

import json
import os
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity  # noqa: E402
import rawclient  # noqa: E402

from rawclient import (ERROR, FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,  # noqa: E402
                       FIELD_MEMBER, FIELD_PATH, FIELD_REPLY_SERIAL, FIELD_SENDER,
                       FIELD_SIGNATURE, FIELD_UNIX_FDS, METHOD_CALL, METHOD_RETURN, SIGNAL, Raw,
                       alive, body_strings, drain, marshal, next_msg)

D, P, I = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
PEER = "org.freedesktop.DBus.Peer"
IFACE = "org.bus1.Test.Parity"
INACTIVE = ":not.active.yet"
AD = I + ".Error.AccessDenied"

# ------------------------------------------------------------------ scenarios




def brief(m):
    kind = {1: "call", 2: "return", 3: "error", 4: "signal"}[m[0]]
    return [kind, m[3].get(FIELD_MEMBER) or m[3].get(FIELD_ERROR_NAME)]



def add_match(raw, rule):
    raw.wait_reply(raw.call(D, P, I, "AddMatch", "s", (rule,)))
    drain(raw, 0.1)


def bus_fds():
    return len(os.listdir("/proc/%s/fd" % os.environ["BUS_PID"]))


def settle_fds(target, timeout=3.0):
    """The bus's fd count once it is down to @target (closing is asynchronous)."""
    end = time.monotonic() + timeout
    while True:
        n = bus_fds()
        if n <= target or time.monotonic() >= end:
            return n
        time.sleep(0.02)


def first_message_cases(other):

    def call(dest, iface, member, flags=0, path="/"):
        return lambda r: r.call(dest, path, iface, member, flags=flags)

    def reply(mtype, dest):
        def send(r):
            fields = {FIELD_REPLY_SERIAL: 1}
            if mtype == ERROR:
                fields[FIELD_ERROR_NAME] = IFACE + ".Error"
            if dest:
                fields[FIELD_DESTINATION] = dest
            r.send_raw(marshal(mtype, r.next_serial(), fields))
        return send

    return [
        ("driver ListNames", call(D, I, "ListNames", path=P)),
        ("driver GetId, no reply expected", call(D, I, "GetId", flags=1, path=P)),
        ("driver unknown method", call(D, I, "NoSuchMethod", path=P)),
        ("driver Peer.Ping", call(D, PEER, "Ping", path=P)),
        ("driver Hello on another interface", call(D, IFACE, "Hello", path=P)),
        ("signal to the driver", lambda r: r.signal("/", IFACE, "ToDriver", dest=D)),
        ("error to the driver", reply(ERROR, D)),
        ("call to a unique name", call(other.name, IFACE, "ToOther")),
        ("call to a missing name", call(IFACE + ".Missing", IFACE, "ToMissing")),
        ("unicast signal", lambda r: r.signal("/", IFACE, "UnicastSignal", dest=other.name)),
        ("broadcast signal", lambda r: r.signal("/", IFACE, "BroadcastSignal")),
        ("method return to a unique name", reply(METHOD_RETURN, other.name)),
        ("no destination: Peer.Ping", call(None, PEER, "Ping")),
        ("no destination: unknown method", call(None, IFACE, "NoDestination")),
        ("no destination: method return", reply(METHOD_RETURN, None)),
    ]


def scenario_first_message(out):
    """Item 1: each case on a fresh connection that has not sent Hello."""

    other = Raw()
    add_match(other, "interface='%s'" % IFACE)
    mon = Raw()
    s = mon.next_serial()
    mon.send_raw(marshal(METHOD_CALL, s, {FIELD_PATH: P, FIELD_DESTINATION: D,
                                          FIELD_INTERFACE: I + ".Monitoring",
                                          FIELD_MEMBER: "BecomeMonitor"},
                         "asu", body=struct.pack("<II", 0, 0)))
    mon.wait_reply(s)

    for name, send in first_message_cases(other):
        raw = Raw(hello=False)
        send(raw)
        m = next_msg(raw, 1.0)
        first = m if isinstance(m, str) else brief(m) + [m[3].get(FIELD_DESTINATION)]
        hello = "closed"
        if m != "closed":
            try:
                r = raw.wait_reply(raw.call(D, P, I, "Hello"), 3)
                ok = r[0] == METHOD_RETURN and body_strings(r[4])[0].startswith(":1.")
                hello = "unique name" if ok else brief(r)
            except (OSError, EOFError):
                pass
        out["before Hello: " + name] = [first, "then Hello: " + hello]
        raw.close()

    leaked, _ = drain(other)
    out["before Hello: what the other connection got"] = [brief(m) for m in leaked]
    seen, _ = drain(mon)
    names = {other.name: "OTHER"}
    out["before Hello: what a monitor saw"] = [
        brief(m) + [m[3].get(FIELD_SENDER), names.get(m[3].get(FIELD_DESTINATION),
                                                       m[3].get(FIELD_DESTINATION))]
        for m in seen if INACTIVE in (m[3].get(FIELD_SENDER), m[3].get(FIELD_DESTINATION))]
    other.close()
    mon.close()


def scenario_fd_index(out):
    """Item 2: 'h' values beyond the fds of their message."""

    recv = Raw()
    add_match(recv, "type='signal',interface='%s',arg1='x'" % IFACE)
    a = Raw()
    drain(a, 0.1)
    r, w = os.pipe()
    SENT_PIPES.add("pipe:[%d]" % os.fstat(r).st_ino)
    sends = [
        lambda: a.call(recv.name, "/", IFACE, "Index42NoFds", "h", (42,)),
        lambda: a.signal("/", IFACE, "Index7Signal", "hs", (7, "x")),
        lambda: a.send_raw(marshal(METHOD_CALL, a.next_serial(),
                                   {FIELD_PATH: "/", FIELD_INTERFACE: IFACE,
                                    FIELD_MEMBER: "IndexArray", FIELD_DESTINATION: recv.name},
                                   "ah", body=struct.pack("<III", 8, 7, 9))),
        lambda: a.call(recv.name, "/", IFACE, "Index5OneFd", "h", (5,), fds=[r]),
    ]
    for send in sends:
        try:
            send()
        except OSError:
            pass  # disconnected: what was delivered tells
        time.sleep(0.05)
    os.close(r)
    os.close(w)
    got, _ = drain(recv, 0.5)
    out["fd index: received"] = [
        brief(m) + [m[3].get(FIELD_SIGNATURE), m[3].get(FIELD_UNIX_FDS), m[4].hex()]
        for m in got]
    out["fd index: fds received"] = len(recv.fds)
    out["fd index: sender's messages"] = [brief(m) for m in drain(a, 0.2)[0]]
    out["fd index: sender still connected"] = alive(a)
    a.close()
    recv.close()


NO_REPLY, NO_AUTO_START = 0x1, 0x2
MISSING = IFACE + ".Missing"


def scenario_errors_regardless(out):
    """Issue 28, item 7: the bus' errors go back to the sender whatever the
    message: a call with NO_REPLY_EXPECTED, a signal or a reply to a missing
    name, a failing driver call that expects no reply; a driver reply too,
    but for the acknowledgements (AddMatch...), which honour the flag."""
    a = Raw()
    drain(a, 0.1)
    sends = {
        "call, no reply expected, to a missing name":
            lambda: a.call(MISSING, "/", IFACE, "X", flags=NO_REPLY),
        "call, no reply expected, no auto-start, to a missing name":
            lambda: a.call(MISSING, "/", IFACE, "X", flags=NO_REPLY | NO_AUTO_START),
        "unicast signal to a missing name":
            lambda: a.signal("/", IFACE, "Sig", dest=MISSING),
        "unicast signal, no auto-start, to a missing name":
            lambda: a.send_raw(marshal(SIGNAL, a.next_serial(),
                                       {FIELD_PATH: "/", FIELD_INTERFACE: IFACE,
                                        FIELD_MEMBER: "Sig", FIELD_DESTINATION: MISSING},
                                       flags=NO_AUTO_START)),
        "method return to a missing name":
            lambda: a.send_raw(marshal(METHOD_RETURN, a.next_serial(),
                                       {FIELD_REPLY_SERIAL: 5, FIELD_DESTINATION: MISSING})),
        "driver GetNameOwner of a missing name, no reply expected":
            lambda: a.call(D, P, I, "GetNameOwner", "s", (MISSING,), flags=NO_REPLY),
        "driver GetId, no reply expected":
            lambda: a.call(D, P, I, "GetId", flags=NO_REPLY),
        "driver AddMatch, no reply expected":
            lambda: a.call(D, P, I, "AddMatch", "s", ("type='signal'",), flags=NO_REPLY),
    }
    for what, send in sends.items():
        send()
        got, end = drain(a, 0.3)
        out["errors regardless: " + what] = [brief(m) for m in got] + [end]
    out["errors regardless: sender still connected"] = alive(a)
    a.close()


MAX_MESSAGE = 65536      # parity-limits.conf


def sized_call(raw, dest, total):
    """A call of @total bytes on the wire (before the bus adds SENDER)."""
    head = len(marshal(METHOD_CALL, 1, {FIELD_PATH: "/", FIELD_INTERFACE: IFACE,
                                        FIELD_MEMBER: "Big", FIELD_DESTINATION: dest},
                       "ay", body=struct.pack("<I", 0)))
    n = total - head
    return marshal(METHOD_CALL, raw.next_serial(), {
        FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: "Big",
        FIELD_DESTINATION: dest}, "ay", body=struct.pack("<I", n) + b"x" * n)


def scenario_size_limit(out):
    """Issue 28, item 6: messages at max_message_size, just under and just over
    it: to a client (the bus adds SENDER to what it forwards) and to the bus."""
    recv = Raw()
    for what, delta in (("8 bytes under max_message_size", -8),
                        ("at max_message_size", 0), ("8 bytes over max_message_size", 8)):
        a = Raw()
        drain(a, 0.1)
        m = sized_call(a, recv.name, MAX_MESSAGE + delta)
        try:
            a.send_raw(m)
        except OSError:
            pass
        got, _ = drain(recv, 0.5)
        out["size limit: %s: body delivered" % what] = [
            len(x[4]) for x in got if brief(x)[1] == "Big"]
        out["size limit: %s: sender got" % what] = [brief(x) for x in drain(a, 0.3)[0]]
        out["size limit: %s: sender still connected" % what] = alive(a)
        a.close()
    out["size limit: receiver still connected"] = alive(recv)
    # At the limit to the bus itself, with a monitor that gets a copy of it.
    mon = Raw()
    mon.send_raw(marshal(METHOD_CALL, mon.next_serial(), {
        FIELD_PATH: P, FIELD_INTERFACE: "org.freedesktop.DBus.Monitoring",
        FIELD_MEMBER: "BecomeMonitor", FIELD_DESTINATION: D}, "asu",
        body=struct.pack("<II", 0, 0)))
    drain(mon, 0.3)
    a = Raw()
    drain(a, 0.1)
    a.send_raw(sized_call(a, D, MAX_MESSAGE))
    out["size limit: at max_message_size to the bus: sender got"] = [
        brief(x) for x in drain(a, 0.5)[0]]
    out["size limit: at max_message_size to the bus: sender still connected"] = alive(a)
    out["size limit: at max_message_size to the bus: the monitor saw"] = [
        brief(x) for x in drain(mon, 0.5)[0]
        if brief(x)[1] in ("Big", I + ".Error.UnknownInterface")]
    out["size limit: monitor still connected"] = not mon.is_closed(0.2)
    a.close()
    mon.close()
    recv.close()


def fd_in_pieces(out, key, recv, build, members):
    """A new connection sends the bytes of build(connection) up to its
    returned cut, then the rest with an fd; what @recv got (the calls named
    in @members, with their UNIX_FDS) goes to out[@key + ...]."""
    a = Raw()
    drain(a, 0.1)
    r, w = os.pipe()
    SENT_PIPES.add("pipe:[%d]" % os.fstat(r).st_ino)
    data, at = build(a)
    try:
        a.send_raw(data[:at])
        time.sleep(0.1)
        a.send_raw(data[at:], fds=[r])
    except OSError:
        pass
    os.close(r)
    os.close(w)
    n_before = len(recv.fds)
    got, _ = drain(recv, 0.5)
    out[key + ": delivered"] = [[brief(x)[1], x[3].get(FIELD_UNIX_FDS)] for x in got
                                if brief(x)[1] in members]
    out[key + ": fds received"] = len(recv.fds) - n_before
    out[key + ": sender still connected"] = alive(a)
    a.close()


def fd_call(a, dest, member, fds):
    """A call @member to @dest declaring @fds fds."""
    fields = {FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: member,
              FIELD_DESTINATION: dest}
    if fds:
        fields[FIELD_UNIX_FDS] = fds
        return marshal(METHOD_CALL, a.next_serial(), fields, "hs", (0, "y" * 200))
    return marshal(METHOD_CALL, a.next_serial(), fields, "s", ("z" * 100,))


def scenario_fd_later_chunk(out):
    """Issue 28, item 2: the bytes of a message first, its fd with a later
    part of it (at the header, in the body, with the last byte); and with
    the piece that ends it and starts the next message (which declares no
    fds), or with the next message alone."""
    recv = Raw()

    def cut_at(cut):
        def build(a):
            m = fd_call(a, recv.name, "LaterFd", 1)
            if cut == "header":
                return m, (16 + struct.unpack_from("<I", m, 12)[0] + 7) & ~7
            return m, len(m) // 2 if cut is None else len(m) - 1
        return build

    for what, cut in (("with the second half", None), ("with the last byte", -1),
                      ("with the body after the header", "header")):
        fd_in_pieces(out, "fd with a later chunk, " + what, recv, cut_at(cut), ("LaterFd",))

    def with_next(across):
        def build(a):
            m1 = fd_call(a, recv.name, "First", 1)
            return m1 + fd_call(a, recv.name, "Second", 0), len(m1) // 2 if across else len(m1)
        return build

    for what, across in (("with its end and the next message's start", True),
                         ("with the next message alone", False)):
        fd_in_pieces(out, "fd with the next message, " + what, recv, with_next(across),
                     ("First", "Second"))
    recv.close()


def scenario_unrequested_replies(out):
    """Issue 28, item 3: a reply or an error that answers no pending call, and
    a second reply: the policy decides as for any message, with
    requested_reply false (parity-limits.conf's rules are session.conf's:
    <allow send_destination="*" eavesdrop="true"/> lets them through)."""
    a, b = Raw(), Raw()
    drain(a, 0.1)
    drain(b, 0.1)
    b.send_raw(marshal(METHOD_RETURN, b.next_serial(), {
        FIELD_REPLY_SERIAL: 77, FIELD_DESTINATION: a.name}))
    b.send_raw(marshal(ERROR, b.next_serial(), {
        FIELD_REPLY_SERIAL: 78, FIELD_DESTINATION: a.name, FIELD_ERROR_NAME: IFACE + ".Forged"}))
    s = a.call(b.name, "/", IFACE, "Work")
    call = [m for m in drain(b, 0.3)[0] if brief(m)[1] == "Work"][0]
    for i in range(2):
        b.send_raw(marshal(METHOD_RETURN, b.next_serial(), {
            FIELD_REPLY_SERIAL: call[2], FIELD_DESTINATION: a.name}))
    out["unrequested replies: the receiver got"] = [
        brief(m) + [m[3].get(FIELD_REPLY_SERIAL) - (s if m[3].get(FIELD_REPLY_SERIAL) == s
                                                     else 0)]
        for m in drain(a, 0.3)[0]]
    out["unrequested replies: the sender got"] = [brief(m) for m in drain(b, 0.3)[0]]
    out["unrequested replies: both still connected"] = alive(a) and alive(b)
    a.close()
    b.close()


HEADER_CASES = [
    # (what, message type, fields beyond PATH, INTERFACE, MEMBER, DESTINATION;
    #  a value None removes that one)
    ("an unknown field (code 42)", METHOD_CALL, {42: 5}),
    ("field 10 (container instance) as a string", METHOD_CALL, {10: "/x"}),
    ("a forged SENDER", METHOD_CALL, {FIELD_SENDER: ":1.999"}),
    ("a call without PATH", METHOD_CALL, {FIELD_PATH: None}),
    ("a call without MEMBER", METHOD_CALL, {FIELD_MEMBER: None}),
    ("a call without INTERFACE", METHOD_CALL, {FIELD_INTERFACE: None}),
    ("a signal without INTERFACE", SIGNAL, {FIELD_INTERFACE: None}),
    ("a call with REPLY_SERIAL", METHOD_CALL, {FIELD_REPLY_SERIAL: 9}),
    ("a call on the Local path", METHOD_CALL, {FIELD_PATH: "/org/freedesktop/DBus/Local"}),
    ("a signal on the Local interface", SIGNAL,
     {FIELD_INTERFACE: "org.freedesktop.DBus.Local"}),
    ("a SIGNATURE without a body", METHOD_CALL, {FIELD_SIGNATURE: "s"}),
]


def send_with_extra_fields(mtype, fields):
    """A new connection that has sent a message of @mtype with @fields, which
    may use the codes of FIELD_TYPES_EXTRA too."""
    a = Raw()
    drain(a, 0.1)
    saved = dict(rawclient.FIELD_TYPES)
    rawclient.FIELD_TYPES.update(FIELD_TYPES_EXTRA)
    try:
        a.send_raw(marshal(mtype, a.next_serial(), fields))
    except OSError:
        pass
    finally:
        rawclient.FIELD_TYPES.clear()
        rawclient.FIELD_TYPES.update(saved)
    return a


def scenario_header_fields(out):
    """Issue 28, systematic pass: header fields of a message to a peer. What
    the receiver gets (with which fields beyond the usual ones, the SENDER
    replaced or not) and whether the sender stays connected."""
    recv = Raw()
    drain(recv, 0.1)
    for what, mtype, extra in HEADER_CASES:
        fields = {FIELD_PATH: "/x", FIELD_INTERFACE: IFACE, FIELD_MEMBER: "Hdr",
                  FIELD_DESTINATION: recv.name}
        for k, v in extra.items():
            if v is None:
                fields.pop(k)
            else:
                fields[k] = v
        a = send_with_extra_fields(mtype, fields)
        got, _ = drain(recv, 0.3)
        out["header fields: %s: delivered" % what] = [
            [brief(m)[0], sorted(k for k in m[3] if k > FIELD_UNIX_FDS),
             m[3].get(FIELD_SENDER) == a.name] for m in got if m[3].get(FIELD_SENDER) != D]
        out["header fields: %s: sender still connected" % what] = alive(a)
        a.close()
    recv.close()


FIELD_TYPES_EXTRA = {10: "s", 42: "u"}

_GETID = [(FIELD_PATH, P), (FIELD_INTERFACE, I), (FIELD_MEMBER, "GetId"),
          (FIELD_DESTINATION, D)]
# (what, message type, fields in order) of messages to the bus itself, and
# to a peer with a field twice
DRIVER_HEADER_CASES = [
    ("GetId with an unknown field", METHOD_CALL, _GETID + [(42, 5)]),
    ("GetId with a forged SENDER", METHOD_CALL, _GETID + [(FIELD_SENDER, ":1.999")]),
    ("GetId with REPLY_SERIAL", METHOD_CALL, _GETID + [(FIELD_REPLY_SERIAL, 3)]),
    ("GetId with field 10 as a string", METHOD_CALL, _GETID + [(10, "/x")]),
    ("GetId with MEMBER twice", METHOD_CALL, _GETID + [(FIELD_MEMBER, "GetId")]),
    ("GetId with an unknown field twice", METHOD_CALL, _GETID + [(42, 5), (42, 6)]),
    ("GetId with DESTINATION twice", METHOD_CALL, _GETID + [(FIELD_DESTINATION, D)]),
    ("GetId with a SIGNATURE but no body", METHOD_CALL, _GETID + [(FIELD_SIGNATURE, "")]),
    ("a signal to the bus", SIGNAL, [(FIELD_PATH, P), (FIELD_INTERFACE, I),
                                     (FIELD_MEMBER, "NameOwnerChanged"),
                                     (FIELD_DESTINATION, D)]),
    ("a method return to the bus", METHOD_RETURN, [(FIELD_REPLY_SERIAL, 1),
                                                   (FIELD_DESTINATION, D)]),
    ("an error to the bus", ERROR, [(FIELD_REPLY_SERIAL, 1), (FIELD_DESTINATION, D),
                                    (FIELD_ERROR_NAME, IFACE + ".E")]),
    ("a call to a peer with PATH twice", METHOD_CALL,
     [(FIELD_PATH, "/a"), (FIELD_PATH, "/b"), (FIELD_INTERFACE, IFACE), (FIELD_MEMBER, "Hdr"),
      (FIELD_DESTINATION, "PEER")]),
]


def scenario_driver_header_fields(out):
    """Issue 28, systematic pass: header fields of messages to the bus itself,
    and a field twice. What the sender gets back (the reply's DESTINATION is
    its own name or not), what a peer gets, and who stays connected."""
    recv = Raw()
    drain(recv, 0.1)
    for what, mtype, fields in DRIVER_HEADER_CASES:
        fields = [(k, recv.name if v == "PEER" else v) for k, v in fields]
        a = send_with_extra_fields(mtype, fields)
        got, _ = drain(a, 0.3)
        out["driver header fields: %s: sender got" % what] = [
            brief(m) + [m[3].get(FIELD_DESTINATION) == a.name] for m in got]
        out["driver header fields: %s: a peer got" % what] = [
            brief(m) for m in drain(recv, 0.2)[0] if m[3].get(FIELD_SENDER) != D]
        out["driver header fields: %s: sender still connected" % what] = alive(a)
        a.close()
    recv.close()

AUTH_TIMEOUT = 3.0      # parity-limits.conf


def incomplete(raw):
    """IncompleteConnections of Debug.Stats GetStats, asked by @raw."""
    s = raw.call(D, P, "org.freedesktop.DBus.Debug.Stats", "GetStats")
    while True:
        m = raw.recv(5)
        if m[3].get(FIELD_REPLY_SERIAL) == s:
            break
    body, pos = m[4], 4
    end = 4 + struct.unpack_from("<I", body, 0)[0]
    pos = 8
    while pos < end:
        pos = (pos + 7) & ~7
        n = struct.unpack_from("<I", body, pos)[0]
        key = body[pos + 4:pos + 4 + n].decode()
        pos += 4 + n + 1
        sig_len = body[pos]
        sig = body[pos + 1:pos + 1 + sig_len].decode()
        pos += 2 + sig_len
        pos = (pos + 3) & ~3
        if sig == "u":
            if key == "IncompleteConnections":
                return struct.unpack_from("<I", body, pos)[0]
            pos += 4
        else:
            raise AssertionError("unexpected type %s of %s" % (sig, key))
    return None


def scenario_auth_timeout(out):
    """Issue 28, item 1: a connection that authenticated but never says Hello
    is incomplete (IncompleteConnections) until auth_timeout closes it."""
    watcher = Raw()
    before = incomplete(watcher)
    lazy = Raw(hello=False)
    time.sleep(0.2)
    out["auth timeout: incomplete after SASL, before Hello"] = incomplete(watcher) - before
    closed = lazy.is_closed(AUTH_TIMEOUT + 2)
    out["auth timeout: closed without Hello"] = closed
    out["auth timeout: incomplete once it is closed"] = incomplete(watcher) - before
    lazy.close()
    watcher.close()


SENT_PIPES = set()

# (name, [(UNIX_FDS declared, fds attached), ...], seconds to wait before the check)
FD_SEQUENCES = [
    ("0+1", [(0, 1)], 0),
    ("1+2", [(1, 2)], 0),
    ("0+1, 1+0", [(0, 1), (1, 0)], 0),
    ("0+1, 0+0, 1+0", [(0, 1), (0, 0), (1, 0)], 0),
    ("0+3, 2+0, 1+0", [(0, 3), (2, 0), (1, 0)], 0),
    ("2+1", [(2, 1)], 0),
    ("0+3, 2+0, 0+3 (4 waiting = max_message_unix_fds)", [(0, 3), (2, 0), (0, 3)], 0),
    ("0+3, 0+2 (5 waiting > max_message_unix_fds)", [(0, 3), (0, 2)], 0),
    ("0+5", [(0, 5)], 0),
    ("0+1, past pending_fd_timeout", [(0, 1)], 2.0),
    ("0+1, 1+0, past pending_fd_timeout", [(0, 1), (1, 0)], 2.0),
]


def scenario_extra_fds(out, start):
    """Item 3: more (or fewer) fds than UNIX_FDS; "A+B": declares A, attaches B."""

    recv = Raw()
    drain(recv, 0.1)
    for name, steps, wait in FD_SEQUENCES:
        before = bus_fds()
        a = Raw()
        drain(a, 0.05)
        base = bus_fds()
        pipes = []
        for i, (declared, attached) in enumerate(steps):
            mine = [os.pipe() for _ in range(attached)]
            pipes += mine
            SENT_PIPES.update("pipe:[%d]" % os.fstat(p[0]).st_ino for p in mine)
            fields = {FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: "Fds%d" % i,
                      FIELD_DESTINATION: recv.name}
            if declared:
                fields[FIELD_UNIX_FDS] = declared
            try:
                a.send_raw(marshal(METHOD_CALL, a.next_serial(), fields, flags=1),
                           [p[0] for p in mine])
            except OSError:
                pass
            # One read per message on either bus: dbus-daemon checks its fd
            # limit per read, so what it decides for messages that arrive
            # in one read depends on how the kernel coalesced them.
            time.sleep(0.1)
        got, _ = drain(recv, 0.3)
        time.sleep(wait)
        held = bus_fds() - base
        connected = alive(a)
        sent = {os.fstat(p[0]).st_ino: k for k, p in enumerate(pipes)}
        taken = [sent.get(os.fstat(fd).st_ino, "?") for fd in recv.fds]
        for fd in recv.fds:
            os.close(fd)
        recv.fds = []
        a.close()
        for p in pipes:
            os.close(p[0])
            os.close(p[1])
        out["fds " + name] = {
            "delivered": [[brief(m)[1], m[3].get(FIELD_UNIX_FDS)] for m in got],
            "sent fds the receiver got": taken,
            "sender still connected": connected,
            "fds the bus holds for it": held if connected else None,
            "bus fds left once it is gone": settle_fds(before) - before,
        }
    recv.close()
    out["bus fds left at the end"] = settle_fds(start) - start
    out["sent pipes the bus still holds"] = bus_holds_pipes()


def bus_holds_pipes():
    """How many fds of the bus are pipes this process created."""
    pid = os.environ["BUS_PID"]
    n = 0
    for fd in os.listdir("/proc/%s/fd" % pid):
        try:
            link = os.readlink("/proc/%s/fd/%s" % (pid, fd))
        except OSError:
            continue
        n += link in SENT_PIPES
    return n


def scenarios(path):
    # A first connection makes the bus set up what it keeps (sd-event's
    # timerfd for bus1-broker): the baseline is taken once it has gone.
    Raw().close()
    time.sleep(0.2)
    start = bus_fds()
    out = {}
    scenario_first_message(out)
    scenario_fd_index(out)
    scenario_extra_fds(out, start)
    scenario_errors_regardless(out)
    scenario_size_limit(out)
    scenario_auth_timeout(out)
    scenario_fd_later_chunk(out)
    scenario_unrequested_replies(out)
    scenario_header_fields(out)
    scenario_driver_header_fields(out)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    return 0


# --------------------------------------------------- what dbus-daemon 1.14 does

def _ad(then="unique name"):
    return [["error", AD, INACTIVE], "then Hello: " + then]


CLOSED = ["closed", "then Hello: closed"]

EXPECTED = {
    "before Hello: driver ListNames": _ad(),
    "before Hello: driver GetId, no reply expected": _ad(),
    "before Hello: driver unknown method": _ad(),
    "before Hello: driver Peer.Ping": _ad(),
    "before Hello: driver Hello on another interface": _ad(),
    "before Hello: signal to the driver": _ad(),
    "before Hello: error to the driver": _ad(),
    "before Hello: call to a unique name": CLOSED,
    "before Hello: call to a missing name": CLOSED,
    "before Hello: unicast signal": CLOSED,
    "before Hello: broadcast signal": CLOSED,
    "before Hello: method return to a unique name": CLOSED,
    "before Hello: no destination: Peer.Ping": [["return", None, None],
                                                "then Hello: unique name"],
    "before Hello: no destination: unknown method": [
        ["error", I + ".Error.UnknownMethod", None], "then Hello: unique name"],
    "before Hello: no destination: method return": ["none", "then Hello: unique name"],
    "before Hello: what the other connection got": [],
    "before Hello: what a monitor saw": [
        x for member, kind in [("ListNames", "call"), ("GetId", "call"),
                               ("NoSuchMethod", "call"), ("Ping", "call"),
                               ("Hello", "call"), ("ToDriver", "signal"),
                               (IFACE + ".Error", "error")]
        for x in ([kind, member, INACTIVE, D], ["error", AD, D, INACTIVE])] + [
        ["call", "ToOther", INACTIVE, "OTHER"],
        ["call", "ToMissing", INACTIVE, IFACE + ".Missing"],
        ["signal", "UnicastSignal", INACTIVE, "OTHER"],
        ["signal", "BroadcastSignal", INACTIVE, None],
        ["return", None, INACTIVE, "OTHER"]],
    "fd index: received": [
        ["call", "Index42NoFds", "h", None, "2a000000"],
        ["signal", "Index7Signal", "hs", None, "07000000010000007800"],
        ["call", "IndexArray", "ah", None, "080000000700000009000000"],
        ["call", "Index5OneFd", "h", 1, "05000000"],
    ],
    "fd index: fds received": 1,
    "fd index: sender still connected": True,
    "fd index: sender's messages": [],
}


def _fds(delivered, taken, connected, held):
    return {"delivered": delivered, "sent fds the receiver got": taken,
            "sender still connected": connected,
            "fds the bus holds for it": held if connected else None,
            "bus fds left once it is gone": 0}


EXPECTED.update({
    "fds 0+1": _fds([["Fds0", None]], [], True, 1),
    "fds 1+2": _fds([["Fds0", 1]], [0], True, 1),
    "fds 0+1, 1+0": _fds([["Fds0", None], ["Fds1", 1]], [0], True, 0),
    "fds 0+1, 0+0, 1+0": _fds([["Fds0", None], ["Fds1", None], ["Fds2", 1]], [0], True, 0),
    "fds 0+3, 2+0, 1+0": _fds([["Fds0", None], ["Fds1", 2], ["Fds2", 1]], [0, 1, 2],
                              True, 0),
    "fds 2+1": _fds([], [], False, None),
    "fds 0+3, 2+0, 0+3 (4 waiting = max_message_unix_fds)":
        _fds([["Fds0", None], ["Fds1", 2], ["Fds2", None]], [0, 1], True, 4),
    "fds 0+3, 0+2 (5 waiting > max_message_unix_fds)": _fds([["Fds0", None]], [], False,
                                                            None),
    "fds 0+5": _fds([], [], False, None),
    "fds 0+1, past pending_fd_timeout": _fds([["Fds0", None]], [], False, None),
    "fds 0+1, 1+0, past pending_fd_timeout": _fds([["Fds0", None], ["Fds1", 1]], [0], True,
                                                  0),
    "bus fds left at the end": 0,
    "sent pipes the bus still holds": 0,
})

NHNO = I + ".Error.NameHasNoOwner"
EXPECTED.update({
    "errors regardless: call, no reply expected, to a missing name":
        [["error", I + ".Error.ServiceUnknown"], "none"],
    "errors regardless: call, no reply expected, no auto-start, to a missing name":
        [["error", NHNO], "none"],
    # Without NO_AUTO_START any message starts an activation: not activatable.
    "errors regardless: unicast signal to a missing name":
        [["error", I + ".Error.ServiceUnknown"], "none"],
    "errors regardless: unicast signal, no auto-start, to a missing name":
        [["error", NHNO], "none"],
    "errors regardless: method return to a missing name":
        [["error", I + ".Error.ServiceUnknown"], "none"],
    "errors regardless: driver GetNameOwner of a missing name, no reply expected":
        [["error", NHNO], "none"],
    # Only the driver's acknowledgements (AddMatch, Ping...) honour the flag.
    "errors regardless: driver GetId, no reply expected": [["return", None], "none"],
    "errors regardless: driver AddMatch, no reply expected": ["none"],
    "errors regardless: sender still connected": True,
})

EXPECTED.update({
    "size limit: 8 bytes under max_message_size: body delivered": [MAX_MESSAGE - 112],
    "size limit: 8 bytes under max_message_size: sender got": [],
    "size limit: 8 bytes under max_message_size: sender still connected": True,
    "size limit: at max_message_size: body delivered": [MAX_MESSAGE - 104],
    "size limit: at max_message_size: sender got": [],
    "size limit: at max_message_size: sender still connected": True,
    "size limit: 8 bytes over max_message_size: body delivered": [],
    "size limit: 8 bytes over max_message_size: sender got": [],
    "size limit: 8 bytes over max_message_size: sender still connected": False,
    "size limit: receiver still connected": True,
    "size limit: at max_message_size to the bus: sender got":
        [["error", I + ".Error.UnknownInterface"]],
    "size limit: at max_message_size to the bus: sender still connected": True,
    "size limit: at max_message_size to the bus: the monitor saw":
        [["call", "Big"], ["error", I + ".Error.UnknownInterface"]],
    "size limit: monitor still connected": True,
})

for _what in ("with the second half", "with the last byte", "with the body after the header"):
    EXPECTED.update({
        "fd with a later chunk, %s: delivered" % _what: [["LaterFd", 1]],
        "fd with a later chunk, %s: fds received" % _what: 1,
        "fd with a later chunk, %s: sender still connected" % _what: True,
    })

EXPECTED.update({
    "fd with the next message, with its end and the next message's start: delivered":
        [["First", 1], ["Second", None]],
    "fd with the next message, with its end and the next message's start: fds received": 1,
    "fd with the next message, with its end and the next message's start: "
    "sender still connected": True,
    # The fd came after the message that declares it was complete.
    "fd with the next message, with the next message alone: delivered": [],
    "fd with the next message, with the next message alone: fds received": 0,
    "fd with the next message, with the next message alone: sender still connected": False,
})

# What dbus-daemon 1.14 does with them: delivered (unknown fields dropped, the
# SENDER its own) and the sender kept, or not delivered and the sender closed.
_DELIVERED = {"an unknown field (code 42)", "a forged SENDER", "a call without INTERFACE",
              "a call with REPLY_SERIAL"}
for _what, _type, _extra in HEADER_CASES:
    EXPECTED["header fields: %s: delivered" % _what] = \
        [["call", [], True]] if _what in _DELIVERED else []
    EXPECTED["header fields: %s: sender still connected" % _what] = _what in _DELIVERED

# dbus-daemon 1.14: the bus answers its calls whatever unknown or forged
# fields they carry, ignores signals and replies to it, and closes a sender
# whose message has a known field twice or of the wrong type.
_ANSWERED = {"GetId with an unknown field", "GetId with a forged SENDER",
             "GetId with REPLY_SERIAL", "GetId with an unknown field twice",
             "GetId with a SIGNATURE but no body"}
_IGNORED = {"a signal to the bus", "a method return to the bus", "an error to the bus"}
for _what, _type, _fields in DRIVER_HEADER_CASES:
    EXPECTED["driver header fields: %s: sender got" % _what] = \
        [["return", None, True]] if _what in _ANSWERED else []
    EXPECTED["driver header fields: %s: a peer got" % _what] = []
    EXPECTED["driver header fields: %s: sender still connected" % _what] = \
        _what in _ANSWERED or _what in _IGNORED

EXPECTED.update({
    # [kind, name, reply serial (of the call: 0)]
    "unrequested replies: the receiver got": [["return", None, 77],
                                              ["error", IFACE + ".Forged", 78],
                                              ["return", None, 0], ["return", None, 0]],
    "unrequested replies: the sender got": [],
    "unrequested replies: both still connected": True,
})

EXPECTED.update({
    "auth timeout: incomplete after SASL, before Hello": 1,
    "auth timeout: closed without Hello": True,
    "auth timeout: incomplete once it is closed": 0,
})

# ------------------------------------------------------------------- driver


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--scenarios":
        return scenarios(sys.argv[2])
    results = {}
    for label, binary, override in parity.buses(sys.argv[1]):
        with tempfile.TemporaryDirectory(prefix="bus1-parity.") as tmp:
            results[label] = parity.run_scenarios(
                __file__, binary, override, os.path.join(HERE, "parity-limits.conf"),
                os.path.join(tmp, "out.json"))
    return 1 if parity.compare(results, EXPECTED) else 0


if __name__ == "__main__":
    sys.exit(main())
