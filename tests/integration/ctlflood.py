#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A local user's clients that ask the agent for answers and never read them,
for test-hostile.sh. Prints one JSON object of what it saw.

  ctlflood.py unread SOCKET PID N   up to N connections, one after the other,
                                    each asks for PID's dump (folded) and
                                    keeps it unread; stops at the first
                                    refusal
  ctlflood.py burst SOCKET PID N    N tries of three dumps sent at once on
                                    three connections; counts the refusals
"""
import array
import fcntl
import json
import socket
import struct
import sys
import termios
import time


def ask(path, pid):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    body = b"cmd=dump\npid=%s\nformat=folded\n" % pid.encode()
    s.sendall(struct.pack(">I", len(body)) + body)
    return s


def queued(s):
    n = array.array("i", [0])
    fcntl.ioctl(s, termios.FIONREAD, n)
    return n[0]


def status_line(s, limit=20.0):
    """The answer's status line, peeked (the answer stays unread)."""
    deadline = time.time() + limit
    while time.time() < deadline:
        if queued(s) >= 4:
            head = s.recv(4096, socket.MSG_PEEK)
            if b"\n" in head[4:]:
                return head[4:].split(b"\n", 1)[0].decode(errors="replace")
        time.sleep(0.02)
    return None


def unread(path, pid, n):
    held, seen = [], []
    for _ in range(n):
        s = ask(path, pid)
        line = status_line(s)
        seen.append(line)
        if line is None or line.startswith("error"):
            break
        time.sleep(0.3)  # the agent pushes what the socket takes
        seen[-1] += " (%d bytes queued)" % queued(s)
        held.append(s)
    return {"answers": seen, "held": len(held)}


def burst(path, pid, n):
    refused, lines = 0, []
    for _ in range(n):
        socks = [ask(path, pid) for _ in range(3)]
        for s in socks:
            line = status_line(s)
            lines.append(line)
            refused += bool(line and "under way" in line)
        for s in socks:
            s.close()
    return {"refused": refused, "lines": sorted(set(str(x) for x in lines))}


if __name__ == "__main__":
    mode, path, pid, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    print(json.dumps({"unread": unread, "burst": burst}[mode](path, pid, n)))
