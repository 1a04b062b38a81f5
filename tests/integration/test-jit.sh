#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# JIT code named from perf maps that grow while the process runs
# (agent/runtimes/perfmap.c): Node.js with --perf-basic-prof whose hot
# functions are compiled only after the agent attached, profiled at 999 Hz
# until it exits, then dumped. In each of several runs at least 95% of the
# samples in JIT code are named from the map (JS:...), and the hot
# functions carry most of them: the map is what names them once the walk
# of V8's frames is off (--no-javascript). A last run with the walk on
# (the default) names the same hot functions from the process's memory,
# no map needed, in as many of the samples. (The names were read when the bucket was
# stored, which for a process that exits is after its /proc/PID/root is
# gone: 0% named in some runs. They are read now as the samples arrive,
# and a map the process left in a shared /tmp is read after its exit.)
source "$(dirname "$0")/lib.sh"
fp_init 200
command -v node >/dev/null || fp_fail "node is not installed (scripts/deps.sh installs nodejs)"
fp_start_agent
# (Node writes V8's isolate logs to its working directory: the test's own.)
cd "$FP_TMP"

RUNS=${FP_JIT_RUNS:-4}
for ((run = 1; run <= RUNS + 1; run++)); do
  walk=$((run > RUNS))
  opt=--no-javascript
  ((walk)) && opt=
  rm -f "$FP_TMP/go"
  node --perf-basic-prof --no-turbo-inlining "$FP_SRC/tests/workloads/jit/late.js" "$FP_TMP/go" 3 \
    >"$FP_TMP/node.out" 2>"$FP_TMP/node.err" &
  pid=$!
  fp_track "$pid"
  fp_wait_for 20 test -s "$FP_TMP/node.out" || fp_fail "node did not start: $(cat "$FP_TMP/node.err")"
  fp_ctl start "$pid" --freq 999 $opt >/dev/null || fp_fail "start node failed"
  touch "$FP_TMP/go"
  wait "$pid" || fp_fail "node failed: $(cat "$FP_TMP/node.err")"
  fp_untrack "$pid"
  fp_wait_for 10 bash -c "[[ \$($FP_AGENTCTL --socket $FP_SOCK status --json | python3 -c 'import json,sys; print([t[\"state\"] for t in json.load(sys.stdin)[\"targets\"] if t[\"pid\"] == $pid][0])') == exited ]]" ||
    fp_fail "run $run: the target did not become exited"
  fp_ctl dump "$pid" --format folded >"$FP_TMP/node-$run.folded" || fp_fail "dump failed"
  # (--no-turbo-inlining keeps the hot functions out of the loop's code, as they are written.)
  out=$(python3 - "$FP_TMP/node-$run.folded" "$walk" 2>&1 <<'PY'
import sys
total = jit = named = hot = 0
walk = sys.argv[2] == "1"
for line in open(sys.argv[1]):
    st, n = line.rstrip("\n").rsplit(" ", 1)
    n = int(n)
    total += n
    leaf = st.split(";")[-1]
    if walk and leaf in ("hotAlpha", "hotBeta"):
        # Named by the walk: the function itself, no map's JS: prefix.
        jit += n
        named += n
        hot += n
    elif leaf.startswith("JS:") or leaf.startswith("[anon]"):
        jit += n
        named += n if leaf.startswith("JS:") and not walk else 0
        hot += n if ("hotAlpha" in leaf or "hotBeta" in leaf) and not walk else 0
assert total >= 1500, "too few samples: %d" % total
assert jit >= 0.5 * total, "JIT code: %d of %d samples" % (jit, total)
assert named >= 0.95 * jit, "named (%s): %d of %d samples in JIT code" % (
    "the walk" if walk else "the perf map", named, jit)
assert hot >= 0.5 * jit, "hotAlpha and hotBeta: %d of %d" % (hot, jit)
print("%d of %d samples in JIT code named by %s (%.1f%%), %d in hotAlpha and hotBeta" % (
    named, jit, "the walk" if walk else "the perf map", 100.0 * named / jit, hot))
PY
) || fp_fail "run $run: $out"
  fp_ok "run $run: $out"
done
fp_stop_agent
