#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Kernel frames: excluded by default (time in the kernel shows as one
# "[kernel]" frame above the user stack that entered it, so no time goes
# missing), and with --kernel the stacks go on into the kernel, named from
# /proc/kallsyms, with user frames below them. The workload spends much of
# its time in nanosleep/clock_gettime system calls and page faults.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 120
fp_require_go

[[ $(cat /proc/sys/kernel/kptr_restrict) != 2 ]] || { fp_log "skipped: kptr_restrict=2 hides kernel symbols"; exit 0; }
fp_start_agent

check() {
  local mode=$1 raw=$2
  python3 - "$raw" "$FP_SRC/tests/integration" "$mode" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import pprofraw
p = pprofraw.load(sys.argv[1], is_raw_text=True)
mode = sys.argv[3]
user = ("leaf_hash", "leaf_sqrt", "leaf_mem", "work_loop", "worker_main", "main")
KERNEL = 0xffff800000000000
n_k = n_named = n_user_below = n_marker = 0
for s in p.samples:
    addrs = [p.locations[l].address for l in s.loc_ids]
    if s.stack and s.stack[0] == "[kernel]":
        n_marker += 1
    k = 0
    while k < len(addrs) and addrs[k] >= KERNEL:
        k += 1
    if k:
        n_k += 1
        if all(f and not f.startswith("0x") and "+0x" not in f for f in s.stack[:k]):
            n_named += 1
        if any(f in user for f in s.stack[k:]):
            n_user_below += 1
print(f"{mode}: {len(p.samples)} distinct samples, [kernel] marker {n_marker}, kernel stacks {n_k}, named {n_named}, with user frames below {n_user_below}")
if mode == "user":
    ok = n_k == 0 and n_marker > 0
else:
    ok = n_k > 0 and n_named == n_k and n_user_below > 0 and n_marker == 0
sys.exit(0 if ok else 1)
PY
}

for mode in user kernel; do
  fp_start_workload truth "$FP_TMP/$mode.out" "$FP_TMP/$mode.ready" --seconds 4 --duty-scale 0.5
  pid=$FP_WL_PID
  if [[ $mode == kernel ]]; then
    fp_ctl start "$pid" --freq 2000 --kernel >/dev/null || fp_fail "start --kernel failed"
  else
    fp_ctl start "$pid" --freq 2000 >/dev/null || fp_fail "start failed"
  fi
  sleep 2.5
  fp_ctl dump "$pid" -o "$FP_TMP/$mode.pb.gz" 2>/dev/null || fp_fail "dump failed"
  fp_pprof -raw -symbolize=none "$FP_TMP/$mode.pb.gz" >"$FP_TMP/$mode.raw" 2>&1 || fp_fail "pprof -raw failed"
  check "$mode" "$FP_TMP/$mode.raw" || fp_fail "$mode mode: kernel frames not as expected"
  fp_ctl stop "$pid" >/dev/null
  fp_ok "$mode mode"
done
