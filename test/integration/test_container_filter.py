# SPDX-License-Identifier: LGPL-2.1-or-later
"""The filter of contained clients (issue 29) against xdg-dbus-proxy, case by
case: a sandboxed client reaches a private bus1-broker either

  P  through Debian 12's /usr/bin/xdg-dbus-proxy (0.1.4-3+deb12u2) run with
     --filter and the case's options, or
  B  directly, through a socket the bus made with Containers1.AddServer and
     the named argument Filter (as) holding the very same option strings,

and each case's visible outcome (replies, error names, which signals whom
reached, name lists with unique names replaced by role labels) must be the
same on both sides, and on side P the one written in the case (the behaviour
docs/containers-reference.md part B describes), so that no case passes
vacuously. Every case runs on a fresh bus per side (about 10 ms each), with
a fresh proxy or instance, so what the filter learned (sticky unique names)
never leaks from one case into the next.

All connections are raw clients (rawclient.Raw) driven by one select() loop
here; the outside services answer every method call with their role.

  test_container_filter.py BUS1_BROKER [CASE-SUBSTRING...]
"""

import collections
import contextlib
import os
import select
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rawclient  # noqa: E402
from rawclient import (ERROR, FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,  # noqa: E402
                       FIELD_MEMBER, FIELD_PATH, FIELD_REPLY_SERIAL, FIELD_SENDER,
                       FIELD_SIGNATURE, METHOD_CALL, METHOD_RETURN, SIGNAL, Raw)
from test_driver_parity import bus  # noqa: E402

PROXY = "/usr/bin/xdg-dbus-proxy"
D, DP = "org.freedesktop.DBus", "/org/freedesktop/DBus"
C1 = "org.freedesktop.DBus.Containers1"
IF = "org.example.Iface"
A, B, T, S = "org.example.A", "org.example.B", "org.example.T", "org.example.S"
MINE = "org.example.Mine"
NO_REPLY_EXPECTED, NO_AUTO_START = 0x1, 0x2
ERR = "org.freedesktop.DBus.Error."
NOREPLY = "no reply"
# the signals a client subscribes to in the broadcast cases
MATCH_IF = "type='signal',interface='%s'" % IF
MATCH_NOC = "type='signal',member='NameOwnerChanged'"


# ---------------------------------------------------------------- marshalling

ALIGN = {"y": 1, "b": 4, "n": 2, "q": 2, "i": 4, "u": 4, "x": 8, "t": 8, "d": 8, "h": 4,
         "s": 4, "o": 4, "g": 1, "v": 1, "a": 4, "(": 8, "{": 8}
FIXED = {"y": "B", "b": "I", "n": "h", "q": "H", "i": "i", "u": "I", "x": "q", "t": "Q",
         "d": "d", "h": "I"}


def _type_end(sig, i):
    if sig[i] == "a":
        return _type_end(sig, i + 1)
    if sig[i] in "({":
        depth = 0
        while True:
            depth += {"(": 1, "{": 1, ")": -1, "}": -1}.get(sig[i], 0)
            i += 1
            if depth == 0:
                return i
    return i + 1


def types_of(sig):
    """The complete types of the signature @sig."""
    out, i = [], 0
    while i < len(sig):
        j = _type_end(sig, i)
        out.append(sig[i:j])
        i = j
    return out


def _enc(buf, t, v):
    c = t[0]
    buf.extend(bytes(-len(buf) % ALIGN[c]))
    if c in FIXED:
        buf += struct.pack("<" + FIXED[c], v)
    elif c in "so":
        b = v.encode()
        buf += struct.pack("<I", len(b)) + b + b"\0"
    elif c == "g":
        b = v.encode()
        buf += bytes([len(b)]) + b + b"\0"
    elif c == "v":                      # a variant is (signature, value)
        _enc(buf, "g", v[0])
        _enc(buf, v[0], v[1])
    elif c == "a":
        at = len(buf)
        buf += bytes(4)
        buf.extend(bytes(-len(buf) % ALIGN[t[1]]))
        start = len(buf)
        for item in (v.items() if t[1] == "{" else v):
            _enc(buf, t[1:], item)
        struct.pack_into("<I", buf, at, len(buf) - start)
    else:
        for sub, val in zip(types_of(t[1:-1]), v):
            _enc(buf, sub, val)


def encode(sig, values):
    buf = bytearray()
    for t, v in zip(types_of(sig), values):
        _enc(buf, t, v)
    return bytes(buf)


def _dec(data, pos, t, e):
    c = t[0]
    pos += -pos % ALIGN[c]
    if c in FIXED:
        v = struct.unpack_from(e + FIXED[c], data, pos)[0]
        return (bool(v) if c == "b" else v), pos + struct.calcsize(e + FIXED[c])
    if c in "so":
        n = struct.unpack_from(e + "I", data, pos)[0]
        return data[pos + 4:pos + 4 + n].decode(), pos + 5 + n
    if c == "g":
        return data[pos + 1:pos + 1 + data[pos]].decode(), pos + 2 + data[pos]
    if c == "v":
        vsig, pos = _dec(data, pos, "g", e)
        return _dec(data, pos, vsig, e)
    if c == "a":
        n = struct.unpack_from(e + "I", data, pos)[0]
        pos += 4
        pos += -pos % ALIGN[t[1]]
        end, out = pos + n, []
        while pos < end:
            v, pos = _dec(data, pos, t[1:], e)
            out.append(v)
        if t[1] == "{":
            return dict(out), pos
        return (bytes(out) if t[1] == "y" else out), pos
    out = []
    for sub in types_of(t[1:-1]):
        v, pos = _dec(data, pos, sub, e)
        out.append(v)
    return tuple(out), pos


def decode(sig, body, e="<"):
    out, pos = [], 0
    for t in types_of(sig):
        v, pos = _dec(body, pos, t, e)
        out.append(v)
    return tuple(out)


Msg = collections.namedtuple("Msg", "type flags serial fields values")


def take_message(raw):
    """The next whole message in @raw's buffer, or None."""
    buf = raw.buf
    if len(buf) < 16:
        return None
    e = "<" if buf[0:1] == b"l" else ">"
    blen, _, flen = struct.unpack_from(e + "III", buf, 4)
    total = ((16 + flen + 7) & ~7) + blen
    if len(buf) < total:
        return None
    data, raw.buf = buf[:total], buf[total:]
    mtype, flags, serial, fields, body = rawclient.parse(data)
    return Msg(mtype, flags, serial, fields, decode(fields.get(FIELD_SIGNATURE, ""), body, e))


# ---------------------------------------------------------------- the world of one case

class SetupFailed(Exception):
    pass


class Refused(SetupFailed):
    """The options were refused: the proxy exited, or AddServer said InvalidArgs."""


class Conn:
    """A connection of the world, by role; every message it receives is kept
    in msgs (from mark on for the outcomes)."""

    def __init__(self, world, role, address, auto_reply):
        self.world, self.role, self.auto_reply = world, role, auto_reply
        self.raw = Raw(address)
        self.name = self.raw.name
        self.msgs = []
        self.mark = 0
        self.closed = False
        self.syncs = set()              # serials of its sync round trips
        world.roles[self.name] = role
        world.conns.append(self)


class World:
    """One side (P or B) of one case: a fresh bus, the outside connections,
    and the contained client (through a fresh proxy, or a fresh instance)."""

    def __init__(self, side, binary, tmp, tag, options, servicedir):
        self.side, self.binary, self.tmp, self.tag = side, binary, tmp, tag
        self.options = list(options)
        self.servicedir = servicedir
        self.conns = []
        self.roles = {}
        self.proxy = None
        self.logs = []
        self.stack = contextlib.ExitStack()

    def __enter__(self):
        self.logs.append(os.path.join(self.tmp, self.tag + ".log"))
        self.bus_addr = self.stack.enter_context(bus(
            self.binary, self.tmp, self.tag, "<servicedir>%s</servicedir>" % self.servicedir,
            args=["--containers"]))
        # The sandbox manager, on both sides alike: on side B it makes the instance.
        self.manager = self.conn("manager")
        return self

    def __exit__(self, *exc):
        for c in self.conns:
            c.raw.close()
        if self.proxy:
            p, r = self.proxy
            os.close(r)                 # the proxy exits once its --fd closes
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.stack.close()

    # connections

    def conn(self, role, *names, auto_reply=True):
        """An uncontained connection owning @names (RequestName flags 0)."""
        c = Conn(self, role, self.bus_addr, auto_reply)
        for n in names:
            self.request(c, n)
        c.mark = len(c.msgs)
        return c

    def request(self, c, name, flags=0):
        got = self.drv(c, "RequestName", "su", (name, flags))
        if got[0] != "ok":
            raise SetupFailed("%s: RequestName %s: %s" % (c.role, name, got))
        return got[1]

    def client(self, role="client", auto_reply=False):
        """The contained client, made ready: its filter has what it needs
        (the proxy's initial AddMatch/GetNameOwner calls are done)."""
        if self.side == "P":
            sock = os.path.join(self.tmp, self.tag + "-proxy.sock")
            log = os.path.join(self.tmp, self.tag + "-proxy.log")
            self.logs.append(log)
            r, w = os.pipe()
            with open(log, "w") as f:
                p = subprocess.Popen([PROXY, "--fd=%d" % w, self.bus_addr, sock, "--filter",
                                      "--log"] + self.options, pass_fds=(w,),
                                     stdout=f, stderr=subprocess.STDOUT)
            os.close(w)
            self.proxy = (p, r)
            if not select.select([r], [], [], 5)[0]:
                raise SetupFailed("xdg-dbus-proxy did not get ready")
            if os.read(r, 1) != b"x":
                raise Refused("xdg-dbus-proxy exited with status %s" % p.wait(5))
            address = "unix:path=" + sock
        else:
            got = self.drv(self.manager, "AddServer", "ssa{sv}a{sv}", (
                "org.example.Sandbox", "org.example.App", {},
                {"Filter": ("as", self.options)}), iface=C1)
            if got == "InvalidArgs":
                raise Refused("AddServer: InvalidArgs")
            if got[0] != "ok":
                raise SetupFailed("AddServer: %s" % (got,))
            address = got[3]
        c = Conn(self, role, address, auto_reply)
        self.sync(c)
        c.mark = len(c.msgs)
        return c

    def close(self, c):
        c.raw.close()
        c.closed = True

    # messages

    def message(self, c, mtype, dest, path, iface, member, sig="", args=(), flags=0,
                reply_serial=None, error=None):
        """The bytes of a message from @c, with its next serial."""
        fields = {}
        for code, v in ((FIELD_DESTINATION, dest), (FIELD_PATH, path),
                        (FIELD_INTERFACE, iface), (FIELD_MEMBER, member),
                        (FIELD_REPLY_SERIAL, reply_serial), (FIELD_ERROR_NAME, error)):
            if v is not None:
                fields[code] = v
        return rawclient.marshal(mtype, c.raw.next_serial(), fields, sig,
                                 body=encode(sig, args), flags=flags)

    def send(self, c, *a, **kw):
        c.raw.send_raw(self.message(c, *a, **kw))
        return c.raw.serial

    def reply(self, c, call, dest=None, sig="s", args=None, error=None, reply_serial=None):
        """@c answers the method call @call (to @dest, by default its sender)."""
        return self.send(c, ERROR if error else METHOD_RETURN,
                         dest if dest is not None else call.fields.get(FIELD_SENDER),
                         None, None, None, sig, (c.role,) if args is None else args,
                         reply_serial=call.serial if reply_serial is None else reply_serial,
                         error=error)

    def emit(self, c, member, *args, path="/obj", iface=IF, dest=None):
        """A signal from @c with string arguments @args (a broadcast without @dest)."""
        return self.send(c, SIGNAL, dest, path, iface, member, "s" * len(args), args)

    def _dispatch(self, c, m):
        c.msgs.append(m)
        if (c.auto_reply and m.type == METHOD_CALL and not m.flags & NO_REPLY_EXPECTED and
                m.fields.get(FIELD_SENDER)):
            self.reply(c, m)

    def pump(self, pred=lambda: False, timeout=0.0):
        """Reads and dispatches everything until pred() or @timeout s: its result."""
        end = time.monotonic() + timeout
        while True:
            for c in self.conns:
                while not c.closed:
                    m = take_message(c.raw)
                    if m is None:
                        break
                    self._dispatch(c, m)
            if pred():
                return True
            left = end - time.monotonic()
            live = [c for c in self.conns if not c.closed]
            ready = select.select([c.raw.sock for c in live], [], [], max(left, 0))[0]
            if not ready and left <= 0:
                return pred()
            for c in live:
                if c.raw.sock in ready:
                    try:
                        data = c.raw.sock.recv(1 << 20)
                    except (ConnectionResetError, BrokenPipeError):
                        data = b""
                    if data:
                        c.raw.buf += data
                    else:
                        c.closed = True

    def wait_reply(self, c, serial, timeout=1.0):
        def found():
            return any(m.type in (METHOD_RETURN, ERROR) and
                       m.fields.get(FIELD_REPLY_SERIAL) == serial for m in c.msgs)
        if self.pump(lambda: found() or c.closed, timeout) and found():
            return next(m for m in c.msgs if m.type in (METHOD_RETURN, ERROR) and
                        m.fields.get(FIELD_REPLY_SERIAL) == serial)
        return "closed" if c.closed else None

    def call(self, c, dest, member, path="/", iface=IF, sig="", args=(), flags=0, timeout=1.0):
        """The outcome of a method call from @c: ("ok", values...), the error
        name (without org.freedesktop.DBus.Error.), "closed", or "no reply"
        (a call with NO_REPLY_EXPECTED: once @c's next round trip to the bus
        is done, so a denial, which keeps the order, would be there)."""
        if c.closed:
            return "closed"
        try:
            s = self.send(c, METHOD_CALL, dest, path, iface, member, sig, args, flags)
        except OSError:
            c.closed = True
            return "closed"
        if flags & NO_REPLY_EXPECTED:
            self.sync(c)
            timeout = 0
        return self.outcome(self.wait_reply(c, s, timeout))

    def drv(self, c, member, sig="", args=(), flags=0, iface=D, path=DP, timeout=1.0):
        return self.call(c, D, member, path, iface, sig, args, flags, timeout)

    def sync(self, *conns):
        """A round trip to the bus for each of @conns, in order: whatever the
        bus sent them before is read then."""
        for c in conns:
            c.syncs.add(c.raw.serial + 1)
            got = self.drv(c, "GetId", timeout=5)
            if got[0] != "ok":
                raise SetupFailed("%s: sync: %s" % (c.role, got))

    def mark(self):
        for c in self.conns:
            c.mark = len(c.msgs)

    # outcomes

    def norm(self, v):
        """Unique names as role labels ("?" for unknown ones), lists of names sorted."""
        if isinstance(v, str) and v.startswith(":"):
            return self.roles.get(v, "?")
        if isinstance(v, tuple):
            return tuple(self.norm(x) for x in v)
        if isinstance(v, list):
            return [self.norm(x) for x in v]
        if isinstance(v, dict):
            return {k: self.norm(x) for k, x in v.items()}
        return v

    def outcome(self, m):
        if m is None:
            return NOREPLY
        if isinstance(m, str):
            return m
        if m.type == ERROR:
            name = m.fields.get(FIELD_ERROR_NAME, "")
            return name[len(ERR):] if name.startswith(ERR) else name
        return ("ok",) + self.norm(m.values)

    def names(self, c, member="ListNames"):
        got = self.drv(c, member)
        return ("ok", sorted(got[1])) if got[0] == "ok" else got

    def got(self, c, iface=IF):
        """What reached @c since its mark: (kind, member, args...) of the
        calls and signals (of interface @iface, if given)."""
        kinds = {METHOD_CALL: "call", SIGNAL: "signal"}
        return [(kinds[m.type], m.fields.get(FIELD_MEMBER)) + self.norm(m.values)
                for m in c.msgs[c.mark:] if m.type in kinds and
                (iface is None or m.fields.get(FIELD_INTERFACE) == iface)]

    def replies(self, c):
        """The replies that reached @c since its mark (the outcome of each),
        but those of its sync round trips."""
        return [self.outcome(m) for m in c.msgs[c.mark:] if m.type in (METHOD_RETURN, ERROR) and
                m.fields.get(FIELD_REPLY_SERIAL) not in c.syncs]

    def calls_to(self, c):
        return [m for m in c.msgs[c.mark:] if m.type == METHOD_CALL]

    def noc(self, c):
        """The NameOwnerChanged signals that reached @c since its mark."""
        return [self.norm(m.values) for m in c.msgs[c.mark:] if m.type == SIGNAL and
                m.fields.get(FIELD_MEMBER) == "NameOwnerChanged"]


# ---------------------------------------------------------------- the cases

CASES = []  # (title, options, function, expected on side P)


def case(title, options, expected):
    def add(fn):
        CASES.append((title, options, fn, expected))
        return fn
    return add


def ok(*values):
    return ("ok",) + values


def names(*items):
    return ok(sorted(items))


# -- the default policy: the bus and the client itself

@case("default: ListNames has the bus and the client only", [],
      names("client", D))
def _(w):
    w.conn("svcA", A)
    return w.names(w.client())


@case("default: a call to another name: ServiceUnknown", [], "ServiceUnknown")
def _(w):
    w.conn("svcA", A)
    return w.call(w.client(), A, "M")


@case("default: the same with NO_AUTO_START: NameHasNoOwner", [], "NameHasNoOwner")
def _(w):
    w.conn("svcA", A)
    return w.call(w.client(), A, "M", flags=NO_AUTO_START)


@case("default: a call to a hidden unique name: NameHasNoOwner", [], "NameHasNoOwner")
def _(w):
    a = w.conn("svcA", A)
    return w.call(w.client(), a.name, "M")


@case("default: names nobody owns answer as hidden ones do", [],
      ["ServiceUnknown", "NameHasNoOwner", "NameHasNoOwner"])
def _(w):
    c = w.client()
    return [w.call(c, "org.example.Nobody", "M"),
            w.call(c, "org.example.Nobody", "M", flags=NO_AUTO_START),
            w.call(c, ":1.9999", "M")]


@case("default: NO_REPLY_EXPECTED call and unicast signal to a hidden name: "
      "nothing, and the service gets nothing", [], (NOREPLY, []))
def _(w):
    a = w.conn("svcA", A)
    c = w.client()
    got = w.call(c, A, "M", flags=NO_REPLY_EXPECTED)
    w.emit(c, "Sig", dest=A)
    w.emit(c, "Sig", dest=a.name)
    w.sync(c, a)
    return got, w.got(a)


@case("default: the client calls itself (and not another one)", [],
      [ok("client"), "NameHasNoOwner"])
def _(w):
    other = w.conn("other")
    c = w.client(auto_reply=True)
    return [w.call(c, c.name, "M"), w.call(c, other.name, "M")]


@case("default: GetNameOwner/NameHasOwner of hidden names, the bus, itself", [],
      ["NameHasNoOwner", ok(False), "NameHasNoOwner", ok(D), ok("client"), ok(True)])
def _(w):
    a = w.conn("svcA", A)
    c = w.client()
    return [w.drv(c, "GetNameOwner", "s", (A,)), w.drv(c, "NameHasOwner", "s", (A,)),
            w.drv(c, "GetNameOwner", "s", (a.name,)), w.drv(c, "GetNameOwner", "s", (D,)),
            w.drv(c, "GetNameOwner", "s", (c.name,)), w.drv(c, "NameHasOwner", "s", (D,))]


# -- --see

@case("--see: a call gets AccessDenied", ["--see=" + A], "AccessDenied")
def _(w):
    w.conn("svcA", A)
    return w.call(w.client(), A, "M")


@case("--see: GetNameOwner, NameHasOwner, ListNames show it", ["--see=" + A],
      [ok("svcA"), ok(True), names("client", D, A, "svcA")])
def _(w):
    w.conn("svcA", A)
    w.conn("svcB", B)
    c = w.client()
    return [w.drv(c, "GetNameOwner", "s", (A,)), w.drv(c, "NameHasOwner", "s", (A,)),
            w.names(c)]


@case("--see: other names stay hidden (NameHasOwner false, GetNameOwner NameHasNoOwner)",
      ["--see=" + A], [ok(False), "NameHasNoOwner", "NameHasNoOwner"])
def _(w):
    w.conn("svcA", A)
    b = w.conn("svcB", B)
    c = w.client()
    return [w.drv(c, "NameHasOwner", "s", (B,)), w.drv(c, "GetNameOwner", "s", (B,)),
            w.drv(c, "GetNameOwner", "s", (b.name,))]


@case("--see: a NO_REPLY_EXPECTED call and a unicast signal are dropped", ["--see=" + A],
      (NOREPLY, []))
def _(w):
    a = w.conn("svcA", A)
    c = w.client()
    got = w.call(c, A, "M", flags=NO_REPLY_EXPECTED)
    w.emit(c, "Sig", dest=A)
    w.sync(c, a)
    return got, w.got(a)


@case("--see: the owner's unique name gets AccessDenied", ["--see=" + A], "AccessDenied")
def _(w):
    a = w.conn("svcA", A)
    return w.call(w.client(), a.name, "M")


# -- --talk

# (Cases whose point is that something passes also check that a hidden name
# stays hidden, so that no case holds on a bus that filters nothing.)

@case("--talk: calls pass (another name stays hidden)", ["--talk=" + A],
      [ok("svcA"), "ServiceUnknown"])
def _(w):
    w.conn("svcA", A)
    w.conn("svcB", B)
    c = w.client()
    return [w.call(c, A, "M"), w.call(c, B, "M")]


@case("--talk: the owner's unique name works (another one stays hidden)", ["--talk=" + A],
      [ok("svcA"), "NameHasNoOwner"])
def _(w):
    a = w.conn("svcA", A)
    b = w.conn("svcB", B)
    c = w.client()
    return [w.call(c, a.name, "M"), w.call(c, b.name, "M")]


@case("--talk and --see of one name: the higher level (TALK) counts",
      ["--talk=" + A, "--see=" + A, "--see=" + B], [ok("svcA"), "AccessDenied"])
def _(w):
    w.conn("svcA", A)
    w.conn("svcB", B)
    c = w.client()
    return [w.call(c, A, "M"), w.call(c, B, "M")]


@case("--talk: a NO_REPLY_EXPECTED call and a unicast signal arrive (not at a hidden name)",
      ["--talk=" + A], (NOREPLY, [("call", "M"), ("signal", "Sig")], []))
def _(w):
    a = w.conn("svcA", A)
    b = w.conn("svcB", B)
    c = w.client()
    got = w.call(c, A, "M", flags=NO_REPLY_EXPECTED)
    w.emit(c, "Sig", dest=A)
    w.call(c, B, "M", flags=NO_REPLY_EXPECTED)
    w.emit(c, "Sig", dest=B)
    w.sync(c, a, b)
    return got, w.got(a), w.got(b)


# -- --own

@case("--own: RequestName, NameAcquired, GetNameOwner, ListNames", ["--own=" + MINE],
      [ok(1), [("signal", "NameOwnerChanged", MINE, "", "client"),
               ("signal", "NameAcquired", MINE)], ok("client"), names("client", D, MINE)])
def _(w):
    c = w.client()
    got = w.drv(c, "RequestName", "su", (MINE, 0))
    w.sync(c)
    return [got, w.got(c, iface=D), w.drv(c, "GetNameOwner", "s", (MINE,)), w.names(c)]


@case("--own: RequestName of a talk or a see name: AccessDenied",
      ["--own=" + MINE, "--talk=" + T, "--see=" + S], ["AccessDenied", "AccessDenied"])
def _(w):
    c = w.client()
    return [w.drv(c, "RequestName", "su", (T, 0)), w.drv(c, "RequestName", "su", (S, 0))]


@case("--own: RequestName of a hidden name: ServiceUnknown (NameHasNoOwner with "
      "NO_AUTO_START)", ["--own=" + MINE], ["ServiceUnknown", "NameHasNoOwner"])
def _(w):
    c = w.client()
    return [w.drv(c, "RequestName", "su", (B, 0)),
            w.drv(c, "RequestName", "su", (B, 0), flags=NO_AUTO_START)]


@case("--own=org.foo.*: org.foo and org.foo.a.b, not org.foobar", ["--own=org.foo.*"],
      [ok(1), ok(1), "ServiceUnknown"])
def _(w):
    c = w.client()
    return [w.drv(c, "RequestName", "su", (n, 0))
            for n in ("org.foo", "org.foo.a.b", "org.foobar")]


@case("--own: ReleaseName (own ok, hidden ServiceUnknown, talk AccessDenied)",
      ["--own=" + MINE, "--talk=" + T], [ok(1), ok(1), "ServiceUnknown", "AccessDenied"])
def _(w):
    c = w.client()
    return [w.drv(c, "RequestName", "su", (MINE, 0)), w.drv(c, "ReleaseName", "s", (MINE,)),
            w.drv(c, "ReleaseName", "s", (B,)), w.drv(c, "ReleaseName", "s", (T,))]


@case("--own: queueing behind an outside owner; ListQueuedOwners",
      ["--own=" + MINE, "--see=" + S],
      [ok(2), ok(["svcM", "client"]), "ServiceUnknown", "AccessDenied"])
def _(w):
    w.conn("svcM", MINE)
    w.conn("svcS", S)
    c = w.client()
    return [w.drv(c, "RequestName", "su", (MINE, 0)),
            w.drv(c, "ListQueuedOwners", "s", (MINE,)),
            w.drv(c, "ListQueuedOwners", "s", (B,)), w.drv(c, "ListQueuedOwners", "s", (S,))]


# -- wildcards

@case("--talk=org.foo.*: org.foo, org.foo.bar.baz, not org.foobar", ["--talk=org.foo.*"],
      [ok("svc1"), ok("svc2"), "ServiceUnknown"])
def _(w):
    w.conn("svc1", "org.foo")
    w.conn("svc2", "org.foo.bar.baz")
    w.conn("svc3", "org.foobar")
    c = w.client()
    return [w.call(c, n, "M") for n in ("org.foo", "org.foo.bar.baz", "org.foobar")]


@case("--talk=org.foo (exact): not org.foo.bar", ["--talk=org.foo"],
      [ok("svc1"), "ServiceUnknown"])
def _(w):
    w.conn("svc1", "org.foo")
    w.conn("svc2", "org.foo.bar")
    c = w.client()
    return [w.call(c, n, "M") for n in ("org.foo", "org.foo.bar")]


@case("--see=org.foo.*: ListNames shows the names under it", ["--see=org.foo.*"],
      names("client", D, "org.foo", "org.foo.x.y", "svc1", "svc2"))
def _(w):
    w.conn("svc1", "org.foo")
    w.conn("svc2", "org.foo.x.y")
    w.conn("svc3", "org.foobar")
    return w.names(w.client())


# -- --call rules

@case("--call=NAME=iface.Method@/obj: exactly that", ["--call=%s=%s.Method@/obj" % (A, IF)],
      [ok("svcA"), "AccessDenied", "AccessDenied", "AccessDenied"])
def _(w):
    w.conn("svcA", A)
    c = w.client()
    return [w.call(c, A, "Method", "/obj"), w.call(c, A, "Method", "/other"),
            w.call(c, A, "Other", "/obj"), w.call(c, A, "Method", "/obj", "org.example.Other")]


@case("--call=NAME=iface.*: any member at any path, no other interface",
      ["--call=%s=%s.*" % (A, IF)], [ok("svcA"), ok("svcA"), "AccessDenied"])
def _(w):
    w.conn("svcA", A)
    c = w.client()
    return [w.call(c, A, "X"), w.call(c, A, "Y", "/a/b"),
            w.call(c, A, "X", iface="org.example.Other")]


@case("--call=NAME=*: everything, also without an interface (only to NAME)",
      ["--call=%s=*" % A], [ok("svcA"), ok("svcA"), ok("svcA"), "ServiceUnknown"])
def _(w):
    w.conn("svcA", A)
    w.conn("svcB", B)
    c = w.client()
    return [w.call(c, A, "X", "/p"), w.call(c, A, "Y", iface="org.example.Other"),
            w.call(c, A, "Z", iface=None), w.call(c, B, "X")]


@case("--call=NAME=*@/obj/*: /obj and /obj/x, not /objx nor /", ["--call=%s=*@/obj/*" % A],
      [ok("svcA"), ok("svcA"), "AccessDenied", "AccessDenied"])
def _(w):
    w.conn("svcA", A)
    c = w.client()
    return [w.call(c, A, "M", p) for p in ("/obj", "/obj/x/y", "/objx", "/")]


@case("--call=NAME=org.example.Iface is interface org.example, member Iface",
      ["--call=%s=%s" % (A, IF)], ["AccessDenied", ok("svcA"), "AccessDenied"])
def _(w):
    w.conn("svcA", A)
    c = w.client()
    return [w.call(c, A, "X", iface=IF), w.call(c, A, "Iface", iface="org.example"),
            w.call(c, A, "X", iface="org.example")]


@case("--call: a call without INTERFACE fails a rule naming one, passes a path-only rule",
      ["--call=%s=%s.*" % (A, IF), "--call=%s=@/obj" % B],
      ["AccessDenied", ok("svcB"), "AccessDenied"])
def _(w):
    w.conn("svcA", A)
    w.conn("svcB", B)
    c = w.client()
    return [w.call(c, A, "X", iface=None), w.call(c, B, "X", "/obj", iface=None),
            w.call(c, B, "X", "/other", iface=None)]


@case("--call alone makes the name visible; other methods AccessDenied",
      ["--call=%s=%s.Method" % (A, IF)],
      [names("client", D, A, "svcA"), ok("svcA"), ok(True), ok("svcA"), "AccessDenied"])
def _(w):
    w.conn("svcA", A)
    c = w.client()
    return [w.names(c), w.drv(c, "GetNameOwner", "s", (A,)), w.drv(c, "NameHasOwner", "s", (A,)),
            w.call(c, A, "Method"), w.call(c, A, "Other")]


@case("--call: a unicast signal to a call-only name goes by the call rules",
      ["--call=%s=%s.Method" % (A, IF)], [("signal", "Method", "x")])
def _(w):
    a = w.conn("svcA", A)
    c = w.client()
    w.emit(c, "Method", "x", dest=A)
    w.emit(c, "Other", "y", dest=A)
    w.sync(c, a)
    return w.got(a)


@case("--call: the rules hold for the owner's unique name too",
      ["--call=%s=%s.Method" % (A, IF)], [ok("svcA"), "AccessDenied"])
def _(w):
    a = w.conn("svcA", A)
    c = w.client()
    return [w.call(c, a.name, "Method"), w.call(c, a.name, "Other")]


@case("--see plus --call: the rule's calls pass, others AccessDenied",
      ["--see=" + A, "--call=%s=%s.Method" % (A, IF)], [ok("svcA"), "AccessDenied"])
def _(w):
    w.conn("svcA", A)
    c = w.client()
    return [w.call(c, A, "Method"), w.call(c, A, "Other")]


# -- broadcasts from outside to the client

def broadcasts(w, *names_, emit=(("Match", "/obj"), ("Other", "/obj"), ("Match", "/objx"))):
    """svcA (owning @names_) broadcasts @emit (member, path), and svcB, hidden,
    a "Match" on /obj ("hidden"): the signals of interface IF the client,
    subscribed to them, got."""
    a = w.conn("svcA", *names_)
    b = w.conn("svcB", B)
    c = w.client()
    w.drv(c, "AddMatch", "s", (MATCH_IF,))
    for member, path in emit:
        w.emit(a, member, path[1:] or "root", path=path)
    w.emit(b, "Match", "hidden")
    w.sync(a, b, c)
    return w.got(c)


MATCH_RULE = "--broadcast=%s=%s.Match@/obj/*" % (A, IF)
ALL3 = [("signal", "Match", "obj"), ("signal", "Other", "obj"), ("signal", "Match", "objx")]


@case("--broadcast alone: only the matching broadcasts; calls AccessDenied", [MATCH_RULE],
      ([("signal", "Match", "obj")], "AccessDenied"))
def _(w):
    got = broadcasts(w, A)
    return got, w.call(w.conns[-1], A, "M")


@case("--talk plus --broadcast: TALK lets every broadcast through", ["--talk=" + A, MATCH_RULE],
      ALL3)
def _(w):
    return broadcasts(w, A)


@case("--own name: every broadcast", ["--own=" + A], ALL3)
def _(w):
    return broadcasts(w, A)


@case("--talk name: every broadcast", ["--talk=" + A], ALL3)
def _(w):
    return broadcasts(w, A)


@case("--see name: no broadcasts", ["--see=" + A], [])
def _(w):
    return broadcasts(w, A)


@case("--call-only name: no broadcasts", ["--call=%s=*" % A], [])
def _(w):
    return broadcasts(w, A)


@case("--see plus --broadcast rule: only the matching ones", ["--see=" + A, MATCH_RULE],
      [("signal", "Match", "obj")])
def _(w):
    return broadcasts(w, A)


@case("--broadcast rule subtree @/obj/*: /obj and /obj/x, not /objx nor /",
      ["--broadcast=%s=*@/obj/*" % A],
      [("signal", "M", "obj"), ("signal", "M", "obj/x")])
def _(w):
    return broadcasts(w, A, emit=[("M", "/obj"), ("M", "/obj/x"), ("M", "/objx"), ("M", "/")])


@case("default: a hidden service's broadcasts do not reach a subscribed client", [], [])
def _(w):
    return broadcasts(w, A)


@case("a peer that called the client (SEE) still has its broadcasts dropped", [],
      [("call", "Ask"), ("signal", "Sig", "x")], )
def _(w):
    peer = w.conn("peer")
    c = w.client()
    w.drv(c, "AddMatch", "s", (MATCH_IF,))
    s = w.send(peer, METHOD_CALL, c.name, "/", IF, "Ask")
    w.pump(lambda: w.calls_to(c), 2)
    w.reply(c, w.calls_to(c)[0])
    w.wait_reply(peer, s)
    w.emit(peer, "Sig", "x")              # a broadcast: dropped
    w.emit(peer, "Sig", "x", dest=c.name)  # unicast: passes
    w.sync(peer, c)
    return w.got(c)


@case("broadcasts from the client go out (an outside subscriber and the client itself; "
      "not the subscriber's own to the client)",
      [], ([("signal", "Out", "1"), ("signal", "Out", "2"), ("signal", "In", "3")],
           [("signal", "Out", "1"), ("signal", "Out", "2")]))
def _(w):
    sub = w.conn("subscriber")
    w.drv(sub, "AddMatch", "s", (MATCH_IF,))
    c = w.client()
    w.drv(c, "AddMatch", "s", (MATCH_IF,))
    w.emit(c, "Out", "1")
    w.emit(c, "Out", "2", path="/")
    w.sync(c)
    w.emit(sub, "In", "3")
    w.sync(sub, c)
    return w.got(sub), w.got(c)


# -- the driver

@case("driver: GetId (any path), AddMatch, RemoveMatch pass (NameHasOwner of a hidden "
      "name: false)", [], [ok("<id>"), ok("<id>"), ok(), ok(), "MatchRuleNotFound", ok(False)])
def _(w):
    w.conn("svcB", B)
    c = w.client()
    ids = [w.drv(c, "GetId", path=p) for p in (DP, "/")]
    return [ok("<id>") if got[0] == "ok" and len(got[1]) == 32 else got for got in ids] + [
        w.drv(c, "AddMatch", "s", (MATCH_IF,)), w.drv(c, "RemoveMatch", "s", (MATCH_IF,)),
        w.drv(c, "RemoveMatch", "s", (MATCH_IF,)), w.drv(c, "NameHasOwner", "s", (B,))]


@case("driver: AddMatch with eavesdrop (=true, ' =true', tab, quoted): AccessDenied", [],
      ["AccessDenied"] * 4)
def _(w):
    c = w.client()
    return [w.drv(c, "AddMatch", "s", (r,)) for r in (
        "eavesdrop=true", "type='signal',eavesdrop =true", "eavesdrop\t=true",
        "type='signal',eavesdrop='true'")]


@case("driver: AddMatch eavesdrop=false and arg0='xeavesdrop=1' (the substring test)", [],
      ["AccessDenied", "AccessDenied"])
def _(w):
    c = w.client()
    return [w.drv(c, "AddMatch", "s", ("eavesdrop=false",)),
            w.drv(c, "AddMatch", "s", ("type='signal',arg0='xeavesdrop=1'",))]


@case("driver: BecomeMonitor (both interfaces), UpdateActivationEnvironment: AccessDenied",
      [], ["AccessDenied"] * 3)
def _(w):
    c = w.client()
    return [w.drv(c, "BecomeMonitor", "asu", ([], 0), iface=D + ".Monitoring"),
            w.drv(c, "BecomeMonitor", "asu", ([], 0)),
            w.drv(c, "UpdateActivationEnvironment", "a{ss}", ({"A": "b"},))]


@case("driver: GetConnection* of a seen name ok, of hidden ones hidden", ["--see=" + A],
      [ok("uid"), ok("pid"), ok(True), "ServiceUnknown", "NameHasNoOwner", "ServiceUnknown",
       "ServiceUnknown", "NameHasNoOwner"])
def _(w):
    w.conn("svcA", A)
    b = w.conn("svcB", B)
    c = w.client()
    uid = w.drv(c, "GetConnectionUnixUser", "s", (A,))
    pid = w.drv(c, "GetConnectionUnixProcessID", "s", (A,))
    creds = w.drv(c, "GetConnectionCredentials", "s", (A,))
    return [ok("uid") if uid == ok(os.getuid()) else uid,
            ok("pid") if pid == ok(os.getpid()) else pid,
            ok(creds[1].get("UnixUserID") == os.getuid()) if creds[0] == "ok" else creds,
            w.drv(c, "GetConnectionUnixUser", "s", (B,)),
            w.drv(c, "GetConnectionUnixUser", "s", (B,), flags=NO_AUTO_START),
            # arg0 a hidden unique name: still ServiceUnknown, the destination
            # (the bus) does not start with ':'
            w.drv(c, "GetConnectionCredentials", "s", (b.name,)),
            w.drv(c, "GetConnectionUnixUser", "s", (b.name,)),
            w.drv(c, "GetConnectionUnixUser", "s", (b.name,), flags=NO_AUTO_START)]


@case("driver: StartServiceByName: see AccessDenied, hidden ServiceUnknown, talk ok",
      ["--see=" + A, "--talk=org.example.ActSeen"],
      ["AccessDenied", "ServiceUnknown", ok(2), "ServiceUnknown"])
def _(w):
    # The bus looks for a .service file first, before whether the name runs:
    # so the names it may start are the activatable ones, run here already.
    w.conn("svcA", A)
    w.conn("svcT", "org.example.ActSeen")
    w.conn("svcH", "org.example.ActHidden")
    c = w.client()
    return [w.drv(c, "StartServiceByName", "su", (n, 0))
            for n in (A, B, "org.example.ActSeen", "org.example.ActHidden")]


@case("driver: Peer on the bus AccessDenied; Peer.Ping without destination passes", [],
      ["AccessDenied", "AccessDenied", ok()])
def _(w):
    c = w.client()
    peer = "org.freedesktop.DBus.Peer"
    return [w.drv(c, "Ping", iface=peer), w.drv(c, "GetMachineId", iface=peer),
            w.call(c, None, "Ping", "/", peer)]


@case("driver: Properties on the bus: AccessDenied", [], ["AccessDenied"] * 2)
def _(w):
    c = w.client()
    props = "org.freedesktop.DBus.Properties"
    return [w.drv(c, "Get", "ss", (D, "Features"), iface=props),
            w.drv(c, "GetAll", "s", (D,), iface=props)]


@case("driver: other members and interfaces, no interface: AccessDenied", [],
      ["AccessDenied"] * 6)
def _(w):
    c = w.client()
    return [w.drv(c, "GetConnectionAppArmorSecurityContext", "s", (D,)),
            w.drv(c, "ReloadConfig"), w.drv(c, "GetMachineId"), w.drv(c, "Nope"),
            w.drv(c, "GetStats", iface=D + ".Debug.Stats"), w.drv(c, "GetId", iface=None)]


@case("driver: Introspect on the bus passes, at any path (Peer.Ping on it does not)", [],
      ["AccessDenied"] + [ok(True)] * 3)
def _(w):
    c = w.client()
    out = [w.drv(c, "Ping", iface="org.freedesktop.DBus.Peer")]
    for path in ("/", DP, "/x"):
        got = w.drv(c, "Introspect", path=path, iface="org.freedesktop.DBus.Introspectable")
        out.append(ok("<node" in got[1]) if got[0] == "ok" else got)
    return out


@case("driver: ListNames filtering (see, talk, own, call, broadcast, hidden)",
      ["--see=" + S, "--talk=" + T, "--own=" + MINE, "--call=%s=*" % A,
       "--broadcast=%s=*" % B],
      names("client", D, S, T, MINE, A, B, "svcS", "svcT", "svcA", "svcB"))
def _(w):
    for role, n in (("svcS", S), ("svcT", T), ("svcA", A), ("svcB", B),
                    ("svcX", "org.example.X")):
        w.conn(role, n)
    c = w.client()
    w.drv(c, "RequestName", "su", (MINE, 0))
    return w.names(c)


@case("driver: ListActivatableNames filtering", ["--see=org.example.ActSeen"],
      names(D, "org.example.ActSeen"))
def _(w):
    return w.names(w.client(), "ListActivatableNames")


# -- NameOwnerChanged

@case("NameOwnerChanged for policy names without a match rule, none for hidden ones",
      ["--see=" + A, "--talk=" + T],
      [(A, "", "svcA"), (T, "", "svcT"), (A, "svcA", "")])
def _(w):
    a, t, x = w.conn("svcA"), w.conn("svcT"), w.conn("svcX")
    c = w.client()
    w.request(a, A)
    w.request(x, "org.example.X")
    w.request(t, T)
    w.drv(a, "ReleaseName", "s", (A,))
    w.sync(c)
    return w.noc(c)


@case("no NameOwnerChanged of hidden names even with the client's own match rule", [], [])
def _(w):
    x = w.conn("svcX")
    c = w.client()
    w.drv(c, "AddMatch", "s", (MATCH_NOC,))
    w.request(x, "org.example.X")
    w.drv(x, "ReleaseName", "s", ("org.example.X",))
    w.close(w.conn("passer-by"))
    w.sync(x, c)
    return w.noc(c)


@case("--see=org.foo.*: NameOwnerChanged of org.foo.x and org.foo, not org.foobar",
      ["--see=org.foo.*"], [("org.foo.x", "", "svc"), ("org.foo", "", "svc")])
def _(w):
    s = w.conn("svc")
    c = w.client()
    for n in ("org.foo.x", "org.foobar", "org.foo"):
        w.request(s, n)
    w.sync(c)
    return w.noc(c)


@case("--talk: the owner's disconnection, seen with a match rule (its unique name too)",
      ["--talk=" + A], [(A, "svcA", ""), ("svcA", "svcA", "")])
def _(w):
    a = w.conn("svcA", A)
    c = w.client()
    w.drv(c, "AddMatch", "s", (MATCH_NOC,))
    w.close(a)
    w.sync(w.manager, c)
    return w.noc(c)


@case("a peer the client only sees (it called the client): its disconnection, seen "
      "with a match rule", [], [("peer", "peer", "")])
def _(w):
    peer = w.conn("peer")
    other = w.conn("other")
    c = w.client()
    w.drv(c, "AddMatch", "s", (MATCH_NOC,))
    s = w.send(peer, METHOD_CALL, c.name, "/", IF, "Ask")
    w.pump(lambda: w.calls_to(c), 2)
    w.reply(c, w.calls_to(c)[0])
    w.wait_reply(peer, s)
    w.close(peer)
    w.close(other)
    w.sync(w.manager, c)
    return w.noc(c)


# -- unique-name learning (sticky)

@case("a peer that calls the client becomes SEE", [],
      ["NameHasNoOwner", ok("client"), names("client", D, "peer"), ok("peer"), ok(True),
       "AccessDenied"])
def _(w):
    peer = w.conn("peer")
    c = w.client()
    out = [w.drv(c, "GetNameOwner", "s", (peer.name,))]
    s = w.send(peer, METHOD_CALL, c.name, "/", IF, "Ask")
    w.pump(lambda: w.calls_to(c), 2)
    w.reply(c, w.calls_to(c)[0])
    out.append(w.outcome(w.wait_reply(peer, s)))
    return out + [w.names(c), w.drv(c, "GetNameOwner", "s", (peer.name,)),
                  w.drv(c, "NameHasOwner", "s", (peer.name,)), w.call(c, peer.name, "M")]


@case("the owner of a talk name stays reachable by its unique name after releasing it "
      "(its new owner, too, not a hidden one)", ["--talk=" + A],
      [ok("svcA"), ok("svcN"), ok("svcA"), ok(True), "NameHasNoOwner"])
def _(w):
    a = w.conn("svcA", A)
    n = w.conn("svcN")
    b = w.conn("svcB", B)
    c = w.client()
    w.drv(a, "ReleaseName", "s", (A,))
    w.request(n, A)
    w.sync(c)
    return [w.call(c, a.name, "M"), w.call(c, A, "M"), w.drv(c, "GetNameOwner", "s", (a.name,)),
            w.drv(c, "NameHasOwner", "s", (a.name,)), w.call(c, b.name, "M")]


@case("a queued owner of a talk name becomes reachable once it is the primary owner",
      ["--talk=" + A], ["NameHasNoOwner", ok("svcQ"), ok("svcQ")])
def _(w):
    a = w.conn("svcA", A)
    q = w.conn("svcQ")
    c = w.client()
    w.request(q, A)                      # queued behind svcA
    w.sync(c)
    before = w.call(c, q.name, "M")
    w.drv(a, "ReleaseName", "s", (A,))
    w.sync(c)
    return [before, w.call(c, q.name, "M"), w.call(c, A, "M")]


@case("a hidden peer's unicast signal arrives, and the peer becomes SEE", [],
      ([("signal", "Sig", "x")], names("client", D, "peer"), "AccessDenied"))
def _(w):
    peer = w.conn("peer")
    c = w.client()
    w.emit(peer, "Sig", "x", dest=c.name)
    w.sync(peer, c)
    return w.got(c), w.names(c), w.call(c, peer.name, "M")


# -- replies

@case("a hidden peer's call reaches the client; the reply passes", [],
      ([("call", "Ask", "q")], [ok("client")], "NameHasNoOwner"))
def _(w):
    peer = w.conn("peer")
    c = w.client()
    hidden = w.call(c, peer.name, "M")
    s = w.send(peer, METHOD_CALL, c.name, "/", IF, "Ask", "s", ("q",))
    w.pump(lambda: w.calls_to(c), 2)
    w.reply(c, w.calls_to(c)[0])
    w.wait_reply(peer, s)
    return w.got(c), w.replies(peer), hidden


@case("the client's error reply passes (to a peer it cannot call)", [],
      (["org.example.Error.Nope"], "AccessDenied"))
def _(w):
    peer = w.conn("peer")
    c = w.client()
    s = w.send(peer, METHOD_CALL, c.name, "/", IF, "Ask")
    w.pump(lambda: w.calls_to(c), 2)
    w.reply(c, w.calls_to(c)[0], sig="s", args=("no",), error="org.example.Error.Nope")
    w.wait_reply(peer, s)
    return w.replies(peer), w.call(c, peer.name, "M")


@case("replies with no matching call are dropped (return and error)", ["--talk=" + T], [])
def _(w):
    t = w.conn("svcT", T)
    c = w.client()
    w.send(c, METHOD_RETURN, t.name, None, None, None, "s", ("forged",), reply_serial=77)
    w.send(c, ERROR, t.name, None, None, None, "s", ("forged",), reply_serial=78,
           error="org.example.Error.Forged")
    w.sync(c, t)
    return w.replies(t)


@case("a reply aimed at another peer, or at the caller's well-known name, is dropped; "
      "then the right one passes, once", ["--talk=" + T],
      ([], [ok("client")]))
def _(w):
    t = w.conn("svcT", T)
    peer = w.conn("peer", "org.example.Peer")
    c = w.client()
    w.send(peer, METHOD_CALL, c.name, "/", IF, "Ask")
    w.pump(lambda: w.calls_to(c), 2)
    call = w.calls_to(c)[0]
    w.reply(c, call, dest=t.name)
    w.reply(c, call, dest="org.example.Peer")
    w.reply(c, call)
    w.reply(c, call)
    w.sync(c, t, peer)
    return w.replies(t), w.replies(peer)


# -- more of the learning and of the options

@case("a talk name taken after the client connected: its owner's unique name is reachable",
      ["--talk=" + A], ["NameHasNoOwner", ok("svcA"), ok("svcA")])
def _(w):
    a = w.conn("svcA")
    c = w.client()
    before = w.call(c, a.name, "M")
    w.request(a, A)
    w.sync(c)
    return [before, w.call(c, A, "M"), w.call(c, a.name, "M")]


@case("--talk=org.foo.*: the owners there before the client are learned (unique names)",
      ["--talk=org.foo.*"], [ok("svc1"), ok("svc2"), "NameHasNoOwner"])
def _(w):
    s1 = w.conn("svc1", "org.foo")
    s2 = w.conn("svc2", "org.foo.bar")
    s3 = w.conn("svc3", "org.foobar")
    c = w.client()
    return [w.call(c, x.name, "M") for x in (s1, s2, s3)]


@case("a released talk owner's broadcasts still reach the client (sticky)", ["--talk=" + A],
      [("signal", "After", "x")])
def _(w):
    a = w.conn("svcA", A)
    b = w.conn("svcB", B)
    c = w.client()
    w.drv(c, "AddMatch", "s", (MATCH_IF,))
    w.drv(a, "ReleaseName", "s", (A,))
    w.emit(a, "After", "x")
    w.emit(b, "Hidden", "y")
    w.sync(a, b, c)
    return w.got(c)


@case("a unicast signal to a peer the client only sees is dropped", [],
      ([("call", "Ask")], []))
def _(w):
    peer = w.conn("peer", auto_reply=False)
    c = w.client()
    s = w.send(peer, METHOD_CALL, c.name, "/", IF, "Ask")
    w.pump(lambda: w.calls_to(c), 2)
    w.reply(c, w.calls_to(c)[0])
    w.wait_reply(peer, s)
    w.emit(c, "Sig", "x", dest=peer.name)
    w.sync(c, peer)
    return w.got(c), w.got(peer)


@case("NameOwnerChanged of a see name passing to its queued owner", ["--see=" + A],
      [(A, "svcA", "svcQ")])
def _(w):
    a = w.conn("svcA", A)
    q = w.conn("svcQ")
    w.request(q, A)
    c = w.client()
    w.drv(a, "ReleaseName", "s", (A,))
    w.sync(c)
    return w.noc(c)


@case("--sloppy-names: NameOwnerChanged of every unique name (own match rule), "
      "still hidden", ["--sloppy-names"],
      ([("passer", "", "passer"), ("passer", "passer", "")], names("client", D),
       "NameHasNoOwner"))
def _(w):
    x = w.conn("svcX")
    c = w.client()
    w.drv(c, "AddMatch", "s", (MATCH_NOC,))
    p = w.conn("passer")
    w.request(x, "org.example.X")
    w.sync(c)
    got = (w.names(c), w.call(c, p.name, "M"))
    w.close(p)
    w.sync(w.manager, c)
    return (w.noc(c),) + got


@case("--call=org.foo.*=RULE: a wildcard name in a call rule", ["--call=org.foo.*=*"],
      [ok("svc1"), ok("svc2"), "ServiceUnknown"])
def _(w):
    w.conn("svc1", "org.foo")
    w.conn("svc2", "org.foo.bar")
    w.conn("svc3", "org.foobar")
    c = w.client()
    return [w.call(c, n, "M") for n in ("org.foo", "org.foo.bar", "org.foobar")]


@case("--call=NAME=RULE takes any NAME unchecked (the proxy does not validate it)",
      ["--call=org..bad=*", "--talk=" + A], [ok("svcA"), "ServiceUnknown"])
def _(w):
    w.conn("svcA", A)
    w.conn("svcB", B)
    c = w.client()
    return [w.call(c, A, "M"), w.call(c, B, "M")]


def refused(w):
    try:
        w.client()
    except Refused:
        return "refused"
    return "accepted"


for bad in ("--talk=org..bad", "--see=:1.5", "--call=" + A, "--frobnicate"):
    case("an option the proxy refuses: %s" % bad, [bad], "refused")(refused)


# -- flood

@case("flood: 2000 calls to a hidden name and 2000 broadcasts; an outside client's 50 "
      "calls are all answered meanwhile", [],
      {"outside answered": 50, "client got": {"ServiceUnknown": 2000}, "svcH got": 0,
       "subscriber got": 2000, "in time": True})
def _(w):
    h = w.conn("svcH", "org.example.Hidden")
    w.conn("svcA", A)
    out = w.conn("outside")
    sub = w.conn("subscriber")
    w.drv(sub, "AddMatch", "s", ("type='signal',member='Flood'",))
    c = w.client()
    sent = []
    start = time.monotonic()
    for i in range(20):
        chunk = b"".join(w.message(c, METHOD_CALL, "org.example.Hidden", "/", IF, "M")
                         for _ in range(100))
        chunk += b"".join(w.message(c, SIGNAL, None, "/", IF, "Flood") for _ in range(100))
        c.raw.send_raw(chunk)
        for _ in range(3 if i % 2 else 2):
            sent.append(w.send(out, METHOD_CALL, A, "/", IF, "M"))
        w.pump()
    answered = {m.fields.get(FIELD_REPLY_SERIAL) for m in out.msgs if m.type == METHOD_RETURN}

    def done():
        answered.update(m.fields.get(FIELD_REPLY_SERIAL) for m in out.msgs
                        if m.type == METHOD_RETURN)
        return answered >= set(sent)
    in_time = w.pump(done, 5)
    took = time.monotonic() - start
    w.pump(lambda: len(w.replies(c)) >= 2000 or c.closed, 10)
    w.pump(lambda: len(w.got(sub)) >= 2000, 10)
    w.sync(h, sub, c)
    return {"outside answered": len(answered & set(sent)),
            "client got": dict(collections.Counter(w.replies(c))), "svcH got": len(w.got(h)),
            "subscriber got": len(w.got(sub)), "in time": in_time and took < 10}


# ---------------------------------------------------------------- running

def run_case(side, binary, tmp, idx, options, fn, servicedir):
    """The outcome of one case on one side, and the logs to show."""
    w = World(side, binary, tmp, "%s%02d" % (side, idx), options, servicedir)
    try:
        with w:
            return fn(w), w.logs
    except SetupFailed as e:
        return ("setup failed", str(e)), w.logs
    except Exception as e:  # a case that broke is an outcome too
        return ("exception", "%s: %s" % (type(e).__name__, e)), w.logs


def tail(path, n=25):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return "  (no %s)" % path
    return "\n".join("  | " + line for line in lines[-n:]) or "  | (empty)"


REFERENCE_VERSION = "0.1.4-3+deb12u2"


def main():
    # Under run-under-valgrind.sh only side B's bus runs under valgrind: the
    # filter is its code; side P's bus sees unfiltered traffic (half the time).
    binary = os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1]
    binary_p = sys.argv[1]
    only = sys.argv[2:]
    if not os.access(PROXY, os.X_OK):
        # Not a skip: tools/deps.sh test installs it, and without it nothing is compared.
        print("FAIL no %s to compare with (tools/deps.sh test installs it)" % PROXY)
        return 1
    # The reference is Debian's security update: its reply fixes (CVE-2026-94422)
    # are in no upstream release, and the reply cases expect them.
    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "xdg-dbus-proxy"],
                             capture_output=True, text=True).stdout.strip()
    print("reference: xdg-dbus-proxy %s" % (version or "(not a Debian package)"))
    if version and subprocess.run(["dpkg", "--compare-versions", version, "ge",
                                   REFERENCE_VERSION]).returncode != 0:
        print("FAIL the reference is xdg-dbus-proxy %s or later (bookworm-security), not %s" %
              (REFERENCE_VERSION, version))
        return 1
    failures = alike = 0
    chosen = [(i, c) for i, c in enumerate(CASES) if not only or any(s in c[0] for s in only)]
    with tempfile.TemporaryDirectory(prefix="bus1-cfilter.") as tmp:
        os.environ["XDG_RUNTIME_DIR"] = tmp
        servicedir = os.path.join(tmp, "services")
        os.mkdir(servicedir)
        for n in ("org.example.ActSeen", "org.example.ActHidden"):
            with open(os.path.join(servicedir, n + ".service"), "w") as f:
                f.write("[D-BUS Service]\nName=%s\nExec=/bin/false\n" % n)
        for i, (title, options, fn, expected) in chosen:
            p, plogs = run_case("P", binary_p, tmp, i, options, fn, servicedir)
            b, blogs = run_case("B", binary, tmp, i, options, fn, servicedir)
            same, right = p == b, p == expected
            alike += same
            if same and right:
                print("ok   %2d %s\n       %r" % (i, title, p))
                continue
            failures += 1
            print("FAIL %2d %s\n       options: %s" % (i, title, " ".join(options) or "(none)"))
            if not right:
                print("       expected: %r" % (expected,))
            print("       P (proxy): %r\n       B (bus):   %r" % (p, b))
            for log in plogs + blogs:
                print("  %s:\n%s" % (os.path.basename(log), tail(log)))
    print("%d cases, %d alike, %d failed" % (len(chosen), alike, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
