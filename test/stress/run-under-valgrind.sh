#!/bin/bash
# Run the integration tests (or any meson suite) with the bus under valgrind
# memcheck, and fail if any bus process had a memcheck error or leak.
#
#   test/stress/run-under-valgrind.sh BUILD_DIR [SUITE...]   (default: integration)
#
# run-with-bus.sh (test/integration) starts "$BUS_BINARY_OVERRIDE" when set,
# as one word, and does not look at the bus's exit status; so this script
# points it at a wrapper named bus1-broker (the tests recognise the bus by
# that name) that execs valgrind, and reads valgrind's logs afterwards. The
# stress tests take BUS_WRAPPER instead and check the exit status themselves.
# Tests that start the bus without run-with-bus.sh (cli, run-session-*) still
# run the plain binary.
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
    --error-exitcode=1 --track-fds=no --log-file=$dir/logs/vg.%p "$build/broker/bus1-broker" "\$@"
WRAP
chmod +x "$dir/bin/bus1-broker"

args=()
for s in "${suites[@]}"; do args+=(--suite "$s"); done
BUS_BINARY_OVERRIDE="$dir/bin/bus1-broker" \
BUS_WRAPPER="valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=1 --log-file=$dir/logs/vg-stress.%p" \
    meson test -C "$build" --num-processes 1 -t 4 "${args[@]}"
rc=$?

bad=0
n=0
for f in "$dir"/logs/vg*; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    if ! grep -q "ERROR SUMMARY: 0 errors" "$f"; then
        echo "=== $f" >&2
        cat "$f" >&2
        bad=$((bad + 1))
    fi
done
echo "valgrind: $n bus processes checked, $bad with errors or leaks (logs: $dir/logs)"
[ $n -gt 0 ] || { echo "valgrind: no bus ran under valgrind" >&2; exit 1; }
[ $rc -eq 0 ] && [ $bad -eq 0 ]
