# SPDX-License-Identifier: LGPL-2.1-or-later
"""A sandbox for real (issue 29): an app run under bubblewrap with nothing of
the bus but its container socket, bound in as its session bus, filtered by
the bus itself (AddServer's Filter). Inside, a GDBus client (gdbus) and a
libdbus client (dbus-send) call a permitted service and a forbidden one and
list the names; outside, a portal-like service learns the caller's app id
from the bus alone (GetConnectionInstance, GetConnectionCredentials), with
no /proc read.

  test_container_sandbox.py BUS1_BROKER
"""

import os
import shutil
import subprocess
import sys
import tempfile

import dbus
import dbus.mainloop.glib
import dbus.service

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import glibloop  # noqa: E402
from test_driver_parity import bus  # noqa: E402

D, P = "org.freedesktop.DBus", "/org/freedesktop/DBus"
C1 = "org.freedesktop.DBus.Containers1"
failures = []

POLICY = ('<policy context="default"><allow send_destination="*"/>'
          '<allow receive_sender="*"/><allow own="*"/></policy>')

# What runs in the sandbox: one line per question, "what: answer".
APP = r"""
set -u
echo "socket of the bus itself: $(test -e "$HOST_SOCKET" && echo present || echo absent)"
out=$(gdbus call --session --dest org.example.Portal --object-path /org/example/Portal \
      --method org.example.Portal.WhoAmI 2>&1) && echo "gdbus WhoAmI: $out" \
      || echo "gdbus WhoAmI failed: $out"
out=$(gdbus call --session --dest org.example.Secret --object-path /org/example/Secret \
      --method org.example.Secret.Tell 2>&1) && echo "gdbus Secret: $out" \
      || echo "gdbus Secret failed: $out"
out=$(dbus-send --session --print-reply --dest=org.example.Secret /org/example/Secret \
      org.example.Secret.Tell 2>&1) && echo "dbus-send Secret: $out" \
      || echo "dbus-send Secret failed: $out"
out=$(dbus-send --session --print-reply --dest=org.example.Portal /org/example/Portal \
      org.example.Portal.WhoAmI 2>&1) && echo "dbus-send WhoAmI: $(echo $out | tr -d '\n')" \
      || echo "dbus-send WhoAmI failed: $out"
out=$(dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
      org.freedesktop.DBus.ListNames 2>&1) && echo "ListNames: $(echo $out | tr -d '\n')" \
      || echo "ListNames failed: $out"
"""


def check(ok, what):
    print("%-4s %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


class Portal(dbus.service.Object):
    """Tells a caller which app it is, from what the bus says of it."""

    def __init__(self, conn):
        super().__init__(conn, "/org/example/Portal")
        self.conn = conn
        self.asked = []

    @dbus.service.method("org.example.Portal", in_signature="", out_signature="ss",
                         sender_keyword="sender")
    def WhoAmI(self, sender=None):
        drv = self.conn.get_object(D, P)
        path, creds, ctype, name, metadata = dbus.Interface(drv, C1).GetConnectionInstance(
            sender)
        own = dbus.Interface(drv, D).GetConnectionCredentials(sender)
        self.asked.append((str(path), str(own.get(C1 + ".Instance", "")), str(ctype),
                           str(name), int(creds["UnixUserID"])))
        return str(metadata.get("app-id", "")), str(path)


class Secret(dbus.service.Object):
    def __init__(self, conn):
        super().__init__(conn, "/org/example/Secret")
        self.told = 0

    @dbus.service.method("org.example.Secret", in_signature="", out_signature="s")
    def Tell(self):
        self.told += 1
        return "the secret"


def run_app(sock, host_socket, tmp):
    """APP under bwrap with @sock as its session bus: its lines."""
    bwrap = ["bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
             "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
             "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev",
             "--tmpfs", "/tmp", "--dir", "/run/user/1000",
             "--bind", sock, "/run/user/1000/bus", "--ro-bind", "/etc", "/etc",
             "--unshare-all", "--die-with-parent", "--clearenv",
             "--setenv", "PATH", "/usr/bin:/bin",
             "--setenv", "DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus",
             "--setenv", "HOST_SOCKET", host_socket,
             "sh", "-c", APP]
    with open(os.path.join(tmp, "app.out"), "w+") as out:
        p = subprocess.Popen(bwrap, stdout=out, stderr=subprocess.STDOUT)
        # The services answer from this process' GLib loop while the app runs.
        glibloop.wait_for(lambda: p.poll() is not None, timeout=60, what="the sandboxed app")
        out.seek(0)
        text = out.read()
    print(text.rstrip())
    return dict(line.split(": ", 1) if ": " in line else (line, "")
                for line in text.splitlines())


def main():
    binary = sys.argv[1]
    for tool in ("bwrap", "gdbus", "dbus-send"):
        if not shutil.which(tool):
            print("FAIL %s is not installed (tools/deps.sh test installs it)" % tool)
            return 1
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    tmp = tempfile.mkdtemp(prefix="bus1-sandbox-")
    os.environ["XDG_RUNTIME_DIR"] = tmp
    with bus(binary, tmp, "bus", POLICY, args=["--containers"]) as address:
        host_socket = address.split("path=", 1)[1].split(",")[0]
        portal_conn = dbus.bus.BusConnection(address)
        portal_conn.request_name("org.example.Portal")
        portal = Portal(portal_conn)
        secret_conn = dbus.bus.BusConnection(address)
        secret_conn.request_name("org.example.Secret")
        secret = Secret(secret_conn)

        manager = dbus.bus.BusConnection(address)
        path, sock, _ = dbus.Interface(manager.get_object(D, P), C1).AddServer(
            "org.flatpak", "org.example.App",
            dbus.Dictionary({"app-id": "org.example.App"}, signature="sv"),
            dbus.Dictionary({"Filter": dbus.Array(["--talk=org.example.Portal"],
                                                  signature="s")}, signature="sv"))
        sock = bytes(sock).rstrip(b"\0").decode()
        got = run_app(sock, host_socket, tmp)

        check(got.get("socket of the bus itself") == "absent",
              "the sandbox has the container socket only, not the bus' own")
        check("'org.example.App'" in got.get("gdbus WhoAmI", ""),
              "GDBus in bwrap calls the permitted portal, which names its app id")
        check("org.example.App" in got.get("dbus-send WhoAmI", ""),
              "libdbus in bwrap calls the permitted portal too")
        check("org.freedesktop.DBus.Error.ServiceUnknown" in got.get("gdbus Secret failed", ""),
              "GDBus: the forbidden service is ServiceUnknown, as behind xdg-dbus-proxy")
        check("org.freedesktop.DBus.Error.ServiceUnknown" in
              got.get("dbus-send Secret failed", ""),
              "libdbus: the forbidden service is ServiceUnknown")
        check(secret.told == 0, "the forbidden service was never reached")
        names = got.get("ListNames", "")
        check("org.example.Portal" in names and "org.example.Secret" not in names,
              "ListNames in the sandbox: the portal, not the secret (%s)" % names)
        check(len(portal.asked) == 2 and all(
            a == (str(path), str(path), "org.flatpak", "org.example.App", os.getuid())
            for a in portal.asked),
            "the portal learned instance, type, app and creator uid from the bus: %s" %
            portal.asked)
        manager.close()
    print("FAIL: %d" % len(failures) if failures else "all sandbox checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
