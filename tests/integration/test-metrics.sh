#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Metrics in the Prometheus text format, read by a strict checker
# (promcheck.py: HELP and TYPE before every family, valid names, escaped
# label values, cumulative histograms whose +Inf bucket is their count):
#
# 1. The collector's GET /metrics: after the real agent's uploads,
#    uploads{outcome="stored"} and samples_stored_total equal what
#    /healthz and the stored profile say; a malformed upload counts as
#    rejected, an unknown path as "other"; the decode and store-write
#    histograms counted the uploads.
# 2. The agent: `agentctl metrics` and --metrics-listen's GET /metrics
#    give the same families; with a profiled process: its threads,
#    samples, perf ring memory, the agent's CPU and resident memory, and
#    after a flush the uploads delivered. A user other than root may not
#    read them; the listener answers 404 elsewhere; a bad
#    --metrics-listen is refused by --check-config in one line.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 200
fp_require_go

check() { # check FILE: validated samples as JSON on stdout
  python3 "$FP_SRC/tests/integration/promcheck.py" "$1" || fp_fail "$1 is not a valid exposition: $(head -c 300 "$1")"
}
get() { # get JSON KEY: the value of one sample
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(int(d.get(sys.argv[2], -1)))' "$1" "$2"
}

PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/collector.db"
MPORT=$(fp_free_port)
fp_start_agent --bucket 1 --collector "$URL" --upload-interval 3600 --metrics-listen "127.0.0.1:$MPORT"

fp_start_workload spin "$FP_TMP/spin.out" "$FP_TMP/spin.ready" --threads 2 --seconds 60
P=$FP_WL_PID
fp_ctl start "$P" --freq 199 >/dev/null
sleep 2

# ---- the agent -------------------------------------------------------------------------
fp_ctl metrics >"$FP_TMP/agent.prom"
A=$(check "$FP_TMP/agent.prom")
[[ $(get "$A" 'fleetprof_agent_targets{state=running}') == 1 ]] || fp_fail "agent: targets running != 1"
[[ $(get "$A" fleetprof_agent_threads) -ge 3 ]] || fp_fail "agent: threads < 3"
[[ $(get "$A" fleetprof_agent_samples_total) -gt 100 ]] || fp_fail "agent: samples_total <= 100"
[[ $(get "$A" fleetprof_agent_perf_ring_bytes) -gt 100000 ]] || fp_fail "agent: perf_ring_bytes too small"
[[ $(get "$A" fleetprof_agent_resident_bytes) -gt 1000000 ]] || fp_fail "agent: resident_bytes too small"
fp_ok "agentctl metrics: $(get "$A" fleetprof_agent_threads) threads, $(get "$A" fleetprof_agent_samples_total) samples, $(get "$A" fleetprof_agent_perf_ring_bytes) ring bytes"
curl -sf "http://127.0.0.1:$MPORT/metrics" -o "$FP_TMP/listen.prom" || fp_fail "--metrics-listen does not serve /metrics"
L=$(check "$FP_TMP/listen.prom")
fams() { grep '^# TYPE' "$1" | awk '{print $3}'; }
[[ $(fams "$FP_TMP/listen.prom") == "$(fams "$FP_TMP/agent.prom")" ]] || fp_fail "the listener and agentctl give different families"
[[ $(get "$L" fleetprof_agent_samples_total) -ge $(get "$A" fleetprof_agent_samples_total) ]] || fp_fail "samples_total went down"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/other")
[[ $code == 404 ]] || fp_fail "the metrics listener answered $code for /other"
fp_ok "--metrics-listen serves the same $(fams "$FP_TMP/agent.prom" | wc -l) families, 404 elsewhere"
fp_ctl flush >/dev/null
fp_ctl metrics >"$FP_TMP/agent2.prom"
A2=$(check "$FP_TMP/agent2.prom")
[[ $(get "$A2" 'fleetprof_agent_uploads_total{outcome=delivered}') -ge 1 ]] || fp_fail "agent: no upload delivered after flush"
[[ $(get "$A2" fleetprof_agent_upload_waiting_uploads) == 0 ]] || fp_fail "agent: uploads still waiting after flush"
fp_ok "after a flush: $(get "$A2" 'fleetprof_agent_uploads_total{outcome=delivered}') uploads delivered"
if [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null; then
  install -m 0755 "$FP_AGENTCTL" "$FP_TMP/agentctl"
  rc=0
  msg=$(fp_timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups "$FP_TMP/agentctl" --socket "$FP_SOCK" metrics 2>&1) || rc=$?
  [[ $rc -eq 1 && $msg == *"only root"* ]] || fp_fail "nobody's agentctl metrics: rc $rc, '$msg'"
  fp_ok "nobody: $msg"
fi
rc=0
msg=$("$FP_AGENT" --metrics-listen nonsense --check-config --config /dev/null 2>&1) || rc=$?
[[ $rc -ne 0 && $msg == *"metrics-listen"*"ADDR:PORT"* && $(wc -l <<<"$msg") -eq 1 ]] || fp_fail "bad --metrics-listen: rc $rc, '$msg'"
fp_ok "bad --metrics-listen: $msg"

# ---- the collector -----------------------------------------------------------------------
curl -s -o /dev/null "$URL/no-such-page"
curl -s -o /dev/null -X POST --data-binary 'not a profile' \
  "$URL/api/v1/ingest?host=h&pid=1&starttime=1&event=cpu-clock&from=1&to=2"
curl -sf "$URL/metrics" -o "$FP_TMP/coll.prom" || fp_fail "the collector does not serve /metrics"
C=$(check "$FP_TMP/coll.prom")
stored=$(curl -sf "$URL/healthz" | fp_json_get 'd["uploads_stored"]')
samples=$(curl -sf "$URL/healthz" | fp_json_get 'd["samples_stored"]')
[[ $(get "$C" 'fleetprof_collector_uploads_total{outcome=stored}') == "$stored" && $stored -ge 1 ]] ||
  fp_fail "collector: uploads stored $(get "$C" 'fleetprof_collector_uploads_total{outcome=stored}') != healthz $stored"
[[ $(get "$C" fleetprof_collector_samples_stored_total) == "$samples" ]] || fp_fail "collector: samples_stored differs from healthz"
curl -sf "$URL/api/v1/profile?pid=$P" -o "$FP_TMP/p.pb.gz"
[[ $(fp_profile_total "$FP_TMP/p.pb.gz") == "$samples" ]] || fp_fail "collector: samples_stored != the stored profile's total"
[[ $(get "$C" 'fleetprof_collector_uploads_total{outcome=rejected}') == 1 ]] || fp_fail "collector: the bad upload is not counted as rejected"
[[ $(get "$C" 'fleetprof_collector_requests_total{path=other}') == 1 ]] || fp_fail "collector: the unknown path is not counted"
[[ $(get "$C" fleetprof_collector_decode_seconds_count) -ge $stored ]] || fp_fail "collector: decode histogram count < uploads"
[[ $(get "$C" fleetprof_collector_store_write_seconds_count) -ge 1 ]] || fp_fail "collector: no store write counted"
[[ $(get "$C" fleetprof_collector_store_bytes) -gt 0 ]] || fp_fail "collector: store_bytes is 0"
fp_ok "collector /metrics: $stored uploads and $samples samples stored (as /healthz and the profile say), 1 rejected, 1 unknown path"
