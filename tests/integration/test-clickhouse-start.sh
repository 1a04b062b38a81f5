#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Collectors started together on one ClickHouse database, as the replicas
# of a deployment are: two and three at the same moment, on a fresh
# database and on one of each older schema version (1, 2, 3, 4), two rounds
# each. Every collector comes up (none exits: Debian's 18.16 answered the
# second ADD COLUMN with "column with this name already exists", and two
# CREATE TABLE IF NOT EXISTS at one moment with "already exists"), the
# schema ends at version 8 with every column and table and the samples in their
# new order, no migration table is left, and an upload through each
# collector is stored once and read back through another.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 280
fp_require_go
MK=$FP_SRC/tests/integration/mkpprof.py
[[ -x $FP_COLLECTOR ]] || fp_fail "missing $FP_COLLECTOR"

fp_start_clickhouse "$FP_TMP/ch"
CH=clickhouse://127.0.0.1:$FP_CH_PORT
echo "default:" >"$FP_TMP/ch.cred"
chmod 600 "$FP_TMP/ch.cred"
fp_log "clickhouse-server $(fp_ch_query 'SELECT version()') on port $FP_CH_PORT"

# A version-5 database to take older ones from: made by one collector, alone.
port=$(fp_free_port)
"$FP_COLLECTOR" --listen "127.0.0.1:$port" --store "$CH/template" \
  --store-credentials "$FP_TMP/ch.cred" >>"$FP_TMP/template.log" 2>&1 &
tpl=$!
fp_track "$tpl"
fp_wait_for 30 curl -sf "http://127.0.0.1:$port/healthz" -o /dev/null ||
  fp_fail "the template collector did not come up: $(tail -3 "$FP_TMP/template.log")"
fp_kill "$tpl"
fp_untrack "$tpl"
OLD_SAMPLES="(hour UInt32, start_ns Int64, series_id UInt64, length_ns Int64, upload UInt64, stack_id UInt64, tid Int32, thread_name String, count UInt64, value UInt64) ENGINE = ReplacingMergeTree PARTITION BY hour ORDER BY (series_id, start_ns, upload, stack_id, tid, thread_name)"

q() { fp_ch_query "$1" >/dev/null || fp_fail "ClickHouse refused: $1"; }

# make_db DB VERSION: DB as schema VERSION left it (0: no database at all).
make_db() {
  local db=$1 v=$2 t
  q "DROP DATABASE IF EXISTS $db"
  ((v == 0)) && return 0
  q "CREATE DATABASE $db"
  for t in meta series buckets samples drops upload_keys stacks frames functions mappings costs; do
    q "CREATE TABLE $db.$t AS template.$t"
  done
  if ((v <= 4)); then
    q "ALTER TABLE $db.functions DROP COLUMN system_name"
    q "ALTER TABLE $db.functions DROP COLUMN filename"
    q "ALTER TABLE $db.frames DROP COLUMN line"
  fi
  if ((v <= 3)); then
    q "DROP TABLE $db.samples"
    q "CREATE TABLE $db.samples $OLD_SAMPLES"
  fi
  ((v <= 2)) && q "ALTER TABLE $db.buckets DROP COLUMN key"
  ((v <= 1)) && q "ALTER TABLE $db.series DROP COLUMN container"
  q "INSERT INTO $db.meta VALUES ($v, 0)"
}

# together DB N: N collectors started at the same moment on DB; each must come up.
together() {
  local db=$1 n=$2 i
  PORTS=() PIDS=()
  for ((i = 0; i < n; i++)); do PORTS+=("$(fp_free_port)"); done
  for ((i = 0; i < n; i++)); do
    "$FP_COLLECTOR" --listen "127.0.0.1:${PORTS[i]}" --store "$CH/$db" \
      --store-credentials "$FP_TMP/ch.cred" >"$FP_TMP/c$i.log" 2>&1 &
    PIDS+=($!)
    fp_track $!
  done
  for ((i = 0; i < n; i++)); do
    fp_wait_for 30 bash -c "curl -sf http://127.0.0.1:${PORTS[i]}/healthz -o /dev/null || ! kill -0 ${PIDS[i]}" ||
      fp_fail "$db: collector $i of $n did not come up: $(tail -3 "$FP_TMP/c$i.log")"
    kill -0 "${PIDS[i]}" 2>/dev/null ||
      fp_fail "$db: collector $i of $n exited: $(tail -3 "$FP_TMP/c$i.log")"
  done
}

now=$(date +%s)
python3 "$MK" good "$FP_TMP/u.pb.gz" --stacks 7 --samples 300 --seed 3
runs=0
for round in 1 2; do
  for v in 0 1 2 3 4; do
    for n in 2 3; do
      db=start_v${v}_n${n}
      make_db "$db" "$v"
      together "$db" "$n"
      [[ $(fp_ch_query "SELECT max(version) FROM $db.meta") == 8 ]] || fp_fail "$db: schema version $(fp_ch_query "SELECT max(version) FROM $db.meta")"
      cols=$(fp_ch_query "SELECT count() FROM system.columns WHERE database = '$db' AND ((table = 'series' AND name = 'container') OR (table = 'buckets' AND name = 'key'))")
      [[ $cols == 2 ]] || fp_fail "$db: the columns of versions 2 and 3 are missing"
      cols=$(fp_ch_query "SELECT count() FROM system.columns WHERE database = '$db' AND ((table = 'functions' AND name IN ('system_name', 'filename')) OR (table = 'frames' AND name = 'line'))")
      [[ $cols == 3 ]] || fp_fail "$db: the columns of version 5 are missing"
      tables=$(fp_ch_query "SELECT count() FROM system.tables WHERE database = '$db' AND name IN ('rollups', 'rollup_drops', 'rollup_builds')")
      [[ $tables == 3 ]] || fp_fail "$db: the tables of version 6 are missing"
      cols=$(fp_ch_query "SELECT count() FROM system.columns WHERE database = '$db' AND table = 'mappings' AND name = 'vaddr1'")
      [[ $cols == 1 ]] || fp_fail "$db: the column of version 7 is missing"
      tables=$(fp_ch_query "SELECT count() FROM system.tables WHERE database = '$db' AND name IN ('debugfiles', 'debugfiles_used')")
      [[ $tables == 2 ]] || fp_fail "$db: the tables of version 8 are missing"
      key=$(fp_ch_query "SELECT sorting_key FROM system.tables WHERE database = '$db' AND name = 'samples'")
      [[ $key == "series_id, tid, thread_name, stack_id, start_ns, upload" ]] || fp_fail "$db: samples sorted by '$key'"
      # Each collector stores one upload (its own key) and another reads all of them.
      for ((i = 0; i < n; i++)); do
        from=$(((now - 300 + 60 * i) * 1000000000))
        st=$(curl -s -o "$FP_TMP/resp" -w '%{http_code}' -H "Idempotency-Key: $db-$i" --data-binary @"$FP_TMP/u.pb.gz" \
          "http://127.0.0.1:${PORTS[i]}/api/v1/ingest?host=h$i&pid=$((100 + i))&starttime=7&comm=w&exe=/usr/bin/w&event=cpu-clock&from=$from&to=$((from + 60000000000))&agent=test")
        [[ $st == 200 ]] || fp_fail "$db: upload through collector $i: HTTP $st $(cat "$FP_TMP/resp")"
      done
      curl -sf "http://127.0.0.1:${PORTS[n - 1]}/api/v1/profile?process=w&from=-1h" -o "$FP_TMP/p.pb.gz" ||
        fp_fail "$db: no profile from collector $((n - 1))"
      got=$(fp_profile_total "$FP_TMP/p.pb.gz")
      [[ $got == $((300 * n)) ]] || fp_fail "$db: the profile holds $got samples, not $((300 * n))"
      for p in "${PIDS[@]}"; do fp_kill "$p"; done
      left=$(fp_ch_query "SELECT count() FROM system.tables WHERE database = '$db' AND name IN ('samples_v3', 'samples_v4')")
      [[ $left == 0 ]] || fp_fail "$db: a migration table is left"
      runs=$((runs + 1))
    done
  done
  fp_ok "round $round: 2 and 3 collectors at once, from a fresh database and versions 1-4: all up, version 8, every upload once"
done
fp_ok "$runs databases set up by collectors started together"
