# SPDX-License-Identifier: LGPL-2.1-or-later
"""bus1-broker's own Debug.Stats methods and keys (issue 41): ListConnectionStats
pages through the connections by the N of ":1.N", each exactly once;
GetUserStats reports every quota of a uid against its limit; GetConnectionStats
keeps dbus-daemon's keys and adds the bus's own. Not dbus-daemon's: skipped
against it."""

import os
import signal
import sys
import time

import dbus

from dbustest import BUS1, DIFACE, DPATH, DRIVER, E, Client, eq, expect_error, run, wait_for
from rawclient import FIELD_MEMBER, METHOD_CALL, Raw, body_strings
from timefactor import time_factor

STATS = "org.freedesktop.DBus.Debug.Stats"
# dbus-daemon 1.14's keys of GetConnectionStats: all must stay.
DAEMON_KEYS = {
    "Serial", "MatchRules", "PeakMatchRules", "BusNames", "PeakBusNames", "UniqueName",
    "IncomingMessages", "IncomingBytes", "IncomingFDs", "PeakIncomingBytes", "PeakIncomingFDs",
    "OutgoingMessages", "OutgoingBytes", "OutgoingFDs", "PeakOutgoingBytes", "PeakOutgoingFDs"}
# bus1-broker's (UnixUserID and ProcessID when known); the counts of refusals are uint64.
OWN_KEYS = {"UnixUserID", "ProcessID", "AnswerBytes", "InputPaused", "PendingReplies",
            "ActivationMessages", "RefusedLimits", "RefusedPolicy", "DroppedMessages"}
REFUSAL_KEYS = {"RefusedLimits", "RefusedPolicy", "DroppedMessages"}
SLOTS = ["Bytes", "FDs", "MatchRules", "BusNames", "PendingReplies", "Connections",
         "ActivationMessages"]
N_CONNS = 300


def unique_id(name):
    return int(str(name).rsplit(".", 1)[1])


def list_all(c, start=0, max_=64):
    """Every page from @start: [(name, stats)], and how many pages it took."""
    out, pages, nxt = [], 0, start
    while True:
        nxt, entries = c.drv("ListConnectionStats", "uu", nxt, max_, iface=STATS)
        pages += 1
        assert len(entries) <= (max_ if 0 < max_ <= 256 else 256), len(entries)
        out += [(str(n), s) for n, s in entries]
        if not nxt:
            return out, pages
        assert pages < 10000, "paging does not end"


def user_stats(c):
    return {int(uid): s for uid, s in c.drv("GetUserStats", iface=STATS)}


def mine(c):
    return user_stats(c)[os.getuid()]


def check_conn_keys(s, what):
    keys = {str(k) for k in s}
    assert DAEMON_KEYS <= keys, "%s: dbus-daemon keys missing: %s" % (what, DAEMON_KEYS - keys)
    assert keys - DAEMON_KEYS <= OWN_KEYS, "%s: unknown keys %s" % (what, keys - DAEMON_KEYS)
    for k in OWN_KEYS - {"InputPaused"} - REFUSAL_KEYS:
        if k in s:
            assert isinstance(s[k], dbus.UInt32), (what, k, s[k])
    for k in REFUSAL_KEYS:
        assert isinstance(s[k], dbus.UInt64), (what, k, s[k])
    assert isinstance(s["InputPaused"], dbus.Boolean), (what, s["InputPaused"])


def test_list_pages():
    c = Client()
    raws = [Raw() for _ in range(N_CONNS)]
    try:
        names = {r.name for r in raws}
        got, pages = list_all(c, 0, 64)
        listed = [n for n, _ in got]
        eq(len(listed), len(set(listed)), "connections listed twice")
        ids = [unique_id(n) for n in listed]
        eq(ids, sorted(ids), "order of N")
        assert names <= set(listed), "not listed: %s" % sorted(names - set(listed))[:5]
        assert c.name in listed
        assert pages >= N_CONNS // 64, pages
        for n, s in got:
            eq(str(s["UniqueName"]), n, "UniqueName of the entry")
            check_conn_keys(s, n)
            eq(int(s["UnixUserID"]), os.getuid(), "UnixUserID")
        # max 0 or above 256: the cap, 256.
        for m in (0, 1000):
            nxt, entries = c.drv("ListConnectionStats", "uu", 0, m, iface=STATS)
            eq(len(entries), min(256, len(listed)), "page of max %d" % m)
            assert nxt == (unique_id(listed[256]) if len(listed) > 256 else 0), nxt
        # From a connection's N: it comes first.
        first = sorted(raws, key=lambda r: unique_id(r.name))[100]
        nxt, entries = c.drv("ListConnectionStats", "uu", unique_id(first.name), 1, iface=STATS)
        eq(str(entries[0][0]), first.name, "first entry from its N")
        assert nxt > unique_id(first.name), nxt
        # Past the last N: nothing, and no next.
        nxt, entries = c.drv("ListConnectionStats", "uu", max(ids) + 1, 10, iface=STATS)
        eq((int(nxt), len(entries)), (0, 0), "past the end")

        # Every other one goes: those left, each once; the others not at all.
        gone = set()
        for r in raws[::2]:
            gone.add(r.name)
            r.close()
        left = names - gone

        def settled():
            now = {n for n, _ in list_all(c, 0, 37)[0]}
            return not (now & gone)
        wait_for(settled, 10 * time_factor(), "the closed connections to go")
        got, _ = list_all(c, 0, 37)
        listed = [n for n, _ in got]
        eq(len(listed), len(set(listed)), "connections listed twice after closes")
        assert left <= set(listed), sorted(left - set(listed))[:5]
        # Paging from the N of one that went: on to the next one there is.
        start = unique_id(raws[100].name)
        nxt, entries = c.drv("ListConnectionStats", "uu", start, 1, iface=STATS)
        eq(unique_id(entries[0][0]), unique_id(raws[101].name), "after a gone N")
    finally:
        for r in raws:
            r.close()
    expect_error(E + "InvalidArgs", c.drv, "ListConnectionStats", "u", 0, iface=STATS)


def test_user_stats():
    c = Client()
    s = mine(c)
    for k in SLOTS:
        assert isinstance(s[k], dbus.UInt64), (k, s[k])
        assert isinstance(s["Max" + k], dbus.UInt64), ("Max" + k, s["Max" + k])
    assert isinstance(s["Actors"], dbus.UInt32)
    assert isinstance(s["LargestActorBytes"], dbus.UInt64)
    assert str(s["ClosestQuota"]) in SLOTS, s["ClosestQuota"]
    assert 0 <= int(s["ClosestQuotaPercent"]) <= 100, s["ClosestQuotaPercent"]
    for k in REFUSAL_KEYS | {"QueueFullDisconnects"}:
        assert isinstance(s[k], dbus.UInt64), (k, s[k])
    # Connections: the uid's registered connections, as ListConnectionStats sees them
    # (connections of the tests before may still be on their way out: asked until the
    # two agree).
    def agree(raws):
        listed = {n for n, x in list_all(c)[0] if int(x.get("UnixUserID", -1)) == os.getuid()}
        n = int(mine(c)["Connections"])
        return n == len(listed) and {r.name for r in raws} <= listed
    raws = [Raw() for _ in range(20)]
    try:
        wait_for(lambda: agree(raws), 10 * time_factor(), "Connections to agree with the list")
        n = int(mine(c)["Connections"])
        assert n >= 21 and int(mine(c)["MaxConnections"]) >= n, mine(c)
    finally:
        for r in raws:
            r.close()
    wait_for(lambda: agree([]) and int(mine(c)["Connections"]) <= n - 20, 10 * time_factor(),
             "Connections to fall by 20")
    # MatchRules rises with AddMatch.
    before = int(mine(c)["MatchRules"])
    for i in range(3):
        c.add_match("type='signal',member='UserStats%d'" % i)
    eq(int(mine(c)["MatchRules"]), before + 3, "MatchRules after 3 AddMatch")


def test_queued_bytes():
    """A connection that does not read: its uid's Bytes, actors, its Outgoing*."""
    c = Client()
    idle = int(mine(c)["Bytes"])
    sleeper = Raw()
    sender = Raw()
    try:
        sleeper.call(DRIVER, DPATH, DIFACE, "AddMatch", "s", ("type='signal',member='Fill'",))
        sleeper.wait_reply(sleeper.serial)
        for _ in range(64):
            sender.signal("/x", "org.bus1.Test", "Fill", "s", ("x" * 32768,))
        sender.call(DRIVER, DPATH, DIFACE, "GetId")
        sender.wait_reply(sender.serial)

        def queued():
            cs = c.drv("GetConnectionStats", "s", sleeper.name, iface=STATS)
            return int(cs["OutgoingBytes"]) > 0
        wait_for(queued, 10 * time_factor(), "the sleeper's queue to grow")
        s = mine(c)
        assert int(s["Bytes"]) > idle, (int(s["Bytes"]), idle)
        assert int(s["Actors"]) >= 1 and int(s["LargestActorBytes"]) > 0, s
        assert int(s["LargestActorBytes"]) <= int(s["Bytes"]), s
    finally:
        sleeper.close()
        sender.close()
    wait_for(lambda: int(mine(c)["Bytes"]) <= idle, 10 * time_factor(),
             "Bytes back to %d once the sleeper went" % idle)


def test_connection_keys():
    c = Client()
    srv = Raw()
    try:
        s = c.drv("GetConnectionStats", "s", c.name, iface=STATS)
        check_conn_keys(s, "itself")
        eq(int(s["UnixUserID"]), os.getuid(), "UnixUserID")
        eq(int(s["ProcessID"]), os.getpid(), "ProcessID")
        eq(bool(s["InputPaused"]), False, "InputPaused")
        eq(int(s["ActivationMessages"]), 0, "ActivationMessages")
        eq(int(s["PendingReplies"]), 0, "PendingReplies")
        # A call it has not answered yet: one reply it owes.
        res = []
        c.conn.call_async(srv.name, "/x", "org.bus1.Test", "Slow", "", (),
                          reply_handler=lambda *a: res.append(a),
                          error_handler=lambda e: res.append(e), timeout=30)
        m = srv.recv()
        while m[0] != METHOD_CALL:
            m = srv.recv()
        eq(m[3].get(FIELD_MEMBER), "Slow", "the call reached the callee")
        s = c.drv("GetConnectionStats", "s", srv.name, iface=STATS)
        check_conn_keys(s, "callee")
        eq(int(s["PendingReplies"]), 1, "PendingReplies of the callee")
        eq(int(c.drv("GetConnectionStats", "s", c.name, iface=STATS)["PendingReplies"]), 0,
           "PendingReplies of the caller")
        # The uid's: the sum over its connections (the callee's one call).
        eq(int(mine(c)["PendingReplies"]), 1, "PendingReplies of the uid")
        eq(int(mine(c)["MaxPendingReplies"]), 50000, "MaxPendingReplies (per connection)")
    finally:
        srv.close()
    # The callee gone, its uid owes nothing any more.
    deadline = time.monotonic() + 5
    while int(mine(c)["PendingReplies"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    eq(int(mine(c)["PendingReplies"]), 0, "PendingReplies of the uid after the callee left")
    xml = str(c.drv("Introspect", iface="org.freedesktop.DBus.Introspectable"))
    assert '<method name="ListConnectionStats">' in xml and \
        '<method name="GetUserStats">' in xml, xml


def test_reexec_order():
    """Ids handed out in another order than the connections came: after a
    re-exec (which restores them in the order they came) still listed by N."""
    if os.environ.get("BUS_BINARY_OVERRIDE") or "BUS_DIR" not in os.environ:
        print("     (not under a wrapper, nor without run-with-bus.sh's log)")
        return
    c = Client()
    late = [Raw(hello=False) for _ in range(10)]
    early = [Raw() for _ in range(10)]
    for r in late:
        r.call(DRIVER, DPATH, DIFACE, "Hello")
        r.name = body_strings(r.wait_reply(r.serial)[4])[0]
    try:
        log = os.path.join(os.environ["BUS_DIR"], "bus.log")

        def resumed():
            with open(log, errors="replace") as f:
                return f.read().count("re-exec: resumed")
        before = resumed()
        os.kill(int(os.environ["BUS_PID"]), signal.SIGUSR2)
        end = time.monotonic() + 15 * time_factor()
        while resumed() == before:
            assert time.monotonic() < end, "no re-exec"
            time.sleep(0.01)
        listed = [n for n, _ in list_all(c, 0, 7)[0]]
        eq(len(listed), len(set(listed)), "connections listed twice after the re-exec")
        ids = [unique_id(n) for n in listed]
        eq(ids, sorted(ids), "order of N after the re-exec")
        names = {r.name for r in late + early} | {c.name}
        assert names <= set(listed), sorted(names - set(listed))
    finally:
        for r in late + early:
            r.close()


if __name__ == "__main__":
    if not BUS1:
        print("bus1-broker's own methods: nothing to check on %s" %
              os.environ.get("BUS_BINARY", "this bus"))
        sys.exit(77)
    run([test_list_pages, test_user_stats, test_queued_bytes, test_connection_keys,
         test_reexec_order])
