#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# guest-run.sh - ExecStart of bus1test.service in the systemd guest of run-systemd-guest.sh: run
# the scenario (stopped after JOB_TIMEOUT seconds, or when the host saw no progress for too long
# and created $R/stall), then put its status, the journal, the kernel log and the taint flags
# into the results share and power off. The status file comes last:
# the host takes its appearance as "the scenario is done, the guest shuts down now".

R=/bus1test
# shellcheck source=/dev/null
. $R/job
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LANG=C.UTF-8 JOB_BUS JOB_MODULE JOB_PHASE JOB_TIME_FACTOR
read -r up _ </proc/uptime
echo "$up" >$R/scenario-start

# Appending: what the scenario's children write after it was killed must not overwrite this.
: >$R/output
# Its own process group, so that stopping it stops its children too.
setsid /usr/local/libexec/bus1test/scenario.sh </dev/null >>$R/output 2>&1 &
pid=$!
# A tick without a fork: `read -t` on a fifo nobody writes.
mkfifo /run/bus1test-tick
exec 8<>/run/bus1test-tick
deadline=$((SECONDS + JOB_TIMEOUT))
why=
while kill -0 $pid 2>/dev/null; do
	if ((SECONDS >= deadline)); then
		why="the scenario did not end within ${JOB_TIMEOUT}s"
	elif [ -e $R/stall ]; then
		why="the host saw no progress for too long"
	else
		read -r -t 0.5 -u 8
		continue
	fi
	echo "guest-run: $why: stopping it" >>$R/output
	kill -TERM -- -$pid 2>/dev/null
	read -r -t 10 -u 8
	kill -KILL -- -$pid 2>/dev/null
	break
done
wait $pid
rc=$?
[ -z "$why" ] || rc=124
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
