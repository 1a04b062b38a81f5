#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Installs what fleetprof needs to build, test and benchmark on Debian 12:
# the fixed library dependencies (-dev packages), the toolchain, Go (for
# `go tool pprof`, the reference pprof reader the tests use), perf and
# bpfcc-tools (the peers the benchmarks compare against) with GNU time, rpm (rpmbuild, for the .rpm
# packages), man-db (the man page checks), clickhouse-server (the
# collector's shared store: tests run servers of their own, the package's
# service is not used), bindfs and e2fsprogs (a disk that a test can make
# stop answering: an ext4 image served through FUSE), and for the web
# page's browser tests Debian's chromium with Node.js and playwright-core
# from npm (kept in /var/cache/fleetprof-test; no browser is ever
# downloaded), protobuf-compiler (protoc --decode: the tests' own
# reader of what the agent sends in other protocols), and OpenJDK 17 (the
# JVM whose methods test-java names), and debuginfod (elfutils' server:
# the collector's debug files in test-debuginfod). Safe to run again.
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang llvm libclang-rt-14-dev clang-format git
  libevent-dev libsqlite3-dev sqlite3 libprotobuf-c-dev protobuf-c-compiler
  protobuf-compiler
  libcurl4-openssl-dev libssl-dev libbpf-dev bpftool zlib1g-dev libelf-dev libdw-dev liblzma-dev libiberty-dev libre2-dev
  golang-go linux-perf bpfcc-tools time python3 procps util-linux binutils
  rpm man-db groff-base libcap2-bin xz-utils perl
  chromium fonts-dejavu-core nodejs bindfs e2fsprogs
  clickhouse-server clickhouse-client
  openjdk-17-jdk-headless debuginfod
  php-cli php-dev ruby ruby-dev
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

# The tests run clickhouse-server themselves on private ports; the package's
# own service (port 8123, 9000) is not wanted running on a build machine.
if [[ " ${missing[*]} " == *" clickhouse-server "* ]] && [ -d /run/systemd/system ]; then
  systemctl disable --now clickhouse-server >/dev/null 2>&1 || true
fi
if [[ " ${missing[*]} " == *" debuginfod "* ]] && [ -d /run/systemd/system ]; then
  systemctl disable --now debuginfod >/dev/null 2>&1 || true
fi

# npm: Debian's, unless the installed Node.js brings its own.
if ! command -v npm >/dev/null; then
  echo "deps: installing npm"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi

# playwright-core drives /usr/bin/chromium in tests/integration/test-webui.sh.
PW_DIR=/var/cache/fleetprof-test
PW_VERSION=1.65.1
if ! grep -qs "\"version\": \"$PW_VERSION\"" "$PW_DIR/node_modules/playwright-core/package.json"; then
  echo "deps: installing playwright-core $PW_VERSION into $PW_DIR"
  mkdir -p "$PW_DIR"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --silent --no-audit --no-fund --prefix "$PW_DIR" \
    "playwright-core@$PW_VERSION" >/dev/null
fi

# A real Connect client for the collector's query API (tests/integration/test-grafana.sh):
# @connectrpc/connect over @connectrpc/connect-node, messages by @bufbuild/protobuf.
CONNECT_VERSION=2.3.0
BUFPB_VERSION=2.17.0
if ! grep -qs "\"version\": \"$CONNECT_VERSION\"" "$PW_DIR/node_modules/@connectrpc/connect-node/package.json" ||
  ! grep -qs "\"version\": \"$BUFPB_VERSION\"" "$PW_DIR/node_modules/@bufbuild/protobuf/package.json"; then
  echo "deps: installing @connectrpc/connect $CONNECT_VERSION, @bufbuild/protobuf $BUFPB_VERSION into $PW_DIR"
  mkdir -p "$PW_DIR"
  npm install --silent --no-audit --no-fund --prefix "$PW_DIR" "@connectrpc/connect@$CONNECT_VERSION" \
    "@connectrpc/connect-node@$CONNECT_VERSION" "@bufbuild/protobuf@$BUFPB_VERSION" >/dev/null
fi

# @pyroscope/nodejs, a real Pyroscope client: tests/integration/test-pyroscope.sh
# profiles a Node.js program with it and pushes to the collector's /ingest.
PYRO_VERSION=0.6.4
if ! grep -qs "\"version\": \"$PYRO_VERSION\"" "$PW_DIR/node_modules/@pyroscope/nodejs/package.json"; then
  echo "deps: installing @pyroscope/nodejs $PYRO_VERSION into $PW_DIR"
  mkdir -p "$PW_DIR"
  npm install --silent --no-audit --no-fund --prefix "$PW_DIR" "@pyroscope/nodejs@$PYRO_VERSION" >/dev/null
fi
