#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# check-style.sh [KVER...]
#
# Static checks of kmod/ for CI; exits non-zero on any report:
#   - checkpatch.pl --strict on every source file;
#   - sparse (make C=2 CHECK=sparse) against every kernel named, by default
#     every /lib/modules/*/build, in a scratch copy (no objects in kmod/).
# The one accepted report is PREFER_DEFINED_ATTRIBUTE_MACRO in the uapi
# header, which must spell __attribute__((__aligned__(8))) for user space
# (see the comment there).
#
# checkpatch.pl is $CHECKPATCH, else the one in a kernel headers package,
# else extracted once from /usr/src/linux-source-*.tar.xz into
# ${XDG_CACHE_HOME:-$HOME/.cache}/bus1-checkpatch (the first run then takes
# about a minute longer). sparse is $SPARSE, else sparse from PATH.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
fail=0

find_checkpatch() {
	if [ -n "${CHECKPATCH:-}" ]; then
		echo "$CHECKPATCH"
		return 0
	fi
	for f in /usr/src/linux-headers-*/scripts/checkpatch.pl; do
		if [ -f "$f" ]; then
			echo "$f"
			return 0
		fi
	done
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/bus1-checkpatch
	for t in /usr/src/linux-source-*.tar.xz; do
		[ -f "$t" ] || continue
		dir=$cache/$(basename "$t" .tar.xz)-$(stat -c %s-%Y "$t")
		if [ ! -f "$dir/scripts/checkpatch.pl" ]; then
			rm -rf "$dir.tmp"
			mkdir -p "$dir.tmp"
			# checkpatch reads its word lists from its own directory
			tar -xJf "$t" -C "$dir.tmp" --strip-components=1 --wildcards \
				'*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
				'*/scripts/const_structs.checkpatch' >&2
			rm -rf "$dir"
			mv "$dir.tmp" "$dir"
		fi
		echo "$dir/scripts/checkpatch.pl"
		return 0
	done
	return 1
}

checkpatch=$(find_checkpatch) || {
	echo "check-style: no checkpatch.pl (set CHECKPATCH, or install linux-source)" >&2
	exit 2
}
sparse=${SPARSE:-$(command -v sparse || true)}
if [ -z "$sparse" ]; then
	echo "check-style: no sparse (apt-get install sparse, or set SPARSE)" >&2
	exit 2
fi

# checkpatch: --terse prints one line per report ("FILE:LINE: TYPE:NAME: ...")
# and a "total:" line per file, which is not a report.
cp_run() {
	perl "$checkpatch" --strict --no-tree --terse --show-types "$@" || true
}
out=$({
	cp_run -f ./*.c ./*.h
	cp_run --ignore PREFER_DEFINED_ATTRIBUTE_MACRO -f uapi/linux/bus1.h
} | grep -v '^total: ' || true)
if [ -n "$out" ]; then
	echo "$out"
	fail=1
fi
echo "check-style: checkpatch --strict: $(echo "$out" | grep -c . || true) report(s)"

# sparse, once per kernel
if [ $# -eq 0 ]; then
	for d in /lib/modules/*/build; do
		[ -d "$d" ] && set -- "$@" "$(basename "$(dirname "$d")")"
	done
fi
if [ $# -eq 0 ]; then
	echo "check-style: no kernel headers in /lib/modules/*/build for sparse" >&2
	exit 2
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for kver in "$@"; do
	work=$scratch/$kver
	mkdir -p "$work/uapi/linux"
	cp "$here"/Kbuild "$here"/*.c "$here"/*.h "$work/"
	cp "$here/uapi/linux/bus1.h" "$work/uapi/linux/"
	if ! log=$(make -s -C "/lib/modules/$kver/build" M="$work" C=2 CHECK="$sparse" \
			modules 2>&1); then
		echo "$log"
		echo "check-style: $kver: the build failed" >&2
		fail=1
		continue
	fi
	# what make prints besides the checker: "Skipping BTF generation" (no vmlinux)
	reports=$(echo "$log" | grep -v 'Skipping BTF generation' | grep . || true)
	if [ -n "$reports" ]; then
		echo "$reports"
		fail=1
	fi
	echo "check-style: sparse against $kver: $(echo "$reports" | grep -c . || true) report(s)"
done
exit $fail
