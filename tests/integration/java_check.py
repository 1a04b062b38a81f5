#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check a CPU profile of tests/workloads/java/Shares.java against what the
program measured of itself (its TRUTH file).

    java_check.py PROFILE TRUTH [--callers | --no-frame-pointers]

Checks, exit 1 at the first that fails:
  * at most 5% of the main thread's samples have their leaf in JIT code not
    named (an [anon]+0x... frame; code compiled after the JVM's last answer
    is named at the next, callers included), and at least 90% a Shares method named (its
    compiled code named from the JVM's perf map; the rest are the clock
    reads that measure it, native code that without frame pointers is not
    unwound back into Java);
  * no stack has a Shares method at its root: one not unwound past a
    compiled method (no frame pointer there) ends at [truncated];
  * with --callers (frame pointers kept: -XX:+PreserveFramePointer, or
    every method interpreted: -Xint):
    alpha(), beta() and shared() within 5 points of their measured shares,
    and shared() split between callerOne() and callerTwo() within 10
    points of the measured split;
  * with --inlined (the JVM's code cache read, methods inlined): work()
    right below each of alpha(), beta() and shared() in at least 80% of
    its samples, whether it was inlined there or not;
  * with --no-frame-pointers (the JVM's default, its perf map only): every stack ends at
    [truncated] right below its first Shares method, which is compiled
    code that keeps no frame pointer: no caller is guessed (main() aside:
    it may still run in the interpreter, which keeps its frame pointer).
Prints one line of figures.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pprofraw  # noqa: E402
from pprofraw import fail  # noqa: E402


def method(name):
    """'void Shares.shared(java.lang.String)' -> 'shared'; None for others."""
    at = name.find("Shares.")
    if at < 0:
        return None
    return name[at + len("Shares."):].split("(")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("truth")
    ap.add_argument("--callers", action="store_true")
    ap.add_argument("--no-frame-pointers", action="store_true")
    ap.add_argument("--inlined", action="store_true")
    a = ap.parse_args()
    truth = json.load(open(a.truth))
    rows = pprofraw.lines_by_thread(pprofraw.load(a.profile)).get(truth["tid"], [])
    total = sum(n for n, _ in rows)
    if total < 200:
        fail("the main thread has %d samples, too few" % total)
    # Each sample's Shares methods, leaf first.
    stacks = [(n, [m for m in (method(f) for f, _, _ in lines) if m]) for n, lines in rows]
    named = sum(n for n, ms in stacks if ms)
    rooted = sum(n for n, lines in rows if lines and method(lines[-1][0]))
    if rooted:
        fail("%d samples have a Shares method at their root, not [truncated] or the thread's entry"
             % rooted)
    leaf = sum(n for n, lines in rows if lines and lines[0][0].startswith("[anon]+"))
    unnamed = sum(n for n, lines in rows if any(f.startswith("[anon]+") for f, _, _ in lines))
    figures = ["%d of %d samples of the main thread in a named Shares method; %d with their leaf in "
               "JIT code not named, %d with such a frame" % (named, total, leaf, unnamed)]
    if named < 0.9 * total or leaf > 0.05 * total:
        fail(figures[0] + " (want 90% named, 5% leaves unnamed at most)")
    if a.callers:
        for fn, ns in truth["functions"].items():
            want = 100.0 * ns / truth["cpu_ns"]
            got = 100.0 * sum(n for n, ms in stacks if fn in ms) / total
            if abs(got - want) > 5:
                fail("%s() has %.1f%% of the samples, the program measured %.1f%%" % (fn, got, want))
            figures.append("%s %.1f%% (truth %.1f%%)" % (fn, got, want))
        split = {"callerOne": 0, "callerTwo": 0}
        for n, ms in stacks:
            if "shared" in ms and ms.index("shared") + 1 < len(ms) and ms[ms.index("shared") + 1] in split:
                split[ms[ms.index("shared") + 1]] += n
        c = truth["callers"]
        want = 100.0 * c["callerTwo"] / (c["callerOne"] + c["callerTwo"])
        got = 100.0 * split["callerTwo"] / max(1, sum(split.values()))
        if abs(got - want) > 10:
            fail("shared() under callerTwo in %.1f%% of its samples, the program measured %.1f%%"
                 % (got, want))
        figures.append("shared() under callerTwo %.1f%% (truth %.1f%%)" % (got, want))
    if a.inlined:
        for fn in ("alpha", "beta", "shared"):
            mine = sum(n for n, ms in stacks if fn in ms)
            under = sum(n for n, ms in stacks if fn in ms and ms.index(fn) > 0 and ms[ms.index(fn) - 1] == "work")
            figures.append("work() below %s() in %d of its %d samples" % (fn, under, mine))
            if under < 0.8 * mine:
                fail(figures[-1])
    if a.no_frame_pointers:
        ended = guessed = 0
        for n, lines in rows:
            at = next((i for i, (f, _, _) in enumerate(lines) if method(f)), None)
            if at is None or method(lines[at][0]) == "main":
                continue
            if at + 1 < len(lines) and lines[at + 1][0] == "[truncated]":
                ended += n
            else:
                guessed += n
        figures.append("%d samples end at [truncated] below their first Shares method, %d go on"
                       % (ended, guessed))
        if guessed or ended < 0.9 * named:
            fail(figures[-1])
    print("; ".join(figures))


if __name__ == "__main__":
    main()
