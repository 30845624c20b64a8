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
$bb mkdir -p /results
$bb mount -t 9p -o $opts,cache=none results /results || fail "cannot mount the results share"
# shellcheck source=/dev/null
. /results/job
# The upper layer: on the job's disk (it outlives the boot) or in memory.
if [ "$JOB_DISK" = 1 ]; then
	# the disk's node comes once virtio_blk has probed it
	n=0
	while [ ! -b /dev/vda ] && [ $n -lt 50 ]; do
		$bb sleep 0.1
		n=$((n + 1))
	done
	$bb mount -t ext4 /dev/vda /rw || fail "cannot mount the job's disk"
else
	$bb mount -t tmpfs -o mode=0755 tmpfs /rw || fail "cannot mount tmpfs"
fi
$bb mkdir -p /rw/upper /rw/work /rw/mod-upper /rw/mod-work
$bb mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	fail "cannot mount the overlay"
$bb mkdir -p $R
$bb mount -o move /results $R || fail "cannot move the results share"
# /lib is a link to usr/lib in the merged-/usr root. With a disk, the modules are writable too
# (DKMS installs there), in an overlay of their own.
$bb mkdir -p "/newroot/usr/lib/modules/$JOB_KVER"
if [ "$JOB_DISK" = 1 ]; then
	$bb mkdir -p /modlower
	$bb mount -t 9p -o $opts,cache=loose,ro modules /modlower || fail "cannot mount the modules share"
	$bb mount -t overlay -o lowerdir=/modlower,upperdir=/rw/mod-upper,workdir=/rw/mod-work \
		overlay "/newroot/usr/lib/modules/$JOB_KVER" || fail "cannot mount the modules overlay"
else
	$bb mount -t 9p -o $opts,cache=loose,ro modules "/newroot/usr/lib/modules/$JOB_KVER" ||
		fail "cannot mount the modules share"
fi
# The host's headers for DKMS, where the headers' links expect them; /usr/src writable above
# them (DKMS packages unpack their source there).
if [ "$JOB_HEADERS" = 1 ]; then
	$bb mkdir -p /srclower /rw/src-upper /rw/src-work /newroot/usr/src "/newroot$JOB_KBUILD"
	$bb mount -t 9p -o $opts,cache=loose,ro src /srclower || fail "cannot mount the /usr/src share"
	$bb mount -t overlay -o lowerdir=/srclower,upperdir=/rw/src-upper,workdir=/rw/src-work \
		overlay /newroot/usr/src || fail "cannot mount the /usr/src overlay"
	$bb mount -t 9p -o $opts,cache=loose,ro kbuild "/newroot$JOB_KBUILD" ||
		fail "cannot mount $JOB_KBUILD"
fi

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
