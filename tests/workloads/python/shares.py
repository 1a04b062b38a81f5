# SPDX-License-Identifier: MIT
#
# A Python program that measures where its own CPU time goes, for
# test-python-stacks. Two threads:
#   main:   outer() runs, in turn: spin() (pure Python); caller_one() and
#           caller_two() calling shared() 1 and 3 times; recurse(50) down to
#           bottom(); squeeze() calling zlib.compress and hashlib.sha256 (C
#           code under a Python caller); drain() consuming produce(), a
#           generator; and hot_line(), whose time is on the line marked HOT.
#   worker: worker_spin() all along.
#   churn:  churn_a() and churn_b() calling each other to a depth that
#           changes at every call (in and out of deep stacks, fast).
# Each function adds its own inclusive CPU time per thread, by the clock the
# profiler samples by (cpuclock.py: the thread's cpu-clock, not
# thread_time_ns, which leaves out a VM's stolen time); at the end it writes
# OUT, JSON: {"threads": {name: {"tid": N, "cpu_ns": N, "functions": {name:
# ns}}}, "callers": {name: ns of shared() under it}, "hot_line": N, "file":
# path, "overhead_ns": N, "clock": "cpu-clock" or "thread_time"}. It prints
# its pid, waits for GO (when given), runs SECONDS, and then writes OUT.
#
# A function's samples also fall in what its own measuring costs outside
# the measured interval: its call, half of each clock read (a system
# call), account(). That cost, overhead_ns a call, is added to each call's
# time: 2.5-3.5 us, 5-7% of shared()'s, which its samples would otherwise
# seem to overstate. It is measured on a function measuring nothing, a few
# calls every 16 turns of outer() all through the run: the profiler makes
# the clock's system call dearer (2.5 us a call before it attaches, 3.2
# after, on the 2-core VM), and a busy machine more so; measured once
# before the profiler attached, shared() came out 0.5-2.3 points high.
#
#   python3.X shares.py OUT SECONDS [GO]
import hashlib
import json
import os
import sys
import threading
import time
import zlib

import cpuclock  # beside this file

OUT, SECONDS = sys.argv[1], float(sys.argv[2])
GO = sys.argv[3] if len(sys.argv) > 3 else None
clock = cpuclock.thread_cpu_ns
local = threading.local()
DATA = bytes(range(256)) * 64


def pause(s):
    time.sleep(s)  # the GIL left to the main thread


def account(name, ns):
    f = local.functions
    f[name] = f.get(name, 0) + ns
    c = local.calls
    c[name] = c.get(name, 0) + 1


def measured_nothing():
    t = clock()
    account("nothing", clock() - t)


def overhead_ns(n):
    """Adds to OVERHEAD what n calls of a measured function cost outside
    their measured interval (this thread's own accounts kept aside)."""
    kept = local.functions, local.calls
    local.functions, local.calls = {}, {}
    t0 = clock()
    t = clock()  # t - t0: what lies between two readings, in this interval too
    for _ in range(n):
        measured_nothing()
    OVERHEAD[0] += clock() - t - (t - t0) - local.functions["nothing"]
    OVERHEAD[1] += n
    local.functions, local.calls = kept


def busy(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def spin():
    t = clock()
    busy(18000)
    account("spin", clock() - t)


def shared():
    t = clock()
    busy(6000)
    account("shared", clock() - t)


def caller_one():
    t = clock()
    shared()
    d = clock() - t
    account("caller_one", d)
    CALLERS["caller_one"] = CALLERS.get("caller_one", 0) + d


def caller_two():
    t = clock()
    for _ in range(3):
        shared()
    d = clock() - t
    account("caller_two", d)
    CALLERS["caller_two"] = CALLERS.get("caller_two", 0) + d


def bottom():
    busy(9000)


def recurse(depth):
    if depth == 0:
        t = clock()
        bottom()
        account("bottom", clock() - t)
        return
    recurse(depth - 1)


def squeeze():
    t = clock()
    zlib.compress(DATA, 6)
    hashlib.sha256(DATA[:2000]).digest()  # under 2 KiB: it keeps the GIL
    account("squeeze", clock() - t)


def produce(n):
    for i in range(n):
        yield busy(40) + i


def drain():
    t = clock()
    s = 0
    for v in produce(60):
        s += v
    account("drain", clock() - t)
    return s


def hot_line():
    t = clock()
    s = 0
    for i in range(6000):
        s += i * i % 7 + i * 3 % 5 + (i ^ 5) % 3 + i * 11 % 13  # HOT
    account("hot_line", clock() - t)
    return s


def outer(turns=[0]):
    turns[0] += 1
    if turns[0] % 16 == 0:
        overhead_ns(8)
    spin()
    caller_one()
    caller_two()
    t = clock()
    recurse(50)
    account("recurse", clock() - t)
    squeeze()
    drain()
    hot_line()


def run(body, end):
    local.functions, local.calls = {}, {}
    start = clock()
    while time.monotonic() < end:
        body()
    RESULTS[threading.current_thread().name] = {
        "tid": threading.get_native_id(),
        "cpu_ns": clock() - start,
        "functions": local.functions,
        "calls": local.calls,
    }


def worker_spin():
    t = clock()
    busy(5000)
    account("worker_spin", clock() - t)


def worker_step():
    worker_spin()
    pause(0.005)


def churn_a(depth, rnd):
    if depth == 0:
        return busy(20)
    return churn_b(depth - 1, rnd)


def churn_b(depth, rnd):
    if depth == 0:
        return busy(20)
    return churn_a(depth - 1, rnd)


def churn(rnd=[12345]):
    # a small linear congruential generator: the same depths on every run
    rnd[0] = (rnd[0] * 1103515245 + 12345) % (1 << 31)
    t = clock()
    churn_a(rnd[0] % 200, rnd)
    account("churn", clock() - t)


def churn_step():
    churn()
    pause(0.002)


CALLERS = {}
RESULTS = {}
OVERHEAD = [0, 0]  # ns outside the measured intervals, calls
print(os.getpid(), flush=True)
while GO and not os.path.exists(GO):
    time.sleep(0.001)
end = time.monotonic() + SECONDS
w = threading.Thread(target=run, args=(worker_step, end), name="worker")
w.start()
c = threading.Thread(target=run, args=(churn_step, end), name="churn")
c.start()
run(outer, end)
w.join()
c.join()
overhead = max(0, OVERHEAD[0] // max(1, OVERHEAD[1]))
for r in RESULTS.values():
    calls = r.pop("calls")
    r["functions"] = {k: v + calls[k] * overhead for k, v in r["functions"].items()}
hot = [i + 1 for i, l in enumerate(open(__file__)) if l.rstrip().endswith("# " + "HOT")][0]
with open(OUT + ".tmp", "w") as f:
    json.dump({"threads": RESULTS, "callers": CALLERS, "hot_line": hot,
               "file": os.path.abspath(__file__), "overhead_ns": overhead,
               "clock": cpuclock.source()}, f)
os.rename(OUT + ".tmp", OUT)
