#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# How much of short-lived threads' CPU reaches the profile? threadstorm
# makes BENCH_THREADS threads one after another, each burning 1, 5 or 30 ms
# of its own CPU (it measures that itself: CLOCK_THREAD_CPUTIME_ID), at
# 99 Hz and 1 kHz cpu-clock, profiled in the same invocation by:
#
#   - fleetprof (--first-period random and the bridge, the defaults): what
#     the profile holds of the born threads (status --json born.profiled);
#   - fleetprof --no-bridge (each thread sampled from when its own events
#     open, 0.1-0.2 ms after its birth);
#   - fleetprof --first-period full --no-bridge (perf's way: each thread's
#     first sample after a whole period);
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
# exit in the kernel).
#
# Then the bridge's cost per birth: births per second of threadstorm
# making BENCH_BIRTHS threads that do nothing, unprofiled, profiled (at
# 1 kHz) with the bridge and without it, and the agent's CPU per birth
# (three alternating rounds, medians).
# Figures only; it never fails on a number.
# Environment: BENCH_THREADS (default 200), BENCH_PROCS (default 100),
# BENCH_BIRTHS (default 5000), BENCH_FREQS (the rates, default "99 1000"),
# BENCH_ROUNDS (of the births, default 3).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=short-lived-bench
N=${BENCH_THREADS:-200}
NP=${BENCH_PROCS:-100}
NB=${BENCH_BIRTHS:-5000}
FREQS=${BENCH_FREQS:-99 1000}
ROUNDS=${BENCH_ROUNDS:-3}
fp_init 900
command -v perf >/dev/null || fp_fail "perf is not installed (scripts/deps.sh installs linux-perf)"

# storm TAG KIND MS: starts threadstorm with N threads (KIND threads) or NP
# child processes (KIND children) of MS ms each, waiting for go; sets P.
storm() {
  local n=$N
  [[ $2 == children ]] && n=$NP
  fp_start_workload threadstorm "$FP_TMP/$1.out" "$FP_TMP/$1.ready" \
    "--$2" "$n" --cpu-ms "$3" --go "$FP_TMP/$1.go" --hold
  P=$FP_WL_PID
}

# go_and_wait TAG: lets the storm go and waits until it is done.
go_and_wait() {
  touch "$FP_TMP/$1.go"
  fp_wait_for 300 grep -q done "$FP_TMP/$1.out" || fp_fail "threadstorm did not finish"
}

# fleetprof_run KIND MS FREQ: prints "profiled_ns kernel_cpu_ns" of the born threads
# (threads: the storm's own; children: its followed children's, each a target), under
# the running agent (its --first-period in FIRST).
fleetprof_run() {
  local kind=$1 tag=fp-$FIRST-$1-$2-$3 follow=()
  [[ $kind == children ]] && follow=(--follow-children)
  storm "$tag" "$kind" "$2"
  fp_ctl start "$P" --freq "$3" "${follow[@]}" >/dev/null || fp_fail "start $P failed"
  go_and_wait "$tag"
  sleep 1 # the last threads' exit accounting
  fp_ctl status --json | python3 -c '
import json, sys
pid, kind = int(sys.argv[1]), sys.argv[2]
ts = [x for x in json.load(sys.stdin)["targets"]
      if (x["parent_pid"] if kind == "children" else x["pid"]) == pid]
print(sum(t["born"]["profiled"] for t in ts), sum(t["born"]["cpu_ns"] for t in ts))' "$P" "$kind"
  fp_ctl stop "$P" >/dev/null 2>&1 || true # figures only: a stop that fails changes none
  fp_kill "$P"
}

# perf_run KIND MS FREQ: the storm's samples times the period (ns): perf record -p
# and every thread but the main one (threads), or -a and the children's names.
perf_run() {
  local kind=$1 tag=perf-$1-$2-$3 period=$((1000000000 / $3)) rec n
  storm "$tag" "$kind" "$2"
  local who=(-p "$P")
  [[ $kind == children ]] && who=(-a)
  perf record -q "${who[@]}" -e cpu-clock -c "$period" -o "$FP_TMP/$tag.data" >/dev/null 2>&1 &
  rec=$!
  sleep 1 # perf has opened its events
  go_and_wait "$tag"
  kill -INT "$rec"
  wait "$rec" || true
  if [[ $kind == children ]]; then
    n=$(perf script -i "$FP_TMP/$tag.data" -F comm 2>/dev/null | grep -c '^ *child-' || true)
  else
    n=$(perf script -i "$FP_TMP/$tag.data" -F tid 2>/dev/null | awk -v p="$P" '$1 != p' | wc -l)
  fi
  echo $((n * period))
  fp_kill "$P"
}

FIRST=random
fp_start_agent
declare -A ROW
for freq in $FREQS; do
  for ms in 1 5 30; do
    want=$((N * ms * 1000000))
    read -r rnd kern < <(fleetprof_run threads "$ms" "$freq")
    ROW[$freq-$ms]="$want $rnd $kern"
  done
  for ms in 5 50; do
    read -r rnd kern < <(fleetprof_run children "$ms" "$freq")
    ROW[p$freq-$ms]="$((NP * ms * 1000000)) $rnd $kern $(perf_run children "$ms" "$freq")"
  done
done
fp_stop_agent
FIRST=unbridged
fp_start_agent --no-bridge
for freq in $FREQS; do
  for ms in 1 5 30; do
    read -r unbridged _ < <(fleetprof_run threads "$ms" "$freq")
    ROW[$freq-$ms]+=" $unbridged"
  done
done
fp_stop_agent
FIRST=full
fp_start_agent --first-period full --no-bridge
for freq in $FREQS; do
  for ms in 1 5 30; do
    read -r full _ < <(fleetprof_run threads "$ms" "$freq")
    ROW[$freq-$ms]+=" $full"
  done
done
fp_stop_agent
# births_run MODE: births/s of NB threads that do nothing, and (profiled) the
# agent's CPU µs per birth; MODE none (no agent profiling it), bridge, unbridged.
births_run() {
  local tag=births-$1 cpu0 cpu1
  fp_start_workload threadstorm "$FP_TMP/$tag.out" "$FP_TMP/$tag.ready" \
    --threads "$NB" --cpu-us 0 --go "$FP_TMP/$tag.go" --hold
  P=$FP_WL_PID
  [[ $1 == none ]] || fp_ctl start "$P" --freq 1000 >/dev/null || fp_fail "start $P failed"
  cpu0=$(agent_cpu_us)
  touch "$FP_TMP/$tag.go"
  fp_wait_for 300 grep -q done "$FP_TMP/$tag.out" || fp_fail "threadstorm did not finish"
  sleep 1 # the agent catches up with the last births
  cpu1=$(agent_cpu_us)
  [[ $1 == none ]] || fp_ctl stop "$P" >/dev/null 2>&1 || true
  fp_kill "$P"
  python3 -c '
import sys
ns, n, cpu = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print("%.0f %.1f" % (n / (ns / 1e9), cpu / n))' \
    "$(awk '$1 == "elapsed_ns" {print $2}' "$FP_TMP/$tag.out")" "$NB" "$((cpu1 - cpu0))"
}

# The agent's CPU time (user + system), µs.
agent_cpu_us() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print int(($12 + $13) * 1000000 / hz) }' \
    "/proc/$FP_AGENT_PID/stat"
}

# ROUNDS rounds (three), alternating (two cores shared by the storm and the agent: one run is noisy);
# the medians are reported.
B_NONE=() B_BRIDGE=() C_BRIDGE=() B_UNBRIDGED=() C_UNBRIDGED=()
for ((round = 1; round <= ROUNDS; round++)); do
  fp_start_agent
  read -r b _ < <(births_run none)
  B_NONE+=("$b")
  read -r b c < <(births_run bridge)
  B_BRIDGE+=("$b") C_BRIDGE+=("$c")
  fp_stop_agent
  fp_start_agent --no-bridge
  read -r b c < <(births_run unbridged)
  B_UNBRIDGED+=("$b") C_UNBRIDGED+=("$c")
  fp_stop_agent
done
median() { printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; }
births_none=$(median "${B_NONE[@]}")
births_bridge=$(median "${B_BRIDGE[@]}") cpu_bridge=$(median "${C_BRIDGE[@]}")
births_unbridged=$(median "${B_UNBRIDGED[@]}") cpu_unbridged=$(median "${C_UNBRIDGED[@]}")

for freq in $FREQS; do
  for ms in 1 5 30; do
    ROW[$freq-$ms]+=" $(perf_run threads "$ms" "$freq")"
  done
done

echo
echo "== short-lived threads: profiled CPU / CPU burned ($N threads each, $(nproc) cores, $(uname -r)) =="
printf '%-22s %6s %10s %10s %12s %10s %12s\n' "cell" "exp" "fleetprof" "no bridge" "perf's way" "perf -p" \
  "kernel/burn"
for freq in $FREQS; do
  for ms in 1 5 30; do
    read -r want rnd kern unbridged full perf <<<"${ROW[$freq-$ms]}"
    python3 -c '
import sys
want, rnd, kern, unbridged, full, perf, freq = map(float, sys.argv[1:8])
cell = "%2d ms threads, %4d Hz" % (int(sys.argv[8]), freq)
print("%-22s %6d %10.3f %10.3f %12.3f %10.3f %12.3f" % (cell, want * freq / 1e9, rnd / want,
      unbridged / want, full / want, perf / want, kern / want))' \
      "$want" "$rnd" "$kern" "$unbridged" "$full" "$perf" "$freq" "$ms"
  done
done
echo
echo "== short-lived processes: profiled CPU / CPU burned ($NP processes each) =="
printf '%-22s %6s %10s %12s %12s\n' "cell" "exp" "fleetprof" "perf -a" "kernel/burn"
for freq in $FREQS; do
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
echo
echo "== a thread's birth: $NB threads that do nothing, one after another, 1 kHz (median of $ROUNDS) =="
printf '%-34s %12s %16s\n' "" "births/s" "agent µs/birth"
printf '%-34s %12s %16s\n' "unprofiled" "$births_none" "-"
printf '%-34s %12s %16s\n' "fleetprof (bridge)" "$births_bridge" "$cpu_bridge"
printf '%-34s %12s %16s\n' "fleetprof --no-bridge" "$births_unbridged" "$cpu_unbridged"
fp_log "PASS"
