#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# selftest-harness.sh - prove that run-guest.sh reports what it claims to: the command's
# status (0, 3, 77), a kernel WARN (a module that warns at load; with panic_on_warn too), a
# module that cannot be unloaded (rmmod failure), a command that runs past its limit while it
# works, and one that makes no progress (test/vm/watchdog.sh). Boots eight guests (~60 s).
# Usage: selftest-harness.sh [--watchdog] [CACHE_DIR [KERNEL_TREE]]
# --watchdog: only the two time limits (two guests; the kmod suite runs this as kmod-harness).
#
# With KERNEL_TREE (the debug kernel of build-debug-kernel.sh) it boots TREE/vmlinux instead and
# proves that each debug checker's report fails the run: a clean run passes, then modules that
# make KASAN, lockdep, DEBUG_ATOMIC_SLEEP and kmemleak report (five guests, about 5 minutes).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
watchdog_only=0
if [ "${1:-}" = --watchdog ]; then
	watchdog_only=1
	shift
fi
cache=${1:-$PWD/vm-cache}
tree=${2:-}
run=("$here/run-guest.sh" --cache "$cache")
[ -z "$tree" ] || run+=(--kernel-image "$tree/vmlinux" --slack 300)
kver=$("${run[@]}" --probe) || { echo "selftest: cannot boot a guest"; exit 77; }
kdir=${tree:-/lib/modules/$kver/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0

# Two throw-away modules: one that WARNs at load, one without an exit function (unremovable).
cat >"$work/kt_warn.c" <<'C'
#include <linux/module.h>
static int __init kt_warn_init(void) { WARN(1, "kt_warn: deliberate warning\n"); return 0; }
static void __exit kt_warn_exit(void) { }
module_init(kt_warn_init);
module_exit(kt_warn_exit);
MODULE_LICENSE("GPL");
C
cat >"$work/kt_stuck.c" <<'C'
#include <linux/module.h>
static int __init kt_stuck_init(void) { return 0; }
module_init(kt_stuck_init);
MODULE_LICENSE("GPL");
C
# For the debug kernel: one module per checker, each provoking its report at load time.
cat >"$work/kt_kasan.c" <<'C'
#include <linux/module.h>
#include <linux/slab.h>
static int kt_index = 16;
module_param(kt_index, int, 0);
static int __init kt_kasan_init(void)
{
	char *p = kmalloc(16, GFP_KERNEL);

	if (!p)
		return -ENOMEM;
	((volatile char *)p)[kt_index] = 1;	/* one byte past the object */
	kfree(p);
	return 0;
}
static void __exit kt_kasan_exit(void) { }
module_init(kt_kasan_init);
module_exit(kt_kasan_exit);
MODULE_LICENSE("GPL");
C
cat >"$work/kt_lockdep.c" <<'C'
#include <linux/module.h>
#include <linux/mutex.h>
static DEFINE_MUTEX(kt_a);
static DEFINE_MUTEX(kt_b);
static int __init kt_lockdep_init(void)
{
	/* A then B, later B then A: an ABBA deadlock waiting to happen. */
	mutex_lock(&kt_a);
	mutex_lock(&kt_b);
	mutex_unlock(&kt_b);
	mutex_unlock(&kt_a);
	mutex_lock(&kt_b);
	mutex_lock(&kt_a);
	mutex_unlock(&kt_a);
	mutex_unlock(&kt_b);
	return 0;
}
static void __exit kt_lockdep_exit(void) { }
module_init(kt_lockdep_init);
module_exit(kt_lockdep_exit);
MODULE_LICENSE("GPL");
C
cat >"$work/kt_atomic.c" <<'C'
#include <linux/module.h>
#include <linux/spinlock.h>
static DEFINE_SPINLOCK(kt_lock);
static int __init kt_atomic_init(void)
{
	spin_lock(&kt_lock);
	might_sleep();
	spin_unlock(&kt_lock);
	return 0;
}
static void __exit kt_atomic_exit(void) { }
module_init(kt_atomic_init);
module_exit(kt_atomic_exit);
MODULE_LICENSE("GPL");
C
cat >"$work/kt_leak.c" <<'C'
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>
static void *kt_ptr;
static int __init kt_leak_init(void)
{
	kt_ptr = kmalloc(1024, GFP_KERNEL);
	if (!kt_ptr)
		return -ENOMEM;
	memset(kt_ptr, 0x5a, 1024);
	WRITE_ONCE(kt_ptr, NULL);	/* the only reference, gone */
	return 0;
}
static void __exit kt_leak_exit(void) { }
module_init(kt_leak_init);
module_exit(kt_leak_exit);
MODULE_LICENSE("GPL");
C
if [ -n "$tree" ]; then
	echo 'obj-m := kt_warn.o kt_stuck.o kt_kasan.o kt_lockdep.o kt_atomic.o kt_leak.o' >"$work/Kbuild"
else
	echo 'obj-m := kt_warn.o kt_stuck.o' >"$work/Kbuild"
fi
[ $watchdog_only = 1 ] || make -s -C "$kdir" M="$work" modules >"$work/build.log" 2>&1 ||
	{ cat "$work/build.log"; echo "selftest: cannot build the test modules"; exit 1; }

check() {
	local want=$1 pattern=$2 out rc
	shift 2
	out=$("${run[@]}" "$@" 2>&1)
	rc=$?
	if [ "$rc" != "$want" ] || ! grep -q -- "$pattern" <<<"$out"; then
		echo "FAIL: run-guest.sh $*: status $rc (want $want), output:"
		sed 's/^/    /' <<<"$out"
		fails=$((fails + 1))
	else
		echo "ok: run-guest.sh $* -> $rc"
	fi
}

# The command's own limit (twice --timeout), and a guest that makes no progress at all.
watchdog_checks() {
	check 124 'ran past its limit' --timeout 3 -- sh -c 'while :; do echo tick; sleep 0.2; done'
	check 124 'no progress for' --stall 8 -- sleep 1000
}
if [ $watchdog_only = 1 ]; then
	watchdog_checks
	[ $fails = 0 ] || exit 1
	echo "selftest: the time limits hold"
	exit 0
fi

check 0 '' -- /bin/true
# The suites boot with panic_on_warn (test/vm/meson.build): a WARN ends the guest at once, and
# the console it prints shows the warning.
check 1 'panic_on_warn set' --append 'panic_on_warn=1 loglevel=5' \
	--module "$work/kt_warn.ko" -- /bin/true
if [ -n "$tree" ]; then
	check 1 'BUG: KASAN: slab-out-of-bounds' --module "$work/kt_kasan.ko" -- /bin/true
	check 1 'possible circular locking dependency' --module "$work/kt_lockdep.ko" -- /bin/true
	check 1 'sleeping function called from invalid context' --module "$work/kt_atomic.ko" -- /bin/true
	check 1 'unreferenced object' --module "$work/kt_leak.ko" -- /bin/true
	[ $fails = 0 ] || exit 1
	echo "selftest: all passed (debug kernel $tree)"
	exit 0
fi
check 3 'hello' -- sh -c 'echo hello; exit 3'
check 77 '' -- sh -c 'exit 77'
check 1 'logged a warning' --module "$work/kt_warn.ko" -- /bin/true
check 1 'rmmod failed' --module "$work/kt_stuck.ko" -- /bin/true
watchdog_checks
[ $fails = 0 ] || exit 1
echo "selftest: all passed"
