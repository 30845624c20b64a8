#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Write the seeds of fuzz-journal (corpus/journal/): crash journals a real
bus1-broker kept in its fd store (broker/objects/journal.h), taken from the
stand-in for systemd (test/crash/fdstore_supervisor.py) after a few clients
said Hello, requested and released names, added and removed match rules and
made a call that is still open (a reply slot), and once more after a
compaction. Only the memfd's pages up to the last record are written.

  make-journal-seeds.py BUS_BINARY OUTPUT_DIR
"""

import os
import stat
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "crash"))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import rawclient  # noqa: E402
from rawclient import crc32c  # noqa: E402
from fdstore_supervisor import Supervisor  # noqa: E402

DBUS = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")


# struct journal_header (journal.c): magic, version, then u64 generation,
# next_seq, marks_off, marks_size, snapshot_off, snapshot_len, records_off,
# n_fds, then u32 snapshot_crc, header_crc, attempts, padding.
HEADER = struct.Struct("=IIQQQQQQQQIIII")


def without_marks(data):
    """The same journal with no room for marks (a fuzzer wastes its time on
    64 KiB of zeroes): the header's offsets and CRC made to fit."""
    h = list(HEADER.unpack_from(data, 0))
    marks = h[5]
    h[5] = 0
    h[6] -= marks
    h[8] -= marks
    h[11] = 0
    head = HEADER.pack(*h)
    h[11] = crc32c(head[:HEADER.size - 12])
    head = HEADER.pack(*h)
    return head + data[HEADER.size:4096] + data[4096 + marks:]


def journal_bytes(sup):
    """The newest journal memfd's content, cut after its last record."""
    best = None
    with sup._lock:
        for name, fd, *_ in sup._store:
            if name.startswith("bus1-journal-") and stat.S_ISREG(os.fstat(fd).st_mode):
                data = os.pread(fd, os.fstat(fd).st_size, 0)
                gen = struct.unpack_from("=Q", data, 8)[0]
                if best is None or gen > best[0]:
                    best = (gen, data)
    data = best[1]
    # struct journal_header: records_off is the ninth field (two u32, then u64s).
    pos = struct.unpack_from("=Q", data, 8 + 6 * 8)[0]
    while pos + 4 <= len(data):
        n = struct.unpack_from("=I", data, pos)[0]
        if n == 0:
            break
        pos += n
    return without_marks(data[:pos + 64])


def main():
    binary, out = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="journal-seeds.")
    path = os.path.join(tmp, "bus")
    conf = os.path.join(tmp, "bus.conf")
    with open(conf, "w") as f:
        f.write(rawclient.session_config("<listen>unix:path=%s</listen>" % path))
    sup = Supervisor([binary, "--nofork", "--config-file=" + conf],
                     log_path=os.path.join(tmp, "log"))
    sup.start()
    sup.wait_ready()
    address = "unix:path=" + path
    a = rawclient.Raw(address)
    b = rawclient.Raw(address)
    for c, name, flags in ((a, "com.example.Seed", 1), (b, "com.example.Seed", 0),
                           (b, "com.example.Other", 4)):
        c.wait_reply(c.call(*DBUS, "RequestName", "su", (name, flags)))
    a.wait_reply(a.call(*DBUS, "AddMatch", "s", ("type='signal',interface='com.example.I'",)))
    a.wait_reply(a.call(*DBUS, "AddMatch", "s", ("type='signal',arg0='x'",)))
    a.wait_reply(a.call(*DBUS, "RemoveMatch", "s", ("type='signal',arg0='x'",)))
    b.wait_reply(b.call(*DBUS, "ReleaseName", "s", ("com.example.Other",)))
    a.call(b.name, "/", "com.example.I", "Open", "s", ("no reply yet",))
    b.recv()
    rawclient.Raw(address).close()
    time.sleep(0.3)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "records"), "wb") as f:
        f.write(journal_bytes(sup))
    # A monitor makes the bus take a snapshot: a journal with few records.
    m = rawclient.Raw(address)
    # BecomeMonitor([], 0): an empty array and a u32, eight zero bytes.
    serial = m.next_serial()
    m.send_raw(rawclient.marshal(rawclient.METHOD_CALL, serial, {
        rawclient.FIELD_PATH: DBUS[1], rawclient.FIELD_DESTINATION: DBUS[0],
        rawclient.FIELD_INTERFACE: "org.freedesktop.DBus.Monitoring",
        rawclient.FIELD_MEMBER: "BecomeMonitor"}, "asu", body=bytes(8)))
    m.wait_reply(serial)
    time.sleep(0.3)
    with open(os.path.join(out, "snapshot"), "wb") as f:
        f.write(journal_bytes(sup))
    sup.stop()


if __name__ == "__main__":
    main()
