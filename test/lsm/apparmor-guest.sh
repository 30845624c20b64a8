#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# apparmor-guest.sh BUS1_BROKER SHIM [LSM_NATIVE] - in the guest (run-guest.sh): the AppArmor matrix
# (apparmor_matrix.py) with its clients as root, then as uid 1000. Both runs always run; the
# status is 1 if either failed.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rc=0
for uid in 0 1000; do
	/usr/bin/python3 "$here/apparmor_matrix.py" "$@" --uid "$uid" || rc=1
done
exit $rc
