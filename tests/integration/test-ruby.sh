#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Ruby named from outside (agent/runtimes/ruby/), on Debian's ruby 3.1
# with no change to the program (ruby/shares.rb, which times its own
# methods):
#   - `status` names the target's Ruby and its version, in text and JSON;
#   - the CPU profile at 999 Hz: at least 95% of samples with a Ruby frame,
#     each method's share within 2 points of the program's own times,
#     callers right in at least 98% of samples, labels as Ruby 3.4's
#     backtraces write them, with the method's class (Object#alpha,
#     Shape#area, block in <main>, block in Geometry.twice), lines inside
#     each body;
#   - the off-CPU profile: the C function that waited (Kernel#sleep)
#     under <main>, its time within 5% of the program's;
#   - the host tier: a Ruby process nobody asked for has Ruby frames;
#   - processes that lie (fakeruby, a "libruby" of its own): a well-formed
#     frame named as it says, junk, 300 frames and a looping environment
#     kept, cut short, nothing named that they do not say;
#   - --no-ruby keeps a target's Ruby methods out (rb_vm_exec only), the
#     other interpreters' switches do not; the no-ruby key the host tier's;
#   - Ruby's own layout matches ruby-dev's headers when they are installed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=ruby
fp_init 240
command -v ruby >/dev/null || fp_fail "missing ruby (Debian's ruby)"
HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPT=$HERE/ruby/shares.rb

fp_start_agent --host --host-freq 49
ruby "$SCRIPT" "$FP_TMP/truth.json" 4 "$FP_TMP/go" &
RP=$!
fp_track "$RP"
fp_ctl start "$RP" --freq 999 --off-cpu --off-cpu-period 1000000 >/dev/null ||
  fp_fail "start of ruby failed"
fp_wait_for 20 bash -c "$(printf '%q ' "$FP_AGENTCTL") --socket $FP_SOCK status | grep -q '^ruby of $RP: Ruby 3\.1\.'" ||
  fp_fail "status does not name the Ruby of $RP: $(fp_ctl status | grep -i ruby || true)"
touch "$FP_TMP/go"
fp_wait_for 30 test -e "$FP_TMP/truth.json" || fp_fail "the Ruby program wrote no times"
sleep 0.3
fp_ctl status | grep "^ruby of $RP" | sed "s/^/$FP_TEST_NAME: /"
fp_status_json | python3 -c '
import json, sys
t = [t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])][0]
assert t["ruby"]["version"].startswith("3.1."), t["ruby"]
assert t["ruby"]["stacks"]["samples"] > 1000, t["ruby"]
assert t["python"] is None and t["php"] is None, t' "$RP" || fp_fail "status --json has no right ruby entry"
fp_ok "status names Ruby 3.1 and counts its stacks"

fp_ctl dump "$RP" -o "$FP_TMP/cpu.pb.gz" >/dev/null || fp_fail "dump $RP failed"
python3 "$HERE/interp_check.py" ruby cpu "$FP_TMP/cpu.pb.gz" "$FP_TMP/truth.json" "$SCRIPT" ||
  fp_fail "the CPU profile does not match the Ruby program's own times"
fp_ok "CPU: shares, callers and lines right"

fp_ctl dump "$RP" --event off-cpu -o "$FP_TMP/off.pb.gz" >/dev/null || fp_fail "dump --event off-cpu failed"
python3 "$HERE/interp_check.py" ruby off "$FP_TMP/off.pb.gz" "$FP_TMP/truth.json" ||
  fp_fail "the off-CPU profile does not have the Ruby method that waited"
fp_ok "off-CPU: the waiting method and its time"

# Its own run, after the target's (the host tier's rate is too low to judge
# shares; it is asked for names only).
ruby "$SCRIPT" "$FP_TMP/other.json" 2 &
OP=$!
fp_track "$OP"
fp_wait_for 30 test -e "$FP_TMP/other.json" || fp_fail "the other Ruby program wrote no times"
sleep 0.3
fp_ctl dump --host --format folded >"$FP_TMP/host.folded" || fp_fail "dump --host failed"
grep -q "<main>;Object#beta;Object#alpha" "$FP_TMP/host.folded" ||
  fp_fail "the host tier has no Ruby frames: $(grep -m3 ruby "$FP_TMP/host.folded" || head -3 "$FP_TMP/host.folded")"
fp_ok "the host tier names Ruby methods"

fp_interp_switch ruby "Shape#area" rb_vm_exec ruby "$SCRIPT"

# Processes that lie (fakeruby: a "libruby" of its own, its control frames
# made up): sampled, kept, cut short, nothing named they do not say.
# lie MODE: the folded profile of fakeruby MODE, its status line in $FP_TMP/MODE.status.
lie() {
  fp_start_workload fakeruby "$FP_TMP/$1.out" "$FP_TMP/$1.ready" "$1" --seconds 1.5
  fp_ctl start "$FP_WL_PID" --freq 499 >/dev/null || fp_fail "start of fakeruby $1 failed"
  wait "$FP_WL_PID" || fp_fail "fakeruby $1 failed"
  fp_untrack "$FP_WL_PID"
  fp_ctl status | grep "^ruby of $FP_WL_PID:" >"$FP_TMP/$1.status" ||
    fp_fail "fakeruby $1: status does not name its Ruby: $(fp_ctl status | grep -i ruby)"
  fp_ctl dump "$FP_WL_PID" --format folded >"$FP_TMP/$1.folded" || fp_fail "dump of fakeruby $1 failed"
  fp_ctl dump "$FP_WL_PID" -o "$FP_TMP/$1.pb.gz" >/dev/null || fp_fail "dump of fakeruby $1 failed"
  total=$(awk '{n += $NF} END {print n + 0}' "$FP_TMP/$1.folded")
  ((total >= 400)) || fp_fail "fakeruby $1: only $total samples kept"
}
count() { awk -v p="$2" 'index($0, p) {n += $NF} END {print n + 0}' "$FP_TMP/$1.folded"; }
lie told
n=$(count told "rb_vm_exec;told_method") told_total=$total
((n * 10 >= total * 9)) || fp_fail "fakeruby told: $n of $total samples name its frame: $(sort -k2 -n "$FP_TMP/told.folded" | tail -2)"
fp_pprof -raw "$FP_TMP/told.pb.gz" 2>/dev/null | grep -q "told_method told.rb" ||
  fp_fail "fakeruby told: its frame's file is not told.rb"
lie junk
[[ $(count junk told_method) == 0 && $(count junk "[ruby]") == 0 ]] || fp_fail "fakeruby junk: a frame named from junk"
grep -qE "[1-9][0-9]* unreadable" "$FP_TMP/junk.status" || fp_fail "fakeruby junk: status counts no unreadable stack: $(cat "$FP_TMP/junk.status")"
lie deep
most=$(awk '{n = gsub(/told_method/, "&"); if (n > m) m = n} END {print m + 0}' "$FP_TMP/deep.folded")
((most > 0 && most <= 128)) || fp_fail "fakeruby deep: $most Ruby frames in a sample (at most 128 kept)"
grep -qE "[1-9][0-9]* too deep" "$FP_TMP/deep.status" || fp_fail "fakeruby deep: status counts no stack too deep: $(cat "$FP_TMP/deep.status")"
lie loop
[[ $(count loop loop_method) == 0 ]] || fp_fail "fakeruby loop: a label of 2^40 bytes was named"
fp_ctl status >/dev/null || fp_fail "the agent does not answer after fakeruby"
fp_ok "processes that lie (fakeruby): told named told_method (told.rb) in $n of $told_total, junk nothing, deep cut at $most frames, a looping environment and a 2^40-byte label kept unnamed"

# The host tier's own switch (the no-ruby key): an agent that reads no
# Ruby stacks there, while another program's Ruby still runs by.
fp_stop_agent
rm -f "$FP_TMP"/agent.db* # (the first agent's host tier named Ruby's methods there)
fp_start_agent --host --host-freq 199 --no-ruby
ruby "$SCRIPT" "$FP_TMP/noruby.json" 2 &
OP=$!
fp_track "$OP"
fp_wait_for 30 test -e "$FP_TMP/noruby.json" || fp_fail "the Ruby program under no-ruby wrote no times"
sleep 1.2
fp_ctl dump --host --format folded >"$FP_TMP/noruby.folded" || fp_fail "dump --host failed"
! grep -q "Shape#area" "$FP_TMP/noruby.folded" || fp_fail "no-ruby: the host tier still names Ruby methods"
grep -q "rb_vm_exec" "$FP_TMP/noruby.folded" ||
  fp_fail "no-ruby: the host tier has not even rb_vm_exec: $(head -3 "$FP_TMP/noruby.folded")"
fp_ok "the host tier's no-ruby key: Ruby's interpreter frames only"

# The layout against Ruby's own headers (ruby-dev's min header, made from
# this build's vm.c), where they are installed.
hdr=$(ls /usr/include/*/ruby-3.1.0/rb_mjit_min_header-3.1.*.h 2>/dev/null | head -1 || true)
if [[ -n $hdr ]]; then
  cat >"$FP_TMP/off.c" <<C
#include "$(basename "$hdr")"
#define O(T, f) printf("%zu ", (size_t)__builtin_offsetof(T, f))
int main(void)
{
        O(rb_execution_context_t, vm_stack); O(rb_execution_context_t, vm_stack_size);
        O(rb_execution_context_t, cfp);
        printf("%zu ", sizeof(rb_control_frame_t));
        O(rb_control_frame_t, pc); O(rb_control_frame_t, iseq); O(rb_control_frame_t, ep);
        O(rb_iseq_t, body);
        O(struct rb_iseq_constant_body, iseq_size); O(struct rb_iseq_constant_body, iseq_encoded);
        O(struct rb_iseq_constant_body, location.pathobj);
        O(struct rb_iseq_constant_body, location.label);
        O(struct rb_iseq_constant_body, location.first_lineno);
        O(struct rb_iseq_constant_body, insns_info.body);
        O(struct rb_iseq_constant_body, insns_info.positions);
        O(struct rb_iseq_constant_body, insns_info.size);
        O(struct rb_iseq_constant_body, insns_info.succ_index_table);
        printf("%zu ", sizeof(struct iseq_insn_info_entry));
        O(rb_callable_method_entry_t, defined_class); O(rb_callable_method_entry_t, def);
        O(rb_method_definition_t, original_id);
        O(struct RString, as.heap.len); O(struct RString, as.heap.ptr); O(struct RString, as.embed.ary);
        O(struct RArray, as.heap.len); O(struct RArray, as.heap.ptr); O(struct RArray, as.ary);
        O(struct RClass, ptr); O(rb_classext_t, iv_tbl);
        O(st_table, entries_start); O(st_table, entries_bound); O(st_table, entries);
        printf("%d %d %d %d %d\n", (int)VM_FRAME_FLAG_CFRAME, (int)VM_FRAME_FLAG_FINISH,
               (int)RSTRING_NOEMBED, (int)RSTRING_EMBED_LEN_SHIFT, (int)VM_ENV_FLAG_LOCAL);
        return 0;
}
C
  cc -w -I"$(dirname "$hdr")" "$FP_TMP/off.c" -o "$FP_TMP/rboff" -lruby-3.1 || fp_fail "cannot build the layout check"
  got=$("$FP_TMP/rboff")
  want="0 8 16 64 0 16 32 16 4 8 64 80 88 120 128 136 144 12 8 16 32 16 24 16 16 32 16 24 8 32 40 48 128 32 8192 14 2"
  [[ $got == "$want" ]] || fp_fail "Ruby 3.1's headers say $got, agent/runtimes/ruby/ruby.c has $want"
  fp_ok "the layout matches $(basename "$hdr")"
fi
fp_ok "all"
