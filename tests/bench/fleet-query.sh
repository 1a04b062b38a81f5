#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Fleet-wide queries: what a collector answers a day (or a week) of a
# fleet in, and what its summaries (storage/rollup.c) cost.
#
#   1. A real profile: the agent profiles tests/workloads/manystacks for
#      20 s (2 threads, ~900 distinct samples), dumped as one upload's body.
#   2. The load: BENCH_HOSTS (default 100) hosts, each uploading one profile
#      a minute for BENCH_DAYS (default 1; 7 for a week) days, through
#      collector-bench (one simulated agent per host), into a fresh
#      collector on SQLite (BENCH_STORE=sqlite, the default) or on a
#      ClickHouse server of its own (BENCH_STORE=clickhouse): uploads/s,
#      the store's size; then the time until every hour and day is
#      summarised, and the summaries' size.
#   3. Each query kind, timed (best of 3): the merged profile and flame
#      graph of all hosts over the whole range and over its first day, one
#      host's day, one hour of all hosts, and the query API's calls
#      (SelectMergeStacktraces, SelectSeries, Series, LabelValues,
#      ProfileTypes); beside the whole range of all hosts read without
#      summaries in the same invocation (SQLite: agentctl dump --store, the
#      same store code; ClickHouse: a second collector on the same
#      database with --no-summaries), with the ratio, and the two totals,
#      which must be equal.
#
# Figures only: it never fails on a time (exit non-zero only when something
# could not run, or the two totals differ). The machine's load is printed.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=fleet-query
HOSTS=${BENCH_HOSTS:-100}
STORE=${BENCH_STORE:-sqlite}
[[ $STORE == sqlite || $STORE == clickhouse ]] || fp_fail "BENCH_STORE is sqlite or clickhouse, not $STORE"
DAYS=${BENCH_DAYS:-1}
UPLOADS=$((HOSTS * DAYS * 1440))
fp_init $((600 + UPLOADS / 200))
COLLECTOR=$FP_BUILD/collector/fleetprof-collector
BENCH=$FP_BUILD/tests/collector-bench
[[ -x $COLLECTOR && -x $BENCH && -x $FP_BUILD/tests/manystacks ]] || fp_fail "build first"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- 1. one real upload ----
fp_start_agent --bucket 10
fp_start_workload manystacks "$FP_TMP/ms.out" "$FP_TMP/ms.ready" --threads 2 --depth 5 --seconds 40
fp_ctl start "$FP_WL_PID" --freq 99 >/dev/null || fp_fail "agentctl start failed"
sleep 20
fp_ctl stop "$FP_WL_PID" >/dev/null
fp_ctl dump "$FP_WL_PID" -o "$FP_TMP/profile.pb.gz" || fp_fail "dump failed"
fp_stop_agent
distinct=$(fp_pprof -raw -symbolize=none "$FP_TMP/profile.pb.gz" 2>/dev/null | grep -c '^ *[0-9]* *[0-9]*: ' || true)
echo "upload: manystacks, 20 s at 99 Hz: $distinct distinct samples, $(stat -c %s "$FP_TMP/profile.pb.gz") bytes of gzip pprof"

# ---- 2. the load ----
port=$(fp_free_port)
url=http://127.0.0.1:$port
echo "bench-$$" >"$FP_TMP/token"
store=$FP_TMP/c.db
if [[ $STORE == clickhouse ]]; then
  fp_start_clickhouse "$FP_TMP/ch"
  store=clickhouse://127.0.0.1:$FP_CH_PORT/fleet
  chq() { curl -sf "http://127.0.0.1:$FP_CH_PORT/" --data-binary "$1"; }
fi
fp_start_collector "$url" --listen "127.0.0.1:$port" --store "$store" \
  --token-file "$FP_TMP/token" --store-max-mb 65536 --max-read-ms 120000
out=$("$BENCH" --url "$url" --profile "$FP_TMP/profile.pb.gz" --token-file "$FP_TMP/token" \
  --concurrency "$HOSTS" --uploads "$UPLOADS" --run-id f) || fp_fail "the load failed: $out"
figure() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }
echo "load: $HOSTS hosts x $DAYS day(s) x 1440 uploads: $(figure rate "$out") uploads/s, p99 $(figure p99_ms "$out") ms"
# Summaries: the collector builds them once uploads pause; wait for all.
t0=$(date +%s.%N)
if [[ $STORE == sqlite ]]; then
  marked() { python3 -c 'import sqlite3,sys; c=sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True); print(c.execute("SELECT count(*) FROM rollup_dirty").fetchone()[0])' "$FP_TMP/c.db"; }
  until [[ $(marked) == 0 ]]; do sleep 1; done
  t1=$(date +%s.%N)
  read -r n_sum sum_bytes < <(python3 -c 'import sqlite3,sys; c=sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True); print(*c.execute("SELECT count(*), coalesce(sum(length(data)), 0) FROM rollups").fetchone())' "$FP_TMP/c.db")
  db=$(($(stat -c %s "$FP_TMP/c.db") + $(stat -c %s "$FP_TMP/c.db-wal" 2>/dev/null || echo 0)))
else
  # Every hour and every day with buckets has its summary.
  done_sql="SELECT (SELECT uniqExact(hour) FROM fleet.buckets) = (SELECT uniqExact(hour) FROM fleet.rollup_builds WHERE span = 1) AND (SELECT uniqExact(intDiv(hour, 24)) FROM fleet.buckets) = (SELECT uniqExact(hour) FROM fleet.rollup_builds WHERE span = 24)"
  until [[ $(chq "$done_sql") == 1 ]]; do sleep 1; done
  t1=$(date +%s.%N)
  n_sum=$(chq "SELECT count() FROM fleet.rollup_builds")
  chq "OPTIMIZE TABLE fleet.rollups FINAL" >/dev/null || true
  sum_bytes=$(chq "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'fleet' AND active AND table IN ('rollups', 'rollup_builds')")
  db=$(chq "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'fleet' AND active")
fi
echo "summaries: $n_sum of them built in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s after the load; $((sum_bytes / 1024)) KiB, $(awk -v a="$sum_bytes" -v b="$db" 'BEGIN {printf "%.1f", 100 * a / b}')% of the store's $((db / 1048576)) MiB"

# ---- 3. queries ----
day=2026-01-01T00:00:00Z
day_end=2026-01-02T00:00:00Z
# (The hosts upload in turn: some take a few minutes into the next day.)
end=$(date -u -d "2026-01-01 + $((DAYS + 1)) days" +%Y-%m-%dT%H:%M:%SZ)
# timed LABEL CURL-ARGS...: the best of three, in seconds.
timed() {
  local label=$1 best= t
  shift
  for _ in 1 2 3; do
    t=$(curl -s -o "$FP_TMP/answer" -w '%{time_total}' "$@") || fp_fail "$label: curl failed"
    best=$(awk -v a="$t" -v b="${best:-1e9}" 'BEGIN {print (a < b) ? a : b}')
  done
  printf '  %-52s %7.3f s  (%d bytes)\n' "$label" "$best" "$(stat -c %s "$FP_TMP/answer")"
  LAST=$best
}
connect() { timed "$1" -H 'Content-Type: application/json' -d "$3" "$url/querier.v1.QuerierService/$2"; }
ms() { echo $(($(date -u -d "$1" +%s) * 1000)); }
CPU=cpu-clock:cpu:nanoseconds:cpu:nanoseconds
echo "queries (best of 3):"
timed "merged profile, all hosts, the whole range" "$url/api/v1/profile?from=$day&to=$end"
whole_s=$LAST
curl -s "$url/api/v1/profile?from=$day&to=$end" -o "$FP_TMP/whole.pb.gz"
timed "flame graph, all hosts, the whole range" "$url/api/v1/flamegraph?from=$day&to=$end"
timed "merged profile, all hosts, one day" "$url/api/v1/profile?from=$day&to=$day_end"
timed "flame graph, all hosts, one day" "$url/api/v1/flamegraph?from=$day&to=$day_end"
timed "merged profile, one host, one day" "$url/api/v1/profile?host=bench-f-7&from=$day&to=$day_end"
timed "merged profile, all hosts, 00:30 to 23:30" "$url/api/v1/profile?from=2026-01-01T00:30:00Z&to=2026-01-01T23:30:00Z"
timed "merged profile, all hosts, one hour" "$url/api/v1/profile?from=2026-01-01T12:00:00Z&to=2026-01-01T13:00:00Z"
range="\"start\":\"$(ms 2026-01-01)\",\"end\":\"$(ms "$end")\""
connect "SelectMergeStacktraces, all hosts, the whole range" SelectMergeStacktraces "{\"profileTypeID\":\"$CPU\",$range}"
connect "SelectSeries by host, step 1 h, the whole range" SelectSeries "{\"profileTypeID\":\"$CPU\",$range,\"groupBy\":[\"host\"],\"step\":3600}"
connect "Series, the whole range" Series "{$range}"
connect "LabelValues(host), the whole range" LabelValues "{\"name\":\"host\",$range}"
connect "ProfileTypes, the whole range" ProfileTypes "{$range}"
timed "/api/v1/series, the whole range" "$url/api/v1/series?from=$day&to=$end"

# The peer: the whole range read without summaries, same totals.
best=
if [[ $STORE == sqlite ]]; then
  peer="agentctl dump --store"
  now=$(date +%s)
  since=$(((now - $(date -u -d 2026-01-01 +%s)) / 3600 + 1))
  for _ in 1 2 3; do
    t0=$(date +%s.%N)
    "$FP_AGENTCTL" dump --store "$FP_TMP/c.db" --since "${since}h" -o "$FP_TMP/raw.pb.gz" 2>"$FP_TMP/raw.err" ||
      fp_fail "agentctl dump --store failed: $(cat "$FP_TMP/raw.err")"
    t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')
    best=$(awk -v a="$t" -v b="${best:-1e9}" 'BEGIN {print (a < b) ? a : b}')
  done
else
  peer="a collector with --no-summaries"
  port2=$(fp_free_port)
  "$COLLECTOR" --listen "127.0.0.1:$port2" --store "$store" --token-file "$FP_TMP/token" \
    --no-summaries --max-read-ms 600000 >>"$FP_TMP/collector2.log" 2>&1 &
  fp_track $!
  fp_wait_for 15 curl -sf "http://127.0.0.1:$port2/healthz" -o /dev/null || fp_fail "the second collector did not start"
  url=http://127.0.0.1:$port2
  t0=$(date +%s.%N)
  code=$(curl -s "$url/api/v1/profile?from=$day&to=$end" -o "$FP_TMP/raw.pb.gz" -w '%{http_code}')
  best=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')
  if [[ $code != 200 ]]; then
    # A week of raw rows can outlast ClickHouse's 30 s per request: say so, and check the
    # total against the buckets' own sums (each upload once) in ClickHouse.
    echo "peer: $peer did not answer the whole range: HTTP $code after $(printf '%.1f' "$best") s: $(head -c 200 "$FP_TMP/raw.pb.gz")"
    a=$(fp_profile_total "$FP_TMP/whole.pb.gz" cpu)
    b=$(chq "SELECT sum(v) FROM (SELECT series_id, upload, any(value) AS v FROM fleet.buckets WHERE series_id IN (SELECT series_id FROM fleet.series WHERE event = 'cpu-clock') GROUP BY series_id, upload)")
    [[ $a == "$b" ]] || fp_fail "the summarised range's total $a is not the buckets' $b"
    echo "total: from summaries $a ns in ${whole_s} s, the same as the buckets' sums in ClickHouse"
    exit 0
  fi
fi
a=$(fp_profile_total "$FP_TMP/whole.pb.gz" cpu)
b=$(fp_profile_total "$FP_TMP/raw.pb.gz" cpu)
[[ $a == "$b" ]] || fp_fail "the summarised range's total $a is not the raw rows' $b"
echo "peer: all hosts over the whole range without summaries ($peer): $(printf '%.3f' "$best") s; from summaries ${whole_s} s (x$(awk -v a="$best" -v b="$whole_s" 'BEGIN {printf "%.1f", a / b}') faster); the same total, $a ns"
