# SPDX-License-Identifier: LGPL-2.1-or-later
"""The accessibility bus when bus1-broker is the user's bus, against the
stock setup.

A `systemd --user` manager (systemd_user.py) runs each mode in turn:
  reference  the session bus is dbus-daemon (a dbus.service of the test's
             own, with the command line of dbus-user-session's) and the
             accessibility bus comes from at-spi2-core's own
             at-spi-dbus-bus.service, untouched;
  bus1       "systemctl --user enable bus1-broker.service", as a user
             switches: the Also= enables bus1-broker-at-spi.service, whose
             Alias= stands in for at-spi-dbus-bus.service.
In both, org.a11y.Bus is activated through systemd (SystemdService=, as the
stock org.a11y.Bus.service has it), on an Xvfb display a GTK 3 program shows
a window "bus1 a11y probe" with a button "Press me", and an at-spi client
(libatspi) finds the program in the desktop's tree, walks it down to the
button and presses it through the Action interface; the program must print
"clicked". Checked in each mode: who serves the accessibility bus (in bus1
mode this build's bus1-broker, by the inode of /proc/PID/exe of the pid the
bus reports for org.freedesktop.DBus; in the reference not), that the
registry daemon was activated on it, the tree and the click. The trees seen
in the two modes must be the same.

  test_a11y_bus.py BUS_BINARY UNIT_BUILD_DIR

Needs root, /lib/systemd/systemd, at-spi2-core, Xvfb, GTK 3 and libatspi
with their GObject introspection data (tools/deps.sh test); without them it
exits 77 (skipped), never passes.
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dbus  # noqa: E402
import dbus.bus  # noqa: E402
import rawclient  # noqa: E402
from systemd_user import UNIT, Fatal, UserManager, check, enter_namespace, failures  # noqa: E402

PYTHON = "/usr/bin/python3"
DRIVER = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")
LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
A11Y_UNIT = "bus1-broker-at-spi.service"
# As at-spi2-core's org.a11y.Bus.service: activated through systemd.
A11Y_ACTIVATION = """[D-BUS Service]
Name=org.a11y.Bus
Exec=/usr/libexec/at-spi-bus-launcher
SystemdService=at-spi-dbus-bus.service
"""
# dbus-user-session's dbus.service, with this test's configuration.
REFERENCE_UNIT = """[Unit]
Description=D-Bus User Message Bus (reference)
Requires=dbus.socket

[Service]
Type=notify
NotifyAccess=main
ExecStart=/usr/bin/dbus-daemon --config-file=%s --address=systemd: --nofork --nopidfile --systemd-activation
StandardError=append:%s
Slice=session.slice
"""

APP = r"""
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk

def clicked(_button):
    print("clicked", flush=True)
    Gtk.main_quit()

GLib.set_prgname("bus1-a11y-probe")
GLib.set_application_name("bus1-a11y-probe")
w = Gtk.Window(title="bus1 a11y probe")
b = Gtk.Button(label="Press me")
b.connect("clicked", clicked)
w.add(b)
w.show_all()
print("shown", flush=True)
GLib.timeout_add_seconds(60, Gtk.main_quit)
Gtk.main()
"""

CLIENT = r"""
import sys, time
import gi
gi.require_version("Atspi", "2.0")
from gi.repository import Atspi

def walk(acc, depth, out):
    out.append("%s%s '%s'" % ("  " * depth, acc.get_role_name(), acc.get_name()))
    for i in range(min(acc.get_child_count(), 20)):
        child = acc.get_child_at_index(i)
        if child is not None:
            walk(child, depth + 1, out)

def find(acc, role, name):
    if acc.get_role_name() == role and acc.get_name() == name:
        return acc
    for i in range(min(acc.get_child_count(), 20)):
        child = acc.get_child_at_index(i)
        hit = child is not None and find(child, role, name)
        if hit:
            return hit
    return None

desktop = Atspi.get_desktop(0)
app = None
end = time.monotonic() + 30
while app is None and time.monotonic() < end:
    for i in range(desktop.get_child_count()):
        a = desktop.get_child_at_index(i)
        if a is not None and a.get_name() == "bus1-a11y-probe":
            app = a
    if app is None:
        time.sleep(0.2)
if app is None:
    print("no application bus1-a11y-probe on the desktop", flush=True)
    sys.exit(1)
tree = []
walk(app, 0, tree)
for line in tree:
    print("tree " + line, flush=True)
button = find(app, "push button", "Press me")
if button is None:
    print("no push button 'Press me'", flush=True)
    sys.exit(1)
print("pressed %s" % button.do_action(0), flush=True)
"""

def start_xvfb(tmp):
    """An Xvfb on a free display; returns (process, ':N')."""
    r, w = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-nolisten", "tcp", "-screen", "0",
                             "640x480x24"], pass_fds=(w,), stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(tmp, "xvfb.log"), "ab"))
    os.close(w)
    with os.fdopen(r) as f:
        display = f.readline().strip()
    if not display:
        raise Fatal("Xvfb did not start: " + UserManager.tail(os.path.join(tmp, "xvfb.log")))
    return proc, ":" + display


def a11y_daemon(um):
    """The accessibility bus' address, the pid of the process serving it and
    whether the at-spi registry has its name there."""
    session = dbus.bus.BusConnection(um.address)
    address = session.call_blocking("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus",
                                    "GetAddress", "", [], timeout=30)
    a11y = dbus.bus.BusConnection(str(address))
    pid = a11y.call_blocking(*DRIVER, "GetConnectionUnixProcessID", "s",
                             ["org.freedesktop.DBus"])
    has_registry = a11y.call_blocking(*DRIVER, "NameHasOwner", "s", ["org.a11y.atspi.Registry"])
    a11y.close()
    session.close()
    return str(address), int(pid), bool(has_registry)


def run_mode(mode, bus, unit_build, tmp):
    services = os.path.join(tmp, "services")
    os.makedirs(services)
    with open(os.path.join(services, "org.a11y.Bus.service"), "w") as f:
        f.write(A11Y_ACTIVATION)
    # dbus-daemon wants a <listen> even when --address replaces it
    config = rawclient.session_config("<listen>unix:tmpdir=/tmp</listen>",
                                      "<servicedir>%s</servicedir>" % services)
    um = UserManager(os.path.join(tmp, "manager"), bus, unit_build, config=config)
    xvfb = app = None
    result = {}
    try:
        if mode == "reference":
            um.add_unit("dbus.service", REFERENCE_UNIT % (um.config, um.bus_log))
        else:
            shutil.copy(os.path.join(unit_build, A11Y_UNIT), os.path.join(um.units, A11Y_UNIT))
            # this build's bus at the launcher's dbus-daemon path
            um.add_dropin(A11Y_UNIT, "[Service]\nBindReadOnlyPaths=\n"
                          "BindReadOnlyPaths=%s:/usr/bin/dbus-daemon\n" % bus)
        xvfb, display = start_xvfb(tmp)
        um.start()
        um.ctl("set-environment", "DISPLAY=" + display)
        if mode == "bus1":
            um.ctl("enable", UNIT)
            alias = os.path.join(um.units, "at-spi-dbus-bus.service")
            check(os.path.realpath(alias) == os.path.realpath(os.path.join(um.units, A11Y_UNIT)),
                  "bus1: enabling bus1-broker.service made %s the user's "
                  "at-spi-dbus-bus.service" % A11Y_UNIT)
        um.ctl("start", "dbus.socket")
        env = dict(um.env, DISPLAY=display, DBUS_SESSION_BUS_ADDRESS=um.address)
        address, pid, has_registry = a11y_daemon(um)
        exe = os.stat("/proc/%d/exe" % pid)
        ours = os.stat(bus)
        served_by_us = (exe.st_dev, exe.st_ino) == (ours.st_dev, ours.st_ino)
        print("# %s: accessibility bus %s served by pid %d (%s)" % (
            mode, address, pid, os.readlink("/proc/%d/exe" % pid)), flush=True)
        check(served_by_us == (mode == "bus1"), "%s: the accessibility bus is %sthis build's "
              "bus1-broker" % (mode, "" if mode == "bus1" else "not "))
        launcher = um.main_pid("at-spi-dbus-bus.service")
        check(launcher and os.readlink("/proc/%d/exe" % launcher) == LAUNCHER,
              "%s: at-spi2-core's launcher serves org.a11y.Bus (pid %d)" % (mode, launcher))
        app = subprocess.Popen([PYTHON, "-c", APP], env=env, stdout=subprocess.PIPE, text=True,
                               stderr=open(os.path.join(tmp, "app.log"), "ab"))
        check(app.stdout.readline().strip() == "shown", "%s: the GTK program shows its "
              "window" % mode)
        r = subprocess.run([PYTHON, "-c", CLIENT], env=env, capture_output=True, text=True,
                           timeout=90)
        out = r.stdout.splitlines()
        for line in out:
            print("# %s: %s" % (mode, line), flush=True)
        result["tree"] = [line[5:] for line in out if line.startswith("tree ")]
        check(r.returncode == 0 and "pressed True" in out, "%s: the at-spi client found the "
              "program's button and pressed it%s" % (
                  mode, "" if r.returncode == 0 else " (%s)" % r.stderr.strip()[-300:]))
        try:
            said = app.stdout.readline().strip()
        except OSError:
            said = ""
        check(said == "clicked", "%s: the program saw the click (%r)" % (mode, said))
        # the registry was activated by then at the latest
        has_registry = a11y_daemon(um)[2]
        check(has_registry, "%s: the at-spi registry daemon was activated on the "
              "accessibility bus" % mode)
    except (Fatal, OSError, dbus.DBusException, subprocess.TimeoutExpired) as e:
        check(False, "%s: %s: %s" % (mode, type(e).__name__, e))
    finally:
        for p in (app, xvfb):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        um.stop()
        if failures:
            print("--- %s: systemd log\n%s" % (mode, um.tail(um.log, 40)))
            print("--- %s: bus log\n%s" % (mode, um.tail(um.bus_log, 20)))
    return result


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    bus = os.path.abspath(sys.argv[1])
    unit_build = os.path.abspath(sys.argv[2])
    for path in (LAUNCHER, "/usr/bin/dbus-daemon"):
        if not os.access(path, os.X_OK):
            print("SKIP: %s is not installed" % path)
            return 77
    if not shutil.which("Xvfb"):
        print("SKIP: Xvfb is not installed")
        return 77
    probe = subprocess.run([PYTHON, "-c", "import gi; gi.require_version('Gtk', '3.0'); "
                            "gi.require_version('Atspi', '2.0'); "
                            "from gi.repository import Gtk, Atspi"], capture_output=True)
    if probe.returncode != 0:
        print("SKIP: GTK 3 or libatspi introspection data missing")
        return 77
    enter_namespace(__file__, sys.argv[1:])
    tmp = tempfile.mkdtemp(prefix="bus1-a11y.")
    results = {}
    for mode in ("reference", "bus1"):
        results[mode] = run_mode(mode, bus, unit_build, os.path.join(tmp, mode))
    ref, ours = results["reference"].get("tree"), results["bus1"].get("tree")
    check(ref and ref == ours, "the same accessibility tree in both modes (%d and %d lines)" % (
        len(ref or []), len(ours or [])))
    if failures:
        print("(kept %s)" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
