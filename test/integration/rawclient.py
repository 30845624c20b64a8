# SPDX-License-Identifier: LGPL-2.1-or-later
"""A raw D-Bus client over a unix socket, for tests that need to misbehave
(garbage, oversized messages, fd floods, never reading) or to control the
SASL negotiation. Little-endian only; bodies of 's', 'u' and 'h' values."""

import array
import os
import socket
import struct

from timefactor import time_factor

# The default bound of a send or a wait: it only catches a bus that hangs, so a slow machine
# (valgrind beside qemu guests) stretches it.
TIMEOUT = 5.0 * time_factor()

FIELD_PATH, FIELD_INTERFACE, FIELD_MEMBER, FIELD_ERROR_NAME = 1, 2, 3, 4
FIELD_REPLY_SERIAL, FIELD_DESTINATION, FIELD_SENDER, FIELD_SIGNATURE = 5, 6, 7, 8
FIELD_UNIX_FDS = 9
FIELD_TYPES = {1: "o", 2: "s", 3: "s", 4: "s", 5: "u", 6: "s", 7: "s", 8: "g", 9: "u"}
METHOD_CALL, METHOD_RETURN, ERROR, SIGNAL = 1, 2, 3, 4


def socket_path(address):
    for entry in address.split(";"):
        if not entry.startswith("unix:"):
            continue
        kv = dict(p.split("=", 1) for p in entry[5:].split(","))
        if "path" in kv:
            return kv["path"]
        if "abstract" in kv:
            return "\0" + kv["abstract"]
    raise ValueError("no unix path in " + address)


def session_config(*elements):
    """A session bus configuration whose default policy allows everything
    (sending, owning, eavesdropping), with @elements (<listen>, <limit>, ...)
    after its <type>."""
    inner = "".join("  %s\n" % e for e in elements if e)
    return ('<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"\n'
            ' "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">\n'
            "<busconfig>\n  <type>session</type>\n" + inner +
            '  <policy context="default">\n'
            '    <allow send_destination="*" eavesdrop="true"/>\n'
            '    <allow eavesdrop="true"/>\n'
            '    <allow own="*"/>\n'
            "  </policy>\n</busconfig>\n")


def _pad(buf, align):
    while len(buf) % align:
        buf.append(0)


def _put(buf, t, v):
    if t in "s o":
        _pad(buf, 4)
        b = v.encode()
        buf += struct.pack("<I", len(b)) + b + b"\0"
    elif t == "g":
        b = v.encode()
        buf += struct.pack("<B", len(b)) + b + b"\0"
    elif t in "uh":
        _pad(buf, 4)
        buf += struct.pack("<I", v)
    elif t == "i":
        _pad(buf, 4)
        buf += struct.pack("<i", v)
    else:
        raise ValueError(t)


def crc32c(data, crc=0):
    """CRC-32C (util/crc32c.h), bit by bit: for the crash journal's few
    bytes a test writes (test_fdstore.py, fuzz/make-journal-seeds.py)."""
    crc ^= 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def marshal(mtype, serial, fields, sig="", args=(), flags=0, body=None):
    """Build a message. @fields maps FIELD_* to values, or is a list of
    (FIELD_*, value) pairs written in its order (a field may appear twice);
    SIGNATURE is added."""
    if body is None:
        b = bytearray()
        for t, v in zip(sig, args):
            _put(b, t, v)
        body = bytes(b)
    if isinstance(fields, dict):
        fields = dict(fields)
        if sig:
            fields[FIELD_SIGNATURE] = sig
        pairs = sorted(fields.items())
    else:
        pairs = list(fields) + ([(FIELD_SIGNATURE, sig)] if sig else [])
    h = bytearray(b"l" + bytes([mtype, flags, 1]) + struct.pack("<II", len(body), serial))
    fa = bytearray()
    for code, value in pairs:
        _pad(fa, 8)
        t = FIELD_TYPES[code]
        fa.append(code)
        fa += bytes([1]) + t.encode() + b"\0"
        # value alignment is relative to the message start (offset 16 + len(fa))
        tmp = bytearray(16 + len(fa))
        _put(tmp, t, value)
        fa += tmp[16 + len(fa):]
    h += struct.pack("<I", len(fa)) + fa
    _pad(h, 8)
    return bytes(h) + body


def _get_str(data, pos):
    pos = (pos + 3) & ~3
    n = struct.unpack_from("<I", data, pos)[0]
    return data[pos + 4:pos + 4 + n].decode(), pos + 4 + n + 1


def parse(data):
    """Parse a little- or big-endian message: (type, flags, serial, fields, body)."""
    e = "<" if data[0:1] == b"l" else ">"
    mtype, flags = data[1], data[2]
    blen, serial, flen = struct.unpack_from(e + "III", data, 4)
    fields = {}
    pos = 16
    end = 16 + flen
    while pos < end:
        pos = (pos + 7) & ~7
        code = data[pos]
        slen = data[pos + 1]
        t = data[pos + 2:pos + 2 + slen].decode()
        pos += 3 + slen
        if t in "so":
            pos = (pos + 3) & ~3
            n = struct.unpack_from(e + "I", data, pos)[0]
            fields[code] = data[pos + 4:pos + 4 + n].decode()
            pos += 4 + n + 1
        elif t == "g":
            n = data[pos]
            fields[code] = data[pos + 1:pos + 1 + n].decode()
            pos += 2 + n
        elif t == "u":
            pos = (pos + 3) & ~3
            fields[code] = struct.unpack_from(e + "I", data, pos)[0]
            pos += 4
        else:
            raise ValueError("field type " + t)
    bstart = (end + 7) & ~7
    return mtype, flags, serial, fields, data[bstart:bstart + blen]


def body_strings(body):
    """All top-level strings of a body made only of strings."""
    out, pos = [], 0
    while pos < len(body):
        s, pos = _get_str(body, pos)
        out.append(s)
    return out


def body_string_array(body):
    """The strings of a body that is one array of strings ('as')."""
    n = struct.unpack_from("<I", body, 0)[0]
    out, pos = [], 4
    while pos < 4 + n:
        s, pos = _get_str(body, pos)
        out.append(s)
    return out


def sasl_auth_line(uid=None):
    """The first bytes of a client: the NUL byte and AUTH EXTERNAL with @uid
    (default: ours) as authorization identity, its decimal digits in hex."""
    uid = os.getuid() if uid is None else uid
    return b"\0AUTH EXTERNAL " + str(uid).encode().hex().encode() + b"\r\n"


def sasl_line(sock, buf=b""):
    """One SASL reply line from @sock (without "\r\n"), after what @buf holds
    already: (line, the bytes read after it). EOFError if the bus closed."""
    while b"\r\n" not in buf:
        d = sock.recv(4096)
        if not d:
            raise EOFError
        buf += d
    line, buf = buf.split(b"\r\n", 1)
    return line, buf


def sasl_authenticate(sock, negotiate_fds=True):
    """The plain handshake: AUTH EXTERNAL (our uid), NEGOTIATE_UNIX_FD if asked
    for, BEGIN. Returns (guid, bytes the bus sent after its last line); raises
    AssertionError if the bus refuses."""
    sock.sendall(sasl_auth_line())
    line, buf = sasl_line(sock)
    assert line.startswith(b"OK "), line
    guid = line[3:].decode()
    if negotiate_fds:
        sock.sendall(b"NEGOTIATE_UNIX_FD\r\n")
        line, buf = sasl_line(sock, buf)
        assert line == b"AGREE_UNIX_FD", "no fd passing"
    sock.sendall(b"BEGIN\r\n")
    return guid, buf


class HelloRefused(Exception):
    """The bus answered Hello with an error (its name is the argument)."""


class Raw:
    def __init__(self, address=None, negotiate_fds=True, hello=True, auth=True):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(socket_path(address or os.environ["DBUS_SESSION_BUS_ADDRESS"]))
        self.serial = 0
        self.buf = b""
        self.fds = []
        self.name = None
        if not auth:
            return
        self.guid, self.buf = sasl_authenticate(self.sock, negotiate_fds)
        if hello:
            self.call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                      "org.freedesktop.DBus", "Hello")
            reply = self.wait_reply(self.serial)
            if reply[0] == ERROR:
                raise HelloRefused(reply[3].get(FIELD_ERROR_NAME))
            self.name = body_strings(reply[4])[0]

    def send_raw(self, data, fds=()):
        # A send is bounded as a hang only: not by the last recv()'s short timeout, which the
        # socket keeps (a loaded machine's bus under valgrind was slower than a drain's 0.1 s
        # to take a 32 KiB call).
        self.sock.settimeout(TIMEOUT)
        if fds:
            self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                        array.array("i", fds))])
        else:
            self.sock.sendall(data)

    def next_serial(self):
        self.serial += 1
        return self.serial

    def call(self, dest, path, iface, member, sig="", args=(), flags=0, fds=()):
        fields = {FIELD_PATH: path, FIELD_MEMBER: member}
        if dest:
            fields[FIELD_DESTINATION] = dest
        if iface:
            fields[FIELD_INTERFACE] = iface
        if fds:
            fields[FIELD_UNIX_FDS] = len(fds)
        m = marshal(METHOD_CALL, self.next_serial(), fields, sig, args, flags)
        self.send_raw(m, fds)
        return self.serial

    def signal(self, path, iface, member, sig="", args=(), dest=None, fds=()):
        fields = {FIELD_PATH: path, FIELD_INTERFACE: iface, FIELD_MEMBER: member}
        if dest:
            fields[FIELD_DESTINATION] = dest
        if fds:
            fields[FIELD_UNIX_FDS] = len(fds)
        self.send_raw(marshal(SIGNAL, self.next_serial(), fields, sig, args), fds)
        return self.serial

    def recv(self, timeout=TIMEOUT):
        """Next message as parse() tuple; raises EOFError if the bus closed."""
        self.sock.settimeout(timeout)
        while True:
            if len(self.buf) >= 16:
                e = "<" if self.buf[0:1] == b"l" else ">"
                blen, _, flen = struct.unpack_from(e + "III", self.buf, 4)
                total = ((16 + flen + 7) & ~7) + blen
                if len(self.buf) >= total:
                    data, self.buf = self.buf[:total], self.buf[total:]
                    return parse(data)
            msg, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(253 * 4))
            for level, typ, cdata in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(cdata[:len(cdata) - len(cdata) % 4])
                    self.fds.extend(a)
            if not msg:
                raise EOFError("bus closed the connection")
            self.buf += msg

    def wait_reply(self, serial, timeout=TIMEOUT):
        while True:
            m = self.recv(timeout)
            if m[0] in (METHOD_RETURN, ERROR) and m[3].get(FIELD_REPLY_SERIAL) == serial:
                return m

    def is_closed(self, timeout=TIMEOUT):
        """True once the bus closed the connection (drains pending input)."""
        try:
            while True:
                self.recv(timeout)
        except EOFError:
            return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


# ------------------------------------------------- what a misbehaving test reads


def next_msg(raw, timeout):
    """The next message, or "none" (nothing within @timeout), or "closed"."""
    try:
        return raw.recv(timeout)
    except socket.timeout:
        return "none"
    except (EOFError, ConnectionResetError, BrokenPipeError):
        return "closed"


def drain(raw, timeout=0.3):
    """Every message until @timeout of silence: (messages, "none" or "closed")."""
    out = []
    while True:
        m = next_msg(raw, timeout)
        if isinstance(m, str):
            return out, m
        out.append(m)


def alive(raw):
    """Whether the connection still works: GetId is answered."""
    try:
        s = raw.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                     "GetId")
        return raw.wait_reply(s, 3)[0] == METHOD_RETURN
    except (OSError, EOFError):
        return False
