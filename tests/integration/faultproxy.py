#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An HTTP proxy on 127.0.0.1 that stands between the agent and a real
collector and misbehaves on demand, for the upload fault tests.

Usage: faultproxy.py PORT UPSTREAM_URL MODE_FILE LOG_FILE

Before each request it reads MODE_FILE (one line):
  proxy            forward the request, return the collector's answer
  status CODE      answer CODE without forwarding (404, 405, 503, ...)
  redirect         answer 301 to UPSTREAM_URL/elsewhere without forwarding
  hang SECONDS     read the request, then say nothing for SECONDS
  limit BYTES      413 for bodies over BYTES, forward the others
  limit-half       the first body sets the limit to half its size: 413
                   for bodies over it, forward the others
  kill PIDFILE     forward; when the collector says 2xx, SIGKILL the
                   process in PIDFILE and drop the connection unanswered
                   (the agent dies between the 2xx and recording it)
Every request is logged to LOG_FILE as one line:
  MODE-WORD KEY BYTES ANSWER
It exits after 600 s whatever happens, so a failed test leaves nothing.
"""
import http.server
import os
import signal
import socketserver
import sys
import threading
import time
import urllib.error
import urllib.request

PORT, UPSTREAM, MODE_FILE, LOG_FILE = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
LOCK = threading.Lock()
HALF = {"limit": None}  # the limit-half mode's limit, reset by any other mode


def mode():
    try:
        with open(MODE_FILE) as f:
            words = f.read().split()
    except OSError:
        words = []
    return words or ["proxy"]


def log(*fields):
    with LOCK, open(LOG_FILE, "a") as f:
        f.write(" ".join(str(x) for x in fields) + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def forward(self, body):
        req = urllib.request.Request(UPSTREAM + self.path, data=body, method=self.command)
        for h in ("Idempotency-Key", "Authorization", "Content-Type"):
            if self.headers.get(h):
                req.add_header(h, self.headers[h])
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except OSError as e:
            return 502, str(e).encode()

    def do_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        key = self.headers.get("Idempotency-Key", "-")
        m = mode()
        with LOCK:
            if m[0] != "limit-half":
                HALF["limit"] = None
            elif HALF["limit"] is None:
                HALF["limit"] = n // 2
            half = HALF["limit"]
        if m[0] == "limit-half" and n > half:
            log(m[0], key, n, 413)
            self.answer(413, b"too large for the fault proxy\n")
        elif m[0] == "status":
            code = int(m[1])
            log(m[0], key, n, code)
            self.answer(code, b"fault proxy says %d\n" % code)
        elif m[0] == "redirect":
            log(m[0], key, n, 301)
            self.answer(301, b"moved\n", [("Location", UPSTREAM + "/elsewhere" + self.path)])
        elif m[0] == "hang":
            log(m[0], key, n, "hang")
            time.sleep(float(m[1]))
            self.close_connection = True
        elif m[0] == "limit" and n > int(m[1]):
            log(m[0], key, n, 413)
            self.answer(413, b"too large for the fault proxy\n")
        elif m[0] == "kill":
            code, data = self.forward(body)
            log(m[0], key, n, code)
            if 200 <= code < 300:
                with open(m[1]) as f:
                    os.kill(int(f.read().strip()), signal.SIGKILL)
                self.close_connection = True
                return
            self.answer(code, data)
        else:
            code, data = self.forward(body)
            log(m[0], key, n, code)
            self.answer(code, data)

    do_GET = do_POST = do_PUT = do_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


signal.signal(signal.SIGALRM, lambda *a: os._exit(0))
signal.alarm(600)
Server(("127.0.0.1", PORT), Handler).serve_forever()
