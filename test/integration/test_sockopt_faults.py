# SPDX-License-Identifier: LGPL-2.1-or-later
"""A kernel that refuses a connection's optional credentials (issue 41):
getsockopt SO_PEERSEC, SO_PEERGROUPS or SO_PEERPIDFD failing at connect
(sockopt-fault-shim.so, loaded into the bus) must cost that connection the
credential, never the connection or the bus. dbus-daemon goes on without
it; so must bus1-broker (it refused the connection). The same scenario on
/usr/bin/dbus-daemon and on bus1-broker: a libdbus client connects, calls
GetConnectionCredentials of itself, and a second client is served after it;
which keys come back must be the same on both (ProcessFD aside: dbus-daemon
1.14 has none), and a policy rule by group must still apply (from the user
database, as dbus-daemon falls back to).

  test_sockopt_faults.py BUS1_BROKER SHIM
"""

import grp
import os
import sys
import tempfile

import dbus

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_driver_parity import bus  # noqa: E402

D, P = "org.freedesktop.DBus", "/org/freedesktop/DBus"
failures = []
CASES = ["", "peersec", "peergroups", "peerpidfd", "peersec,peergroups,peerpidfd"]


def check(ok, what):
    print("%-4s %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def scenario(address):
    """What a client sees: its credentials' keys, whether a name only its
    group may own is granted, and whether a second client is served."""
    try:
        c = dbus.bus.BusConnection(address)
    except dbus.exceptions.DBusException as e:
        return "connect: " + e.get_dbus_name()
    drv = dbus.Interface(c.get_object(D, P), D)
    creds = drv.GetConnectionCredentials(c.get_unique_name())
    keys = sorted(k for k in creds.keys() if k != "ProcessFD")
    try:
        owned = int(drv.RequestName("org.example.GroupOnly", dbus.UInt32(0)))
    except dbus.exceptions.DBusException as e:
        owned = e.get_dbus_name()
    c.close()
    try:
        c2 = dbus.bus.BusConnection(address)
        second = str(dbus.Interface(c2.get_object(D, P), D).GetId()) != ""
        c2.close()
    except dbus.exceptions.DBusException as e:
        second = e.get_dbus_name()
    return {"keys": keys, "own by group": owned, "second client": second}


def main():
    binary, shim = sys.argv[1], os.path.abspath(sys.argv[2])
    group = grp.getgrgid(os.getgid()).gr_name
    policy = ('<policy context="default"><allow send_destination="*"/><allow own="*"/>'
              '<deny own="org.example.GroupOnly"/></policy>'
              '<policy group="%s"><allow own="org.example.GroupOnly"/></policy>' % group)
    with tempfile.TemporaryDirectory(prefix="bus1-sockopt.") as tmp:
        for case in CASES:
            seen = {}
            for name, exe in (("dbus-daemon", "/usr/bin/dbus-daemon"), ("bus1-broker", binary)):
                os.environ["LD_PRELOAD"] = shim
                os.environ["BUS1_TEST_SOCKOPT_FAIL"] = case
                try:
                    with bus(exe, tmp, "%s-%s" % (name, case.replace(",", "-") or "none"),
                             policy) as address:
                        del os.environ["LD_PRELOAD"]
                        seen[name] = scenario(address)
                finally:
                    os.environ.pop("LD_PRELOAD", None)
                    os.environ.pop("BUS1_TEST_SOCKOPT_FAIL", None)
            what = case or "nothing"
            print("# %s fails: dbus-daemon %s" % (what, seen["dbus-daemon"]))
            print("# %s fails: bus1-broker %s" % (what, seen["bus1-broker"]))
            check(isinstance(seen["bus1-broker"], dict) and
                  seen["bus1-broker"]["second client"] is True,
                  "%s fails: bus1-broker serves the client and the next one" % what)
            check(seen["bus1-broker"] == seen["dbus-daemon"],
                  "%s fails: the same credentials keys, group policy and service as "
                  "dbus-daemon" % what)
            with open(os.path.join(tmp, "bus1-broker-%s.log" %
                                   (case.replace(",", "-") or "none"))) as f:
                said = "credentials the kernel refused" in f.read()
            check(said == bool(case), "%s fails: bus1-broker %s" %
                  (what, "says so in its log" if case else "logs no refusal"))
    print("FAIL: %d" % len(failures) if failures else "all sockopt fault checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
