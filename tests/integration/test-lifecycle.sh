#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Lifecycle: the agent follows its targets' threads and releases what it
# holds.
#
# 1. Threads created after `start` are sampled: truth starts two "late-N"
#    threads 3 s into the run; they must show up in status (threads,
#    threads_seen) and in the profile under their own names, running
#    late_main.  When threads exit, status's live thread count drops.
# 2. `stop` really stops: the target leaves status, the agent's perf_event
#    file descriptors (/proc/AGENT/fd → anon_inode:[perf_event]) go back to
#    the count it had before profiling, nothing more is sampled (a dump after
#    stop, if the agent still serves one, does not grow), and the same PID
#    can be profiled again.
# 3. A target that exits while profiled: status shows state "exited" with 0
#    live threads, its perf fds are released, and it can still be dumped —
#    with function names, which needs the symbols read before the process
#    went away — until it is stopped.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 240
fp_require_go

fp_start_agent
sleep 0.5
BASE_FDS=$(fp_perf_fds "$FP_AGENT_PID")
fp_log "agent holds $BASE_FDS perf fds before profiling anything"

# wait_field PID FIELD VALUE SECONDS: poll status until FIELD == VALUE.
wait_field() {
  local deadline=$((SECONDS + $4))
  until [[ $(fp_target_field "$1" "$2") == "$3" ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# wait_fds OP N SECONDS: poll the agent's perf fd count until it is OP
# (eq, gt, lt) N; prints the last count; 1 on timeout.
wait_fds() {
  local op=$1 n=$2 deadline=$((SECONDS + $3)) c
  while :; do
    c=$(fp_perf_fds "$FP_AGENT_PID")
    case $op in
      eq) [[ $c -eq $n ]] && break ;;
      gt) [[ $c -gt $n ]] && break ;;
      lt) [[ $c -lt $n ]] && break ;;
    esac
    ((SECONDS < deadline)) || { echo "$c"; return 1; }
    sleep 0.1
  done
  echo "$c"
}

# ---- 1. late threads ------------------------------------------------------
echo "=== threads created after start ==="
# The late threads' delay runs from "go", which the test gives only once it
# has counted the fds of the first four: on a loaded machine a fixed delay
# from the workload's own start could pass before the count (a race).
fp_start_workload truth "$FP_TMP/t1.out" "$FP_TMP/t1.ready" --wait-for-start "$FP_TMP/t1.go" \
  --seconds 12 --late-threads 2 --late-delay-ms 3000 --truth "$FP_TMP/t1.json" --hold
P1=$FP_WL_PID
fp_ctl start "$P1" --freq 1000 >/dev/null || fp_fail "agentctl start $P1 failed"
th=$(fp_target_field "$P1" threads)
[[ $th == 4 ]] || fp_fail "status shows $th live threads right after start, want 4 (main + 3 workers)"
c=$(wait_fds gt "$BASE_FDS" 5) || fp_fail "no perf fds opened for pid $P1 (count $c)"
fp_ok "profiling pid $P1: 4 threads, agent perf fds $BASE_FDS → $c"
touch "$FP_TMP/t1.go"
# A thread that has not run yet holds a starter event beside its group (threads.c), closed at
# its first sample: once the workers run, the count falls. That count, before the late threads
# come, is the one they must add to (compared with the count before "go", the late threads'
# fds can just make up for the workers' closed starters).
c=$(wait_fds lt "$c" 2) || fp_fail "the workers' starter events were not closed once they ran (count $c)"

fp_wait_for 15 bash -c '[[ $(ls /proc/$0/task | wc -l) -ge 6 ]]' "$P1" ||
  fp_fail "truth did not start its late threads"
wait_field "$P1" threads 6 10 || fp_fail "status never showed 6 live threads after 2 were created (shows $(fp_target_field "$P1" threads))"
c6=$(wait_fds gt "$c" 10) || fp_fail "perf fds did not grow with the new threads ($c → $c6)"
fp_ok "late threads seen: status threads 6, perf fds $c → $c6"

fp_wait_for 30 test -s "$FP_TMP/t1.json" || fp_fail "truth did not finish"
wait_field "$P1" threads 1 10 || fp_fail "status shows $(fp_target_field "$P1" threads) live threads after the workers exited, want 1"
seen=$(fp_target_field "$P1" threads_seen)
[[ $seen =~ ^[0-9]+$ && $seen -ge 6 ]] || fp_fail "threads_seen is $seen, want >= 6"
c1=$(wait_fds lt "$c6" 5) || fp_fail "perf fds not released when threads exited ($c6 with 6 threads, $c1 with 1)"
fp_ok "threads exited: status threads 1, threads_seen $seen, perf fds $c6 → $c1"

fp_ctl dump "$P1" -o "$FP_TMP/p1.pb.gz" || fp_fail "dump $P1 failed"
fp_pprofraw expect "$FP_TMP/p1.pb.gz" --thread-name late-0 --thread-name late-1 \
  --thread-name w-alpha --function late_main --thread-stack late-0:late_main --thread-stack late-1:late_main \
  --has-thread-ids || fp_fail "the late threads are missing from the profile"
fp_ok "late-0 and late-1 appear in the profile under their names"

# ---- 2. stop -------------------------------------------------------------
echo "=== stop ==="
# A target that keeps working after stop, to show nothing is sampled any more.
fp_start_workload truth "$FP_TMP/t2.out" "$FP_TMP/t2.ready" --seconds 0
P2=$FP_WL_PID
fp_ctl start "$P2" --freq 1000 >/dev/null || fp_fail "agentctl start $P2 failed"
sleep 1.5
s=$(fp_target_field "$P2" samples)
[[ $s =~ ^[0-9]+$ && $s -gt 0 ]] || fp_fail "no samples for busy pid $P2 after 1.5 s ($s)"
fp_log "busy pid $P2 has $s samples after 1.5 s; agent perf fds $(fp_perf_fds "$FP_AGENT_PID")"

for p in "$P1" "$P2"; do
  out=$(fp_ctl stop "$p") || fp_fail "agentctl stop $p failed"
  fp_log "agentctl stop $p: $out"
  [[ $(fp_target_field "$p" state) == absent ]] || fp_fail "pid $p is still listed in status after stop"
done
c=$(wait_fds eq "$BASE_FDS" 5) || fp_fail "the agent holds $c perf fds after stopping everything, had $BASE_FDS before"
fp_ok "after stop: no targets listed, perf fds back to $c"

if fp_ctl dump "$P2" -o "$FP_TMP/after1.pb.gz" 2>"$FP_TMP/after.err"; then
  sleep 1.5
  fp_ctl dump "$P2" -o "$FP_TMP/after2.pb.gz" || fp_fail "second dump after stop failed"
  n1=$(fp_pprofraw summary "$FP_TMP/after1.pb.gz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
  n2=$(fp_pprofraw summary "$FP_TMP/after2.pb.gz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
  [[ $n1 == "$n2" ]] || fp_fail "samples grew after stop: $n1 → $n2"
  fp_ok "dump after stop still served and does not grow ($n1 samples)"
else
  fp_ok "dump after stop refused: $(head -n1 "$FP_TMP/after.err")"
fi
ps_cpu=$(awk '{print $14 + $15}' /proc/"$P2"/stat)
((ps_cpu > 0)) || fp_fail "pid $P2 should still be busy"

out=$(fp_ctl start "$P2" --freq 1000) || fp_fail "profiling pid $P2 again after stop failed"
sleep 1
s=$(fp_target_field "$P2" samples)
[[ $s =~ ^[0-9]+$ && $s -gt 0 ]] || fp_fail "no samples after re-starting pid $P2 ($s)"
fp_ctl stop "$P2" >/dev/null || fp_fail "second stop of $P2 failed"
fp_kill "$P2"
fp_kill "$P1"
c=$(wait_fds eq "$BASE_FDS" 5) || fp_fail "perf fds $c after re-start and stop, want $BASE_FDS"
fp_ok "the same pid can be profiled again after stop ($s samples), fds back to $c"

# ---- 3. a target that exits while profiled ------------------------------
echo "=== target exits while profiled ==="
fp_start_workload truth "$FP_TMP/t3.out" "$FP_TMP/t3.ready" --seconds 3 --truth "$FP_TMP/t3.json"
P3=$FP_WL_PID
fp_ctl start "$P3" --freq 1000 >/dev/null || fp_fail "agentctl start $P3 failed"
rc=0
wait "$P3" || rc=$? # truth ends by itself after 3 s; the watchdog bounds this
[[ $rc -eq 0 ]] || fp_fail "truth exited with $rc"
fp_log "pid $P3 exited"
wait_field "$P3" state exited 10 || fp_fail "status shows state '$(fp_target_field "$P3" state)' for the exited pid, want exited"
[[ $(fp_target_field "$P3" threads) == 0 ]] || fp_fail "exited target shows $(fp_target_field "$P3" threads) live threads, want 0"
c=$(wait_fds eq "$BASE_FDS" 5) || fp_fail "perf fds $c after the target exited, want $BASE_FDS"
s=$(fp_target_field "$P3" samples)
[[ $s =~ ^[0-9]+$ && $s -gt 1000 ]] || fp_fail "exited target has only $s samples (ran ~3 s at 1 kHz, ~1 core)"
fp_ok "exited target: state exited, threads 0, $s samples, perf fds back to $c"

fp_ctl dump "$P3" -o "$FP_TMP/p3.pb.gz" || fp_fail "dump of the exited pid $P3 failed"
fp_pprofraw expect "$FP_TMP/p3.pb.gz" --function leaf_hash --function leaf_sqrt --function leaf_mem \
  --function mid_one --function mid_two --thread-name w-alpha --thread-name w-gamma \
  --caller-leaf 'mid_two;leaf_mem' --min-samples 1000 || fp_fail "the exited target's profile is incomplete"
top=$(fp_ctl dump "$P3" --format top) || fp_fail "dump --format top of the exited pid failed"
grep -q leaf_hash <<<"$top" || fp_fail "top of the exited pid has no leaf_hash"
fp_ok "the exited target is dumpable with function names"

fp_ctl stop "$P3" >/dev/null || fp_fail "stop of the exited target failed"
[[ $(fp_target_field "$P3" state) == absent ]] || fp_fail "exited target still listed after stop"
fp_ok "stop of the exited target removes it"
fp_stop_agent
