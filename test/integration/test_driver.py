# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every method of the bus driver, with its errors (python3-dbus = libdbus)."""

import os
import re

import dbus

from dbustest import (ADDRESS, DIFACE, DPATH, DRIVER, E, Client, eq, expect_error,
                      run)


def test_hello_twice():
    c = Client()
    assert re.match(r"^:1\.[0-9]+$", c.name), c.name
    expect_error(E + "Failed", c.drv, "Hello")


def test_request_release_name():
    c = Client()
    eq(c.request_name("org.bus1.Test.A"), 1, "RequestName new")
    eq(c.request_name("org.bus1.Test.A"), 4, "RequestName again")
    eq(c.release_name("org.bus1.Test.A"), 1, "ReleaseName")
    eq(c.release_name("org.bus1.Test.A"), 2, "ReleaseName non-existent")
    d = Client()
    eq(d.request_name("org.bus1.Test.B"), 1)
    eq(c.release_name("org.bus1.Test.B"), 3, "ReleaseName not owner")
    for bad in ("", "foo", "a..b", ".a.b", "1a.b", "a.b.", "a/b.c"):
        expect_error(E + "InvalidArgs", c.request_name, bad)
        expect_error(E + "InvalidArgs", c.release_name, bad)
    expect_error(E + "InvalidArgs", c.request_name, ":1.12345")
    expect_error(E + "InvalidArgs", c.release_name, ":1.12345")
    expect_error(E + "InvalidArgs", c.request_name, "org.freedesktop.DBus")
    expect_error(E + "InvalidArgs", c.release_name, "org.freedesktop.DBus")
    # unknown flag bits are ignored
    eq(c.request_name("org.bus1.Test.C", 0x100), 1)


def test_list_names():
    c = Client()
    c.request_name("org.bus1.Test.List")
    names = [str(x) for x in c.drv("ListNames")]
    eq(names[0], DRIVER, "first entry")
    assert c.name in names and "org.bus1.Test.List" in names, names
    act = [str(x) for x in c.drv("ListActivatableNames")]
    assert DRIVER in act, act


def test_name_has_owner_get_owner():
    c = Client()
    d = Client()
    d.request_name("org.bus1.Test.Owner")
    eq(bool(c.drv("NameHasOwner", "s", DRIVER)), True)
    eq(bool(c.drv("NameHasOwner", "s", d.name)), True)
    eq(bool(c.drv("NameHasOwner", "s", "org.bus1.Test.Owner")), True)
    eq(bool(c.drv("NameHasOwner", "s", "org.bus1.Test.Nobody")), False)
    eq(bool(c.drv("NameHasOwner", "s", ":1.999999")), False)
    eq(str(c.drv("GetNameOwner", "s", DRIVER)), DRIVER)
    eq(str(c.drv("GetNameOwner", "s", "org.bus1.Test.Owner")), d.name)
    eq(str(c.drv("GetNameOwner", "s", d.name)), d.name)
    expect_error(E + "NameHasNoOwner", c.drv, "GetNameOwner", "s", "org.bus1.Test.Nobody")
    expect_error(E + "NameHasNoOwner", c.drv, "GetNameOwner", "s", ":1.999999")


def test_list_queued_owners():
    a, b = Client(), Client()
    a.request_name("org.bus1.Test.Q")
    b.request_name("org.bus1.Test.Q")
    eq([str(x) for x in a.drv("ListQueuedOwners", "s", "org.bus1.Test.Q")], [a.name, b.name])
    eq([str(x) for x in a.drv("ListQueuedOwners", "s", DRIVER)], [DRIVER])
    eq([str(x) for x in a.drv("ListQueuedOwners", "s", b.name)], [b.name])
    expect_error(E + "NameHasNoOwner", a.drv, "ListQueuedOwners", "s", "org.bus1.Test.None")


def test_start_service_by_name():
    c = Client()
    # As dbus-daemon: a name without a .service file cannot be started, even
    # when it has an owner (and even for the driver's own name).
    c.request_name("org.bus1.Test.Running")
    expect_error(E + "ServiceUnknown", c.drv, "StartServiceByName", "su",
                 "org.bus1.Test.Running", 0)
    expect_error(E + "ServiceUnknown", c.drv, "StartServiceByName", "su", DRIVER, 0)
    expect_error(E + "ServiceUnknown", c.drv, "StartServiceByName", "su",
                 "org.bus1.Test.NotAService", 0)


def test_update_activation_environment():
    c = Client()
    eq(c.drv("UpdateActivationEnvironment", "a{ss}", {"BUS1_TEST": "1", "FOO": "bar"}), None,
       "an empty reply")
    eq(c.drv("UpdateActivationEnvironment", "a{ss}", {}), None, "an empty reply to nothing")
    expect_error(E + "InvalidArgs", c.drv, "UpdateActivationEnvironment", "s", "BUS1_TEST=1")
    expect_error(E + "InvalidArgs", c.drv, "UpdateActivationEnvironment")


def test_credentials():
    c = Client()
    d = Client()
    eq(int(c.drv("GetConnectionUnixUser", "s", d.name)), os.getuid())
    eq(int(c.drv("GetConnectionUnixUser", "s", DRIVER)), os.getuid())
    eq(int(c.drv("GetConnectionUnixProcessID", "s", d.name)), os.getpid())
    bus_pid = int(c.drv("GetConnectionUnixProcessID", "s", DRIVER))
    if "BUS_PID" in os.environ:
        eq(bus_pid, int(os.environ["BUS_PID"]), "bus pid")
    cred = c.drv("GetConnectionCredentials", "s", d.name)
    eq(int(cred["UnixUserID"]), os.getuid())
    eq(int(cred["ProcessID"]), os.getpid())
    if "UnixGroupIDs" in cred:
        # Its primary group and every supplementary one (SO_PEERGROUPS).
        gids = {int(g) for g in cred["UnixGroupIDs"]}
        assert os.getgid() in gids and set(os.getgroups()) <= gids, (gids, os.getgroups())
    cred = c.drv("GetConnectionCredentials", "s", DRIVER)
    eq(int(cred["UnixUserID"]), os.getuid())
    for m in ("GetConnectionUnixUser", "GetConnectionUnixProcessID",
              "GetConnectionCredentials", "GetAdtAuditSessionData",
              "GetConnectionSELinuxSecurityContext"):
        expect_error(E + "NameHasNoOwner", c.drv, m, "s", "org.bus1.Test.None")
    expect_error(E + "AdtAuditDataUnknown", c.drv, "GetAdtAuditSessionData", "s", d.name)
    if not os.path.exists("/sys/fs/selinux/enforce"):
        expect_error(E + "SELinuxSecurityContextUnknown", c.drv,
                     "GetConnectionSELinuxSecurityContext", "s", d.name)


def test_match_methods():
    c = Client()
    c.add_match("type='signal',interface='org.bus1.Test'")
    c.drv("RemoveMatch", "s", "type='signal',interface='org.bus1.Test'")
    expect_error(E + "MatchRuleNotFound", c.drv, "RemoveMatch", "s",
                 "type='signal',interface='org.bus1.Test'")
    for bad in ("type='nonsense'", "foo='bar'", "interface='a'", "member='1x'",
                "path='noslash'", "type='signal',type='signal'", "arg64='x'",
                "path='/a',path_namespace='/b'", "sender='!!'", "eavesdrop='maybe'",
                "type='signal"):
        expect_error(E + "MatchRuleInvalid", c.add_match, bad)
    expect_error(E + "MatchRuleInvalid", c.drv, "RemoveMatch", "s", "type='bogus'")


def test_get_id_machine_id_ping():
    c = Client()
    bus_id = str(c.drv("GetId"))
    assert re.match(r"^[0-9a-f]{32}$", bus_id), bus_id
    eq(str(c.drv("GetId")), bus_id, "stable GetId")
    mid = str(c.drv("GetMachineId", iface="org.freedesktop.DBus.Peer"))
    assert re.match(r"^[0-9a-f]{32}$", mid), mid
    if os.path.exists("/etc/machine-id"):
        eq(mid, open("/etc/machine-id").read().strip())
    c.drv("Ping", iface="org.freedesktop.DBus.Peer")
    c.call(DRIVER, "/", "org.freedesktop.DBus.Peer", "Ping")
    c.call(DRIVER, "/some/where", "org.freedesktop.DBus.Peer", "GetMachineId")


def test_reload_config():
    c = Client()
    name = c.drv("GetId")
    eq(c.drv("ReloadConfig"), None, "an empty reply")
    expect_error(E + "InvalidArgs", c.drv, "ReloadConfig", "s", "now")
    # The bus serves on, the same bus, its names kept.
    eq(c.drv("GetId"), name, "GetId after the reload")
    eq(c.request_name("org.bus1.Test.Reload"), 1, "RequestName after the reload")
    eq(bool(c.drv("NameHasOwner", "s", c.name)), True, "still connected")


def test_introspect():
    c = Client()
    xml = str(c.drv("Introspect", iface="org.freedesktop.DBus.Introspectable"))
    for s in ('<interface name="org.freedesktop.DBus">', 'name="RequestName"',
              '<interface name="org.freedesktop.DBus.Monitoring">',
              '<interface name="org.freedesktop.DBus.Properties">',
              'name="NameOwnerChanged"', '<property name="Features" type="as"'):
        assert s in xml, s
    xml = str(c.call(DRIVER, "/", "org.freedesktop.DBus.Introspectable", "Introspect"))
    assert '<node name="org/freedesktop/DBus"/>' in xml
    assert "org.freedesktop.DBus.Monitoring" not in xml


def test_properties():
    c = Client()
    props = "org.freedesktop.DBus.Properties"
    ifaces = [str(x) for x in c.drv("Get", "ss", DIFACE, "Interfaces", iface=props)]
    assert "org.freedesktop.DBus.Monitoring" in ifaces, ifaces
    feats = c.drv("Get", "ss", DIFACE, "Features", iface=props)
    assert isinstance(feats, dbus.Array)
    allp = c.drv("GetAll", "s", DIFACE, iface=props)
    assert "Features" in allp and "Interfaces" in allp, allp
    eq(len(c.drv("GetAll", "s", "org.freedesktop.DBus.Peer", iface=props)), 0)
    expect_error(E + "PropertyReadOnly", c.drv, "Set", "ssv", DIFACE, "Features",
                 dbus.Array([], signature="s"), iface=props)
    expect_error(E + "UnknownInterface", c.drv, "Get", "ss", "org.bus1.Nope", "X",
                 iface=props)
    expect_error(E + "UnknownProperty", c.drv, "Get", "ss", DIFACE, "Nope", iface=props)
    # Properties exists only at the canonical path
    expect_error(E + "UnknownInterface", c.call, DRIVER, "/", props, "Get", "ss",
                 (DIFACE, "Features"))


def test_stats():
    c = Client()
    d = Client()
    d.add_match("type='signal',member='StatsTest'")
    st = "org.freedesktop.DBus.Debug.Stats"
    stats = c.drv("GetStats", iface=st)
    assert int(stats["ActiveConnections"]) >= 2, stats
    cs = c.drv("GetConnectionStats", "s", d.name, iface=st)
    assert "Serial" in cs
    expect_error(E + "NameHasNoOwner", c.drv, "GetConnectionStats", "s",
                 "org.bus1.Test.None", iface=st)
    rules = c.drv("GetAllMatchRules", iface=st)
    assert any("StatsTest" in str(r) for r in rules.get(d.name, [])), rules


def test_errors():
    c = Client()
    # wrong signature
    e = expect_error(E + "InvalidArgs", c.drv, "GetNameOwner", "u", 1)
    assert "wrong args" in e.get_dbus_message(), e.get_dbus_message()
    expect_error(E + "InvalidArgs", c.drv, "RequestName", "s", "org.bus1.X")
    expect_error(E + "InvalidArgs", c.drv, "ListNames", "s", "x")
    # unknown member / interface
    expect_error(E + "UnknownMethod", c.drv, "NoSuchMethod")
    expect_error(E + "UnknownMethod", c.call, DRIVER, DPATH, None, "NoSuchMethod")
    expect_error(E + "UnknownInterface", c.drv, "Foo", iface="org.bus1.NoSuchInterface")
    # non-canonical path: new interfaces are not there
    expect_error(E + "UnknownInterface", c.call, DRIVER, "/", "org.freedesktop.DBus.Monitoring",
                 "BecomeMonitor", "asu", ([], 0))
    # ... old methods are
    c.call(DRIVER, "/foo", DIFACE, "GetId")
    # BecomeMonitor flags
    expect_error(E + "InvalidArgs", c.drv, "BecomeMonitor", "asu", [], 1,
                 iface="org.freedesktop.DBus.Monitoring")
    expect_error(E + "MatchRuleInvalid", c.drv, "BecomeMonitor", "asu", ["type='x'"], 0,
                 iface="org.freedesktop.DBus.Monitoring")
    # still usable after all this
    c.drv("GetId")


run([test_hello_twice, test_request_release_name, test_list_names,
     test_name_has_owner_get_owner, test_list_queued_owners, test_start_service_by_name,
     test_update_activation_environment, test_credentials, test_match_methods,
     test_get_id_machine_id_ping, test_reload_config, test_introspect, test_properties,
     test_stats, test_errors])
