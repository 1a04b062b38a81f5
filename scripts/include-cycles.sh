#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Checks how the modules of each folder given (default: every source
# folder) include each other. A module is a .c/.h pair (foo.c and foo.h
# are module "foo"; foo-internal.h is its private half); a folder's
# modules are those of its sub-folders too. There is an edge foo -> bar
# when a file of foo includes "bar.h" (or "bar-internal.h"). It fails when
#
#   1. the edges make a cycle;
#   2. a file includes an -internal.h of another folder (a module's private
#      half is shared only by the files of that module, which live together);
#   3. in agent/ and collector/, a file includes a header of a stage folder
#      above its own: the stages run, top to bottom, control core keep
#      sampling runtimes stacks base in agent/ and serve read protocols http
#      names write in collector/ (each CMakeLists.txt says what each holds),
#      and the files at the top (main.c) sit above them all; a stage's
#      sub-folders are of its stage;
#   4. a file of a stage's sub-folder includes a header of another
#      sub-folder of that stage (agent/runtimes/python/ and hotspot/: each
#      runtime stands on the stage's own files and those below, never on
#      another runtime).
#
# With -v it prints each folder's edges first.
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
STAGES = {"agent": ["control", "core", "keep", "sampling", "runtimes", "stacks", "base"],
          "collector": ["serve", "read", "protocols", "http", "names", "write"]}
status = 0

def fail(msg):
    global status
    print(msg)
    status = 1

for d in sys.argv[2:]:
    order = STAGES.get(d, [])
    mods, home = {}, {}  # module -> its files (paths); module -> its sub-folder
    for root, subdirs, files in os.walk(d):
        subdirs[:] = sorted(s for s in subdirs if s not in ("ui", "bpf"))
        sub = os.path.relpath(root, d)
        sub = "" if sub == "." else sub
        for f in sorted(files):
            if f.endswith((".c", ".h")) and not f.endswith(".bpf.c"):
                m = re.sub(r"-internal$", "", f.rsplit(".", 1)[0])
                mods.setdefault(m, []).append(os.path.join(root, f))
                if m in home and home[m] != sub:
                    fail(f"{d}: module {m} has files in both {home[m] or '.'}/ and {sub or '.'}/")
                home[m] = sub
    edges = {m: set() for m in mods}

    def rank(sub):
        # Top-level files rank above every stage; an unknown folder is not ranked.
        stage = sub.split("/")[0]
        return -1 if sub == "" else (order.index(stage) if stage in order else None)

    for m, paths in mods.items():
        for p in paths:
            for inc in re.findall(r'^\s*#\s*include\s+"([^"/]+)\.h"', open(p).read(), re.M):
                private = inc.endswith("-internal")
                target = re.sub(r"-internal$", "", inc)
                if target not in mods or target == m:
                    continue
                edges[m].add(target)
                if private and home[m] != home[target]:
                    fail(f"{p}: includes {inc}.h, private to module {target} in {d}/{home[target]}/")
                if order:
                    a, b = rank(home[m]), rank(home[target])
                    if a is None or b is None:
                        fail(f"{p}: {d}/{home[m] if a is None else home[target]}/ is not one of {d}'s stages")
                    elif b < a:
                        fail(f"{p}: includes {home[target]}/{inc}.h, a stage above {home[m]}/")
                    elif (a == b and "/" in home[m] and "/" in home[target] and
                          home[m].split("/")[1] != home[target].split("/")[1]):
                        fail(f"{p}: includes {home[target]}/{inc}.h, of another part of {home[m].split('/')[0]}/")
    if verbose:
        for m in sorted(edges, key=lambda m: (rank(home[m]) if order else 0, home[m], m)):
            where = f"{home[m]}/" if home[m] else ""
            print(f"{d}/{where}{m} -> {', '.join(sorted(edges[m])) or '-'}")
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
    cycles = [c for c in comps if len(c) > 1]
    for comp in cycles:
        fail(f"{d}: include cycle among: {' '.join(sorted(comp))}")
    if not cycles:
        staged = f" in {len(order)} stages, each including only its own and those below" if order else ""
        print(f"{d}: {len(mods)} modules{staged}, no include cycle")
sys.exit(status)
PY
