# SPDX-License-Identifier: LGPL-2.1-or-later
"""The server side of SASL against /usr/bin/dbus-daemon 1.14 (issue 43, item 3).
Each scenario is a raw unix socket that sends bytes, step by step, and records
what comes back after each step: the reply lines, "none" (nothing within a
short quiet time once the bus has read the bytes) or "closed". The scenarios
run on a private bus of each program (run-with-bus.sh, a configuration made
here, a private HOME for the DBUS_COOKIE_SHA1 keyring), once with all three
mechanisms and ANONYMOUS not allowed ("default") and once with
<allow_anonymous/> ("anonymous"). dbus-daemon must give the outcome written
in EXPECTED, so that a scenario that measures nothing fails, and bus1-broker
the same outcome, but for the differences kept on purpose (DIFFERENT, with
their reasons).

What is covered: framing (CRLF only, NUL and non-ASCII bytes, blanks,
lines at and over 16 KiB), the hex of responses (bad, odd-length, trailing
words), every command in each of the three states with dbus-daemon's ERROR
texts, BEGIN and NEGOTIATE_UNIX_FD with arguments (and Hello answered after
BEGIN), the sixth REJECTED ending the conversation, the identities EXTERNAL
and DBUS_COOKIE_SHA1 accept (uids as strtoul() reads them), a whole
DBUS_COOKIE_SHA1 exchange and its malformed answers, ANONYMOUS traces.

  test_sasl_parity.py BUS1_BROKER              both buses, compare
  test_sasl_parity.py --scenarios SET FILE     inside run-with-bus.sh: one bus
"""

import concurrent.futures
import fcntl
import hashlib
import json
import os
import pwd
import re
import select
import socket
import struct
import sys
import tempfile
import termios
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity  # noqa: E402
from rawclient import (ERROR, FIELD_DESTINATION, FIELD_ERROR_NAME, FIELD_INTERFACE,  # noqa: E402
                       FIELD_MEMBER, FIELD_PATH, METHOD_CALL, METHOD_RETURN, SIGNAL, marshal,
                       parse, session_config, socket_path)
from timefactor import time_factor  # noqa: E402

# Silence after the bus has read a step's bytes that counts as "no answer";
# under valgrind a bus may take seconds over one line (the user database).
QUIET = (3.0 if os.environ.get("PARITY_WRAPPED") else 0.3) * time_factor()
# Bound of the wait for the bus to read a step's bytes (only catches a hang).
READ_BOUND = 10.0 * time_factor()
# bus1-broker's bound of the input before BEGIN (dbus-compat/sasl.h, SASL_INPUT_MAX).
SASL_INPUT_MAX = 64 * 1024

# ------------------------------------------------------------------ scenarios

UID = os.getuid()


def hexs(text):
    return text.encode().hex().encode()


ID = hexs(str(UID))                     # our uid, as every client sends it
OTHER_ID = hexs(str(UID + 1))           # a uid that is not ours
AUTH = b"\0AUTH EXTERNAL " + ID + b"\r\n"
try:
    LOGIN = pwd.getpwuid(UID).pw_name
except KeyError:
    LOGIN = None
HELLO = marshal(METHOD_CALL, 1, {FIELD_PATH: "/org/freedesktop/DBus",
                                 FIELD_INTERFACE: "org.freedesktop.DBus",
                                 FIELD_MEMBER: "Hello",
                                 FIELD_DESTINATION: "org.freedesktop.DBus"})

KEYRING_CONTEXT = "org_freedesktop_general"


def cookie_answer(client="c0ffee", sep=" ", right=True, upper=False):
    """A step: the answer to the last DBUS_COOKIE_SHA1 challenge received,
    from the keyring the bus made in our (private) HOME."""
    def answer(lines):
        text = bytes.fromhex([x for x in lines if x.startswith("DATA ")][-1][5:]).decode()
        context, cookie_id, server = text.split(" ")
        with open(os.path.join(os.environ["HOME"], ".dbus-keyrings", context)) as f:
            secret = [w[2] for w in (line.split() for line in f) if w[0] == cookie_id][0]
        digest = hashlib.sha1(("%s:%s:%s" % (server, client, secret)).encode()).hexdigest()
        if not right:
            digest = ("1" if digest[0] == "0" else "0") + digest[1:]
        if upper:
            digest = digest.upper()
        return b"DATA " + hexs(client + sep + digest) + b"\r\n"
    return answer


def unread(sock):
    """How many bytes we sent that the bus has not read yet."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]


def receive(sock):
    """What arrives once the bus has read all we sent (or READ_BOUND passed)
    until QUIET seconds pass without a byte: (bytes, closed). Waiting for the
    bus to read first keeps a slow bus (valgrind) from looking silent; reading
    meanwhile keeps a bus that stops reading while its replies wait going."""
    data = b""
    read_end = time.monotonic() + READ_BOUND
    while True:
        reading = unread(sock) > 0 and time.monotonic() < read_end
        ready, _, _ = select.select([sock], [], [], 0.01 if reading else QUIET)
        if not ready:
            if reading:
                continue
            return data, False
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk


def message_summary(m):
    mtype, _, _, fields, _ = parse(m)
    if mtype == METHOD_RETURN:
        return "message: method return"
    if mtype == ERROR:
        return "message: error " + fields.get(FIELD_ERROR_NAME, "?")
    if mtype == SIGNAL:
        return "message: signal " + fields.get(FIELD_MEMBER, "?")
    return "message: call " + fields.get(FIELD_MEMBER, "?")


def split_replies(data):
    """SASL reply lines, then (once BEGIN handed the stream over) D-Bus
    messages; a line that never ended is "partial: ..."."""
    out = []
    while data:
        if data[:1] in (b"l", b"B") and len(data) >= 16:
            e = "<" if data[:1] == b"l" else ">"
            body_len, _, fields_len = struct.unpack_from(e + "III", data, 4)
            size = 16 + ((fields_len + 7) & ~7) + body_len
            if len(data) < size:
                out.append("partial message")
                break
            out.append(message_summary(data[:size]))
            data = data[size:]
            continue
        line, sep, rest = data.partition(b"\r\n")
        text = line.decode("ascii", "backslashreplace")
        if not sep:
            out.append("partial: " + text)
            break
        out.append(text)
        data = rest
    return out


def normalize(line):
    """The GUID and the random cookie challenge made comparable."""
    if re.fullmatch(r"OK [0-9a-f]{32}", line):
        return "OK <guid>"
    m = re.fullmatch(r"DATA ([0-9a-f]+)", line)
    if m and len(m.group(1)) % 2 == 0:
        text = bytes.fromhex(m.group(1)).decode("ascii", "replace")
        if re.fullmatch(KEYRING_CONTEXT + r" [0-9]+ [0-9a-f]{32}", text):
            return "DATA <cookie challenge>"
    return line


def compress(lines):
    """Runs of one line as "N x LINE"."""
    out = []
    for line in lines:
        if out and out[-1][1] == line:
            out[-1][0] += 1
        else:
            out.append([1, line])
    return [line if n == 1 else "%d x %s" % (n, line) for n, line in out]


def run_scenario(steps):
    """Each step's outcome: the replies (compressed), then "closed" if the bus
    closed; "none" if nothing came. A step is bytes, or a function of the
    reply lines so far that returns them."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(READ_BOUND)
    sock.connect(socket_path(os.environ["DBUS_SESSION_BUS_ADDRESS"]))
    seen, outcome = [], []
    for step in steps:
        data = step(seen) if callable(step) else step
        closed = False
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        got, eof = receive(sock)
        lines = split_replies(got)
        seen += lines
        result = compress([normalize(x) for x in lines])
        if closed or eof:
            result.append("closed")
        outcome.append(result or ["none"])
        if closed or eof:
            break
    sock.close()
    return outcome


# --------------------------------------------------- what dbus-daemon 1.14 does

R = "REJECTED EXTERNAL DBUS_COOKIE_SHA1 ANONYMOUS"
RA = "REJECTED EXTERNAL ANONYMOUS"
OK = "OK <guid>"
AGREE = "AGREE_UNIX_FD"
CHALLENGE = "DATA <cookie challenge>"
NONE, CLOSED = "none", "closed"
HELLO_ANSWERED = ["message: method return", "message: signal NameAcquired"]


def E(text):
    return 'ERROR "%s"' % text


HEX = E("Invalid hex encoding")
UNKNOWN = E("Unknown command")


def n_x(n, line):
    return "%d x %s" % (n, line)


# An odd number of hex digits: the last is the high half of one more byte,
# "3" makes a "0". The identity is ours when our uid ends in 0 (root's does).
ODD_ID = hexs(str(UID)[:-1]) + b"3"
WAITING_FOR_DATA = b"\0AUTH EXTERNAL\r\n"

# (set, name, steps, what dbus-daemon answers to each step)
CASES = [
    # The differences reported in issue 43, item 3.
    ("default", "AUTH with two spaces before the mechanism",
     [b"\0AUTH  EXTERNAL " + ID + b"\r\n", b"BEGIN\r\n", HELLO], [[OK], [NONE], HELLO_ANSWERED]),
    ("default", "AUTH EXTERNAL with an odd number of hex digits",
     [b"\0AUTH EXTERNAL " + ODD_ID + b"\r\n"], [[OK if UID % 10 == 0 else R]]),
    ("default", "AUTH EXTERNAL with a trailing space", [b"\0AUTH EXTERNAL " + ID + b" \r\n"],
     [[HEX]]),
    ("default", "AUTH EXTERNAL with a second word", [b"\0AUTH EXTERNAL " + ID + b" 30\r\n"],
     [[HEX]]),
    ("default", "AUTH EXTERNAL with bad hex", [b"\0AUTH EXTERNAL zz\r\n"], [[HEX]]),
    ("default", "a line ended by LF alone, then CRLF",
     [b"\0AUTH EXTERNAL " + ID + b"\n", b"\r\n"], [[NONE], [HEX]]),
    ("default", "NEGOTIATE_UNIX_FD x, BEGIN x, Hello",
     [AUTH, b"NEGOTIATE_UNIX_FD x\r\n", b"BEGIN x\r\n", HELLO],
     [[OK], [AGREE], [NONE], HELLO_ANSWERED]),
    ("default", "seven failed AUTH at once", [b"\0" + b"AUTH FOO\r\n" * 7],
     [[n_x(6, R), CLOSED]]),
    ("default", "five failed AUTH, then EXTERNAL",
     [b"\0" + b"AUTH FOO\r\n" * 5 + AUTH[1:], b"BEGIN\r\n", HELLO],
     [[n_x(5, R), OK], [NONE], HELLO_ANSWERED]),
    ("default", "six REJECTED by CANCEL after OK", [b"\0" + (AUTH[1:] + b"CANCEL\r\n") * 6],
     [[OK, R] * 6 + [CLOSED]]),
    ("default", "six REJECTED by the client's ERROR", [b"\0" + b"ERROR\r\n" * 6],
     [[n_x(6, R), CLOSED]]),

    # WaitingForAuth: every command.
    ("default", "before AUTH: an unknown command", [b"\0FOO\r\n"], [[UNKNOWN]]),
    ("default", "before AUTH: a lower-case command", [b"\0auth EXTERNAL " + ID + b"\r\n"],
     [[UNKNOWN]]),
    ("default", "before AUTH: an empty line", [b"\0\r\n"], [[UNKNOWN]]),
    ("default", "before AUTH: OK, REJECTED, AGREE_UNIX_FD from the client",
     [b"\0OK\r\n", b"REJECTED EXTERNAL\r\n", b"AGREE_UNIX_FD\r\n"],
     [[UNKNOWN], [UNKNOWN], [UNKNOWN]]),
    ("default", "before AUTH: DATA", [b"\0DATA " + ID + b"\r\n"],
     [[E("Not currently in an auth conversation")]]),
    ("default", "before AUTH: CANCEL", [b"\0CANCEL\r\n"],
     [[E("Not currently in an auth conversation")]]),
    ("default", "before AUTH: NEGOTIATE_UNIX_FD", [b"\0NEGOTIATE_UNIX_FD\r\n"],
     [[E("Need to authenticate first")]]),
    ("default", "before AUTH: ERROR", [b"\0ERROR\r\n"], [[R]]),
    ("default", "before AUTH: BEGIN", [b"\0BEGIN\r\n"], [[CLOSED]]),
    ("default", "before AUTH: AUTH alone", [b"\0AUTH\r\n"], [[R]]),
    ("default", "before AUTH: AUTH and a blank", [b"\0AUTH \r\n"], [[R]]),
    ("default", "before AUTH: AUTH of an unknown mechanism", [b"\0AUTH FOO " + ID + b"\r\n"],
     [[R]]),
    ("default", "before AUTH: DATA after a REJECTED", [b"\0AUTH FOO\r\n", b"DATA\r\n"],
     [[R], [E("Not currently in an auth conversation")]]),

    # WaitingForData: after AUTH EXTERNAL without identity.
    ("default", "waiting for data: AUTH EXTERNAL and a blank", [b"\0AUTH EXTERNAL \r\n"],
     [["DATA"]]),
    ("default", "waiting for data: DATA", [WAITING_FOR_DATA, b"DATA\r\n", b"BEGIN\r\n", HELLO],
     [["DATA"], [OK], [NONE], HELLO_ANSWERED]),
    ("default", "waiting for data: DATA and our uid", [WAITING_FOR_DATA, b"DATA " + ID + b"\r\n"],
     [["DATA"], [OK]]),
    ("default", "waiting for data: DATA, a tab and our uid",
     [WAITING_FOR_DATA, b"DATA\t" + ID + b"\r\n"], [["DATA"], [OK]]),
    ("default", "waiting for data: DATA and another uid",
     [WAITING_FOR_DATA, b"DATA " + OTHER_ID + b"\r\n"], [["DATA"], [R]]),
    ("default", "waiting for data: DATA with bad hex, then DATA",
     [WAITING_FOR_DATA, b"DATA zz\r\n", b"DATA\r\n"], [["DATA"], [HEX], [OK]]),
    ("default", "waiting for data: AUTH", [WAITING_FOR_DATA, AUTH[1:]],
     [["DATA"], [E("Sent AUTH while another AUTH in progress")]]),
    ("default", "waiting for data: NEGOTIATE_UNIX_FD", [WAITING_FOR_DATA, b"NEGOTIATE_UNIX_FD\r\n"],
     [["DATA"], [E("Need to authenticate first")]]),
    ("default", "waiting for data: an unknown command", [WAITING_FOR_DATA, b"FOO\r\n"],
     [["DATA"], [UNKNOWN]]),
    ("default", "waiting for data: an empty line", [WAITING_FOR_DATA, b"\r\n"],
     [["DATA"], [UNKNOWN]]),
    ("default", "waiting for data: CANCEL", [WAITING_FOR_DATA, b"CANCEL\r\n"], [["DATA"], [R]]),
    ("default", "waiting for data: ERROR", [WAITING_FOR_DATA, b"ERROR\r\n"], [["DATA"], [R]]),
    ("default", "waiting for data: BEGIN", [WAITING_FOR_DATA, b"BEGIN\r\n"],
     [["DATA"], [CLOSED]]),

    # WaitingForBegin: after OK.
    ("default", "after OK: AUTH", [AUTH, AUTH[1:]], [[OK], [E("Sent AUTH while expecting BEGIN")]]),
    ("default", "after OK: DATA", [AUTH, b"DATA\r\n"],
     [[OK], [E("Sent DATA while expecting BEGIN")]]),
    ("default", "after OK: an unknown command", [AUTH, b"FOO\r\n"], [[OK], [UNKNOWN]]),
    ("default", "after OK: OK from the client", [AUTH, b"OK\r\n"], [[OK], [UNKNOWN]]),
    ("default", "after OK: an empty line", [AUTH, b"\r\n"], [[OK], [UNKNOWN]]),
    ("default", "after OK: CANCEL, then BEGIN", [AUTH, b"CANCEL\r\n", b"BEGIN\r\n"],
     [[OK], [R], [CLOSED]]),
    ("default", "after OK: ERROR with a text", [AUTH, b'ERROR "no"\r\n'], [[OK], [R]]),
    ("default", "after OK: NEGOTIATE_UNIX_FD twice, BEGIN, Hello",
     [AUTH, b"NEGOTIATE_UNIX_FD\r\n", b"NEGOTIATE_UNIX_FD\r\n", b"BEGIN\r\n", HELLO],
     [[OK], [AGREE], [AGREE], [NONE], HELLO_ANSWERED]),
    ("default", "after OK: BEGIN and a tab, Hello", [AUTH, b"BEGIN\t\r\n", HELLO],
     [[OK], [NONE], HELLO_ANSWERED]),

    # Lines and bytes.
    ("default", "no NUL first", [b"AUTH EXTERNAL " + ID + b"\r\n"], [[CLOSED]]),
    ("default", "the NUL alone, then AUTH", [b"\0", AUTH[1:]], [[NONE], [OK]]),
    ("default", "two NULs first", [b"\0" + AUTH], [[E("Command contained non-ASCII")]]),
    ("default", "a NUL inside a line", [b"\0AUTH EXT\0ERNAL " + ID + b"\r\n"],
     [[E("Command contained non-ASCII")]]),
    ("default", "a byte above 0x7f", [b"\0AUTH EXTERNAL " + ID + b"\xc3\xa9\r\n"],
     [[E("Command contained non-ASCII")]]),
    ("default", "a control character", [b"\0AUTH EXTERNAL " + ID + b"\x01\r\n"], [[HEX]]),
    ("default", "tabs between the words", [b"\0AUTH\tEXTERNAL\t" + ID + b"\r\n"], [[OK]]),
    ("default", "CR and LF in two writes", [AUTH[:-1], b"\n"], [[NONE], [OK]]),
    ("default", "a lone CR inside a line", [AUTH[:-1], b"\rBEGIN\r\n"], [[NONE], [HEX]]),
    ("default", "a line of 16384 bytes", [b"\0AUTH EXTERNAL " + b"3" * (16384 - 16) + b"\r\n"],
     [[R]]),
    ("default", "a line of 16385 bytes", [b"\0AUTH EXTERNAL " + b"3" * (16385 - 16) + b"\r\n"],
     [[CLOSED]]),
    ("default", "16384 bytes without a line end", [b"\0" + b"A" * 16384], [[NONE]]),
    ("default", "16385 bytes without a line end, in two writes",
     [b"\0" + b"A" * 1000, b"A" * 15385], [[NONE], [CLOSED]]),
    ("default", "sd-bus: all in one write with Hello",
     [b"\0AUTH EXTERNAL\r\nDATA\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n" + HELLO],
     [["DATA", OK, AGREE] + HELLO_ANSWERED]),

    # The identities of EXTERNAL: a uid as strtoul() with base 0 reads it.
    ("default", "EXTERNAL: +uid", [b"\0AUTH EXTERNAL " + hexs("+%d" % UID) + b"\r\n"], [[OK]]),
    ("default", "EXTERNAL: a blank and the uid",
     [b"\0AUTH EXTERNAL " + hexs(" %d" % UID) + b"\r\n"], [[OK]]),
    ("default", "EXTERNAL: the uid in hex", [b"\0AUTH EXTERNAL " + hexs("0x%x" % UID) + b"\r\n"],
     [[OK]]),
    ("default", "EXTERNAL: the uid in octal", [b"\0AUTH EXTERNAL " + hexs("0%o" % UID) + b"\r\n"],
     [[OK]]),
    ("default", "EXTERNAL: the uid and a blank",
     [b"\0AUTH EXTERNAL " + hexs("%d " % UID) + b"\r\n"], [[R]]),
    ("default", "EXTERNAL: the uid and a NUL", [b"\0AUTH EXTERNAL " + ID + b"00\r\n"], [[R]]),
    ("default", "EXTERNAL: -1", [b"\0AUTH EXTERNAL " + hexs("-1") + b"\r\n"], [[R]]),
    ("default", "EXTERNAL: another uid", [b"\0AUTH EXTERNAL " + OTHER_ID + b"\r\n"], [[R]]),
    ("default", "EXTERNAL: 2^32 + uid", [b"\0AUTH EXTERNAL " + hexs(str(2**32 + UID)) + b"\r\n"],
     [[R]]),
    ("default", "EXTERNAL: a 30-digit number", [b"\0AUTH EXTERNAL " + b"31" * 30 + b"\r\n"],
     [[R]]),
    ("default", "EXTERNAL: a login name (not looked up)",
     [b"\0AUTH EXTERNAL " + hexs("root") + b"\r\n"], [[R]]),

    # ANONYMOUS, not allowed by this configuration (see DIFFERENT).
    ("default", "ANONYMOUS not allowed, then BEGIN", [b"\0AUTH ANONYMOUS\r\n", b"BEGIN\r\n"],
     [[OK], [CLOSED]]),
    ("default", "ANONYMOUS not allowed, with a trace", [b"\0AUTH ANONYMOUS " + hexs("trace") +
                                                       b"\r\n"], [[OK]]),
    ("default", "ANONYMOUS not allowed, with bad hex", [b"\0AUTH ANONYMOUS zz\r\n"], [[HEX]]),
    ("default", "ANONYMOUS not allowed, with a trace that is not UTF-8",
     [b"\0AUTH ANONYMOUS ff\r\n"], [[R]]),

    # DBUS_COOKIE_SHA1 (its keyring in the bus' private HOME).
    ("default", "COOKIE: no identity", [b"\0AUTH DBUS_COOKIE_SHA1\r\n"], [[R]]),
    ("default", "COOKIE: a blank and no identity", [b"\0AUTH DBUS_COOKIE_SHA1 \r\n"], [[R]]),
    ("default", "COOKIE: an odd number of hex digits",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + ODD_ID + b"\r\n"], [[CHALLENGE if UID % 10 == 0 else R]]),
    ("default", "COOKIE: an identity that is not hex", [b"\0AUTH DBUS_COOKIE_SHA1 zz\r\n"],
     [[HEX]]),
    ("default", "COOKIE: another uid", [b"\0AUTH DBUS_COOKIE_SHA1 " + OTHER_ID + b"\r\n"], [[R]]),
    ("default", "COOKIE: a user that does not exist",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + hexs("no-such-user-bus1") + b"\r\n"], [[R]]),
    ("default", "COOKIE: our uid", [b"\0AUTH DBUS_COOKIE_SHA1 " + ID + b"\r\n"], [[CHALLENGE]]),
    ("default", "COOKIE: +uid", [b"\0AUTH DBUS_COOKIE_SHA1 " + hexs("+%d" % UID) + b"\r\n"],
     [[CHALLENGE]]),
    ("default", "COOKIE: the uid in hex",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + hexs("0x%x" % UID) + b"\r\n"], [[CHALLENGE]]),
    ("default", "COOKIE: the right answer, BEGIN, Hello",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + ID + b"\r\n", cookie_answer(), b"BEGIN\r\n", HELLO],
     [[CHALLENGE], [OK], [NONE], HELLO_ANSWERED]),
    ("default", "COOKIE: the right answer after a tab",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + ID + b"\r\n", cookie_answer(sep="\t")], [[CHALLENGE], [OK]]),
    ("default", "COOKIE: a wrong hash",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + ID + b"\r\n", cookie_answer(right=False)], [[CHALLENGE], [R]]),
    ("default", "COOKIE: the hash in upper case",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + ID + b"\r\n", cookie_answer(upper=True)], [[CHALLENGE], [R]]),
    ("default", "COOKIE: an answer without blank",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + ID + b"\r\n", b"DATA " + hexs("c0ffee") + b"\r\n"],
     [[CHALLENGE], [R]]),
    ("default", "COOKIE: an answer without hash",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + ID + b"\r\n", b"DATA " + hexs("c0ffee ") + b"\r\n"],
     [[CHALLENGE], [R]]),
    ("default", "COOKIE: an answer that is not hex, then CANCEL",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + ID + b"\r\n", b"DATA zz\r\n", b"CANCEL\r\n"],
     [[CHALLENGE], [HEX], [R]]),
    ("default", "COOKIE: AUTH instead of an answer",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + ID + b"\r\n", AUTH[1:]],
     [[CHALLENGE], [E("Sent AUTH while another AUTH in progress")]]),

    # Bounds (see DIFFERENT).
    ("default", "20 unknown commands", [b"\0" + b"FOO\r\n" * 20], [[n_x(20, UNKNOWN)]]),
    ("default", "70 KiB of NEGOTIATE_UNIX_FD after OK",
     [AUTH + b"NEGOTIATE_UNIX_FD\r\n" * 3700], [[OK, n_x(3700, AGREE)]]),

    # <allow_anonymous/>, <auth>EXTERNAL</auth> and <auth>ANONYMOUS</auth>.
    ("anonymous", "AUTH alone", [b"\0AUTH\r\n"], [[RA]]),
    ("anonymous", "ANONYMOUS, BEGIN, Hello", [b"\0AUTH ANONYMOUS\r\n", b"BEGIN\r\n", HELLO],
     [[OK], [NONE], HELLO_ANSWERED]),
    ("anonymous", "ANONYMOUS and a blank", [b"\0AUTH ANONYMOUS \r\n"], [[OK]]),
    ("anonymous", "ANONYMOUS with an ASCII trace",
     [b"\0AUTH ANONYMOUS " + hexs("trace") + b"\r\n"], [[OK]]),
    ("anonymous", "ANONYMOUS with a UTF-8 trace",
     [b"\0AUTH ANONYMOUS " + hexs("\u00e9\u20ac\U0001f600") + b"\r\n"], [[OK]]),
    ("anonymous", "ANONYMOUS with an odd number of hex digits",
     [b"\0AUTH ANONYMOUS 616\r\n"], [[OK]]),
    ("anonymous", "ANONYMOUS with a trace that is not UTF-8", [b"\0AUTH ANONYMOUS ff\r\n"],
     [[RA]]),
    ("anonymous", "ANONYMOUS with a surrogate", [b"\0AUTH ANONYMOUS eda080\r\n"], [[RA]]),
    ("anonymous", "ANONYMOUS with an overlong sequence", [b"\0AUTH ANONYMOUS c0af\r\n"], [[RA]]),
    ("anonymous", "ANONYMOUS with a NUL", [b"\0AUTH ANONYMOUS 6100\r\n"], [[RA]]),
    ("anonymous", "ANONYMOUS with bad hex", [b"\0AUTH ANONYMOUS zz\r\n"], [[HEX]]),
    ("anonymous", "ANONYMOUS, then CANCEL", [b"\0AUTH ANONYMOUS\r\n", b"CANCEL\r\n"],
     [[OK], [RA]]),
    ("anonymous", "DBUS_COOKIE_SHA1 is not offered",
     [b"\0AUTH DBUS_COOKIE_SHA1 " + ID + b"\r\n"], [[RA]]),
    ("anonymous", "EXTERNAL", [AUTH], [[OK]]),
]

if LOGIN:
    CASES.append(("default", "COOKIE: our login name",
                  [b"\0AUTH DBUS_COOKIE_SHA1 " + hexs(LOGIN) + b"\r\n"], [[CHALLENGE]]))

EXPECTED = {"%s: %s" % (s, name): want for s, name, _, want in CASES}

# Kept on purpose, as (bus1-broker, dbus-daemon); dbus-compat/sasl.h says why.
#  - ANONYMOUS that the bus does not allow is REJECTED at once: dbus-daemon
#    answers OK and hangs up at BEGIN, after telling the client it succeeded;
#    REJECTED lets it try another mechanism.
#  - A bound on ERROR replies (16, the last one sent) and on the input before
#    BEGIN (64 KiB): dbus-daemon has none but auth_timeout, so a client that
#    never reads makes it queue replies, 13 bytes for each 2 it sends.
N_AGREE = (SASL_INPUT_MAX - len(AUTH)) // len(b"NEGOTIATE_UNIX_FD\r\n")
DIFFERENT = {
    "default: ANONYMOUS not allowed, then BEGIN": ([[R], [CLOSED]], [[OK], [CLOSED]]),
    "default: ANONYMOUS not allowed, with a trace": ([[R]], [[OK]]),
    "default: 20 unknown commands": ([[n_x(16, UNKNOWN), CLOSED]], [[n_x(20, UNKNOWN)]]),
    "default: 70 KiB of NEGOTIATE_UNIX_FD after OK":
        ([[OK, n_x(N_AGREE, AGREE), CLOSED]], [[OK, n_x(3700, AGREE)]]),
}
for key, (_, daemon) in DIFFERENT.items():
    assert EXPECTED[key] == daemon, key


def scenarios(which, path):
    cases = [(name, steps) for s, name, steps, _ in CASES if s == which]
    # All at once: a scenario mostly waits for the bus' silence.
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(cases)) as pool:
        results = pool.map(lambda c: run_scenario(c[1]), cases)
        out = {"%s: %s" % (which, name): r for (name, _), r in zip(cases, results)}
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    return 0


# ------------------------------------------------------------------- driver

LIMITS = ['<limit name="max_incomplete_connections">1000</limit>',
          '<limit name="max_connections_per_user">1000</limit>',
          '<limit name="auth_timeout">60000</limit>']
CONFIGS = {
    "default": session_config("<listen>unix:tmpdir=/tmp</listen>", *LIMITS),
    "anonymous": session_config("<listen>unix:tmpdir=/tmp</listen>", "<auth>EXTERNAL</auth>",
                                "<auth>ANONYMOUS</auth>", "<allow_anonymous/>", *LIMITS),
}


def run_on(binary, override, which, tmp):
    """The outcomes of set @which on a private bus run by @binary."""
    label = "%s-%s" % (os.path.basename(binary), which)
    home = os.path.join(tmp, label + ".home")
    os.makedirs(home)
    config = os.path.join(tmp, label + ".conf")
    with open(config, "w") as f:
        f.write(CONFIGS[which])
    return parity.run_scenarios(__file__, binary, override, config,
                                os.path.join(tmp, label + ".json"), args=(which,),
                                env={"HOME": home}, timeout=120)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--scenarios":
        return scenarios(sys.argv[2], sys.argv[3])
    runs = parity.buses(sys.argv[1])
    results = {label: {} for label, _, _ in runs}
    with tempfile.TemporaryDirectory(prefix="bus1-sasl-parity.") as tmp, \
            concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        jobs = {(label, which): pool.submit(run_on, binary, override, which, tmp)
                for label, binary, override in runs for which in CONFIGS}
        for (label, _), job in sorted(jobs.items()):
            res = job.result()
            if res is None:
                results[label] = None
            elif results[label] is not None:
                results[label].update(res)
    failed = parity.compare(results, EXPECTED, DIFFERENT)
    print("%d scenarios, %d of them different on purpose" % (len(EXPECTED), len(DIFFERENT)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
