# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# kernel-image.sh - what every guest harness needs from a Debian kernel and the host, sourced by
# test/vm/run-guest.sh (the module suites) and test/systemd/run-systemd-guest.sh (systemd as
# PID 1): the uncompressed vmlinux out of the bzImage, and the modules an initramfs must load
# to mount a 9p root under an overlay.

# vm_static_busybox: print the path of a statically linked busybox (the initramfs has no
# libraries), or return 1.
vm_static_busybox() {
	local b
	for b in /bin/busybox /usr/bin/busybox; do
		# ldd fails on a static executable ("not a dynamic executable").
		if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then
			echo "$b"
			return 0
		fi
	done
	return 1
}

# vm_newest_kernel: print the newest VER with both /lib/modules/VER/build and /boot/vmlinuz-VER
# (the kernel a module can be built for and booted), or return 1.
vm_newest_kernel() {
	local d v
	for d in $(printf '%s\n' /lib/modules/*/build | sort -rV); do
		v=$(basename "$(dirname "$d")")
		if [ -d "$d" ] && [ -f "/boot/vmlinuz-$v" ]; then
			echo "$v"
			return 0
		fi
	done
	return 1
}

# vm_extract_vmlinux VMLINUZ DEST: write the vmlinux ELF inside the bzImage VMLINUZ to DEST
# (booted through its PVH entry, it starts about twice as fast as the bzImage). The stream is
# XZ in Debian's 6.1 and zstd in its 6.12; the decompressor complains about the data after the
# stream, but its output is complete. The magic can also occur by chance earlier on: the first
# few matches are tried. Returns 1 when none gives an ELF file (or the decompressor is missing).
vm_extract_vmlinux() {
	local vmlinuz=$1 dest=$2 magic dec off tmp=$2.tmp.$$
	for magic in '\xfd7zXZ\x00:xz' '\x28\xb5\x2f\xfd:zstd'; do
		dec=${magic##*:}
		command -v "$dec" >/dev/null || continue
		for off in $(LC_ALL=C grep -obUaP "${magic%:*}" "$vmlinuz" | head -n 4 | cut -d: -f1); do
			tail -c +$((off + 1)) "$vmlinuz" | "$dec" -dc >"$tmp" 2>/dev/null || true
			if [ "$(head -c 4 "$tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
				mv -f "$tmp" "$dest"
				return 0
			fi
		done
	done
	rm -f "$tmp"
	return 1
}

# vm_initrd_modules MODDIR "NAME...": "NAME PATH" (PATH relative to MODDIR) for each wanted
# module and its dependencies from MODDIR/modules.dep, in load order (a module's own
# dependencies first); those built into the kernel (modules.builtin) are left out, and one
# that is neither prints "NAME MISSING".
vm_initrd_modules() {
	awk -v want="$2" '
	function base(p) { sub(/.*\//, "", p); sub(/\.ko(\.[a-z]+)?$/, "", p); gsub(/-/, "_", p); return p }
	function load(m,   n, i, d) {
		if (m in done) return
		done[m] = 1
		n = split(deps[m], d, " ")
		for (i = n; i >= 1; i--) load(base(d[i]))
		print m, file[m]
	}
	FILENAME ~ /modules\.dep$/ { p = $1; sub(/:$/, "", p); m = base(p); file[m] = p
				     $1 = ""; deps[m] = $0; next }
	{ builtin[base($1)] = 1 }
	END {
		n = split(want, w, " ")
		for (i = 1; i <= n; i++)
			if (w[i] in file) load(w[i])
			else if (!(w[i] in builtin)) print w[i], "MISSING"
	}' "$1/modules.dep" "$1/modules.builtin"
}

# vm_unpack_module SRC DEST: copy the module SRC to DEST uncompressed (busybox insmod cannot
# load Debian 6.12's .ko.xz). Returns 1 for an unknown compression or a failed unpack.
vm_unpack_module() {
	case "$1" in
	*.ko) cp "$1" "$2" ;;
	*.ko.xz) xz -dc "$1" >"$2" ;;
	*.ko.zst) zstd -qdc "$1" >"$2" ;;
	*.ko.gz) gzip -dc "$1" >"$2" ;;
	*) return 1 ;;
	esac
}
