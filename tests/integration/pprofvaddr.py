# SPDX-License-Identifier: MIT
#
# fleetprof's own field of pprof's Mapping (100: the ELF address its
# memory_start holds, plus one), read from the wire with no help from
# fleetprof's code, for test-debuginfod:
#
#   python3 pprofvaddr.py show FILE        one line per mapping: file, build ID,
#                                           start, offset and the field (or "-")
#   python3 pprofvaddr.py strip IN OUT      IN without the field: an upload of an
#                                           agent of the version before
#   python3 pprofvaddr.py set IN OUT        IN with the field on every mapping:
#                                           its file offset plus 0x100000
#
# FILE, IN and OUT are gzip'd profile.proto messages.
import gzip
import sys

from mkpprof import field_bytes, field_varint  # the wire's writer, beside this file
from otlp2json import fields  # and its reader


def encode(f, wt, v):
    """One field again, as it was read (a profile has varint and length fields only)."""
    return field_varint(f, v) if wt == 0 else field_bytes(f, v)


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    data = gzip.open(path).read()
    if cmd == "show":
        strings = [v for f, wt, v in fields(data) if f == 6]
        for f, wt, v in fields(data):
            if f != 3:
                continue
            m = {ff: vv for ff, _, vv in fields(v)}
            print("%s %s start 0x%x offset 0x%x vaddr %s" % (
                strings[m.get(5, 0)].decode(), strings[m.get(6, 0)].decode() or "-",
                m.get(2, 0), m.get(4, 0), "0x%x" % (m[100] - 1) if m.get(100) else "-"))
    elif cmd in ("strip", "set"):
        out = bytearray()
        for f, wt, v in fields(data):
            if f == 3:
                inner = b"".join(encode(ff, wwt, vv) for ff, wwt, vv in fields(v) if ff != 100)
                if cmd == "set":
                    off = {ff: vv for ff, _, vv in fields(v)}.get(4, 0)
                    inner += field_varint(100, off + 0x100000 + 1)
                out += field_bytes(3, inner)
            else:
                out += encode(f, wt, v)
        with gzip.open(sys.argv[3], "wb") as g:
            g.write(bytes(out))
    else:
        sys.exit("usage: pprofvaddr.py show FILE | strip IN OUT | set IN OUT")


if __name__ == "__main__":
    main()
