#!/bin/bash
# run-fuzzer.sh FUZZER SEED_DIR SECONDS RUNS
# Replays the committed seeds (regression inputs included), then fuzzes RUNS
# executions (what SECONDS give on the reference machine) with a scratch corpus
# so the repository is never written to. A run that has not reached RUNS after
# ten times SECONDS (times BUS1_TIME_FACTOR) is stopped and fails: it fuzzed
# less than promised.
set -euo pipefail
fuzzer=$1 seeds=$2 secs=$3 runs=$4
factor=${BUS1_TIME_FACTOR:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
if compgen -G "$seeds/*" >/dev/null; then
    "$fuzzer" -runs=0 "$seeds" >"$work/replay.log" 2>&1 || { cat "$work/replay.log"; exit 1; }
fi
"$fuzzer" -runs="$runs" -max_total_time=$((10 * secs * factor)) -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
    "$work/corpus" "$seeds" >"$work/fuzz.log" 2>&1 || { tail -50 "$work/fuzz.log"; exit 1; }
grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$work/fuzz.log" || true
done_runs=$(awk '$1 == "stat::number_of_executed_units:" { print $2 }' "$work/fuzz.log")
if [ "${done_runs:-0}" -lt "$runs" ]; then
    echo "run-fuzzer: ${done_runs:-no} of $runs executions in $((10 * secs * factor)) s: stopped short" >&2
    exit 1
fi
