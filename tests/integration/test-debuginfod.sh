#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Names at the collector from debuginfod (collector/names/):
#   1. A stripped C++ program (namespaces, a template, two overloads), its
#      debug file served only by Debian's debuginfod on 127.0.0.1, profiled
#      by a real agent uploading to a SQLite collector with --debuginfod:
#      the pprof, /top, the flame graph and Grafana's query API (Connect:
#      SelectMergeStacktraces, SelectMergeProfile) name its functions demangled,
#      with their symbols as system names, where the agent's own dump has
#      offsets, as does the web page in chromium; the totals do not
#      change; /metrics counts the fetch.
#   2. The same upload on a collector whose server is stopped: the query
#      answers at once with offsets; once the server is back (after the
#      back-off) the frames are named. A restart names from the disk cache.
#   3. A server that misbehaves: HTTP 500, a hang (past --debuginfod-timeout),
#      a truncated debug file, another build's debug file, and a build ID
#      of the wrong length: each refused with one log line and asked for
#      once in the back-off, while a good build of the same upload is
#      named and the query answers at once, on SQLite and on ClickHouse.
#      Three builds over a 1 MiB cache: the least recently used evicted.
#      A collector stopped while a download hangs exits at once.
#   4. A cache directory that others can write, or a symbolic link, stops
#      the start with one line.
#   5. A missing cache directory is made (0700, its parents 0755); one that
#      cannot be made stops the start with one line.
#   6. A server that has the debug file and not the executable: the agent's
#      profile says where the program's mapping begins in the ELF file
#      (checked against its program headers), and the collector names it
#      from the debug file alone; an upload without that (an older agent)
#      keeps its offsets. The collector serves the debug file back as a
#      debuginfod server (elfutils' debuginfod-find), with the read token
#      when one is set; anything else under /buildid/ is 404.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=debuginfod
fp_init 300
fp_require_go
command -v debuginfod >/dev/null || fp_fail "debuginfod is not installed (scripts/deps.sh installs it)"
command -v g++ >/dev/null || fp_fail "g++ is not installed"
unset DEBUGINFOD_URLS
INTEG=$FP_SRC/tests/integration

# ---- the program, stripped, and its debug file --------------------------------
W=$FP_TMP/work
mkdir -p "$W/srv"
g++ -O1 -g -o "$W/cxxnames" "$FP_SRC/tests/workloads/names/cxxnames.cc" || fp_fail "g++ failed"
objcopy --only-keep-debug "$W/cxxnames" "$W/srv/cxxnames.debug"
strip -s -o "$W/srv/cxxnames" "$W/cxxnames"
cp "$W/srv/cxxnames" "$W/stripped"
BID=$(readelf -n "$W/stripped" | awk '/Build ID/ {print $3}')
[[ ${#BID} == 40 ]] || fp_fail "no build ID in the test program"
if [[ $(readelf -S "$W/stripped") == *.symtab* ]]; then fp_fail "the stripped program has a .symtab"; fi

DPORT=$(fp_free_port)
DPID=
start_debuginfod() {
  debuginfod -F "$W/srv" -p "$DPORT" -d "$FP_TMP/debuginfod.sqlite" >>"$FP_TMP/debuginfod.log" 2>&1 &
  DPID=$!
  fp_track "$DPID"
  fp_wait_for 30 curl -sf -o /dev/null "http://127.0.0.1:$DPORT/buildid/$BID/debuginfo" ||
    fp_fail "debuginfod did not serve the debug file: $(tail -3 "$FP_TMP/debuginfod.log")"
}
stop_debuginfod() { fp_kill "$DPID"; DPID=; }
start_debuginfod
fp_ok "Debian's debuginfod on 127.0.0.1:$DPORT serves build $BID"

PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
# collector NAME ARGS...: a collector on $PORT with its own store and cache.
collector() {
  local name=$1
  shift
  mkdir -p -m 700 "$FP_TMP/$name-cache"
  fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --debuginfod-cache "$FP_TMP/$name-cache" "$@"
}
# profile FILE [QUERY]: the merged pprof of the collector.
profile() { curl -sf -o "$1" "$URL/api/v1/profile?${2:-}" || fp_fail "no profile from the collector"; }
# names FILE: "NAME<TAB>SYSTEM_NAME<TAB>SAMPLES" of every leaf function of a pprof, by go tool pprof.
names() {
  fp_pprof -raw -symbolize=none "$1" 2>/dev/null | python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
import pprofraw
p = pprofraw.parse(sys.stdin.read())
leaf = {}
for s in p.samples:
    if s.stack:
        leaf[s.stack[0]] = leaf.get(s.stack[0], 0) + s.values[0]
sysname = {}
for loc in p.locations.values():
    for (fn, _, _), sn in zip(loc.lines, loc.system_names):
        sysname[fn] = sn
for fn in sorted(set(leaf) | set(sysname)):
    print("%s\t%s\t%d" % (fn, sysname.get(fn, ""), leaf.get(fn, 0)))' "$INTEG"
}
metric() { curl -sf "$URL/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

# ---- 1. a real agent, Debian's debuginfod, a SQLite collector ---------------
collector one --store "$FP_TMP/one.db" --debuginfod "http://127.0.0.1:$DPORT" --debuginfod-retry 2s
fp_start_agent --bucket 1 --collector "$URL" --upload-interval 5
"$W/stripped" 6 overloads >/dev/null &
WPID=$!
fp_track "$WPID"
fp_ctl start "$WPID" --freq 499 >/dev/null || fp_fail "start failed"
sleep 4
fp_ctl dump "$WPID" -o "$FP_TMP/agent.pb.gz" >/dev/null || fp_fail "dump failed"
wait "$WPID" || true
fp_ctl flush >/dev/null || fp_fail "flush failed" # every bucket uploaded
fp_stop_agent
names "$FP_TMP/agent.pb.gz" >"$FP_TMP/agent.names"
grep -q "^stripped+0x" "$FP_TMP/agent.names" || fp_fail "the agent named the stripped program itself: $(head -5 "$FP_TMP/agent.names")"
if grep -q "demo::" "$FP_TMP/agent.names"; then fp_fail "the agent found the debug file itself"; fi

named() { # named FILE: demo::mix(int) and demo::mix(double) are named in FILE's pprof
  names "$1" >"$1.names"
  grep -qP '^demo::mix\(int\)\t_ZN4demo3mixEi\t[1-9]' "$1.names" &&
    grep -qP '^demo::mix\(double\)\t_ZN4demo3mixEd\t[1-9]' "$1.names"
}
first() { profile "$FP_TMP/p1.pb.gz" "pid=$WPID" && named "$FP_TMP/p1.pb.gz"; }
fp_wait_for 30 first || fp_fail "the collector did not name the overloads: $(head -8 "$FP_TMP/p1.pb.gz.names")"
left=$(grep -c "^stripped+0x" "$FP_TMP/p1.pb.gz.names" || true)
[[ $left == 0 ]] || fp_fail "$left frames of the program are still offsets: $(grep "^stripped+0x" "$FP_TMP/p1.pb.gz.names" | head -3)"
ta=$(fp_profile_total "$FP_TMP/p1.pb.gz")
tb=$(fp_profile_total "$FP_TMP/agent.pb.gz")
((ta >= tb)) || fp_fail "the named profile holds $ta samples, the agent's dump $tb"
# (No "| grep -q" here: under pipefail its early exit can fail the writer.)
[[ $(curl -sf "$URL/top?pid=$WPID") == *"demo::mix(int)"* ]] || fp_fail "/top lacks demo::mix(int)"
curl -sf "$URL/api/v1/flamegraph?pid=$WPID&value=samples" >"$FP_TMP/flame.json"
python3 - "$FP_TMP/flame.json" "$ta" <<'PY' || fp_fail "the flame graph does not name the overloads under main"
import json, sys
root = json.load(open(sys.argv[1]))
root = root["tree"]
def walk(n, path):
    yield path + [n["name"]], n
    for c in n.get("children", []):
        yield from walk(c, path + [n["name"]])
seen = {n["name"]: p for p, n in walk(root, [])}
ok = all(k in seen and "main" in seen[k] for k in ("demo::mix(int)", "demo::mix(double)"))
print("flame graph: total %d of %s, overloads under main: %s" % (root["total"], sys.argv[2], ok))
sys.exit(0 if ok and root["total"] == int(sys.argv[2]) else 1)
PY
# Grafana's query API (Connect, JSON) names them too: the flame graph and the pprof.
connect() { # connect METHOD FILE: the JSON request of this program's CPU profile, last hour
  local now=$(($(date +%s) * 1000))
  curl -sf -H 'Content-Type: application/json' -o "$2" "$URL/querier.v1.QuerierService/$1" -d \
    "{\"profileTypeID\":\"cpu-clock:cpu:nanoseconds:cpu:nanoseconds\",\"labelSelector\":\"{pid=\\\"$WPID\\\"}\",\"start\":\"$((now - 3600000))\",\"end\":\"$now\"}"
}
connect SelectMergeStacktraces "$FP_TMP/fg.json" || fp_fail "no SelectMergeStacktraces"
python3 - "$FP_TMP/fg.json" <<'PY' || fp_fail "SelectMergeStacktraces does not name the overloads"
import json, sys
fg = json.load(open(sys.argv[1]))["flamegraph"]
names = set(fg["names"])
print("SelectMergeStacktraces: %s" % sorted(n for n in names if n.startswith("demo::")))
sys.exit(0 if {"demo::mix(int)", "demo::mix(double)"} <= names and not any(n.startswith("stripped+0x") for n in names) else 1)
PY
connect SelectMergeProfile "$FP_TMP/smp.json" || fp_fail "no SelectMergeProfile"
python3 - "$FP_TMP/smp.json" <<'PY' || fp_fail "SelectMergeProfile does not name the overloads with their symbols"
import json, sys
p = json.load(open(sys.argv[1]))
st = p["stringTable"]
fns = {st[int(f.get("name", 0))]: st[int(f.get("systemName", 0))] for f in p["function"]}
print("SelectMergeProfile: %s" % sorted((n, s) for n, s in fns.items() if n.startswith("demo::mix")))
sys.exit(0 if fns.get("demo::mix(int)") == "_ZN4demo3mixEi" and fns.get("demo::mix(double)") == "_ZN4demo3mixEd" else 1)
PY
# The web page, in chromium, draws the names the collector gave.
NODE_PATH=/var/cache/fleetprof-test/node_modules fp_timeout 90 node "$INTEG/webview.js" "$URL" "pid=$WPID" \
  >"$FP_TMP/page.json" 2>"$FP_TMP/page.err" || fp_fail "the web page did not load: $(tail -3 "$FP_TMP/page.err")"
python3 - "$FP_TMP/page.json" <<'PY' || fp_fail "the web page does not draw the overloads"
import json, sys
d = json.load(open(sys.argv[1]))
names = {b["name"] for b in d["drawn"]}
print("page: %d boxes, %s" % (len(d["drawn"]), sorted(n for n in names if n.startswith("demo::"))))
sys.exit(0 if not d["errors"] and {"demo::mix(int)", "demo::mix(double)"} <= names else 1)
PY
[[ $(metric 'fleetprof_collector_debuginfod_fetches_total{result="fetched"}') -ge 1 ]] || fp_fail "/metrics counts no fetch"
[[ $(metric fleetprof_collector_debuginfod_cache_bytes) -gt 0 ]] || fp_fail "/metrics counts no cache bytes"
curl -sf "$URL/metrics" >"$FP_TMP/metrics.txt"
python3 "$INTEG/promcheck.py" "$FP_TMP/metrics.txt" >/dev/null || fp_fail "/metrics is not valid: $(python3 "$INTEG/promcheck.py" "$FP_TMP/metrics.txt" 2>&1 | tail -1)"
fp_ok "collector names the stripped program from debuginfod: demo::mix(int)/(double) with their symbols; /top, the flame graph, the query API and the page too; $ta samples"
fp_stop_collector

# ---- 2. the server down, then back; the disk cache --------------------------
stop_debuginfod
collector two --store "$FP_TMP/two.db" --debuginfod "http://127.0.0.1:$DPORT" --debuginfod-retry 2s
AUTHLESS=(-H "Idempotency-Key: two-$$")
curl -sf "${AUTHLESS[@]}" --data-binary @"$FP_TMP/agent.pb.gz" \
  "$URL/api/v1/ingest?host=h2&pid=$WPID&starttime=1&comm=stripped&exe=$W/stripped&event=cpu-clock&from=$(date +%s)000000000&to=$(date +%s)999999999&agent=test" \
  -o /dev/null || fp_fail "upload to the second collector failed"
t=$(curl -sf -o "$FP_TMP/p2.pb.gz" -w '%{time_total}' "$URL/api/v1/profile") || fp_fail "no profile with the server down"
names "$FP_TMP/p2.pb.gz" >"$FP_TMP/p2.names"
grep -q "^stripped+0x" "$FP_TMP/p2.names" || fp_fail "offsets are not kept while the server is down: $(head -5 "$FP_TMP/p2.names"; grep debuginfod "$FP_TMP/collector.log" | tail -3)"
fp_ok "server down: the query answers in $t s with offsets"
sleep 0.5
profile "$FP_TMP/p2.pb.gz" # the failure is recorded; the back-off starts
start_debuginfod
fp_wait_for 20 eval 'profile "$FP_TMP/p2.pb.gz" && named "$FP_TMP/p2.pb.gz"' ||
  fp_fail "the frames were not named once the server was back"
grep -q "not named: .*127.0.0.1:$DPORT" "$FP_TMP/collector.log" || fp_fail "the failure was not logged"
fp_ok "server back: named after the back-off"
fp_stop_collector
stop_debuginfod
collector two --store "$FP_TMP/two.db" --debuginfod "http://127.0.0.1:$DPORT" --debuginfod-retry 1h
fp_wait_for 10 eval 'profile "$FP_TMP/p3.pb.gz" && named "$FP_TMP/p3.pb.gz"' ||
  fp_fail "a restarted collector did not name from its disk cache"
[[ $(metric 'fleetprof_collector_debuginfod_fetches_total{result="fetched"}') == 0 ]] || fp_fail "the restart fetched again"
fp_ok "restart with the server down: named from the disk cache"
fp_stop_collector

# ---- 3. a misbehaving server, on SQLite and on ClickHouse ----------------------
F=$FP_TMP/fake
mkdir -p "$F"
FPORT=$(fp_free_port)
python3 "$INTEG/debuginfod_fake.py" "$FPORT" "$F" "$FP_TMP/fake.log" &
fp_track $!
fp_wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$FPORT/" || fp_fail "the fake server did not start"
cp "$W/srv/cxxnames.debug" "$F/$BID.debuginfo"
cp "$W/stripped" "$F/$BID.executable"
ID500=1111111111111111111111111111111111111111
IDHANG=2222222222222222222222222222222222222222
# The truncated file is its own build's, cut after 3000 bytes (its build ID note is within).
printf 'int __attribute__((noinline)) cut(int x){return x*5;}\nint main(int c, char **a){(void)a; return cut(c);}\n' >"$W/cut.c"
cc -O1 -g -o "$W/cut" "$W/cut.c"
IDCUT=$(readelf -n "$W/cut" | awk '/Build ID/ {print $3}')
IDOTHER=4444444444444444444444444444444444444444
IDSHORT=abcd
echo 500 >"$F/$ID500.status"
echo hang >"$F/$IDHANG.status"
objcopy --only-keep-debug "$W/cut" "$W/cut.debug"
head -c 3000 "$W/cut.debug" >"$F/$IDCUT.debuginfo"
strip -s -o "$F/$IDCUT.executable" "$W/cut"
cp "$W/srv/cxxnames.debug" "$F/$IDOTHER.debuginfo" # another build's file
cp "$W/stripped" "$F/$IDOTHER.executable"
off=$(printf "%x" "0x$(nm "$W/cxxnames" | awk '$3 == "_ZN4demo3mixEi" {print $1}')")
frames=()
for id in "$BID" "$ID500" "$IDHANG" "$IDCUT" "$IDOTHER" "$IDSHORT"; do
  frames+=(--frame "$id:/opt/app/prog-$id:$off")
done
python3 "$INTEG/mkpprof.py" unnamed "$FP_TMP/faults.pb.gz" "${frames[@]}" --time "$(date +%s)000000000"

# faults STORE LABEL: one upload of the six frames, two queries, the checks.
faults() {
  local store=$1 label=$2 t1 t2
  : >"$FP_TMP/fake.log"
  : >"$FP_TMP/collector.log"
  rm -rf "$FP_TMP/three-cache"
  collector three --store "$store" --debuginfod "http://127.0.0.1:$FPORT" --debuginfod-timeout 3s \
    --debuginfod-retry 1h
  curl -sf -H "Idempotency-Key: faults-$label-$$" --data-binary @"$FP_TMP/faults.pb.gz" \
    "$URL/api/v1/ingest?host=h3&pid=7&starttime=1&comm=prog&exe=/opt/app/prog&event=cpu-clock&from=$(date +%s)000000000&to=$(date +%s)999999999&agent=test" \
    -o /dev/null || fp_fail "$label: the upload failed"
  fp_wait_for 20 eval 'profile "$FP_TMP/f.pb.gz" "host=h3"' || fp_fail "$label: the upload was not stored"
  t1=$(curl -sf -o /dev/null -w '%{time_total}' "$URL/api/v1/profile?host=h3")
  # Every build asked for, the hang timed out: the good one named, five failures.
  fp_wait_for 30 eval '[[ $(metric '"'"'fleetprof_collector_debuginfod_fetches_total{result="failed"}'"'"') == 5 ]]' ||
    fp_fail "$label: not five failures: $(curl -sf "$URL/metrics" | grep debuginfod_fetches)"
  t2=$(curl -sf -o "$FP_TMP/f.pb.gz" -w '%{time_total}' "$URL/api/v1/profile?host=h3")
  profile "$FP_TMP/f.pb.gz" "host=h3"
  names "$FP_TMP/f.pb.gz" >"$FP_TMP/f.names"
  grep -qP '^demo::mix\(int\)\t_ZN4demo3mixEi\t10$' "$FP_TMP/f.names" || fp_fail "$label: the good build is not named: $(cat "$FP_TMP/f.names")"
  [[ $(grep -c "^prog-.*+0x$off" "$FP_TMP/f.names") == 5 ]] || fp_fail "$label: the five bad builds are not offsets: $(cat "$FP_TMP/f.names")"
  local why
  for why in "$ID500 .*HTTP 500" "$IDHANG .*imed out" "$IDCUT .*debug file" "$IDOTHER .*of build $BID, not this one" "'$IDSHORT' not asked for: it has 4 hex digits"; do
    [[ $(grep -c "build.* $why" "$FP_TMP/collector.log") == 1 ]] || fp_fail "$label: not one log line for '$why': $(grep debuginfod "$FP_TMP/collector.log")"
  done
  for id in "$BID" "$ID500" "$IDHANG" "$IDCUT" "$IDOTHER"; do
    [[ $(grep -c "^$id debuginfo" "$FP_TMP/fake.log") == 1 ]] || fp_fail "$label: $id asked for $(grep -c "^$id debuginfo" "$FP_TMP/fake.log") times"
  done
  if grep -q "^$IDSHORT " "$FP_TMP/fake.log"; then fp_fail "$label: a 4-digit build ID was asked for"; fi
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 2.5 and float(sys.argv[2]) < 2.5 else 1)' "$t1" "$t2" ||
    fp_fail "$label: a query waited for the servers ($t1 s, $t2 s)"
  fp_ok "$label: 500, a hang, a truncated file, another build's file, a 4-digit ID: one line each, asked once; the good build named; queries $t1 s and $t2 s"
  fp_stop_collector
}
faults "$FP_TMP/three.db" SQLite
if command -v clickhouse-server >/dev/null; then
  fp_start_clickhouse "$FP_TMP/ch"
  faults "clickhouse://127.0.0.1:$FP_CH_PORT/dbgi" ClickHouse
  fp_stop_clickhouse
else
  fp_log "SKIP: ClickHouse (clickhouse-server is not installed)"
fi

# ---- 3b. the byte budget: three builds of 0.7 MiB under 1 MiB -----------------
ids=()
frames=()
for v in 1 2 3; do
  printf 'int __attribute__((noinline)) work_%d(int x){return x*%d;}\nint main(int c, char **a){(void)a; return work_%d(c);}\n' \
    "$v" "$v" "$v" >"$W/b$v.c"
  cc -O1 -g -o "$W/b$v" "$W/b$v.c"
  id=$(readelf -n "$W/b$v" | awk '/Build ID/ {print $3}')
  objcopy --only-keep-debug "$W/b$v" "$F/$id.debuginfo"
  head -c 700000 /dev/zero >>"$F/$id.debuginfo" # bytes past its sections: still its ELF file
  strip -s -o "$F/$id.executable" "$W/b$v"
  off=$(printf "%x" "0x$(nm "$W/b$v" | awk -v f="work_$v" '$3 == f {print $1}')")
  frames+=(--frame "$id:/opt/b$v:$off")
  ids+=("$id")
done
python3 "$INTEG/mkpprof.py" unnamed "$FP_TMP/budget.pb.gz" "${frames[@]}" --time "$(date +%s)000000000"
rm -rf "$FP_TMP/four-cache"
collector four --store "$FP_TMP/four.db" --debuginfod "http://127.0.0.1:$FPORT" --debuginfod-cache-mb 1 \
  --debuginfod-retry 1h
curl -sf -H "Idempotency-Key: budget-$$" --data-binary @"$FP_TMP/budget.pb.gz" -o /dev/null \
  "$URL/api/v1/ingest?host=h4&pid=8&starttime=1&comm=b&exe=/opt/b&event=cpu-clock&from=$(date +%s)000000000&to=$(date +%s)999999999&agent=test" ||
  fp_fail "budget: the upload failed"
fp_wait_for 20 eval 'profile "$FP_TMP/b.pb.gz" "host=h4"' || fp_fail "budget: the upload was not stored"
fp_wait_for 30 eval '[[ $(metric '"'"'fleetprof_collector_debuginfod_fetches_total{result="fetched"}'"'"') == 3 ]]' ||
  fp_fail "budget: not three fetches: $(curl -sf "$URL/metrics" | grep debuginfod_fetches)"
cached=$(metric fleetprof_collector_debuginfod_cache_bytes)
on_disk=$(du -cb "$FP_TMP/four-cache"/* | tail -1 | cut -f1)
[[ $(metric fleetprof_collector_debuginfod_evicted_total) == 2 && $(metric fleetprof_collector_debuginfod_cache_builds) == 1 ]] ||
  fp_fail "budget: not two evicted and one kept: $(curl -sf "$URL/metrics" | grep -E 'debuginfod_(evicted|cache)')"
((cached <= 1048576 && cached == on_disk)) || fp_fail "budget: $cached bytes counted, $on_disk on disk, budget 1048576"
# The last fetched is kept: the others were less recently used.
last=$(grep -E "^(${ids[0]}|${ids[1]}|${ids[2]}) debuginfo" "$FP_TMP/fake.log" | tail -1 | cut -d' ' -f1)
[[ $(ls "$FP_TMP/four-cache" | sort | tr '\n' ' ') == "$last.debug $last.head " ]] ||
  fp_fail "budget: the cache holds $(ls "$FP_TMP/four-cache" | tr "\n" " "), not build $last"
for v in 1 2 3; do [[ ${ids[v - 1]} == "$last" ]] && kept=$v; done
profile "$FP_TMP/b.pb.gz" "host=h4"
names "$FP_TMP/b.pb.gz" >"$FP_TMP/b.names"
grep -qP "^work_$kept\t\t10$" "$FP_TMP/b.names" || fp_fail "budget: the kept build is not named: $(cat "$FP_TMP/b.names")"
fp_ok "budget: three builds of 0.7 MiB under 1 MiB: the two least recent evicted, $cached bytes kept (as on disk), the last named"
fp_stop_collector

# ---- 3c. a collector stops at once while a download hangs ---------------------
: >"$FP_TMP/fake.log"
rm -rf "$FP_TMP/five-cache"
collector five --store "$FP_TMP/five.db" --debuginfod "http://127.0.0.1:$FPORT" --debuginfod-timeout 60s
curl -sf -H "Idempotency-Key: stop-$$" --data-binary @"$FP_TMP/faults.pb.gz" -o /dev/null \
  "$URL/api/v1/ingest?host=h5&pid=9&starttime=1&comm=prog&exe=/opt/app/prog&event=cpu-clock&from=$(date +%s)000000000&to=$(date +%s)999999999&agent=test" ||
  fp_fail "stop: the upload failed"
fp_wait_for 20 eval 'profile "$FP_TMP/s.pb.gz" "host=h5" && grep -q "^$IDHANG debuginfo" "$FP_TMP/fake.log"' ||
  fp_fail "stop: the hanging build was not asked for"
t0=$(date +%s%N)
kill -TERM "$FP_COLL_PID"
fp_wait_for 10 eval '! kill -0 '"$FP_COLL_PID"' 2>/dev/null' || fp_fail "stop: the collector did not exit while a download hung"
ms=$((($(date +%s%N) - t0) / 1000000))
((ms < 5000)) || fp_fail "stop: the collector took $ms ms to exit"
FP_COLL_PID=
fp_ok "a collector stopped while a download hangs (timeout 60 s) exits in $ms ms"

# ---- 4. a cache directory that is not the collector's alone -------------------
mkdir -p -m 777 "$FP_TMP/open-cache"
chmod 777 "$FP_TMP/open-cache"
ln -s "$FP_TMP/two-cache" "$FP_TMP/link-cache"
for dir in open-cache link-cache; do
  rc=0
  err=$("$FP_COLLECTOR" --listen "127.0.0.1:$PORT" --store "$FP_TMP/four.db" \
    --debuginfod "http://127.0.0.1:$DPORT" --debuginfod-cache "$FP_TMP/$dir" 2>&1) || rc=$?
  [[ $rc == 1 && $(grep -c "debuginfod cache" <<<"$err") == 1 ]] || fp_fail "$dir: exit $rc: $err"
done
fp_ok "a cache directory others can write, or a link, stops the start with one line"

# ---- 5. a cache directory that is missing, or cannot be made -------------------
# (A source build or a container has no /var/cache/fleetprof-collector: the
# default path, parents and all, is made.)
fp_stop_collector
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/five.db" \
  --debuginfod "http://127.0.0.1:$DPORT" --debuginfod-cache "$FP_TMP/made/deep/cache"
[[ $(stat -c %a "$FP_TMP/made/deep/cache") == 700 && $(stat -c %a "$FP_TMP/made/deep") == 755 ]] ||
  fp_fail "the cache was not made 0700 under parents 0755: $(stat -c '%n %a' "$FP_TMP/made/deep" "$FP_TMP/made/deep/cache")"
fp_stop_collector
touch "$FP_TMP/a-file"
rc=0
err=$("$FP_COLLECTOR" --listen "127.0.0.1:$PORT" --store "$FP_TMP/five.db" \
  --debuginfod "http://127.0.0.1:$DPORT" --debuginfod-cache "$FP_TMP/a-file/cache" 2>&1) || rc=$?
[[ $rc == 1 && $(wc -l <<<"$err") == 1 && $err == *"cannot make the debuginfod cache $FP_TMP/a-file/cache: Not a directory"* ]] ||
  fp_fail "a cache under a file: exit $rc: $err"
fp_ok "a missing cache directory is made 0700 (its parents 0755); one under a file stops the start with one line"

# ---- 6. a server of debug files only: the agent says where its mappings begin ----------
# The agent's profile says, for the stripped program's mapping, the ELF address its start
# holds (fleetprof's own field of Mapping, which go tool pprof skips: part 1 read it); a
# server that has the debug file and not the executable then names it. An upload without
# that field (an agent of the version before) keeps its offsets there: nothing guessed.
mkdir -p "$W/dbgonly"
cp "$W/srv/cxxnames.debug" "$W/dbgonly/"
D2PORT=$(fp_free_port)
debuginfod -F "$W/dbgonly" -p "$D2PORT" -d "$FP_TMP/debuginfod2.sqlite" >>"$FP_TMP/debuginfod2.log" 2>&1 &
fp_track "$!"
fp_wait_for 30 curl -sf -o /dev/null "http://127.0.0.1:$D2PORT/buildid/$BID/debuginfo" ||
  fp_fail "the second debuginfod did not serve the debug file: $(tail -3 "$FP_TMP/debuginfod2.log")"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$D2PORT/buildid/$BID/executable")
[[ $code == 404 ]] || fp_fail "the second debuginfod serves the executable too (HTTP $code)"
python3 "$INTEG/pprofvaddr.py" show "$FP_TMP/agent.pb.gz" >"$FP_TMP/vaddr.txt"
readelf -lW "$W/stripped" >"$FP_TMP/phdrs.txt"
python3 - "$FP_TMP/vaddr.txt" "$FP_TMP/phdrs.txt" "$W/stripped" "$BID" <<'PY' || fp_fail "the agent's profile does not say where the stripped program's mapping begins: $(cat "$FP_TMP/vaddr.txt")"
import sys
loads = []
for line in open(sys.argv[2]):
    f = line.split()
    if f and f[0] == "LOAD":
        loads.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))  # offset, vaddr, filesz
rows = [l.split() for l in open(sys.argv[1]) if l.split()[:2] == [sys.argv[3], sys.argv[4]]]
assert rows, "no mapping of the program"
for r in rows:
    off, got = int(r[5], 16), r[7]
    want = [v + off - o for o, v, n in loads if o <= off < o + max(n, 1)]
    assert want and got == "0x%x" % want[0], (r, want)
print("mappings of the program: %s" % ", ".join("offset %s at ELF address %s" % (r[5], r[7]) for r in rows))
PY
python3 "$INTEG/pprofvaddr.py" strip "$FP_TMP/agent.pb.gz" "$FP_TMP/old-agent.pb.gz"
upload6() { # upload6 FILE PID
  curl -sf -H "Idempotency-Key: six-$2-$$" --data-binary @"$1" \
    "$URL/api/v1/ingest?host=h6&pid=$2&starttime=1&comm=stripped&exe=$W/stripped&event=cpu-clock&from=$(date +%s)000000000&to=$(date +%s)999999999&agent=test" \
    -o /dev/null || fp_fail "the upload of $1 failed"
}
# The older agent's alone first (the same mapping from a newer agent would lend it its address).
collector sixold --store "$FP_TMP/sixold.db" --debuginfod "http://127.0.0.1:$D2PORT" --debuginfod-retry 1h
upload6 "$FP_TMP/old-agent.pb.gz" 602
profile "$FP_TMP/p6old.pb.gz" "pid=602"
fp_wait_for 30 eval '[[ -f $FP_TMP/sixold-cache/$BID.debug ]]' || fp_fail "the debug file was not fetched"
profile "$FP_TMP/p6old.pb.gz" "pid=602"
names "$FP_TMP/p6old.pb.gz" >"$FP_TMP/p6old.names"
grep -q "^stripped+0x" "$FP_TMP/p6old.names" || fp_fail "the older agent's upload lost its offsets"
if grep -q "^demo::" "$FP_TMP/p6old.names"; then fp_fail "the older agent's upload was named with no executable to place its offsets"; fi
fp_stop_collector
collector six --store "$FP_TMP/six.db" --debuginfod "http://127.0.0.1:$D2PORT" --debuginfod-retry 1h
upload6 "$FP_TMP/agent.pb.gz" 601
fp_wait_for 30 eval 'profile "$FP_TMP/p6.pb.gz" "pid=601" && named "$FP_TMP/p6.pb.gz"' ||
  fp_fail "a server of debug files only did not name the program: $(head -5 "$FP_TMP/p6.pb.gz.names"; grep debuginfod "$FP_TMP/collector.log" | tail -3)"
left=$(grep -c "^stripped+0x" "$FP_TMP/p6.pb.gz.names" || true)
[[ $left == 0 ]] || fp_fail "$left frames of the program are still offsets"
grep -q "^$W/stripped $BID .* vaddr 0x" <<<"$(python3 "$INTEG/pprofvaddr.py" show "$FP_TMP/p6.pb.gz")" ||
  fp_fail "the collector's profile lost the mapping's address"
[[ -f $FP_TMP/six-cache/$BID.debug && ! -s $FP_TMP/six-cache/$BID.head ]] || fp_fail "the debug-only build is not cached (with an empty header)"
# The collector as a debuginfod server: elfutils' own client fetches the debug file back.
got=$(DEBUGINFOD_URLS=$URL DEBUGINFOD_CACHE_PATH=$FP_TMP/dfind debuginfod-find debuginfo "$BID" 2>"$FP_TMP/dfind.err") ||
  fp_fail "debuginfod-find from the collector: $(tail -2 "$FP_TMP/dfind.err")"
cmp -s "$got" "$W/srv/cxxnames.debug" || fp_fail "debuginfod-find got another file than the debug file: $got"
for bad in "$BID/executable" "$BID/source/x.c" "0123456789abcdef0123/debuginfo" "..%2f..%2fetc%2fpasswd/debuginfo" "$BID/debuginfo/more"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/buildid/$bad")
  [[ $code == 404 ]] || fp_fail "/buildid/$bad: HTTP $code, not 404"
done
fp_stop_collector
echo "rd-$$" >"$FP_TMP/read-token"
collector six --store "$FP_TMP/six.db" --debuginfod "http://127.0.0.1:1" --debuginfod-retry 1h \
  --read-token-file "$FP_TMP/read-token"
RD=(-H "Authorization: Bearer rd-$$")
fp_wait_for 10 eval 'curl -sf "${RD[@]}" -o "$FP_TMP/p6r.pb.gz" "$URL/api/v1/profile?pid=601" && named "$FP_TMP/p6r.pb.gz"' ||
  fp_fail "a restarted collector did not name from its cache of the debug file alone"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/buildid/$BID/debuginfo")
[[ $code == 401 ]] || fp_fail "/buildid/ without the read token: HTTP $code"
curl -sf "${RD[@]}" -o "$FP_TMP/served.debug" "$URL/buildid/$BID/debuginfo" || fp_fail "/buildid/ with the read token failed"
cmp -s "$FP_TMP/served.debug" "$W/srv/cxxnames.debug" || fp_fail "/buildid/ served another file"
fp_stop_collector
fp_ok "a server of the debug file only: named by the mapping's ELF address the agent sent (kept in the collector's profile, cached, named after a restart); an older agent's upload keeps its offsets; debuginfod-find fetches the debug file back from the collector (the read token asked for when set), anything else 404"
fp_ok "done"
