# SPDX-License-Identifier: MIT
#
# Converts a pprof profile into an OTLP ExportProfilesServiceRequest
# (opentelemetry-proto v1.9.0, the field numbers of tests/integration/
# mkotlp.py), for collector-bench --protocol otlp: the same stacks and
# counts as the agents' upload of that profile, as a profile of the
# OpenTelemetry eBPF profiler's kind (samples/count, period cpu/ns).
#
#   python3 pprof2otlp.py PROFILE.pb.gz OUT
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import pprofraw  # noqa: E402
from mkotlp import fixed64  # noqa: E402
from mkpprof import field_bytes, field_varint, packed  # noqa: E402


def main():
    p = pprofraw.load(sys.argv[1])
    strings, funcs, locs, stacks = [""], {}, {}, {}

    def s(text):
        if text not in strings:
            strings.append(text)
        return strings.index(text)

    d = bytearray(field_bytes(1, b"") + field_bytes(3, b"") + field_bytes(2, b"") +
                  field_bytes(6, b"") + field_bytes(7, b""))
    samples = bytearray()
    for smp in p.samples:
        ids = []
        for lid in smp.loc_ids:
            if lid not in locs:
                loc = p.locations[lid]
                lines = b""
                for fn, _file, _line in (loc.lines or [("?", "", 0)]):
                    if fn not in funcs:
                        funcs[fn] = len(funcs) + 1
                        d += field_bytes(3, field_varint(1, s(fn)) + field_varint(3, s("")))
                    lines += field_bytes(3, field_varint(1, funcs[fn]))
                locs[lid] = len(locs) + 1
                d += field_bytes(2, field_varint(2, loc.address or 0) + lines)
            ids.append(locs[lid])
        key = tuple(ids)
        if key not in stacks:
            stacks[key] = len(stacks) + 1
            d += field_bytes(7, packed(1, ids))
        samples += field_bytes(2, field_varint(1, stacks[key]) + packed(2, [smp.values[0]]))
    vt = lambda t, u: field_varint(1, s(t)) + field_varint(2, s(u))
    prof = field_bytes(1, vt("samples", "count")) + bytes(samples)
    prof += fixed64(3, time.time_ns() - 60 * 10**9) + field_varint(4, 60 * 10**9)
    prof += field_bytes(5, vt("cpu", "nanoseconds")) + field_varint(6, int(p.period or 10101010))
    resource = b"".join(field_bytes(1, field_bytes(1, k.encode()) + field_bytes(2, field_bytes(1, v.encode())))
                        for k, v in [("service.name", "bench"), ("host.name", "bench-host")])
    rp = field_bytes(1, resource) + field_bytes(2, field_bytes(2, prof))
    for t in strings:
        d += field_bytes(5, t.encode())
    open(sys.argv[2], "wb").write(field_bytes(1, rp) + field_bytes(2, bytes(d)))


if __name__ == "__main__":
    main()
