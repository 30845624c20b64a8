# SPDX-License-Identifier: LGPL-2.1-or-later
"""The second sweep of edges (issue 43): the same raw-socket scenarios on
bus1-broker AND on /usr/bin/dbus-daemon (when installed), each on a private
bus of its own (run-with-bus.sh with a session configuration whose limits are
session.conf's), and both must give the outcomes in EXPECTED, which are what
dbus-daemon 1.14 does:

1. A message of a type D-Bus does not define (5) to a peer, to the bus, or
   before Hello to the bus is refused with AccessDenied and its sender kept;
   without destination it is dropped.
2. A message with an fd to a connection that did not negotiate fd passing
   (a signal, a call, a reply) is refused with NotSupported to its sender;
   the receiver gets nothing, and a refused reply leaves the caller waiting.
4. UpdateActivationEnvironment takes any key, "A=B" and "" included.
5. BecomeMonitor by a connection that owns names: NameLost and
   NameOwnerChanged for its unique name first, then its other names in the
   order it got them; a disconnect goes the other way round.
7. A message of exactly 128 MiB (the protocol's maximum), max_message_size
   raised: forwarded with the SENDER the bus adds, sender kept.
9. A new .service file and ReloadConfig at once: dbus-daemon reloads twice
   (the directory watch, then the call) and says ActivatableServicesChanged
   twice; bus1-broker's one reload already saw the file, so it says it once
   (deliberate, DELIBERATE below and bus1-broker(1)).
Then the sweep of our own: messages valid and not on the wire (protocol
version, flags, serial 0, bodies against their signatures, nesting, names
and paths in the header): what the receiver gets, and whether the sender
stays.

  test_edges_parity.py BUS1_BROKER        both buses, compare
  test_edges_parity.py --scenarios FILE   inside run-with-bus.sh: one bus
"""

import json
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import parity  # noqa: E402
from timefactor import time_factor  # noqa: E402
from rawclient import (ERROR, FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,  # noqa: E402
                       FIELD_MEMBER, FIELD_PATH, FIELD_REPLY_SERIAL, FIELD_SIGNATURE,
                       FIELD_UNIX_FDS, METHOD_CALL, METHOD_RETURN, Raw, alive,
                       body_strings, drain, marshal, session_config)

D, P, I = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
IFACE = "org.bus1.Test.Edges"
AD = I + ".Error.AccessDenied"
MiB = 1 << 20
CONFIG = session_config("<listen>unix:tmpdir=/tmp</listen>",
                        "<limit name=\"max_incoming_bytes\">1000000000</limit>",
                        "<limit name=\"max_outgoing_bytes\">1000000000</limit>",
                        "<limit name=\"max_message_size\">1000000000</limit>")

# ------------------------------------------------------------------ scenarios




KINDS = {1: "call", 2: "return", 3: "error", 4: "signal"}


def brief(m):
    return [KINDS.get(m[0], "type %d" % m[0]), m[3].get(FIELD_MEMBER) or m[3].get(FIELD_ERROR_NAME)]


def with_text(m):
    """brief(), plus the error's text."""
    b = brief(m)
    if m[0] == ERROR:
        b.append(body_strings(m[4])[0] if m[4] else None)
    return b



def add_match(raw, rule):
    raw.wait_reply(raw.call(D, P, I, "AddMatch", "s", (rule,)))


def unknown_type(raw, serial, dest):
    fields = {FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: "Five"}
    if dest:
        fields[FIELD_DESTINATION] = dest
    return marshal(5, serial, fields)


def scenario_unknown_type(out):
    """Item 1."""
    other = Raw()
    add_match(other, "interface='%s'" % IFACE)
    drain(other, 0.1)
    for what, dest in (("to a peer", other.name), ("to the bus", D),
                       ("without destination", None)):
        a = Raw()
        drain(a, 0.1)
        a.send_raw(unknown_type(a, a.next_serial(), dest))
        out["unknown type %s: sender got" % what] = [with_text(m) for m in drain(a)[0]]
        out["unknown type %s: sender still connected" % what] = alive(a)
        out["unknown type %s: the peer got" % what] = [brief(m) for m in drain(other, 0.2)[0]]
        a.close()
    a = Raw(hello=False)
    a.send_raw(unknown_type(a, 1, D))
    got, end = drain(a)
    out["unknown type before Hello: sender got"] = [with_text(m) for m in got] + [end]
    try:
        r = a.wait_reply(a.call(D, P, I, "Hello"), 3)
        out["unknown type before Hello: then Hello"] = KINDS[r[0]]
    except (OSError, EOFError):
        out["unknown type before Hello: then Hello"] = "closed"
    a.close()
    other.close()


def scenario_fds_refused(out):
    """Item 2: a signal, a call and a reply, each with an fd, to a connection
    that did not negotiate fd passing."""
    nofd = Raw(negotiate_fds=False)
    add_match(nofd, "interface='%s'" % IFACE)
    drain(nofd, 0.1)
    rfd, wfd = os.pipe()
    try:
        a = Raw()
        drain(a, 0.1)
        a.signal("/", IFACE, "WithFd", "h", (0,), dest=nofd.name, fds=(rfd,))
        # Names only: dbus-daemon's text lacks a space ("descriptorsto").
        out["fd to a no-fd client: signal: sender got"] = [brief(m) for m in drain(a)[0]]
        a.call(nofd.name, "/", IFACE, "CallWithFd", "h", (0,), fds=(rfd,))
        out["fd to a no-fd client: call: sender got"] = [brief(m) for m in drain(a)[0]]
        out["fd to a no-fd client: the receiver got"] = [brief(m) for m in drain(nofd)[0]]
        # The no-fd client calls; the answer carries an fd.
        s = nofd.call(a.name, "/", IFACE, "AskForFd")
        call = a.recv()
        fields = {FIELD_REPLY_SERIAL: call[2], FIELD_DESTINATION: nofd.name,
                  FIELD_UNIX_FDS: 1}
        a.send_raw(marshal(METHOD_RETURN, a.next_serial(), fields, "h", (0,)), (rfd,))
        out["fd to a no-fd client: reply: replier got"] = [brief(m) for m in drain(a)[0]]
        out["fd to a no-fd client: reply: the caller got"] = [
            brief(m) + [m[3].get(FIELD_REPLY_SERIAL) == s] for m in drain(nofd)[0]]
        out["fd to a no-fd client: both still connected"] = alive(a) and alive(nofd)
        a.close()
    finally:
        os.close(rfd)
        os.close(wfd)
    nofd.close()


def scenario_activation_environment(out):
    """Item 4."""
    a = Raw()
    for what, key in (("a key with '='", "EDGES_A=B"), ("an empty key", ""),
                      ("a plain key", "EDGES_PLAIN")):
        body = bytearray()
        entry = bytearray(8)                        # dict entries are 8-aligned
        for s in (key, "v"):
            while len(entry) % 4:
                entry.append(0)
            b = s.encode()
            entry += struct.pack("<I", len(b)) + b + b"\0"
        body += struct.pack("<I", len(entry) - 8) + b"\0" * 4 + entry[8:]
        s = a.next_serial()
        a.send_raw(marshal(METHOD_CALL, s, {FIELD_PATH: P, FIELD_INTERFACE: I,
                                            FIELD_MEMBER: "UpdateActivationEnvironment",
                                            FIELD_DESTINATION: D}, "a{ss}", body=bytes(body)))
        out["UpdateActivationEnvironment, %s" % what] = with_text(a.wait_reply(s))
    a.close()


def names_seen(msgs, own):
    """NameLost and NameOwnerChanged, with @own's unique name as "UNIQUE"."""
    def n(x):
        return "UNIQUE" if x == own else x
    return [[m[3].get(FIELD_MEMBER)] + [n(x) for x in body_strings(m[4])]
            for m in msgs if m[3].get(FIELD_MEMBER) in ("NameLost", "NameOwnerChanged")]


def scenario_monitor_names(out):
    """Item 5: the order of the names' signals, when a connection that owns
    two names becomes a monitor, and (the other way round) disconnects."""
    watcher = Raw()
    add_match(watcher, "type='signal',member='NameOwnerChanged'")
    for what in ("BecomeMonitor", "disconnect"):
        a = Raw()
        for name in (IFACE + ".First", IFACE + ".Second"):
            a.wait_reply(a.call(D, P, I, "RequestName", "su", (name, 0)))
        drain(a, 0.1)
        drain(watcher, 0.1)
        if what == "BecomeMonitor":
            a.send_raw(marshal(METHOD_CALL, a.next_serial(), {
                FIELD_PATH: P, FIELD_INTERFACE: I + ".Monitoring",
                FIELD_MEMBER: "BecomeMonitor", FIELD_DESTINATION: D}, "asu",
                body=struct.pack("<II", 0, 0)))
            got = [m for m in drain(a)[0] if m[3].get(FIELD_DESTINATION) == a.name]
            out["names when a monitor: it got"] = names_seen(got, a.name)
        a.close()
        out["names when a %s: others saw" % what.lower()] = names_seen(
            drain(watcher)[0], a.name)
    watcher.close()


def recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise EOFError
        got += k
    return bytes(buf)


def scenario_128_mib(out):
    """Item 7: a call of exactly 128 MiB, two byte arrays (an array is at most
    64 MiB), read by the receiver without rawclient's buffer (a bytes += per
    64 KiB would be quadratic)."""
    recv = Raw()
    a = Raw()
    drain(recv, 0.1)
    assert not recv.buf
    fields = {FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: "Big",
              FIELD_DESTINATION: recv.name}
    head = len(marshal(METHOD_CALL, 1, fields, "ayay", body=bytes(8)))
    first = 64 * MiB - 8
    n = 128 * MiB - head - first
    body = struct.pack("<I", first) + b"y" * first + struct.pack("<I", n) + b"x" * n
    # Bounded as a hang only: under valgrind the bus takes seconds over it.
    a.sock.settimeout(120 * time_factor())
    a.sock.sendall(marshal(METHOD_CALL, a.next_serial(), fields, "ayay", body=body))
    del body
    recv.sock.settimeout(120 * time_factor())
    try:
        fixed = recv_exact(recv.sock, 16)
        blen, _, flen = struct.unpack_from("<III", fixed, 4)
        total = ((16 + flen + 7) & ~7) + blen
        rest = recv_exact(recv.sock, total - 16)
        out["128 MiB: the receiver got bytes"] = total
        out["128 MiB: body intact"] = blen == first + n + 8 and rest.endswith(b"x" * 64)
    except (OSError, EOFError) as e:
        out["128 MiB: the receiver got bytes"] = "failed: %s" % e
    out["128 MiB: sender still connected"] = alive(a)
    a.close()
    recv.close()


def wire_cases(dest):
    """(what, bytes) of a call to @dest that expects no reply, each odd."""
    base = {FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: "Wire",
            FIELD_DESTINATION: dest}

    def call(body=b"", flags=1, serial=7, **fields):
        f = dict(base)
        f.update({FIELDS[k]: v for k, v in fields.items()})
        return marshal(METHOD_CALL, serial, f, flags=flags, body=body)

    u32 = struct.Struct("<I").pack
    version2 = bytearray(call())
    version2[3] = 2
    return [
        ("protocol version 2", bytes(version2)),
        ("flag 0x80 set", call(flags=0x81)),
        ("ALLOW_INTERACTIVE_AUTHORIZATION", call(flags=0x5)),
        ("serial 0", call(serial=0)),
        ("body longer than its signature", call(u32(1) + u32(2), sig="u")),
        ("body without a signature", call(u32(0))),
        ("a string that is not UTF-8", call(u32(2) + b"\xff\xfe\0", sig="s")),
        ("a string with a NUL inside", call(u32(3) + b"a\0b\0", sig="s")),
        ("a boolean of 2", call(u32(2), sig="b")),
        ("33 nested arrays", call(u32(0), sig="a" * 33 + "y")),
        ("32 nested arrays", call(u32(0), sig="a" * 32 + "y")),
        ("padding not zero", call(b"\1\1\0\0" + u32(5), sig="yu")),
        ("an object path '//'", call(u32(2) + b"//\0", sig="o")),
        ("a signature value '('", call(b"\1(\0", sig="g")),
        ("a variant of an empty signature", call(b"\0\0", sig="v")),
        ("a dict with a variant key", call(u32(0) + bytes(4), sig="a{vs}")),
        ("an array of u of 3 bytes", call(u32(3) + bytes(3), sig="au")),
        ("a path ending in '/'", call(path="/a/")),
        ("an interface of one element", call(interface="nodots")),
        ("a member with a dot", call(member="a.b")),
        ("UNIX_FDS 1 without fds", call(unix_fds=1)),
        ("an error name of one element", marshal(ERROR, 7, {
            FIELD_ERROR_NAME: "nodots", FIELD_REPLY_SERIAL: 1, FIELD_DESTINATION: dest})),
        ("REPLY_SERIAL 0", marshal(METHOD_RETURN, 7, {FIELD_REPLY_SERIAL: 0,
                                                      FIELD_DESTINATION: dest})),
    ]


FIELDS = {"path": FIELD_PATH, "interface": FIELD_INTERFACE, "member": FIELD_MEMBER,
          "sig": FIELD_SIGNATURE, "unix_fds": FIELD_UNIX_FDS}


def scenario_wire(out):
    """Our own sweep: each message on a new connection; what the receiver
    got ([type, flags, member]) and whether the sender stays."""
    recv = Raw()
    drain(recv, 0.1)
    for what, data in wire_cases(recv.name):
        a = Raw()
        drain(a, 0.05)
        try:
            a.send_raw(data)
        except OSError:
            pass
        out["wire: %s: delivered" % what] = [[m[0], m[1], m[3].get(FIELD_MEMBER)]
                                             for m in drain(recv, 0.15)[0]]
        out["wire: %s: sender stays" % what] = alive(a)
        a.close()
    recv.close()


def scenario_new_service_and_reload(out):
    """Item 9: how often ActivatableServicesChanged comes."""
    a = Raw()
    add_match(a, "type='signal',member='ActivatableServicesChanged'")
    drain(a, 0.1)
    with open(os.path.join(os.environ["EDGES_SERVICE_DIR"], "org.bus1.Test.Edges.service"),
              "w") as f:
        f.write("[D-BUS Service]\nName=org.bus1.Test.Edges\nExec=/bin/false\n")
    a.call(D, P, I, "ReloadConfig")
    # Counted: dbus-daemon's watch and the call race, the order varies.
    got = [brief(m) for m in drain(a, 1.0)[0]]
    out["a new service file and ReloadConfig: signals, replies"] = [
        got.count(["signal", "ActivatableServicesChanged"]), got.count(["return", None])]
    a.close()


def scenarios(path):
    out = {}
    scenario_unknown_type(out)
    scenario_fds_refused(out)
    scenario_activation_environment(out)
    scenario_monitor_names(out)
    if not os.environ.get("PARITY_WRAPPED"):
        scenario_128_mib(out)
    scenario_new_service_and_reload(out)
    scenario_wire(out)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    return 0


# --------------------------------------------------- what dbus-daemon 1.14 does

UNKNOWN = [["error", AD, "Message bus will not accept messages of unknown type\n"]]
NOT_SUPPORTED = ["error", I + ".Error.NotSupported"]

EXPECTED = {
    "unknown type to a peer: sender got": UNKNOWN,
    "unknown type to a peer: sender still connected": True,
    "unknown type to a peer: the peer got": [],
    "unknown type to the bus: sender got": UNKNOWN,
    "unknown type to the bus: sender still connected": True,
    "unknown type to the bus: the peer got": [],
    "unknown type without destination: sender got": [],
    "unknown type without destination: sender still connected": True,
    "unknown type without destination: the peer got": [],
    "unknown type before Hello: sender got": UNKNOWN + ["none"],
    "unknown type before Hello: then Hello": "return",
    "fd to a no-fd client: signal: sender got": [NOT_SUPPORTED],
    "fd to a no-fd client: call: sender got": [NOT_SUPPORTED],
    "fd to a no-fd client: the receiver got": [],
    "fd to a no-fd client: reply: replier got": [NOT_SUPPORTED],
    "fd to a no-fd client: reply: the caller got": [],
    "fd to a no-fd client: both still connected": True,
    "UpdateActivationEnvironment, a key with '='": ["return", None],
    "UpdateActivationEnvironment, an empty key": ["return", None],
    "UpdateActivationEnvironment, a plain key": ["return", None],
    "names when a monitor: it got": [["NameLost", "UNIQUE"],
                                     ["NameLost", IFACE + ".First"],
                                     ["NameLost", IFACE + ".Second"]],
    "names when a becomemonitor: others saw": [["NameOwnerChanged", "UNIQUE", "UNIQUE", ""],
                                               ["NameOwnerChanged", IFACE + ".First", "UNIQUE", ""],
                                               ["NameOwnerChanged", IFACE + ".Second", "UNIQUE", ""]],
    "names when a disconnect: others saw": [["NameOwnerChanged", IFACE + ".Second", "UNIQUE", ""],
                                            ["NameOwnerChanged", IFACE + ".First", "UNIQUE", ""],
                                            ["NameOwnerChanged", "UNIQUE", "UNIQUE", ""]],
    # 128 MiB and the SENDER ":1.N" the bus adds (16 bytes for a name of 4 characters)
    "128 MiB: the receiver got bytes": 134217744,
    "128 MiB: body intact": True,
    "128 MiB: sender still connected": True,
}

# The wire: what dbus-daemon delivers ([type, flags, member]); every other
# case closes the sender and delivers nothing.
WIRE_DELIVERED = {"flag 0x80 set": [[METHOD_CALL, 0x81, "Wire"]],
                  "ALLOW_INTERACTIVE_AUTHORIZATION": [[METHOD_CALL, 0x5, "Wire"]],
                  "32 nested arrays": [[METHOD_CALL, 0x1, "Wire"]]}
for _what, _ in wire_cases(":1.0"):
    EXPECTED["wire: %s: delivered" % _what] = WIRE_DELIVERED.get(_what, [])
    EXPECTED["wire: %s: sender stays" % _what] = _what in WIRE_DELIVERED

# Where bus1-broker differs on purpose: key -> (bus1-broker, dbus-daemon).
DELIBERATE = {
    "a new service file and ReloadConfig: signals, replies": ([1, 1], [2, 1]),
}

# ------------------------------------------------------------------- driver


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--scenarios":
        return scenarios(sys.argv[2])
    results = {}
    unmeasured = set()
    for label, binary, override in parity.buses(sys.argv[1]):
        with tempfile.TemporaryDirectory(prefix="bus1-edges.") as tmp:
            conf = os.path.join(tmp, "bus.conf")
            services = os.path.join(tmp, "services")
            os.mkdir(services)
            with open(conf, "w") as f:
                f.write(CONFIG.replace("</busconfig>", "<servicedir>%s</servicedir>\n</busconfig>"
                                       % services))
            env = {"EDGES_SERVICE_DIR": services}
            if override != binary:
                # Under run-under-valgrind.sh's wrapper 128 MiB take a minute
                # to copy; the plain run of the integration suite has them.
                print("not run under %s: the 128 MiB message" % override)
                unmeasured = {k for k in EXPECTED if k.startswith("128 MiB")}
            results[label] = parity.run_scenarios(__file__, binary, override, conf,
                                                  os.path.join(tmp, "out.json"), env=env)
    return 1 if parity.compare(results, EXPECTED, DELIBERATE, unmeasured) else 0


if __name__ == "__main__":
    sys.exit(main())
