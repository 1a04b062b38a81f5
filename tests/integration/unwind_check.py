#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks a folded profile (agentctl dump --format folded) for exact stacks.

  callers FOLDED LEAF CALLER_RE [--truth JSON] [--weights K=W,...]
          [--min-caller-share 0.98] [--tolerance 1.5]
      Of the samples whose leaf is LEAF, at least --min-caller-share must
      have a frame matching CALLER_RE right below it; the callers' shares
      of those samples must lie within --tolerance points of the truth
      (the workload's measured {"callers": {name: share}} JSON, or fixed
      weights).
  root FOLDED FRAME[,FRAME...] [--min-share 0.98] [--ignore-leaf RE]
      At least --min-share of the samples must have every FRAME on their
      stack (samples whose leaf matches --ignore-leaf are not counted).
  has FOLDED PATTERN [--min-share S]
      At least S of the samples (and at least one) have PATTERN (a
      regular expression) in their ';'-joined stack.
Prints one line of figures; exits 1 (with the reason) when a check fails.
"""
import argparse, collections, json, re, sys


def load(path):
    out = []
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, n = line.rsplit(" ", 1)
        out.append((stack.split(";"), int(n)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd")
    ap.add_argument("folded")
    ap.add_argument("args", nargs="*")
    ap.add_argument("--truth")
    ap.add_argument("--weights")
    ap.add_argument("--min-caller-share", type=float, default=0.98)
    ap.add_argument("--tolerance", type=float, default=1.5)
    ap.add_argument("--min-share", type=float, default=0.98)
    ap.add_argument("--ignore-leaf")
    ap.add_argument("--startup-ok", action="store_true",
                    help="root: set aside the process's start, which runs before libc's entry")
    a = ap.parse_args()
    rows = load(a.folded)
    if a.cmd == "callers":
        leaf, caller_re = a.args[0], re.compile(a.args[1])
        total = 0
        by = collections.Counter()
        wrong = collections.Counter()
        for fr, n in rows:
            if fr[-1] != leaf:
                continue
            total += n
            if len(fr) > 1 and caller_re.fullmatch(fr[-2]):
                by[fr[-2]] += n
            else:
                wrong[";".join(fr[-3:])] += n
        if total == 0:
            sys.exit(f"no sample has {leaf} as its leaf")
        right = sum(by.values())
        if a.truth:
            want = json.load(open(a.truth))["callers"]
        else:
            w = {k: float(v) for k, v in (x.split("=") for x in a.weights.split(","))}
            s = sum(w.values())
            want = {k: v / s for k, v in w.items()}
        errs = {k: 100 * by[k] / right - 100 * v if right else 100.0 for k, v in want.items()}
        worst = max(errs.items(), key=lambda kv: abs(kv[1]))
        print(f"{leaf}: {total} samples, {100 * right / total:.2f}% with a known caller; "
              f"worst caller share error {worst[1]:+.2f} points ({worst[0]}); "
              + ", ".join(f"{k} {100 * by[k] / max(right, 1):.1f}% (truth {100 * v:.1f}%)"
                          for k, v in sorted(want.items())))
        if right < a.min_caller_share * total:
            sys.exit(f"only {right} of {total} {leaf} samples show their caller; "
                     f"most common wrong stacks: {wrong.most_common(3)}")
        if abs(worst[1]) > a.tolerance:
            sys.exit(f"caller {worst[0]}'s share is {worst[1]:+.2f} points off the truth "
                     f"(tolerance {a.tolerance})")
    elif a.cmd == "root":
        frames = a.args[0].split(",")
        ign = re.compile(a.ignore_leaf) if a.ignore_leaf else None
        total = ok = startup = 0
        bad = collections.Counter()
        for fr, n in rows:
            if ign and ign.fullmatch(fr[-1]):
                continue
            # exec and the dynamic loader's own start (_dl_start, relocation) run before
            # libc's entry: whole stacks that cannot reach it.
            if a.startup_ok and (fr[0].startswith("ld-linux") or fr[0] == "_dl_start"
                                 or "execve" in fr[:2]):
                startup += n
                continue
            total += n
            if all(f in fr for f in frames):
                ok += n
            else:
                bad[";".join(fr[:3]) + ";...;" + fr[-1]] += n
        if total == 0:
            sys.exit("no samples")
        print(f"{ok} of {total} samples ({100 * ok / total:.2f}%) reach {', '.join(frames)}"
              + (f" ({startup} of the process's start set aside)" if startup else ""))
        if ok < a.min_share * total:
            sys.exit(f"only {100 * ok / total:.2f}% reach {frames}; e.g. {bad.most_common(3)}")
    elif a.cmd == "has":
        pat = re.compile(a.args[0])
        total = sum(n for _, n in rows)
        hit = sum(n for fr, n in rows if pat.search(";".join(fr)))
        print(f"{hit} of {total} samples match {a.args[0]}")
        if hit == 0 or hit < a.min_share * total:
            sys.exit(f"only {hit} of {total} samples match {a.args[0]}")
    else:
        sys.exit(f"unknown command {a.cmd}")


if __name__ == "__main__":
    main()
