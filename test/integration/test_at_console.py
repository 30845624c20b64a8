# SPDX-License-Identifier: LGPL-2.1-or-later
"""<policy at_console=...> (at-console.conf) against a real bus: the bus runs
with BUS1_BROKER_CONSOLE_AUTH_DIR=DIR (a test hook, see conf/console.h), so
this user is at the console while DIR/USERNAME exists. As in dbus-daemon, the
answer is taken when a connection connects and again on ReloadConfig, never
per message."""

import os
import pwd

from dbustest import E, Client, eq, expect_error, run

AUTH_DIR = os.environ["BUS1_BROKER_CONSOLE_AUTH_DIR"]
MARK = os.path.join(AUTH_DIR, pwd.getpwuid(os.getuid()).pw_name)


def at_console(yes):
    os.makedirs(AUTH_DIR, exist_ok=True)
    if yes:
        open(MARK, "w").close()
    elif os.path.exists(MARK):
        os.unlink(MARK)


def test_not_at_console():
    at_console(False)
    a = Client()
    eq(a.request_name("org.bus1.Test.Remote"), 1, "at_console=false rule")
    e = expect_error(E + "AccessDenied", a.request_name, "org.bus1.Test.Console")
    assert "at-console.conf" in e.get_dbus_message(), e.get_dbus_message()


def test_at_console():
    at_console(True)
    a = Client()
    eq(a.request_name("org.bus1.Test.Console"), 1, "at_console=true rule")
    expect_error(E + "AccessDenied", a.request_name, "org.bus1.Test.Remote")


def test_decided_at_connect_and_reload():
    at_console(True)
    a = Client()
    at_console(False)
    # a keeps the answer of its connect time; a new connection gets the new one
    b = Client()
    eq(a.request_name("org.bus1.Test.Console"), 1, "connect-time answer kept")
    expect_error(E + "AccessDenied", b.request_name, "org.bus1.Test.Console")
    a.release_name("org.bus1.Test.Console")
    # a reload asks again for every connection
    a.drv("ReloadConfig")
    expect_error(E + "AccessDenied", a.request_name, "org.bus1.Test.Console")
    eq(a.request_name("org.bus1.Test.Remote"), 1, "after reload")
    at_console(True)
    a.drv("ReloadConfig")
    eq(b.request_name("org.bus1.Test.Console"), 1, "b after reload")


try:
    run([test_not_at_console, test_at_console, test_decided_at_connect_and_reload])
finally:
    at_console(False)
