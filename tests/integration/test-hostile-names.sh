#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A process chooses its own name, and the agent prints it to root's
# terminal. A target renamed to an escape sequence (OSC title change, BEL,
# CSI as a C1 byte) plus bytes that are not UTF-8 must come out escaped in
# every text output (status, dump --format top and folded), and
# `status --json` must stay strictly valid JSON, with the invalid bytes as
# U+FFFD.
source "$(dirname "$0")/lib.sh"
fp_init 90

fp_start_agent

# Busy, renamed: ESC ] 0 ; p w n BEL, 0xff (not UTF-8), U+009B (CSI, C1).
python3 -c '
import ctypes, sys
ctypes.CDLL(None).prctl(15, b"\x1b]0;pwn\x07\xff\xc2\x9bx", 0, 0, 0)
open(sys.argv[1], "w").close()
while True:
    pass' "$FP_TMP/ready" &
P=$!
fp_track "$P"
fp_wait_for 10 test -e "$FP_TMP/ready" || fp_fail "the renamed workload did not start"
[[ $(od -An -tx1 "/proc/$P/comm" | tr -d ' \n') == 1b5d303b70776e07ffc29b780a ]] ||
  fp_fail "the workload's comm is not the hostile name: $(od -An -tx1 "/proc/$P/comm")"

out=$(fp_ctl start "$P" --freq 999) || fp_fail "start failed"
sleep 1.5

# has_raw_controls FILE: any byte a terminal acts on (C0 but \n and \t, DEL,
# 0x80-0x9f outside UTF-8 sequences is caught by the invalid-UTF-8 check).
check_text() {
  local what=$1 file=$2
  python3 - "$file" "$what" <<'PY' || fp_fail "$what: raw control or non-UTF-8 bytes reach the terminal"
import sys
data = open(sys.argv[1], "rb").read()
bad = [b for b in data if (b < 0x20 and b not in (0x0a, 0x09)) or b == 0x7f]
try:
    text = data.decode("utf-8")
except UnicodeDecodeError as e:
    print(f"{sys.argv[2]}: not UTF-8: {e}", file=sys.stderr); sys.exit(1)
c1 = [c for c in text if 0x80 <= ord(c) <= 0x9f]
if bad or c1:
    print(f"{sys.argv[2]}: control bytes {bad[:5]} C1 {c1[:5]}", file=sys.stderr); sys.exit(1)
PY
}

printf '%s\n' "$out" >"$FP_TMP/start.txt"
check_text "start" "$FP_TMP/start.txt"
grep -qF '\x1b]0;pwn\x07\xff\xc2\x9bx' "$FP_TMP/start.txt" || fp_fail "start does not show the escaped name: $out"
fp_ok "start names the process with its bytes escaped: $(head -c 80 "$FP_TMP/start.txt")"

fp_ctl status >"$FP_TMP/status.txt" || fp_fail "status failed"
check_text "status" "$FP_TMP/status.txt"
grep -qF '\x1b]0;pwn\x07\xff\xc2\x9bx' "$FP_TMP/status.txt" || fp_fail "status does not show the escaped name"
fp_ok "status prints no raw control bytes"

fp_ctl status --json >"$FP_TMP/status.json" || fp_fail "status --json failed"
python3 - "$FP_TMP/status.json" "$P" <<'PY' || fp_fail "status --json is not valid JSON with the name as U+FFFD: $(cat "$FP_TMP/status.json")"
import json, sys
raw = open(sys.argv[1], "rb").read()
d = json.loads(raw.decode("utf-8"))          # strict: raw control characters are refused
t = [x for x in d["targets"] if x["pid"] == int(sys.argv[2])][0]
assert t["comm"] == "\x1b]0;pwn\x07\ufffd\u009bx", repr(t["comm"])
PY
fp_ok "status --json is valid JSON and carries the name with U+FFFD for the invalid byte"

fp_ctl dump "$P" --format top >"$FP_TMP/top.txt" || fp_fail "dump --format top failed"
check_text "top" "$FP_TMP/top.txt"
fp_ctl dump "$P" --format folded >"$FP_TMP/folded.txt" || fp_fail "dump --format folded failed"
check_text "folded" "$FP_TMP/folded.txt"
grep -q 'x1b' "$FP_TMP/top.txt" || fp_fail "top does not name the thread escaped: $(tail -3 "$FP_TMP/top.txt")"
fp_ok "dump --format top and folded print no raw control bytes"
fp_ctl stop "$P" >/dev/null || fp_fail "stop failed"
