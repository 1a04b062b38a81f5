# SPDX-License-Identifier: MIT
#
# Known Python stacks for test-pystack: the main thread spins in c(),
# called by b(), called by a(); a second thread spins in e(), called by
# d(). It writes the code objects' addresses (id()) of a, b, c, d, e and
# the module's to OUT, then READY, and spins for SECONDS (default 30).
#
#   python3.X pystack.py OUT READY [SECONDS]
import sys
import threading
import time

END = time.time() + (float(sys.argv[3]) if len(sys.argv) > 3 else 30)


def c():
    n = 0
    while time.time() < END:
        n += 1
    return n


def b():
    return c()


def a():
    return b()


def e():
    n = 0
    while time.time() < END:
        n += 1
    return n


def d():
    return e()


t = threading.Thread(target=d, name="second")
t.start()
with open(sys.argv[1], "w") as out:
    for f in (a, b, c, d, e):
        out.write("%s %d\n" % (f.__name__, id(f.__code__)))
    out.write("module %d\n" % id(sys._getframe().f_code))
open(sys.argv[2], "w").close()
a()
t.join()
