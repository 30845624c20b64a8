# SPDX-License-Identifier: LGPL-2.1-or-later
"""The errors of bad match rules against /usr/bin/dbus-daemon (issue 43, item
9): every way a rule can be bad (unknown key, invalid values of each key, argN
out of range or malformed, a key twice, quoting, missing '=', a rule over the
length limit), given to AddMatch, RemoveMatch and BecomeMonitor, which share
the parser; too many rules for a connection; RemoveMatch of a rule never
added. The same raw-socket scenarios run on bus1-broker AND on
/usr/bin/dbus-daemon (when installed), each on a private bus of its own
(run-with-bus.sh, with a small max_match_rules_per_connection), and both must
give the outcomes in EXPECTED, which are what dbus-daemon 1.14 does: the
error's name and its text (byte for byte: dbus-daemon ends many of them with
a newline), and that the connection stays.

  test_match_parity.py BUS1_BROKER        both buses, compare
  test_match_parity.py --scenarios FILE   inside run-with-bus.sh: one bus
"""

import json
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity  # noqa: E402
from rawclient import (FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,  # noqa: E402
                       FIELD_MEMBER, FIELD_PATH, FIELD_SIGNATURE, METHOD_CALL, METHOD_RETURN,
                       Raw, alive, body_strings, marshal, session_config)

D, P, I = "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus"
E = I + ".Error."
INVALID, LIMITS, NOT_FOUND = E + "MatchRuleInvalid", E + "LimitsExceeded", E + "MatchRuleNotFound"
MAX_RULES = 4
# dbus-daemon wants a <listen> even when --address replaces it
CONFIG = session_config("<listen>unix:tmpdir=/tmp</listen>",
                        '<limit name="max_match_rules_per_connection">%d</limit>' % MAX_RULES)


def long_rule(n):
    """A valid rule of exactly @n bytes."""
    head = "arg0='"
    return head + "x" * (n - len(head) - 1) + "'"


OK = "ok"


def bad(text):
    return [INVALID, text]


def too_long(n):
    return [LIMITS, "Match rule text is %d bytes, maximum is 1024" % n]


def twice(key):
    return bad("Key %s specified twice in match rule\n" % key)


def arg_unparsable(key):
    return bad("Key '%s' in match rule starts with 'arg' but could not parse arg number. "
               "Should be 'arg0' or 'arg7' for example.\n" % key)


def arg_junk(key, n):
    return bad("Key '%s' in match rule contains junk after argument number (%d). Only "
               "'arg%dpath' (for example) or 'arg0namespace' are valid" % (key, n, n))


def arg_above(key, n):
    return bad("Key '%s' in match rule has arg number %d but the maximum is 63.\n" % (key, n))


UNBALANCED = bad("Unbalanced quotation marks in match rule")
NO_EQUALS = bad("Match rule has a key with no subsequent '=' character")
PATH_TWICE = bad("path or path_namespace specified twice in match rule\n")

# (what, rule, what dbus-daemon 1.14 answers to AddMatch, RemoveMatch and
# BecomeMonitor of it: OK or [error name, text]). Every way to be bad, and
# near misses that are valid.
RULES = [
    ("unknown key", "type='signal',bogus='1'", bad('Unknown key "bogus" in match rule')),
    ("unknown key, unquoted", "color=red", bad('Unknown key "color" in match rule')),
    ("bad type", "type='bogus'", bad("Invalid message type (bogus) in match rule\n")),
    ("empty type", "type=''", bad("Invalid message type () in match rule\n")),
    ("bad sender", "sender='1a'", bad("Sender name '1a' is invalid\n")),
    ("bad sender, two dots", "sender='org..x'", bad("Sender name 'org..x' is invalid\n")),
    ("unique sender ':' (lenient)", "sender=':'", OK),
    ("bad interface", "interface='1a.b'", bad("Interface name '1a.b' is invalid\n")),
    ("interface of one element", "interface='nodot'",
     bad("Interface name 'nodot' is invalid\n")),
    ("bad member", "member='1a'", bad("Member name '1a' is invalid\n")),
    ("member with a space", "member='a b'", bad("Member name 'a b' is invalid\n")),
    ("empty member", "member=''", bad("Member name '' is invalid\n")),
    ("bad path", "path='no/slash'", bad("Path 'no/slash' is invalid\n")),
    ("path ending in /", "path='/a/'", bad("Path '/a/' is invalid\n")),
    ("bad path_namespace", "path_namespace='/a//b'", bad("Path '/a//b' is invalid\n")),
    ("path_namespace ending in /", "path_namespace='/a/'", bad("Path '/a/' is invalid\n")),
    ("bad destination", "destination='.x'", bad("Destination name '.x' is invalid\n")),
    ("bad arg0namespace", "arg0namespace='a..b'",
     bad("arg0namespace='a..b' is not a valid prefix of a bus name")),
    ("arg0namespace with a trailing dot", "arg0namespace='a.'",
     bad("arg0namespace='a.' is not a valid prefix of a bus name")),
    ("arg1namespace", "arg1namespace='a.b'", arg_junk("arg1namespace", 1)),
    ("arg64", "arg64='x'", arg_above("arg64", 64)),
    ("arg64path", "arg64path='/x'", arg_above("arg64path", 64)),
    ("arg999999999999999999999", "arg999999999999999999999='x'",
     arg_unparsable("arg999999999999999999999")),
    ("arg without number", "arg='x'",
     bad("Key 'arg' in match rule starts with 'arg' but lacks an arg number. "
         "Should be 'arg0' or 'arg7' for example.\n")),
    ("arg with a letter", "argx='x'", arg_unparsable("argx")),
    ("arg with junk after the number", "arg1junk='x'", arg_junk("arg1junk", 1)),
    ("arg63", "arg63='x'", OK),
    ("arg0x3 (hex)", "arg0x3='x'", OK),
    # strtoul() makes -1 the largest unsigned long
    ("arg-1", "arg-1='x'", arg_above("arg-1", 2 ** 64 - 1)),
    ("argNpath", "arg1path='/a/'", OK),
    ("argNpath of any string", "arg2path='not a path'", OK),
    ("type twice", "type='signal',type='signal'", twice("type")),
    ("sender twice", "sender='a.b',sender='a.b'", twice("sender")),
    ("interface twice", "interface='a.b',interface='a.c'", twice("interface")),
    ("member twice", "member='A',member='B'", twice("member")),
    ("path twice", "path='/a',path='/b'", PATH_TWICE),
    ("path_namespace twice", "path_namespace='/a',path_namespace='/b'", PATH_TWICE),
    ("path and path_namespace", "path='/a',path_namespace='/b'", PATH_TWICE),
    ("destination twice", "destination='a.b',destination='a.b'", twice("destination")),
    ("arg0 twice", "arg0='a',arg0='b'",
     bad("Argument arg0 matched more than once in match rule\n")),
    ("arg0 and arg0path", "arg0='a',arg0path='/b'",
     bad("Argument arg0path matched more than once in match rule\n")),
    ("arg0path and arg0namespace", "arg0path='/a',arg0namespace='b'",
     bad("Argument arg0namespace matched more than once in match rule\n")),
    ("arg1 and arg0x1", "arg1='a',arg0x1='b'",
     bad("Argument arg0x1 matched more than once in match rule\n")),
    ("eavesdrop twice", "eavesdrop='true',eavesdrop='false'", OK),
    ("eavesdrop=bogus", "eavesdrop='bogus'",
     bad("eavesdrop='bogus' is invalid, it should be 'true' or 'false'\n")),
    ("eavesdrop=TRUE", "eavesdrop=TRUE",
     bad("eavesdrop='TRUE' is invalid, it should be 'true' or 'false'\n")),
    ("unquoted values", "type=signal,member=Foo", OK),
    ("unterminated quote", "member='Foo", UNBALANCED),
    ("unterminated quote in the middle", "member='Foo,type='signal'", UNBALANCED),
    ("escaped quote outside quotes", "arg0=it\\'s", OK),
    ("backslash inside quotes", "arg0='a\\'b'", UNBALANCED),
    ("backslash inside quotes, closed", "arg0='a\\''b'", OK),
    ("escaped quote in a member", "member=a\\'b", bad("Member name 'a'b' is invalid\n")),
    ("other backslash kept", "member='a\\b'", bad("Member name 'a\\b' is invalid\n")),
    ("empty rule part", "type='signal',,member='Foo'",
     bad('Unknown key ",member" in match rule')),
    ("trailing comma", "type='signal',", OK),
    ("leading comma", ",type='signal'", bad('Unknown key ",type" in match rule')),
    ("whitespace around the key", " \t type \n = 'signal'",
     bad("Invalid message type ( signal) in match rule\n")),
    ("whitespace after '='", "type= 'signal'",
     bad("Invalid message type ( signal) in match rule\n")),
    ("key without '='", "type", NO_EQUALS),
    ("second key without '='", "type='signal',member", NO_EQUALS),
    ("key then space then value", "type 'signal'", NO_EQUALS),
    ("empty key", "='x'", OK),
    ("empty key, then junk", "type='signal',='x',bogus", OK),
    ("17th token ignored", ",".join(["eavesdrop='false'"] * 16 + ["bogus='x'"]), OK),
    ("empty rule", "", OK),
    ("a valid rule", "type='signal',sender='org.x',interface='a.b',member='M',path='/a',"
                     "destination=':1.1',arg0='x',arg1path='/y',eavesdrop='true'", OK),
    ("a rule of 1024 bytes", long_rule(1024), OK),
    ("a rule of 1025 bytes", long_rule(1025), too_long(1025)),
    ("a rule of 5000 bytes", long_rule(5000), too_long(5000)),
    ("a bad rule of 1025 bytes", "bogus='" + "x" * 1017 + "'", too_long(1025)),
]

# ------------------------------------------------------------------ scenarios


def reply(raw, serial):
    """"ok", [error name, text], or "closed"."""
    try:
        m = raw.wait_reply(serial, 3)
    except (OSError, EOFError):
        return "closed"
    if m[0] == METHOD_RETURN:
        return "ok"
    texts = body_strings(m[4]) if m[3].get(FIELD_SIGNATURE) == "s" else []
    return [m[3].get(FIELD_ERROR_NAME), texts[0] if texts else None]



def call(raw, member, rule):
    return reply(raw, raw.call(D, P, I, member, "s", (rule,)))


def strings_body(rules, flags):
    """The body of BecomeMonitor(as, u)."""
    arr = bytearray()
    for r in rules:
        while len(arr) % 4:
            arr.append(0)
        b = r.encode()
        arr += struct.pack("<I", len(b)) + b + b"\0"
    body = bytearray(struct.pack("<I", len(arr))) + arr
    while len(body) % 4:
        body.append(0)
    return bytes(body + struct.pack("<I", flags))


def become_monitor(rules, flags=0):
    """BecomeMonitor(@rules, @flags) on a new connection: its answer, and
    whether the connection is still a normal one after an error."""
    raw = Raw()
    s = raw.next_serial()
    raw.send_raw(marshal(METHOD_CALL, s, {FIELD_PATH: P, FIELD_DESTINATION: D,
                                          FIELD_INTERFACE: I + ".Monitoring",
                                          FIELD_MEMBER: "BecomeMonitor"},
                         "asu", body=strings_body(rules, flags)))
    r = reply(raw, s)
    out = [r, alive(raw) if r != "ok" else "monitor"]
    raw.close()
    return out


def scenario_rules(out):
    """Each rule to AddMatch, then RemoveMatch (which takes it back if it was
    added), on one connection; then alone to BecomeMonitor."""
    raw = Raw()
    for what, rule, _ in RULES:
        added = call(raw, "AddMatch", rule)
        removed = call(raw, "RemoveMatch", rule)
        out["AddMatch, RemoveMatch: " + what] = [added, removed, alive(raw)]
    for what, rule, _ in RULES:
        out["BecomeMonitor: " + what] = become_monitor([rule])
    raw.close()


def scenario_monitor_lists(out):
    out["BecomeMonitor: a bad rule after a good one"] = \
        become_monitor(["type='signal'", "member='1a'"])
    out["BecomeMonitor: two bad rules"] = become_monitor(["member='1a'", "bogus='x'"])
    # dbus-daemon reads all arguments and checks the flags before any rule.
    out["BecomeMonitor: a bad rule and flags"] = become_monitor(["member='1a'"], 1)
    out["BecomeMonitor: no rule"] = become_monitor([])


def scenario_remove(out):
    """RemoveMatch of what is not there, and of rules equal by value."""
    raw = Raw()
    res = []
    for member, rule in [("RemoveMatch", "type='signal'"),
                         ("AddMatch", "type='signal',member='A'"),
                         ("AddMatch", "type='signal',member='A'"),
                         ("RemoveMatch", "member=A,type=signal"),
                         ("RemoveMatch", " type = 'signal' , member = 'A' "),
                         ("RemoveMatch", "type='signal',member='A'"),
                         ("AddMatch", "member='A',eavesdrop='true'"),
                         ("RemoveMatch", "member='A'"),
                         ("RemoveMatch", "member='A',eavesdrop='false',eavesdrop='true'"),
                         ("RemoveMatch", "member='A',eavesdrop='true'")]:
        res.append([member, rule, call(raw, member, rule)])
    out["RemoveMatch: one by one"] = res
    out["RemoveMatch: connection stays"] = alive(raw)
    raw.close()


def scenario_limit(out):
    """max_match_rules_per_connection: the limit is checked before the rule
    is parsed; a removed rule makes room again."""
    raw = Raw()
    res = []
    for i in range(MAX_RULES):
        res.append(call(raw, "AddMatch", "member='M%d'" % i))
    for rule in ("member='Over'", "member='1a'", "bogus", "type='signal'," + "x" * 1100):
        res.append(call(raw, "AddMatch", rule))
    res.append(call(raw, "RemoveMatch", "member='M0'"))
    res.append(call(raw, "AddMatch", "member='Again'"))
    res.append(call(raw, "AddMatch", "member='Over'"))
    # The text names the connection: the same on both buses but for its number.
    out["limit: answers"] = [
        [r[0], r[1].replace('"%s"' % raw.name, '"SELF"')] if isinstance(r, list) else r
        for r in res]
    out["limit: connection stays"] = alive(raw)
    raw.close()


def scenarios(path):
    out = {}
    scenario_rules(out)
    scenario_monitor_lists(out)
    scenario_remove(out)
    scenario_limit(out)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    return 0


# --------------------------------------------------- what dbus-daemon 1.14 does

MONITOR_FLAGS = [E + "InvalidArgs", "BecomeMonitor does not support any flags yet"]
NOT_THERE = [NOT_FOUND, "The given match rule wasn't found and can't be removed"]
OVER = [LIMITS, 'Connection "SELF" is not allowed to add more match rules (increase limits '
        'in configuration file if required; max_match_rules_per_connection=%d)' % MAX_RULES]

EXPECTED = {}
for _what, _rule, _answer in RULES:
    # A bad rule is refused and the connection stays; a monitor stays a
    # normal connection. A good rule added is removed again.
    EXPECTED["AddMatch, RemoveMatch: " + _what] = [_answer, _answer, True]
    EXPECTED["BecomeMonitor: " + _what] = [_answer, "monitor" if _answer == OK else True]

EXPECTED.update({
    "BecomeMonitor: a bad rule after a good one": [bad("Member name '1a' is invalid\n"), True],
    "BecomeMonitor: two bad rules": [bad("Member name '1a' is invalid\n"), True],
    "BecomeMonitor: a bad rule and flags": [MONITOR_FLAGS, True],
    "BecomeMonitor: no rule": [OK, "monitor"],
    # Equal by value (order, quoting, the last eavesdrop), newest first.
    "RemoveMatch: one by one": [
        ["RemoveMatch", "type='signal'", NOT_THERE],
        ["AddMatch", "type='signal',member='A'", OK],
        ["AddMatch", "type='signal',member='A'", OK],
        ["RemoveMatch", "member=A,type=signal", OK],
        ["RemoveMatch", " type = 'signal' , member = 'A' ",
         bad("Invalid message type ( signal ) in match rule\n")],
        ["RemoveMatch", "type='signal',member='A'", OK],
        ["AddMatch", "member='A',eavesdrop='true'", OK],
        ["RemoveMatch", "member='A'", NOT_THERE],
        ["RemoveMatch", "member='A',eavesdrop='false',eavesdrop='true'", OK],
        ["RemoveMatch", "member='A',eavesdrop='true'", NOT_THERE]],
    "RemoveMatch: connection stays": True,
    # The limit comes before the rule: even a bad or too long one gets it.
    "limit: answers": [OK] * MAX_RULES + [OVER] * 4 + [OK, OK, OVER],
    "limit: connection stays": True,
})

# ------------------------------------------------------------------- driver


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--scenarios":
        return scenarios(sys.argv[2])
    results = {}
    for label, binary, override in parity.buses(sys.argv[1]):
        with tempfile.TemporaryDirectory(prefix="bus1-match-parity.") as tmp:
            conf = os.path.join(tmp, "bus.conf")
            with open(conf, "w") as f:
                f.write(CONFIG)
            results[label] = parity.run_scenarios(__file__, binary, override, conf,
                                                  os.path.join(tmp, "out.json"))
    return 1 if parity.compare(results, EXPECTED) else 0


if __name__ == "__main__":
    sys.exit(main())
