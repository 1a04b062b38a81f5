#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# PHP named from outside (agent/runtimes/php/), on Debian's php 8.2 with no
# change to the program (php/shares.php, which times its own functions):
#   - `status` names the target's PHP and its version, in text and JSON;
#   - the CPU profile at 999 Hz: at least 95% of samples with a PHP frame,
#     each function's share within 2 points of the program's own times,
#     callers right in at least 98% of samples, Class::method and
#     {closure} as PHP writes them, lines inside each function's body;
#   - the off-CPU profile: the internal function that waited (usleep)
#     under {main}, its time within 5% of the program's;
#   - the host tier: a PHP process nobody asked for has PHP frames;
#   - --no-php keeps a target's PHP functions out (execute_ex only), the
#     other interpreters' switches do not;
#   - PHP's own layout matches php-dev's headers when they are installed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=php
fp_init 240
command -v php >/dev/null || fp_fail "missing php (Debian's php-cli)"
HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPT=$HERE/php/shares.php

fp_start_agent --host --host-freq 49
php "$SCRIPT" "$FP_TMP/truth.json" 4 "$FP_TMP/go" &
PP=$!
fp_track "$PP"
fp_ctl start "$PP" --freq 999 --off-cpu --off-cpu-period 1000000 >/dev/null ||
  fp_fail "start of php failed"
fp_wait_for 20 bash -c "$(printf '%q ' "$FP_AGENTCTL") --socket $FP_SOCK status | grep -q '^php of $PP: PHP 8\.2\.'" ||
  fp_fail "status does not name the PHP of $PP: $(fp_ctl status | grep -i php || true)"
touch "$FP_TMP/go"
fp_wait_for 30 test -e "$FP_TMP/truth.json" || fp_fail "the PHP program wrote no times"
sleep 0.3
fp_ctl status | grep "^php of $PP" | sed "s/^/$FP_TEST_NAME: /"
fp_status_json | python3 -c '
import json, sys
t = [t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])][0]
assert t["php"]["version"].startswith("8.2."), t["php"]
assert t["php"]["stacks"]["samples"] > 1000, t["php"]
assert t["python"] is None, t["python"]' "$PP" || fp_fail "status --json has no right php entry"
fp_ok "status names PHP 8.2 and counts its stacks"

fp_ctl dump "$PP" -o "$FP_TMP/cpu.pb.gz" >/dev/null || fp_fail "dump $PP failed"
python3 "$HERE/interp_check.py" php cpu "$FP_TMP/cpu.pb.gz" "$FP_TMP/truth.json" "$SCRIPT" ||
  fp_fail "the CPU profile does not match the PHP program's own times"
fp_ok "CPU: shares, callers and lines right"

fp_ctl dump "$PP" --event off-cpu -o "$FP_TMP/off.pb.gz" >/dev/null || fp_fail "dump --event off-cpu failed"
python3 "$HERE/interp_check.py" php off "$FP_TMP/off.pb.gz" "$FP_TMP/truth.json" ||
  fp_fail "the off-CPU profile does not have the PHP function that waited"
fp_ok "off-CPU: the waiting PHP function and its time"

# Its own run, after the target's (the host tier's rate is too low to judge
# shares; it is asked for names only).
php "$SCRIPT" "$FP_TMP/other.json" 2 &
OP=$!
fp_track "$OP"
fp_wait_for 30 test -e "$FP_TMP/other.json" || fp_fail "the other PHP program wrote no times"
sleep 0.3
fp_ctl dump --host --format folded >"$FP_TMP/host.folded" || fp_fail "dump --host failed"
grep -q ";execute_ex;{main};beta;alpha" "$FP_TMP/host.folded" ||
  fp_fail "the host tier has no PHP frames: $(head -3 "$FP_TMP/host.folded")"
fp_ok "the host tier names PHP functions"

fp_interp_switch php "Shape::area" execute_ex php "$SCRIPT"

# The layout against PHP's own headers (php-dev), where they are installed.
if command -v php-config >/dev/null; then
  cat >"$FP_TMP/off.c" <<'C'
#include "php.h"
#include "zend_globals.h"
#include <stdio.h>
#include <stddef.h>
int main(void)
{
        printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %u %u\n",
               offsetof(zend_executor_globals, current_execute_data),
               offsetof(zend_execute_data, opline), offsetof(zend_execute_data, func),
               offsetof(zend_execute_data, This) + offsetof(zval, u1.type_info),
               offsetof(zend_execute_data, prev_execute_data), offsetof(zend_function, type),
               offsetof(zend_function, common.fn_flags),
               offsetof(zend_function, common.function_name),
               offsetof(zend_function, common.scope), offsetof(zend_op_array, filename),
               offsetof(zend_op_array, line_start), offsetof(zend_op, lineno),
               offsetof(zend_string, len), offsetof(zend_string, val),
               offsetof(zend_class_entry, name), (unsigned)ZEND_CALL_TOP,
               (unsigned)ZEND_ACC_CLOSURE);
        return 0;
}
C
  cc $(php-config --includes) "$FP_TMP/off.c" -o "$FP_TMP/phpoff" || fp_fail "cannot build the layout check"
  got=$("$FP_TMP/phpoff")
  want="488 0 24 40 48 0 4 8 16 152 160 24 16 24 8 131072 4194304"
  [[ $(php-config --version) == 8.2.* ]] || fp_fail "php-dev is $(php-config --version), not 8.2"
  [[ $got == "$want" ]] || fp_fail "PHP 8.2's headers say $got, agent/runtimes/php/php.c has $want"
  fp_ok "the layout matches PHP $(php-config --version)'s headers"
fi
fp_ok "all"
