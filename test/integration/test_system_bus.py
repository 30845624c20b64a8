# SPDX-License-Identifier: LGPL-2.1-or-later
"""`BUS --system` with this machine's own /usr/share/dbus-1/system.conf and
the system.d/ files its packages installed, on a private socket (--address,
--nopidfile, --nofork: nothing touches a real system bus). Needs root, as the
real system bus does: started as root, the bus drops to <user>messagebus</user>
and the launch helper is run as that user. Exit 77 (skip) when not root or
without system.conf.

Every check runs against bus1-broker AND /usr/bin/dbus-daemon (when present)
and must give the same answer (reply or error name) on both; for bus1-broker
the AccessDenied messages must also name the deciding rule (FILE:LINE).

  test_system_bus.py BUS_BINARY
"""

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

SYSTEM_CONF = "/usr/share/dbus-1/system.conf"
SYSTEM_D = "/usr/share/dbus-1/system.d"
E = "org.freedesktop.DBus.Error."


class Bus:
    def __init__(self, binary):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="bus1-system.")
        os.chmod(self.dir, 0o755)  # clients run as nobody too
        self.log = open(os.path.join(self.dir, "bus.log"), "w+")
        self.proc = subprocess.Popen(
            [binary, "--system", "--nofork", "--nopidfile",
             "--address=unix:path=" + os.path.join(self.dir, "sock"), "--print-address=1"],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.address = self.proc.stdout.readline().strip()
        if not self.address:
            self.proc.wait(5)
            self.log.seek(0)
            raise AssertionError("%s --system did not start: %s" % (binary, self.log.read()))

    def stop(self):
        if self.proc.poll() is not None:
            self.log.seek(0)
            raise AssertionError("%s died during the test: %s" % (self.binary, self.log.read()))
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def send(self, *args, user=None, timeout=20):
        """dbus-send --print-reply (a new connection: Hello first). Returns
        ("ok", output), ("ERRORNAME", message) and the seconds it took."""
        cmd = ["dbus-send", "--bus=" + self.address, "--print-reply", "--reply-timeout=15000"]
        cmd += list(args)
        if user:
            cmd = ["runuser", "-u", user, "--"] + cmd
        start = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        took = time.monotonic() - start
        if p.returncode == 0:
            return ("ok", p.stdout), took
        line = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        if line.startswith("Error "):
            name, _, msg = line[len("Error "):].partition(": ")
            return (name, msg), took
        return ("dbus-send failed", p.stderr), took

    def driver(self, member, *args, user=None):
        return self.send("--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                         "org.freedesktop.DBus." + member, *args, user=user)[0]


def checks(bus, is_bus1):
    """Run every check on @bus; return a list of (what, outcome) for comparison."""
    out = []

    def record(what, got, want_name, rule_file=None):
        name, text = got
        if name != want_name:
            raise AssertionError("%s: %s: expected %s, got %s: %s" %
                                 (bus.binary, what, want_name, name, text))
        if is_bus1 and rule_file:
            # the rule that decided: "FILE:LINE: <deny ...>"
            if rule_file + ":" not in text or "<deny" not in text:
                raise AssertionError("%s: %s: AccessDenied does not name the rule (%s): %s" %
                                     (bus.binary, what, rule_file, text))
        out.append((what, name))

    # the bus runs as <user>messagebus</user>
    # (dbus-daemon prints its address before it changes user: wait a little)
    mb = pwd.getpwnam("messagebus").pw_uid
    for _ in range(100):
        uid = os.stat("/proc/%d" % bus.proc.pid).st_uid
        if uid == mb:
            break
        time.sleep(0.02)
    if uid != mb:
        raise AssertionError("%s runs as uid %d, not messagebus (%d)" % (bus.binary, uid, mb))

    # <allow user="*"/>: anyone connects; the driver answers everyone
    record("GetId as root", bus.driver("GetId"), "ok")
    record("GetId as nobody", bus.driver("GetId", user="nobody"), "ok")
    got = bus.driver("ListActivatableNames")
    record("ListActivatableNames", got, "ok")
    # every Name= of the standard system service directory is activatable
    sdir = "/usr/share/dbus-1/system-services"
    for f in sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []:
        if not f.endswith(".service"):
            continue
        with open(os.path.join(sdir, f)) as fh:
            names = [l.strip()[5:] for l in fh if l.strip().startswith("Name=")]
        for n in names:
            if '"%s"' % n not in got[1]:
                raise AssertionError("%s: %s (%s) not in ListActivatableNames" %
                                     (bus.binary, n, f))
    # system.conf denies UpdateActivationEnvironment to everyone
    record("UpdateActivationEnvironment", bus.driver("UpdateActivationEnvironment",
                                                     "dict:string:string:A,B", user="nobody"),
           E + "AccessDenied", SYSTEM_CONF)

    # <deny own="*"/>: a name no system.d file lists
    record("own unlisted (root)", bus.driver("RequestName", "string:org.example.Unlisted",
                                             "uint32:0"), E + "AccessDenied", SYSTEM_CONF)
    record("own unlisted (nobody)", bus.driver("RequestName", "string:org.example.Unlisted",
                                               "uint32:0", user="nobody"),
           E + "AccessDenied", SYSTEM_CONF)

    # a name a system.d file lets root own, and nobody else
    hostname1 = os.path.join(SYSTEM_D, "org.freedesktop.hostname1.conf")
    if os.path.exists(hostname1):
        got = bus.driver("RequestName", "string:org.freedesktop.hostname1", "uint32:0")
        record("own hostname1 (root)", got, "ok")
        if "uint32 1" not in got[1]:
            raise AssertionError("%s: RequestName reply %s" % (bus.binary, got[1]))
        record("own hostname1 (nobody)",
               bus.driver("RequestName", "string:org.freedesktop.hostname1", "uint32:0",
                          user="nobody"), E + "AccessDenied", SYSTEM_CONF)

    # a method call to a connection (root's) that no rule lets nobody call
    import dbus
    root = dbus.bus.BusConnection(bus.address)
    got, _ = bus.send("--dest=" + root.get_unique_name(), "/", "org.example.Iface.Method",
                      user="nobody")
    root.close()
    record("call root's connection (nobody)", got, E + "AccessDenied", SYSTEM_CONF)

    # a name that nobody owns and no .service file provides
    got, _ = bus.send("--dest=org.example.Nobody", "/", "org.example.Iface.Method",
                      user="nobody")
    record("call unowned, not activatable", got, E + "ServiceUnknown")

    # an activatable name whose system.d file denies this call: denied before activation
    login1 = os.path.join(SYSTEM_D, "org.freedesktop.login1.conf")
    if os.path.exists(login1):
        got, _ = bus.send("--dest=org.freedesktop.login1", "/org/freedesktop/login1",
                          "org.example.Iface.Method", user="nobody")
        record("call login1 (nobody)", got, E + "AccessDenied", login1)

    # auto-start through the setuid launch helper: the service's Exec is
    # /bin/false here (systemd units), so the helper fails; the caller gets
    # the helper's error promptly, it does not hang
    timedate1 = "/usr/share/dbus-1/system-services/org.freedesktop.timedate1.service"
    helper = "/usr/lib/dbus-1.0/dbus-daemon-launch-helper"
    if os.path.exists(timedate1) and os.path.exists(helper):
        got, took = bus.send("--dest=org.freedesktop.timedate1", "/org/freedesktop/timedate1",
                             "org.freedesktop.DBus.Peer.Ping")
        if not got[0].startswith(E + "Spawn."):
            raise AssertionError("%s: auto-start: expected a Spawn.* error, got %s: %s" %
                                 (bus.binary, got[0], got[1]))
        if took > 10:
            raise AssertionError("%s: auto-start error took %.1f s" % (bus.binary, took))
        out.append(("auto-start timedate1", got[0]))
        got = bus.driver("StartServiceByName", "string:org.freedesktop.timedate1", "uint32:0")
        out.append(("StartServiceByName timedate1", got[0]))
    return out


def main():
    if os.getuid() != 0:
        print("not root: the system bus starts as root and drops to messagebus; skipped")
        return 77
    if not os.path.exists(SYSTEM_CONF):
        print("no %s: skipped" % SYSTEM_CONF)
        return 77
    try:
        pwd.getpwnam("messagebus")
        pwd.getpwnam("nobody")
    except KeyError:
        print("no messagebus or nobody user: skipped")
        return 77

    results = {}
    # run-under-valgrind.sh points BUS_BINARY_OVERRIDE at its valgrind wrapper
    bus1 = os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1]
    binaries = [bus1]
    if os.path.exists("/usr/bin/dbus-daemon"):
        binaries.append("/usr/bin/dbus-daemon")
    for binary in binaries:
        bus = Bus(binary)
        try:
            results[binary] = checks(bus, binary == bus1)
        finally:
            bus.stop()
        for what, name in results[binary]:
            print("%-14s %-34s %s" % (os.path.basename(binary), what, name))
    if len(results) == 2 and results[binaries[0]] != results[binaries[1]]:
        print("FAIL: bus1-broker and dbus-daemon differ")
        return 1
    print("system bus ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
