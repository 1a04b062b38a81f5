#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What do Ruby, PHP and Perl stacks cost, and what do they name?  For
# each of Debian's ruby, php and perl: a CPU-bound program (a loop 40
# calls deep, deep(), that counts its iterations for BENCH_SECONDS) run
# under each of, in the same invocation:
#
#   - nothing (its iterations: the baseline);
#   - fleetprof at BENCH_FREQ Hz, the interpreter's stacks read (the default);
#   - fleetprof at BENCH_FREQ Hz with --no-ruby / --no-php / --no-perl;
#   - perf record -g at the same rate (the peer: these interpreters write
#     no perf map, so it names the interpreter's C functions only).
#
# Figures: the program's slowdown against the baseline; the BPF program's
# own time per sample (the kernel's bpf_stats of fp_pystack_sample); the
# agent's CPU per sample (its rusage over the run / the target's samples);
# the share of samples with the language's stack (its main frame), with
# deep() in it, and of those whose deep() frames sit right under the main
# program's frame (callers right); perf's samples and how many name deep
# (none: what it has instead is the interpreter's loop). Figures only; it
# never fails on a time. Environment: BENCH_SECONDS (default 10),
# BENCH_FREQ (default 1000), BENCH_LANGS (default "ruby php perl").
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/benchlib.bash"
FP_TEST_NAME=interp-cost
SECS=${BENCH_SECONDS:-10}
FREQ=${BENCH_FREQ:-1000}
LANGS=${BENCH_LANGS:-ruby php perl}
fp_init 900

cat >"$FP_TMP/loop.rb" <<'RB'
def deep(n)
  return deep(n - 1) if n > 0
  s = 0
  i = 0
  while i < 200
    s += i * i
    i += 1
  end
  s
end
go, secs = ARGV[0], ARGV[1].to_f
puts Process.pid
STDOUT.flush
sleep 0.001 until File.exist?(go)
finish = Process.clock_gettime(Process::CLOCK_MONOTONIC) + secs
k = 0
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < finish
  deep(40)
  k += 1
end
puts "iterations #{k}"
RB
cat >"$FP_TMP/loop.php" <<'PHP'
<?php
function deep($n) {
    if ($n > 0)
        return deep($n - 1);
    $s = 0;
    for ($i = 0; $i < 200; $i++)
        $s += $i * $i;
    return $s;
}
$go = $argv[1];
$secs = (float)$argv[2];
echo getmypid(), "\n";
while (!file_exists($go))
    usleep(1000);
$end = microtime(true) + $secs;
$k = 0;
while (microtime(true) < $end) {
    deep(40);
    $k++;
}
echo "iterations $k\n";
PHP
cat >"$FP_TMP/loop.pl" <<'PL'
use Time::HiRes qw(time);
sub deep {
    my $n = shift;
    return deep($n - 1) if $n > 0;
    my $s = 0;
    for (my $i = 0; $i < 200; $i++) { $s += $i * $i }
    return $s;
}
my ($go, $secs) = @ARGV;
$| = 1;
print "$$\n";
select(undef, undef, undef, 0.001) until -e $go;
my $end = time + $secs;
my $k = 0;
while (time < $end) { deep(40); $k++ }
print "iterations $k\n";
PL

declare -A EXT=([ruby]=rb [php]=php [perl]=pl)
declare -A DEEP=([ruby]="Object#deep" [php]=deep [perl]=main::deep)
declare -A MAIN=([ruby]="<main>" [php]="{main}" [perl]=main::RUNTIME)
declare -A VERSION=([ruby]="ruby -e 'print RUBY_VERSION'" [php]="php -r 'echo PHP_VERSION;'"
  [perl]="perl -e 'printf \"%vd\", \$^V'")

# fleetprof TAG LANG [options]: "iterations agent_cpu_us samples bpf_ns bpf_runs
# with named callers_right" of a target's run.
fleetprof() {
  local tag=$1 lang=$2 it samples pid
  shift 2
  sysctl -qw kernel.bpf_stats_enabled=1
  BENCH_START=("$@")
  it=$(bench_run "$tag" fp "$lang" "$FP_TMP/loop.${EXT[$lang]}")
  sysctl -qw kernel.bpf_stats_enabled=0
  pid=$(awk 'NR==1' "$FP_TMP/$tag.out")
  samples=$(fp_status_json | python3 -c 'import json,sys
print([t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])][0]["samples"])' "$pid")
  fp_ctl dump "$pid" --format folded >"$FP_TMP/$tag.folded" || fp_fail "dump of $tag failed"
  fp_ctl stop "$pid" >/dev/null 2>&1 || true
  read -r c0 ns0 n0 <"$FP_TMP/$tag.before"
  read -r c1 ns1 n1 <"$FP_TMP/$tag.after"
  # with: samples with the language's stack (its main frame); named: with
  # deep() in them; right: those whose deep() frames are one run right
  # under the main frame, no deeper than the program's 41 calls.
  read -r with named right < <(python3 -c 'import sys
deep, main = sys.argv[2], sys.argv[3]
with_ = named = right = 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip("\n").rpartition(" ")
    f = stack.split(";")
    with_ += int(n) if main in f else 0
    if deep not in f:
        continue
    named += int(n)
    i = f.index(deep)
    j = i
    while j < len(f) and f[j] == deep:
        j += 1
    if i > 0 and f[i - 1] == main and deep not in f[j:] and j - i <= 41:
        right += int(n)
print(with_, named, right)' "$FP_TMP/$tag.folded" "${DEEP[$lang]}" "${MAIN[$lang]}")
  echo "$it $((c1 - c0)) $samples $((ns1 - ns0)) $((n1 - n0)) $with $named $right"
}

pct() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a != "-") printf "%.1f%%", 100 * (b - a) / b; else print "-"}'; }
share() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.1f%%", 100 * a / b; else print "-"}'; }
per() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f µs", a / b; else print "-"}'; }

fp_start_agent --store none
for lang in $LANGS; do
  command -v "$lang" >/dev/null || {
    fp_log "no $lang here: skipped"
    continue
  }
  base=$(bench_run "$lang-base" none "$lang" "$FP_TMP/loop.${EXT[$lang]}")
  on=$(fleetprof "$lang-on" "$lang")
  off=$(fleetprof "$lang-off" "$lang" "--no-$lang")
  perf_it=- perf_samples=- perf_deep=-
  if command -v perf >/dev/null; then
    perf_it=$(bench_run "$lang-perf" perf "$lang" "$FP_TMP/loop.${EXT[$lang]}")
    perf script -i "$FP_TMP/$lang-perf.data" -F ip,sym 2>/dev/null >"$FP_TMP/$lang-perf.txt" || true
    perf script -i "$FP_TMP/$lang-perf.data" -F tid >"$FP_TMP/$lang-perf.tids" 2>/dev/null || true
    perf_samples=$(wc -l <"$FP_TMP/$lang-perf.tids")
    perf_deep=$(grep -c "deep" "$FP_TMP/$lang-perf.txt" || true)
  fi
  read -r on_it on_cpu on_samples on_ns on_runs on_with on_named on_right <<<"$on"
  read -r off_it off_cpu off_samples _ _ off_with off_named _ <<<"$off"
  echo
  echo "== $lang $(eval "${VERSION[$lang]}") stacks: cost at $FREQ Hz, $SECS s ($(nproc) cores, $(uname -r)) =="
  printf '%-48s %14s %14s %14s\n' "" "$lang stacks" "--no-$lang" "perf record -g"
  printf '%-48s %14s %14s %14s\n' "iterations (unprofiled: $base)" "$on_it" "$off_it" "$perf_it"
  printf '%-48s %14s %14s %14s\n' "slowdown against unprofiled" "$(pct "$on_it" "$base")" "$(pct "$off_it" "$base")" "$(pct "$perf_it" "$base")"
  printf '%-48s %14s %14s %14s\n' "BPF program per sample (bpf_stats)" "$(per "$((on_ns / 1000))" "$on_runs")" "-" "-"
  printf '%-48s %14s %14s %14s\n' "agent CPU per sample" "$(per "$on_cpu" "$on_samples")" "$(per "$off_cpu" "$off_samples")" "-"
  printf '%-48s %14s %14s %14s\n' "samples" "$on_samples" "$off_samples" "${perf_samples:--}"
  printf '%-48s %14s %14s %14s\n' "samples with a $lang stack (${MAIN[$lang]})" "$(share "$on_with" "$on_samples")" "$(share "$off_with" "$off_samples")" "0"
  printf '%-48s %14s %14s %14s\n' "samples naming ${DEEP[$lang]}" "$(share "$on_named" "$on_samples")" "$(share "$off_named" "$off_samples")" "${perf_deep:--}"
  printf '%-48s %14s %14s %14s\n' "of those, its callers right (under ${MAIN[$lang]})" "$(share "$on_right" "$on_named")" "-" "-"
done
fp_stop_agent
echo "(perf record's own CPU is not in these figures: its cost to the program is the slowdown)"
