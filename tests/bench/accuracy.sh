#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Accuracy and precision against measured truth, fleetprof beside
# `perf record -g`.
#
# For each scenario of tests/workloads/truth (BENCH_SCENARIOS, default
# "ratios serial equal deep": threads with known ratios, serial leaves with
# known shares, equal threads, deep and shallow stacks), each rate in
# BENCH_RATES (default "99 1000 10000" Hz per thread) and each of
# BENCH_REPEATS (default 5) repeats, the workload runs BENCH_SECONDS
# (default 4) of measured work, profiled over exactly that window (it waits
# for a start file until the profiler is attached), once by the agent
# (`agentctl start --freq`, then a pprof dump read by `go tool pprof -raw`)
# and once by `perf record -e cpu-clock -g -F HZ -p PID` (read by
# `perf script`).  The two tools alternate within each repeat, so machine
# drift hits both alike.  tests/bench/shares.py compares every run's shares
# with the truth the workload measured itself (per-thread CPU clocks around
# every leaf call).
#
# Writes one JSON object per run to $BENCH_OUT/accuracy-runs.jsonl and the
# per-(scenario, tool, rate) summary to $BENCH_OUT/accuracy.json.  Prints
# progress; never fails on a figure; exits non-zero only if a run could not
# be made at all.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=accuracy
BENCH_OUT=${BENCH_OUT:-.}
SECS=${BENCH_SECONDS:-4}
RATES=${BENCH_RATES:-99 1000 10000}
REPEATS=${BENCH_REPEATS:-5}
SCENARIOS=${BENCH_SCENARIOS:-ratios serial equal deep}
SHARES=$FP_SRC/tests/bench/shares.py
read -ra _r <<<"$RATES"
read -ra _s <<<"$SCENARIOS"
fp_init $((120 + ${#_r[@]} * ${#_s[@]} * REPEATS * 2 * (SECS + 40)))
fp_require_go
command -v perf >/dev/null || fp_log "perf is not installed: the perf record peer is skipped"

RUNS=$BENCH_OUT/accuracy-runs.jsonl
: >"$RUNS"
fp_start_agent

# start_truth TAG SCENARIO: the workload, waiting for $FP_TMP/TAG.go.
start_truth() {
  rm -f "$FP_TMP/$1".*
  fp_start_workload truth "$FP_TMP/$1.out" "$FP_TMP/$1.ready" --scenario "$2" \
    --seconds "$SECS" --truth "$FP_TMP/$1.truth" --wait-for-start "$FP_TMP/$1.go" --hold
}

# wait_truth TAG: the measured window is over and the truth is written.
wait_truth() {
  fp_wait_for $((SECS + 60)) test -s "$FP_TMP/$1.truth" || fp_fail "truth ($1) wrote no truth file"
}

# record SCENARIO TOOL HZ REPEAT JSON: append one run's figures.
record() {
  python3 -c '
import json, sys
r = json.loads(sys.argv[5])
r.update(scenario=sys.argv[1], tool=sys.argv[2], rate_hz=int(sys.argv[3]), repeat=int(sys.argv[4]))
print(json.dumps(r, sort_keys=True))' "$@" >>"$RUNS"
}

# run_fleetprof SCENARIO HZ REPEAT
run_fleetprof() {
  local tag=fp-$1-$2-$3 prev=-1 cur i out
  start_truth "$tag" "$1"
  fp_ctl start "$FP_WL_PID" --freq "$2" >/dev/null || fp_fail "agentctl start --freq $2 failed"
  touch "$FP_TMP/$tag.go"
  wait_truth "$tag"
  # The workload idles now; wait until the agent has drained its rings.
  for ((i = 0; i < 40; i++)); do
    cur=$(fp_target_field "$FP_WL_PID" samples)
    [[ $cur == "$prev" ]] && break
    prev=$cur
    sleep 0.3
  done
  fp_ctl dump "$FP_WL_PID" -o "$FP_TMP/$tag.pb.gz" >/dev/null 2>"$FP_TMP/dump.err" ||
    fp_fail "agentctl dump failed: $(cat "$FP_TMP/dump.err")"
  fp_ctl stop "$FP_WL_PID" >/dev/null || true
  fp_kill "$FP_WL_PID"
  out=$(python3 "$SHARES" fleetprof --truth "$FP_TMP/$tag.truth" --rate "$2" "$FP_TMP/$tag.pb.gz") ||
    fp_fail "could not read the agent's profile ($tag)"
  record "$1" fleetprof "$2" "$3" "$out"
  rm -f "$FP_TMP/$tag".*
}

# run_perf SCENARIO HZ REPEAT
run_perf() {
  local tag=perf-$1-$2-$3 ppid i out prc=0
  start_truth "$tag" "$1"
  perf record -e cpu-clock -g -F "$2" -p "$FP_WL_PID" -o "$FP_TMP/$tag.data" \
    >"$FP_TMP/$tag.log" 2>&1 &
  ppid=$!
  fp_track "$ppid"
  # Attached once perf holds an event per thread of the workload.
  local want
  want=$(ls "/proc/$FP_WL_PID/task" | wc -l)
  fp_wait_for 20 eval '[[ $(fp_perf_fds '"$ppid"') -ge '"$want"' ]]' ||
    fp_fail "perf record did not attach to $FP_WL_PID: $(tail -n 3 "$FP_TMP/$tag.log")"
  touch "$FP_TMP/$tag.go"
  wait_truth "$tag"
  kill -INT "$ppid" 2>/dev/null || true
  fp_untrack "$ppid"
  wait "$ppid" || prc=$?
  fp_kill "$FP_WL_PID"
  [[ -s $FP_TMP/$tag.data ]] || fp_fail "perf record wrote nothing (exit $prc): $(tail -n 3 "$FP_TMP/$tag.log")"
  out=$(python3 "$SHARES" perf --truth "$FP_TMP/$tag.truth" --rate "$2" "$FP_TMP/$tag.data") ||
    fp_fail "could not read perf's profile ($tag)"
  record "$1" perf "$2" "$3" "$out"
  rm -f "$FP_TMP/$tag".*
}

for scen in $SCENARIOS; do
  for hz in $RATES; do
    for ((rep = 1; rep <= REPEATS; rep++)); do
      run_fleetprof "$scen" "$hz" "$rep"
      command -v perf >/dev/null && run_perf "$scen" "$hz" "$rep"
      fp_log "$scen at $hz Hz, repeat $rep: $(tail -n 2 "$RUNS" | python3 -c '
import json, sys
print("; ".join("%s worst function %.2f, thread %.2f points" % (r["tool"], r["worst_leaf"], r["worst_thread"])
                for r in map(json.loads, sys.stdin)))')"
    done
  done
done
fp_stop_agent
python3 "$SHARES" summarize "$RUNS" >"$BENCH_OUT/accuracy.json"
