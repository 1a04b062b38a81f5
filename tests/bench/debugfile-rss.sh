#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What do debug files cost the agent's memory?  BENCH_PROGRAMS programs
# (default 50), each a distinct build of BENCH_FUNCS functions (default
# 3000) built with -g3 (the macros of 15 headers too), run at once, each
# profiled at 99 Hz for 3 s and dumped, in three forms, each with an agent
# of its own:
#
#   symtab     unstripped: the names in the binary's own .symtab
#   debuglink  stripped, with .gnu_debuglink to a debug file beside it
#   stripped   stripped, no debug file (frames stay FILE+0xOFFSET)
#
# Figures: the agent's peak and final resident memory (VmHWM, VmRSS), the
# bytes of the files it had to read (binaries and debug files), and what
# named the hot frame. The agent keeps a file's function symbols and
# unwind table, not the file: a debug file of many MB should cost the
# symbols, not its size. Figures only; it never fails on a size.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=debugfile-rss
N=${BENCH_PROGRAMS:-50}
FUNCS=${BENCH_FUNCS:-3000}
fp_init 1800
B=$FP_TMP/b
mkdir -p "$B"

python3 - "$B/gen.c" "$FUNCS" <<'PY'
import sys
out, n = sys.argv[1], int(sys.argv[2])
with open(out, "w") as f:
    f.write("".join("#include <%s>\n" % h for h in ("stdlib.h", "time.h", "stdio.h", "string.h", "math.h", "signal.h", "unistd.h", "fcntl.h", "pthread.h", "sys/socket.h", "netinet/in.h", "sys/stat.h", "errno.h", "locale.h", "wchar.h")))
    for i in range(n):
        f.write("__attribute__((noinline)) long fn_%d(long x) { return x * %d + VARIANT; }\n" % (i, i + 3))
    f.write("long (*const table[])(long) = {%s};\n" % ", ".join("fn_%d" % i for i in range(n)))
    f.write("""int main(int c, char **v) {
    double secs = c > 1 ? atof(v[1]) : 3; long s = 0; struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do { for (int i = 0; i < %d; i++) s += table[i](s); clock_gettime(CLOCK_MONOTONIC, &t); }
    while (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
    return (int)(s & 1);
}
""" % n)
PY
fp_log "building $N programs of $FUNCS functions"
for i in $(seq 1 "$N"); do
  cc -O1 -g3 -DVARIANT="$i" -o "$B/sym$i" "$B/gen.c"
  objcopy --only-keep-debug "$B/sym$i" "$B/link$i.debug"
  strip -s -o "$B/link$i" "$B/sym$i"
  objcopy --add-gnu-debuglink="$B/link$i.debug" "$B/link$i"
  strip -s -o "$B/bare$i" "$B/sym$i"
done

kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
bytes() { du -cb "$@" | tail -1 | cut -f1; }
div() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", a / b}'; }
printf '%-10s %9s %12s %12s %14s %s\n' form profiled "VmHWM MiB" "VmRSS MiB" "files MiB" "hot frame"
for form in symtab debuglink stripped; do
  case $form in
  symtab) prefix=sym files=("$B"/sym[0-9]*) ;;
  debuglink) prefix=link files=("$B"/link[0-9]* "$B"/link*.debug) ;;
  stripped) prefix=bare files=("$B"/bare[0-9]*) ;;
  esac
  fp_start_agent --store "$FP_TMP/$form.db"
  base=$(kb "$FP_AGENT_PID" VmHWM)
  pids=()
  for i in $(seq 1 "$N"); do
    "$B/$prefix$i" 300 & # killed once dumped: 50 starts take a while
    pids+=($!)
    fp_track "$!"
  done
  profiled=()
  for p in "${pids[@]}"; do
    if fp_ctl start "$p" --freq 99 >/dev/null; then profiled+=("$p"); else fp_log "$form: $p not profiled"; fi
  done
  sleep 3
  for p in "${profiled[@]}"; do
    fp_ctl dump "$p" --format folded -o "$FP_TMP/$form-$p.folded" >/dev/null || fp_fail "dump $p failed"
  done
  for p in "${pids[@]}"; do fp_kill "$p"; done
  hot=$(cat "$FP_TMP/$form"-*.folded | awk '{n = split($1, a, ";"); c[a[n]] += $2} END {for (k in c) print c[k], k}' |
    sort -nr | awk 'NR == 1 {print $2}')
  printf '%-10s %9s %12s %12s %14s %s\n' "$form" "${#profiled[@]}" "$(div "$(kb "$FP_AGENT_PID" VmHWM)" 1024)" \
    "$(div "$(kb "$FP_AGENT_PID" VmRSS)" 1024)" "$(div "$(bytes "${files[@]}")" 1048576)" "$hot"
  fp_log "$form: VmHWM at start $((base / 1024)) MiB"
  fp_stop_agent
  rm -f "$FP_TMP/$form"-*.folded
done
