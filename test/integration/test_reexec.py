# SPDX-License-Identifier: LGPL-2.1-or-later
"""SIGUSR2 re-executes bus1-broker in place (broker/reexec.h). Cases:

  refusal    a state version the new program cannot read, a binary that
             exits at once, a binary that does not exist: refused and
             logged, same pid, clients served, no "resumed"; twice
  sasl       a client in SASL: the re-exec waits for it (new clients wait
             in the backlog), then happens
  activation a pending activation (its service not up yet) with a call and
             a StartServiceByName queued: carried, both answered after
  child      an activated service still running is carried; after it
             exits the new process reaps it (no zombie)
  gdbus      a GDBus connection calls before, between and after 10
             re-execs on one connection: never closed, same unique name

  test_reexec.py BUS_BINARY     (run by /usr/bin/python3: gi for GDBus)
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rawclient  # noqa: E402

DBUS = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")

CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%(dir)s/bus</listen>
  <servicedir>%(dir)s/services</servicedir>
  <limit name="auth_timeout">%(auth_timeout)d</limit>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""

# An activatable service: waits for its gate file, then owns its name and
# answers Ping (a string) until Quit.
SERVICE = """import os, sys, time
sys.path.insert(0, %(here)r)
import rawclient
gate = %(gate)r
while gate and not os.path.exists(gate):
    time.sleep(0.02)
c = rawclient.Raw(os.environ["DBUS_STARTER_ADDRESS"])
c.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
       "RequestName", "su", (%(name)r, 4))
while True:
    m = c.recv(60)
    if m[0] != rawclient.METHOD_CALL:
        continue
    member = m[3].get(rawclient.FIELD_MEMBER)
    reply = rawclient.marshal(rawclient.METHOD_RETURN, c.next_serial(),
                              {rawclient.FIELD_REPLY_SERIAL: m[2],
                               rawclient.FIELD_DESTINATION: m[3][rawclient.FIELD_SENDER]},
                              "s", ("pong %%d" %% os.getpid(),))
    c.send_raw(reply)
    if member == "Quit":
        break
"""

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


class Bus:
    def __init__(self, binary, tmp, env=None, auth_timeout=5000):
        self.dir = tmp
        os.makedirs(os.path.join(tmp, "services"), exist_ok=True)
        conf = os.path.join(tmp, "bus.conf")
        with open(conf, "w") as f:
            f.write(CONFIG % {"dir": tmp, "auth_timeout": auth_timeout})
        self.log_path = os.path.join(tmp, "bus.log")
        self.log_file = open(self.log_path, "w")
        e = dict(os.environ)
        e.pop("DBUS_SESSION_BUS_ADDRESS", None)
        e.update(env or {})
        self.proc = subprocess.Popen([binary, "--config-file=" + conf, "--nofork",
                                      "--print-address=1"], stdout=subprocess.PIPE,
                                     stderr=self.log_file, env=e, text=True)
        self.address = self.proc.stdout.readline().strip()
        self.pid = self.proc.pid

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_log(self, text, count=1, timeout=15):
        end = time.time() + timeout
        while time.time() < end:
            if self.log().count(text) >= count:
                return True
            time.sleep(0.01)
        return False

    def service(self, name, gate=None):
        script = os.path.join(self.dir, name + ".py")
        with open(script, "w") as f:
            f.write(SERVICE % {"here": HERE, "gate": gate, "name": name})
        with open(os.path.join(self.dir, "services", name + ".service"), "w") as f:
            f.write("[D-BUS Service]\nName=%s\nExec=/usr/bin/python3 %s\n" % (name, script))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = None
        self.log_file.close()
        return rc


def call(c, member, sig="", args=(), timeout=5):
    return c.wait_reply(c.call(*DBUS, member, sig, args), timeout)


def get_id(c):
    return rawclient.body_strings(call(c, "GetId")[4])[0]


def case_refusal(binary, tmp):
    for what, env, expect in (
            ("state version", {"BUS1_BROKER_STATE_VERSION": "999"}, "--check-state exited with status 1"),
            ("binary exits", {"BUS1_BROKER_REEXEC": "/bin/false"}, "exited with status 1"),
            ("no binary", {"BUS1_BROKER_REEXEC": tmp + "/none"}, "exited with status 127")):
        sub = os.path.join(tmp, what.replace(" ", "-"))
        os.mkdir(sub)
        bus = Bus(binary, sub, env)
        c = rawclient.Raw(bus.address)
        guid = get_id(c)
        for i in (1, 2):
            os.kill(bus.pid, signal.SIGUSR2)
            check(bus.wait_log("re-exec refused", i), "%s: refused (%d)" % (what, i))
            check(get_id(c) == guid, "%s: the client is still served (%d)" % (what, i))
        log = bus.log()
        check(expect in log, "%s: the reason is logged (%r)" % (what, expect))
        check("resumed" not in log and bus.proc.poll() is None, "%s: same process, no resumed" % what)
        d = rawclient.Raw(bus.address)
        check(d.name == ":1.1", "%s: a new client connects (%s)" % (what, d.name))
        c.close()
        d.close()
        check(bus.stop() == 0, "%s: exit 0 on SIGTERM" % what)


def case_sasl(binary, tmp):
    bus = Bus(binary, tmp)
    c = rawclient.Raw(bus.address)
    half = rawclient.Raw(bus.address, auth=False)
    half.sock.sendall(rawclient.sasl_auth_line())
    line, _ = rawclient.sasl_line(half.sock)
    check(line.startswith(b"OK "), "sasl: the client is between OK and BEGIN")
    guid = line[3:].decode()
    os.kill(bus.pid, signal.SIGUSR2)
    check(bus.wait_log("re-exec: waiting for 1 client to finish authenticating"),
          "sasl: the re-exec waits")
    # A client connecting meanwhile is accepted later, by the new program.
    late = subprocess.Popen(["/usr/bin/python3", "-c",
                             "import sys; sys.path.insert(0, %r); import rawclient; "
                             "print(rawclient.Raw(%r).name)" % (HERE, bus.address)],
                            stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    check("resumed" not in bus.log() and late.poll() is None,
          "sasl: nothing happens while the client authenticates")
    half.sock.sendall(b"BEGIN\r\n")
    half.call(*DBUS, "Hello")
    check(bus.wait_log("re-exec: resumed"), "sasl: then the re-exec happens")
    m = half.wait_reply(1)
    check(m[0] == rawclient.METHOD_RETURN, "sasl: its Hello is answered")
    out, _ = late.communicate(timeout=10)
    check(out.strip().startswith(":1."), "sasl: the client that waited in the backlog connects")
    check(get_id(c) == guid, "sasl: GetId unchanged")
    c.close()
    half.close()
    check(bus.stop() == 0, "sasl: exit 0 on SIGTERM")


def case_activation(binary, tmp):
    bus = Bus(binary, tmp)
    gate = os.path.join(tmp, "gate")
    bus.service("com.example.Slow", gate)
    c = rawclient.Raw(bus.address)
    d = rawclient.Raw(bus.address)
    ping = c.call("com.example.Slow", "/", "com.example.Slow", "Ping")
    start = d.call(*DBUS, "StartServiceByName", "su", ("com.example.Slow", 0))
    check(bus.wait_log("Activating service name='com.example.Slow'"), "activation: pending")
    os.kill(bus.pid, signal.SIGUSR2)
    check(bus.wait_log("re-exec: resumed"), "activation: re-executed while pending")
    open(gate, "w").close()
    m = c.wait_reply(ping, 15)
    check(m[0] == rawclient.METHOD_RETURN and rawclient.body_strings(m[4])[0].startswith("pong"),
          "activation: the queued call reaches the service")
    m = d.wait_reply(start, 15)
    check(m[0] == rawclient.METHOD_RETURN and m[4][:4] == b"\x01\0\0\0",
          "activation: StartServiceByName answers SUCCESS")
    m = c.wait_reply(c.call("com.example.Slow", "/", "com.example.Slow", "Quit"))
    check(m[0] == rawclient.METHOD_RETURN, "activation: the service quits")
    return bus, c, d


def case_child(binary, tmp):
    bus, c, d = case_activation(binary, tmp)
    # The service of the activation above quit; start it again and re-exec under it.
    for _ in range(500):
        if call(c, "NameHasOwner", "s", ("com.example.Slow",))[4][:1] == b"\0":
            break
        time.sleep(0.01)
    ping = c.call("com.example.Slow", "/", "com.example.Slow", "Ping")
    m = c.wait_reply(ping, 15)
    pid = int(rawclient.body_strings(m[4])[0].split()[1])
    with open("/proc/%d/status" % pid) as f:
        ppid = [int(x.split()[1]) for x in f if x.startswith("PPid:")][0]
    check(ppid == bus.pid, "child: the service is the bus's child")
    os.kill(bus.pid, signal.SIGUSR2)
    check(bus.wait_log("re-exec: resumed", 2), "child: re-executed with the service running")
    m = c.wait_reply(c.call("com.example.Slow", "/", "com.example.Slow", "Quit"))
    check(m[0] == rawclient.METHOD_RETURN, "child: the service still answers")
    gone = False
    for _ in range(300):
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            gone = True
            break
        time.sleep(0.01)
    check(gone, "child: the new process reaps the service (last state %s)" %
          ("gone" if gone else state))
    c.close()
    d.close()
    check(bus.stop() == 0, "child: exit 0 on SIGTERM")


def case_gdbus(binary, tmp):
    try:
        from gi.repository import Gio, GLib
    except ImportError:
        check(False, "gdbus: python3-gi is needed (run by /usr/bin/python3)")
        return
    bus = Bus(binary, tmp)
    flags = (Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT |
             Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION)
    conn = Gio.DBusConnection.new_for_address_sync(bus.address, flags, None, None)
    name = conn.get_unique_name()

    def gid():
        v = conn.call_sync(*DBUS, "GetId", None, GLib.VariantType("(s)"),
                           Gio.DBusCallFlags.NONE, 5000, None)
        return v.unpack()[0]

    guid = gid()
    ok = True
    for i in range(10):
        os.kill(bus.pid, signal.SIGUSR2)
        ok &= gid() == guid    # may be in flight across the switch
        ok &= bus.wait_log("re-exec: resumed", i + 1)
        ok &= gid() == guid
    check(ok, "gdbus: GetId answered before, during and after 10 re-execs")
    check(not conn.is_closed() and conn.get_unique_name() == name,
          "gdbus: the connection never closed, same unique name")
    conn.close_sync(None)
    check(bus.stop() == 0, "gdbus: exit 0 on SIGTERM")


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="bus1-reexec.") as tmp:
        for name, fn in (("refusal", case_refusal), ("sasl", case_sasl),
                         ("child", case_child), ("gdbus", case_gdbus)):
            print("# " + name)
            sub = os.path.join(tmp, name)
            os.mkdir(sub)
            t0 = time.time()
            try:
                fn(binary, sub)
            except Exception as e:
                import traceback
                traceback.print_exc()
                failures.append("%s: %r" % (name, e))
            print("  (%.2f s)" % (time.time() - t0))
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("all re-exec checks passed")


if __name__ == "__main__":
    main()
