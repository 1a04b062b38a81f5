# SPDX-License-Identifier: MIT
#
# Writes profile.proto messages for the collector's tests, good and bad,
# encoded by hand (no protobuf library needed), so each kind of damage is
# exactly the one named:
#
#   python3 mkpprof.py KIND OUT [--samples N] [--stacks K] [--seed S] [--time NS]
#
# --time gives the profile a start (time_nanos) and a minute's duration.
#
# KIND: good          K stacks of 3 frames, N samples in all (gzip)
#       raw           the good profile without gzip
#       notproto      gzip of bytes that are not a protobuf message
#       badindex      a sample refers to a location that does not exist
#       badstring     a function name's string index is past the table
#       negative      a sample with a negative count
#       lyingstrings  the string table's first entry claims more bytes
#                     than the message holds
#       onetype       one sample type instead of two
#       bomb          gzip of 100 MiB of zeros (a few hundred KiB on disk)
#       truncated     the good profile's gzip, cut in half
#       offcpu        the good profile as off-CPU time (sample type off-cpu,
#                     nanoseconds), each stack's samples labelled wait=sleep,
#                     uninterruptible or runqueue in turn
#       badwait       the off-CPU profile with a wait label no one knows
#       named         the good profile whose functions have more than a
#                     name: func_F (F = 1, 4, 7...) the system name
#                     _Z6func_Fv, every one the file src/fF.py and its
#                     location the line 10 * F
#       unnamed       frames an agent could not name, one a sample:
#                     --frame BUILD_ID:FILE:OFFSET (repeatable) gives one
#                     mapping of FILE with that build ID and a location at
#                     file offset OFFSET (hex) named FILE+0xOFFSET, as the
#                     agent names an address in a stripped binary;
#                     --frames-file FILE: one such BUILD_ID:FILE:OFFSET a
#                     line (tens of thousands, past a command line's room);
#                     --vaddr 1: each mapping also says that its start is
#                     the file's ELF address 0 (fleetprof's field 100 of
#                     Mapping, as the agent sends it: a PIE's text, where
#                     file offsets and ELF addresses agree)
import gzip
import random
import sys


def varint(v):
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(n, v):
    return varint(n << 3) + varint(v)


def field_bytes(n, data):
    return varint((n << 3) | 2) + varint(len(data)) + data


def packed(n, values):
    return field_bytes(n, b"".join(varint(v) for v in values))


class Profile:
    def __init__(self):
        self.strings = [""]
        self.index = {"": 0}
        self.body = bytearray()

    def s(self, text):
        if text not in self.index:
            self.index[text] = len(self.strings)
            self.strings.append(text)
        return self.index[text]

    def add(self, data):
        self.body += data

    def encode(self, string_table=None):
        out = bytearray(self.body)
        for t in string_table if string_table is not None else self.strings:
            out += field_bytes(6, t.encode())
        return bytes(out)


def build(kind, samples, stacks, seed, time_ns=0):
    rnd = random.Random(seed)
    p = Profile()
    vt = lambda t, u: field_varint(1, p.s(t)) + field_varint(2, p.s(u))
    off = kind in ("offcpu", "badwait")
    value_type = "off-cpu" if off else "cpu"
    p.add(field_bytes(1, vt("samples", "count")))
    if kind != "onetype":
        p.add(field_bytes(1, vt(value_type, "nanoseconds")))
    p.add(field_bytes(11, vt(value_type, "nanoseconds")))
    p.add(field_varint(12, 10000000 if off else 1000000))
    if time_ns:
        p.add(field_varint(9, time_ns) + field_varint(10, 60 * 10**9))
    p.add(field_bytes(3, field_varint(1, 1) + field_varint(2, 0x400000) +
                      field_varint(3, 0x800000) + field_varint(5, p.s("/usr/bin/testprog")) +
                      field_varint(6, p.s("abcdef0123456789"))))
    nfun = stacks * 3
    for f in range(1, nfun + 1):
        name = p.s("func_%d" % f) if not (kind == "badstring" and f == 1) else 10**6
        fn, line = field_varint(1, f) + field_varint(2, name), field_varint(1, f)
        if kind == "named":
            if f % 3 == 1:
                fn += field_varint(3, p.s("_Z%dfunc_%dv" % (len("func_%d" % f), f)))
            fn += field_varint(4, p.s("src/f%d.py" % f))
            line += field_varint(2, 10 * f)
        p.add(field_bytes(5, fn))
        p.add(field_bytes(4, field_varint(1, f) + field_varint(2, 1) +
                          field_varint(3, 0x400000 + 16 * f) + field_bytes(4, line)))
    # Spread the samples over the stacks; every stack gets at least one when it can.
    counts = [0] * stacks
    for i in range(samples):
        counts[i % stacks if i < stacks else rnd.randrange(stacks)] += 1
    tid_key, name_key, wait_key = p.s("thread"), p.s("thread_name"), p.s("wait")
    waits = ("sleep", "uninterruptible", "runqueue")
    for k, c in enumerate(counts):
        if c == 0:
            continue
        locs = [3 * k + 1, 3 * k + 2, 3 * k + 3]
        if kind == "badindex" and k == 0:
            locs[1] = 999999
        count = -c if kind == "negative" and k == 0 else c
        values = [count] if kind == "onetype" else [count, c * 1000000]
        labels = (field_bytes(3, field_varint(1, tid_key) + field_varint(3, 4242 + k % 4)) +
                  field_bytes(3, field_varint(1, name_key) +
                              field_varint(2, p.s("worker-%d" % (k % 4)))))
        if off:
            wait = "napping" if kind == "badwait" and k == 1 else waits[k % 3]
            labels += field_bytes(3, field_varint(1, wait_key) + field_varint(2, p.s(wait)))
        p.add(field_bytes(2, packed(1, locs) + packed(2, values) + labels))
    if kind == "lyingstrings":
        # A string entry whose length prefix runs past the end of the message.
        return p.encode() + varint((6 << 3) | 2) + varint(1 << 20) + b"short"
    return p.encode()


def unnamed(frames, time_ns, vaddr=False):
    p = Profile()
    vt = lambda t, u: field_varint(1, p.s(t)) + field_varint(2, p.s(u))
    p.add(field_bytes(1, vt("samples", "count")))
    p.add(field_bytes(1, vt("cpu", "nanoseconds")))
    p.add(field_bytes(11, vt("cpu", "nanoseconds")))
    p.add(field_varint(12, 1000000))
    if time_ns:
        p.add(field_varint(9, time_ns) + field_varint(10, 60 * 10**9))
    for i, fr in enumerate(frames, 1):
        build_id, path, off = fr.rsplit(":", 2)
        off = int(off, 16)
        start = 0x10000000 * i
        p.add(field_bytes(3, field_varint(1, i) + field_varint(2, start) +
                          field_varint(3, start + 0x1000000) + field_varint(4, 0) +
                          field_varint(5, p.s(path)) + field_varint(6, p.s(build_id)) +
                          (field_varint(100, 1) if vaddr else b"")))
        name = "%s+0x%x" % (path.rsplit("/", 1)[-1], off)
        p.add(field_bytes(5, field_varint(1, i) + field_varint(2, p.s(name))))
        p.add(field_bytes(4, field_varint(1, i) + field_varint(2, i) +
                          field_varint(3, start + off) + field_bytes(4, field_varint(1, i))))
        p.add(field_bytes(2, packed(1, [i]) + packed(2, [10, 10000000])))
    return p.encode()


def main():
    kind, out = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    opt = {"--samples": 1000, "--stacks": 50, "--seed": 1, "--time": 0, "--vaddr": 0}
    frames = []
    for i in range(0, len(args), 2):
        if args[i] == "--frame":
            frames.append(args[i + 1])
        elif args[i] == "--frames-file":
            frames += [line.rstrip("\n") for line in open(args[i + 1]) if line.strip()]
        else:
            opt[args[i]] = int(args[i + 1])
    if kind == "unnamed":
        data = gzip.compress(unnamed(frames, opt["--time"], opt["--vaddr"] == 1))
    elif kind == "bomb":
        data = gzip.compress(b"\0" * (100 << 20), 9)
    elif kind == "notproto":
        data = gzip.compress(b"\xff\xff\xff\xff this is not a protobuf message \xff" * 10)
    else:
        raw = build(kind, opt["--samples"], opt["--stacks"], opt["--seed"], opt["--time"])
        data = raw if kind == "raw" else gzip.compress(raw)
        if kind == "truncated":
            data = data[: len(data) // 2]
    with open(out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
