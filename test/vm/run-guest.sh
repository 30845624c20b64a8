#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-guest.sh - boot Debian's own kernel (or a given kernel image, e.g. the debug kernel of
# build-debug-kernel.sh) under qemu, load a module, run one command in the guest and return its
# exit status.
#
# The host root is shared read-only over 9p with a tmpfs overlay on top, so host binaries (the
# build tree, dbus-daemon, python3) run unchanged in the guest. A second, read-write 9p share
# carries the job description in and the results (status, output, dmesg, taint) out; nothing is
# scraped from the console.
#
# Exit status: the command's status; 1 if the guest kernel logged a WARN/BUG/oops (taint flags
# W, D, L or B, or such lines in dmesg: KASAN, lockdep and DEBUG_* reports included), kmemleak
# found an unreferenced object, lockdep turned itself off, `rmmod` failed after the command (a
# leaked reference), insmod failed or the guest died; 124 if the guest made no progress for
# --stall seconds or ran past its --timeout (test/vm/watchdog.sh); 77 (skip) if
# qemu or a bootable kernel is missing. On failure the guest's dmesg (and console, if the guest
# died) is printed.
#
# Usage: run-guest.sh [OPTIONS] [--] COMMAND [ARG...]
#   --module KO      insmod this module before the command, rmmod it after ("" = none)
#   --kver VER       kernel version (default: $BUS1_VM_KVER, else the newest /lib/modules/*/build
#                    with a matching /boot/vmlinuz-VER)
#   --kernel-image IMG  boot this image instead of Debian's (default: $BUS1_VM_KERNEL_IMAGE): a
#                    vmlinux with the PVH entry or a bzImage whose kernel has 9p, virtio-pci,
#                    overlayfs, tmpfs and devtmpfs built in (the initramfs carries no modules);
#                    --kver is then ignored
#   --cache DIR      where the extracted vmlinux and the initramfs are cached
#                    (default: $BUS1_VM_CACHE, else ./vm-cache)
#   --smp N          guest CPUs (default 1)
#   --mem SIZE       guest memory (default 1G)
#   --timeout SEC    the command's budget on an idle reference machine (default 300): it is
#                    stopped after twice that, times BUS1_TIME_FACTOR, even while it works
#   --stall SEC      stop the command when the guest made no progress (no output, no console
#                    line, qemu idle) for SEC seconds, times BUS1_TIME_FACTOR (default 180)
#   --slack SEC      the guest gets SEC seconds (times BUS1_TIME_FACTOR) more for boot,
#                    cleanup and the kmemleak scans before qemu is killed (default 60)
#   --env NAME=VAL   set a variable for the command (repeatable)
#   --append ARGS    add ARGS to the kernel command line (default: $BUS1_VM_APPEND)
#   --outdir DIR     give the command a writable directory whose contents come back: the guest
#                    sees it as $BUS1_VM_OUT (empty at start); after the run, whatever the command
#                    left there is copied into DIR on the host (also when the command failed)
#   --keep           keep the per-run results directory
#   --verbose        print the guest output and timing even on success
#   --probe          only check that a guest can be booted: print the kernel version, exit 0 (or
#                    77 if something is missing)
# Environment: BUS1_VM_ACCEL=tcg|kvm (default: tcg; kvm is used only when asked for);
# BUS1_TIME_FACTOR (tools/time-factor.sh) stretches every time limit.

set -euo pipefail

me=run-guest
srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

module=
kver=${BUS1_VM_KVER:-}
image=${BUS1_VM_KERNEL_IMAGE:-}
slack=60
cache=${BUS1_VM_CACHE:-$PWD/vm-cache}
smp=1
mem=1G
timeout_s=${BUS1_VM_TIMEOUT:-300}
stall_s=180
keep=0
outdir=
verbose=0
probe=0
envs=()
append=${BUS1_VM_APPEND:+ $BUS1_VM_APPEND}

die() { echo "$me: $*" >&2; exit 1; }
skip() { echo "$me: SKIP: $*" >&2; exit 77; }

while [ $# -gt 0 ]; do
	case "$1" in
	--module) module=$2; shift 2 ;;
	--kver) kver=$2; shift 2 ;;
	--kernel-image) image=$2; shift 2 ;;
	--slack) slack=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--stall) stall_s=$2; shift 2 ;;
	--env) envs+=("$2"); shift 2 ;;
	--append) append+=" $2"; shift 2 ;;
	--outdir) outdir=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--verbose) verbose=1; shift ;;
	--probe) probe=1; shift ;;
	--) shift; break ;;
	-*) die "unknown option $1" ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || [ $probe = 1 ] || die "usage: run-guest.sh [OPTIONS] [--] COMMAND [ARG...]"
case "$timeout_s" in ''|*[!0-9]*) die "--timeout wants seconds, got '$timeout_s'" ;; esac
case "$slack" in ''|*[!0-9]*) die "--slack wants seconds, got '$slack'" ;; esac
case "$stall_s" in ''|*[!0-9]*) die "--stall wants seconds, got '$stall_s'" ;; esac

# ---- what we need on the host ----------------------------------------------------------------

qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
# The helpers shared with test/systemd/run-systemd-guest.sh.
# shellcheck source=test/vm/kernel-image.sh
. "$srcdir/kernel-image.sh"
# shellcheck source=test/vm/watchdog.sh
. "$srcdir/watchdog.sh"
busybox=$(vm_static_busybox) || skip "no static busybox (apt-get install busybox-static)"
for t in cpio xz gzip sha256sum; do
	command -v $t >/dev/null || skip "$t not installed"
done

# The modules the initramfs loads to mount the host root (9p over virtio-pci, overlayfs), with
# their dependencies from modules.dep; those built into the kernel are left out.
initrd_want="virtio_pci 9pnet_virtio 9p overlay"

if [ -n "$image" ]; then
	[ -r "$image" ] || skip "kernel image $image missing or unreadable"
	image=$(realpath "$image")
	if [ $probe = 1 ]; then
		echo "$image"
		exit 0
	fi
	kname=image-$(printf '%s' "$image" | sha256sum | cut -c1-12)
	initrd_want=
elif [ -z "$kver" ]; then
	kver=$(vm_newest_kernel) || true
fi
if [ -z "$image" ]; then
	[ -n "$kver" ] || skip "no kernel with both /lib/modules/VER/build and /boot/vmlinuz-VER" \
		"(apt-get install linux-image-amd64 linux-headers-amd64)"
	vmlinuz=/boot/vmlinuz-$kver
	moddir=/lib/modules/$kver
	[ -r "$vmlinuz" ] || skip "$vmlinuz missing or unreadable"
	[ -d "$moddir/kernel" ] || skip "$moddir/kernel missing"
	if [ $probe = 1 ]; then
		echo "$kver"
		exit 0
	fi
	kname=$kver
fi
if [ -n "$module" ]; then
	[ -f "$module" ] || die "module $module does not exist"
	module=$(realpath "$module")
fi

mkdir -p "$cache"
cache=$(realpath "$cache")
kcache=$cache/$kname
mkdir -p "$kcache"

# ---- cached artefacts: vmlinux (PVH entry, boots twice as fast as bzImage) and initramfs -------

build_vmlinux() {
	vm_extract_vmlinux "$vmlinuz" "$kcache/vmlinux"
}

# "NAME PATH" for each module of $initrd_want and its dependencies, in load order.
initrd_modules() {
	vm_initrd_modules "$moddir" "$initrd_want"
}

build_initramfs() {
	local root m f tmp
	root=$kcache/initramfs.d.$$
	rm -rf "$root"
	mkdir -p "$root"/{bin,lib/modules,proc,sys,dev,lower,rw,newroot}
	cp "$busybox" "$root/bin/busybox"
	: >"$root/lib/modules/order"
	: >"$root/mods"
	[ -z "$initrd_want" ] || initrd_modules >"$root/mods" || { rm -rf "$root"; die "no modules.dep"; }
	# busybox insmod cannot load compressed modules (Debian's 6.12 ships .ko.xz): decompress.
	while read -r m f; do
		[ -f "$moddir/$f" ] || { rm -rf "$root"; die "module $m not found in $moddir"; }
		vm_unpack_module "$moddir/$f" "$root/lib/modules/$m.ko" ||
			{ rm -rf "$root"; die "cannot unpack $f"; }
		echo "$m" >>"$root/lib/modules/order"
	done <"$root/mods"
	rm -f "$root/mods"
	cp "$srcdir/guest-init.sh" "$root/init"
	chmod 755 "$root/init"
	tmp=$kcache/initramfs.tmp.$$
	(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$tmp"
	rm -rf "$root"
	mv -f "$tmp" "$kcache/initramfs.gz"
}

(
	flock 9
	if [ -z "$image" ] &&
	   { [ ! -s "$kcache/vmlinux" ] || [ "$vmlinuz" -nt "$kcache/vmlinux" ]; }; then
		build_vmlinux || echo "$me: could not extract vmlinux from $vmlinuz, booting bzImage" >&2
	fi
	if [ ! -s "$kcache/initramfs.gz" ] || [ "$srcdir/guest-init.sh" -nt "$kcache/initramfs.gz" ] ||
	   [ "$srcdir/run-guest.sh" -nt "$kcache/initramfs.gz" ] ||
	   [ "$srcdir/kernel-image.sh" -nt "$kcache/initramfs.gz" ] ||
	   { [ -z "$image" ] && [ "$moddir/modules.dep" -nt "$kcache/initramfs.gz" ]; }; then
		build_initramfs
	fi
) 9>"$kcache/lock"

if [ -n "$image" ]; then
	kernel=$image
else
	kernel=$kcache/vmlinux
	[ -s "$kernel" ] || kernel=$vmlinuz
fi
[ -s "$kcache/initramfs.gz" ] || die "initramfs missing"

# ---- the job -----------------------------------------------------------------------------------

results=$(mktemp -d "$cache/run.XXXXXX")
qemu_pid=
cleanup() {
	[ -z "$qemu_pid" ] || kill -KILL "$qemu_pid" 2>/dev/null || true
	if [ "$keep" = 0 ]; then
		rm -rf "$results"
	else
		echo "$me: results kept in $results" >&2
	fi
}
trap cleanup EXIT

cp "$srcdir/guest-stage2.sh" "$results/stage2.sh"
factor=$(vm_time_factor)
# The command's own limits (the kmod tests' per-case alarms) stretch by it too.
envs+=("BUS1_TIME_FACTOR=$factor")
cmd_limit=$((2 * timeout_s * factor))
stall_s=$((stall_s * factor))
slack=$((slack * factor))
if [ -n "$outdir" ]; then
	mkdir -p "$outdir" "$results/out"
	outdir=$(realpath "$outdir")
	envs+=("BUS1_VM_OUT=/vm-results/out")
fi
{
	printf 'JOB_MODULE=%q\n' "$module"
	printf 'JOB_CWD=%q\n' "$PWD"
	printf 'JOB_TIMEOUT=%q\n' "$cmd_limit"
	printf 'JOB_TIME_FACTOR=%q\n' "$factor"
	printf 'JOB_CMD=('
	printf '%q ' "$@"
	printf ')\n'
	printf 'JOB_ENV=('
	[ ${#envs[@]} -eq 0 ] || printf '%q ' "${envs[@]}"
	printf ')\n'
} >"$results/job"

accel=${BUS1_VM_ACCEL:-tcg}
cpu=()
[ "$accel" = kvm ] && cpu=(-cpu host)

# One boot of the guest. A guest that dies of "Oops: int3" in the kernel's own
# code (no bus1 symbol in the trace) before it could report is booted once
# more, said aloud: under multi-threaded TCG a vCPU may run a stale
# translation of code the kernel is patching (static keys, through int3) after
# the patching ended; seen at boot (sched_clock_cpu) and at the first memory
# cgroup (kmem_cache_alloc_noprof) on 6.12, never with bus1 in the trace.
attempt=1
# mitigations=off: a guest is a throwaway test machine, and under TCG the kernel's Spectre
# mitigations (retpolines, RSB filling, swapgs barriers) cost a third of the time of a
# syscall-bound loop (open/close in a shell: 4.5-4.9 s with them, 3.1 s without, on 6.1).
# Nothing a test asserts depends on them.
while :; do
start=$(date +%s.%N)
qemu_rc=0
"$qemu" \
	-machine pc -accel "$accel" "${cpu[@]}" -m "$mem" -smp "$smp" \
	-nodefaults -no-user-config -display none -no-reboot \
	-serial "file:$results/console.log" -monitor none \
	-kernel "$kernel" -initrd "$kcache/initramfs.gz" \
	-append "console=ttyS0 quiet loglevel=4 panic=-1 mitigations=off$append" \
	-fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=root,mount_tag=hostroot \
	-fsdev "local,id=res,path=$results,security_model=none,multidevs=remap" \
	-device virtio-9p-pci,fsdev=res,mount_tag=results \
	</dev/null >"$results/qemu.log" 2>&1 &
qemu_pid=$!
# Boot and the guest's cleanup come on top of the command's own limit.
vm_watch $qemu_pid "$stall_s" $((cmd_limit + slack)) "$results/stall" "$slack" \
	"$results/console.log" "$results/output" "$results/timing"
wait $qemu_pid || qemu_rc=$?
qemu_pid=
if [ $attempt = 1 ] && [ ! -f "$results/status" ] && [ $qemu_rc != 137 ] &&
	grep -q "Oops: int3" "$results/console.log" 2>/dev/null &&
	! grep -q "\[bus1\]" "$results/console.log"; then
	echo "$me: the guest kernel died of a TCG int3 (no bus1 in the trace); booting once more:" >&2
	grep -m 3 -E "Oops: int3|RIP: 0010" "$results/console.log" >&2
	find "$results" -mindepth 1 -maxdepth 1 ! -name job ! -name stage2.sh ! -name out \
		-exec rm -rf {} +
	[ -d "$results/out" ] && find "$results/out" -mindepth 1 -delete
	attempt=2
	continue
fi
break
done
end=$(date +%s.%N)
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
if [ -n "$outdir" ]; then
	cp -R "$results/out/." "$outdir/" ||
		echo "$me: could not copy the guest's output files to $outdir" >&2
fi

# ---- verdict -----------------------------------------------------------------------------------

show() {
	local f=$1 title=$2
	[ -s "$results/$f" ] || return 0
	echo "---- $title ----"
	cat "$results/$f"
}

[ -f "$results/output" ] && cat "$results/output"

if [ ! -f "$results/status" ]; then
	if [ -n "$vm_watch_verdict" ]; then
		vm_watch_say "$me: the guest" "$stall_s" $((cmd_limit + slack)) "$results/console.log"
		echo "$me: the guest did not stop by itself within ${slack}s either: killed" >&2
	elif [ $qemu_rc = 137 ]; then
		echo "$me: guest killed after ${elapsed}s" >&2
	else
		echo "$me: guest died without a result (qemu status $qemu_rc, ${elapsed}s)" >&2
	fi
	show qemu.log "qemu"
	show console.log "guest console"
	show dmesg "guest dmesg"
	[ -n "$vm_watch_verdict" ] && exit 124
	exit 1
fi

status=$(cat "$results/status")
fail=0
if [ -f "$results/insmod" ] && [ "$(cat "$results/insmod")" != 0 ]; then
	echo "$me: insmod $module failed" >&2
	fail=1
fi
if [ -f "$results/rmmod" ] && [ "$(cat "$results/rmmod")" != 0 ]; then
	echo "$me: rmmod failed after the command (leaked reference?): $(cat "$results/rmmod")" >&2
	fail=1
fi
tainted=$(cat "$results/tainted" 2>/dev/null || echo 0)
# TAINT_BAD_PAGE (B) = bit 5 (also set by a KASAN report), TAINT_DIE (D) = bit 7, TAINT_WARN (W)
# = bit 9, TAINT_SOFTLOCKUP (L) = bit 14.
for f in 5:B 7:D 9:W 14:L; do
	if (( (tainted >> ${f%%:*}) & 1 )); then
		echo "$me: kernel tainted with ${f#*:} (tainted=$tainted)" >&2
		fail=1
	fi
done
# (The task dump the guest asks for on a hang comes after a marker, and is no warning.) Besides
# WARN/BUG/oops, the reports of the debug kernel's checkers: KASAN, lockdep and RCU lockdep
# (most start with "WARNING:" or "BUG:", named here anyway), DEBUG_ATOMIC_SLEEP, DEBUG_LIST,
# DEBUG_OBJECTS, kmemleak, hung tasks.
report_re='WARNING:|BUG:|Oops|general protection fault|kernel BUG|UBSAN:|refcount_t:|Call Trace:'
report_re+='|KASAN:|possible circular locking|possible recursive locking|inconsistent lock state'
report_re+='|suspicious RCU usage|sleeping function called from invalid context'
report_re+='|lock held when returning to user space|INFO: trying to register non-static key'
report_re+='|list_(add|del) corruption|ODEBUG:|suspected memory leak|blocked for more than'
if [ -f "$results/dmesg" ] && sed '/run-guest: task dump follows/,$d' "$results/dmesg" |
	grep -Eq "$report_re"
then
	echo "$me: the kernel logged a warning, bug or oops" >&2
	fail=1
fi
# Found with the module loaded (backtraces with its symbols), else after rmmod.
for f in "kmemleak-loaded:before rmmod" "kmemleak:after rmmod"; do
	if [ -s "$results/${f%%:*}" ]; then
		echo "$me: kmemleak found unreferenced objects (${f#*:}):" >&2
		cat "$results/${f%%:*}" >&2
		fail=1
		break
	fi
done
if [ "$(cat "$results/debug_locks" 2>/dev/null)" = 0 ]; then
	echo "$me: lockdep turned itself off (after a report, or a taint): its checks did not run" >&2
	fail=1
fi
if [ -f "$results/timedout" ]; then
	if [ -n "$vm_watch_verdict" ]; then
		vm_watch_say "$me: the command" "$stall_s" $((cmd_limit + slack)) "$results/output"
	else
		echo "$me: the command ran past its limit of ${cmd_limit}s: stopped" >&2
	fi
	echo "$me: (blocked tasks and CPU backtraces in the dmesg below)" >&2
	status=124
fi

if [ $fail != 0 ]; then
	echo "$me: command status $status, guest ${elapsed}s" >&2
	show dmesg "guest dmesg (after boot)"
	exit 1
fi
if [ "$status" != 0 ] && [ "$status" != 77 ]; then
	echo "$me: command status $status, guest ${elapsed}s" >&2
	show dmesg "guest dmesg (after boot)"
	exit "$status"
fi
[ $verbose = 0 ] || echo "$me: command status $status, guest ${elapsed}s" >&2
exit "$status"
