#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What do Java names cost?  tests/workloads/java/Shares.java (its main loop
# counts its iterations for BENCH_SECONDS) under OpenJDK 17 with
# -XX:+PreserveFramePointer, run in the same invocation under each of:
#
#   - nothing (its iterations: the baseline);
#   - fleetprof at BENCH_FREQ Hz reading the JVM's code cache (the
#     default: compiled methods named as sampled, from its memory);
#   - fleetprof at BENCH_FREQ Hz with java-names = perf-map: the JVM asked
#     for its perf map (Compiler.perfmap through its attach socket)
#     whenever samples land in JIT code the map does not name (three at
#     once, then every 2 s);
#   - perf record -g at the same rate, with the map written by
#     `jcmd PID Compiler.perfmap` at the end (perf's way).
#
# Figures: the program's slowdown against the baseline; the agent's CPU
# time; the requests made and answered; the perf map's size; the code
# blobs read; the share of the main thread's samples with their leaf in
# JIT code named, by fleetprof and by perf (perf report on the same map). Figures only; it never fails on a time.
# Environment: BENCH_SECONDS (default 12), BENCH_FREQ (default 99).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=java-cost
SECS=${BENCH_SECONDS:-12}
FREQ=${BENCH_FREQ:-99}
fp_init 600
command -v javac >/dev/null || fp_fail "missing OpenJDK (openjdk-17-jdk-headless)"
mkdir -p "$FP_TMP/cls"
javac -d "$FP_TMP/cls" "$FP_SRC/tests/workloads/java/Shares.java" || fp_fail "javac failed"
JAVA=(java -XX:+PreserveFramePointer -cp "$FP_TMP/cls" Shares)

# run TAG none|perf|fp: the program's iterations; leaves TAG.pid.
run() {
  local tag=$1 mode=$2 pid perf_pid=
  "${JAVA[@]}" "$FP_TMP/$tag.truth" "$SECS" "$FP_TMP/$tag.go" >"$FP_TMP/$tag.out" 2>&1 &
  fp_track "$!"
  fp_wait_for 30 test -s "$FP_TMP/$tag.out" || fp_fail "$tag did not start"
  pid=$(head -1 "$FP_TMP/$tag.out")
  echo "$pid" >"$FP_TMP/$tag.pid"
  case $mode in
  fp) fp_ctl start "$pid" --freq "$FREQ" >/dev/null || fp_fail "start $tag failed" ;;
  perf)
    perf record -F "$FREQ" -g -p "$pid" -o "$FP_TMP/$tag.data" >"$FP_TMP/$tag.perf.log" 2>&1 &
    perf_pid=$!
    sleep 0.5
    ;;
  esac
  touch "$FP_TMP/$tag.go"
  if [[ $mode == perf ]]; then
    # The map, as a perf user writes it: jcmd once the run is almost over.
    sleep "$((SECS - 1))"
    jcmd "$pid" Compiler.perfmap >/dev/null 2>&1 || true
    cp "/tmp/perf-$pid.map" "$FP_TMP/perf.map" 2>/dev/null || true
  fi
  fp_wait_for $((SECS + 30)) test -s "$FP_TMP/$tag.truth" || fp_fail "$tag wrote no truth"
  fp_wait_for 15 bash -c '! kill -0 "$0" 2>/dev/null' "$pid"
  [[ -n $perf_pid ]] && { wait "$perf_pid" || true; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["iterations"])' "$FP_TMP/$tag.truth"
}

base=$(run base none)
# profiled TAG [agent options]: fleetprof's run; sets it_TAG, req_TAG, blobs_TAG,
# named_TAG, map_TAG, cpu_TAG (the agent's CPU seconds over the run).
profiled() {
  local tag=$1 fpid
  shift
  fp_start_agent --store none "$@"
  local t0
  t0=$(awk '{print $14 + $15}' "/proc/$FP_AGENT_PID/stat")
  printf -v "it_$tag" %s "$(run "$tag" fp)"
  fpid=$(cat "$FP_TMP/$tag.pid")
  fp_ctl dump "$fpid" -o "$FP_TMP/$tag.pb.gz" >/dev/null || fp_fail "dump failed"
  printf -v "cpu_$tag" %s "$(awk -v t0="$t0" -v hz="$(getconf CLK_TCK)" '{printf "%.2f s", ($14 + $15 - t0) / hz}' "/proc/$FP_AGENT_PID/stat")"
  read -r "req_$tag" "blobs_$tag" < <(fp_status_json | python3 -c 'import json,sys
t = [t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])][0]["java"]
print("%d/%d %d" % (t["answered"], t["requests"], t["code_blobs_read"]))' "$fpid")
  printf -v "named_$tag" %s "$(python3 - "$FP_TMP/$tag.pb.gz" "$FP_TMP/$tag.truth" "$FP_SRC/tests/integration" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[3])
import pprofraw
tid = json.load(open(sys.argv[2]))["tid"]
rows = pprofraw.lines_by_thread(pprofraw.load(sys.argv[1])).get(tid, [])
jit = sum(n for n, l in rows if l and ("(" in l[0][0] and "::" not in l[0][0] or l[0][0].startswith("[anon]")))
named = sum(n for n, l in rows if l and "(" in l[0][0] and "::" not in l[0][0])
print("%.1f%%" % (100.0 * named / max(1, jit)))
PY
)"
  printf -v "map_$tag" %s "$(($(stat -c %s "/tmp/perf-$fpid.map" 2>/dev/null || echo 0) / 1024)) KiB"
  fp_stop_agent
  rm -f "/tmp/perf-$fpid.map"
}
profiled code
profiled map --java-names perf-map

perf_it=- perf_named=-
if command -v perf >/dev/null; then
  perf_it=$(run peer perf)
  ppid=$(cat "$FP_TMP/peer.pid")
  # perf report reads /tmp/perf-PID.map: the one jcmd wrote near the end.
  perf_named=$(perf report -i "$FP_TMP/peer.data" --stdio --no-children --sort sym -g none 2>/dev/null |
    awk '/^ +[0-9.]+%/ {p = $1 + 0; if ($0 ~ /Shares\.|\[unknown\]|0x0000/) {if ($0 ~ /Shares\./) n += p; j += p}} END {if (j > 0) printf "%.1f%%", 100 * n / j; else print "-"}')
  rm -f "/tmp/perf-$ppid.map"
fi
pct() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a != "-") printf "%.1f%%", 100 * (b - a) / b; else print "-"}'; }
echo
echo "== Java names: cost at $FREQ Hz, $SECS s, $(java -version 2>&1 | head -1) ($(nproc) cores) =="
printf '%-44s %14s %14s %16s\n' "" "code cache" "perf map" "perf record -g"
printf '%-44s %14s %14s %16s\n' "program's iterations (unprofiled: $base)" "$it_code" "$it_map" "$perf_it"
printf '%-44s %14s %14s %16s\n' "slowdown against unprofiled" "$(pct "$it_code" "$base")" "$(pct "$it_map" "$base")" "$(pct "$perf_it" "$base")"
printf '%-44s %14s %14s %16s\n' "the profiler's CPU time (agent; perf: -)" "$cpu_code" "$cpu_map" "-"
printf '%-44s %14s %14s %16s\n' "name requests answered/made" "$req_code" "$req_map" "1 (jcmd, end)"
printf '%-44s %14s %14s %16s\n' "perf map written by the JVM" "$map_code" "$map_map" "-"
printf '%-44s %14s %14s %16s\n' "code blobs read from its memory" "$blobs_code" "$blobs_map" "-"
printf '%-44s %14s %14s %16s\n' "JIT leaves named (main thread; perf: all)" "$named_code" "$named_map" "$perf_named"
