#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The web page in a real browser: Debian's chromium, headless, driven by
# playwright-core (scripts/deps.sh installs both; no browser is ever
# downloaded) through tests/integration/webui.js, against a real collector
# holding the real agent's uploads of two runs of truth and one of
# manystacks. What the page draws is checked against the collector's API:
#
#  - the flame graph's total is the API's, which is the merged pprof's
#    (go tool pprof); the top table's first row is the function with the
#    largest self time in the API's tree, and sorting by total puts the
#    largest total first;
#  - hovering names the frame with its self and total; clicking zooms (the
#    URL keeps it across a reload), reset undoes it; the top table follows
#    the zoom;
#  - a search highlights the matching frames and shows their share, equal
#    to the API tree's; clicking a table row searches for it;
#  - shift-click shows the callers and callees of a function;
#  - dragging over the time line selects a range; the series list's search
#    narrows it and a click selects that series;
#  - a diff (the second run against the first) has the API diff's totals and
#    its tooltip shows the baseline's numbers;
#  - a profile of thousands of distinct stacks is drawn (the time to the
#    first flame graph is printed), an empty selection says so;
#  - what profiling cost the host (the agent's CPU time over the uploads'
#    range, carried in every upload, counted once per range) is shown, and
#    is no more than the CPU the agent has used;
#  - a process profiled with --off-cpu: the event selector offers cpu-clock,
#    off-cpu and wall, and choosing wall draws the API's wall total;
#  - nothing is fetched from anywhere but the collector, and no script error
#    happens. Screenshots are kept in BUILD/artifacts/webui/.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 240
fp_require_go
PW=/var/cache/fleetprof-test/node_modules
if [[ ! -x /usr/bin/chromium || ! -d $PW/playwright-core ]] || ! command -v node >/dev/null; then
  fp_fail "chromium, node or playwright-core is missing: run scripts/deps.sh"
fi
ART=$FP_BUILD/artifacts/webui
rm -rf "$ART"
mkdir -p "$ART"

PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/collector.db"
fp_start_agent --bucket 1 --collector "$URL" --upload-interval 3600

RUNS=0
run() { # run WORKLOAD SECONDS ARGS...: profile it to its end, then upload ($OFF: --off-cpu)
  local wl=$1 secs=$2
  shift 2
  RUNS=$((RUNS + 1)) # files of their own: a ready file left by a run before would race
  fp_start_workload "$wl" "$FP_TMP/$wl.$RUNS.out" "$FP_TMP/$wl.$RUNS.ready" --seconds "$secs" "$@"
  fp_ctl start "$FP_WL_PID" --freq 499 ${OFF:+--off-cpu} >/dev/null
  # (with --wait-for-start FILE, in $GO, it works once profiled: loading the off-CPU
  # programs took longer than waits' 2 s beside a CPU-bound job)
  [[ -z ${GO:-} ]] || touch "$GO"
  wait "$FP_WL_PID" 2>/dev/null || true
  fp_untrack "$FP_WL_PID"
  fp_ctl flush >/dev/null
}
run truth 3
sleep 1.2
MID=$(date +%s)
sleep 1.2
run truth 3
run manystacks 3 --threads 2 --depth 7
OFF=1 GO=$FP_TMP/waits.go run waits 2 --only wait_sleep,wait_pipe --dir "$FP_TMP" --wait-for-start "$FP_TMP/waits.go"

api() { curl -sf "$URL$1" "${@:2}"; }
api "/api/v1/flamegraph?process=truth" >"$FP_TMP/fg.json" || fp_fail "no flame graph from the API"
api "/api/v1/profile?process=truth" -o "$FP_TMP/truth.pb.gz"
MANY_PID=$(curl -sf "$URL/api/v1/series?process=manystacks" | fp_json_get 'd["series"][0]["pid"]')
api "/api/v1/flamegraph?process=manystacks&pid=$MANY_PID" >"$FP_TMP/many.json"
api "/api/v1/flamegraph?process=waits&event=wall" >"$FP_TMP/wall.json" || fp_fail "no wall flame graph from the API"
api "/api/v1/diff?process=truth&from=$MID&base_to=$MID" >"$FP_TMP/diff.json" || fp_fail "no diff from the API: $(curl -s "$URL/api/v1/diff?process=truth&from=$MID&base_to=$MID"), series: $(curl -s "$URL/api/v1/series")"
API_TOTAL=$(fp_json_get 'd["total"]' <"$FP_TMP/fg.json")
PPROF_TOTAL=$(fp_profile_total "$FP_TMP/truth.pb.gz" cpu)
[[ $API_TOTAL == "$PPROF_TOTAL" ]] || fp_fail "flamegraph total $API_TOTAL != the merged profile's $PPROF_TOTAL"
fp_ok "API: the flame graph's root total is the merged profile's ($API_TOTAL ns)"
api "/api/v1/flamegraph?process=truth&thread=w-alpha" >"$FP_TMP/alpha.json" || fp_fail "no flame graph of thread w-alpha"
api "/api/v1/profile?process=truth&thread=w-alpha" -o "$FP_TMP/alpha.pb.gz"
ALPHA=$(fp_profile_total "$FP_TMP/alpha.pb.gz" cpu)
[[ $(fp_json_get 'd["total"]' <"$FP_TMP/alpha.json") == "$ALPHA" && $ALPHA -gt 0 && $ALPHA -lt $API_TOTAL ]] ||
  fp_fail "thread=w-alpha: flame graph $(fp_json_get 'd["total"]' <"$FP_TMP/alpha.json"), profile $ALPHA, all $API_TOTAL"
fp_ok "API: thread=w-alpha selects that thread's samples ($ALPHA of $API_TOTAL ns)"
# What profiling cost the host: the agent's own CPU, at most what it has used in all.
# (%.0f: mawk prints a sum past 2^31, 2.1 s of CPU, as 4.91279e+09)
AGENT_CPU=$(cat /proc/"$FP_AGENT_PID"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}')
python3 - "$FP_TMP/fg.json" "$AGENT_CPU" "$(nproc)" <<'PY' || fp_fail "the profiler's cost is not what the agent measured"
import json, sys
fg, agent_cpu, cpus = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
c = fg["profiler"]
print("profiler cost:", c)
assert len(c) == 1 and c[0]["host_cpus"] == cpus
assert 0 < c[0]["agent_cpu_ns"] <= agent_cpu, (c[0]["agent_cpu_ns"], agent_cpu)
assert 0 < c[0]["cpu_share"] < 1 and c[0]["agent_rss_bytes"] > 1 << 20
PY
fp_ok "API: the agent's cost on its host, no more CPU than it used ($AGENT_CPU ns)"

DIFF_QUERY="process=truth&from=$MID&diff=1&base_to=$MID" fp_timeout 150 env NODE_PATH="$PW" \
  node "$FP_SRC/tests/integration/webui.js" "$URL" "$ART" >"$FP_TMP/ui.json" 2>"$FP_TMP/ui.err" ||
  fp_fail "the browser run failed: $(tail -5 "$FP_TMP/ui.err")"

python3 - "$FP_TMP/ui.json" "$FP_TMP/fg.json" "$FP_TMP/diff.json" "$FP_TMP/many.json" "$FP_TMP/alpha.json" "$FP_TMP/wall.json" <<'PY' || fp_fail "the page does not show what the API says"
import json, re, sys
ui, fg, diff, many, alpha, wall = (json.load(open(p)) for p in sys.argv[1:7])
bad = []
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        bad.append(what)
tree = fg["tree"]
selfs, totals = {}, {}
def walk(n, seen):
    if n is not tree:
        selfs[n["name"]] = selfs.get(n["name"], 0) + n["self"]
        if n["name"] not in seen:
            totals[n["name"]] = totals.get(n["name"], 0) + n["total"]
        seen = seen | {n["name"]}
    for c in n["children"]:
        walk(c, seen)
walk(tree, frozenset())
check(not ui["errorsBefore404"], f"no script errors ({ui['errorsBefore404']})")
check(all("404" in e for e in ui["errors"]), f"only the empty selection's 404s after ({ui['errors']})")
check(not ui["foreign"], f"nothing fetched from elsewhere ({ui['foreign']})")
check(int(ui["first"]["total"]) == fg["total"], f"drawn total {ui['first']['total']} == API {fg['total']}")
check(ui["drawn"] > 10, f"{ui['drawn']} frames drawn")
check(ui["cost"].startswith("profiling cost ") and "% of its CPU" in ui["cost"], f"the page shows the profiler's cost: {ui['cost']}")
top_self = max(selfs, key=selfs.get)
check(ui["top"][0][0] == top_self, f"top row {ui['top'][0][0]} is the largest self in the API ({top_self})")
check("mid_two" in ui["tooltip"] and "total" in ui["tooltip"] and "self" in ui["tooltip"], "the tooltip: " + ui["tooltip"].replace("\n", " | "))
check(ui["zoom"]["focus"]["name"] == "mid_two" and "mid_two" in ui["zoom"]["url"], f"zoomed on mid_two ({ui['zoom']['url']})")
check("mid_one" not in ui["zoom"]["top"] and "leaf_mem" in ui["zoom"]["top"], "the top table follows the zoom")
check(ui["zoomAfterReload"]["name"] == "mid_two", "the zoom survives a reload (the URL)")
check(ui["reset"]["name"] == "all", "reset zoom")
# The search's share: leaf_* totals, not counted twice under a matching ancestor.
matched = 0
def m(n, inside):
    global matched
    hit = not inside and n is not tree and re.search("^leaf_", n["name"])
    if hit:
        matched += n["total"]
    for c in n["children"]:
        m(c, inside or bool(hit))
m(tree, False)
want = f"{100 * matched / fg['total']:.2f}%"
check(want in ui["search"], f"search share {ui['search']} has {want}")
check({"leaf_hash", "leaf_mem", "leaf_sqrt"} <= set(ui["searchRows"]), f"search highlights rows {ui['searchRows']}")
top_total = max(totals, key=totals.get)
check(totals[ui["sortedByTotal"][0]] == totals[top_total], f"sorted by total: {ui['sortedByTotal']}")
check(ui["rowSearch"] == "^leaf_sqrt$", f"clicking a row searches it ({ui['rowSearch']})")
check(ui["callsVisible"] and ui["calls"].startswith("leaf_hash:"), f"callers and callees: {ui['calls']}")
check("from=" in ui["afterDrag"]["url"] and "to=" in ui["afterDrag"]["url"] and int(ui["afterDrag"]["total"]) > 0, f"drag on the time line: {ui['afterDrag']['url']}")
check(int(ui["diff"]["total"]) == diff["total"] and int(ui["diff"]["baseTotal"]) == diff["base_total"], f"diff totals {ui['diff']['total']}/{ui['diff']['baseTotal']} == API {diff['total']}/{diff['base_total']}")
check("baseline total" in ui["diffTooltip"], "the diff tooltip shows the baseline")
check(int(ui["many"]["nodes"]) > 1000 and ui["many"]["drawn"] > 100, f"manystacks: {ui['many']['nodes']} nodes, {ui['many']['drawn']} drawn")
print(f"time to first flame graph, manystacks ({ui['many']['nodes']} nodes): {ui['many']['ms']} ms (render {ui['many']['renderMs']} ms)")
check("no samples match" in ui["empty"], f"an empty selection: {ui['empty']}")
check(int(ui["thread"]["total"]) == alpha["total"], f"thread w-alpha: {ui['thread']['total']} == API {alpha['total']}")
check(len(ui["seriesRows"]) == 1 and ui["seriesRows"][0][3] == "manystacks", f"the series search: {ui['seriesRows']}")
check("pid=" in ui["seriesPick"]["url"] and int(ui["seriesPick"]["total"]) == many["total"], f"picking a series: {ui['seriesPick']} (API {many['total']})")
check({"cpu-clock", "off-cpu", "wall"} <= set(ui["events"]), f"the event selector offers cpu-clock, off-cpu and wall ({ui['events']})")
check("event=wall" in ui["wall"]["url"] and int(ui["wall"]["total"]) == wall["total"] and wall["type"] == "wall", f"wall chosen: drawn {ui['wall'].get('total')} == API {wall['total']} ({wall['type']})")
sys.exit(1 if bad else 0)
PY
fp_ok "the page draws what the API says; screenshots in $ART: $(ls "$ART" | tr '\n' ' ')"
