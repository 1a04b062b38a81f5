# SPDX-License-Identifier: MIT
#
# An OTLP ExportProfilesServiceRequest in protobuf (mkotlp.py's, gzip or
# not) rewritten in OTLP's JSON encoding, for the collector's JSON tests:
# protobuf's JSON mapping (lowerCamelCase names, 64-bit integers as
# strings, bytes as base64), by the field numbers of opentelemetry-proto
# v1.9.0 written down below.
#
#   python3 otlp2json.py IN OUT [--snake]
#
# --snake writes the proto field names (snake_case), which a reader must
# take too.
import base64
import gzip
import json
import re
import struct
import sys

# message: {number: (jsonName, kind, repeated, submessage)}
# kinds: msg, str, bytes, int (int32), int64, uint64, fixed64, bool, double
M = {
    "Request": {1: ("resourceProfiles", "msg", True, "ResourceProfiles"),
                2: ("dictionary", "msg", False, "Dictionary")},
    "ResourceProfiles": {1: ("resource", "msg", False, "Resource"),
                         2: ("scopeProfiles", "msg", True, "ScopeProfiles"),
                         3: ("schemaUrl", "str", False, None)},
    "Resource": {1: ("attributes", "msg", True, "KeyValue"),
                 2: ("droppedAttributesCount", "int", False, None)},
    "KeyValue": {1: ("key", "str", False, None), 2: ("value", "msg", False, "AnyValue")},
    "AnyValue": {1: ("stringValue", "str", False, None), 2: ("boolValue", "bool", False, None),
                 3: ("intValue", "int64", False, None), 4: ("doubleValue", "double", False, None),
                 7: ("bytesValue", "bytes", False, None)},
    "ScopeProfiles": {1: ("scope", "msg", False, "Scope"),
                      2: ("profiles", "msg", True, "Profile"),
                      3: ("schemaUrl", "str", False, None)},
    "Scope": {1: ("name", "str", False, None), 2: ("version", "str", False, None)},
    "Profile": {1: ("sampleType", "msg", False, "ValueType"),
                2: ("samples", "msg", True, "Sample"),
                3: ("timeUnixNano", "fixed64", False, None),
                4: ("durationNano", "uint64", False, None),
                5: ("periodType", "msg", False, "ValueType"),
                6: ("period", "int64", False, None),
                11: ("attributeIndices", "int", True, None)},
    "ValueType": {1: ("typeStrindex", "int", False, None), 2: ("unitStrindex", "int", False, None)},
    "Sample": {1: ("stackIndex", "int", False, None), 2: ("values", "int64", True, None),
               3: ("attributeIndices", "int", True, None)},
    "Dictionary": {1: ("mappingTable", "msg", True, "Mapping"),
                   2: ("locationTable", "msg", True, "Location"),
                   3: ("functionTable", "msg", True, "Function"),
                   4: ("linkTable", "msg", True, "Link"),
                   5: ("stringTable", "str", True, None),
                   6: ("attributeTable", "msg", True, "KeyValueAndUnit"),
                   7: ("stackTable", "msg", True, "Stack")},
    "Mapping": {1: ("memoryStart", "uint64", False, None), 2: ("memoryLimit", "uint64", False, None),
                3: ("fileOffset", "uint64", False, None), 4: ("filenameStrindex", "int", False, None),
                5: ("attributeIndices", "int", True, None)},
    "Location": {1: ("mappingIndex", "int", False, None), 2: ("address", "uint64", False, None),
                 3: ("lines", "msg", True, "Line"), 4: ("attributeIndices", "int", True, None)},
    "Line": {1: ("functionIndex", "int", False, None), 2: ("line", "int64", False, None),
             3: ("column", "int64", False, None)},
    "Function": {1: ("nameStrindex", "int", False, None), 2: ("systemNameStrindex", "int", False, None),
                 3: ("filenameStrindex", "int", False, None), 4: ("startLine", "int64", False, None)},
    "Link": {},
    "KeyValueAndUnit": {1: ("keyStrindex", "int", False, None), 2: ("value", "msg", False, "AnyValue"),
                        3: ("unitStrindex", "int", False, None)},
    "Stack": {1: ("locationIndices", "int", True, None)},
}


def varint(b, i):
    v = shift = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, i


def fields(b):
    i = 0
    while i < len(b):
        tag, i = varint(b, i)
        n, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            ln, i = varint(b, i)
            v, i = b[i:i + ln], i + ln
        else:
            sys.exit("otlp2json: wire type %d" % wt)
        yield n, wt, v


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def scalar(kind, wt, v):
    if kind == "fixed64":
        return str(struct.unpack("<Q", v)[0])
    if kind == "double":
        return struct.unpack("<d", v)[0]
    if kind == "bool":
        return bool(v)
    if kind == "int":
        return signed(v)
    return str(signed(v) if kind == "int64" else v)  # 64-bit integers are strings


def message(b, name, snake):
    out = {}
    for n, wt, v in fields(b):
        if n not in M[name]:
            continue
        key, kind, rep, sub = M[name][n]
        if snake:
            key = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)
        if kind == "msg":
            val = [message(v, sub, snake)]
        elif kind == "str":
            val = [v.decode()]
        elif kind == "bytes":
            val = [base64.b64encode(v).decode()]
        elif wt == 2 and kind != "fixed64":  # packed
            vals, i = [], 0
            while i < len(v):
                x, i = varint(v, i)
                vals.append(scalar(kind, 0, x))
            val = vals
        else:
            val = [scalar(kind, wt, v)]
        if rep:
            out.setdefault(key, []).extend(val)
        else:
            out[key] = val[0]
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    raw = open(src, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    with open(dst, "w") as f:
        json.dump(message(raw, "Request", "--snake" in sys.argv), f, indent=1)


if __name__ == "__main__":
    main()
