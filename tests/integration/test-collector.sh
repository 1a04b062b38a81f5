#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# fleetprof-collector on 127.0.0.1, driven with curl and hand-made
# profiles (mkpprof.py):
#   1. the command line: --version, --help, bad options (one line, exit 2);
#   2. every kind of bad upload gets its status and a JSON error that says
#      what is wrong (400: not gzip, not protobuf, bad index, bad string
#      index, negative value, lying string table, wrong sample types,
#      truncated gzip, bad parameters; 413: body over --max-body-mb, gzip
#      bomb), and the collector stays healthy;
#   3. a missing or wrong token: 401, nothing stored;
#   4. an upload is stored once: the same Idempotency-Key again is a
#      "duplicate", also after a restart of the collector;
#   5. series and profile filters (host, process, event, time), drops in
#      the series JSON, go tool pprof against the profile URL, the web page;
#   6. the store passes PRAGMA integrity_check after all of it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 240
fp_require_go
COLLECTOR=$FP_COLLECTOR
MK=$FP_SRC/tests/integration/mkpprof.py
[[ -x $COLLECTOR ]] || fp_fail "missing $COLLECTOR"

port=$(fp_free_port)
url=http://127.0.0.1:$port
echo "secret-$$" >"$FP_TMP/token"
AUTH="Authorization: Bearer secret-$$"
COLL_PID=

start_collector() {
  fp_start_collector "$url" --listen "127.0.0.1:$port" --store "$FP_TMP/c.db" --token-file "$FP_TMP/token" \
    --max-body-mb 1 --max-profile-mb 8 "$@"
  COLL_PID=$FP_COLL_PID
}
stop_collector() { fp_stop_collector; COLL_PID=; }
healthy() {
  kill -0 "$COLL_PID" 2>/dev/null || fp_fail "the collector died: $(tail -5 "$FP_TMP/collector.log")"
  curl -sf "$url/healthz" | grep -q '"status": "ok"' || fp_fail "/healthz is not ok"
}

# post KIND-FILE QUERY [KEY] [curl args...]: prints "STATUS BODY".
post() {
  local file=$1 query=$2 key=${3:-k-$RANDOM-$RANDOM}
  shift 3 || shift $#
  curl -s -o "$FP_TMP/resp" -w '%{http_code}' -H "$AUTH" -H "Idempotency-Key: $key" \
    --data-binary @"$file" "$@" "$url/api/v1/ingest?$query" || true
  echo " $(cat "$FP_TMP/resp" 2>/dev/null)"
}
meta() { # meta HOST PID COMM EVENT FROM_S
  local from=$(($5 * 1000000000))
  echo "host=$1&pid=$2&starttime=77&comm=$3&exe=/usr/bin/$3&event=$4&from=$from&to=$((from + 60000000000))&agent=test&drops=throttled:3,kernel_ring_overflow:2"
}
# expect STATUS WORDS OUTPUT: OUTPUT starts with STATUS and its JSON error mentions WORDS.
expect() {
  local status=$1 words=$2 out=$3
  [[ ${out%% *} == "$status" ]] || fp_fail "expected $status ($words), got: $out"
  if [[ $status != 2* ]]; then
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert isinstance(d["error"], str)' "${out#* }" 2>/dev/null ||
      fp_fail "the $status answer is not a JSON error: $out"
  fi
  grep -qi -- "$words" <<<"$out" || fp_fail "the answer does not say '$words': $out"
}
series() { curl -sf "$url/api/v1/series${1:-}"; }
# Sum of a field over the series JSON.
series_sum() {
  series "${2:-}" | python3 -c 'import json,sys; print(sum(s[sys.argv[1]] for s in json.load(sys.stdin)["series"]))' "$1"
}
total_of() { fp_profile_total "$1"; }

# ---- 1. command line ------------------------------------------------------
"$COLLECTOR" --version | grep -q "^fleetprof-collector " || fp_fail "--version"
grep -q -- "--max-body-mb" <<<"$("$COLLECTOR" --help)" || fp_fail "--help lacks --max-body-mb"
for bad in "--bogus 1" "--max-body-mb 0" "--max-body-mb lots" "--retention 5x" "--tls-cert x" "--listen"; do
  rc=0
  # shellcheck disable=SC2086
  err=$("$COLLECTOR" $bad --store "$FP_TMP/never.db" 2>&1) || rc=$?
  [[ $rc == 2 && $(wc -l <<<"$err") == 1 && $err == fleetprof-collector:* ]] ||
    fp_fail "'$bad' gave exit $rc and: $err"
done
rc=0
err=$("$COLLECTOR" --listen 127.0.0.1:nope --store "$FP_TMP/never.db" 2>&1) || rc=$?
[[ $rc == 1 && $err == *"invalid --listen"* ]] || fp_fail "bad --listen: exit $rc: $err"
fp_ok "command line: --version, --help, bad options get one line and exit 2"

# ---- 2. bad uploads -----------------------------------------------------------
for k in good raw notproto badindex badstring negative lyingstrings onetype bomb truncated badwait; do
  python3 "$MK" "$k" "$FP_TMP/$k.pb.gz"
done
head -c $((2 << 20)) /dev/urandom >"$FP_TMP/huge.bin"
start_collector
grep -q "NOT authenticated" "$FP_TMP/collector.log" && fp_fail "warned about no token although one was given"
q=$(meta h1 100 alpha cpu-clock 1767225600)
expect 400 "not gzip" "$(post "$FP_TMP/raw.pb.gz" "$q")"
expect 400 "not a profile.proto" "$(post "$FP_TMP/notproto.pb.gz" "$q")"
expect 400 "location 999999, which does not exist" "$(post "$FP_TMP/badindex.pb.gz" "$q")"
expect 400 "outside the string table" "$(post "$FP_TMP/badstring.pb.gz" "$q")"
expect 400 "negative value" "$(post "$FP_TMP/negative.pb.gz" "$q")"
expect 400 "not a profile.proto" "$(post "$FP_TMP/lyingstrings.pb.gz" "$q")"
expect 400 "sample types" "$(post "$FP_TMP/onetype.pb.gz" "$q")"
expect 400 "truncated" "$(post "$FP_TMP/truncated.pb.gz" "$q")"
expect 400 "label 'wait' must be sleep, uninterruptible or runqueue" \
  "$(post "$FP_TMP/badwait.pb.gz" "${q/event=cpu-clock/event=off-cpu}")"
expect 413 "larger than" "$(post "$FP_TMP/bomb.pb.gz" "$q")"
out=$(post "$FP_TMP/huge.bin" "$q")
[[ ${out%% *} == 413 ]] || fp_fail "a body over --max-body-mb got: $out"
healthy
expect 400 "missing parameter 'host'" "$(post "$FP_TMP/good.pb.gz" "pid=1&starttime=1&event=cpu-clock&from=1&to=2")"
expect 400 "'pid'" "$(post "$FP_TMP/good.pb.gz" "${q/pid=100/pid=abc}")"
expect 400 "'pid'" "$(post "$FP_TMP/good.pb.gz" "${q/pid=100/pid=-5}")"
expect 400 "time range" "$(post "$FP_TMP/good.pb.gz" "host=h&pid=1&starttime=1&event=e&from=5&to=4")"
expect 400 "unknown parameter 'colour'" "$(post "$FP_TMP/good.pb.gz" "$q&colour=red")"
expect 400 "given twice" "$(post "$FP_TMP/good.pb.gz" "$q&pid=5")"
expect 400 "drops" "$(post "$FP_TMP/good.pb.gz" "${q/throttled:3/throttled:many}")"
expect 400 "event" "$(post "$FP_TMP/good.pb.gz" "${q/event=cpu-clock/event=cpu%20clock}")"
expect 400 "Idempotency-Key" "$(post "$FP_TMP/good.pb.gz" "$q" "$(printf 'k%.0s' {1..200})")"
expect 404 "no such endpoint" "$(curl -s -w '%{http_code}' -o "$FP_TMP/resp" "$url/api/v2/x"; echo " $(cat "$FP_TMP/resp")")"
expect 405 "takes GET" "$(curl -s -w '%{http_code}' -o "$FP_TMP/resp" -X POST "$url/api/v1/series"; echo " $(cat "$FP_TMP/resp")")"
healthy
[[ $(series_sum samples) == 0 ]] || fp_fail "a refused upload was stored"
fp_ok "bad uploads: 400/413 with a JSON error that says what is wrong; nothing stored; still healthy"

# ---- 3. authentication ---------------------------------------------------------
expect 401 "missing bearer token" "$(curl -s -w '%{http_code}' -o "$FP_TMP/resp" --data-binary @"$FP_TMP/good.pb.gz" "$url/api/v1/ingest?$q"; echo " $(cat "$FP_TMP/resp")")"
expect 401 "wrong bearer token" "$(curl -s -w '%{http_code}' -o "$FP_TMP/resp" -H "Authorization: Bearer nope" --data-binary @"$FP_TMP/good.pb.gz" "$url/api/v1/ingest?$q"; echo " $(cat "$FP_TMP/resp")")"
[[ $(series_sum samples) == 0 ]] || fp_fail "an upload without the right token was stored"
fp_ok "authentication: missing or wrong token is 401, nothing stored"

# ---- 4. stored once ---------------------------------------------------------------
expect 200 '"stored"' "$(post "$FP_TMP/good.pb.gz" "$q" key-one)"
expect 200 '"duplicate"' "$(post "$FP_TMP/good.pb.gz" "$q" key-one)"
[[ $(series_sum samples) == 1000 ]] || fp_fail "after a duplicate the collector holds $(series_sum samples) samples, not 1000"
stop_collector
start_collector
expect 200 '"duplicate"' "$(post "$FP_TMP/good.pb.gz" "$q" key-one)"
[[ $(series_sum samples) == 1000 ]] || fp_fail "a duplicate after a restart was stored again"
fp_ok "idempotency: a retried upload is a duplicate, also after a restart (1000 samples once)"

# ---- 5. series, profile, filters, web page -------------------------------------------
python3 "$MK" good "$FP_TMP/g2.pb.gz" --samples 300 --stacks 20 --seed 2
python3 "$MK" good "$FP_TMP/g3.pb.gz" --samples 70 --stacks 5 --seed 3
expect 200 stored "$(post "$FP_TMP/g2.pb.gz" "$(meta h2 200 beta cpu-clock 1767229200)")"
expect 200 stored "$(post "$FP_TMP/g3.pb.gz" "$(meta h2 200 beta task-clock 1767229200)")"
expect 200 stored "$(post "$FP_TMP/g2.pb.gz" "$(meta h1 100 alpha cpu-clock 1767225660)")"
[[ $(series_sum samples) == 1670 ]] || fp_fail "series total $(series_sum samples), want 1670"
[[ $(series_sum samples "?host=h2") == 370 ]] || fp_fail "series host=h2: $(series_sum samples "?host=h2")"
[[ $(series_sum samples "?host=h1&event=cpu-clock") == 1300 ]] || fp_fail "series host=h1 event=cpu-clock"
[[ $(series_sum samples "?from=2026-01-01T00:30:00Z") == 370 ]] || fp_fail "series from= (RFC 3339)"
[[ $(series_sum samples "?to=1767225700") == 1300 ]] || fp_fail "series to= (Unix seconds)"
[[ $(series_sum samples "?from=-1h") == 0 ]] || fp_fail "series from=-1h should be empty (2026-01-01 data)"
series "?host=h1" | python3 -c '
import json, sys
s = json.load(sys.stdin)["series"]
assert len(s) == 1, s
s = s[0]
assert s["process"] == "alpha" and s["pid"] == 100 and s["event"] == "cpu-clock", s
assert s["buckets"] == 2 and s["samples"] == 1300, s
assert s["drops"] == {"throttled": 6, "kernel_ring_overflow": 4}, s["drops"]
assert s["first"] == "2026-01-01T00:00:00Z" and s["last"] == "2026-01-01T00:02:00Z", s
' || fp_fail "series JSON of h1 is wrong: $(series "?host=h1")"
curl -sf "$url/api/v1/profile?process=beta&event=task-clock" -o "$FP_TMP/p.pb.gz" || fp_fail "profile process=beta"
[[ $(total_of "$FP_TMP/p.pb.gz") == 70 ]] || fp_fail "profile beta/task-clock total $(total_of "$FP_TMP/p.pb.gz"), want 70"
curl -sf "$url/api/v1/profile?host=h1" -o "$FP_TMP/p.pb.gz" || fp_fail "profile host=h1"
[[ $(total_of "$FP_TMP/p.pb.gz") == 1300 ]] || fp_fail "profile host=h1 total $(total_of "$FP_TMP/p.pb.gz"), want 1300"
fp_pprof -top -symbolize=none "$url/api/v1/profile?host=h1&event=cpu-clock" >"$FP_TMP/top.txt" 2>&1 ||
  fp_fail "go tool pprof cannot read the collector: $(head -3 "$FP_TMP/top.txt")"
grep -q "func_" "$FP_TMP/top.txt" && grep -q "dropped throttled: 6" "$FP_TMP/top.txt" ||
  fp_fail "go tool pprof -top lacks functions or drops: $(head -12 "$FP_TMP/top.txt")"
expect 404 "no samples" "$(curl -s -w '%{http_code}' -o "$FP_TMP/resp" "$url/api/v1/profile?host=nobody"; echo " $(cat "$FP_TMP/resp")")"
expect 400 "unknown parameter 'hots'" "$(curl -s -w '%{http_code}' -o "$FP_TMP/resp" "$url/api/v1/profile?hots=h1"; echo " $(cat "$FP_TMP/resp")")"
expect 400 "not a time" "$(curl -s -w '%{http_code}' -o "$FP_TMP/resp" "$url/api/v1/series?from=yesterday"; echo " $(cat "$FP_TMP/resp")")"
curl -sf "$url/series" -o "$FP_TMP/page.html" || fp_fail "GET /series failed"
for w in '<table>' h1 h2 alpha beta task-clock 'throttled: 6' '/top?host=h2'; do
  grep -qF "$w" "$FP_TMP/page.html" || fp_fail "the web page lacks '$w'"
done
grep -qiE '<(script|link|img)' "$FP_TMP/page.html" && fp_fail "the web page is not self-contained"
[[ $(curl -sf "$url/top?host=h2&pid=200&event=cpu-clock") == *func_* ]] || fp_fail "/top shows no functions"
fp_ok "series and profile filters, drops, go tool pprof and the web page"

# ---- 6. the store is intact ---------------------------------------------------------
healthy
stop_collector
[[ $(sqlite3 "$FP_TMP/c.db" "pragma integrity_check") == ok ]] || fp_fail "integrity_check failed"
grep -q "Refused an upload" "$FP_TMP/collector.log" || fp_fail "refusals are not logged"
fp_ok "the store passes integrity_check"

# ---- no token: a loud warning ----------------------------------------------------------
"$COLLECTOR" --listen "127.0.0.1:$port" --store "$FP_TMP/c2.db" >"$FP_TMP/open.log" 2>&1 &
COLL_PID=$!
fp_track "$COLL_PID"
fp_wait_for 15 curl -sf "$url/healthz" -o /dev/null || fp_fail "the collector without token did not come up"
grep -q "WARNING: no --token-file" "$FP_TMP/open.log" || fp_fail "no warning without --token-file"
expect 200 stored "$(curl -s -w '%{http_code}' -o "$FP_TMP/resp" --data-binary @"$FP_TMP/good.pb.gz" "$url/api/v1/ingest?$q"; echo " $(cat "$FP_TMP/resp")")"
stop_collector
fp_ok "without --token-file: a loud warning, uploads accepted"
