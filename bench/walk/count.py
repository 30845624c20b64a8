#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Per call: rooms, moves and entries of each file, from walk.py's trace (README.md).
import sys, struct, subprocess, collections, os
binary, trace, n_calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(trace, "rb").read()
recs = struct.unpack("<%dQ" % (len(data) // 8), data)
addrs = sorted({r & ~1 for r in recs})
out = subprocess.run(["addr2line", "-f", "-e", binary] + ["%x" % a for a in addrs],
                     capture_output=True, text=True).stdout.splitlines()
fileof = {}
for i, a in enumerate(addrs):
    f = out[2 * i + 1].split(":")[0]
    parts = f.split("/")
    # broker/[layer/]x.c, dbus-compat/x.c, util/x.h ...
    if "broker" in parts:
        fileof[a] = "broker/" + parts[-1]
    else:
        fileof[a] = "/".join(parts[-2:]) if len(parts) >= 2 else f
stack = []
cur = None
moves = 0
entries = collections.Counter()
rooms = set()
def top():
    for a in reversed(stack):
        if not fileof[a].endswith(".h"):
            return fileof[a]
    return None
bmoves = 0
bcur = None
for r in recs:
    a = r & ~1
    if r & 1:
        if stack:
            stack.pop()
    else:
        stack.append(a)
    nf = top()
    if nf is not None and nf.startswith("broker/") and nf != bcur:
        if bcur is not None:
            bmoves += 1
        bcur = nf
    if nf is not None and nf != cur:
        if cur is not None:
            moves += 1
        entries[nf] += 1
        rooms.add(nf)
        cur = nf
print("per call: broker-only moves %.1f" % (bmoves / n_calls))
print("per call: moves %.1f, rooms %d (of which broker/ %d)" % (moves / n_calls, len(rooms), len([x for x in rooms if x.startswith("broker/")])))
for f, c in entries.most_common():
    print("  %-28s entries %.1f" % (f, c / n_calls))
