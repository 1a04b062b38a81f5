#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What do debug files uploaded from CI cost?  BENCH_BUILDS (default 50)
# stripped builds of a program of 2,000 functions (one object linked with
# as many build IDs), their debug files split off:
#
#   upload   agentctl upload-debuginfo of the debug files to a SQLite
#            collector: wall time, and again with everything held (the one
#            HEAD a build);
#   query    BENCH_UPLOADS (default 100) uploads, each with 40 frames of
#            every build (FILE+0xOFFSET, as an agent leaves them, with the
#            mapping's ELF address), merged by BENCH_QUERIES queries of the
#            pprof and the flame graph: unnamed (a collector without
#            uploads) against named (every build named from its upload,
#            once loaded): median and 90th percentile, and their ratio;
#   memory   the loaded builds' symbols against their debug files' size,
#            and the collector's resident memory with none and all loaded.
#
# Figures only; it never fails on a time.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=debuginfo-upload-cost
BUILDS=${BENCH_BUILDS:-50}
UPLOADS=${BENCH_UPLOADS:-100}
QUERIES=${BENCH_QUERIES:-30}
FUNCS=2000
fp_init 1200
unset DEBUGINFOD_URLS
INTEG=$FP_SRC/tests/integration
CTL=$FP_BUILD/agent/agentctl
B=$FP_TMP/builds
mkdir -p "$B/ci" "$B/bin"

# One object of 2,000 functions, linked BUILDS times with a build ID each.
python3 - "$B/prog.c" "$FUNCS" <<'PY'
import sys
n = int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    for i in range(n):
        f.write("int __attribute__((noinline)) fn_%d(int x) { return x * %d + %d; }\n" % (i, i + 3, i))
    f.write("int main(int c, char **v) { (void)v; int s = 0;\n")
    for i in range(n):
        f.write(" s += fn_%d(c);\n" % i)
    f.write(" return s & 1; }\n")
PY
cc -O1 -g -c -o "$B/prog.o" "$B/prog.c"
frames=$FP_TMP/frames
: >"$frames"
for i in $(seq 1 "$BUILDS"); do
  cc -Wl,--build-id=0x$(printf '%08x' "$i")f1ee7c0ffee000000000000000000000 -o "$B/p$i" "$B/prog.o"
  objcopy --only-keep-debug "$B/p$i" "$B/ci/p$i.debug"
  strip -s -o "$B/bin/p$i" "$B/p$i"
  id=$(readelf -n "$B/p$i" | awk '/Build ID/ {print $3}')
  # 40 functions of the build, spread over it (their ELF addresses = file offsets: a PIE's text)
  nm "$B/p$i" | awk -v id="$id" -v f="/opt/p$i" '$2 == "T" && $3 ~ /^fn_/ && (++k % 50) == 0 {print id ":" f ":" $1}' >>"$frames"
done
debug_bytes=$(cat "$B"/ci/*.debug | wc -c)
python3 "$INTEG/mkpprof.py" unnamed "$FP_TMP/unnamed.pb.gz" --frames-file "$frames" --vaddr 1 --time "$(date +%s)000000000"

PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
now=$(date +%s)
load() { # the uploads, into a fresh store
  local i from
  for i in $(seq 1 "$UPLOADS"); do
    from=$(((now - UPLOADS * 60 + i * 60) * 1000000000))
    code=$(curl -s -H "Idempotency-Key: u-$i" --data-binary @"$FP_TMP/unnamed.pb.gz" -o "$FP_TMP/answer" -w '%{http_code}' \
      "$URL/api/v1/ingest?host=h$((i % 10))&pid=$i&starttime=1&comm=p&exe=/opt/p&event=cpu-clock&from=$from&to=$((from + 60000000000))&agent=bench") || true
    [[ $code == 2* ]] || fp_fail "upload $i: HTTP $code $(cat "$FP_TMP/answer" 2>/dev/null)"
  done
}
# times PATH: "median p90" milliseconds of QUERIES queries.
times() {
  local i
  for i in $(seq 1 "$QUERIES"); do
    curl -sf -o /dev/null -w '%{time_total}\n' "$URL$1" || fp_fail "query $1 failed"
  done | sort -n | awk '{v[NR] = $1 * 1000} END {printf "%.1f %.1f", v[int((NR + 1) / 2)], v[int(NR * 0.9)]}'
}
# left: the frames of the merged profile still unnamed (pN+0xOFFSET; the builds share their names).
left() {
  curl -sf -o "$FP_TMP/q.pb.gz" "$URL/api/v1/profile"
  fp_pprof -top -nodecount=100000 -nodefraction=0 -symbolize=none "$FP_TMP/q.pb.gz" 2>/dev/null | grep -c " p[0-9]*+0x[0-9a-f]*$" || true
}
metric() { curl -sf "$URL/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$FP_COLL_PID/status"; }

want=$(wc -l <"$frames")
declare -A P F
got=()
for config in unnamed named; do
  rm -rf "$FP_TMP/store"*
  args=(--listen "127.0.0.1:$PORT" --store "$FP_TMP/store.db" --debuginfod none)
  [[ $config == unnamed ]] && args+=(--debuginfo-mb 0)
  fp_start_collector "$URL" "${args[@]}"
  if [[ $config == named ]]; then
    t0=$(date +%s.%N)
    "$CTL" upload-debuginfo --collector "$URL" "$B/ci" >"$FP_TMP/up1.out" || fp_fail "upload-debuginfo failed"
    t1=$(date +%s.%N)
    "$CTL" upload-debuginfo --collector "$URL" "$B/ci" >"$FP_TMP/up2.out" || fp_fail "upload-debuginfo (again) failed"
    t2=$(date +%s.%N)
  fi
  load
  rss0=$(rss_kb)
  curl -sf -o /dev/null "$URL/api/v1/profile" # the first query asks for the builds
  if [[ $config == named ]]; then
    fp_wait_for 120 eval '[[ $(left) == 0 ]]' || fp_fail "$(left) of $want frames left unnamed"
    rss1=$(rss_kb)
    sym=$(metric fleetprof_collector_debuginfod_symbol_bytes)
    loaded=$(metric fleetprof_collector_debuginfo_builds_loaded_total)
  fi
  P[$config]=$(times /api/v1/profile)
  F[$config]=$(times "/api/v1/flamegraph?value=samples")
  got[${#got[@]}]=$(left)
  fp_stop_collector
done

echo "$BUILDS stripped builds of $FUNCS functions; $UPLOADS uploads of $want frames each (40 a build)"
printf 'upload of %d debug files (%d bytes): %.2f s; again, all held: %.2f s  [%s]\n' "$BUILDS" "$debug_bytes" \
  "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "$(tail -1 "$FP_TMP/up1.out")"
printf '%-8s %22s %24s %8s\n' config "profile ms (p50 p90)" "flamegraph ms (p50 p90)" unnamed
printf '%-8s %22s %24s %8s\n' unnamed "${P[unnamed]}" "${F[unnamed]}" "${got[0]}"
printf '%-8s %22s %24s %8s\n' named "${P[named]}" "${F[named]}" "${got[1]}"
read -r pu _ <<<"${P[unnamed]}"
read -r pn _ <<<"${P[named]}"
read -r fu _ <<<"${F[unnamed]}"
read -r fn _ <<<"${F[named]}"
printf 'named / unnamed, median: profile %.2fx, flame graph %.2fx (aim: at most 1.5x)\n' \
  "$(echo "$pn / $pu" | bc -l)" "$(echo "$fn / $fu" | bc -l)"
printf 'memory: %d builds loaded, symbols %d bytes (%.0f a build) against %.0f bytes a debug file (%.2fx); collector RSS %d -> %d KiB\n' \
  "$loaded" "$sym" "$(echo "$sym / $loaded" | bc -l)" "$(echo "$debug_bytes / $BUILDS" | bc -l)" \
  "$(echo "$sym / $debug_bytes * $BUILDS / $loaded" | bc -l)" "$rss0" "$rss1"
