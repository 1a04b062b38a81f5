#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# fleetprof-collector under load and over TLS, on 127.0.0.1:
#   1. 32 concurrent uploaders x 20 uploads each (collector-bench, which
#      stops by itself): every upload answered 2xx, and afterwards the
#      series hold exactly 640 uploads and 640 x the profile's samples;
#      while they run, /healthz keeps answering;
#   2. HTTPS with a self-signed certificate made here: curl --cacert and
#      collector-bench --cacert reach it, a plain HTTP request does not,
#      and the uploads arrive; the store passes integrity_check.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 240
COLLECTOR=$FP_COLLECTOR
BENCH=$FP_BUILD/tests/collector-bench
MK=$FP_SRC/tests/integration/mkpprof.py
[[ -x $COLLECTOR && -x $BENCH ]] || fp_fail "missing $COLLECTOR or $BENCH"

port=$(fp_free_port)
echo "load-$$" >"$FP_TMP/token"
python3 "$MK" good "$FP_TMP/p.pb.gz" --samples 2000 --stacks 200
COLL_PID=

start_collector() { # start_collector SCHEME [ARGS...]
  local scheme=$1
  shift
  FP_CURL_OPTS="--cacert $FP_TMP/cert.pem" fp_start_collector "$scheme://127.0.0.1:$port" \
    --listen "127.0.0.1:$port" --store "$FP_TMP/c.db" --token-file "$FP_TMP/token" "$@"
  COLL_PID=$FP_COLL_PID
}
stop_collector() { fp_stop_collector; COLL_PID=; }
# figure KEY LINE: the value of KEY=... in a collector-bench line.
figure() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }
series_sum() { # series_sum FIELD URL-PREFIX HOST-PREFIX
  curl -sf --cacert "$FP_TMP/cert.pem" "$2/api/v1/series" | python3 -c '
import json, sys
print(sum(s[sys.argv[1]] for s in json.load(sys.stdin)["series"] if s["host"].startswith(sys.argv[2])))' "$1" "$3"
}

# ---- 1. load ------------------------------------------------------------------------
touch "$FP_TMP/cert.pem"
start_collector http
url=http://127.0.0.1:$port
(
  # A reader beside the writers: /healthz must keep answering under load.
  for _ in $(seq 1 40); do
    curl -sf -m 10 "$url/healthz" -o /dev/null || echo "healthz failed" >>"$FP_TMP/reader.err"
    sleep 0.1
  done
) &
reader=$!
fp_track "$reader"
line=$(fp_timeout 150 "$BENCH" --url "$url" --profile "$FP_TMP/p.pb.gz" --token-file "$FP_TMP/token" \
  --concurrency 32 --uploads 640 --run-id load) || fp_fail "uploads failed under load: $line"
fp_log "load: $line"
wait "$reader" || true
fp_untrack "$reader"
[[ ! -s $FP_TMP/reader.err ]] || fp_fail "/healthz failed under load: $(sort | uniq -c <"$FP_TMP/reader.err")"
[[ $(figure ok "$line") == 640 ]] || fp_fail "not every upload succeeded: $line"
buckets=$(series_sum buckets "$url" bench-load-)
samples=$(series_sum samples "$url" bench-load-)
[[ $buckets == 640 ]] || fp_fail "the collector holds $buckets uploads, not 640"
[[ $samples == $((640 * 2000)) ]] || fp_fail "the collector holds $samples samples, not $((640 * 2000))"
fp_ok "32 uploaders x 20 uploads: all 640 stored, $samples samples exactly ($(figure rate "$line") uploads/s, p99 $(figure p99_ms "$line") ms)"
stop_collector

# ---- 2. TLS -----------------------------------------------------------------------
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
  -addext "subjectAltName=IP:127.0.0.1" -keyout "$FP_TMP/key.pem" -out "$FP_TMP/cert.pem" 2>/dev/null ||
  fp_fail "openssl could not make a certificate"
rc=0
err=$("$COLLECTOR" --listen "127.0.0.1:$port" --store "$FP_TMP/c.db" --tls-cert "$FP_TMP/cert.pem" \
  --tls-key "$FP_TMP/token" 2>&1) || rc=$?
[[ $rc == 1 && $err == *"TLS key"* ]] || fp_fail "a bad TLS key gave exit $rc: $err"
start_collector https --tls-cert "$FP_TMP/cert.pem" --tls-key "$FP_TMP/key.pem"
url=https://127.0.0.1:$port
curl -sf --cacert "$FP_TMP/cert.pem" "$url/healthz" | grep -q '"status": "ok"' || fp_fail "HTTPS /healthz"
curl -sf -m 5 "http://127.0.0.1:$port/healthz" -o /dev/null && fp_fail "plain HTTP worked on the HTTPS port"
curl -sf -m 5 "$url/healthz" -o /dev/null 2>/dev/null && fp_fail "an unverified certificate was accepted by curl"
line=$(fp_timeout 60 "$BENCH" --url "$url" --cacert "$FP_TMP/cert.pem" --profile "$FP_TMP/p.pb.gz" \
  --token-file "$FP_TMP/token" --concurrency 4 --uploads 40 --run-id tls) || fp_fail "HTTPS uploads failed: $line"
[[ $(series_sum buckets "$url" bench-tls-) == 40 ]] || fp_fail "HTTPS uploads did not all arrive"
[[ $(series_sum samples "$url" bench-load-) == $((640 * 2000)) ]] || fp_fail "the load test's data changed"
fp_ok "HTTPS: verified with --cacert, plain HTTP refused, 40 uploads arrived"
stop_collector
[[ $(sqlite3 "$FP_TMP/c.db" "pragma integrity_check") == ok ]] || fp_fail "integrity_check failed"
fp_ok "the store passes integrity_check"
