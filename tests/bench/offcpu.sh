#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Off-CPU profiling: how right and how cheap, beside perf in the same run.
#
# Accuracy: the `waits` workload (tests/workloads/waits.c: threads that
# sleep, read a pipe, wait for a mutex, fdatasync, and three spinners
# fighting for CPU 0, each measuring its own blocked time) for
# BENCH_SECONDS, profiled by fleetprof (--off-cpu at T = 10 ms, the
# default, and at T = 1 ms) while `perf record -e sched:sched_switch -e
# sched:sched_wakeup -a -g` records every switch with its frame-pointer
# stack. For each measured thread: its function's off-CPU time as the
# workload measured it, as fleetprof has it and as perf's switches give it
# (switch-out to switch-in, split at the wake-up); the function's share of
# all measured off-CPU time (points); each reason's total. The spinners'
# truth is the kernel's run-queue wait (schedstat).
#
# Peers: offcputime-bpfcc cannot run on this machine (bcc compiles its
# programs at run time and needs kernel headers, which a kernel without a
# package has not: the script says so when it fails); perf's own
# --off-cpu needs a perf built with BPF skeletons, which Debian's is not.
# perf's switch tracing is the peer both would be measured against.
#
# Cost: `pingpong` (two threads pinned to one CPU passing a byte through
# pipes: two switches, two wake-ups and four system calls per round trip,
# 200,000+ switches a second) in alternating windows: nothing, fleetprof
# CPU profile only, fleetprof CPU + off-CPU, the host tier with --off-cpu
# (every process, T = 1 s, the default; no target), perf's switch tracing
# (-a -g), perf's CPU profile (-F 99 -g -p). Median round trips per second
# of each, the slowdowns, and the agent's CPU per kept block.
#
# Figures only: it never fails on a time. Environment: BENCH_SECONDS
# (default 10), BENCH_REPEAT (default 3).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=offcpu-bench
SECONDS_RUN=${BENCH_SECONDS:-10}
REPEAT=${BENCH_REPEAT:-3}
fp_init 1200
WAITS=$FP_BUILD/tests/waits
PINGPONG=$FP_BUILD/tests/pingpong
[[ -x $WAITS && -x $PINGPONG ]] || fp_fail "missing $WAITS or $PINGPONG"
command -v perf >/dev/null || fp_fail "perf is not installed (linux-perf)"
CHECK=$FP_SRC/tests/integration/offcpu_check.py

if command -v offcputime-bpfcc >/dev/null; then
  if ! timeout 20 offcputime-bpfcc -p $$ 1 >"$FP_TMP/bcc.out" 2>&1; then
    fp_log "offcputime-bpfcc cannot run here: $(grep -m1 -i 'header\|error\|exception' "$FP_TMP/bcc.out" || tail -n1 "$FP_TMP/bcc.out")"
  fi
fi

fp_start_agent --bucket 5

# ---- accuracy ----
# perf_offcpu DATA PID: off-CPU ns per (thread name, function of the truth, reason) from perf's switches.
perf_offcpu() {
  perf script -i "$1" -F comm,tid,time,event,trace,ip,sym 2>/dev/null | python3 -c '
import collections, json, re, sys
truth = json.load(open(sys.argv[1]))["threads"]
out = {}       # tid -> (t_out, state, stack)
wake = {}      # tid -> wake time
names = {}
total = collections.Counter()
ev = None
def flush(e):
    if not e:
        return
    t, kind, fields, stack = e
    if kind == "sched:sched_wakeup":
        m = re.search(r"pid=(\d+)", fields)
        if m and int(m.group(1)) in out and int(m.group(1)) not in wake:
            wake[int(m.group(1))] = t
    elif kind == "sched:sched_switch":
        m = re.search(r"prev_comm=(.*?) prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)", fields)
        if not m:
            return
        prev, nxt = int(m.group(2)), int(m.group(5))
        names[prev] = m.group(1)
        if m.group(1) in truth:
            out[prev] = (t, m.group(3), stack)
            wake.pop(prev, None)
        if nxt in out:
            t0, state, st = out.pop(nxt)
            w = wake.pop(nxt, t) if not state.startswith("R") else t0
            th = names.get(nxt, "")
            fn = truth[th]["function"] if th in truth else None
            if fn and fn in st:
                r0 = "uninterruptible" if state.startswith("D") else "sleep"
                if w > t0:
                    total[(th, r0)] += (w - t0) * 1e9
                if t > w:
                    total[(th, "runqueue")] += (t - w) * 1e9
for line in sys.stdin:
    m = re.match(r"\s*(\S.*?)\s+(\d+)\s+([\d.]+):\s+(sched:\S+):\s+(.*)$", line)
    if m:
        flush(ev)
        ev = (float(m.group(3)), m.group(4), m.group(5), [])
    elif ev and line.strip():
        parts = line.split()
        if len(parts) >= 2:
            ev[3].append(parts[1].split("+")[0])
flush(ev)
print(json.dumps({"%s|%s" % k: v for k, v in total.items()}))
' "$2"
}

accuracy_run() { # accuracy_run T_NS: prints one JSON line of figures
  local T=$1 tag=acc-$1 P PERF
  fp_start_workload waits "$FP_TMP/$tag.out" "$FP_TMP/$tag.ready" --seconds "$SECONDS_RUN" \
    --truth "$FP_TMP/$tag.truth" --wait-for-start "$FP_TMP/$tag.go" --dir "$FP_TMP"
  P=$FP_WL_PID
  fp_ctl start "$P" --off-cpu --off-cpu-period "$T" >/dev/null || fp_fail "start failed"
  perf record -e sched:sched_switch -e sched:sched_wakeup -a -g -o "$FP_TMP/$tag.perf" \
    -- sleep $((SECONDS_RUN + 3)) >"$FP_TMP/$tag.perf.log" 2>&1 &
  PERF=$!
  sleep 1
  touch "$FP_TMP/$tag.go"
  fp_wait_for $((SECONDS_RUN + 30)) test -e "$FP_TMP/$tag.truth" || fp_fail "waits wrote no truth"
  sleep 0.5
  fp_ctl dump "$P" --event off-cpu -o "$FP_TMP/$tag.pb.gz" >/dev/null || fp_fail "dump failed"
  fp_ctl status --json >"$FP_TMP/$tag.status"
  fp_ctl stop "$P" >/dev/null 2>&1 || true
  wait "$PERF" || true
  perf_offcpu "$FP_TMP/$tag.perf" "$FP_TMP/$tag.truth" >"$FP_TMP/$tag.perfjson"
  python3 "$CHECK" "$FP_TMP/$tag.pb.gz" "$FP_TMP/$tag.truth" --json --tolerance 1 --runq-tolerance 1 |
    tail -n1 >"$FP_TMP/$tag.fpjson"
  python3 - "$FP_TMP/$tag.truth" "$FP_TMP/$tag.fpjson" "$FP_TMP/$tag.perfjson" "$FP_TMP/$tag.status" "$P" "$T" <<'EOF'
import json, sys
truth = json.load(open(sys.argv[1]))["threads"]
fp = json.load(open(sys.argv[2]))
pf = {tuple(k.split("|")): v for k, v in json.load(open(sys.argv[3])).items()}
st = [t for t in json.load(open(sys.argv[4]))["targets"] if t["pid"] == int(sys.argv[5])][0]["off_cpu"]
rows = {}
for th, t in truth.items():
    want = t["runq_ns"] if t["function"] == "spin_contend" else t["off_ns"]
    rows[th] = {"function": t["function"], "truth": want,
                "fleetprof": fp[th]["profile_ns"], "fleetprof_by_wait": fp[th]["by_wait"],
                "perf": sum(v for (a, _), v in pf.items() if a == th),
                "perf_by_wait": {r: v for (a, r), v in pf.items() if a == th}}
print(json.dumps({"T": int(sys.argv[6]), "rows": rows, "status": st}))
EOF
  fp_kill "$P"
}

ACC=()
for T in 10000000 1000000; do
  ACC+=("$(accuracy_run "$T")")
done

# ---- cost ----
agent_ticks() { awk '{print $14 + $15}' "/proc/$FP_AGENT_PID/stat"; }
kept_of() { # kept_of PID: "kept_blocks records" of its off-CPU profile
  fp_status_json | python3 -c 'import json,sys; t=[x for x in json.load(sys.stdin)["targets"] if x["pid"]==int(sys.argv[1])]; o=t[0]["off_cpu"] if t else None; print("%d %d" % ((o["kept"], o["records"]) if o else (0, 0)))' "$1"
}
cost_window() { # cost_window MODE: prints "MODE round_trips_per_s agent_ticks kept records"
  local mode=$1 tag=pp-$1-$RANDOM P PERF= a0 a1 k="0 0"
  fp_start_workload pingpong "$FP_TMP/$tag.out" "$FP_TMP/$tag.ready" --seconds "$SECONDS_RUN" \
    --cpu 0 --wait-for-start "$FP_TMP/$tag.go"
  P=$FP_WL_PID
  case $mode in
  cpu) fp_ctl start "$P" >/dev/null ;;
  offcpu) fp_ctl start "$P" --off-cpu >/dev/null ;;
  host-off) fp_ctl start --host --off-cpu >/dev/null ;;
  perf-switch)
    perf record -e sched:sched_switch -a -g -o "$FP_TMP/$tag.perf" -- sleep $((SECONDS_RUN + 5)) >/dev/null 2>&1 &
    PERF=$!
    ;;
  perf-cpu)
    perf record -F 99 -g -p "$P" -o "$FP_TMP/$tag.perf" -- sleep $((SECONDS_RUN + 5)) >/dev/null 2>&1 &
    PERF=$!
    ;;
  esac
  sleep 0.5
  a0=$(agent_ticks)
  touch "$FP_TMP/$tag.go"
  fp_wait_for $((SECONDS_RUN + 30)) grep -q round_trips "$FP_TMP/$tag.out" || fp_fail "pingpong did not finish"
  a1=$(agent_ticks)
  [[ $mode == offcpu ]] && k=$(kept_of "$P")
  if [[ $mode == host-off ]]; then
    k=$(fp_status_json | fp_json_get '"%d %d" % (d["host_tier"]["off_cpu"]["kept"], d["host_tier"]["off_cpu"]["records"])')
    fp_ctl stop --host >/dev/null
  fi
  [[ -n $PERF ]] && { kill -INT "$PERF" 2>/dev/null || true; wait "$PERF" 2>/dev/null || true; }
  [[ $mode == cpu || $mode == offcpu ]] && { fp_ctl stop "$P" >/dev/null 2>&1 || true; }
  fp_kill "$P"
  rm -f "$FP_TMP/$tag.perf"
  echo "$mode $(awk '/round_trips/{print $6}' "$FP_TMP/$tag.out") $((a1 - a0)) $k"
}
COST=()
for ((r = 0; r < REPEAT; r++)); do
  for mode in none cpu offcpu host-off perf-switch perf-cpu; do
    COST+=("$(cost_window "$mode")")
  done
done
fp_stop_agent

python3 - "$(getconf CLK_TCK)" "$SECONDS_RUN" "${ACC[@]}" -- "${COST[@]}" <<'EOF'
import json, statistics, sys
tck = int(sys.argv[1]); secs = float(sys.argv[2])
args = sys.argv[3:]
sep = args.index("--")
acc = [json.loads(a) for a in args[:sep]]
cost = [c.split() for c in args[sep + 1:]]
print("== off-CPU accuracy: the waits workload, %g s; fleetprof --off-cpu beside perf sched_switch -a -g ==" % secs)
for a in acc:
    rows, st = a["rows"], a["status"]
    tot = {k: sum(r[k] for r in rows.values()) for k in ("truth", "fleetprof", "perf")}
    print("T = %g ms: %d of %d block parts kept, %d of %d stacks to the root, lost %d ns" % (
        a["T"] / 1e6, st["kept"], st["parts"], st["stacks_to_root"], st["stacks"], st["lost_ns"]))
    print("  %-9s %-13s %9s %9s %7s %9s %7s %7s %7s %7s" % ("thread", "function", "truth s",
          "fp s", "fp/tr", "perf s", "pf/tr", "tr %", "fp pts", "pf pts"))
    for th, r in sorted(rows.items()):
        share = lambda k: 100.0 * r[k] / tot[k] if tot[k] else 0.0
        print("  %-9s %-13s %9.3f %9.3f %7.3f %9.3f %7.3f %7.2f %+7.2f %+7.2f" % (
            th, r["function"], r["truth"] / 1e9, r["fleetprof"] / 1e9,
            r["fleetprof"] / r["truth"] if r["truth"] else 0, r["perf"] / 1e9,
            r["perf"] / r["truth"] if r["truth"] else 0, share("truth"),
            share("fleetprof") - share("truth"), share("perf") - share("truth")))
    for reason in ("sleep", "uninterruptible", "runqueue"):
        f = sum(r["fleetprof_by_wait"].get(reason, 0) for r in rows.values())
        p = sum(r["perf_by_wait"].get(reason, 0) for r in rows.values())
        print("  reason %-15s fleetprof %8.3f s  perf switches %8.3f s  ratio %.3f" % (
            reason, f / 1e9, p / 1e9, f / p if p else 0))
    spin_t = sum(r["truth"] for r in rows.values() if r["function"] == "spin_contend")
    spin_f = sum(r["fleetprof"] for r in rows.values() if r["function"] == "spin_contend")
    print("  run queue of the spinners: schedstat %.3f s, fleetprof %.3f s (%.3f)" % (
        spin_t / 1e9, spin_f / 1e9, spin_f / spin_t if spin_t else 0))
print()
print("== off-CPU cost: pingpong on one CPU (round trips/s, median of %d windows each) ==" % (
    len(cost) // 6))
by = {}
for mode, rt, ticks, kept, records in cost:
    by.setdefault(mode, []).append((float(rt), int(ticks), int(kept), int(records)))
base = statistics.median(x[0] for x in by["none"])
for mode in ("none", "cpu", "offcpu", "host-off", "perf-switch", "perf-cpu"):
    v = by.get(mode, [])
    if not v:
        continue
    med = statistics.median(x[0] for x in v)
    ticks = statistics.median(x[1] for x in v)
    line = "  %-12s %9.0f round trips/s  slowdown %5.1f%%  agent CPU %5.1f%%" % (
        mode, med, 100 * (1 - med / base), 100.0 * ticks / tck / secs)
    if mode == "offcpu":
        kept = statistics.median(x[2] for x in v)
        records = statistics.median(x[3] for x in v)
        cpu_ticks = statistics.median(x[1] for x in by.get("cpu", [(0, 0, 0, 0)]))
        extra = max(0, ticks - cpu_ticks) / tck
        line += ("\n%16s%d blocks kept in %d records; agent CPU beyond the CPU profile's: %.1f us"
                 " per kept block, %.1f us per record" % (
                     "", kept, records, 1e6 * extra / kept if kept else 0,
                     1e6 * extra / records if records else 0))
    if mode == "host-off":
        kept = statistics.median(x[2] for x in v)
        records = statistics.median(x[3] for x in v)
        line += ("\n%16severy process at T = 1 s: %d blocks kept in %d records in %g s" % (
            "", kept, records, secs))
    print(line)
cpu = statistics.median(x[0] for x in by["cpu"])
off = statistics.median(x[0] for x in by["offcpu"])
sw = statistics.median(x[0] for x in by["perf-switch"])
print("  off-CPU's own slowdown (CPU profile -> CPU + off-CPU): %.1f%%; perf's switch tracing: %.1f%%; ratio %.2f" % (
    100 * (1 - off / cpu), 100 * (1 - sw / base), (1 - off / cpu) / (1 - sw / base) if sw < base else 0))
EOF
