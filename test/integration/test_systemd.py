# SPDX-License-Identifier: LGPL-2.1-or-later
"""bus1-broker under systemd, without systemd: this test plays the service
manager. It runs the ExecStart= line of the installed units (the binary
replaced by the one under test) with a listening socket passed as systemd does
(LISTEN_FDS/LISTEN_PID, fd 3, the "systemd:" address) and a NOTIFY_SOCKET it
reads, and checks:
  - the unit files: Type=notify, ExecStart with --address=systemd: and the
    flags Debian's dbus.service passes;
  - socket activation: clients connect through the passed socket, whose file
    the bus leaves alone at exit; "systemd:" without sockets is a clear error;
  - sd_notify: READY=1 once clients can connect, RELOADING=1 (with
    MONOTONIC_USEC) then READY=1 around SIGHUP and ReloadConfig (also when the
    new file is invalid), STOPPING=1 on SIGTERM;
  - journal logging: with JOURNAL_STREAM naming its stderr, lines carry "<N>"
    priorities for journald instead of the "bus1-broker[PID]: " tag, then the
    context of the session bus, "[session uid=UID pid=PID] ", as without it.

  test_systemd.py BUS_BINARY UNIT_DIR
"""

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# run-under-valgrind.sh points BUS_BINARY_OVERRIDE at its valgrind wrapper
BUS = os.path.abspath(os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1])
UNIT_DIR = sys.argv[2]


def fail(msg):
    raise AssertionError(msg)


def unit_exec_start(path, want_bus):
    """The [Service] section's ExecStart= of a unit file, as argv."""
    section, service = None, {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
            elif section == "Service" and "=" in line and not line.startswith("#"):
                k, _, v = line.partition("=")
                service[k] = v
    if service.get("Type") != "notify":
        fail("%s: Type=%s, not notify" % (path, service.get("Type")))
    argv = service["ExecStart"].split()
    if not argv[0].endswith("/bus1-broker"):
        fail("%s: ExecStart runs %s" % (path, argv[0]))
    for flag in (want_bus, "--address=systemd:", "--nofork", "--nopidfile",
                 "--systemd-activation"):
        if flag not in argv:
            fail("%s: ExecStart lacks %s: %s" % (path, flag, argv))
    return [BUS] + argv[1:]


class Manager:
    """Starts one bus the way systemd would, and reads its notifications."""

    def __init__(self, argv, stderr_path=None, journal=False):
        self.dir = tempfile.mkdtemp(prefix="bus1-systemd.")
        os.chmod(self.dir, 0o755)
        self.sock_path = os.path.join(self.dir, "bus")
        self.listen = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listen.bind(self.sock_path)
        os.chmod(self.sock_path, 0o777)
        self.listen.listen(16)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify_path = os.path.join(self.dir, "notify")
        self.notify.bind(self.notify_path)
        os.chmod(self.dir, 0o777)  # a bus that drops to messagebus notifies too
        os.chmod(self.notify_path, 0o777)
        self.notify.settimeout(10)
        env = dict(os.environ)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        env.update({"NOTIFY_SOCKET": self.notify_path, "LISTEN_FDS": "1",
                    "LISTEN_FDNAMES": "bus"})
        self.stderr = open(stderr_path or os.path.join(self.dir, "stderr"), "w+")
        if journal:
            st = os.fstat(self.stderr.fileno())
            env["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
        lfd = self.listen.fileno()
        env["LFD"] = str(lfd)
        # sh moves the socket to fd 3 and sets LISTEN_PID to its own pid, then
        # execs the bus (same pid), as systemd passes it
        script = ('[ "$LFD" = 3 ] || eval "exec 3<&$LFD $LFD<&-"; unset LFD; '
                  'LISTEN_PID=$$; export LISTEN_PID; exec "$@"')
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", script, "sh"] + argv,
            env=env, stderr=self.stderr, stdout=subprocess.DEVNULL, pass_fds=(lfd,))
        self.address = "unix:path=" + self.sock_path

    def expect(self, *keys):
        """Read notifications until one carries every KEY=VALUE in @keys
        (VALUE None: any value); return it as a dict."""
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                data = self.notify.recv(4096).decode()
            except socket.timeout:
                break
            fields = dict(l.partition("=")[::2] for l in data.split("\n") if l)
            if all(k in fields and (v is None or fields[k] == v) for k, v in keys):
                return fields
        fail("no notification with %s (bus log: %s)" % (keys, self.log()))

    def log(self):
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read()

    def call(self, member, *args):
        p = subprocess.run(["dbus-send", "--bus=" + self.address, "--print-reply",
                            "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                            "org.freedesktop.DBus." + member] + list(args),
                           capture_output=True, text=True, timeout=20)
        if p.returncode:
            fail("%s failed: %s (bus log: %s)" % (member, p.stderr, self.log()))
        return p.stdout

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.expect(("STOPPING", "1"))
        rc = self.proc.wait(10)
        if rc != 0:
            fail("exit status %d after SIGTERM: %s" % (rc, self.log()))
        if not os.path.exists(self.sock_path):
            fail("the bus removed systemd's socket file")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_unit(unit, want_bus):
    argv = unit_exec_start(os.path.join(UNIT_DIR, unit), want_bus)
    m = Manager(argv)
    try:
        ready = m.expect(("READY", "1"))
        if not ready.get("STATUS", "").startswith("Serving unix:path=" + m.sock_path):
            fail("%s: READY status %r" % (unit, ready.get("STATUS")))
        m.call("GetId")
        # SIGHUP (ExecReload=) and ReloadConfig: RELOADING=1 then READY=1
        m.proc.send_signal(signal.SIGHUP)
        rel = m.expect(("RELOADING", "1"), ("MONOTONIC_USEC", None))
        if int(rel["MONOTONIC_USEC"]) <= 0:
            fail("MONOTONIC_USEC %r" % rel["MONOTONIC_USEC"])
        m.expect(("READY", "1"))
        m.call("ReloadConfig")
        m.expect(("RELOADING", "1"))
        m.expect(("READY", "1"))
        m.call("GetId")
        m.stop()
    finally:
        m.close()
    print("ok   %s: socket activation, READY/RELOADING/STOPPING" % unit)


def context(m):
    """What follows the tag of a line of the session bus that @m runs (log.h)."""
    return "[session uid=%d pid=%d] " % (os.geteuid(), m.proc.pid)


def test_bad_reload_and_journal():
    d = tempfile.mkdtemp(prefix="bus1-systemd-conf.")
    conf = os.path.join(d, "bus.conf")

    def good_config():
        with open(conf, "w") as f:
            f.write('<busconfig><type>session</type><listen>unix:tmpdir=/tmp</listen>'
                    '<policy context="default"><allow send_destination="*"/>'
                    '<allow receive_sender="*"/><allow own="*"/></policy></busconfig>')

    try:
        good_config()
        m = Manager([BUS, "--config-file=" + conf, "--address=systemd:", "--nofork",
                     "--nosyslog"], journal=True)
        try:
            m.expect(("READY", "1"))
            with open(conf, "w") as f:
                f.write("<busconfig><broken")
            m.proc.send_signal(signal.SIGHUP)
            m.expect(("RELOADING", "1"))
            st = m.expect(("READY", "1"))
            if "failed" not in st.get("STATUS", ""):
                fail("status after a failed reload: %r" % st.get("STATUS"))
            m.call("GetId")  # still serving with the old configuration
            m.stop()
            lines = [l for l in m.log().splitlines() if l]
            if not lines:
                fail("nothing logged")
            for l in lines:
                if not re.match(r"<\d>%s" % re.escape(context(m)), l):
                    fail("journal line without priority and context: %r" % l)
            if not any(l.startswith("<4>") and "Unable to reload" in l for l in lines):
                fail("reload failure not logged at warning priority: %r" % lines)
        finally:
            m.close()
        # without JOURNAL_STREAM: "bus1-broker[PID]: [session uid=UID pid=PID] " lines
        good_config()
        m = Manager([BUS, "--config-file=" + conf, "--address=systemd:", "--nofork",
                     "--nosyslog"])
        try:
            m.expect(("READY", "1"))
            m.proc.send_signal(signal.SIGHUP)
            m.expect(("READY", "1"))
            m.stop()
            lines = [l for l in m.log().splitlines() if l]
            tag = "%s[%d]: " % (os.path.basename(sys.argv[1]), m.proc.pid)
            if not lines or not all(l.startswith(tag + context(m)) for l in lines):
                fail("stderr lines: %r" % lines)
        finally:
            m.close()
        # --syslog-only (the units' choice): nothing on stderr at all
        m = Manager([BUS, "--config-file=" + conf, "--address=systemd:", "--nofork",
                     "--syslog-only"], journal=True)
        try:
            m.expect(("READY", "1"))
            m.proc.send_signal(signal.SIGHUP)
            m.expect(("READY", "1"))
            m.stop()
            if m.log():
                fail("--syslog-only wrote to stderr: %r" % m.log())
        finally:
            m.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("ok   failed reload keeps serving; journal priorities; --syslog-only")


def test_no_sockets():
    env = dict(os.environ)
    for k in ("LISTEN_FDS", "LISTEN_PID", "NOTIFY_SOCKET"):
        env.pop(k, None)
    p = subprocess.run([BUS, "--session", "--address=systemd:", "--nofork"], env=env,
                       capture_output=True, text=True, timeout=20)
    if p.returncode == 0 or "systemd passed no socket" not in p.stderr:
        fail("systemd: without sockets: rc %d, %r" % (p.returncode, p.stderr))
    print("ok   systemd: without sockets is an error")


def main():
    run_unit("bus1-broker-user.service", "--session")
    if os.getuid() == 0:
        try:
            pwd.getpwnam("messagebus")
            have_mb = os.path.exists("/usr/share/dbus-1/system.conf")
        except KeyError:
            have_mb = False
        if have_mb:
            run_unit("bus1-broker.service", "--system")
        else:
            print("no messagebus user or system.conf: system unit not run")
    else:
        print("not root: system unit not run")
    test_bad_reload_and_journal()
    test_no_sockets()
    return 0


if __name__ == "__main__":
    sys.exit(main())
