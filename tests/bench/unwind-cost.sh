#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What exact stacks cost, and how exact they are, beside perf.  The target
# is Debian's own xz (no frame pointers) compressing random data with one
# thread, for BENCH_SECONDS (default 8) per run, at each rate of
# BENCH_RATES (default "99 1000" Hz).  For fleetprof in each unwind mode
# (fp, auto, dwarf) and for `perf record --call-graph dwarf` it reports:
#   - CPU per sample in microseconds: the agent's (all its threads,
#     /proc/PID/task/*/schedstat) in the steady state, after the first
#     second (loading symbols and tables is once per binary), and perf's
#     recording plus its unwinding (`perf script`, which is where perf
#     unwinds dwarf stacks), together, start-up included;
#   - bytes copied per sample: the agent's user-stack copy (status), and
#     perf.data's size per sample;
#   - the share of samples whose stack reaches __libc_start_main;
#   - the target's slowdown: xz's input bytes per CPU-second of its own
#     against an unprofiled run in the same invocation (the kernel's
#     stack copy is charged to the target).
# Figures only; it never fails on a time.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=unwind-cost
SECS=${BENCH_SECONDS:-8}
RATES=${BENCH_RATES:-99 1000}
fp_init $((120 + SECS * 20))
CHECK="python3 $FP_SRC/tests/integration/unwind_check.py"

head -c 200000000 /dev/urandom >"$FP_TMP/data"
# start_xz: xz compressing the data, its pid in XZ.
start_xz() {
  xz -9 -T1 -c "$FP_TMP/data" >/dev/null &
  XZ=$!
  fp_track "$XZ"
}
# xz_rate PID: its input bytes read per CPU-second so far.
xz_rate() {
  local rb cpu
  rb=$(awk '/^rchar/ {print $2}' "/proc/$1/io")
  cpu=$(fp_cpu_ns "$1")
  awk -v r="$rb" -v c="$cpu" 'BEGIN {printf "%.0f", r / (c / 1e9)}'
}
baseline() {
  start_xz
  sleep "$SECS"
  BASE=$(xz_rate "$XZ")
  fp_kill "$XZ"
}

fp_start_agent --store none
printf '%-28s %6s %10s %12s %10s %10s\n' "profiler" "Hz" "samples" "cpu/sample" "bytes/smp" "to root"
rows=()
baseline
# A first target loads the symbols of xz and its libraries (the loaders' CPU is the agent's):
# profiled once before, so that no row pays for it but each measures the steady state.
start_xz
fp_ctl start "$XZ" --freq 1000 >/dev/null || fp_fail "start failed"
sleep 3
fp_ctl dump "$XZ" --format folded >/dev/null || fp_fail "dump failed"
fp_ctl stop "$XZ" >/dev/null
fp_kill "$XZ"
for hz in $RATES; do
  for mode in fp auto dwarf; do
    start_xz
    fp_ctl start "$XZ" --freq "$hz" --unwind "$mode" >/dev/null || fp_fail "start failed"
    # The steady state: after a second in which symbols and tables load.
    sleep 1
    c0=$(fp_cpu_ns "$FP_AGENT_PID")
    s0=$(fp_target_field "$XZ" samples)
    sleep "$SECS"
    fp_ctl status --json >"$FP_TMP/st.json"
    c1=$(fp_cpu_ns "$FP_AGENT_PID")
    rate=$(xz_rate "$XZ")
    fp_ctl dump "$XZ" --format folded >"$FP_TMP/f.txt" || fp_fail "dump failed"
    fp_ctl stop "$XZ" >/dev/null
    fp_kill "$XZ"
    read -r samples bytes < <(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["targets"][0]; print(t["samples"], t["unwind"]["stack_bytes_per_sample"])' "$FP_TMP/st.json")
    root=$($CHECK root "$FP_TMP/f.txt" __libc_start_main --min-share 0 | sed 's/.*(\([0-9.]*%\)).*/\1/')
    printf '%-28s %6s %10s %10.2fus %10s %10s   slowdown %s%%\n' "fleetprof --unwind $mode" "$hz" "$samples" \
      "$(awk -v a="$c0" -v b="$c1" -v n="$((samples - s0))" 'BEGIN {print n ? (b - a) / 1000 / n : 0}')" "$bytes" "$root" \
      "$(awk -v b="$BASE" -v r="$rate" 'BEGIN {printf "%.1f", 100 * (1 - r / b)}')"
  done
  if command -v perf >/dev/null; then
    start_xz
    /usr/bin/time -f '%e %U %S' -o "$FP_TMP/rec.time" perf record -q --call-graph dwarf -F "$hz" \
      -e cpu-clock -o "$FP_TMP/perf.data" -p "$XZ" -- sleep "$SECS" >/dev/null 2>&1 || true
    rate=$(xz_rate "$XZ")
    fp_kill "$XZ"
    /usr/bin/time -f '%e %U %S' -o "$FP_TMP/script.time" perf script -i "$FP_TMP/perf.data" \
      -F comm,tid,ip,sym >"$FP_TMP/perf.txt" 2>/dev/null || true
    python3 - "$FP_TMP/perf.txt" >"$FP_TMP/perf.folded" <<'PY'
import sys
stacks, cur = {}, []
for line in open(sys.argv[1], errors="replace"):
    line = line.rstrip()
    if not line:
        if cur:
            k = ";".join(reversed(cur)); stacks[k] = stacks.get(k, 0) + 1
        cur = []
    elif line.startswith((" ", "\t")):
        parts = line.split()
        cur.append(parts[1] if len(parts) > 1 else "?")
for k, v in stacks.items():
    # glibc 2.34+ defines __libc_start_main as an alias of __libc_start_main_impl.
    print(k.replace("__libc_start_main_impl", "__libc_start_main"), v)
PY
    samples=$(awk '{n += $NF} END {print n + 0}' "$FP_TMP/perf.folded")
    cpu=$(awk '{s += $2 + $3} END {print s}' "$FP_TMP/rec.time" "$FP_TMP/script.time")
    bytes=$(stat -c %s "$FP_TMP/perf.data")
    root=$($CHECK root "$FP_TMP/perf.folded" __libc_start_main --min-share 0 2>/dev/null | sed 's/.*(\([0-9.]*%\)).*/\1/' || echo n/a)
    printf '%-28s %6s %10s %10.2fus %10s %10s   slowdown %s%%\n' "perf record --call-graph dwarf" "$hz" "$samples" \
      "$(awk -v c="$cpu" -v n="$samples" 'BEGIN {print n ? c * 1e6 / n : 0}')" \
      "$(awk -v b="$bytes" -v n="$samples" 'BEGIN {printf "%.0f", n ? b / n : 0}')" "$root" \
      "$(awk -v b="$BASE" -v r="$rate" 'BEGIN {printf "%.1f", 100 * (1 - r / b)}')"
    rm -f "$FP_TMP/perf.data"
  fi
done
fp_stop_agent
