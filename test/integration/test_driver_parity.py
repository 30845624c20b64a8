# SPDX-License-Identifier: LGPL-2.1-or-later
"""The driver, method by method, against /usr/bin/dbus-daemon (issue 28's
systematic pass): every method of org.freedesktop.DBus called with no
argument, a number, an invalid name, a name nobody owns and two strings; and
the other interfaces and paths of the driver (Peer, Introspectable,
Properties, Monitoring, Debug.Stats, unknown ones), with arguments that
name the bus itself; on a bus whose receive rules deny the bus' errors,
what still reaches the client; and, on a bus with small per-connection limits, the
names, match rules, pending calls and connections beyond them. Each call on
a bus of each program, its answer (the error name, or the reply's
signature) compared; any difference fails.

  test_driver_parity.py BUS1_BROKER
"""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rawclient  # noqa: E402
from rawclient import FIELD_ERROR_NAME, FIELD_REPLY_SERIAL, FIELD_SIGNATURE, Raw  # noqa: E402

DAEMON = "/usr/bin/dbus-daemon"
D, P, I = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
METHODS = ["Hello", "RequestName", "ReleaseName", "StartServiceByName",
           "UpdateActivationEnvironment", "NameHasOwner", "ListNames",
           "ListActivatableNames", "AddMatch", "RemoveMatch", "GetNameOwner",
           "ListQueuedOwners", "GetConnectionUnixUser", "GetConnectionUnixProcessID",
           "GetAdtAuditSessionData", "GetConnectionSELinuxSecurityContext",
           "GetConnectionCredentials", "ReloadConfig", "GetId", "GetMachineId"]
ARGS = (("no argument", "", ()), ("a number", "u", (7,)), ("an invalid name", "s", ("..bad",)),
        ("a name nobody owns", "s", ("org.example.Nobody",)), ("two strings", "ss", ("a.b", "c")))
# (what, destination, path, interface, member, signature, arguments)
CASES = [
    ("GetId on /", D, "/", I, "GetId", "", ()),
    ("GetId no iface", D, P, None, "GetId", "", ()),
    ("Hello again", D, P, I, "Hello", "", ()),
    ("Peer.Ping on /x", D, "/x", "org.freedesktop.DBus.Peer", "Ping", "", ()),
    ("Peer.GetMachineId", D, P, "org.freedesktop.DBus.Peer", "GetMachineId", "", ()),
    ("Introspect /", D, "/", "org.freedesktop.DBus.Introspectable", "Introspect", "", ()),
    ("Introspect /org", D, "/org", "org.freedesktop.DBus.Introspectable", "Introspect", "", ()),
    ("Introspect /x", D, "/x", "org.freedesktop.DBus.Introspectable", "Introspect", "", ()),
    ("Props Get Features", D, P, "org.freedesktop.DBus.Properties", "Get", "ss", (I, "Features")),
    ("Props Get bad prop", D, P, "org.freedesktop.DBus.Properties", "Get", "ss", (I, "Nope")),
    ("Props Get bad iface", D, P, "org.freedesktop.DBus.Properties", "Get", "ss", ("x.y", "Features")),
    ("Props GetAll", D, P, "org.freedesktop.DBus.Properties", "GetAll", "s", (I,)),
    ("Props GetAll other", D, P, "org.freedesktop.DBus.Properties", "GetAll", "s", ("x.y",)),
    ("Props Set", D, P, "org.freedesktop.DBus.Properties", "Set", "ss", (I, "Features")),
    ("Props on /", D, "/", "org.freedesktop.DBus.Properties", "GetAll", "s", (I,)),
    ("Monitoring on /", D, "/", "org.freedesktop.DBus.Monitoring", "BecomeMonitor", "", ()),
    ("Stats GetStats", D, P, "org.freedesktop.DBus.Debug.Stats", "GetStats", "", ()),
    ("Stats on /", D, "/", "org.freedesktop.DBus.Debug.Stats", "GetStats", "", ()),
    ("Stats conn missing", D, P, "org.freedesktop.DBus.Debug.Stats", "GetConnectionStats", "s", (":1.999",)),
    ("Stats all match", D, P, "org.freedesktop.DBus.Debug.Stats", "GetAllMatchRules", "", ()),
    ("unknown iface", D, P, "x.y", "Z", "", ()),
    ("unknown method", D, P, I, "Nope", "", ()),
    ("Verbose", D, P, "org.freedesktop.DBus.Verbose", "EnableVerbose", "", ()),
    ("RequestName own unique", D, P, I, "RequestName", "su", (":1.1", 0)),
    ("RequestName DBus", D, P, I, "RequestName", "su", (D, 0)),
    ("RequestName bad flags", D, P, I, "RequestName", "su", ("a.b", 255)),
    ("ReleaseName DBus", D, P, I, "ReleaseName", "s", (D,)),
    ("ReleaseName unique", D, P, I, "ReleaseName", "s", (":1.1",)),
    ("AddMatch bad", D, P, I, "AddMatch", "s", ("type='bogus'",)),
    ("RemoveMatch missing", D, P, I, "RemoveMatch", "s", ("type='signal'",)),
    ("StartService missing", D, P, I, "StartServiceByName", "su", ("org.x.Y", 0)),
    ("StartService DBus", D, P, I, "StartServiceByName", "su", (D, 0)),
    ("GetNameOwner DBus", D, P, I, "GetNameOwner", "s", (D,)),
    ("NameHasOwner DBus", D, P, I, "NameHasOwner", "s", (D,)),
    ("ListQueued DBus", D, P, I, "ListQueuedOwners", "s", (D,)),
    ("Unix user DBus", D, P, I, "GetConnectionUnixUser", "s", (D,)),
    ("Creds DBus", D, P, I, "GetConnectionCredentials", "s", (D,)),
    ("SELinux ctx DBus", D, P, I, "GetConnectionSELinuxSecurityContext", "s", (D,)),
    ("Adt DBus", D, P, I, "GetAdtAuditSessionData", "s", (D,)),
]


def answer_on(a, dest, path, iface, member, sig, args, timeout=5):
    """The error name or "ok SIGNATURE" of one call on connection @a."""
    s = a.call(dest, path, iface, member, sig, args)
    while True:
        r = a.recv(timeout)
        if r[3].get(FIELD_REPLY_SERIAL) == s:
            return r[3].get(FIELD_ERROR_NAME) or "ok " + r[3].get(FIELD_SIGNATURE, "")


def answer(addr, dest, path, iface, member, sig, args, timeout=5):
    """answer_on() on a fresh connection; "no answer" or "closed" instead."""
    a = Raw(addr)
    try:
        return answer_on(a, dest, path, iface, member, sig, args, timeout)
    except socket.timeout:
        return "no answer"
    except (EOFError, ConnectionResetError, BrokenPipeError):
        return "closed"
    finally:
        a.close()


@contextlib.contextmanager
def bus(binary, tmp, name, *elements, config=None, log=None, args=()):
    """@binary serving a session bus on @tmp/@name with @elements (or the
    whole @config, "%s" for its <listen> element), and @args on its command
    line: its address. Its standard error goes to the file @log (by default
    @tmp/@name.log). It must exit 0 on SIGTERM: a sanitizer or valgrind
    finding fails the test, with the log."""
    conf = os.path.join(tmp, name + ".conf")
    listen = "<listen>unix:path=%s/%s</listen>" % (tmp, name)
    with open(conf, "w") as f:
        f.write(config % listen if config else rawclient.session_config(listen, *elements))
    log = log or os.path.join(tmp, name + ".log")
    with open(log, "w") as err:
        p = subprocess.Popen([binary, "--config-file=" + conf, "--nofork", "--print-address=1",
                              *args], stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        addr = p.stdout.readline().strip()
        if not addr:
            raise AssertionError("%s did not start (%s)" % (binary, name))
        yield addr
    finally:
        p.terminate()
        status = p.wait()
        if status not in (0, -signal.SIGTERM):
            with open(log) as f:
                sys.stderr.write(f.read()[-4000:])
            raise AssertionError("%s (%s) exited with status %d" % (binary, name, status))


# (what, destination, member, signature, arguments) on a bus whose policy
# denies receiving errors from the bus
DENIED_ERRORS = [
    ("GetId", D, "GetId", "", ()),
    ("GetNameOwner of a missing name", D, "GetNameOwner", "s", ("org.x.Missing",)),
    ("a call to a missing name", "org.x.Missing", "Nope", "", ()),
]


# Per-connection limits at small values: what the calls beyond them get.
LIMITS = {"max_names_per_connection": 2, "max_match_rules_per_connection": 2,
          "max_replies_per_connection": 2, "max_connections_per_user": 4,
          "max_completed_connections": 6}


def limit_cases(addr):
    """{case: answers} of the calls that meet LIMITS."""
    a = Raw(addr)
    out = {}
    out["RequestName x4"] = [answer_on(a, D, P, I, "RequestName", "su", ("org.x.N%d" % i, 0))
                             for i in range(4)]
    out["AddMatch x4"] = [answer_on(a, D, P, I, "AddMatch", "s", ("member='M%d'" % i,))
                          for i in range(4)]
    b = Raw(addr)
    serials = [a.call(b.name, "/", "org.example.X", "Hang") for _ in range(4)]
    answers = {}
    try:
        while True:
            r = a.recv(1)
            answers[r[3].get(FIELD_REPLY_SERIAL)] = r[3].get(FIELD_ERROR_NAME) or "ok"
    except socket.timeout:
        pass
    out["4 calls nobody answers"] = [answers.get(s, "pending") for s in serials]
    more = []
    for _ in range(6):
        try:
            more.append(Raw(addr))
            got = "Hello answered"
        except rawclient.HelloRefused as e:
            got = "Hello refused: %s" % e
        except (OSError, EOFError) as e:
            got = type(e).__name__
        out.setdefault("6 more connections", []).append(got)
    for c in more + [a, b]:
        c.close()
    return out


def run(binary):
    """Every case on private buses run by @binary: {case: answer}."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="bus1-driver-parity.") as tmp:
        with bus(binary, tmp, "plain") as addr:
            for m in METHODS:
                for what, sig, args in ARGS:
                    out["%s with %s" % (m, what)] = answer(addr, D, P, I, m, sig, args)
            for what, dest, path, iface, member, sig, args in CASES:
                out[what] = answer(addr, dest, path, iface, member, sig, args)
        # The receive rules judge what the bus itself sends, as in dbus-daemon
        # (its replies count as requested ones).
        with bus(binary, tmp, "deny-errors",
                 '<policy context="mandatory"><deny receive_type="error" '
                 'receive_requested_reply="true" receive_sender="org.freedesktop.DBus"/>'
                 '</policy>') as addr:
            for what, dest, member, sig, args in DENIED_ERRORS:
                out["errors of the bus denied: " + what] = answer(addr, dest, P, I, member,
                                                                  sig, args, 1)
        with bus(binary, tmp, "limits",
                 *('<limit name="%s">%d</limit>' % kv for kv in LIMITS.items())) as addr:
            for k, v in limit_cases(addr).items():
                out["limits: " + k] = v
    return out


def main():
    if not os.path.exists(DAEMON):
        print("no %s to compare with" % DAEMON)
        return 77
    bus1, ref = run(os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1]), run(DAEMON)
    failed = 0
    for k in ref:
        same = bus1.get(k) == ref[k]
        failed += not same
        print("%-4s %-60s %s%s" % ("ok" if same else "DIFF", k, ref[k],
                                   "" if same else "  (bus1-broker: %s)" % bus1.get(k)))
    print("%d of %d calls answered alike" % (len(ref) - failed, len(ref)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
