# SPDX-License-Identifier: LGPL-2.1-or-later
"""How much slower this machine is now than the reference CI machine.

tools/run-tests.sh measures it once per run (tools/time-factor.sh) and exports
it as BUS1_TIME_FACTOR; run-guest.sh passes it into the guests. A bound that
only catches a hang is multiplied by it. Unset or not a positive integer: 1.
As test/common/time-factor.h for the C tests.
"""

import os


def time_factor():
    try:
        return max(1, int(os.environ.get("BUS1_TIME_FACTOR", "1")))
    except ValueError:
        return 1
