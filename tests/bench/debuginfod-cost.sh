#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# What does naming at the collector cost a query?  A collector (SQLite)
# holds BENCH_UPLOADS uploads, each with a frame in every one of 20
# stripped builds (FILE+0xOFFSET, as an agent leaves them) and 50 named
# stacks; each configuration below answers the same merged pprof and
# flame graph BENCH_QUERIES times:
#
#   none     no --debuginfod (the baseline)
#   down     a server that refuses connections
#   hang     a server that never answers (--debuginfod-timeout 30s)
#   named    a server with every build's files, once they are cached
#
# Figures: median and 90th percentile per query kind, and how many of the
# 20 builds' frames the answer names. Figures only; it never fails on a time.
# Environment: BENCH_UPLOADS (default 200), BENCH_QUERIES (default 40).
set -euo pipefail
source "$(dirname "$0")/../integration/lib.sh"
FP_TEST_NAME=debuginfod-cost
UPLOADS=${BENCH_UPLOADS:-200}
QUERIES=${BENCH_QUERIES:-40}
fp_init 900
unset DEBUGINFOD_URLS
INTEG=$FP_SRC/tests/integration
B=$FP_TMP/builds
mkdir -p "$B" "$FP_TMP/fake"

# 20 builds: the same program with another constant, its debug file and executable served.
frames=()
for i in $(seq 1 20); do
  printf 'int __attribute__((noinline)) work_%d(int x){return x*%d;}\nint main(int c, char **v){(void)v; return work_%d(c);}\n' \
    "$i" "$i" "$i" >"$B/p$i.c"
  cc -O1 -g -o "$B/p$i" "$B/p$i.c"
  id=$(readelf -n "$B/p$i" | awk '/Build ID/ {print $3}')
  objcopy --only-keep-debug "$B/p$i" "$FP_TMP/fake/$id.debuginfo"
  strip -s -o "$FP_TMP/fake/$id.executable" "$B/p$i"
  off=$(printf "%x" "0x$(nm "$B/p$i" | awk -v f="work_$i" '$3 == f {print $1}')")
  frames+=(--frame "$id:/opt/p$i:$off")
done
python3 "$INTEG/mkpprof.py" unnamed "$FP_TMP/unnamed.pb.gz" "${frames[@]}" --time "$(date +%s)000000000"
python3 "$INTEG/mkpprof.py" good "$FP_TMP/good.pb.gz" --time "$(date +%s)000000000"

FPORT=$(fp_free_port)
python3 "$INTEG/debuginfod_fake.py" "$FPORT" "$FP_TMP/fake" "$FP_TMP/fake.log" &
fp_track $!
HPORT=$(fp_free_port)
mkdir -p "$FP_TMP/hang"
for id in $(ls "$FP_TMP/fake" | sed 's/\..*//' | sort -u); do echo hang >"$FP_TMP/hang/$id.status"; done
python3 "$INTEG/debuginfod_fake.py" "$HPORT" "$FP_TMP/hang" "$FP_TMP/hang.log" &
fp_track $!
fp_wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$FPORT/" || fp_fail "the fake server did not start"

PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
now=$(date +%s)
load() { # the uploads, into a fresh store
  local i from
  for i in $(seq 1 "$UPLOADS"); do
    from=$(((now - UPLOADS * 60 + i * 60) * 1000000000))
    for k in unnamed good; do
      code=$(curl -s -H "Idempotency-Key: $k-$i" --data-binary @"$FP_TMP/$k.pb.gz" -o "$FP_TMP/answer" -w '%{http_code}' \
        "$URL/api/v1/ingest?host=h$((i % 10))&pid=$i&starttime=1&comm=p&exe=/opt/p&event=cpu-clock&from=$from&to=$((from + 60000000000))&agent=bench") || true
      [[ $code == 2* ]] || fp_fail "upload $k $i: HTTP $code $(cat "$FP_TMP/answer" 2>/dev/null)"
    done
  done
}
# times KIND PATH: "median p90" milliseconds of QUERIES queries.
times() {
  local i
  for i in $(seq 1 "$QUERIES"); do
    curl -sf -o /dev/null -w '%{time_total}\n' "$URL$2" || fp_fail "query $2 failed"
  done | sort -n | awk '{v[NR] = $1 * 1000} END {printf "%.1f %.1f", v[int((NR + 1) / 2)], v[int(NR * 0.9)]}'
}
named() {
  curl -sf -o "$FP_TMP/q.pb.gz" "$URL/api/v1/profile"
  fp_pprof -top -nodecount=1000 -symbolize=none "$FP_TMP/q.pb.gz" 2>/dev/null | grep -c " work_[0-9]*$" || true
}

printf '%-8s %22s %22s %8s\n' config "profile ms (p50 p90)" "flamegraph ms (p50 p90)" named
for config in none down hang named; do
  rm -rf "$FP_TMP/store.db"* "$FP_TMP/cache"
  mkdir -m 700 "$FP_TMP/cache"
  args=(--listen "127.0.0.1:$PORT" --store "$FP_TMP/store.db" --debuginfod-cache "$FP_TMP/cache")
  case $config in
  none) ;;
  down) args+=(--debuginfod http://127.0.0.1:1) ;;
  hang) args+=(--debuginfod "http://127.0.0.1:$HPORT" --debuginfod-timeout 30s) ;;
  named) args+=(--debuginfod "http://127.0.0.1:$FPORT") ;;
  esac
  fp_start_collector "$URL" "${args[@]}"
  load
  fp_wait_for 60 eval '[[ $(curl -sf "$URL/api/v1/series" | grep -o "\"host\"" | wc -l) -ge 10 ]]' || true
  curl -sf -o /dev/null "$URL/api/v1/profile" # the first query asks for the builds
  [[ $config == named ]] && fp_wait_for 60 eval '[[ $(named) == 20 ]]'
  p=$(times profile /api/v1/profile)
  f=$(times flame "/api/v1/flamegraph?value=samples")
  printf '%-8s %22s %22s %8s\n' "$config" "$p" "$f" "$(named)"
  fp_stop_collector
done
