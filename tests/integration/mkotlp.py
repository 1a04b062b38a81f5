# SPDX-License-Identifier: MIT
#
# Writes an OTLP ExportProfilesServiceRequest (opentelemetry-proto v1.9.0,
# profiles v1development), encoded by hand with the published field
# numbers, for the collector's tests:
#
#   python3 mkotlp.py OUT [--service NAME] [--partial] [--bad-dict] [--gzip]
#
#   ExportProfilesServiceRequest { repeated ResourceProfiles resource_profiles = 1;
#                                  ProfilesDictionary dictionary = 2; }
#   ProfilesDictionary { mapping_table = 1; location_table = 2; function_table = 3;
#                        link_table = 4; string_table = 5; attribute_table = 6;
#                        stack_table = 7; }  (each table's entry 0 the zero value)
#   ResourceProfiles   { Resource resource = 1; repeated ScopeProfiles scope_profiles = 2; }
#   Resource           { repeated KeyValue attributes = 1; }
#   KeyValue           { string key = 1; AnyValue value = 2; }
#   AnyValue           { string string_value = 1; int64 int_value = 3; }
#   ScopeProfiles      { InstrumentationScope scope = 1; repeated Profile profiles = 2; }
#   Profile            { ValueType sample_type = 1; repeated Sample samples = 2;
#                        fixed64 time_unix_nano = 3; uint64 duration_nano = 4;
#                        ValueType period_type = 5; int64 period = 6; }
#   ValueType          { int32 type_strindex = 1; int32 unit_strindex = 2; }
#   Sample             { int32 stack_index = 1; repeated int64 values = 2;
#                        repeated int32 attribute_indices = 3; }
#   Mapping            { uint64 memory_start = 1; uint64 memory_limit = 2;
#                        uint64 file_offset = 3; int32 filename_strindex = 4;
#                        repeated int32 attribute_indices = 5; }
#   Location           { int32 mapping_index = 1; uint64 address = 2; repeated Line lines = 3; }
#   Line               { int32 function_index = 1; int64 line = 2; }
#   Function           { int32 name_strindex = 1; int32 filename_strindex = 3; }
#   KeyValueAndUnit    { int32 key_strindex = 1; AnyValue value = 2; }
#   Stack              { repeated int32 location_indices = 1; }
#
# The resource: service.name NAME (otel-app), host.name otel-host,
# process.pid 4242, k8s.pod.name web-1. One profile of the eBPF
# profiler's kind (samples/count, period cpu/nanoseconds 50 ms): main ->
# work (with inl inlined into it) -> leaf 30 samples on thread 77
# "worker", main -> work (inl) 10 samples. --partial adds a second
# profile whose sample names stack 99 (rejected, the first stored);
# --bad-dict makes a function's name index point past the strings;
# --bare has no mapping, function or attribute table at all (not even
# their zero entries): its locations are bare addresses.
import gzip
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mkpprof import field_bytes, field_varint, packed, varint  # noqa: E402


def fixed64(n, v):
    return varint((n << 3) | 1) + struct.pack("<Q", v)


def any_value(v):
    return field_varint(3, v) if isinstance(v, int) else field_bytes(1, v.encode())


def main():
    out, args = sys.argv[1], sys.argv[2:]
    service = args[args.index("--service") + 1] if "--service" in args else "otel-app"
    strings = [""]

    def s(text):
        if text not in strings:
            strings.append(text)
        return strings.index(text)

    d = bytearray()
    bare = "--bare" in args
    if not bare:
        # Mappings: the zero one, then the executable with its build ID (attribute 1).
        d += field_bytes(1, b"")
        d += field_bytes(1, field_varint(1, 0x400000) + field_varint(2, 0x800000) +
                         field_varint(3, 0) + field_varint(4, s("/usr/bin/otelapp")) +
                         packed(5, [1]))
        # Attributes: zero, build ID, thread.id, thread.name.
        d += field_bytes(6, b"")
        d += field_bytes(6, field_varint(1, s("process.executable.build_id.gnu")) +
                         field_bytes(2, any_value("0123abcd")))
        d += field_bytes(6, field_varint(1, s("thread.id")) + field_bytes(2, any_value(77)))
        d += field_bytes(6, field_varint(1, s("thread.name")) + field_bytes(2, any_value("worker")))
        # Functions: zero, main, work, leaf, inl.
        d += field_bytes(3, b"")
        for name in ["main", "work", "leaf", "inl"]:
            bad = "--bad-dict" in args and name == "leaf"
            d += field_bytes(3, field_varint(1, 999 if bad else s(name)) +
                             field_varint(3, s("app.c")))

    def line(fn):
        return b"" if bare else field_bytes(3, field_varint(1, fn) + field_varint(2, 10 * fn))

    mapping = b"" if bare else field_varint(1, 1)
    # Locations: zero; leaf; work with inl inlined into it (inl first); main.
    d += field_bytes(2, b"")
    d += field_bytes(2, mapping + field_varint(2, 0x401000) + line(3))
    d += field_bytes(2, mapping + field_varint(2, 0x402000) + line(4) + line(2))
    d += field_bytes(2, mapping + field_varint(2, 0x403000) + line(1))
    # Stacks: zero; leaf-work-main; work-main (leaf first).
    d += field_bytes(7, b"")
    d += field_bytes(7, packed(1, [1, 2, 3]))
    d += field_bytes(7, packed(1, [2, 3]))

    def vt(t, u):
        return field_varint(1, s(t)) + field_varint(2, s(u))

    now = time.time_ns()

    def profile(samples):
        p = field_bytes(1, vt("samples", "count"))
        for stack, value, attrs in samples:
            body = field_varint(1, stack) + packed(2, [value])
            if attrs:
                body += packed(3, attrs)
            p += field_bytes(2, body)
        p += fixed64(3, now - 10 * 10**9) + field_varint(4, 10 * 10**9)
        p += field_bytes(5, vt("cpu", "nanoseconds")) + field_varint(6, 50000000)
        return p

    profiles = [profile([(1, 30, [2, 3]), (2, 10, [])])]
    if "--partial" in args:
        profiles.append(profile([(99, 5, [])]))
    resource = b"".join(field_bytes(1, field_bytes(1, k.encode()) + field_bytes(2, any_value(v)))
                        for k, v in [("service.name", service), ("host.name", "otel-host"),
                                     ("process.pid", 4242), ("k8s.pod.name", "web-1")])
    scope = b"".join(field_bytes(2, p) for p in profiles)
    rp = field_bytes(1, resource) + field_bytes(2, scope)
    for t in strings:
        d += field_bytes(5, t.encode())
    msg = field_bytes(1, rp) + field_bytes(2, bytes(d))
    open(out, "wb").write(gzip.compress(msg) if "--gzip" in args else msg)


if __name__ == "__main__":
    main()
