#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The collector under a connection flood, as an attacker would make one:
# 1,500 connections that each send half a request head, from 200 loopback
# addresses, every one the collector closes opened again at once, against
# --max-connections 512, for 20 s, while a real agent profiles a workload
# and flushes:
#   1. every flush is delivered within seconds (the newcomer sheds the
#      oldest half-open connection; the agent's own, once it has sent its
#      head, is never shed);
#   2. an anonymous client is answered meanwhile (503 with Retry-After:
#      past the cap, uploads with the token go first);
#   3. the flood's connections were shed and counted (metrics: shed), the
#      collector's memory per connection is printed;
#   4. afterwards the collector holds exactly the agent's samples.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 240
fp_require_go
ATTACK=$FP_SRC/tests/integration/netattack.py

port=$(fp_free_port)
url=http://127.0.0.1:$port
echo "flood-token-$$" >"$FP_TMP/token"
fp_start_collector "$url" --listen "127.0.0.1:$port" --store "$FP_TMP/c.db" \
  --token-file "$FP_TMP/token" --max-connections 512
fp_start_agent --bucket 1 --collector "$url" --token-file "$FP_TMP/token" --upload-interval 3600
fp_start_workload truth "$FP_TMP/t.out" "$FP_TMP/t.ready" --seconds 40 --hold
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 200 >/dev/null || fp_fail "start failed"

python3 "$ATTACK" flood "$port" 1500 200 20 "$FP_COLL_PID" >"$FP_TMP/flood.json" 2>"$FP_TMP/flood.err" &
flood=$!
fp_track "$flood"
sleep 4
open=$(ss -Htn state established "( sport = :$port )" | wc -l)
fp_log "during the flood: $open connections open at the collector"
((open >= 400)) || fp_fail "the flood did not fill the collector ($open connections)"
# Each round of the agent's data delivered within seconds: a flush that met a
# connection closed at once (the collector full of young connections) is tried
# again, as the agent's own retries would.
for i in 1 2 3; do
  t0=$(date +%s%N) tries=0
  until out=$(fp_ctl flush 2>&1); do
    tries=$((tries + 1))
    (($(date +%s%N) - t0 < 10000000000)) || fp_fail "round $i not delivered within 10 s: $out"
    sleep 0.5
  done
  ms=$((($(date +%s%N) - t0) / 1000000))
  fp_log "round $i during the flood: $out ($ms ms, $tries failed tries)"
  sleep 2
done
# An anonymous client trying is answered within seconds, not left hanging: 503 with
# Retry-After (past the cap, uploads with the token go first), or served.
answered() { curl -s -m 3 -D "$FP_TMP/hdr" -o /dev/null "$url/healthz" && grep -q "^HTTP/1.1 [25]0[03]" "$FP_TMP/hdr"; }
fp_wait_for 10 answered || fp_fail "an anonymous client got no answer within 10 s during the flood"
hdr=$(cat "$FP_TMP/hdr")
[[ $hdr == "HTTP/1.1 503"*"Retry-After: 5"* || $hdr == "HTTP/1.1 200"* ]] ||
  fp_fail "an anonymous client during the flood: $hdr"
fp_ok "during a flood of 1,500 half-open connections from 200 addresses: three rounds delivered, an anonymous client answered ($(head -1 <<<"$hdr" | tr -d '\r'))"

wait "$flood" || fp_fail "the flood failed: $(cat "$FP_TMP/flood.err")"
fp_wait_for 10 curl -sf "$url/healthz" -o /dev/null || fp_fail "not served after the flood"
shed=$(curl -sf "$url/metrics" | awk -F' ' '/^fleetprof_collector_refused_total\{reason="shed"\}/ {print $2}')
# AddressSanitizer keeps freed memory in quarantine: there the memory is only printed.
asan=$(ldd "$FP_COLLECTOR" | grep -c libasan || true)
python3 - "$FP_TMP/flood.json" "$shed" "$open" "$asan" <<'EOF' || fp_fail "the flood: $(cat "$FP_TMP/flood.json")"
import json, sys
f = json.load(open(sys.argv[1]))
shed, open_ = float(sys.argv[2]), int(sys.argv[3])
grew = f["rss_peak_kib"] - f["rss_before_kib"]
print("flood: %d connections opened, %d closed by the collector (%d shed), collector memory +%d KiB"
      " for %d connections: %.1f KiB each" % (f["opened"], f["closed_by_collector"], shed, grew,
                                              open_, grew / max(open_, 1)))
assert f["opened"] > 1500 and f["closed_by_collector"] > 0, f
assert shed > 0, shed
assert grew < 64 * 1024 or sys.argv[4] != "0", f
EOF
fp_ok "the flood's connections were shed and counted"

fp_ctl stop "$pid" >/dev/null || fp_fail "stop failed"
fp_ctl flush >/dev/null || fp_fail "the last flush failed"
fp_ctl dump "$pid" -o "$FP_TMP/local.pb.gz" >/dev/null || fp_fail "dump failed"
curl -sf "$url/api/v1/profile?pid=$pid" -o "$FP_TMP/coll.pb.gz" || fp_fail "no profile at the collector"
lt=$(fp_profile_total "$FP_TMP/local.pb.gz")
ct=$(fp_profile_total "$FP_TMP/coll.pb.gz")
[[ $lt == "$ct" ]] || fp_fail "the collector holds $ct samples, the agent $lt"
fp_ok "after the flood the collector holds exactly the agent's $ct samples"
fp_kill "$pid"
fp_stop_agent
