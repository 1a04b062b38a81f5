# SPDX-License-Identifier: MIT
#
# The code objects of a module built here, described by Python itself for
# test-python (agent/runtimes/python/python.c reads them through this process's
# memory and must agree): for each function its code object's address
# (CPython's id()), its name as the agent should give it (co_qualname from
# 3.11, else co_name), its file and first line, and the line of every
# instruction offset (co_lines() from 3.10, the line starts of dis before).
# The module has long gaps between lines (line deltas past a byte), loops
# (lines going back), nested classes, a lambda, a generator, names in
# Latin-1 and in other scripts, and a file name outside the BMP.
#
#   python3.X codeinfo.py OUT READY
import dis
import sys
import time

GAP = "\n" * 300
SRC = (
    "def plain(n):\n"
    "    s = 0\n"
    "    for i in range(n):\n"
    "        s += i\n" + GAP +
    "        s -= 1\n"
    "    return s\n"
    "class Outer:\n"
    "    class Inner:\n"
    "        def method(self, x):\n"
    "            y = x * 2\n" + GAP + GAP +
    "            return y\n"
    "def gen(n):\n"
    "    for i in range(n):\n"
    "        yield i\n"
    "lam = lambda v: (v +\n"
    "                 1)\n"
    "def größe(a):\n"
    "    return a\n"
    "def 名前(a):\n"
    "    while a > 0:\n"
    "        a -= 1\n"
    "    return a\n"
)
ns = {}
exec(compile(SRC, "/srv/app/módulo_\U0001F40D.py", "exec"), ns)
funcs = [ns["plain"], ns["Outer"].Inner.method, ns["gen"], ns["lam"], ns["größe"], ns["名前"]]


def lines_of(code):
    """(offset, line) for every instruction offset; 0 where there is no line."""
    if hasattr(code, "co_lines"):
        for start, end, line in code.co_lines():
            for off in range(start, end, 2):
                yield off, line or 0
        return
    starts = dict(dis.findlinestarts(code))
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        line = starts.get(ins.offset, line)
        yield ins.offset, line


with open(sys.argv[1], "w", encoding="utf-8") as out:
    for f in funcs:
        c = f.__code__
        name = getattr(c, "co_qualname", c.co_name)
        out.write("code %d %d %s\t%s\n" % (id(c), c.co_firstlineno, name, c.co_filename))
        for off, line in lines_of(c):
            out.write("line %d %d\n" % (off, line))
open(sys.argv[2], "w").close()
time.sleep(60)
