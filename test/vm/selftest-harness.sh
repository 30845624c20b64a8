#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# selftest-harness.sh - prove that run-guest.sh reports what it claims to: the command's
# status (0, 3, 77), a kernel WARN (a module that warns at load), a module that cannot be
# unloaded (rmmod failure), and a hung command (timeout). Boots six guests (~40 s); not part of
# the default test run. Usage: selftest-harness.sh [CACHE_DIR]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${1:-$PWD/vm-cache}
run=("$here/run-guest.sh" --cache "$cache")
kver=$("${run[@]}" --probe) || { echo "selftest: cannot boot a guest"; exit 77; }
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
echo 'obj-m := kt_warn.o kt_stuck.o' >"$work/Kbuild"
make -s -C "/lib/modules/$kver/build" M="$work" modules >"$work/build.log" 2>&1 ||
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

check 0 '' -- /bin/true
check 3 'hello' -- sh -c 'echo hello; exit 3'
check 77 '' -- sh -c 'exit 77'
check 1 'logged a warning' --module "$work/kt_warn.ko" -- /bin/true
check 1 'rmmod failed' --module "$work/kt_stuck.ko" -- /bin/true
check 124 'killed after' --timeout 3 -- sleep 100
[ $fails = 0 ] || exit 1
echo "selftest: all passed"
