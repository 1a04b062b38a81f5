#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Configuration files: the shipped packaging/*.conf document every key the
# program has (and nothing else) and pass --check-config, also with every
# commented default switched on; bad files are refused with the first bad
# line as "FILE:LINE: what" on one line and exit 1; a running agent takes
# its settings from --config FILE, and command-line options override the
# file.
source "$(dirname "$0")/lib.sh"
fp_init 90

# Options that are not settings: they exist only on the command line.
cmdline_only='^--(config|check-config|foreground|version|help)$'

# check_conf PROGRAM CONF: the documented keys are exactly the program's settings.
check_conf() {
  local prog=$1 conf=$2 name keys flags out
  name=$(basename "$prog")
  # A key is documented commented out (its default) or set (a choice of the package's: host = on).
  keys=$(sed -n 's/^#\{0,1\}\([a-z][a-z0-9-]*\) =.*/--\1/p' "$conf" | sort -u)
  flags=$("$prog" --help | grep -o -- '--[a-z][a-z0-9-]*' | grep -Ev "$cmdline_only" | sort -u)
  [[ $keys == "$flags" ]] ||
    fp_fail "$(basename "$conf") documents [$(echo $keys)] but $name has [$(echo $flags)]"
  out=$("$prog" --check-config --config "$conf" 2>&1) ||
    fp_fail "$name --check-config rejects the shipped $(basename "$conf"): $out"
  [[ $out == ok ]] || fp_fail "$name --check-config printed '$out', want 'ok'"
  # Every commented default switched on is still valid.
  sed 's/^#\([a-z][a-z0-9-]*\) =/\1 =/' "$conf" >"$FP_TMP/all-$(basename "$conf")"
  out=$("$prog" --check-config --config "$FP_TMP/all-$(basename "$conf")" 2>&1) ||
    fp_fail "$name rejects $(basename "$conf") with every default switched on: $out"
  fp_ok "$(basename "$conf"): documents all $(echo "$keys" | wc -l) settings of $name; valid as shipped and with the defaults on"
}

check_conf "$FP_AGENT" "$FP_SRC/packaging/agent.conf"
if [[ -x $FP_BUILD/collector/fleetprof-collector ]]; then
  check_conf "$FP_BUILD/collector/fleetprof-collector" "$FP_SRC/packaging/collector.conf"
fi

# bad_conf TEXT WANT: --check-config refuses TEXT with exit 1 and the one line WANT.
n=0
bad_conf() {
  local f=$FP_TMP/bad$((++n)).conf out rc=0
  printf '%b' "$1" >"$f"
  out=$("$FP_AGENT" --check-config --config "$f" 2>&1) || rc=$?
  [[ $rc -eq 1 ]] || fp_fail "--check-config on [$1] exited $rc, want 1 (output: $out)"
  [[ $(printf '%s\n' "$out" | wc -l) -eq 1 ]] || fp_fail "--check-config printed more than one line: $out"
  [[ $out == "fleetprof-agent: $f:$2" ]] || fp_fail "--check-config on [$1]: '$out', want 'fleetprof-agent: $f:$2'"
}
bad_conf '# settings\nbucket = 5\n\nsokcet = /x\nbucket = 0\n' "4: unknown key 'sokcet'"
bad_conf 'socket = /x\nbucket = 0\nnope = 1\n' "2: bucket = 0: out of range, 1 to 3600"
bad_conf 'upload-interval = 86401\n' "1: upload-interval = 86401: out of range, 5 to 86400"
bad_conf 'store-max-mb = lots\n' "1: store-max-mb = lots: not a number (1 to 1048576)"
bad_conf 'bucket = 5\n#\nbucket = 6\n' "3: bucket is set twice (first on line 1)"
bad_conf '\n\n\nsocket /x\n' "4: expected 'key = value', got 'socket /x'"
bad_conf 'collector = "http://x\n' "1: collector: unbalanced quote in the value"
fp_ok "bad files: the first bad line, by number, in one line, exit 1"

out=$("$FP_AGENT" --check-config --config "$FP_TMP/none.conf" 2>&1) && fp_fail "a missing --config file was accepted"
[[ $out == "fleetprof-agent: $FP_TMP/none.conf: No such file or directory" ]] || fp_fail "missing file: '$out'"
out=$("$FP_AGENT" --check-config --config "$FP_SRC/packaging/agent.conf" --bucket 0 2>&1) && fp_fail "--bucket 0 was accepted"
[[ $out == "fleetprof-agent: invalid --bucket 0: out of range, 1 to 3600" ]] || fp_fail "bad option: '$out'"
fp_ok "a missing file and a bad option are refused"

# A running agent: settings from the file, options over the file.
cat >"$FP_TMP/agent.conf" <<CONF
# test settings
socket = $FP_TMP/file.sock
store = $FP_TMP/file.db
bucket = 7
store-max-mb = 8
CONF
# status_field SOCKET PY-EXPR: a value of agentctl status --json.
status_field() {
  fp_timeout 30 "$FP_AGENTCTL" --socket "$1" status --json |
    python3 -c "import json,sys; d=json.load(sys.stdin); print($2)"
}
run_agent() {
  "$FP_AGENT" --foreground "$@" >"$FP_TMP/agent.log" 2>&1 &
  FP_AGENT_PID=$!
  fp_track "$FP_AGENT_PID"
}

run_agent --config "$FP_TMP/agent.conf"
fp_wait_for 15 test -S "$FP_TMP/file.sock" || fp_fail "the agent did not listen on the socket of its config file"
[[ $(status_field "$FP_TMP/file.sock" 'd["bucket_seconds"], d["store"]["max_bytes"], d["store"]["path"]') == \
  "7 8388608 $FP_TMP/file.db" ]] || fp_fail "settings from the file not applied: $(status_field "$FP_TMP/file.sock" 'd')"
fp_stop_agent
fp_ok "the agent runs with the file's socket, store, bucket and budget"

run_agent --config "$FP_TMP/agent.conf" --socket "$FP_TMP/flag.sock" --bucket 3
fp_wait_for 15 test -S "$FP_TMP/flag.sock" || fp_fail "--socket did not override the file's socket"
[[ ! -e $FP_TMP/file.sock ]] || fp_fail "the file's socket was created despite --socket"
[[ $(status_field "$FP_TMP/flag.sock" 'd["bucket_seconds"], d["store"]["max_bytes"]') == "3 8388608" ]] ||
  fp_fail "--bucket 3 did not override bucket = 7 (or the file's budget was lost)"
fp_stop_agent
fp_ok "command-line options override the file; the other settings still come from it"

# The collector: the same file format, its own table; the file first,
# then the command line.
COLLECTOR=$FP_COLLECTOR
if [[ -x $COLLECTOR ]]; then
  printf '# collector\nlisten = 127.0.0.1:1\n\nretention = 5x\n' >"$FP_TMP/c-bad.conf"
  out=$("$COLLECTOR" --check-config --config "$FP_TMP/c-bad.conf" 2>&1) && fp_fail "the collector accepted retention = 5x"
  [[ $out == "fleetprof-collector: $FP_TMP/c-bad.conf:4: retention = 5x: not a duration (such as 30s, 90m, 12h or 7d)" ]] ||
    fp_fail "collector bad file: '$out'"
  printf 'listen = 127.0.0.1:1\nlisen = x\n' >"$FP_TMP/c-bad.conf"
  out=$("$COLLECTOR" --check-config --config "$FP_TMP/c-bad.conf" 2>&1) && fp_fail "the collector accepted 'lisen'"
  [[ $out == "fleetprof-collector: $FP_TMP/c-bad.conf:2: unknown key 'lisen'" ]] || fp_fail "collector unknown key: '$out'"
  printf 'store-max-mb = 8\nstore-max-mb = 9\n' >"$FP_TMP/c-bad.conf"
  out=$("$COLLECTOR" --check-config --config "$FP_TMP/c-bad.conf" 2>&1) && fp_fail "the collector accepted a key set twice"
  [[ $out == "fleetprof-collector: $FP_TMP/c-bad.conf:2: store-max-mb is set twice (first on line 1)" ]] || fp_fail "collector twice: '$out'"

  port=$(fp_free_port)
  printf 'listen = 127.0.0.1:1\nstore = %s\n' "$FP_TMP/c.db" >"$FP_TMP/c.conf"
  "$COLLECTOR" --config "$FP_TMP/c.conf" --listen "127.0.0.1:$port" >"$FP_TMP/collector.log" 2>&1 &
  cpid=$!
  fp_track "$cpid"
  fp_wait_for 15 curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" ||
    fp_fail "the collector is not serving on the --listen port: $(cat "$FP_TMP/collector.log")"
  [[ -f $FP_TMP/c.db ]] || fp_fail "the collector did not use the file's store"
  fp_kill "$cpid"
  fp_ok "collector: bad files refused by line; --listen overrides the file's listen, the file's store is used"
fi
