#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Wire broker/native.{c,h} into the broker's glue files (bus, connection, router, meson).

    wire-broker.py [SRCDIR]        (default: the source tree this file is in)

These are exactly the call sites native.h documents ("Wiring"). Each edit is anchored on a
line of the current glue code; a missing anchor is an error (nothing is written then), an edit
already present is skipped, so running it twice is harmless.
"""
import os
import sys

src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..')
b = os.path.join(src, 'broker')

EDITS = [
    ('bus.h', 'struct activation;\n', 'struct native;\n', 'after'),
    ('bus.h', '\tstruct bus_policy *policy;',
     '\tstruct native *native;\t\t/* bus1 transport (native.h), NULL: sockets only */\n',
     'line-after'),
    ('bus.c', '#include "broker/log.h"\n', '#include "broker/native.h"\n', 'after'),
    ('bus.c', '\tlist_for_each_entry(l, &bus->listeners, link) {\n\t\tr = listener_attach(l);',
     '\t/* Native clients: the bus1 transport, when /dev/bus1 exists. */\n'
     '\tr = native_new(&bus->native, bus);\n\tif (r < 0)\n\t\treturn r;\n\n', 'before'),
    ('bus.c', '\tbus_free_dead(bus);\n',
     '\t/* After the connections: they release their bus1 nodes first. */\n'
     '\tbus->native = native_free(bus->native);\n', 'after-first'),
    ('connection.h', '\tstruct socket *socket;\n',
     '\tstruct native_conn *native;\t/* bus1 transport after the bootstrap (native.h) */\n',
     'after'),
    ('connection.c', '#include "broker/monitor.h"\n', '#include "broker/native.h"\n', 'after'),
    ('connection.c',
     '\tif (conn->closed || conn->overflow)\n\t\treturn CONNECTION_E_DEAD;\n'
     '\tif (conn->n_queued_bytes',
     '\tif (conn->native)\n\t\treturn native_conn_queue(conn->native, msg);\n',
     'before-last-line'),
    ('connection.c', '\t/* D-Bus state: the router emits NameOwnerChanged, NoReply, ... */\n',
     '\t/* The client sees its connection node destroyed. */\n'
     '\tconn->native = native_conn_free(conn->native);\n', 'before'),
    ('router.c', '#include "broker/monitor.h"\n', '#include "broker/native.h"\n', 'after'),
    ('router.c', '\tif (!conn->registered) {\n\t\tif (!is_hello(msg)) {',
     '\t/* The bus1 bootstrap comes before Hello (docs/native-protocol.md). */\n'
     '\tif (!conn->registered && native_is_connect(msg))\n'
     '\t\treturn native_connect(conn->bus->native, conn, msg, &conn->native);\n', 'before'),
    ('bus.h', '\tstruct native *native;',
     '\tstruct native_rules *native_rules; /* the policy for the direct path (native.h) */\n',
     'line-after'),
    ('bus.c', '\t\t\t\t\tlog_warn("cannot apply the new policy to %s",\n'
     '\t\t\t\t\t\t connection_name(c));\n',
     '\t\t\tif (native_rules_update(&bus->native_rules, config) < 0)\n'
     '\t\t\t\tlog_warn("no direct path for native clients: out of memory");\n'
     '\t\t\tnative_policy_changed(bus->native);\n', 'after'),
    ('bus.c', '\tbus->native = native_free(bus->native);\n',
     '\tbus->native_rules = native_rules_free(bus->native_rules);\n', 'after'),
    ('meson.build', 'bus1_broker = executable(',
     "# The bus1 transport (owner: native engineer; native.h, docs/native-protocol.md).\n"
     "broker_sources += files('native.c')\nbroker_deps += dep_libbus1\n", 'before'),
]


def apply(text, anchor, ins, how):
    if anchor not in text:
        raise KeyError(anchor)
    i = text.index(anchor)
    if how == 'after' or how == 'after-first':
        j = i + len(anchor)
    elif how == 'before':
        j = i
    elif how == 'line-after':
        j = text.index('\n', i) + 1
    elif how == 'before-last-line':
        j = i + anchor.rindex('\n') + 1
    return text[:j] + ins + text[j:]


files = {}
for name, anchor, ins, how in EDITS:
    path = os.path.join(b, name)
    text = files.get(path) or open(path).read()
    if ins in text:
        continue
    try:
        files[path] = apply(text, anchor, ins, how)
    except KeyError:
        sys.exit('wire-broker: anchor not found in %s: %r' % (path, anchor))
# The library block of the bus1 transport is superseded by the executable's sources.
mb = os.path.join(b, 'meson.build')
if mb in files:
    t = files[mb]
    s = t.find('# --- bus1 transport (owner: native engineer)')
    e = t.find('# --- end of bus1 transport')
    if s >= 0 and e > s:
        files[mb] = t[:s].rstrip('\n') + '\n' + t[t.index('\n', e) + 1:]
for path, text in files.items():
    open(path, 'w').write(text)
    print('wired', path)
