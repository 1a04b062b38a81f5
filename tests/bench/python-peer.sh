#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Python shares beside perf's: tests/workloads/python/shares.py (it
# measures its own functions' CPU per thread) run twice in the same
# invocation under pyenv's newest CPython 3.12+: profiled by fleetprof at
# BENCH_FREQ Hz (Python stacks read at each sample), and by
# `perf record -F BENCH_FREQ -g` with the program run under -X perf
# (CPython's perf trampolines: a py::FUNCTION symbol per Python call).
# For each of the main thread's functions: the program's own share of its
# CPU, fleetprof's share of its samples, perf's; and each tool's worst
# error and its samples with a Python function. (perf -g follows frame
# pointers, which a CPython built without them, as pyenv's are, does not
# keep: most of its stacks end in the interpreter.) Figures only; it never
# fails on a share. Environment: BENCH_SECONDS (default 10), BENCH_FREQ
# (default 1000). Without a CPython 3.12+ or perf it says so and stops.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=python-peer
SECS=${BENCH_SECONDS:-10}
FREQ=${BENCH_FREQ:-1000}
fp_init 600
WL=$FP_SRC/tests/workloads/python/shares.py
py=
pyenv_root=$(pyenv root 2>/dev/null || true)
for minor in 13 12; do
  p=$(ls -d "$pyenv_root"/versions/3.$minor.*/bin/python3.$minor 2>/dev/null | head -1 || true)
  [[ -n $p ]] && py=$p && break
done
if [[ -z $py ]] || ! command -v perf >/dev/null; then
  echo "python-peer: needs a CPython 3.12+ (pyenv's) and perf; not run here"
  exit 0
fi

# fleetprof's run: shares.py profiled at FREQ, its profile in fp.pb.gz.
"$py" "$WL" "$FP_TMP/fp.truth" "$SECS" "$FP_TMP/fp.go" >"$FP_TMP/fp.out" 2>&1 &
pid=$!
fp_track "$pid"
fp_wait_for 20 test -s "$FP_TMP/fp.out" || fp_fail "shares.py did not start"
fp_start_agent --store none
fp_ctl start "$pid" --freq "$FREQ" >/dev/null || fp_fail "start failed"
fp_wait_for 20 fp_python_recognised "$pid" || fp_fail "its CPython was not recognised"
touch "$FP_TMP/fp.go"
wait "$pid" || fp_fail "shares.py failed"
fp_untrack "$pid"
fp_ctl dump "$pid" -o "$FP_TMP/fp.pb.gz" >/dev/null || fp_fail "dump failed"
fp_stop_agent

# perf's run: the same program under -X perf, perf record -g at FREQ.
"$py" -X perf "$WL" "$FP_TMP/perf.truth" "$SECS" "$FP_TMP/perf.go" >"$FP_TMP/perf.out" 2>&1 &
pid=$!
fp_track "$pid"
fp_wait_for 20 test -s "$FP_TMP/perf.out" || fp_fail "shares.py -X perf did not start"
perf record -F "$FREQ" -g -p "$pid" -o "$FP_TMP/perf.data" >"$FP_TMP/perf.log" 2>&1 &
perf_pid=$!
sleep 0.5
touch "$FP_TMP/perf.go"
wait "$pid" || fp_fail "shares.py -X perf failed"
fp_untrack "$pid"
wait "$perf_pid" || true
perf script -i "$FP_TMP/perf.data" -F tid,ip,sym >"$FP_TMP/perf.txt" 2>/dev/null || fp_fail "perf script failed"
rm -f "/tmp/perf-$pid.map"

python3 - "$FP_TMP/fp.pb.gz" "$FP_TMP/fp.truth" "$FP_TMP/perf.txt" "$FP_TMP/perf.truth" "$WL" \
  "$FP_SRC/tests/integration" "$("$py" -V 2>&1)" "$FREQ" "$SECS" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[6])
import pprofraw

def truth_shares(path):
    t = json.load(open(path))["threads"]["MainThread"]
    return t["tid"], {f: 100.0 * ns / t["cpu_ns"] for f, ns in t["functions"].items()}

# fleetprof: each sample's Python functions of the program's file.
tid, fp_truth = truth_shares(sys.argv[2])
rows = pprofraw.lines_by_thread(pprofraw.load(sys.argv[1])).get(tid, [])
fp_total = sum(n for n, _ in rows)
fp_funcs = [(n, {f for f, fl, _ in l if fl == sys.argv[5]}) for n, l in rows]

# perf: a "TID" line, then "ADDRESS SYMBOL" per frame; py::NAME:FILE per Python frame.
ptid, perf_truth = truth_shares(sys.argv[4])
perf_funcs, cur, cur_tid = [], None, None
for line in open(sys.argv[3]):
    s = line.strip()
    if not s:
        if cur is not None and cur_tid == ptid:
            perf_funcs.append((1, cur))
        cur = None
        continue
    if cur is None:
        cur, cur_tid = set(), int(s.split()[0]) if s.split()[0].isdigit() else None
        continue
    sym = s.split(None, 1)[1] if " " in s else ""
    if sym.startswith("py::") and sys.argv[5] in sym:
        cur.add(sym[4:].split(":")[0])
if cur is not None and cur_tid == ptid:
    perf_funcs.append((1, cur))
perf_total = len(perf_funcs)

def share(rows, total, fn):
    return 100.0 * sum(n for n, fs in rows if fn in fs) / max(1, total)

print("\n== Python shares beside perf -X perf: %s, %s Hz, %s s, the main thread ==" % (sys.argv[7], sys.argv[8], sys.argv[9]))
print("%-12s %9s %11s  %9s %11s" % ("function", "truth", "fleetprof", "truth", "perf -X"))
worst_fp = worst_perf = 0.0
for fn in fp_truth:
    a, b = share(fp_funcs, fp_total, fn), share(perf_funcs, perf_total, fn)
    worst_fp = max(worst_fp, abs(a - fp_truth[fn]))
    worst_perf = max(worst_perf, abs(b - perf_truth.get(fn, 0)))
    print("%-12s %8.1f%% %10.1f%%  %8.1f%% %10.1f%%" % (fn, fp_truth[fn], a, perf_truth.get(fn, 0), b))
with_fp = sum(n for n, fs in fp_funcs if fs)
with_perf = sum(n for n, fs in perf_funcs if fs)
print("%-12s %21.2f points %20.2f points" % ("worst error", worst_fp, worst_perf))
print("samples with a Python function: fleetprof %d of %d, perf %d of %d" % (with_fp, fp_total, with_perf, perf_total))
print("(each run against its own program's measurement: the two runs are not the same run)")
PY
