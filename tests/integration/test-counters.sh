#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Counter groups: `start --event cpu-clock,page-faults,context-switches`
# samples with cpu-clock and counts the others per stack. The workload
# (tests/workloads/faults) alternates a function that takes a page fault on
# every page it touches with one that only computes, and measures its own
# CPU time and faults per function. The page-faults sample type must sit
# (>= 90 %) on the faulting function while the CPU time splits as measured;
# the same with page-faults leading the group. Also: the counters in status
# (with the share of time they ran), in `dump --format top` and in a dump
# read from the store file; four perf fds per thread for a three-event
# group (one more while a thread's random first period waits for its first
# sample); resuming a group after an agent restart; the errors for a
# hardware event on a machine without PMU and for bad lists; --best-effort;
# page-faults and context-switches leading a target whose 300 threads are
# born one after another: totals within 20% of the process's own count.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 280
fp_require_go

SECS=4
fp_start_agent

# ---- bad lists and missing hardware ----
fp_start_workload faults "$FP_TMP/idle.out" "$FP_TMP/idle.ready" --seconds 60 --wait-for-start "$FP_TMP/never"
IDLE=$FP_WL_PID

expect_fail() { # STATUS PATTERN ARGS...
  local want=$1 pat=$2 rc=0 err
  shift 2
  err=$(fp_ctl "$@" 2>&1 >/dev/null) || rc=$?
  [[ $rc -eq $want ]] || fp_fail "agentctl $* exited $rc (want $want): $err"
  [[ $err == *"$pat"* ]] || fp_fail "agentctl $*: '$err' does not say '$pat'"
  fp_log "agentctl $* -> $err"
}
expect_fail 2 "unknown event 'foo' in --event list" start "$IDLE" --event cpu-clock,foo
expect_fail 2 "event 'cs' appears twice in --event list" start "$IDLE" --event context-switches,cs
expect_fail 2 "too many events" start "$IDLE" --event cpu-clock,page-faults,cs,cpu-migrations,minor-faults,major-faults,alignment-faults,emulation-faults,task-clock
fp_ok "bad event lists are refused with one clear line"

if [[ ! -e /sys/bus/event_source/devices/cpu && ! -e /sys/bus/event_source/devices/cpu_core ]]; then
  expect_fail 1 "event 'cycles' is not supported on this machine: no hardware PMU is exposed" \
    start "$IDLE" --event cycles --period 1000000
  expect_fail 1 "event 'instructions' is not supported on this machine: no hardware PMU is exposed" \
    start "$IDLE" --event cpu-clock,page-faults,instructions
  expect_fail 1 "event 'r00c0' is not supported on this machine" start "$IDLE" --event cpu-clock,r00c0
  expect_fail 1 "it leads the group, so --best-effort cannot leave it out" \
    start "$IDLE" --event cycles,cpu-clock --best-effort
  [[ $(fp_target_field "$IDLE" pid) == absent ]] || fp_fail "a refused start left a target behind"
  fp_ok "hardware events are refused on a machine without PMU (exit 1)"

  out=$(fp_ctl start "$IDLE" --event cpu-clock,cycles,page-faults --best-effort) ||
    fp_fail "start --best-effort failed"
  fp_log "start --best-effort: $out"
  [[ $out == *"counting page-faults; left out (not supported on this machine): cycles"* ]] ||
    fp_fail "start --best-effort does not say that cycles was left out: $out"
  [[ $(fp_target_field "$IDLE" left_out) == '["cycles"]' ]] || fp_fail "status --json left_out is $(fp_target_field "$IDLE" left_out)"
  [[ $(fp_target_field "$IDLE" events) == cpu-clock,page-faults ]] || fp_fail "status --json events is $(fp_target_field "$IDLE" events)"
  grep -q "^$IDLE: left out (not supported on this machine): cycles$" <<<"$(fp_ctl status)" ||
    fp_fail "status does not show what was left out: $(fp_ctl status)"
  fp_ctl stop "$IDLE" >/dev/null
  fp_ok "--best-effort profiles with what the machine has and says what it left out"
else
  fp_log "this machine has a hardware PMU: the missing-hardware checks do not apply"
fi
# group_fds PID PER: the agent holds PER perf fds for each of PID's threads, plus one
# for each thread whose random first period's starter still waits for its sample
# (status first_period.pending, read before and after the count), plus the bridge's
# one per CPU (status bridge.cpus).
group_fds() {
  local nt p1 p2 f b
  nt=$(ls /proc/"$1"/task | wc -l)
  p1=$(fp_target_field "$1" first_period | python3 -c 'import json,sys; print(json.load(sys.stdin)["pending"])')
  b=$(fp_status_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["bridge"]["cpus"])')
  f=$(($(fp_perf_fds "$FP_AGENT_PID") - b))
  p2=$(fp_target_field "$1" first_period | python3 -c 'import json,sys; print(json.load(sys.stdin)["pending"])')
  ((f >= $2 * nt + p2 && f <= $2 * nt + p1)) ||
    fp_fail "the agent holds $f perf fds for $nt threads, want $2 each plus $p1-$p2 starters"
  echo "$f"
}
out=$(fp_ctl start "$IDLE" --event context-switches,cpu-migrations,minor-faults,major-faults) ||
  fp_fail "software counters as leader and members failed to start"
group_fds "$IDLE" 5 >/dev/null
fp_ctl stop "$IDLE" >/dev/null
fp_kill "$IDLE"
fp_ok "software counters lead and ride along; one fd per event plus the side-band per thread"

# ---- cpu-clock leads, page-faults and context-switches counted ----
TRUTH=$FP_TMP/truth.json
fp_start_workload faults "$FP_TMP/wl.out" "$FP_TMP/wl.ready" --seconds "$SECS" --truth "$TRUTH" \
  --wait-for-start "$FP_TMP/go" --hold
PID=$FP_WL_PID
NT=$(ls /proc/"$PID"/task | wc -l)
out=$(fp_ctl start "$PID" --event cpu-clock,page-faults,context-switches --freq 999) || fp_fail "start failed"
fp_log "start: $out"
[[ $out == *"counting page-faults, context-switches"* ]] || fp_fail "start does not list the counters: $out"
FDS=$(group_fds "$PID" 4) # 3 events + side-band each
fp_ok "3-event group: $FDS perf fds for $NT threads (4 per thread)"
touch "$FP_TMP/go"
fp_wait_for $((SECS + 30)) test -s "$TRUTH" || fp_fail "the workload did not write its truth"
fp_wait_samples_settle "$PID"
fp_log "truth: $(cat "$TRUTH")"

json=$(fp_status_json)
python3 - "$json" "$PID" <<'PY' || fp_fail "status --json does not show the counters as expected"
import json, sys
d = json.loads(sys.argv[1]); pid = int(sys.argv[2])
t = [t for t in d["targets"] if t["pid"] == pid][0]
c = {x["event"]: x for x in t["counters"]}
print("status counters:", c)
assert t["events"] == "cpu-clock,page-faults,context-switches", t["events"]
assert set(c) == {"page-faults", "context-switches"}
assert c["page-faults"]["value"] > 10000 and c["page-faults"]["unit"] == "count"
assert c["context-switches"]["value"] > 0
assert all(x["running_percent"] == 100.0 for x in c.values())  # software: never multiplexed
assert t["time_enabled_ns"] == t["time_running_ns"] > 0
PY
line=$(fp_ctl status | grep "^counters of $PID:") || fp_fail "status shows no counters line"
[[ $line == *"page-faults "*"(ran 100.0%)"*"context-switches "*"(ran 100.0%)"* ]] ||
  fp_fail "status counters line: $line"
fp_ok "status: $line"

check_profile() { # FILE MODE
  fp_pprof -raw -symbolize=none "$1" >"$1.raw" 2>"$FP_TMP/pprof.err" ||
    fp_fail "go tool pprof -raw rejected $1: $(cat "$FP_TMP/pprof.err")"
  python3 - "$1.raw" "$TRUTH" "$2" "$FP_SRC/tests/integration" <<'PY'
import json, re, sys
sys.path.insert(0, sys.argv[4])
import pprofraw
p = pprofraw.load(sys.argv[1], is_raw_text=True)
truth = json.load(open(sys.argv[2]))["functions"]
mode = sys.argv[3]
types = ["%s/%s" % t for t in p.sample_types]
print(mode, "sample types:", types)
want = {"group": ["samples/count", "cpu/nanoseconds", "page-faults/count", "context-switches/count"],
        "faults-lead": ["samples/count", "page-faults/count", "cpu-clock/nanoseconds"]}[mode]
assert types == want, types
# libc's mmap/munmap/madvise have no frame pointer: their caller (fault_touch) is skipped.
FAULT = {"fault_touch", "__munmap", "__mmap", "__madvise", "munmap", "mmap", "madvise"}
def side(s):
    if FAULT & set(s.stack): return "fault"
    if "compute_only" in s.stack: return "compute"
    return "other"
def split(value):
    vi = p.value_index(value)
    out = {"fault": 0, "compute": 0, "other": 0}
    for s in p.samples:
        out[side(s)] += s.values[vi]
    return out
pf = split("page-faults")
tot = sum(pf.values())
share = 100.0 * pf["fault"] / tot if tot else 0
print("page-faults by side:", pf, "fault share %.1f%%" % share)
assert share >= 90, "page-faults not on the faulting function"
tf = truth["fault_touch"]["minor_faults"]
# Samples the kernel dropped (the agent starved on a loaded machine: its ring
# full) are counted, each one period of faults: kept plus counted is the truth.
lost = sum(int(x) for c in p.comments for x in re.findall(r"lost records (\d+)", c))
counted = tot + (lost * 50 if mode == "faults-lead" else 0)
print("page-faults in the profile %d (+ %d lost samples counted), measured by the workload %d "
      "(ratio %.3f)" % (tot, lost, tf, counted / tf))
assert 0.85 <= counted / tf <= 1.25, "page-fault total differs from the workload's count"
if mode == "faults-lead":
    # One sample per 50 faults, not one per fault (the kernel samples a software
    # event at every event when asked for its period: the agent must not ask).
    n = p.total("samples")
    print("samples %d for %d faults at --period 50 (%.1f faults a sample)" % (n, tf, tf / max(n, 1)))
    assert 40 <= tf / max(n, 1) <= 60, "a page-faults leader at --period 50 is not sampled every 50 faults"
t_fault, t_comp = truth["fault_touch"]["cpu_ns"], truth["compute_only"]["cpu_ns"]
if mode == "faults-lead":
    # Samples happen only where faults do, so the CPU time counted between two
    # samples lands on the faulting side: that is what sampling on faults means.
    # What must hold is the total: the thread's CPU time, counted in the group.
    cpu = split("cpu-clock")
    ratio = sum(cpu.values()) / (t_fault + t_comp)
    print("cpu-clock counted %.3fs, the workload measured %.3fs (ratio %.3f)" %
          (sum(cpu.values()) / 1e9, (t_fault + t_comp) / 1e9, ratio))
    assert 0.9 <= ratio <= 1.15, "the cpu-clock counter's total differs from the truth"
else:
    cpu = split("cpu")
    p_share = 100.0 * cpu["fault"] / (cpu["fault"] + cpu["compute"])
    t_share = 100.0 * t_fault / (t_fault + t_comp)
    print("cpu share of the faulting side: profile %.1f%%, truth %.1f%%" % (p_share, t_share))
    assert abs(p_share - t_share) <= 7, "cpu split differs from the truth"
if mode == "group":
    cs = split("context-switches")
    print("context-switches by side:", cs)
    assert sum(cs.values()) > 0
PY
}

fp_ctl dump "$PID" -o "$FP_TMP/group.pb.gz" 2>/dev/null || fp_fail "dump failed"
check_profile "$FP_TMP/group.pb.gz" group || fp_fail "the group profile is not as measured"
fp_pprof -top -symbolize=none -sample_index=page-faults "$FP_TMP/group.pb.gz" >"$FP_TMP/top.txt" 2>&1 ||
  fp_fail "go tool pprof -sample_index=page-faults failed: $(cat "$FP_TMP/top.txt")"
grep -q "Type: page-faults" "$FP_TMP/top.txt" || fp_fail "pprof -sample_index=page-faults: $(head "$FP_TMP/top.txt")"
fp_ok "page-faults sit on the faulting function, cpu splits as measured; pprof -sample_index=page-faults works"

top=$(fp_ctl dump "$PID" --format top) || fp_fail "dump --format top failed"
for pat in "Counters (each a sample type" "page-faults " "context-switches " "per CPU-second" "Counters per function"; do
  grep -qF -- "$pat" <<<"$top" || fp_fail "dump --format top lacks '$pat': $top"
done
grep -q "^ *[0-9.]*s  *[0-9][0-9]*  *[0-9][0-9]*  fault_touch$" <<<"$top" || fp_fail "no fault_touch row in the per-function counters: $top"
grep -q "IPC" <<<"$top" && fp_fail "dump --format top shows IPC without instructions and cycles"
fp_ok "dump --format top shows the counters"

# The same from the store, without the agent's help; and a group resumed after a restart.
fp_ctl flush >/dev/null || fp_fail "flush failed"
"$FP_AGENTCTL" dump "$PID" --store "$FP_TMP/agent.db" -o "$FP_TMP/store.pb.gz" 2>"$FP_TMP/store-dump.err" || fp_fail "dump --store failed: $(cat "$FP_TMP/store-dump.err")"
check_profile "$FP_TMP/store.pb.gz" group || fp_fail "the group profile read from the store is not as measured"
fp_ok "the store keeps each counter: dump --store gives the same sample types"
fp_stop_agent
fp_start_agent
fp_wait_for 10 test "$(fp_target_field "$PID" events)" == cpu-clock,page-faults,context-switches ||
  fp_fail "the restarted agent did not resume the group: $(fp_target_field "$PID" events)"
fp_ok "a restarted agent resumes the group"
fp_ctl stop "$PID" >/dev/null
fp_kill "$PID"

# ---- page-faults leads: a sample every 50 faults, cpu-clock counted ----
rm -f "$TRUTH" "$FP_TMP/go"
fp_start_workload faults "$FP_TMP/wl2.out" "$FP_TMP/wl2.ready" --seconds "$SECS" --truth "$TRUTH" \
  --wait-for-start "$FP_TMP/go" --hold
PID=$FP_WL_PID
out=$(fp_ctl start "$PID" --event page-faults,cpu-clock --period 50) || fp_fail "start with page-faults leading failed"
fp_log "start: $out"
[[ $out == *"with page-faults at every 50 events"*"counting cpu-clock"* ]] || fp_fail "start: $out"
touch "$FP_TMP/go"
fp_wait_for $((SECS + 30)) test -s "$TRUTH" || fp_fail "the workload did not write its truth"
sleep 1
fp_ctl dump "$PID" -o "$FP_TMP/lead.pb.gz" 2>/dev/null || fp_fail "dump failed"
check_profile "$FP_TMP/lead.pb.gz" faults-lead || fp_fail "the page-faults-led profile is not as measured"
fp_ctl stop "$PID" >/dev/null
fp_ok "page-faults as the sampling leader, cpu-clock as its counter"
fp_kill "$PID"
fp_stop_agent

# ---- a counter leads, hundreds of threads born one after another ----
# Each thread of threadstorm maps and touches 100 pages and naps 20 times
# right from its start, before its own counter can be open (on a busy
# machine that takes milliseconds), and in a burst faster than the agent
# can switch from its random first period to its group: what its samples
# do not hold comes from the kernel's per-thread account, read just before
# its counter opens and at its exit ("[thread start]"). The profile's total of the leading counter matches
# what the process counted itself (getrusage from go to done) within 20%.
# The bridge's ticks and the threads' exit tails are CPU time and stay out
# of a count (they were added as 1,000,000 page faults each: 2,800 times
# the truth).
fp_start_agent
for lead in page-faults:50 context-switches:10; do
  ev=${lead%%:*} period=${lead##*:}
  rm -f "$FP_TMP/go"
  "$FP_BUILD/tests/threadstorm" --threads 300 --cpu-us 300 --touch-pages 100 --naps 20 \
    --go "$FP_TMP/go" --hold >"$FP_TMP/storm-$ev.out" 2>"$FP_TMP/storm-$ev.err" &
  PID=$!
  fp_track "$PID"
  fp_wait_for 10 test -s "$FP_TMP/storm-$ev.out" || fp_fail "threadstorm did not start"
  fp_ctl start "$PID" --event "$ev" --period "$period" >/dev/null || fp_fail "start --event $ev failed"
  touch "$FP_TMP/go"
  fp_wait_for 60 grep -q '^done' "$FP_TMP/storm-$ev.out" || fp_fail "threadstorm did not finish"
  sleep 1.5 # its last samples drained (each thread's ring at least every second)
  fp_ctl dump "$PID" -o "$FP_TMP/storm-$ev.pb.gz" 2>/dev/null || fp_fail "dump failed"
  fp_ctl status >"$FP_TMP/storm-$ev.status"
  fp_ctl stop "$PID" >/dev/null
  fp_kill "$PID"
  fp_untrack "$PID"
  got=$(fp_profile_total "$FP_TMP/storm-$ev.pb.gz" "$ev")
  read -r _ minflt nvcsw nivcsw <<<"$(grep '^rusage' "$FP_TMP/storm-$ev.out")"
  truth=$([[ $ev == page-faults ]] && echo "$minflt" || echo $((nvcsw + nivcsw)))
  python3 -c "import sys; got, truth = int(sys.argv[1]), int(sys.argv[2]); sys.exit(0 if truth > 0 and abs(got - truth) <= 0.2 * truth else 1)" "$got" "$truth" ||
    fp_fail "$ev-led, 300 born threads: the profile holds $got $ev, the process counted $truth: $(grep 'left out\|born' "$FP_TMP/storm-$ev.status" || true)"
  grep -q "additions from the kernel's account, under \[thread start\]; .* bridge ticks (.* ms of CPU) left out of a count" "$FP_TMP/storm-$ev.status" ||
    fp_fail "status does not say what a counter's profile leaves out: $(cat "$FP_TMP/storm-$ev.status")"
  fp_ok "$ev leads, 300 born threads: $got $ev in the profile, $truth counted by the process"
done
fp_stop_agent

# ---- perf_event_paranoid and capabilities ----
if [[ $(cat /proc/sys/kernel/perf_event_paranoid) -ge 2 ]] && command -v capsh >/dev/null; then
  # The agent without CAP_PERFMON and CAP_SYS_ADMIN, as a service granted less would run.
  FP_AGENT_REAL=$FP_AGENT
  FP_AGENT=$FP_TMP/agent-nocaps
  printf '#!/bin/sh\nexec capsh --drop=cap_perfmon,cap_sys_admin -- -c '"'"'exec "$0" "$@"'"'"' %q "$@"\n' \
    "$FP_AGENT_REAL" >"$FP_AGENT"
  chmod +x "$FP_AGENT"
  fp_start_agent --store none
  fp_start_workload faults "$FP_TMP/cap.out" "$FP_TMP/cap.ready" --seconds 60 --wait-for-start "$FP_TMP/never"
  expect_fail 1 "kernel frames (--kernel) are not permitted: perf_event_paranoid is" start "$FP_WL_PID" --kernel
  out=$(fp_ctl start "$FP_WL_PID" --event cpu-clock,page-faults) || fp_fail "start without --kernel failed"
  [[ $out == *"(kernel-mode samples not permitted: user time only)"*"in user mode only"* ]] ||
    fp_fail "start does not say that only user mode is counted: $out"
  fp_log "start: $out"
  fp_ctl stop "$FP_WL_PID" >/dev/null
  fp_stop_agent
  FP_AGENT=$FP_AGENT_REAL
  fp_ok "without CAP_PERFMON at paranoid >= 2: --kernel refused clearly, user-mode counting said"
fi
