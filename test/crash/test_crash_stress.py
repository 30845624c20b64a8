#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Crash survival under load (issue 44): the bus is killed with SIGKILL at
random points while clients work, restarted by a stand-in for systemd
(fdstore_supervisor.py: Restart=on-failure, the fd store kept), and must come
back with every client it kept in the state the clients know of.

The bus runs with a session configuration of its own (listening on a path in
a temporary directory), --nofork, under the supervisor. The clients are raw
sockets (../integration/rawclient.py builds and parses the messages), all
driven from one loop, so that every byte sent, every reply and every
disconnect is seen as it happens:

  quiet  4 clients set up before the first kill with names (owned, queued
         behind others, with ALLOW_REPLACEMENT, REPLACE_EXISTING and
         DO_NOT_QUEUE) and match rules; they send nothing while a kill can
         happen. None may be disconnected, ever.
  busy   8 slots whose client, in a random mix, connects (SASL, BEGIN and
         Hello sent at once), asks for and releases names of a shared pool
         (every flag combination), adds and removes match rules, emits
         signals that other busy clients' rules match, and disconnects (the
         slot then connects a new client). One operation in flight per
         client; operations on one name never overlap, and a client never
         leaves while an operation on one of its names is in flight, so that
         the bus' order is known.
  checker one more client (new after each restart) that asks the bus.

Each round runs the busy clients for a random 0-50 ms, kills the bus with
SIGKILL and then:

 1. times kill -> the first GetId answered on a new connection (10 s bound);
 2. settles every old connection: a GetId sent on it must be answered after
    what was in flight, or the connection must end. An operation answered
    (before or after the kill) happened. One in flight at the kill may have
    its normal reply, an error, or its connection closed: it is resolved by
    asking the bus (ListQueuedOwners: not done, done before the closed
    clients left, or after) and a match rule by whether a signal reaches;
    an answer that fits none of these fails;
 3. waits for every closed client's unique name to go away, then compares
    the bus with the model: ListNames (unique names of connected clients,
    owned names, org.freedesktop.DBus; a unique name never answered to
    Hello may linger briefly), ListQueuedOwners and GetNameOwner of every
    name, GetId unchanged, and the signals of a probe (emitted by the
    checker, with a unicast barrier after them) reaching exactly the
    clients whose match rules match, once each;
 4. checks that the fd store does not grow with churn: right after a
    restore within one entry per connection plus --store-slack, at any time
    within --store-cap; and that the bus never died on its own (every exit
    is one of our SIGKILLs).

  test_crash_stress.py BUS_BINARY [--kills N] [--quick] [--seed S] [-v]

BUS_BINARY may be any bus with dbus-daemon's command line (--nofork,
--config-file=). A failure prints its seed (--seed repeats the choices; the
timing differs), the last events, the bus' log and the store. To check this
test itself:

  --no-kill    pauses instead of killing: every operation is then certain,
               which checks the model against any bus (/usr/bin/dbus-daemon)
  --handover   SIGTERM and a restart with the store kept (systemctl
               restart) instead of SIGKILL: the hand-over bus1-broker has
               had before crash survival, which keeps every client
  --selfcheck-doubt P  with --handover: close busy clients and take replies
               as errors at random, so that what was in flight is resolved
"""

import argparse
import collections
import os
import random
import select
import signal
import socket
import statistics
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import rawclient  # noqa: E402
from fdstore_supervisor import Supervisor  # noqa: E402
from timefactor import time_factor  # noqa: E402
from rawclient import (ERROR, FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,  # noqa: E402
                       FIELD_MEMBER, FIELD_PATH, FIELD_REPLY_SERIAL, FIELD_SENDER,
                       METHOD_CALL, METHOD_RETURN, SIGNAL)

D, P, I = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
F_ALLOW, F_REPLACE, F_DNQ = 1, 2, 4
PRIMARY, IN_QUEUE, EXISTS, ALREADY = 1, 2, 3, 4
RELEASED, NON_EXISTENT, NOT_OWNER = 1, 2, 3
QUIET_NAMES = ["org.bus1.crash.quiet." + c for c in "ABCDEFG"]
WATCH = "org.bus1.crash.watch"
CHECK_IFACE, BUSY_IFACE = "org.bus1.crash.Check", "org.bus1.crash.Busy"
BARRIER_IFACE = "org.bus1.crash.Barrier"
BUSY_PATH = "/org/bus1/crash/busy"
KEYS_PER_SLOT = 3
# A wait that only catches a hang, and the bound of the bus' return after a kill;
# a slow machine (BUS1_TIME_FACTOR, ../integration/timefactor.py) stretches both.
BOUND = 5.0 * time_factor()
BACK_BOUND = 10.0 * time_factor()


class Failure(Exception):
    pass


trace = collections.deque(maxlen=300)   # the last events, printed on a failure


def note(text):
    trace.append("%.6f %s" % (time.monotonic(), text))


# ------------------------------------------------------------------ the model


class Model:
    """What the bus must hold: connected clients (unique name -> kind and
    match rules) and every name's queue ([unique, flags], primary first),
    with the semantics of dbus-daemon's RequestName and ReleaseName."""

    def __init__(self):
        self.clients = {}
        self.queues = {}

    def copy(self):
        m = Model()
        m.clients = {u: {"kind": c["kind"], "rules": collections.Counter(c["rules"])}
                     for u, c in self.clients.items()}
        m.queues = {n: [list(e) for e in q] for n, q in self.queues.items()}
        return m

    def add(self, unique, kind):
        self.clients[unique] = {"kind": kind, "rules": collections.Counter()}

    def queue(self, name):
        return [u for u, _ in self.queues.get(name, [])]

    def names_of(self, unique):
        return [n for n, q in self.queues.items() if any(u == unique for u, _ in q)]

    def request(self, u, name, flags):
        flags &= 7
        q = self.queues.get(name)
        if not q:
            self.queues[name] = [[u, flags]]
            return PRIMARY
        primary = q[0]
        if primary[0] == u:
            primary[1] = flags
            return ALREADY
        mine = next((e for e in q if e[0] == u), None)
        if not (flags & F_REPLACE) or not (primary[1] & F_ALLOW):
            if flags & F_DNQ:
                if mine:
                    q.remove(mine)
                return EXISTS
            if mine:
                if flags & F_REPLACE:
                    q.remove(mine)
                    q.insert(1, mine)
                mine[1] = flags
            else:
                if flags & F_REPLACE:
                    q.insert(1, [u, flags])
                else:
                    q.append([u, flags])
            return IN_QUEUE
        # Replacement: the requester becomes primary; the old one waits
        # behind it, or leaves if it said DO_NOT_QUEUE.
        if mine:
            q.remove(mine)
            mine[1] = flags
        else:
            mine = [u, flags]
        q.insert(1, mine)
        q.remove(primary)
        if not (primary[1] & F_DNQ):
            q.insert(1, primary)
        return PRIMARY

    def release(self, u, name):
        q = self.queues.get(name)
        if not q:
            return NON_EXISTENT
        mine = next((e for e in q if e[0] == u), None)
        if not mine:
            return NOT_OWNER
        q.remove(mine)
        if not q:
            del self.queues[name]
        return RELEASED

    def remove(self, unique):
        self.clients.pop(unique, None)
        for name in list(self.queues):
            self.queues[name] = [e for e in self.queues[name] if e[0] != unique]
            if not self.queues[name]:
                del self.queues[name]

    def apply(self, op, unique):
        if op.kind == "request":
            return self.request(unique, op.name, op.flags)
        if op.kind == "release":
            return self.release(unique, op.name)
        raise ValueError(op.kind)

    def list_names(self):
        return set(self.clients) | {n for n, q in self.queues.items() if q} | {D}


def parse_rule(rule):
    out = {}
    for part in rule.split(","):
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip().strip("'")
    return out


def rule_matches(rule, sig):
    for k, v in parse_rule(rule).items():
        if k == "type":
            ok = v == "signal"
        elif k == "path_namespace":
            ok = sig["path"] == v or sig["path"].startswith(v + "/")
        else:
            ok = sig.get(k) == v
        if not ok:
            return False
    return True


# ------------------------------------------------------------------ a client


class Op:
    __slots__ = ("kind", "serial", "name", "flags", "key", "sent", "code")

    def __init__(self, kind, serial=None, name=None, flags=0, key=None):
        self.kind, self.serial, self.name, self.flags, self.key = kind, serial, name, flags, key
        self.sent = time.monotonic()
        self.code = None    # the reply's code, when one came after a kill

    def __repr__(self):
        extra = self.name or self.key or ""
        return "%s(%s%s)" % (self.kind, extra, ",%d" % self.flags if self.kind == "request"
                             else "")


class Conn:
    """A raw client on its own socket: SASL, BEGIN and Hello (and @extra
    calls) in one write, then messages, read without blocking."""

    def __init__(self, path, label, extra=()):
        self.label = label
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self.serial = 0
        self.rbuf = b""
        self.in_sasl = True
        self.closed = False
        self.unique = None
        self.guid = None
        self.replies = {}
        self.signals = []
        self.hello_serial = self.next_serial()
        data = rawclient.sasl_auth_line() + b"BEGIN\r\n" + \
            self.msg_call("Hello", serial=self.hello_serial)
        self.extra = []
        for member in extra:
            s = self.next_serial()
            self.extra.append(s)
            data += self.msg_call(member, serial=s)
        self.send(data)

    def __repr__(self):
        return "%s(%s)" % (self.label, self.unique or "no name")

    def fileno(self):
        return self.sock.fileno()

    def next_serial(self):
        self.serial += 1
        return self.serial

    def msg_call(self, member, sig="", args=(), serial=None, dest=D, path=P, iface=I):
        fields = {FIELD_PATH: path, FIELD_MEMBER: member, FIELD_DESTINATION: dest,
                  FIELD_INTERFACE: iface}
        return rawclient.marshal(METHOD_CALL, serial or self.next_serial(), fields, sig, args)

    def send(self, data):
        if self.closed:
            return False
        view = memoryview(data)
        end = time.monotonic() + BOUND
        while view:
            try:
                n = self.sock.send(view)
            except (BlockingIOError, InterruptedError):
                if time.monotonic() > end:
                    raise Failure("%r: a send blocked for %.0f s" % (self, BOUND))
                select.select([], [self.sock], [], 0.1)
                continue
            except (BrokenPipeError, ConnectionResetError):
                self.mark_closed("send")
                return False
            view = view[n:]
        return True

    def call(self, member, sig="", args=()):
        s = self.next_serial()
        self.send(self.msg_call(member, sig, args, serial=s))
        return s

    def emit(self, path, iface, member, args, dest=None):
        fields = {FIELD_PATH: path, FIELD_INTERFACE: iface, FIELD_MEMBER: member}
        if dest:
            fields[FIELD_DESTINATION] = dest
        s = self.next_serial()
        self.send(rawclient.marshal(SIGNAL, s, fields, "s" * len(args), args))
        return s

    def mark_closed(self, why):
        if not self.closed:
            note("%r closed (%s)" % (self, why))
        self.closed = True

    def pump(self):
        """Read what is there; parse it. Returns whether anything came."""
        got = False
        while not self.closed:
            try:
                data = self.sock.recv(262144)
            except (BlockingIOError, InterruptedError):
                break
            except (ConnectionResetError, BrokenPipeError):
                self.mark_closed("reset")
                break
            if not data:
                self.mark_closed("eof")
                break
            got = True
            self.rbuf += data
        self._parse()
        return got

    def _parse(self):
        if self.in_sasl:
            if b"\r\n" not in self.rbuf:
                return
            line, self.rbuf = self.rbuf.split(b"\r\n", 1)
            if not line.startswith(b"OK "):
                raise Failure("%r: SASL answered %r" % (self, line))
            self.guid = line[3:].decode()
            self.in_sasl = False
        while len(self.rbuf) >= 16:
            e = "<" if self.rbuf[0:1] == b"l" else ">"
            blen, _, flen = struct.unpack_from(e + "III", self.rbuf, 4)
            total = ((16 + flen + 7) & ~7) + blen
            if len(self.rbuf) < total:
                return
            m = rawclient.parse(self.rbuf[:total])
            self.rbuf = self.rbuf[total:]
            if m[0] in (METHOD_RETURN, ERROR):
                serial = m[3].get(FIELD_REPLY_SERIAL)
                if serial == self.hello_serial and m[0] == METHOD_RETURN:
                    self.unique = rawclient.body_strings(m[4])[0]
                self.replies[serial] = m
            elif m[0] == SIGNAL:
                self.signals.append(m)
                if len(self.signals) > 10000:
                    del self.signals[:5000]

    def wait(self, pred, timeout=BOUND):
        """Read until pred() or the connection ends; False on a timeout."""
        end = time.monotonic() + timeout
        while not pred():
            if self.closed:
                return False
            left = end - time.monotonic()
            if left <= 0:
                return False
            select.select([self.sock], [], [], min(left, 0.05))
            self.pump()
        return True

    def call_sync(self, member, sig="", args=(), timeout=BOUND):
        s = self.call(member, sig, args)
        if not self.wait(lambda: s in self.replies, timeout):
            raise Failure("%r: no answer to %s%r (%s)" % (self, member, args,
                                                          "closed" if self.closed
                                                          else "timeout"))
        return self.replies.pop(s)

    def close(self):
        if not self.closed:
            note("%r closes" % self)
        self.closed = True
        self.sock.close()


def reply_u(m):
    return struct.unpack_from("<I", m[4], 0)[0]


def error_name(m):
    return m[3].get(FIELD_ERROR_NAME) if m[0] == ERROR else None


# ------------------------------------------------------------------ the test


class Stress:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.rng = random.Random(args.seed)
        self.path = os.path.join(tmp, "bus")
        self.model = Model()
        self.uniques_seen = set()
        self.quiet = []            # Conn
        self.slots = [None] * args.busy         # Conn or None
        self.slot_op = [None] * args.busy       # Op in flight
        self.checker = None
        self.closing = {}          # unique -> poll serial (or None): left, not yet gone
        self.polls = {}            # poll serial -> unique
        self.bus_id = None
        self.all_names = list(QUIET_NAMES) + ["org.bus1.crash.busy.N%d" % i
                                              for i in range(args.names)] + [WATCH]
        self.busy_names = self.all_names[len(QUIET_NAMES):-1]
        self.stats = collections.Counter()
        self.restore_times = []
        self.per_kill = []
        self.store_max = 0
        self.expected_exit = 0 if args.handover else -signal.SIGKILL
        self.store_at_failure = None

    # -------------------------------------------------------------- helpers

    def new_conn(self, label, kind, extra=()):
        c = Conn(self.path, label, extra)
        if not c.wait(lambda: c.hello_serial in c.replies):
            raise Failure("%s: no answer to Hello (%s)" % (label, "closed" if c.closed
                                                         else "timeout"))
        self.hello_done(c, kind)
        return c

    def hello_done(self, c, kind):
        m = c.replies.pop(c.hello_serial)
        if m[0] != METHOD_RETURN:
            raise Failure("%s: Hello refused: %s" % (c.label, error_name(m)))
        if c.unique in self.uniques_seen:
            raise Failure("unique name %s given twice (a bus started afresh?)" % c.unique)
        self.uniques_seen.add(c.unique)
        self.model.add(c.unique, kind)
        note("%r hello" % c)

    def queued_owners(self, c, name):
        m = c.call_sync("ListQueuedOwners", "s", (name,))
        if m[0] == ERROR:
            if error_name(m) != D + ".Error.NameHasNoOwner":
                raise Failure("ListQueuedOwners(%s): %s" % (name, error_name(m)))
            return []
        return rawclient.body_string_array(m[4])

    def name_owner(self, c, name):
        m = c.call_sync("GetNameOwner", "s", (name,))
        if m[0] == ERROR:
            if error_name(m) != D + ".Error.NameHasNoOwner":
                raise Failure("GetNameOwner(%s): %s" % (name, error_name(m)))
            return None
        return rawclient.body_strings(m[4])[0]

    def has_owner(self, c, name):
        return bool(reply_u(c.call_sync("NameHasOwner", "s", (name,))))

    # -------------------------------------------------------------- setup

    def setup(self):
        self.checker = self.new_conn("checker", "aux")
        self.bus_id = rawclient.body_strings(self.checker.call_sync("GetId")[4])[0]
        for i in range(4):
            self.quiet.append(self.new_conn("quiet%d" % i, "quiet"))
        A, B, C, Dn, E, F, G = QUIET_NAMES
        steps = [(0, A, F_ALLOW), (1, A, 0), (3, A, F_DNQ), (2, A, F_REPLACE),
                 (1, B, 0), (3, B, F_REPLACE), (0, B, 0),
                 (2, C, F_ALLOW | F_DNQ), (3, C, F_REPLACE),
                 (3, Dn, 0), (3, Dn, F_ALLOW), (2, Dn, F_REPLACE | F_DNQ),
                 (0, E, 0), (0, E, 0), (1, E, F_DNQ),
                 (1, F, 0), (1, F, None), (2, G, 0), (0, G, 0), (0, G, None)]
        for qi, name, flags in steps:
            c = self.quiet[qi]
            if flags is None:
                got = reply_u(c.call_sync("ReleaseName", "s", (name,)))
                want = self.model.release(c.unique, name)
            else:
                got = reply_u(c.call_sync("RequestName", "su", (name, flags)))
                want = self.model.request(c.unique, name, flags)
            if got != want:
                raise Failure("setup: quiet%d %s %s -> %d, the model says %d" %
                              (qi, "release" if flags is None else "request %d" % flags,
                               name, got, want))
        rules = [["type='signal',interface='%s',member='Ping'" % CHECK_IFACE],
                 ["type='signal',interface='%s',arg0='q1'" % CHECK_IFACE,
                  "type='signal',member='Pong'"],
                 ["type='signal',path='/org/bus1/crash/q2'",
                  "type='signal',path_namespace='/org/bus1/crash/ns'"],
                 ["type='signal',interface='%s',member='Ping',arg0='q3'" % CHECK_IFACE,
                  "type='signal',interface='%s',member='Ping',arg0='q3'" % CHECK_IFACE,
                  "type='signal',sender='%s',interface='%s',member='NameOwnerChanged',"
                  "arg0='%s'" % (D, I, WATCH)]]
        for c, rs in zip(self.quiet, rules):
            for r in rs:
                m = c.call_sync("AddMatch", "s", (r,))
                if m[0] != METHOD_RETURN:
                    raise Failure("AddMatch %s: %s" % (r, error_name(m)))
                self.model.clients[c.unique]["rules"][r] += 1
        for c in self.quiet:
            c.signals.clear()

    # -------------------------------------------------------------- busy ops

    def name_locked(self, name):
        if any(op and op.name == name for op in self.slot_op):
            return True
        return any(u in self.closing for u in self.model.queue(name))

    def slot_keys(self, i):
        return ["b%d.%d" % (i, k) for k in range(KEYS_PER_SLOT)]

    def start_op(self, i):
        c = self.slots[i]
        if c is None:
            try:
                c = Conn(self.path, "busy%d" % i)
            except OSError as e:
                raise Failure("busy%d: connect: %r" % (i, e))
            self.slots[i] = c
            self.slot_op[i] = Op("hello", c.hello_serial)
            note("busy%d connects" % i)
            return
        if c.unique is None:
            return
        rules = self.model.clients[c.unique]["rules"]
        r = self.rng.random()
        op = None
        if r < 0.30:
            name = self.rng.choice(self.busy_names)
            if not self.name_locked(name):
                op = Op("request", None, name, self.rng.randrange(8))
        elif r < 0.50:
            mine = self.model.names_of(c.unique)
            pool = mine if mine and self.rng.random() < 0.7 else self.busy_names
            name = self.rng.choice(pool)
            if not self.name_locked(name):
                op = Op("release", None, name)
        elif r < 0.62:
            free = [k for k in self.slot_keys(i) if not rules[self.busy_rule(k)]]
            if free:
                op = Op("addmatch", None, key=self.rng.choice(free))
        elif r < 0.72:
            have = [k for k in self.slot_keys(i) if rules[self.busy_rule(k)]]
            if have:
                op = Op("removematch", None, key=self.rng.choice(have))
        elif r < 0.95:
            op = Op("signal")
        elif not any(self.name_locked(n) for n in self.model.names_of(c.unique)):
            note("%r leaves (names %s)" % (c, self.model.names_of(c.unique)))
            self.closing[c.unique] = None
            c.close()
            self.slots[i] = None
            self.stats["closes"] += 1
            return
        if op is None:
            op = Op("signal")
        if op.kind == "request":
            op.serial = c.call("RequestName", "su", (op.name, op.flags))
        elif op.kind == "release":
            op.serial = c.call("ReleaseName", "s", (op.name,))
        elif op.kind == "addmatch":
            op.serial = c.call("AddMatch", "s", (self.busy_rule(op.key),))
        elif op.kind == "removematch":
            op.serial = c.call("RemoveMatch", "s", (self.busy_rule(op.key),))
        else:
            key = self.rng.choice([k for j in range(len(self.slots))
                                   for k in self.slot_keys(j)])
            c.emit(BUSY_PATH, BUSY_IFACE, "Noise", (key, "noise"))
            op.serial = c.call("GetId")       # paces the signals
        op.sent = time.monotonic()
        self.slot_op[i] = op
        note("%r sends %r serial %d" % (c, op, op.serial))

    @staticmethod
    def busy_rule(key):
        return "type='signal',interface='%s',arg0='%s'" % (BUSY_IFACE, key)

    def op_done(self, i, m, after_kill):
        """The reply @m to slot @i's operation. Returns the operation if
        resolve() must place it: a name operation answered with an error
        after a kill (done or not), or answered normally after a kill (done,
        but before or after the restore closed the clients the crash cut: a
        call still unread in its socket at the crash is read by the new
        process)."""
        c, op = self.slots[i], self.slot_op[i]
        self.slot_op[i] = None
        note("%r reply to %r: %s" % (c, op, error_name(m) or "ok"))
        if op.kind == "hello":
            if m[0] != METHOD_RETURN:
                if not after_kill:
                    raise Failure("busy%d: Hello refused: %s" % (i, error_name(m)))
                c.close()
                self.slots[i] = None
                return None
            c.replies[c.hello_serial] = m
            self.hello_done(c, "busy")
            self.stats["hellos"] += 1
            return None
        if m[0] == ERROR:
            if after_kill:
                self.stats["errors after a kill"] += 1
                return op
            raise Failure("%r: %r answered %s" % (c, op, error_name(m)))
        if after_kill and self.rng.random() < self.args.selfcheck_doubt:
            note("%r: the reply to %r taken as an error (--selfcheck-doubt)" % (c, op))
            return op
        self.stats["ops"] += 1
        if op.kind in ("request", "release") and after_kill:
            op.code = reply_u(m)
            return op
        if op.kind in ("request", "release"):
            got = reply_u(m)
            want = self.model.apply(op, c.unique)
            if got != want:
                raise Failure("%r: %r answered %d, the model says %d (queue now %s)" %
                              (c, op, got, want, self.model.queue(op.name)))
        elif op.kind == "addmatch":
            self.model.clients[c.unique]["rules"][self.busy_rule(op.key)] += 1
        elif op.kind == "removematch":
            rules = self.model.clients[c.unique]["rules"]
            rules[self.busy_rule(op.key)] -= 1
            if not rules[self.busy_rule(op.key)]:
                del rules[self.busy_rule(op.key)]
        return None

    def dispatch(self, after_kill, uncertain):
        """Handle what the connections read: operation replies, polls."""
        for i, c in enumerate(self.slots):
            if c is None:
                continue
            op = self.slot_op[i]
            if op and op.serial in c.replies:
                u = self.op_done(i, c.replies.pop(op.serial), after_kill)
                if u:
                    uncertain.append((c, u))
            c.signals.clear()
            if c.closed and not after_kill:
                raise Failure("%r was disconnected while the bus ran (op %r)" % (c, op))
        ch = self.checker
        for s in [s for s in self.polls if s in ch.replies]:
            u = self.polls.pop(s)
            m = ch.replies.pop(s)
            if m[0] != METHOD_RETURN:
                raise Failure("NameHasOwner(%s): %s" % (u, error_name(m)))
            if reply_u(m):
                self.closing[u] = None
            else:
                note("%s gone" % u)
                self.model.remove(u)
                del self.closing[u]
        if ch.closed and not after_kill:
            raise Failure("the checker was disconnected while the bus ran")

    def window(self, duration):
        """The busy clients for @duration seconds."""
        end = time.monotonic() + duration
        order = list(range(len(self.slots)))
        while True:
            self.rng.shuffle(order)
            for n, i in enumerate(order):
                # Past the deadline, the kill may come in the middle of a batch.
                if n and time.monotonic() >= end and self.rng.random() < 0.2:
                    return
                if self.slot_op[i] is None:
                    self.start_op(i)
            for u, s in self.closing.items():
                if s is None and not self.checker.closed:
                    s = self.checker.call("NameHasOwner", "s", (u,))
                    self.closing[u] = s
                    self.polls[s] = u
            left = end - time.monotonic()
            if left <= 0:
                return
            conns = [c for c in self.slots if c and not c.closed] + [self.checker]
            ready, _, _ = select.select(conns, [], [], min(left, 0.01))
            for c in ready:
                c.pump()
            self.dispatch(False, None)

    def quiesce(self):
        """--no-kill: every operation answered, every leaver gone."""
        end = time.monotonic() + BOUND
        while any(self.slot_op) or self.closing:
            if time.monotonic() > end:
                raise Failure("operations unanswered: %s, leavers not gone: %s" %
                              (self.slot_op, list(self.closing)))
            for u, s in self.closing.items():
                if s is None:
                    s = self.checker.call("NameHasOwner", "s", (u,))
                    self.closing[u] = s
                    self.polls[s] = u
            conns = [c for c in self.slots if c and not c.closed] + [self.checker]
            ready, _, _ = select.select(conns, [], [], 0.05)
            for c in ready:
                c.pump()
            self.dispatch(False, None)

    # -------------------------------------------------------------- after a kill

    def connect_until_answered(self, t_kill):
        """A new connection answering GetId: (conn, seconds since the kill)."""
        deadline = t_kill + BACK_BOUND
        attempts = 0
        # Never the old process's answer (a SIGTERM's bus serves a moment longer).
        self.sup.wait_dead(timeout=BACK_BOUND)
        while time.monotonic() < deadline:
            attempts += 1
            self.check_no_own_death()
            try:
                c = Conn(self.path, "checker", extra=("GetId",))
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.002)
                continue
            s = c.extra[0]
            # (the listener may be in the store: a connection waits in its backlog)
            c.wait(lambda: s in c.replies or self.own_death(), deadline - time.monotonic())
            self.check_no_own_death()
            if s in c.replies and c.replies[s][0] == METHOD_RETURN:
                t = time.monotonic() - t_kill
                if c.hello_serial not in c.replies:
                    raise Failure("GetId answered before Hello")
                if c.unique in self.uniques_seen:
                    for q in self.quiet:
                        q.pump()
                    lost = [q for q in self.quiet if q.closed]
                    raise Failure("the bus came back as a new bus: it gave out %s again, "
                                  "%d of %d quiet clients were disconnected" %
                                  (c.unique, len(lost), len(self.quiet)))
                self.hello_done(c, "aux")
                bus_id = rawclient.body_strings(c.replies.pop(s)[4])[0]
                if bus_id != self.bus_id:
                    raise Failure("GetId changed across the crash: %s -> %s" %
                                  (self.bus_id, bus_id))
                return c, t, attempts
            c.close()
            time.sleep(0.002)
        raise Failure("the bus did not answer within %.0f s of the kill (pid %s, exits %s)" %
                      (BACK_BOUND, self.sup.pid, fmt_statuses(self.sup.exit_statuses)))

    def own_death(self):
        """Whether the bus ended other than by our kills."""
        return len(self.sup.exit_statuses) > len(self.sup.killed)

    def check_no_own_death(self):
        if self.own_death():
            raise Failure("the bus died on its own after kill %d: exit statuses %s" %
                          (len(self.sup.killed), fmt_statuses(self.sup.exit_statuses)))

    def settle(self, old_conns):
        """Every old connection answers a GetId sent now (after whatever it
        had in flight) or ends. Returns the uncertain operations."""
        uncertain = []
        probes = {}
        for c in old_conns:
            if not c.closed:
                probes[c] = c.call("GetId")
        end = time.monotonic() + BOUND
        grace = {}
        while True:
            self.dispatch(True, uncertain)
            waiting = []
            for c in old_conns:
                if c.closed:
                    continue
                i = self.slots.index(c) if c in self.slots else None
                pending = i is not None and self.slot_op[i] is not None
                probed = probes.get(c) in c.replies
                if probed and pending:
                    # the probe overtook the operation: give it a moment
                    g = grace.setdefault(c, time.monotonic() + 1.0)
                    if time.monotonic() > g:
                        raise Failure("%r: %r sent before the kill was never answered, but "
                                      "a call sent after the restart was" %
                                      (c, self.slot_op[i]))
                if not probed or pending:
                    waiting.append(c)
            if not waiting:
                break
            if time.monotonic() > end:
                raise Failure("no answer and no disconnect within %.0f s after the restart: "
                              "%s" % (BOUND, ["%r op %r" % (c, self.slot_op[self.slots.index(c)]
                                                          if c in self.slots else None)
                                              for c in waiting]))
            ready, _, _ = select.select(waiting, [], [], 0.05)
            for c in ready:
                c.pump()
        for c in old_conns:
            if probes.get(c) in c.replies:
                m = c.replies.pop(probes[c])
                if m[0] != METHOD_RETURN:
                    raise Failure("%r: GetId after the restart: %s" % (c, error_name(m)))
        # What was in flight on a connection that ended is uncertain too.
        for i, c in enumerate(self.slots):
            if c is not None and c.closed and self.slot_op[i] is not None:
                uncertain.append((c, self.slot_op[i]))
                self.slot_op[i] = None
        return uncertain

    def wait_gone(self, uniques):
        end = time.monotonic() + BOUND
        left = set(uniques)
        while left:
            left = {u for u in left if self.has_owner(self.checker, u)}
            if not left:
                break
            if time.monotonic() > end:
                raise Failure("unique names still there %.0f s after their clients left: %s"
                              % (BOUND, sorted(left)))
            time.sleep(0.005)

    def resolve(self, uncertain, gone):
        """The model after the crash: name operations in flight decided by
        what the bus says, the gone clients removed."""
        base = self.model
        final = base.copy()
        for u in gone:
            final.remove(u)
        decided = []
        for c, op in uncertain:
            if op.kind not in ("request", "release") or c.unique is None:
                continue
            obs = self.queued_owners(self.checker, op.name)
            cands = []

            def candidate(what, apply_first, apply_last):
                m = base.copy()
                code = m.apply(op, c.unique) if apply_first else None
                for u in gone:
                    m.remove(u)
                if apply_last:
                    code = m.apply(op, c.unique)
                # An answered operation is done, with that answer.
                if op.code is None or op.code == code:
                    cands.append((what, m))

            if op.code is None:
                candidate("not done", False, False)
            candidate("done before the crash", True, False)
            if c.unique not in gone:
                candidate("done after the restore", False, True)
            fit = [(w, m) for w, m in cands if m.queue(op.name) == obs]
            if not fit:
                raise Failure("%r: %r in flight at the kill (%s): the bus has %s = %s, which "
                              "is none of %s" % (c, op, "answered %d" % op.code
                                                 if op.code is not None else "no answer",
                                                 op.name, obs,
                                                 ["%s: %s" % (w, m.queue(op.name))
                                                  for w, m in cands]))
            what, m = fit[0]
            if len(fit) > 1:
                what = " or ".join(w for w, _ in fit)
            final.queues[op.name] = [list(e) for e in m.queues.get(op.name, [])]
            if not final.queues[op.name]:
                del final.queues[op.name]
            flags = {tuple(map(tuple, m2.queues.get(op.name, []))) for _, m2 in fit}
            decided.append((c, op, what, len(flags) > 1))
            self.stats["resolved: " + what +
                       (" (answered)" if op.code is not None else "")] += 1
            note("%r: %r resolved as %s" % (c, op, what))
        self.model = final
        # Where the flags cannot be told apart, the kept client gives the name up.
        for c, op, what, ambiguous in decided:
            if ambiguous and c.unique in final.clients and not c.closed:
                got = reply_u(c.call_sync("ReleaseName", "s", (op.name,)))
                want = final.release(c.unique, op.name)
                if got != want:
                    raise Failure("%r: ReleaseName(%s) after an ambiguous %r: %d, model %d" %
                                  (c, op.name, op, got, want))
                self.stats["ambiguous flags released"] += 1

    def probe_signals(self, nonce, uncertain_keys):
        """The checker emits signals; every connected client must get exactly
        those its match rules match. A match rule in doubt (@uncertain_keys:
        {conn: {rule}}) is decided by what arrives."""
        ch = self.checker
        sigs = [("/org/bus1/crash/c", CHECK_IFACE, "Ping", "x"),
                ("/org/bus1/crash/c", CHECK_IFACE, "Ping", "q3"),
                ("/org/bus1/crash/c", CHECK_IFACE, "Other", "q1"),
                ("/org/bus1/crash/q2", "org.bus1.crash.Other", "Pong", "x"),
                ("/org/bus1/crash/ns/deep", "org.bus1.crash.Other", "Zap", "y"),
                ("/org/bus1/crash/nsx", "org.bus1.crash.Other", "Zap", "y")]
        sigs += [(BUSY_PATH, BUSY_IFACE, "Check", k)
                 for j in range(len(self.slots)) for k in self.slot_keys(j)]
        for path, iface, member, arg0 in sigs:
            ch.emit(path, iface, member, (arg0, nonce))
        # Two NameOwnerChanged for WATCH (owned, then not).
        if reply_u(ch.call_sync("RequestName", "su", (WATCH, 0))) != PRIMARY or \
                reply_u(ch.call_sync("ReleaseName", "s", (WATCH,))) != RELEASED:
            raise Failure("the checker cannot own %s" % WATCH)
        noc = {"sender": D, "path": P, "interface": I, "member": "NameOwnerChanged",
               "arg0": WATCH}
        targets = [c for c in self.quiet] + [c for c in self.slots
                                             if c and not c.closed and c.unique]
        for c in targets:
            ch.emit("/org/bus1/crash/barrier", BARRIER_IFACE, "Barrier", (nonce,),
                    dest=c.unique)
        for c in targets:
            def barrier_seen(c=c):
                return any(m[3].get(FIELD_INTERFACE) == BARRIER_IFACE and
                           rawclient.body_strings(m[4]) == [nonce] for m in c.signals)
            if not c.wait(barrier_seen):
                raise Failure("%r: the probe's barrier never came (%s)" %
                              (c, "closed" if c.closed else "timeout"))
            got = collections.Counter()
            for m in c.signals:
                f = m[3]
                if f.get(FIELD_INTERFACE) == BARRIER_IFACE:
                    continue
                if f.get(FIELD_MEMBER) == "NameOwnerChanged" and \
                        rawclient.body_strings(m[4])[0] == WATCH:
                    got["noc"] += 1
                    continue
                if m[4] and f.get(FIELD_SENDER) == ch.unique:
                    args = rawclient.body_strings(m[4])
                    if len(args) == 2 and args[1] == nonce:
                        got[(f.get(FIELD_PATH), f.get(FIELD_INTERFACE), f.get(FIELD_MEMBER),
                             args[0])] += 1
            c.signals.clear()
            rules = self.model.clients[c.unique]["rules"]
            doubt = uncertain_keys.get(c, set())
            want = collections.Counter()
            for s in sigs:
                d = {"sender": ch.unique, "path": s[0], "interface": s[1], "member": s[2],
                     "arg0": s[3]}
                in_doubt = [r for r in doubt if rule_matches(r, d)]
                if in_doubt:
                    # this one tells whether the rule in doubt is there
                    for r in in_doubt:
                        if got[s]:
                            rules[r] = 1
                        else:
                            rules.pop(r, None)
                        self.stats["match rules resolved"] += 1
                if any(rule_matches(r, d) for r in rules):
                    want[s] = 1
            if any(rule_matches(r, noc) for r in rules):
                want["noc"] = 2
            if got != want:
                raise Failure("%r: the probe's signals: got %s, the rules %s want %s" %
                              (c, sorted(got.items(), key=str), sorted(rules),
                               sorted(want.items(), key=str)))

    def compare(self, nonce, uncertain_keys):
        ch = self.checker
        want = self.model.list_names()
        end = time.monotonic() + 2.0
        while True:
            got = set(rawclient.body_string_array(ch.call_sync("ListNames")[4]))
            extra = got - want
            # A unique name whose Hello was never answered may linger a moment.
            lingering = {n for n in extra if n.startswith(":") and n not in self.uniques_seen}
            if want - got or extra - lingering:
                raise Failure("ListNames: missing %s, unexpected %s" %
                              (sorted(want - got), sorted(extra)))
            if not lingering:
                break
            if time.monotonic() > end:
                raise Failure("ListNames: unknown unique names stay: %s" % sorted(lingering))
            time.sleep(0.01)
        for name in self.all_names:
            q = self.queued_owners(ch, name)
            if q != self.model.queue(name):
                raise Failure("ListQueuedOwners(%s) = %s, the model says %s" %
                              (name, q, self.model.queue(name)))
            o = self.name_owner(ch, name)
            if o != (q[0] if q else None):
                raise Failure("GetNameOwner(%s) = %s, the queue is %s" % (name, o, q))
        for c in self.quiet:
            if c.closed:
                raise Failure("quiet client %r was disconnected" % c)
            if self.name_owner(c, c.unique) != c.unique:
                raise Failure("quiet client %r is not itself" % c)
        self.probe_signals(nonce, uncertain_keys)

    def check_store(self, restored):
        """The fd store does not grow with churn: at no time (the supervisor
        samples every change) beyond --store-cap entries, and right after a
        restore (@restored), within one entry per connection plus
        --store-slack."""
        peak = self.sup.max_store_size
        if peak > self.args.store_cap:
            raise Failure("the fd store held %d entries at one time (cap %d); now %s" %
                          (peak, self.args.store_cap, self.sup.store_names()))
        n = self.sup.store_size()
        if restored:
            live = len(self.model.clients)
            bound = live + self.args.store_slack
            end = time.monotonic() + 1.0
            while n > bound and time.monotonic() < end:
                time.sleep(0.01)
                n = self.sup.store_size()
            if n > bound:
                raise Failure("after the restore the fd store holds %d entries for %d "
                              "connections (+%d): %s" % (n, live, self.args.store_slack,
                                                         self.sup.store_names()))
        self.store_max = max(self.store_max, n)
        return n

    def after_kill(self, k, t_kill, delay):
        old_conns = [c for c in self.slots if c] + [self.checker]
        busy_at_kill = [c for c in self.slots if c]
        in_flight = sum(1 for op in self.slot_op if op)
        new, t_back, attempts = self.connect_until_answered(t_kill)
        self.restore_times.append(t_back)
        pid = self.sup.wait_restarted(BACK_BOUND)
        if self.sup.exit_statuses != [self.expected_exit] * (k + 1):
            raise Failure("the bus died on its own: exit statuses %s" %
                          fmt_statuses(self.sup.exit_statuses))
        for c in busy_at_kill:
            if self.rng.random() < self.args.selfcheck_doubt:
                note("%r closed by us (--selfcheck-doubt)" % c)
                c.close()
        uncertain = self.settle(old_conns)
        old_checker, self.checker = self.checker, new
        self.polls.clear()
        gone = set(self.closing)
        self.closing.clear()
        closed = []
        for i, c in enumerate(self.slots):
            if c is not None and c.closed:
                closed.append(c)
                if c.unique:
                    gone.add(c.unique)
                self.slots[i] = None
        if not old_checker.closed:
            old_checker.close()
        gone.add(old_checker.unique)
        self.wait_gone(gone)
        self.resolve(uncertain, gone)
        doubt = collections.defaultdict(set)
        for c, op in uncertain:
            if op.kind in ("addmatch", "removematch") and not c.closed:
                doubt[c].add(self.busy_rule(op.key))
        self.compare("kill%d" % k, doubt)
        n_store = self.check_store(True)
        kept = len(busy_at_kill) - len(closed)
        self.stats["busy kept"] += kept
        self.stats["busy closed"] += len(closed)
        self.stats["uncertain"] += len(uncertain)
        self.per_kill.append((t_back, kept, len(closed)))
        if True:
            print("kill %3d: +%4.1f ms, pid %d, back in %6.1f ms (%d tries), busy kept %d "
                  "closed %d (in flight %d, uncertain %d), %d names, store %d" %
                  (k + 1, delay * 1000, pid, t_back * 1000, attempts, kept, len(closed),
                   in_flight, len(uncertain), len(self.model.list_names()), n_store),
                  flush=True)

    # -------------------------------------------------------------- main

    def run(self):
        a = self.args
        conf = os.path.join(self.tmp, "bus.conf")
        with open(conf, "w") as f:
            f.write(rawclient.session_config("<listen>unix:path=%s</listen>" % self.path))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("DBUS_", "LISTEN_", "NOTIFY_", "FDSTORE"))}
        self.log = os.path.join(self.tmp, "bus.log")
        self.sup = Supervisor([a.binary, "--nofork", "--config-file=" + conf], env=env,
                              fdstore_max=a.fdstore_max, restart_sec=a.restart_sec,
                              log_path=self.log, verbose=a.verbose > 1)
        self.sup.start()
        try:
            self.sup.wait_ready(BACK_BOUND)
            self.setup()
            self.compare("setup", {})
            print("setup: bus pid %d, %d quiet clients, %d busy slots, %d busy names, "
                  "seed %d" % (self.sup.pid, len(self.quiet), len(self.slots),
                               len(self.busy_names), a.seed), flush=True)
            rounds = a.kills
            for k in range(rounds):
                delay = self.rng.uniform(0, a.max_delay / 1000.0)
                self.window(delay)
                if a.no_kill:
                    self.quiesce()
                    self.compare("round%d" % k, {})
                    self.check_store(False)
                    continue
                # Now, or while the bus is at what was just sent.
                spin = time.monotonic() + self.rng.choice((0, 0, self.rng.uniform(0, 0.0005)))
                while time.monotonic() < spin:
                    pass
                if a.handover:
                    t_kill = self.sup.kill(signal.SIGTERM, restart=True)
                else:
                    t_kill = self.sup.kill(signal.SIGKILL)
                note("--- kill %d (+%.1f ms)" % (k + 1, delay * 1000))
                self.after_kill(k, t_kill, delay)
        except BaseException:
            self.store_at_failure = self.sup.store_names()
            raise
        finally:
            status = self.sup.stop()
        if a.no_kill:
            if self.sup.restarts:
                raise Failure("the bus restarted without a kill: %s" % self.sup.exit_statuses)
        elif status not in (0, -signal.SIGTERM):
            raise Failure("the bus ended %s on SIGTERM" % status)
        self.summary()

    def summary(self):
        s = self.stats
        if self.restore_times:
            ms = [t * 1000 for t in self.restore_times]
            times = "restore ms min %.1f median %.1f max %.1f" % (min(ms), statistics.median(ms),
                                                                 max(ms))
        else:
            times = "no kills"
        total = s["busy kept"] + s["busy closed"]
        print("ops %d certain, %d hellos, %d leaves; uncertain %d (%s); match rules resolved "
              "%d" % (s["ops"], s["hellos"], s["closes"], s["uncertain"],
                      ", ".join("%s %d" % (k[10:], v) for k, v in sorted(s.items())
                                if k.startswith("resolved: ")) or "none",
                      s["match rules resolved"]))
        sup = self.sup
        print("fd store: %d fds not stored as duplicates, %d refused, %d dropped on POLLHUP" %
              (sup.duplicates, sup.refused, sup.hup_removed))
        print("crash-stress: %d kills, busy connections at a kill kept %d closed %d (%.0f%%), "
              "%s, fd store at the checks max %d, at any time max %d: PASS" %
              (len(self.restore_times), s["busy kept"], s["busy closed"],
               100.0 * s["busy closed"] / total if total else 0, times, self.store_max,
               self.sup.max_store_size), flush=True)


def fmt_statuses(statuses):
    """[-9, -9, 1, 1, 1] as "-9 x2, 1 x3" (negative: killed by that signal)."""
    out = []
    for st in statuses:
        if out and out[-1][0] == st:
            out[-1][1] += 1
        else:
            out.append([st, 1])
    return ", ".join("%d x%d" % (st, n) if n > 1 else "%d" % st for st, n in out)


def log_tail(path, n):
    """The last @n lines of @path, lines that differ only in their numbers
    folded into the first of them, with a count, where the last was."""
    import re
    try:
        with open(path, errors="replace") as f:
            lines = [x.rstrip() for x in f]
    except OSError:
        return []
    seen = {}   # key -> [index of its last line, its first line, count]
    for i, line in enumerate(lines):
        key = re.sub(r"\d+", "#", line)
        e = seen.setdefault(key, [i, line, 0])
        e[0] = i
        e[2] += 1
    return [line + (" (%d lines like it)" % c if c > 1 else "")
            for _, line, c in sorted(seen.values())[-n:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", help="the bus (bus1-broker, or any with dbus-daemon's options)")
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="20 kills")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--busy", type=int, default=8, help="busy client slots")
    ap.add_argument("--names", type=int, default=5, help="names the busy clients share")
    ap.add_argument("--max-delay", type=float, default=50.0,
                    help="the kill comes 0..this many ms into the busy activity")
    ap.add_argument("--restart-sec", type=float, default=0.01)
    ap.add_argument("--fdstore-max", type=int, default=4096)
    ap.add_argument("--store-slack", type=int, default=8,
                    help="fd store entries allowed beyond one per connection right after "
                         "a restore")
    ap.add_argument("--store-cap", type=int, default=300,
                    help="fd store entries allowed at any time (the bus may hold the files "
                         "of the connections since its last snapshot: bus1-broker's "
                         "journal compacts after 256)")
    ap.add_argument("--no-kill", action="store_true",
                    help="pause instead of killing: checks the model against any bus")
    ap.add_argument("--handover", action="store_true",
                    help="SIGTERM and a restart with the store kept (systemctl restart) "
                         "instead of SIGKILL: the hand-over that exists already")
    ap.add_argument("--selfcheck-doubt", type=float, default=0.0, metavar="P",
                    help="checks this test: after each kill, close a busy client (and take "
                         "a reply as an error) with probability P, which makes the model "
                         "resolve what the bus did (use with --handover on a bus without "
                         "crash survival)")
    ap.add_argument("--verbose", "-v", action="count", default=0)
    a = ap.parse_args()
    if a.quick:
        a.kills = min(a.kills, 20)
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 31)
    a.binary = os.path.abspath(a.binary)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bus1-crash.") as tmp:
        st = Stress(a, tmp)
        try:
            st.run()
        except Exception as e:
            if not isinstance(e, Failure):
                import traceback
                traceback.print_exc()
            print("FAIL (seed %d): %s" % (a.seed, e), flush=True)
            print("--- the last events:")
            for line in list(trace)[-60:]:
                print("  " + line)
            print("--- the bus' log (the last 40 lines, repeats folded):")
            for line in log_tail(os.path.join(tmp, "bus.log"), 40):
                print("  " + line)
            sup = getattr(st, "sup", None)
            if sup:
                print("--- supervisor: exits %s, fds not stored as duplicates %d, refused %d, "
                      "dropped on POLLHUP %d, warnings %s" %
                      (fmt_statuses(sup.exit_statuses), sup.duplicates, sup.refused,
                       sup.hup_removed, sup.warnings[-5:]))
                print("--- the store at the failure: %s" % st.store_at_failure)
            sys.exit(1)
    print("%.1f s" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
