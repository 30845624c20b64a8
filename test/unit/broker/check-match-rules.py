#!/usr/bin/python3
# Check the expectations of match-rules.txt against a real dbus-daemon: starts
# a private session bus, sends AddMatch for every rule and compares the
# outcome. Usage: check-match-rules.py match-rules.txt. Exit 77 (skip) if
# dbus-daemon or python3-dbus is missing.
import os, re, subprocess, sys
try:
    import dbus
except ImportError:
    sys.exit(77)

def decode(s):
    return re.sub(r'\\(n|t|r|\\|x[0-9a-fA-F]{2})',
                  lambda m: {'n': '\n', 't': '\t', 'r': '\r', '\\': '\\'}.get(
                      m.group(1), None) or chr(int(m.group(1)[1:], 16)), s)

def cases(path):
    for line in open(path, encoding='utf-8'):
        line = line.rstrip('\n')
        if not line or line.startswith('#'):
            continue
        res, rule = line.split('|', 1)
        yield res, decode(rule)
    yield 'OK', 'arg0=\'' + 'x' * 1017 + '\''          # 1024 bytes
    yield 'TOOLONG', 'arg0=\'' + 'x' * 1018 + '\''     # 1025 bytes

def main():
    try:
        d = subprocess.Popen(['dbus-daemon', '--session', '--nofork', '--print-address'],
                             stdout=subprocess.PIPE, text=True)
    except FileNotFoundError:
        sys.exit(77)
    try:
        addr = d.stdout.readline().strip()
        bus = dbus.bus.BusConnection(addr)
        bad = 0
        for res, rule in cases(sys.argv[1]):
            try:
                bus.call_blocking('org.freedesktop.DBus', '/org/freedesktop/DBus',
                                  'org.freedesktop.DBus', 'AddMatch', 's', [rule])
                got = 'OK'
                bus.call_blocking('org.freedesktop.DBus', '/org/freedesktop/DBus',
                                  'org.freedesktop.DBus', 'RemoveMatch', 's', [rule])
            except dbus.DBusException as e:
                got = {'org.freedesktop.DBus.Error.MatchRuleInvalid': 'INVALID',
                       'org.freedesktop.DBus.Error.LimitsExceeded': 'TOOLONG'}.get(
                           e.get_dbus_name(), e.get_dbus_name())
            if got != res:
                bad += 1
                print('MISMATCH expected %s, dbus-daemon says %s: %r' % (res, got, rule))
        print('%d mismatches' % bad)
        sys.exit(1 if bad else 0)
    finally:
        d.terminate()
        d.wait()

main()
