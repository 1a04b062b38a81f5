#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Stripped builds named from debug files uploaded from CI (collector/names/,
# storage/debugfiles.c, agentctl upload-debuginfo):
#   1. Stripped C, C++ and Rust programs profiled by a real agent (it can
#      name none of their functions); their debug files, split off with
#      objcopy --only-keep-debug, uploaded by `agentctl upload-debuginfo`
#      (the stripped binaries beside them skipped; a second run sends
#      nothing); a SQLite collector with no debuginfod server then names
#      every frame of the agent's uploads (C++ and Rust demangled, the
#      symbol kept), says so in the profile's comments, counts it in
#      /metrics, names them again after a restart, and serves the files back
#      to elfutils' debuginfod-find.
#   2. Refused with one line, nothing stored: another build's file, a file
#      cut short, a file that is not ELF, a stripped file (no symbols), no
#      token, a file over the whole budget.
#  2b. The same debug files served by Debian's debuginfod -F over a
#      directory holding only them: named, the server named in the comments.
#   3. The budget: unstripped executables of 400 KB under a 1 MiB budget;
#      the least recently used (served or named from) is evicted first, the
#      executable is served as /executable too.
#   4. Two collectors on one ClickHouse: a debug file uploaded to one names
#      the other's profile.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=debuginfo-upload
fp_init 240
fp_require_go
command -v g++ >/dev/null || fp_fail "g++ is not installed"
command -v debuginfod >/dev/null || fp_fail "debuginfod is not installed (scripts/deps.sh installs it)"
unset DEBUGINFOD_URLS
INTEG=$FP_SRC/tests/integration
NAMES=$FP_SRC/tests/workloads/names
CTL=$FP_BUILD/agent/agentctl

# ---- the programs, stripped, their debug files for CI ---------------------------
W=$FP_TMP/work
mkdir -p "$W/ci" "$W/bin"
gcc -O1 -g -o "$W/cnames" "$NAMES/cnames.c" || fp_fail "gcc failed"
g++ -O1 -g -o "$W/cxxnames" "$NAMES/cxxnames.cc" || fp_fail "g++ failed"
PROGS=(cnames cxxnames)
if command -v rustc >/dev/null; then
  rustc -O -g -o "$W/rustnames" "$NAMES/rustnames.rs" || fp_fail "rustc failed"
  PROGS+=(rustnames)
else
  fp_log "rustc is not installed: the Rust program is left out"
fi
declare -A BID
for p in "${PROGS[@]}"; do
  objcopy --only-keep-debug "$W/$p" "$W/ci/$p.debug"
  strip -s -o "$W/bin/$p" "$W/$p"
  BID[$p]=$(readelf -n "$W/bin/$p" | awk '/Build ID/ {print $3}')
  [[ ${#BID[$p]} == 40 ]] || fp_fail "no build ID in $p"
done

# ---- the agent profiles the stripped programs (it can name none of them) -------
fp_start_agent --bucket 1
declare -A PID
for p in "${PROGS[@]}"; do
  "$W/bin/$p" 3 >/dev/null &
  PID[$p]=$!
  fp_track "${PID[$p]}"
  fp_ctl start "${PID[$p]}" --freq 299 >/dev/null || fp_fail "start $p failed"
done
sleep 2.5
for p in "${PROGS[@]}"; do
  fp_ctl dump "${PID[$p]}" -o "$FP_TMP/$p.pb.gz" >/dev/null || fp_fail "dump of $p failed"
done
for p in "${PROGS[@]}"; do wait "${PID[$p]}" || true; done
fp_stop_agent
# leaves FILE: "NAME<TAB>SYSTEM_NAME<TAB>SAMPLES" of every leaf function, by go tool pprof.
leaves() {
  fp_pprof -raw -symbolize=none "$1" 2>/dev/null | python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
import pprofraw
p = pprofraw.parse(sys.stdin.read())
leaf = {}
for s in p.samples:
    if s.stack:
        leaf[s.stack[0]] = leaf.get(s.stack[0], 0) + s.values[0]
sysname = {}
for loc in p.locations.values():
    for (fn, _, _), sn in zip(loc.lines, loc.system_names):
        sysname[fn] = sn
for fn in sorted(leaf):
    print("%s\t%s\t%d" % (fn, sysname.get(fn, ""), leaf[fn]))' "$INTEG"
}
for p in "${PROGS[@]}"; do
  leaves "$FP_TMP/$p.pb.gz" >"$FP_TMP/$p.agent"
  grep -q "^$p+0x" "$FP_TMP/$p.agent" || fp_fail "the agent named the stripped $p itself: $(head -3 "$FP_TMP/$p.agent")"
done

# named P FILE: FILE's pprof names P's functions (and its leaves are no offsets of P).
named() {
  leaves "$2" >"$2.leaves"
  case $1 in
  cnames) grep -qP '^alpha_work\t\t[1-9]' "$2.leaves" && grep -qP '^beta_work\t\t[1-9]' "$2.leaves" ;;
  cxxnames) grep -qP '^demo::Worker<int>::spin\(int\)\t_ZN4demo6WorkerIiE4spinEi\t[1-9]' "$2.leaves" ;;
  rustnames) grep -qP '^rustnames::work::spin\t_ZN9rustnames4work4spin17h[0-9a-f]{16}E\t[1-9]' "$2.leaves" ;;
  esac || return 1
  ! grep -q "^$1+0x" "$2.leaves"
}

PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
echo "wr-$$" >"$FP_TMP/token"
AUTH=(-H "Authorization: Bearer wr-$$")
metric() { curl -sf "$URL/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
ingest() { # ingest FILE PID: an upload as the agent makes it
  curl -sf "${AUTH[@]}" -H "Idempotency-Key: up-$2-$$" --data-binary @"$1" \
    "$URL/api/v1/ingest?host=ci&pid=$2&starttime=1&comm=prog&exe=/x&event=cpu-clock&from=$(date +%s)000000000&to=$(date +%s)999999999&agent=test" \
    -o /dev/null || fp_fail "the upload of $1 failed"
}

# ---- 1. uploaded from CI, named by a SQLite collector with no debuginfod ---------
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/one.db" \
  --token-file "$FP_TMP/token" --debuginfod none
"$CTL" upload-debuginfo --collector "$URL" --token-file "$FP_TMP/token" "$W/ci" "$W/bin" \
  >"$FP_TMP/ci1.out" 2>"$FP_TMP/ci1.err" || fp_fail "upload-debuginfo failed: $(cat "$FP_TMP/ci1.err")"
n=${#PROGS[@]}
grep -q "^$n uploaded (.* bytes), 0 already held, $n skipped, 0 failed" "$FP_TMP/ci1.out" ||
  fp_fail "the first upload from CI says: $(tail -1 "$FP_TMP/ci1.out")"
for p in "${PROGS[@]}"; do
  grep -q "^uploaded  ${BID[$p]} $W/ci/$p.debug" "$FP_TMP/ci1.out" || fp_fail "$p's debug file was not uploaded"
  grep -q "^skipped   $W/bin/$p: no symbol table" "$FP_TMP/ci1.out" || fp_fail "the stripped $p was not skipped"
done
"$CTL" upload-debuginfo --collector "$URL" --token-file "$FP_TMP/token" "$W/ci" >"$FP_TMP/ci2.out" ||
  fp_fail "the second upload-debuginfo failed"
grep -q "^0 uploaded (0 bytes), $n already held, 0 skipped, 0 failed" "$FP_TMP/ci2.out" ||
  fp_fail "the second upload from CI sent again: $(tail -1 "$FP_TMP/ci2.out")"
[[ -f $FP_TMP/one.debuginfo.db && $(stat -c %a "$FP_TMP/one.debuginfo.db") == 600 ]] ||
  fp_fail "the uploads are not kept 0600 beside the store"
i=0
for p in "${PROGS[@]}"; do ingest "$FP_TMP/$p.pb.gz" $((700 + i)); i=$((i + 1)); done
i=0
for p in "${PROGS[@]}"; do
  q="$URL/api/v1/profile?pid=$((700 + i))"
  fp_wait_for 20 eval 'curl -sf -o "$FP_TMP/n-$p.pb.gz" "$q" && named $p "$FP_TMP/n-$p.pb.gz"' ||
    fp_fail "the collector did not name $p from its uploaded debug file: $(head -4 "$FP_TMP/n-$p.pb.gz.leaves")"
  fp_pprof -comments "$FP_TMP/n-$p.pb.gz" >"$FP_TMP/n-$p.comments" 2>&1
  grep -q "frames of .* (build ${BID[$p]:0:16}...) named by the collector from an uploaded debug file" \
    "$FP_TMP/n-$p.comments" || fp_fail "$p's profile does not say where its names came from: $(cat "$FP_TMP/n-$p.comments")"
  i=$((i + 1))
done
# The page's flame graph says the same.
curl -sf -o "$FP_TMP/flame.json" "$URL/api/v1/flamegraph?pid=700&value=samples" || fp_fail "no flame graph"
fp_json_get '"\n".join(d["names"])' <"$FP_TMP/flame.json" >"$FP_TMP/flame.names"
grep -q "frames of .*/bin/cnames (build ${BID[cnames]:0:16}...) named by the collector from an uploaded debug file" "$FP_TMP/flame.names" ||
  fp_fail "the flame graph does not say where its names came from: $(cat "$FP_TMP/flame.names")"
ta=$(fp_profile_total "$FP_TMP/n-cnames.pb.gz")
tb=$(fp_profile_total "$FP_TMP/cnames.pb.gz")
((ta == tb)) || fp_fail "naming changed the total: $ta samples, the agent's $tb"
[[ $(metric 'fleetprof_collector_debuginfo_uploads_total{result="stored"}') == "$n" ]] || fp_fail "/metrics does not count $n stored uploads"
[[ $(metric 'fleetprof_collector_debuginfo_uploads_total{result="held"}') == 0 ]] || fp_fail "HEAD counted as uploads"
[[ $(metric fleetprof_collector_debuginfo_files) == "$n" ]] || fp_fail "/metrics does not hold $n files"
for p in "${PROGS[@]}"; do
  got=$(DEBUGINFOD_URLS=$URL DEBUGINFOD_CACHE_PATH=$FP_TMP/dfind debuginfod-find debuginfo "${BID[$p]}" 2>"$FP_TMP/dfind.err") ||
    fp_fail "debuginfod-find of $p from the collector: $(tail -2 "$FP_TMP/dfind.err")"
  cmp -s "$got" "$W/ci/$p.debug" || fp_fail "debuginfod-find got another file than $p's debug file"
done
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/buildid/${BID[cnames]}/executable")
[[ $code == 404 ]] || fp_fail "/executable of a build uploaded as a debug file: HTTP $code"
fp_stop_collector
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/one.db" \
  --token-file "$FP_TMP/token" --debuginfod none
fp_wait_for 20 eval 'curl -sf -o "$FP_TMP/r.pb.gz" "$URL/api/v1/profile?pid=700" && named cnames "$FP_TMP/r.pb.gz"' ||
  fp_fail "a restarted collector did not name from the uploads it kept"
fp_ok "${PROGS[*]}: stripped, their debug files uploaded by agentctl upload-debuginfo (the stripped binaries skipped, a second run sent nothing), named by the collector alone (demangled, the symbol kept; the comments say from an upload; the total unchanged), served back to debuginfod-find, named again after a restart"

# ---- 2. refusals: one line each, nothing stored --------------------------------
refused() { # refused CODE WHAT CURL-ARGS...: the answer is CODE with one line, nothing stored
  local code=$1 what=$2
  shift 2
  code_got=$(curl -s -o "$FP_TMP/refused.out" -w '%{http_code}' "$@")
  [[ $code_got == "$code" ]] || fp_fail "$what: HTTP $code_got, not $code: $(cat "$FP_TMP/refused.out")"
  [[ $(wc -l <"$FP_TMP/refused.out") -le 1 ]] || fp_fail "$what: more than one line"
  fp_log "$what: $code $(cat "$FP_TMP/refused.out")"
}
other=${BID[cxxnames]}
refused 400 "another build's file" "${AUTH[@]}" --data-binary @"$W/ci/cnames.debug" "$URL/buildid/$other/debuginfo"
grep -q "is of build ${BID[cnames]}, not $other" "$FP_TMP/refused.out" || fp_fail "the wrong build is not said"
head -c 3000 "$W/ci/cnames.debug" >"$FP_TMP/cut.debug"
refused 400 "a file cut short" "${AUTH[@]}" --data-binary @"$FP_TMP/cut.debug" "$URL/buildid/ff${BID[cnames]:2}/debuginfo"
grep -q "cut short" "$FP_TMP/refused.out" || fp_fail "the cut file is not said so"
refused 400 "a file that is not ELF" "${AUTH[@]}" --data-binary @"$NAMES/cnames.c" "$URL/buildid/ee${BID[cnames]:2}/debuginfo"
grep -q "not an ELF file" "$FP_TMP/refused.out" || fp_fail "a file that is not ELF is not said so"
refused 400 "a stripped file" "${AUTH[@]}" --data-binary @"$W/bin/cnames" "$URL/buildid/${BID[cnames]}/debuginfo"
grep -q "no symbol table" "$FP_TMP/refused.out" || fp_fail "a stripped file is not said so"
refused 401 "no token" --data-binary @"$W/ci/cnames.debug" "$URL/buildid/${BID[cnames]}/debuginfo"
refused 401 "a wrong token" -H "Authorization: Bearer nope" --data-binary @"$W/ci/cnames.debug" "$URL/buildid/${BID[cnames]}/debuginfo"
[[ $(metric 'fleetprof_collector_debuginfo_uploads_total{result="refused"}') == 4 ]] || fp_fail "/metrics does not count 4 refusals"
[[ $(metric fleetprof_collector_debuginfo_files) == "$n" ]] || fp_fail "a refused upload was stored"
for id in "$other" "ff${BID[cnames]:2}" "ee${BID[cnames]:2}"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -I "$URL/buildid/$id/debuginfo")
  [[ $id == "$other" && $code == 200 ]] || [[ $id != "$other" && $code == 404 ]] ||
    fp_fail "HEAD /buildid/$id after the refusals: HTTP $code"
done
"$CTL" upload-debuginfo --collector "$URL" --token-file /dev/null "$W/ci" >/dev/null 2>"$FP_TMP/ci3.err" &&
  fp_fail "upload-debuginfo with an empty token file succeeded"
fp_log "agentctl with no token: $(cat "$FP_TMP/ci3.err")"
fp_stop_collector
fp_ok "refused with one line, nothing stored: another build's file, a file cut short, one that is not ELF, a stripped one, no token, a wrong token"

# ---- 2b. the same debug files served by Debian's debuginfod, uploads off ---------
DPORT=$(fp_free_port)
debuginfod -F "$W/ci" -p "$DPORT" -d "$FP_TMP/debuginfod.sqlite" >>"$FP_TMP/debuginfod.log" 2>&1 &
fp_track "$!"
for p in "${PROGS[@]}"; do
  fp_wait_for 30 curl -sf -o /dev/null "http://127.0.0.1:$DPORT/buildid/${BID[$p]}/debuginfo" ||
    fp_fail "debuginfod does not serve $p's debug file: $(tail -3 "$FP_TMP/debuginfod.log")"
done
mkdir -p -m 700 "$FP_TMP/cache"
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/served.db" --token-file "$FP_TMP/token" \
  --debuginfod "http://127.0.0.1:$DPORT" --debuginfod-cache "$FP_TMP/cache" --debuginfo-mb 0
i=0
for p in "${PROGS[@]}"; do ingest "$FP_TMP/$p.pb.gz" $((900 + i)); i=$((i + 1)); done
i=0
for p in "${PROGS[@]}"; do
  q="$URL/api/v1/profile?pid=$((900 + i))"
  fp_wait_for 20 eval 'curl -sf -o "$FP_TMP/d-$p.pb.gz" "$q" && named $p "$FP_TMP/d-$p.pb.gz"' ||
    fp_fail "the collector did not name $p from Debian's debuginfod: $(head -4 "$FP_TMP/d-$p.pb.gz.leaves")"
  fp_pprof -comments "$FP_TMP/d-$p.pb.gz" >"$FP_TMP/d-$p.comments" 2>&1
  grep -q "named by the collector from debuginfod server http://127.0.0.1:$DPORT" "$FP_TMP/d-$p.comments" ||
    fp_fail "$p's profile does not say which server named it: $(cat "$FP_TMP/d-$p.comments")"
  i=$((i + 1))
done
code=$(curl -s -o /dev/null -w '%{http_code}' "${AUTH[@]}" --data-binary @"$W/ci/cnames.debug" "$URL/buildid/${BID[cnames]}/debuginfo")
[[ $code == 403 ]] || fp_fail "an upload to a collector with --debuginfo-mb 0: HTTP $code"
fp_stop_collector
fp_ok "${PROGS[*]}: named from Debian's debuginfod -F over a directory of the debug files alone (the comments name the server); uploads off: 403"

# ---- 2c. both tokens: /buildid/ reads take either, nothing else -----------------
echo "rd-$$" >"$FP_TMP/read-token"
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/one.db" \
  --token-file "$FP_TMP/token" --read-token-file "$FP_TMP/read-token" --debuginfod none
bid=${BID[cnames]}
for how in none wrong; do
  hdr=()
  [[ $how == wrong ]] && hdr=(-H "Authorization: Bearer nope")
  code=$(curl -s -o /dev/null -w '%{http_code}' "${hdr[@]}" "$URL/buildid/$bid/debuginfo")
  [[ $code == 401 ]] || fp_fail "/buildid/ with $how token, both tokens set: HTTP $code"
done
curl -sf -o /dev/null "$URL/healthz" || fp_fail "the collector stopped answering after a /buildid/ read without a token"
[[ $(curl -s -o /dev/null -w '%{http_code}' -I "${AUTH[@]}" "$URL/buildid/$bid/debuginfo") == 200 ]] ||
  fp_fail "HEAD /buildid/ with the write token was refused"
curl -sf -H "Authorization: Bearer rd-$$" -o "$FP_TMP/rd.debug" "$URL/buildid/$bid/debuginfo" &&
  cmp -s "$FP_TMP/rd.debug" "$W/ci/cnames.debug" || fp_fail "GET /buildid/ with the read token failed"
fp_stop_collector
fp_ok "with both tokens: /buildid/ read with either, 401 without or with a wrong one"

# ---- 3. the byte budget: least recently used first -------------------------------
mkdir -p "$W/big" "$W/huge"
for k in 1 2 3; do
  gcc -O1 -g -DPAD=400000 -DSEED=$k -o "$W/big/e$k" "$NAMES/cnames.c" || fp_fail "gcc failed"
  E[$k]=$(readelf -n "$W/big/e$k" | awk '/Build ID/ {print $3}')
done
gcc -O1 -g -DPAD=1200000 -DSEED=9 -o "$W/huge/e9" "$NAMES/cnames.c" || fp_fail "gcc failed"
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/three.db" \
  --token-file "$FP_TMP/token" --debuginfod none --debuginfo-mb 1
"$CTL" upload-debuginfo --collector "$URL" --token-file "$FP_TMP/token" "$W/huge" >"$FP_TMP/ci4.out" 2>"$FP_TMP/ci4.err" &&
  fp_fail "a file over the whole budget was uploaded"
grep -q "not uploaded: not stored: the file (.* bytes) is larger than the debug files' whole budget" "$FP_TMP/ci4.err" ||
  fp_fail "the file over the budget is not said so: $(cat "$FP_TMP/ci4.err")"
up() { "$CTL" upload-debuginfo --collector "$URL" --token-file "$FP_TMP/token" "$@" >>"$FP_TMP/ci5.out" || fp_fail "upload-debuginfo $* failed"; }
up "$W/big/e1"
up "$W/big/e2"
curl -sf -o "$FP_TMP/e1.got" "$URL/buildid/${E[1]}/executable" || fp_fail "the uploaded executable is not served"
cmp -s "$FP_TMP/e1.got" "$W/big/e1" || fp_fail "another executable was served"
up "$W/big/e3"
held() { [[ $(curl -s -o /dev/null -w '%{http_code}' -I "$URL/buildid/$1/debuginfo") == 200 ]]; }
held "${E[1]}" || fp_fail "the build used last was evicted"
held "${E[3]}" || fp_fail "the build uploaded last was evicted"
! held "${E[2]}" || fp_fail "the least recently used build was not evicted"
[[ $(metric fleetprof_collector_debuginfo_files) == 2 ]] || fp_fail "not 2 files under a budget of 1 MiB"
got=$(DEBUGINFOD_URLS=$URL DEBUGINFOD_CACHE_PATH=$FP_TMP/dfind3 debuginfod-find executable "${E[3]}" 2>"$FP_TMP/dfind.err") ||
  fp_fail "debuginfod-find executable from the collector: $(tail -2 "$FP_TMP/dfind.err")"
cmp -s "$got" "$W/big/e3" || fp_fail "debuginfod-find got another executable"
fp_stop_collector
fp_ok "a budget of 1 MiB: a file over it refused in one line; of three executables of 400 KB the least recently used evicted; executables served as /executable"

# ---- 4. two collectors on one ClickHouse -------------------------------------
fp_start_clickhouse "$FP_TMP/ch"
STORE="clickhouse://127.0.0.1:$FP_CH_PORT/fp_up"
PORT2=$(fp_free_port)
URL2=http://127.0.0.1:$PORT2
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$STORE" --token-file "$FP_TMP/token" --debuginfod none
C1=$FP_COLL_PID
fp_start_collector "$URL2" --listen "127.0.0.1:$PORT2" --store "$STORE" --token-file "$FP_TMP/token" --debuginfod none
"$CTL" upload-debuginfo --collector "$URL" --token-file "$FP_TMP/token" "$W/ci/cnames.debug" >"$FP_TMP/ci6.out" ||
  fp_fail "upload-debuginfo to the first ClickHouse collector failed"
grep -q "^1 uploaded" "$FP_TMP/ci6.out" || fp_fail "the first ClickHouse collector did not take the file"
"$CTL" upload-debuginfo --collector "$URL2" --token-file "$FP_TMP/token" "$W/ci/cnames.debug" >"$FP_TMP/ci7.out" ||
  fp_fail "upload-debuginfo to the second ClickHouse collector failed"
grep -q "^0 uploaded (0 bytes), 1 already held" "$FP_TMP/ci7.out" || fp_fail "the second collector does not see the first's upload"
URL=$URL2 ingest "$FP_TMP/cnames.pb.gz" 800
fp_wait_for 20 eval 'curl -sf -o "$FP_TMP/ch.pb.gz" "$URL2/api/v1/profile?pid=800" && named cnames "$FP_TMP/ch.pb.gz"' ||
  fp_fail "the second ClickHouse collector did not name from the first's upload"
curl -sf -o "$FP_TMP/ch.debug" "$URL2/buildid/${BID[cnames]}/debuginfo" && cmp -s "$FP_TMP/ch.debug" "$W/ci/cnames.debug" ||
  fp_fail "the second collector does not serve the first's upload"
fp_kill "$C1"
fp_stop_collector
fp_stop_clickhouse
fp_ok "two collectors on one ClickHouse: a debug file uploaded to one is held, served and named from by the other"
fp_ok "done"
