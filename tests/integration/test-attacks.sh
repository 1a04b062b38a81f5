#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The collector under attack (docs/security.md): a real collector on
# 127.0.0.1 with an upload and a read token, a one-second read limit and
# the smallest read memory budget, and requests an attacker crafts
# (collattack.py), while /healthz is asked every 20 ms and the collector's
# memory is sampled:
#   1. label selectors whose regular expressions glibc's regcomp() took
#      seconds and gigabytes over (a++++..., (.*){1,1000}, nested counted
#      repetition): each answered within the read limit, refused in
#      Connect's terms where RE2 cannot compile it;
#   2. Authorization: Basic values that are not base64 ("====" decoded to
#      length -1 and wrote before a stack buffer): 401, the collector
#      alive (the ASan build of this test catches any stray write);
#   3. 32 connections without the read token, each sending most of a
#      4 MiB query body: refused from their heads, the bodies dropped as
#      they come (Content-Length or chunked) and the connection kept in
#      step for its next request; then, on a collector
#      without a read token, query bodies in flight bounded in all, and
#      stalled ones closed 10 s after their heads;
#   4. HEAD /healthz on a keep-alive connection: a head with its
#      Content-Length and no body, and the next answer where it belongs;
#   5. a read that needs more memory than --max-read-mb: 503 (HTTP) and
#      resource_exhausted (Connect) that say so, and the collector serving
#      smaller reads after it;
#   6. naming by debuginfod, against a server that misbehaves on purpose:
#      a 130-digit build ID does not stop the 128-digit one it begins with
#      from being named; a debug file whose 100,000 symbols share a
#      4,000-byte name is refused for its names' memory; a redirect off the
#      server is not followed (one within it is); a junk build ID cannot
#      forge a log line; 40,000 unknown builds in one profile: each read
#      within its limit, at most 64 builds queued a read, 20 lines logged;
#   7. reads off the loop thread: 72 reads at once (8 of them hung up at
#      once) while an upload comes: the upload answered in well under a
#      read's time, at most 64 reads waiting (the rest 503, saying so);
#      then SIGTERM with reads queued: the one running answered, the rest
#      503 saying the collector stops, and the collector exits cleanly.
# Throughout: /healthz within 100 ms, the collector's memory within its
# budgets and back within 20 MB of where it was. AddressSanitizer holds
# freed memory in a quarantine (256 MB by default) before it is used
# again: in that build the collectors here run with a quarantine of 1 MB
# that gives freed pages back at once, so that memory is measured as the
# program holds it in both builds.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 240
ATTACK=$FP_SRC/tests/integration/collattack.py
MK=$FP_SRC/tests/integration/mkpprof.py
[[ -x $FP_COLLECTOR ]] || fp_fail "missing $FP_COLLECTOR"
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1:allocator_release_to_os_interval_ms=0
# Memory held, as the kernel counts it, grows by half in that build (ASan's
# shadow and redzones): 8 MiB of query bodies in flight measured 16.0 MB
# plain and 25.4 MB there. ASAN_GROWTH scales the bounds that memory meets.
# ASAN_SLOW scales the read limit of section 6 and its bound (a read of
# 40,000 builds: 0.53-0.66 s plain, past its 1 s limit under ASan).
ASAN_GROWTH=1 ASAN_SLOW=1
# (Not "ldd | grep -q": under pipefail its early exit can fail ldd, and the bounds with it.)
[[ $(ldd "$FP_COLLECTOR") == *libasan* ]] && ASAN_GROWTH=1.5 ASAN_SLOW=3

port=$(fp_free_port)
url=http://127.0.0.1:$port
echo "up-$$" >"$FP_TMP/token"
echo "rd-$$" >"$FP_TMP/rtoken"
fp_start_collector "$url" --listen "127.0.0.1:$port" --store "$FP_TMP/c.db" --token-file "$FP_TMP/token" \
  --read-token-file "$FP_TMP/rtoken" --max-read-ms 1000 --max-read-mb 16 --debuginfod none
PID=$FP_COLL_PID
RAUTH="Authorization: Bearer rd-$$"

# judge JSON PYTHON-EXPR MESSAGE: fails with MESSAGE and the JSON unless the expression holds for d.
judge() {
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" ||
    fp_fail "$3: $1"
}
# healthy_through JSON WHAT [PID]: the properties every attack keeps: /healthz fast and never
# failing, memory bounded and given back, the collector (PID, default the first) alive.
healthy_through() {
  judge "$1" 'd["healthz_failures"] == 0 and d["healthz_polls"] > 0' "$2: /healthz failed"
  judge "$1" 'd["healthz_worst_ms"] < 100' "$2: /healthz waited 100 ms or more"
  judge "$1" "d['rss_peak_kib'] - d['rss_before_kib'] < (16 + 20) * 1024 * $ASAN_GROWTH" "$2: memory past the read budget"
  judge "$1" 'd["rss_after_kib"] - d["rss_before_kib"] < 20 * 1024' "$2: memory not back within 20 MB"
  kill -0 "${3:-$PID}" 2>/dev/null || fp_fail "$2: the collector died: $(tail -5 "$FP_TMP/collector.log")"
}

# Something to select: two services' profiles.
now=$(date +%s)
for svc in api db; do
  python3 "$MK" good "$FP_TMP/$svc.pb.gz" --samples 400 --stacks 20 --seed ${#svc}
  from=$(((now - 120) * 1000000000))
  curl -sf -o /dev/null -H "Authorization: Bearer up-$$" --data-binary @"$FP_TMP/$svc.pb.gz" \
    "$url/api/v1/ingest?host=h1&pid=$((100 + ${#svc}))&starttime=7&comm=$svc&exe=/usr/bin/$svc&event=cpu-clock&from=$from&to=$((from + 60000000000))&agent=test" ||
    fp_fail "upload of $svc"
done
fp_wait_for 10 bash -c "curl -sf -H '$RAUTH' '$url/api/v1/series' | grep -q '\"db\"'" || fp_fail "the uploads were not stored"

# ---- 1. regular expressions ------------------------------------------------
out=$(python3 "$ATTACK" regex "$port" "$PID" "rd-$$" 'a++++++++++++++++++++++' '(.*){1,1000}' \
  '((a{1,1000}){1,1000}){1,1000}' '(.*a){20}' '(a|aa)+' '(x+x+)+y' 'ap.*|d.')
healthy_through "$out" "1. regular expressions"
judge "$out" 'all(c["seconds"] < 1.5 for c in d["calls"])' "1. a selector's read ran past the read limit"
judge "$out" 'all(c["status"] == 400 and "invalid_argument" in c["answer"] and "invalid" in c["answer"]
                  for c in d["calls"] if c["pattern"].startswith(("a++", "((a")))' \
  "1. a pattern RE2 refuses was not refused in Connect's terms"
judge "$out" 'all(c["status"] == 200 for c in d["calls"] if c["pattern"] in ("(.*){1,1000}", "ap.*|d."))' \
  "1. a pattern RE2 takes was not answered"
# The last one selects both services: matching still works.
judge "$out" '[c for c in d["calls"] if c["pattern"] == "ap.*|d." and c["method"] == "LabelNames"][0]["answer"].count("service_name") == 1' \
  "1. LabelNames of a selector that matches gave no names"
fp_ok "1. label selectors' patterns: refused or answered within the read limit ($(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("slowest %.3f s, /healthz at most %.1f ms" % (max(c["seconds"] for c in d["calls"]), d["healthz_worst_ms"]))' "$out"))"

# ---- 2. basic authentication that is not base64 ----------------------------
out=$(python3 "$ATTACK" basic "$port" "$PID")
healthy_through "$out" "2. basic authentication"
judge "$out" 'all(c["status"] == 401 for c in d["calls"])' "2. a malformed Basic header was not refused with 401"
code=$(curl -s -o /dev/null -w '%{http_code}' -u "anyone:rd-$$" "$url/api/v1/series")
[[ $code == 200 ]] || fp_fail "2. basic authentication with the read token as password: $code"
fp_ok "2. Basic headers that are not base64 (\"====\", \"A=BC\", ...): 401 on uploads and reads; the right one still reads"

# ---- 3. query bodies before the read token ---------------------------------
out=$(python3 "$ATTACK" bodies "$port" "$PID" 32 4 -)
healthy_through "$out" "3. query bodies without the token"
judge "$out" 'd["statuses"] == {"401": 32}' "3. query bodies without the read token were not all refused from their heads"
judge "$out" '"read token" in d["answers"][0] and "unauthenticated" in d["answers"][0]' \
  "3. the refusal does not say why in Connect's terms"
judge "$out" 'd["rss_loaded_kib"] - d["rss_before_kib"] < 8 * 1024' "3. unauthenticated bodies cost memory"
# Refused from its head, a query's body is still read (and dropped): the connection goes on.
kept=$(python3 "$ATTACK" refused "$port")
judge "$kept" 'd["statuses"] == [401, 401, 200] and d["connect"] == 2' \
  "3. queries refused for their token did not leave the connection in step"
fp_ok "3. 32 query bodies of 4 MiB without the read token: 401 from each head (and on one connection, Content-Length and chunked bodies dropped, the next request answered), $(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("%d KiB more memory at most" % (d["rss_peak_kib"] - d["rss_before_kib"]))' "$out")"

# A collector without a read token takes query bodies, but only so many at once.
port2=$(fp_free_port)
url2=http://127.0.0.1:$port2
fp_start_collector "$url2" --listen "127.0.0.1:$port2" --store "$FP_TMP/c2.db" --debuginfod none
PID2=$FP_COLL_PID
out=$(python3 "$ATTACK" bodies "$port2" "$PID2" 32 4 -)
healthy_through "$out" "3b. query bodies on an open collector" "$PID2"
judge "$out" 'd["statuses"].get("503", 0) >= 28' "3b. query bodies past the bound in flight were not refused (503)"
judge "$out" "d['rss_loaded_kib'] - d['rss_before_kib'] < 20 * 1024 * $ASAN_GROWTH" "3b. query bodies in flight took more than their bound"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d '{}' \
  "$url2/querier.v1.QuerierService/ProfileTypes")
[[ $code == 200 ]] || fp_fail "3b. a query after the bodies closed: $code"
# Bodies that stall hold their share only so long: closed, and the next query's body goes in.
stalled=$(python3 "$ATTACK" stall "$port2" 2 4 20)
judge "$stalled" 'all(t is not None and 9 <= t <= 14 for t in d["closed_after"])' \
  "3b. stalled query bodies were not closed about 10 s after their heads"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/proto' --data-binary @<(head -c 1000000 /dev/zero) \
  "$url2/querier.v1.QuerierService/ProfileTypes")
[[ $code != 503 ]] || fp_fail "3b. a query's body after stalled ones closed was refused: $code"
fp_ok "3b. without a read token: 32 query bodies of 4 MiB, $(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("%s, at most %d KiB more memory, %d KiB after" % (d["statuses"], d["rss_peak_kib"] - d["rss_before_kib"], d["rss_after_kib"] - d["rss_before_kib"]))' "$out"); stalled ones closed after $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["closed_after"])' "$stalled") s"

# ---- 4. HEAD ----------------------------------------------------------------
out=$(python3 "$ATTACK" head "$port" "$PID")
healthy_through "$out" "4. HEAD"
judge "$out" 'd["content_length"] is not None and d["content_length"] > 0' "4. HEAD /healthz has no Content-Length"
judge "$out" 'd["next_is_answer"]' "4. HEAD /healthz sent a body: the next answer is out of place"
fp_ok "4. HEAD: a head with Content-Length $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["content_length"])' "$out") and no body; the next answer in its place"

# ---- 5. a read past its memory budget -------------------------------------
python3 "$MK" good "$FP_TMP/big.pb.gz" --samples 60000 --stacks 60000 --seed 5
from=$(((now - 60) * 1000000000))
curl -sf -o /dev/null -H "Authorization: Bearer up-$$" --data-binary @"$FP_TMP/big.pb.gz" \
  "$url/api/v1/ingest?host=h2&pid=300&starttime=7&comm=big&exe=/usr/bin/big&event=cpu-clock&from=$from&to=$((from + 60000000000))&agent=test" ||
  fp_fail "5. upload of the large profile"
fp_wait_for 20 bash -c "curl -sf -H '$RAUTH' '$url/api/v1/series' | grep -q '\"big\"'" || fp_fail "5. the large upload was not stored"
# A first read of it fills the store's page cache: the memory is measured from after it.
curl -s -o /dev/null -H "$RAUTH" "$url/api/v1/profile?host=h2"
out=$(python3 "$ATTACK" get "$port" "$PID" "rd-$$" 1 "/api/v1/profile?host=h2")
healthy_through "$out" "5. a read past its memory budget"
judge "$out" "all(c['status'] == 503 and '--max-read-mb' in c['answer'] and c['seconds'] < 1.0 * $ASAN_SLOW for c in d['calls'])" \
  "5. a read past its memory budget was not refused within the read limit"
code=$(curl -s -o "$FP_TMP/r5c" -w '%{http_code}' -H "$RAUTH" -H 'Content-Type: application/json' \
  -d "{\"profileTypeID\":\"cpu-clock:cpu:nanoseconds:cpu:nanoseconds\",\"labelSelector\":\"{service_name=\\\"big\\\"}\",\"start\":\"0\",\"end\":\"$((now * 1000 + 60000))\"}" \
  "$url/querier.v1.QuerierService/SelectMergeStacktraces")
grep -q '"code":"resource_exhausted"' "$FP_TMP/r5c" && grep -q -- "--max-read-mb" "$FP_TMP/r5c" ||
  fp_fail "5. a Connect read past its memory budget: $code $(head -c 300 "$FP_TMP/r5c")"
curl -sf -H "$RAUTH" -o "$FP_TMP/small.pb.gz" "$url/api/v1/profile?host=h1" || fp_fail "5. a small read after the large one failed"
[[ -s $FP_TMP/small.pb.gz ]] || fp_fail "5. the small read is empty"
grep -q 'fleetprof_collector_read_budget_refused_total 3' <(curl -sf -H "$RAUTH" "$url/metrics") ||
  fp_fail "5. /metrics does not count the three reads refused for memory: $(curl -sf -H "$RAUTH" "$url/metrics" | grep budget)"
fp_ok "5. a read past --max-read-mb: 503 and resource_exhausted saying so; smaller reads still served; counted in /metrics"

# ---- 6. naming by debuginfod -----------------------------------------------
# A debuginfod server that misbehaves on purpose (debuginfod_fake.py) and a
# second one where no request of the collector's may arrive; debug files
# written by mkelf.py. One upload holds: a 130-digit build ID and the real
# 128-digit one it begins with, a debug file whose 100,000 symbols share one
# name of 4,000 bytes, a build redirected to the other server, one
# redirected within its own, and a build "ID" that would write a forged line
# and an escape sequence into the log.
DI=$FP_TMP/di
mkdir -p "$DI/srv" "$DI/other" "$DI/cache"
dport=$(fp_free_port)
oport=$(fp_free_port)
python3 "$FP_SRC/tests/integration/debuginfod_fake.py" "$dport" "$DI/srv" "$DI/requests.log" &
fp_track $!
python3 "$FP_SRC/tests/integration/debuginfod_fake.py" "$oport" "$DI/other" "$DI/other.log" &
fp_track $!
fp_wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$dport/" || fp_fail "6. the fake debuginfod did not start"
fp_wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$oport/" || fp_fail "6. the other server did not start"
MKELF=$FP_SRC/tests/integration/mkelf.py
hexid() { python3 -c 'import sys; print(sys.argv[1] * int(sys.argv[2]))' "$1" "$2"; }
GOOD=$(hexid ab 64)  # 128 hex digits
BIG=$(hexid cd 20)
RED=$(hexid ef 20)
SAME=$(hexid 12 20)
build() { # build ID NAME...: its debug file, which is also its executable's head
  python3 "$MKELF" "$DI/srv/$1.debuginfo" "$@"
  cp "$DI/srv/$1.debuginfo" "$DI/srv/$1.executable"
}
build "$GOOD" real_function
build "$BIG" huge:100000:4000
build "$RED" redirected_function
build "$SAME" moved_function
echo "redirect http://127.0.0.1:$oport" >"$DI/srv/$RED.status"
echo "redirect http://127.0.0.1:$dport" >"$DI/srv/$SAME.status"
cp "$DI/srv/$RED.debuginfo" "$DI/other/$RED.debuginfo"
cp "$DI/srv/$RED.executable" "$DI/other/$RED.executable"
cport=$(fp_free_port)
curl_ok=(-s -o /dev/null -w '%{http_code}')
"$FP_COLLECTOR" --listen "127.0.0.1:$cport" --store "$FP_TMP/c6.db" --token-file "$FP_TMP/token" \
  --read-token-file "$FP_TMP/rtoken" --max-read-ms $((1000 * ASAN_SLOW)) --debuginfod "http://127.0.0.1:$dport" \
  --debuginfod-cache "$DI/cache" --debuginfod-retry 600 >>"$DI/collector.log" 2>&1 &
PID6=$!
fp_track "$PID6"
fp_wait_for 15 curl -sf -o /dev/null "http://127.0.0.1:$cport/healthz" ||
  fp_fail "6. the collector did not come up: $(tail -3 "$DI/collector.log")"
upload6() { # HOST PROFILE
  local from=$(((now - 60) * 1000000000))
  curl -sf -o /dev/null -H "Authorization: Bearer up-$$" --data-binary @"$2" \
    "http://127.0.0.1:$cport/api/v1/ingest?host=$1&pid=7&starttime=1&comm=app&exe=/opt/app/app&event=cpu-clock&from=$from&to=$((from + 60000000000))&agent=test" ||
    fp_fail "6. the upload of $1 was refused"
}
python3 "$MK" unnamed "$DI/six.pb.gz" --frame "${GOOD}ab:/opt/app/long:1004" \
  --frame "$GOOD:/opt/app/good:1004" --frame "$BIG:/opt/app/big:1004" \
  --frame "$RED:/opt/app/red:1004" --frame "$SAME:/opt/app/same:1004" \
  --frame $'zz\nfleetprof-collector: FORGED\e[31m:/opt/app/evil:10'
upload6 h6 "$DI/six.pb.gz"
fp_wait_for 10 bash -c "curl -sf -H '$RAUTH' 'http://127.0.0.1:$cport/api/v1/series' | grep -q h6" ||
  fp_fail "6. the upload was not stored"
# Reads that set the fetches going (the 100,000 names of 4,000 bytes among
# them), with /healthz and memory watched while the files come and are read.
out=$(python3 "$ATTACK" get "$cport" "$PID6" "rd-$$" 4 "/api/v1/profile?host=h6")
healthy_through "$out" "6. reads naming from a hostile debuginfod" "$PID6"
judge "$out" "all(c['status'] == 200 and c['seconds'] < 1.0 * $ASAN_SLOW for c in d['calls'])" \
  "6. a read naming from a hostile debuginfod ran past its limit"
names6() { curl -sf -H "$RAUTH" "http://127.0.0.1:$cport/api/v1/profile?host=h6" | gzip -dc | tr -c '[:print:]' '\n'; }
fp_wait_for 30 bash -c "$(declare -f names6); RAUTH='$RAUTH' cport=$cport; names6 | grep -q moved_function && names6 | grep -q real_function" ||
  fp_fail "6. the 128-digit build (after a 130-digit one) or the build moved within its server was not named: $(grep debuginfod "$DI/collector.log" | tail -5)"
fp_wait_for 10 grep -q "names take more than" "$DI/collector.log" ||
  fp_fail "6. the debug file of 100,000 symbols of 4,000-byte names was not refused: $(grep debuginfod "$DI/collector.log" | tail -5)"
grep -q "$RED.*off the server (not followed)" "$DI/collector.log" ||
  fp_fail "6. the redirect to another server is not said: $(grep debuginfod "$DI/collector.log" | tail -5)"
[[ ! -s $DI/other.log ]] || fp_fail "6. a redirect off the server was followed: $(cat "$DI/other.log")"
names6 | grep -q redirected_function && fp_fail "6. a build was named from a server it was redirected to"
grep -q "^fleetprof-collector: FORGED" "$DI/collector.log" && fp_fail "6. an uploaded build ID forged a log line"
grep -q $'\e' "$DI/collector.log" && fp_fail "6. an uploaded build ID wrote an escape sequence into the log"
grep -q "build ID 'zz?fleetprof-collector:?FORGED?" "$DI/collector.log" ||
  fp_fail "6. the junk build ID is not said in safe characters: $(grep "build ID" "$DI/collector.log")"
sym=$(curl -sf -H "$RAUTH" "http://127.0.0.1:$cport/metrics" | awk '/^fleetprof_collector_debuginfod_symbol_bytes/ {print $2}')
((${sym%.*} < 1048576)) || fp_fail "6. the loaded symbols take $sym bytes"
fp_ok "6. debuginfod: a 130-digit build ID left the 128-digit one named, 4,000-byte names x 100,000 refused ($sym symbol bytes loaded), a redirect off the server not followed and one within it followed, a junk ID logged as '$(grep -o "build ID 'zz[^']*'" "$DI/collector.log" | head -1)'"

# 40,000 builds no server has, in one profile: each read within its limit,
# a bounded number of builds queued, a bounded number of log lines.
python3 -c 'import random
r = random.Random(6)
for i in range(40000):
    print("%040x:/opt/lib/l%d.so:%x" % (r.getrandbits(160), i, 0x1000 + i))' >"$DI/frames"
python3 "$MK" unnamed "$DI/many.pb.gz" --frames-file "$DI/frames"
upload6 h7 "$DI/many.pb.gz"
fp_wait_for 20 bash -c "curl -sf -H '$RAUTH' 'http://127.0.0.1:$cport/api/v1/series' | grep -q h7" ||
  fp_fail "6. the upload of 40,000 builds was not stored"
# A first read of so large a profile leaves the store's cache and the heap
# some 55 MB larger, with naming or without: the memory is measured after it.
curl -sf -o /dev/null -H "$RAUTH" "http://127.0.0.1:$cport/api/v1/profile?host=h7" || fp_fail "6. the first read of 40,000 builds"
sleep 1
before=$(wc -l <"$DI/requests.log")
lines0=$(grep -c "debuginfod:" "$DI/collector.log" || true)
out=$(python3 "$ATTACK" get "$cport" "$PID6" "rd-$$" 3 "/api/v1/profile?host=h7")
judge "$out" "all(c['status'] == 200 and c['seconds'] < 2.0 * $ASAN_SLOW for c in d['calls'])" \
  "6. a read of 40,000 unknown builds ran past its limit"
judge "$out" 'd["healthz_failures"] == 0 and d["healthz_worst_ms"] < 100' "6. /healthz failed or waited 100 ms or more while 40,000 builds were read"
judge "$out" "d['rss_after_kib'] - d['rss_before_kib'] < 20 * 1024 * $ASAN_GROWTH" "6. 40,000 builds kept memory"
sleep 2
asked=$(($(wc -l <"$DI/requests.log") - before))
((asked <= 3 * 64)) || fp_fail "6. three reads asked the server for $asked files (at most 64 builds a read)"
total=$(wc -l <"$DI/requests.log")
((total <= 4 * 64 + 20)) || fp_fail "6. four reads and the first upload asked the server for $total files"
lines=$(($(grep -c "debuginfod:" "$DI/collector.log" || true) - lines0))
((lines <= 20)) || fp_fail "6. the reads of 40,000 unknown builds logged $lines lines"
kill -0 "$PID6" 2>/dev/null || fp_fail "6. the collector died"
fp_ok "6. 40,000 builds in one profile: reads in $(python3 -c 'import json,sys; print(", ".join("%.2f s" % c["seconds"] for c in json.loads(sys.argv[1])["calls"]))' "$out"), $asked files asked for, $lines log lines"

# ---- 7. reads off the loop thread ------------------------------------------
# 2,000 unknown builds a profile: a read takes some 40 ms (three times that
# under ASan), so 72 sent at once queue up behind one another.
head -2000 "$DI/frames" >"$DI/frames2k"
python3 "$MK" unnamed "$DI/mid.pb.gz" --frames-file "$DI/frames2k"
upload6 h8 "$DI/mid.pb.gz"
fp_wait_for 20 bash -c "curl -sf -H '$RAUTH' 'http://127.0.0.1:$cport/api/v1/series' | grep -q h8" ||
  fp_fail "7. the upload of 2,000 builds was not stored"
python3 "$ATTACK" flood "$cport" "$PID6" "rd-$$" 72 "/api/v1/profile?host=h8" 8 >"$DI/flood.json" &
flood=$!
sleep 0.3
t0=$(date +%s%N)
upload6 h9 "$DI/six.pb.gz"
up_ms=$((($(date +%s%N) - t0) / 1000000))
wait "$flood" || fp_fail "7. the flood of reads failed"
out=$(cat "$DI/flood.json")
judge "$out" 'd["healthz_failures"] == 0 and d["healthz_worst_ms"] < 100' "7. /healthz failed or waited 100 ms or more behind 72 reads"
judge "$out" 'set(d["statuses"]) <= {"200", "503"} and d["statuses"].get("503", 0) == d["busy"] and d["busy"] >= 1' \
  "7. past 64 waiting reads, the rest were not refused with 503 saying so"
judge "$out" 'd["statuses"].get("200", 0) >= 56' "7. fewer than 56 of 64 waiting reads were answered"
((up_ms < 1000 * ASAN_SLOW)) || fp_fail "7. an upload during the flood of reads took $up_ms ms"
kill -0 "$PID6" 2>/dev/null || fp_fail "7. the collector died"
fp_ok "7. 72 reads at once, 8 hung up: $(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("answers %s in %.1f s, /healthz at most %.1f ms" % (d["statuses"], d["seconds"], d["healthz_worst_ms"]))' "$out"), an upload meanwhile in $up_ms ms"
# SIGTERM with reads queued: each answered, the collector gone cleanly.
out=$(python3 "$ATTACK" stop "$cport" "$PID6" "rd-$$" 12 "/api/v1/profile?host=h7" 0.3)
rc=0
fp_wait_for 10 bash -c "! kill -0 $PID6 2>/dev/null" || fp_fail "7. the collector did not stop within 10 s of SIGTERM with reads queued"
wait "$PID6" || rc=$?
fp_untrack "$PID6"
((rc == 0)) || fp_fail "7. the collector stopped with status $rc: $(tail -5 "$DI/collector.log")"
judge "$out" 'all(a["status"] in ("200", "503") for a in d["answers"]) and sum(a["stopping"] for a in d["answers"]) >= 8' \
  "7. reads queued at SIGTERM were not answered 503 saying the collector stops"
fp_ok "7. SIGTERM with 12 reads of 40,000 builds queued: $(python3 -c 'import json,sys; a=json.loads(sys.argv[1])["answers"]; print("%d answered, %d told the collector stops" % (sum(x["status"] == "200" for x in a), sum(x["stopping"] for x in a)))' "$out"), exit status 0"
