# SPDX-License-Identifier: LGPL-2.1-or-later
"""Name ownership: queueing with every flag, the signals and their order,
NameOwnerChanged on disconnect, unique names never reused."""

from dbustest import DIFACE, Client, eq, noc, pump, wait_for, run

N = "org.bus1.Test.Queue"
ALLOW, REPLACE, NOQUEUE = 1, 2, 4


def queue(c, name=N):
    try:
        return [str(x) for x in c.drv("ListQueuedOwners", "s", name)]
    except Exception:
        return []


def lost(c, name=N):
    return [str(m.get_args_list()[0]) for m in c.signals("NameLost", DIFACE)
            if m.get_args_list()[0] == name]


def acquired(c, name=N):
    return [str(m.get_args_list()[0]) for m in c.signals("NameAcquired", DIFACE)
            if m.get_args_list()[0] == name]


def test_queue_flags():
    o = Client()
    o.add_match("type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',"
                "arg0='%s'" % N)
    a, b, c = Client(), Client(), Client()

    eq(a.request_name(N, ALLOW), 1, "A first")
    eq(queue(o), [a.name])
    eq(b.request_name(N, 0), 2, "B queued")
    eq(queue(o), [a.name, b.name])
    # replacement allowed: C takes over, A (no DO_NOT_QUEUE) waits first in line
    eq(c.request_name(N, REPLACE), 1, "C replaces A")
    eq(queue(o), [c.name, a.name, b.name])
    # C does not allow replacement: DO_NOT_QUEUE gives EXISTS and drops B's place
    eq(b.request_name(N, NOQUEUE), 3, "B exists")
    eq(queue(o), [c.name, a.name])
    # REPLACE_EXISTING without permission: queued, moved to the front of the waiters
    eq(b.request_name(N, REPLACE), 2, "B queued again")
    eq(queue(o), [c.name, b.name, a.name])
    # the owner updates its flags
    eq(c.request_name(N, ALLOW | NOQUEUE), 4, "C already owner")
    eq(queue(o), [c.name, b.name, a.name])
    # A replaces C, which has DO_NOT_QUEUE and so loses the name entirely
    eq(a.request_name(N, REPLACE), 1, "A replaces C")
    eq(queue(o), [a.name, b.name])
    # release hands over to the first waiter
    eq(a.release_name(N), 1, "A releases")
    eq(queue(o), [b.name])
    # a waiter that releases leaves silently
    eq(c.request_name(N, 0), 2)
    eq(c.release_name(N), 1)
    eq(queue(o), [b.name])

    wait_for(lambda: len(noc(o, N)) >= 4, what="NameOwnerChanged")
    pump(0.1)
    eq(noc(o, N), [(N, "", a.name), (N, a.name, c.name), (N, c.name, a.name),
                   (N, a.name, b.name)], "NameOwnerChanged sequence")
    eq(acquired(a), [N, N], "A NameAcquired")
    eq(lost(a), [N, N], "A NameLost")
    eq(acquired(c), [N], "C NameAcquired")
    eq(lost(c), [N], "C NameLost")
    eq(acquired(b), [N], "B NameAcquired")
    eq(lost(b), [], "B NameLost")

    # the owner disconnects: name gone (nobody waits)
    b.close()
    wait_for(lambda: len(noc(o, N)) >= 5, what="NameOwnerChanged on disconnect")
    eq(noc(o, N)[-1], (N, b.name, ""))
    eq(queue(o), [])


def test_do_not_queue_and_queue_on_disconnect():
    o = Client()
    o.add_match("type='signal',member='NameOwnerChanged',arg0='%s'" % N)
    a, b = Client(), Client()
    eq(a.request_name(N, NOQUEUE), 1)
    eq(b.request_name(N, NOQUEUE), 3, "DO_NOT_QUEUE while owned")
    eq(b.request_name(N, REPLACE | NOQUEUE), 3, "not allowed to replace")
    eq(queue(o), [a.name])
    eq(b.request_name(N, 0), 2)
    a.close()
    wait_for(lambda: len(noc(o, N)) >= 2, what="handover")
    eq(noc(o, N), [(N, "", a.name), (N, a.name, b.name)])
    wait_for(lambda: acquired(b) == [N], what="NameAcquired to B")


def test_unique_name_lifecycle():
    o = Client()
    o.add_match("type='signal',member='NameOwnerChanged'")
    a = Client()
    names = [a.name]
    wait_for(lambda: noc(o, a.name), what="unique name appears")
    eq(noc(o, a.name), [(a.name, "", a.name)])
    a.request_name("org.bus1.Test.U1")
    a.request_name("org.bus1.Test.U2")
    wait_for(lambda: noc(o, "org.bus1.Test.U2"), what="U2 owned")
    o.clear()
    a.close()
    wait_for(lambda: noc(o, names[0]), what="unique name disappears")
    # well-known names go first, newest first, then the unique name
    got = [tuple(str(x) for x in m.get_args_list()) for m in o.signals("NameOwnerChanged")]
    eq(got, [("org.bus1.Test.U2", names[0], ""), ("org.bus1.Test.U1", names[0], ""),
             (names[0], names[0], "")])
    for _ in range(5):
        c = Client()
        assert c.name not in names, (c.name, names)
        names.append(c.name)
        c.close()
    nums = [int(n.split(".")[1]) for n in names]
    eq(nums, sorted(nums), "unique names increase")


def test_own_unique_acquired():
    a = Client()
    wait_for(lambda: acquired(a, a.name), what="NameAcquired for unique name")


def test_names_per_connection_limit_released():
    a = Client()
    for i in range(50):
        eq(a.request_name("org.bus1.Test.Many.N%d" % i), 1)
    names = [str(x) for x in a.drv("ListNames")]
    eq(sum(1 for n in names if n.startswith("org.bus1.Test.Many.")), 50)
    a.close()
    b = Client()
    names = [str(x) for x in b.drv("ListNames")]
    eq(sum(1 for n in names if n.startswith("org.bus1.Test.Many.")), 0)


run([test_queue_flags, test_do_not_queue_and_queue_on_disconnect, test_unique_name_lifecycle,
     test_own_unique_acquired, test_names_per_connection_limit_released])
