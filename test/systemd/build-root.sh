#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# build-root.sh - build (once) the root directory of a small Debian 12 (bookworm) system with
# systemd as PID 1, for run-systemd-guest.sh: systemd, dbus (dbus-daemon with Debian's
# system.conf, dbus.service and dbus.socket: the reference bus), polkitd, python3 (the test
# clients speak D-Bus over raw sockets), procps, util-linux, kmod, and what bus1-broker links
# (libexpat1, libsystemd0); for run-deb-suite.sh dbus-user-session, dkms, gcc, make, libc6-dev,
# libelf1 and libssl3 (the host kbuild tools DKMS runs link them), at-spi2-core
# and the user bus1user (uid 1000). No networking service, no getty, root without a password,
# multi-user.target as the default, systemd-firstboot masked (mmdebstrap leaves /etc/machine-id
# empty: systemd makes up a transient one at each boot, and it is not a first boot).
#
# Usage: build-root.sh [CACHE_DIR]
#   CACHE_DIR  default: $BUS1_SYSTEMD_ROOT_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/bus1-systemd-root
#   BUS1_SYSTEMD_MIRROR=URL  the Debian mirror (default http://deb.debian.org/debian; the
#                            security suite comes from the sibling debian-security)
#
# The root lives in CACHE_DIR/KEY/root, KEY = a hash of the package list and of this script
# (so any change here builds a new root; old ones can be deleted by hand). Its path is the only
# thing printed on stdout. An existing root is reused; an interrupted build starts over.
#
# Cost, measured on the 2-core build machine: 50-70 s (mmdebstrap downloads and unpacks about
# 150 packages from deb.debian.org); the tree is about 200 MB (docs, man pages and locales are
# left out). The guests share it read-only; each boot writes only into its own tmpfs overlay.

set -euo pipefail

me=build-root
cache=${1:-${BUS1_SYSTEMD_ROOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bus1-systemd-root}}
mirror=${BUS1_SYSTEMD_MIRROR:-http://deb.debian.org/debian}
suite=bookworm

# What the guest runs. bus1-broker links libexpat and libsystemd (ldd build-test/broker/bus1-broker:
# libsystemd0 brings libcap2, libgcrypt20, liblzma5, libzstd1, liblz4-1). Recommends are not
# installed (mmdebstrap's default), which keeps udev, timesyncd and the like out.
packages=(
	systemd systemd-sysv dbus polkitd python3 libexpat1 libsystemd0
	procps util-linux kmod
	# run-deb-suite.sh: the packages' dependencies, DKMS and what it builds with, a user session
	dbus-user-session dkms gcc make libc6-dev libelf1 libssl3 at-spi2-core
)
# Units the test boots never need: they only cost boot time on a TCG guest.
mask_units=(
	getty.target serial-getty@.service getty@.service console-getty.service
	apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer
	e2scrub_reap.service fstrim.timer systemd-timesyncd.service
	systemd-networkd.service systemd-networkd.socket systemd-resolved.service
	networking.service systemd-networkd-wait-online.service
	systemd-firstboot.service
)

die() { echo "$me: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap builds the root as root)"
command -v mmdebstrap >/dev/null || die "mmdebstrap not installed (apt-get install mmdebstrap)"

hash=$({
	printf '%s\n' "$suite" "$mirror" "${packages[@]}" -- "${mask_units[@]}"
	cat "${BASH_SOURCE[0]}"
} | sha256sum | cut -c1-12)
key=$suite-$hash
mkdir -p "$cache"
cache=$(realpath "$cache")
dir=$cache/$key
root=$dir/root

exec 9>"$cache/$key.lock"
flock 9
if [ -f "$dir/done" ]; then
	echo "$root"
	exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
log=$dir/build.log
echo "$me: building the Debian $suite root in $root (log: $log), about a minute" >&2
start=$(date +%s)

security=${mirror%/debian}/debian-security
[ "$security" != "$mirror" ] || security=http://deb.debian.org/debian-security
include=$(IFS=,; echo "${packages[*]}")

# Customisation, run by mmdebstrap with the root as $1 once everything is installed.
customize() {
	cat <<EOF
set -e
r=\$1
echo bus1-guest >"\$r/etc/hostname"
printf '127.0.0.1 localhost bus1-guest\n' >"\$r/etc/hosts"
: >"\$r/etc/fstab"
chroot "\$r" passwd -d root >/dev/null
# run-deb-suite.sh logs this user in: a session bus of its own
chroot "\$r" useradd -m -u 1000 -s /bin/bash bus1user
chroot "\$r" systemctl set-default multi-user.target >/dev/null 2>&1
chroot "\$r" systemctl mask ${mask_units[*]} >/dev/null 2>&1
# The journal stays in /run (volatile): nothing to flush to /var on a throw-away overlay.
mkdir -p "\$r/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\n' >"\$r/etc/systemd/journald.conf.d/bus1-test.conf"
rm -rf "\$r/var/log/journal"
rm -rf "\$r/var/cache/apt/"* "\$r/var/lib/apt/lists/"*
EOF
}

if ! mmdebstrap --variant=minbase --mode=root --format=directory \
	--include="$include" \
	--aptopt='Acquire::Languages "none"' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--customize-hook="$(customize)" \
	"$suite" "$root" \
	"deb $mirror $suite main" \
	"deb $mirror $suite-updates main" \
	"deb $security $suite-security main" >"$log" 2>&1
then
	tail -n 30 "$log" >&2
	die "mmdebstrap failed (log: $log)"
fi
echo $(($(date +%s) - start)) >"$dir/build-time"
du -sm "$root" | cut -f1 >"$dir/size-mb"
touch "$dir/done"
echo "$me: built in $(cat "$dir/build-time") s, $(cat "$dir/size-mb") MB" >&2
echo "$root"
