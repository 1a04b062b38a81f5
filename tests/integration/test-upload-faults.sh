#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Uploads that never lose a sample and never store one twice, whatever the
# collector (or something in front of it) answers. A real agent uploads
# through a real proxy (faultproxy.py) to a real collector, all on
# 127.0.0.1; the proxy misbehaves on demand:
#   1. a typo in the collector URL's path (the real collector's 404),
#      404, 405 and a redirect from the proxy: flush fails with one line
#      saying CONFIGURATION ERROR, status says so, nothing is dropped;
#      restarting the agent with the right URL delivers it all;
#   2. 503 and a collector that never answers (curl's 30 s timeout):
#      transient, retried, nothing dropped;
#   3. 413 for anything over half the first upload: the agent splits its
#      uploads by buckets until they fit;
#   4. the agent SIGKILLed after the collector's 2xx, before it recorded
#      it: after a restart it resends the same bytes under the same key,
#      and the collector stores them once;
#   5. the collector SIGKILLed three times during uploads.
# At the end the collector holds exactly what the agent kept: the
# collector's merged profile of the workload has the local dump's total.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 280
fp_require_go
COLLECTOR=$FP_COLLECTOR
[[ -x $COLLECTOR ]] || fp_fail "missing $COLLECTOR"

cport=$(fp_free_port)
curl_=http://127.0.0.1:$cport
pport=$(fp_free_port)
purl=http://127.0.0.1:$pport
MODE=$FP_TMP/mode
PLOG=$FP_TMP/proxy.log
: >"$PLOG"
echo proxy >"$MODE"

start_collector() {
  fp_start_collector "$curl_" --listen "127.0.0.1:$cport" --store "$FP_TMP/collector.db"
}
python3 "$FP_SRC/tests/integration/faultproxy.py" "$pport" "$curl_" "$MODE" "$PLOG" \
  >"$FP_TMP/proxy.out" 2>&1 &
fp_track $!
fp_wait_for 10 python3 -c "import socket; socket.create_connection(('127.0.0.1', $pport))" 2>/dev/null ||
  fp_fail "the fault proxy did not start: $(cat "$FP_TMP/proxy.out")"
start_collector

AGENT_ARGS=(--bucket 1 --upload-interval 3600 --store-max-mb 256)
collector_total() {
  local out=$FP_TMP/coll-$RANDOM.pb.gz
  curl -sf "$curl_/api/v1/profile?pid=$1" -o "$out" || { echo 0; return; }
  fp_profile_total "$out"
}
upload_field() { fp_status_json | fp_json_get "d['upload']['$1']"; }
waiting() { fp_status_json | fp_json_get "d['store']['pending_upload']"; }
# expect_flush_failure WHAT PATTERN: flush must fail with one line matching
# PATTERN (within 60 s: a silent collector takes curl's 30 s timeout).
expect_flush_failure() {
  local err
  if err=$(fp_timeout 60 "$FP_AGENTCTL" --socket "$FP_SOCK" flush 2>&1); then fp_fail "$1: flush succeeded: $err"; fi
  [[ $(wc -l <<<"$err") == 1 ]] || fp_fail "$1: the flush error is not one line: $err"
  grep -Eq -- "$2" <<<"$err" || fp_fail "$1: the flush error does not match '$2': $err"
  fp_log "$1: $err"
}
# flush_ok: flush until a round succeeds (a retry timer may hold the uploader a moment).
flush_ok() {
  local i out
  for i in 1 2 3 4 5; do
    out=$(fp_ctl flush 2>&1) && { fp_log "flush: $out"; return 0; }
    sleep 1
  done
  fp_fail "flush kept failing: $out"
}

fp_start_workload manystacks "$FP_TMP/ms.out" "$FP_TMP/ms.ready" --threads 2 --seconds 300 --depth 7
pid=$FP_WL_PID

# ---- 1. configuration errors ---------------------------------------------
fp_start_agent "${AGENT_ARGS[@]}" --collector "$curl_/fleetprof"
fp_ctl start "$pid" --freq 500 >/dev/null || fp_fail "start failed"
sleep 2
expect_flush_failure "typo in the URL's path" "CONFIGURATION ERROR: HTTP 404"
[[ $(upload_field config_error) == True ]] || fp_fail "status does not flag the configuration error"
fp_ctl status | grep -q "last error: CONFIGURATION ERROR" || fp_fail "status text hides the error"
fp_ctl status | grep -q "last success never" || fp_fail "status claims a success after a 404"
w=$(waiting)
((w > 0)) || fp_fail "nothing waits after a 404: the data was dropped"
[[ $(collector_total "$pid") == 0 ]] || fp_fail "the collector stored something despite the typo"
fp_stop_agent
fp_start_agent "${AGENT_ARGS[@]}" --collector "$purl"
for fault in "status 404" "status 405" "redirect"; do
  echo "$fault" >"$MODE"
  sleep 1
  case $fault in
    redirect) pat="CONFIGURATION ERROR: HTTP 301: .*redirects to" ;;
    *) pat="CONFIGURATION ERROR: HTTP ${fault#status }" ;;
  esac
  expect_flush_failure "$fault" "$pat"
  [[ $(upload_field config_error) == True ]] || fp_fail "$fault: status does not flag it"
done
grep -q "CONFIGURATION ERROR" "$FP_TMP/agent.log" || fp_fail "the agent's log does not say so"
((${#w} > 0)) && (($(waiting) >= w)) || fp_fail "waiting buckets went down without a delivery"
fp_ok "404 (a typo'd URL), 405, 301: configuration errors, said loudly, $(waiting) buckets kept"

# ---- 2. transient failures ------------------------------------------------
echo "status 503" >"$MODE"
expect_flush_failure "503" "HTTP 503"
[[ $(upload_field config_error) == False ]] || fp_fail "503 was taken for a configuration error"
echo "hang 40" >"$MODE"
expect_flush_failure "no answer" "[Tt]imeout|timed out"
echo proxy >"$MODE"
flush_ok
[[ $(upload_field config_error) == False ]] || fp_fail "the configuration error outlived its fix"
[[ $(upload_field last_error) == "" ]] || fp_fail "the last error outlived a success"
c1=$(collector_total "$pid")
((c1 > 0)) || fp_fail "nothing arrived once the faults cleared"
fp_ok "503 and a silent collector: retried; fixed: the kept data arrived ($c1 samples)"

# ---- 3. 413: split until it fits -----------------------------------------
sleep 6 # several buckets, one upload
echo limit-half >"$MODE"
mark=$(wc -l <"$PLOG")
flush_ok
n413=$(tail -n +"$((mark + 1))" "$PLOG" | awk '$4 == 413' | wc -l)
n2xx=$(tail -n +"$((mark + 1))" "$PLOG" | awk '$4 ~ /^2/' | wc -l)
fp_log "413 phase: $n413 refused as too large, $n2xx delivered; proxy log: $(tail -n +"$((mark + 1))" "$PLOG" | awk '{print $3 "->" $4}' | tr '\n' ' ')"
((n413 >= 1 && n2xx >= 2)) || fp_fail "no split after 413 ($n413 x 413, $n2xx x 2xx)"
[[ $(upload_field uploads_rejected) == 0 ]] || fp_fail "a 413 was taken as a refusal"
fp_ok "413: split into $n2xx uploads that fit"

# ---- 4. the agent dies between the 2xx and recording it ------------------
sleep 2
echo "$FP_AGENT_PID" >"$FP_TMP/agent.pid"
echo "kill $FP_TMP/agent.pid" >"$MODE"
mark=$(wc -l <"$PLOG")
fp_ctl flush >/dev/null 2>&1 || true
fp_wait_for 10 bash -c "! kill -0 $FP_AGENT_PID 2>/dev/null" || fp_fail "the proxy did not kill the agent"
wait "$FP_AGENT_PID" 2>/dev/null || true
fp_untrack "$FP_AGENT_PID"
killed_key=$(tail -n +"$((mark + 1))" "$PLOG" | awk '$1 == "kill" && $4 ~ /^2/ {print $2; exit}')
[[ -n $killed_key ]] || fp_fail "no upload was stored before the agent died: $(tail -3 "$PLOG")"
echo proxy >"$MODE"
fp_start_agent "${AGENT_ARGS[@]}" --collector "$purl"
fp_wait_for 10 bash -c "[[ \$('$FP_AGENTCTL' --socket '$FP_SOCK' status --json | grep -c '\"pid\": *$pid') -gt 0 ]]" ||
  fp_log "note: the target was not resumed (it may have been between buckets)"
flush_ok
resent=$(awk -v k="$killed_key" '$2 == k' "$PLOG" | wc -l)
((resent >= 2)) || fp_fail "the upload stored before the crash was not resent under its key"
fp_ok "agent killed after the 2xx: resent under the same key after a restart ($resent sends)"

# ---- 5. the collector killed during uploads -------------------------------
fp_ctl status --json | grep -q "\"pid\": *$pid" || fp_ctl start "$pid" --freq 500 >/dev/null
for i in 1 2 3; do
  sleep 2
  (fp_ctl flush >/dev/null 2>&1 || true) &
  flusher=$!
  sleep 0.$((RANDOM % 3 + 1))
  kill -KILL "$FP_COLL_PID"
  wait "$FP_COLL_PID" 2>/dev/null || true
  fp_untrack "$FP_COLL_PID"
  wait "$flusher" || true
  start_collector
done
fp_ok "collector SIGKILLed 3 times during uploads"

# ---- the collector holds exactly what the agent kept ---------------------
fp_ctl stop "$pid" >/dev/null || fp_fail "stop failed"
flush_ok
[[ $(waiting) == 0 ]] || flush_ok
[[ $(waiting) == 0 ]] || fp_fail "$(waiting) buckets still wait after the faults cleared"
fp_ctl dump "$pid" -o "$FP_TMP/local.pb.gz" 2>/dev/null || fp_fail "local dump failed"
lt=$(fp_profile_total "$FP_TMP/local.pb.gz")
ct=$(collector_total "$pid")
fp_log "the agent kept $lt samples, the collector holds $ct"
((lt > 1000)) || fp_fail "too few samples kept ($lt)"
[[ $lt == "$ct" ]] || fp_fail "the collector holds $ct samples, the agent kept $lt"
fp_ok "after every fault the collector holds exactly the agent's $lt samples, none twice"
fp_kill "$pid"
fp_stop_agent
fp_stop_collector
