#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What do Python stacks cost?  A CPU-bound Python program (a loop 40
# Python frames deep that counts its iterations for BENCH_SECONDS) run
# under each of, in the same invocation:
#
#   - nothing (its iterations: the baseline);
#   - fleetprof at BENCH_FREQ Hz, Python stacks read (the default);
#   - fleetprof at BENCH_FREQ Hz with --no-python (native frames only);
#   - perf record -g at the same rate, the program run with -X perf (perf's
#     own way to name Python functions: CPython 3.12+ writes a perf map of
#     trampolines), when a CPython 3.12+ is present (pyenv's).
#
# And off-CPU: tests/workloads/python/waits.py (three threads that wait
# 3-8 ms at a time) under --off-cpu, with its Python stacks and with
# --no-python: the off-CPU programs' time per off-CPU stack, and the agent's.
#
# Figures: the program's slowdown against the baseline; the BPF program's
# own time per run (the kernel's bpf_stats: run_time_ns / run_cnt of
# fp_pystack_sample, switched on for the run); the agent's CPU per sample
# with and without Python stacks (its rusage over the run / the target's
# samples); perf record's CPU per sample. Figures only; it never fails on
# a time. Environment: BENCH_SECONDS (default 10), BENCH_FREQ (default
# 1000), BENCH_PYTHON (default Debian's /usr/bin/python3.11; the -X perf
# peer uses pyenv's newest 3.12+).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/benchlib.bash"
FP_TEST_NAME=python-cost
SECS=${BENCH_SECONDS:-10}
FREQ=${BENCH_FREQ:-1000}
PY=${BENCH_PYTHON:-/usr/bin/python3.11}
fp_init 600
[[ -x $PY ]] || fp_fail "missing $PY"

cat >"$FP_TMP/loop.py" <<'EOF'
import os, sys, time
def deep(n):
    if n:
        return deep(n - 1)
    s = 0
    for i in range(200):
        s += i * i
    return s
go, secs = sys.argv[1], float(sys.argv[2])
print(os.getpid(), flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
end = time.monotonic() + secs
k = 0
while time.monotonic() < end:
    deep(40)
    k += 1
print("iterations", k, flush=True)
EOF

# fleetprof TAG [options]: "iterations agent_cpu_us samples bpf_ns bpf_runs" of a
# target's run, the agent's CPU and the program's figures from its start on.
fleetprof() {
  local tag=$1 it samples
  shift
  sysctl -qw kernel.bpf_stats_enabled=1
  BENCH_START=("$@")
  it=$(bench_run "$tag" fp "$PY" "$FP_TMP/loop.py")
  sysctl -qw kernel.bpf_stats_enabled=0
  samples=$(fp_status_json | python3 -c 'import json,sys
d = json.load(sys.stdin); print(d["targets"][-1]["samples"])')
  fp_ctl stop "$(awk 'NR==1' "$FP_TMP/$tag.out")" >/dev/null 2>&1 || true
  read -r c0 ns0 n0 <"$FP_TMP/$tag.before"
  read -r c1 ns1 n1 <"$FP_TMP/$tag.after"
  echo "$it $((c1 - c0)) $samples $((ns1 - ns0)) $((n1 - n0))"
}

# offcpu TAG [options]: "agent_cpu_us bpf_ns off_cpu_stacks python_stacks" of
# waits.py's run under --off-cpu (1 ms period) with options.
offcpu() {
  local tag=$1 pid
  shift
  "$PY" "$FP_SRC/tests/workloads/python/waits.py" "$FP_TMP/$tag.truth" "$SECS" "$FP_TMP/$tag.go" \
    >"$FP_TMP/$tag.out" 2>&1 &
  pid=$!
  fp_track "$pid"
  fp_wait_for 20 test -s "$FP_TMP/$tag.out" || fp_fail "$tag did not start"
  fp_ctl start "$pid" --off-cpu --off-cpu-period 1000000 "$@" >/dev/null || fp_fail "start $tag failed"
  sysctl -qw kernel.bpf_stats_enabled=1
  read -r c0 <<<"$(bench_agent_cpu_us)"
  read -r ns0 _ <<<"$(bench_bpf_stats fp_offcpu)"
  touch "$FP_TMP/$tag.go"
  wait "$pid" || fp_fail "$tag failed: $(cat "$FP_TMP/$tag.out")"
  fp_untrack "$pid"
  sleep 0.3
  read -r ns1 _ <<<"$(bench_bpf_stats fp_offcpu)"
  read -r c1 <<<"$(bench_agent_cpu_us)"
  sysctl -qw kernel.bpf_stats_enabled=0
  fp_status_json | python3 -c 'import json,sys
t = [t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])][0]
py = t["python"]["stacks"]
print(sys.argv[2], sys.argv[3], t["off_cpu"]["stacks"], py["offcpu_stacks"] if isinstance(py, dict) else 0)' \
    "$pid" "$((c1 - c0))" "$((ns1 - ns0))"
  fp_ctl stop "$pid" >/dev/null 2>&1 || true
}

base=$(bench_run base none "$PY" "$FP_TMP/loop.py")
fp_start_agent --store none
on=$(fleetprof on)
off=$(fleetprof off --no-python)
# A sleeper with --off-cpu keeps the off-CPU programs loaded (and their
# bpf_stats counting) across the runs' ends.
sleep 600 &
sleeper=$!
fp_track "$sleeper"
fp_ctl start "$sleeper" --off-cpu >/dev/null || fp_fail "start of the sleeper failed"
off_on=$(offcpu off-on)
off_off=$(offcpu off-off --no-python)
fp_kill "$sleeper"
fp_stop_agent

peer_py=
pyenv_root=$(pyenv root 2>/dev/null || true)
for minor in 13 12; do
  p=$(ls -d "$pyenv_root"/versions/3.$minor.*/bin/python3.$minor 2>/dev/null | head -1 || true)
  [[ -n $p ]] && peer_py=$p && break
done
perf_it=- peer_base=- perf_samples=-
if [[ -n $peer_py ]] && command -v perf >/dev/null; then
  peer_base=$(bench_run peer-base none "$peer_py" "$FP_TMP/loop.py")
  perf_it=$(bench_run peer perf "$peer_py" -X perf "$FP_TMP/loop.py")
  perf_samples=$(perf report -i "$FP_TMP/peer.data" --stdio -F overhead 2>/dev/null | awk '/^# Samples:/ {print $3}' | head -1)
fi

read -r on_it on_cpu on_samples on_bpf_ns on_bpf_runs <<<"$on"
read -r off_it off_cpu off_samples _ _ <<<"$off"
pct() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a != "-") printf "%.1f%%", 100 * (b - a) / b; else print "-"}'; }
per() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.1f µs", a / b; else print "-"}'; }
echo
echo "== Python stacks: cost at $FREQ Hz, $SECS s, $("$PY" -V 2>&1) ($(nproc) cores, $(uname -r)) =="
printf '%-52s %14s %14s %16s\n' "" "python stacks" "--no-python" "perf -X perf"
printf '%-52s %14s %14s %16s\n' "program's iterations (unprofiled: $base; peer's $peer_base)" "$on_it" "$off_it" "$perf_it"
printf '%-52s %14s %14s %16s\n' "slowdown against unprofiled" "$(pct "$on_it" "$base")" "$(pct "$off_it" "$base")" "$(pct "$perf_it" "$peer_base")"
printf '%-52s %14s %14s %16s\n' "BPF program per sample (bpf_stats)" \
  "$(awk -v a="$on_bpf_ns" -v b="$on_bpf_runs" 'BEGIN {if (b > 0) printf "%.2f µs", a / b / 1000; else print "-"}')" "-" "-"
printf '%-52s %14s %14s %16s\n' "BPF program runs / target's samples" "$on_bpf_runs/$on_samples" "-" "-"
printf '%-52s %14s %14s %16s\n' "agent CPU per sample" "$(per "$on_cpu" "$on_samples")" "$(per "$off_cpu" "$off_samples")" "-"
printf '%-52s %14s %14s %16s\n' "samples" "$on_samples" "$off_samples" "${perf_samples:--}"
echo "(perf record's own CPU is not in these figures: its cost to the program is the slowdown)"

read -r oc_cpu oc_ns oc_stacks oc_py <<<"$off_on"
read -r nc_cpu nc_ns nc_stacks _ <<<"$off_off"
echo
echo "== Python stacks off-CPU: waits.py, $SECS s, --off-cpu at a 1 ms period =="
printf '%-52s %14s %14s\n' "" "python stacks" "--no-python"
printf '%-52s %14s %14s\n' "off-CPU stacks (with a Python stack)" "$oc_stacks ($oc_py)" "$nc_stacks"
printf '%-52s %14s %14s\n' "off-CPU programs' time per off-CPU stack (bpf_stats)" \
  "$(awk -v a="$oc_ns" -v b="$oc_stacks" 'BEGIN {if (b > 0) printf "%.2f µs", a / b / 1000; else print "-"}')" \
  "$(awk -v a="$nc_ns" -v b="$nc_stacks" 'BEGIN {if (b > 0) printf "%.2f µs", a / b / 1000; else print "-"}')"
printf '%-52s %14s %14s\n' "agent CPU per off-CPU stack" "$(per "$oc_cpu" "$oc_stacks")" "$(per "$nc_cpu" "$nc_stacks")"
echo "(the programs run at every switch of every thread; their time per stack is all of it over the stacks)"
