# SPDX-License-Identifier: LGPL-2.1-or-later
"""The frame of a differential test: the same scenarios on bus1-broker and on
/usr/bin/dbus-daemon, each on a private bus of its own (run-with-bus.sh), their
outcomes (a JSON object) checked against what dbus-daemon does and against each
other. A test module runs itself inside run-with-bus.sh with "--scenarios ...
FILE" to write its outcomes; its main() calls buses(), run_scenarios() and
compare().
"""

import json
import os
import subprocess
import sys

from timefactor import time_factor

HERE = os.path.dirname(os.path.abspath(__file__))
DAEMON = "/usr/bin/dbus-daemon"


def buses(bus1):
    """The buses to run: [(label, binary, what runs it)]. run-under-valgrind.sh
    points BUS_BINARY_OVERRIDE at its valgrind wrapper."""
    runs = [("bus1-broker", bus1, os.environ.get("BUS_BINARY_OVERRIDE") or bus1)]
    if os.path.exists(DAEMON):
        runs.append(("dbus-daemon", DAEMON, DAEMON))
    else:
        print("no %s: only the recorded outcomes are checked" % DAEMON)
    return runs


def run_scenarios(script, binary, override, config, out, args=(), env=None, timeout=170):
    """The outcomes @script writes to @out ("--scenarios *@args @out") on a
    private bus of @binary (run by @override) with the configuration file
    @config, or None if they did not complete. The scenarios see
    PARITY_WRAPPED=1 when a wrapper runs the bus (valgrind: slow)."""
    e = dict(os.environ, BUS_BINARY_OVERRIDE=override, **(env or {}))
    if override != binary:
        e["PARITY_WRAPPED"] = "1"
    p = subprocess.run([os.path.join(HERE, "run-with-bus.sh"), binary, "--config", config,
                        "--", sys.executable, os.path.abspath(script), "--scenarios", *args, out],
                       env=e, timeout=timeout * time_factor())
    if p.returncode != 0 or not os.path.exists(out):
        print("FAIL: the scenarios %sdid not complete on %s" % (
            "(%s) " % " ".join(args) if args else "", override))
        return None
    with open(out) as f:
        return json.load(f)


def compare(results, expected, different=None, unmeasured=()):
    """Print and judge @results ({label: outcomes}): each bus must give
    @expected (dbus-daemon's), or for a key of @different its own of the pair
    (bus1-broker's, dbus-daemon's), and the buses the same outside @different.
    @unmeasured: keys a bus did not measure on purpose (said by the caller).
    Return True if anything failed."""
    different = different or {}
    failed = False
    for label, res in results.items():
        if res is None:
            failed = True
            continue
        for key, want in expected.items():
            if key in different:
                want = different[key][0 if label == "bus1-broker" else 1]
            got = res.get(key)
            if got is None and key in unmeasured:
                continue
            ok = got == want
            failed |= not ok
            print("%-4s %-11s %s%s" % ("ok" if ok else "FAIL", label, key,
                                       " (differs on purpose)" if key in different else ""))
            if not ok:
                print("       expected %s\n       got      %s" % (json.dumps(want),
                                                                   json.dumps(got)))
    a, b = results.get("bus1-broker"), results.get("dbus-daemon")
    if a and b:
        for key in sorted((set(a) | set(b)) - set(different)):
            if a.get(key) != b.get(key) and not (key in unmeasured and None in
                                                 (a.get(key), b.get(key))):
                failed = True
                print("DIFFERENT %s\n  bus1-broker %s\n  dbus-daemon %s" % (
                    key, json.dumps(a.get(key)), json.dumps(b.get(key))))
    print("FAIL" if failed else "bus1-broker and dbus-daemon agree")
    return failed
