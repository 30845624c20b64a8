#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# guest-run.sh - ExecStart of bus1test.service in the systemd guest of run-systemd-guest.sh: run
# the scenario (killed after JOB_TIMEOUT seconds), then put its status, the journal, the kernel
# log and the taint flags into the results share and power off. The status file comes last:
# the host takes its appearance as "the scenario is done, the guest shuts down now".

R=/bus1test
# shellcheck source=/dev/null
. $R/job
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LANG=C.UTF-8 JOB_BUS JOB_MODULE JOB_PHASE
read -r up _ </proc/uptime
echo "$up" >$R/scenario-start

# Appending: what the scenario's children write after it was killed must not overwrite this.
: >$R/output
timeout -k 10 "$JOB_TIMEOUT" /usr/local/libexec/bus1test/scenario.sh </dev/null >>$R/output 2>&1
rc=$?
case $rc in 124|137) echo "guest-run: the scenario did not end within ${JOB_TIMEOUT}s" >>$R/output
	rc=124 ;; esac
read -r up _ </proc/uptime
echo "$up" >$R/scenario-end

journalctl -b --no-pager -o short-monotonic >$R/journal 2>&1
dmesg >$R/dmesg 2>&1
cat /proc/sys/kernel/tainted >$R/tainted
echo $rc >$R/status.tmp
mv $R/status.tmp $R/status
sync
# Straight to PID 1 (its private socket): `systemctl poweroff` would first ask logind over the
# bus, and wait 25 s for a bus that does not answer.
systemctl start --no-block --job-mode=replace-irreversibly poweroff.target
