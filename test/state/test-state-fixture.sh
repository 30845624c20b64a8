#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The state streams of other versions (test/state/README.md): the program
# under test must read state-v1.bin (written by the program of from-commit)
# with --check-state, and refuse, with a clear line, a stream it cannot read.
#
#   test-state-fixture.sh BUS_BINARY FIXTURE_DIR
set -u
bin=${1:?usage: $0 BUS_BINARY FIXTURE_DIR}
dir=${2:?usage: $0 BUS_BINARY FIXTURE_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# check NAME FILE WANT_STATUS [WANT_LOG]
check() {
    local out st
    out=$("$bin" --check-state=3 3<"$2" 2>&1)
    st=$?
    if [ "$st" -ne "$3" ]; then
        echo "FAIL $1: --check-state exited $st, want $3: $out"
        fail=1
    elif [ -n "${4:-}" ] && ! grep -qF -- "$4" <<<"$out"; then
        echo "FAIL $1: no \"$4\" in: $out"
        fail=1
    else
        echo "ok   $1${4:+ ($4)}"
    fi
}

check "state-v1.bin (the program of $(cut -c1-12 "$dir/from-commit")) is read" \
    "$dir/state-v1.bin" 0
size=$(stat -c %s "$dir/state-v1.bin")
head -c $((size / 2)) "$dir/state-v1.bin" >"$tmp/half"
check "half of it is refused" "$tmp/half" 1 "malformed"
head -c $((size - 4)) "$dir/state-v1.bin" >"$tmp/no-end"
check "it without its end tag is refused" "$tmp/no-end" 1 "malformed"
{ head -c 4 "$dir/state-v1.bin"; printf '\x63\x00\x00\x00'; tail -c +9 "$dir/state-v1.bin"; } \
    >"$tmp/v99"
check "stream version 99 is refused" "$tmp/v99" 1 "of another version (version 99"
head -c 4096 /dev/urandom >"$tmp/noise"
check "noise is refused" "$tmp/noise" 1 "not a bus1-broker state"
exit $fail
