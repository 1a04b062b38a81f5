#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What does thread tracking cost and catch?  The BPF tracker against the
# perf-fork fallback (--no-bpf), in the same invocation, on the same
# workloads (tests/workloads/threadstorm and spin):
#
#   - attach latency: thread birth (the kernel's CLOCK_MONOTONIC time of the
#     fork, from the BPF record or the perf FORK record) to both perf events
#     open, as the agent measures it (status --json attach_latency_us:
#     p50/p90/p99/max over the last 512 threads);
#   - a cross-check that does not trust the agent's clocks: each storm
#     thread burns exactly CPU_MS of its own CPU time at FREQ Hz, so a
#     thread attached at birth has CPU_MS*FREQ/1000 samples; the missing
#     samples per thread, divided by the rate, are the CPU milliseconds the
#     profiler missed at the start of each thread;
#   - the share of short-lived threads caught: attached (threads_seen) and
#     present in the profile, for 30 ms threads and for 1 ms threads;
#   - fds per profiled thread: the agent's /proc/AGENT/fd count with a
#     33-thread spin target minus before (and minus the bridge's one per
#     CPU), divided by 33; and the fds the
#     tracker itself holds (agent fds at rest, bpf minus fallback);
#   - thread creation rate of a 1 ms-thread storm, unprofiled and profiled.
#
# Figures only; it never fails on a time. Environment: BENCH_THREADS
# (default 200), BENCH_SHORT_THREADS (default 1000), BENCH_FREQ (default
# 1000).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=tracker-cost
N=${BENCH_THREADS:-200}
NSHORT=${BENCH_SHORT_THREADS:-1000}
FREQ=${BENCH_FREQ:-1000}
CPU_MS=30
fp_init 600
STORM=$FP_BUILD/tests/threadstorm
[[ -x $STORM && -x $FP_SPIN ]] || fp_fail "missing $STORM or $FP_SPIN"

all_fds() { ls "/proc/$FP_AGENT_PID/fd" | wc -l; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# storm_once MODE THREADS CPU_MS: runs a storm (profiled unless MODE is
# "none"); prints "wall_ms seen in_profile mean_samples latency_json".
storm_once() {
  local mode=$1 n=$2 ms=$3 tag=$1-$2-$3 t0 t1 P
  fp_start_workload threadstorm "$FP_TMP/$tag.out" "$FP_TMP/$tag.ready" \
    --threads "$n" --cpu-ms "$ms" --go "$FP_TMP/$tag.go" --hold
  P=$FP_WL_PID
  [[ $mode == none ]] || fp_ctl start "$P" --freq "$FREQ" >/dev/null || fp_fail "start $P failed"
  t0=$(now_ms)
  touch "$FP_TMP/$tag.go"
  fp_wait_for 300 grep -q done "$FP_TMP/$tag.out" || fp_fail "threadstorm did not finish"
  t1=$(now_ms)
  if [[ $mode == none ]]; then
    echo "$((t1 - t0)) - - - -"
  else
    fp_ctl dump "$P" -o "$FP_TMP/$tag.pb.gz" >/dev/null 2>&1 || fp_fail "dump failed"
    local st
    st=$(fp_status_json)
    PYTHONPATH=$FP_SRC/tests/integration fp_timeout 150 python3 -c '
import json, sys, pprofraw
st = json.loads(sys.argv[2]); pid = int(sys.argv[3])
t = [x for x in st["targets"] if x["pid"] == pid][0]
p = pprofraw.load(sys.argv[1])
per = {}
for s in p.samples:
    n = str(s.thread_name())
    if n.startswith("storm-") and "storm_work" in s.stack:
        per[n] = per.get(n, 0) + s.values[p.value_index("samples")]
mean = sum(per.values()) / int(sys.argv[4])
print(sys.argv[5], t["threads_seen"] - 1, len(per), "%.2f" % mean, json.dumps(t["attach_latency_us"], separators=(",", ":")))
' "$FP_TMP/$tag.pb.gz" "$st" "$P" "$n" "$((t1 - t0))"
    fp_ctl stop "$P" >/dev/null || fp_fail "stop failed"
  fi
  fp_kill "$P"
}

# fds_per_thread MODE: agent fds with a 33-thread spin target, per thread.
fds_per_thread() {
  local pre post P
  pre=$(all_fds)
  fp_start_workload spin "$FP_TMP/spin-$1.out" "$FP_TMP/spin-$1.ready" --threads 32 --seconds 30
  P=$FP_WL_PID
  fp_ctl start "$P" --freq 99 >/dev/null || fp_fail "start spin failed"
  # The bridge's per-CPU events (bpf only) are the agent's, not the threads'.
  post=$(($(all_fds) - $(fp_status_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["bridge"]["cpus"])')))
  local live
  live=$(fp_target_field "$P" threads)
  fp_ctl stop "$P" >/dev/null
  fp_kill "$P"
  awk -v a="$pre" -v b="$post" -v n="$live" 'BEGIN {printf "%d %d %d %.2f\n", a, b, n, (b - a) / n}'
}

declare -A R
for mode in fallback bpf; do
  if [[ $mode == bpf ]]; then fp_start_agent --store none; else fp_start_agent --store none --no-bpf; fi
  sleep 0.3
  R[$mode,rest]=$(all_fds)
  R[$mode,fds]=$(fds_per_thread "$mode")
  R[$mode,long]=$(storm_once "$mode" "$N" "$CPU_MS")
  R[$mode,short]=$(storm_once "$mode" "$NSHORT" 1)
  fp_stop_agent
done
R[none,short]=$(storm_once none "$NSHORT" 1)

expected=$(awk -v m="$CPU_MS" -v f="$FREQ" 'BEGIN {printf "%.1f", m * f / 1000}')
echo
echo "== thread tracking: bpf vs perf-fork fallback ($(nproc) cores, $(uname -r), $FREQ Hz cpu-clock) =="
printf '%-44s %22s %22s\n' "" "bpf" "perf-fork (--no-bpf)"
row() { printf '%-44s %22s %22s\n' "$1" "$2" "$3"; }
f() { awk '{print $'"$2"'}' <<<"${R[$1]}"; }
lat() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("%d/%d/%d/%d" % (d["p50"], d["p90"], d["p99"], d["max"]))' "$(f "$1" 5)"; }
row "agent fds at rest (tracker's own)" "$(f bpf,rest 1)" "$(f fallback,rest 1)"
row "fds per profiled thread (33-thread spin)" "$(f bpf,fds 4)" "$(f fallback,fds 4)"
row "attach latency µs p50/p90/p99/max, ${CPU_MS}ms" "$(lat bpf,long)" "$(lat fallback,long)"
row "attach latency µs p50/p90/p99/max, 1ms" "$(lat bpf,short)" "$(lat fallback,short)"
row "$N threads of ${CPU_MS} ms: attached" "$(f bpf,long 2)/$N" "$(f fallback,long 2)/$N"
row "$N threads of ${CPU_MS} ms: in the profile" "$(f bpf,long 3)/$N" "$(f fallback,long 3)/$N"
row "samples per ${CPU_MS} ms thread (ideal $expected)" "$(f bpf,long 4)" "$(f fallback,long 4)"
miss() { awk -v e="$expected" -v g="$1" -v f="$FREQ" 'BEGIN {printf "%.2f", (e - g) * 1000 / f}'; }
row "  → CPU ms missed per thread (vs ideal)" "$(miss "$(f bpf,long 4)")" "$(miss "$(f fallback,long 4)")"
row "$NSHORT threads of 1 ms: attached" "$(f bpf,short 2)/$NSHORT" "$(f fallback,short 2)/$NSHORT"
row "$NSHORT threads of 1 ms: in the profile" "$(f bpf,short 3)/$NSHORT" "$(f fallback,short 3)/$NSHORT"
rate() { awk -v n="$NSHORT" -v ms="$1" 'BEGIN {printf "%.0f/s", n * 1000 / ms}'; }
row "1 ms-thread storm creation rate" "$(rate "$(f bpf,short 1)")" "$(rate "$(f fallback,short 1)")"
row "  unprofiled" "$(rate "$(f none,short 1)")" ""
