#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# How much of short-lived threads' CPU reaches the profile? threadstorm
# makes BENCH_THREADS threads one after another, each burning 1, 5 or 30 ms
# of its own CPU (it measures that itself: CLOCK_THREAD_CPUTIME_ID), at
# 99 Hz and 1 kHz cpu-clock, profiled in the same invocation by:
#
#   - fleetprof (--first-period random, the default): what the profile
#     holds of the born threads (status --json born.profiled);
#   - fleetprof --first-period full (each thread's first sample after a
#     whole period, as perf's);
#   - perf record -e cpu-clock -c PERIOD -p PID (the kernel's inheritance:
#     every thread from its first instruction, with a whole first period):
#     its samples of threads other than the main one, times the period.
#
# Each figure is profiled CPU / the CPU the threads burned; "exp" is the
# number of samples that CPU is worth (cells under 100 are noise-bound).
# Beside it, fleetprof's own kernel account of the same threads (born
# threads' CPU at their last switch, which includes their start-up and
# exit in the kernel). Figures only; it never fails on a number.
# Environment: BENCH_THREADS (default 200).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=short-lived-bench
N=${BENCH_THREADS:-200}
fp_init 900
command -v perf >/dev/null || fp_fail "perf is not installed (scripts/deps.sh installs linux-perf)"

# fleetprof_run FIRST MS FREQ: prints "profiled_ns kernel_cpu_ns".
fleetprof_run() {
  local first=$1 ms=$2 freq=$3 tag=fp-$1-$2-$3 P
  fp_start_workload threadstorm "$FP_TMP/$tag.out" "$FP_TMP/$tag.ready" \
    --threads "$N" --cpu-ms "$ms" --go "$FP_TMP/$tag.go" --hold
  P=$FP_WL_PID
  fp_ctl start "$P" --freq "$freq" >/dev/null || fp_fail "start $P failed"
  touch "$FP_TMP/$tag.go"
  fp_wait_for 300 grep -q done "$FP_TMP/$tag.out" || fp_fail "threadstorm did not finish"
  sleep 1 # the last threads' exit accounting
  fp_ctl status --json | python3 -c '
import json, sys
t = [x for x in json.load(sys.stdin)["targets"] if x["pid"] == int(sys.argv[1])][0]
print(t["born"]["profiled"], t["born"]["cpu_ns"])' "$P"
  fp_ctl stop "$P" >/dev/null 2>&1 || true # figures only: a stop that fails changes none
  fp_kill "$P"
}

# perf_run MS FREQ: prints the storm threads' samples times the period (ns).
perf_run() {
  local ms=$1 freq=$2 tag=perf-$1-$2 P period=$((1000000000 / $2)) rec
  fp_start_workload threadstorm "$FP_TMP/$tag.out" "$FP_TMP/$tag.ready" \
    --threads "$N" --cpu-ms "$ms" --go "$FP_TMP/$tag.go" --hold
  P=$FP_WL_PID
  perf record -q -e cpu-clock -c "$period" -p "$P" -o "$FP_TMP/$tag.data" >/dev/null 2>&1 &
  rec=$!
  sleep 1 # perf has opened its events
  touch "$FP_TMP/$tag.go"
  fp_wait_for 300 grep -q done "$FP_TMP/$tag.out" || fp_fail "threadstorm did not finish"
  kill -INT "$rec"
  wait "$rec" || true
  local n
  n=$(perf script -i "$FP_TMP/$tag.data" -F tid 2>/dev/null | awk -v p="$P" '$1 != p' | wc -l)
  echo $((n * period))
  fp_kill "$P"
}

fp_start_agent
declare -A ROW
for freq in 99 1000; do
  for ms in 1 5 30; do
    want=$((N * ms * 1000000))
    read -r rnd kern < <(fleetprof_run random "$ms" "$freq")
    ROW[$freq-$ms]="$want $rnd $kern"
  done
done
fp_stop_agent
fp_start_agent --first-period full
for freq in 99 1000; do
  for ms in 1 5 30; do
    read -r full _ < <(fleetprof_run full "$ms" "$freq")
    ROW[$freq-$ms]+=" $full"
  done
done
fp_stop_agent
for freq in 99 1000; do
  for ms in 1 5 30; do
    ROW[$freq-$ms]+=" $(perf_run "$ms" "$freq")"
  done
done

echo
echo "== short-lived threads: profiled CPU / CPU burned ($N threads each, $(nproc) cores, $(uname -r)) =="
printf '%-22s %6s %10s %12s %12s %12s\n' "cell" "exp" "fleetprof" "first full" "perf -p" "kernel/burn"
for freq in 99 1000; do
  for ms in 1 5 30; do
    read -r want rnd kern full perf <<<"${ROW[$freq-$ms]}"
    python3 -c '
import sys
want, rnd, kern, full, perf, freq = map(float, sys.argv[1:7])
cell = "%2d ms threads, %4d Hz" % (int(sys.argv[8]), freq)
print("%-22s %6d %10.3f %12.3f %12.3f %12.3f" % (cell, want * freq / 1e9, rnd / want, full / want, perf / want, kern / want))' \
      "$want" "$rnd" "$kern" "$full" "$perf" "$freq" "$N" "$ms"
  done
done
fp_log "PASS"
