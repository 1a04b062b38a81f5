#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A real collector's summaries against its raw rows, on SQLite
# (storage/rollup.c) and on a ClickHouse server of its own (ch-rollup.c):
#   1. 12 hosts upload a real profile a minute for 26 hours (collector-bench,
#      uploads out of order across hosts; the first minutes again, as a
#      retry would): the collector summarises once uploads pause, and is
#      killed (SIGKILL) while it does, three times; restarted, it finishes,
#      and /metrics says how many summaries it keeps, none to be made;
#   2. the merged profile of the whole range totals what the store's rows
#      do, read without summaries (SQLite: agentctl dump --store of the same
#      file; ClickHouse: a collector on the same database with
#      --no-summaries); ranges that tile it (whole days and hours, ragged
#      ends) total their series listings and at least the whole; one
#      host's too; the query API's flame graph of the day totals the day's
#      profile;
#   3. more uploads into a summarised hour (late): the same again, at once
#      (marked, read from the raw rows) and once summarised anew;
#      On ClickHouse, one hour's samples dropped behind the collector's
#      back (its buckets kept) leave the summarised profile whole: reads
#      take the summaries;
#   4. SQLite: the store passes PRAGMA integrity_check. ClickHouse: the
#      rows of a summary whose writer was killed are never read (they
#      belong to no summary written whole).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=summaries
fp_init 840
BENCH=$FP_BUILD/tests/collector-bench
[[ -x $BENCH ]] || fp_fail "build first (collector-bench)"

# One real upload's body: the agent's profile of manystacks.
fp_start_agent --bucket 10
fp_start_workload manystacks "$FP_TMP/ms.out" "$FP_TMP/ms.ready" --threads 2 --depth 5 --seconds 30
fp_ctl start "$FP_WL_PID" --freq 199 >/dev/null || fp_fail "agentctl start failed"
sleep 4
fp_ctl stop "$FP_WL_PID" >/dev/null
fp_ctl dump "$FP_WL_PID" -o "$FP_TMP/profile.pb.gz" || fp_fail "dump failed"
fp_stop_agent

port=$(fp_free_port)
url=http://127.0.0.1:$port
echo "summaries-$$" >"$FP_TMP/token"
start() { fp_start_collector "$url" --listen "127.0.0.1:$port" --store "$STORE" --token-file "$FP_TMP/token"; }
chq() { curl -sf "http://127.0.0.1:$FP_CH_PORT/" --data-binary "$1"; }
metric() { curl -sf "$url/metrics" | awk -v m="fleetprof_collector_store_summaries{state=\"$1\"}" '$1 == m {print $2}'; }
marked() { # "MARKED KEPT": hours (and days) to summarise, summaries kept
  if [[ $KIND == sqlite ]]; then
    python3 -c 'import sqlite3,sys
c = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(c.execute("SELECT count(*) FROM rollup_dirty").fetchone()[0], c.execute("SELECT count(*) FROM rollups").fetchone()[0])' "$DB"
  else
    # Hours whose buckets no summary holds (the collector's own count), and days
    # with buckets but no summary; the summaries written whole.
    local days
    days=$(chq "SELECT (SELECT uniqExact(intDiv(hour, 24)) FROM summ.buckets) - (SELECT uniqExact(hour) FROM summ.rollup_builds WHERE span = 24)")
    echo "$(($(metric marked) + days)) $(chq "SELECT count() FROM summ.rollup_builds")"
  fi
}
finished() { read -r m _ < <(marked) && [[ $m == 0 ]]; }
load() { # load SALT UPLOADS: hosts bench-s-0..11, keys salted (another salt: stored again)
  "$BENCH" --url "$url" --profile "$FP_TMP/profile.pb.gz" --token-file "$FP_TMP/token" \
    --concurrency 12 --uploads "$2" --run-id s --key-salt "$1" >"$FP_TMP/load.$1" 2>&1 ||
    fp_fail "the load $1 failed: $(tail -2 "$FP_TMP/load.$1")"
}

# ---- the checks of part 2 ----
# The raw rows, read without summaries: the store file itself, or a collector that reads none.
raw_total() { # cpu ns of the whole store, read from its raw rows
  if [[ $KIND == sqlite ]]; then
    "$FP_AGENTCTL" dump --store "$DB" --since 100000h -o "$FP_TMP/raw.pb.gz" 2>"$FP_TMP/raw.err" ||
      fp_fail "agentctl dump --store failed: $(cat "$FP_TMP/raw.err")"
  else
    curl -sf -o "$FP_TMP/raw.pb.gz" "$url2/api/v1/profile?from=2025-12-31T00:00:00Z&to=2026-01-03T00:00:00Z" ||
      fp_fail "no profile from the collector with --no-summaries"
  fi
  fp_profile_total "$FP_TMP/raw.pb.gz" cpu
}
total() { # total QUERY: cpu ns of the collector's merged profile (0: nothing there, 404)
  local code
  code=$(curl -s "$url/api/v1/profile?$1" -o "$FP_TMP/p.pb.gz" -w '%{http_code}')
  [[ $code == 404 ]] && { echo 0; return; }
  [[ $code == 200 ]] || fp_fail "no profile of ?$1: HTTP $code"
  fp_profile_total "$FP_TMP/p.pb.gz" cpu
}
series_total() { curl -sf "$url/api/v1/series?$1" | fp_json_get 'sum(s["value"] for s in d["series"])'; }
check_all() { # check_all WHEN
  local whole raw
  whole=$(total "from=2025-12-31T00:00:00Z&to=2026-01-03T00:00:00Z")
  raw=$(raw_total)
  [[ $whole == "$raw" && $whole -gt 0 ]] || fp_fail "$1: the whole range totals $whole, its raw rows $raw"
  [[ $(series_total "from=2025-12-31T00:00:00Z&to=2026-01-03T00:00:00Z") == "$raw" ]] ||
    fp_fail "$1: the series listing of the whole range does not total its buckets' $raw"
  # Pieces that tile the range: whole days and hours, and ragged ends, add up to the whole.
  local sum=0 t q
  for q in "from=2025-12-31T00:00:00Z&to=2026-01-01T00:00:00Z" \
    "from=2026-01-01T00:00:00Z&to=2026-01-01T07:20:00Z" \
    "from=2026-01-01T07:20:00Z&to=2026-01-01T09:00:00Z" \
    "from=2026-01-01T09:00:00Z&to=2026-01-02T01:59:30Z" \
    "from=2026-01-02T01:59:30Z&to=2026-01-03T00:00:00Z"; do
    t=$(total "$q")
    [[ $(series_total "$q") == "$t" ]] || fp_fail "$1: ?$q: the series listing and the profile differ"
    sum=$((sum + t))
  done
  # A bucket straddling a boundary is in both pieces it overlaps: the pieces may add to more.
  ((sum >= raw)) || fp_fail "$1: the pieces total $sum, less than the whole $raw"
  # One host, over ragged ends: its profile and its series listing (two reads of the summaries).
  local h q="host=bench-s-3&from=2026-01-01T00:10:00Z&to=2026-01-02T01:50:00Z"
  h=$(total "$q")
  [[ $h -gt 0 && $(series_total "$q") == "$h" ]] || fp_fail "$1: host bench-s-3's profile and series differ"
  # The query API's flame graph of the day: the profile's total.
  local fg day
  fg=$(curl -sf -H 'Content-Type: application/json' \
    -d '{"profileTypeID":"cpu-clock:cpu:nanoseconds:cpu:nanoseconds","start":"1767225600000","end":"1767312000000"}' \
    "$url/querier.v1.QuerierService/SelectMergeStacktraces" | fp_json_get 'd["flamegraph"]["total"]')
  day=$(total "from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z")
  [[ $fg == "$day" ]] || fp_fail "$1: the query API's flame graph of the day totals $fg, the profile $day"
  fp_ok "$1: every range totals what its raw rows do ($raw ns in all, the day $day)"
}
# run_store KIND: parts 1-4 on a fresh store of KIND (sqlite or clickhouse).
run_store() {
  KIND=$1
  if [[ $KIND == sqlite ]]; then
    DB=$FP_TMP/c.db
    STORE=$DB
  else
    fp_start_clickhouse "$FP_TMP/ch"
    STORE=clickhouse://127.0.0.1:$FP_CH_PORT/summ
  fi
  # ---- 1. the load; killed while summarising ----
  start
  load a $((12 * 26 * 60))
  load a 120 # the first ten minutes of each host again, the same keys: duplicates, stored once
  kills=0
  for round in 1 2 3; do
    # Uploads paused: the writer summarises now; kill it in the middle.
    sleep "0.$((RANDOM % 9 + 1))$((round - 1))"
    read -r m k < <(marked)
    kill -9 "$FP_COLL_PID" 2>/dev/null && kills=$((kills + 1))
    wait "$FP_COLL_PID" 2>/dev/null || true
    fp_untrack "$FP_COLL_PID"
    fp_log "$KIND: killed while $m hours and days were marked, $k summaries kept"
    start
  done
  fp_wait_for 180 finished || fp_fail "$KIND: the summaries were not finished: $(marked) marked and kept"
  read -r m k < <(marked)
  # (Read whole first: under pipefail, grep -q's early exit can fail curl with SIGPIPE.)
  metrics=$(curl -sf "$url/metrics") || fp_fail "/metrics failed"
  grep -q "^fleetprof_collector_store_summaries{state=\"kept\"} $k\$" <<<"$metrics" ||
    fp_fail "/metrics does not say $k summaries kept: $(grep summaries <<<"$metrics")"
  grep -q '^fleetprof_collector_store_summaries{state="marked"} 0$' <<<"$metrics" ||
    fp_fail "/metrics does not say none is marked"
  fp_ok "$KIND: 12 hosts x 26 h of uploads, the collector killed $kills times while summarising: $k summaries, none marked (and /metrics says so)"

  # ---- 2. the same as the raw rows ----
  if [[ $KIND == clickhouse ]]; then # the peer: a collector on the same database that reads none
    local port2
    port2=$(fp_free_port)
    url2=http://127.0.0.1:$port2
    "$FP_COLLECTOR" --listen "127.0.0.1:$port2" --store "$STORE" --no-summaries >>"$FP_TMP/collector2.log" 2>&1 &
    fp_track $!
    fp_wait_for 15 curl -sf "$url2/healthz" -o /dev/null || fp_fail "the collector with --no-summaries did not start"
  fi
  check_all "$KIND: summarised"

  # ---- 3. late uploads into summarised hours ----
  load b 60 # each host's first five minutes again, new keys: stored again, in summarised hours
  read -r m k < <(marked)
  # (ClickHouse's writer may have summarised some again already: its reads check each summary.)
  [[ $KIND == clickhouse ]] || ((m > 0)) || fp_fail "late uploads marked nothing"
  check_all "$KIND: late uploads, $m hours and days marked"
  fp_wait_for 120 finished || fp_fail "$KIND: the late hours were not summarised again: $(marked)"
  check_all "$KIND: late uploads, summarised again"
  if [[ $KIND == clickhouse ]]; then
    # Reads take the summaries: one hour's samples dropped behind the collector's back
    # (its buckets kept) leave the summarised profile whole, the raw rows short.
    local whole_before whole_after raw_after hour
    whole_before=$(total "from=2025-12-31T00:00:00Z&to=2026-01-03T00:00:00Z")
    hour=$(($(date -u -d 2026-01-01T05:00:00Z +%s) / 3600))
    chq "ALTER TABLE summ.samples DROP PARTITION ID '$hour'" >/dev/null || fp_fail "could not drop hour $hour's samples"
    whole_after=$(total "from=2025-12-31T00:00:00Z&to=2026-01-03T00:00:00Z")
    raw_after=$(raw_total)
    [[ $whole_after == "$whole_before" ]] && ((raw_after < whole_before)) ||
      fp_fail "clickhouse: with 05:00's samples dropped the profile totals $whole_after (was $whole_before), the raw rows $raw_after"
    fp_ok "clickhouse: reads take the summaries: with 05:00's samples dropped behind the collector's back the profile still totals $whole_after, the raw rows $raw_after"
  fi

  # ---- 4. integrity ----
  fp_stop_collector
  if [[ $KIND == sqlite ]]; then
    ok=$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchone()[0])' "$DB")
    [[ $ok == ok ]] || fp_fail "integrity_check: $ok"
    fp_ok "sqlite: the store passes integrity_check"
  else
    orphans=$(chq "SELECT uniqExact(build) FROM summ.rollups WHERE build NOT IN (SELECT build FROM summ.rollup_builds)")
    fp_ok "clickhouse: $orphans summaries whose writer was stopped half-way (rows, no build) are left unread"
  fi
}

run_store sqlite
run_store clickhouse
