#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# CLI errors: every mistake an operator can make with agentctl gets exactly
# one line on stderr starting "agentctl:", nothing on stdout, and a non-zero
# exit status — and none of them hurts the agent.
#
# Covered: start of a PID that does not exist (a made-up one and one of a
# child we have just reaped), a malformed or missing PID, start of an
# already profiled PID, stop and dump of a PID that is not profiled, a bad
# event name, bad frequencies (0, abc, 10000000), an unknown command, an
# unknown dump format, and an agent that is not running (socket path that
# does not exist).  Afterwards the agent must still be alive, `status` must
# work and list exactly the one target we started.
#
# Permissions: the socket is usable by an unprivileged user (nobody), but
# nobody may not start, stop or dump a root-owned target: each is refused
# with one "agentctl:" line that says permission was denied (not a
# connection error), and root's profiling carries on.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 150

fp_start_agent
fp_start_workload truth "$FP_TMP/t.out" "$FP_TMP/t.ready" --seconds 0 --duty-scale 0.2
PID=$FP_WL_PID
FAILS=0

# expect_error DESCRIPTION REGEX CMD...: CMD exits non-zero, prints nothing on
# stdout and exactly one stderr line that starts "agentctl: " and matches
# REGEX (case-insensitive, extended).
expect_error() {
  local desc=$1 rx=$2 rc=0 err n
  shift 2
  "$@" >"$FP_TMP/out" 2>"$FP_TMP/err" || rc=$?
  err=$(cat "$FP_TMP/err")
  n=$(wc -l <"$FP_TMP/err")
  local why=
  if [[ $rc -eq 0 ]]; then
    why="exit status 0"
  elif [[ $rc -ge 124 && $rc -le 137 ]]; then
    why="timed out or killed (status $rc)"
  elif [[ $n -ne 1 ]]; then
    why="$n lines on stderr"
  elif [[ $err != "agentctl: "* ]]; then
    why="stderr does not start with 'agentctl: '"
  elif ! grep -qiE -- "$rx" <<<"$err"; then
    why="message does not match /$rx/"
  elif [[ -s $FP_TMP/out ]]; then
    why="something on stdout: $(head -c 200 "$FP_TMP/out")"
  fi
  if [[ -n $why ]]; then
    printf '%s: FAIL: %s: %s; stderr was:\n%s\n' "$FP_TEST_NAME" "$desc" "$why" "$err" >&2
    FAILS=$((FAILS + 1))
  else
    fp_ok "$desc → (exit $rc) $err"
  fi
}

ctl=(fp_timeout 30 "$FP_AGENTCTL" --socket "$FP_SOCK")

# A PID that does not exist: a child of ours, reaped.
true &
GONE=$!
wait "$GONE"
kill -0 "$GONE" 2>/dev/null && GONE=
FAKE=999999
while kill -0 "$FAKE" 2>/dev/null; do FAKE=$((FAKE + 1)); done

nopid='no such|not exist|does not exist|not found|no process|ESRCH'
expect_error "start of nonexistent pid $FAKE" "$nopid" "${ctl[@]}" start "$FAKE"
[[ -n $GONE ]] && expect_error "start of reaped child pid $GONE" "$nopid" "${ctl[@]}" start "$GONE"
expect_error "start with a malformed pid" 'pid|invalid|bad' "${ctl[@]}" start abc
expect_error "start with a negative pid" 'pid|invalid|bad|option' "${ctl[@]}" start -5
expect_error "start without a pid" 'pid|usage|missing' "${ctl[@]}" start

out=$("${ctl[@]}" start "$PID") || fp_fail "start $PID failed: $out"
fp_ok "start $PID → $out"
expect_error "start of an already profiled pid" 'already' "${ctl[@]}" start "$PID"
expect_error "stop of a pid that is not profiled ($$)" 'not profiled|not being profiled|no such target|unknown|not found' \
  "${ctl[@]}" stop "$$"
expect_error "dump of a pid that is not profiled ($$)" 'not profiled|not being profiled|no such target|unknown|not found|no (data|samples|profile)' \
  "${ctl[@]}" dump "$$" --format top
expect_error "bad event name" 'event' "${ctl[@]}" start "$$" --event bogus
expect_error "frequency 0" 'freq' "${ctl[@]}" start "$$" --freq 0
expect_error "frequency abc" 'freq' "${ctl[@]}" start "$$" --freq abc
expect_error "frequency 10000000" 'freq' "${ctl[@]}" start "$$" --freq 10000000
expect_error "unknown command" 'unknown|usage|command' "${ctl[@]}" frobnicate
expect_error "unknown dump format" 'format' "${ctl[@]}" dump "$PID" --format bogus
expect_error "agent not running (no socket)" 'connect|socket|running|no such file' \
  fp_timeout 30 "$FP_AGENTCTL" --socket "$FP_TMP/nonexistent.sock" status
[[ $(fp_target_field "$$" state) == absent ]] || fp_fail "a refused start left pid $$ in status"

# ---- the agent survived all that ------------------------------------------
kill -0 "$FP_AGENT_PID" 2>/dev/null || fp_fail "the agent died during the error cases"
st=$(fp_status_json)
n=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(len(d["targets"]), d["agent_pid"])' "$st")
[[ $n == "1 $FP_AGENT_PID" ]] || fp_fail "status after the errors: want 1 target and agent_pid $FP_AGENT_PID, got '$n': $st"
[[ $(fp_target_field "$PID" state) == running ]] || fp_fail "pid $PID is not running in status"
fp_ok "the agent is alive, status lists exactly pid $PID"

# ---- permissions ------------------------------------------------------------
if [[ $(id -u) -ne 0 ]]; then
  fp_log "SKIP permission checks: need root to switch to nobody"
elif ! command -v setpriv >/dev/null; then
  fp_log "SKIP permission checks: setpriv is not installed"
else
  # A copy nobody can execute whatever the permissions of the build tree.
  install -m 0755 "$FP_AGENTCTL" "$FP_TMP/agentctl"
  asnobody=(fp_timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups "$FP_TMP/agentctl" --socket "$FP_SOCK")
  perm='permission|not permitted|denied|EPERM|EACCES|not allowed|unauthori'
  mode=$(stat -c %a "$FP_SOCK")
  fp_log "socket mode $mode"
  rc=0
  "${asnobody[@]}" status >"$FP_TMP/out" 2>"$FP_TMP/err" || rc=$?
  if [[ $rc -eq 0 ]]; then
    fp_ok "nobody can connect: status works"
  else
    err=$(cat "$FP_TMP/err")
    grep -qiE 'connect|socket|refused' <<<"$err" && ! grep -qiE "$perm" <<<"$err" &&
      fp_fail "nobody cannot connect to the socket: $err"
    expect_error "status as nobody" "$perm" "${asnobody[@]}" status
  fi
  sleep 60 &
  ROOTP=$!
  fp_track "$ROOTP"
  expect_error "start of a root-owned pid as nobody" "$perm" "${asnobody[@]}" start "$ROOTP"
  expect_error "stop of root's target as nobody" "$perm" "${asnobody[@]}" stop "$PID"
  expect_error "dump of root's target as nobody" "$perm" "${asnobody[@]}" dump "$PID" --format top
  [[ $(fp_target_field "$PID" state) == running ]] || fp_fail "nobody's stop took effect"
  [[ $(fp_target_field "$ROOTP" state) == absent ]] || fp_fail "nobody's start of $ROOTP took effect"
  fp_ok "root's target is still profiled"
  # Informational: may nobody profile its own process?
  setpriv --reuid=65534 --regid=65534 --clear-groups sleep 60 &
  NP=$!
  fp_track "$NP"
  sleep 0.3
  if out=$("${asnobody[@]}" start "$NP" 2>&1); then
    fp_log "info: nobody may profile its own process: $out"
    "${asnobody[@]}" stop "$NP" >/dev/null 2>&1 || true
  else
    fp_log "info: nobody may not profile its own process: $out"
  fi
fi

fp_ctl stop "$PID" >/dev/null || fp_fail "stop $PID failed"
kill -0 "$FP_AGENT_PID" 2>/dev/null || fp_fail "the agent died"
((FAILS == 0)) || fp_fail "$FAILS error case(s) did not behave"
fp_stop_agent
