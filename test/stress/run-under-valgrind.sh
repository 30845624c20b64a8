#!/bin/bash
# Run the integration tests (or any meson suite) with the bus, and the C
# client programs of the run-session tests, under valgrind memcheck, and fail
# if any of those processes had a memcheck error or a definite/indirect leak.
#
#   test/stress/run-under-valgrind.sh BUILD_DIR [SUITE...]   (default: integration)
#
# The build must not be sanitizer-instrumented (CI uses the gcc build).
# run-with-bus.sh, test-run-session.sh and test-gtestdbus.sh start
# "$BUS_BINARY_OVERRIDE" when set, as one word; this script points it at a
# wrapper named bus1-broker (the tests recognise the bus by that name) that
# execs valgrind, and reads valgrind's logs afterwards (run-with-bus.sh also
# fails a test whose bus does not exit with 0 on SIGTERM, which valgrind's
# --error-exitcode turns into a failure too). test-run-session.sh puts
# PEER_WRAPPER before its libdbus, GDBus and sd-bus peers. The stress tests
# take BUS_WRAPPER and check the exit status themselves. Only test-cli.sh
# still runs the plain binary (it checks pids and timings that a wrapper
# changes). VALGRIND_JOBS (default 2) tests run at a time. A bus's children
# between fork() and execve() (activation) are not followed: their log would
# end at the execve() without a summary.
set -u
build=$(cd "${1:?usage: $0 BUILD_DIR [SUITE...]}" && pwd)
shift
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(integration)

dir=$(mktemp -d /tmp/bus1-valgrind.XXXXXX)
mkdir -p "$dir/bin" "$dir/logs"
cat >"$dir/bin/bus1-broker" <<WRAP
#!/bin/sh
exec valgrind --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
    --error-exitcode=1 --track-fds=no --child-silent-after-fork=yes --log-file=$dir/logs/vg.%p \
    "$build/broker/bus1-broker" "\$@"
WRAP
chmod +x "$dir/bin/bus1-broker"

args=()
for s in "${suites[@]}"; do args+=(--suite "$s"); done
BUS_BINARY_OVERRIDE="$dir/bin/bus1-broker" \
BUS_WRAPPER="valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=1 --log-file=$dir/logs/vg-stress.%p" \
PEER_WRAPPER="valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=1 --log-file=$dir/logs/peer.%p" \
    meson test -C "$build" --num-processes "${VALGRIND_JOBS:-2}" -t $((4 * ${BUS1_TIME_FACTOR:-1})) \
    --print-errorlogs \
    --logbase valgrindlog "${args[@]}"
rc=$?

bad=0
n=0
peers=0
for f in "$dir"/logs/*; do
    [ -e "$f" ] || continue
    case "$f" in */peer.*) peers=$((peers + 1)) ;; *) n=$((n + 1)) ;; esac
    if ! grep -q "ERROR SUMMARY: 0 errors" "$f"; then
        echo "=== $f" >&2
        cat "$f" >&2
        bad=$((bad + 1))
    fi
done
echo "valgrind: $n bus and $peers client processes checked, $bad with errors or leaks (logs: $dir/logs)"
[ $n -gt 0 ] || { echo "valgrind: no bus ran under valgrind" >&2; exit 1; }
[ $rc -eq 0 ] && [ $bad -eq 0 ] || exit 1
rm -rf "$dir"
