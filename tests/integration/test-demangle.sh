#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Demangled names in a real profile: a C++ program (g++) whose time is in
# demo::Worker<int>::spin(int), and a Rust program (rustc) whose time is in
# r::work::spin, built with Rust's legacy and v0 manglings, each profiled
# at 499 Hz. In the pprof dump the hot function reads as a person writes
# it and keeps its symbol as pprof's system_name (go tool pprof -raw shows
# both), it holds most of the samples, and the folded dump shows the
# demangled name; no frame of the profile is left mangled where its symbol
# demangles. A part whose compiler is not installed is skipped, said so.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=demangle
fp_init 200
fp_require_go
NAMES=$FP_SRC/tests/workloads/names

# profile NAME CMD...: runs CMD (it runs 3 s), profiles it, dumps pprof and folded.
profile() {
  local name=$1 pid
  shift
  "$@" 3 >"$FP_TMP/$name.out" &
  pid=$!
  fp_track "$pid"
  fp_ctl start "$pid" --freq 499 >/dev/null || fp_fail "start $name failed"
  sleep 2
  fp_ctl dump "$pid" -o "$FP_TMP/$name.pb.gz" >/dev/null || fp_fail "dump of $name failed"
  fp_ctl dump "$pid" --format folded -o "$FP_TMP/$name.folded" >/dev/null || fp_fail "folded dump of $name failed"
  fp_ctl stop "$pid" >/dev/null 2>&1 || true
  fp_kill "$pid"
  PIDS[$name]=$pid
  fp_pprof -raw -symbolize=none "$FP_TMP/$name.pb.gz" >"$FP_TMP/$name.raw" 2>&1 ||
    fp_fail "go tool pprof -raw rejected the $name profile: $(head -3 "$FP_TMP/$name.raw")"
}

# check NAME FUNCTION SYSTEM_NAME_RE: FUNCTION holds most samples, with that system name.
check() {
  python3 - "$FP_TMP/$1.pb.gz" "$FP_TMP/$1.folded" "$2" "$3" "$FP_SRC/tests/integration" <<'PY' ||
import re, subprocess, sys
sys.path.insert(0, sys.argv[5])
import pprofraw
p = pprofraw.load(sys.argv[1])
want, sys_re = sys.argv[3], re.compile(sys.argv[4])
total = p.total("samples")
hot = sum(s.values[0] for s in p.samples if s.stack and s.stack[0] == want)
systems = {sn for loc in p.locations.values() for (fn, _, _), sn in zip(loc.lines, loc.system_names) if fn == want}
print("%s: %d of %d samples at the leaf %r, system names %s" % (sys.argv[1].split("/")[-1], hot, total, want, sorted(systems)))
ok = total > 100 and hot >= 0.8 * total and systems and all(sys_re.fullmatch(s) for s in systems)
# No frame left mangled where c++filt (or the Rust demangler in it) demangles it.
mangled = sorted({n for loc in p.locations.values() for n in loc.names() if re.match(r"_[ZR]", n)})
if mangled:
    out = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True).stdout.split("\n")
    left = [m for m, d in zip(mangled, out) if d and d != m]
    if left:
        print("left mangled: %s" % left[:5])
        ok = False
folded = open(sys.argv[2]).read()
if (";" + want + " ") not in folded and (";" + want + ";") not in folded and not folded.startswith(want):
    print("the folded dump lacks %r" % want)
    ok = False
sys.exit(0 if ok else 1)
PY
    fp_fail "$1: $2 is not the hot function under its system name"
}

declare -A PIDS WANT
PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/collector.db"
fp_start_agent --bucket 1 --collector "$URL" --upload-interval 5
parts=0
if command -v g++ >/dev/null; then
  g++ -O1 -o "$FP_TMP/cxxnames" "$NAMES/cxxnames.cc" || fp_fail "g++ failed"
  profile cxx "$FP_TMP/cxxnames"
  check cxx "demo::Worker<int>::spin(int)" "_ZN4demo6WorkerIiE4spinEi"
  WANT[cxx]="demo::Worker<int>::spin(int)"
  fp_ok "C++: demo::Worker<int>::spin(int), its symbol _ZN4demo6WorkerIiE4spinEi kept as the system name"
  parts=$((parts + 1))
else
  fp_log "SKIP: C++ (no g++)"
fi
if command -v rustc >/dev/null; then
  rustc -O -o "$FP_TMP/rust-legacy" "$NAMES/rustnames.rs" || fp_fail "rustc failed"
  rustc -O -C symbol-mangling-version=v0 -o "$FP_TMP/rust-v0" "$NAMES/rustnames.rs" || fp_fail "rustc (v0) failed"
  profile rust-legacy "$FP_TMP/rust-legacy"
  check rust-legacy "rustnames::work::spin" "_ZN9rustnames4work4spin17h[0-9a-f]{16}E"
  WANT[rust-legacy]="rustnames::work::spin"
  profile rust-v0 "$FP_TMP/rust-v0"
  check rust-v0 "rustnames::work::spin" "_RNvNtCs[0-9A-Za-z_]+_9rustnames4work4spin"
  WANT[rust-v0]="rustnames::work::spin"
  fp_ok "Rust: rustnames::work::spin from its legacy and its v0 symbol"
  parts=$((parts + 1))
else
  fp_log "SKIP: Rust (no rustc)"
fi

# The collector's reads show what the agent named: its pprof keeps each
# hot function's symbol, its flame graph and its page (chromium) the name.
fp_ctl flush >/dev/null || fp_fail "flush failed"
for name in "${!WANT[@]}"; do
  pid=${PIDS[$name]} want=${WANT[$name]}
  curl -sf -o "$FP_TMP/$name.coll.pb.gz" "$URL/api/v1/profile?pid=$pid" || fp_fail "$name: no profile from the collector"
  python3 - "$FP_TMP/$name.coll.pb.gz" "$want" "$FP_SRC/tests/integration" <<'PY' || fp_fail "$name: the collector's pprof lost the symbol of $want"
import sys
sys.path.insert(0, sys.argv[3])
import pprofraw
p = pprofraw.load(sys.argv[1])
systems = {sn for loc in p.locations.values() for (fn, _, _), sn in zip(loc.lines, loc.system_names) if fn == sys.argv[2]}
print("collector pprof: %r as %s" % (sys.argv[2], sorted(systems)))
sys.exit(0 if systems and all(s.startswith(("_Z", "_R")) for s in systems) else 1)
PY
  curl -sf -o "$FP_TMP/$name.flame.json" "$URL/api/v1/flamegraph?pid=$pid" || fp_fail "$name: no flame graph"
  python3 - "$FP_TMP/$name.flame.json" "$want" <<'PY' || fp_fail "$name: the flame graph lacks $want, or shows a symbol"
import json, re, sys
def walk(n):
    yield n["name"]
    for c in n.get("children", []):
        yield from walk(c)
names = set(walk(json.load(open(sys.argv[1]))["tree"]))
mangled = sorted(n for n in names if re.match(r"_[ZR]", n))
print("flame graph: %r %s; mangled: %s" % (sys.argv[2], sys.argv[2] in names, mangled[:3]))
sys.exit(0 if sys.argv[2] in names and not mangled else 1)
PY
  NODE_PATH=/var/cache/fleetprof-test/node_modules fp_timeout 90 node "$FP_SRC/tests/integration/webview.js" "$URL" "pid=$pid" \
    >"$FP_TMP/$name.page.json" 2>"$FP_TMP/$name.page.err" || fp_fail "$name: the web page did not load: $(tail -3 "$FP_TMP/$name.page.err")"
  python3 - "$FP_TMP/$name.page.json" "$want" <<'PY' || fp_fail "$name: the web page does not draw $want"
import json, re, sys
d = json.load(open(sys.argv[1]))
names = {b["name"] for b in d["drawn"]}
print("page: %d boxes, %r drawn: %s" % (len(d["drawn"]), sys.argv[2], sys.argv[2] in names))
sys.exit(0 if not d["errors"] and sys.argv[2] in names and not any(re.match(r"_[ZR]", n) for n in names) else 1)
PY
done
((${#WANT[@]} == 0)) || fp_ok "the collector's pprof keeps the symbols; its flame graph and web page show ${!WANT[*]} demangled"
fp_ok "done ($parts of 2 languages)"
fp_stop_agent
fp_stop_collector
