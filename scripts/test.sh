#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The README's test command: installs what is needed, builds fleetprof
# twice (a normal build and an AddressSanitizer + UBSan build), and runs the
# whole test suite (unit and integration tests, with real perf events and
# real processes) on both. Must run as root: the tests profile processes.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "test.sh: run as root (the tests open perf events on other processes)" >&2
  exit 1
fi
scripts/deps.sh
scripts/build.sh build
scripts/build.sh build-asan -DFP_SANITIZE=ON
# Debian's python3 for the tests' helpers (tests/integration/lib.sh says why).
[[ -x /usr/bin/python3 ]] && export PATH=$PWD/tests/bin:$PATH
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
echo "== tests: normal build"
ctest --test-dir build --output-on-failure || status=1
echo "== tests: AddressSanitizer + UBSan build"
ctest --test-dir build-asan --output-on-failure || status=1
exit $status
