# SPDX-License-Identifier: MIT
#
# A Python program that forks and makes short-lived threads, for
# test-python-stacks: once GO exists (when given) it forks a child that
# runs child_work() (pure Python) for SECONDS, while the parent starts
# one thread after another, each running short_job() for about 20 ms of
# CPU and exiting, for SECONDS. It prints its pid, then the child's pid
# when forked, and ends after the child.
#
#   python3.X forks.py SECONDS [GO]
import os
import sys
import threading
import time

SECONDS = float(sys.argv[1])
GO = sys.argv[2] if len(sys.argv) > 2 else None


def busy(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def child_work(end):
    while time.monotonic() < end:
        busy(5000)


def short_job():
    t = time.thread_time()
    while time.thread_time() - t < 0.02:
        busy(1000)


def parent_work(end):
    while time.monotonic() < end:
        th = threading.Thread(target=short_job, name="short")
        th.start()
        th.join()


print(os.getpid(), flush=True)
while GO and not os.path.exists(GO):
    time.sleep(0.001)
end = time.monotonic() + SECONDS
pid = os.fork()
if pid == 0:
    child_work(end)
    os._exit(0)
print(pid, flush=True)
parent_work(end)
os.waitpid(pid, 0)
