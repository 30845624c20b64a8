# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real `systemd --user` manager for the tests that run the shipped user
units (test_systemd_user.py, test_a11y_bus.py).

The manager runs in a private mount namespace (enter_namespace(): unshare -m)
whose /run/systemd is a new tmpfs holding an empty system/ directory, which
is all `systemd --user` needs to believe the machine was booted with
systemd; its $XDG_RUNTIME_DIR, $HOME and unit directory are a temporary
directory. The unit directory holds the built user bus1-broker.service,
with one drop-in: ExecStart= is the shipped command line with this build's
binary, --config-file=TEST (a private, hermetic configuration) in place of
--session, and without --syslog-only, so that the bus' log lines land in a
file (StandardError=), and the test's own dbus.socket: what dbus-user-session
ships (ListenStream=%t/bus), so the machine's packages do not matter.
Nothing is switched on: a test enables bus1-broker.service as a user would.
"""

import os
import pty
import shutil
import signal
import subprocess
import sys
import threading
import time

import rawclient

SYSTEMD = "/lib/systemd/systemd"
UNIT = "bus1-broker.service"
# What dbus-user-session's user dbus.socket says (the session bus' socket and
# the address in the manager's environment).
DBUS_SOCKET = """[Unit]
Description=D-Bus User Message Bus Socket

[Socket]
ListenStream=%t/bus
ExecStartPost=-/bin/systemctl --user set-environment DBUS_SESSION_BUS_ADDRESS=unix:path=%t/bus
"""


# The checks of the test that uses the manager: "ok   WHAT" or "FAIL WHAT".
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


class Fatal(Exception):
    pass


def enter_namespace(script, argv):
    """Re-run @script in a private mount namespace with an /run/systemd of
    its own (returns there; exits 77 where that cannot be had)."""
    if os.environ.get("BUS1_SYSTEMD_TEST_NS") != "1":
        if os.geteuid() != 0 or not os.access(SYSTEMD, os.X_OK) or not shutil.which("unshare"):
            print("SKIP: needs root, unshare and %s" % SYSTEMD)
            sys.exit(77)
        os.environ["BUS1_SYSTEMD_TEST_NS"] = "1"
        os.execvp("unshare", ["unshare", "-m", "--propagation", "private", sys.executable,
                              os.path.abspath(script)] + argv)
    os.makedirs("/run/systemd", exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run/systemd"],
                   check=True)
    os.mkdir("/run/systemd/system")
    # What PID 1 makes for InaccessiblePaths= (mounted over what a unit must not see).
    os.mkdir("/run/systemd/inaccessible", 0o755)
    os.mkdir("/run/systemd/inaccessible/dir", 0)
    os.close(os.open("/run/systemd/inaccessible/reg", os.O_CREAT | os.O_WRONLY, 0))


def copy_console(master, path):
    with open(path, "ab", buffering=0) as out:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            out.write(data.replace(b"\r\n", b"\n"))


class UserManager:
    """A `systemd --user` with its runtime and unit directories in tmp."""

    def __init__(self, tmp, bus, unit_build, config=None):
        self.tmp = tmp
        self.run = os.path.join(tmp, "run")
        self.units = os.path.join(tmp, "config", "systemd", "user")
        self.bus_log = os.path.join(tmp, "bus.log")
        self.log = os.path.join(tmp, "systemd.log")
        os.makedirs(self.run, mode=0o700)
        os.makedirs(os.path.join(tmp, "home"))
        os.makedirs(self.units)
        self.config = os.path.join(tmp, "bus.conf")
        with open(self.config, "w") as f:
            f.write(config or rawclient.session_config())
        self.add_unit("dbus.socket", DBUS_SOCKET)
        shutil.copy(os.path.join(unit_build, "bus1-broker-user.service"),
                    os.path.join(self.units, UNIT))
        argv = self.shipped_exec_start()
        if not ("--session" in argv and "--address=systemd:" in argv and
                "--syslog-only" in argv):
            raise Fatal("the shipped ExecStart= is not the one this test adapts: %s" %
                        " ".join(argv))
        argv = [bus] + ["--config-file=" + self.config if a == "--session" else a
                        for a in argv[1:] if a != "--syslog-only"]
        # bus1-broker-alias from the build, not from the install's libexec
        alias = os.path.join(unit_build, "bus1-broker-alias")
        self.add_dropin(UNIT, "[Service]\nExecStart=\nExecStart=%s\nStandardError=append:%s\n"
                        "ExecStartPost=\nExecStartPost=-/bin/sh %s pin user\n"
                        "ExecStopPost=\nExecStopPost=-/bin/sh %s unpin user\n" % (
                            " ".join(argv), self.bus_log, alias, alias))
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.run, HOME=os.path.join(tmp, "home"),
                        XDG_CONFIG_HOME=os.path.join(tmp, "config"))
        for k in ("DBUS_SESSION_BUS_ADDRESS", "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID",
                  "LISTEN_FDNAMES", "FDSTORE", "SYSTEMD_EXEC_PID", "INVOCATION_ID", "DISPLAY",
                  "WAYLAND_DISPLAY", "AT_SPI_BUS_ADDRESS"):
            self.env.pop(k, None)
        self.address = "unix:path=" + os.path.join(self.run, "bus")
        self.proc = None
        self.pids = set()

    def add_unit(self, name, text):
        with open(os.path.join(self.units, name), "w") as f:
            f.write(text)

    def add_dropin(self, unit, text, name="test.conf"):
        os.makedirs(os.path.join(self.units, unit + ".d"), exist_ok=True)
        with open(os.path.join(self.units, unit + ".d", name), "w") as f:
            f.write(text)

    def shipped_exec_start(self):
        with open(os.path.join(self.units, UNIT)) as f:
            for line in f:
                if line.startswith("ExecStart="):
                    return line[len("ExecStart="):].split()
        raise Fatal("no ExecStart= in the shipped user unit")

    def start(self):
        # A user manager logs to /dev/console (reopened whatever its stderr,
        # and only if it is a terminal): in this mount namespace that is a
        # pseudo-terminal whose output a thread copies to the log.
        master, self.console = pty.openpty()
        subprocess.run(["mount", "--bind", os.ttyname(self.console), "/dev/console"],
                       check=True)
        threading.Thread(target=copy_console, args=(master, self.log), daemon=True).start()
        self.proc = subprocess.Popen([SYSTEMD, "--user", "--log-target=console",
                                      "--log-level=info"], env=self.env,
                                     stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        private = os.path.join(self.run, "systemd", "private")
        end = time.monotonic() + 30
        while not os.path.exists(private):
            if self.proc.poll() is not None:
                raise Fatal("systemd --user exited with %d: %s" % (self.proc.returncode,
                                                                   self.tail(self.log)))
            if time.monotonic() > end:
                raise Fatal("systemd --user did not come up: " + self.tail(self.log))
            time.sleep(0.05)

    def ctl(self, *args, check_rc=True):
        r = subprocess.run(["systemctl", "--user"] + list(args), env=self.env,
                           capture_output=True, text=True, timeout=60)
        if check_rc and r.returncode != 0:
            raise Fatal("systemctl --user %s: %d %s" % (" ".join(args), r.returncode,
                                                       r.stderr.strip()))
        return r

    def prop(self, name, unit=UNIT):
        return self.ctl("show", "-p", name, "--value", unit).stdout.strip()

    def main_pid(self, unit=UNIT):
        pid = int(self.prop("MainPID", unit) or 0)
        if pid:
            self.pids.add(pid)
        return pid

    def wait_active(self, not_pid=None, timeout=30, unit=UNIT):
        """Wait until the service runs (with another pid than not_pid)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid = self.main_pid(unit)
            if pid and pid != not_pid and self.prop("ActiveState", unit) == "active":
                return pid
            time.sleep(0.02)
        raise Fatal("%s did not become active: %s" % (unit, self.tail(self.bus_log)))

    def bus_lines(self, needle):
        try:
            with open(self.bus_log, errors="replace") as f:
                return [line.strip() for line in f if needle in line]
        except FileNotFoundError:
            return []

    @staticmethod
    def tail(path, n=15):
        try:
            with open(path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except FileNotFoundError:
            return "(no %s)" % path

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # Whatever the manager left behind (it stops its units on exit).
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
