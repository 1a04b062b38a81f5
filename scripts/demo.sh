#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The README's main job: installs what is needed, builds fleetprof, starts
# a collector on 127.0.0.1 and an agent (both on their embedded SQLite
# stores) that uploads to it, profiles a demo workload (tests/workloads/truth: named threads
# doing known shares of work, which it measures itself) at 999 Hz per
# thread, and prints what a person reads: the agent's status, the profile
# as a table (agentctl dump --format top), the workload's own measured
# truth to compare against, and the same profile read back by go tool
# pprof, first from the agent's own dump and then from the collector after
# `agentctl flush` uploaded it. The pprof file is left in
# demo-profile.pb.gz.
#
#   scripts/demo.sh           # everything it started is stopped and removed at the end
#   scripts/demo.sh --keep    # the collector and its web page keep running: it prints
#                             # the URL to open and the command that stops it
#
# FP_DEMO_BUILD names the build folder (default build; the tests use theirs).
set -euo pipefail
cd "$(dirname "$0")/.."
keep=0
for arg in "$@"; do
  case $arg in
  --keep) keep=1 ;;
  -h | --help)
    echo "usage: scripts/demo.sh [--keep]"
    exit 0
    ;;
  *)
    echo "demo.sh: unknown option '$arg' (usage: scripts/demo.sh [--keep])" >&2
    exit 2
    ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "demo.sh: run as root (the agent opens perf events on another process)" >&2
  exit 1
fi
build=${FP_DEMO_BUILD:-build}
scripts/deps.sh
scripts/build.sh "$build"

work=$(mktemp -d /tmp/fleetprof-demo.XXXXXX)
agent_pid= ; load_pid= ; coll_pid=
cleanup() {
  [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null || true
  [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
  if [ "$keep" = 1 ] && [ -n "$coll_pid" ] && kill -0 "$coll_pid" 2>/dev/null; then
    rm -f "$work/agent.sock"
    return
  fi
  [ -n "$coll_pid" ] && kill "$coll_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

sock=$work/agent.sock
ctl() { "$build/agent/agentctl" --socket "$sock" "$@"; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
# With --keep the collector outlives this script: its own session, no terminal.
if [ "$keep" = 1 ]; then
  setsid "$build/collector/fleetprof-collector" --listen "127.0.0.1:$port" --store "$work/collector.db" \
    --token-file "$work/token" </dev/null >/dev/null 2>"$work/collector.log" &
else
  "$build/collector/fleetprof-collector" --listen "127.0.0.1:$port" --store "$work/collector.db" \
    --token-file "$work/token" 2>"$work/collector.log" &
fi
coll_pid=$!
for _ in $(seq 50); do curl -sf "$url/healthz" -o /dev/null && break; sleep 0.1; done

"$build/agent/fleetprof-agent" --foreground --socket "$sock" --store "$work/agent.db" \
  --collector "$url" --token-file "$work/token" 2>"$work/agent.log" &
agent_pid=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done

"$build/tests/truth" --seconds 6 --truth "$work/truth.json" --ready "$work/ready" \
  --wait-for-start "$work/go" --hold >"$work/truth.out" &
load_pid=$!
for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.1; done

echo "\$ agentctl start $load_pid --freq 999"
ctl start "$load_pid" --freq 999
touch "$work/go"
for _ in $(seq 150); do [ -e "$work/truth.json" ] && break; sleep 0.1; done

echo; echo "\$ agentctl status"
ctl status
echo; echo "\$ agentctl dump $load_pid --format top"
ctl dump "$load_pid" --format top
ctl dump "$load_pid" -o demo-profile.pb.gz 2>/dev/null
echo; echo "\$ agentctl flush          # close the open bucket and upload to the collector now"
ctl flush
ctl stop "$load_pid" >/dev/null

echo; echo "What the workload measured itself (CPU time of each caller;leaf, all threads):"
python3 - "$work/truth.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
total = t["total_ns"]
for stack, ns in sorted(t["stacks"].items(), key=lambda kv: -kv[1]):
    print(f"  {100.0 * ns / total:5.1f}%  {stack}")
for name, th in sorted(t["threads"].items(), key=lambda kv: -kv[1]["total_ns"]):
    print(f"  {100.0 * th['total_ns'] / total:5.1f}%  thread {name}")
PY

echo; echo "\$ go tool pprof -top -symbolize=none demo-profile.pb.gz"
HOME=${HOME:-/root} go tool pprof -top -symbolize=none demo-profile.pb.gz 2>&1 | head -20

echo; echo "\$ curl -s $url/api/v1/series"
curl -s "$url/api/v1/series"; echo
echo; echo "\$ go tool pprof -top -symbolize=none '$url/api/v1/profile?process=truth'"
HOME=${HOME:-/root} go tool pprof -top -symbolize=none "$url/api/v1/profile?process=truth" 2>&1 | head -16
if [ "$keep" = 1 ]; then
  echo
  echo "The collector is still running (pid $coll_pid, its store and log in $work)."
  echo "Open its web page and click through the flame graph of what was just profiled:"
  echo
  echo "  $url/?process=truth"
  echo
  echo "(on a remote machine: ssh -L $port:127.0.0.1:$port HOST, then open the same URL)"
  echo "Stop it with:  kill $coll_pid && rm -rf $work"
else
  echo; echo "(the collector's web page was at $url/ while this ran; scripts/demo.sh --keep leaves it running)"
fi
