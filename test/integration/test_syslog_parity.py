# SPDX-License-Identifier: LGPL-2.1-or-later
"""Where each bus logs, against /usr/bin/dbus-daemon (issue 28's systematic
pass): --syslog, --syslog-only, --nosyslog and no option, each with and
without <syslog/> in the configuration. The bus rejects one call (a logged
denial at the security level) and stops; the outcome is how many such lines
reached standard error and which syslog priorities reached /dev/log.

/dev/log is the test's own: the test runs itself again in a private mount
namespace (unshare), where a tmpfs holding the few device nodes a bus opens
covers /dev, so nothing of the machine's logging is touched. It needs root
for that; otherwise it is skipped (77).

  test_syslog_parity.py BUS1_BROKER
"""

import ast
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from rawclient import Raw  # noqa: E402
from test_driver_parity import DAEMON, bus  # noqa: E402

D, P, I = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
CONFIG = """<busconfig>
  <type>session</type>
  %%s
  %s
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
    <deny send_interface="org.freedesktop.DBus" send_member="ListActivatableNames"/>
  </policy>
</busconfig>
"""
OPTIONS = [None, "--syslog", "--syslog-only", "--nosyslog"]
DEVICES = ["null", "zero", "full", "random", "urandom"]


def private_dev(tmp):
    """/dev as a tmpfs with the device nodes a bus needs, in this namespace."""
    dev = os.path.join(tmp, "dev")
    os.mkdir(dev)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", dev], check=True)
    for n in DEVICES:
        open(os.path.join(dev, n), "w").close()
        subprocess.run(["mount", "--bind", "/dev/" + n, os.path.join(dev, n)], check=True)
    subprocess.run(["mount", "--bind", dev, "/dev"], check=True)


def one_run(binary, tmp, option, in_config, log):
    """Where the denial of one call went: (stderr lines, syslog priorities)."""
    name = "bus-%s-%s" % ((option or "default").strip("-"), "conf" if in_config else "plain")
    err = os.path.join(tmp, name + ".err")
    config = CONFIG % ("<syslog/>" if in_config else "")
    with bus(binary, tmp, name, config=config, log=err, args=[option] if option else []) as addr:
        a = Raw(addr)
        a.wait_reply(a.call(D, P, I, "ListActivatableNames"))
        a.close()
        time.sleep(0.2)
    got = []
    try:
        while True:
            got.append(log.recv(65536).decode(errors="replace"))
    except BlockingIOError:
        pass
    with open(err) as f:
        n_err = sum("Rejected send message" in line for line in f)
    return [n_err, sorted(x[1:x.index(">")] for x in got if "Rejected send message" in x)]


def inside(binary, tmp):
    """In the private mount namespace: a tmpfs on @tmp holds everything, so
    it all goes with the namespace."""
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", tmp], check=True)
    private_dev(tmp)
    log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    log.bind("/dev/log")
    log.setblocking(False)
    out = {}
    for option in OPTIONS:
        for in_config in (False, True):
            key = "%s, %s <syslog/>" % (option or "no option",
                                        "with" if in_config else "without")
            out[key] = one_run(binary, tmp, option, in_config, log)
    log.close()
    return out


def run(binary):
    tmp = tempfile.mkdtemp(prefix="bus1-syslog-parity.")
    try:
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                            os.path.abspath(__file__), "--inside", binary, tmp],
                           capture_output=True, text=True, timeout=120)
    finally:
        os.rmdir(tmp)
    if p.returncode != 0:
        raise AssertionError("%s: %s" % (binary, p.stderr[-2000:]))
    return ast.literal_eval(p.stdout.strip().splitlines()[-1])


# dbus-daemon 1.14: [lines on stderr, syslog priorities] (37: LOG_AUTH | notice)
EXPECTED = {
    "no option, without <syslog/>": [1, []],
    "no option, with <syslog/>": [1, ["37"]],
    "--syslog, without <syslog/>": [1, ["37"]],
    "--syslog, with <syslog/>": [1, ["37"]],
    "--syslog-only, without <syslog/>": [0, ["37"]],
    "--syslog-only, with <syslog/>": [0, ["37"]],
    "--nosyslog, without <syslog/>": [1, []],
    "--nosyslog, with <syslog/>": [1, []],
}


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--inside":
        print(repr(inside(sys.argv[2], sys.argv[3])))
        return 0
    if not os.path.exists(DAEMON):
        print("no %s to compare with" % DAEMON)
        return 77
    if os.getuid() != 0:
        print("needs root for a private /dev/log")
        return 77
    got = run(os.environ.get("BUS_BINARY_OVERRIDE") or sys.argv[1])
    ref = run(DAEMON)
    failed = 0
    for key in EXPECTED:
        ok = got.get(key) == ref.get(key) == EXPECTED[key]
        failed += not ok
        print("%-4s %-36s dbus-daemon %s, bus1-broker %s" % ("ok" if ok else "DIFF", key,
                                                             ref.get(key), got.get(key)))
    print("FAIL" if failed else "both buses log alike in all %d runs" % len(EXPECTED))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
