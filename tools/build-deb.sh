#!/bin/bash
# Build the Debian 12 binary packages of this tree (debian/) and check them
# with lintian: bus1-broker, bus1-dkms, libbus1-0, libbus1-client0 and
# libbus1-dev land in OUTDIR (default: ../, as dpkg-buildpackage puts them).
#
#   tools/build-deb.sh [--no-lintian] [OUTDIR]
#
# Installs the build dependencies first when run as root (tools/deps.sh
# deb). The build runs in a copy of the tree, so the work tree stays clean.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
lintian=1
if [ "${1:-}" = --no-lintian ]; then
	lintian=0
	shift
fi
out=$(realpath -m "${1:-$src/..}")
mkdir -p "$out"

[ "$(id -u)" = 0 ] && tools/deps.sh deb

work=$(mktemp -d "${TMPDIR:-/tmp}/bus1-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The tracked files only (no build directories), as a fresh clone has them.
mkdir "$work/bus1-dbus"
git -C "$src" ls-files -z --cached --others --exclude-standard |
	(cd "$src" && xargs -0 cp --parents -t "$work/bus1-dbus" 2>/dev/null || true)
(cd "$work/bus1-dbus" && DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-} parallel=$(nproc)" \
	dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) || {
	tail -n 60 "$work/build.log" >&2
	echo "build-deb: dpkg-buildpackage failed (log above)" >&2
	exit 1
}
changes=$(ls "$work"/*.changes)
# The packages (the Files: of the .changes also list the .buildinfo, copied below with it).
debs=$(sed -n '/^Files:/,$p' "$changes" | awk 'NF == 5 && $5 ~ /\.deb$/ { print $5 }')
for f in $debs $(basename "$changes") $(cd "$work" && ls ./*.buildinfo); do
	cp "$work/$f" "$out/"
done
echo "build-deb: packages in $out:"
for f in $debs; do
	printf '  %s (%s bytes)\n' "$f" "$(stat -c %s "$out/$f")"
done
# A production build: the re-exec's test hooks are compiled out (-Dtest_hooks=false).
deb=$(printf '%s\n' $debs | grep '^bus1-broker_')
mkdir "$work/x"
dpkg-deb -x "$out/$deb" "$work/x"
if grep -a -q -e BUS1_BROKER_RESTORE_FAIL -e BUS1_BROKER_STATE_VERSION "$work/x/usr/bin/bus1-broker"; then
	echo "build-deb: the packaged bus1-broker still reads a test hook" >&2
	exit 1
fi
echo "build-deb: the packaged bus1-broker has no test hook"
if [ $lintian = 1 ]; then
	# Errors and warnings fail; info and pedantic tags are printed.
	lintian --fail-on error,warning --info "$out/$(basename "$changes")"
	echo "build-deb: lintian: no error, no warning"
fi
