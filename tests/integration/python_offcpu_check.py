#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check an off-CPU profile of tests/workloads/python/waits.py against what
the program measured of itself (its TRUTH file).

    python_offcpu_check.py PROFILE TRUTH [--tol F] [--host]

Checks, exit 1 at the first that fails:
  * each thread's off-CPU time: at least --min-python (0.90) of it (by
    weight) has a Python frame of the program's file (--host: of the
    samples whose stacks hold the interpreter's eval loop). The rest is the
    main thread's wait for GO before the agent had read its interpreter
    (0.15 s of time.sleep at module level in a run beside the suite, 0.2 s
    under ASan: up to 5% of its time); the waits of the run itself are
    checked function by function below;
  * each waiting function's off-CPU time within --tol (a fraction, 0.06
    by default) of the wall time the program measured in it: waits of 3-8
    ms, each longer than the 1 ms period, are kept whole;
  * nap() split between its callers within 3 points of the program's split
    (a quarter under caller_one, three under caller_two), and no other
    Python caller of any of its functions;
  * the native frames of the wait (the C library's sleep, futex or read)
    leafward of the Python function that waited, in 95% of its weight.
Prints one line of figures.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pprofraw  # noqa: E402
from pprofraw import fail  # noqa: E402
from python_check import is_python_file  # noqa: E402

CALLERS = {"nap": {"caller_one", "caller_two"}, "caller_one": {"outer"},
           "caller_two": {"outer"}, "outer": {"run"}, "wait_event": {"run"},
           "read_pipe": {"run"}, "run": {"<module>", "Thread.run", "run"}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("truth")
    ap.add_argument("--tol", type=float, default=0.06)
    ap.add_argument("--host", action="store_true")
    ap.add_argument("--min-python", type=float, default=0.90)
    a = ap.parse_args()
    truth = json.load(open(a.truth))
    script = truth["file"]
    p = pprofraw.load(a.profile)
    by_tid = {t["tid"]: (name, t) for name, t in truth["threads"].items()}
    per = pprofraw.lines_by_thread(p, "off-cpu")  # tid -> [(ns, frames leaf first)]

    figures = []
    for tid, (name, t) in sorted(by_tid.items()):
        rows = per.get(tid, [])
        if a.host:
            rows = [(n, f) for n, f in rows
                    if any(x == "_PyEval_EvalFrameDefault" or is_python_file(fl) for x, fl, _ in f)]
        total = sum(n for n, _ in rows)
        if total < 0.5 * t["wall_ns"]:
            fail("thread %s (%d): %.0f ms off-CPU in the profile, of %.0f ms it ran"
                 % (name, tid, total / 1e6, t["wall_ns"] / 1e6))
        with_py = sum(n for n, f in rows if any(fl == script for _, fl, _ in f))
        if with_py < a.min_python * total:
            without = {}
            for n, f in rows:
                if not any(fl == script for _, fl, _ in f):
                    k = ";".join(x for x, _, _ in reversed(f[:12]))
                    without[k] = without.get(k, 0) + n
            top = sorted(without.items(), key=lambda kv: -kv[1])[0]
            fail("thread %s: %.1f%% of its off-CPU time has a Python frame of the program (want %.0f%%); "
                 "the most without: %.0f ms in %s" % (name, 100.0 * with_py / total, 100 * a.min_python,
                                                      top[1] / 1e6, top[0]))
        errs = []
        for fn, ns in t["functions"].items():
            got = sum(n for n, f in rows if any(x == fn and fl == script for x, fl, _ in f))
            if abs(got - ns) > a.tol * ns:
                fail("thread %s: %s() waited %.0f ms in the profile, the program measured %.0f ms "
                     "(tolerance %.0f%%)" % (name, fn, got / 1e6, ns / 1e6, 100 * a.tol))
            errs.append("%s %.1f%%" % (fn, 100.0 * (got - ns) / ns))
            # The wait's own native frames lie leafward of the Python function.
            under = 0
            for n, f in rows:
                idx = [i for i, (x, fl, _) in enumerate(f) if x == fn and fl == script]
                if idx and any(not is_python_file(fl) and not x.startswith("_Py")
                               for x, fl, _ in f[:idx[0]]):
                    under += n
            if under < 0.95 * got:
                fail("thread %s: only %.1f%% of %s()'s off-CPU time has native frames leafward of it"
                     % (name, 100.0 * under / max(1, got), fn))
        figures.append("%s %.0f ms off-CPU, %.2f%% with Python (%s)"
                       % (name, total / 1e6, 100.0 * with_py / total, ", ".join(errs)))

    rows = [r for v in per.values() for r in v]
    wrong = 0
    split = {"caller_one": 0, "caller_two": 0}
    for n, f in rows:
        py = [x for x, fl, _ in f if fl == script]
        for i, x in enumerate(py[:-1]):
            if x in CALLERS and py[i + 1] not in CALLERS[x]:
                wrong += n
        if "nap" in py and py.index("nap") + 1 < len(py) and py[py.index("nap") + 1] in split:
            split[py[py.index("nap") + 1]] += n
    if wrong > 0.001 * sum(n for n, _ in rows):
        fail("%.0f ms of off-CPU time under a wrong Python caller" % (wrong / 1e6))
    c = truth["nap_callers"]
    want = 100.0 * c["caller_two"] / (c["caller_one"] + c["caller_two"])
    got = 100.0 * split["caller_two"] / max(1, sum(split.values()))
    if abs(got - want) > 3:
        fail("nap() under caller_two: %.1f%% of its off-CPU time, the program measured %.1f%%" % (got, want))
    figures.append("nap() under caller_two %.1f%% (truth %.1f%%)" % (got, want))
    print("; ".join(figures))


if __name__ == "__main__":
    main()
