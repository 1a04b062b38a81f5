#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Builds the packages: fleetprof-agent (and fleetprof-collector, when the
# collector is built) as .deb and .rpm, with CPack from the one CMake
# tree. Usage: scripts/package.sh [BUILD_DIR [OUT_DIR]] (defaults build
# and BUILD_DIR/packages). rpmbuild comes from Debian's "rpm" package
# (scripts/deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
out=${2:-$dir/packages}
for tool in dpkg-deb dpkg-shlibdeps rpmbuild; do
  command -v "$tool" >/dev/null || { echo "package.sh: $tool is missing (run scripts/deps.sh)" >&2; exit 1; }
done
scripts/build.sh "$dir"
mkdir -p "$out"
out=$(cd "$out" && pwd)
(cd "$dir" && cpack -G "DEB;RPM" -B "$out" >"$out/cpack.log" 2>&1) || {
  echo "package.sh: cpack failed; its log:" >&2
  tail -n 40 "$out/cpack.log" >&2
  exit 1
}
rm -rf "$out/_CPack_Packages"
ls -1 "$out"/*.deb "$out"/*.rpm
