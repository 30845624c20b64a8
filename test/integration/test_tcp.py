# SPDX-License-Identifier: LGPL-2.1-or-later
"""tcp: and nonce-tcp: listen addresses and authentication on TCP, against
bus1-broker AND /usr/bin/dbus-daemon (when present): every check runs on
both and the outcomes that can be compared (mechanisms offered, replies,
errors, what happens to the keyring) must be the same.

Loopback only. Each bus gets a private HOME (its DBUS_COOKIE_SHA1 keyring,
~/.dbus-keyrings, which the clients of this test read too) and a private
TMPDIR (where nonce-tcp puts its nonce file).

  test_tcp.py BUS_BINARY
"""

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rawclient  # noqa: E402

E = "org.freedesktop.DBus.Error."
CONTEXT = "org_freedesktop_general"

def parse_address(entry):
    transport, _, rest = entry.partition(":")
    kv = {}
    for pair in rest.split(","):
        if pair:
            k, _, v = pair.partition("=")
            kv[k] = re.sub("%([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), v)
    return transport, kv


class Bus:
    """One bus (@binary) with a config made from @extra, its own HOME and TMPDIR."""

    def __init__(self, binary, extra="", home=None, expect_fail=False):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="bus1-tcp.")
        self.home = home or os.path.join(self.dir, "home")
        os.makedirs(self.home, exist_ok=True)
        self.tmp = os.path.join(self.dir, "tmp")
        os.mkdir(self.tmp)
        conf = os.path.join(self.dir, "bus.conf")
        with open(conf, "w") as f:
            f.write(rawclient.session_config(
                "<listen>tcp:host=127.0.0.1,port=0</listen>",
                "<listen>nonce-tcp:host=127.0.0.1,port=0</listen>",
                "<listen>unix:tmpdir=%s</listen>" % self.dir, extra))
        self.env = dict(os.environ, HOME=self.home, TMPDIR=self.tmp)
        self.env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        self.log = open(os.path.join(self.dir, "bus.log"), "w+")
        self.proc = subprocess.Popen([binary, "--config-file=" + conf, "--nofork",
                                      "--print-address=1"], stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=self.env)
        line = self.proc.stdout.readline().strip()
        if expect_fail:
            self.proc.wait(10)
            self.log.seek(0)
            self.error = self.log.read()
            self.failed = self.proc.returncode != 0 and not line
            return
        if not line:
            self.proc.wait(5)
            self.log.seek(0)
            raise AssertionError("%s did not start: %s" % (binary, self.log.read()))
        self.address = line
        self.entries = {}
        for e in line.split(";"):
            t, kv = parse_address(e)
            self.entries[t] = (e, kv)

    def addr(self, transport):
        return self.entries[transport][0]

    def kv(self, transport):
        return self.entries[transport][1]

    def stop(self):
        if self.proc.poll() is not None and not hasattr(self, "error"):
            self.log.seek(0)
            raise AssertionError("%s died during the test: %s" % (self.binary, self.log.read()))
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)
            # as run-with-bus.sh: a clean exit, no sanitizer report
            self.log.seek(0)
            text = self.log.read()
            if self.proc.returncode != 0 or re.search(
                    "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|"
                    "SUMMARY: UndefinedBehaviorSanitizer", text):
                raise AssertionError("%s exited with %d on SIGTERM: %s" %
                                     (self.binary, self.proc.returncode, text))
        self.log.close()

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def tcp(self, transport, send_nonce=True):
        kv = self.kv(transport)
        s = socket.create_connection((kv["host"], int(kv["port"])), timeout=5)
        if transport == "nonce-tcp" and send_nonce:
            with open(kv["noncefile"], "rb") as f:
                s.sendall(f.read())
        return s

    def run(self, cmd):
        """A client tool with this bus' HOME: ("ok", stdout) or (error, stderr)."""
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=self.env)
        if p.returncode == 0:
            return ("ok", p.stdout)
        return ("failed", p.stderr.strip())


def lines(sock, n=1, timeout=5):
    """Read @n SASL lines (or until EOF: then the list ends with None)."""
    sock.settimeout(timeout)
    buf = b""
    out = []
    while len(out) < n:
        while b"\r\n" not in buf:
            try:
                d = sock.recv(4096)
            except (ConnectionResetError, socket.timeout):
                d = b""
            if not d:
                out.append(None)
                return out
            buf += d
        line, buf = buf.split(b"\r\n", 1)
        out.append(line.decode())
    return out


def is_closed(sock, timeout=5):
    sock.settimeout(timeout)
    try:
        while True:
            d = sock.recv(4096)
            if not d:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def hexs(s):
    return s.encode().hex()


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def keyring_lines(home):
    path = os.path.join(home, ".dbus-keyrings", CONTEXT)
    with open(path) as f:
        return [l.split() for l in f.read().splitlines() if l.strip()]


def hello_over(sock):
    """BEGIN, then Hello; the unique name or None if the bus closed."""
    import rawclient as rc
    sock.sendall(b"BEGIN\r\n")
    sock.sendall(rc.marshal(rc.METHOD_CALL, 1, {
        rc.FIELD_PATH: "/org/freedesktop/DBus", rc.FIELD_MEMBER: "Hello",
        rc.FIELD_INTERFACE: "org.freedesktop.DBus",
        rc.FIELD_DESTINATION: "org.freedesktop.DBus"}))
    buf = b""
    sock.settimeout(5)
    while True:
        try:
            d = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            d = b""
        if not d:
            return None
        buf += d
        if len(buf) >= 16:
            import struct
            blen, _, flen = struct.unpack_from("<III", buf, 4)
            total = ((16 + flen + 7) & ~7) + blen
            if len(buf) >= total:
                m = rc.parse(buf[:total])
                if m[0] == rc.METHOD_RETURN:
                    return rc.body_strings(m[4])[0]
                return None


def checks(bin_path):
    """Every check on one daemon; returns [(what, outcome)] for the comparison."""
    out = []
    import dbus

    def record(what, got):
        out.append((what, got))

    bus = Bus(bin_path)
    try:
        # --- the printed addresses
        for t in ("tcp", "nonce-tcp"):
            check(t in bus.entries, "%s: no %s: address printed: %s" % (bin_path, t, bus.address))
            kv = bus.kv(t)
            check(kv.get("host") == "127.0.0.1", "%s: %s host: %r" % (bin_path, t, kv))
            check(kv.get("port", "0").isdigit() and int(kv["port"]) > 0,
                  "%s: %s: port=0 must print the real port: %r" % (bin_path, t, kv))
            check(kv.get("family") == "ipv4", "%s: %s family: %r" % (bin_path, t, kv))
            check(len(kv.get("guid", "")) == 32, "%s: %s guid: %r" % (bin_path, t, kv))
        nf = bus.kv("nonce-tcp").get("noncefile", "")
        check(nf.startswith(bus.tmp + "/dbus_nonce-") and nf.endswith("/nonce"),
              "%s: nonce file %r not in TMPDIR %s" % (bin_path, nf, bus.tmp))
        st = os.stat(nf)
        check(st.st_size == 16 and stat.S_IMODE(st.st_mode) == 0o600,
              "%s: nonce file size %d mode %o" % (bin_path, st.st_size, st.st_mode))
        check(stat.S_IMODE(os.stat(os.path.dirname(nf)).st_mode) == 0o700,
              "%s: nonce directory not 0700" % bin_path)
        record("address keys", sorted(bus.kv("tcp")) + sorted(bus.kv("nonce-tcp")))

        # --- mechanisms offered (AUTH without argument) on each transport
        for t in ("tcp", "nonce-tcp", "unix"):
            if t == "unix":
                s = socket.socket(socket.AF_UNIX)
                s.connect(bus.kv("unix")["path"])
            else:
                s = bus.tcp(t)
            s.sendall(b"\0AUTH\r\n")
            record("AUTH on " + t, lines(s))
            s.close()

        # --- EXTERNAL fails on TCP: no credentials, with or without a response
        for t in ("tcp", "nonce-tcp"):
            s = bus.tcp(t)
            s.sendall(rawclient.sasl_auth_line())
            got = lines(s)
            check(got[0] and got[0].startswith("REJECTED"),
                  "%s: EXTERNAL on %s: %r" % (bin_path, t, got))
            record("EXTERNAL with the uid on " + t, got)
            s.close()
            # An empty identity ("whatever the transport says"): the transport
            # says nothing. dbus-daemon answers OK and then drops the
            # connection at BEGIN; bus1-broker answers REJECTED. Either way no
            # connection comes of it.
            s = bus.tcp(t)
            s.sendall(b"\0AUTH EXTERNAL\r\n")
            got = lines(s)
            check(got == ["DATA"], "%s: AUTH EXTERNAL on %s: %r" % (bin_path, t, got))
            s.sendall(b"DATA\r\n")
            got = lines(s)
            name = hello_over(s)
            check(name is None, "%s: EXTERNAL with an empty identity on %s: %r, Hello: %r" %
                  (bin_path, t, got, name))
            record("EXTERNAL with an empty identity on %s: Hello" % t, name)
            s.close()

        # --- a wrong nonce (or none) is the end of the connection
        s = bus.tcp("nonce-tcp", send_nonce=False)
        s.sendall(b"\0" * 16 + b"\0AUTH\r\n")
        got = lines(s)
        record("wrong nonce", got)
        check(got == [None], "%s: a wrong nonce got %r" % (bin_path, got))
        s.close()

        # --- ANONYMOUS without <allow_anonymous/>: no connection
        s = bus.tcp("tcp")
        s.sendall(b"\0AUTH ANONYMOUS " + hexs("test").encode() + b"\r\n")
        lines(s)
        name = hello_over(s)
        record("ANONYMOUS not allowed: Hello", name)
        check(name is None, "%s: ANONYMOUS without allow_anonymous got %r" % (bin_path, name))
        s.close()

        # --- DBUS_COOKIE_SHA1 by the stock clients (the keyring is created)
        check(not os.path.exists(os.path.join(bus.home, ".dbus-keyrings")),
              "keyring exists before the first client")
        for t in ("tcp", "nonce-tcp"):
            got = bus.run(["dbus-send", "--bus=" + bus.addr(t), "--print-reply",
                           "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                           "org.freedesktop.DBus.ListNames"])
            check(got[0] == "ok" and '"org.freedesktop.DBus"' in got[1],
                  "%s: dbus-send over %s: %r" % (bin_path, t, got))
            record("dbus-send ListNames over " + t, got[0])
            got = bus.run(["gdbus", "call", "-a", bus.addr(t), "-d", "org.freedesktop.DBus",
                           "-o", "/org/freedesktop/DBus", "-m",
                           "org.freedesktop.DBus.ListNames"])
            check(got[0] == "ok" and "'org.freedesktop.DBus'" in got[1],
                  "%s: gdbus over %s: %r" % (bin_path, t, got))
            record("gdbus ListNames over " + t, got[0])
        kdir = os.path.join(bus.home, ".dbus-keyrings")
        check(stat.S_IMODE(os.stat(kdir).st_mode) == 0o700, "keyring dir mode")
        kfile = os.path.join(kdir, CONTEXT)
        check(stat.S_IMODE(os.stat(kfile).st_mode) == 0o600,
              "%s: keyring file mode %o" % (bin_path, os.stat(kfile).st_mode))
        kl = keyring_lines(bus.home)
        check(len(kl) == 1 and len(kl[0]) == 3 and kl[0][0].isdigit() and
              abs(int(kl[0][1]) - time.time()) < 60 and len(kl[0][2]) == 48,
              "%s: keyring contents %r" % (bin_path, kl))
        record("keyring after first clients", (len(kl), len(kl[0][2])))

        # python-dbus (libdbus) over TCP: the bus knows the uid, not the pid
        env_home = os.environ.get("HOME")
        os.environ["HOME"] = bus.home
        try:
            c = dbus.bus.BusConnection(bus.addr("tcp"))
            creds = c.call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                    "org.freedesktop.DBus", "GetConnectionCredentials", "s",
                                    (c.get_unique_name(),))
            check(int(creds["UnixUserID"]) == os.getuid(),
                  "%s: TCP peer credentials %r" % (bin_path, creds))
            check("ProcessFD" not in creds, "%s: a ProcessFD for a TCP peer" % bin_path)
            record("TCP UnixUserID", int(creds["UnixUserID"]))
            names = c.call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                    "org.freedesktop.DBus", "ListNames", "", ())
            check(c.get_unique_name() in names, "ListNames over TCP")
            c.close()
        finally:
            if env_home is None:
                os.environ.pop("HOME")
            else:
                os.environ["HOME"] = env_home

        # NEGOTIATE_UNIX_FD on TCP: refused
        s = bus.tcp("tcp")
        uidhex = hexs(str(os.getuid()))
        s.sendall(b"\0AUTH DBUS_COOKIE_SHA1 " + uidhex.encode() + b"\r\n")
        got = lines(s)
        check(got[0] and got[0].startswith("DATA "), "%s: cookie challenge %r" % (bin_path, got))
        ctx, cid, schal = bytes.fromhex(got[0][5:]).decode().split(" ")
        check(ctx == CONTEXT, "cookie context %r" % ctx)
        cookie = dict((l[0], l[2]) for l in keyring_lines(bus.home))[cid]
        import hashlib
        cchal = os.urandom(8).hex()
        h = hashlib.sha1(("%s:%s:%s" % (schal, cchal, cookie)).encode()).hexdigest()
        # a wrong answer first: rejected, then the right one
        s.sendall(b"DATA " + hexs(cchal + " " + "0" * 40).encode() + b"\r\n")
        bad = lines(s)
        check(bad[0] and bad[0].startswith("REJECTED"), "%s: wrong hash got %r" % (bin_path, bad))
        s.sendall(b"AUTH DBUS_COOKIE_SHA1 " + uidhex.encode() + b"\r\n")
        got = lines(s)
        ctx, cid, schal = bytes.fromhex(got[0][5:]).decode().split(" ")
        h = hashlib.sha1(("%s:%s:%s" % (schal, cchal, cookie)).encode()).hexdigest()
        s.sendall(b"DATA " + hexs(cchal + " " + h).encode() + b"\r\n")
        ok = lines(s)
        check(ok[0] and ok[0].startswith("OK "), "%s: right hash got %r" % (bin_path, ok))
        s.sendall(b"NEGOTIATE_UNIX_FD\r\n")
        nfd = lines(s)
        check(nfd[0] and nfd[0].startswith("ERROR"), "%s: NEGOTIATE_UNIX_FD on TCP: %r" %
              (bin_path, nfd))
        name = hello_over(s)
        check(name and name.startswith(":"), "%s: Hello after the cookie: %r" % (bin_path, name))
        record("raw cookie auth", (bad[0].split(" ")[0], ok[0].split(" ")[0],
                                   nfd[0].split(" ")[0]))
        s.close()

        # a user that is not the bus' own: refused
        s = bus.tcp("tcp")
        s.sendall(b"\0AUTH DBUS_COOKIE_SHA1 " + hexs("nobody").encode() + b"\r\n")
        got = lines(s)
        record("cookie for another user", got[0].split(" ")[0] if got[0] else got)
        s.close()

        # --- keyring lifetime: expired and far-future cookies dropped, an old one
        # kept but not offered: a new one is created next to it
        now = int(time.time())
        with open(kfile, "w") as f:
            f.write("11 %d %s\n" % (now - 600, "aa" * 24))   # expired (> 7 min)
            f.write("12 %d %s\n" % (now - 360, "bb" * 24))   # 6 min: kept, not offered
            f.write("13 %d %s\n" % (now + 1000, "cc" * 24))  # too far in the future
            f.write("garbage line\n")
        os.chmod(kfile, 0o600)
        got = bus.run(["dbus-send", "--bus=" + bus.addr("tcp"), "--print-reply",
                       "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                       "org.freedesktop.DBus.GetId"])
        check(got[0] == "ok", "%s: dbus-send with an old keyring: %r" % (bin_path, got))
        kl = keyring_lines(bus.home)
        ids = sorted(l[0] for l in kl)
        check("11" not in ids and "13" not in ids and "12" in ids and len(ids) == 2,
              "%s: keyring after renewal: %r" % (bin_path, kl))
        record("keyring renewal", (len(ids), "12" in ids))

        # --- a keyring directory others can read is not used (by either side)
        os.chmod(kdir, 0o755)
        with open(kfile, "w") as f:
            f.write("")
        got = bus.run(["dbus-send", "--bus=" + bus.addr("tcp"), "--print-reply",
                       "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                       "org.freedesktop.DBus.GetId"])
        record("keyring dir 0755", got[0])
        check(got[0] != "ok", "%s: cookie auth with a 0755 keyring dir succeeded" % bin_path)
        os.chmod(kdir, 0o700)
    finally:
        bus.stop()
    nonce_dir = os.path.dirname(bus.kv("nonce-tcp")["noncefile"])
    if bin_path != "/usr/bin/dbus-daemon":
        # dbus-daemon 1.14 leaves its nonce directory behind on SIGTERM; we do not
        check(not os.path.exists(nonce_dir), "%s: nonce directory left behind" % bin_path)
    bus.cleanup()

    # --- <allow_anonymous/>: ANONYMOUS connects over TCP; no uid is known
    bus = Bus(bin_path, "<allow_anonymous/>")
    try:
        s = bus.tcp("tcp")
        s.sendall(b"\0AUTH ANONYMOUS " + hexs("test").encode() + b"\r\n")
        got = lines(s)
        check(got[0] and got[0].startswith("OK "), "%s: ANONYMOUS allowed: %r" % (bin_path, got))
        name = hello_over(s)
        check(name and name.startswith(":"), "%s: anonymous Hello: %r" % (bin_path, name))
        got = bus.run(["dbus-send", "--bus=" + bus.addr("unix"), "--print-reply",
                       "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                       "org.freedesktop.DBus.GetConnectionUnixUser", "string:" + name])
        check(got[0] != "ok" and E + "Failed" in got[1],
              "%s: GetConnectionUnixUser of an anonymous peer: %r" % (bin_path, got))
        record("anonymous: GetConnectionUnixUser", got[1].split(":")[0])
        s.close()
    finally:
        bus.stop()
        bus.cleanup()

    # --- <auth> restricts the mechanisms; an unknown one is a start-up error
    bus = Bus(bin_path, "<auth>DBUS_COOKIE_SHA1</auth>")
    try:
        s = bus.tcp("tcp")
        s.sendall(b"\0AUTH\r\n")
        record("<auth>DBUS_COOKIE_SHA1</auth>: AUTH", lines(s))
        s.close()
    finally:
        bus.stop()
        bus.cleanup()
    bus = Bus(bin_path, "<auth>FROB</auth>", expect_fail=True)
    check(bus.failed, "%s: started with <auth>FROB</auth>" % bin_path)
    check('"FROB"' in bus.error, "%s: the error does not name FROB: %s" % (bin_path, bus.error))
    record("<auth>FROB</auth>", "fails")
    bus.stop()
    bus.cleanup()
    return out


def main():
    bus1 = os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1]
    binaries = [bus1]
    if os.path.exists("/usr/bin/dbus-daemon") and bus1 != "/usr/bin/dbus-daemon":
        binaries.append("/usr/bin/dbus-daemon")
    results = {}
    failed = 0
    for b in binaries:
        try:
            results[b] = checks(b)
            print("ok   %s" % b)
        except Exception:
            import traceback
            failed += 1
            print("FAIL %s" % b)
            traceback.print_exc()
    if failed:
        return 1
    if len(results) == 2:
        a, b = (results[x] for x in binaries)
        diffs = [(x, y) for x, y in zip(a, b) if x != y]
        if len(a) != len(b) or diffs:
            for x, y in diffs:
                print("DIFFERENT %s: %s %r, dbus-daemon %r" % (x[0], binaries[0], x[1], y[1]))
            return 1
        print("same outcome as dbus-daemon in %d checks" % len(a))
        for what, got in a:
            print("  %s: %r" % (what, got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
