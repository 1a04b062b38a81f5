#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What does naming Node.js's JavaScript cost?  A CPU-bound program (a
# recursion 20 JavaScript frames deep that counts its iterations for
# BENCH_SECONDS) run, in the same invocation, under:
#
#   - nothing (its iterations: the baseline);
#   - fleetprof at BENCH_FREQ Hz, JavaScript frames read (the default);
#   - fleetprof with --no-javascript (V8's code unnamed);
#   - fleetprof with --no-javascript on node --perf-basic-prof (names
#     from the perf map the program writes);
#   - perf record -g on node --perf-basic-prof, the peer.
#
# Figures: the program's slowdown; the agent's CPU per sample (its rusage
# over the run / the target's samples, after a first run read node's
# symbols); the perf map's size. Figures only;
# it never fails on a time. Environment: BENCH_SECONDS (default 10),
# BENCH_FREQ (default 1000), BENCH_NODE (default /usr/bin/node).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=v8-cost
SECS=${BENCH_SECONDS:-10}
FREQ=${BENCH_FREQ:-1000}
NODE=${BENCH_NODE:-/usr/bin/node}
fp_init 600
[[ -x $NODE ]] || fp_fail "missing $NODE"

cat >"$FP_TMP/loop.js" <<'EOF2'
'use strict';
const fs = require('fs');
const [go, secs] = [process.argv[2], Number(process.argv[3])];
function deep(n) {
  if (n) return deep(n - 1) + 1;
  let s = 0;
  for (let i = 0; i < 2000; i++) s = (s * 31 + i) % 1000003;
  return s;
}
console.log(process.pid);
(function wait() {
  if (!fs.existsSync(go)) return setTimeout(wait, 5);
  const end = Date.now() + secs * 1000;
  let k = 0;
  while (Date.now() < end) { deep(20); k++; }
  console.log('iterations', k);
})();
EOF2

agent_cpu_us() { awk '{print ($14 + $15) * 10000}' "/proc/$FP_AGENT_PID/stat"; }

# run TAG none|perf|fp [node options -- start options]: "iterations agent_us samples map_bytes".
run() {
  local tag=$1 mode=$2 pid perf_pid= c0=0 c1=0 samples=0 nopt=() sopt=()
  shift 2
  while (($#)) && [[ $1 != -- ]]; do nopt+=("$1") && shift; done
  (($#)) && shift
  sopt=("$@")
  "$NODE" "${nopt[@]}" "$FP_TMP/loop.js" "$FP_TMP/$tag.go" "$SECS" >"$FP_TMP/$tag.out" 2>&1 &
  pid=$!
  fp_track "$pid"
  fp_wait_for 20 test -s "$FP_TMP/$tag.out" || fp_fail "$tag did not start"
  if [[ $mode == perf ]]; then
    perf record -F "$FREQ" -g -p "$pid" -o "$FP_TMP/$tag.data" >"$FP_TMP/$tag.perf.log" 2>&1 &
    perf_pid=$!
    sleep 0.5
  elif [[ $mode == fp ]]; then
    fp_ctl start "$pid" --freq "$FREQ" "${sopt[@]}" >/dev/null || fp_fail "start $tag failed"
    c0=$(agent_cpu_us)
  fi
  touch "$FP_TMP/$tag.go"
  wait "$pid" || fp_fail "$tag failed: $(cat "$FP_TMP/$tag.out")"
  fp_untrack "$pid"
  if [[ $mode == fp ]]; then
    c1=$(agent_cpu_us)
    samples=$(fp_status_json | fp_json_get "[t['samples'] for t in d['targets'] if t['pid'] == $pid][0]")
  fi
  [[ -n $perf_pid ]] && { wait "$perf_pid" || true; }
  local map=0
  [[ -e /tmp/perf-$pid.map ]] && map=$(stat -c %s "/tmp/perf-$pid.map") && rm -f "/tmp/perf-$pid.map"
  echo "$(awk '/^iterations/ {print $2}' "$FP_TMP/$tag.out") $((c1 - c0)) $samples $map"
}

read -r base _ <<<"$(run base none)"
fp_start_agent --store none
# A first run reads node's symbols and call-frame tables (a quarter of a
# second, once a file): not a cost of any mode below.
run warm fp -- >/dev/null
read -r w_it w_cpu w_n _ <<<"$(run walk fp -- )"
read -r o_it o_cpu o_n _ <<<"$(run off fp -- --no-javascript)"
read -r m_it m_cpu m_n m_map <<<"$(run map fp --perf-basic-prof -- --no-javascript)"
fp_stop_agent
p_it=- p_map=-
if command -v perf >/dev/null; then
  read -r p_it _ _ p_map <<<"$(run perf perf --perf-basic-prof --)"
fi

pct() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a != "-") printf "%.1f%%", 100 * (b - a) / b; else print "-"}'; }
per() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f µs", a / b; else print "-"}'; }
echo
echo "== JavaScript frames: cost at $FREQ Hz, $SECS s, node $("$NODE" --version) ($(nproc) cores, $(uname -r)) =="
printf '%-34s %13s %15s %17s %17s\n' "" "walk (default)" "--no-javascript" "perf map, fleetprof" "perf record -g"
printf '%-34s %13s %15s %17s %17s\n' "iterations (unprofiled: $base)" "$w_it" "$o_it" "$m_it" "$p_it"
printf '%-34s %13s %15s %17s %17s\n' "slowdown against unprofiled" "$(pct "$w_it" "$base")" "$(pct "$o_it" "$base")" "$(pct "$m_it" "$base")" "$(pct "$p_it" "$base")"
printf '%-34s %13s %15s %17s %17s\n' "agent CPU per sample" "$(per "$w_cpu" "$w_n")" "$(per "$o_cpu" "$o_n")" "$(per "$m_cpu" "$m_n")" "-"
printf '%-34s %13s %15s %17s %17s\n' "samples" "$w_n" "$o_n" "$m_n" "-"
printf '%-34s %13s %15s %17s %17s\n' "perf map written" "none" "none" "$m_map B" "$p_map B"
echo "(perf record's own CPU is not in these figures: its cost to the program is the slowdown)"
