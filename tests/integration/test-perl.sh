#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Perl named from outside (agent/runtimes/perl/), on Debian's perl 5.36
# with no change to the program (perl/shares.pl, which times its own
# subs):
#   - `status` names the target's Perl and its version, in text and JSON;
#   - the CPU profile at 999 Hz: at least 95% of samples with a Perl frame,
#     each sub's share within 2 points of the program's own times, callers
#     right in at least 98% of samples, names as caller() writes them
#     (main::alpha, Shape::area, main::__ANON__, the main program as
#     main::RUNTIME), lines inside each body;
#   - the off-CPU profile: the sub that waited (main::nap) under
#     main::RUNTIME, its time within 5% of the program's;
#   - the host tier: a Perl process nobody asked for has Perl frames;
#   - --no-perl keeps a target's Perl subs out (Perl_runops_standard
#     only), the other interpreters' switches do not;
#   - libperl (the interpreter in a shared library, as an embedder has
#     it: Debian's perl5.36-x86_64-linux-gnu): named too;
#   - the layout matches Perl's own headers (libperl5.36 installs them);
#   - one process, three interpreters: a Ruby program that execs perl,
#     whose program execs php, each function named in its own stacks.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=perl
fp_init 240
command -v perl >/dev/null || fp_fail "missing perl (Debian's perl)"
HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPT=$HERE/perl/shares.pl

fp_start_agent --host --host-freq 49
perl "$SCRIPT" "$FP_TMP/truth.json" 4 "$FP_TMP/go" &
PP=$!
fp_track "$PP"
fp_ctl start "$PP" --freq 999 --off-cpu --off-cpu-period 1000000 >/dev/null ||
  fp_fail "start of perl failed"
fp_wait_for 20 bash -c "$(printf '%q ' "$FP_AGENTCTL") --socket $FP_SOCK status | grep -q '^perl of $PP: Perl 5\.36\.'" ||
  fp_fail "status does not name the Perl of $PP: $(fp_ctl status | grep -i perl || true)"
touch "$FP_TMP/go"
fp_wait_for 30 test -e "$FP_TMP/truth.json" || fp_fail "the Perl program wrote no times"
sleep 0.3
fp_ctl status | grep "^perl of $PP" | sed "s/^/$FP_TEST_NAME: /"
fp_status_json | python3 -c '
import json, sys
t = [t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])][0]
assert t["perl"]["version"].startswith("5.36."), t["perl"]
assert t["perl"]["stacks"]["samples"] > 1000, t["perl"]
assert t["python"] is None and t["ruby"] is None, t' "$PP" || fp_fail "status --json has no right perl entry"
fp_ok "status names Perl 5.36 and counts its stacks"

fp_ctl dump "$PP" -o "$FP_TMP/cpu.pb.gz" >/dev/null || fp_fail "dump $PP failed"
python3 "$HERE/interp_check.py" perl cpu "$FP_TMP/cpu.pb.gz" "$FP_TMP/truth.json" "$SCRIPT" ||
  fp_fail "the CPU profile does not match the Perl program's own times"
fp_ok "CPU: shares, callers and lines right"

fp_ctl dump "$PP" --event off-cpu -o "$FP_TMP/off.pb.gz" >/dev/null || fp_fail "dump --event off-cpu failed"
python3 "$HERE/interp_check.py" perl off "$FP_TMP/off.pb.gz" "$FP_TMP/truth.json" ||
  fp_fail "the off-CPU profile does not have the Perl sub that waited"
fp_ok "off-CPU: the waiting sub and its time"

# Its own run, after the target's (the host tier's rate is too low to judge
# shares; it is asked for names only).
perl "$SCRIPT" "$FP_TMP/other.json" 2 &
OP=$!
fp_track "$OP"
fp_wait_for 30 test -e "$FP_TMP/other.json" || fp_fail "the other Perl program wrote no times"
sleep 0.3
fp_ctl dump --host --format folded >"$FP_TMP/host.folded" || fp_fail "dump --host failed"
grep -q "main::RUNTIME;main::beta;main::alpha" "$FP_TMP/host.folded" ||
  fp_fail "the host tier has no Perl frames: $(grep -m3 perl "$FP_TMP/host.folded" || head -3 "$FP_TMP/host.folded")"
fp_ok "the host tier names Perl subs"

fp_interp_switch perl "Shape::area" Perl_runops_standard perl "$SCRIPT"

# libperl: the interpreter in a shared library, its context in the library's
# own TLS block.
shim=/usr/bin/perl5.36-x86_64-linux-gnu
if [[ -x $shim ]]; then
  "$shim" "$SCRIPT" "$FP_TMP/lib.json" 3 "$FP_TMP/libgo" &
  LP=$!
  fp_track "$LP"
  fp_ctl start "$LP" --freq 999 >/dev/null || fp_fail "start of $shim failed"
  fp_wait_for 20 bash -c "$(printf '%q ' "$FP_AGENTCTL") --socket $FP_SOCK status | grep -q '^perl of $LP: Perl 5\.36\.'" ||
    fp_fail "status does not name the libperl of $LP: $(fp_ctl status | grep -i perl || true)"
  touch "$FP_TMP/libgo"
  fp_wait_for 30 test -e "$FP_TMP/lib.json" || fp_fail "$shim wrote no times"
  sleep 0.3
  fp_ctl dump "$LP" -o "$FP_TMP/lib.pb.gz" >/dev/null || fp_fail "dump $LP failed"
  python3 "$HERE/interp_check.py" perl cpu "$FP_TMP/lib.pb.gz" "$FP_TMP/lib.json" "$SCRIPT" ||
    fp_fail "the CPU profile of libperl does not match the program's own times"
  fp_ok "libperl ($shim): shares, callers and lines right"
else
  fp_log "SKIP libperl: no $shim"
fi

# The layout against Perl's own headers (libperl5.36 installs them).
core=$(perl -MConfig -e 'print "$Config{archlibexp}/CORE"')
if [[ -f $core/perl.h ]]; then
  cat >"$FP_TMP/off.c" <<'C'
#include <EXTERN.h>
#include <perl.h>
#include <stdio.h>
#define O(T, f) printf("%zu ", (size_t)offsetof(T, f))
int main(void)
{
        O(struct interpreter, Icurcop); O(struct interpreter, Icurstackinfo);
        O(struct interpreter, Imain_cv); O(struct interpreter, Icompiling);
        O(struct interpreter, Iorigfilename);
        O(PERL_SI, si_cxstack); O(PERL_SI, si_prev); O(PERL_SI, si_cxsubix); O(PERL_SI, si_type);
        printf("%zu ", sizeof(PERL_CONTEXT));
        O(PERL_CONTEXT, cx_type); O(PERL_CONTEXT, blk_oldcop); O(PERL_CONTEXT, blk_sub.retop);
        O(PERL_CONTEXT, blk_sub.old_cxsubix); O(PERL_CONTEXT, blk_sub.cv);
        O(PERL_CONTEXT, blk_format.cv); O(PERL_CONTEXT, blk_eval.old_cxsubix);
        O(COP, cop_line); O(COP, cop_file); O(SV, sv_any); O(SV, sv_flags);
        O(XPVCV, xcv_stash); O(XPVCV, xcv_gv_u); O(XPVCV, xcv_file); O(XPVCV, xcv_flags);
        O(XPVGV, xiv_u.xivu_namehek); O(XPVGV, xnv_u.xgv_stash);
        O(struct xpvhv_with_aux, xhv_aux); O(struct xpvhv_aux, xhv_name_u);
        O(struct xpvhv_aux, xhv_name_count); O(HEK, hek_len); O(HEK, hek_key);
        printf("%d %d %d %d %d %d %d %d %d %d %d %lu %lu %lu\n", CXTYPEMASK, CXt_BLOCK, CXt_SUB,
               CXt_FORMAT, CXt_EVAL, CXp_SUB_RE_FAKE, PERLSI_MAIN, SVt_PVGV, SVt_PVHV, SVt_PVCV,
               SVt_PVFM, (unsigned long)SVf_OOK, (unsigned long)CVf_NAMED,
               (unsigned long)CVf_LEXICAL);
        return 0;
}
C
  # shellcheck disable=SC2046
  cc -w $(perl -MExtUtils::Embed -e ccopts) "$FP_TMP/off.c" -o "$FP_TMP/ploff" ||
    fp_fail "cannot build the layout check"
  got=$("$FP_TMP/ploff")
  want="208 224 1800 1936 1472 8 16 40 44 104 0 16 48 56 72 72 56 36 48 0 12 32 56 64 92 32 40 32 0 28 4 8 15 2 9 10 11 128 1 9 12 13 14 33554432 32768 65536"
  [[ $got == "$want" ]] || fp_fail "Perl's headers say $got, agent/runtimes/perl/perl.c has $want"
  fp_ok "the layout matches $core's headers"
else
  fp_log "SKIP the layout check: no $core/perl.h"
fi
# ---- one process, three interpreters: Ruby execs Perl, which execs PHP ----------
if command -v ruby >/dev/null && command -v php >/dev/null; then
  cat >"$FP_TMP/chain.rb" <<'RB'
def ruby_spin
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 1.5
end
sleep 0.01 until File.exist?(ARGV[0])
ruby_spin
exec("perl", ARGV[1])
RB
  cat >"$FP_TMP/chain.pl" <<'PL'
use Time::HiRes qw(time);
sub perl_spin { my $e = time + 1.5; my $x = 0; $x++ while time < $e; }
perl_spin();
exec("php", "-r", 'function php_spin() { $e = microtime(true) + 1.5; $x = 0; while (microtime(true) < $e) { $x++; } } php_spin();');
PL
  ruby "$FP_TMP/chain.rb" "$FP_TMP/chain.go" "$FP_TMP/chain.pl" &
  XP=$!
  fp_track "$XP"
  fp_ctl start "$XP" --freq 499 >/dev/null || fp_fail "start of the chain failed"
  touch "$FP_TMP/chain.go"
  fp_wait_for 30 bash -c '! kill -0 "$0" 2>/dev/null' "$XP" || fp_fail "the chain did not end"
  fp_ctl dump "$XP" --format folded >"$FP_TMP/chain.folded" || fp_fail "dump of the chain failed"
  out=$(python3 - "$FP_TMP/chain.folded" <<'PY'
import sys
n = {"Object#ruby_spin": 0, "main::perl_spin": 0, "php_spin": 0}
for line in open(sys.argv[1]):
    stack, count = line.rsplit(" ", 1)
    frames = stack.split(";")
    mine = [k for k in n if any(f.split(" ")[0] == k for f in frames)]
    assert len(mine) <= 1, "one stack, two interpreters' functions: " + line
    # A frame not named reads as its own runtime's, not the process's last one.
    for lib, own in (("libruby", "[ruby]"), ("perl_run", "[perl]"), ("php8.2", "[php]")):
        if any(f.startswith(lib) for f in frames):
            bad = [f for f in frames if f in ("[ruby]", "[perl]", "[php]") and f != own]
            assert not bad, "%s in a stack of %s: %s" % (bad[0], lib, line)
    for k in mine:
        n[k] += int(count)
for k, v in n.items():
    assert v >= 300, "%s: %d samples (want 300 of its 1.5 s at 499 Hz)" % (k, v)
print(", ".join("%s %d samples" % kv for kv in n.items()))
PY
) || fp_fail "the chain's profile: $out"
  fp_ok "Ruby execs Perl, which execs PHP, in one process: each function named in its own stacks ($out)"
else
  fp_log "SKIP the exec chain: no ruby or no php"
fi
fp_ok "all"
