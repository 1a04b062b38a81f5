#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What does the web page cost? Profiles of 1, 20,000 and 100,000 distinct
# stacks (tests/integration/mkpprof.py, uploaded to a real collector on
# loopback), then for each:
#
#   - /api/v1/flamegraph's time beside /api/v1/profile's (the peer: the
#     same selection merged into a gzip pprof), best of 3, and its bytes;
#   - the time to the first flame graph in Debian's chromium, headless
#     (tests/bench/webui-cost.js: navigation to drawn, best of 3), and the
#     nodes drawn (the endpoint folds what is past 50,000 into "(other)");
#   - the page's weight: the HTML, script and style it loads.
#
# Figures only; it never fails on a time.
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=webui-cost
fp_init 600
PW=/var/cache/fleetprof-test/node_modules
[[ -d $PW/playwright-core && -x /usr/bin/chromium ]] || fp_fail "run scripts/deps.sh first (chromium, playwright-core)"
PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/collector.db" --max-body-mb 64
now=$(date +%s%N)
for n in 1 20000 100000; do
  python3 "$FP_SRC/tests/integration/mkpprof.py" good "$FP_TMP/p$n.pb.gz" --stacks "$n" --samples $((n * 3))
  curl -sf -X POST --data-binary @"$FP_TMP/p$n.pb.gz" \
    "$URL/api/v1/ingest?host=bench$n&pid=$n&starttime=1&event=cpu-clock&from=$((now - 10000000000))&to=$now" \
    >/dev/null || fp_fail "the upload of $n stacks failed"
done
best() { # best URL: the best of 3 curl total times (ms) and the bytes
  local i t b=999999 size
  for i in 1 2 3; do
    read -r t size < <(curl -sf -o /dev/null -w '%{time_total} %{size_download}\n' "$1")
    t=$(awk -v t="$t" 'BEGIN {printf "%d", t * 1000}')
    ((t < b)) && b=$t
  done
  echo "$b $size"
}
declare -A R
for n in 1 20000 100000; do
  R[$n,fg]=$(best "$URL/api/v1/flamegraph?host=bench$n")
  R[$n,pp]=$(best "$URL/api/v1/profile?host=bench$n")
done
page=$(fp_timeout 300 env NODE_PATH="$PW" node "$FP_SRC/tests/bench/webui-cost.js" "$URL" host=bench1 host=bench20000 host=bench100000)
weight() { curl -sf -o /dev/null -w '%{size_download}' "$URL$1"; }
html=$(weight /) js=$(weight /ui/app.js) css=$(weight /ui/app.css)

echo
echo "== the web page: flame graphs of 1, 20,000 and 100,000 distinct stacks ($(nproc) cores) =="
printf '%-10s %22s %22s %8s %26s\n' stacks "flamegraph ms (bytes)" "profile ms (bytes)" ratio "first flame graph ms"
for n in 1 20000 100000; do
  read -r fgt fgb <<<"${R[$n,fg]}"
  read -r ppt ppb <<<"${R[$n,pp]}"
  f=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1])["host=bench"+sys.argv[2]]; print("%d (%d nodes)" % (d["ms"], d["nodes"]))' "$page" "$n")
  printf '%-10s %22s %22s %8s %26s\n' "$n" "$fgt ($fgb)" "$ppt ($ppb)" "$(awk -v a="$fgt" -v b="$ppt" 'BEGIN {printf "%.2fx", b ? a / b : 0}')" "$f"
done
echo "page weight: $((html + js + css)) bytes (HTML $html, script $js, style $css), nothing fetched elsewhere"
