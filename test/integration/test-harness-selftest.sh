#!/bin/bash
# run-with-bus.sh must fail a test whose bus misbehaves at exit, even when the
# test command itself passed: each case below runs a fake bus that prints an
# address, then on SIGTERM exits with a given status, writes a sanitizer report
# to its log, or ignores SIGTERM. A well-behaved fake must pass.
#
#   test-harness-selftest.sh RUN_WITH_BUS
set -u
harness=$1
dir=$(mktemp -d /tmp/bus1-selftest.XXXXXX)
trap 'rm -rf "$dir"' EXIT
failures=0

# fake bus: MODE decides what happens on SIGTERM
cat >"$dir/fake-bus" <<'EOF'
#!/bin/bash
for a in "$@"; do
    case "$a" in --print-address=*) fd=${a#--print-address=} ;; esac
done
echo "unix:path=/nonexistent/fake-bus" >&"$fd"
eval "exec $fd>&-"
case "$FAKE_MODE" in
clean) trap 'exit 0' TERM ;;
status) trap 'exit 23' TERM ;;
lsan) trap 'echo "==1==ERROR: LeakSanitizer: detected memory leaks" >&2; exit 0' TERM ;;
ubsan) trap 'echo "x.c:1:2: runtime error: signed integer overflow" >&2; exit 0' TERM ;;
hang) trap '' TERM ;;
esac
while :; do sleep 0.1; done
EOF
chmod +x "$dir/fake-bus"

check() {
    local mode=$1 want=$2 rc
    FAKE_MODE=$mode BUS_STOP_TIMEOUT=2 BUS_BINARY_OVERRIDE="$dir/fake-bus" \
        "$harness" unused -- true >"$dir/out" 2>&1
    rc=$?
    if { [ "$want" = pass ] && [ $rc -ne 0 ]; } || { [ "$want" = fail ] && [ $rc -eq 0 ]; }; then
        echo "FAIL: fake bus '$mode': harness exit $rc, expected $want" >&2
        cat "$dir/out" >&2
        failures=$((failures + 1))
    else
        echo "ok: fake bus '$mode' -> $want"
    fi
}

check clean pass
check status fail
check lsan fail
check ubsan fail
check hang fail
[ $failures -eq 0 ]
