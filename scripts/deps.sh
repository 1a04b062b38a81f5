#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Installs what fleetprof needs to build, test and benchmark on Debian 12:
# the fixed library dependencies (-dev packages), the toolchain, Go (for
# `go tool pprof`, the reference pprof reader the tests use) and perf (the
# peer the benchmarks compare against), rpm (rpmbuild, for the .rpm
# packages) and man-db (the man page checks). Safe to run again.
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang llvm libclang-rt-14-dev clang-format git
  libevent-dev libsqlite3-dev sqlite3 libprotobuf-c-dev protobuf-c-compiler
  libcurl4-openssl-dev libssl-dev libbpf-dev bpftool zlib1g-dev libelf-dev libdw-dev
  golang-go linux-perf python3 procps util-linux binutils
  rpm man-db groff-base libcap2-bin xz-utils perl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
