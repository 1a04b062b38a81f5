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
# And processes: threadstorm forks BENCH_PROCS children one after another,
# each burning 5 or 50 ms in child_work(), profiled by fleetprof with
# `start --follow-children` (each child its own target, its threads with a
# random first period) and by perf record -a -e cpu-clock -c PERIOD (one
# timer per CPU: no first period at all), counting samples of the
# children's names.
#
# Each figure is profiled CPU / the CPU the threads burned; "exp" is the
# number of samples that CPU is worth (cells under 100 are noise-bound).
# Beside it, fleetprof's own kernel account of the same threads (born
# threads' CPU at their last switch, which includes their start-up and
# exit in the kernel). Figures only; it never fails on a number.
# Environment: BENCH_THREADS (default 200), BENCH_PROCS (default 100).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=short-lived-bench
N=${BENCH_THREADS:-200}
NP=${BENCH_PROCS:-100}
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

# fleetprof_procs MS FREQ: prints "profiled_ns kernel_cpu_ns" of the followed children.
fleetprof_procs() {
  local ms=$1 freq=$2 tag=fpp-$1-$2 P
  fp_start_workload threadstorm "$FP_TMP/$tag.out" "$FP_TMP/$tag.ready" \
    --children "$NP" --cpu-ms "$ms" --go "$FP_TMP/$tag.go" --hold
  P=$FP_WL_PID
  fp_ctl start "$P" --freq "$freq" --follow-children >/dev/null || fp_fail "start $P failed"
  touch "$FP_TMP/$tag.go"
  fp_wait_for 300 grep -q done "$FP_TMP/$tag.out" || fp_fail "threadstorm did not finish"
  sleep 1
  fp_ctl status --json | python3 -c '
import json, sys
ts = [x for x in json.load(sys.stdin)["targets"] if x["parent_pid"] == int(sys.argv[1])]
print(sum(t["born"]["profiled"] for t in ts), sum(t["born"]["cpu_ns"] for t in ts))' "$P"
  fp_ctl stop "$P" >/dev/null 2>&1 || true
  fp_kill "$P"
}

# perf_procs MS FREQ: the children's samples in perf record -a, times the period (ns).
perf_procs() {
  local ms=$1 freq=$2 tag=perfp-$1-$2 P period=$((1000000000 / $2)) rec
  fp_start_workload threadstorm "$FP_TMP/$tag.out" "$FP_TMP/$tag.ready" \
    --children "$NP" --cpu-ms "$ms" --go "$FP_TMP/$tag.go" --hold
  P=$FP_WL_PID
  perf record -q -a -e cpu-clock -c "$period" -o "$FP_TMP/$tag.data" >/dev/null 2>&1 &
  rec=$!
  sleep 1
  touch "$FP_TMP/$tag.go"
  fp_wait_for 300 grep -q done "$FP_TMP/$tag.out" || fp_fail "threadstorm did not finish"
  kill -INT "$rec"
  wait "$rec" || true
  local n
  n=$(perf script -i "$FP_TMP/$tag.data" -F comm 2>/dev/null | grep -c '^ *child-' || true)
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
  for ms in 5 50; do
    read -r rnd kern < <(fleetprof_procs "$ms" "$freq")
    ROW[p$freq-$ms]="$((NP * ms * 1000000)) $rnd $kern $(perf_procs "$ms" "$freq")"
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
echo
echo "== short-lived processes: profiled CPU / CPU burned ($NP processes each) =="
printf '%-22s %6s %10s %12s %12s\n' "cell" "exp" "fleetprof" "perf -a" "kernel/burn"
for freq in 99 1000; do
  for ms in 5 50; do
    read -r want rnd kern perf <<<"${ROW[p$freq-$ms]}"
    python3 -c '
import sys
want, rnd, kern, perf, freq = map(float, sys.argv[1:6])
cell = "%2d ms processes, %4d Hz" % (int(sys.argv[6]), freq)
print("%-22s %6d %10.3f %12.3f %12.3f" % (cell, want * freq / 1e9, rnd / want, perf / want, kern / want))' \
      "$want" "$rnd" "$kern" "$perf" "$freq" "$ms"
  done
done
fp_log "PASS"
