#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Overhead on the target: how much throughput a CPU-bound process loses
# while it is profiled, fleetprof beside `perf record -g`.
#
# For each thread count in BENCH_THREADS (default "1 2"), one
# tests/workloads/spin process with that many busy threads runs for the
# whole measurement and reports its iteration count every 100 ms.  For each
# tool and rate (BENCH_RATES, default "99 1000 10000" Hz per thread) the
# profiler is switched on and off in alternating windows of BENCH_WINDOW
# seconds (default 2): off, on, off, on, ..., off, BENCH_PAIRS (default 5)
# on windows.  Each on window's throughput is divided by the mean of the off
# windows on either side, so drift of the machine cancels, and the median
# of those ratios is the figure.  fleetprof is switched with `agentctl
# start --freq HZ` / `agentctl stop`; perf with `perf record -e cpu-clock -g
# -F HZ -p PID` started and stopped with SIGINT (its exit, which writes its
# file, is waited for before the next off window).  The same alternation
# with no profiler at all ("none") shows the noise floor of this machine.
# Throughput is measured from spin's own report lines (iterations over its
# own millisecond clock), 0.3 s after each switch, per wall second (what
# the service loses, including CPU the profiler takes from it on a busy
# machine) and per CPU second of spin (what the in-kernel sampling and stack
# walking charged to the target cost it; insensitive to other load).
# tests/bench/overhead-summary.py computes the ratios.
#
# Writes $BENCH_OUT/overhead.json; never fails on a figure.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=overhead
BENCH_OUT=${BENCH_OUT:-.}
RATES=${BENCH_RATES:-99 1000 10000}
THREADS_LIST=${BENCH_THREADS:-1 2}
PAIRS=${BENCH_PAIRS:-5}
WINDOW=${BENCH_WINDOW:-2}
SETTLE=0.3
read -ra _r <<<"$RATES"
read -ra _t <<<"$THREADS_LIST"
fp_init $((120 + ${#_t[@]} * (2 * ${#_r[@]} + 1) * (2 * PAIRS + 1) * (${WINDOW%.*} + 8)))
[[ -x $FP_SPIN ]] || fp_fail "missing $FP_SPIN"
HAVE_PERF=1
command -v perf >/dev/null || {
  HAVE_PERF=0
  fp_log "perf is not installed: the perf record peer is skipped"
}

LINES=$FP_TMP/overhead.lines
: >"$LINES"
fp_start_agent

# mark: spin's latest report, "t_ms iters cpu_ns".
mark() {
  awk -F'[ =]' '$1 == "t_ms" {t = $2; n = $4; c = $10} END {printf "%.0f %.0f %.0f\n", t, n, c}' "$FP_TMP/spin.out"
}

# window: sleep SETTLE, measure WINDOW seconds; prints "WALL:CPU", spin's
# iterations per second and per CPU second of spin.
window() {
  local t0 n0 c0 t1 n1 c1
  sleep "$SETTLE"
  read -r t0 n0 c0 < <(mark)
  sleep "$WINDOW"
  read -r t1 n1 c1 < <(mark)
  awk -v dn=$((n1 - n0)) -v dt=$((t1 - t0)) -v dc=$((c1 - c0)) \
    'BEGIN {printf "%.0f:%.0f\n", (dt > 0 ? dn * 1000 / dt : 0), (dc > 0 ? dn * 1e9 / dc : 0)}'
}

PERF_PID=
# on TOOL HZ / off TOOL: switch the profiler.
on() {
  case $1 in
  fleetprof) fp_ctl start "$SPIN_PID" --freq "$2" >/dev/null || fp_fail "agentctl start --freq $2 failed" ;;
  perf)
    rm -f "$FP_TMP/perf.data"
    perf record -e cpu-clock -g -F "$2" -p "$SPIN_PID" -o "$FP_TMP/perf.data" >"$FP_TMP/perf.log" 2>&1 &
    PERF_PID=$!
    fp_track "$PERF_PID"
    fp_wait_for 20 eval '[[ $(fp_perf_fds '"$PERF_PID"') -ge '"$NTASKS"' ]]' ||
      fp_fail "perf record did not attach: $(tail -n 3 "$FP_TMP/perf.log")"
    ;;
  none) ;;
  esac
}
off() {
  case $1 in
  fleetprof) fp_ctl stop "$SPIN_PID" >/dev/null || fp_fail "agentctl stop failed" ;;
  perf)
    kill -INT "$PERF_PID" 2>/dev/null || true
    fp_untrack "$PERF_PID"
    wait "$PERF_PID" || true
    rm -f "$FP_TMP/perf.data"
    ;;
  none) ;;
  esac
}

for threads in $THREADS_LIST; do
  rm -f "$FP_TMP/spin.ready"
  fp_start_workload spin "$FP_TMP/spin.out" "$FP_TMP/spin.ready" --threads "$threads" --seconds 100000 --report-ms 100
  SPIN_PID=$FP_WL_PID
  NTASKS=$(ls "/proc/$SPIN_PID/task" | wc -l)
  configs=("none 0")
  for hz in $RATES; do
    configs+=("fleetprof $hz")
    ((HAVE_PERF)) && configs+=("perf $hz")
  done
  for cfg in "${configs[@]}"; do
    read -r tool hz <<<"$cfg"
    offs=("$(window)")
    ons=()
    for ((p = 0; p < PAIRS; p++)); do
      on "$tool" "$hz"
      ons+=("$(window)")
      off "$tool"
      offs+=("$(window)")
    done
    echo "$tool $hz $threads ${ons[*]} / ${offs[*]}" >>"$LINES"
    fp_log "$threads busy threads, $tool at $hz Hz: on ${ons[*]}; off ${offs[*]} (iterations/s:per CPU s)"
  done
  fp_kill "$SPIN_PID"
done
fp_stop_agent

python3 "$FP_SRC/tests/bench/overhead-summary.py" "$LINES" "$WINDOW" "$PAIRS" >"$BENCH_OUT/overhead.json"
