#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The collector on ClickHouse: Debian's clickhouse-server started by the
# test on private ports and a private data folder, real collectors and a
# real agent on 127.0.0.1.
#   1. set-up: a collector creates its tables; bad URLs, credentials in the
#      URL, refused credentials and another application's database each
#      get one clear line;
#   2. the same uploads to a SQLite collector and a ClickHouse one: the
#      same series, profiles (go tool pprof), drops, time line and flame
#      graph, also of a Pyroscope push and an OTLP request and selected
#      by their labels; a retried upload (same key) is stored once through
#      either of two collectors on one ClickHouse, also when both race;
#   2b. a database of schema version 2 is migrated: keys stored before
#      and after both answer "duplicate";
#   2c. the samples of a version-3 database are sorted anew (version 4),
#      also when a migration crashed half-way, two collectors migrate at
#      once, or a racing collector's rename was torn or left uncopied
#      (found at version 4): every sample counted once; a cluster's
#      Distributed table is left alone; a collector whose migration does
#      not settle starts, says why, answers 503 until it does, then stores;
#   3. two collectors on one ClickHouse: an agent (--collector A,B) uploads
#      through A, go tool pprof reads the same merged profile from B;
#   4. the collector in use killed (SIGKILL) mid-flush, three times: the
#      agent fails over to the other, and the store holds exactly the
#      agent's samples: none lost or doubled;
#   5. ClickHouse stopped under load: uploads get 503 and wait in the
#      agent, reads get a clear error, /healthz says degraded; restarted,
#      the collectors reconnect on their own and no sample is lost;
#   6. retention and the byte budget drop whole old partitions, never
#      the newest.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 290
fp_require_go
MK=$FP_SRC/tests/integration/mkpprof.py
[[ -x $FP_COLLECTOR ]] || fp_fail "missing $FP_COLLECTOR"

fp_start_clickhouse "$FP_TMP/ch"
CH=clickhouse://127.0.0.1:$FP_CH_PORT
fp_log "clickhouse-server $(fp_ch_query 'SELECT version()') on port $FP_CH_PORT"
echo "default:" >"$FP_TMP/ch.cred"
chmod 600 "$FP_TMP/ch.cred"

# start_coll NAME PORT STORE ARGS...: a collector logging to $FP_TMP/NAME.log; sets PID_<NAME>.
start_coll() {
  local name=$1 port=$2 store=$3
  shift 3
  "$FP_COLLECTOR" --listen "127.0.0.1:$port" --store "$store" "$@" >>"$FP_TMP/$name.log" 2>&1 &
  fp_track $!
  printf -v "PID_$name" '%s' $!
  fp_wait_for 20 curl -sf "http://127.0.0.1:$port/healthz" -o /dev/null ||
    fp_fail "collector $name did not come up: $(tail -3 "$FP_TMP/$name.log")"
}
# refused ARGS...: the collector refuses to start, exit 1 or 2, with one line saying WHY ($WHY).
refused() {
  local rc=0 out
  out=$(fp_timeout 30 "$FP_COLLECTOR" --listen "127.0.0.1:$(fp_free_port)" "$@" 2>&1) || rc=$?
  ((rc == 1 || rc == 2)) || fp_fail "collector $* exited $rc: $out"
  [[ $(grep -vc WARNING <<<"$out") == 1 ]] || fp_fail "collector $*: not one line: $out"
  grep -qi -- "$WHY" <<<"$out" || fp_fail "collector $*: the error does not say '$WHY': $out"
}

# ---- 1. set-up and bad settings ------------------------------------------------
WHY="clickhouse://HOST:PORT/DATABASE" refused --store "clickhouse://127.0.0.1:$FP_CH_PORT"
WHY="invalid database" refused --store "$CH/bad-name"
WHY="must not hold credentials" refused --store "clickhouse://u:p@127.0.0.1:$FP_CH_PORT/x"
echo "nosuchuser:nopassword" >"$FP_TMP/bad.cred"
WHY="refused the credentials" refused --store "$CH/fp_auth" --store-credentials "$FP_TMP/bad.cred"
WHY="applies to a clickhouse" refused --store "$FP_TMP/x.db" --store-credentials "$FP_TMP/ch.cred"
fp_ch_query "CREATE DATABASE other" >/dev/null
fp_ch_query "CREATE TABLE other.accounts (id UInt64) ENGINE = MergeTree ORDER BY id" >/dev/null
WHY="did not create" refused --store "$CH/other"
fp_ok "bad store settings are refused with one line each"

pa=$(fp_free_port) pb=$(fp_free_port) ps=$(fp_free_port)
A=http://127.0.0.1:$pa B=http://127.0.0.1:$pb S=http://127.0.0.1:$ps
start_coll A "$pa" "$CH/fleetprof" --store-credentials "$FP_TMP/ch.cred"
start_coll B "$pb" "$CH/fleetprof" --store-credentials "$FP_TMP/ch.cred"
start_coll S "$ps" "$FP_TMP/sqlite.db"
tables=$(fp_ch_query "SELECT count() FROM system.tables WHERE database = 'fleetprof'")
[[ $tables == 16 ]] || fp_fail "expected 16 tables in database fleetprof, found $tables"
[[ $(fp_ch_query "SELECT max(version) FROM fleetprof.meta") == 8 ]] || fp_fail "schema version not recorded"
key=$(fp_ch_query "SELECT sorting_key FROM system.tables WHERE database = 'fleetprof' AND name = 'samples'")
[[ $key == "series_id, tid, thread_name, stack_id, start_ns, upload" ]] || fp_fail "samples is sorted by '$key'"
fp_ok "two collectors share one ClickHouse database (16 tables, schema version 8)"

# ---- 2. the same answers as SQLite; idempotency -------------------------------------
post() { # post URL FILE QUERY KEY: prints the HTTP status
  curl -s -o "$FP_TMP/resp" -w '%{http_code}' -H "Idempotency-Key: $4" --data-binary @"$2" \
    "$1/api/v1/ingest?$3"
}
meta() { # meta HOST PID COMM EVENT FROM_S
  local from=$(($5 * 1000000000))
  echo "host=$1&pid=$2&starttime=77&comm=$3&exe=/usr/bin/$3&event=$4&from=$from&to=$((from + 60000000000))&agent=test&drops=throttled:$2,kernel_ring_overflow:2"
}
now=$(date +%s)
i=0
for host in alpha beta; do
  for pid in 101 102 103; do
    for ev in cpu-clock page-faults; do
      i=$((i + 1))
      python3 "$MK" good "$FP_TMP/u$i.pb.gz" --stacks $((5 + i)) --samples $((200 + 37 * i)) --seed "$i"
      q=$(meta "$host" "$pid" "svc$pid" "$ev" $((now - 600 + 60 * (i % 4))))
      for url in "$A" "$S"; do
        st=$(post "$url" "$FP_TMP/u$i.pb.gz" "$q" "key-$i")
        [[ $st == 200 ]] || fp_fail "upload $i to $url: HTTP $st $(cat "$FP_TMP/resp")"
      done
    done
  done
done
# Each mapping's ELF address (fleetprof's field of Mapping) kept by both stores.
python3 "$FP_SRC/tests/integration/pprofvaddr.py" set "$FP_TMP/u1.pb.gz" "$FP_TMP/uv.pb.gz"
python3 "$FP_SRC/tests/integration/pprofvaddr.py" show "$FP_TMP/uv.pb.gz" | sort >"$FP_TMP/uv.want"
grep -q "vaddr 0x" "$FP_TMP/uv.want" || fp_fail "the test profile has no mapping address"
for url in "$A" "$S"; do
  st=$(post "$url" "$FP_TMP/uv.pb.gz" "$(meta vaddr 190 svc190 cpu-clock $((now - 600)))" "vaddr-1")
  [[ $st == 200 ]] || fp_fail "upload with mapping addresses to $url: HTTP $st $(cat "$FP_TMP/resp")"
  curl -sf -o "$FP_TMP/uv-back.pb.gz" "$url/api/v1/profile?host=vaddr" || fp_fail "no profile of host vaddr from $url"
  python3 "$FP_SRC/tests/integration/pprofvaddr.py" show "$FP_TMP/uv-back.pb.gz" | sort >"$FP_TMP/uv.got"
  cmp -s "$FP_TMP/uv.want" "$FP_TMP/uv.got" || fp_fail "$url did not keep the mappings' addresses: $(diff "$FP_TMP/uv.want" "$FP_TMP/uv.got" | head -4)"
done
fp_ok "each mapping's ELF address is kept by ClickHouse and SQLite alike ($(wc -l <"$FP_TMP/uv.want") mappings)"
# Off-CPU time of one process beside its CPU time: the wait labels and the wall profile.
python3 "$MK" good "$FP_TMP/wall-cpu.pb.gz" --stacks 6 --samples 400 --seed 31
python3 "$MK" offcpu "$FP_TMP/wall-off.pb.gz" --stacks 9 --samples 700 --seed 32
for url in "$A" "$S"; do
  for ev in cpu-clock off-cpu; do
    f=$FP_TMP/wall-cpu.pb.gz
    [[ $ev == off-cpu ]] && f=$FP_TMP/wall-off.pb.gz
    st=$(post "$url" "$f" "$(meta delta 300 waiter "$ev" $((now - 400)))" "wall-$ev")
    [[ $st == 200 ]] || fp_fail "upload of $ev to $url: HTTP $st $(cat "$FP_TMP/resp")"
  done
done
# Other protocols: a Pyroscope Connect push with tags, an OTLP request.
python3 "$MK" good "$FP_TMP/pyro.pb.gz" --stacks 7 --samples 300 --seed 41 --time $(((now - 500) * 1000000000))
python3 "$FP_SRC/tests/integration/mkpush.py" "$FP_TMP/push.bin" \
  --series "service_name=pyapp,__name__=process_cpu,hostname=pyhost,region=eu-1" "$FP_TMP/pyro.pb.gz" --id p1
python3 "$FP_SRC/tests/integration/mkotlp.py" "$FP_TMP/otlp.bin" --service otel-ch
for url in "$A" "$S"; do
  st=$(curl -s -o "$FP_TMP/resp" -w '%{http_code}' -H 'Content-Type: application/proto' \
    --data-binary @"$FP_TMP/push.bin" "$url/push.v1.PusherService/Push")
  [[ $st == 200 ]] || fp_fail "Pyroscope push to $url: HTTP $st $(cat "$FP_TMP/resp")"
  st=$(curl -s -o "$FP_TMP/resp" -w '%{http_code}' -H 'Content-Type: application/x-protobuf' \
    --data-binary @"$FP_TMP/otlp.bin" "$url/v1development/profiles")
  [[ $st == 200 ]] || fp_fail "OTLP request to $url: HTTP $st $(cat "$FP_TMP/resp")"
done
# More than names: system names, files and lines, read back from both stores.
python3 "$MK" named "$FP_TMP/named.pb.gz" --stacks 6 --samples 120 --seed 51
for url in "$A" "$S"; do
  st=$(post "$url" "$FP_TMP/named.pb.gz" "$(meta epsilon 310 named cpu-clock $((now - 450)))" named-1)
  [[ $st == 200 ]] || fp_fail "upload of the named profile to $url: HTTP $st $(cat "$FP_TMP/resp")"
  curl -sf "$url/api/v1/profile?process=named&from=-1h" -o "$FP_TMP/named-back.pb.gz" ||
    fp_fail "no profile of the named upload from $url"
  python3 "$FP_SRC/tests/integration/names_check.py" "$FP_TMP/named-back.pb.gz" >"$FP_TMP/names.txt" ||
    fp_fail "$url lost names' system names, files or lines: $(cat "$FP_TMP/names.txt")"
done
fp_ok "system names, files and lines kept by ClickHouse and SQLite: $(tail -1 "$FP_TMP/names.txt")"
# Retries: through the other collector (B), both answer "stored once".
st=$(post "$B" "$FP_TMP/u3.pb.gz" "$(meta alpha 102 svc102 cpu-clock $((now - 600 + 180)))" key-3)
[[ $st == 200 ]] && grep -q duplicate "$FP_TMP/resp" || fp_fail "a retry through B was not a duplicate: $st $(cat "$FP_TMP/resp")"
# A race: one new upload sent to A and B at the same time, five times over.
python3 "$MK" good "$FP_TMP/race.pb.gz" --stacks 9 --samples 333 --seed 99
rq=$(meta gamma 200 racer cpu-clock $((now - 300)))
racers=()
for _ in 1 2 3 4 5; do
  post "$A" "$FP_TMP/race.pb.gz" "$rq" race-key >/dev/null &
  racers+=($!)
  post "$B" "$FP_TMP/race.pb.gz" "$rq" race-key >/dev/null &
  racers+=($!)
done
wait "${racers[@]}"
st=$(post "$S" "$FP_TMP/race.pb.gz" "$rq" race-key)
[[ $st == 200 ]] || fp_fail "race upload to SQLite: $st"

canon() { # canon URL PATH: the JSON answer, keys sorted
  local code
  code=$(curl -s -o "$FP_TMP/canon" -w '%{http_code}' "$1$2")
  [[ $code == 200 ]] || fp_fail "GET $1$2: HTTP $code $(head -c 300 "$FP_TMP/canon")"
  python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])), sort_keys=True))' "$FP_TMP/canon"
}
for path in "/api/v1/series" "/api/v1/series?host=beta&event=page-faults" "/api/v1/series?process=racer" \
  "/api/v1/timeline?host=alpha" "/api/v1/flamegraph?host=beta&pid=103" \
  "/api/v1/flamegraph?process=svc101&event=page-faults" "/api/v1/flamegraph?host=beta&thread=worker-1" \
  "/api/v1/flamegraph?pid=300&event=wall" "/api/v1/timeline?pid=300&event=wall" \
  "/api/v1/flamegraph?host=delta&event=off-cpu&thread=worker-1" "/api/v1/timeline?event=wall" \
  "/api/v1/series?label=region:eu-1" "/api/v1/series?service=otel-ch" "/api/v1/series?label=k8s.pod.name:web-1" \
  "/api/v1/flamegraph?label=region:eu-1&event=cpu"; do
  a=$(canon "$B" "$path") s=$(canon "$S" "$path")
  # The flame graph's cost block and store-specific timing are not part of the answer compared.
  a=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d.pop("cost", None); d.pop("hosts_cost", None); print(json.dumps(d, sort_keys=True))' "$a")
  s=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d.pop("cost", None); d.pop("hosts_cost", None); print(json.dumps(d, sort_keys=True))' "$s")
  [[ $a == "$s" ]] || fp_fail "GET $path differs: $(python3 -c '
import json, sys
a, s = json.loads(sys.argv[1]), json.loads(sys.argv[2])
la = a.get("series", [a]) if isinstance(a, dict) else a
ls = s.get("series", [s]) if isinstance(s, dict) else s
d = [(x, y) for x, y in zip(la, ls) if x != y]
print("%d vs %d entries; first differing: ClickHouse %s SQLite %s" % (len(la), len(ls), *(map(json.dumps, d[0]) if d else ("-", "-"))))' "$a" "$s" | head -c 1500)"
done
for q in "" "host=alpha" "process=racer" "pid=102&event=page-faults" "host=beta&event=page-faults" \
  "pid=300&event=off-cpu" "pid=300&event=wall" "event=wall" "host=delta&event=off-cpu&thread=worker-2" \
  "service=pyapp&event=cpu" "label=region:eu-1&event=cpu" "service=otel-ch&event=cpu"; do
  curl -sf "$B/api/v1/profile?$q" -o "$FP_TMP/ch.pb.gz" || fp_fail "profile ?$q from ClickHouse"
  curl -sf "$S/api/v1/profile?$q" -o "$FP_TMP/sq.pb.gz" || fp_fail "profile ?$q from SQLite"
  tc=$(fp_pprof -traces "$FP_TMP/ch.pb.gz" 2>/dev/null | grep -v -e '^File:' -e '^Type:' -e '^Time:' -e '^Duration:' | sort | md5sum)
  ts=$(fp_pprof -traces "$FP_TMP/sq.pb.gz" 2>/dev/null | grep -v -e '^File:' -e '^Type:' -e '^Time:' -e '^Duration:' | sort | md5sum)
  [[ $tc == "$ts" ]] || fp_fail "go tool pprof -traces of ?$q differs between ClickHouse and SQLite"
  t=cpu
  [[ $q == *off-cpu* ]] && t=off-cpu
  [[ $q == *wall* ]] && t=wall
  for t in samples $t; do
    [[ $(fp_profile_total "$FP_TMP/ch.pb.gz" $t) == $(fp_profile_total "$FP_TMP/sq.pb.gz" $t) ]] ||
      fp_fail "profile ?$q: $t totals differ"
  done
  [[ $q != *off-cpu* ]] || grep -q "runqueue" <<<"$(fp_pprof -tags "$FP_TMP/ch.pb.gz" 2>/dev/null)" ||
    fp_fail "profile ?$q from ClickHouse has no wait label"
done
# The query API (Grafana's, read/querier.c) answers the same from both stores: its
# listings, and each profile type's flame graph (bars decoded to names, canonical).
qapi() { curl -sf -H 'Content-Type: application/json' -d "$3" "$1/querier.v1.QuerierService/$2"; }
qcanon() {
  python3 -c 'import json,sys
d = json.load(sys.stdin)
fg = d.get("flamegraph")
if fg is None:
    for k, v in d.items():
        if isinstance(v, list):
            v.sort(key=json.dumps)
    print(json.dumps(d, sort_keys=True))
    sys.exit()
bars = []
for lv, level in enumerate(fg.get("levels", [])):
    vals, x = [int(v) for v in level.get("values", [])], 0
    for i in range(0, len(vals), 4):
        x += vals[i]
        bars.append((lv, x, vals[i + 1], vals[i + 2], fg["names"][vals[i + 3]]))
        x += vals[i + 1]
print(json.dumps([fg.get("total"), sorted(bars)]))'
}
for call in 'ProfileTypes {}' 'LabelNames {}' 'LabelValues {"name":"service_name"}' 'LabelValues {"name":"host"}' \
  'Series {"labelNames":["service_name","host","pid","__profile_type__"]}'; do
  a=$(qapi "$B" ${call%% *} "${call#* }" | qcanon) || fp_fail "query API ${call%% *} on ClickHouse failed"
  b=$(qapi "$S" ${call%% *} "${call#* }" | qcanon) || fp_fail "query API ${call%% *} on SQLite failed"
  [[ $a == "$b" ]] || fp_fail "query API $call differs: ClickHouse ${a:0:400} SQLite ${b:0:400}"
done
types=$(qapi "$S" ProfileTypes '{}' | fp_json_get '" ".join(t["ID"] for t in d["profileTypes"])')
for t in $types; do
  for sel in '{}' '{host=~\"alpha|beta\", service_name!=\"nothing\"}'; do
    req="{\"profileTypeID\":\"$t\",\"labelSelector\":\"$sel\"}"
    a=$(qapi "$B" SelectMergeStacktraces "$req" | qcanon) || fp_fail "SelectMergeStacktraces $t on ClickHouse failed"
    b=$(qapi "$S" SelectMergeStacktraces "$req" | qcanon) || fp_fail "SelectMergeStacktraces $t on SQLite failed"
    [[ $a == "$b" ]] || fp_fail "the flame graph of $t $sel differs: ClickHouse ${a:0:300} SQLite ${b:0:300}"
  done
done
fp_ok "the query API answers the same from ClickHouse and SQLite: listings, and the flame graphs of $(wc -w <<<"$types") profile types"
copies=$(fp_ch_query "SELECT uniqExact(upload) FROM fleetprof.buckets WHERE key = 'race-key'")
fp_log "the raced upload was written $copies time(s) before the key was seen"
racer=$(curl -sf "$B/api/v1/series?process=racer" | fp_json_get 'd["series"][0]["samples"]')
[[ $racer == 333 ]] || fp_fail "the raced upload holds $racer samples, want 333 (stored once)"
# A write that failed half-way and was retried leaves rows twice until ClickHouse merges
# them: first the samples twice (the retry wrote them again), then everything twice.
racer_rows="series_id IN (SELECT series_id FROM fleetprof.series WHERE comm = 'racer')"
same_as_sqlite() {
  local what=$1 n
  n=$(curl -sf "$B/api/v1/series?process=racer" | fp_json_get 'json.dumps([d["series"][0]["samples"], d["series"][0]["drops"]], sort_keys=True)')
  [[ $n == '[333, {"kernel_ring_overflow": 2, "throttled": 200}]' ]] || fp_fail "$what: the series says $n"
  curl -sf "$B/api/v1/profile?process=racer" -o "$FP_TMP/ch.pb.gz"
  curl -sf "$S/api/v1/profile?process=racer" -o "$FP_TMP/sq.pb.gz"
  [[ $(fp_pprof -traces "$FP_TMP/ch.pb.gz" 2>/dev/null | sed 1,4d | sort | md5sum) == \
    $(fp_pprof -traces "$FP_TMP/sq.pb.gz" 2>/dev/null | sed 1,4d | sort | md5sum) ]] ||
    fp_fail "$what: the profile differs from SQLite's"
  canon "$B" "/api/v1/flamegraph?process=racer&thread=worker-2" >"$FP_TMP/fb.json"
  canon "$S" "/api/v1/flamegraph?process=racer&thread=worker-2" >"$FP_TMP/fs.json"
  cmp -s "$FP_TMP/fb.json" "$FP_TMP/fs.json" ||
    fp_fail "$what: the flame graph of one thread differs: $(cat "$FP_TMP/fb.json") SQLite: $(cat "$FP_TMP/fs.json")"
}
fp_ch_query "INSERT INTO fleetprof.samples SELECT * FROM fleetprof.samples WHERE $racer_rows" >/dev/null
same_as_sqlite "samples rows written twice"
for t in buckets series; do
  fp_ch_query "INSERT INTO fleetprof.$t SELECT * FROM fleetprof.$t WHERE $racer_rows" >/dev/null
done
fp_ch_query "INSERT INTO fleetprof.drops SELECT * FROM fleetprof.drops WHERE target_id IN (SELECT target_id FROM fleetprof.series WHERE comm = 'racer')" >/dev/null
same_as_sqlite "the whole upload written twice"
[[ $(curl -sf "$B/api/v1/series?label=region:eu-1" | fp_json_get 'sorted({s["service"] for s in d["series"]})') == "['pyapp']" ]] ||
  fp_fail "label=region:eu-1 on ClickHouse does not select the Pyroscope series"
fp_ok "ClickHouse answers as SQLite does (series, drops, time line, flame graph, go tool pprof); Pyroscope and OTLP pushes and their labels; retries and races stored once"

# ---- 2b. a database of schema version 2 is migrated -----------------------------
# Version 2 kept the idempotency keys in upload_keys; 3 keeps them in buckets. A
# version-2 database is made from a new one (the column dropped, the key where 2
# put it), and a collector started on it migrates it: a retry of the upload stored
# under version 2 is still a duplicate, and a new upload's key is found in buckets.
pm=$(fp_free_port)
start_coll M "$pm" "$CH/migrated" --store-credentials "$FP_TMP/ch.cred"
mq=$(meta mig 400 migrant cpu-clock $((now - 200)))
st=$(post "http://127.0.0.1:$pm" "$FP_TMP/u1.pb.gz" "$mq" mig-key)
[[ $st == 200 ]] || fp_fail "upload to the database to migrate: $st $(cat "$FP_TMP/resp")"
fp_kill "$PID_M"
fp_ch_query "ALTER TABLE migrated.buckets DROP COLUMN key" >/dev/null
fp_ch_query "INSERT INTO migrated.upload_keys SELECT hour, 'mig-key', upload FROM migrated.buckets" >/dev/null
fp_ch_query "ALTER TABLE migrated.meta DELETE WHERE version >= 3" >/dev/null
meta_is() { [[ $(fp_ch_query "SELECT max(version) FROM $1.meta") == "$2" ]]; } # meta_is DB VERSION
# (the DELETE is a mutation: done in the background)
fp_wait_for 20 meta_is migrated 2 || fp_fail "could not make a version-2 database"
start_coll M "$pm" "$CH/migrated" --store-credentials "$FP_TMP/ch.cred"
[[ $(fp_ch_query "SELECT max(version) FROM migrated.meta") == 8 ]] || fp_fail "the version-2 database was not migrated"
st=$(post "http://127.0.0.1:$pm" "$FP_TMP/u1.pb.gz" "$mq" mig-key)
[[ $st == 200 ]] && grep -q duplicate "$FP_TMP/resp" || fp_fail "a key stored by version 2 is not a duplicate after the migration: $st $(cat "$FP_TMP/resp")"
st=$(post "http://127.0.0.1:$pm" "$FP_TMP/u2.pb.gz" "$(meta mig 401 migrant cpu-clock $((now - 100)))" mig-new)
[[ $st == 200 ]] && ! grep -q duplicate "$FP_TMP/resp" || fp_fail "a new upload after the migration: $st $(cat "$FP_TMP/resp")"
st=$(post "http://127.0.0.1:$pm" "$FP_TMP/u2.pb.gz" "$(meta mig 401 migrant cpu-clock $((now - 100)))" mig-new)
[[ $st == 200 ]] && grep -q duplicate "$FP_TMP/resp" || fp_fail "a retry after the migration is not a duplicate: $st $(cat "$FP_TMP/resp")"
want=$(($(fp_profile_total "$FP_TMP/u1.pb.gz" samples) + $(fp_profile_total "$FP_TMP/u2.pb.gz" samples)))
got=$(curl -sf "http://127.0.0.1:$pm/api/v1/series?host=mig" | fp_json_get 'sum(s["samples"] for s in d["series"])')
[[ $got == "$want" ]] || fp_fail "the migrated database holds $got samples, want $want (each upload once)"
fp_kill "$PID_M"
fp_ok "a version-2 database is migrated to 7: keys stored before and after are both duplicates, $got samples once"

# ---- 2c. samples of schema version 3 sorted anew, also after a crash half-way -------
# Version 3 sorted samples by time first; 4 by thread and stack (the table is made
# anew and copied an hour at a time). A version-3 database is made from a new one:
# three uploads over two hours, samples put back in the old order, version 4 taken
# off. In one copy a migration is also left as a crash would leave it: the table
# renamed, one hour copied and not yet dropped from the old one; another is
# migrated by two collectors started at once. Two more stay at version 4 and are
# left as a collector that raced another's whole migration leaves them: "torn",
# its rename done half (the new samples moved to samples_v3, none in its place),
# and "late", done whole and crashed before its copy (the new samples, with every
# row, as samples_v3 and an empty one in its place). Each way the migration
# finishes: new order, no table left over, every sample counted once.
v3() { # v3 DB: turns DB (of version 4) into one of version 3
  local db=$1
  fp_ch_query "RENAME TABLE $db.samples TO $db.samples_new" >/dev/null
  fp_ch_query "CREATE TABLE $db.samples AS $db.samples_new ENGINE = ReplacingMergeTree PARTITION BY hour ORDER BY (series_id, start_ns, upload, stack_id, tid, thread_name)" >/dev/null
  fp_ch_query "INSERT INTO $db.samples SELECT * FROM $db.samples_new" >/dev/null
  fp_ch_query "DROP TABLE $db.samples_new" >/dev/null
  fp_ch_query "ALTER TABLE $db.meta DELETE WHERE version >= 4" >/dev/null
  fp_wait_for 20 meta_is "$db" 3 || fp_fail "could not make a version-3 database of $db"
}
for db in resort halfway racing torn late; do
  start_coll M "$pm" "$CH/$db" --store-credentials "$FP_TMP/ch.cred"
  for k in 1 2 3; do
    st=$(post "http://127.0.0.1:$pm" "$FP_TMP/u$k.pb.gz" "$(meta "$db" 500 resorted cpu-clock $((now - 7300 + 3600 * (k / 2) + 60 * k)))" "$db-$k")
    [[ $st == 200 ]] || fp_fail "upload $k to $db: $st $(cat "$FP_TMP/resp")"
  done
  fp_kill "$PID_M"
  rows=$(fp_ch_query "SELECT count() FROM $db.samples")
  hours=$(fp_ch_query "SELECT uniqExact(hour) FROM $db.samples")
  [[ $hours -ge 2 ]] || fp_fail "the uploads to $db span $hours hour(s), want 2 or more"
  if [[ $db == torn || $db == late ]]; then
    fp_ch_query "RENAME TABLE $db.samples TO $db.samples_v3" >/dev/null
    [[ $db == late ]] && fp_ch_query "CREATE TABLE $db.samples AS $db.samples_v3" >/dev/null
  else
    v3 "$db"
  fi
  if [[ $db == halfway ]]; then
    fp_ch_query "CREATE TABLE $db.samples_v4 AS $db.samples ENGINE = ReplacingMergeTree PARTITION BY hour ORDER BY (series_id, tid, thread_name, stack_id, start_ns, upload)" >/dev/null
    fp_ch_query "RENAME TABLE $db.samples TO $db.samples_v3, $db.samples_v4 TO $db.samples" >/dev/null
    fp_ch_query "INSERT INTO $db.samples SELECT * FROM $db.samples_v3 WHERE hour = (SELECT min(hour) FROM $db.samples_v3)" >/dev/null
  fi
  if [[ $db == racing ]]; then # two collectors migrate it at once
    pn=$(fp_free_port)
    "$FP_COLLECTOR" --listen "127.0.0.1:$pn" --store "$CH/$db" --store-credentials "$FP_TMP/ch.cred" >>"$FP_TMP/N.log" 2>&1 &
    fp_track $!
    PID_N=$!
    start_coll M "$pm" "$CH/$db" --store-credentials "$FP_TMP/ch.cred"
    fp_wait_for 20 curl -sf "http://127.0.0.1:$pn/healthz" -o /dev/null ||
      fp_fail "the second collector migrating $db at once did not come up: $(tail -3 "$FP_TMP/N.log")"
    fp_kill "$PID_N"
  else
    start_coll M "$pm" "$CH/$db" --store-credentials "$FP_TMP/ch.cred"
  fi
  [[ $(fp_ch_query "SELECT max(version) FROM $db.meta") == 8 ]] || fp_fail "$db was not migrated to 8"
  key=$(fp_ch_query "SELECT sorting_key FROM system.tables WHERE database = '$db' AND name = 'samples'")
  [[ $key == "series_id, tid, thread_name, stack_id, start_ns, upload" ]] || fp_fail "$db: samples is sorted by '$key' after the migration"
  left=$(fp_ch_query "SELECT groupArray(name) FROM system.tables WHERE database = '$db' AND name LIKE 'samples_%'")
  [[ $left == "[]" ]] || fp_fail "$db: tables left over after the migration: $left"
  now_rows=$(fp_ch_query "SELECT uniqExact(series_id, upload, stack_id, tid, thread_name) FROM $db.samples")
  [[ $now_rows == "$rows" ]] || fp_fail "$db: $now_rows distinct samples rows after the migration, $rows before"
  want=$(($(fp_profile_total "$FP_TMP/u1.pb.gz" samples) + $(fp_profile_total "$FP_TMP/u2.pb.gz" samples) + $(fp_profile_total "$FP_TMP/u3.pb.gz" samples)))
  got=$(curl -sf "http://127.0.0.1:$pm/api/v1/profile?host=$db&from=$((now - 8000))&to=$now" -o "$FP_TMP/$db.pb.gz" -w '%{http_code}')
  [[ $got == 200 ]] || fp_fail "$db: the profile after the migration: HTTP $got"
  got=$(fp_profile_total "$FP_TMP/$db.pb.gz" samples)
  [[ $got == "$want" ]] || fp_fail "$db: the migrated profile holds $got samples, want $want (each once)"
  st=$(post "http://127.0.0.1:$pm" "$FP_TMP/u1.pb.gz" "$(meta "$db" 500 resorted cpu-clock $((now - 7300 + 60)))" "$db-1")
  [[ $st == 200 ]] && grep -q duplicate "$FP_TMP/resp" || fp_fail "$db: a retry after the migration is not a duplicate: $st $(cat "$FP_TMP/resp")"
  fp_kill "$PID_M"
done
# A cluster's tables are its operator's: a Distributed samples is left as it is.
start_coll M "$pm" "$CH/dist" --store-credentials "$FP_TMP/ch.cred"
fp_kill "$PID_M"
fp_ch_query "RENAME TABLE dist.samples TO dist.samples_local" >/dev/null
fp_ch_query "CREATE TABLE dist.samples AS dist.samples_local ENGINE = Distributed(test_shard_localhost, dist, samples_local, series_id)" >/dev/null
fp_ch_query "ALTER TABLE dist.meta DELETE WHERE version >= 4" >/dev/null
fp_wait_for 20 meta_is dist 3 || fp_fail "could not make a version-3 database of dist"
start_coll M "$pm" "$CH/dist" --store-credentials "$FP_TMP/ch.cred"
fp_kill "$PID_M"
[[ $(fp_ch_query "SELECT max(version) FROM dist.meta") == 8 ]] || fp_fail "dist was not migrated to 8"
tables=$(fp_ch_query "SELECT groupArray(concat(name, ':', engine)) FROM (SELECT name, engine FROM system.tables WHERE database = 'dist' AND name LIKE 'samples%' ORDER BY name)")
[[ $tables == "['samples:Distributed','samples_local:ReplacingMergeTree']" ]] || fp_fail "a Distributed samples was not left alone: $tables"
fp_ok "samples of a version-3 database are sorted anew by thread and stack, also after a crash half-way or a torn race: $rows rows, $got samples once; a Distributed samples is left alone"

# A migration that does not settle (here: no samples table at all, as between the
# halves of a racing collector's rename) does not stop a collector: it starts, says
# so, answers uploads 503 (the agents retry), and stores them once the table is back.
start_coll M "$pm" "$CH/unsettled" --store-credentials "$FP_TMP/ch.cred"
st=$(post "http://127.0.0.1:$pm" "$FP_TMP/u1.pb.gz" "$(meta unsettled 600 unsettled cpu-clock $((now - 300)))" uns-1)
[[ $st == 200 ]] || fp_fail "upload to unsettled: $st $(cat "$FP_TMP/resp")"
fp_kill "$PID_M"
fp_ch_query "RENAME TABLE unsettled.samples TO unsettled.samples_aside" >/dev/null
start_coll M "$pm" "$CH/unsettled" --store-credentials "$FP_TMP/ch.cred"
grep -q "migration did not settle: 8 steps failed, the last: .*samples is missing; will try again on every request" "$FP_TMP/M.log" ||
  fp_fail "a collector on a database without samples did not say why it is not set up: $(tail -3 "$FP_TMP/M.log")"
st=$(post "http://127.0.0.1:$pm" "$FP_TMP/u2.pb.gz" "$(meta unsettled 600 unsettled cpu-clock $((now - 200)))" uns-2)
[[ $st == 503 ]] && grep -q "Failed to store 1 uploads: the samples table's migration did not settle" "$FP_TMP/M.log" ||
  fp_fail "an upload while samples is missing: $st $(cat "$FP_TMP/resp"); $(tail -1 "$FP_TMP/M.log")"
fp_ch_query "RENAME TABLE unsettled.samples_aside TO unsettled.samples" >/dev/null
st=$(post "http://127.0.0.1:$pm" "$FP_TMP/u2.pb.gz" "$(meta unsettled 600 unsettled cpu-clock $((now - 200)))" uns-2)
[[ $st == 200 ]] && ! grep -q duplicate "$FP_TMP/resp" || fp_fail "the upload retried once samples is back: $st $(cat "$FP_TMP/resp")"
want=$(($(fp_profile_total "$FP_TMP/u1.pb.gz" samples) + $(fp_profile_total "$FP_TMP/u2.pb.gz" samples)))
got=$(curl -sf "http://127.0.0.1:$pm/api/v1/series?host=unsettled" | fp_json_get 'sum(s["samples"] for s in d["series"])')
[[ $got == "$want" ]] || fp_fail "unsettled holds $got samples once samples is back, want $want"
fp_kill "$PID_M"
fp_ok "a collector whose migration does not settle starts, answers 503 until it does, then stores: $got samples"

# ---- 3. an agent uploads through A, B serves the same ------------------------------
fp_start_agent --bucket 1 --collector "$A,$B" --upload-interval 3600
fp_start_workload truth "$FP_TMP/t1.out" "$FP_TMP/t1.ready" --seconds 3 --hold
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 1000 >/dev/null || fp_fail "start failed"
sleep 3.5
cpu_ms=$(($(fp_cpu_ns "$pid") / 1000000)) # (beside a CPU-bound job it gets less than 3 s)
fp_ctl stop "$pid" >/dev/null
out=$(fp_ctl flush) || fp_fail "flush failed: $out"
grep -q "$A" <<<"$out" || fp_fail "the flush did not go to A: $out"
fp_ctl dump "$pid" -o "$FP_TMP/local.pb.gz" >/dev/null
local_total=$(fp_profile_total "$FP_TMP/local.pb.gz")
curl -sf "$B/api/v1/profile?pid=$pid" -o "$FP_TMP/b.pb.gz" || fp_fail "profile from B"
b_total=$(fp_profile_total "$FP_TMP/b.pb.gz")
((local_total > 500 && local_total * 2 > cpu_ms)) ||
  fp_fail "too few samples ($local_total, of ${cpu_ms} ms of the workload's CPU at 1 kHz)"
[[ $b_total == "$local_total" ]] || fp_fail "B serves $b_total samples, the agent holds $local_total"
grep -q "worker_main" <<<"$(fp_pprof -top -symbolize=none "$B/api/v1/profile?pid=$pid" 2>/dev/null)" ||
  fp_fail "go tool pprof cannot read B's URL"
fp_ok "uploaded through A, go tool pprof reads the same $b_total samples from B"

# ---- 4. killed mid-flush, three times: failover, nothing lost or doubled --------------
fp_start_workload spin "$FP_TMP/s.out" "$FP_TMP/s.ready" --threads 2 --seconds 60
spid=$FP_WL_PID
fp_ctl start "$spid" --freq 500 >/dev/null || fp_fail "start spin failed"
for round in 1 2 3; do
  sleep 2
  # Kill the collector in use, in the middle of a flush; the other gets the data.
  cur=$(fp_status_json | fp_json_get 'd["upload"]["url"]')
  if [[ $cur == "$A" ]]; then victim=A vport=$pa other=$B; else victim=B vport=$pb other=$A; fi
  vpid=PID_$victim
  fp_ctl flush >/dev/null 2>&1 &
  flush=$!
  sleep 0.05
  kill -KILL "${!vpid}"
  wait "$flush" || true
  out=$(fp_ctl flush) || fp_fail "round $round: flush after $victim died failed: $out"
  grep -q "$other" <<<"$out" || fp_fail "round $round: the flush did not fail over to $other: $out"
  start_coll "$victim" "$vport" "$CH/fleetprof" --store-credentials "$FP_TMP/ch.cred"
done
failovers=$(fp_status_json | fp_json_get 'd["upload"]["failovers"]')
((failovers >= 3)) || fp_fail "status counts $failovers failovers, want at least 3"
fp_ctl stop "$spid" >/dev/null
fp_ctl flush >/dev/null || fp_fail "final flush failed"
fp_ctl dump "$spid" -o "$FP_TMP/slocal.pb.gz" >/dev/null
sl=$(fp_profile_total "$FP_TMP/slocal.pb.gz")
curl -sf "$B/api/v1/profile?pid=$spid" -o "$FP_TMP/sb.pb.gz"
sb=$(fp_profile_total "$FP_TMP/sb.pb.gz")
[[ $sl == "$sb" ]] || fp_fail "after failovers the store holds $sb samples, the agent $sl"
fp_ok "collector killed mid-flush 3 times: $failovers failovers, $sb samples stored, none lost or doubled"

# ---- 5. ClickHouse stopped under load -------------------------------------------
fp_start_workload spin "$FP_TMP/s2.out" "$FP_TMP/s2.ready" --threads 2 --seconds 60
wpid=$FP_WL_PID
fp_ctl start "$wpid" --freq 500 >/dev/null || fp_fail "start spin failed"
sleep 2
fp_ctl flush >/dev/null || fp_fail "flush before the outage"
fp_stop_clickhouse
sleep 2
if out=$(fp_ctl flush 2>&1); then fp_fail "a flush with ClickHouse down succeeded: $out"; fi
grep -q "503" <<<"$out" || fp_fail "the flush during the outage does not say 503: $out"
pending=$(fp_status_json | fp_json_get 'd["store"]["pending_upload"]')
((pending > 0)) || fp_fail "no buckets wait in the agent during the outage"
code=$(curl -s -o "$FP_TMP/err" -w '%{http_code}' "$B/api/v1/series")
[[ $code == 503 ]] && grep -q "ClickHouse at 127.0.0.1:$FP_CH_PORT" "$FP_TMP/err" ||
  fp_fail "a read during the outage: $code $(cat "$FP_TMP/err")"
curl -s "$A/healthz" | grep -q '"status": "degraded"' || fp_fail "/healthz does not say degraded"
sleep 2
fp_start_clickhouse "$FP_TMP/ch" "$FP_CH_PORT"
fp_ctl stop "$wpid" >/dev/null
fp_wait_for 30 fp_ctl flush >/dev/null || fp_fail "no flush succeeded after ClickHouse came back"
fp_ctl dump "$wpid" -o "$FP_TMP/wlocal.pb.gz" >/dev/null
wl=$(fp_profile_total "$FP_TMP/wlocal.pb.gz")
curl -sf "$A/api/v1/profile?pid=$wpid" -o "$FP_TMP/wa.pb.gz" || fp_fail "profile from A after the outage"
wa=$(fp_profile_total "$FP_TMP/wa.pb.gz")
[[ $wl == "$wa" ]] || fp_fail "after the outage the store holds $wa samples, the agent $wl"
curl -s "$B/healthz" | grep -q '"status": "ok"' || fp_fail "B did not recover"
fp_ok "ClickHouse down: 503s, a clear read error, degraded; back: reconnected, all $wa samples stored"

# ---- 6. retention and the byte budget -----------------------------------------
pr=$(fp_free_port)
R=http://127.0.0.1:$pr
python3 "$MK" good "$FP_TMP/big.pb.gz" --stacks 20000 --samples 200000 --seed 5
for h in 30 20 10 5 3 1; do
  st=$(post "$A" "$FP_TMP/big.pb.gz" "$(meta old 300 aged cpu-clock $((now - h * 3600)))" "old-$h")
  [[ $st == 200 ]] || fp_fail "old upload $h h ago: $st"
done
hours() { fp_ch_query "SELECT count(DISTINCT partition_id) FROM system.parts WHERE database = 'fleetprof' AND table = 'samples' AND active"; }
before=$(hours)
start_coll R "$pr" "$CH/fleetprof" --retention 8h
aged() { curl -sf "$R/api/v1/series?process=aged" | fp_json_get 'sum(s["buckets"] for s in d["series"])'; }
aged_is() { [[ $(aged) == "$1" ]]; }
fp_wait_for 20 aged_is 3 || fp_fail "retention 8h left $(aged) of 6 old uploads, want 3"
fp_kill "$PID_R"
after=$(hours)
fp_log "hour partitions of samples: $before before, $after after a retention of 8 h"
# A budget below what is stored: old hours go, the newest stays, answers stay right.
stored() { fp_ch_query "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'fleetprof' AND active"; }
b0=$(stored)
start_coll R "$pr" "$CH/fleetprof" --store-max-mb 1
python3 "$MK" good "$FP_TMP/new.pb.gz" --stacks 10 --samples 100 --seed 6
# Stamped now, not at the test's start: a run across the hour would put it in an hour older
# than the agents' uploads of parts 3-5, the newest one the budget keeps.
st=$(post "$R" "$FP_TMP/new.pb.gz" "$(meta new 400 fresh cpu-clock "$(date +%s)")" new-1)
[[ $st == 200 ]] || fp_fail "upload under the budget: $st"
left=$(aged)
fresh=$(curl -sf "$R/api/v1/series?process=fresh" | fp_json_get 'd["series"][0]["samples"]')
b1=$(stored)
fp_log "bytes on disk: $b0 before the budget of 1 MiB, $b1 after"
((left < 3)) || fp_fail "the budget of 1 MiB dropped nothing ($left old uploads left)"
[[ $fresh == 100 ]] || fp_fail "the newest upload was dropped by the budget ($fresh)"
fp_ok "retention dropped the hours older than 8 h; a 1 MiB budget dropped old hours ($left old uploads left), kept the newest"
