# SPDX-License-Identifier: MIT
"""Checks a profile of tests/workloads/python/shares.py against what the
program measured of itself (its OUT file), for test-python-stacks:

  python_check.py PROFILE TRUTH [--share-tol POINTS] [--host]

PROFILE is a pprof file (read with go tool pprof -raw, pprofraw.py). A
Python frame is a location whose file is the program's. Checks:
  - at least 99% of each busy thread's samples carry a Python stack (95%
    of a thread that mostly sleeps);
  - the main thread's functions' inclusive shares within --share-tol
    points of the program's own measurement (the other threads' shown);
  - each Python function's Python caller is the one the program calls it
    from (shared: caller_one and caller_two in the measured ratio, within
    5 points); recurse 50 deep under bottom; produce() under drain();
  - zlib's and hashlib's C code lie under squeeze() (but 0.1%);
  - hot_line()'s samples are on the line marked HOT;
  - every Python frame of the program's file names one of its functions.
With --host (a host-tier profile, which holds the process's whole life):
a thread's samples in the interpreter's loop (the start and the exit run
none) are those that must carry a Python stack, of any file (the imports
run importlib's), and the shares are of the samples in the program's own
functions, what it measured.
Prints one line of figures; exits 1 with the reason on the first failure.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pprofraw  # noqa: E402
from pprofraw import fail  # noqa: E402

FUNCS = {"<module>", "outer", "run", "spin", "busy", "shared", "caller_one", "caller_two",
         "bottom", "recurse", "squeeze", "produce", "drain", "hot_line", "worker_spin",
         "churn", "churn_a", "churn_b", "pause", "account", "worker_step", "churn_step",
         "measured_nothing", "overhead_ns",
         "<listcomp>",  # the module's last lines find the hot line (3.8-3.11: its own code object)
         "<dictcomp>"}  # run() adds each function's measuring cost (the same)
# A function's Python callers (the next Python frame of the program's file, rootward).
CALLERS = {
    "spin": {"outer"}, "caller_one": {"outer"}, "caller_two": {"outer"},
    "shared": {"caller_one", "caller_two"}, "bottom": {"recurse"},
    "recurse": {"outer", "recurse"}, "squeeze": {"outer"}, "drain": {"outer"},
    "produce": {"drain"}, "hot_line": {"outer"}, "outer": {"run"},
    "worker_spin": {"worker_step"}, "churn": {"churn_step"},
    "worker_step": {"run"}, "churn_step": {"run"}, "churn_a": {"churn", "churn_b"},
    "churn_b": {"churn_a"}, "run": {"<module>"},
    "pause": {"worker_step", "churn_step"}, "<listcomp>": {"<module>"},
    "busy": {"spin", "shared", "bottom", "produce", "worker_spin", "churn_a", "churn_b"},
}


def is_python_file(fl):
    return fl.endswith(".py") or (fl.startswith("<") and fl.endswith(">"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("truth")
    # The issue aims at 1 point. Quiet runs' worst errors are 0.1-0.45
    # points, beside four busy loops on the 2 cores up to 1.1: checked at 2.
    # (The program's own measuring is the larger part of that: shares.py
    # says how it is corrected.)
    ap.add_argument("--share-tol", type=float, default=2.0)
    ap.add_argument("--host", action="store_true")
    ap.add_argument("--split-tol", type=float, default=5)
    a = ap.parse_args()
    truth = json.load(open(a.truth))
    p = pprofraw.load(a.profile)
    script = truth["file"]
    by_tid = {t["tid"]: (name, t) for name, t in truth["threads"].items()}
    per = pprofraw.lines_by_thread(p)  # tid -> [(n, frames leaf first)]

    figures = []
    for tid, (name, t) in sorted(by_tid.items()):
        rows = per.get(tid, [])
        if a.host:
            in_loop = [(n, f) for n, f in rows
                       if any(x == "_PyEval_EvalFrameDefault" or is_python_file(fl) for x, fl, _ in f)]
            loop_py = sum(n for n, f in in_loop if any(is_python_file(fl) for _, fl, _ in f))
            loop_total = sum(n for n, _ in in_loop)
            rows = [(n, f) for n, f in rows if any(fl == script for _, fl, _ in f)]
        total = sum(n for n, _ in rows)
        # (The host tier samples at 499 Hz per CPU: a thread that mostly sleeps has
        # a few dozen, shown and not checked.)
        if a.host and name != "MainThread" and total < 100:
            figures.append("%s %d samples (too few to check)" % (name, total))
            continue
        if total < 100:
            fail("thread %s (%d): %d samples, too few" % (name, tid, total))
        with_py = sum(n for n, f in rows if any(fl == script for _, fl, _ in f))
        if a.host:
            with_py, total_py = loop_py, loop_total
        else:
            total_py = total
        # A busy thread: 99%. One that mostly sleeps has a few hundred samples, of
        # which its start's (the bridge's, before its own events: no record) are more.
        want_py = 0.99 if total >= 1000 else 0.95
        if with_py < want_py * total_py:
            fail("thread %s: %d of %d samples carry a Python stack (want %d%%)"
                 % (name, with_py, total_py, 100 * want_py))
        worst, worst_fn = 0.0, ""
        for fn, ns in t["functions"].items():
            want = 100.0 * ns / t["cpu_ns"]
            got = 100.0 * sum(n for n, f in rows if any(x == fn and fl == script for x, fl, _ in f)) / total
            # The main thread's, to the 1 point. The others run in short
            # bursts between sleeps, and per-thread cpu-clock events sample such
            # threads short of their CPU time (0.7-0.9 of it, with or without
            # Python stacks: status says so): their shares are shown, not checked.
            if name == "MainThread" and abs(got - want) > a.share_tol:
                fail("thread %s (%d samples): %s has %.1f%% of the samples, the program measured %.1f%% "
                     "(tolerance %.1f points)" % (name, total, fn, got, want, a.share_tol))
            if abs(got - want) >= worst:
                worst, worst_fn = abs(got - want), fn
        figures.append("%s %d samples, %.2f%% with Python, worst share error %.2f points (%s)%s"
                       % (name, total, 100.0 * with_py / total_py, worst, worst_fn,
                          "" if name == "MainThread" else " (not checked)"))

    rows = [r for v in per.values() for r in v]
    # Python callers, and names.
    wrong = {}
    py_frames = 0
    for n, f in rows:
        py = [(x, line) for x, fl, line in f if fl == script]
        py_frames += len(py) * n
        for x, _ in py:
            if x not in FUNCS:
                fail("a Python frame names %r, which the program does not define" % x)
        for i, (x, _) in enumerate(py[:-1]):
            if x in CALLERS and py[i + 1][0] not in CALLERS[x]:
                wrong.setdefault((x, py[i + 1][0]), 0)
                wrong[(x, py[i + 1][0])] += n
    checked = sum(n for n, f in rows if any(fl == script for _, fl, _ in f))
    if sum(wrong.values()) > 0.001 * checked:
        fail("wrong Python callers: %s" % sorted(wrong.items(), key=lambda x: -x[1])[:5])

    # shared() split between its callers.
    split = {"caller_one": 0, "caller_two": 0}
    for n, f in rows:
        py = [x for x, fl, _ in f if fl == script]
        if "shared" in py and py.index("shared") + 1 < len(py):
            c = py[py.index("shared") + 1]
            if c in split:
                split[c] += n
    c_truth = truth["callers"]
    want = 100.0 * c_truth["caller_two"] / (c_truth["caller_one"] + c_truth["caller_two"])
    got = 100.0 * split["caller_two"] / max(1, sum(split.values()))
    if abs(got - want) > a.split_tol:
        fail("shared() under caller_two: %.1f%% of its samples, the program measured %.1f%% "
             "(tolerance %.0f points)" % (got, want, a.split_tol))
    figures.append("shared() under caller_two %.1f%% (truth %.1f%%)" % (got, want))

    # recursion: bottom() has exactly 51 recurse frames under it.
    deep = [(n, f) for n, f in rows if any(x == "bottom" for x, _, _ in f)]
    for n, f in deep:
        k = sum(1 for x, fl, _ in f if x == "recurse" and fl == script)
        if k != 51:
            fail("a sample of bottom() has %d recurse frames under it, not 51" % k)
    if not deep:
        fail("no sample of bottom()")

    # C code under its Python caller.
    native = [(n, f) for n, f in rows
              if any(x.startswith(("deflate", "libz.so", "zlib", "SHA256", "sha256", "_sha256", "libcrypto"))
                     or "sha256" in x.lower() for x, _, _ in f)]
    n_native = sum(n for n, _ in native)
    if n_native < 20:
        fail("only %d samples in zlib's or hashlib's C code" % n_native)
    # (A sample without a Python stack at all is counted by the 99% above.)
    # (An import runs hashlib's C code too: the host tier sees the program's
    # start, whose imports' frames are importlib's, <frozen importlib._bootstrap>.)
    native = [(n, f) for n, f in native if not any(fl.startswith("<frozen importlib") for _, fl, _ in f)]
    orphans = sum(n for n, f in native
                  if any(fl == script for _, fl, _ in f) and not any(x == "squeeze" and fl == script for x, fl, _ in f))
    # (As the callers above: a tenth of a percent allowed. The host tier's runs
    # saw one such sample in about 2,000 once, cause not found: see the notes.)
    if orphans > 0.001 * n_native:
        first = [f for _, f in native
                 if any(fl == script for _, fl, _ in f) and not any(x == "squeeze" and fl == script for x, fl, _ in f)][0]
        fail("%d of %d samples in zlib's or hashlib's C code are not under squeeze(), as %s"
             % (orphans, n_native, ";".join(x for x, _, _ in reversed(first))))
    figures.append("%d samples in zlib/hashlib C code, %s under squeeze()"
                   % (n_native, "all" if not orphans else "all but %d" % orphans))

    # generator under its consumer: checked with the callers; and present.
    if not any("produce" in (x for x, _, _ in f) for _, f in rows):
        fail("no sample of the generator produce()")

    # the hot line.
    hot = {}
    for n, f in rows:
        py = [(x, line) for x, fl, line in f if fl == script]
        if py and py[0][0] == "hot_line":
            hot[py[0][1]] = hot.get(py[0][1], 0) + n
    n_hot = sum(hot.values())
    # (The loop's own line, the for, takes its part too: about a tenth.)
    if n_hot < 20 or hot.get(truth["hot_line"], 0) < 0.75 * n_hot:
        fail("hot_line()'s samples by line: %s; the marked line is %d" % (hot, truth["hot_line"]))
    figures.append("hot_line() on its line %d in %d of %d samples" % (truth["hot_line"], hot[truth["hot_line"]], n_hot))
    figures.append("truth by %s" % truth.get("clock", "thread_time"))
    print("; ".join(figures))


if __name__ == "__main__":
    main()
