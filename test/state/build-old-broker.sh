#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build bus1-broker as it was at COMMIT (from this repository's history) and
# print the path of the program. Built once per commit and machine, in
# ${XDG_CACHE_HOME:-~/.cache}/bus1-old-broker/COMMIT (about 40 s on 2 cores):
# only the broker, no kernel module, no tests.
#
#   build-old-broker.sh SOURCE_DIR COMMIT
#
# A checkout without that commit (a shallow clone) is an error, not a skip:
# the cross-version re-exec test needs the program of that commit.
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR COMMIT}
commit=${2:?usage: $0 SOURCE_DIR COMMIT}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/bus1-old-broker/$commit
prog=$cache/build/broker/bus1-broker

if [ -x "$prog" ]; then
    echo "$prog"
    exit 0
fi
if ! git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "build-old-broker: commit $commit is not in $src's history (a shallow clone?)" >&2
    exit 1
fi
rm -rf "$cache"
mkdir -p "$cache/src"
git -C "$src" archive "$commit" | tar -x -C "$cache/src"
meson setup "$cache/build" "$cache/src" -Dkmod=disabled >"$cache/setup.log" 2>&1 ||
    { cat "$cache/setup.log" >&2; exit 1; }
ninja -C "$cache/build" broker/bus1-broker >"$cache/build.log" 2>&1 ||
    { tail -n 40 "$cache/build.log" >&2; exit 1; }
echo "$prog"
