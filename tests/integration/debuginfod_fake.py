# SPDX-License-Identifier: MIT
#
# A debuginfod server that misbehaves on purpose, for test-debuginfod:
#
#   python3 debuginfod_fake.py PORT DIR LOG
#
# GET /buildid/ID/KIND (KIND debuginfo or executable) answers from DIR:
# with DIR/ID.status holding "500", HTTP 500; holding "hang", nothing for
# 60 s; holding "redirect ORIGIN", 302 to ORIGIN/moved/buildid/ID/KIND;
# else the bytes of DIR/ID.KIND (200), or 404 when there is no such file.
# /moved/buildid/ID/KIND answers as /buildid/ID/KIND would without the
# status file. Every request is appended to LOG as "ID KIND" ("ID KIND
# moved" for the second). 127.0.0.1 only.
import http.server
import os
import sys
import time

PORT, DIR, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        parts = self.path.strip("/").split("/")
        moved = parts[:1] == ["moved"]
        parts = parts[1:] if moved else parts
        if len(parts) != 3 or parts[0] != "buildid":
            self.send_error(404)
            return
        bid, kind = parts[1], parts[2]
        with open(LOG, "a") as f:
            f.write("%s %s%s\n" % (bid, kind, " moved" if moved else ""))
        status = os.path.join(DIR, bid + ".status")
        if os.path.exists(status) and not moved:
            what = open(status).read().strip()
            if what == "hang":
                time.sleep(60)
                return
            if what.startswith("redirect "):
                self.send_response(302)
                self.send_header("Location", what.split(" ", 1)[1] + "/moved" + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_error(int(what))
            return
        path = os.path.join(DIR, "%s.%s" % (bid, kind))
        if not os.path.exists(path):
            self.send_error(404)
            return
        data = open(path, "rb").read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer.daemon_threads = True
http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
