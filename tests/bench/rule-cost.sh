#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What do rules cost and catch?  A rule by name (agentctl start --name)
# against processes that come and go, with the BPF tracker (exec events)
# and with the /proc-scan fallback (--no-bpf), in the same invocation:
#
#   - exec to first possible sample: the kernel's CLOCK_MONOTONIC time of
#     the exec (the BPF record) to every perf event of the process open, as
#     the agent measures it (status --json start_latency_us, p50/p99/max);
#   - a cross-check that does not trust the agent's clocks: N processes
#     each burn 50 ms of CPU at FREQ Hz and report their CPU time; the
#     samples each lacks against CPU x FREQ, divided by the rate, are the
#     CPU milliseconds the profiler missed at its start;
#   - the share of those 50 ms processes caught (in the service's profile);
#   - the agent's CPU per exec: N processes that no rule matches (every
#     exec still reaches the agent while rules exist), and N that a rule
#     matches at 1 Hz (so sampling costs nothing beside the start);
#   - the peer: the same N execs with no agent running, so the ratio is
#     what an agent with rules costs each process start.
#
# Figures only; it never fails on a time. Environment: BENCH_PROCS
# (default 200), BENCH_FREQ (default 1000).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=rule-cost
N=${BENCH_PROCS:-200}
FREQ=${BENCH_FREQ:-1000}
fp_init 900
[[ -x $FP_SPIN ]] || fp_fail "missing $FP_SPIN"
for n in fprulehit fprulemiss fprulecheap; do install -m 0755 "$FP_SPIN" "$FP_TMP/$n"; done

# The agent's CPU time in ns, all its threads (schedstat: time on CPU).
agent_cpu_ns() { cat /proc/"$FP_AGENT_PID"/task/*/schedstat | awk '{s += $1} END {print s}'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# run_procs NAME SECONDS: N processes one after another; prints the wall ms.
run_procs() {
  local t0 i
  t0=$(now_ms)
  for ((i = 0; i < N; i++)); do
    "$FP_TMP/$1" --threads 1 --seconds "$2" >>"$FP_TMP/$1.out"
  done
  echo $(($(now_ms) - t0))
}

# caught MODE: the hit processes' samples against their CPU; prints
# "caught missed_ms_p50 missed_ms_mean latency_json".
caught() {
  fp_ctl flush >/dev/null 2>&1 || true
  fp_ctl dump --service hit -o "$FP_TMP/$1.pb.gz" >/dev/null 2>&1 || true
  PYTHONPATH=$FP_SRC/tests/integration fp_timeout 150 python3 -c '
import json, os, sys, statistics, pprofraw
path, outs, freq, n, st = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
cpu = {}
pid = None
for line in open(outs):
    if line.strip().isdigit():
        pid = int(line)
    elif line.startswith("total") and pid:
        cpu[pid] = int(line.split("cpu_ns=")[1]) / 1e9
per = {}
if os.path.exists(path):
    p = pprofraw.load(path)
    for s in p.samples:
        q = (s.numlabels.get("pid") or [None])[0]
        per[q] = per.get(q, 0) + s.values[p.value_index("samples")]
missed = [max(0.0, (c * freq - per.get(q, 0)) * 1000 / freq) for q, c in cpu.items()]
r = [x for x in st["rules"] if x["service"] == "hit"]
lat = r[0]["start_latency_us"] if r else {}
print(sum(1 for q in cpu if per.get(q, 0) > 0), "%.2f" % statistics.median(missed),
      "%.2f" % statistics.mean(missed), json.dumps(lat, separators=(",", ":")))
' "$FP_TMP/$1.pb.gz" "$FP_TMP/fprulehit.out" "$FREQ" "$N" "$(fp_status_json)"
}

declare -A R
R[none,wall]=$(run_procs fprulemiss 0.05)
for mode in bpf fallback; do
  rm -f "$FP_TMP"/*.out "$FP_TMP/agent.db"*
  if [[ $mode == bpf ]]; then fp_start_agent --bucket 1; else fp_start_agent --bucket 1 --no-bpf; fi
  fp_ctl start --name '^fprulehit$' --service hit --freq "$FREQ" >/dev/null
  fp_ctl start --name '^fprulecheap$' --service cheap --freq 1 >/dev/null
  sleep 0.5
  c0=$(agent_cpu_ns)
  R[$mode,miss_wall]=$(run_procs fprulemiss 0.05)
  c1=$(agent_cpu_ns)
  R[$mode,cheap_wall]=$(run_procs fprulecheap 0.05)
  c2=$(agent_cpu_ns)
  R[$mode,hit_wall]=$(run_procs fprulehit 0.05)
  R[$mode,miss_cpu]=$(((c1 - c0) / 1000 / N)) # µs per process
  R[$mode,cheap_cpu]=$(((c2 - c1) / 1000 / N))
  R[$mode,caught]=$(caught "$mode")
  fp_stop_agent
done

echo
echo "== rules: processes coming and going ($(nproc) cores, $(uname -r), $N processes of 50 ms, $FREQ Hz cpu-clock) =="
printf '%-52s %18s %18s\n' "" "bpf (exec events)" "fallback (--no-bpf)"
row() { printf '%-52s %18s %18s\n' "$1" "$2" "$3"; }
f() { awk '{print $'"$2"'}' <<<"${R[$1]}"; }
lat() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("%d/%d/%d" % (d.get("p50", 0), d.get("p99", 0), d.get("max", 0)) if d.get("count") else "-")' "$(f "$1" 4)"; }
row "exec to sampling µs p50/p99/max (agent's clock)" "$(lat bpf,caught)" "$(lat fallback,caught)"
row "50 ms processes in the service's profile" "$(f bpf,caught 1)/$N" "$(f fallback,caught 1)/$N"
row "CPU ms missed at the start, p50 (vs their CPU)" "$(f bpf,caught 2)" "$(f fallback,caught 2)"
row "CPU ms missed at the start, mean" "$(f bpf,caught 3)" "$(f fallback,caught 3)"
row "agent CPU µs per exec no rule matches" "${R[bpf,miss_cpu]}" "${R[fallback,miss_cpu]}"
row "agent CPU µs per matched process (1 Hz)" "${R[bpf,cheap_cpu]}" "${R[fallback,cheap_cpu]}"
ratio() { awk -v a="$1" -v b="${R[none,wall]}" 'BEGIN {printf "%d ms (%.2fx)", a, a / b}'; }
row "wall time of $N execs no rule matches" "$(ratio "${R[bpf,miss_wall]}")" "$(ratio "${R[fallback,miss_wall]}")"
row "wall time of $N matched execs (1 Hz)" "$(ratio "${R[bpf,cheap_wall]}")" "$(ratio "${R[fallback,cheap_wall]}")"
row "  peer: the same execs, no agent" "${R[none,wall]} ms" ""
