# SPDX-License-Identifier: MIT
#
# A Python program that measures where its threads wait, for
# test-python-offcpu. Three threads:
#   main:    outer() runs, in turn: caller_one() and caller_two() calling
#            nap() (time.sleep, 3 ms) 1 and 3 times, then compute() (a
#            little CPU);
#   waiter:  wait_event() waits 8 ms on a threading.Event nobody sets (a
#            futex wait under threading.py's Python frames);
#   reader:  read_pipe() blocks reading a pipe that the main thread writes
#            a byte to at each turn of outer().
# Each waiting function adds its own inclusive wall time
# (time.monotonic_ns) per thread, and nap() its time per caller; at the end
# it writes OUT, JSON: {"threads": {name: {"tid": N, "wall_ns": N,
# "cpu_ns": N, "functions": {name: ns}}}, "nap_callers": {name: ns},
# "file": path}; cpu_ns by the thread's cpu-clock (cpuclock.py says why). It prints its pid, waits for GO (when given), runs
# SECONDS, and then writes OUT.
#
#   python3.X waits.py OUT SECONDS [GO]
import json
import os
import sys
import threading
import time

import cpuclock  # beside this file

OUT, SECONDS = sys.argv[1], float(sys.argv[2])
GO = sys.argv[3] if len(sys.argv) > 3 else None
wall = time.monotonic_ns
local = threading.local()
NAP_CALLERS = {}
RESULTS = {}
RD, WR = os.pipe()


def account(name, ns):
    f = local.functions
    f[name] = f.get(name, 0) + ns


def nap(caller):
    t = wall()
    time.sleep(0.003)
    d = wall() - t
    account("nap", d)
    NAP_CALLERS[caller] = NAP_CALLERS.get(caller, 0) + d


def caller_one():
    nap("caller_one")


def caller_two():
    for _ in range(3):
        nap("caller_two")


def compute():
    s = 0
    for i in range(3000):
        s += i * i
    return s


def outer():
    caller_one()
    caller_two()
    compute()
    os.write(WR, b"x")


EVENT = threading.Event()


def wait_event():
    t = wall()
    EVENT.wait(0.008)
    account("wait_event", wall() - t)


def read_pipe():
    t = wall()
    b = os.read(RD, 1)
    account("read_pipe", wall() - t)
    return b


def run(body, end):
    local.functions = {}
    w, c = wall(), cpuclock.thread_cpu_ns()
    while time.monotonic() < end:
        body()
    RESULTS[threading.current_thread().name] = {
        "tid": threading.get_native_id(),
        "wall_ns": wall() - w,
        "cpu_ns": cpuclock.thread_cpu_ns() - c,
        "functions": local.functions,
    }


print(os.getpid(), flush=True)
while GO and not os.path.exists(GO):
    time.sleep(0.001)
end = time.monotonic() + SECONDS
threads = [threading.Thread(target=run, args=(wait_event, end), name="waiter"),
           threading.Thread(target=run, args=(read_pipe, end), name="reader")]
for t in threads:
    t.start()
run(outer, end)
os.write(WR, b"x")  # the reader's last read
for t in threads:
    t.join()
with open(OUT + ".tmp", "w") as f:
    json.dump({"threads": RESULTS, "nap_callers": NAP_CALLERS, "file": os.path.abspath(__file__)}, f)
os.rename(OUT + ".tmp", OUT)
