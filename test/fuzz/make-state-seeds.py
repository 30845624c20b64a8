#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Write seeds for fuzz-state: the state streams a real bus1-broker hands to
`--check-state` on SIGUSR2, once idle and once with clients holding names
(one queued), match rules, a call pending a reply with an fd, signals queued
and a partly sent message. BUS1_BROKER_REEXEC points the re-exec at a
script that copies the stream and refuses.

  make-state-seeds.py BUS_BINARY OUT_DIR
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import rawclient  # noqa: E402

DBUS = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")


def main():
    binary, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = tempfile.mkdtemp(prefix="state-seeds.")
    dump = os.path.join(tmp, "dump.sh")
    with open(dump, "w") as f:
        f.write('#!/bin/sh\nfor a; do case $a in --check-state=*) '
                'cat /proc/self/fd/${a#--check-state=} > "$SEED" ;; esac; done\nexit 1\n')
    os.chmod(dump, 0o755)
    conf = os.path.join(tmp, "bus.conf")
    with open(conf, "w") as f:
        f.write(rawclient.session_config("<listen>unix:path=%s/bus</listen>" % tmp,
                                         '<limit name="reply_timeout">60000</limit>'))
    seed = os.path.join(tmp, "seed")
    bus = subprocess.Popen([binary, "--config-file=" + conf, "--nofork", "--print-address=1"],
                           stdout=subprocess.PIPE, text=True,
                           env=dict(os.environ, BUS1_BROKER_REEXEC=dump, SEED=seed))
    address = bus.stdout.readline().strip()

    def take(name):
        if os.path.exists(seed):
            os.unlink(seed)
        os.kill(bus.pid, signal.SIGUSR2)
        end = time.monotonic() + 10
        while not os.path.exists(seed) and time.monotonic() < end:
            time.sleep(0.01)
        time.sleep(0.2)
        os.rename(seed, os.path.join(out, name))

    take("idle")
    a, b = rawclient.Raw(address), rawclient.Raw(address)
    a.wait_reply(a.call(*DBUS, "RequestName", "su", ("com.example.A", 0)))
    b.wait_reply(b.call(*DBUS, "RequestName", "su", ("com.example.A", 0)))
    b.wait_reply(b.call(*DBUS, "RequestName", "su", ("com.example.B", 4)))
    a.wait_reply(a.call(*DBUS, "AddMatch", "s", ("type='signal',interface='com.example.I'",)))
    b.wait_reply(b.call(*DBUS, "AddMatch", "s", ("type='signal',sender='com.example.A'",)))
    r, w = os.pipe()
    b.call("com.example.A", "/a", "com.example.I", "Hang", "s", ("pending",), fds=(r,))
    for i in range(5):
        a.signal("/a", "com.example.I", "Sig", "s", ("x%d" % i,))
    part = rawclient.marshal(rawclient.METHOD_CALL, 99, {
        rawclient.FIELD_PATH: "/a", rawclient.FIELD_MEMBER: "Part",
        rawclient.FIELD_DESTINATION: "com.example.A"}, "s", ("partial",))
    b.send_raw(part[:20])
    time.sleep(0.3)
    take("busy")
    bus.terminate()
    bus.wait()


if __name__ == "__main__":
    main()
