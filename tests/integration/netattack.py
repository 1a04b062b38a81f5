#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile HTTP clients against a collector on loopback, for test-hostile.sh.

Each mode runs one attack, bounded in time and count, and prints one JSON
object of what it saw; the shell script judges it.

  netattack.py bodies PORT PID N MB     N clients at once each send an upload's
                                        head claiming an MB MiB body (no token, a
                                        wrong token), then push it
  netattack.py slow PORT                a head trickled one byte a second
  netattack.py caps PORT PER_IP MAX TOKEN  PER_IP idle connections from
                                        127.0.0.1, then one more; the rest up to MAX
                                        from 127.0.0.2, then a newcomer (one idle
                                        shed); then MAX uploads under way, a
                                        newcomer (503), and more (closed)
  netattack.py heads PORT               heads the gate must refuse or clean
  netattack.py bomb PORT TOKEN MB       a gzip bomb (MB MiB of zeros) uploaded
                                        while /metrics is polled
  netattack.py flood PORT N ADDRS SECS PID  N connections from ADDRS loopback
                                        addresses (127.0.1.x), each sending half a
                                        request head, every one the collector
                                        closes opened again, for SECS seconds;
                                        the collector's (PID) memory sampled
"""
import gzip
import json
import resource
import selectors
import socket
import sys
import threading
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def answer(sock, limit=5.0):
    """What the server sent until it closed or went quiet for limit seconds."""
    sock.settimeout(limit)
    out = b""
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                break
            out += d
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def status(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


def request(port, data, src="127.0.0.1", limit=5.0):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(data)
    resp = answer(s, limit)
    s.close()
    return resp


def get(port, path, src="127.0.0.1", headers=""):
    return request(port, f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n"
                   .encode(), src)


def bodies(port, pid, n, mb):
    before = rss_kib(pid)
    results = []
    lock = threading.Lock()

    def one(i):
        auth = "" if i % 2 == 0 else "Authorization: Bearer not-the-token\r\n"
        head = (f"POST /api/v1/ingest?host=h&pid=1&starttime=1&event=e&from=1&to=2 HTTP/1.1\r\n"
                f"Host: x\r\n{auth}Content-Length: {mb << 20}\r\n\r\n").encode()
        s = socket.create_connection(("127.0.0.1", port))
        t0 = time.monotonic()
        s.sendall(head)
        sent, chunk, err = 0, b"\0" * 65536, ""
        try:
            s.settimeout(10)
            while sent < mb << 20:
                sent += s.send(chunk)
        except OSError as e:
            err = type(e).__name__
        resp = answer(s, 3)
        with lock:
            results.append({"status": status(resp), "sent": sent, "error": err,
                            "answer": resp.split(b"\r\n\r\n", 1)[-1].decode(errors="replace").strip(),
                            "seconds": round(time.monotonic() - t0, 3)})
        s.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    peak = before
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_kib(pid))
        time.sleep(0.01)
    for t in threads:
        t.join()
    return {"rss_before_kib": before, "rss_peak_kib": peak, "results": results,
            "healthz": status(get(port, "/healthz"))}


def slow(port):
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.monotonic()
    head = b"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 100
    closed_after, healthz = None, []
    for b in head:
        try:
            s.send(bytes([b]))
        except OSError:
            closed_after = time.monotonic() - t0
            break
        s.settimeout(1.0)
        try:
            if s.recv(1) == b"":
                closed_after = time.monotonic() - t0
                break
        except socket.timeout:
            pass
        except OSError:
            closed_after = time.monotonic() - t0
            break
        if len(healthz) < 3:
            healthz.append(status(get(port, "/healthz")))
        if time.monotonic() - t0 > 30:
            break
    s.close()
    return {"closed_after": closed_after, "healthz": healthz}


def idle_from(src, port, n):
    """n connections from address src that send nothing."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        socks.append(s)
    return socks


def uploading(src, port, token):
    """A connection from src in the middle of an upload with the token (its body begun)."""
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
              token.encode() + b"\r\nContent-Length: 100000\r\n\r\n" + b"x" * 10)
    return s


def closed_count(socks):
    n = 0
    for s in socks:
        s.settimeout(0.2)
        try:
            if s.recv(1) == b"":
                n += 1
        except (socket.timeout, ConnectionResetError):
            pass
    return n


def caps(port, per_ip, max_conns, token):
    idle = idle_from("127.0.0.1", port, per_ip)
    time.sleep(0.3)
    over = request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    other = get(port, "/healthz", src="127.0.0.2")
    # Fill the rest from 127.0.0.2 with connections that say nothing.
    more = idle_from("127.0.0.2", port, max_conns - per_ip)
    time.sleep(0.3)
    # Full of half-open connections: a newcomer sheds the oldest and is served.
    room = get(port, "/healthz", src="127.0.0.3")
    time.sleep(0.3)
    shed = closed_count(idle + more)
    for s in idle + more:
        s.close()
    time.sleep(0.5)
    # Full of uploads under way (with the token): none can go, so 503 ...
    ups = [uploading("127.0.0.%d" % (4 + i % 2), port, token) for i in range(max_conns)]
    time.sleep(0.3)
    full = request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", src="127.0.0.6")
    # ... and past a quarter more than the cap, connections are closed unanswered.
    flood = idle_from("127.0.0.6", port, max_conns)
    time.sleep(0.5)
    flood_closed = closed_count(flood)
    ups_open = len(ups) - closed_count(ups)
    for s in ups + flood:
        s.close()
    time.sleep(0.5)
    after = get(port, "/healthz")
    return {"over_per_ip": status(over), "retry_after": b"Retry-After: 5" in over,
            "over_answer": over.split(b"\r\n\r\n", 1)[-1].decode(errors="replace").strip(),
            "other_ip": status(other), "room": status(room), "idle_shed": shed,
            "full": status(full), "full_retry_after": b"Retry-After: 5" in full,
            "uploads_kept": ups_open, "flood_closed": flood_closed, "flood_opened": len(flood),
            "after": status(after)}


def heads(port):
    cases = {
        "head_with_length": b"HEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        "get_with_body": b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        "two_lengths": b"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                       b"Content-Length: 30\r\n\r\nabc",
        "signed_length": b"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc",
        "nul_in_key": b"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nContent-Length\0x: 3\r\n\r\nabc",
        "chunked": b"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"3\r\nabc\r\n0\r\n\r\n",
        "huge_head": b"GET /healthz HTTP/1.1\r\nX-Pad: " + b"a" * (70 << 10) + b"\r\n\r\n",
        "forged_mark": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Fleetprof-Gate: 3\r\n"
                       b"Connection: close\r\n\r\n",
        "forged_mark_folded": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Fleetprof-Gate: 3\r\n 4\r\n"
                              b"Connection: close\r\n\r\n",
        # A body-less request, then an upload without the token on the same connection.
        "pipelined": b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nab",
    }
    out = {}
    for name, data in cases.items():
        resp = request(port, data, limit=3)
        codes = []
        for part in resp.split(b"HTTP/1.1 ")[1:]:
            try:
                codes.append(int(part[:3]))
            except ValueError:
                pass
        out[name] = codes
    return out


def bomb(port, token, mb):
    body = gzip.compress(b"\0" * (mb << 20), 9)
    path = "/api/v1/ingest?host=bomb&pid=1&starttime=1&event=cpu-clock&from=1&to=2"
    done = {}

    def upload():
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                  f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        resp = answer(s, 60)
        done["status"] = status(resp)
        done["answer"] = resp.split(b"\r\n\r\n", 1)[-1].decode(errors="replace").strip()
        done["at"] = time.monotonic()

    t = threading.Thread(target=upload)
    t0 = time.monotonic()
    t.start()
    answered_while_queued = 0
    polls = 0
    while t.is_alive() and time.monotonic() - t0 < 60:
        m = get(port, "/metrics", headers="").decode(errors="replace")
        polls += 1
        for line in m.splitlines():
            if line.startswith("fleetprof_collector_write_queue_uploads ") and \
                    float(line.split()[1]) >= 1 and "status" not in done:
                answered_while_queued += 1
        time.sleep(0.005)
    t.join()
    return {"body_bytes": len(body), "status": done.get("status"), "answer": done.get("answer"),
            "seconds": round(done.get("at", t0) - t0, 3), "polls": polls,
            "metrics_answered_while_decoding": answered_while_queued}


def flood(port, n, addrs, secs, pid):
    """Half-open connections from many addresses, kept at n for secs seconds."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sel = selectors.DefaultSelector()
    half = b"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nContent-Le"
    opened = closed = failed = 0
    rss_before = rss_kib(pid)
    rss_peak = rss_before

    def open_one(i):
        nonlocal opened, failed
        s = socket.socket()
        s.setblocking(False)
        try:
            s.bind(("127.0.1.%d" % (1 + i % addrs), 0))
            s.connect_ex(("127.0.0.1", port))
        except OSError:
            failed += 1
            s.close()
            return
        sel.register(s, selectors.EVENT_WRITE, [i, False])
        opened += 1

    for i in range(n):
        open_one(i)
    t0 = time.monotonic()
    while time.monotonic() - t0 < secs:
        for key, ev in sel.select(timeout=0.2):
            s, (i, sent) = key.fileobj, key.data
            if not sent:
                try:
                    s.send(half)
                except OSError:
                    pass
                sel.modify(s, selectors.EVENT_READ, [i, True])
                continue
            try:
                d = s.recv(4096)
            except OSError:
                d = b""
            if not d:  # the collector closed it: open another
                sel.unregister(s)
                s.close()
                closed += 1
                open_one(i)
        rss_peak = max(rss_peak, rss_kib(pid))
    held = len(sel.get_map())
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    return {"opened": opened, "closed_by_collector": closed, "open_at_end": held,
            "connect_failed": failed, "rss_before_kib": rss_before, "rss_peak_kib": rss_peak}


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "bodies":
        r = bodies(port, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif mode == "slow":
        r = slow(port)
    elif mode == "caps":
        r = caps(port, int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif mode == "heads":
        r = heads(port)
    elif mode == "bomb":
        r = bomb(port, sys.argv[3], int(sys.argv[4]))
    elif mode == "flood":
        r = flood(port, int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]))
    else:
        sys.exit(f"unknown mode {mode}")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
