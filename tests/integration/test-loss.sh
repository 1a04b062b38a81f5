#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Nothing is lost silently: when the agent cannot keep up (here: stopped
# with SIGSTOP for two seconds while two threads are sampled at 20 kHz, so
# their rings overflow), the kernel's PERF_RECORD_LOST counts reach
# `status` and the profile's comments, the agent carries on afterwards, and
# samples + lost roughly cover the time the threads ran.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 180
fp_require_go

fp_start_agent
fp_start_workload spin "$FP_TMP/spin.out" "$FP_TMP/spin.ready" --threads 2 --seconds 40
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 20000 >/dev/null || fp_fail "start failed"
sleep 1
# The kernel lowers its sample rate system-wide after busy tests
# (perf_event_max_sample_rate), so a 2 s stall may not fill the ring: stall
# longer, up to 16 s, until it does.
for stall in 2 4 8 16; do
  kill -STOP "$FP_AGENT_PID"
  sleep "$stall"
  kill -CONT "$FP_AGENT_PID"
  sleep 1
  lost=$(fp_target_field "$pid" lost)
  samples=$(fp_target_field "$pid" samples)
  fp_log "after a $stall s stall at 20 kHz: samples $samples, lost $lost (max sample rate $(cat /proc/sys/kernel/perf_event_max_sample_rate))"
  ((lost == 0)) || break
done
((lost > 0)) || fp_fail "no lost records counted although the agent was stopped for 30 s in all"
fp_ok "ring overflow is counted ($lost records lost)"

before=$samples
sleep 1
after=$(fp_target_field "$pid" samples)
((after > before + 1000)) || fp_fail "the agent did not resume sampling after the stall ($before -> $after)"
fp_ok "sampling resumed after the stall ($before -> $after)"

fp_ctl dump "$pid" -o "$FP_TMP/loss.pb.gz" 2>/dev/null || fp_fail "dump failed"
fp_pprof -comments "$FP_TMP/loss.pb.gz" >"$FP_TMP/comments" 2>&1 || fp_fail "pprof -comments failed"
grep -Eq "lost records [1-9][0-9]*" "$FP_TMP/comments" ||
  fp_fail "the profile's comments do not carry the lost count: $(cat "$FP_TMP/comments")"
fp_ok "the profile's comments carry the lost count"
fp_stop_agent
