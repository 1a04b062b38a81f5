#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Summarize tests/bench/overhead.sh's windows into JSON (stdout).

Input lines: "TOOL HZ THREADS ON... / OFF..." where every window is
"WALL:CPU" (spin's iterations per second and per CPU second of spin), with
one more off window than on windows (off, on, off, ..., on, off).  Each on
window is divided by the mean of the two off windows around it; the median
of those ratios is the figure, so drift of the machine cancels.

Usage: overhead-summary.py LINES WINDOW_SECONDS PAIRS
"""
import json
import statistics
import sys


def ratios(ons, offs):
    return [on / ((offs[i] + offs[i + 1]) / 2) for i, on in enumerate(ons) if offs[i] + offs[i + 1] > 0]


def rnd(x, n=4):
    return round(x, n) if x is not None else None


def main(path, window, pairs):
    out = []
    for line in open(path):
        head, _, tail = line.partition(" / ")
        f = head.split()
        tool, hz, threads = f[0], int(f[1]), int(f[2])
        ons = [tuple(float(v) for v in x.split(":")) for x in f[3:]]
        offs = [tuple(float(v) for v in x.split(":")) for x in tail.split()]
        r = {"tool": tool, "rate_hz": hz, "threads": threads, "window_s": window, "pairs": pairs,
             "on_wall": [o[0] for o in ons], "off_wall": [o[0] for o in offs]}
        for kind, i in (("wall", 0), ("cpu", 1)):
            rs = ratios([o[i] for o in ons], [o[i] for o in offs])
            med = statistics.median(rs) if rs else None
            r[kind + "_ratios"] = [rnd(x) for x in rs]
            r[kind + "_median_ratio"] = rnd(med)
            r[kind + "_loss_pct"] = rnd(100 * (1 - med), 2) if med is not None else None
            r[kind + "_ratio_min"] = rnd(min(rs)) if rs else None
            r[kind + "_ratio_max"] = rnd(max(rs)) if rs else None
        out.append(r)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))
