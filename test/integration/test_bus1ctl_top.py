# SPDX-License-Identifier: LGPL-2.1-or-later
"""`bus1ctl top --once` on a live bus (over its socket, no /dev/bus1): the
uid's row and every connection's row show what the bus holds for them, as
Debug.Stats reports it: matches, names, the queue of a client that does not
read, and its share of the uid's bytes.

  test_bus1ctl_top.py BUS1CTL"""

import os
import subprocess
import sys
import time

from dbustest import ADDRESS, Client, eq, run
from rawclient import Raw

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
    sink.close()
    src.close()


def test_bad_arguments():
    rc, out, err = top("--bogus")
    eq(rc, 1, "an unknown option")
    assert "top [--once]" in err, err


if __name__ == "__main__":
    run([test_top_once, test_bad_arguments])
