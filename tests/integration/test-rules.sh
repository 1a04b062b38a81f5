#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Rules: targets that outlive their PIDs (agentctl start --name/--exe/
# --unit/--cgroup, and "target =" lines of the configuration file).
#
# 1. A rule by name: the matching program is started, killed and
#    restarted five times, plus one that runs 50 ms on its own. Every
#    instance appears in `dump --service` under its own pid label, with
#    samples in proportion to the CPU time it reports (the 50 ms one too,
#    less what it ran before the agent attached); the same merged profile
#    comes from the real collector (`service=` filter) after a flush,
#    /api/v1/series names the service, and the web page links to its
#    merged top table. status lists the rule: 6 started,
#    none running, and the exec-to-sampling latency it measured.
# 2. A rule by cgroup: a cgroup v2 directory made by the test; a process
#    moved into it is profiled (the BPF tracker reports the move), a
#    process exec'd inside it too, a process outside it is not.
# 3. Limits: --max-processes 2 with three matching processes: two are
#    profiled, one is counted as refused; once one ends, the third is
#    taken up.
# 4. stop: `stop PID` of a rule's process is refused with the rule named;
#    `stop --rule ID` ends the rule and its targets.
# 5. Restart: a rule from the configuration file and one added with
#    agentctl both come back after an agent restart and take up their
#    running processes (same pids) and new ones; `--check-config` refuses a
#    bad target line with its line number.
# 6. Rights: nobody's rule does not match root's process of the same name
#    but matches nobody's own; nobody sees only its rule and may not stop
#    root's.
# 7. Bad rules: two selectors, a bad regex, a relative --exe, a missing
#    cgroup, a bad service name: one line each, exit 1, nothing added;
#    a user's ninth rule is refused (too many rules).
# 8. Exec: a rule's process that execs a program the rule does not match
#    stops being profiled; with --no-bpf the /proc scan still finds new
#    processes within its interval.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 280
fp_require_go

SPIN=$FP_BUILD/tests/spin
[[ -x $SPIN ]] || fp_fail "missing $SPIN"
# "${WL[@]}" CMD...: a workload. In a sanitizer build the leak checker forks a
# helper process at exit, which a rule would rightly match as a child of
# its target; the workloads' leaks are not what this test is about.
# (env execs the program: $! of "${WL[@]}" prog & is the program's pid.)
WL=(env ASAN_OPTIONS=detect_leaks=0)
# Programs named for the rules: comm is the executable's file name.
for n in fpworker fplimit fpcfg fpnamed fpuser; do install -m 0755 "$SPIN" "$FP_TMP/$n"; done

PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/collector.db"
fp_start_agent --bucket 1 --collector "$URL" --upload-interval 3600

status_rule() { # status_rule ID EXPR: EXPR over the rule's JSON object r
  fp_status_json | python3 -c '
import json, sys
d = json.load(sys.stdin)
r = [x for x in d["rules"] if x["id"] == int(sys.argv[1])]
r = r[0] if r else None
print(eval(sys.argv[2]))' "$1" "$2"
}
target_of() { # target_of PID: the service of its target, "absent" when none
  fp_status_json | python3 -c '
import json, sys
d = json.load(sys.stdin)
t = [x for x in d["targets"] if x["pid"] == int(sys.argv[1]) and x["state"] == "running"]
print(t[0]["service"] + ":" + str(t[0]["rule"]) if t else "absent")' "$1"
}
rule_id_of() { sed -n 's/^rule \([0-9]*\):.*/\1/p' <<<"$1"; }
# Predicates for fp_wait_for. WANT may be a glob.
target_is() { [[ $(target_of "$1") == $2 ]]; }
rule_is() { [[ $(status_rule "$1" "$2") == "$3" ]]; }
file_first_line_is() { [[ $(head -1 "$1" 2>/dev/null) == "$2" ]]; }

# ---- 1. a rule by name, instances coming and going --------------------------------
out=$(fp_ctl start --name '^fpworker$' --service worker --freq 499)
fp_log "$out"
R1=$(rule_id_of "$out")
[[ -n $R1 ]] || fp_fail "start --name did not answer with a rule id: $out"
declare -A CPU
for i in 1 2 3 4 5; do
  "${WL[@]}" "$FP_TMP/fpworker" --threads 1 --seconds 60 >"$FP_TMP/w$i.out" &
  p=$!
  fp_track "$p"
  fp_wait_for 5 file_first_line_is "$FP_TMP/w$i.out" "$p" || fp_fail "fpworker $i did not start"
  fp_wait_for 2 target_is "$p" "worker:$R1" || fp_fail "instance $i (pid $p) is not profiled by rule $R1: $(target_of "$p")"
  sleep 0.8
  kill -TERM "$p"
  wait "$p" || true
  fp_untrack "$p"
  CPU[$p]=$(sed -n 's/^total .*cpu_ns=\([0-9]*\).*/\1/p' "$FP_TMP/w$i.out")
  [[ -n ${CPU[$p]} ]] || fp_fail "fpworker $i did not report its CPU time"
done
"${WL[@]}" "$FP_TMP/fpworker" --threads 1 --seconds 0.05 >"$FP_TMP/short.out"
SHORT=$(head -1 "$FP_TMP/short.out")
CPU[$SHORT]=$(sed -n 's/^total .*cpu_ns=\([0-9]*\).*/\1/p' "$FP_TMP/short.out")
fp_log "instances: ${!CPU[*]} (the 50 ms one: $SHORT)"
fp_wait_for 10 rule_is "$R1" 'r["running"]' 0 ||
  fp_fail "rule $R1 still has running targets: $(status_rule "$R1" r)"
[[ $(status_rule "$R1" 'r["started"]') == 6 ]] ||
  fp_fail "rule $R1 started $(status_rule "$R1" 'r["started"]') processes, want 6; targets: $(fp_status_json | fp_json_get '[(t["pid"], t["state"], t["rule"]) for t in d["targets"]]')"
fp_ok "status: rule $R1 started 6, $(status_rule "$R1" 'r["start_latency_us"]')"
# A process profiled by PID beside the service: its samples are not the service's.
"$FP_SPIN" --threads 1 --seconds 2 --ready "$FP_TMP/other.ready" >/dev/null &
OTHER=$!
fp_track "$OTHER"
fp_wait_for 5 test -e "$FP_TMP/other.ready" || fp_fail "the other spin did not start"
fp_ctl start "$OTHER" --freq 499 >/dev/null || fp_fail "could not profile the other spin"
sleep 1
fp_ctl flush >/dev/null
fp_ctl dump --service worker -o "$FP_TMP/worker.pb.gz"
python3 - "$FP_SRC/tests/integration" "$FP_TMP/worker.pb.gz" "$SHORT" "${!CPU[@]}" -- "${CPU[@]}" <<'EOF' || fp_fail "the service's profile does not account for its instances"
import sys
sys.path.insert(0, sys.argv[1])
import pprofraw
path, short = sys.argv[2], int(sys.argv[3])
rest = sys.argv[4:]
sep = rest.index("--")
pids, cpus = [int(x) for x in rest[:sep]], [int(x) for x in rest[sep + 1:]]
p = pprofraw.load(path)
per = {}
services = set()
for s in p.samples:
    pid = (s.numlabels.get("pid") or [None])[0]
    per[pid] = per.get(pid, 0) + s.values[p.value_index("samples")]
    services.update(s.labels.get("service", []))
period = 1 / 499
ok = True
for pid, cpu in zip(pids, cpus):
    want = cpu / 1e9 / period
    got = per.get(pid, 0)
    ratio = got / want if want else 0
    lost_ms = (want - got) * period * 1000
    print(f"pid {pid}: cpu {cpu / 1e6:.1f} ms, samples {got}, expected {want:.1f}, ratio {ratio:.2f}"
          + (f", lost at the start {lost_ms:.1f} ms" if pid == short else ""))
    low = 0.3 if pid == short else 0.85
    if not (low <= ratio <= 1.15):
        ok = False
if set(per) - set(pids):
    print("samples of other pids:", set(per) - set(pids))
    ok = False
if services != {"worker"}:
    print("service labels:", services)
    ok = False
sys.exit(0 if ok else 1)
EOF
fp_ok "dump --service worker: every instance under its own pid, samples in proportion to CPU"
AGENT_TOTAL=$(fp_profile_total "$FP_TMP/worker.pb.gz")
curl -sf "$URL/api/v1/profile?service=worker" -o "$FP_TMP/coll.pb.gz" || fp_fail "the collector has no profile of service worker"
COLL_TOTAL=$(fp_profile_total "$FP_TMP/coll.pb.gz")
[[ $AGENT_TOTAL == "$COLL_TOTAL" ]] || fp_fail "collector's service=worker total $COLL_TOTAL != agent's $AGENT_TOTAL"
n=$(curl -sf "$URL/api/v1/series?service=worker" | fp_json_get 'len({s["pid"] for s in d["series"] if s["service"] == "worker"})')
[[ $n == 6 ]] || fp_fail "/api/v1/series?service=worker lists $n processes, want 6"
fp_ok "collector: service=worker merges the 6 processes ($COLL_TOTAL samples, as the agent's dump)"
page=$(curl -sf "$URL/series")
[[ $page == *'href="/top?service=worker&amp;event=cpu-clock"'* ]] || fp_fail "the web page does not link the service"
page=$(curl -sf "$URL/top?service=worker&event=cpu-clock")
[[ $page == *spin_inner* && $page == *"service worker"* ]] || fp_fail "the web page's top of service worker lacks spin_inner"
fp_ok "the web page links the service to its merged top table"

# ---- 2. a rule by cgroup --------------------------------------------------------------
# The cgroup v2 hierarchy: /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid system.
CGROOT=$(awk '$3 == "cgroup2" {print $2}' /proc/self/mounts | sort | head -1)
CG=$CGROOT/fptest-$$
if [[ -z $CGROOT ]]; then
  fp_log "SKIP cgroup rule: no cgroup v2 hierarchy is mounted"
else
  mkdir "$CG"
  cleanup_cg() { # move whatever is left back to the root, then remove the cgroup
    local p
    [[ -d $CG ]] || return 0
    while read -r p; do echo "$p" >"$CGROOT/cgroup.procs" 2>/dev/null || true; done <"$CG/cgroup.procs"
    rmdir "$CG" 2>/dev/null || true
  }
  fp_on_exit cleanup_cg
  out=$(fp_ctl start --cgroup "$CG" --freq 99)
  fp_log "$out"
  R2=$(rule_id_of "$out")
  sleep 60 &
  MOVED=$!
  fp_track "$MOVED"
  sleep 60 &
  OUTSIDE=$!
  fp_track "$OUTSIDE"
  sleep 0.3
  [[ $(target_of "$MOVED") == absent ]] || fp_fail "a process outside the cgroup is profiled"
  echo "$MOVED" >"$CG/cgroup.procs"
  fp_wait_for 3 target_is "$MOVED" "fptest-$$:$R2" ||
    fp_fail "the process moved into $CG is not profiled: $(target_of "$MOVED")"
  bash -c "echo \$\$ > '$CG/cgroup.procs'; exec sleep 60" &
  INSIDE=$!
  fp_track "$INSIDE"
  fp_wait_for 3 target_is "$INSIDE" "fptest-$$:$R2" ||
    fp_fail "the process exec'd inside $CG is not profiled: $(target_of "$INSIDE")"
  [[ $(target_of "$OUTSIDE") == absent ]] || fp_fail "a process outside the cgroup became a target"
  fp_ok "cgroup rule: a process moved in and one started inside are profiled, one outside is not"
  fp_ctl stop --rule "$R2" >/dev/null
  fp_kill "$MOVED" "$INSIDE" "$OUTSIDE"
  cleanup_cg
fi

# ---- 3. --max-processes ---------------------------------------------------------------
out=$(fp_ctl start --name '^fplimit$' --max-processes 2)
R3=$(rule_id_of "$out")
LP=()
for i in 1 2 3; do
  "${WL[@]}" "$FP_TMP/fplimit" --threads 1 --duty 0.05 --seconds 60 >/dev/null &
  LP+=($!)
  fp_track "$!"
  sleep 0.2
done
fp_wait_for 5 rule_is "$R3" 'r["running"]' 2 || fp_fail "rule $R3 runs $(status_rule "$R3" 'r["running"]') targets, want 2"
[[ $(status_rule "$R3" 'r["refused"]') == 1 ]] || fp_fail "rule $R3 refused $(status_rule "$R3" 'r["refused"]'), want 1"
[[ $(target_of "${LP[2]}") == absent ]] || fp_fail "the third process is profiled past --max-processes 2"
fp_ok "--max-processes 2: two profiled, one refused"
fp_kill "${LP[0]}"
fp_wait_for 12 target_is "${LP[2]}" "fplimit:$R3" ||
  fp_fail "the refused process was not taken up once a place was free"
fp_ok "the refused process is taken up once one ends"

# ---- 4. stop ---------------------------------------------------------------------------
rc=0
msg=$(fp_ctl stop "${LP[1]}" 2>&1) || rc=$?
[[ $rc -eq 1 && $msg == *"rule $R3"* && $(wc -l <<<"$msg") -eq 1 ]] || fp_fail "stop PID of a rule's target: rc $rc, '$msg'"
out=$(fp_ctl stop --rule "$R3")
fp_log "$out"
[[ $(target_of "${LP[1]}") == absent && $(target_of "${LP[2]}") == absent ]] || fp_fail "stop --rule left targets running"
[[ $(status_rule "$R3" r) == None ]] || fp_fail "rule $R3 is still listed after stop --rule"
rc=0
msg=$(fp_ctl stop --rule "$R3" 2>&1) || rc=$?
[[ $rc -eq 1 && $msg == *"no rule $R3"* ]] || fp_fail "a second stop --rule $R3: rc $rc, '$msg'"
fp_kill "${LP[1]}" "${LP[2]}"
fp_ok "stop PID names the rule; stop --rule ends it and its targets"

# ---- 5. rules survive a restart ---------------------------------------------------------
fp_ctl stop --rule "$R1" >/dev/null
cat >"$FP_TMP/agent.conf" <<EOF
# profile fpcfg wherever it runs
target = --exe $FP_TMP/fpcfg --service cfgsvc --freq 99
EOF
"$FP_AGENT" --config "$FP_TMP/agent.conf" --check-config >/dev/null || fp_fail "--check-config refused a good target line"
printf 'target = --exe relative/path\n' >"$FP_TMP/bad.conf"
rc=0
msg=$("$FP_AGENT" --config "$FP_TMP/bad.conf" --check-config 2>&1) || rc=$?
[[ $rc -ne 0 && $msg == *"bad.conf:1:"*"absolute path"* && $(wc -l <<<"$msg") -eq 1 ]] ||
  fp_fail "--check-config of a bad target line: rc $rc, '$msg'"
fp_ok "--check-config: '$msg'"
fp_stop_agent
fp_start_agent --bucket 1 --config "$FP_TMP/agent.conf"
out=$(fp_ctl start --name '^fpnamed$' --service named)
RN=$(rule_id_of "$out")
"${WL[@]}" "$FP_TMP/fpcfg" --threads 1 --duty 0.05 --seconds 60 >/dev/null &
C1=$!
fp_track "$C1"
"${WL[@]}" "$FP_TMP/fpnamed" --threads 1 --duty 0.05 --seconds 60 >/dev/null &
N1=$!
fp_track "$N1"
both_profiled() { target_is "$C1" 'cfgsvc:*' && target_is "$N1" "named:$RN"; }
fp_wait_for 5 both_profiled ||
  fp_fail "before the restart: $(target_of "$C1") $(target_of "$N1")"
fp_stop_agent
fp_start_agent --bucket 1 --config "$FP_TMP/agent.conf"
fp_wait_for 5 both_profiled ||
  fp_fail "after the restart the rules' processes are not profiled: $(target_of "$C1") $(target_of "$N1")"
origin=$(fp_status_json | fp_json_get '",".join(sorted(r["origin"] for r in d["rules"]))')
[[ $origin == agentctl,config ]] || fp_fail "rules after the restart: $origin"
"${WL[@]}" "$FP_TMP/fpnamed" --threads 1 --duty 0.05 --seconds 60 >/dev/null &
N2=$!
fp_track "$N2"
fp_wait_for 5 target_is "$N2" "named:$RN" || fp_fail "a new process after the restart is not profiled"
fp_kill "$C1" "$N1" "$N2"
fp_ok "a config rule and an agentctl rule (id $RN) resume after a restart, old and new processes profiled"

# ---- 6. rights --------------------------------------------------------------------------
if [[ $(id -u) -ne 0 ]] || ! command -v setpriv >/dev/null; then
  fp_log "SKIP rights: need root and setpriv"
else
  install -m 0755 "$FP_AGENTCTL" "$FP_TMP/agentctl"
  asnobody=(fp_timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups "$FP_TMP/agentctl" --socket "$FP_SOCK")
  out=$("${asnobody[@]}" start --name '^fpuser$' --service userjob)
  RU=$(rule_id_of "$out")
  fp_log "nobody: $out"
  "${WL[@]}" "$FP_TMP/fpuser" --threads 1 --duty 0.05 --seconds 60 >/dev/null &
  ROOTP=$!
  fp_track "$ROOTP"
  "${WL[@]}" setpriv --reuid=65534 --regid=65534 --clear-groups "$FP_TMP/fpuser" --threads 1 --duty 0.05 --seconds 60 >/dev/null &
  NOBP=$!
  fp_track "$NOBP"
  fp_wait_for 5 target_is "$NOBP" "userjob:$RU" || fp_fail "nobody's rule did not match nobody's process"
  sleep 0.5
  [[ $(target_of "$ROOTP") == absent ]] || fp_fail "nobody's rule matched root's process"
  seen=$("${asnobody[@]}" status --json | fp_json_get '[r["id"] for r in d["rules"]]')
  [[ $seen == "[$RU]" ]] || fp_fail "nobody sees the rules $seen, want [$RU]"
  rc=0
  msg=$("${asnobody[@]}" stop --rule 1 2>&1) || rc=$?
  [[ $rc -eq 1 && $msg == *"no rule 1"* ]] || fp_fail "nobody stopping root's rule: rc $rc, '$msg'"
  "${asnobody[@]}" stop --rule "$RU" >/dev/null
  fp_kill "$ROOTP" "$NOBP"
  fp_ok "nobody's rule matches nobody's process only; nobody sees and stops only its own rule"
fi

# ---- 7. bad rules ------------------------------------------------------------------------
before=$(fp_status_json | fp_json_get 'len(d["rules"])')
bad() { # bad WHAT EXPECTED ARGS...
  local what=$1 want=$2 rc=0 msg
  shift 2
  msg=$(fp_ctl start "$@" 2>&1) || rc=$?
  [[ $rc -ne 0 && $msg == *"$want"* && $(wc -l <<<"$msg") -eq 1 ]] || fp_fail "$what: rc $rc, '$msg'"
  fp_ok "$what: $msg"
}
bad "two selectors" "not several" --name a --exe /bin/true
bad "a bad regex" "invalid --name regex" --name 'a('
bad "a relative --exe" "absolute path" --exe bin/true
bad "a missing cgroup" "no such cgroup" --cgroup /no/such/fp-cgroup
bad "a bad service" "invalid --service" --name a --service 'a b'
bad "a PID and a rule" "exclude each other" 1 --name a
bad "--max-processes 0" "max-processes" --name a --max-processes 0
[[ $(fp_status_json | fp_json_get 'len(d["rules"])') == "$before" ]] || fp_fail "a bad rule was added"
fp_ok "bad rules are refused with one line and nothing is added"
if [[ -n ${asnobody:-} ]]; then
  for i in 1 2 3 4 5 6 7 8; do "${asnobody[@]}" start --name "^fpmany$i\$" >/dev/null; done
  rc=0
  msg=$("${asnobody[@]}" start --name '^fpmany9$' 2>&1) || rc=$?
  [[ $rc -eq 1 && $msg == *"too many rules"* ]] || fp_fail "nobody's ninth rule: rc $rc, '$msg'"
  fp_ok "a user's ninth rule: $msg"
  for id in $("${asnobody[@]}" status --json | fp_json_get '" ".join(str(r["id"]) for r in d["rules"])'); do
    "${asnobody[@]}" stop --rule "$id" >/dev/null
  done
fi

# ---- 8. exec, and the fallback's scan -------------------------------------------------------
install -m 0755 /bin/bash "$FP_TMP/fpexec"
out=$(fp_ctl start --name '^fpexec$')
RX=$(rule_id_of "$out")
"$FP_TMP/fpexec" -c "while [[ ! -e '$FP_TMP/go' ]]; do :; done; exec sleep 60" &
XP=$!
fp_track "$XP"
fp_wait_for 5 target_is "$XP" "fpexec:$RX" || fp_fail "fpexec is not profiled: $(target_of "$XP")"
touch "$FP_TMP/go"
fp_wait_for 5 target_is "$XP" absent || fp_fail "after exec'ing sleep, $XP is still profiled: $(target_of "$XP")"
fp_kill "$XP"
fp_ok "a rule's process that execs another program is no longer profiled"
fp_stop_agent
fp_start_agent --bucket 1 --no-bpf
fp_ctl start --name '^fpnamed$' --service named >/dev/null
"${WL[@]}" "$FP_TMP/fpnamed" --threads 1 --duty 0.05 --seconds 60 >/dev/null &
N3=$!
fp_track "$N3"
t0=$SECONDS
fp_wait_for 5 target_is "$N3" 'named:*' || fp_fail "--no-bpf: the scan did not find $N3"
fp_kill "$N3"
fp_ok "--no-bpf: the /proc scan found a new process within $((SECONDS - t0)) s"
