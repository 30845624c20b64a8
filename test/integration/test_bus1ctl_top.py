# SPDX-License-Identifier: LGPL-2.1-or-later
"""`bus1ctl top --once` on a live bus (over its socket, no /dev/bus1): the
uid's row and every connection's row show what the bus holds for them, as
Debug.Stats reports it: matches, names, the queue of a client that does not
read, and its share of the uid's bytes; and what the bus refused them (the
REFUSED columns, the bus line's totals, and live, how many since the
previous refresh).

  test_bus1ctl_top.py BUS1CTL"""

import os
import queue
import re
import subprocess
import sys
import threading
import time

from dbustest import ADDRESS, Client, eq, run
from rawclient import (ERROR, FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,
                       FIELD_MEMBER, FIELD_PATH, METHOD_CALL, Raw, marshal)
from timefactor import time_factor

BUS_LINE = re.compile(r"^bus: .* names; (\d+) refused \((\d+) limits, (\d+) policy\)"
                      r"(?: \+(\d+))?")

BUS1CTL = sys.argv.pop(1)


def top(*args):
    p = subprocess.run([BUS1CTL, "--address", ADDRESS, "top"] + list(args),
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def rows(out, header):
    """The rows of the table under the line starting with @header, as lists."""
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(header))
    table = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        table.append(line.split())
    return table


def refuse(raw, dest, n):
    """A call of @raw at @dest, which does not read, then @n more with its serial:
    the bus refuses each with AccessDenied, as dbus-daemon does. Their errors."""
    serial = raw.next_serial()
    for _ in range(n + 1):
        raw.send_raw(marshal(METHOD_CALL, serial, {
            FIELD_PATH: "/", FIELD_INTERFACE: "org.bus1.Test.Top", FIELD_MEMBER: "Twice",
            FIELD_DESTINATION: dest}))
    errors = []
    while len(errors) < n:
        m = raw.recv()
        if m[0] == ERROR:
            errors.append(m[3].get(FIELD_ERROR_NAME))
    return errors


def bus_line(out):
    """(refused, limits, policy, refused since the previous refresh or None)."""
    m = next(filter(None, map(BUS_LINE.match, out.splitlines())))
    return tuple(int(x) if x is not None else None for x in m.groups())


def test_top_once():
    a = Client()
    a.add_match("type='signal',interface='org.bus1.Test.Top'")
    a.add_match("type='signal',member='Nothing'")
    a.request_name("org.bus1.Test.Top")
    sink = Raw()  # never reads
    src = Raw()
    # 2 MB: more than the socket's buffers take, the rest waits in the bus.
    for _ in range(500):
        src.call(sink.name, "/", "org.bus1.Test.Top", "Queued", "s", ("x" * 4000,), flags=1)
    time.sleep(0.3)
    refuser = Raw()
    eq(refuse(refuser, sink.name, 7), ["org.freedesktop.DBus.Error.AccessDenied"] * 7,
       "calls with the serial of a pending one")

    rc, out, err = top("--once", "--rows", "100")
    eq(rc, 0, "bus1ctl top: " + err)
    users = {r[0]: r for r in rows(out, "UID")}
    me = users[str(os.getuid())]
    assert int(me[1]) >= 4, me                    # a, sink, src, top itself
    assert int(me[5]) >= 2, me                    # a's two rules
    conns = {r[0]: r for r in rows(out, "CONNECTION")}
    row = conns[sink.name]
    assert int(row[4]) > 0, row                   # messages queued
    assert row[3].endswith(("K", "M")), row       # bytes queued: 10K or more
    eq(conns[a.conn.get_unique_name()][7], "2", "a's match rules")
    eq(conns[a.conn.get_unique_name()][8], "2", "a's names (unique and well-known)")
    # The fullest first.
    eq(rows(out, "CONNECTION")[0][0], sink.name, "sorted by what is queued")
    # What the bus refused: the refuser's row, its uid's, the bus' line (not live: no +N).
    eq(rows(out, "CONNECTION")[0][-1], "-", "the last column is the state")
    eq(conns[refuser.name][11], "7", "the refuser's REFUSED")
    eq(conns[sink.name][11], "0", "the sink's REFUSED")
    assert int(me[10]) >= 7, me                   # the uid's REFUSED
    # The refuser's first call waits for the sink's answer: the sink owes it, and its uid.
    eq(conns[sink.name][9], "1", "the sink's PENDING")
    eq(me[7], "1", "the uid's PENDING")
    total, limits, policy, since = bus_line(out)
    assert policy >= 7 and total == limits + policy and since is None, out.splitlines()[0]
    refuser.close()
    sink.close()
    src.close()


def test_top_live():
    """Refreshed: the bus line tells how many were refused since the previous refresh."""
    sink = Raw()
    refuser = Raw()
    p = subprocess.Popen([BUS1CTL, "--address", ADDRESS, "top", "--interval", "0.2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in p.stdout], daemon=True).start()
    seen = []

    def next_bus_line():
        while True:
            line = lines.get(timeout=10 * time_factor())
            if BUS_LINE.match(line):
                seen.append(bus_line(line))
                return seen[-1]
    try:
        first = next_bus_line()
        eq(first[3], None, "no +N before a previous refresh")
        eq(refuse(refuser, sink.name, 3), ["org.freedesktop.DBus.Error.AccessDenied"] * 3,
           "three refusals")
        while next_bus_line()[0] < first[0] + 3:
            pass
    finally:
        p.terminate()
        p.wait(timeout=10)
        refuser.close()
        sink.close()
    # Each refresh's +N is the growth of the total since the one before it.
    for prev, cur in zip(seen, seen[1:]):
        eq(cur[3], cur[0] - prev[0], "+N of %s after %s" % (cur, prev))
    eq(sum(x[3] for x in seen[1:]), 3, "the refreshes' +N add up to the refusals")


def test_bad_arguments():
    rc, out, err = top("--bogus")
    eq(rc, 1, "an unknown option")
    assert "top [--once]" in err, err


if __name__ == "__main__":
    run([test_top_once, test_top_live, test_bad_arguments])
