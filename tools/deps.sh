#!/bin/bash
# Install the Debian 12 packages this project needs. Usage: tools/deps.sh build|test
set -euo pipefail
build=(meson ninja-build gcc pkg-config libexpat1-dev libsystemd-dev libdbus-1-dev
       linux-headers-amd64 make kmod)
test=(clang libclang-rt-14-dev dbus dbus-bin dbus-daemon dbus-tests dbus-broker
      libglib2.0-dev libglib2.0-bin python3-dbus python3-gi systemd
      qemu-system-x86 linux-image-amd64 busybox-static cpio xz-utils valgrind procps strace)
want=("${build[@]}")
[ "${1:-build}" = test ] && want+=("${test[@]}")
missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "deps.sh: missing packages: ${missing[*]} (run as root to install)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive INITRD=No
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
