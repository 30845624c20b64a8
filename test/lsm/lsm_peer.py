# SPDX-License-Identifier: LGPL-2.1-or-later
"""One client of the LSM matrix (lsm_matrix.py), run under the label of its
case (aa-exec -p PROFILE). It speaks raw D-Bus (test/integration/rawclient.py)
so that it needs nothing but python3.

  lsm_peer.py ADDRESS              commands on stdin, one JSON object a line,
                                   each answered by one JSON line on stdout,
                                   after {"ready": UNIQUE-NAME} (or, Hello
                                   refused, {"ready": null, "refused": ERROR})
  lsm_peer.py --before-hello ADDRESS  GetId to the driver before Hello, then
                                   Hello: one JSON line of their outcomes
  lsm_peer.py --activated NAME     an activated service: DBUS_STARTER_ADDRESS,
                                   owns NAME, answers every call until the bus
                                   goes away

Commands ({"op": ...}):
  own NAME                  RequestName(NAME, DO_NOT_QUEUE): "reply:CODE" or the error
  call DEST PATH IFACE MEMBER
                            "reply", the error name, or "timeout"
  emit PATH IFACE MEMBER    a broadcast signal: "sent"
  match RULE                AddMatch: "reply" or the error
  monitor                   BecomeMonitor([]): "reply" or the error
  features                  the Features property of the bus
  direct                    "reply" (the direct path is a native client's: lsm-native)
  context NAME              GetConnectionSELinuxSecurityContext: the context, or the error
  seen                      calls and signals received since the last "seen",
                            each [type, path, interface, member]; calls are
                            answered with an empty reply as they arrive
"""

import json
import os
import struct
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from rawclient import (ERROR, HelloRefused, FIELD_ERROR_NAME, FIELD_INTERFACE, FIELD_MEMBER,  # noqa: E402
                       FIELD_PATH, FIELD_REPLY_SERIAL, FIELD_DESTINATION, FIELD_SENDER,
                       METHOD_CALL, METHOD_RETURN, SIGNAL, Raw, body_string_array, marshal)
from timefactor import time_factor  # noqa: E402

# No case expects a timeout: the limit only catches a call that hangs. An activation in a TCG
# guest on a busy machine took more than 5 s; the bus's own reply timeout is 25 s. Stretched
# by the machine's slowness (BUS1_TIME_FACTOR, passed into the guest by run-guest.sh).
CALL_TIMEOUT = 25.0 * time_factor()

D, P, I = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
KIND = {METHOD_CALL: "call", METHOD_RETURN: "return", ERROR: "error", SIGNAL: "signal"}


class Peer:
    def __init__(self, address):
        self.raw = Raw(address)
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.replies = {}
        self.seen = []
        self.closed = False
        self.reader = threading.Thread(target=self.read_loop, daemon=True)
        self.reader.start()

    def read_loop(self):
        while True:
            try:
                m = self.raw.recv(timeout=None)
            except Exception:
                with self.cond:
                    self.closed = True
                    self.cond.notify_all()
                return
            mtype, fields = m[0], m[3]
            with self.cond:
                if mtype in (METHOD_RETURN, ERROR) and fields.get(FIELD_REPLY_SERIAL):
                    self.replies[fields[FIELD_REPLY_SERIAL]] = m
                    self.cond.notify_all()
                    continue
                # The driver's own signals (NameAcquired...) are not the cases'.
                # An eavesdropper records others' messages too: the point.
                if fields.get(FIELD_INTERFACE) != I:
                    self.seen.append([KIND.get(mtype, "?"), fields.get(FIELD_PATH),
                                      fields.get(FIELD_INTERFACE), fields.get(FIELD_MEMBER)])
                if mtype == METHOD_CALL and fields.get(FIELD_DESTINATION) in self.names():
                    reply = {FIELD_REPLY_SERIAL: m[2], FIELD_DESTINATION: fields.get(FIELD_SENDER)}
                    self.raw.send_raw(marshal(METHOD_RETURN, self.raw.next_serial(), reply))

    def names(self):
        return [self.raw.name] + getattr(self, "owned", [])

    def call(self, dest, path, iface, member, sig="", args=(), body=None, timeout=None):
        with self.cond:
            if body is None:
                serial = self.raw.call(dest, path, iface, member, sig, args)
            else:
                # A body rawclient cannot marshal (arrays), given as bytes.
                serial = self.raw.next_serial()
                fields = {FIELD_DESTINATION: dest, FIELD_PATH: path, FIELD_INTERFACE: iface,
                          FIELD_MEMBER: member}
                self.raw.send_raw(marshal(METHOD_CALL, serial, fields, sig, body=body))
            self.cond.wait_for(lambda: serial in self.replies or self.closed,
                               timeout or CALL_TIMEOUT)
            m = self.replies.pop(serial, None)
        if m is None:
            return "closed" if self.closed else "timeout", None
        if m[0] == ERROR:
            return m[3].get(FIELD_ERROR_NAME), m
        return "reply", m

    def do(self, cmd):
        op = cmd["op"]
        if op == "own":
            self.owned = getattr(self, "owned", []) + [cmd["name"]]
            r, m = self.call(D, P, I, "RequestName", "su", (cmd["name"], 4))
            if r == "reply":
                return "reply:%d" % struct.unpack_from("<I", m[4], 0)[0]
            return r
        if op == "call":
            return self.call(cmd["dest"], cmd["path"], cmd["iface"], cmd["member"])[0]
        if op == "emit":
            with self.lock:
                self.raw.signal(cmd["path"], cmd["iface"], cmd["member"])
            return "sent"
        if op == "match":
            return self.call(D, P, I, "AddMatch", "s", (cmd["rule"],))[0]
        if op == "monitor":
            # No match rules (an empty 'as'), no flags.
            return self.call(D, P, "org.freedesktop.DBus.Monitoring", "BecomeMonitor", "asu",
                             body=bytes(8))[0]
        if op == "features":
            r, m = self.call(D, P, "org.freedesktop.DBus.Properties", "Get", "ss",
                             (I, "Features"))
            if r != "reply":
                return r
            body = m[4]
            pos = 1 + body[0] + 1
            pos = (pos + 3) & ~3
            return sorted(body_string_array(body[pos:]))
        if op == "context":
            r, m = self.call(D, P, I, "GetConnectionSELinuxSecurityContext", "s",
                             (cmd["name"],))
            if r != "reply":
                return r
            n = struct.unpack_from("<I", m[4], 0)[0]
            return m[4][4:4 + n].decode(errors="replace")
        if op == "direct":
            return "reply"  # a socket client has no direct path: a no-op
        if op == "seen":
            # Let messages in flight arrive first: the bus answers a Ping
            # after everything it routed to us before it.
            self.call(D, P, "org.freedesktop.DBus.Peer", "Ping")
            with self.lock:
                out, self.seen = self.seen, []
            return out
        return "unknown op " + op


def serve_activated(name):
    peer = Peer(os.environ["DBUS_STARTER_ADDRESS"])
    peer.do({"op": "own", "name": name})
    peer.reader.join()


def before_hello(address):
    """GetId to the driver before Hello, then Hello: each one's outcome (an
    error's name, "reply", or "closed")."""
    raw = Raw(address, hello=False)
    out = {}
    for key, member in (("before_hello", "GetId"), ("then_hello", "Hello")):
        try:
            m = raw.wait_reply(raw.call(D, P, I, member), CALL_TIMEOUT)
            out[key] = m[3].get(FIELD_ERROR_NAME) if m[0] == ERROR else "reply"
        except (EOFError, OSError):
            out[key] = "closed"
    raw.close()
    return out


def main():
    if sys.argv[1] == "--activated":
        serve_activated(sys.argv[2])
        return
    if sys.argv[1] == "--before-hello":
        print(json.dumps(before_hello(sys.argv[2])), flush=True)
        return
    try:
        peer = Peer(sys.argv[1])
        print(json.dumps({"ready": peer.raw.name}), flush=True)
    except HelloRefused as e:
        # Refused at connect (an LSM denied Hello): the error's name.
        print(json.dumps({"ready": None, "refused": e.args[0]}), flush=True)
        return
    except Exception as e:
        print(json.dumps({"ready": None, "why": "%s: %s" % (type(e).__name__, e)}), flush=True)
        return
    for line in sys.stdin:
        print(json.dumps({"result": peer.do(json.loads(line))}), flush=True)


if __name__ == "__main__":
    main()
