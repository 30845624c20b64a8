#!/bin/sh
# build-kmod.sh SRCDIR WORKDIR KDIR OUTPUT
# Copies the module sources to WORKDIR (so Kbuild's objects never land in the
# source tree), builds bus1.ko there against KDIR and copies it to OUTPUT.
set -eu
src=$1 work=$2 kdir=$3 out=$4
mkdir -p "$work/uapi/linux"
for f in "$src"/Kbuild "$src"/*.c "$src"/*.h; do
	cmp -s "$f" "$work/${f##*/}" 2>/dev/null || cp "$f" "$work/"
done
cmp -s "$src/uapi/linux/bus1.h" "$work/uapi/linux/bus1.h" 2>/dev/null ||
	cp "$src/uapi/linux/bus1.h" "$work/uapi/linux/"
make -s -C "$kdir" M="$work" modules
cp "$work/bus1.ko" "$out"
