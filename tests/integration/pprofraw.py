#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Read pprof profiles through `go tool pprof -raw` and compare them to truth.

The integration tests must not trust our own pprof decoder to check our own
pprof encoder, so they read profiles the way users do: with Go's pprof.
`go tool pprof -raw -symbolize=none FILE` prints the decoded profile as
text (comments, period, samples with location ids and labels, locations with
their functions, mappings); parse() turns that text into a Profile, and the
helpers below compute what the tests check:

  * flat(...)        value per leaf function
  * by_thread(...)   value per thread (string label "thread_name", or the
                     numeric label "thread")
  * caller_leaf(...) value per "caller;leaf" pair
  * shares(...)      the same, normalised to percent

Stacks are leaf-first lists of function names; a location with inlined
frames contributes all its lines (innermost first); a location without a
function is named "0xADDR".

As a program it has three sub-commands, each exiting non-zero on failure:

  pprofraw.py summary FILE            JSON summary of the profile
  pprofraw.py expect FILE [--function NAME]... [--thread-name NAME]...
                          [--caller-leaf A;B]... [--min-samples N]
                          [--comment REGEX]... [--thread-stack THREAD:FUNC]...
                          [--has-thread-ids]
  pprofraw.py accuracy --truth TRUTH.json FILE [--tolerance POINTS]
                          [--leaves a,b,c]

FILE is a (gzip) profile.proto, or with --raw-text the saved output of
`go tool pprof -raw`.
"""

import argparse
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

LEAVES = ("leaf_hash", "leaf_sqrt", "leaf_mem")


class Sample:
    def __init__(self, values, loc_ids):
        self.values = values
        self.loc_ids = loc_ids
        self.labels = {}  # key -> list of string values
        self.numlabels = {}  # key -> list of ints
        self.stack = []  # function names, leaf first
        self.label_lines = 0

    def leaf(self):
        return self.stack[0] if self.stack else None

    def caller(self):
        return self.stack[1] if len(self.stack) > 1 else None

    def thread_name(self):
        v = self.labels.get("thread_name")
        return v[0] if v else None

    def thread_id(self):
        v = self.numlabels.get("thread")
        return v[0] if v else None


class Location:
    def __init__(self, loc_id, address, mapping):
        self.id = loc_id
        self.address = address
        self.mapping = mapping
        self.lines = []  # (function, file, line), innermost first
        self.system_names = []  # each line's function's system name ("" when pprof shows none)

    def names(self):
        if not self.lines:
            return ["0x%x" % self.address]
        return [fn for fn, _, _ in self.lines]


class Profile:
    def __init__(self):
        self.comments = []
        self.period_type = None
        self.period = None
        self.duration = None
        self.sample_types = []  # (type, unit)
        self.samples = []
        self.locations = {}
        self.mappings = []  # (id, text)

    def value_index(self, name="samples"):
        """Index of the sample type whose type (or type/unit) is name."""
        for i, (t, u) in enumerate(self.sample_types):
            if name in (t, "%s/%s" % (t, u)):
                return i
        raise KeyError("no sample type %r in %r" % (name, self.sample_types))

    def functions(self):
        names = set()
        for loc in self.locations.values():
            names.update(loc.names())
        return names

    def total(self, value="samples"):
        vi = self.value_index(value)
        return sum(s.values[vi] for s in self.samples)


_LABEL_KEY = re.compile(r"(?:^|\s)([^\s:\[\]]+):\[")
# (A file may be "<frozen importlib._bootstrap>": Python's, with a space.)
_LINE = re.compile(r"^(?P<name>.*?) (?P<file><[^>]*>|\S*):(?P<line>-?\d+) s=(?P<start>-?\d+)(?:\((?P<sys>.*)\))?$")
_LOC = re.compile(r"^\s*(\d+): (0x[0-9a-f]+|0) (?:M=(\d+) )?(?:\[F\] )?(.*)$")


def _parse_labels(text):
    """'k1:[a b] k2:[c]' -> {'k1': ['a b'], 'k2': ['c']}.

    pprof prints each key's values as a Go slice, so values containing
    spaces cannot be split reliably; one value per key is what the agent
    writes, and we keep the whole bracket content as that value.
    """
    keys = list(_LABEL_KEY.finditer(text))
    out = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(text)
        body = text[m.end():end].rstrip()
        if body.endswith("]"):
            body = body[:-1]
        out.setdefault(m.group(1), []).append(body)
    return out


def _to_int(v):
    try:
        return int(v.split()[0])
    except (ValueError, IndexError):
        return None


def parse(text):
    """Parse the text of `go tool pprof -raw` into a Profile."""
    p = Profile()
    section = "head"
    cur = None
    cur_loc = None
    for raw in text.splitlines():
        line = raw.rstrip("\n")
        if section == "head":
            if line.startswith("Comment: "):
                p.comments.append(line[len("Comment: "):])
            elif line.startswith("PeriodType: "):
                p.period_type = tuple(line[len("PeriodType: "):].split(" ", 1))
            elif line.startswith("Period: "):
                p.period = int(line[len("Period: "):])
            elif line.startswith("Duration: "):
                p.duration = line[len("Duration: "):]
            elif line == "Samples:":
                section = "sample-types"
            continue
        if section == "sample-types":
            for tok in line.split():
                tok = tok.replace("[dflt]", "")
                t, _, u = tok.partition("/")
                p.sample_types.append((t, u))
            section = "samples"
            continue
        if section == "samples":
            if line == "Locations":
                section = "locations"
                continue
            if not line.strip():
                continue
            if ":" in line and re.match(r"^\s*-?\d+(\s+-?\d+)*:\s", line + " "):
                vals, _, locs = line.partition(":")
                cur = Sample([int(v) for v in vals.split()], [int(x) for x in locs.split()])
                p.samples.append(cur)
                continue
            if cur is None:
                raise ValueError("label line before any sample: %r" % line)
            # pprof prints the string labels on one line, then the numeric
            # labels on the next; a lone line is numeric if every value is.
            labels = _parse_labels(line.strip())
            ints = {k: [_to_int(v) for v in vs] for k, vs in labels.items()}
            numeric = all(None not in vs for vs in ints.values()) and "thread_name" not in labels
            if cur.labels or (not cur.numlabels and numeric and cur.label_lines == 0):
                cur.numlabels.update(ints)
            else:
                cur.labels.update(labels)
            cur.label_lines += 1
            continue
        if section == "locations":
            if line == "Mappings":
                section = "mappings"
                continue
            m = _LOC.match(line)
            if m and not line.startswith("             "):
                cur_loc = Location(int(m.group(1)), int(m.group(2), 16),
                                   int(m.group(3)) if m.group(3) else None)
                p.locations[cur_loc.id] = cur_loc
                rest = m.group(4)
            elif cur_loc is not None and line.startswith("             "):
                rest = line.strip()
            else:
                continue
            rest = rest.strip()
            if not rest:
                continue
            if rest == "??":
                cur_loc.lines.append(("??", "", 0))
                cur_loc.system_names.append("")
                continue
            lm = _LINE.match(rest)
            if lm:
                cur_loc.lines.append((lm.group("name"), lm.group("file"), int(lm.group("line"))))
                cur_loc.system_names.append(lm.group("sys") or "")
            else:
                cur_loc.lines.append((rest, "", 0))
                cur_loc.system_names.append("")
            continue
        if section == "mappings":
            mm = re.match(r"^\s*(\d+): (.*)$", line)
            if mm:
                p.mappings.append((int(mm.group(1)), mm.group(2)))
    if section not in ("locations", "mappings"):
        raise ValueError("not the output of go tool pprof -raw (stopped in section %s)" % section)
    for s in p.samples:
        for lid in s.loc_ids:
            loc = p.locations.get(lid)
            s.stack.extend(loc.names() if loc else ["loc%d" % lid])
    return p


_GO_HOME = None


def go_env():
    """An environment in which `go tool pprof` works offline, as root, in CI:
    a private temporary HOME/PPROF_TMPDIR/GOCACHE, removed at exit."""
    global _GO_HOME
    if _GO_HOME is None:
        _GO_HOME = tempfile.mkdtemp(prefix="fp-pprof-home-")
        atexit.register(shutil.rmtree, _GO_HOME, True)
    env = dict(os.environ)
    env["HOME"] = _GO_HOME
    env["PPROF_TMPDIR"] = os.path.join(_GO_HOME, "pprof")
    env["GOCACHE"] = os.path.join(_GO_HOME, "gocache")
    env["GOPROXY"] = "off"
    env["GOTOOLCHAIN"] = "local"
    env["GOTELEMETRY"] = "off"
    env.pop("GOFLAGS", None)
    env.pop("PPROF_BINARY_PATH", None)
    os.makedirs(env["PPROF_TMPDIR"], exist_ok=True)
    return env


def go_binary():
    return os.environ.get("GO", "go")


def raw_text(path):
    """Run `go tool pprof -raw -symbolize=none path` and return its stdout."""
    r = subprocess.run([go_binary(), "tool", "pprof", "-raw", "-symbolize=none", path],
                       env=go_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("go tool pprof -raw %s failed (exit %d): %s"
                           % (path, r.returncode, r.stderr.strip()))
    return r.stdout


def load(path, is_raw_text=False):
    if is_raw_text:
        with open(path) as f:
            return parse(f.read())
    return parse(raw_text(path))


# ---- aggregation ---------------------------------------------------------

def fail(msg):
    """A checker's failure: its one line on stdout, exit 1."""
    print(msg)
    sys.exit(1)


def lines_by_thread(p, value="samples"):
    """{tid: [(value, lines)]}: each sample's lines, leaf first, as
    (function, file, line); a location without lines is its address."""
    vi = p.value_index(value)
    per = {}
    for s in p.samples:
        lines = []
        for lid in s.loc_ids:
            loc = p.locations[lid]
            lines.extend(loc.lines if loc.lines else [("0x%x" % loc.address, "", 0)])
        per.setdefault(s.thread_id(), []).append((s.values[vi], lines))
    return per


def _select(p, value, keep):
    vi = p.value_index(value)
    for s in p.samples:
        if keep is None or keep(s):
            yield s, s.values[vi]


def flat(p, value="samples", keep=None):
    out = {}
    for s, v in _select(p, value, keep):
        out[s.leaf()] = out.get(s.leaf(), 0) + v
    return out


def by_thread(p, value="samples", keep=None, key="thread_name"):
    out = {}
    for s, v in _select(p, value, keep):
        k = s.thread_name() if key == "thread_name" else s.thread_id()
        out[k] = out.get(k, 0) + v
    return out


def caller_leaf(p, value="samples", keep=None):
    out = {}
    for s, v in _select(p, value, keep):
        k = "%s;%s" % (s.caller(), s.leaf())
        out[k] = out.get(k, 0) + v
    return out


def folded(p, value="samples", keep=None):
    out = {}
    for s, v in _select(p, value, keep):
        k = ";".join(reversed(s.stack))
        out[k] = out.get(k, 0) + v
    return out


def shares(d):
    """Percent of the total for each key of d."""
    tot = sum(d.values())
    return {k: (100.0 * v / tot if tot else 0.0) for k, v in d.items()}


# ---- sub-commands ----------------------------------------------------------

def cmd_summary(args):
    p = load(args.file, args.raw_text)
    vi = "samples" if any(t == "samples" for t, _ in p.sample_types) else p.sample_types[0][0]
    out = {
        "sample_types": ["%s/%s" % t for t in p.sample_types],
        "period_type": p.period_type,
        "period": p.period,
        "comments": p.comments,
        "n_samples": len(p.samples),
        "total": p.total(vi),
        "flat": flat(p, vi),
        "threads": by_thread(p, vi),
        "thread_ids": {str(k): v for k, v in by_thread(p, vi, key="thread").items()},
        "caller_leaf": caller_leaf(p, vi),
        "functions": sorted(p.functions()),
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


def cmd_expect(args):
    p = load(args.file, args.raw_text)
    bad = []
    funcs = p.functions()
    total = p.total("samples") if any(t == "samples" for t, _ in p.sample_types) else None
    print("profile: %d samples records, %s total samples, %d functions, threads %s"
          % (len(p.samples), total, len(funcs), sorted(by_thread(p, p.sample_types[0][0]).keys(), key=str)))
    if args.min_samples is not None and (total or 0) < args.min_samples:
        bad.append("only %s samples, want at least %d" % (total, args.min_samples))
    for f in args.function or []:
        if f not in funcs:
            bad.append("function %s not in profile" % f)
    threads = by_thread(p, p.sample_types[0][0])
    for t in args.thread_name or []:
        if not threads.get(t):
            bad.append("no samples with thread_name %s (have %s)" % (t, sorted(threads, key=str)))
    cl = caller_leaf(p, p.sample_types[0][0])
    stacks = folded(p, p.sample_types[0][0])
    for pair in args.caller_leaf or []:
        if not cl.get(pair) and not any((";" + pair) in (";" + k) for k in stacks):
            bad.append("no caller;leaf pair %s" % pair)
    for spec in args.thread_stack or []:
        name, _, fn = spec.partition(":")
        if not any(s.thread_name() == name and fn in s.stack for s in p.samples):
            bad.append("no sample of thread %s with %s on its stack" % (name, fn))
    for rx in args.comment or []:
        if not any(re.search(rx, c) for c in p.comments):
            bad.append("no comment matching /%s/ (comments: %r)" % (rx, p.comments))
    if args.has_thread_ids:
        bad_ids = [s for s in p.samples if s.thread_id() is None]
        if bad_ids:
            bad.append("%d sample records without a numeric thread label" % len(bad_ids))
    for b in bad:
        print("FAIL: " + b)
    if not bad:
        print("ok: all expectations met")
    return 1 if bad else 0


def _compare(title, truth, prof, tol, rows, bad):
    ts, ps = shares(truth), shares(prof)
    print("%s (percent of the population)" % title)
    print("  %-28s %8s %8s %7s" % ("key", "truth", "profile", "diff"))
    for k in sorted(set(ts) | set(ps), key=str):
        t, q = ts.get(k, 0.0), ps.get(k, 0.0)
        d = q - t
        flag = "" if abs(d) <= tol else "  <-- off by more than %.1f points" % tol
        print("  %-28s %7.2f%% %7.2f%% %+6.2f%s" % (k, t, q, d, flag))
        rows.append((title, k, t, q, d))
        if flag:
            bad.append("%s %s: truth %.2f%% profile %.2f%%" % (title, k, t, q))


def cmd_accuracy(args):
    with open(args.truth) as f:
        truth = json.load(f)
    p = load(args.file, args.raw_text)
    leaves = tuple(args.leaves.split(",")) if args.leaves else LEAVES
    tnames = set(truth["threads"])

    def keep(s):
        return s.leaf() in leaves and s.thread_name() in tnames

    vi = args.value
    all_total = p.total(vi)
    pop = sum(v for _, v in _select(p, vi, keep))
    print("profile: %d %s in all, %d (%.1f%%) in the population (leaf in %s, thread in %s)"
          % (all_total, vi, pop, 100.0 * pop / all_total if all_total else 0, ",".join(leaves),
             ",".join(sorted(tnames))))
    bad = []
    if pop < args.min_population:
        bad.append("population has only %d samples, want at least %d" % (pop, args.min_population))
    t_leaf = {l: 0 for l in leaves}
    t_thread = {}
    t_cl = {}
    for name, th in truth["threads"].items():
        t_thread[name] = sum(v for k, v in th["stacks"].items() if k.split(";")[1] in leaves)
        for k, v in th["stacks"].items():
            leaf = k.split(";")[1]
            if leaf not in leaves:
                continue
            t_leaf[leaf] += v
            t_cl[k] = t_cl.get(k, 0) + v
    rows = []
    _compare("leaf share", t_leaf, flat(p, vi, keep), args.tolerance, rows, bad)
    _compare("thread share", t_thread, by_thread(p, vi, keep), args.tolerance, rows, bad)
    _compare("caller;leaf share", t_cl, caller_leaf(p, vi, keep), args.tolerance, rows, bad)
    if args.rate_hz:
        # Samples expected from the measured CPU time at the requested rate.
        expect = truth["total_ns"] * args.rate_hz / 1e9
        ratio = pop / expect if expect else 0
        print("sample count: %d in the population, %.0f expected from %.3f s of measured CPU at %d Hz (ratio %.3f)"
              % (pop, expect, truth["total_ns"] / 1e9, args.rate_hz, ratio))
        if not (args.min_rate_ratio <= ratio <= args.max_rate_ratio):
            bad.append("sample count ratio %.3f outside [%.2f, %.2f]"
                       % (ratio, args.min_rate_ratio, args.max_rate_ratio))
    for b in bad:
        print("FAIL: " + b)
    if not bad:
        print("ok: every share within %.1f points of the truth" % args.tolerance)
    return 1 if bad else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--raw-text", action="store_true", help="FILE is saved `go tool pprof -raw` output")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary")
    s.add_argument("file")
    e = sub.add_parser("expect")
    e.add_argument("file")
    e.add_argument("--function", action="append")
    e.add_argument("--thread-name", action="append")
    e.add_argument("--caller-leaf", action="append")
    e.add_argument("--comment", action="append")
    e.add_argument("--thread-stack", action="append", metavar="THREAD:FUNCTION")
    e.add_argument("--min-samples", type=int)
    e.add_argument("--has-thread-ids", action="store_true")
    a = sub.add_parser("accuracy")
    a.add_argument("file")
    a.add_argument("--truth", required=True)
    a.add_argument("--tolerance", type=float, default=2.0)
    a.add_argument("--leaves")
    a.add_argument("--value", default="samples")
    a.add_argument("--min-population", type=int, default=1000)
    a.add_argument("--rate-hz", type=int)
    a.add_argument("--min-rate-ratio", type=float, default=0.8)
    a.add_argument("--max-rate-ratio", type=float, default=1.2)
    args = ap.parse_args(argv)
    try:
        return {"summary": cmd_summary, "expect": cmd_expect, "accuracy": cmd_accuracy}[args.cmd](args)
    except (RuntimeError, ValueError, KeyError, OSError) as err:
        print("pprofraw: %s" % err, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
