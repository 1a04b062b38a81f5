# SPDX-License-Identifier: MIT
#
# A process that looks like a HotSpot JVM to the agent and exits while the
# agent's request is pending, for test-java.sh: it maps a file named
# libjvm.so (argv[1]), catches SIGQUIT and runs code from an anonymous
# executable page (JIT code no perf map names). On SIGQUIT it listens on
# /tmp/.java_pidPID as HotSpot's attach listener does, takes the first
# connection, reads the request, writes "asked" to argv[2], and exits a
# second later without answering. It exits after argv[3] seconds (default
# 20) if never asked. Prints its pid first.
import ctypes
import mmap
import os
import signal
import socket
import sys
import threading
import time

ctypes.CDLL(sys.argv[1])
mark, life = sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
path = "/tmp/.java_pid%d" % os.getpid()


def listen():
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    conn, _ = srv.accept()
    conn.recv(4096)
    with open(mark, "w") as f:
        f.write("asked\n")
    time.sleep(1)
    os.unlink(path)
    os._exit(0)  # the request still pending: no answer is ever written


def on_quit(sig, frame):
    if not os.path.exists(path):
        threading.Thread(target=listen, daemon=True).start()


signal.signal(signal.SIGQUIT, on_quit)
# mov ecx, 0x100000; 1: dec ecx; jnz 1b; ret
code = bytes([0xB9, 0x00, 0x00, 0x10, 0x00, 0xFF, 0xC9, 0x75, 0xFC, 0xC3])
page = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                 prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
spin = ctypes.CFUNCTYPE(None)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
print(os.getpid(), flush=True)
end = time.time() + life
while time.time() < end:
    spin()
