#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The benchmark suite's table: one readable report from the section outputs.

tests/bench/run leaves in its output folder what each section wrote:
accuracy.json (shares.py summarize), overhead.json (overhead-summary.py),
cost-2.json and cost-100.json (agent-cost.sh with BENCH_JSON),
store-bench.txt (store-bench's stdout), collector.txt (collector.sh, if
any), other-*.txt (other benchmark scripts), status (one line per section:
"NAME EXIT_CODE SECONDS") and machine.json.  This program prints the table,
grouped by section, each row

    figure | fleetprof | peer | ratio | aim

(ratio = fleetprof / peer, where both are numbers; the peer is what was
measured in the same invocation: `perf record -g` at the same rate, or
nothing), and with --json FILE writes the same rows, the notes and every
section's raw figures as JSON.

Usage: report.py OUTDIR [--json FILE]
"""

import json
import os
import re
import sys


def load(outdir, name):
    path = os.path.join(outdir, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f) if name.endswith(".json") else f.read()


def hz_name(hz):
    return "%g kHz" % (hz / 1000) if hz >= 1000 else "%d Hz" % hz


class Section:
    def __init__(self, title):
        self.title = title
        self.rows = []  # dicts: figure, fleetprof, peer, ratio, aim
        self.notes = []

    def row(self, figure, fp, peer=None, aim="", digits=2, ratio=True):
        r = None
        if ratio and isinstance(fp, (int, float)) and isinstance(peer, (int, float)) and peer:
            r = fp / peer
        self.rows.append({"figure": figure, "fleetprof": fp, "peer": peer, "ratio": r, "aim": aim,
                          "digits": digits})

    def sub(self, text):
        self.rows.append({"sub": text})


def fmt(v, digits):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.*f" % (digits, v)
    return str(v)


# ---- sections ----------------------------------------------------------------

def accuracy_section(data, status):
    s = Section("Accuracy and precision against measured truth (peer: perf record -e cpu-clock -g -F HZ -p PID)")
    if data is None:
        s.notes.append("accuracy: not run (%s)" % status.get("accuracy", "not selected with --only"))
        return s
    groups = {(g["scenario"], g["tool"], g["rate_hz"]): g for g in data}
    scen_title = {
        "ratios": "threads with known ratios (3 threads, 60/30/15 % of a core, 2 callers x 3 leaves)",
        "serial": "serial functions with known shares (1 thread, leaves 5:3:2 by calls)",
        "equal": "equal threads (4 identical threads, 35 % of a core each)",
        "deep": "deep and shallow stacks (1 thread, leaves called directly and under 80 frames)",
    }
    repeats = sorted({g["repeats"] for g in data})
    s.notes.append("worst error = the largest |profile share - measured share| over every function (leaf), "
                   "thread or caller;leaf pair and every repeat, in percentage points; CV = the largest "
                   "coefficient of variation, across the repeats (%s runs), of a function's or thread's profile share divided by its measured share (shares under 2 %% left out)"
                   % "/".join(map(str, repeats)))
    for scen in ("ratios", "serial", "equal", "deep"):
        rates = sorted({k[2] for k in groups if k[0] == scen})
        if not rates:
            continue
        s.sub(scen_title.get(scen, scen))
        for hz in rates:
            f, p = groups.get((scen, "fleetprof", hz)), groups.get((scen, "perf", hz))
            aim1 = hz == 1000
            g = lambda d, k: d.get(k) if d else None  # noqa: E731
            s.row("%s: worst function error (pts)" % hz_name(hz), g(f, "worst_leaf"), g(p, "worst_leaf"),
                  "<= 1.5" if aim1 else "")
            if scen in ("ratios", "equal"):
                s.row("%s: worst thread error (pts)" % hz_name(hz), g(f, "worst_thread"), g(p, "worst_thread"))
            if scen in ("ratios", "deep", "serial"):
                s.row("%s: worst caller;leaf error (pts)" % hz_name(hz), g(f, "worst_pair"), g(p, "worst_pair"))
            if scen == "equal":
                s.row("%s: spread between equal threads (pts; truth %s)"
                      % (hz_name(hz), fmt(g(f, "equal_spread_truth"), 2)),
                      g(f, "equal_spread_profile"), g(p, "equal_spread_profile"))
                s.row("%s: spread of the equal threads' errors (pts)" % hz_name(hz), g(f, "equal_error_spread"),
                      g(p, "equal_error_spread"), "<= 0.5" if aim1 else "")
            s.row("%s: spread across runs (max CV %%)" % hz_name(hz), g(f, "cv_pct"), g(p, "cv_pct"))
            s.row("%s: samples / expected from measured CPU" % hz_name(hz), g(f, "sample_ratio"),
                  g(p, "sample_ratio"), "1.00", digits=3)
    return s


def overhead_section(data, status):
    s = Section("Overhead on the target (throughput while profiled / unprofiled, alternating on/off windows; "
                "peer: perf record -g)")
    if data is None:
        s.notes.append("overhead: not run (%s)" % status.get("overhead", "not selected with --only"))
        return s
    by = {(r["tool"], r["rate_hz"], r["threads"]): r for r in data}
    threads = sorted({r["threads"] for r in data})
    rates = sorted({r["rate_hz"] for r in data if r["tool"] != "none"})
    if data:
        s.notes.append("loss = 1 - median over %d on windows of (on throughput / mean of the off windows around "
                       "it), %g s windows; per wall second (what the service loses, including CPU the profiler "
                       "takes from it) and per CPU second of the target (the sampling and stack walking the "
                       "kernel charges to it)" % (data[0]["pairs"], data[0]["window_s"]))
    for t in threads:
        s.sub("%d busy thread%s (spin)" % (t, "s" if t > 1 else ""))
        n = by.get(("none", 0, t))
        if n:
            s.row("no profiler (noise floor): loss %% (on/off ratios %.2f..%.2f)"
                  % (n["wall_ratio_min"] or 0, n["wall_ratio_max"] or 0), n["wall_loss_pct"], None, "0", ratio=False)
            spread = (n["wall_ratio_max"] or 0) - (n["wall_ratio_min"] or 0)
            if spread > 0.05:
                s.notes.append("NOISY: with no profiler at all, the on/off throughput ratios of %d busy thread(s) "
                               "ranged %.2f..%.2f; overhead figures smaller than that spread are not resolved on "
                               "this run" % (t, n["wall_ratio_min"], n["wall_ratio_max"]))
        for hz in rates:
            f, p = by.get(("fleetprof", hz, t)), by.get(("perf", hz, t))
            g = lambda d, k: d.get(k) if d else None  # noqa: E731
            aim = "<= 3" if (hz == 10000 and t == 2) else ""
            s.row("%s: throughput loss per wall s (%%)" % hz_name(hz), g(f, "wall_loss_pct"),
                  g(p, "wall_loss_pct"), aim)
            s.row("%s: throughput loss per CPU s (%%)" % hz_name(hz), g(f, "cpu_loss_pct"), g(p, "cpu_loss_pct"))
    return s


def cost_section(data2, data100, status):
    s = Section("Cost of the agent (agent vs perf record -g, same workload and rate)")
    got = False
    for data, label in ((data2, "2 CPU-bound threads"), (data100, "100 threads")):
        if data is None:
            continue
        got = True
        rows = data["rows"]
        duty = rows[0].get("duty", 1) if rows else 1
        if duty < 1:
            label = "100 threads, each busy %.1f %% of the time (%.1f cores)" % (100 * duty, 100 * duty * 1)
        s.sub("%s, %g s per rate" % (label, rows[0]["seconds"] if rows else 0))
        by = {(r["tool"], r["rate_hz"]): r for r in rows}
        for hz in sorted({r["rate_hz"] for r in rows}):
            a, p = by.get(("agent", hz)), by.get(("perf", hz))

            def g(d, k):
                v = d.get(k) if d else None
                return v if isinstance(v, (int, float)) else None
            s.row("%s: samples taken" % hz_name(hz), g(a, "samples"), g(p, "samples"))
            s.row("%s: CPU per sample, whole run (us)" % hz_name(hz), g(a, "us_per_sample"), g(p, "us_per_sample"),
                  "<= 1")
            if a and "us_per_sample_steady" in a:
                s.row("%s: CPU per sample, after the first second (us)" % hz_name(hz), g(a, "us_per_sample_steady"),
                      None, "<= 1")
            s.row("%s: resident memory, peak (MB)" % hz_name(hz), g(a, "peak_mb"), g(p, "peak_mb"), digits=1)
            if a and "ring_mb" in a:
                s.row("%s: perf ring buffers, locked kernel memory (MB)" % hz_name(hz), g(a, "ring_mb"), None,
                      digits=1)
            s.row("%s: lost records" % hz_name(hz), g(a, "lost"), g(p, "lost"), "0" if hz == 10000 else "",
                  ratio=False)
            s.row("%s: throttle events" % hz_name(hz), g(a, "throttled"), g(p, "throttled"), ratio=False)
        b = data.get("base_wall") or []
        if len(b) == 2 and max(b) > 0:
            d = abs(b[0] - b[1]) / max(b) * 100
            if d > 5:
                s.notes.append("NOISY: the unprofiled runs before and after the %s cost runs differ by %.0f %%"
                               % (label, d))
    if not got:
        s.notes.append("agent cost: not run (%s)" % status.get("cost", "not selected with --only"))
    else:
        s.notes.append("CPU per sample: the tool's CPU time over the samples it took (perf: its whole run, start-up "
                       "and the build-id pass at exit included; the agent: attaching every thread and reading symbols included, "
                       "and apart from that, after its first second); memory: peak RSS (VmHWM; perf: ru_maxrss)")
    return s


def parse_store(text):
    """Figures from store-bench's stdout (tests/bench/store-bench.c)."""
    out = {}
    m = re.search(r"write, new stacks:.*?: (\d+) new stacks/s", text)
    if m:
        out["new_stacks_per_s"] = int(m.group(1))
    m = re.search(r"write, known stacks: .*?: (\d+) samples/s", text)
    if m:
        out["known_samples_per_s"] = int(m.group(1))
    for block in re.split(r"\n(?=\d+ Hz x )", text):
        mb = re.match(r"(\d+) Hz x (\d+) threads under a ([\d.]+) MiB budget, (\d+) buckets", block)
        if mb:
            hz = int(mb.group(1))
            d = {"threads": int(mb.group(2)), "budget_mib": float(mb.group(3)), "buckets": int(mb.group(4))}
            mm = re.search(r"largest file \+ log after a write ([\d.]+) MiB \(([\d.]+) x budget\)", block)
            if mm:
                d["peak_mib"], d["peak_x_budget"] = float(mm.group(1)), float(mm.group(2))
            mm = re.search(r"evicting writes: \d+; ([\d.]+) ms average, ([\d.]+) ms worst", block)
            if mm:
                d["evict_write_ms_avg"], d["evict_write_ms_worst"] = float(mm.group(1)), float(mm.group(2))
            out["budget_%d" % hz] = d
            continue
        m = re.match(r"(\d+) Hz x (\d+) threads, (\d+) s of buckets \((\d+) buckets\)", block)
        if not m:
            continue
        hz = int(m.group(1))
        d = {"threads": int(m.group(2)), "seconds": int(m.group(3)), "buckets": int(m.group(4))}
        mm = re.search(r"bucket write: +first .*? (\d+) ms; then ([\d.]+) ms average, ([\d.]+) ms worst; "
                       r"(\d+) rows/s, (\d+) samples/s", block)
        if mm:
            d.update(first_ms=int(mm.group(1)), write_ms_avg=float(mm.group(2)), write_ms_worst=float(mm.group(3)),
                     rows_per_s=int(mm.group(4)), samples_per_s=int(mm.group(5)))
        mm = re.search(r"-> ([\d.]+) MiB per hour, (\d+) bytes per row", block)
        if mm:
            d["mib_per_hour"], d["bytes_per_row"] = float(mm.group(1)), int(mm.group(2))
        mm = re.search(r"dump of (\d+) min: +query into pprof ([\d.]+) s \((\d+) samples.*?gzip encode ([\d.]+) s, "
                       r"([\d.]+) MiB", block)
        if mm:
            d.update(dump_minutes=int(mm.group(1)), dump_query_s=float(mm.group(2)), dump_encode_s=float(mm.group(4)),
                     dump_mib=float(mm.group(5)))
        mm = re.search(r"samples taken: +(\d+) per bucket", block)
        if mm:
            d["samples_per_bucket"] = int(mm.group(1))
        out["hour_%d" % hz] = d
    return out


def store_section(text, status):
    s = Section("Storage (store-bench: SQLite ring store, simulated 100-thread service, 10 s buckets; no peer)")
    if text is None:
        s.notes.append("store: not run (%s)" % status.get("store", "not selected with --only"))
        return s, None
    f = parse_store(text)
    s.row("bucket write, all-new stacks: new stacks/s", f.get("new_stacks_per_s"), ratio=False, digits=0)
    s.row("bucket write, known stacks: samples/s", f.get("known_samples_per_s"), ratio=False, digits=0)
    for hz in (99, 1000):
        d = f.get("hour_%d" % hz)
        if not d:
            continue
        ext = "" if d["seconds"] == 3600 else ", %d min extrapolated" % (d["seconds"] // 60)
        s.sub("%s x %d threads all on CPU (%s samples per bucket%s)"
              % (hz_name(hz), d["threads"], d.get("samples_per_bucket", "?"), ext))
        s.row("bucket write, average / worst (ms; bucket 10000 ms)", d.get("write_ms_avg"), d.get("write_ms_worst"),
              "<= 1000", digits=1, ratio=False)
        s.row("bucket write throughput: samples/s", d.get("samples_per_s"), ratio=False, digits=0)
        s.row("store bytes per hour (MiB)", d.get("mib_per_hour"), None, "< 20" if hz == 99 else "", digits=1)
        s.row("dump of %d min into pprof: query + gzip (s)" % d.get("dump_minutes", 0),
              (d.get("dump_query_s") or 0) + (d.get("dump_encode_s") or 0) if "dump_query_s" in d else None,
              None, digits=2)
    for k in sorted(k for k in f if k.startswith("budget_")):
        d = f[k]
        s.sub("steady state under a %g MiB budget (every write evicts)" % (d.get("budget_mib") or 0))
        s.row("write + eviction, average / worst (ms)", d.get("evict_write_ms_avg"), d.get("evict_write_ms_worst"),
              digits=1, ratio=False)
        s.row("largest file + WAL / budget", d.get("peak_x_budget"), None, "<= 1.5")
    s.notes.append("in the rows with two figures the second ('peer' column) is the worst case, not a peer")
    return s, f


def text_section(title, text, status_key, status):
    """A benchmark script's own report, as it printed it: its lines without
    the "NAME: ..." progress lines (lib.sh's fp_log), or its last lines if
    that leaves nothing."""
    s = Section(title)
    if text is None:
        s.notes.append("%s: %s" % (status_key, status.get(status_key, "not present in this checkout: skipped")))
        return s
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    kept = [line for line in lines if not line.startswith(status_key + ": ")]
    s.notes.extend("  " + line for line in (kept or lines[-15:]))
    if status.get(status_key, "ok") != "ok":
        s.notes.append(status[status_key])
    return s


def render(sections, machine, mode):
    out = []
    out.append("fleetprof benchmark suite (%s)" % mode)
    if machine:
        out.append("machine: %s; %s CPUs; kernel %s; load average %s at start, %s at end"
                   % (machine.get("os", "?"), machine.get("cpus", "?"), machine.get("kernel", "?"),
                      machine.get("load_start", "?"), machine.get("load_end", "?")))
        out.append("started %s, took %s s" % (machine.get("started", "?"), machine.get("seconds", "?")))
    w = [62, 11, 11, 7, 9]
    line = "-" * (sum(w) + 8)
    for s in sections:
        out.append("")
        out.append("== " + s.title)
        if s.rows:
            out.append("%-*s %*s %*s %*s  %-*s" % (w[0], "figure", w[1], "fleetprof", w[2], "peer", w[3], "ratio",
                                                   w[4], "aim"))
            out.append(line)
        for r in s.rows:
            if "sub" in r:
                out.append("  " + r["sub"])
                continue
            out.append("%-*s %*s %*s %*s  %-*s" % (
                w[0], "    " + r["figure"], w[1], fmt(r["fleetprof"], r["digits"]), w[2], fmt(r["peer"], r["digits"]),
                w[3], fmt(r["ratio"], 2) if r["ratio"] is not None else "-", w[4], r["aim"]))
        for n in s.notes:
            out.append("  note: " + n if not n.startswith("  ") else n)
    return "\n".join(out)


def main(argv):
    if not argv or argv[0].startswith("-"):
        print("usage: report.py OUTDIR [--json FILE]", file=sys.stderr)
        return 2
    outdir = argv[0]
    json_path = None
    if len(argv) == 3 and argv[1] == "--json":
        json_path = argv[2]
    elif len(argv) != 1:
        print("usage: report.py OUTDIR [--json FILE]", file=sys.stderr)
        return 2
    status = {}
    st = load(outdir, "status")
    for line in (st or "").splitlines():
        name, rc, secs = line.split()[:3]
        status[name] = "ok"
        if rc == "skipped":
            status[name] = "skipped: not in this checkout"
        elif rc == "quick":
            status[name] = "skipped: not run by --quick"
        elif rc != "0":
            status[name] = "FAILED (exit %s after %s s; log: %s)" % (rc, secs, os.path.join(outdir, name + ".log"))
    machine = load(outdir, "machine.json") or {}
    mode = machine.get("mode", "?")
    acc = load(outdir, "accuracy.json")
    ovh = load(outdir, "overhead.json")
    c2, c100 = load(outdir, "cost-2.json"), load(outdir, "cost-100.json")
    store = load(outdir, "store-bench.txt")
    sections = [accuracy_section(acc, status), overhead_section(ovh, status), cost_section(c2, c100, status)]
    ss, store_fig = store_section(store, status)
    sections.append(ss)
    sections.append(text_section("Collector (tests/bench/collector.sh)", load(outdir, "collector.txt"),
                                 "collector", status))
    for name in sorted(os.listdir(outdir)):
        if name.startswith("other-") and name.endswith(".txt"):
            key = name[len("other-"):-len(".txt")]
            sections.append(text_section("%s (tests/bench/%s.sh)" % (key, key), load(outdir, name), key, status))
    failed = [k for k, v in status.items() if v != "ok" and not v.startswith("skipped")]
    text = render(sections, machine, mode)
    if failed:
        text += "\n\nsections that could not run: " + ", ".join("%s (%s)" % (k, status[k]) for k in failed)
    print(text)
    if json_path:
        doc = {"machine": machine, "mode": mode, "status": status,
               "sections": [{"title": s.title, "notes": s.notes,
                             "rows": [{k: v for k, v in r.items() if k != "digits"} for r in s.rows]}
                            for s in sections],
               "raw": {"accuracy": acc, "overhead": ovh, "cost_2_threads": c2, "cost_100_threads": c100,
                       "store": store_fig}}
        with open(json_path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
