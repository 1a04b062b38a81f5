#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Dump formats: the three output formats of `agentctl dump` say the same
# thing, each in a shape its consumers accept.
#
# - pprof (to stdout and with -o FILE): gzip that `gzip -t` accepts and
#   `go tool pprof -top` and `-raw` read without complaint; sample types
#   samples/count and cpu/nanoseconds, period type cpu/nanoseconds with the
#   requested period; every sample carries a numeric "thread" label (the tid,
#   which must be the tid truth reports for that thread name) and a string
#   "thread_name" label; comments (`go tool pprof -comments`) carry the lost
#   and throttled counts.
# - top: a flat/cumulative table naming the leaves and callers, plus a
#   per-thread table naming the workload's threads.
# - folded: every line is "frame;...;frame COUNT", the caller;leaf pairs
#   the workload runs appear, and the counts add up to the pprof's total.
# A bad --format is refused with one "agentctl:" line.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 150
fp_require_go

fp_start_agent
fp_start_workload truth "$FP_TMP/t.out" "$FP_TMP/t.ready" \
  --seconds 4 --truth "$FP_TMP/truth.json" --wait-for-start "$FP_TMP/go" --hold
PID=$FP_WL_PID
fp_ctl start "$PID" --freq 500 >/dev/null || fp_fail "agentctl start failed"
touch "$FP_TMP/go"
fp_wait_for 40 test -s "$FP_TMP/truth.json" || fp_fail "truth did not finish"
prev=-1
for ((i = 0; i < 40; i++)); do
  cur=$(fp_target_field "$PID" samples)
  [[ $cur == "$prev" ]] && break
  prev=$cur
  sleep 0.5
done
fp_log "status: $cur samples"

# ---- pprof ---------------------------------------------------------------
echo "=== pprof ==="
PROF=$FP_TMP/p.pb.gz
fp_ctl dump "$PID" --format pprof -o "$PROF" >"$FP_TMP/o.stdout" || fp_fail "dump -o failed"
[[ -s $PROF ]] || fp_fail "dump -o wrote nothing"
[[ ! -s $FP_TMP/o.stdout ]] || fp_fail "dump -o also wrote to stdout: $(head -c 200 "$FP_TMP/o.stdout")"
gzip -t "$PROF" || fp_fail "dump -o wrote something that is not gzip"
fp_ctl dump "$PID" >"$FP_TMP/stdout.pb.gz" || fp_fail "dump to stdout failed"
gzip -t "$FP_TMP/stdout.pb.gz" || fp_fail "dump to stdout (default format) is not gzip"
fp_ok "pprof: -o FILE and stdout are gzip"

top=$(fp_pprof -top -symbolize=none "$PROF" 2>"$FP_TMP/err") || fp_fail "go tool pprof -top failed: $(cat "$FP_TMP/err")"
echo "$top" | head -n 14
for f in leaf_hash leaf_sqrt leaf_mem; do
  grep -qE " $f\$" <<<"$top" || fp_fail "go tool pprof -top does not list $f"
done
raw=$(fp_pprof -raw -symbolize=none "$PROF" 2>"$FP_TMP/err") || fp_fail "go tool pprof -raw failed: $(cat "$FP_TMP/err")"
grep -qx 'PeriodType: cpu nanoseconds' <<<"$raw" || fp_fail "period type is not cpu nanoseconds: $(grep PeriodType <<<"$raw")"
grep -qx 'Period: 2000000' <<<"$raw" || fp_fail "period is not 2000000 ns at 500 Hz: $(grep '^Period' <<<"$raw")"
grep -qE '^samples/count(\[dflt\])? cpu/nanoseconds(\[dflt\])?$' <<<"$raw" ||
  fp_fail "sample types are not samples/count cpu/nanoseconds: $(grep -A1 '^Samples:' <<<"$raw" | tail -1)"
fp_ok "go tool pprof -top and -raw read it; sample and period types are right"

fp_pprofraw expect "$PROF" --has-thread-ids --thread-name w-alpha --thread-name w-beta \
  --thread-name w-gamma --function leaf_hash || fp_fail "labels missing"
# Each thread_name maps to the tid truth measured under that name.
fp_pprofraw summary "$PROF" >"$FP_TMP/summary.json"
python3 - "$PROF" "$FP_TMP/truth.json" "$FP_PPROFRAW" <<'EOF' || fp_fail "thread labels do not match the workload's tids"
import json, sys, importlib.util
spec = importlib.util.spec_from_file_location("pprofraw", sys.argv[3])
pr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pr)
p = pr.load(sys.argv[1])
truth = json.load(open(sys.argv[2]))
pairs = {}
for s in p.samples:
    pairs.setdefault(s.thread_name(), set()).add(s.thread_id())
bad = 0
for name, th in truth["threads"].items():
    got = pairs.get(name, set())
    ok = got == {th["tid"]}
    print("  thread %-8s tid %d: profile tids %s %s" % (name, th["tid"], sorted(got), "ok" if ok else "MISMATCH"))
    bad += not ok
sys.exit(1 if bad else 0)
EOF
fp_ok "every sample has a numeric thread label and a thread_name; tids match"

comments=$(fp_pprof -comments "$PROF" 2>"$FP_TMP/err") || fp_fail "go tool pprof -comments failed: $(cat "$FP_TMP/err")"
fp_log "comments: $(tr '\n' '|' <<<"$comments")"
grep -qiE 'lost[^0-9]*[0-9]+' <<<"$comments" || fp_fail "no lost count in the profile comments"
grep -qiE 'throttl[^0-9]*[0-9]+' <<<"$comments" || fp_fail "no throttled count in the profile comments"
fp_ok "comments carry the lost and throttled counts"

TOTAL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total"])' "$FP_TMP/summary.json")

# ---- top -----------------------------------------------------------------
echo "=== top ==="
top=$(fp_ctl dump "$PID" --format top) || fp_fail "dump --format top failed"
echo "$top" | head -n 30
grep -qiE 'flat' <<<"$top" && grep -qiE 'cum' <<<"$top" || fp_fail "top has no flat/cum header"
for f in leaf_hash leaf_sqrt leaf_mem mid_one mid_two; do
  grep -qE "(^|[[:space:]])$f([[:space:]]|\$)" <<<"$top" || fp_fail "top does not list $f"
done
for t in w-alpha w-beta w-gamma; do
  grep -qE "(^|[[:space:]])$t([[:space:]]|\$)" <<<"$top" || fp_fail "top's thread table does not list $t"
done
grep -qE '[0-9]+(\.[0-9]+)?%' <<<"$top" || fp_fail "top shows no percentages"
fp_ok "top lists the leaves, the callers and the threads"

# ---- folded --------------------------------------------------------------
echo "=== folded ==="
fp_ctl dump "$PID" --format folded >"$FP_TMP/folded" || fp_fail "dump --format folded failed"
head -n 5 "$FP_TMP/folded"
[[ -s $FP_TMP/folded ]] || fp_fail "folded output is empty"
bad=$(grep -cvE '^.+ [0-9]+$' "$FP_TMP/folded" || true)
[[ $bad -eq 0 ]] || fp_fail "$bad folded lines do not match '^.+ [0-9]+\$': $(grep -vE '^.+ [0-9]+$' "$FP_TMP/folded" | head -3)"
for pair in 'mid_one;leaf_hash' 'mid_one;leaf_sqrt' 'mid_two;leaf_hash' 'mid_two;leaf_mem' 'measured_call;mid_one'; do
  grep -qE "(^|;)$pair( |;)" "$FP_TMP/folded" || fp_fail "folded has no $pair"
done
sum=$(awk '{s += $NF} END {print s + 0}' "$FP_TMP/folded")
fp_log "folded counts add up to $sum, pprof has $TOTAL samples"
# The target idles while we dump, but allow a stray sample or two.
((sum >= TOTAL && sum <= TOTAL + TOTAL / 100 + 2)) || fp_fail "folded total $sum differs from the pprof total $TOTAL"
fp_ok "folded lines are well formed, carry the caller;leaf pairs and add up"

dup=$(awk '{ $NF = ""; print }' "$FP_TMP/folded" | sort | uniq -d | head -3)
[[ -z $dup ]] || fp_log "note: folded output repeats stacks (e.g. '$dup'); flame graph tools sum them"

# ---- errors ----------------------------------------------------------------
rc=0
fp_ctl dump "$PID" --format bogus >"$FP_TMP/out" 2>"$FP_TMP/err" || rc=$?
[[ $rc -ne 0 && $(wc -l <"$FP_TMP/err") -eq 1 && $(cat "$FP_TMP/err") == "agentctl: "* ]] ||
  fp_fail "dump --format bogus: exit $rc, stderr '$(cat "$FP_TMP/err")'"
fp_ok "dump --format bogus → $(cat "$FP_TMP/err")"

fp_ctl stop "$PID" >/dev/null || fp_fail "stop failed"
fp_stop_agent
