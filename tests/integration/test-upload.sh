#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Store-and-forward upload, real agent and real collector on 127.0.0.1:
#   1. profile a workload, `agentctl flush`: the collector's merged profile
#      (GET /api/v1/profile, read by go tool pprof) has the same totals as
#      the agent's own dump, and a second flush adds nothing (each bucket
#      arrives once);
#   2. the collector is down while the agent samples: flush fails with one
#      clear line, status shows the error and the waiting buckets; when the
#      collector comes up, every waiting bucket arrives, once;
#   3. a wrong token: 401, flush fails, the agent keeps the data (pending
#      buckets stay), and with the right token it all arrives;
#   4. a collector list with a bad URL, or a missing token file: the agent
#      says so in one line and exits 1.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 240
fp_require_go
COLLECTOR=$FP_COLLECTOR
[[ -x $COLLECTOR ]] || fp_fail "missing $COLLECTOR"

port=$(fp_free_port)
url=http://127.0.0.1:$port
echo "right-token-$$" >"$FP_TMP/token"
echo "wrong-token-$$" >"$FP_TMP/wrong"
COLL_PID=

start_collector() {
  fp_start_collector "$url" --listen "127.0.0.1:$port" --store "$FP_TMP/collector.db" \
    --token-file "$FP_TMP/token"
  COLL_PID=$FP_COLL_PID
}
stop_collector() { fp_stop_collector; COLL_PID=; }
total_of() { fp_profile_total "$1"; }
collector_total() {
  local proc=$1 out=$FP_TMP/coll-$RANDOM.pb.gz
  curl -sf "$url/api/v1/profile?process=$proc" -o "$out" || { echo 0; return; }
  total_of "$out"
}
local_total() {
  fp_ctl dump "$1" -o "$FP_TMP/local.pb.gz" 2>/dev/null || fp_fail "local dump failed"
  total_of "$FP_TMP/local.pb.gz"
}
pending() { fp_status_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["store"]["pending_upload"])'; }

# ---- 1. flush, totals equal -------------------------------------------
start_collector
fp_start_agent --bucket 1 --collector "$url" --token-file "$FP_TMP/token" --upload-interval 3600
fp_start_workload truth "$FP_TMP/t1.out" "$FP_TMP/t1.ready" --seconds 3 --hold
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 1000 >/dev/null || fp_fail "start failed"
sleep 4
fp_ctl stop "$pid" >/dev/null || fp_fail "stop failed"
out=$(fp_ctl flush) || fp_fail "flush failed"
fp_log "flush: $out"
lt=$(local_total "$pid")
ct=$(collector_total truth)
fp_log "local dump: $lt samples; collector: $ct samples"
((lt > 1000)) || fp_fail "too few samples locally ($lt)"
[[ $lt == "$ct" ]] || fp_fail "the collector holds $ct samples, the agent $lt"
[[ $(pending) == 0 ]] || fp_fail "buckets still pending after a successful flush"
fp_ctl flush >/dev/null || fp_fail "second flush failed"
ct2=$(collector_total truth)
[[ $ct2 == "$ct" ]] || fp_fail "a second flush changed the collector's total: $ct -> $ct2"
fp_pprof -top -symbolize=none "$url/api/v1/profile?process=truth" >"$FP_TMP/top.txt" 2>&1 ||
  fp_fail "go tool pprof cannot read the collector: $(head -3 "$FP_TMP/top.txt")"
grep -q leaf_hash "$FP_TMP/top.txt" || fp_fail "go tool pprof against the collector lacks leaf_hash"
fp_ok "flush: the collector's totals equal the local dump's ($ct samples), once"
fp_kill "$pid"
fp_stop_agent
stop_collector
rm -f "$FP_TMP/collector.db"* "$FP_TMP/agent.db"*

# ---- 2. collector down, then up -----------------------------------------
fp_start_agent --bucket 1 --collector "$url" --token-file "$FP_TMP/token" --upload-interval 3600
fp_start_workload truth "$FP_TMP/t2.out" "$FP_TMP/t2.ready" --seconds 3 --hold
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 1000 >/dev/null || fp_fail "start failed"
sleep 4
fp_ctl stop "$pid" >/dev/null
if err=$(fp_ctl flush 2>&1); then fp_fail "flush succeeded with the collector down: $err"; fi
[[ $(wc -l <<<"$err") == 1 && $err == agentctl:* ]] || fp_fail "flush error is not one agentctl: line: $err"
fp_log "flush with the collector down: $err"
p=$(pending)
((p > 0)) || fp_fail "no pending buckets while the collector is down"
fp_ctl status | grep -q "last error" || fp_fail "status does not show the upload error"
fp_ok "collector down: flush fails clearly, $p buckets wait"
start_collector
out=$(fp_ctl flush) || fp_fail "flush failed after the collector came back"
fp_log "flush: $out"
for _ in 1 2 3; do [[ $(pending) == 0 ]] && break; fp_ctl flush >/dev/null; done
[[ $(pending) == 0 ]] || fp_fail "$(pending) buckets still pending"
lt=$(local_total "$pid")
ct=$(collector_total truth)
[[ $lt == "$ct" ]] || fp_fail "after the outage the collector holds $ct samples, the agent $lt"
fp_ok "collector back: every waiting bucket arrived once ($ct samples)"
fp_kill "$pid"
fp_stop_agent
stop_collector
rm -f "$FP_TMP/collector.db"* "$FP_TMP/agent.db"*

# ---- 3. wrong token ------------------------------------------------------
start_collector
fp_start_agent --bucket 1 --collector "$url" --token-file "$FP_TMP/wrong" --upload-interval 3600
fp_start_workload truth "$FP_TMP/t3.out" "$FP_TMP/t3.ready" --seconds 2 --hold
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 1000 >/dev/null || fp_fail "start failed"
sleep 3
fp_ctl stop "$pid" >/dev/null
if err=$(fp_ctl flush 2>&1); then fp_fail "flush succeeded with a wrong token"; fi
grep -q "401" <<<"$err" || fp_fail "the flush error does not name the 401: $err"
p=$(pending)
((p > 0)) || fp_fail "the agent dropped its data after a 401"
[[ $(collector_total truth) == 0 ]] || fp_fail "the collector stored an upload with a wrong token"
fp_ok "wrong token: 401, nothing stored, $p buckets kept"
fp_stop_agent
fp_start_agent --bucket 1 --collector "$url" --token-file "$FP_TMP/token" --upload-interval 3600
fp_ctl flush >/dev/null || fp_fail "flush with the right token failed"
ct=$(collector_total truth)
((ct > 500)) || fp_fail "with the right token the data did not arrive ($ct)"
fp_ok "with the right token the kept data arrived ($ct samples)"
fp_kill "$pid"
fp_stop_agent

# ---- 4. upload settings the agent cannot use ----------------------------------
# One line and exit 1 (no crash: the uploader gave up before its timers existed).
for bad in "--collector http://127.0.0.1:1,ftp://x" "--collector ,http://127.0.0.1:1" \
  "--collector $url --token-file $FP_TMP/no-such-token"; do
  rc=0
  # shellcheck disable=SC2086
  err=$(fp_timeout 20 "$FP_AGENT" --foreground --socket "$FP_TMP/bad.sock" --store "$FP_TMP/bad.db" $bad 2>&1) || rc=$?
  line=$(grep -v "thread tracker" <<<"$err")
  [[ $rc == 1 && $(wc -l <<<"$line") == 1 ]] || fp_fail "agent $bad: exit $rc, $err"
  fp_log "agent $bad: $line"
done
fp_ok "a bad collector list or token file: one line, exit 1"
