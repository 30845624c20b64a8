#!/bin/bash
# Install the Debian 12 packages this project needs. Usage: tools/deps.sh build|test|deb
#
# `deb` is what tools/build-deb.sh needs on top of `build`: debhelper, dh-dkms,
# dpkg-dev and lintian.
#
# `test` also installs a second kernel for the guest tests, Debian's 6.12 from bookworm-security:
# the newest linux-headers-6.12.*+deb12-amd64 / linux-image-6.12.*+deb12-amd64-unsigned pair apt
# offers (unless a 6.12 pair is installed already), and linux-source-6.12 with what building
# it needs, for the debug kernel (test/vm/build-debug-kernel.sh).
set -euo pipefail
deb=(debhelper dh-dkms dkms dpkg-dev fakeroot lintian pkgconf)
build=(meson ninja-build gcc pkg-config libexpat1-dev libsystemd-dev libdbus-1-dev
       libapparmor-dev libaudit-dev libselinux1-dev linux-headers-amd64 make kmod)
test=(clang libclang-rt-14-dev ccache dbus dbus-bin dbus-daemon dbus-tests dbus-broker
      libglib2.0-dev libglib2.0-bin python3-dbus python3-gi systemd
      qemu-system-x86 linux-image-amd64 busybox-static cpio xz-utils zstd valgrind procps strace
      linux-source-6.12 flex bison bc libelf-dev libssl-dev mmdebstrap sparse
      at-spi2-core libatk-adaptor gir1.2-atspi-2.0 gir1.2-gtk-3.0 xvfb xauth apparmor checkpolicy xdg-dbus-proxy bubblewrap
      "${deb[@]}")
want=("${build[@]}")
[ "${1:-build}" = test ] && want+=("${test[@]}")
[ "${1:-build}" = deb ] && want+=("${deb[@]}")

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
# A 6.12 kernel with headers and an image, installed?
have_612() {
	local d
	for d in /lib/modules/6.12.*+deb12-amd64; do
		[ -d "$d/build" ] && [ -f "/boot/vmlinuz-${d##*/}" ] && return 0
	done
	return 1
}

missing=()
for p in "${want[@]}"; do
	installed "$p" || missing+=("$p")
done
need_612=0
[ "${1:-build}" = test ] && ! have_612 && need_612=1
[ ${#missing[@]} -eq 0 ] && [ $need_612 = 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	[ $need_612 = 0 ] || missing+=("linux-headers-6.12.*+deb12-amd64 linux-image-6.12.*+deb12-amd64-unsigned")
	echo "deps.sh: missing packages: ${missing[*]} (run as root to install)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive INITRD=No
apt-get update -qq
if [ $need_612 = 1 ]; then
	# Newest first; the first version with both packages wins.
	v612=
	for v in $(apt-cache search --names-only '^linux-headers-6\.12\.[0-9]+\+deb12-amd64$' |
	           cut -d' ' -f1 | sed 's/^linux-headers-//' | sort -rV); do
		if apt-cache show "linux-image-$v-unsigned" >/dev/null 2>&1; then
			v612=$v
			break
		fi
	done
	[ -n "$v612" ] || { echo "deps.sh: apt offers no linux-headers/linux-image-unsigned 6.12 pair" >&2; exit 1; }
	missing+=("linux-headers-$v612" "linux-image-$v612-unsigned")
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
