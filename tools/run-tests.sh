#!/bin/bash
# Install what the tests need, build everything (warnings are errors), and run
# the whole test suite: static checks of the kernel module, unit, integration,
# kernel module in a qemu guest (on Debian's 6.1 and 6.12 kernels), reference
# suite, the integration suite under valgrind, the native transport suite, a
# real Debian 12 booted with systemd and bus1-broker as its system bus, the
# Debian packages with lintian and then installed, switched on, upgraded,
# switched off and purged on a booted Debian 12, and bounded fuzzing plus
# unit/integration/stress under ASan + UBSan with clang + libFuzzer, and the
# kernel module suite on a debug kernel (KASAN, lockdep, kmemleak).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh test

# The guest suites (kmod, native) run on two Debian kernels, each named here:
# 6.1 (bookworm's own, linux-image-amd64) in build-test, 6.12 (bookworm-security,
# installed by deps.sh) in build-6.12. The newest installed of each with headers
# and an image.
newest_kernel() {
    local d v found=
    for d in /lib/modules/$1/build; do
        v=$(basename "$(dirname "$d")")
        [ -d "$d" ] && [ -f "/boot/vmlinuz-$v" ] && found+="$v"$'\n'
    done
    [ -n "$found" ] || { echo "run-tests: no kernel $1 with headers and image" >&2; return 1; }
    printf '%s' "$found" | sort -V | tail -n 1
}
kver_6_1=$(newest_kernel '6.1.*-amd64')
kver_6_12=$(newest_kernel '6.12.*+deb12-amd64')
# A guest suite that defines no test (no module, no bootable kernel) must not pass silently.
need_suite() {
    meson introspect --tests "$1" | grep -q "\"bus1-dbus:$2\"" ||
        { echo "run-tests: $1 defines no '$2' tests (see its meson-logs)" >&2; exit 1; }
}

# Static checks of the kernel module (about 30 s): checkpatch --strict and
# sparse against both kernels; any report fails.
kmod/check-style.sh "$kver_6_1" "$kver_6_12"

meson setup build-test -Dwerror=true -Dkernel_version="$kver_6_1" --wipe >/dev/null 2>&1 ||
    meson setup build-test -Dwerror=true -Dkernel_version="$kver_6_1"
need_suite build-test kmod
need_suite build-test native
need_suite build-test lsm
meson compile -C build-test
meson test -C build-test --print-errorlogs --num-processes 2 \
    --no-suite fuzz --no-suite native --no-suite guest --no-suite lsm

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

# LSM mediation against dbus-daemon (test/lsm/, about 3.5 minutes under TCG):
# a guest with AppArmor (Debian's kernels have it built in) and one booted with
# security=selinux and the test's own policy, bus1.ko loaded in both; the same
# profiles or policy and cases on /usr/bin/dbus-daemon and on bus1-broker, with
# socket clients and again with native ones, as root and as uid 1000.
meson test -C build-test --print-errorlogs --num-processes 1 --suite lsm

# The systemd guest suite: a real Debian 12 (mmdebstrap root, built once, about
# a minute, and cached in ~/.cache/bus1-systemd-root) booted with systemd as
# PID 1 and bus1-broker, installed from build-test and switched on through its
# shipped units, as the system bus: three restarts, a SIGUSR2 re-exec and a
# dpkg-style binary replacement while clients hold names and calls are in
# flight; once with bus1.ko, once without, once against dbus-daemon as the
# reference; and a fourth boot on dbus-daemon that switches the running system
# to bus1-broker and back as docs/switching.md says (about 6-8 minutes;
# test/systemd/README.md).
test/systemd/run-suite.sh build-test "$kver_6_1"

# The Debian packages (debian/): built from the tracked files and checked
# with lintian, no error and no warning (about 2 minutes).
tools/build-deb.sh "$PWD/build-deb"

# The packages on a booted Debian 12 (test/systemd/run-deb-suite.sh): three
# boots of one disk: on dbus-daemon, apt-get install (DKMS builds bus1.ko in
# the guest, about 3.5 minutes under TCG) and systemctl enable; on bus1-broker
# (system and user bus, bus1.ko loaded, the same probes as on dbus-daemon, an
# upgrade under live clients) and disable; on dbus-daemon again, apt-get purge
# leaves nothing behind (about 8 minutes, plus 1.5 for a cold root).
test/systemd/run-deb-suite.sh "$kver_6_1" "$PWD/build-deb"

# The same guest suites on Debian's 6.12 kernel (about 3 minutes): a second
# build directory whose bus1.ko is built against 6.12 and whose guests boot it.
meson setup build-6.12 -Dwerror=true -Dkernel_version="$kver_6_12" --wipe >/dev/null 2>&1 ||
    meson setup build-6.12 -Dwerror=true -Dkernel_version="$kver_6_12"
need_suite build-6.12 kmod
need_suite build-6.12 native
need_suite build-6.12 lsm
meson compile -C build-6.12
meson test -C build-6.12 --print-errorlogs --num-processes 1 --suite kmod --suite native \
    --suite lsm

# Fuzzers need clang. A second build directory, instrumented as a whole for
# libFuzzer's coverage feedback and with ASan + UBSan, keeps the gcc build
# untouched. It runs no guest suite, so it builds no bus1.ko.
fuzz_opts=(-Dwerror=true -Dfuzz_seconds="${FUZZ_SECONDS:-60}" -Db_sanitize=address,undefined
           -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link -Dkmod=disabled)
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

# The kmod suite once more, on a debug kernel: Debian's linux-source-6.12 built
# with KASAN, lockdep, kmemleak and other checkers by test/vm/build-debug-kernel.sh
# (9 to 14 minutes on 2 cores; cached in ~/.cache/bus1-debug-kernel), bus1.ko
# built against that tree (test/vm/README.md). Any checker's report fails the
# test; the harness first proves that it does (one module per checker), then
# the suite runs with every timeout x4 (12 to 14 minutes; about 4 minutes for
# the selftest).
debug_tree=$(test/vm/build-debug-kernel.sh)
debug_opts=(-Dwerror=true -Dkernel_dir="$debug_tree" -Dvm_timeout_factor=4)
meson setup build-debug "${debug_opts[@]}" --wipe >/dev/null 2>&1 ||
    meson setup build-debug "${debug_opts[@]}"
need_suite build-debug kmod
meson compile -C build-debug
test/vm/selftest-harness.sh build-debug/test/vm/vm-cache "$debug_tree"
meson test -C build-debug --print-errorlogs --num-processes 1 --suite kmod

echo "run-tests: all suites passed"
