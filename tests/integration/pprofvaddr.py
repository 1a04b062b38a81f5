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


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(field, wire type, value or bytes, raw bytes of the whole field) of a message."""
    i = 0
    while i < len(b):
        at = i
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v, b[at:i]


def put_varint(v):
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    data = gzip.open(path).read()
    if cmd == "show":
        strings = [v for f, wt, v, _ in fields(data) if f == 6]
        for f, wt, v, _ in fields(data):
            if f != 3:
                continue
            m = {ff: vv for ff, _, vv, _ in fields(v)}
            print("%s %s start 0x%x offset 0x%x vaddr %s" % (
                strings[m.get(5, 0)].decode(), strings[m.get(6, 0)].decode() or "-",
                m.get(2, 0), m.get(4, 0), "0x%x" % (m[100] - 1) if m.get(100) else "-"))
    elif cmd in ("strip", "set"):
        out = bytearray()
        for f, wt, v, raw in fields(data):
            if f == 3:
                inner = b"".join(r for ff, _, _, r in fields(v) if ff != 100)
                if cmd == "set":
                    off = {ff: vv for ff, _, vv, _ in fields(v)}.get(4, 0)
                    inner += put_varint(100 << 3) + put_varint(off + 0x100000 + 1)
                out += put_varint(3 << 3 | 2) + put_varint(len(inner)) + inner
            else:
                out += raw
        with gzip.open(sys.argv[3], "wb") as g:
            g.write(bytes(out))
    else:
        sys.exit("usage: pprofvaddr.py show FILE | strip IN OUT | set IN OUT")


if __name__ == "__main__":
    main()
