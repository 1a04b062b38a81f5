#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What does the collector cost, and what does an upload cost the agent?
#
#   1. A realistic upload: the real agent profiles tests/workloads/manystacks
#      (2 threads, hundreds of distinct stacks) at 99 Hz for
#      BENCH_PROFILE_SECONDS (default 60: one target-minute), then
#      `agentctl flush` uploads it to a collector. Reported: the bytes on
#      the wire for that target-minute (the agent's upload.bytes_sent) and
#      the agent's CPU time for the flush (schedstat of all its threads,
#      before and after), i.e. the agent's CPU per upload; the same profile
#      is dumped and used as the body below. Two more agents profile the
#      same workload at the same time and upload it as a Pyroscope push
#      and as an OTLP request (pyroscope+http://, otlp+http://) to the same
#      collector: their bytes and CPU beside the native upload's.
#   2. collector-bench against a fresh collector at 8 and 64 concurrent
#      uploaders (BENCH_UPLOADS each run, default 2000): uploads/s, p50/p99
#      latency, the collector's CPU per upload; beside each, the same
#      invocation's peer: GET /healthz at the same concurrency, and the
#      ratios. The collector's memory (VmRSS, VmHWM) at the end.
#   3. The same profile through Pyroscope's ingest API and Connect push,
#      and as an OTLP request (the same stacks and counts, tests/bench/
#      pprof2otlp.py; gzip), beside the native contract (collector-bench
#      --protocol), at 8 and 64 uploaders: uploads/s, p99, collector CPU
#      and bytes per upload.
#
# Figures only: it never fails on a time (exit non-zero only when something
# could not run). The machine's load is printed: other work skews it.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=collector-bench
PSECS=${BENCH_PROFILE_SECONDS:-60}
UPLOADS=${BENCH_UPLOADS:-2000}
fp_init $((240 + PSECS))
COLLECTOR=$FP_BUILD/collector/fleetprof-collector
BENCH=$FP_BUILD/tests/collector-bench
[[ -x $COLLECTOR && -x $BENCH && -x $FP_BUILD/tests/manystacks ]] || fp_fail "build first"

vm_kb() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
figure() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.1f", a / b; else print "n/a"}'; }
port=$(fp_free_port)
url=http://127.0.0.1:$port
echo "bench-$$" >"$FP_TMP/token"
COLL_PID=
start_collector() {
  rm -f "$FP_TMP/c.db"*
  "$COLLECTOR" --listen "127.0.0.1:$port" --store "$FP_TMP/c.db" --token-file "$FP_TMP/token" \
    >>"$FP_TMP/collector.log" 2>&1 &
  COLL_PID=$!
  fp_track "$COLL_PID"
  fp_wait_for 15 curl -sf "$url/healthz" -o /dev/null || fp_fail "the collector did not come up"
}

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- 1. one real target-minute through the agent ------------------------------------
start_collector
fp_start_agent --bucket 10 --collector "$url" --token-file "$FP_TMP/token" --upload-interval 86400
declare -A other_pid
for proto in pyroscope otlp; do
  "$FP_AGENT" --foreground --socket "$FP_TMP/$proto.sock" --store "$FP_TMP/$proto.db" --bucket 10 \
    --collector "$proto+$url" --token-file "$FP_TMP/token" --upload-interval 86400 \
    >"$FP_TMP/agent-$proto.log" 2>&1 &
  other_pid[$proto]=$!
  fp_track "${other_pid[$proto]}"
  fp_wait_for 15 test -S "$FP_TMP/$proto.sock" || fp_fail "the $proto agent did not start"
done
other_ctl() { fp_timeout 60 "$FP_AGENTCTL" --socket "$FP_TMP/$1.sock" "${@:2}"; }
fp_start_workload manystacks "$FP_TMP/ms.out" "$FP_TMP/ms.ready" --threads 2 --depth 5 \
  --seconds $((PSECS + 30))
wl=$FP_WL_PID
fp_ctl start "$wl" --freq 99 >/dev/null || fp_fail "agentctl start failed"
for proto in pyroscope otlp; do
  other_ctl "$proto" start "$wl" --freq 99 >/dev/null || fp_fail "the $proto agent's start failed"
done
sleep "$PSECS"
fp_ctl stop "$wl" >/dev/null
for proto in pyroscope otlp; do other_ctl "$proto" stop "$wl" >/dev/null; done
fp_ctl dump "$wl" -o "$FP_TMP/profile.pb.gz" || fp_fail "dump failed"
before=$(fp_cpu_ns "$FP_AGENT_PID")
fp_ctl flush >/dev/null || fp_fail "flush failed"
after=$(fp_cpu_ns "$FP_AGENT_PID")
sent=$(fp_status_json | python3 -c 'import json,sys; print(json.load(sys.stdin)["upload"]["bytes_sent"])')
stacks=$(fp_pprof -raw -symbolize=none "$FP_TMP/profile.pb.gz" 2>/dev/null | grep -c '^ *[0-9]* *[0-9]*: ' || true)
samples=$(curl -sf "$url/api/v1/series" | python3 -c 'import json,sys; print(sum(s["samples"] for s in json.load(sys.stdin)["series"]))')
echo "agent upload: ${PSECS} s of manystacks (2 threads, 99 Hz): $samples samples, $stacks distinct samples (stacks x threads)"
echo "agent upload: bytes on the wire per target-minute: $((sent * 60 / PSECS)) (this upload: $sent bytes of gzip pprof)"
echo "agent upload: agent CPU for the flush (build, gzip, POST, mark): $(((after - before) / 1000)) us"
native_sent=$sent native_cpu=$((after - before))
for proto in pyroscope otlp; do
  before=$(fp_cpu_ns "${other_pid[$proto]}")
  other_ctl "$proto" flush >/dev/null || fp_fail "the $proto agent's flush failed"
  after=$(fp_cpu_ns "${other_pid[$proto]}")
  sent=$(other_ctl "$proto" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["upload"]["bytes_sent"])')
  printf 'agent upload as %-9s: %7d bytes on the wire (x%s native), agent CPU for the flush %6d us (x%s native)\n' \
    "$proto" "$sent" "$(ratio "$sent" "$native_sent")" $(((after - before) / 1000)) \
    "$(ratio $((after - before)) "$native_cpu")"
  fp_kill "${other_pid[$proto]}"
done
fp_kill "$wl"
fp_stop_agent
fp_kill "$COLL_PID"

# ---- 2. collector ingest vs the trivial request ---------------------------------------
echo "collector: body $(stat -c %s "$FP_TMP/profile.pb.gz") bytes, $UPLOADS uploads per run"
for c in 8 64; do
  start_collector
  before=$(fp_cpu_ns "$COLL_PID")
  ing=$("$BENCH" --url "$url" --profile "$FP_TMP/profile.pb.gz" --token-file "$FP_TMP/token" \
    --concurrency "$c" --uploads "$UPLOADS" --run-id "c$c") || fp_fail "ingest run failed: $ing"
  after=$(fp_cpu_ns "$COLL_PID")
  get=$("$BENCH" --url "$url" --get /healthz --concurrency "$c" --uploads "$UPLOADS") ||
    fp_fail "healthz run failed: $get"
  groups=$(curl -sf "$url/healthz" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["store_groups"], d["decode_ms"], d["store_write_ms"])')
  read -r ngroups dec_ms wr_ms <<<"$groups"
  echo "concurrency $c: ingest $(figure rate "$ing") uploads/s, p50 $(figure p50_ms "$ing") ms, p99 $(figure p99_ms "$ing") ms, failed $(figure failed "$ing")"
  echo "concurrency $c: healthz $(figure rate "$get") req/s, p50 $(figure p50_ms "$get") ms, p99 $(figure p99_ms "$get") ms"
  echo "concurrency $c: ratios ingest/healthz: rate 1/$(ratio "$(figure rate "$get")" "$(figure rate "$ing")"), p99 x$(ratio "$(figure p99_ms "$ing")" "$(figure p99_ms "$get")")"
  echo "concurrency $c: collector CPU per upload $(((after - before) / UPLOADS / 1000)) us; $UPLOADS uploads in $ngroups store transactions; decode ${dec_ms} ms, store ${wr_ms} ms in all"
  echo "concurrency $c: collector memory: VmRSS $(vm_kb "$COLL_PID" VmRSS) kB, VmHWM $(vm_kb "$COLL_PID" VmHWM) kB; store $(stat -c %s "$FP_TMP/c.db") bytes"
  fp_kill "$COLL_PID"
done
# ---- 3. the same profile through Pyroscope's protocols --------------------------------
# The native contract beside Pyroscope's ingest (/ingest, format=pprof),
# Connect push (a PushRequest of one series) and OTLP, each into a fresh
# collector.
python3 "$FP_SRC/tests/bench/pprof2otlp.py" "$FP_TMP/profile.pb.gz" "$FP_TMP/profile.otlp" ||
  fp_fail "cannot make the OTLP request"
for c in 8 64; do
  for proto in native pyroscope connect otlp; do
    start_collector
    before=$(fp_cpu_ns "$COLL_PID")
    body=$FP_TMP/profile.pb.gz
    [[ $proto == otlp ]] && body=$FP_TMP/profile.otlp
    out=$("$BENCH" --url "$url" --profile "$body" --token-file "$FP_TMP/token" \
      --concurrency "$c" --uploads "$UPLOADS" --run-id "p$c" --protocol "$proto") ||
      fp_fail "$proto run failed: $out"
    after=$(fp_cpu_ns "$COLL_PID")
    printf 'protocol %-9s concurrency %2d: %8s uploads/s, p99 %7s ms, collector CPU per upload %5d us, %s bytes per upload\n' \
      "$proto" "$c" "$(figure rate "$out")" "$(figure p99_ms "$out")" $(((after - before) / UPLOADS / 1000)) \
      "$(figure bytes_per_request "$out")"
    fp_kill "$COLL_PID"
  done
done
echo "machine after: load average $(cut -d' ' -f1-3 /proc/loadavg)"
