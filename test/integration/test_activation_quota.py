# SPDX-License-Identifier: LGPL-2.1-or-later
"""Messages waiting for an activation are charged to their sender's user
(activation-quota.conf: a bus of type system, 64 fds per user). A client that
parks fds at a name whose service never takes it is refused at its quota
with LimitsExceeded; the bus holds no more of them; when service_start_timeout
passes, every waiting caller gets TimedOut and the bus lets go of every fd.
dbus-daemon bounds this queue only over all users (max_pending_service_starts),
so this is not a parity test."""

import os
import time

from dbustest import E, Client, eq, run
from rawclient import ERROR, FIELD_ERROR_NAME, FIELD_REPLY_SERIAL, Raw, TIMEOUT

NAME = "org.bus1.Test.Parked"


def bus_fd_count():
    pid = os.environ.get("BUS_PID")
    return len(os.listdir("/proc/%s/fd" % pid)) if pid else 0


def test_parked_fds():
    by = Client()
    src = Raw()
    before = bus_fd_count()
    fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(4)]
    try:
        serials = [src.call(NAME, "/", "org.bus1.Test", "Park", "hhhh", (0, 1, 2, 3), fds=fds)
                   for _ in range(20)]
    finally:
        for fd in fds:
            os.close(fd)
    answers = {}
    deadline = time.monotonic() + 2 * TIMEOUT
    while len(answers) < 4 and time.monotonic() < deadline:
        m = src.recv()
        if m[0] == ERROR:
            answers[m[3][FIELD_REPLY_SERIAL]] = (m[3][FIELD_ERROR_NAME], time.monotonic())
    # 16 messages of 4 fds are the user's 64; the last 4 are refused at once.
    eq(sorted(answers), serials[16:], "the refused calls")
    for name, _ in answers.values():
        eq(name, E + "LimitsExceeded")
    held = bus_fd_count() - before
    assert held <= 64 + 4, "the bus holds %d more fds" % held
    # The bystander of the same bus is not held up.
    eq(len(str(by.drv("GetId"))), 32, "bystander works")

    # service_start_timeout (3 s): every parked call is answered, the fds go.
    deadline = time.monotonic() + 3 + 3 * TIMEOUT
    while len(answers) < 20 and time.monotonic() < deadline:
        m = src.recv()
        if m[0] == ERROR:
            answers[m[3][FIELD_REPLY_SERIAL]] = (m[3][FIELD_ERROR_NAME], time.monotonic())
    eq(sorted(answers), serials, "every call answered")
    for s in serials[:16]:
        eq(answers[s][0], E + "TimedOut")
    time.sleep(0.2)
    assert bus_fd_count() <= before + 1, (before, bus_fd_count())
    src.close()


if __name__ == "__main__":
    run([test_parked_fds])
