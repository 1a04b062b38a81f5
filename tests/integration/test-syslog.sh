#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A daemonized agent (no --foreground) logs to syslog, so the journal has
# its messages; stderr is /dev/null by then. The test runs the agent in a
# private mount namespace whose /dev is a fresh tmpfs with the few device
# nodes the agent uses and a /dev/log datagram socket served by the test,
# so neither the host's syslog nor its /dev is touched.
source "$(dirname "$0")/lib.sh"
fp_init 60
command -v unshare >/dev/null || fp_fail "unshare (util-linux) is needed"

LOG=$FP_TMP/syslog.txt
cat >"$FP_TMP/run.sh" <<RUN
set -e
mount -t tmpfs -o mode=755 fleetprof-test-dev /dev
mknod -m 666 /dev/null c 1 3
mknod -m 666 /dev/zero c 1 5
mknod -m 666 /dev/urandom c 1 9
mknod -m 666 /dev/random c 1 8
python3 -c '
import socket, sys, os
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
open(sys.argv[2], "w").close()
with open(sys.argv[1], "ab", buffering=0) as out:
    while True:
        out.write(s.recv(65536) + b"\n")
' "$LOG" "$FP_TMP/listening" &
for i in \$(seq 100); do [ -e "$FP_TMP/listening" ] && break; sleep 0.05; done
"$FP_AGENT" --socket "$FP_SOCK" --store none
for i in \$(seq 100); do [ -S "$FP_SOCK" ] && break; sleep 0.05; done
"$FP_AGENTCTL" --socket "$FP_SOCK" status >/dev/null
pkill -TERM -f "^$FP_AGENT --socket $FP_SOCK" || true
for i in \$(seq 100); do pgrep -f "^$FP_AGENT --socket $FP_SOCK" >/dev/null || break; sleep 0.05; done
sleep 0.3
kill %1
RUN
unshare -m --propagation private bash "$FP_TMP/run.sh" >"$FP_TMP/run.out" 2>&1 ||
  fp_fail "the namespaced run failed: $(cat "$FP_TMP/run.out")"
[[ -s $LOG ]] || fp_fail "nothing reached syslog"
grep -q 'fleetprof-agent\[[0-9]*\]: version .*listening on' "$LOG" ||
  fp_fail "syslog lacks the agent's start line: $(cat "$LOG")"
grep -q 'fleetprof-agent\[[0-9]*\]: shutting down' "$LOG" ||
  fp_fail "syslog lacks the agent's shutdown line: $(cat "$LOG")"
[[ $(grep -c . "$LOG") -ge 2 ]] || fp_fail "too few syslog lines"
fp_ok "a daemonized agent's messages reach syslog: $(head -c 160 "$LOG" | tr '\n' '|')"
