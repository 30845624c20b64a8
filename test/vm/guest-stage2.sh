#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Stage 2 of the guest, PID 1 on the overlay root: set up /proc, /sys, /dev, load the module, run
# the job's command, and write its status, output, the kernel log and the taint flags into the
# results share (/vm-results). run-guest.sh copies this file there and reads the results.
# On a kernel with kmemleak (the debug kernel) it also scans for leaks after the command and
# after rmmod, and on one with lockdep it reports whether lockdep is still on at the end.

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
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
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

# (Builtins only: a fork costs milliseconds under TCG.)
stamp() { local u; read -r u _ </proc/uptime; echo "$u $1" >>$R/timing; }
stamp "stage 2"

dmesg >$R/dmesg-boot 2>&1
dmesg --clear 2>/dev/null || busybox dmesg -c >/dev/null

kmemleak=/sys/kernel/debug/kmemleak
[ -w $kmemleak ] || kmemleak=
if [ -n "$kmemleak" ]; then
	# Whatever the boot left unreferenced is not the job's: scan once and forget it.
	echo scan >$kmemleak
	echo clear >$kmemleak
	stamp "kmemleak baseline"
fi
# leak_scan FILE: write what kmemleak finds unreferenced now into $R/FILE. It does not report
# objects younger than 5 s: wait until the command's last allocations are that old. A report
# must survive a second scan (a pointer may have sat in a register during the first).
leak_after=0
leak_scan() {
	local now
	[ -n "$kmemleak" ] || return 0
	while read -r now _ </proc/uptime; ((${now%.*} < leak_after)); do
		tick 0.5
	done
	echo scan >$kmemleak
	cat $kmemleak >$R/$1
	if [ -s $R/$1 ]; then
		echo scan >$kmemleak
		cat $kmemleak >$R/$1
	fi
	stamp "kmemleak scan ($1)"
}

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

# A tick without a process: `read -t` on a fifo that nobody writes. (A `sleep 0.1` per tick is a
# fork and an exec over 9p ten times a second: 40% of a vCPU under TCG, taken from the test.)
mkfifo /run/tick
exec {tick_fd}<>/run/tick
tick() { read -r -t "$1" -u "$tick_fd"; }

# wait_job PID SECONDS [stoppable]: wait for a background job until a deadline or, if
# stoppable, until the host asks to stop it (run-guest.sh saw no progress for too long and
# created $R/stall). Builtins only. Returns 0 if it ended (its status in $job_rc), 1 if it is
# still running.
wait_job() {
	local pid=$1 deadline=$((SECONDS + $2))
	while kill -0 "$pid" 2>/dev/null; do
		((SECONDS >= deadline)) && return 1
		[ -n "${3:-}" ] && [ -e $R/stall ] && return 1
		tick 0.1
	done
	wait "$pid"
	job_rc=$?
	return 0
}

# On a hang, put the kernel's view into dmesg: blocked (D) tasks and what the CPUs run.
dump_tasks() {
	# run-guest.sh does not count the traces after this marker as kernel warnings.
	echo "run-guest: task dump follows" >/dev/kmsg
	echo 1 >/proc/sys/kernel/sysrq 2>/dev/null
	echo w >/proc/sysrq-trigger 2>/dev/null
	echo l >/proc/sysrq-trigger 2>/dev/null
}

cd "$JOB_CWD" || cd /
env "${JOB_ENV[@]}" "${JOB_CMD[@]}" </dev/null >>$R/output 2>&1 {tick_fd}<&- &
cmd=$!
if wait_job $cmd "$JOB_TIMEOUT" stoppable; then
	echo $job_rc >$R/status
else
	touch $R/timedout
	dump_tasks
	kill -KILL $cmd 2>/dev/null
	# Something stuck in the kernel cannot be killed: then do not try to unload either.
	if wait_job $cmd $((10 * ${JOB_TIME_FACTOR:-1})); then
		echo $job_rc >$R/status
	else
		echo 124 >$R/status
		echo "run-guest: the command cannot be killed (stuck in the kernel)" >>$R/output
		JOB_MODULE=
	fi
fi

# Whatever the command left behind must go before the module can; then rmmod proves that no
# reference (an open peer, a leaked file or module reference) survived.
stamp "command done"
read -r leak_after _ </proc/uptime
leak_after=$((${leak_after%.*} + 6))
kill -KILL -1 2>/dev/null
for ((i = 0; i < 100; i++)); do
	others=0
	for p in /proc/[0-9]*; do
		# Kernel threads have no executable; user processes other than us must be gone.
		[ "$p" = /proc/1 ] || [ "$p" = /proc/$$ ] && continue
		[ -e "$p/exe" ] && others=1 && break
	done
	[ $others = 0 ] && break
	tick 0.05
done
stamp "others gone"
if [ -n "$JOB_MODULE" ]; then
	# Leaks while the module is still loaded (their backtraces name its functions); then those
	# that only its unloading shows.
	leak_scan kmemleak-loaded
	name=$(basename "$JOB_MODULE" .ko)
	rmmod "$name" >>$R/output 2>&1 &
	# 30 s on the reference machine, stretched like every limit (a loaded machine made a
	# debug kernel's rmmod take longer).
	if wait_job $! $((30 * ${JOB_TIME_FACTOR:-1})); then
		echo $job_rc >$R/rmmod
	else
		dump_tasks
		echo "hung" >$R/rmmod
		echo "run-guest: rmmod $name hangs" >>$R/output
	fi
fi

stamp "rmmod done"
leak_scan kmemleak
# Lockdep switches itself off after its first report (or on some taints): say if it is off.
[ -r /proc/lockdep_stats ] &&
	awk '$1 == "debug_locks:" { print $2 }' /proc/lockdep_stats >$R/debug_locks
cat /proc/sys/kernel/tainted >$R/tainted
dmesg >$R/dmesg 2>&1
stamp "dmesg done"
finish
