#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The README's main job, as a newcomer runs it (on this test's build tree):
#   1. scripts/demo.sh --keep profiles the demo workload, prints the profile
#      and leaves the collector running: the URL it prints serves the web
#      page, and the collector holds the profile of what was just profiled
#      (go tool pprof reads the workload's functions from it); the agent
#      and the workload are gone, and the stop command it prints stops it;
#   2. scripts/demo.sh without --keep leaves nothing running and removes
#      its folder;
#   3. a misspelt option is one line and exit status 2.
source "$(dirname "$0")/lib.sh"
fp_init 280
fp_require_go
demo=$FP_SRC/scripts/demo.sh

# ---- 1. --keep -----------------------------------------------------------------
FP_DEMO_BUILD=$FP_BUILD fp_timeout 180 "$demo" --keep >"$FP_TMP/keep.out" 2>&1 ||
  fp_fail "demo.sh --keep failed: $(tail -20 "$FP_TMP/keep.out")"
stop=$(sed -n 's/^Stop it with:  //p' "$FP_TMP/keep.out")
[[ $stop =~ ^kill\ ([0-9]+)\ \&\&\ rm\ -rf\ (/tmp/fleetprof-demo\.[A-Za-z0-9]+)$ ]] ||
  fp_fail "demo.sh --keep did not print how to stop the collector: $(tail -12 "$FP_TMP/keep.out")"
coll=${BASH_REMATCH[1]} dir=${BASH_REMATCH[2]}
fp_track "$coll"
fp_on_exit "rm -rf '$dir'"
url=$(grep -oE 'http://127\.0\.0\.1:[0-9]+/\?process=truth' "$FP_TMP/keep.out" | tail -1)
[[ -n $url ]] || fp_fail "demo.sh --keep printed no URL to open: $(tail -12 "$FP_TMP/keep.out")"
base=${url%%/\?*}
grep -q 'leaf_hash' "$FP_TMP/keep.out" || fp_fail "the demo printed no profile: $(head -40 "$FP_TMP/keep.out")"

kill -0 "$coll" 2>/dev/null || fp_fail "the collector ($coll) is not running after demo.sh --keep"
[[ $(awk '{print $3}' "/proc/$coll/stat") != Z ]] || fp_fail "the collector is a zombie"
grep -qx "$(readlink -f "$FP_BUILD/collector/fleetprof-collector")" < <(readlink -f "/proc/$coll/exe") ||
  fp_fail "pid $coll is not the collector: $(readlink "/proc/$coll/exe")"
curl -sf "$base/healthz" -o /dev/null || fp_fail "the collector does not answer at $base"
page=$(curl -sf "$url") || fp_fail "the web page at $url does not load"
grep -qi '<html' <<<"$page" || fp_fail "$url is not the web page: ${page:0:200}"
series=$(curl -sf "$base/api/v1/series") || fp_fail "the series do not load"
grep -q '"truth"' <<<"$series" || fp_fail "the collector holds no series of the demo's process: $series"
fp_pprof -top -symbolize=none "$base/api/v1/profile?process=truth" >"$FP_TMP/top.txt" 2>&1 ||
  fp_fail "go tool pprof cannot read the collector's profile: $(tail -5 "$FP_TMP/top.txt")"
for f in leaf_hash leaf_mem leaf_sqrt; do
  grep -q "$f" "$FP_TMP/top.txt" || fp_fail "the collector's profile lacks $f: $(cat "$FP_TMP/top.txt")"
done
fp_ok "--keep: the collector (pid $coll) serves the page and the profile at $url after the demo"

# Nothing but the collector stayed: the demo's agent and workload are gone.
left=$(pgrep -f "$dir/agent.sock|$FP_BUILD/tests/truth --seconds 6" || true)
[[ -z $left ]] || fp_fail "demo.sh --keep left more than the collector running: $(ps -o pid,args -p "${left//$'\n'/,}")"
bash -c "$stop" || fp_fail "the stop command it printed failed: $stop"
fp_wait_for 10 bash -c "! kill -0 $coll 2>/dev/null || [[ \$(awk '{print \$3}' /proc/$coll/stat) == Z ]]" ||
  fp_fail "the collector still runs after: $stop"
[[ ! -e $dir ]] || fp_fail "$dir is still there after: $stop"
fp_ok "the printed stop command stops the collector and removes $dir"

# ---- 2. without --keep -----------------------------------------------------------
FP_DEMO_BUILD=$FP_BUILD fp_timeout 180 "$demo" >"$FP_TMP/plain.out" 2>&1 ||
  fp_fail "demo.sh failed: $(tail -20 "$FP_TMP/plain.out")"
grep -q 'leaf_hash' "$FP_TMP/plain.out" || fp_fail "the demo printed no profile"
base=$(grep -oE "web page was at http://127\.0\.0\.1:[0-9]+" "$FP_TMP/plain.out" | grep -oE 'http://.*')
[[ -n $base ]] || fp_fail "demo.sh did not say where its page was: $(tail -3 "$FP_TMP/plain.out")"
fp_wait_for 10 bash -c "! curl -sf '$base/healthz' -o /dev/null" || fp_fail "demo.sh left its collector running at $base"
plain_dirs=$(grep -oE '/tmp/fleetprof-demo\.[A-Za-z0-9]+' "$FP_TMP/plain.out" | sort -u || true)
for d in $plain_dirs; do [[ ! -e $d ]] || fp_fail "demo.sh left $d behind"; done
fp_ok "without --keep: nothing left running ($base answers no more)"

# ---- 3. a misspelt option ------------------------------------------------------------
rc=0
"$demo" --kep >"$FP_TMP/bad.out" 2>&1 || rc=$?
[[ $rc -eq 2 && $(wc -l <"$FP_TMP/bad.out") -eq 1 ]] ||
  fp_fail "demo.sh --kep: exit $rc, $(cat "$FP_TMP/bad.out")"
grep -q "unknown option '--kep'" "$FP_TMP/bad.out" || fp_fail "demo.sh --kep said: $(cat "$FP_TMP/bad.out")"
fp_ok "a misspelt option: $(cat "$FP_TMP/bad.out")"
