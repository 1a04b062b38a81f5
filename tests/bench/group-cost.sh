#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What does a counter group cost per sample?  Profiles tests/workloads/spin
# (BENCH_THREADS, default 2, CPU-bound threads) at BENCH_HZ (default 4000)
# samples per second per thread for BENCH_SECONDS (default 8) with the
# cpu-clock leader alone, then with 2 and with 4 software counters riding in
# its group (each sample then carries a group read: PERF_SAMPLE_READ with
# PERF_FORMAT_GROUP, which the agent parses and turns into per-stack
# deltas), BENCH_REPEAT times (default 2) in turn, so drifts of the machine
# hit every variant alike.  For each run it reports:
#   - samples taken, the agent's CPU time (schedstat of its threads) and
#     that per sample in microseconds, and the ratio to the leader alone,
#     after one second of warm-up (the first samples load symbols);
#   - the perf fds the agent holds per profiled thread;
#   - the workload's iterations per CPU second relative to an unprofiled
#     run: the in-kernel cost of sampling (and of reading the group) is
#     charged to the profiled threads.
# It prints figures and ratios and never fails on a time.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=group-cost
SECS=${BENCH_SECONDS:-8}
HZ=${BENCH_HZ:-4000}
THREADS=${BENCH_THREADS:-2}
REPEAT=${BENCH_REPEAT:-2}
EVENT_SETS=("cpu-clock" "cpu-clock,page-faults,context-switches"
  "cpu-clock,page-faults,context-switches,cpu-migrations,minor-faults")
fp_init $((160 + (SECS + 8) * (3 * REPEAT + 1)))
[[ -x $FP_SPIN ]] || fp_fail "missing $FP_SPIN"

# The highest iteration count spin reported (a line being written may be cut short).
last_iters() { awk -F'[ =]' '$1 == "t_ms" && $4 + 0 > n {n = $4 + 0} END {print n + 0}' "$FP_TMP/$1.out"; }
run_spin() {
  fp_start_workload spin "$FP_TMP/$1.out" "$FP_TMP/$1.ready" \
    --threads "$THREADS" --seconds $((SECS + 6)) --report-ms 100
}

# Unprofiled: iterations per CPU second of spin.
run_spin base
sleep 1
i0=$(last_iters base) c0=$(fp_cpu_ns "$FP_WL_PID")
sleep "$SECS"
i1=$(last_iters base) c1=$(fp_cpu_ns "$FP_WL_PID")
fp_kill "$FP_WL_PID"
BASE=$(awk -v di=$((i1 - i0)) -v dc=$((c1 - c0)) 'BEGIN {printf "%.0f", di * 1e9 / dc}')
fp_log "unprofiled spin: $BASE iterations per CPU second"

declare -A SUM_US SUM_N PER_RUN
ROWS=()
# One agent for every run. A warm-up run first: the first samples that land
# in a library load its symbols (tens of ms, once per agent), which would
# otherwise fall into whichever run meets them first.
fp_start_agent --store none --bucket 3600
run_spin warmup
fp_ctl start "$FP_WL_PID" --event "${EVENT_SETS[2]}" --freq "$HZ" >/dev/null || fp_fail "warm-up start failed"
sleep 4
fp_ctl stop "$FP_WL_PID" >/dev/null || true
fp_kill "$FP_WL_PID"
for ((rep = 1; rep <= REPEAT; rep++)); do
  for g in "${EVENT_SETS[@]}"; do
    tag=g$rep-$(tr -cd ',' <<<"$g" | wc -c)
    run_spin "$tag"
    sleep 1
    fp_ctl start "$FP_WL_PID" --event "$g" --freq "$HZ" >/dev/null || fp_fail "start --event $g failed"
    sleep 1
    s0=$(fp_target_field "$FP_WL_PID" samples)
    a0=$(fp_cpu_ns "$FP_AGENT_PID")
    i0=$(last_iters "$tag") w0=$(fp_cpu_ns "$FP_WL_PID")
    nt=$(ls /proc/"$FP_WL_PID"/task | wc -l)
    fds=$(fp_perf_fds "$FP_AGENT_PID")
    sleep "$SECS"
    i1=$(last_iters "$tag") w1=$(fp_cpu_ns "$FP_WL_PID")
    samples=$(($(fp_target_field "$FP_WL_PID" samples) - s0))
    a1=$(fp_cpu_ns "$FP_AGENT_PID")
    fp_ctl stop "$FP_WL_PID" >/dev/null || true
    fp_kill "$FP_WL_PID"
    us=$(((a1 - a0) / 1000))
    SUM_US[$g]=$((${SUM_US[$g]:-0} + us))
    SUM_N[$g]=$((${SUM_N[$g]:-0} + samples))
    PER_RUN[$g]="${PER_RUN[$g]:-} $(awk -v c="$us" -v s="$samples" 'BEGIN {printf "%.3f", s ? c / s : 0}')"
    ROWS+=("$(printf '%3d  %-62s %8s %9s %9s %7s %8s' "$rep" "$g" "$samples" "$((us / 1000))" \
      "$(awk -v c="$us" -v s="$samples" 'BEGIN {printf "%.2f", s ? c / s : 0}')" \
      "$(awk -v f="$fds" -v t="$nt" 'BEGIN {printf "%.1f", f / t}')" \
      "$(awk -v di=$((i1 - i0)) -v dc=$((w1 - w0)) -v b="$BASE" 'BEGIN {printf "%.1f", 100 * di * 1e9 / dc / b}')")")
  done
done

fp_stop_agent
echo
echo "spin: $THREADS threads at $HZ Hz per thread, $SECS s per run, one agent (--store none --bucket 3600: no bucket closes inside a run), after a warm-up run"
printf '%3s  %-62s %8s %9s %9s %7s %8s\n' run events samples agent_ms us/sample fds/thr wl_cpu%
for r in "${ROWS[@]}"; do echo "$r"; done
echo
# median WORDS...: the middle value (runs hit by a one-off stall of the machine do not move it).
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
lead=$(median ${PER_RUN[${EVENT_SETS[0]}]})
for g in "${EVENT_SETS[@]}"; do
  m=$(median ${PER_RUN[$g]})
  awk -v c="${SUM_US[$g]}" -v s="${SUM_N[$g]}" -v m="$m" -v l="$lead" -v g="$g" \
    'BEGIN {printf "%-62s median %5.2f us/sample (%.2fx the leader alone), mean over all runs %5.2f\n", g, m, l ? m / l : 0, s ? c / s : 0}'
done
cat <<'TXT'
agent_ms: the agent's CPU time while profiling; us/sample = agent_ms / samples. fds/thr: perf fds
the agent holds per profiled thread (leader + members + the side-band event). wl_cpu%: the
workload's iterations per CPU second relative to the unprofiled run (the kernel's sampling and
group-read cost is charged to the profiled threads).
TXT
