#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# CPython interpreters recognised in the processes the agent profiles:
#   - Debian's /usr/bin/python3.11 (the interpreter in a non-PIE, stripped
#     executable) and pyenv's 3.12 where present (a shared libpython):
#     `status` names each target's CPython and its version, in text and
#     JSON, and counts the interpreter files;
#   - a program that only looks like Python (a copy of spin named
#     python3.11): refused in one line, logged once however many of its
#     processes run (when their samples are first kept, whether or not
#     anyone asks for status), and its samples are kept as native ones;
#   - a program that is no Python: no python entry.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=python
fp_init 180
[[ -x /usr/bin/python3.11 ]] || fp_fail "missing /usr/bin/python3.11 (Debian's python3.11)"

BUSY='import time
def work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
end = time.time() + 30
while time.time() < end:
    work(10000)'

# python_of PID: the target's python entry in status --json, as one line of JSON.
python_of() {
  fp_ctl status --json | python3 -c '
import json, sys
for t in json.load(sys.stdin)["targets"]:
    if t["pid"] == int(sys.argv[1]):
        print(json.dumps(t["python"]))' "$1"
}
# wait_python PID PATTERN: until the target's python entry matches PATTERN (a regex).
wait_python() {
  local got
  for _ in $(seq 100); do
    got=$(python_of "$1")
    [[ $got =~ $2 ]] && return 0
    sleep 0.1
  done
  fp_fail "status says python $got for $1, want /$2/"
}

fp_start_agent
/usr/bin/python3.11 -c "$BUSY" &
deb=$!
fp_track "$deb"
fp_ctl start "$deb" --freq 199 >/dev/null || fp_fail "start of python3.11 failed"
wait_python "$deb" '^\{"version": "3\.11\.[0-9]+", "stacks": '
fp_ctl status | grep -q "^python of $deb: CPython 3\.11\.[0-9]*, " ||
  fp_fail "the text status does not name the interpreter: $(fp_ctl status | grep python)"
fp_ok "Debian's python3.11: $(fp_ctl status | grep "^python of $deb")"

pyenv_root=$(pyenv root 2>/dev/null || true)
py312=$(ls -d "$pyenv_root"/versions/3.12.*/bin/python3.12 2>/dev/null | head -1 || true)
if [[ -n $py312 && -x $py312 ]]; then
  "$py312" -c "$BUSY" &
  pe=$!
  fp_track "$pe"
  fp_ctl start "$pe" --freq 199 >/dev/null || fp_fail "start of $py312 failed"
  wait_python "$pe" '^\{"version": "3\.12\.[0-9]+", "stacks": '
  fp_ok "pyenv's $py312 (a shared libpython): $(python_of "$pe")"
else
  fp_log "SKIP: no pyenv Python 3.12"
fi

# Two processes of a program named python3.11 that is not Python.
cp "$FP_SPIN" "$FP_TMP/python3.11"
fakes=()
for k in 1 2; do
  "$FP_TMP/python3.11" --seconds 30 >/dev/null &
  fakes+=($!)
  fp_track "$!"
  fp_ctl start "$!" --freq 199 >/dev/null || fp_fail "start of the fake python3.11 failed"
done
# Said when their samples are first kept (a bucket closed), status or not.
logged() { grep -q "python: .*python3.11 is named like Python 3.11 but has no _PyRuntime" "$FP_TMP/agent.log"; }
flushed_and_logged() { fp_ctl flush >/dev/null && logged; }
fp_wait_for 15 flushed_and_logged || fp_fail "the refusal was not logged when the fake's samples were kept"
for p in "${fakes[@]}"; do
  wait_python "$p" 'named like Python 3\.11 but has no _PyRuntime'
done
fp_ctl status | grep -q "^python of ${fakes[0]}: not read: .*python3.11 is named like Python 3.11 but has no _PyRuntime$" ||
  fp_fail "the text status does not say why: $(fp_ctl status | grep python)"
said=$(grep -c "python: .*python3.11 is named like Python 3.11 but has no _PyRuntime; its samples stay native-only" "$FP_TMP/agent.log" || true)
[[ $said == 1 ]] || fp_fail "the refusal was logged $said times, not once: $(grep python: "$FP_TMP/agent.log")"
samples=$(fp_ctl status --json | python3 -c '
import json, sys
print(min(t["samples"] for t in json.load(sys.stdin)["targets"] if t["pid"] in (int(sys.argv[1]), int(sys.argv[2]))))' "${fakes[@]}")
((samples > 0)) || fp_fail "the fake python's samples were not kept"
fp_ok "a program named python3.11 that is not: refused in one line, logged once for 2 processes, $samples samples kept"

"$FP_SPIN" --seconds 30 >/dev/null &
plain=$!
fp_track "$plain"
fp_ctl start "$plain" --freq 199 >/dev/null || fp_fail "start of spin failed"
sleep 1
[[ $(python_of "$plain") == null ]] || fp_fail "spin is taken for Python: $(python_of "$plain")"
counts=$(fp_ctl status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["python_files"], d["python_files_refused"])')
read -r files refused <<<"$counts"
((files >= 1 && refused == 1)) || fp_fail "status counts $files CPython files and $refused refused"
fp_ok "no Python in spin; $files CPython interpreter file(s) read, $refused refused"
fp_stop_agent
