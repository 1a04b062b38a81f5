#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What does the host tier (agentctl start --host) cost, and what does it
# catch?  Its peers run in the same invocation, on the same workload:
#
#   1. cost on a busy host: every CPU spins (spin, one thread per CPU) for
#      BENCH_SECONDS while the agent's host tier samples at 19 and at 99 Hz
#      per CPU; the agent's CPU time (schedstat, every thread) per sample
#      and as a share of the host's CPU, and its RSS; beside it
#      `perf record -a -F HZ -g`, `perf record -a -F HZ --call-graph dwarf`
#      (each: the recording's CPU, and with `perf script` after it, what it
#      takes to get named stacks, which the agent has already), and
#      `profile-bpfcc -F HZ -f` (Debian's bpfcc-tools) when it runs here;
#   2. memory with many binaries: BENCH_BINARIES (200) executables with
#      build IDs of their own, each running as a process at once, at 19 Hz:
#      the agent's RSS and how many of them its profile names;
#   3. short lives: BENCH_PROCS (200) processes of 20 ms CPU each, one after
#      another, at 99 Hz: the share of their CPU time the profile gives to
#      their executable and service with the function named (spin_inner on
#      the stack), against `perf record -a -F 99 -g` in the same run (its
#      samples of the processes' threads whose stack names spin_inner).
#
# Figures and ratios only; it never fails on a time. Environment:
# BENCH_SECONDS (default 10), BENCH_PROCS (200), BENCH_BINARIES (200),
# BENCH_QUICK=1 (3 s, 40 processes, 30 binaries).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=host-cost
QUICK=${BENCH_QUICK:-0}
SECS=${BENCH_SECONDS:-10}
PROCS=${BENCH_PROCS:-200}
BINS=${BENCH_BINARIES:-200}
if ((QUICK)); then
  SECS=3 PROCS=40 BINS=30
fi
fp_init 1200
[[ -x $FP_SPIN ]] || fp_fail "missing $FP_SPIN"
command -v perf >/dev/null || fp_fail "perf (linux-perf) is needed as the peer"
NCPU=$(nproc)
cg=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)
plain=
if [[ -n $cg ]]; then
  plain=$cg/fleetprof-bench-$$
  mkdir -p "$plain"
  fp_on_exit "fp_wait_for 5 rmdir '$plain' || true"
fi
run_plain() { # CMD...: in a cgroup of no unit or container, so its service is its executable
  if [[ -n $plain ]]; then
    sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$plain" "$@"
  else
    "$@"
  fi
}
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
rss_kb() { awk '/^VmRSS:/ {print $2}' /proc/"$1"/status; }
host_json() { fp_status_json | python3 -c "import json,sys; h=json.load(sys.stdin)['host_tier']; print($1)"; }
# time_cpu CMD...: runs CMD, prints its CPU seconds (user + system, children included)
time_cpu() {
  local t=$FP_TMP/time.$$
  /usr/bin/env time -f '%U %S' -o "$t" "$@" >/dev/null 2>&1 || true
  awk '{printf "%.3f", $1 + $2}' "$t"
}
busy() { "$FP_SPIN" --threads "$NCPU" --seconds "$1" >/dev/null; }
command -v time >/dev/null || [[ -x /usr/bin/time ]] || fp_fail "GNU time is needed (package time)"

echo "host tier cost and reach, $NCPU CPUs, $SECS s per run ($(uname -r))"
echo
echo "1. cost on a busy host (every CPU spinning)"
printf '  %-44s %12s %14s %12s\n' "profiler" "CPU (s)" "share of host" "per sample"
for hz in 19 99; do
  fp_start_agent --store none
  fp_ctl start --host --freq "$hz" >/dev/null
  # The workload's files are read (symbols, CFI) once, before the window.
  busy "$((SECS + 3))" &
  bp=$!
  sleep 2
  c0=$(cpu_ns "$FP_AGENT_PID")
  s0=$(host_json 'h["samples"] + h["idle"] + h["covered_by_target"]')
  sleep "$SECS"
  c1=$(cpu_ns "$FP_AGENT_PID")
  s1=$(host_json 'h["samples"] + h["idle"] + h["covered_by_target"]')
  rss=$(rss_kb "$FP_AGENT_PID")
  wait "$bp" || true
  fp_stop_agent
  python3 - "$hz" "$c0" "$c1" "$s0" "$s1" "$SECS" "$NCPU" "$rss" <<'EOF'
import sys
hz, c0, c1, s0, s1, secs, ncpu, rss = sys.argv[1:]
cpu = (int(c1) - int(c0)) / 1e9
n = max(1, int(s1) - int(s0))
print("  %-44s %12.3f %13.3f%% %9.1f us   (%d samples, RSS %.1f MB)" % (
    "fleetprof host tier, %s Hz (named, unwound)" % hz, cpu,
    100 * cpu / (float(secs) * int(ncpu)), cpu * 1e6 / n, n, int(rss) / 1024))
EOF
  for mode in "-g" "--call-graph dwarf"; do
    data=$FP_TMP/perf.data
    busy "$((SECS + 1))" &
    bp=$!
    # shellcheck disable=SC2086
    rec=$(time_cpu perf record -a -F "$hz" $mode -o "$data" -- sleep "$SECS")
    wait "$bp" || true
    scr=$(time_cpu perf script -i "$data")
    n=$(perf script -i "$data" -F period 2>/dev/null | wc -l || echo 0)
    python3 - "$hz" "$mode" "$rec" "$scr" "$SECS" "$NCPU" "$n" <<'EOF'
import sys
hz, mode, rec, scr, secs, ncpu, n = sys.argv[1:]
n = max(1, int(n))
for what, cpu in (("record", float(rec)), ("record + script", float(rec) + float(scr))):
    print("  %-44s %12.3f %13.3f%% %9.1f us" % ("perf %s %s, %s Hz" % (mode, what, hz), cpu,
          100 * cpu / (float(secs) * int(ncpu)), cpu * 1e6 / n))
EOF
  done
  bcc_err=
  if command -v profile-bpfcc >/dev/null &&
    ! bcc_err=$(timeout 60 profile-bpfcc -F "$hz" -f 1 2>&1 >/dev/null); then
    echo "  profile-bpfcc: cannot run here: $(tail -n 1 <<<"$bcc_err") (bcc compiles its program against the running kernel's headers)"
  elif command -v profile-bpfcc >/dev/null; then
    busy "$((SECS + 2))" &
    bp=$!
    cpu=$(time_cpu timeout "$((SECS + 1))" profile-bpfcc -F "$hz" -f "$SECS")
    wait "$bp" || true
    printf '  %-44s %12s %13.3f%%\n' "profile-bpfcc -F $hz -f" "$cpu" \
      "$(python3 -c "print(100 * $cpu / ($SECS * $NCPU))")"
  else
    echo "  profile-bpfcc: not installed (bpfcc-tools), not measured"
  fi
done

echo
echo "2. memory with $BINS binaries of their own, each running, at 19 Hz"
mkdir -p "$FP_TMP/bins"
python3 - "$FP_SPIN" "$FP_TMP/bins" "$BINS" <<'EOF'
import os, struct, sys, subprocess
src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    path = os.path.join(out, "fpbin%03d" % i)
    note = os.path.join(out, "note")
    desc = (b"fleetprof-bench%05d" % i)[:20].ljust(20, b"\0")
    open(note, "wb").write(struct.pack("<III", 4, len(desc), 3) + b"GNU\0" + desc)
    subprocess.run(["objcopy", "--update-section", ".note.gnu.build-id=" + note, src, path], check=True)
    os.chmod(path, 0o755)
EOF
fp_start_agent --store none
fp_ctl start --host --freq 19 >/dev/null
rss0=$(rss_kb "$FP_AGENT_PID")
pids=()
for f in "$FP_TMP"/bins/fpbin*; do
  run_plain "$f" --seconds 8 --duty 0.05 >/dev/null &
  pids+=($!)
done
sleep 9
wait "${pids[@]}" 2>/dev/null || true
fp_ctl dump --host -o "$FP_TMP/bins.pb.gz" >/dev/null
rss1=$(rss_kb "$FP_AGENT_PID")
procs=$(host_json 'h["processes"]')
fp_stop_agent
PYTHONPATH=$FP_SRC/tests/integration fp_timeout 300 python3 - "$FP_TMP/bins.pb.gz" "$BINS" "$rss0" "$rss1" "$procs" <<'EOF'
import sys, pprofraw
path, n, rss0, rss1, procs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
p = pprofraw.load(path)
named, sampled = set(), set()
for s in p.samples:
    proc = (s.labels.get("process") or [""])[0]
    if not proc.startswith("fpbin"):
        continue
    sampled.add(proc)
    if "spin_inner" in s.stack or "spin_outer" in s.stack:
        named.add(proc)
# At 19 Hz on 2 CPUs shared by 200 processes, each gets about 1.5 samples in
# the window: some get none (Poisson), so "named" counts the sampled ones.
print("  agent RSS %.1f MB before, %.1f MB with %d binaries running (%s processes kept); "
      "%d of the %d binaries sampled, %d of those named (spin_outer/spin_inner) in the profile" % (
          rss0 / 1024, rss1 / 1024, n, procs, len(sampled), n, len(named)))
EOF

echo
echo "3. $PROCS processes of 20 ms CPU each, one after another, at 99 Hz"
install -m 0755 "$FP_SPIN" "$FP_TMP/fpshort"
short_run() { # prints the processes' CPU in ns
  local sum=0 line i
  for ((i = 0; i < PROCS; i++)); do
    line=$(run_plain "$FP_TMP/fpshort" --seconds 0.02 | grep -o 'cpu_ns=[0-9]*')
    sum=$((sum + ${line#cpu_ns=}))
  done
  echo "$sum"
}
fp_start_agent --store none
fp_ctl start --host --freq 99 >/dev/null
sleep 1
cpu=$(short_run)
sleep 1
fp_ctl dump --host --service fpshort -o "$FP_TMP/short.pb.gz" >/dev/null || true
fp_stop_agent
perf record -a -F 99 -g -o "$FP_TMP/short.data" -- bash -c "$(declare -f run_plain short_run); PROCS=$PROCS FP_TMP=$FP_TMP plain=$plain short_run >$FP_TMP/perf-cpu" >/dev/null 2>&1
pcpu=$(cat "$FP_TMP/perf-cpu")
perf script -i "$FP_TMP/short.data" -F comm,ip,sym 2>/dev/null >"$FP_TMP/short.txt" || true
PYTHONPATH=$FP_SRC/tests/integration fp_timeout 300 python3 - "$FP_TMP/short.pb.gz" "$cpu" "$FP_TMP/short.txt" "$pcpu" <<'EOF'
import sys, os, pprofraw
path, cpu, txt, pcpu = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
period = 1e9 / 99
n = named = 0
if os.path.exists(path) and os.path.getsize(path):
    p = pprofraw.load(path)
    vi = p.value_index("samples")
    for s in p.samples:
        n += s.values[vi]
        if "spin_inner" in s.stack:
            named += s.values[vi]
exp = cpu / period
print("  fleetprof host tier: %d samples under service fpshort, %d naming spin_inner; "
      "expected %.0f from their CPU: %.1f%% caught and named" % (n, named, exp, 100 * named / exp if exp else 0))
# perf script: a sample's header line (comm ...) then its stack lines. The
# processes' threads name themselves spin-N (pthread_setname_np).
def ours(comm):
    return comm == "fpshort" or comm.startswith("spin-")
pn = pnamed = 0
cur = None
seen = False
for line in open(txt, errors="replace"):
    if line and not line[0].isspace() and line.strip():
        cur = line.split()[0]
        if ours(cur):
            pn += 1
            seen = False
    elif cur and ours(cur) and "spin_inner" in line and not seen:
        pnamed += 1
        seen = True
pexp = pcpu / period
print("  perf record -a -F 99 -g: %d samples of its threads, %d naming spin_inner; expected %.0f: "
      "%.1f%% caught and named" % (pn, pnamed, pexp, 100 * pnamed / pexp if pexp else 0))
EOF
