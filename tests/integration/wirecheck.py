# SPDX-License-Identifier: MIT
#
# Reads what the agent sent in another protocol with an independent
# reader, protoc --decode and the .proto files in proto/ (the published
# field numbers, written down), and checks it against the agent's own
# profile of the same target (`agentctl dump`, a gzip profile.proto read
# the same way):
#
#   python3 wirecheck.py pyroscope LOCAL.pb.gz BODY... [--label NAME=VALUE]...
#   python3 wirecheck.py otlp LOCAL.pb.gz BODY... [--attr KEY=VALUE]... [--gzip]
#
# Every BODY is one request (a Pyroscope PushRequest, or an OTLP
# ExportProfilesServiceRequest, gzip with --gzip); together they must hold
# exactly the local profile's samples: for each (thread name, wait, stack
# of function names) the same count and value. Each series (resource)
# must carry the labels (attributes) given. Prints one line of what it
# found, as JSON, and exits 1 with the difference otherwise.
import codecs
import collections
import gzip
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "proto")
PPROF_PROTO = os.path.join(HERE, "..", "..", "proto")


def fail(msg):
    print("wirecheck: " + msg, file=sys.stderr)
    sys.exit(1)


def protoc(data, message, include, proto):
    p = subprocess.run(["protoc", "--decode=" + message, "-I", include, proto], input=data,
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        fail("protoc cannot decode a %s: %s" % (message, p.stderr.decode()[:300]))
    return parse_text(p.stdout.decode("utf-8", "surrogateescape"))


def parse_text(text):
    """protoc's text format into nested dicts of lists."""
    root = collections.defaultdict(list)
    stack = [root]
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
        elif line.endswith("{"):
            child = collections.defaultdict(list)
            stack[-1][line[:-1].strip()].append(child)
            stack.append(child)
        else:
            key, _, value = line.partition(": ")
            if value.startswith('"'):
                raw = value[1:-1].encode("utf-8", "surrogateescape")
                value = codecs.escape_decode(raw)[0]
            else:
                value = int(value) if value.lstrip("-").isdigit() else value
            stack[-1][key].append(value)
    return root


def one(d, key, default=0):
    v = d.get(key, [])
    return v[0] if v else default


def text(b):
    return b.decode() if isinstance(b, bytes) else str(b)


def pprof_samples(raw):
    """A profile.proto's samples as {(thread name, wait, frames): [count, value]}, and it."""
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    p = protoc(raw, "perftools.profiles.Profile", PPROF_PROTO,
               os.path.join(PPROF_PROTO, "profile.proto"))
    strs = [text(s) for s in p["string_table"]]
    funcs = {one(f, "id"): strs[one(f, "name")] for f in p["function"]}
    locs = {one(lc, "id"): [funcs.get(one(ln, "function_id"), "?") for ln in lc["line"]]
            for lc in p["location"]}
    out = collections.defaultdict(lambda: [0, 0])
    for s in p["sample"]:
        labels = {strs[one(lb, "key")]: strs[one(lb, "str")] if one(lb, "str") else one(lb, "num")
                  for lb in s["label"]}
        frames = tuple(f for lid in s["location_id"] for f in locs[lid])
        key = (labels.get("thread_name", ""), labels.get("wait", ""), frames)
        v = s["value"]
        out[key][0] += v[0]
        out[key][1] += v[1]
    types = [(strs[one(t, "type")], strs[one(t, "unit")]) for t in p["sample_type"]]
    comments = [strs[c] for c in p["comment"]]
    return out, types, comments


def compare(local, sent):
    if local == sent:
        return
    diff = [(k, local.get(k), sent.get(k)) for k in set(local) | set(sent)
            if local.get(k) != sent.get(k)]
    fail("%d of %d stacks differ from the agent's own profile, e.g. %s" %
         (len(diff), len(local), diff[:3]))


def wanted(args, flag):
    out = {}
    for i, a in enumerate(args):
        if a == flag:
            k, _, v = args[i + 1].partition("=")
            out[k] = v
    return out


def bodies(args):
    skip = {"--label", "--attr"}
    out, i = [], 0
    while i < len(args):
        if args[i] in skip:
            i += 2
            continue
        if not args[i].startswith("--"):
            out.append(args[i])
        i += 1
    return out


def check_labels(have, want, what):
    for k, v in want.items():
        if have.get(k) != v:
            fail("%s: %s is %r, expected %r (all: %s)" % (what, k, have.get(k), v, have))


def pyroscope(local_path, args):
    local, types, _ = pprof_samples(open(local_path, "rb").read())
    want = wanted(args, "--label")
    sent = collections.defaultdict(lambda: [0, 0])
    series, ids, drops = [], set(), {}
    for path in bodies(args):
        req = protoc(open(path, "rb").read(), "pyroscope_push.PushRequest", PROTO,
                     os.path.join(PROTO, "push.proto"))
        for s in req["series"]:
            labels = {text(one(lb, "name", b"")): text(one(lb, "value", b""))
                      for lb in s["labels"]}
            series.append(labels)
            check_labels(labels, want, "series %s" % labels.get("service_name"))
            for raw in s["samples"]:
                ids.add(text(one(raw, "ID", b"")))
                got, t, comments = pprof_samples(one(raw, "raw_profile", b""))
                if t != types:
                    fail("sample types %s, the agent's own %s" % (t, types))
                for k, v in got.items():
                    sent[k][0] += v[0]
                    sent[k][1] += v[1]
                for c in comments:
                    if c.startswith("fleetprof.drop."):
                        r, _, n = c[len("fleetprof.drop."):].partition("=")
                        drops[r] = drops.get(r, 0) + int(n)
    compare(dict(local), dict(sent))
    print(json.dumps({"series": len(series), "ids": sorted(ids), "stacks": len(sent),
                      "services": sorted({s.get("service_name", "") for s in series}),
                      "samples": sum(v[0] for v in sent.values()), "drops": drops,
                      "labels": series[0] if series else {}}))


def any_value(v):
    if "string_value" in v:
        return text(one(v, "string_value", b""))
    return one(v, "int_value")


def otlp(local_path, args):
    local, types, _ = pprof_samples(open(local_path, "rb").read())
    want = wanted(args, "--attr")
    sent = collections.defaultdict(lambda: [0, 0])
    resources, drops, events = [], {}, set()
    for path in bodies(args):
        raw = open(path, "rb").read()
        if "--gzip" in args:
            raw = gzip.decompress(raw)
        req = protoc(raw, "otlp_v190.ExportProfilesServiceRequest", PROTO,
                     os.path.join(PROTO, "otlp-profiles-v1.9.0.proto"))
        d = one(req, "dictionary", {})
        strs = [text(s) for s in d["string_table"]]
        funcs = [strs[one(f, "name_strindex")] for f in d["function_table"]]
        locs = [[funcs[one(ln, "function_index")] for ln in lc["lines"]]
                for lc in d["location_table"]]
        stacks = [[f for i in st["location_indices"] for f in locs[i]] for st in d["stack_table"]]
        attrs = [(strs[one(a, "key_strindex")], any_value(one(a, "value", {})))
                 for a in d["attribute_table"]]
        if strs[0] != "" or d["mapping_table"][0] or attrs[0] != ("", 0):
            fail("a dictionary table's entry 0 is not the zero value")
        for rp in req["resource_profiles"]:
            ra = {text(one(kv, "key", b"")): any_value(one(kv, "value", {}))
                  for kv in one(rp, "resource", {}).get("attributes", [])}
            resources.append(ra)
            check_labels({k: str(v) for k, v in ra.items()}, want,
                         "resource %s" % ra.get("service.name"))
            for sp in rp["scope_profiles"]:
                profiles = sp["profiles"]
                ptypes = [(strs[one(one(p, "sample_type", {}), "type_strindex")],
                           strs[one(one(p, "sample_type", {}), "unit_strindex")])
                          for p in profiles]
                if ptypes != types:
                    fail("the profiles' sample types %s, the agent's own %s" % (ptypes, types))
                for p in profiles:
                    for i in p["attribute_indices"]:
                        k, v = attrs[i]
                        if k.startswith("fleetprof.drop."):
                            drops[k[15:]] = drops.get(k[15:], 0) + v
                        elif k == "fleetprof.event":
                            events.add(v)
                samples = [p["samples"] for p in profiles]
                if len({len(s) for s in samples}) != 1:
                    fail("the profiles of a scope hold different numbers of samples")
                for col, ss in enumerate(samples):
                    for s in ss:
                        sa = dict(attrs[i] for i in s["attribute_indices"])
                        key = (sa.get("thread.name", ""), sa.get("wait", ""),
                               tuple(stacks[one(s, "stack_index")]))
                        sent[key][col] += sum(s["values"])
    compare(dict(local), dict(sent))
    print(json.dumps({"resources": len(resources), "stacks": len(sent),
                      "services": sorted({str(r.get("service.name", "")) for r in resources}),
                      "samples": sum(v[0] for v in sent.values()), "drops": drops,
                      "events": sorted(events), "attrs": resources[0] if resources else {}}))


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] not in ("pyroscope", "otlp"):
        fail("usage: wirecheck.py pyroscope|otlp LOCAL.pb.gz BODY... [--label|--attr K=V]...")
    {"pyroscope": pyroscope, "otlp": otlp}[sys.argv[1]](sys.argv[2], sys.argv[3:])
