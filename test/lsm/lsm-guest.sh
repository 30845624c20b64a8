#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# lsm-guest.sh MATRIX ARG... - in the guest (run-guest.sh): test/lsm/MATRIX.py ARG... with its
# clients as root, then as uid 1000 (apparmor_matrix: BUS1_BROKER SHIM [LSM_NATIVE];
# selinux_matrix, in a guest booted with security=selinux: BUS1_BROKER [LSM_NATIVE]). Both runs
# always run; the status is 1 if either failed.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
matrix=$1
shift
rc=0
for uid in 0 1000; do
	/usr/bin/python3 "$here/$matrix.py" "$@" --uid "$uid" || rc=1
done
exit $rc
