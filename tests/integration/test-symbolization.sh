#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Symbolization where it is hard, on a real process (tests/workloads/symbolic.c):
#   - a library dlopen()ed after `start` is named from the MMAP2 record
#     (plugin_spin, and its static helper plugin_hidden_work from .symtab);
#   - in a stripped copy of it the exported plugin_spin still resolves (from
#     .dynsym) and the hidden helper stays in the profile as
#     "libfpplugin-stripped.so+0xOFFSET", never dropped;
#   - vdso frames resolve (clock_gettime's implementation in [vdso]);
#   - code in an anonymous executable mapping (JIT-like) stays as "[anon]+0x..."
#     in thread t-jit;
#   - mappings carry the build IDs of the files, as `readelf -n` reports them;
#   - ten processes of one binary parse its symbols once (status
#     symbol_files_loaded grows by at most a few files, not tenfold).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 200
fp_require_go

plugin=$FP_BUILD/tests/libfpplugin.so
stripped=$FP_BUILD/tests/libfpplugin-stripped.so
fp_start_agent
fp_start_workload symbolic "$FP_TMP/sym.out" "$FP_TMP/sym.ready" \
  --plugin "$plugin" --stripped "$stripped" --seconds 3 --delay-ms 400
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 999 >/dev/null || fp_fail "start failed"
fp_wait_for 20 bash -c "[[ \$(awk '{print \$3}' /proc/$pid/stat 2>/dev/null) =~ ^(Z|)\$ ]]" ||
  fp_fail "symbolic did not finish"
wait "$pid" 2>/dev/null || true
fp_wait_for 10 bash -c "[[ \$($FP_AGENTCTL --socket $FP_SOCK status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"targets\"][0][\"state\"])') == exited ]]" ||
  fp_fail "the target did not become exited"
fp_ctl dump "$pid" -o "$FP_TMP/sym.pb.gz" 2>/dev/null || fp_fail "dump failed"
fp_pprof -raw -symbolize=none "$FP_TMP/sym.pb.gz" >"$FP_TMP/sym.raw" 2>"$FP_TMP/sym.raw.err" ||
  fp_fail "go tool pprof -raw rejected the profile: $(cat "$FP_TMP/sym.raw.err")"

python3 - "$FP_TMP/sym.raw" "$FP_SRC/tests/integration" <<'PY' || fp_fail "symbolization checks failed"
import re, sys
sys.path.insert(0, sys.argv[2])
import pprofraw
p = pprofraw.load(sys.argv[1], is_raw_text=True)
bad = []
def stacks_of(thread):
    return [s.stack for s in p.samples if s.thread_name() == thread]
def want(cond, what):
    print(("ok: " if cond else "MISSING: ") + what)
    if not cond:
        bad.append(what)

plug = stacks_of("t-plugin")
want(any(st[:2] == ["plugin_hidden_work", "plugin_spin"] for st in plug),
     "t-plugin: plugin_hidden_work called from plugin_spin (dlopen'd after start)")
strip = stacks_of("t-stripped")
want(any(re.fullmatch(r"libfpplugin-stripped\.so\+0x[0-9a-f]+", st[0]) and len(st) > 1
         and st[1] == "plugin_spin" for st in strip),
     "t-stripped: hidden helper kept as libfpplugin-stripped.so+0xOFFSET under plugin_spin")
vdso = stacks_of("t-vdso")
n_vdso = sum(1 for st in vdso if any("clock_gettime" in f and "vdso" in f for f in st[:2]))
want(n_vdso > 0, "t-vdso: frames inside the vdso's clock_gettime")
jit = stacks_of("t-jit")
want(any(re.fullmatch(r"\[anon\]\+0x[0-9a-f]+", st[0]) for st in jit),
     "t-jit: anonymous executable code kept as [anon]+0xOFFSET")
want(all(st for s in p.samples for st in [s.stack]), "no sample without frames")
sys.exit(1 if bad else 0)
PY

# Build IDs of the mappings equal those in the files.
for f in "$FP_BUILD/tests/symbolic" "$plugin"; do
  bid=$(readelf -n "$f" | awk '/Build ID/ {print $3}')
  grep -q "$bid" "$FP_TMP/sym.raw" || fp_fail "build id $bid of $f is not in the profile's mappings"
done
fp_ok "mappings carry the files' build IDs"

# Ten processes of one binary: its symbols are parsed once.
before=$(fp_status_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["symbol_files_loaded"])')
pids=()
for i in $(seq 10); do
  fp_start_workload symbolic "$FP_TMP/many$i.out" "$FP_TMP/many$i.ready" \
    --plugin "$plugin" --stripped "$stripped" --seconds 2 --delay-ms 100
  pids+=("$FP_WL_PID")
  fp_ctl start "$FP_WL_PID" --freq 199 >/dev/null || fp_fail "start of copy $i failed"
done
sleep 2.5
for p in "${pids[@]}"; do fp_ctl dump "$p" --format folded >/dev/null || fp_fail "dump $p failed"; done
after=$(fp_status_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["symbol_files_loaded"])')
fp_log "symbol files parsed: $before before, $after after ten more processes"
((after - before <= 3)) || fp_fail "ten processes of one binary parsed $((after - before)) more symbol files (want at most 3)"
fp_ok "symbol tables are shared by build ID across processes"
