# SPDX-License-Identifier: MIT
#
# The calling thread's CPU time as the kernel's cpu-clock event counts it:
# the clock the profiler samples by, read from a counting perf event of the
# thread's own (one per thread, opened at its first reading).
#
# time.thread_time_ns() is not that clock on a virtual machine: with
# paravirtual steal accounting (CONFIG_PARAVIRT_TIME_ACCOUNTING, Debian's
# kernels) a thread's CPU time leaves out what the hypervisor stole while
# it ran, and cpu-clock samples do not. Steal comes in bursts, often when
# every vCPU is busy, so it is not spread evenly over a program's functions:
# with 14% of the host stolen, a function that ran beside a second busy
# thread (zlib's compression, the GIL released) had 9.1% of the samples
# against 7.1% of thread_time_ns, and both were right about their own clock.
#
# Where perf_event_open is refused (no permission, no such syscall), the
# clock is thread_time_ns.
import ctypes
import os
import struct
import threading
import time

_NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)
_local = threading.local()
try:
    _syscall = ctypes.CDLL(None, use_errno=True).syscall
except (OSError, AttributeError):
    _syscall = None


def _open():
    """A counting cpu-clock event on the calling thread, or -1."""
    if _syscall is None or _NR_PERF_EVENT_OPEN is None:
        return -1
    # struct perf_event_attr, version 0 (64 bytes): type PERF_TYPE_SOFTWARE,
    # size, config PERF_COUNT_SW_CPU_CLOCK, sample period 0 (counting), no
    # sample or read format, flags 0 (enabled, user and kernel time).
    attr = struct.pack("=IIQQQQQQ", 1, 64, 0, 0, 0, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = _syscall(ctypes.c_long(_NR_PERF_EVENT_OPEN), buf, ctypes.c_int(0), ctypes.c_int(-1),
                  ctypes.c_int(-1), ctypes.c_ulong(8))  # PERF_FLAG_FD_CLOEXEC
    return fd if fd >= 0 else -1


def thread_cpu_ns():
    """The calling thread's cpu-clock, in ns since its first reading (or its
    thread_time_ns where no event could be opened): differences only."""
    fd = getattr(_local, "fd", None)
    if fd is None:
        fd = _local.fd = _open()
    if fd < 0:
        return time.thread_time_ns()
    return int.from_bytes(os.read(fd, 8), "little")


def source():
    """What thread_cpu_ns reads in this thread: "cpu-clock" or "thread_time"."""
    thread_cpu_ns()
    return "cpu-clock" if _local.fd >= 0 else "thread_time"
