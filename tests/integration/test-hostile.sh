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
# 4. The agent still answers root afterwards.
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
fp_start_agent --bucket 1 --collector "http://fpuser:s3cret@127.0.0.1:$DEAD" --upload-interval 5
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

# ---- 4. the agent still serves -----------------------------------------------------------
fp_ctl status >/dev/null || fp_fail "the agent stopped answering"
fp_kill "$NP" "$RP"
fp_ok "the agent still answers"
