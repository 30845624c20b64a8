#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The state streams of other versions (test/state/README.md): the program
# under test must read state-v1.bin (written by the program of from-commit)
# and its own state with --check-state, and refuse, with a clear line, a
# stream or a section it cannot read.
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

# This program's own stream (version 2: every section with its version),
# captured as the fixture was: read back; a section of a version newer than
# this program knows is refused, naming the section.
src=$(cd "$dir/../.." && pwd)
if ! /usr/bin/python3 "$src/test/integration/test_reexec.py" "$bin" --capture "$tmp/own" \
        >"$tmp/capture.log" 2>&1; then
    echo "FAIL capturing this program's state:"
    cat "$tmp/capture.log"
    exit 1
fi
check "this program's own state is read" "$tmp/own" 0
# The bus section comes first: magic, stream version, its tag, its version.
{ head -c 12 "$tmp/own"; printf '\x63\x00\x00\x00'; tail -c +17 "$tmp/own"; } >"$tmp/bus-v99"
check "a bus section of version 99 is refused" "$tmp/bus-v99" 1 \
    "the state's bus section is of version 99, newer than this program reads"
# The first peer's connection section: found by its tag after the peer tag.
python3 - "$tmp/own" "$tmp/conn-v7" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
at = d.index(struct.pack("<I", 0x42555342))      # STATE_TAG_CONNECTION
d[at + 4:at + 8] = struct.pack("<I", 7)
open(sys.argv[2], "wb").write(d)
PY
check "a connection section of version 7 is refused" "$tmp/conn-v7" 1 \
    "the state's connection section is of version 7"
# An ownership (owner section version 2) names its name by its place in the
# name section: one past the last is refused.
python3 - "$tmp/own" "$tmp/owner-index" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
tag = struct.pack("<II", 0x42555344, 2)          # STATE_TAG_OWNER, version 2
at = d.index(tag)
while struct.unpack_from("<Q", d, at + 8)[0] == 0:
    at = d.index(tag, at + 1)
struct.pack_into("<I", d, at + 16, 0x10000)       # its first ownership's name
open(sys.argv[2], "wb").write(d)
PY
check "an ownership of a name the state does not have is refused" "$tmp/owner-index" 1 \
    "malformed"
exit $fail
