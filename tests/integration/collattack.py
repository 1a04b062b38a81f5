#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Requests an attacker crafts against a collector on loopback, for
test-attacks.sh. Each mode runs one attack, bounded in count and time,
while a side thread asks /healthz every 20 ms and samples the collector's
resident memory; it prints one JSON object of what it saw (the answers,
the slowest /healthz, the memory before, at its peak and after) and the
shell script judges it.

  collattack.py regex PORT PID TOKEN PATTERN...   LabelNames and
          SelectMergeStacktraces with {service_name=~"PATTERN"}, one call
          each, the read token as a bearer token ("-": none)
  collattack.py basic PORT PID                    Authorization: Basic
          values that are not base64 (or decode to nothing) on an upload
          with a body and on a read
  collattack.py bodies PORT PID N MB TOKEN        N connections at once, each
          a query's head claiming MB MiB of body (TOKEN as the bearer
          token, "-": none), then as much of the body as the collector
          takes in 5 s; the connections are closed, then memory is sampled
          again after 2 s
  collattack.py stall PORT N MB SECS              N connections, each a
          query's head claiming MB MiB and 64 KiB of it, then nothing: when
          (seconds after its head) the collector closed each, within SECS
  collattack.py refused PORT                      on one connection, a query
          without the read token with a Content-Length body, the same with
          a chunked body (chunk extensions, a trailer), then GET /healthz:
          the three answers' statuses, in order
  collattack.py head PORT PID                     HEAD /healthz then GET
          /healthz on one keep-alive connection
  collattack.py get PORT PID TOKEN N PATH         GET PATH N times, one after
          another (TOKEN as the bearer token): each status, time and the
          first bytes of its answer
  collattack.py flood PORT PID TOKEN N PATH HANG  GET PATH on N connections
          at once, the first HANG of them closed at once: the others'
          answers by status, and how many said the readers were busy
  collattack.py stop PORT PID TOKEN N PATH SECS   GET PATH on N connections
          at once, SIGTERM to PID after SECS: each answer's status, and
          whether it said the collector was stopping
"""
import json
import os
import re
import signal
import socket
import sys
import threading
import time


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def read_all(s, size=65536):
    """What s gives until the peer closes it."""
    parts = []
    while True:
        chunk = s.recv(size)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


class Watch:
    """Polls /healthz (a new connection each time) and the collector's RSS."""

    def __init__(self, port, pid):
        self.port, self.pid = port, pid
        self.worst_ms = 0.0
        self.failures = 0
        self.polls = 0
        self.rss_before = rss_kib(pid) if pid else 0
        self.rss_peak = self.rss_before
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                data = read_all(s, 4096)
                s.close()
                if not data.startswith(b"HTTP/1.1 200"):
                    self.failures += 1
            except OSError:
                self.failures += 1
            ms = (time.monotonic() - t0) * 1000
            self.worst_ms = max(self.worst_ms, ms)
            self.polls += 1
            if self.pid:
                try:
                    self.rss_peak = max(self.rss_peak, rss_kib(self.pid))
                except OSError:
                    pass
            self.stop.wait(0.02)

    def done(self, out, settle=0.0):
        self.stop.set()
        self.t.join()
        if settle:
            time.sleep(settle)
        out.update(healthz_worst_ms=round(self.worst_ms, 1), healthz_failures=self.failures,
                   healthz_polls=self.polls, rss_before_kib=self.rss_before,
                   rss_peak_kib=self.rss_peak,
                   rss_after_kib=rss_kib(self.pid) if self.pid else 0)
        print(json.dumps(out))


def http(port, method, path, headers, body=b"", timeout=60):
    """One request on its own connection: (status, body, seconds)."""
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    head = "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" % (method, path)
    for k, v in headers.items():
        head += "%s: %s\r\n" % (k, v)
    if body or method == "POST":
        head += "Content-Length: %d\r\n" % len(body)
    s.sendall(head.encode() + b"\r\n" + body)
    data = b""
    try:
        data = read_all(s)
    except OSError:
        pass
    s.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    body = data.split(b"\r\n\r\n", 1)[-1]
    seconds = time.monotonic() - t0
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        # A binary answer (a gzip profile): its head is enough to show, and
        # decoding megabytes with replacements would hold the interpreter
        # long enough to delay the /healthz watcher's thread.
        text = body[:4096].decode("utf-8", "replace")
    return status, text, seconds


def regex(port, pid, token, patterns):
    w = Watch(port, pid)
    auth = {"Authorization": "Bearer " + token} if token != "-" else {}
    calls = []
    for p in patterns:
        sel = '{service_name=~"%s"}' % p.replace("\\", "\\\\").replace('"', '\\"')
        for method, body in (
                ("LabelNames", {"matchers": [sel]}),
                ("SelectMergeStacktraces", {"profileTypeID": "cpu-clock:cpu:nanoseconds:cpu:nanoseconds",
                                            "labelSelector": sel, "start": "0",
                                            "end": str(int(time.time() * 1000))})):
            h = dict(auth)
            h.update({"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
            st, text, secs = http(port, "POST", "/querier.v1.QuerierService/" + method, h,
                                  json.dumps(body).encode())
            calls.append({"pattern": p, "method": method, "status": st,
                          "seconds": round(secs, 3), "answer": text[:300]})
    w.done({"calls": calls})


def basic(port, pid):
    w = Watch(port, pid)
    values = ["====", "=", "A===", "AB=C", "==AA", "A=BC", "QQ==", "Og==", "", "====" * 100,
              "%%%%", "YTpi\x01==="]
    calls = []
    for v in values:
        for method, path, body in (("POST", "/api/v1/ingest?host=h", b"x" * 64),
                                   ("GET", "/api/v1/series", b"")):
            st, text, _ = http(port, method, path, {"Authorization": "Basic " + v}, body)
            calls.append({"value": v[:20], "path": path, "status": st, "answer": text[:200]})
    w.done({"calls": calls})


def bodies(port, pid, n, mb, token):
    w = Watch(port, pid)
    want = mb << 20
    socks, heads = [], []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        head = ("POST /querier.v1.QuerierService/LabelNames HTTP/1.1\r\nHost: x\r\n"
                "Content-Type: application/proto\r\nContent-Length: %d\r\n" % want)
        if token != "-":
            head += "Authorization: Bearer %s\r\n" % token
        s.sendall(head.encode() + b"\r\n")
        s.setblocking(False)
        socks.append(s)
        heads.append(b"")
    sent = [0] * n
    chunk = b"\0" * 65536
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        moved = False
        for i, s in enumerate(socks):
            if s is None:
                continue
            try:
                got = s.recv(4096)
                if got:
                    heads[i] += got
                else:
                    socks[i] = None
                    continue
            except BlockingIOError:
                pass
            except OSError:
                socks[i] = None
                continue
            if sent[i] < want - 1024:  # most of the body, never all of it
                try:
                    k = s.send(chunk[:min(len(chunk), want - 1024 - sent[i])])
                    sent[i] += k
                    moved = moved or k > 0
                except BlockingIOError:
                    pass
                except OSError:
                    socks[i] = None
        if not moved:
            time.sleep(0.01)
    rss_loaded = rss_kib(pid)
    statuses = {}
    for h in heads:
        st = h.split(b" ", 2)[1].decode() if h.startswith(b"HTTP/") else "none"
        statuses[st] = statuses.get(st, 0) + 1
    for s in socks:
        if s is not None:
            s.close()
    w.done({"statuses": statuses, "sent_mib": round(sum(sent) / (1 << 20), 1),
            "rss_loaded_kib": rss_loaded, "answers": [h[:400].decode("latin-1") for h in heads
                                                       if h][:3]}, settle=2.0)


def stall(port, n, mb, secs):
    socks, t0 = [], time.monotonic()
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(("POST /querier.v1.QuerierService/LabelNames HTTP/1.1\r\nHost: x\r\n"
                   "Content-Type: application/proto\r\nContent-Length: %d\r\n\r\n"
                   % (mb << 20)).encode() + b"\0" * 65536)
        s.setblocking(False)
        socks.append(s)
    closed = [None] * n
    while time.monotonic() - t0 < secs and None in closed:
        for i, s in enumerate(socks):
            if closed[i] is not None:
                continue
            try:
                if not s.recv(4096):
                    closed[i] = round(time.monotonic() - t0, 1)
            except BlockingIOError:
                pass
            except OSError:
                closed[i] = round(time.monotonic() - t0, 1)
        time.sleep(0.05)
    for s in socks:
        s.close()
    print(json.dumps({"closed_after": closed}))


def refused(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    body = b'{"start":"0"}'
    q = b"POST /querier.v1.QuerierService/ProfileTypes HTTP/1.1\r\nHost: x\r\n" \
        b"Content-Type: application/json\r\n"
    s.sendall(q + b"Content-Length: %d\r\n\r\n" % len(body))
    time.sleep(0.3)  # the answer comes from the head; the body follows it
    s.sendall(body)
    s.sendall(q + b"Transfer-Encoding: chunked\r\n\r\n")
    time.sleep(0.3)
    s.sendall(b"5;ext=1\r\n" + body[:5] + b"\r\n" + b"%x\r\n" % (len(body) - 5) + body[5:] +
              b"\r\n0\r\nX-Trailer: 1\r\n\r\n")
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = read_all(s)
    s.close()
    statuses = [int(m) for m in re.findall(rb"HTTP/1\.1 (\d{3}) ", data)]
    print(json.dumps({"statuses": statuses,
                      "connect": data.count(b'"code":"unauthenticated"')}))


def head(port, pid):
    w = Watch(port, pid)
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = read_all(s)
    s.close()
    first, _, rest = data.partition(b"\r\n\r\n")
    length = None
    for line in first.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    w.done({"head": first.decode("latin-1"), "content_length": length,
            "after_head": rest[:200].decode("latin-1"),
            "next_is_answer": rest.startswith(b"HTTP/1.1 200")})


def get(port, pid, token, n, path):
    w = Watch(port, pid)
    calls = []
    for _ in range(n):
        st, text, secs = http(port, "GET", path, {"Authorization": "Bearer " + token})
        calls.append({"status": st, "seconds": round(secs, 3), "answer": text[:200]})
    w.done({"calls": calls}, settle=1.5)


def flood(port, pid, token, n, path, hang):
    """n reads sent at once, each on its own connection, the first hang of
    them hung up at once; the answers of the rest, counted by status."""
    w = Watch(port, pid)
    t0 = time.monotonic()
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Connection: close\r\n\r\n" % (path, token)).encode())
        socks.append(s)
    for s in socks[:hang]:
        s.close()
    statuses, busy = {}, 0
    for s in socks[hang:]:
        try:
            data = read_all(s)
        except OSError:
            data = b""
        s.close()
        st = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "none"
        statuses[st] = statuses.get(st, 0) + 1
        busy += b"too many reads are waiting" in data[:4096]
    w.done({"statuses": statuses, "busy": busy, "seconds": round(time.monotonic() - t0, 2)},
           settle=0.5)


def stop(port, pid, token, n, path, after):
    """n reads sent at once, then SIGTERM to the collector after some
    seconds: how each read was answered."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                   "Connection: close\r\n\r\n" % (path, token)).encode())
        socks.append(s)
    time.sleep(after)
    os.kill(pid, signal.SIGTERM)
    answers = []
    for s in socks:
        try:
            data = read_all(s)
        except OSError:
            data = b""
        s.close()
        st = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "none"
        answers.append({"status": st, "stopping": b"the collector is stopping" in data[:4096]})
    print(json.dumps({"answers": answers}))


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "regex":
        regex(port, int(sys.argv[3]), sys.argv[4], sys.argv[5:])
    elif mode == "basic":
        basic(port, int(sys.argv[3]))
    elif mode == "bodies":
        bodies(port, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    elif mode == "stall":
        stall(port, int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    elif mode == "refused":
        refused(port)
    elif mode == "get":
        get(port, int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6])
    elif mode == "head":
        head(port, int(sys.argv[3]))
    elif mode == "flood":
        flood(port, int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6], int(sys.argv[7]))
    elif mode == "stop":
        stop(port, int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6],
             float(sys.argv[7]))
    else:
        sys.exit("collattack.py: unknown mode " + mode)


if __name__ == "__main__":
    main()
