#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What does the agent cost?  Profiles tests/workloads/spin (BENCH_THREADS,
# default 2, CPU-bound threads, each busy BENCH_DUTY of the time, default 1:
# 100 threads at 0.012 use 1.2 cores and leave the profilers some CPU on a
# two-core machine) for BENCH_SECONDS (default 10) at each rate
# in BENCH_RATES (default "1000 10000" Hz per thread, cpu-clock, user
# stacks) and reports for the agent:
#   - samples taken (status --json) and lost / throttled counts,
#   - the agent's own CPU time (sum over its threads of
#     /proc/AGENT/task/*/schedstat, falling back to utime+stime ticks) and
#     that per sample, in microseconds, over the whole run (attaching and
#     reading symbols included) and in the steady state after its first
#     second,
#   - its resident memory at the end (VmRSS) and peak (VmHWM), and the
#     size of its perf ring buffers (kernel memory, locked, that RSS does
#     not show: the perf_event mappings in /proc/AGENT/maps),
#   - the CPU one pprof dump of everything costs it afterwards,
#   - the workload's throughput while profiled, relative to an unprofiled
#     run, per wall second and per CPU second of the workload (the kernel's
#     sampling and unwinding cost is charged to the workload);
# and, beside it, the same for `perf record -e cpu-clock -g -F HZ -p PID`
# (perf's CPU and peak RSS from getrusage of its process, samples and lost
# records from `perf report --stats`).  If perf is not installed that peer
# is skipped.  Two unprofiled runs, first and last, show how noisy the
# machine is.
#
# With BENCH_JSON=FILE it also writes the rows as a JSON list to FILE (for
# tests/bench/run).  It prints figures and ratios and never fails on a time;
# it exits non-zero only if something could not be run at all.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=agent-cost
SECS=${BENCH_SECONDS:-10}
RATES=${BENCH_RATES:-1000 10000}
THREADS=${BENCH_THREADS:-2}
DUTY=${BENCH_DUTY:-1}
fp_init $((150 + SECS * 14))
[[ -x $FP_SPIN ]] || fp_fail "missing $FP_SPIN"
TCK=$(getconf CLK_TCK)

# cpu_ns PID: CPU time of all threads of PID so far, in nanoseconds.
cpu_ns() {
  local pid=$1 t sum=0 f
  if [[ -r /proc/$pid/schedstat ]]; then
    for f in /proc/"$pid"/task/*/schedstat; do
      read -r t _ <"$f" 2>/dev/null || continue
      sum=$((sum + t))
    done
    echo "$sum"
  else
    awk -v tck="$TCK" '{printf "%d\n", ($14 + $15) * 1e9 / tck}' "/proc/$pid/stat"
  fi
}

# vm_kb PID FIELD: VmRSS / VmHWM of PID in kB.
vm_kb() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }

# ring_kb PID: the size of PID's perf ring mappings, in kB.
ring_kb() {
  local range _ kb=0
  while read -r range _; do
    kb=$((kb + (0x${range#*-} - 0x${range%-*}) / 1024))
  done < <(grep -F 'anon_inode:[perf_event]' "/proc/$1/maps" 2>/dev/null)
  echo "$kb"
}

# mb KB: kilobytes as megabytes.
mb() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

# pct A B: A as a percentage of B.
pct() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.1f", 100 * a / b; else print "n/a"}'; }

# per_sample CPU_US SAMPLES: microseconds per sample.
per_sample() { awk -v c="$1" -v s="$2" 'BEGIN {if (s > 0) printf "%.2f", c / s; else print "n/a"}'; }

# last_iters TAG: the iteration count in spin's latest report line.
last_iters() { awk -F'[ =]' '$1 == "t_ms" {n = $4} END {print n + 0}' "$FP_TMP/$1.out"; }

# mark TAG: spin's iterations, its CPU time (ns) and the wall clock (ns) now.
mark() { echo "$(last_iters "$1") $(cpu_ns "$FP_WL_PID") $(date +%s%N)"; }

# speeds MARK0 MARK1: iterations per wall second and per CPU second of spin.
speeds() {
  local i0 c0 w0 i1 c1 w1
  read -r i0 c0 w0 <<<"$1"
  read -r i1 c1 w1 <<<"$2"
  awk -v di=$((i1 - i0)) -v dc=$((c1 - c0)) -v dw=$((w1 - w0)) \
    'BEGIN {printf "%.0f %.0f\n", (dw > 0 ? di * 1e9 / dw : 0), (dc > 0 ? di * 1e9 / dc : 0)}'
}

# run_spin TAG: start spin for the whole measurement, wait until it runs.
run_spin() {
  fp_start_workload spin "$FP_TMP/$1.out" "$FP_TMP/$1.ready" \
    --threads "$THREADS" --duty "$DUTY" --seconds $((SECS + 60)) --report-ms 100
}

# baseline TAG: spin unprofiled; sets BASE_WALL and BASE_CPU (iterations/s).
baseline() {
  local m0 m1
  run_spin "$1"
  sleep 1
  m0=$(mark "$1")
  sleep "$SECS"
  m1=$(mark "$1")
  fp_kill "$FP_WL_PID"
  read -r BASE_WALL BASE_CPU < <(speeds "$m0" "$m1")
  fp_log "unprofiled spin: $BASE_WALL iterations/s, $BASE_CPU per CPU second"
}

FMT='%7s  %-6s %9s %8s %9s %7s %7s %7s %6s %9s %7s %7s'
ROWS=()
JROWS=()
# row RATE TOOL SAMPLES CPU_MS US/SAMPLE RSS_MB PEAK_MB LOST THROTTLED WALL% CPU%
row() {
  ROWS+=("$(printf "$FMT" "$@")")
  JROWS+=("$*")
}
AGENT_DUMP=()
STEADY=()

# status_counts: samples, lost and throttled of the (only) target now.
status_counts() {
  fp_status_json | python3 -c '
import json, sys
t = json.load(sys.stdin)["targets"][0]
print(t.get("samples", 0), t.get("lost", 0), t.get("throttled", 0))'
}

baseline base1
B1_WALL=$BASE_WALL
B1_CPU=$BASE_CPU

for HZ in $RATES; do
  # ---- the agent --------------------------------------------------------------
  fp_log "agent at $HZ Hz for $SECS s"
  fp_start_agent
  run_spin "agent$HZ"
  sleep 1
  c0=$(cpu_ns "$FP_AGENT_PID")
  fp_ctl start "$FP_WL_PID" --freq "$HZ" >/dev/null || fp_fail "agentctl start --freq $HZ failed"
  m0=$(mark "agent$HZ")
  # After a second the agent has attached every thread and read the symbols
  # of the code the samples hit: the rest is the steady state.
  sleep 1
  read -r samples_w _ < <(status_counts)
  cw=$(cpu_ns "$FP_AGENT_PID")
  sleep "$((SECS - 1))"
  m1=$(mark "agent$HZ")
  read -r samples lost throttled < <(status_counts)
  c1=$(cpu_ns "$FP_AGENT_PID")
  STEADY+=("$HZ $(per_sample $(((c1 - cw) / 1000)) $((samples - samples_w)))")
  rss=$(vm_kb "$FP_AGENT_PID" VmRSS)
  hwm=$(vm_kb "$FP_AGENT_PID" VmHWM)
  pin=$(ring_kb "$FP_AGENT_PID")
  # What one pprof dump of all that costs the agent (symbols, encoding).
  fp_ctl dump "$FP_WL_PID" -o "$FP_TMP/agent$HZ.pb.gz" 2>/dev/null || true
  c2=$(cpu_ns "$FP_AGENT_PID")
  AGENT_DUMP+=("$HZ Hz: $(awk -v n=$((c2 - c1)) 'BEGIN {printf "%.1f", n / 1e6}') ms of agent CPU for one pprof dump of $samples samples ($(stat -c %s "$FP_TMP/agent$HZ.pb.gz" 2>/dev/null || echo ?) bytes)")
  fp_ctl stop "$FP_WL_PID" >/dev/null || true
  fp_kill "$FP_WL_PID"
  fp_stop_agent
  read -r wall cpu < <(speeds "$m0" "$m1")
  cpu_us=$(((c1 - c0) / 1000))
  row "$HZ" agent "$samples" "$((cpu_us / 1000))" "$(per_sample "$cpu_us" "$samples")" "$(mb "$rss")" "$(mb "$hwm")" "$(mb "${pin:-0}")" \
    "$lost" "$throttled" "$(pct "$wall" "$B1_WALL")" "$(pct "$cpu" "$B1_CPU")"

  # ---- perf record ----------------------------------------------------------
  if ! command -v perf >/dev/null; then
    fp_log "perf is not installed: peer skipped"
    row "$HZ" perf skipped - - - - - - - - -
    continue
  fi
  fp_log "perf record at $HZ Hz for $SECS s"
  run_spin "perf$HZ"
  sleep 1
  m0=$(mark "perf$HZ")
  prc=0
  python3 -c '
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    f.write("%d %d\n" % (int((r.ru_utime + r.ru_stime) * 1e6), r.ru_maxrss))
sys.exit(rc)' "$FP_TMP/perf$HZ.rusage" \
    perf record -e cpu-clock -g -F "$HZ" -p "$FP_WL_PID" -o "$FP_TMP/perf$HZ.data" -- sleep "$SECS" \
    >"$FP_TMP/perf$HZ.log" 2>&1 || prc=$?
  m1=$(mark "perf$HZ")
  fp_kill "$FP_WL_PID"
  if [[ $prc -ne 0 || ! -s $FP_TMP/perf$HZ.data ]]; then
    fp_log "perf record failed (exit $prc): $(tail -n 3 "$FP_TMP/perf$HZ.log")"
    row "$HZ" perf failed - - - - - - - - -
    continue
  fi
  read -r wall cpu < <(speeds "$m0" "$m1")
  read -r pcpu prss <"$FP_TMP/perf$HZ.rusage"
  fp_timeout 120 perf report -i "$FP_TMP/perf$HZ.data" --stats >"$FP_TMP/perf$HZ.stats" 2>/dev/null || true
  pstat() { awk -v k="$1" '$1 == k && $2 == "events:" {print $3; exit}' "$FP_TMP/perf$HZ.stats"; }
  psamples=$(pstat SAMPLE)
  plost=$(($(pstat LOST) + $(pstat LOST_SAMPLES) + 0))
  pthrot=$(($(pstat THROTTLE) + 0))
  row "$HZ" perf "${psamples:-?}" "$((pcpu / 1000))" "$(per_sample "$pcpu" "${psamples:-0}")" - "$(mb "$prss")" - \
    "$plost" "$pthrot" "$(pct "$wall" "$B1_WALL")" "$(pct "$cpu" "$B1_CPU")"
done

baseline base2

echo
echo "spin: $THREADS threads at duty $DUTY, $SECS s per run; unprofiled: $B1_WALL iterations/s ($B1_CPU per CPU s) first,"
echo "      $BASE_WALL iterations/s ($BASE_CPU per CPU s) last -- the difference is this machine's noise"
printf "$FMT\n" rate_hz tool samples cpu_ms us/sample rss_mb peak_mb ring_mb lost throttled wall% cpu%
for r in "${ROWS[@]}"; do echo "$r"; done
cat <<'EOF'
cpu_ms: the tool's own CPU time while profiling (for perf its whole run: start-up, recording and
  the build-id pass at the end); us/sample = cpu_ms / samples.  rss_mb: the agent's VmRSS at the
  end; peak_mb: VmHWM (perf: its peak RSS); ring_mb: the agent's perf ring buffers (locked kernel
  memory, which RSS does not show).  wall%: the workload's iterations per wall second
  while profiled, relative to the first unprofiled run; cpu%: iterations per CPU second of the
  workload, which is insensitive to CPU contention and shows the in-kernel sampling and stack
  walking cost the target pays.  perf's lost = LOST + LOST_SAMPLES records.
EOF
for d in "${AGENT_DUMP[@]}"; do echo "agent dump cost at $d"; done
for d in "${STEADY[@]}"; do
  read -r hz us <<<"$d"
  echo "agent steady state at $hz Hz (after its first second: attaching, symbols): $us us per sample"
done
if [[ -n ${BENCH_JSON:-} ]]; then
  printf '%s\n' "${JROWS[@]}" | python3 -c '
import json, sys
keys = ["rate_hz", "tool", "samples", "cpu_ms", "us_per_sample", "rss_mb", "peak_mb", "ring_mb", "lost", "throttled",
        "wall_pct", "cpu_pct"]
def val(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return None if v in ("-", "?", "n/a") else v
rows = [dict(zip(keys, map(val, line.split()))) for line in sys.stdin if line.strip()]
steady = dict(x.split() for x in sys.argv[7:])
for r in rows:
    if r["tool"] == "agent" and str(r["rate_hz"]) in steady:
        r["us_per_sample_steady"] = val(steady[str(r["rate_hz"])])
for r in rows:
    r["threads"] = int(sys.argv[1])
    r["duty"] = float(sys.argv[6])
    r["seconds"] = float(sys.argv[2])
json.dump({"rows": rows, "base_wall": [float(sys.argv[3]), float(sys.argv[4])]}, open(sys.argv[5], "w"), indent=1)
' "$THREADS" "$SECS" "$B1_WALL" "$BASE_WALL" "$BENCH_JSON" "$DUTY" "${STEADY[@]}"
fi
