#!/bin/bash
# run-fuzzer.sh FUZZER SEED_DIR SECONDS
# Replays the committed seeds (regression inputs included), then fuzzes for a
# bounded time with a scratch corpus so the repository is never written to.
set -euo pipefail
fuzzer=$1 seeds=$2 secs=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
if compgen -G "$seeds/*" >/dev/null; then
    "$fuzzer" -runs=0 "$seeds" >"$work/replay.log" 2>&1 || { cat "$work/replay.log"; exit 1; }
fi
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
    "$work/corpus" "$seeds" >"$work/fuzz.log" 2>&1 || { tail -50 "$work/fuzz.log"; exit 1; }
grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$work/fuzz.log" || true
