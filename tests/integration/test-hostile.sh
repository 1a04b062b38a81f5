#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Attacks by an unprivileged local user (nobody) on the root agent, each
# shown to fail while the agent keeps serving (see the README's Security
# section). The machine's perf_event_paranoid is set to 2 (Linux's
# default) for the test and put back after.
#
# 1. Kernel addresses for anyone: nobody's `start --kernel` on its own
#    process is refused (at paranoid 2 the kernel gives kernel-mode samples
#    only to CAP_PERFMON); so is a rule with --kernel. Its plain `start`
#    is granted user mode only: the target says kernel_excluded, and a
#    process that lives in the kernel (dd from /dev/zero) shows no [kernel]
#    frame in nobody's dump, while root's own dd does.
# 2. Credentials in the collector URL: nobody's status (text and JSON)
#    shows the URL without "user:password@"; root's shows it whole.
# 3. Connections: nobody holding 16 idle connections gets "too many
#    connections of your user" for the next, while root is still served.
# 4. Growth: nobody's process of 40 threads against an agent with
#    --max-threads 16: 16 are sampled, the other 25 counted in status
#    (text and JSON) and logged once, and the agent still answers root.
#
# And the collector against its network:
# 5. Reads need --read-token-file's token when it is set: no token or a
#    wrong one is 401 (JSON, series, profile, the /series page, metrics),
#    the bearer token or the page's cookie is let in, /healthz and the
#    page's own files stay open; the page (in chromium) asks for the token
#    once and then draws. Without it, listening beyond loopback warns.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 120
if [[ $(id -u) -ne 0 ]] || ! command -v setpriv >/dev/null; then
  fp_log "SKIP: needs root and setpriv"
  exit 0
fi
PARANOID=$(cat /proc/sys/kernel/perf_event_paranoid)
fp_on_exit 'echo "$PARANOID" >/proc/sys/kernel/perf_event_paranoid'
echo 2 >/proc/sys/kernel/perf_event_paranoid

DEAD=$(fp_free_port)
fp_start_agent --bucket 1 --collector "http://fpuser:s3cret@127.0.0.1:$DEAD" --upload-interval 5 \
  --max-threads 16
install -m 0755 "$FP_AGENTCTL" "$FP_TMP/agentctl"
asnobody=(fp_timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups "$FP_TMP/agentctl" --socket "$FP_SOCK")
refused() { # refused WHAT WANT CMD...: exit 1, one line containing WANT
  local what=$1 want=$2 rc=0 msg
  shift 2
  msg=$("$@" 2>&1) || rc=$?
  [[ $rc -eq 1 && $msg == *"$want"* && $(wc -l <<<"$msg") -eq 1 ]] || fp_fail "$what: rc $rc, '$msg'"
  fp_ok "$what: $msg"
}

# ---- 1. kernel addresses -------------------------------------------------------------
setpriv --reuid=65534 --regid=65534 --clear-groups dd if=/dev/zero of=/dev/null bs=64k &
NP=$!
fp_track "$NP"
dd if=/dev/zero of=/dev/null bs=64k &
RP=$!
fp_track "$RP"
sleep 0.3
refused "nobody's start --kernel" "need CAP_PERFMON" "${asnobody[@]}" start "$NP" --kernel
refused "nobody's rule with --kernel" "need CAP_PERFMON" "${asnobody[@]}" start --name '^dd$' --kernel
[[ $(fp_status_json | fp_json_get 'len(d["rules"])') == 0 ]] || fp_fail "nobody's --kernel rule was added"
"${asnobody[@]}" start "$NP" --freq 499 >/dev/null
fp_ctl start "$RP" --freq 499 --kernel >/dev/null
[[ $(fp_target_field "$NP" kernel_excluded) == true ]] || fp_fail "nobody's target samples kernel mode"
[[ $(fp_target_field "$RP" kernel_excluded) == false ]] || fp_fail "root's target lost kernel mode"
sleep 2
"${asnobody[@]}" dump "$NP" --format folded >"$FP_TMP/nobody.folded"
fp_ctl dump "$RP" --format folded >"$FP_TMP/root.folded"
grep -q '\[kernel\]\|vfs_\|__x64_sys\|entry_SYSCALL' "$FP_TMP/nobody.folded" &&
  fp_fail "nobody's profile holds kernel frames: $(grep -m2 'kernel\|sys' "$FP_TMP/nobody.folded")"
grep -q 'entry_SYSCALL\|__x64_sys\|\[kernel\]' "$FP_TMP/root.folded" || fp_fail "root's --kernel profile has no kernel frame"
fp_ok "nobody gets user mode only ($(wc -l <"$FP_TMP/nobody.folded") stacks, no kernel frame); root's dd shows the kernel"

# ---- 2. credentials in the collector URL -------------------------------------------------
fp_ctl flush >/dev/null 2>&1 || true # a failing round: its error names the URL
"${asnobody[@]}" status >"$FP_TMP/nobody.status"
"${asnobody[@]}" status --json >"$FP_TMP/nobody.json"
fp_ctl status >"$FP_TMP/root.status"
grep -q s3cret "$FP_TMP/nobody.status" "$FP_TMP/nobody.json" && fp_fail "nobody sees the collector's password: $(grep -h s3cret "$FP_TMP"/nobody.*)"
grep -q "http://127.0.0.1:$DEAD" "$FP_TMP/nobody.status" || fp_fail "nobody's status lost the collector's address"
grep -q s3cret "$FP_TMP/root.status" || fp_fail "root's status lost the URL"
fp_ok "nobody's status: $(grep -m1 '^upload' "$FP_TMP/nobody.status")"

# ---- 3. connections --------------------------------------------------------------------------
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import socket, sys, time
socks = []
for i in range(16):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    socks.append(s)
print("held", flush=True)
time.sleep(25)' "$FP_SOCK" >"$FP_TMP/held" &
HOLDER=$!
fp_track "$HOLDER"
fp_wait_for 10 grep -q held "$FP_TMP/held" || fp_fail "could not hold connections"
refused "nobody's 17th connection" "too many connections of your user" "${asnobody[@]}" status
fp_ctl status >/dev/null || fp_fail "root is not served while nobody holds connections"
fp_kill "$HOLDER"
fp_wait_for 10 "${asnobody[@]}" status >/dev/null || fp_fail "nobody is not served once its connections closed"
fp_ok "nobody's idle connections are bounded; root is served meanwhile"

# ---- 4. a thread limit and the agent still serves ----------------------------------------------
install -d -m 0777 "$FP_TMP/nobody"
setpriv --reuid=65534 --regid=65534 --clear-groups "$FP_BUILD/tests/spin" --threads 40 --seconds 60 \
  --duty 0.05 --ready "$FP_TMP/nobody/many.ready" >/dev/null 2>&1 &
MP=$!
fp_track "$MP"
fp_wait_for 20 test -e "$FP_TMP/nobody/many.ready" || fp_fail "the 40-thread workload did not start"
"${asnobody[@]}" start "$MP" >/dev/null || fp_fail "nobody could not profile its own 40 threads"
live=$(fp_target_field "$MP" threads) over=$(fp_target_field "$MP" threads_over_limit)
[[ $live == 16 && $over == 25 ]] || fp_fail "--max-threads 16 of 41 threads: $live sampled, $over counted"
fp_ctl status | grep -q "^$MP: 25 threads not sampled: --max-threads 16 were" ||
  fp_fail "status does not say what --max-threads left out: $(fp_ctl status)"
[[ $(grep -c "$MP (spin): 16 threads are sampled" "$FP_TMP/agent.log") == 1 ]] ||
  fp_fail "the limit is not logged once: $(grep -c "$MP (spin)" "$FP_TMP/agent.log")"
fp_kill "$MP"
fp_ok "--max-threads 16: nobody's 41 threads give 16 sampled, 25 counted and logged once"
fp_ctl status >/dev/null || fp_fail "the agent stopped answering"
fp_kill "$NP" "$RP"
fp_ok "the agent still answers"

# ---- 5. the collector's reads --------------------------------------------------------------
printf 'r34d-t0k3n\n' >"$FP_TMP/read.token"
printf 'wr1te\n' >"$FP_TMP/write.token"
PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/c.db" \
  --token-file "$FP_TMP/write.token" --read-token-file "$FP_TMP/read.token"
python3 "$FP_SRC/tests/integration/mkpprof.py" good "$FP_TMP/up.pb.gz" --stacks 20 --samples 500
now=$(date +%s%N)
curl -sf -H "Authorization: Bearer wr1te" --data-binary @"$FP_TMP/up.pb.gz" \
  "$URL/api/v1/ingest?host=h&pid=7&starttime=1&event=cpu-clock&from=$((now - 5000000000))&to=$now" >/dev/null ||
  fp_fail "the upload with the write token failed"
code() { curl -s -o "$FP_TMP/body" -w '%{http_code}' "$@"; }
for path in /api/v1/series /api/v1/profile /api/v1/flamegraph /series /metrics; do
  [[ $(code "$URL$path") == 401 ]] || fp_fail "$path without the read token: $(cat "$FP_TMP/body")"
  [[ $(code -H "Authorization: Bearer wr1te" "$URL$path") == 401 ]] || fp_fail "$path with the write token was let in"
  [[ $(code -H "Authorization: Bearer r34d-t0k3n" "$URL$path") == 200 ]] || fp_fail "$path with the read token: $(cat "$FP_TMP/body")"
done
[[ $(code -H "Cookie: a=b; fleetprof_read=r34d-t0k3n" "$URL/api/v1/series") == 200 ]] || fp_fail "the read cookie was refused"
[[ $(code -H "Cookie: fleetprof_read=nope" "$URL/api/v1/series") == 401 ]] || fp_fail "a wrong cookie was let in"
for path in /healthz / /ui/app.js; do
  [[ $(code "$URL$path") == 200 ]] || fp_fail "$path is not open"
done
fp_ok "reads need the read token (bearer or cookie); the write token is not one; /healthz and the page's files stay open"
PW=/var/cache/fleetprof-test/node_modules
out=$(fp_timeout 60 env NODE_PATH="$PW" node "$FP_SRC/tests/integration/weblogin.js" "$URL" r34d-t0k3n) ||
  fp_fail "the browser login failed"
python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["askedBefore"] and not o["askedAfter"], o
assert int(o["total"]) > 0 and "read token" in o["statusBefore"], o
' "$out" || fp_fail "the page's login: $out"
fp_ok "the page asks for the read token once, then draws: $out"
fp_stop_collector
WPORT=$(fp_free_port)
"$FP_COLLECTOR" --listen "0.0.0.0:$WPORT" --store "$FP_TMP/c2.db" >"$FP_TMP/open.log" 2>&1 &
OPEN=$!
fp_track "$OPEN"
fp_wait_for 10 curl -sf "http://127.0.0.1:$WPORT/healthz" -o /dev/null || fp_fail "the open collector did not start"
grep -q "reads are open" "$FP_TMP/open.log" || fp_fail "no warning for open reads on 0.0.0.0: $(cat "$FP_TMP/open.log")"
grep -q "reads are open" "$FP_TMP/collector.log" && fp_fail "a warning for reads on loopback"
fp_kill "$OPEN"
fp_ok "listening beyond loopback without --read-token-file warns"
