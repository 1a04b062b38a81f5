#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check a Prometheus text exposition (format 0.0.4) strictly, and print its samples.

    promcheck.py FILE          exit 1 with the first problem; else print
                               one JSON object {"name{label=value}": value}

What is checked: every sample's family has # HELP and # TYPE lines before
it, once each; names and label names are valid; label values are quoted
with only \\\\, \\" and \\n escapes; values parse as floats; counters are
not negative; a histogram's buckets are cumulative, end with le="+Inf",
and that bucket equals its _count; no sample appears twice.
"""
import json
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"\})? (\S+)$')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def fail(msg):
    print("promcheck: " + msg, file=sys.stderr)
    sys.exit(1)


def family_of(name, types):
    if name in types:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) in ("histogram", "summary"):
            return name[: -len(suffix)]
    return None


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    if not text.endswith("\n"):
        fail("the exposition does not end with a newline")
    helps, types, out = set(), {}, {}
    hist = {}
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            if not NAME.match(name) or name in helps:
                fail(f"line {n}: bad or repeated HELP for {name}")
            helps.add(name)
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[3] not in TYPES or parts[2] in types:
                fail(f"line {n}: bad or repeated TYPE: {line}")
            if parts[2] not in helps:
                fail(f"line {n}: TYPE of {parts[2]} before its HELP")
            types[parts[2]] = parts[3]
            continue
        if not line or line.startswith("#"):
            fail(f"line {n}: unexpected line {line!r}")
        m = SAMPLE.match(line)
        if not m:
            fail(f"line {n}: not a sample: {line!r}")
        name, label, lvalue, value = m.group(1), m.group(3), m.group(4), m.group(5)
        fam = family_of(name, types)
        if fam is None:
            fail(f"line {n}: sample {name} has no TYPE before it")
        try:
            v = float(value)
        except ValueError:
            fail(f"line {n}: value {value!r} is not a number")
        if types[fam] == "counter" and (v < 0 or math.isnan(v)):
            fail(f"line {n}: counter {name} is {value}")
        key = name + ("{%s=%s}" % (label, lvalue) if label else "")
        if key in out:
            fail(f"line {n}: {key} appears twice")
        out[key] = v
        if types[fam] == "histogram":
            h = hist.setdefault(fam, {"buckets": [], "count": None})
            if name.endswith("_bucket"):
                if label != "le":
                    fail(f"line {n}: a bucket without le")
                h["buckets"].append((lvalue, v))
            elif name.endswith("_count"):
                h["count"] = v
    for fam, h in hist.items():
        b = h["buckets"]
        if not b or b[-1][0] != "+Inf":
            fail(f"histogram {fam}: the last bucket is not le=\"+Inf\"")
        if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
            fail(f"histogram {fam}: buckets are not cumulative")
        if h["count"] != b[-1][1]:
            fail(f"histogram {fam}: _count {h['count']} != +Inf bucket {b[-1][1]}")
    print(json.dumps(out))


main()
