#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Configures and builds fleetprof into build/ (or the folder given as $1,
# with any further arguments passed to cmake).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -DFP_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
