#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The tree's own rules, checked in CI (ctest style/check):
#   1. every tracked .c/.h file is formatted as .clang-format says;
#   2. no include cycle between the modules of a folder, and agent/'s
#      stages include only down (scripts/include-cycles.sh);
#   3. no two files that call each other but the loops kept on purpose
#      (scripts/call-cycles.sh);
#   4. every external symbol of fleetprof's libraries carries the fp_
#      prefix (protoc-c's generated perftools__ names aside).
# Usage: check.sh SRC_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
status=0
cd "$src"

if command -v clang-format >/dev/null; then
  if ! git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror 2>"$build/clang-format.out"; then
    echo "style: files not formatted as .clang-format says (run clang-format -i on them):"
    grep -o '^[^:]*\.[ch]' "$build/clang-format.out" | sort -u | sed 's/^/  /'
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

libs=()
for l in agent/libfp_agentcore.a collector/libfp_collcore.a storage/libfp_storage.a \
  proto/libfp_proto.a common/libfp_common.a; do
  [[ -f $build/$l ]] && libs+=("$build/$l")
done
# (__odr_asan.* and friends are the sanitizer's own, in the ASan build.)
bad=$(nm -g --defined-only "${libs[@]}" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^(fp_|perftools__|__odr_asan|__asan|__ubsan)/ {print $3}' | sort -u)
if [[ -n $bad ]]; then
  echo "style: external symbols without the fp_ prefix:"
  sed 's/^/  /' <<<"$bad"
  status=1
else
  echo "style: ok: every external symbol of ${#libs[@]} libraries is prefixed"
fi
exit $status
