# SPDX-License-Identifier: MIT
#
# Writes a Pyroscope Connect PushRequest (push/v1/push.proto), encoded by
# hand with the published field numbers, for the collector's tests:
#
#   python3 mkpush.py OUT [--gzip] --series LABELS PROFILE [--id ID] [--series ...]
#
#   PushRequest      { repeated RawProfileSeries series = 1; }
#   RawProfileSeries { repeated LabelPair labels = 1; repeated RawSample samples = 2; }
#   LabelPair        { string name = 1; string value = 2; }
#   RawSample        { bytes raw_profile = 1; string ID = 2; }
#
# LABELS is name=value,name=value (service_name, __name__, and the rest);
# PROFILE a file holding the raw profile as the client sends it (a
# profile.proto, gzip or not). --gzip compresses the whole request (as
# Content-Encoding: gzip). A PROFILE of "-" is an empty raw profile.
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mkpprof import field_bytes  # noqa: E402


def main():
    out, args = sys.argv[1], sys.argv[2:]
    compress = "--gzip" in args
    args = [a for a in args if a != "--gzip"]
    series = []
    i = 0
    while i < len(args):
        if args[i] != "--series":
            sys.exit("mkpush.py: expected --series, got %r" % args[i])
        labels, path = args[i + 1], args[i + 2]
        i += 3
        sid = "id-%d" % len(series)
        if i < len(args) and args[i] == "--id":
            sid = args[i + 1]
            i += 2
        body = bytearray()
        for pair in labels.split(","):
            name, _, value = pair.partition("=")
            body += field_bytes(1, field_bytes(1, name.encode()) + field_bytes(2, value.encode()))
        raw = b"" if path == "-" else open(path, "rb").read()
        body += field_bytes(2, field_bytes(1, raw) + field_bytes(2, sid.encode()))
        series.append(bytes(body))
    msg = b"".join(field_bytes(1, s) for s in series)
    open(out, "wb").write(gzip.compress(msg) if compress else msg)


if __name__ == "__main__":
    main()
