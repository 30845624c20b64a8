#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bus1test-client.py - the two long-running system bus clients of scenario-restart.sh, speaking
# D-Bus over a raw unix socket (no binding: a dropped connection is an EOF we see ourselves).
#
#   bus1test-client.py holder LOG [DELAY]
#       Connects, owns org.bus1test.Holder and serves, on any path, the methods
#       org.bus1test.Holder.Ping (replies "pong" at once) and .Slow (replies "slow" after DELAY
#       seconds, default 4, while serving everything else meanwhile).
#   bus1test-client.py caller LOG
#       Connects and, on each SIGUSR1, calls org.bus1test.Holder.Slow and waits for the reply.
#
# Each appends one line per event to LOG (flushed at once), the first field being the uptime:
#   UPTIME unique :1.N         after Hello
#   UPTIME owner               (holder) primary owner of org.bus1test.Holder
#   UPTIME slow-received N     (holder) a Slow call arrived (N counts them)
#   UPTIME slow-replied N      (holder) its reply was sent
#   UPTIME slow-sent N         (caller) the N-th Slow call was sent
#   UPTIME slow-reply N OK     (caller) its reply arrived (OK = the string it carried)
#   UPTIME slow-error N NAME   (caller) an error reply arrived instead
#   UPTIME dropped REASON      the bus closed the connection (then the client exits 3)
# The holder exits 2 if it cannot own the name.

import os
import select
import signal
import socket
import struct
import sys
import time

NAME = "org.bus1test.Holder"
BUS = os.environ.get("BUS1TEST_BUS", "/run/dbus/system_bus_socket")

log_file = None


def uptime():
    with open("/proc/uptime") as f:
        return f.read().split()[0]


def log(*words):
    log_file.write(" ".join([uptime()] + [str(w) for w in words]) + "\n")
    log_file.flush()


def pad(buf, align):
    buf.extend(b"\0" * (-len(buf) % align))


def put_string(buf, s, sig=False):
    data = s.encode()
    if sig:
        buf.extend(struct.pack("<B", len(data)))
    else:
        pad(buf, 4)
        buf.extend(struct.pack("<I", len(data)))
    buf.extend(data + b"\0")


def marshal_body(signature, args):
    body = bytearray()
    for code, value in zip(signature, args):
        if code in "so":
            put_string(body, value)
        elif code == "u":
            pad(body, 4)
            body.extend(struct.pack("<I", value))
        else:
            raise ValueError("unsupported type " + code)
    return body


class Conn:
    # Message types and header fields of the D-Bus specification.
    CALL, RETURN, ERROR, SIGNAL = 1, 2, 3, 4
    F_PATH, F_IFACE, F_MEMBER, F_ERROR, F_REPLY, F_DEST, F_SENDER, F_SIG = range(1, 9)

    def __init__(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(BUS)
        self.sock.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() +
                          b"\r\n")
        line = b""
        while not line.endswith(b"\r\n"):
            chunk = self.sock.recv(256)
            if not chunk:
                raise EOFError("closed during authentication")
            line += chunk
        if not line.startswith(b"OK "):
            raise EOFError("authentication refused: %r" % line)
        self.sock.sendall(b"BEGIN\r\n")
        self.serial = 0
        self.rbuf = bytearray()
        self.unique = None

    def send(self, mtype, fields, signature="", args=(), flags=0):
        self.serial += 1
        body = marshal_body(signature, args)
        if signature:
            fields = fields + [(self.F_SIG, "g", signature)]
        hdr = bytearray(b"l" + struct.pack("<BBBII", mtype, flags, 1, len(body), self.serial))
        arr = bytearray()
        for code, sig, value in fields:
            pad(arr, 8)
            arr.extend(struct.pack("<B", code))
            put_string(arr, sig, sig=True)
            if sig == "u":
                pad(arr, 4)
                arr.extend(struct.pack("<I", value))
            else:
                put_string(arr, value, sig=(sig == "g"))
        hdr.extend(struct.pack("<I", len(arr)))
        hdr.extend(arr)
        pad(hdr, 8)
        self.sock.sendall(bytes(hdr + body))
        return self.serial

    def call(self, dest, path, iface, member, signature="", args=()):
        return self.send(self.CALL, [(self.F_PATH, "o", path), (self.F_IFACE, "s", iface),
                                     (self.F_MEMBER, "s", member), (self.F_DEST, "s", dest)],
                         signature, args)

    def reply(self, msg, signature="", args=()):
        fields = [(self.F_REPLY, "u", msg["serial"])]
        if msg.get(self.F_SENDER):
            fields.append((self.F_DEST, "s", msg[self.F_SENDER]))
        return self.send(self.RETURN, fields, signature, args)

    def error(self, msg, name, text):
        fields = [(self.F_REPLY, "u", msg["serial"]), (self.F_ERROR, "s", name)]
        if msg.get(self.F_SENDER):
            fields.append((self.F_DEST, "s", msg[self.F_SENDER]))
        return self.send(self.ERROR, fields, "s", [text])

    def fill(self):
        """Read what the socket has; EOFError when the bus closed it."""
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise EOFError("connection closed by the bus")
        self.rbuf.extend(chunk)

    def next_message(self):
        """One complete message from the buffer, or None."""
        b = self.rbuf
        if len(b) < 16:
            return None
        if b[0:1] != b"l":
            raise EOFError("big-endian message, not supported")
        mtype, flags, _, blen, serial, alen = struct.unpack_from("<BBBIII", b, 1)
        hlen = 16 + alen + (-(16 + alen) % 8)
        if len(b) < hlen + blen:
            return None
        msg = {"type": mtype, "serial": serial}
        pos = 16
        while pos < 16 + alen:
            pos += -pos % 8
            code = b[pos]
            slen = b[pos + 1]
            sig = b[pos + 2:pos + 2 + slen].decode()
            pos += 3 + slen
            value, pos = self.read_value(b, pos, sig)
            msg[code] = value
        body = bytes(b[hlen:hlen + blen])
        del b[:hlen + blen]
        msg["args"] = []
        pos = 0
        for code in msg.get(self.F_SIG, ""):
            value, pos = self.read_value(body, pos, code)
            msg["args"].append(value)
        return msg

    @staticmethod
    def read_value(b, pos, sig):
        if sig in ("s", "o"):
            pos += -pos % 4
            (n,) = struct.unpack_from("<I", b, pos)
            return bytes(b[pos + 4:pos + 4 + n]).decode(), pos + 5 + n
        if sig == "g":
            n = b[pos]
            return bytes(b[pos + 1:pos + 1 + n]).decode(), pos + 2 + n
        if sig == "u":
            pos += -pos % 4
            return struct.unpack_from("<I", b, pos)[0], pos + 4
        if sig == "b":
            pos += -pos % 4
            return bool(struct.unpack_from("<I", b, pos)[0]), pos + 4
        # A type these clients never need: stop parsing the rest of this body.
        return None, len(b)

    def wait_reply(self, serial):
        while True:
            msg = self.next_message()
            if msg is None:
                self.fill()
                continue
            if msg["type"] in (self.RETURN, self.ERROR) and msg.get(self.F_REPLY) == serial:
                return msg

    def hello(self):
        msg = self.wait_reply(self.call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                        "org.freedesktop.DBus", "Hello"))
        self.unique = msg["args"][0]
        return self.unique


def holder(delay):
    conn = Conn()
    log("unique", conn.hello())
    msg = conn.wait_reply(conn.call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                    "org.freedesktop.DBus", "RequestName", "su", [NAME, 4]))
    if msg["type"] != Conn.RETURN or msg["args"] != [1]:
        log("not-owner", msg.get(Conn.F_ERROR, msg["args"]))
        return 2
    log("owner")
    pending = []  # (deadline, message, number)
    slow_count = 0
    while True:
        while True:
            msg = conn.next_message()
            if msg is None:
                break
            if msg["type"] != Conn.CALL:
                continue
            member = msg.get(Conn.F_MEMBER)
            if member == "Ping":
                conn.reply(msg, "s", ["pong"])
            elif member == "Slow":
                slow_count += 1
                log("slow-received", slow_count)
                pending.append((time.monotonic() + delay, msg, slow_count))
            else:
                conn.error(msg, "org.freedesktop.DBus.Error.UnknownMethod",
                           "no method %s here" % member)
        now = time.monotonic()
        for item in [p for p in pending if p[0] <= now]:
            pending.remove(item)
            conn.reply(item[1], "s", ["slow"])
            log("slow-replied", item[2])
        timeout = min([p[0] for p in pending], default=now + 60) - now
        ready, _, _ = select.select([conn.sock], [], [], max(timeout, 0))
        if ready:
            conn.fill()


def caller():
    requests = []
    signal.signal(signal.SIGUSR1, lambda *_: requests.append(1))
    conn = Conn()
    log("unique", conn.hello())
    waiting = {}  # serial -> number
    count = 0
    while True:
        while requests:
            requests.pop()
            count += 1
            serial = conn.call(NAME, "/org/bus1test", NAME, "Slow")
            waiting[serial] = count
            log("slow-sent", count)
        while True:
            msg = conn.next_message()
            if msg is None:
                break
            number = waiting.pop(msg.get(Conn.F_REPLY), None)
            if number is None:
                continue
            if msg["type"] == Conn.RETURN:
                log("slow-reply", number, msg["args"][0] if msg["args"] else "")
            elif msg["type"] == Conn.ERROR:
                log("slow-error", number, msg.get(Conn.F_ERROR))
        # A signal interrupts nothing here (PEP 475): poll the request list often.
        ready, _, _ = select.select([conn.sock], [], [], 0.1)
        if ready:
            conn.fill()


def main():
    global log_file
    if len(sys.argv) < 3 or sys.argv[1] not in ("holder", "caller"):
        print("usage: bus1test-client.py holder|caller LOG [DELAY]", file=sys.stderr)
        return 64
    log_file = open(sys.argv[2], "a")
    try:
        if sys.argv[1] == "holder":
            return holder(float(sys.argv[3]) if len(sys.argv) > 3 else 4.0)
        return caller()
    except (EOFError, BrokenPipeError, ConnectionError) as e:
        log("dropped", str(e).replace(" ", "_"))
        return 3


if __name__ == "__main__":
    sys.exit(main())
