#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-systemd-guest.sh - boot a real Debian 12 (the root of build-root.sh) with systemd as PID 1
# under qemu (TCG), on Debian's own kernel, with either bus1-broker (the project's install,
# through its shipped units) or Debian's dbus-daemon as the system bus; run a scenario script in
# the booted system as a unit (bus1test.service) and return its exit status.
#
# The guest: an initramfs (static busybox, the 9p/virtio/overlay modules, initramfs-init.sh)
# mounts the cached root, shared read-only over 9p, under a tmpfs overlay, plus the host's
# /lib/modules/KVER; it insmods --module, copies the job's files into the root (`meson install
# --destdir` of BUILD in bus1 mode, the test unit and scripts, the test's bus policy), switches
# the system bus in bus1 mode (`systemctl enable bus1-broker.service`, as the unit's comment
# tells a user: it becomes dbus.service, started by Debian's dbus.socket) and switch_roots
# to /lib/systemd/systemd. bus1test.service (After=multi-user.target) runs the scenario, saves
# its output and status, the journal and the kernel log to the read-write results share and
# powers the guest off (`systemctl poweroff`; the host times that shutdown).
#
# Exit status: the scenario's; 124 if the guest made no progress for --stall seconds or ran
# past its limits (test/vm/watchdog.sh); 1 if the guest died without a result, the kernel
# logged a WARNING/BUG/Oops (or was tainted W, D, L or B) with bus1.ko loaded, insmod failed, or
# the shutdown after the scenario waited for a unit's stop timeout (it took longer than 15 s,
# times BUS1_TIME_FACTOR). On failure: the scenario output, the guest's journal and its console.
#
# Usage: run-systemd-guest.sh [OPTIONS]
#   --bus bus1|dbus-daemon   the system bus (default bus1)
#   --stage-bus1      with --bus dbus-daemon: install bus1-broker too, switched off (for a
#                     scenario that switches the running system, scenario-switch.sh)
#   --build DIR       the meson build directory installed in bus1 mode (default build-test)
#   --kver VER        kernel version (default: $BUS1_VM_KVER, else the newest /lib/modules/*/build
#                     with a matching /boot/vmlinuz-VER)
#   --module KO       insmod this bus1.ko in the initramfs ("" = none, the default)
#   --scenario FILE   the scenario (default: scenario-restart.sh beside this script)
#   --disk IMG        an ext4 image (made by the caller) that holds the overlay's upper layer,
#                     also over /lib/modules/KVER: what a boot changes is there at the next boot
#                     of the same image (run-deb-suite.sh); without it, a tmpfs
#   --headers         share the host's headers of KVER (/usr/src, and the kbuild directory
#                     their scripts link to) read-only, so DKMS can build in the guest
#   --files DIR       give the guest DIR's files in /bus1test/files (read-only use)
#   --phase NAME      tell the scenario which boot this is ($JOB_PHASE; run-deb-suite.sh)
#   --kernel-check    check the kernel log and taint as with --module (a bus1.ko the guest
#                     loads itself)
#   --root DIR        the Debian root (default: the output of build-root.sh, built if needed)
#   --cache DIR       where the vmlinux and the initramfs are cached (default: $BUS1_SYSTEMD_VM_CACHE,
#                     else ${XDG_CACHE_HOME:-$HOME/.cache}/bus1-systemd-vm)
#   --timeout SEC     the scenario's budget on an idle reference machine (default 420): it is
#                     stopped after twice that, times BUS1_TIME_FACTOR, even while it works
#   --stall SEC       stop the scenario when the guest made no progress (no console, output or
#                     journal line, qemu idle) for SEC seconds, times BUS1_TIME_FACTOR (default 180)
#   --boot-timeout SEC  the guest gets SEC seconds (the same way) for boot and shutdown on top
#                     (default 240)
#   --smp N, --mem SIZE  guest CPUs and memory (default 2, 1536M)
#   --outdir DIR      copy the results (output, journal, console, timing) into DIR
#   --keep            keep the per-run results directory
#   --verbose         print the journal and console even on success
# Environment: BUS1_VM_ACCEL=tcg|kvm (default tcg); BUS1_TIME_FACTOR (tools/time-factor.sh)
# stretches every time limit, the guest's own (the scenarios' waits, systemd's stop timeout) too.

set -euo pipefail

me=run-systemd-guest
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

bus=bus1
stage_bus1=0
disk=
phase=
kernel_check=0
headers=0
files=
build="build-test"
kver=${BUS1_VM_KVER:-}
module=
scenario=$here/scenario-restart.sh
root=
cache=${BUS1_SYSTEMD_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bus1-systemd-vm}
timeout_s=420
stall_s=180
boot_s=240
smp=2
mem=1536M
outdir=
keep=0
verbose=0

die() { echo "$me: $*" >&2; exit 1; }
skip() { echo "$me: SKIP: $*" >&2; exit 77; }

while [ $# -gt 0 ]; do
	case "$1" in
	--bus) bus=$2; shift 2 ;;
	--stage-bus1) stage_bus1=1; shift ;;
	--disk) disk=$2; shift 2 ;;
	--headers) headers=1; shift ;;
	--files) files=$2; shift 2 ;;
	--phase) phase=$2; shift 2 ;;
	--kernel-check) kernel_check=1; shift ;;
	--build) build=$2; shift 2 ;;
	--kver) kver=$2; shift 2 ;;
	--module) module=$2; shift 2 ;;
	--scenario) scenario=$2; shift 2 ;;
	--root) root=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--stall) stall_s=$2; shift 2 ;;
	--boot-timeout) boot_s=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--outdir) outdir=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--verbose) verbose=1; shift ;;
	*) die "unknown argument $1 (see the usage at the top of $0)" ;;
	esac
done
case "$bus" in bus1|dbus-daemon) ;; *) die "--bus wants bus1 or dbus-daemon, got '$bus'" ;; esac
case "$timeout_s$boot_s$stall_s" in *[!0-9]*) die "--timeout, --stall and --boot-timeout want seconds" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (the root and the guest's files are root's)"
[ -f "$scenario" ] || die "scenario $scenario not found"

qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || skip "qemu-system-x86_64 not installed"
# The helpers shared with test/vm/run-guest.sh: busybox, kernel, vmlinux, initramfs modules.
# shellcheck source=test/vm/kernel-image.sh
. "$here/../vm/kernel-image.sh"
# shellcheck source=test/vm/watchdog.sh
. "$here/../vm/watchdog.sh"
factor=$(vm_time_factor)
busybox=$(vm_static_busybox) || skip "no static busybox (apt-get install busybox-static)"
for t in cpio xz gzip meson; do
	command -v $t >/dev/null || skip "$t not installed"
done
if [ -z "$kver" ]; then
	kver=$(vm_newest_kernel) || true
fi
[ -n "$kver" ] || skip "no kernel with both /lib/modules/VER/build and /boot/vmlinuz-VER"
vmlinuz=/boot/vmlinuz-$kver
moddir=/lib/modules/$kver
{ [ -r "$vmlinuz" ] && [ -f "$moddir/modules.dep" ]; } || skip "$vmlinuz or $moddir/modules.dep missing"
if [ -n "$module" ]; then
	[ -f "$module" ] || die "module $module does not exist"
	module=$(realpath "$module")
fi
[ -z "$disk" ] || [ -f "$disk" ] || die "disk image $disk does not exist"
[ -z "$files" ] || [ -d "$files" ] || die "$files is not a directory"
kbuild=
if [ $headers = 1 ]; then
	[ -d "/usr/src/linux-headers-$kver" ] || skip "no /usr/src/linux-headers-$kver"
	kbuild=$(dirname "$(readlink -f "/usr/src/linux-headers-$kver/scripts")")
	[ -d "$kbuild" ] || die "cannot find the kbuild directory of linux-headers-$kver"
fi
[ "$bus" = bus1 ] && stage_bus1=1
if [ $stage_bus1 = 1 ]; then
	[ -x "$build/broker/bus1-broker" ] || die "$build/broker/bus1-broker not built"
fi
if [ -z "$root" ]; then
	root=$("$here/build-root.sh")
fi
[ -x "$root/lib/systemd/systemd" ] || die "$root is not a systemd root"
root=$(realpath "$root")

# ---- cached: the vmlinux (PVH entry: boots about twice as fast as the bzImage) and initramfs ---

mkdir -p "$cache/$kver"
kcache=$(realpath "$cache/$kver")

build_initramfs() {
	local d=$kcache/initramfs.d.$$ m f tmp=$kcache/initramfs.tmp.$$
	rm -rf "$d"
	mkdir -p "$d"/{bin,lib/modules,proc,dev,lower,rw,newroot}
	cp "$busybox" "$d/bin/busybox"
	: >"$d/lib/modules/order"
	# ext4 asks the crypto API for crc32c when it mounts: crc32c_generic before it.
	vm_initrd_modules "$moddir" "virtio_pci 9pnet_virtio 9p overlay virtio_blk crc32c_generic ext4" \
		>"$d/mods" ||
		{ rm -rf "$d"; die "cannot resolve the initramfs modules"; }
	# busybox insmod loads uncompressed modules only (6.12 ships .ko.xz).
	while read -r m f; do
		[ -f "$moddir/$f" ] || { rm -rf "$d"; die "module $m not found in $moddir"; }
		vm_unpack_module "$moddir/$f" "$d/lib/modules/$m.ko" ||
			{ rm -rf "$d"; die "cannot unpack $f"; }
		echo "$m" >>"$d/lib/modules/order"
	done <"$d/mods"
	rm -f "$d/mods"
	cp "$here/initramfs-init.sh" "$d/init"
	chmod 755 "$d/init"
	(cd "$d" && find . | cpio -o -H newc --quiet | gzip -1) >"$tmp"
	rm -rf "$d"
	mv -f "$tmp" "$kcache/initramfs.gz"
}

(
	flock 9
	if [ ! -s "$kcache/vmlinux" ] || [ "$vmlinuz" -nt "$kcache/vmlinux" ]; then
		vm_extract_vmlinux "$vmlinuz" "$kcache/vmlinux" ||
			echo "$me: cannot extract the vmlinux, booting $vmlinuz" >&2
	fi
	if [ ! -s "$kcache/initramfs.gz" ] || [ "$here/initramfs-init.sh" -nt "$kcache/initramfs.gz" ] ||
	   [ "$0" -nt "$kcache/initramfs.gz" ] || [ "$moddir/modules.dep" -nt "$kcache/initramfs.gz" ] ||
	   [ "$here/../vm/kernel-image.sh" -nt "$kcache/initramfs.gz" ]; then
		build_initramfs
	fi
) 9>"$kcache/lock"
kernel=$kcache/vmlinux
[ -s "$kernel" ] || kernel=$vmlinuz

# ---- the job: what the guest gets in the results share -----------------------------------------

results=$(mktemp -d "$kcache/run.XXXXXX")
qemu_pid=
# shellcheck disable=SC2317  # (run by the trap)
cleanup() {
	[ -z "$qemu_pid" ] || kill -KILL "$qemu_pid" 2>/dev/null || true
	if [ "$keep" = 0 ]; then
		rm -rf "$results"
	else
		echo "$me: results kept in $results" >&2
	fi
}
trap cleanup EXIT

stage=$results/stage
mkdir -p "$stage"
if [ $stage_bus1 = 1 ]; then
	# The project exactly as `meson install` lays it out (prefix /usr/local): the broker and the
	# units in /usr/local/lib/systemd/system, which systemd reads.
	meson install -C "$build" --destdir "$stage" --no-rebuild --quiet >"$results/install.log" 2>&1 ||
		{ cat "$results/install.log" >&2; die "meson install -C $build failed"; }
	[ -f "$stage/usr/local/lib/systemd/system/bus1-broker.service" ] ||
		die "meson install did not install bus1-broker.service"
	echo "$me: bus1-broker from $build (built $(date -u -r "$build/broker/bus1-broker" \
		'+%F %T UTC'), sha256 $(sha256sum <"$stage/usr/local/bin/bus1-broker" | cut -c1-12))" >&2
fi
install -D -m 755 "$scenario" "$stage/usr/local/libexec/bus1test/scenario.sh"
install -D -m 644 "$here/scenario-lib.sh" "$stage/usr/local/libexec/bus1test/scenario-lib.sh"
install -D -m 755 "$here/guest-run.sh" "$stage/usr/local/libexec/bus1test/guest-run.sh"
install -D -m 755 "$here/bus1test-client.py" "$stage/usr/local/libexec/bus1test/bus1test-client.py"
install -D -m 644 "$here/bus1test.service" "$stage/etc/systemd/system/bus1test.service"
install -D -m 644 "$here/bus1test.conf" "$stage/etc/dbus-1/system.d/bus1test.conf"
# A unit that does not stop (a wedged bus ignoring SIGTERM) is killed after 20 s, not 90 s
# (times the time factor: a slow machine must not make a clean stop look wedged).
mkdir -p "$stage/etc/systemd/system.conf.d"
printf '[Manager]\nDefaultTimeoutStopSec=%ss\n' $((20 * factor)) \
	>"$stage/etc/systemd/system.conf.d/bus1test.conf"
[ -z "$module" ] || cp "$module" "$results/bus1.ko"
[ -z "$files" ] || cp -a "$files" "$results/files"
{
	echo "JOB_DISK=$([ -n "$disk" ] && echo 1 || echo 0)"
	echo "JOB_HEADERS=$headers"
	echo "JOB_PHASE=$phase"
	echo "JOB_KBUILD=$kbuild"
	echo "JOB_BUS=$bus"
	echo "JOB_MODULE=$([ -n "$module" ] && echo 1 || echo 0)"
	echo "JOB_KVER=$kver"
	echo "JOB_TIMEOUT=$((2 * timeout_s * factor))"
	echo "JOB_TIME_FACTOR=$factor"
} >"$results/job"

# ---- boot --------------------------------------------------------------------------------------

accel=${BUS1_VM_ACCEL:-tcg}
extra=()
[ -z "$disk" ] || extra+=(-drive "file=$disk,format=raw,if=virtio,cache=unsafe")
if [ $headers = 1 ]; then
	extra+=(-fsdev "local,id=src,path=/usr/src,security_model=none,readonly=on,multidevs=remap"
		-device virtio-9p-pci,fsdev=src,mount_tag=src
		-fsdev "local,id=kbuild,path=$kbuild,security_model=none,readonly=on,multidevs=remap"
		-device virtio-9p-pci,fsdev=kbuild,mount_tag=kbuild)
fi
cpu=()
[ "$accel" = kvm ] && cpu=(-cpu host)
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# One boot (mitigations=off: as in test/vm/run-guest.sh, the kernel's Spectre mitigations cost a
# third of a syscall-bound loop under TCG, and nothing a test asserts depends on them).
# Returns with qemu_rc set; poweroff_s = seconds from the status file to qemu's exit
# ("" when the guest had to be killed after the scenario).
boot() {
	local t_status=""
	start=$(now)
	"$qemu" -machine pc -accel "$accel" "${cpu[@]}" -m "$mem" -smp "$smp" "${extra[@]}" \
		-nodefaults -no-user-config -display none -no-reboot \
		-serial "file:$results/console.log" -monitor none \
		-kernel "$kernel" -initrd "$kcache/initramfs.gz" \
		-append "console=ttyS0 quiet loglevel=4 panic=-1 mitigations=off printk.time=1 systemd.show_status=auto systemd.firstboot=off TERM=dumb" \
		-fsdev "local,id=sysroot,path=$root,security_model=none,readonly=on,multidevs=remap" \
		-device virtio-9p-pci,fsdev=sysroot,mount_tag=sysroot \
		-fsdev "local,id=modules,path=$moddir,security_model=none,readonly=on,multidevs=remap" \
		-device virtio-9p-pci,fsdev=modules,mount_tag=modules \
		-fsdev "local,id=results,path=$results,security_model=none,multidevs=remap" \
		-device virtio-9p-pci,fsdev=results,mount_tag=results \
		</dev/null >"$results/qemu.log" 2>&1 &
	qemu_pid=$!
	poweroff_s=
	qemu_rc=
	# The guest (guest-run.sh) stops the scenario when it finds the stop file, saves what it
	# has and powers off; boot and shutdown get their time on top of the scenario's.
	vm_watch "$qemu_pid" "$stall_lim" "$all_lim" "$results/stall" "$grace" \
		"$results/console.log" "$results/output"
	qemu_rc=0
	{ wait "$qemu_pid" || qemu_rc=$?; } 2>/dev/null
	qemu_pid=
	end=$(now)
	# The guest writes the status file last, then powers off.
	[ ! -f "$results/status" ] || t_status=$(stat -c %.3Y "$results/status")
	if [ -n "$t_status" ] && [ "$qemu_rc" != 137 ]; then
		poweroff_s=$(secs "$t_status" "$end")
	fi
}

stall_lim=$((stall_s * factor))
all_lim=$((2 * (timeout_s + boot_s) * factor))
grace=$((60 * factor))
attempt=1
while :; do
	boot
	# Under multi-threaded TCG a vCPU may run a stale translation of kernel code being patched
	# through int3 (static keys): the guest dies of "Oops: int3" with no bus1 in the trace.
	# Boot once more, said aloud (as test/vm/run-guest.sh does).
	if [ $attempt = 1 ] && [ ! -f "$results/status" ] && [ "$qemu_rc" != 137 ] &&
		grep -q "Oops: int3" "$results/console.log" 2>/dev/null &&
		! grep -q "\[bus1\]" "$results/console.log"; then
		echo "$me: the guest kernel died of a TCG int3 (no bus1 in the trace); booting once more:" >&2
		grep -m 3 -E "Oops: int3|RIP: 0010" "$results/console.log" >&2 || true
		find "$results" -mindepth 1 -maxdepth 1 ! -name job ! -name stage ! -name bus1.ko \
			-exec rm -rf {} +
		attempt=2
		continue
	fi
	break
done

# ---- verdict -----------------------------------------------------------------------------------

show() {
	[ -s "$results/$1" ] || return 0
	echo "---- $2 ----"
	cat "$results/$1"
}
total=$(secs "$start" "$end")
uptime_of() { cat "$results/$1" 2>/dev/null || echo "?"; }
timing="boot to scenario $(uptime_of scenario-start)s, scenario ended at $(uptime_of scenario-end)s"
timing+=" (guest uptime), poweroff ${poweroff_s:-?}s, total ${total}s"
{
	echo "boot_s=$(uptime_of scenario-start)"
	echo "end_s=$(uptime_of scenario-end)"
	echo "poweroff_s=${poweroff_s:-}"
	echo "total_s=$total"
} >"$results/timing"
if [ -n "$outdir" ]; then
	mkdir -p "$outdir"
	for f in output journal console.log dmesg timing switch.log insmod.log; do
		[ ! -f "$results/$f" ] || cp "$results/$f" "$outdir/"
	done
fi

[ ! -f "$results/output" ] || cat "$results/output"

if [ ! -f "$results/status" ]; then
	if [ -n "$vm_watch_verdict" ]; then
		vm_watch_say "$me: [$bus] the guest" "$stall_lim" "$all_lim" "$results/output"
		echo "$me: [$bus] it did not stop by itself within ${grace}s either: killed (${total}s)" >&2
	elif [ "$qemu_rc" = 137 ]; then
		echo "$me: [$bus] guest killed (${total}s)" >&2
	else
		echo "$me: [$bus] guest died without a result (qemu status $qemu_rc, ${total}s)" >&2
	fi
	show init-failed "initramfs"
	show qemu.log "qemu"
	show console.log "guest console"
	[ -n "$vm_watch_verdict" ] && exit 124
	exit 1
fi
if [ "$vm_watch_verdict" = stalled ] && [ "$(cat "$results/status")" = 124 ]; then
	vm_watch_say "$me: [$bus] the scenario" "$stall_lim" "$all_lim" "$results/output"
fi

status=$(cat "$results/status")
fail=0
kernel_fail=0
if [ -f "$results/insmod" ] && [ "$(cat "$results/insmod")" != 0 ]; then
	echo "$me: insmod $module failed:" >&2
	cat "$results/insmod.log" >&2
	fail=1
fi
if [ -n "$module" ] || [ $kernel_check = 1 ]; then
	tainted=$(cat "$results/tainted" 2>/dev/null || echo 0)
	for f in 5:B 7:D 9:W 14:L; do
		if (( (tainted >> ${f%%:*}) & 1 )); then
			echo "$me: kernel tainted with ${f#*:} (tainted=$tainted)" >&2
			kernel_fail=1
		fi
	done
	# The report of the OOM kill a scenario asks for (SysRq f, scenario-restart.sh) has a
	# call trace of its own: it is not a warning, from its first line to its victim's.
	if cat "$results/dmesg" "$results/console.log" 2>/dev/null |
		awk '/sysrq: Manual OOM execution/ { skip = 1 } !skip { print } /Killed process/ { skip = 0 }' |
		grep -Eq 'WARNING:|BUG:|Oops|general protection fault|Call Trace:'; then
		echo "$me: the kernel logged a warning, bug or oops with bus1.ko loaded" >&2
		kernel_fail=1
	fi
fi
# A clean shutdown takes 1-3 s here; one that waits for a unit's stop timeout (20 s, both
# times the time factor) failed.
if [ -z "$poweroff_s" ]; then
	echo "$me: the guest did not power off after the scenario's end (killed)" >&2
	fail=1
elif awk -v s="$poweroff_s" -v l=$((15 * factor)) 'BEGIN { exit !(s > l) }'; then
	echo "$me: the shutdown took ${poweroff_s}s (more than $((15 * factor)) s: it waited for a stop timeout)" >&2
	fail=1
fi
[ $kernel_fail = 0 ] || fail=1
if [ "$fail" != 0 ] && [ "$status" = 0 ]; then
	status=1
fi
if [ "$status" != 0 ] || [ $verbose = 1 ]; then
	# The journal without kernel lines (the dmesg follows), from the end of the boot on, plus the
	# bus's own lines during the boot; the whole of it with --keep or --outdir.
	if [ -s "$results/journal" ]; then
		echo "---- guest journal (journalctl -b: the bus during boot, everything after it) ----"
		awk '/ kernel: / { next } f || /Startup finished/ { f = 1; print; next }
		     /bus1-broker|dbus-daemon|dbus\.s/' "$results/journal"
	fi
	if [ -s "$results/console.log" ]; then
		echo "---- guest console ----"
		sed 's/\x1b\[[0-9;]*[A-Za-z]//g' "$results/console.log"
	fi
fi
[ $kernel_fail = 0 ] || show dmesg "guest dmesg"
echo "$me: [$bus${module:+ + bus1.ko}] scenario status $status; $timing" >&2
exit "$status"
