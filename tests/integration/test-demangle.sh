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

fp_start_agent
parts=0
if command -v g++ >/dev/null; then
  g++ -O1 -o "$FP_TMP/cxxnames" "$NAMES/cxxnames.cc" || fp_fail "g++ failed"
  profile cxx "$FP_TMP/cxxnames"
  check cxx "demo::Worker<int>::spin(int)" "_ZN4demo6WorkerIiE4spinEi"
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
  profile rust-v0 "$FP_TMP/rust-v0"
  check rust-v0 "rustnames::work::spin" "_RNvNtCs[0-9A-Za-z_]+_9rustnames4work4spin"
  fp_ok "Rust: rustnames::work::spin from its legacy and its v0 symbol"
  parts=$((parts + 1))
else
  fp_log "SKIP: Rust (no rustc)"
fi
fp_ok "done ($parts of 2 languages)"
fp_stop_agent
