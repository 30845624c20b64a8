#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Count the walk of one socket call through an instrumented bus1-broker:
# rooms (files), moves (changes of file), entries per file, per call.
import os, sys, subprocess, time, signal, tempfile
import dbus

binary, out = sys.argv[1], sys.argv[2]
N = 200
d = tempfile.mkdtemp()
env = dict(os.environ, WALK_OUT=out)
r, w = os.pipe()
p = subprocess.Popen([binary, "--session", "--nofork", "--address=unix:path=%s/bus" % d,
                      "--print-address=%d" % w], pass_fds=[w], env=env)
os.close(w)
addr = os.read(r, 4096).decode().strip()

# service in a child process
svc = subprocess.Popen([sys.executable, "-c", r'''
import sys, dbus, dbus.service, dbus.mainloop.glib
from gi.repository import GLib
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
name = dbus.service.BusName("org.example.Walk", bus)
class O(dbus.service.Object):
    @dbus.service.method("org.example.Walk", in_signature="s", out_signature="s")
    def Echo(self, s): return s
o = O(bus, "/walk")
print("ready", flush=True)
GLib.MainLoop().run()
''', addr], stdout=subprocess.PIPE)
svc.stdout.readline()
bus = dbus.bus.BusConnection(addr)
obj = bus.get_object("org.example.Walk", "/walk")
for _ in range(50):
    obj.Echo("x", dbus_interface="org.example.Walk")
time.sleep(0.3)
os.kill(p.pid, signal.SIGWINCH)
time.sleep(0.1)
for _ in range(N):
    obj.Echo("x", dbus_interface="org.example.Walk")
time.sleep(0.3)
os.kill(p.pid, signal.SIGWINCH)
time.sleep(0.2)
svc.kill(); p.terminate(); p.wait()
os.rmdir(d) if not os.listdir(d) else None
print(N)
