#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The collector's two stores side by side, on the same uploads: the
# embedded SQLite file and ClickHouse (Debian's clickhouse-server, started
# here on private ports and a private data folder).
#
#   1. ingest: collector-bench at 8 and 64 concurrent uploaders
#      (BENCH_UPLOADS each run, default 2000) against one collector on
#      SQLite, one on ClickHouse, and two on one ClickHouse (the uploaders
#      split between them): uploads/s, p50/p99 latency, collector CPU per
#      upload, and for ClickHouse the server's CPU per upload as well;
#   2. a merged query over one hour of 100 simulated hosts (100 x 60
#      one-minute uploads): GET /api/v1/profile and /api/v1/flamegraph of
#      the whole hour, median of 3, each store;
#   3. bytes on disk per stored sample: the SQLite file (and its log), and
#      ClickHouse's parts of the database, as written and after
#      OPTIMIZE ... FINAL merged them; then the same hour once more on
#      ClickHouse with its parts compressed by zstd (clickhouse-zstd), as
#      docs/clickhouse.md recommends.
#
# The upload bodies are generated profiles (different seeds) of
# BENCH_STACKS distinct stacks (default 600) and 6000 samples each, about
# one busy target-minute, taken in turn: 16 for the ingest, 64 for the
# hour, so that no host sends one twice in its hour (a store would find
# the repeats and compress them as real profiles never do).
# Figures only: it never fails on a time.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=clickhouse-bench
UPLOADS=${BENCH_UPLOADS:-$([[ ${BENCH_QUICK:-0} == 1 ]] && echo 200 || echo 2000)}
STACKS=${BENCH_STACKS:-600}
fp_init 1500
BENCH=$FP_BUILD/tests/collector-bench
[[ -x $FP_COLLECTOR && -x $BENCH ]] || fp_fail "build first"

figure() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
BODIES=() HOUR_BODIES=()
for seed in $(seq 1 64); do # different profiles, as a fleet sends: no store sees one repeated
  python3 "$FP_SRC/tests/integration/mkpprof.py" good "$FP_TMP/body$seed.pb.gz" --stacks "$STACKS" --samples 6000 --seed "$seed"
  ((seed > 16)) || BODIES+=(--profile "$FP_TMP/body$seed.pb.gz")
  HOUR_BODIES+=(--profile "$FP_TMP/body$seed.pb.gz")
done
fp_start_clickhouse "$FP_TMP/ch"
echo "clickhouse-server $(fp_ch_query 'SELECT version()'); 16 bodies (64 for the hour) of about $(stat -c %s "$FP_TMP/body1.pb.gz") bytes ($STACKS stacks, 6000 samples each)"

PIDS=() URLS=()
# start STORE N: N collectors on STORE (a file gets a fresh one each); sets PIDS and URLS.
start() {
  local store=$1 n=$2 i port
  PIDS=() URLS=()
  for ((i = 0; i < n; i++)); do
    port=$(fp_free_port)
    "$FP_COLLECTOR" --listen "127.0.0.1:$port" --store "$store" >>"$FP_TMP/collector.log" 2>&1 &
    fp_track $!
    PIDS+=($!)
    URLS+=("http://127.0.0.1:$port")
    fp_wait_for 20 curl -sf "http://127.0.0.1:$port/healthz" -o /dev/null || fp_fail "a collector did not come up"
  done
}
stop() {
  local p
  for p in "${PIDS[@]}"; do fp_kill "$p"; done
}
fresh_store() { # fresh_store KIND: a new, empty store of that kind; prints its spec
  if [[ $1 == sqlite ]]; then
    rm -f "$FP_TMP/s.db"*
    echo "$FP_TMP/s.db"
  else
    fp_ch_query "DROP DATABASE IF EXISTS bench" >/dev/null
    echo "clickhouse://127.0.0.1:$FP_CH_PORT/bench"
  fi
}

# ---- 1. ingest ----------------------------------------------------------------------
for conf in "sqlite 1" "clickhouse 1" "clickhouse 2"; do
  read -r kind n <<<"$conf"
  for c in 8 64; do
    start "$(fresh_store "$kind")" "$n"
    c0=0 s0=$(fp_cpu_ns "$FP_CH_PID")
    for p in "${PIDS[@]}"; do c0=$((c0 + $(fp_cpu_ns "$p"))); done
    outs=() runs=()
    for ((i = 0; i < n; i++)); do
      "$BENCH" --url "${URLS[$i]}" "${BODIES[@]}" --concurrency $((c / n)) \
        --uploads $((UPLOADS / n)) --run-id "r$i" >"$FP_TMP/out$i" &
      runs+=($!)
    done
    for r in "${runs[@]}"; do wait "$r" || fp_fail "an ingest run failed: $(cat "$FP_TMP"/out*)"; done
    c1=0 s1=$(fp_cpu_ns "$FP_CH_PID")
    for p in "${PIDS[@]}"; do c1=$((c1 + $(fp_cpu_ns "$p"))); done
    rate=0 p50=0 p99=0 secs=0
    for ((i = 0; i < n; i++)); do
      o=$(cat "$FP_TMP/out$i")
      rate=$(awk -v a="$rate" -v b="$(figure rate "$o")" 'BEGIN {printf "%.1f", a + b}')
      p50=$(awk -v a="$p50" -v b="$(figure p50_ms "$o")" 'BEGIN {print (b > a ? b : a)}')
      p99=$(awk -v a="$p99" -v b="$(figure p99_ms "$o")" 'BEGIN {print (b > a ? b : a)}')
    done
    server=""
    [[ $kind == clickhouse ]] && server=", clickhouse-server CPU per upload $(((s1 - s0) / UPLOADS / 1000)) us"
    echo "ingest $kind, $n collector(s), $c uploaders: $rate uploads/s, p50 $p50 ms, p99 $p99 ms, collector CPU per upload $(((c1 - c0) / UPLOADS / 1000)) us$server"
    stop
  done
done

# ---- 2. one hour of 100 hosts, merged ------------------------------------------------
median() { sort -n | sed -n 2p; }
for kind in sqlite clickhouse clickhouse-zstd; do
  if [[ $kind == clickhouse-zstd ]]; then # the same server, its parts compressed with zstd
    fp_stop_clickhouse
    FP_CH_ZSTD=1 fp_start_clickhouse "$FP_TMP/ch-zstd"
  fi
  start "$(fresh_store "${kind%-zstd}")" 1
  "$BENCH" --url "${URLS[0]}" "${HOUR_BODIES[@]}" --concurrency 100 --uploads 6000 \
    --run-id hour >"$FP_TMP/hour" || fp_fail "loading the hour failed: $(cat "$FP_TMP/hour")"
  from=1767225600 # 2026-01-01T00:00:00Z, where collector-bench's minutes start
  q="from=$from&to=$((from + 3600))"
  samples=$(curl -sf "${URLS[0]}/api/v1/series" | python3 -c 'import json,sys; print(sum(s["samples"] for s in json.load(sys.stdin)["series"]))')
  for path in profile flamegraph; do
    t=$(for _ in 1 2 3; do curl -sf -o "$FP_TMP/q.out" -w '%{time_total}\n' "${URLS[0]}/api/v1/$path?$q"; done | median)
    echo "merged hour ($kind): /api/v1/$path over 100 hosts x 60 uploads ($samples samples): $t s (median of 3), $(stat -c %s "$FP_TMP/q.out") bytes"
  done
  if [[ $kind == sqlite ]]; then
    bytes=$(($(stat -c %s "$FP_TMP/s.db") + $(stat -c %s "$FP_TMP/s.db-wal" 2>/dev/null || echo 0)))
    echo "bytes per sample (sqlite): $(awk -v b="$bytes" -v s="$samples" 'BEGIN {printf "%.3f", b / s}') ($bytes bytes of file and log)"
  else
    bytes=$(fp_ch_query "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'bench' AND active")
    echo "bytes per sample ($kind, as written): $(awk -v b="$bytes" -v s="$samples" 'BEGIN {printf "%.3f", b / s}') ($bytes bytes of parts)"
    for t in series buckets samples drops upload_keys stacks frames functions mappings costs; do
      fp_ch_query "OPTIMIZE TABLE bench.$t FINAL" >/dev/null
    done
    bytes=$(fp_ch_query "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'bench' AND active")
    echo "bytes per sample ($kind, merged): $(awk -v b="$bytes" -v s="$samples" 'BEGIN {printf "%.3f", b / s}') ($bytes bytes of parts)"
  fi
  stop
done
echo "machine after: load average $(cut -d' ' -f1-3 /proc/loadavg)"
