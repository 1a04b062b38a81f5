# SPDX-License-Identifier: MIT
#
# What the cost benchmarks share (sourced after tests/integration/lib.sh,
# once the agent runs): the agent's CPU so far and its BPF programs' run
# time.

# bench_agent_cpu_us: the agent's user + system CPU so far (µs).
bench_agent_cpu_us() { awk '{print ($14 + $15) * 10000}' "/proc/$FP_AGENT_PID/stat"; }

# bench_bpf_stats [PREFIX]: "run_time_ns run_cnt" so far of the agent's BPF
# programs named PREFIX* (default fp_pystack; "0 0" when none is loaded):
# its programs are those of its fds (fdinfo's prog_id). The counts run
# while kernel.bpf_stats_enabled is 1.
bench_bpf_stats() {
  bpftool prog show --json 2>/dev/null | python3 -c 'import glob, json, sys
ids = set()
for f in glob.glob("/proc/%s/fdinfo/*" % sys.argv[1]):
    try:
        for line in open(f):
            if line.startswith("prog_id:"):
                ids.add(int(line.split()[1]))
    except OSError:
        pass
ns = n = 0
for p in json.load(sys.stdin):
    if p.get("id") in ids and p.get("name", "").startswith(sys.argv[2]):
        ns += p.get("run_time_ns", 0); n += p.get("run_cnt", 0)
print(ns, n)' "$FP_AGENT_PID" "${1:-fp_pystack}"
}

# bench_run TAG none|perf|fp CMD...: runs CMD GO SECS (a program that prints
# its PID, waits for the file GO, works for SECS seconds and prints
# "iterations N") unprofiled, under perf record -g at $FREQ Hz
# ($FP_TMP/TAG.data), or as a fleetprof target at $FREQ Hz with the start
# options of the array BENCH_START, the agent's CPU and its programs' run
# time (bench_bpf_stats) before and after in $FP_TMP/TAG.before and
# TAG.after; prints N. Its output is $FP_TMP/TAG.out.
bench_run() {
  local tag=$1 mode=$2 pid perf_pid=
  shift 2
  "$@" "$FP_TMP/$tag.go" "$SECS" >"$FP_TMP/$tag.out" 2>&1 &
  pid=$!
  fp_track "$pid"
  fp_wait_for 20 test -s "$FP_TMP/$tag.out" || fp_fail "$tag did not start"
  case $mode in
  none) ;;
  perf)
    perf record -F "$FREQ" -g -p "$pid" -o "$FP_TMP/$tag.data" >"$FP_TMP/$tag.perf.log" 2>&1 &
    perf_pid=$!
    sleep 0.5
    ;;
  fp)
    fp_ctl start "$pid" --freq "$FREQ" "${BENCH_START[@]}" >/dev/null || fp_fail "start $tag failed"
    # From here: the start's one-time work (the interpreter's symbols) is done.
    sleep 0.3
    echo "$(bench_agent_cpu_us) $(bench_bpf_stats)" >"$FP_TMP/$tag.before"
    ;;
  esac
  touch "$FP_TMP/$tag.go"
  wait "$pid" || fp_fail "$tag failed: $(cat "$FP_TMP/$tag.out")"
  fp_untrack "$pid"
  [[ $mode == fp ]] && echo "$(bench_agent_cpu_us) $(bench_bpf_stats)" >"$FP_TMP/$tag.after"
  if [[ -n $perf_pid ]]; then
    wait "$perf_pid" || true
  fi
  awk '/^iterations/ {print $2}' "$FP_TMP/$tag.out"
}
BENCH_START=()
