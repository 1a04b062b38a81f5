#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The tree's own rules, checked in CI (ctest style/check):
#   1. every tracked .c/.h file is formatted as .clang-format says;
#   2. no include cycle between the modules of a folder, and agent/'s
#      stages include only down (scripts/include-cycles.sh);
#   3. no two files that call each other but the loops kept on purpose
#      (scripts/call-cycles.sh);
#   4. the README stays a newcomer's guide (at most 400 lines), every guide
#      under docs/ is linked from it, and every relative link of the README
#      and the guides reaches a file (and a heading, for #anchors);
#   5. every external symbol of fleetprof's libraries carries the fp_
#      prefix (protoc-c's generated perftools__ names aside);
#   6. every shell script parses (bash -n, whose complaints about a [[ ]]
#      do not change its exit status: a test that stopped there on its
#      last lines would end as passed).
# Usage: check.sh SRC_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
status=0
cd "$src"

if command -v clang-format >/dev/null; then
  if ! git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror 2>"$build/clang-format.out"; then
    echo "style: files not formatted as .clang-format says (run clang-format -i on them):"
    grep -o '^[^: ]*\.[ch]:[0-9]*:' "$build/clang-format.out" | cut -d: -f1 | sort -u | sed 's/^/  /'
    status=1
  else
    echo "style: ok: $(git ls-files '*.c' '*.h' | wc -l) files formatted"
  fi
else
  echo "style: clang-format is not installed (scripts/deps.sh installs it)"
  status=1
fi

scripts/include-cycles.sh || status=1
scripts/call-cycles.sh || status=1

# report FOUND WHAT OK: the lines FOUND fail the check, listed under "WHAT:"; none: "ok: OK".
report() {
  if [[ -n $1 ]]; then
    echo "style: $2:"
    sed 's/^/  /' <<<"$1"
    status=1
  else
    echo "style: ok: $3"
  fi
}

report "$(git ls-files '*.sh' .ci/run | while read -r f; do bash -n "$f" 2>&1; done)" \
  "shell scripts that do not parse" "$(git ls-files '*.sh' .ci/run | wc -l) shell scripts parse"

python3 - <<'PY' || status=1
import os, re, sys
bad = []
readme = open("README.md").read()
if readme.count("\n") > 400:
    bad.append(f"README.md has {readme.count(chr(10))} lines; at most 400 (reference detail goes to the man pages, guides to docs/)")
guides = sorted(f for f in os.listdir("docs") if f.endswith(".md"))
for g in guides:
    if f"(docs/{g})" not in readme and f"(docs/{g}#" not in readme:
        bad.append(f"docs/{g} is not linked from README.md")
def slugs(path):
    text = re.sub(r"```.*?```", "", open(path).read(), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, re.M)}
for doc in ["README.md"] + [f"docs/{g}" for g in guides]:
    text = re.sub(r"```.*?```", "", open(doc).read(), flags=re.S)
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
        if not os.path.exists(target):
            bad.append(f"{doc}: link to {link}: no such file")
        elif anchor and target.endswith(".md") and anchor not in slugs(target):
            bad.append(f"{doc}: link to {link}: no such heading")
for b in bad:
    print(f"style: {b}")
if not bad:
    print(f"style: ok: README.md {readme.count(chr(10))} lines, {len(guides)} guides linked, every link reaches")
sys.exit(1 if bad else 0)
PY

libs=()
for l in agent/libfp_agentcore.a collector/libfp_collcore.a storage/libfp_storage.a \
  proto/libfp_proto.a common/libfp_common.a; do
  [[ -f $build/$l ]] && libs+=("$build/$l")
done
# (__odr_asan.* and friends are the sanitizer's own, in the ASan build.)
report "$(nm -g --defined-only "${libs[@]}" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^(fp_|perftools__|__odr_asan|__asan|__ubsan)/ {print $3}' | sort -u)" \
  "external symbols without the fp_ prefix" "every external symbol of ${#libs[@]} libraries is prefixed"
exit $status
