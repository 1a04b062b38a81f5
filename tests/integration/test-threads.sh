#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Thread tracking: short-lived threads and child processes, with the BPF
# tracker and with the perf-fork fallback (--no-bpf).
#
# 1. status (text and --json) names the tracker in use: "bpf" by default
#    (this machine has BTF and we are root), "perf-fork" with --no-bpf,
#    with the reason.
# 2. threadstorm creates 200 threads one after another after `start`, each
#    burning 30 ms of CPU in storm_work() under its own name storm-NNN. With
#    BPF at least 95% of them must appear in the profile with storm_work on
#    their stack; the fallback's share is printed and must reach 80% (it is
#    event-driven too, but depends on the creating thread's side-band ring).
#    In both modes the agent's file descriptors (all of /proc/AGENT/fd, and
#    the perf ones) come back to the count it had with only the main thread
#    attached, and to the pre-start count after stop.
# 3. Child processes (and grandchildren) are not profiled without
#    --follow-children, and are, as targets of their own with parent_pid
#    set, with it; followed children that exit become "exited" targets whose
#    fds are released. The fallback must follow the children (forked by an
#    attached thread); grandchildren forked before the agent attached their
#    parent can escape it, so only their count is printed.
# 4. Bad input: --follow-children where it does not belong, --no-bpf with
#    an argument.
# 5. An agent run as nobody may not load BPF: it logs one line why, and
#    status names the fallback with that reason.
# 6. A target started with --follow-children is resumed, still following,
#    by a restarted agent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 280
fp_require_go
STORM=$FP_BUILD/tests/threadstorm
[[ -x $STORM ]] || fp_fail "missing $STORM"

all_fds() { ls "/proc/$FP_AGENT_PID/fd" | wc -l; }

# settled_fds: the agent's fd count once it reads the same twice 0.3 s apart
# (agentctl's connection closes when the agent sees its end).
settled_fds() {
  local a b=$(all_fds) deadline=$((SECONDS + 10))
  while :; do
    sleep 0.3
    a=$b b=$(all_fds)
    [[ $a == "$b" ]] || ((SECONDS >= deadline)) && break
  done
  echo "$b"
}

# wait_all_fds N SECS [LOW]: waits until the agent holds N fds (or LOW to N); prints the count.
wait_all_fds() {
  local n=$1 deadline=$((SECONDS + $2)) low=${3:-$1} c
  while :; do
    c=$(all_fds)
    [[ $c -le $n && $c -ge $low ]] && break
    ((SECONDS < deadline)) || { echo "$c"; return 1; }
    sleep 0.1
  done
  echo "$c"
}

# tracker_field FIELD: thread_tracker.FIELD of status --json.
tracker_field() {
  fp_status_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["thread_tracker"][sys.argv[1]])' "$1"
}

# storm_threads FILE: how many storm-NNN threads have samples with storm_work on their stack.
storm_threads() {
  PYTHONPATH=$FP_SRC/tests/integration fp_timeout 150 python3 -c '
import sys, pprofraw
p = pprofraw.load(sys.argv[1])
names = {s.thread_name() for s in p.samples if str(s.thread_name()).startswith("storm-") and "storm_work" in s.stack}
print(len(names))' "$1"
}

# storm MODE: one storm of 200 threads; checks fds; sets SEEN.
storm() {
  local mode=$1 pre one c
  pre=$(settled_fds)
  fp_start_workload threadstorm "$FP_TMP/s-$mode.out" "$FP_TMP/s-$mode.ready" \
    --threads 200 --cpu-ms 30 --go "$FP_TMP/s-$mode.go" --hold
  local P=$FP_WL_PID
  fp_ctl start "$P" --freq 250 >/dev/null || fp_fail "agentctl start $P failed"
  one=$(settled_fds)
  ((one > pre)) || fp_fail "no fds opened for the main thread of $P ($pre → $one)"
  touch "$FP_TMP/s-$mode.go"
  fp_wait_for 120 grep -q done "$FP_TMP/s-$mode.out" || fp_fail "threadstorm did not finish its 200 threads"
  # The main thread's first-period starter (threads.c) is closed once it has sampled it.
  c=$(wait_all_fds "$one" 10 $((one - 1))) || fp_fail "[$mode] the agent holds $c fds after the 200 threads exited, $one with the main thread only"
  seen=$(fp_target_field "$P" threads_seen)
  [[ $seen -ge 190 ]] || fp_fail "[$mode] threads_seen is $seen, want about 201"
  fp_ctl dump "$P" -o "$FP_TMP/s-$mode.pb.gz" >/dev/null 2>&1 || fp_fail "[$mode] dump $P failed"
  SEEN=$(storm_threads "$FP_TMP/s-$mode.pb.gz")
  local lat
  lat=$(fp_target_field "$P" attach_latency_us)
  fp_log "[$mode] $SEEN of 200 short-lived threads in the profile; threads_seen $seen, missed $(fp_target_field "$P" threads_missed), by rescan $(fp_target_field "$P" threads_by_rescan); attach latency µs $lat"
  fp_ctl stop "$P" >/dev/null || fp_fail "stop $P failed"
  fp_kill "$P"
  c=$(wait_all_fds "$pre" 5) || fp_fail "[$mode] the agent holds $c fds after stop, $pre before start"
  fp_ok "[$mode] fds: $pre before start, $one with the main thread, back to $one after the storm, $c after stop"
}

# kids_at_least PID N: status lists at least N targets followed from PID, each attached
# (threads live) or already done.
kids_at_least() {
  local n
  n=$(fp_status_json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(1 for t in d["targets"] if t["parent_pid"] == int(sys.argv[1]) and (t["threads"] > 0 or t["state"] == "exited")))' "$1")
  ((n >= $2))
}

# children MODE FOLLOW: threadstorm forks 2 children, each with a grandchild.
children() {
  local mode=$1 follow=$2 pre
  pre=$(settled_fds)
  # Each child waits for its release file: followed, it is released once
  # status lists it as a target, so however slow the machine, the agent had
  # the child before its work (the fallback's FORK record is read, and the
  # child attached, asynchronously). Unfollowed, all are released at once.
  local rel=$FP_TMP/c-$mode$follow.release
  [[ $follow == 1 ]] || touch "$rel.0" "$rel.1"
  fp_start_workload threadstorm "$FP_TMP/c-$mode$follow.out" "$FP_TMP/c-$mode$follow.ready" \
    --children 2 --grandchildren --cpu-ms 150 --go "$FP_TMP/c-$mode$follow.go" \
    --child-wait "$rel" --hold
  local P=$FP_WL_PID
  if [[ $follow == 1 ]]; then
    out=$(fp_ctl start "$P" --freq 250 --follow-children) || fp_fail "start --follow-children failed"
    [[ $out == *"following its child processes"* ]] || fp_fail "start did not say it follows children: $out"
  else
    fp_ctl start "$P" --freq 250 >/dev/null || fp_fail "start failed"
  fi
  touch "$FP_TMP/c-$mode$follow.go"
  if [[ $follow == 1 ]]; then
    local i
    for i in 0 1; do
      fp_wait_for 20 kids_at_least "$P" $((i + 1)) ||
        fp_fail "[$mode] child $i of $P was not followed within 20 s"
      touch "$rel.$i"
    done
  fi
  fp_wait_for 60 grep -q done "$FP_TMP/c-$mode$follow.out" || fp_fail "threadstorm's children did not finish"
  sleep 1.5 # the rescan timer marks exited children
  local json
  json=$(fp_status_json)
  KIDS=$(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
p = int(sys.argv[2])
t = {x["pid"]: x for x in d["targets"]}
kids = [x for x in d["targets"] if x["parent_pid"] == p]
grand = [x for x in d["targets"] if x["parent_pid"] in {k["pid"] for k in kids}]
bad = [x["comm"] for x in kids + grand if x["state"] != "exited" or x["threads"] != 0 or not x["follow_children"]]
print(len(kids), len(grand), len(d["targets"]), ",".join(bad) or "-")' "$json" "$P")
  read -r nk ng nt bad <<<"$KIDS"
  fp_ctl dump -o "$FP_TMP/c-$mode$follow.pb.gz" >/dev/null 2>&1 || fp_fail "dump failed"
  names=$(fp_pprofraw summary "$FP_TMP/c-$mode$follow.pb.gz" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(sorted(k for k in d["threads"] if k.startswith(("child-", "grandchild-")))) or "-")')
  if [[ $follow == 0 ]]; then
    [[ $nt == 1 && $names == - ]] || fp_fail "[$mode] children profiled without --follow-children: $nt targets, threads $names"
    fp_ok "[$mode] without --follow-children: 1 target, no child in the profile"
  else
    [[ $nk == 2 ]] || fp_fail "[$mode] $nk children followed, want 2 (status: $json)"
    [[ $bad == - ]] || fp_fail "[$mode] followed targets not exited with 0 threads and follow set: $bad"
    [[ $names == *child-0* && $names == *child-1* ]] || fp_fail "[$mode] children missing from the profile: $names"
    fp_pprofraw expect "$FP_TMP/c-$mode$follow.pb.gz" --thread-stack child-0:child_work \
      --thread-stack child-1:child_work >/dev/null || fp_fail "[$mode] child_work not on the children's stacks"
    if [[ $mode == bpf ]]; then
      [[ $ng == 2 && $names == *grandchild-0*grandchild-1* ]] ||
        fp_fail "[$mode] grandchildren: $ng followed, profile threads $names; want both"
      fp_pprofraw expect "$FP_TMP/c-$mode$follow.pb.gz" --thread-stack grandchild-0:grandchild_work \
        --thread-stack grandchild-1:grandchild_work >/dev/null || fp_fail "[$mode] grandchild_work missing"
    fi
    fp_ok "[$mode] --follow-children: $nk children and $ng of 2 grandchildren profiled as exited targets; threads in the profile: $names"
    # Stop the followed targets too.
    for pid in $(fp_status_json | python3 -c 'import json,sys; print(" ".join(str(t["pid"]) for t in json.load(sys.stdin)["targets"]))'); do
      fp_ctl stop "$pid" >/dev/null || fp_fail "stop $pid failed"
    done
  fi
  [[ $follow == 1 ]] || fp_ctl stop "$P" >/dev/null || fp_fail "stop $P failed"
  fp_kill "$P"
  c=$(wait_all_fds "$pre" 5) || fp_fail "[$mode] the agent holds $c fds after the children test, $pre before"
}

# ---- 4. bad input ---------------------------------------------------------
echo "=== bad input ==="
rc=0; err=$("$FP_AGENTCTL" --socket "$FP_TMP/none.sock" status --follow-children 2>&1) || rc=$?
[[ $rc == 2 && $err == *"unknown or incomplete option '--follow-children' for status"* ]] ||
  fp_fail "status --follow-children: exit $rc, '$err'"
rc=0; err=$("$FP_AGENTCTL" --socket "$FP_TMP/none.sock" start --follow-children 2>&1) || rc=$?
[[ $rc == 2 && $err == *"start needs a PID"* ]] || fp_fail "start --follow-children without PID: exit $rc, '$err'"
# --no-bpf is a boolean setting (no-bpf = true in agent.conf): --no-bpf=yes
# is fine, a value that is no boolean is one clear line and exit 2.
rc=0; err=$(timeout 10 "$FP_AGENT" --no-bpf=maybe --foreground --socket "$FP_TMP/x.sock" 2>&1) || rc=$?
[[ $rc == 2 && $err == *"not a boolean"* ]] || fp_fail "--no-bpf=maybe: exit $rc, '$err'"
fp_ok "bad flags get one line and exit 2"

# ---- BPF not permitted ----------------------------------------------------
echo "=== an unprivileged agent: BPF not permitted ==="
if command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
  np=$FP_TMP/np
  mkdir -p "$np" && chmod 777 "$np"
  setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$FP_AGENT" --foreground \
    --socket "$np/agent.sock" --store none >"$np/agent.log" 2>&1 &
  NP=$!
  fp_track "$NP"
  fp_wait_for 15 test -S "$np/agent.sock" || fp_fail "the unprivileged agent did not start: $(cat "$np/agent.log")"
  grep -q "thread tracker: perf-fork fallback (loading BPF programs is not permitted: " "$np/agent.log" ||
    fp_fail "the unprivileged agent did not log why it falls back: $(cat "$np/agent.log")"
  out=$(fp_timeout 30 "$FP_AGENTCTL" --socket "$np/agent.sock" status) || fp_fail "status of the unprivileged agent failed"
  grep -q "^thread tracker: perf-fork (fallback: loading BPF programs is not permitted" <<<"$out" ||
    fp_fail "status of the unprivileged agent does not name the fallback: $out"
  fp_kill "$NP"
  fp_ok "an agent without the right to load BPF falls back and says why"
else
  fp_log "setpriv or user nobody missing: unprivileged fallback not checked"
fi

# ---- BPF ------------------------------------------------------------------
echo "=== BPF tracker ==="
# With a store and 1 s buckets: dead threads' records are pruned once their
# samples are in the store, and the dump must still name every thread.
fp_start_agent --bucket 1
grep -q "thread tracker: bpf" "$FP_TMP/agent.log" || fp_fail "the agent did not log the bpf tracker: $(cat "$FP_TMP/agent.log")"
[[ $(tracker_field name) == bpf ]] || fp_fail "status --json thread_tracker.name is $(tracker_field name), want bpf"
fp_ctl status | grep -q "^thread tracker: bpf" || fp_fail "status does not say 'thread tracker: bpf'"
fp_ok "status names the bpf tracker"
storm bpf
BPF_SEEN=$SEEN
((BPF_SEEN >= 190)) || fp_fail "[bpf] only $BPF_SEEN of 200 short-lived threads are in the profile, want >= 190 (95%)"
fp_ok "[bpf] $BPF_SEEN of 200 short-lived threads in the profile"
children bpf 0
children bpf 1
fp_stop_agent

# ---- --follow-children survives an agent restart --------------------------
echo "=== resume with --follow-children ==="
fp_start_agent
fp_start_workload threadstorm "$FP_TMP/r.out" "$FP_TMP/r.ready" --children 1 --cpu-ms 100 \
  --go "$FP_TMP/r.go" --hold
RP=$FP_WL_PID
fp_ctl start "$RP" --follow-children >/dev/null || fp_fail "start --follow-children $RP failed"
fp_stop_agent
fp_start_agent
grep -q "resumed profiling $RP" "$FP_TMP/agent.log" || fp_fail "the restarted agent did not resume $RP"
[[ $(fp_target_field "$RP" follow_children) == true ]] || fp_fail "the resumed target does not follow children"
touch "$FP_TMP/r.go"
fp_wait_for 30 grep -q done "$FP_TMP/r.out" || fp_fail "threadstorm's child did not finish"
n=$(fp_status_json | python3 -c 'import json,sys; print(sum(1 for t in json.load(sys.stdin)["targets"] if t["parent_pid"] == int(sys.argv[1])))' "$RP")
[[ $n == 1 ]] || fp_fail "the resumed target's child was not followed ($n)"
fp_ok "a target started with --follow-children is resumed following them, and follows its next child"
fp_stop_agent
fp_kill "$RP"

# ---- fallback -------------------------------------------------------------
echo "=== perf-fork fallback (--no-bpf) ==="
fp_start_agent --store none --no-bpf
grep -q "thread tracker: perf-fork fallback (disabled by --no-bpf)" "$FP_TMP/agent.log" ||
  fp_fail "the agent did not log why it uses the fallback: $(cat "$FP_TMP/agent.log")"
[[ $(tracker_field name) == perf-fork && $(tracker_field reason) == "disabled by --no-bpf" ]] ||
  fp_fail "status --json thread_tracker is $(tracker_field name)/$(tracker_field reason)"
fp_ctl status | grep -q "^thread tracker: perf-fork (fallback: disabled by --no-bpf)" ||
  fp_fail "status does not name the fallback"
fp_ok "status names the perf-fork fallback and why"
storm fallback
((SEEN >= 160)) || fp_fail "[fallback] only $SEEN of 200 short-lived threads are in the profile, want >= 160 (80%)"
fp_ok "[fallback] $SEEN of 200 short-lived threads in the profile (bpf: $BPF_SEEN)"
children fallback 1
fp_stop_agent
