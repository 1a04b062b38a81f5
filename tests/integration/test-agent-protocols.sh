#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The agent's uploads in other protocols, read by an independent reader
# (protoc --decode with the published field numbers, written down in
# tests/integration/proto/; wirecheck.py compares what it decodes with the
# agent's own profile, stack by stack):
#   1. pyroscope+http:// to a stand-in (capture.py): a Connect PushRequest
#      with the target's labels and its exact samples, basic auth and the
#      tenant header from a credentials file; a 503 is retried with the
#      same bytes (the same ID), a Retry-After is honoured;
#   2. otlp+http:// to a stand-in: a gzip ExportProfilesServiceRequest of
#      v1.9.0 with the resource attributes and exact samples, a bearer
#      token; a 413 splits the upload in two halves that together hold
#      every sample (also when the target was stopped through the
#      first half of the round); a partial success is logged and counted;
#   3. the answers per protocol: OTLP's 400 (its Status message logged)
#      and 500 are for good (its specification), Pyroscope's 500 is
#      retried; a 401 is a configuration error and the data waits;
#   4. the real collector behind both: Pyroscope pushes fail over from a
#      dead collector, the drops the agent counted arrive as drops,
#      go tool pprof reads the workload's functions under their callers
#      and threads; OTLP's profile totals equal the agent's own;
#   5. a host tier's round: one series (resource) per service, together
#      the tier's whole profile;
#   6. settings it cannot use: one line, exit 1.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 300
fp_require_go
command -v protoc >/dev/null || fp_fail "protoc is missing (scripts/deps.sh installs protobuf-compiler)"
WIRECHECK=$FP_SRC/tests/integration/wirecheck.py
host=$(hostname)

cport=$(fp_free_port)
CAP_PID=
start_capture() { # start_capture DIR: a fresh stand-in on $cport, answering from $FP_TMP/answers
  [[ -n $CAP_PID ]] && fp_kill "$CAP_PID"
  python3 "$FP_SRC/tests/integration/capture.py" "$cport" "$1" --answers "$FP_TMP/answers" \
    --lifetime 240 &
  CAP_PID=$!
  fp_track "$CAP_PID"
  fp_wait_for 10 python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])))' "$cport" 2>/dev/null ||
    fp_fail "the stand-in collector did not start"
}
count() { cat "$1/count" 2>/dev/null || echo 0; }
header() { # header DIR N NAME
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["headers"].get(sys.argv[2], ""))' "$1/$2.json" "$3"
}
upload_field() { fp_status_json | fp_json_get "d['upload']['$1']"; }
truth_run() { # truth_run TAG FREQ: truth profiled for 3 s, stopped; sets pid
  fp_start_workload truth "$FP_TMP/$1.out" "$FP_TMP/$1.ready" --seconds 3 --hold
  pid=$FP_WL_PID
  fp_ctl start "$pid" --freq "$2" >/dev/null || fp_fail "start failed"
  sleep 3
  fp_ctl stop "$pid" >/dev/null || fp_fail "stop failed"
}
restart_agent() {
  fp_stop_agent
  rm -f "$FP_TMP/agent.db"*
  fp_start_agent --bucket 1 --upload-interval 3600 "$@"
}

# ---- 1. Pyroscope, to a stand-in ------------------------------------------------------------
printf '# the team'"'"'s Pyroscope\nbasic fleet:s3cret\ntenant team-a\n' >"$FP_TMP/creds"
chmod 600 "$FP_TMP/creds"
printf '503 - 4\n200\n' >"$FP_TMP/answers"
start_capture "$FP_TMP/cap1"
fp_start_agent --bucket 1 --upload-interval 3600 --collector "pyroscope+http://127.0.0.1:$cport" \
  --credentials-file "$FP_TMP/creds"
truth_run t1 1000
rc=0
before=$(date +%s%N)
out=$(fp_ctl flush 2>&1) || rc=$?
[[ $rc != 0 && $out == *"HTTP 503"* ]] || fp_fail "a 503 should fail the flush: rc $rc, $out"
# The next attempt is set once the answer came, so at least 4 s after the flush began (a backoff
# of its own would be 1 s, give or take a quarter). Measured from before the flush, as the
# status query after it may take a while on a loaded machine.
next=$(upload_field next_attempt_ns)
((next - before >= 4000000000)) ||
  fp_fail "Retry-After: 4 was not honoured (next attempt $(((next - before) / 1000000)) ms after the flush began)"
out=$(fp_ctl flush) || fp_fail "the second flush failed: $out"
fp_log "flush: $out"
[[ $(count "$FP_TMP/cap1") == 2 ]] || fp_fail "$(count "$FP_TMP/cap1") requests, expected 2"
cmp -s "$FP_TMP/cap1/1.body" "$FP_TMP/cap1/2.body" || fp_fail "the retry's body differs from the first try's"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["path"] == "/push.v1.PusherService/Push", d' \
  "$FP_TMP/cap1/2.json" || fp_fail "not Pyroscope's push path"
[[ $(header "$FP_TMP/cap1" 2 Authorization) == "Basic $(printf fleet:s3cret | base64)" ]] ||
  fp_fail "basic auth: '$(header "$FP_TMP/cap1" 2 Authorization)'"
[[ $(header "$FP_TMP/cap1" 2 X-Scope-OrgID) == team-a ]] || fp_fail "no tenant header"
[[ $(header "$FP_TMP/cap1" 2 Content-Type) == application/proto ]] || fp_fail "content type"
fp_ctl dump "$pid" -o "$FP_TMP/t1.pb.gz" >/dev/null || fp_fail "dump failed"
got=$(python3 "$WIRECHECK" pyroscope "$FP_TMP/t1.pb.gz" "$FP_TMP/cap1/2.body" \
  --label service_name=truth --label __name__=process_cpu --label process=truth \
  --label "pid=$pid" --label "hostname=$host" \
  --label "process.executable.path=$FP_BUILD/tests/truth") || fp_fail "the push does not hold the agent's profile"
fp_log "push: $got"
fp_json_get 'd["ids"][0]' <<<"$got" | grep -Eq '^[0-9a-f]{32}$' || fp_fail "the sample's ID is not the upload's key"
fp_ok "Pyroscope push: labels, every stack and thread, basic auth and tenant; a 503 retried byte for byte after Retry-After"
fp_kill "$pid"

# ---- 2. OTLP, to a stand-in -----------------------------------------------------------------
printf 'bearer tok-%s\n' "$$" >"$FP_TMP/creds"
echo 'partial_success { rejected_profiles: 1 error_message: "test says no" }' |
  protoc --encode=otlp_v190.ExportProfilesServiceResponse -I "$FP_SRC/tests/integration/proto" \
    "$FP_SRC/tests/integration/proto/otlp-profiles-v1.9.0.proto" >"$FP_TMP/partial.bin"
printf '413\n200\n200 %s\n' "$FP_TMP/partial.bin" >"$FP_TMP/answers"
start_capture "$FP_TMP/cap2"
restart_agent --collector "otlp+http://127.0.0.1:$cport" --credentials-file "$FP_TMP/creds"
# The target is stopped through the first half of the round's buckets (they hold nothing): a
# split must still send two halves that each hold samples, not the whole again.
fp_start_workload truth "$FP_TMP/t2.out" "$FP_TMP/t2.ready" --seconds 3 --hold \
  --wait-for-start "$FP_TMP/t2.go"
pid=$FP_WL_PID
kill -STOP "$pid"
fp_ctl start "$pid" --freq 1000 >/dev/null || fp_fail "start failed"
sleep 6
touch "$FP_TMP/t2.go"
kill -CONT "$pid"
sleep 3.5
fp_ctl stop "$pid" >/dev/null || fp_fail "stop failed"
out=$(fp_ctl flush) || fp_fail "flush failed: $out"
fp_log "flush: $out"
[[ $(count "$FP_TMP/cap2") == 3 ]] || fp_fail "$(count "$FP_TMP/cap2") requests, expected the whole and two halves"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["path"] == "/v1development/profiles", d' \
  "$FP_TMP/cap2/1.json" || fp_fail "not OTLP's path"
[[ $(header "$FP_TMP/cap2" 2 Authorization) == "Bearer tok-$$" ]] || fp_fail "bearer token"
[[ $(header "$FP_TMP/cap2" 2 Content-Encoding) == gzip ]] || fp_fail "not gzip"
[[ $(header "$FP_TMP/cap2" 2 X-Scope-OrgID) == "" ]] || fp_fail "a tenant header without a tenant"
fp_ctl dump "$pid" -o "$FP_TMP/t2.pb.gz" >/dev/null || fp_fail "dump failed"
got=$(python3 "$WIRECHECK" otlp "$FP_TMP/t2.pb.gz" "$FP_TMP/cap2/2.body" "$FP_TMP/cap2/3.body" --gzip \
  --attr service.name=truth --attr "host.name=$host" --attr "process.pid=$pid" \
  --attr process.executable.name=truth --attr "process.executable.path=$FP_BUILD/tests/truth") ||
  fp_fail "the two halves do not hold the agent's profile"
fp_log "otlp: $got"
[[ $(fp_json_get 'd["events"]' <<<"$got") == "['cpu-clock']" ]] || fp_fail "fleetprof.event: $got"
python3 "$WIRECHECK" otlp "$FP_TMP/t2.pb.gz" "$FP_TMP/cap2/1.body" --gzip >/dev/null ||
  fp_fail "the whole (refused 413) does not hold the agent's profile"
grep -q "rejected 1 profile of $pid (cpu-clock) for good: test says no" "$FP_TMP/agent.log" ||
  fp_fail "the partial success is not logged"
(($(upload_field uploads_rejected) == 1)) || fp_fail "the partial success is not counted"
fp_ok "OTLP: resource attributes, every stack and thread in the halves of a 413, bearer token; a partial success logged"
fp_kill "$pid"

# ---- 3. answers per protocol ----------------------------------------------------------------
echo 'code: 3 message: "bad dictionary"' |
  protoc --encode=otlp_v190.Status -I "$FP_SRC/tests/integration/proto" \
    "$FP_SRC/tests/integration/proto/otlp-profiles-v1.9.0.proto" >"$FP_TMP/status.bin"
printf '400 %s\n500\n' "$FP_TMP/status.bin" >"$FP_TMP/answers"
start_capture "$FP_TMP/cap3"
restart_agent --collector "otlp+http://127.0.0.1:$cport"
# (It works once profiled: a start that loaded the off-CPU programs slowly once outlasted
# its 3 s of work, and the flush had its off-CPU profile only.)
fp_start_workload truth "$FP_TMP/t3.out" "$FP_TMP/t3.ready" --seconds 3 --hold \
  --wait-for-start "$FP_TMP/t3.go"
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 200 --off-cpu >/dev/null || fp_fail "start failed"
touch "$FP_TMP/t3.go"
sleep 2
fp_ctl stop "$pid" >/dev/null || fp_fail "stop failed"
fp_ctl flush >/dev/null || fp_fail "a flush answered 400 and 500 by OTLP should end (refused for good)"
[[ $(count "$FP_TMP/cap3") == 2 ]] || fp_fail "OTLP's 400 or 500 was retried"
(($(upload_field uploads_rejected) == 2)) || fp_fail "OTLP's 400 and 500 are not counted as refused"
grep -q "refused the profile of $pid (.*) for good: HTTP 500" "$FP_TMP/agent.log" ||
  fp_fail "OTLP's 500 is not logged"
grep -q "refused the profile of $pid (.*) for good: HTTP 400: bad dictionary$" "$FP_TMP/agent.log" ||
  fp_fail "OTLP's 400 is not logged with its google.rpc.Status message"
fp_kill "$pid"
printf '500\n' >"$FP_TMP/answers"
start_capture "$FP_TMP/cap4"
restart_agent --collector "pyroscope+http://127.0.0.1:$cport"
truth_run t4 200
fp_ctl flush >/dev/null 2>&1 && fp_fail "a flush answered 500 by Pyroscope should fail (retried)"
(($(upload_field uploads_rejected) == 0)) || fp_fail "Pyroscope's 500 was taken as for good"
printf '401\n' >"$FP_TMP/answers"
out=$(fp_ctl flush 2>&1) && fp_fail "a 401 should fail the flush"
[[ $out == *"CONFIGURATION ERROR"*"check --token-file"* ]] || fp_fail "a 401: $out"
[[ $(upload_field config_error) == True ]] || fp_fail "status does not say configuration error"
printf '200\n' >"$FP_TMP/answers"
fp_ctl flush >/dev/null || fp_fail "the data did not wait for the fix"
# Three flushes, three requests; on a slow machine the uploader's own retry of the 500
# (its back-off timer) may come between two flushes: one more, not the data lost.
n=$(count "$FP_TMP/cap4")
((n >= 3 && n <= 5)) || fp_fail "$n requests to Pyroscope, expected 3 (or 4-5 with the uploader's own retries)"
cmp -s "$FP_TMP/cap4/1.body" "$FP_TMP/cap4/3.body" || fp_fail "the upload changed while it waited"
fp_ok "answers: OTLP's 500 for good, Pyroscope's 500 retried, a 401 waits as a configuration error"
fp_kill "$pid"
fp_kill "$CAP_PID"
CAP_PID=

# ---- 4. the real collector behind both ------------------------------------------------------
port=$(fp_free_port)
dead=$(fp_free_port)
url=http://127.0.0.1:$port
echo "write-$$" >"$FP_TMP/token"
fp_start_collector "$url" --listen "127.0.0.1:$port" --store "$FP_TMP/collector.db" --token-file "$FP_TMP/token"
printf 'basic fleet:write-%s\n' "$$" >"$FP_TMP/creds"
restart_agent --collector "pyroscope+http://127.0.0.1:$dead,pyroscope+http://127.0.0.1:$port" \
  --credentials-file "$FP_TMP/creds"
fp_start_workload truth "$FP_TMP/t5.out" "$FP_TMP/t5.ready" --seconds 30 --hold
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 20000 >/dev/null || fp_fail "start failed"
sleep 1
# Drops to carry: the agent stopped while its rings fill (longer when the kernel lowered the rate).
for stall in 2 4 8; do
  kill -STOP "$FP_AGENT_PID"
  sleep "$stall"
  kill -CONT "$FP_AGENT_PID"
  sleep 1
  lost=$(fp_target_field "$pid" lost)
  ((lost == 0)) || break
done
((lost > 0)) || fp_fail "no ring overflow to carry"
fp_ctl stop "$pid" >/dev/null || fp_fail "stop failed"
out=$(fp_ctl flush) || fp_fail "flush failed: $out"
fp_log "flush: $out"
(($(upload_field failovers) >= 1)) || fp_fail "no failover from the dead collector"
fp_ctl dump "$pid" -o "$FP_TMP/t5.pb.gz" >/dev/null || fp_fail "dump failed"
local_drops=$(fp_pprof -comments "$FP_TMP/t5.pb.gz" 2>/dev/null |
  awk '/^dropped [a-z_]+: [0-9]+$/ { n += $3 } END { print n + 0 }')
series=$(curl -sf -H "Authorization: Bearer write-$$" "$url/api/v1/series") || fp_fail "series"
coll_drops=$(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print(sum(n for s in d["series"] if s["pid"] == int(sys.argv[2]) for n in s["drops"].values()))' "$series" "$pid")
fp_log "drops: the agent's dump says $local_drops dropped; the collector holds $coll_drops"
((coll_drops > 0 && coll_drops == local_drops)) || fp_fail "drops did not arrive whole: $series"
fp_pprof -traces -symbolize=none "$url/api/v1/profile?process=truth&pid=$pid" >"$FP_TMP/traces.txt" 2>&1 ||
  fp_fail "go tool pprof cannot read the collector: $(head -3 "$FP_TMP/traces.txt")"
python3 - "$FP_TMP/traces.txt" <<'EOF' || fp_fail "callers or threads lost through Pyroscope's push"
import re, sys
text = open(sys.argv[1]).read()
traces = text.split("-----------+-------------------------------------------------------")
pairs, threads = set(), set()
for t in traces:
    frames = [m for line in t.splitlines() if ":" not in line
              for m in re.findall(r"^\s+(?:\S+\s+)?(\S+)$", line)]
    threads.update(re.findall(r"thread_name:\s+(\S+)", t))
    for a, b in zip(frames, frames[1:]):
        pairs.add((a, b))
for leaf in ("leaf_hash", "leaf_sqrt"):
    callers = {b for a, b in pairs if a == leaf}
    assert callers and callers <= {"mid_one", "mid_two"}, (leaf, callers)
assert {"w-alpha", "w-beta", "w-gamma"} <= threads, threads
EOF
fp_ok "Pyroscope push into the collector: failover, drops ($coll_drops) whole, leaves under their callers, threads"
fp_kill "$pid"

restart_agent --collector "otlp+http://127.0.0.1:$port" --token-file "$FP_TMP/token"
truth_run t6 1000
out=$(fp_ctl flush) || fp_fail "flush failed: $out"
fp_ctl dump "$pid" -o "$FP_TMP/t6.pb.gz" >/dev/null || fp_fail "dump failed"
curl -sf -H "Authorization: Bearer write-$$" "$url/api/v1/profile?process=truth&pid=$pid" -o "$FP_TMP/c6.pb.gz" ||
  fp_fail "the collector has no profile of $pid"
lt=$(fp_profile_total "$FP_TMP/t6.pb.gz")
ct=$(fp_profile_total "$FP_TMP/c6.pb.gz")
lv=$(fp_profile_total "$FP_TMP/t6.pb.gz" cpu)
cv=$(fp_profile_total "$FP_TMP/c6.pb.gz" cpu)
fp_log "OTLP: the agent's dump $lt samples $lv ns; the collector $ct samples $cv ns"
((lt > 1000)) && [[ $lt == "$ct" && $lv == "$cv" ]] || fp_fail "the collector's totals differ from the agent's"
fp_ok "OTLP into the collector: samples and CPU time equal the agent's ($ct, $cv ns)"
fp_kill "$pid"
fp_stop_collector

# ---- 5. a host tier's round: a series (resource) per service ------------------------------------
printf '200\n' >"$FP_TMP/answers"
for proto in pyroscope otlp; do
  start_capture "$FP_TMP/cap-$proto"
  restart_agent --collector "$proto+http://127.0.0.1:$cport"
  # Two services that surely run in these 3 s (a quiet machine may have no other).
  fp_start_workload spin "$FP_TMP/s-$proto.out" "$FP_TMP/s-$proto.ready" --threads 1 --duty 0.3 \
    --seconds 30
  spin_pid=$FP_WL_PID
  fp_start_workload truth "$FP_TMP/h-$proto.out" "$FP_TMP/h-$proto.ready" --seconds 3 --hold
  fp_ctl start --host --freq 99 >/dev/null || fp_fail "start --host failed"
  sleep 3
  fp_ctl stop --host >/dev/null || fp_fail "stop --host failed"
  out=$(fp_ctl flush) || fp_fail "flush failed: $out"
  fp_ctl dump --host -o "$FP_TMP/host-$proto.pb.gz" >/dev/null || fp_fail "dump --host failed"
  if [[ $proto == pyroscope ]]; then
    got=$(python3 "$WIRECHECK" pyroscope "$FP_TMP/host-$proto.pb.gz" "$FP_TMP/cap-$proto"/*.body \
      --label "hostname=$host") || fp_fail "the host tier's push does not hold its profile"
  else
    got=$(python3 "$WIRECHECK" otlp "$FP_TMP/host-$proto.pb.gz" "$FP_TMP/cap-$proto"/*.body --gzip \
      --attr "host.name=$host") || fp_fail "the host tier's OTLP request does not hold its profile"
  fi
  fp_log "host tier, $proto: $(head -c 300 <<<"$got")"
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); s=d["services"]; assert "truth" in s and "spin" in s, s' \
    "$got" || fp_fail "the host tier's round is not a series per service: $got"
  fp_kill "$FP_WL_PID"
  fp_kill "$spin_pid"
done
fp_ok "a host tier's round: one series (resource) per service, every stack of the tier's own profile"
fp_stop_agent
fp_kill "$CAP_PID"
CAP_PID=

# ---- 6. settings it cannot use ----------------------------------------------------------------
printf 'bearer x\n' >"$FP_TMP/open-creds"
chmod 644 "$FP_TMP/open-creds"
printf 'password x\n' >"$FP_TMP/bad-creds"
chmod 600 "$FP_TMP/bad-creds"
while IFS='|' read -r want args; do
  rc=0
  # shellcheck disable=SC2086
  err=$(fp_timeout 20 "$FP_AGENT" --foreground --socket "$FP_TMP/bad.sock" --store "$FP_TMP/bad.db" $args 2>&1) || rc=$?
  line=$(grep -v "thread tracker" <<<"$err")
  [[ $rc == 1 && $(wc -l <<<"$line") == 1 && $line == *"$want"* ]] || fp_fail "agent $args: exit $rc, $err"
  fp_log "agent $args: $line"
done <<EOF
must start with http:// or https://, or pyroscope+ or otlp+|--collector zipkin+http://127.0.0.1:1
must start with http:// or https://, or pyroscope+ or otlp+|--collector pyroscope+ftp://127.0.0.1:1
chmod o=|--collector $url --credentials-file $FP_TMP/open-creds
unknown key 'password'|--collector $url --credentials-file $FP_TMP/bad-creds
not both|--collector $url --credentials-file $FP_TMP/bad-creds --token-file $FP_TMP/token
EOF
fp_ok "unusable protocols and credentials: one line, exit 1"
