#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What does the agent cost for targets that hardly run?  A fleet's agent
# mostly watches processes that sleep: its cost there is wake-ups, not
# samples.  For 1 and BENCH_TARGETS (default 8) sleeping processes, each
# its own target at 99 Hz (cpu-clock, the default unwinding), it prints the
# agent's CPU per second (the sum over its threads of
# /proc/AGENT/task/*/schedstat) and its main thread's wake-ups per second,
# over BENCH_SECONDS (default 8) after a second of settling; beside it
# `perf record -F 99 -g -p PIDS` on the same processes (its CPU and
# wake-ups the same way), and a busy one for scale: xz at 99 Hz.
#
# Figures only; it never fails on a time.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=idle-cost
SECS=${BENCH_SECONDS:-8}
MANY=${BENCH_TARGETS:-8}
fp_init $((120 + SECS * 8))

cpu_of() { awk '{s += $1} END {print s + 0}' /proc/"$1"/task/*/schedstat 2>/dev/null; }
wakes_of() { awk '{print $3}' /proc/"$1"/schedstat; }
measure() { # measure PID: "CPU_US_PER_S WAKES_PER_S" over SECS
  local c0 w0 c1 w1
  c0=$(cpu_of "$1") w0=$(wakes_of "$1")
  sleep "$SECS"
  c1=$(cpu_of "$1") w1=$(wakes_of "$1")
  awk -v a="$c0" -v b="$c1" -v x="$w0" -v y="$w1" -v s="$SECS" 'BEGIN {printf "%.0f %.1f\n", (b - a) / 1000 / s, (y - x) / s}'
}
sleepers() { # sleepers N: starts N sleeping processes into PIDS
  PIDS=()
  local i
  for ((i = 0; i < $1; i++)); do
    sleep 600 &
    PIDS+=($!)
    fp_track "$!"
  done
}
row() { printf '%-34s %8s %12s %14s\n' "$@"; }

fp_start_agent --store none
row "profiler" "targets" "CPU us/s" "wake-ups/s"
for n in 1 "$MANY"; do
  sleepers "$n"
  for p in "${PIDS[@]}"; do
    fp_ctl start "$p" --freq 99 >/dev/null || fp_fail "start failed"
    sleep 0.2 # targets started apart, as they are in a fleet
  done
  sleep 1
  read -r cpu wakes < <(measure "$FP_AGENT_PID")
  row "fleetprof (sleeping targets)" "$n" "$cpu" "$wakes"
  for p in "${PIDS[@]}"; do
    fp_ctl stop "$p" >/dev/null
    fp_kill "$p"
  done
  if command -v perf >/dev/null; then
    sleepers "$n"
    perf record -q -e cpu-clock -g -F 99 -o "$FP_TMP/perf.data" -p "$(IFS=,; echo "${PIDS[*]}")" \
      -- sleep $((SECS + 3)) >/dev/null 2>&1 &
    rec=$!
    sleep 1.5
    perf=$(pgrep -P "$rec" -x perf || echo "$rec")
    read -r cpu wakes < <(measure "$perf")
    row "perf record -g (same processes)" "$n" "$cpu" "$wakes"
    wait "$rec" 2>/dev/null || true
    for p in "${PIDS[@]}"; do fp_kill "$p"; done
    rm -f "$FP_TMP/perf.data"
  fi
done
head -c 100000000 /dev/urandom >"$FP_TMP/data"
xz -9 -T1 -c "$FP_TMP/data" >/dev/null &
xz=$!
fp_track "$xz"
fp_ctl start "$xz" --freq 99 >/dev/null || fp_fail "start failed"
sleep 1
s0=$(fp_target_field "$xz" samples)
read -r cpu wakes < <(measure "$FP_AGENT_PID")
s1=$(fp_target_field "$xz" samples)
row "fleetprof (xz, busy)" 1 "$cpu" "$wakes"
awk -v c="$cpu" -v n="$((s1 - s0))" -v s="$SECS" 'BEGIN {printf "  that is %.2f us per sample (%d samples/s)\n", n ? c * s / n : 0, n / s}'
fp_ctl stop "$xz" >/dev/null
fp_kill "$xz"
fp_stop_agent
