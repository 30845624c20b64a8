# SPDX-License-Identifier: LGPL-2.1-or-later
"""The default GLib main context, driven by hand: what the python3-dbus
(libdbus) clients of the integration tests wait with."""

import time

from gi.repository import GLib

from timefactor import time_factor


def pump(seconds=0.0):
    """Run the GLib loop for @seconds (at least one non-blocking pass)."""
    ctx = GLib.MainContext.default()
    end = time.monotonic() + seconds
    while True:
        while ctx.iteration(False):
            pass
        if time.monotonic() >= end:
            return
        time.sleep(0.005)


def wait_for(pred, timeout=5.0 * time_factor(), what="condition"):
    """Run the loop until pred() holds; AssertionError after @timeout s."""
    ctx = GLib.MainContext.default()
    end = time.monotonic() + timeout
    while True:
        while ctx.iteration(False):
            pass
        if pred():
            return
        if time.monotonic() >= end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.002)
