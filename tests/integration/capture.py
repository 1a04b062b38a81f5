# SPDX-License-Identifier: MIT
#
# A stand-in collector for the agent's other protocols: it keeps every
# request it gets and answers as told, so a test sees exactly what the
# agent sent and how it takes each answer.
#
#   python3 capture.py PORT DIR [--answers FILE] [--lifetime SECS]
#
# Request N (from 1) is kept as DIR/N.body (its body as received) and
# DIR/N.json ({"path", "headers"}); DIR/count holds how many arrived.
# FILE holds one answer per line, taken in turn by the requests (the last
# one for every request after): "CODE [BODY-FILE] [Retry-After]", e.g.
# "503 - 2" or "200 partial.bin". It is re-read at each request, so a test
# changes the answers by rewriting it. Without answers: 200, empty body.
# The server stops by itself after --lifetime seconds (default 300).
import http.server
import json
import os
import sys
import threading


def main():
    port, out = int(sys.argv[1]), sys.argv[2]
    args = sys.argv[3:]
    answers = args[args.index("--answers") + 1] if "--answers" in args else None
    lifetime = float(args[args.index("--lifetime") + 1]) if "--lifetime" in args else 300
    os.makedirs(out, exist_ok=True)
    lock = threading.Lock()
    state = {"n": 0}

    def answer(n):
        lines = []
        if answers and os.path.exists(answers):
            with open(answers) as f:
                lines = [ln.split() for ln in f if ln.strip()]
        if not lines:
            return 200, b"", None
        parts = lines[min(n, len(lines)) - 1]
        body = b""
        if len(parts) > 1 and parts[1] != "-":
            with open(parts[1], "rb") as f:
                body = f.read()
        return int(parts[0]), body, parts[2] if len(parts) > 2 else None

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with lock:
                state["n"] += 1
                n = state["n"]
                with open(os.path.join(out, "%d.body" % n), "wb") as f:
                    f.write(body)
                with open(os.path.join(out, "%d.json" % n), "w") as f:
                    json.dump({"path": self.path, "headers": dict(self.headers.items())}, f)
                with open(os.path.join(out, "count.tmp"), "w") as f:
                    f.write("%d\n" % n)
                os.replace(os.path.join(out, "count.tmp"), os.path.join(out, "count"))
                code, reply, retry_after = answer(n)
            self.send_response(code)
            self.send_header("Content-Length", str(len(reply)))
            if retry_after:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, fmt, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Timer(lifetime, srv.shutdown).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()
