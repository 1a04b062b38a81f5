#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks a profile of v8_shares.js against the program's own measurements.

  v8_check.py PROFILE TRUTH --file PATH [--pid PID] [--tolerance POINTS]
              [--split-tolerance X] [--min-named F]

Of the main thread's samples (thread PID, by default the first sample's
process) whose stack holds one of the leaves (alpha,
beta, gamma; the innermost of them counts), each leaf's share must be
within POINTS of its share of the measured time; alpha's samples split
between its callers (the nearest outerA or outerB rootward of it) as the
measured time does, within X of the measured ratio A/(A+B); at least F of
the thread's samples must carry a leaf (the program's time is all in
them); and each leaf's frame must name the file and the line its
function starts at. Prints what it found, one line a check; exits 1 on
failure.
"""

import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pprofraw  # noqa: E402

LEAVES = ("alpha", "beta", "gamma")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("truth")
    ap.add_argument("--tolerance", type=float, default=2.0)
    ap.add_argument("--split-tolerance", type=float, default=0.3)
    ap.add_argument("--min-named", type=float, default=0.9)
    ap.add_argument("--file", required=True)
    ap.add_argument("--pid", type=int, help="the program's (default: the first sample's)")
    a = ap.parse_args()

    truth = json.load(open(a.truth))
    p = pprofraw.load(a.profile)
    vi = p.value_index("samples")
    by = collections.Counter()
    split = collections.Counter()
    main_total = 0
    pid = a.pid
    for s in p.samples:
        pid = pid or (s.numlabels.get("pid") or [None])[0]
        if s.thread_id() != pid and pid is not None:
            continue
        main_total += s.values[vi]
        leaf = next((f for f in s.stack if f in LEAVES), None)
        if not leaf:
            continue
        by[leaf] += s.values[vi]
        if leaf == "alpha":
            i = s.stack.index("alpha")
            caller = next((f for f in s.stack[i + 1:] if f in ("outerA", "outerB")), "(none)")
            split[caller] += s.values[vi]
    bad = []
    named = sum(by.values())
    want_total = sum(truth["functions"].values())
    frac = named / main_total if main_total else 0
    print("named: %d of %d main-thread samples carry a leaf (%.3f, at least %.2f)" % (
        named, main_total, frac, a.min_named))
    if frac < a.min_named:
        bad.append("named")
    for f in LEAVES:
        got = 100.0 * by[f] / named if named else 0
        want = 100.0 * truth["functions"][f] / want_total
        ok = abs(got - want) <= a.tolerance
        print("%-6s profile %5.1f%%  measured %5.1f%%  %s" % (f, got, want, "ok" if ok else "FAIL"))
        if not ok:
            bad.append(f)
    sa = split["outerA"] + split["outerB"]
    got = split["outerA"] / sa if sa else 0
    ta, tb = truth["callers"]["outerA;alpha"], truth["callers"]["outerB;alpha"]
    want = ta / (ta + tb)
    ok = abs(got - want) <= a.split_tolerance and split["(none)"] <= 0.02 * by["alpha"]
    print("alpha's callers: %s, outerA %.3f, measured %.3f  %s" % (
        dict(split), got, want, "ok" if ok else "FAIL"))
    if not ok:
        bad.append("split")
    # File and line: each leaf's location names the program and its function's first line.
    src = open(a.file).read().split("\n")
    first = {}
    for i, line in enumerate(src):
        m = re.match(r"(?:function (\w+)\(|const (\w+) = \()", line)
        if m:
            first[m.group(1) or m.group(2)] = i + 1
    lines = collections.defaultdict(set)
    for loc in p.locations.values():
        for name, file, line in loc.lines:
            lines[name].add((file, line))
    for f in LEAVES:
        got = sorted(lines.get(f, ()))
        ok = got == [(a.file, first[f])]
        print("%-6s at %s, want %s:%d  %s" % (f, got, a.file, first[f], "ok" if ok else "FAIL"))
        if not ok:
            bad.append(f + " line")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
