#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Stage 2 of the guest, PID 1 on the overlay root: set up /proc, /sys, /dev, load the module, run
# the job's command, and write its status, output, the kernel log and the taint flags into the
# results share (/vm-results). run-guest.sh copies this file there and reads the results.

R=/vm-results
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 BUS1_VM_GUEST=1

finish() {
	sync
	echo o >/proc/sysrq-trigger 2>/dev/null
	busybox poweroff -f
	exit 0
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
# The host's /run (sockets, pid files) means nothing here.
mount -t tmpfs -o mode=0755 tmpfs /run
ln -sfn /proc/self/fd /dev/fd
ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout
ln -sfn /proc/self/fd/2 /dev/stderr
ln -sfn /proc/kcore /dev/core 2>/dev/null
hostname bus1-guest 2>/dev/null
ip link set lo up 2>/dev/null

. $R/job

dmesg >$R/dmesg-boot 2>&1
dmesg --clear 2>/dev/null || busybox dmesg -c >/dev/null

if [ -n "$JOB_MODULE" ]; then
	insmod "$JOB_MODULE" >>$R/output 2>&1
	rc=$?
	echo $rc >$R/insmod
	if [ $rc != 0 ]; then
		echo 1 >$R/status
		dmesg >$R/dmesg 2>&1
		cat /proc/sys/kernel/tainted >$R/tainted
		finish
	fi
fi

cd "$JOB_CWD" || cd /
env "${JOB_ENV[@]}" timeout -s KILL "$JOB_TIMEOUT" "${JOB_CMD[@]}" </dev/null >>$R/output 2>&1
rc=$?
[ $rc = 137 ] && touch $R/timedout
echo $rc >$R/status

# Whatever the command left behind must go before the module can; then rmmod proves that no
# reference (an open peer, a leaked file or module reference) survived.
# (Builtins only: a fork costs milliseconds under TCG.)
stamp() { local u; read -r u _ </proc/uptime; echo "$u $1" >>$R/timing; }
stamp "command done"
kill -KILL -1 2>/dev/null
for ((i = 0; i < 100; i++)); do
	others=0
	for p in /proc/[0-9]*; do
		# Kernel threads have no executable; user processes other than us must be gone.
		[ "$p" = /proc/1 ] || [ "$p" = /proc/$$ ] && continue
		[ -e "$p/exe" ] && others=1 && break
	done
	[ $others = 0 ] && break
	sleep 0.05
done
stamp "others gone"
if [ -n "$JOB_MODULE" ]; then
	name=$(basename "$JOB_MODULE" .ko)
	rmmod "$name" >>$R/output 2>&1
	echo $? >$R/rmmod
fi

stamp "rmmod done"
cat /proc/sys/kernel/tainted >$R/tainted
dmesg >$R/dmesg 2>&1
stamp "dmesg done"
finish
