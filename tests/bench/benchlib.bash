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
