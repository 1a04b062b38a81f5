#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Checks that the .c files of each folder given (default: every source
# folder, sub-folders included) do not call each other in a loop: there is
# an edge a.c -> b.c when a.c calls (or takes the address of) a function
# that b.c defines with external linkage. A loop means neither file can be
# read, tested or replaced without the other; where one side should only
# be called, break it. The loops kept on purpose are listed below, each
# with why; any other fails.
#
#   scripts/call-cycles.sh              # agent common collector proto storage
#   scripts/call-cycles.sh -v agent     # and print agent's call graph
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

# Loops kept, as sets of file names, with the reason.
KEPT = {
    frozenset({"core.c", "core-rules.c"}):
        "one module (fp_core_) in two files: the core hands the tracker's exec and fork "
        "news to the rules, and the rules start and stop targets through the core",
}

verbose = sys.argv[1] == "1"
status = 0
KEYWORDS = {"return", "if", "while", "for", "else", "switch", "sizeof"}

def strip(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)

for d in sys.argv[2:]:
    src, defs = {}, {}
    for root, subdirs, files in os.walk(d):
        subdirs.sort()
        for f in sorted(files):
            if f.endswith(".c") and not f.endswith(".bpf.c"):
                p = os.path.join(root, f)
                src[p] = strip(open(p).read())
    for p, text in src.items():
        # A definition: a line-leading declarator whose parameter list is followed by "{".
        for m in re.finditer(r"^([A-Za-z_][\w \*]*?)\b(\w+)\s*\(", text, re.M):
            if m.group(1).split()[0] in ("static",) or m.group(1).strip() in KEYWORDS:
                continue
            i, depth = m.end(), 1
            while depth and i < len(text):
                depth += text[i] == "("
                depth -= text[i] == ")"
                i += 1
            if text[i:i + 64].lstrip().startswith("{"):
                defs.setdefault(m.group(2), p)
    edges = {p: {} for p in src}
    for p, text in src.items():
        # Every identifier but a struct, union or enum tag (which may share a function's name).
        for word in set(re.findall(r"(?<![\w.>])(?<!struct )(?<!union )(?<!enum )([A-Za-z_]\w*)\b", text)):
            q = defs.get(word)
            if q and q != p:
                edges[p].setdefault(q, []).append(word)
    if verbose:
        for p in sorted(edges):
            for q in sorted(edges[p]):
                print(f"{p} -> {q}: {' '.join(sorted(edges[p][q]))}")
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
    loops = [sorted(c) for c in comps if len(c) > 1]
    bad = [c for c in loops if frozenset(os.path.basename(p) for p in c) not in KEPT]
    for c in bad:
        status = 1
        print(f"{d}: files that call each other: {' '.join(c)}")
        for p in c:
            for q in c:
                if q in edges[p]:
                    print(f"  {p} -> {q}: {' '.join(sorted(edges[p][q]))}")
    if not bad:
        kept = f" ({len(loops)} kept on purpose, see scripts/call-cycles.sh)" if loops else ""
        print(f"{d}: {len(src)} files, no call loop{kept}")
sys.exit(status)
PY
