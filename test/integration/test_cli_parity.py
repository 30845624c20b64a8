# SPDX-License-Identifier: LGPL-2.1-or-later
"""dbus-daemon's command line, option by option, against /usr/bin/dbus-daemon
(issue 28's systematic pass): the same arguments to both programs, and the
same outcome: the exit status, or that it serves (still running after a
while, with an address printed), and for --introspect the same interfaces,
members, signatures and properties (but for bus1-broker's own two Debug.Stats
methods, bus1-broker(1), STATISTICS). The wording of error messages is not
compared. Deliberate differences (bus1-broker(1), DIFFERENCES FROM
DBUS-DAEMON) are asserted as such (DIFFERENT).

  test_cli_parity.py BUS1_BROKER
"""

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

DAEMON = "/usr/bin/dbus-daemon"
CONFIG = """<busconfig><type>session</type><listen>unix:tmpdir=%s</listen>
<policy context="default"><allow send_destination="*" eavesdrop="true"/>
<allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
"""

# (what, arguments; {ok}: a valid configuration file, {bad}: a broken one)
CASES = [
    ("no argument", []),
    ("--version", ["--version"]),
    ("a missing configuration file", ["--config-file=/nonexistent/bus.conf", "--nofork"]),
    ("a configuration file that is not XML", ["--config-file={bad}", "--nofork"]),
    ("--config-file without a value", ["--config-file"]),
    ("--config-file twice", ["--config-file={ok}", "--config-file={ok}", "--nofork"]),
    ("--config-file and --session", ["--config-file={ok}", "--session", "--nofork"]),
    ("--session and --system", ["--session", "--system"]),
    ("--print-address to a non-number", ["--config-file={ok}", "--nofork",
                                         "--print-address=x"]),
    ("--print-pid to a non-number", ["--config-file={ok}", "--nofork", "--print-pid=x"]),
    ("--print-address to a closed descriptor", ["--config-file={ok}", "--nofork",
                                                "--print-address=99"]),
    ("--address of an unknown transport", ["--config-file={ok}", "--nofork",
                                           "--address=bogus:x=y"]),
    ("--address of a path", ["--config-file={ok}", "--nofork", "--print-address",
                             "--address=unix:path={dir}/bus"]),
    ("--print-address and --print-pid to standard output",
     ["--config-file={ok}", "--nofork", "--print-address", "--print-pid"]),
    ("--nopidfile, --systemd-activation and --nosyslog", [
        "--config-file={ok}", "--nofork", "--nopidfile", "--systemd-activation",
        "--nosyslog", "--print-address"]),
    ("an unknown option", ["--config-file={ok}", "--nofork", "--bogus"]),
    ("a stray argument", ["--config-file={ok}", "--nofork", "stray"]),
    ("--address without a configuration", ["--nofork", "--address=unix:tmpdir={dir}"]),
    ("--address without a value at the end", ["--config-file={ok}", "--nofork", "--address"]),
]

# Deliberate (bus1-broker(1), DIFFERENCES FROM DBUS-DAEMON): (bus1-broker's
# outcome, dbus-daemon's).
DIFFERENT = {
    # bus1-broker serves with the built-in defaults and no policy.
    "--address without a configuration": ("serves", "exit 1"),
    # dbus-daemon ignores an option whose value is missing at the end.
    "--address without a value at the end": ("exit 1", "serves"),
    # dbus-daemon takes the word after --print-address as its descriptor,
    # even an option ("Invalid file descriptor: \"--print-pid\"").
    "--print-address and --print-pid to standard output": ("serves", "exit 1"),
}


def outcome(binary, args, tmp, wait=1.5):
    """"exit N", or "serves" (running @wait s later, an address printed if
    asked for)."""
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        ok, bad = os.path.join(d, "ok.conf"), os.path.join(d, "bad.conf")
        with open(ok, "w") as f:
            f.write(CONFIG % d)
        with open(bad, "w") as f:
            f.write("<busconfig><type>session</")
        argv = [binary] + [a.format(ok=ok, bad=bad, dir=d) for a in args]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL, text=True)
        try:
            out, _ = p.communicate(timeout=wait)
            return "exit %d" % p.returncode
        except subprocess.TimeoutExpired:
            p.terminate()
            out, _ = p.communicate()
            if "--print-address" in args and "unix:" not in out:
                return "serves without printing its address"
            if "--print-pid" in args and str(p.pid) not in out.split():
                return "serves without printing its pid"
            return "serves"


def introspection(binary, *extra):
    """What --introspect describes: (interface, kind, name, type, access,
    arguments) of every member and property."""
    xml = subprocess.run([binary, "--introspect", *extra], capture_output=True, text=True,
                         check=True).stdout
    out = set()
    for i in ET.fromstring(xml).iter("interface"):
        for m in i:
            out.add((i.get("name"), m.tag, m.get("name"), m.get("type"), m.get("access"),
                     tuple((a.get("direction"), a.get("type")) for a in m.iter("arg"))))
    return out


def main():
    if not os.path.exists(DAEMON):
        print("no %s to compare with" % DAEMON)
        return 77
    bus1 = os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1]
    # Under valgrind (run-under-valgrind.sh's override) a start takes longer.
    wait = 8 if os.environ.get("BUS_BINARY_OVERRIDE") else 1.5
    failed = 0
    with tempfile.TemporaryDirectory(prefix="bus1-cli-parity.") as tmp:
        for what, args in CASES:
            got, ref = outcome(bus1, args, tmp, wait), outcome(DAEMON, args, tmp)
            ok = (got, ref) == DIFFERENT[what] if what in DIFFERENT else got == ref
            failed += not ok
            print("%-4s %-55s dbus-daemon: %s%s" % ("ok" if ok else "DIFF", what, ref,
                                                     "" if got == ref else
                                                     ", bus1-broker: %s" % got))
    a, b = introspection(bus1), introspection(DAEMON)
    # bus1-broker's own Debug.Stats methods (bus1-broker(1), STATISTICS): exactly these more.
    own = {x for x in a - b if x[0] == "org.freedesktop.DBus.Debug.Stats"}
    ok = {x[2] for x in own} == {"ListConnectionStats", "GetUserStats"}
    print("%-4s --introspect: Debug.Stats' %d methods of bus1-broker's own more" % (
        "ok" if ok else "DIFF", len(own)))
    failed += not ok
    a -= own
    # Containers1 only with bus1-broker's own --containers (dbus 1.14 compiles it out).
    containers = introspection(bus1, "--containers") - a - own
    ok = {x[0] for x in containers} == {"org.freedesktop.DBus.Containers1"} and \
        len(containers) == 7
    print("%-4s --introspect --containers: Containers1's %d members and properties more" % (
        "ok" if ok else "DIFF", len(containers)))
    failed += not ok
    print("%-4s --introspect: %d members and properties%s" % (
        "ok" if a == b else "DIFF", len(b),
        "" if a == b else ", only bus1-broker %s, only dbus-daemon %s" % (
            sorted(a - b), sorted(b - a))))
    failed += a != b
    # The text around the document too: dbus-daemon ends it with an empty line.
    ends = [subprocess.run([x, "--introspect"], capture_output=True, check=True).stdout[-9:]
            for x in (bus1, DAEMON)]
    print("%-4s --introspect ends with %r%s" % ("ok" if ends[0] == ends[1] else "DIFF", ends[1],
                                                "" if ends[0] == ends[1] else
                                                ", bus1-broker with %r" % ends[0]))
    failed += ends[0] != ends[1]
    print("FAIL" if failed else "bus1-broker and dbus-daemon agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
