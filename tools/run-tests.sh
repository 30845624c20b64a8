#!/bin/bash
# Install what the tests need, build everything (warnings are errors), and run
# the whole test suite: unit, integration, kernel module in a qemu guest,
# reference suite, the integration suite under valgrind, and bounded fuzzing
# plus unit/integration/stress under ASan + UBSan with clang + libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh test

meson setup build-test -Dwerror=true --wipe >/dev/null 2>&1 ||
    meson setup build-test -Dwerror=true
meson compile -C build-test
meson test -C build-test --print-errorlogs --num-processes 2 \
    --no-suite fuzz --no-suite native --no-suite guest

# The reference suite (suite 'reference', included above) runs every
# dbus-tests case against /usr/bin/dbus-daemon and then against bus1-broker,
# and fails on any case that passes with dbus-daemon only. Its per-case
# table is in build-test/test/reference/results/cases.txt.

# valgrind memcheck over the integration suite, on the same gcc build: the bus
# (and the C client programs of the run-session tests) must finish with no
# memcheck error and no definite or indirect leak (about 75 s on 2 cores).
bash test/stress/run-under-valgrind.sh build-test integration

# The native transport suite: bus1.ko loaded in a qemu guest, the broker on
# /dev/bus1, native (libbus1-client) and socket clients in every combination
# (about 1-2 minutes under TCG).
meson test -C build-test --print-errorlogs --num-processes 1 --suite native

# Fuzzers need clang. A second build directory, instrumented as a whole for
# libFuzzer's coverage feedback and with ASan + UBSan, keeps the gcc build
# untouched.
fuzz_opts=(-Dwerror=true -Dfuzz_seconds="${FUZZ_SECONDS:-60}" -Db_sanitize=address,undefined
           -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link)
CC=clang meson setup build-fuzz "${fuzz_opts[@]}" --wipe >/dev/null 2>&1 ||
    CC=clang meson setup build-fuzz "${fuzz_opts[@]}"
meson compile -C build-fuzz
meson test -C build-fuzz --print-errorlogs --num-processes 2 --suite fuzz --logbase fuzzlog
grep -hE "^test: |stat::number_of_executed_units" build-fuzz/meson-logs/fuzzlog.txt || true
# The same ASan + UBSan build runs the unit, integration and stress suites: a
# sanitizer error in a test program, or in the bus (which then dies, and every
# integration test fails when its bus died), fails the run.
meson test -C build-fuzz --print-errorlogs --num-processes 2 \
    --suite unit --suite integration --suite stress --logbase asanlog
# run-with-bus.sh and the stress tests stop each bus with SIGTERM and fail on
# a non-zero exit (LeakSanitizer's) or a report in its log. Buses started
# another way (dbus-run-session, GTestDBus) write to the test's output: any
# sanitizer report anywhere in the log fails the run too.
if grep -nE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" \
        build-fuzz/meson-logs/asanlog.txt; then
    echo "run-tests: sanitizer report in build-fuzz/meson-logs/asanlog.txt" >&2
    exit 1
fi

echo "run-tests: all suites passed"
