#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Python functions in off-CPU profiles: where a CPython thread's native
# stack is copied (offcpu.bpf.c), its Python stack is read too
# (pywalk.bpf.h), and spliced in as at a CPU sample. On
# tests/workloads/python/waits.py, checked against what it measured of
# itself (python_offcpu_check.py): each thread's off-CPU time with Python
# frames, each waiting function's time within 6%, nap() split between its
# two callers, the wait's native frames under the Python function:
#   1. targets (--off-cpu, 1 ms period) under Debian's python3.11 (static,
#      non-PIE) and each of pyenv's 3.8, 3.10, 3.12, 3.13 present; status
#      counts the off-CPU stacks given Python frames;
#   2. the host tier's off-CPU time (every process), Debian's python3.11
#      in a unit's cgroup;
#   3. --no-python: native frames only, and the off-CPU profile intact.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=python-offcpu
fp_init 280
fp_require_go
[[ -x /usr/bin/python3.11 ]] || fp_fail "missing /usr/bin/python3.11 (Debian's python3.11)"
WL=$FP_SRC/tests/workloads/python/waits.py
CHECK=$FP_SRC/tests/integration/python_offcpu_check.py
SECS=4

# start_wl NAME PYTHON [WRAPPER...]: the workload held at its start; its pid in WL_PID.
start_wl() {
  local name=$1 py=$2
  shift 2
  "$@" "$py" "$WL" "$FP_TMP/$name.truth" "$SECS" "$FP_TMP/$name.go" >"$FP_TMP/$name.out" 2>"$FP_TMP/$name.err" &
  WL_PID=$!
  fp_track "$WL_PID"
  fp_wait_for 20 test -s "$FP_TMP/$name.out" || fp_fail "$name did not start: $(cat "$FP_TMP/$name.err")"
}

# finish NAME: lets it run, waits for its truth and its end.
finish() {
  touch "$FP_TMP/$1.go"
  wait "$WL_PID" || fp_fail "$1 failed: $(cat "$FP_TMP/$1.err")"
  fp_untrack "$WL_PID"
  test -s "$FP_TMP/$1.truth" || fp_fail "$1 wrote no truth"
  sleep 0.3 # the last records: the agent reads the ring every 100 ms
}

# host_recognised: the host tier runs the Python stacks of a CPython process.
host_recognised() {
  fp_status_json | python3 -c 'import json,sys
sys.exit(0 if json.load(sys.stdin)["host_tier"]["python"]["processes"] >= 1 else 1)'
}

fp_start_agent

# ---- 1. targets, every CPython present ------------------------------------------
pythons=(/usr/bin/python3.11)
pyenv_root=$(pyenv root 2>/dev/null || true)
for minor in 8 10 12 13; do
  p=$(ls -d "$pyenv_root"/versions/3.$minor.*/bin/python3.$minor 2>/dev/null | head -1 || true)
  [[ -n $p ]] && pythons+=("$p")
done
for py in "${pythons[@]}"; do
  name=off-$(basename "$py")-$RANDOM
  start_wl "$name" "$py"
  fp_ctl start "$WL_PID" --off-cpu --off-cpu-period 1000000 >/dev/null || fp_fail "start --off-cpu failed"
  # Its interpreter recognised first: on a busy machine reading python3.11's
  # symbols took 0.3 s, whose waits had no Python frames (counted in status:
  # early or without), 7% of a 4 s run.
  fp_wait_for 20 fp_python_recognised "$WL_PID" || fp_fail "$py was not recognised as CPython"
  finish "$name"
  fp_ctl status --json >"$FP_TMP/$name.status" || fp_fail "status failed"
  fp_ctl dump "$WL_PID" --event off-cpu -o "$FP_TMP/$name.pb.gz" >/dev/null || fp_fail "dump of $name failed"
  fp_ctl stop "$WL_PID" >/dev/null || true
  out=$(python3 "$CHECK" "$FP_TMP/$name.pb.gz" "$FP_TMP/$name.truth") || fp_fail "[$py] $out"
  fp_ok "[$py] $out"
  out=$(python3 - "$FP_TMP/$name.status" "$WL_PID" <<'PYEOF'
import json, sys
t = [x for x in json.load(open(sys.argv[1]))["targets"] if x["pid"] == int(sys.argv[2])][0]
py, off = t["python"]["stacks"], t["off_cpu"]
print("status: %d of %d off-CPU stacks with a Python stack (%d without)" % (
    py["offcpu_stacks"], off["stacks"], py["offcpu_without"]))
assert py["offcpu_stacks"] > 0, py
assert py["offcpu_without"] <= 0.05 * py["offcpu_stacks"], py
PYEOF
  ) || fp_fail "[$py] status --json python.offcpu_stacks: $out"
  fp_ok "[$py] $out"
  out=$(fp_status_json | python3 -c 'import json,sys
o = json.load(sys.stdin)["off_cpu"]
print("status: %d Python stacks read off-CPU, %d unpaired" % (o["python_records"], o["python_unpaired"]))
assert o["python_records"] > 0 and o["python_unpaired"] <= 0.01 * o["python_records"], o'
  ) || fp_fail "[$py] status --json off_cpu.python_records: $out"
  fp_ok "[$py] $out"
done

# ---- 2. the host tier ------------------------------------------------------------
cg=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)
[[ -n $cg ]] || fp_fail "no cgroup v2 hierarchy is mounted"
units=$cg/fleetprof-pyofftest-$$
mkdir -p "$units"
fp_on_exit "kill -KILL \$(cat '$units'/*/cgroup.procs 2>/dev/null) 2>/dev/null; sleep 0.2; rmdir '$units'/* '$units' 2>/dev/null"
out=$(fp_ctl start --host --off-cpu --off-cpu-period 1000000) || fp_fail "start --host --off-cpu failed: $out"
svc=fptest-pyoff-host
mkdir -p "$units/$svc.service"
start_wl host /usr/bin/python3.11 sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$units/$svc.service"
fp_wait_for 20 host_recognised || fp_fail "the host tier did not recognise the CPython"
finish host
sleep 1 # a round of the host tier's rings
fp_ctl dump --host --event off-cpu --service "$svc" -o "$FP_TMP/host.pb.gz" >/dev/null || fp_fail "dump --host --event off-cpu failed"
# On a failure, the tier's own off-CPU figures (its losses by reason) beside it.
out=$(python3 "$CHECK" "$FP_TMP/host.pb.gz" "$FP_TMP/host.truth" --host) ||
  fp_fail "[host tier] $out; the tier's off-CPU figures: $(fp_status_json | python3 -c 'import json,sys
h = json.load(sys.stdin)["host_tier"]
print(json.dumps({k: h.get(k) for k in ("off_cpu", "off_cpu_process_unknown", "drops", "python")}))')"
fp_ok "[host tier] $out"
fp_ctl stop --host >/dev/null || fp_fail "stop --host failed"

# ---- 3. --no-python ----------------------------------------------------------------
start_wl nopy /usr/bin/python3.11
fp_ctl start "$WL_PID" --off-cpu --off-cpu-period 1000000 --no-python >/dev/null || fp_fail "start --no-python failed"
finish nopy
fp_ctl dump "$WL_PID" --event off-cpu -o "$FP_TMP/nopy.pb.gz" >/dev/null || fp_fail "dump failed"
fp_ctl stop "$WL_PID" >/dev/null || true
fp_pprof -raw "$FP_TMP/nopy.pb.gz" >"$FP_TMP/nopy.raw" 2>&1 || fp_fail "go tool pprof -raw failed"
! grep -q "$WL" "$FP_TMP/nopy.raw" || fp_fail "--no-python: Python frames in the off-CPU profile"
grep -q "_PyEval_EvalFrameDefault" "$FP_TMP/nopy.raw" || fp_fail "--no-python: not even the interpreter's frames"
fp_ok "--no-python: the off-CPU stacks keep the interpreter's native frames only"
fp_stop_agent
