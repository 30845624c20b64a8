# SPDX-License-Identifier: LGPL-2.1-or-later
"""Match rules, key by key: a receiver with one rule gets exactly the
signals that match it, each once."""

import dbus

from dbustest import Client, eq, wait_for, run

IFACE = "org.bus1.Test.Match"


class Emission:
    def __init__(self, tag, path="/org/bus1/test", iface=IFACE, member="Sig", sig="",
                 args=(), dest=None):
        self.tag, self.path, self.iface, self.member = tag, path, iface, member
        self.sig, self.args, self.dest = sig, args, dest


def deliveries(rules, emissions, sender=None, extra=None):
    """Give a fresh receiver @rules, emit @emissions from @sender, return the
    tags the receiver got (in order). A sentinel signal marks the end."""
    r = Client()
    s = sender or Client()
    for rule in rules:
        r.add_match(rule)
    r.add_match("type='signal',member='Sentinel',interface='org.bus1.Test.End'")
    if extra:
        extra(r, s)
    for e in emissions:
        args = (e.tag,) + tuple(e.args)
        s.emit(e.path, e.iface, e.member, "s" + e.sig, args, dest=e.dest)
    s.emit("/", "org.bus1.Test.End", "Sentinel")
    wait_for(lambda: r.signals("Sentinel"), what="sentinel")
    tags = [str(m.get_args_list()[0]) for m in r.signals(iface=None)
            if m.get_member() != "Sentinel" and m.get_interface() != "org.freedesktop.DBus"]
    r.close()
    if sender is None:
        s.close()
    return tags


def test_type():
    em = [Emission("a")]
    eq(deliveries(["type='signal',interface='%s'" % IFACE], em), ["a"])
    eq(deliveries(["type='method_call',interface='%s'" % IFACE], em), [])
    eq(deliveries(["type='error'"], em), [])


def test_interface_member_path():
    em = [Emission("a"), Emission("b", iface=IFACE + ".Other"), Emission("c", member="Other"),
          Emission("d", path="/org/bus1/test/sub"), Emission("e", path="/org/bus1/testx"),
          Emission("f", path="/org/bus1")]
    eq(deliveries(["interface='%s'" % IFACE], em), ["a", "c", "d", "e", "f"])
    eq(deliveries(["interface='%s',member='Other'" % IFACE], em), ["c"])
    eq(deliveries(["member='Sig',path='/org/bus1/test'"], em), ["a", "b"])
    eq(deliveries(["member='Sig',path_namespace='/org/bus1/test'"], em), ["a", "b", "d"])
    eq(deliveries(["member='Sig',path_namespace='/'", "member='Other'"], em),
       ["a", "b", "c", "d", "e", "f"])


def test_sender():
    s = Client()
    s.request_name("org.bus1.Test.Sender")
    em = [Emission("a")]
    eq(deliveries(["sender='%s'" % s.name], em, sender=s), ["a"])
    eq(deliveries(["sender='org.bus1.Test.Sender'"], em, sender=s), ["a"])
    eq(deliveries(["sender='org.bus1.Test.Other'"], em, sender=s), [])
    eq(deliveries(["sender=':1.999999'"], em, sender=s), [])
    # a waiting (non-primary) owner is not the sender
    t = Client()
    t.request_name("org.bus1.Test.Sender")
    eq(deliveries(["sender='org.bus1.Test.Sender'"], em, sender=t), [])


def test_args():
    em = [Emission("a", sig="s", args=("x",)), Emission("b", sig="s", args=("y",)),
          Emission("c", sig="i", args=(5,)), Emission("d", sig="ss", args=("y", "x")),
          Emission("e", sig="o", args=("/x",))]
    # arg0 is the tag itself
    eq(deliveries(["interface='%s',arg0='b'" % IFACE], em), ["b"])
    eq(deliveries(["interface='%s',arg1='x'" % IFACE], em), ["a"])
    eq(deliveries(["interface='%s',arg2='x'" % IFACE], em), ["d"])
    eq(deliveries(["interface='%s',arg1='5'" % IFACE], em), [])
    # argN matches strings only, not object paths
    eq(deliveries(["interface='%s',arg1='/x'" % IFACE], em), [])


def test_arg_path_namespace():
    em = [Emission("a", sig="s", args=("/aa/b",)), Emission("b", sig="s", args=("/aa/",)),
          Emission("c", sig="o", args=("/aa/b",)), Emission("d", sig="s", args=("/aa/bc",)),
          Emission("e", sig="s", args=("/a",)), Emission("f", sig="s", args=("/",))]
    # "/" ends with '/' and is a prefix of "/aa/": it matches too
    eq(deliveries(["interface='%s',arg1path='/aa/'" % IFACE], em), ["a", "b", "c", "d", "f"])
    eq(deliveries(["interface='%s',arg1path='/aa/b'" % IFACE], em), ["a", "b", "c", "f"])
    em = [Emission("org.bus1"), Emission("org.bus1.X"), Emission("org.bus12"),
          Emission("org"), Emission("org.bus1.X.Y")]
    eq(deliveries(["interface='%s',arg0namespace='org.bus1'" % IFACE], em),
       ["org.bus1", "org.bus1.X", "org.bus1.X.Y"])


def test_destination_and_eavesdrop():
    t = Client()
    em = [Emission("uni", dest=t.name), Emission("broad")]
    # without eavesdrop a third party sees only the broadcast
    eq(deliveries(["interface='%s'" % IFACE], em), ["broad"])
    eq(deliveries(["interface='%s',eavesdrop=true" % IFACE], em), ["uni", "broad"])
    eq(deliveries(["interface='%s',eavesdrop='false'" % IFACE], em), ["broad"])
    eq(deliveries(["destination='%s',eavesdrop=true" % t.name], em), ["uni"])
    # the addressed recipient gets unicast signals without any rule
    r = Client()
    s = Client()
    s.emit("/", IFACE, "Direct", "s", ("d",), dest=r.name)
    wait_for(lambda: r.signals("Direct"), what="unicast signal")


def test_each_receiver_once():
    em = [Emission("a")]
    rules = ["interface='%s'" % IFACE, "interface='%s'" % IFACE, "member='Sig'",
             "type='signal'"]
    eq(deliveries(rules, em), ["a"])


def test_remove_match():
    def extra(r, s):
        r.drv("RemoveMatch", "s", "interface='%s'" % IFACE)
    em = [Emission("a")]
    eq(deliveries(["interface='%s'" % IFACE, "interface='%s'" % IFACE], em), ["a"])
    # two equal rules, one removed: still delivered
    eq(deliveries(["interface='%s'" % IFACE, "interface='%s'" % IFACE], em, extra=extra),
       ["a"])
    eq(deliveries(["interface='%s'" % IFACE], em, extra=extra), [])


def test_quoting():
    em = [Emission("it's"), Emission("a,b"), Emission("plain")]
    eq(deliveries(["interface='%s',arg0='it'\\''s'" % IFACE], em), ["it's"])
    eq(deliveries(["interface='%s',arg0='a,b'" % IFACE], em), ["a,b"])
    # whitespace before a key is skipped; unquoted values are taken as they are
    eq(deliveries([" interface='%s',  arg0=plain" % IFACE], em), ["plain"])


def test_driver_signals():
    r = Client()
    r.add_match("type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',"
                "arg0='org.bus1.Test.M'")
    s = Client()
    s.request_name("org.bus1.Test.M")
    s.request_name("org.bus1.Test.Other")
    wait_for(lambda: r.signals("NameOwnerChanged"), what="NameOwnerChanged")
    s.close()
    wait_for(lambda: len(r.signals("NameOwnerChanged")) == 2, what="2nd NameOwnerChanged")
    eq([str(m.get_args_list()[0]) for m in r.signals("NameOwnerChanged")],
       ["org.bus1.Test.M", "org.bus1.Test.M"])


run([test_type, test_interface_member_path, test_sender, test_args, test_arg_path_namespace,
     test_destination_and_eavesdrop, test_each_receiver_once, test_remove_match, test_quoting,
     test_driver_signals])
