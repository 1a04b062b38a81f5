#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks a PHP program's profile (php/shares.php) against its own times.

  php_check.py cpu PROFILE TRUTH.json SCRIPT   the CPU profile
  php_check.py off PROFILE TRUTH.json          the off-CPU profile

The profile is read with `go tool pprof -raw` (pprofraw.py). cpu: at
least 95% of the samples carry a PHP frame; the shares of beta (with
alpha under it), Shape::area and {closure} within 2 points of the
program's own measurement; alpha's PHP callers beta and {main}, the others' {main},
in at least 98% of their samples; each function's file the script, its
lines inside its body. off: usleep (the internal
function that waited) under {main}, its time within 5% of the program's.
"""
import json
import re
import sys

import pprofraw

PHP = {"alpha", "beta", "Shape::area", "{closure}", "{main}", "usleep"}


def php_frames(p, s):
    """The sample's PHP frames, innermost first: (function, file, line)."""
    out = []
    for lid in s.loc_ids:
        loc = p.locations[lid]
        if loc.mapping is not None:
            continue  # native (libc's usleep is no PHP frame)
        for fn, file, line in loc.lines:
            if fn in PHP:
                out.append((fn, file, line))
    return out


def body_lines(script):
    """Each function's (declaration line, closing line) in the script."""
    text = open(script).read().split("\n")
    decl = {"alpha": ("function alpha(", "}"), "Shape::area": ("function area(", "    }"),
            "{closure}": ("= function (", "};")}
    spans = {}
    for fn, (head, close) in decl.items():
        lo = next(i for i, t in enumerate(text, 1) if head in t)
        hi = next(i for i, t in enumerate(text, 1) if i > lo and t == close)
        spans[fn] = (lo, hi)
    return spans


def cpu(path, truth_path, script):
    p = pprofraw.load(path)
    truth = json.load(open(truth_path))
    vi = p.value_index("samples")
    total = sum(s.values[vi] for s in p.samples)
    with_php, inner, callers, lines = 0, {}, {}, {}
    for s in p.samples:
        v = s.values[vi]
        fr = php_frames(p, s)
        if not fr:
            continue
        with_php += v
        fn = fr[0][0]
        top = "beta" if fn == "alpha" else fn
        inner[top] = inner.get(top, 0) + v
        caller = fr[1][0] if len(fr) > 1 else None
        if fn == "alpha":  # and beta's own caller
            caller = ";".join(f[0] for f in fr[1:3])
        c = callers.setdefault(fn, {})
        c[caller] = c.get(caller, 0) + v
        lines.setdefault(fn, []).append((fr[0][1], fr[0][2]))
    bad = []
    print("samples %d, with a PHP frame %d (%.1f%%)" % (total, with_php, 100.0 * with_php / max(total, 1)))
    if with_php < 0.95 * total:
        bad.append("fewer than 95% of the samples have a PHP frame")
    cpu_truth = {k: truth[k] for k in ("beta", "Shape::area", "{closure}")}
    tsum = sum(cpu_truth.values())
    psum = sum(inner.get(k, 0) for k in cpu_truth)
    for k, t in cpu_truth.items():
        want, got = 100.0 * t / tsum, 100.0 * inner.get(k, 0) / max(psum, 1)
        ok = abs(want - got) <= 2.0
        print("%-12s program %5.1f%%  profile %5.1f%%  %s" % (k, want, got, "ok" if ok else "OFF"))
        if not ok:
            bad.append("%s's share %.1f%%, the program measured %.1f%%" % (k, got, want))
    for fn, want in (("alpha", "beta;{main}"), ("Shape::area", "{main}"), ("{closure}", "{main}")):
        c = callers.get(fn, {})
        n = sum(c.values())
        right = c.get(want, 0)
        print("caller of %s: %s" % (fn, c))
        if n == 0 or right < 0.98 * n:
            bad.append("%s's caller is %s in %d of %d samples" % (fn, want, right, n))
    spans = body_lines(script)
    for fn in ("alpha", "Shape::area", "{closure}"):
        lo, hi = spans[fn]
        got = lines.get(fn, [])
        inside = sum(1 for f, l in got if f == script and lo < l <= hi)
        print("lines of %s: %d of %d in %s:%d-%d" % (fn, inside, len(got), script, lo + 1, hi))
        if not got or inside < 0.95 * len(got):
            bad.append("%s's lines are not its body's: %s" % (fn, sorted(set(got))[:5]))
    return bad


def off(path, truth_path):
    p = pprofraw.load(path)
    truth = json.load(open(truth_path))
    vi = len(p.sample_types) - 1
    for i, (t, u) in enumerate(p.sample_types):
        if u == "nanoseconds":
            vi = i
    slept = 0
    for s in p.samples:
        fr = php_frames(p, s)
        if len(fr) >= 2 and fr[0][0] == "usleep" and fr[1][0] == "{main}":
            slept += s.values[vi]
    want = truth["usleep"]
    print("usleep under {main}: profile %.3f s, program %.3f s" % (slept / 1e9, want / 1e9))
    if abs(slept - want) > 0.05 * want:
        return ["usleep's off-CPU time %.3f s, the program measured %.3f s" % (slept / 1e9, want / 1e9)]
    return []


def main():
    bad = cpu(*sys.argv[2:5]) if sys.argv[1] == "cpu" else off(*sys.argv[2:4])
    for b in bad:
        print("FAIL:", b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
