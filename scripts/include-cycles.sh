#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Checks that the modules of each folder given (default: every source
# folder) include each other without a cycle. A module is a .c/.h pair
# (foo.c and foo.h are module "foo"); there is an edge foo -> bar when
# foo.c or foo.h includes "bar.h" of the same folder. Prints each folder's
# edges with -v, every cycle found, and exits 1 when there is one.
#
#   scripts/include-cycles.sh            # agent common collector proto storage
#   scripts/include-cycles.sh -v agent   # and show agent's include graph
set -euo pipefail
cd "$(dirname "$0")/.."
verbose=0
if [[ ${1:-} == -v ]]; then
  verbose=1
  shift
fi
dirs=("$@")
[[ ${#dirs[@]} -gt 0 ]] || dirs=(agent common collector proto storage)
exec python3 - "$verbose" "${dirs[@]}" <<'PY'
import os, re, sys
verbose = sys.argv[1] == "1"
status = 0
for d in sys.argv[2:]:
    mods = {}
    for f in sorted(os.listdir(d)):
        if f.endswith((".c", ".h")) and not f.endswith(".bpf.c"):
            # foo-internal.h is the private half of module foo.
            mods.setdefault(re.sub(r"-internal$", "", f.rsplit(".", 1)[0]), []).append(f)
    edges = {m: set() for m in mods}
    for m, files in mods.items():
        for f in files:
            for inc in re.findall(r'^\s*#\s*include\s+"([^"/]+)\.h"', open(os.path.join(d, f)).read(), re.M):
                inc = re.sub(r"-internal$", "", inc)
                if inc in mods and inc != m:
                    edges[m].add(inc)
    if verbose:
        for m in sorted(edges):
            print(f"{d}/{m} -> {', '.join(sorted(edges[m])) or '-'}")
    # Tarjan's strongly connected components: any with more than one module is a cycle.
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1
        stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            comps.append(comp)
    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    for comp in comps:
        if len(comp) > 1:
            print(f"{d}: include cycle among: {' '.join(sorted(comp))}")
            status = 1
    if verbose or status == 0:
        print(f"{d}: {len(mods)} modules, no include cycle" if not any(len(c) > 1 for c in comps) else "", end="\n" if not any(len(c) > 1 for c in comps) else "")
sys.exit(status)
PY
