#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# build-debug-kernel.sh - build (once) a small debug kernel from Debian's linux-source-6.12 for
# run-guest.sh: KASAN, lockdep, kmemleak, DEBUG_LIST/OBJECTS/VM/ATOMIC_SLEEP, every driver the
# guest needs built in (no initramfs modules), module support for bus1.ko. The config is
# `make allnoconfig` plus test/vm/debug-kernel.config, checked line by line afterwards.
#
# Usage: build-debug-kernel.sh [CACHE_DIR]
#   CACHE_DIR  default: $BUS1_DEBUG_KERNEL_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/bus1-debug-kernel
#   LINUX_SOURCE=TARBALL   default: the newest /usr/src/linux-source-6.12*.tar.xz
#                          (apt-get install linux-source-6.12; also needs flex bison libelf-dev bc)
#
# The result lives in CACHE_DIR/KEY/linux, KEY = source package version + a hash of the source
# tarball, the config fragment and the compiler: a kernel build tree (`make M=DIR modules`
# against it builds a matching module; build-kmod.sh does that) with the bootable image at
# linux/vmlinux (ELF with the PVH entry) and linux/arch/x86/boot/bzImage. Its path is the only
# thing printed on stdout. An existing result is reused; an interrupted build resumes.
# The build log is CACHE_DIR/KEY/build.log, the wall time of the build CACHE_DIR/KEY/build-time.

set -euo pipefail

me=build-debug-kernel
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fragment=$here/debug-kernel.config
cache=${1:-${BUS1_DEBUG_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bus1-debug-kernel}}
tarball=${LINUX_SOURCE:-$(ls /usr/src/linux-source-6.12*.tar.xz 2>/dev/null | sort -V | tail -n 1)}

die() { echo "$me: $*" >&2; exit 1; }
[ -n "$tarball" ] && [ -r "$tarball" ] ||
	die "no kernel source tarball (apt-get install linux-source-6.12, or set LINUX_SOURCE)"
for t in make gcc flex bison bc xz tar sha256sum; do
	command -v $t >/dev/null || die "$t not installed"
done
[ -f /usr/include/gelf.h ] || die "libelf headers missing (apt-get install libelf-dev), objtool needs them"

# ---- the cache key -----------------------------------------------------------------------------
label=$(dpkg-query -W -f='${Version}' "$(dpkg-query -S "$tarball" 2>/dev/null | cut -d: -f1)" \
	2>/dev/null || true)
[ -n "$label" ] || label=$(basename "$tarball" .tar.xz)
label=$(printf '%s' "$label" | tr -c 'A-Za-z0-9.+-' '_')
hash=$({
	sha256sum <"$tarball"
	cat "$fragment"
	gcc --version | head -n 1
	ld --version | head -n 1
} | sha256sum | cut -c1-12)
key=$label-$hash
mkdir -p "$cache"
cache=$(realpath "$cache")
dir=$cache/$key
tree=$dir/linux
kmake=(make -C "$tree" ARCH=x86_64)

exec 9>"$cache/$key.lock"
flock 9
if [ -f "$dir/done" ]; then
	echo "$tree"
	exit 0
fi
mkdir -p "$dir"
log=$dir/build.log
echo "$me: building the debug kernel in $tree (log: $log); takes a while" >&2
start=$(date +%s)

if [ ! -f "$tree/Makefile" ]; then
	rm -rf "$dir/extract"
	mkdir -p "$dir/extract"
	tar -xJf "$tarball" -C "$dir/extract" --strip-components=1
	mv "$dir/extract" "$tree"
fi

# ---- config: allnoconfig + the fragment, then every line of the fragment must hold ------------
"${kmake[@]}" -s KCONFIG_ALLCONFIG="$fragment" allnoconfig >>"$log" 2>&1 ||
	{ tail -n 30 "$log" >&2; die "make allnoconfig failed"; }
missing=()
while read -r line; do
	case "$line" in
	CONFIG_*=*)
		grep -qxF -- "$line" "$tree/.config" || missing+=("$line") ;;
	"# CONFIG_"*" is not set")
		sym=${line#\# }
		sym=${sym%% *}
		! grep -q "^$sym=" "$tree/.config" || missing+=("$line") ;;
	esac
done <"$fragment"
[ ${#missing[@]} -eq 0 ] ||
	die "these settings did not survive the config (unmet dependencies?): ${missing[*]}"

# ---- build: vmlinux, bzImage, Module.symvers and what `make M=` needs ---------------------------
"${kmake[@]}" -j"$(nproc)" all >>"$log" 2>&1 || { tail -n 40 "$log" >&2; die "kernel build failed"; }
[ -s "$tree/vmlinux" ] && [ -s "$tree/Module.symvers" ] || die "build produced no vmlinux/Module.symvers"
readelf -n "$tree/vmlinux" 2>/dev/null | grep Xen >/dev/null || die "vmlinux has no PVH entry note"

end=$(date +%s)
echo "$((end - start)) s on $(nproc) CPUs, $(date -u +%FT%TZ)" >"$dir/build-time"
touch "$dir/done"
echo "$me: built in $((end - start)) s" >&2
echo "$tree"
