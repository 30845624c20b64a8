#!/bin/busybox sh
# shellcheck shell=dash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# /init of the initramfs run-systemd-guest.sh builds: load the 9p, virtio and overlay modules,
# mount the Debian root of build-root.sh (9p share "sysroot", read-only) under a tmpfs overlay,
# the host's /lib/modules/KVER (share "modules") into it and the read-write results share
# ("results") at /bus1test, insmod the job's bus1.ko, copy the job's files (the project's
# install, the test unit and scripts) into the root, switch the system bus to bus1-broker if the
# job says so, and hand over to systemd as PID 1.

bb=/bin/busybox
R=/newroot/bus1test
fail() {
	echo "bus1test-init: $*" >/dev/console
	[ -d $R ] && echo "$*" >$R/init-failed
	$bb poweroff -f
}

$bb mount -t devtmpfs devtmpfs /dev 2>/dev/null
$bb mount -t proc proc /proc
for m in $($bb cat /lib/modules/order); do
	$bb insmod "/lib/modules/$m.ko" || fail "insmod $m failed"
done
opts=trans=virtio,version=9p2000.L,msize=512000
$bb mount -t 9p -o $opts,cache=loose,ro sysroot /lower || fail "cannot mount the root share"
$bb mount -t tmpfs -o mode=0755 tmpfs /rw || fail "cannot mount tmpfs"
$bb mkdir -p /rw/upper /rw/work
$bb mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	fail "cannot mount the overlay"
$bb mkdir -p $R
$bb mount -t 9p -o $opts,cache=none results $R || fail "cannot mount the results share"
# shellcheck source=/dev/null
. $R/job
# /lib is a link to usr/lib in the merged-/usr root.
$bb mkdir -p "/newroot/usr/lib/modules/$JOB_KVER"
$bb mount -t 9p -o $opts,cache=loose,ro modules "/newroot/usr/lib/modules/$JOB_KVER" ||
	fail "cannot mount the modules share"

if [ -f $R/bus1.ko ]; then
	$bb insmod $R/bus1.ko >$R/insmod.log 2>&1
	echo $? >$R/insmod
fi

# The project's install (bus1 mode) and the test's own files.
$bb cp -a $R/stage/. /newroot/ || fail "cannot copy the job's files into the root"

# Switch the system bus as conf/systemd/bus1-broker.service tells a user to (offline: systemctl
# edits the unit links of the root it runs in): the Alias= makes it dbus.service, started by
# Debian's own dbus.socket.
if [ "$JOB_BUS" = bus1 ]; then
	$bb chroot /newroot /bin/systemctl --quiet enable bus1-broker.service \
		>>$R/switch.log 2>&1 || fail "systemctl enable bus1-broker.service failed"
fi
$bb chroot /newroot /bin/systemctl --quiet enable bus1test.service >>$R/switch.log 2>&1 ||
	fail "systemctl enable bus1test.service failed"

$bb umount /proc
$bb umount /dev
# shellcheck disable=SC2093  # (the fallback runs only if the exec fails)
exec $bb switch_root /newroot /lib/systemd/systemd
fail "switch_root failed"
