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
#
# Four lanes run side by side (tools/stages.sh), so that the guests, which
# mostly keep one CPU busy, and the host work share both CPUs all the time:
#   main         the host: builds (the 6.12 one and the packages first),
#                unit/integration/stress/reference, valgrind, fuzzing, ASan + UBSan
#   guests-6.1   the qemu guests on Debian's 6.1: kmod, native, LSM, then the
#                systemd guest suite
#   guests-6.12  the same guest suites on Debian's 6.12, then the Debian package
#                suite
#   debug        the debug kernel (built at the lowest priority, so it takes the
#                CPU time the others leave), then its selftest and kmod suite
# Every time limit is stretched by BUS1_TIME_FACTOR, measured first
# (tools/time-factor.sh); a guest is stopped when it makes no progress, not
# when it is slow (test/vm/watchdog.sh). The run ends with a table of every
# stage: its lane, start, wall time and result.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/stages.sh

stage deps tools/deps.sh test

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

# The host builds go through ccache (meson puts it in front of the compiler when it is on PATH;
# the fuzz build names it in CC): a warm run rebuilds its four build directories and the
# packages from the cache. It lives under ~/.cache/bus1-* like the other caches, so a fresh run
# starts without it, and it is content-addressed: a hit is the object the compiler would give.
# Paths below the clone are hashed relative to it, and the build directory's path not at all
# (meson's debug builds have -g): a new clone elsewhere hits what an older one compiled.
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/bus1-ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-2G}
export CCACHE_BASEDIR=$PWD
export CCACHE_NOHASHDIR=1
ccache=
command -v ccache >/dev/null && ccache="ccache "

# How much slower than the reference machine this one is now: every time
# limit (meson's, the guests', the scenarios') is stretched by it.
BUS1_TIME_FACTOR=$(tools/time-factor.sh)
export BUS1_TIME_FACTOR
# meson test, with its timeouts stretched and nothing rebuilt (lanes share
# build directories: only the main lane builds).
mtest() {
    meson test --no-rebuild --print-errorlogs --timeout-multiplier $((2 * BUS1_TIME_FACTOR)) "$@"
}
setup() {
    local dir=$1
    shift
    meson setup "$dir" "$@" --wipe >/dev/null 2>&1 || meson setup "$dir" "$@"
}
# A guest suite that defines no test (no module, no bootable kernel) must not pass silently.
need_suite() {
    meson introspect --tests "$1" | grep -q "\"bus1-dbus:$2\"" ||
        { echo "run-tests: $1 defines no '$2' tests (see its meson-logs)" >&2; return 1; }
}

# ---- the debug lane ------------------------------------------------------------------------------
# The kmod suite once more, on a debug kernel: Debian's linux-source-6.12 built
# with KASAN, lockdep, kmemleak and other checkers by test/vm/build-debug-kernel.sh
# (9 to 14 minutes of both CPUs; cached in ~/.cache/bus1-debug-kernel), bus1.ko
# built against that tree (test/vm/README.md). Any checker's report fails the
# test; the harness first proves that it does (one module per checker), then
# the suite runs with every timeout x4.
# (Once built, build-debug-kernel.sh prints the cached tree at once.)
debug_tree() { test/vm/build-debug-kernel.sh; }
debug_build() {
    setup build-debug -Dwerror=true -Dkernel_dir="$(debug_tree)" -Dvm_timeout_factor=4
    need_suite build-debug kmod
    meson compile -C build-debug
}
debug_selftest() { test/vm/selftest-harness.sh build-debug/test/vm/vm-cache "$(debug_tree)"; }
debug_selftest_lane() { stage debug-selftest debug_selftest; }
debug_lane() {
    stage debug-kernel nice -n 19 test/vm/build-debug-kernel.sh
    stage debug-build debug_build
    # The harness's proof and the suite need only the kernel: side by side.
    lane debug-self debug_selftest_lane
    stage debug-kmod mtest -C build-debug --num-processes 1 --suite kmod --logbase kmodlog
    lane_wait debug-self
}
lane debug debug_lane

# Static checks of the kernel module (about 30 s): checkpatch --strict and
# sparse against both kernels; any report fails.
stage check-style kmod/check-style.sh "$kver_6_1" "$kver_6_12"

build_test() {
    setup build-test -Dwerror=true -Dkernel_version="$kver_6_1"
    need_suite build-test kmod
    need_suite build-test native
    need_suite build-test lsm
    meson compile -C build-test
}
stage build-test build_test

# ---- the guest lanes ------------------------------------------------------------------------------
build_6_12() {
    setup build-6.12 -Dwerror=true -Dkernel_version="$kver_6_12"
    need_suite build-6.12 kmod
    need_suite build-6.12 native
    need_suite build-6.12 lsm
    meson compile -C build-6.12
}
guest_lane_6_1() {
    # The kernel module suite in guests of Debian's 6.1 (two boots: test/vm/guest-batch.sh),
    # and the guest harness's own self-test.
    stage kmod-6.1 mtest -C build-test --num-processes 1 --suite kmod --logbase kmodlog
    # The native transport suite: bus1.ko loaded in a qemu guest, the broker on
    # /dev/bus1, native (libbus1-client) and socket clients in every combination.
    stage native-6.1 mtest -C build-test --num-processes 1 --suite native --logbase nativelog
    # LSM mediation against dbus-daemon (test/lsm/): a guest with AppArmor
    # (Debian's kernels have it built in) and one booted with security=selinux
    # and the test's own policy, bus1.ko loaded in both; the same profiles or
    # policy and cases on /usr/bin/dbus-daemon and on bus1-broker, with socket
    # clients and again with native ones, as root and as uid 1000.
    stage lsm-6.1 mtest -C build-test --num-processes 1 --suite lsm --logbase lsmlog
    # The systemd guest suite: a real Debian 12 (mmdebstrap root, built once,
    # about a minute, and cached in ~/.cache/bus1-systemd-root) booted with
    # systemd as PID 1 and bus1-broker, installed from build-test and switched
    # on through its shipped units, as the system bus: three restarts, a SIGUSR2
    # re-exec, a dpkg-style binary replacement and three crashes (SIGKILL,
    # SIGSEGV, the OOM killer) while clients hold names and calls are in
    # flight; once with bus1.ko, once without, once against
    # dbus-daemon as the reference; and a fourth boot on dbus-daemon that
    # switches the running system to bus1-broker and back as docs/switching.md
    # says (test/systemd/README.md).
    stage systemd test/systemd/run-suite.sh build-test "$kver_6_1"
}
guest_lane_6_12() {
    # The same guest suites on Debian's 6.12 kernel: a second build directory
    # whose bus1.ko is built against 6.12 and whose guests boot it (the
    # harness's self-test ran on 6.1).
    stage_await build-6.12
    stage guests-6.12 mtest -C build-6.12 --num-processes 1 --suite kmod --suite native \
        --suite lsm --no-suite harness --logbase guestlog
    # The packages on a booted Debian 12 (test/systemd/run-deb-suite.sh): three
    # boots of one disk: on dbus-daemon, apt-get install (DKMS builds bus1.ko in
    # the guest) and systemctl enable; on bus1-broker (system and user bus,
    # bus1.ko loaded, the same probes as on dbus-daemon, an upgrade under live
    # clients) and disable; on dbus-daemon again, apt-get purge leaves nothing
    # behind.
    stage_await build-deb
    stage deb-suite test/systemd/run-deb-suite.sh "$kver_6_1" "$PWD/build-deb"
}
lane guests-6.1 guest_lane_6_1
lane guests-6.12 guest_lane_6_12

# ---- the main lane -------------------------------------------------------------------------------
# The 6.12 build and the Debian packages first: the 6.12 lane waits for them.
stage build-6.12 build_6_12

# The Debian packages (debian/): built from the tracked files and checked
# with lintian, no error and no warning.
stage build-deb tools/build-deb.sh "$PWD/build-deb"

# Unit, integration, stress and the reference suite (every dbus-tests case
# against /usr/bin/dbus-daemon and then against bus1-broker; it fails on any
# case that passes with dbus-daemon only; its per-case table is in
# build-test/test/reference/results/cases.txt).
stage host-tests mtest -C build-test --num-processes 2 \
    --no-suite fuzz --no-suite native --no-suite guest --no-suite lsm --no-suite kmod

# valgrind memcheck over the integration suite, on the same gcc build: the bus
# (and the C client programs of the run-session tests) must finish with no
# memcheck error and no definite or indirect leak.
stage valgrind bash test/stress/run-under-valgrind.sh build-test integration

# Fuzzers need clang. A second build directory, instrumented as a whole for
# libFuzzer's coverage feedback and with ASan + UBSan, keeps the gcc build
# untouched. It runs no guest suite, so it builds no bus1.ko.
fuzz_build() {
    local opts=(-Dwerror=true -Dfuzz_seconds="${FUZZ_SECONDS:-60}" -Db_sanitize=address,undefined
                -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link -Dkmod=disabled)
    CC="${ccache}clang" setup build-fuzz "${opts[@]}"
    meson compile -C build-fuzz
}
stage fuzz-build fuzz_build
fuzz() {
    mtest -C build-fuzz --num-processes 2 --suite fuzz --logbase fuzzlog
    grep -hE "^test: |stat::number_of_executed_units" build-fuzz/meson-logs/fuzzlog.txt || true
}
stage fuzz fuzz
# The same ASan + UBSan build runs the unit, integration, stress and crash suites: a
# sanitizer error in a test program, or in the bus (which then dies, and every
# integration test fails when its bus died), fails the run.
# run-with-bus.sh and the stress tests stop each bus with SIGTERM and fail on
# a non-zero exit (LeakSanitizer's) or a report in its log. Buses started
# another way (dbus-run-session, GTestDBus) write to the test's output: any
# sanitizer report anywhere in the log fails the run too.
asan() {
    mtest -C build-fuzz --num-processes 2 --suite unit --suite integration --suite stress \
        --suite crash --logbase asanlog
    if grep -nE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" \
            build-fuzz/meson-logs/asanlog.txt; then
        echo "run-tests: sanitizer report in build-fuzz/meson-logs/asanlog.txt" >&2
        return 1
    fi
}
stage asan asan

lane_wait guests-6.1 guests-6.12 debug
echo "run-tests: all suites passed"
