# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# stages.sh - the stages of tools/run-tests.sh, timed, in lanes that run side by side, and the
# table of them all printed when the run ends (passed, failed or interrupted). Sourced, not run.
#
#   stage NAME CMD...      run CMD now, in this lane, in a subshell with errexit on (what it sets
#                          does not outlive it); a failure ends the run
#   lane NAME FUNC         run the shell function FUNC beside what follows, in the background
#                          (its stages are its own); its output goes to $STAGE_LOGDIR/NAME.log
#   lane_wait NAME...      wait for lanes, print their output, end the run if one failed
#   stage_await NAME       wait until stage NAME (of another lane) has passed
#
# Every stage appends one record to $STAGE_LOGDIR/stages (default ./build-stages): "NAME LANE
# START END CPU RESULT", times in microseconds since the run began, CPU the user + system seconds
# of the processes it ran (those it waited for: a daemon that detached is not counted). A lane that fails leaves
# $STAGE_LOGDIR/failed, and every lane stops at its next stage when it sees that. The table says for each stage its lane, when
# it started (minutes:seconds into the run), how long it took, the CPU time it used and how it
# ended: the machine has two CPUs, so the CPU seconds of all stages over twice the wall time of
# the run is how full the run kept it.

STAGE_LOGDIR=${STAGE_LOGDIR:-$PWD/build-stages}
rm -rf "$STAGE_LOGDIR"
mkdir -p "$STAGE_LOGDIR"
: >"$STAGE_LOGDIR/stages"
: >"$STAGE_LOGDIR/lanes"
: >"$STAGE_LOGDIR/shown"
stage_t0=${EPOCHREALTIME/[.,]/}
stage_lane=main
declare -A lane_pid

# Microseconds since the run began, without a fork.
stage_now() { echo $((${EPOCHREALTIME/[.,]/} - stage_t0)); }
stage_mmss() { printf '%d:%02d' $(($1 / 60000000)) $(($1 / 1000000 % 60)); }

stage_table() {
	local total
	total=$(stage_now)
	echo
	echo "==== run-tests: stages (wall time; lanes run side by side) ===="
	sort -n -k3 "$STAGE_LOGDIR/stages" | awk -v now="$total" '
		function mmss(u) { return sprintf("%d:%02d", u / 60000000, (u / 1000000) % 60) }
		BEGIN {
			printf "%-22s %-10s %6s %8s %8s  %s\n", "stage", "lane", "start", "seconds",
			       "CPU s", "result"
		}
		{
			r = $6; for (i = 7; i <= NF; i++) r = r " " $i
			end = $4 == "-" ? now : $4
			printf "%-22s %-10s %6s %8.1f %8s  %s\n", $1, $2, mmss($3), (end - $3) / 1e6, $5, r
			cpu += $5
		}
		END {
			printf "total %s (%d s), %d CPU s: %.0f%% of %d CPUs\n", mmss(now), now / 1e6, cpu,
			       100 * cpu / (now / 1e6 * ncpu), ncpu
		}' ncpu="$(nproc)"
	[ -z "${BUS1_TIME_FACTOR:-}" ] ||
		echo "time factor $BUS1_TIME_FACTOR (tools/time-factor.sh)"
}

stage() {
	local name=$1 rc=0 start cpu
	shift
	if [ -e "$STAGE_LOGDIR/failed" ]; then
		echo "run-tests: not starting $name: $(cat "$STAGE_LOGDIR/failed")" >&2
		exit 1
	fi
	start=$(stage_now)
	echo "==== run-tests: stage $name ($stage_lane, $(stage_mmss "$start")) ===="
	# A stage still running when the run ends shows as such.
	echo "$name $stage_lane $start - - running" >"$STAGE_LOGDIR/running.$name"
	# In a subshell with errexit on: a failing command inside a function stops the stage (an
	# `||` here would switch errexit off for all of it). Its children's CPU time (`times`, second
	# line) goes to a file on the way out.
	set +e
	(trap 'times >"$STAGE_LOGDIR/times.$name"' EXIT; set -e; "$@")
	rc=$?
	set -e
	rm -f "$STAGE_LOGDIR/running.$name"
	cpu=$(awk 'NR == 2 {
		for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] }
		printf "%.0f", s }' "$STAGE_LOGDIR/times.$name" 2>/dev/null)
	if [ $rc = 0 ]; then
		echo "$name $stage_lane $start $(stage_now) ${cpu:-?} ok" >>"$STAGE_LOGDIR/stages"
		return 0
	fi
	echo "$name $stage_lane $start $(stage_now) ${cpu:-?} FAILED (status $rc)" >>"$STAGE_LOGDIR/stages"
	echo "stage $name failed (status $rc)" >>"$STAGE_LOGDIR/failed"
	echo "run-tests: stage $name failed (status $rc)" >&2
	exit 1
}

lane() {
	local name=$1 fn=$2
	echo "run-tests: lane $name starts ($fn); its output: $STAGE_LOGDIR/$name.log"
	# Its own process group, so that a failed run can stop all of it.
	set -m
	( stage_lane=$name; trap - EXIT; "$fn" ) >"$STAGE_LOGDIR/$name.log" 2>&1 &
	lane_pid[$name]=$!
	set +m
	# For stage_exit of the main lane, which stops every lane, those started by lanes too.
	echo "$name ${lane_pid[$name]}" >>"$STAGE_LOGDIR/lanes"
}

lane_wait() {
	local name rc failed=
	for name in "$@"; do
		rc=0
		wait "${lane_pid[$name]}" || rc=$?
		unset "lane_pid[$name]"
		echo "==== run-tests: output of lane $name (status $rc) ===="
		cat "$STAGE_LOGDIR/$name.log"
		echo "$name" >>"$STAGE_LOGDIR/shown"
		[ $rc = 0 ] || failed+=" $name"
	done
	[ -z "$failed" ] || { echo "run-tests: lane(s)$failed failed" >&2; exit 1; }
}

stage_await() {
	while ! grep -q "^$1 .* ok$" "$STAGE_LOGDIR/stages"; do
		[ ! -e "$STAGE_LOGDIR/failed" ] || { echo "run-tests: $1 will not pass" >&2; exit 1; }
		sleep 2
	done
}

# On any exit of the main lane: stop the lanes still running, show their output so far, the
# end of the output of every lane that ended but was not waited for (a lane that failed while
# the main lane went on: its failure is in there), and the table.
stage_exit() {
	local rc=$? name pid
	trap - EXIT INT TERM
	set +e
	while read -r name pid; do
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM -- "-$pid" 2>/dev/null
			echo "==== run-tests: output of lane $name, stopped (the run ended) ===="
		elif ! grep -qx "$name" "$STAGE_LOGDIR/shown" 2>/dev/null; then
			echo "==== run-tests: output of lane $name, ended (not shown before) ===="
		else
			continue
		fi
		tail -n 150 "$STAGE_LOGDIR/$name.log"
	done <"$STAGE_LOGDIR/lanes"
	sleep 1
	cat "$STAGE_LOGDIR"/running.* >>"$STAGE_LOGDIR/stages" 2>/dev/null
	stage_table
	exit "$rc"
}
trap stage_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
