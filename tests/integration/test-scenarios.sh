#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The benchmark scenarios of tests/workloads/truth come out right: serial
# leaves with known shares, equal threads, and leaves called both directly
# and under 80 frames of recursion ("deep").  Each is profiled by the agent
# at 1 kHz for its whole measured window and read back with Go's pprof; every
# leaf, thread and caller;leaf share must be within 2 points of the truth
# the workload measured itself, so the accuracy benchmark
# (tests/bench/accuracy.sh) compares against a truth that holds.  A deep
# sample's caller must be deep_rec (the stack was walked through all 80
# frames, not cut).  An unknown scenario is refused with one line and
# exit 2.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$FP_SRC"
fp_init 240
fp_require_go

err=$("$FP_TRUTH" --scenario bogus 2>&1 >/dev/null) && fp_fail "truth accepted --scenario bogus"
[[ $err == "truth: unknown scenario 'bogus' (ratios, serial, equal, deep)" ]] ||
  fp_fail "unexpected message for a bad scenario: '$err'"
fp_ok "an unknown scenario is refused: $err"

fp_start_agent
for scen in serial equal deep; do
  fp_start_workload truth "$FP_TMP/$scen.out" "$FP_TMP/$scen.ready" --scenario "$scen" \
    --seconds 4 --truth "$FP_TMP/$scen.json" --wait-for-start "$FP_TMP/$scen.go" --hold
  fp_ctl start "$FP_WL_PID" --freq 1000 >/dev/null || fp_fail "agentctl start ($scen) failed"
  touch "$FP_TMP/$scen.go"
  fp_wait_for 60 test -s "$FP_TMP/$scen.json" || fp_fail "truth --scenario $scen wrote no truth"
  [[ $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["scenario"])' "$FP_TMP/$scen.json") == "$scen" ]] ||
    fp_fail "the truth file does not name scenario $scen"
  fp_ctl dump "$FP_WL_PID" -o "$FP_TMP/$scen.pb.gz" >/dev/null 2>&1 || fp_fail "agentctl dump ($scen) failed"
  fp_ctl stop "$FP_WL_PID" >/dev/null || true
  fp_kill "$FP_WL_PID"
  echo "--- $scen ---"
  fp_pprofraw accuracy --truth "$FP_TMP/$scen.json" "$FP_TMP/$scen.pb.gz" --tolerance 2 --min-population 500 ||
    fp_fail "scenario $scen: shares differ from the truth"
  if [[ $scen == deep ]]; then
    # Of the samples in deep_rec, nearly all must show all 80 frames of it
    # and worker_main below them.
    fp_timeout 150 python3 - "$FP_TMP/$scen.pb.gz" <<'EOF' || fp_fail "deep stacks are cut short"
import sys
sys.path.insert(0, "tests/integration")
import pprofraw
p = pprofraw.load(sys.argv[1])
vi = p.value_index("samples")
deep = [s for s in p.samples if "deep_rec" in s.stack]
n = sum(s.values[vi] for s in deep)
full = sum(s.values[vi] for s in deep if s.stack.count("deep_rec") == 80 and "worker_main" in s.stack)
print("deep samples: %d, with all 80 deep_rec frames and worker_main: %d" % (n, full))
sys.exit(0 if n >= 200 and full >= 0.98 * n else 1)
EOF
  fi
  fp_ok "scenario $scen: every share within 2 points of the measured truth"
done
fp_stop_agent
