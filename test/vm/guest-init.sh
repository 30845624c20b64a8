#!/bin/busybox sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# /init of the guest initramfs (built by run-guest.sh): load the 9p, virtio and overlay modules,
# mount the host root (read-only 9p) under a tmpfs overlay, mount the read-write results share,
# and hand over to the job's stage 2 script, which the host put into the results share.

bb=/bin/busybox
fail() {
	echo "guest-init: $*" >/dev/console
	$bb poweroff -f
}

$bb mount -t devtmpfs devtmpfs /dev 2>/dev/null
$bb mount -t proc proc /proc
for m in $($bb cat /lib/modules/order); do
	$bb insmod /lib/modules/$m.ko || fail "insmod $m failed"
done
$bb mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,msize=512000,ro hostroot /lower ||
	fail "cannot mount the host root"
$bb mount -t tmpfs -o mode=0755 tmpfs /rw || fail "cannot mount tmpfs"
$bb mkdir -p /rw/upper /rw/work
$bb mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	fail "cannot mount the overlay"
$bb mkdir -p /newroot/vm-results
$bb mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=512000 results /newroot/vm-results ||
	fail "cannot mount the results share"
$bb umount /proc
$bb umount /dev
exec $bb switch_root /newroot /bin/bash /vm-results/stage2.sh
fail "switch_root failed"
