# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the <policy> rules make of rejected messages, against
/usr/bin/dbus-daemon (issue 28's systematic pass): the same configuration and
clients on a bus of each program, and the same outcome for each case: the
error the sender gets (name and text, pids and unique names left out), what
the receivers and a monitor get, and the lines the bus logs (dbus-daemon logs
every rejected message that was addressed to its receiver, in the words of
the error).

Cases: a call denied by a send rule, one denied by the receiver's receive
rule, a unicast signal denied, a broadcast a subscriber may not receive (no
error for the sender; the monitor sees it), a call to the bus denied, an
error of the bus its receiver may not get, and a call to a full queue.
bus1-broker names the rule that decided after dbus-daemon's text ("; decided
by FILE:LINE: <rule>"); that addition is cut before comparing.

  test_policy_parity.py BUS1_BROKER
"""

import os
import re
import socket
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from rawclient import (ERROR, FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,  # noqa: E402
                       FIELD_MEMBER, FIELD_PATH, METHOD_CALL, Raw, body_strings, marshal)
from test_driver_parity import DAEMON, bus  # noqa: E402

D, P, I = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
IFACE = "org.bus1.Test.Policy"
CONFIG = """<busconfig>
  <type>session</type>
  %s
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
    <deny send_interface="org.bus1.Test.Policy" send_member="Forbidden"/>
    <deny receive_interface="org.bus1.Test.Policy" receive_member="Secret"/>
    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"
          send_member="ListActivatableNames"/>
    <deny receive_sender="org.freedesktop.DBus" receive_type="error"
          receive_requested_reply="true"
          receive_error="org.freedesktop.DBus.Error.NameHasNoOwner"/>
  </policy>
  <limit name="max_outgoing_bytes">65536</limit>
</busconfig>
"""


def normal(text):
    """@text without what differs from run to run or bus to bus."""
    text = text.split("; decided by ")[0]
    text = re.sub(r"pid=\d+", "pid=P", text)
    return re.sub(r":1\.\d+", ":1.N", text)


def drain(raw, timeout=0.3):
    out = []
    try:
        while True:
            out.append(raw.recv(timeout))
    except socket.timeout:
        return out
    except (EOFError, OSError):
        return out + ["closed"]


def brief(m):
    if m == "closed":
        return m
    if m[0] == ERROR:
        text = body_strings(m[4])[0] if m[4] else ""
        return ["error", m[3].get(FIELD_ERROR_NAME), normal(text)]
    return [{1: "call", 2: "return", 4: "signal"}[m[0]], m[3].get(FIELD_MEMBER)]


def cases(addr, out):
    a, b, s = Raw(addr), Raw(addr), Raw(addr)
    s.wait_reply(s.call(D, P, I, "AddMatch", "s", ("member='Secret'",)))
    mon = Raw(addr)
    mon.send_raw(marshal(METHOD_CALL, mon.next_serial(), {
        FIELD_PATH: P, FIELD_INTERFACE: "org.freedesktop.DBus.Monitoring",
        FIELD_MEMBER: "BecomeMonitor", FIELD_DESTINATION: D}, "asu",
        body=struct.pack("<II", 0, 0)))
    for c in (a, b, s, mon):
        drain(c, 0.1)

    def case(what, send):
        seen = send()
        seen = seen if isinstance(seen, list) else []
        out[what + ": the sender got"] = [brief(m) for m in drain(b)]
        out[what + ": the others got"] = [brief(m) for m in drain(a, 0.1) + drain(s, 0.1)]
        out[what + ": the monitor saw errors"] = [
            brief(m) for m in seen + drain(mon, 0.2) if m == "closed" or m[0] == ERROR]

    case("a call denied by a send rule", lambda: b.call(a.name, "/", IFACE, "Forbidden"))
    case("a call denied by a receive rule", lambda: b.call(a.name, "/", IFACE, "Secret"))
    case("a unicast signal denied", lambda: b.signal("/", IFACE, "Forbidden", dest=a.name))
    case("a broadcast its subscriber may not get", lambda: b.signal("/", IFACE, "Secret"))
    case("a call to the bus denied", lambda: b.call(D, P, I, "ListActivatableNames"))
    case("an error of the bus its receiver may not get",
         lambda: b.call(D, P, I, "GetNameOwner", "s", ("org.bus1.Missing",)))

    full = Raw(addr)
    drain(full, 0.1)
    body = struct.pack("<I", 32768) + b"x" * 32768

    def fill():
        # The monitor reads as it goes: its own queue must not fill up.
        seen = []
        for _ in range(16):
            b.send_raw(marshal(METHOD_CALL, b.next_serial(), {
                FIELD_PATH: "/", FIELD_INTERFACE: IFACE, FIELD_MEMBER: "Fill",
                FIELD_DESTINATION: full.name}, "ay", body=body))
            seen += drain(mon, 0.02)
        return seen

    case("calls to a full queue", fill)
    # How many calls fit depends on the kernel's socket buffers: the kinds only.
    for k in ("the sender got", "the monitor saw errors"):
        key = "calls to a full queue: " + k
        out[key] = sorted({repr(x) for x in out[key]})
    for c in (a, b, s, mon, full):
        c.close()


def run(binary):
    out = {}
    with tempfile.TemporaryDirectory(prefix="bus1-policy-parity.") as tmp:
        log = os.path.join(tmp, "bus.log")
        with bus(binary, tmp, "policy", config=CONFIG, log=log) as addr:
            cases(addr, out)
            time.sleep(0.3)
        with open(log) as f:
            lines = [normal(line[line.index("Rejected"):].rstrip("\n"))
                     for line in f if "Rejected" in line]
    out["logged"] = sorted(set(lines))
    out["logged lines, the full queue's left out"] = len(
        [x for x in lines if not x.startswith("Rejected: destination has a full")])
    return out


# What dbus-daemon 1.14 does, beyond the texts (compared bus against bus).
EXPECTED = {
    "a call denied by a send rule: the others got": [],
    "a call denied by a receive rule: the others got": [],
    "a unicast signal denied: the others got": [],
    "a broadcast its subscriber may not get: the sender got": [],
    "a broadcast its subscriber may not get: the others got": [],
    "an error of the bus its receiver may not get: the sender got": [],
}


def main():
    if not os.path.exists(DAEMON):
        print("no %s to compare with" % DAEMON)
        return 77
    got = run(os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1])
    ref = run(DAEMON)
    failed = 0
    for key in sorted(set(ref) | set(got)):
        ok = got.get(key) == ref.get(key) and EXPECTED.get(key, ref.get(key)) == ref.get(key)
        failed += not ok
        print("%-4s %s: %s" % ("ok" if ok else "DIFF", key, ref.get(key)))
        if not ok:
            print("     bus1-broker: %s" % (got.get(key),))
    print("FAIL" if failed else "bus1-broker and dbus-daemon agree on %d outcomes" % len(ref))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
