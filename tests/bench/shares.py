#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Accuracy figures: a profile's shares against a workload's measured truth.

The benchmark (tests/bench/accuracy.sh) profiles tests/workloads/truth,
which measures with CLOCK_THREAD_CPUTIME_ID the CPU time of every
(thread, caller, leaf) call, with fleetprof and with `perf record -g`.
This program turns one such run into the same figures for both tools:

  shares.py fleetprof --truth TRUTH.json PROFILE.pb.gz   (read by go tool pprof -raw)
  shares.py perf --truth TRUTH.json PERF.data             (read by perf script)

each print one JSON object: the truth's and the profile's share (percent)
of every leaf function, thread and caller;leaf pair, over the same
population -- samples whose leaf is a measured leaf, in a measured thread
(time in the kernel, in pacing code or in other threads is outside it) --
the worst absolute difference of each kind in percentage points, and the
number of samples in the population against the number the measured CPU
time implies at the requested rate.

  shares.py summarize RUNS.jsonl

groups such objects (one per line, with "scenario", "tool", "rate_hz" and
"repeat" added by the caller) by (scenario, tool, rate) and prints per group:
the worst per-function, per-thread and caller;leaf error over all repeats,
the mean of the per-run worst function error, the spread across repeats
(the largest coefficient of variation of a function's or thread's share
relative to its measured share),
the spread between threads that do equal work, and the sample-count ratio.
"""

import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import pprofraw  # noqa: E402  (the shared `go tool pprof -raw` reader)

LEAVES = ("leaf_hash", "leaf_sqrt", "leaf_mem")
MIN_SHARE = 2.0  # percent: smaller shares are left out of the spread


def truth_tables(truth):
    """Measured ns per leaf, per thread and per caller;leaf pair."""
    leaf, thread, pair = {}, {}, {}
    for name, th in truth["threads"].items():
        for k, v in th["stacks"].items():
            lf = k.split(";")[1]
            if lf not in LEAVES:
                continue
            leaf[lf] = leaf.get(lf, 0) + v
            thread[name] = thread.get(name, 0) + v
            pair[k] = pair.get(k, 0) + v
    return leaf, thread, pair


def shares(d):
    tot = sum(d.values())
    return {k: (100.0 * v / tot if tot else 0.0) for k, v in d.items()}


def compare(truth, samples, rate_hz):
    """samples: iterable of (thread_name, leaf-first stack, weight)."""
    tnames = set(truth["threads"])
    leaf, thread, pair = {}, {}, {}
    n_all = n_pop = 0
    for tname, stack, w in samples:
        n_all += w
        if not stack or stack[0] not in LEAVES or tname not in tnames:
            continue
        n_pop += w
        caller = stack[1] if len(stack) > 1 else "?"
        leaf[stack[0]] = leaf.get(stack[0], 0) + w
        thread[tname] = thread.get(tname, 0) + w
        k = "%s;%s" % (caller, stack[0])
        pair[k] = pair.get(k, 0) + w
    out = {"samples_all": n_all, "samples_population": n_pop}
    t_leaf, t_thread, t_pair = truth_tables(truth)
    for kind, t, p in (("leaf", t_leaf, leaf), ("thread", t_thread, thread), ("pair", t_pair, pair)):
        ts, ps = shares(t), shares(p)
        keys = sorted(set(ts) | set(ps))
        out[kind] = {k: [round(ts.get(k, 0.0), 3), round(ps.get(k, 0.0), 3)] for k in keys}
        out["worst_" + kind] = round(max((abs(ps.get(k, 0.0) - ts.get(k, 0.0)) for k in keys), default=0.0), 3)
    expect = sum(t_leaf.values()) * rate_hz / 1e9
    out["samples_expected"] = round(expect)
    out["sample_ratio"] = round(n_pop / expect, 4) if expect else None
    return out


def fleetprof_samples(path):
    p = pprofraw.load(path)
    vi = p.value_index("samples")
    for s in p.samples:
        yield s.thread_name(), s.stack, s.values[vi]


def perf_samples(path):
    """Samples of `perf script`: a header line "comm tid", then one line per
    frame "ip sym", leaf first, then a blank line.  A kernel frame on top
    (the sample was taken in the kernel) makes the leaf "[kernel]", as the
    agent shows it."""
    r = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,ip,sym"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, universal_newlines=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("perf script -i %s failed (exit %d)" % (path, r.returncode))
    comm, stack = None, []
    for line in r.stdout.splitlines() + [""]:
        if not line.strip():
            if comm is not None:
                yield comm, stack, 1
            comm, stack = None, []
        elif not line[0].isspace():
            # "comm tid": the comm may itself contain spaces.
            comm = line.rsplit(None, 1)[0].strip() if len(line.split()) > 1 else line.strip()
        else:
            parts = line.split(None, 1)
            ip = parts[0]
            sym = parts[1].strip() if len(parts) > 1 else "[unknown]"
            if len(ip) >= 16 and ip.startswith("ffff"):
                if not stack:
                    stack.append("[kernel]")
                continue
            stack.append(sym.split("+0x")[0])


def summarize(path):
    groups = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                groups.setdefault((r["scenario"], r["tool"], r["rate_hz"]), []).append(r)
    out = []
    for (scen, tool, rate), runs in sorted(groups.items()):
        g = {"scenario": scen, "tool": tool, "rate_hz": rate, "repeats": len(runs)}
        for kind in ("leaf", "thread", "pair"):
            g["worst_" + kind] = max(r["worst_" + kind] for r in runs)
        g["mean_worst_leaf"] = round(statistics.mean(r["worst_leaf"] for r in runs), 3)
        g["mean_worst_thread"] = round(statistics.mean(r["worst_thread"] for r in runs), 3)
        # Precision: for every function and thread with a measured share of
        # at least MIN_SHARE %, the profile's share over the measured share
        # in each run (1.0 = exact), and its coefficient of variation across
        # the runs; the largest is the figure.  Dividing by each run's own
        # truth keeps the workload's run-to-run variation (threads on a busy
        # machine fall behind their duty cycles) out of the profiler's.
        cv = 0.0
        if len(runs) > 1:
            for kind in ("leaf", "thread"):
                if len(runs[0][kind]) < 2:
                    continue  # one function or thread: always 100 %
                for k in runs[0][kind]:
                    vals = [r[kind][k][1] / r[kind][k][0] for r in runs
                            if k in r[kind] and r[kind][k][0] >= MIN_SHARE]
                    if len(vals) > 1 and statistics.mean(vals) > 0:
                        cv = max(cv, 100.0 * statistics.stdev(vals) / statistics.mean(vals))
        g["cv_pct"] = round(cv, 2) if len(runs) > 1 else None
        # Threads doing equal work: the largest difference between their
        # shares in the profile, beside the same in the truth (on a busy
        # machine they do not get equal CPU), and the largest difference
        # between their errors (profile - truth), which is what "equal
        # threads come out equal" means when their CPU times differ.
        if scen == "equal":
            g["equal_spread_profile"] = round(statistics.mean(
                max(v[1] for v in r["thread"].values()) - min(v[1] for v in r["thread"].values()) for r in runs), 3)
            g["equal_error_spread"] = round(statistics.mean(
                max(v[1] - v[0] for v in r["thread"].values()) - min(v[1] - v[0] for v in r["thread"].values())
                for r in runs), 3)
            g["equal_spread_truth"] = round(statistics.mean(
                max(v[0] for v in r["thread"].values()) - min(v[0] for v in r["thread"].values()) for r in runs), 3)
        ratios = [r["sample_ratio"] for r in runs if r.get("sample_ratio") is not None]
        g["sample_ratio"] = round(statistics.mean(ratios), 3) if ratios else None
        g["samples_population"] = round(statistics.mean(r["samples_population"] for r in runs))
        out.append(g)
    return out


def main(argv):
    if len(argv) >= 2 and argv[0] == "summarize":
        json.dump(summarize(argv[1]), sys.stdout, indent=1)
        print()
        return 0
    if len(argv) != 6 or argv[0] not in ("fleetprof", "perf") or argv[1] != "--truth" or argv[3] != "--rate":
        print("usage: shares.py fleetprof|perf --truth TRUTH.json --rate HZ FILE\n"
              "       shares.py summarize RUNS.jsonl", file=sys.stderr)
        return 2
    tool, truth_path, rate, path = argv[0], argv[2], float(argv[4]), argv[5]
    try:
        with open(truth_path) as f:
            truth = json.load(f)
        samples = fleetprof_samples(path) if tool == "fleetprof" else perf_samples(path)
        print(json.dumps(compare(truth, samples, rate), sort_keys=True))
    except (OSError, ValueError, KeyError, RuntimeError, subprocess.SubprocessError) as err:
        print("shares.py: %s: %s" % (path, err), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
