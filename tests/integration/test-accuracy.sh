#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Accuracy: the agent's profile of a workload matches that workload's own
# measured CPU time.
#
# tests/workloads/truth runs three named threads at different duty cycles,
# each calling leaf functions through two callers, and measures with
# CLOCK_THREAD_CPUTIME_ID how much CPU every (thread, caller, leaf) call
# took.  We profile it with the agent at 1 kHz for the whole measured window
# (the workload waits for a start file until profiling has begun, and holds
# after writing its truth until we have dumped), dump a pprof, read it with
# Go's own pprof (`go tool pprof -raw`), and compare, on the same population
# — samples whose leaf is one of the measured leaves, in the measured
# threads, against the measured leaf time of those threads — each leaf's
# share, each thread's share and each caller→leaf pair's share.  Every share
# must be within 2 percentage points; the number of samples must match the
# measured CPU time at the requested rate within 10 %, so samples are
# neither lost nor invented.  The same holds for the cpu/nanoseconds values.
#
# Then four equal threads at 2 kHz, profiled until they exit: each
# thread's samples per second of its CPU time (CLOCK_THREAD_CPUTIME_ID,
# its whole life) must agree across the four within 0.6 %, or within
# the kernel's loss below when that is more (plus, on a VM, the share of
# busy time its hypervisor stole meanwhile).  The agent
# varies each thread's sampling period by up to 5 % (against lock step with
# periodic work); a thread's count follows its mean period, which a random
# walk of periods left about 1 % off per thread (0.5-2 % apart), and which
# the agent now steers back to the configured one.  What is left is the
# kernel's: each thread gets about 1 % fewer samples than its CPU time
# says (also with --unwind fp), time its clock counts but its cpu-clock
# event does not (the threads sleep and wake hundreds of times a second,
# and the event stops and starts with each switch), and that share varies
# from thread to thread: 0.03-0.42 % apart in 22 runs on Linux 6.18 in
# this 2-CPU VM (4 of them with the agent before its last change:
# 0.08-0.24 %). Beside CPU-bound jobs the threads switch more, the loss
# is 1.5-2 % and the spread 0.38-0.63 %; beside 50 compilers, 1.21 % of a
# 1.54 % loss.
#
# And the reason for that variation: tests/workloads/alternate runs two
# functions in turn, 500 us of CPU each, sampled every 1 ms of CPU
# (--period 1000000): a fixed period samples the same phase again and
# again (one function got 36-74 % in four runs), the agent's varied period
# must give each 50 +- 8 %.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 200
fp_require_go

SECS=${FP_ACCURACY_SECONDS:-6}
HZ=1000
fp_start_agent

TRUTH_JSON=$FP_TMP/truth.json
fp_start_workload truth "$FP_TMP/truth.out" "$FP_TMP/ready" \
  --seconds "$SECS" --truth "$TRUTH_JSON" --wait-for-start "$FP_TMP/go" --hold
PID=$FP_WL_PID
NTASKS=$(ls /proc/"$PID"/task | wc -l)
fp_log "truth running as pid $PID with $NTASKS threads"

out=$(fp_ctl start "$PID" --freq "$HZ") || fp_fail "agentctl start $PID --freq $HZ failed"
fp_log "agentctl start: $out"
[[ $out == "profiling $PID "* ]] || fp_fail "start printed '$out', expected 'profiling $PID (truth) with ...'"
[[ $out == *"$HZ Hz"* ]] || fp_fail "start output does not mention $HZ Hz: '$out'"
[[ $out =~ ([0-9]+)\ threads ]] && [[ ${BASH_REMATCH[1]} -eq $NTASKS ]] ||
  fp_fail "start output should report $NTASKS threads: '$out'"
[[ $(fp_target_field "$PID" frequency) == "$HZ" ]] || fp_fail "status does not show frequency $HZ"
[[ $(fp_target_field "$PID" event) == cpu-clock ]] || fp_fail "status does not show event cpu-clock"
[[ $(fp_target_field "$PID" period) == 1000000 ]] || fp_fail "status does not show period 1000000 ns at $HZ Hz"
fp_ok "start reported $NTASKS threads at $HZ Hz"

touch "$FP_TMP/go"
fp_wait_for $((SECS + 30)) test -s "$TRUTH_JSON" || fp_fail "truth did not write $TRUTH_JSON"
fp_log "truth finished: $(python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
print(", ".join("%s %.3fs (thread %.3fs)" % (n, v["total_ns"] / 1e9, v["thread_cpu_ns"] / 1e9)
                for n, v in sorted(t["threads"].items())))' "$TRUTH_JSON")"

# The workload is idle now; wait until the agent has read everything.
prev=-1
for ((i = 0; i < 40; i++)); do
  cur=$(fp_target_field "$PID" samples)
  [[ $cur == "$prev" ]] && break
  prev=$cur
  sleep 0.5
done
fp_log "status: samples $cur, lost $(fp_target_field "$PID" lost), throttled $(fp_target_field "$PID" throttled)"
[[ $cur =~ ^[0-9]+$ && $cur -gt 0 ]] || fp_fail "status reports no samples ($cur)"
[[ $(fp_target_field "$PID" lost) == 0 ]] || fp_log "note: the agent reports lost samples"

PROF=$FP_TMP/profile.pb.gz
fp_ctl dump "$PID" --format pprof -o "$PROF" || fp_fail "agentctl dump --format pprof -o failed"
[[ $(head -c2 "$PROF" | od -An -tx1 | tr -d ' ') == 1f8b ]] || fp_fail "the dump is not gzip"

raw=$(fp_pprof -raw -symbolize=none "$PROF" 2>"$FP_TMP/pprof.err") ||
  fp_fail "go tool pprof -raw rejected the profile: $(cat "$FP_TMP/pprof.err")"
for f in leaf_hash leaf_sqrt leaf_mem mid_one mid_two worker_main; do
  grep -q " $f " <<<"$raw" || fp_fail "go tool pprof -raw does not show function $f"
done
fp_ok "go tool pprof -raw reads the profile and shows the function names"

echo "--- shares by sample count ---"
fp_pprofraw accuracy --truth "$TRUTH_JSON" "$PROF" --tolerance 2 --rate-hz "$HZ" \
  --min-rate-ratio 0.9 --max-rate-ratio 1.1 || fp_fail "sample shares differ from the truth"
echo "--- shares by cpu/nanoseconds ---"
fp_pprofraw accuracy --truth "$TRUTH_JSON" "$PROF" --tolerance 2 --value cpu ||
  fp_fail "cpu/nanoseconds shares differ from the truth"
fp_ok "leaf, thread and caller→leaf shares within 2 points of the measured truth"

fp_ctl stop "$PID" >/dev/null || fp_fail "agentctl stop $PID failed"
fp_kill "$PID"

# run_to_exit TAG START_ARGS... -- WORKLOAD ARGS...: WORKLOAD (waiting for
# the go file) profiled with `agentctl start PID START_ARGS` from its first
# step until it has exited and the agent has seen it; its PID in RUN_PID.
run_to_exit() {
  local tag=$1 start=() wl
  shift
  while [[ $1 != -- ]]; do
    start+=("$1")
    shift
  done
  wl=$2
  shift 2
  rm -f "$FP_TMP/go" "$FP_TMP/ready"
  fp_start_workload "$wl" "$FP_TMP/$tag.out" "$FP_TMP/ready" "$@" --wait-for-start "$FP_TMP/go"
  RUN_PID=$FP_WL_PID
  fp_ctl start "$RUN_PID" "${start[@]}" >/dev/null || fp_fail "agentctl start $RUN_PID ${start[*]} failed"
  touch "$FP_TMP/go"
  wait "$RUN_PID" || fp_fail "$wl ($tag) failed: $(cat "$FP_TMP/$tag.out.err")"
  fp_untrack "$RUN_PID"
  fp_wait_for 10 eval '[[ $(fp_target_field '"$RUN_PID"' state) == exited ]]' ||
    fp_fail "the agent did not see $wl ($tag) exit"
}

# ---- equal threads: sample counts against their CPU time ----------------------------------------
EQ_HZ=2000
fp_cpu_mark "$FP_TMP/eq.mark"
run_to_exit eq --freq "$EQ_HZ" -- truth --scenario equal --seconds 8 --truth "$FP_TMP/eq.json"
EQ=$RUN_PID
test -s "$FP_TMP/eq.json" || fp_fail "truth (equal) did not write its truth"
[[ $(fp_target_field "$EQ" lost) == 0 ]] || fp_fail "the agent lost samples of the equal threads: the counts say nothing"
fp_ctl dump "$EQ" --format pprof -o "$FP_TMP/eq.pb.gz" || fp_fail "agentctl dump of the equal threads failed"
fp_timeout 150 python3 - "$FP_PPROFRAW" "$FP_TMP/eq.json" "$FP_TMP/eq.pb.gz" "$EQ_HZ" \
  "$(cat "$FP_TMP/eq.mark")" "$(head -1 /proc/stat)" <<'PY' || fp_fail "equal threads' sample counts disagree"
import collections, json, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import pprofraw
truth = json.load(open(sys.argv[2]))
p = pprofraw.load(sys.argv[3])
hz = int(sys.argv[4])
vi = p.value_index("samples")
count = collections.Counter()
for s in p.samples:
    count[s.numlabels["thread"][0]] += s.values[vi]
ratio = {}
for name, th in sorted(truth["threads"].items()):
    expect = th["thread_cpu_ns"] * hz / 1e9
    ratio[name] = count[th["tid"]] / expect
    print("%s: %d samples for %.0f ms of CPU (%.2f %% of %d Hz)" % (
        name, count[th["tid"]], th["thread_cpu_ns"] / 1e6, 100 * ratio[name], hz))
mean = sum(ratio.values()) / len(ratio)
spread = 100 * (max(ratio.values()) - min(ratio.values())) / mean
# The kernel's cpu-clock loses a little of a thread's time at each of its
# switches (1% quiet, 1.5-2% beside CPU-bound jobs), differently per thread:
# the counts may differ by 0.6%, or by as much as that loss.
#
# On a VM whose host is busy, the hypervisor also stops a vCPU while a
# thread runs on it: Linux leaves that stolen time out of the thread's CPU
# clock (paravirtual steal accounting), but cpu-clock's timer, on the
# wall clock, keeps firing through it, so a thread gets samples for time
# its clock does not count, as much as the steal it happened to meet (one
# CI run: 100.2-101.0 % of the rate, 4 % of the host's time stolen). The
# counts may differ by the host's steal per busy second over the run too.
a = [int(x) for x in sys.argv[5].split()[1:9]]
b = [int(x) for x in sys.argv[6].split()[1:9]]
d = [y - x for x, y in zip(a, b)]
steal = d[7] / max(1, sum(d) - d[3] - d[4])
bound = max(0.6, 100 * (1 - mean)) + 100 * steal
print("spread: %.2f %% (bound %.2f %%: the kernel lost %.2f %%, the hypervisor stole %.2f %% of busy time)" % (
    spread, bound, 100 * (1 - mean), 100 * steal))
sys.exit(0 if spread <= bound and min(ratio.values()) > 0.95 else 1)
PY
fp_ok "four equal threads: their sample counts follow their CPU time alike (within 0.6 %, or what the kernel lost and the hypervisor stole)"

# ---- lock step: a period equal to the work's own ---------------------------------------------
run_to_exit alt --period 1000000 -- alternate --half-us 500 --seconds 6
ALT=$RUN_PID
fp_ctl dump "$ALT" --format folded >"$FP_TMP/alt.folded" || fp_fail "agentctl dump of alternate failed"
a=$(awk '/alternate_a/ {n += $NF} END {print n + 0}' "$FP_TMP/alt.folded")
b=$(awk '/alternate_b/ {n += $NF} END {print n + 0}' "$FP_TMP/alt.folded")
fp_log "alternate_a $a samples, alternate_b $b"
((a + b >= 4000)) || fp_fail "too few samples of alternate ($a + $b): $(head -c 300 "$FP_TMP/alt.folded")"
((a * 100 >= (a + b) * 42 && a * 100 <= (a + b) * 58)) ||
  fp_fail "the sampling period locks step with alternate's work: alternate_a has $a of $((a + b)) samples"
fp_ok "two functions of 500 us each in turn, sampled every 1 ms: $((a * 100 / (a + b))) % to the first (no lock step)"
fp_stop_agent
fp_ok "agent exited 0 on SIGTERM"
