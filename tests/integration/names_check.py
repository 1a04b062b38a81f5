# SPDX-License-Identifier: MIT
#
# Checks that a profile read back from a collector keeps what mkpprof.py's
# "named" profile gave each function beyond its name: func_F (F = 1, 4,
# 7...) the system name _Z6func_Fv, every one the file src/fF.py, and its
# location the line 10 * F. Prints what it checked; exits 1 on a mismatch.
#
#   python3 names_check.py PROFILE.pb.gz
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pprofraw  # noqa: E402

p = pprofraw.load(sys.argv[1])
bad, seen = [], 0
for loc in p.locations.values():
    for (fn, path, line), sysname in zip(loc.lines, loc.system_names):
        m = re.fullmatch(r"func_(\d+)", fn)
        if not m:
            continue
        f = int(m.group(1))
        want_sys = "_Z%dfunc_%dv" % (len(fn), f) if f % 3 == 1 else ""
        # pprof prints a system name only where it differs from the name.
        got_sys = "" if sysname == fn else sysname
        if (path, line, got_sys) != ("src/f%d.py" % f, 10 * f, want_sys):
            bad.append("%s: file %r line %d system name %r" % (fn, path, line, sysname))
        seen += 1
if not seen:
    bad.append("no func_F location in the profile")
for b in bad:
    print("names: " + b)
print("names: %d locations checked, %d wrong" % (seen, len(bad)))
sys.exit(1 if bad else 0)
