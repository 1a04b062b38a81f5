#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The host tier's off-CPU time (agentctl start --host --off-cpu): every
# process's waits, by stack and reason, without naming a process.
#
# 1. At T = 1 ms the `waits` workload (started after the tier, named by
#    nobody) shows each function's off-CPU time within 6% of what its
#    threads measured (the spinners: together within 8% of the kernel's
#    run-queue wait, each within 15%; the host tier copies a preempted
#    thread's stack every 16th time, weighing 16: exact for even
#    preemptions, not for those a CPU-bound job beside them makes), the
#    same reasons and callers as a target's profile, and 95% of the
#    tier's stacks reach their root; every stack copy meets its weights
#    (none unpaired). Status says so.
# 2. Counted once: a process a target profiles with --off-cpu has its
#    waits in the target, none in the tier; one a target profiles without
#    --off-cpu has its waits counted by the tier as
#    offcpu_covered_by_target, none kept (both wait in wait_disk, which
#    no other process here calls).
# 2b. A unit's service from its waits: a process that moves into a unit's
#    cgroup, then execs /bin/sleep (as systemd starts every service: fork,
#    cgroup, exec) has its 2 s of sleep under the unit's service, though
#    the tier never catches it on a CPU to learn its new cgroup.
# 3. stop --host unloads the BPF side (no target needs it).
# 4. Stored and uploaded: the tier's buckets hold event off-cpu with the
#    wait label; after the tier stopped the agent dumps part 1's waits
#    from its store (off-cpu and wall), and the collector serves them by
#    process name.
#    (The tier is started without off-CPU time first, as the package's
#    configuration starts it: the start with --off-cpu adds it to the
#    running tier; one with another --freq is refused, saying how.)
# 5. Refusals in one line: --off-cpu-period without --off-cpu, out of
#    range; a kernel without BTF (the agent in a mount namespace where
#    /sys/kernel/btf is empty): the tier is not started, and an agent told
#    host-off-cpu in its configuration logs why.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=host-offcpu
fp_init 200
fp_require_go
WAITS=$FP_BUILD/tests/waits
[[ -x $WAITS ]] || fp_fail "missing $WAITS"
CHECK=$(dirname "$0")/offcpu_check.py

# run_waits TAG SECONDS ARGS...: starts waits (held at its start), sets WP.
run_waits() {
  local tag=$1 seconds=$2
  shift 2
  fp_start_workload waits "$FP_TMP/$tag.out" "$FP_TMP/$tag.ready" --seconds "$seconds" \
    --truth "$FP_TMP/$tag.truth" --wait-for-start "$FP_TMP/$tag.go" --dir "$FP_TMP" "$@"
  WP=$FP_WL_PID
}

host_json() { fp_status_json | fp_json_get "$1"; }

PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/collector.db"
fp_start_agent --bucket 2 --collector "$URL" --upload-interval 5

# ---- 1. every process's waits, each in its function ----
# The tier runs first without off-CPU time, as the package's configuration starts
# it; a start with --off-cpu adds it to the running tier, one with a rate that
# applies only at the tier's start says in its one line how to change that.
out=$(fp_ctl start --host) || fp_fail "start --host failed"
[[ $out == *"host tier: sampling every process"* ]] || fp_fail "start --host: $out"
rc=0
out=$(fp_ctl start --host --freq 7 --off-cpu 2>&1) || rc=$?
[[ $rc != 0 && $(wc -l <<<"$out") == 1 && $out == *"running already"*"agentctl stop --host"* ]] ||
  fp_fail "start --host --freq 7 on a running tier: exit $rc, $out"
[[ $(host_json 'd["host_tier"]["off_cpu"]') == None ]] || fp_fail "a refused start changed the tier's off-CPU time"
out=$(fp_ctl start --host --off-cpu --off-cpu-period 1000000) || fp_fail "start --host --off-cpu on the running tier failed"
[[ $out == *"its off-CPU time added (a wait kept with probability d/1 ms)"* ]] ||
  fp_fail "start does not say the tier profiles off-CPU time: $out"
fp_log "$out"
run_waits all 6 --only wait_sleep,wait_long,wait_pipe,wait_mutex,spin_contend --spinners 2
touch "$FP_TMP/all.go"
fp_wait_for 60 test -e "$FP_TMP/all.truth" || fp_fail "waits wrote no truth"
sleep 0.3 # the last records: the agent reads the ring every 100 ms
fp_ctl dump --host --event off-cpu -o "$FP_TMP/all.pb.gz" >/dev/null || fp_fail "dump --host --event off-cpu failed"
fp_ctl status >"$FP_TMP/all.status"
fp_status_json >"$FP_TMP/all.json"
grep -q "^off-CPU: bpf, 0 processes and the host tier, " "$FP_TMP/all.status" ||
  fp_fail "status has no off-CPU line for the host tier: $(cat "$FP_TMP/all.status")"
grep "^host tier off-CPU: " "$FP_TMP/all.status" || fp_fail "status has no host tier off-CPU line"
python3 - "$FP_TMP/all.json" <<'EOF' || fp_fail "status --json host_tier.off_cpu is wrong"
import json, sys
h = json.load(open(sys.argv[1]))["host_tier"]
o = h["off_cpu"]
print("host tier: %d of %d stacks to the root, %d of %d block parts kept, %d records, lost %d ns, %d unpaired" % (
    o["stacks_to_root"], o["stacks"], o["kept"], o["parts"], o["records"], o["lost_ns"],
    o["lost_unpaired"]))
assert o["period_ns"] == 1000000, o
assert o["stacks"] > 100 and o["stacks_to_root"] >= 0.95 * o["stacks"], o
assert o["samples"] > 0 and o["kept"] <= o["parts"], o
assert o["lost_ns"] <= 0.01 * o["value_ns"], o
assert o["lost_unpaired"] <= 0.001 * o["kept"], o  # each stack waits for its weights
EOF
python3 "$CHECK" "$FP_TMP/all.pb.gz" "$FP_TMP/all.truth" --runq-tolerance 0.08 --runq-each-tolerance 0.15 \
  --reason w-sleep=sleep:0.75 --reason w-long=sleep:0.75 --reason w-pipe=sleep:0.75 \
  --reason w-mutex=sleep:0.75 --reason w-spin-0=runqueue:0.999 --reason w-spin-1=runqueue:0.999 \
  --caller wait_sleep=waiter --caller wait_long=waiter --caller wait_pipe=waiter \
  --caller wait_mutex=waiter --caller spin_contend=spinner ||
  fp_fail "the host tier's off-CPU profile does not match the workload's own measurements"
fp_ok "the host tier: each function's waits within 6% of the workload's measurements"
fp_kill "$WP"

# ---- 2. counted once ----
run_waits tgt 3 --only wait_disk
TP=$WP
run_waits cov 3 --only wait_disk
CP=$WP
fp_ctl start "$TP" --off-cpu --off-cpu-period 1000000 >/dev/null || fp_fail "start $TP --off-cpu failed"
fp_ctl start "$CP" >/dev/null || fp_fail "start $CP failed"
covered0=$(host_json 'd["host_tier"]["off_cpu_covered_by_target"]')
touch "$FP_TMP/tgt.go" "$FP_TMP/cov.go"
fp_wait_for 30 test -e "$FP_TMP/tgt.truth" || fp_fail "waits (tgt) wrote no truth"
fp_wait_for 30 test -e "$FP_TMP/cov.truth" || fp_fail "waits (cov) wrote no truth"
sleep 0.3
fp_ctl dump --host --event off-cpu --format folded >"$FP_TMP/once.host" || fp_fail "dump --host failed"
fp_ctl dump "$TP" --event off-cpu -o "$FP_TMP/tgt.pb.gz" >/dev/null || fp_fail "dump $TP failed"
covered=$(host_json 'd["host_tier"]["off_cpu_covered_by_target"]')
python3 "$CHECK" "$FP_TMP/tgt.pb.gz" "$FP_TMP/tgt.truth" --only w-disk --tolerance 0.1 --wakeup-skew w-disk=15 ||
  fp_fail "the target's own off-CPU profile is wrong beside the host tier"
[[ -s $FP_TMP/once.host ]] || fp_fail "the host tier's off-CPU profile is empty"
if grep -q "wait_disk" "$FP_TMP/once.host"; then
  fp_fail "a target's process is in the host tier's off-CPU profile: $(grep wait_disk "$FP_TMP/once.host" | head -3)"
fi
((covered > covered0)) || fp_fail "the waits of a target without --off-cpu were not counted as covered ($covered0 -> $covered)"
fp_ok "counted once: the target's waits in the target, a CPU-only target's counted as covered ($((covered - covered0)) block parts)"
fp_ctl stop "$TP" >/dev/null 2>&1 || true
fp_ctl stop "$CP" >/dev/null 2>&1 || true
fp_kill "$TP"
fp_kill "$CP"

# ---- 2b. a unit's service from its waits ----
cg=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)
[[ -n $cg ]] || fp_fail "no cgroup v2 hierarchy is mounted"
units=$cg/fleetprof-hostofftest-$$
svc=fptest-hostoff-sleep
mkdir -p "$units/$svc.service"
fp_on_exit "kill -KILL \$(cat '$units'/*/cgroup.procs 2>/dev/null) 2>/dev/null; sleep 0.2; rmdir '$units'/* '$units' 2>/dev/null"
sh -c 'echo $$ >"$1/cgroup.procs" && exec /bin/sleep 2' sh "$units/$svc.service"
sleep 0.3 # the last records: the agent reads the ring every 100 ms
fp_ctl dump --host --event off-cpu --service "$svc" -o "$FP_TMP/unit.pb.gz" >/dev/null ||
  fp_fail "dump --host --service $svc failed"
python3 -c 'import sys
sys.path.insert(0, sys.argv[1])
import pprofraw
p = pprofraw.load(sys.argv[2])
vi = p.value_index("off-cpu")
ns = sum(s.values[vi] for s in p.samples if s.labels.get("process") == ["sleep"])
print("%.0f ms of sleep off-CPU under its unit" % (ns / 1e6))
sys.exit(0 if 1.8e9 <= ns <= 2.2e9 else 1)' "$(dirname "$0")" "$FP_TMP/unit.pb.gz" >"$FP_TMP/unit.out" ||
  fp_fail "a unit's only waiting process is not under its service: $(cat "$FP_TMP/unit.out")"
fp_ok "a unit's service from its waits: $(cat "$FP_TMP/unit.out") (2000 ms slept)"

# ---- 3. the BPF side unloads with the tier ----
fp_ctl stop --host >/dev/null || fp_fail "stop --host failed"
fp_ctl status >"$FP_TMP/stopped.status"
if grep -q "^off-CPU: bpf" "$FP_TMP/stopped.status"; then
  fp_fail "the off-CPU side still runs after stop --host"
fi
grep -q "off-CPU profiler unloaded" "$FP_TMP/agent.log" || fp_fail "the agent did not unload the off-CPU profiler"
fp_ok "stop --host unloads the off-CPU profiler"

# ---- 4. stored and uploaded ----
fp_ctl dump --host --event off-cpu -o "$FP_TMP/stored.pb.gz" >/dev/null ||
  fp_fail "dump --host --event off-cpu from the store failed"
python3 "$CHECK" "$FP_TMP/stored.pb.gz" "$FP_TMP/all.truth" --runq-tolerance 0.08 --runq-each-tolerance 0.15 \
  --reason w-sleep=sleep:0.75 --reason w-spin-0=runqueue:0.999 ||
  fp_fail "the stored host off-CPU profile does not match the workload"
fp_ctl dump --host --event wall --format top >"$FP_TMP/stored.wall" ||
  fp_fail "dump --host --event wall from the store failed"
grep -q "^Type: wall" "$FP_TMP/stored.wall" && grep -q "wait_pipe" "$FP_TMP/stored.wall" ||
  fp_fail "the stored wall profile has no wait_pipe: $(head -20 "$FP_TMP/stored.wall")"
fp_ctl flush >/dev/null || fp_fail "flush failed"
curl -sf "$URL/api/v1/profile?process=waits&event=off-cpu" -o "$FP_TMP/coll.pb.gz" ||
  fp_fail "the collector has no host tier off-CPU profile of waits"
python3 "$CHECK" "$FP_TMP/coll.pb.gz" "$FP_TMP/all.truth" --runq-tolerance 0.08 --runq-each-tolerance 0.15 \
  --reason w-sleep=sleep:0.75 --reason w-pipe=sleep:0.75 ||
  fp_fail "the collector's host tier off-CPU profile does not match the workload"
fp_ok "stored and uploaded: the host tier's off-CPU time from the store and from the collector"

# ---- 5. refusals ----
refuse() { # refuse WANT ARGS...: exit 1 (the agent) or 2 (agentctl), one line holding WANT
  local want=$1 rc=0 msg
  shift
  msg=$(fp_ctl "$@" 2>&1) || rc=$?
  [[ ($rc -eq 1 || $rc -eq 2) && $(wc -l <<<"$msg") -eq 1 && $msg == *"$want"* ]] ||
    fp_fail "'agentctl $*': rc $rc, '$msg' (want '$want')"
  fp_ok "agentctl $*: $msg"
}
refuse "--off-cpu-period needs --off-cpu" start --host --off-cpu-period 1000000
refuse "invalid --off-cpu-period" start --host --off-cpu --off-cpu-period 999
refuse "invalid --off-cpu-period" start --host --off-cpu --off-cpu-period 1000000001
[[ $(host_json 'd["host_tier"] is None') == True ]] || fp_fail "a refused host tier was started"
fp_stop_agent
if command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
  rm -f "$FP_SOCK"
  unshare -m sh -c 'mount -t tmpfs none /sys/kernel/btf && exec "$@"' sh \
    "$FP_AGENT" --foreground --socket "$FP_SOCK" --store "$FP_TMP/nobtf.db" --host --host-off-cpu \
    >"$FP_TMP/nobtf.log" 2>&1 &
  FP_AGENT_PID=$!
  fp_track "$FP_AGENT_PID"
  fp_wait_for 15 test -S "$FP_SOCK" || fp_fail "the agent without BTF did not start: $(cat "$FP_TMP/nobtf.log")"
  grep -q "Failed to start the host tier: off-CPU profiling needs kernel BTF" "$FP_TMP/nobtf.log" ||
    fp_fail "the agent told host-off-cpu without BTF does not say why: $(cat "$FP_TMP/nobtf.log")"
  refuse "needs kernel BTF: /sys/kernel/btf/vmlinux" start --host --off-cpu
  [[ $(host_json 'd["host_tier"] is None') == True ]] || fp_fail "the host tier was started without its off-CPU time"
  fp_ctl start --host >/dev/null || fp_fail "the host tier without off-CPU time failed without BTF"
  fp_ok "without BTF: the host tier's off-CPU time refused in one line, its CPU samples still work"
  fp_stop_agent
else
  fp_log "SKIP the BTF refusal: no mount namespaces here"
fi
fp_ok "done"
