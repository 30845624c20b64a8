#!/bin/bash
# Install what the tests need, build everything (warnings are errors), and run
# the whole test suite: unit, integration, kernel module in a qemu guest,
# reference suite, and bounded fuzzing with clang + libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh test

meson setup build-test -Dwerror=true --wipe >/dev/null 2>&1 ||
    meson setup build-test -Dwerror=true
meson compile -C build-test
meson test -C build-test --print-errorlogs --num-processes 2 --no-suite fuzz

# Fuzzers need clang; a second build directory keeps the gcc build untouched.
CC=clang meson setup build-fuzz -Dwerror=true -Dfuzz_seconds="${FUZZ_SECONDS:-60}" \
    --wipe >/dev/null 2>&1 ||
    CC=clang meson setup build-fuzz -Dwerror=true -Dfuzz_seconds="${FUZZ_SECONDS:-60}"
meson compile -C build-fuzz
if meson test -C build-fuzz --list 2>/dev/null | grep -q '^bus1-dbus:fuzz'; then
    meson test -C build-fuzz --print-errorlogs --num-processes 2 --suite fuzz
fi
echo "run-tests: all suites passed"
