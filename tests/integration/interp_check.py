#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks an interpreter's profile against the program's own times: PHP's
(php/shares.php), Ruby's (ruby/shares.rb) or Perl's (perl/shares.pl).

  interp_check.py LANG cpu PROFILE TRUTH.json SCRIPT   the CPU profile
  interp_check.py LANG off PROFILE TRUTH.json          the off-CPU profile

LANG is php, ruby or perl. The profile is read with `go tool pprof -raw`
(pprofraw.py). cpu: at least 95% of the samples carry a frame of the
language; the shares of beta (with alpha under it), the class's method
and the closure (and Ruby's block in a module's method) within 2 points of
the program's own measurement; alpha's callers beta and the main script's
frame, the others' the main frame (the block's its method), in
at least 98% of their samples; each function's file the script, its
lines inside its body. off: the function that waited (PHP's usleep,
Ruby's Kernel#sleep, Perl's main::nap) under the main frame, its time
within 5% of the program's.
"""
import json
import re
import sys

import pprofraw

# Per language: its frames' names, the program's names for the three
# places (truth key -> the innermost frame's name), beta's frame, the main
# frame, the waiting function, and how each function's body is found in
# the script (its first line's text, its closing line).
LANGS = {
    "php": {
        "beta": "beta",
        "main": "{main}",
        "places": {"beta": "alpha", "Shape::area": "Shape::area", "{closure}": "{closure}"},
        "frames": {"wait_for_go"},
        "sleep": ("usleep", "usleep"),
        "bodies": {"alpha": ("function alpha(", "}"), "Shape::area": ("function area(", "    }"),
                   "{closure}": ("= function (", "};")},
    },
    "ruby": {  # named as Ruby 3.4's backtraces write them (3.1's say area, block in twice)
        "beta": "Object#beta",
        "main": "<main>",
        "places": {"beta": "Object#alpha", "Shape#area": "Shape#area", "block": "block in <main>",
                   "Geometry.twice": "block in Geometry.twice"},
        "callers": {"block in Geometry.twice": "Geometry.twice"},
        "frames": {"Geometry.twice", "Object#wait_for_go"},
        "sleep": ("Kernel#sleep", "sleep"),
        "bodies": {"Object#alpha": ("def alpha(", "end"), "Shape#area": ("  def area(", "  end"),
                   "block in <main>": ("= lambda do", "end"),
                   "block in Geometry.twice": (".each do |m|", "    end")},
    },
    "perl": {
        "beta": "main::beta",
        "main": "main::RUNTIME",
        "places": {"beta": "main::alpha", "Shape::area": "Shape::area", "closure": "main::__ANON__"},
        "sleep": ("main::nap", "sleep"),
        "bodies": {"main::alpha": ("sub alpha {", "}"), "Shape::area": ("sub area {", "}"),
                   "main::__ANON__": ("= sub {", "};")},
    },
}
L = None


def names():
    return set(L["places"].values()) | {L["beta"], L["main"], L["sleep"][0]} | L.get("frames", set())


def lang_frames(p, s):
    """The sample's frames of the language, innermost first: (function, file, line)."""
    out = []
    want = names()
    for lid in s.loc_ids:
        loc = p.locations[lid]
        if loc.mapping is not None:
            continue  # native (libc's sleep is no frame of the language)
        for fn, file, line in loc.lines:
            if fn in want:
                out.append((fn, file, line))
    return out


def body_lines(script):
    """Each function's (declaration line, closing line) in the script."""
    text = open(script).read().split("\n")
    spans = {}
    for fn, (head, close) in L["bodies"].items():
        lo = next(i for i, t in enumerate(text, 1) if head in t)
        hi = next(i for i, t in enumerate(text, 1) if i > lo and t == close)
        spans[fn] = (lo, hi)
    return spans


def cpu(path, truth_path, script):
    p = pprofraw.load(path)
    truth = json.load(open(truth_path))
    vi = p.value_index("samples")
    total = sum(s.values[vi] for s in p.samples)
    with_lang, inner, callers, lines = 0, {}, {}, {}
    key_of = {inner_fn: key for key, inner_fn in L["places"].items()}
    key_of[L["beta"]] = "beta"  # (its own time, between its two calls)
    for s in p.samples:
        v = s.values[vi]
        fr = lang_frames(p, s)
        if not fr:
            continue
        with_lang += v
        fn = fr[0][0]
        top = key_of.get(fn)
        if top:
            inner[top] = inner.get(top, 0) + v
        caller = fr[1][0] if len(fr) > 1 else None
        if fn == L["places"]["beta"]:  # and beta's own caller
            caller = ";".join(f[0] for f in fr[1:3])
        c = callers.setdefault(fn, {})
        c[caller] = c.get(caller, 0) + v
        lines.setdefault(fn, []).append((fr[0][1], fr[0][2]))
    bad = []
    print("samples %d, with a %s frame %d (%.1f%%)" % (total, LANG, with_lang, 100.0 * with_lang / max(total, 1)))
    if with_lang < 0.95 * total:
        bad.append("fewer than 95% of the samples have a %s frame" % LANG)
    cpu_truth = {k: truth[k] for k in L["places"]}
    tsum = sum(cpu_truth.values())
    psum = sum(inner.get(k, 0) for k in cpu_truth)
    for k, t in cpu_truth.items():
        want, got = 100.0 * t / tsum, 100.0 * inner.get(k, 0) / max(psum, 1)
        ok = abs(want - got) <= 2.0
        print("%-12s program %5.1f%%  profile %5.1f%%  %s" % (k, want, got, "ok" if ok else "OFF"))
        if not ok:
            bad.append("%s's share %.1f%%, the program measured %.1f%%" % (k, got, want))
    m = L["main"]
    alpha = L["places"]["beta"]
    for fn, want in [(f, L["beta"] + ";" + m if f == alpha else L.get("callers", {}).get(f, m))
                     for f in L["places"].values()]:
        c = callers.get(fn, {})
        n = sum(c.values())
        right = c.get(want, 0)
        print("caller of %s: %s" % (fn, c))
        if n == 0 or right < 0.98 * n:
            bad.append("%s's caller is %s in %d of %d samples" % (fn, want, right, n))
    spans = body_lines(script)
    for fn in L["places"].values():
        lo, hi = spans[fn]
        got = lines.get(fn, [])
        # (its first line too: a block's parameters, a method's arguments are read there)
        inside = sum(1 for f, l in got if f == script and lo <= l <= hi)
        print("lines of %s: %d of %d in %s:%d-%d" % (fn, inside, len(got), script, lo, hi))
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
    fn, key = L["sleep"]
    for s in p.samples:
        fr = lang_frames(p, s)
        if len(fr) >= 2 and fr[0][0] == fn and fr[1][0] == L["main"]:
            slept += s.values[vi]
    want = truth[key]
    print("%s under %s: profile %.3f s, program %.3f s" % (fn, L["main"], slept / 1e9, want / 1e9))
    if abs(slept - want) > 0.05 * want:
        return ["%s's off-CPU time %.3f s, the program measured %.3f s" % (fn, slept / 1e9, want / 1e9)]
    return []


def main():
    global L, LANG
    LANG = sys.argv[1]
    L = LANGS[LANG]
    bad = cpu(*sys.argv[3:6]) if sys.argv[2] == "cpu" else off(*sys.argv[3:5])
    for b in bad:
        print("FAIL:", b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
