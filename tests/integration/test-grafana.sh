#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Pyroscope's query API over Connect (collector/read/querier.c), called as
# Grafana's Pyroscope data source calls it, by a real Connect client
# (grafana_client.js: @connectrpc/connect, @bufbuild/protobuf), in binary
# protobuf and in JSON, against a collector (SQLite) that a real agent
# (two processes) and a real Pyroscope client (@pyroscope/nodejs)
# uploaded to:
#   1. ProfileTypes lists the agent's cpu-clock types and the client's;
#      LabelNames and LabelValues list every service and thread;
#   2. SelectMergeStacktraces: a flame graph whose bars nest (each bar
#      within its parent, a parent's total its self plus its children's),
#      whose total equals the merged pprof's (SelectMergeProfile) and
#      /api/v1/profile's, with the workload's functions; max_nodes bounds
#      it; SelectSeries' points (by host, by service) sum to that total;
#   3. selectors: =, !=, =~ and !~ each select what they say (a matcher and
#      its negation add up to everything), thread_name selects samples,
#      Series lists the label sets, Diff's two sides are the two selections;
#   4. errors: a malformed selector, an unknown profile type, a body that
#      is not the request, a wrong Content-Type: Connect errors, one line,
#      with the same answers after them; the read token as bearer token or
#      basic password, none or a wrong one refused (unauthenticated).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=grafana
fp_init 800
NODE_MODULES=/var/cache/fleetprof-test/node_modules
[[ -d $NODE_MODULES/@connectrpc/connect-node && -d $NODE_MODULES/@pyroscope/nodejs ]] ||
  fp_fail "missing @connectrpc/connect-node or @pyroscope/nodejs in $NODE_MODULES (scripts/deps.sh installs them)"
command -v node >/dev/null || fp_fail "node is not installed (scripts/deps.sh installs it)"
command -v protoc >/dev/null || fp_fail "protoc is not installed (scripts/deps.sh installs it)"
HERE=$(cd "$(dirname "$0")" && pwd)
export NODE_PATH=$NODE_MODULES

protoc -I"$HERE/proto/pyroscope" --include_imports --descriptor_set_out="$FP_TMP/api.pb" \
  querier.proto settings.proto || fp_fail "protoc cannot read tests/integration/proto/pyroscope"
PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
echo "write-$RANDOM$RANDOM" >"$FP_TMP/token"
echo "read-$RANDOM$RANDOM" >"$FP_TMP/read"
chmod 600 "$FP_TMP/token" "$FP_TMP/read"
TOKEN=$(cat "$FP_TMP/token")
READ=$(cat "$FP_TMP/read")
BEARER="Bearer $READ"
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/collector.db" \
  --token-file "$FP_TMP/token" --read-token-file "$FP_TMP/read"

# ---- the uploads: an agent's two processes, a Pyroscope client's program ----
fp_start_agent --bucket 1 --collector "$URL" --token-file "$FP_TMP/token" --upload-interval 3600
"$FP_SPIN" 6 >/dev/null 2>&1 &
spin=$!
fp_track "$spin"
cat >"$FP_TMP/busy.py" <<'EOF'
import sys, time
def grafana_busy():
    end = time.time() + float(sys.argv[1])
    n = 0
    while time.time() < end:
        n += 1
grafana_busy()
EOF
/usr/bin/python3 "$FP_TMP/busy.py" 6 &
py=$!
fp_track "$py"
fp_ctl start "$spin" --freq 199 >/dev/null || fp_fail "start spin failed"
fp_ctl start "$py" --freq 199 >/dev/null || fp_fail "start python failed"
PYCOMM=$(cat "/proc/$py/comm")
cat >"$FP_TMP/app.js" <<'EOF'
// A Node.js program profiled by the real Pyroscope client, for 4 s.
const Pyroscope = require('@pyroscope/nodejs');
Pyroscope.init({serverAddress: process.argv[2], appName: 'nodeapp', authToken: process.argv[3],
  tags: {region: 'eu-1', hostname: 'node-host'}, flushIntervalMs: 2000});
Pyroscope.start();
function busyLeaf(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i); return s; }
const end = Date.now() + 4000;
function tick() {
  if (Date.now() > end) { Pyroscope.stop().then(() => process.exit(0)); return; }
  busyLeaf(2e6);
  setImmediate(tick);
}
tick();
EOF
fp_timeout 60 node "$FP_TMP/app.js" "$URL" "$TOKEN" >"$FP_TMP/node.log" 2>&1 ||
  fp_fail "the Node.js program failed: $(tail -5 "$FP_TMP/node.log")"
wait "$spin" "$py" 2>/dev/null || true
fp_ctl flush >/dev/null || fp_fail "flush failed"
fp_wait_for 20 bash -c "curl -sf -H 'Authorization: $BEARER' '$URL/api/v1/series?process=spin' | grep -q spin" ||
  fp_fail "the agent's upload did not arrive"

# call MODE METHOD REQUEST_JSON [AUTH]: one call by the Connect client; its answer on stdout.
call() {
  node "$HERE/grafana_client.js" "$FP_TMP/api.pb" "$URL" "$1" "$2" "$3" "${4-$BEARER}"
}
Q=querier.v1.QuerierService
CPU=cpu-clock:cpu:nanoseconds:cpu:nanoseconds
NOW=$(($(date +%s) * 1000))
FROM=$((NOW - 3600 * 1000))
TO=$((NOW + 60 * 1000))
# req TYPE SELECTOR [MORE]: a SelectMergeStacktraces-style request over the range.
req() { printf '{"profileTypeID":"%s","labelSelector":%s,"start":"%s","end":"%s"%s}' "$1" \
  "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$2")" "$FROM" "$TO" "${3:-}"; }

# check.py: what the tests read from the answers (flame graphs decoded as Grafana does).
cat >"$FP_TMP/check.py" <<'EOF'
import json, sys

def flame(path):
    """The FlameGraph of an answer: its bars as (level, x, total, self, name), checked to nest."""
    d = json.load(open(path))
    fg = d.get("flamegraph", d)
    names, levels = fg.get("names", []), fg.get("levels", [])
    bars, prev = [], []
    for lv, level in enumerate(levels):
        vals = [int(v) for v in level.get("values", [])]
        assert len(vals) % 4 == 0, "a level of %d values" % len(vals)
        x, row = 0, []
        for i in range(0, len(vals), 4):
            start = x + vals[i]
            row.append((lv, start, vals[i + 1], vals[i + 2], names[vals[i + 3]]))
            x = start + vals[i + 1]
        if lv:
            for b in row:  # within a parent
                assert any(p[1] <= b[1] and b[1] + b[2] <= p[1] + p[2] for p in prev), "bar %s outside its parents" % (b,)
            for p in prev:  # a parent's total is its self plus its children's
                kids = sum(b[2] for b in row if p[1] <= b[1] < p[1] + p[2])
                assert p[2] == p[3] + kids, "%s: total %d, self %d, children %d" % (p[4], p[2], p[3], kids)
        bars += row
        prev = row
    total = int(fg.get("total", 0))
    if levels:
        assert bars[0][2] == total, "root %d, total %d" % (bars[0][2], total)
    return total, {b[4] for b in bars}, len(bars)

def profile_total(path, type_name):
    d = json.load(open(path))
    st = d.get("stringTable", [])
    idx = [i for i, t in enumerate(d.get("sampleType", [])) if st[int(t.get("type", 0))] == type_name]
    assert idx, "no sample type %s" % type_name
    return sum(int(s["value"][idx[0]]) for s in d.get("sample", []))

def series_total(path):
    d = json.load(open(path))
    return round(sum(p.get("value", 0) for s in d.get("series", []) for p in s.get("points", [])))

what = sys.argv[1]
if what == "flame":
    t, names, n = flame(sys.argv[2])
    print(t, n, " ".join(sorted(names)))
elif what == "profile":
    print(profile_total(sys.argv[2], sys.argv[3]))
elif what == "series":
    print(series_total(sys.argv[2]))
elif what == "get":
    d = json.load(open(sys.argv[2]))
    print(eval(sys.argv[3]))
EOF
chk() { python3 "$FP_TMP/check.py" "$@"; }

for mode in binary json; do
  # ---- 1. types, names, values ----
  call $mode $Q.ProfileTypes "{\"start\":\"$FROM\",\"end\":\"$TO\"}" >"$FP_TMP/types" || fp_fail "[$mode] ProfileTypes: $(cat "$FP_TMP/types")"
  ids=$(chk get "$FP_TMP/types" '" ".join(sorted(t["ID"] for t in d["profileTypes"]))')
  for want in "$CPU" cpu-clock:samples:count:cpu:nanoseconds wall:wall:nanoseconds:wall:nanoseconds; do
    [[ " $ids " == *" $want "* ]] || fp_fail "[$mode] ProfileTypes lacks $want: $ids"
  done
  call $mode $Q.LabelNames "{\"start\":\"$FROM\",\"end\":\"$TO\"}" >"$FP_TMP/names" || fp_fail "[$mode] LabelNames: $(cat "$FP_TMP/names")"
  names=$(chk get "$FP_TMP/names" '" ".join(d["names"])')
  for want in service_name host process pid thread_name __profile_type__ region; do
    [[ " $names " == *" $want "* ]] || fp_fail "[$mode] LabelNames lacks $want: $names"
  done
  call $mode $Q.LabelValues "{\"name\":\"service_name\",\"start\":\"$FROM\",\"end\":\"$TO\"}" >"$FP_TMP/services" ||
    fp_fail "[$mode] LabelValues: $(cat "$FP_TMP/services")"
  services=$(chk get "$FP_TMP/services" '" ".join(d["names"])')
  [[ $services == *spin* && $services == *"$PYCOMM"* && $services == *nodeapp* ]] ||
    fp_fail "[$mode] LabelValues(service_name) is '$services', not spin, $PYCOMM and nodeapp"
  call $mode $Q.LabelValues "{\"name\":\"thread_name\",\"matchers\":[\"{service_name=\\\"spin\\\"}\"],\"start\":\"$FROM\",\"end\":\"$TO\"}" >"$FP_TMP/threads" ||
    fp_fail "[$mode] LabelValues(thread_name): $(cat "$FP_TMP/threads")"
  threads=$(chk get "$FP_TMP/threads" '" ".join(d.get("names", []))')
  [[ $threads == *spin-0* && $threads == *spin-1* && $threads != *"$PYCOMM"* ]] ||
    fp_fail "[$mode] LabelValues(thread_name) of spin is '$threads'"
  call $mode $Q.LabelValues "{\"name\":\"__profile_type__\",\"matchers\":[\"{__profile_type__=~\\\".*:cpu:nanoseconds:.*\\\"}\"],\"start\":\"$FROM\",\"end\":\"$TO\"}" >"$FP_TMP/ptypes" ||
    fp_fail "[$mode] LabelValues(__profile_type__): $(cat "$FP_TMP/ptypes")"
  [[ $(chk get "$FP_TMP/ptypes" '" ".join(d.get("names", []))') == "$CPU" ]] ||
    fp_fail "[$mode] LabelValues(__profile_type__) of the cpu types: $(cat "$FP_TMP/ptypes")"
  fp_ok "[$mode] ProfileTypes: $(wc -w <<<"$ids") types; services: $services; spin's threads: $threads"

  # ---- 2. the flame graph, the merged profile, the series ----
  call $mode $Q.SelectMergeStacktraces "$(req $CPU '{}' ',"maxNodes":"100000"')" >"$FP_TMP/all" || fp_fail "[$mode] SelectMergeStacktraces: $(cat "$FP_TMP/all")"
  read -r total_all nbars names_all < <(chk flame "$FP_TMP/all") || fp_fail "[$mode] the flame graph does not nest"
  call $mode $Q.SelectMergeProfile "$(req $CPU '{}')" >"$FP_TMP/all.prof" || fp_fail "[$mode] SelectMergeProfile: $(cat "$FP_TMP/all.prof")"
  prof_all=$(chk profile "$FP_TMP/all.prof" cpu)
  [[ $total_all -gt 0 && $total_all == "$prof_all" ]] ||
    fp_fail "[$mode] the flame graph's total $total_all is not the merged profile's $prof_all"
  [[ " $names_all " == *" spin_inner "* && " $names_all " == *" grafana_busy "* ]] ||
    fp_fail "[$mode] the flame graph's names lack spin_inner or grafana_busy: $names_all"
  curl -sf -H "Authorization: $BEARER" "$URL/api/v1/profile?event=cpu-clock" -o "$FP_TMP/api.pb.gz" || fp_fail "no /api/v1/profile"
  api_total=$(fp_profile_total "$FP_TMP/api.pb.gz" cpu)
  [[ $api_total == "$total_all" ]] || fp_fail "[$mode] /api/v1/profile's total $api_total is not the flame graph's $total_all"
  call $mode $Q.SelectMergeStacktraces "$(req $CPU '{}' ',"maxNodes":"8"')" >"$FP_TMP/small" || fp_fail "[$mode] maxNodes 8: $(cat "$FP_TMP/small")"
  read -r total_small nbars_small _ < <(chk flame "$FP_TMP/small") || fp_fail "[$mode] the small flame graph does not nest"
  [[ $total_small == "$total_all" && $nbars_small -le 12 && $nbars -gt 12 ]] ||
    fp_fail "[$mode] maxNodes 8: $nbars_small bars (of $nbars), total $total_small (of $total_all)"
  for by in host service_name; do
    call $mode $Q.SelectSeries "$(req $CPU '{}' ",\"groupBy\":[\"$by\"],\"step\":1")" >"$FP_TMP/series.$by" ||
      fp_fail "[$mode] SelectSeries by $by: $(cat "$FP_TMP/series.$by")"
    s=$(chk series "$FP_TMP/series.$by")
    [[ $s == "$total_all" ]] || fp_fail "[$mode] SelectSeries by $by sums to $s, not $total_all"
  done
  ngroups=$(chk get "$FP_TMP/series.service_name" 'len(d["series"])')
  [[ $ngroups == 2 ]] || fp_fail "[$mode] SelectSeries by service_name: $ngroups series, not 2 (spin, $PYCOMM)"
  call $mode $Q.SelectSeries "$(req $CPU '{}' ',"groupBy":["service_name"],"step":1,"limit":"1"')" >"$FP_TMP/series.top" ||
    fp_fail "[$mode] SelectSeries limit 1: $(cat "$FP_TMP/series.top")"
  [[ $(chk get "$FP_TMP/series.top" 'len(d["series"])') == 1 ]] || fp_fail "[$mode] SelectSeries limit 1 gave more"
  fp_ok "[$mode] flame graph: $nbars bars, total $total_all ns = SelectMergeProfile = /api/v1/profile = SelectSeries' points (by host, by service); maxNodes 8: $nbars_small bars"

  # ---- 3. selectors ----
  sel_total() {
    call $mode $Q.SelectMergeStacktraces "$(req $CPU "$1")" >"$FP_TMP/sel" || fp_fail "[$mode] selector $1: $(cat "$FP_TMP/sel")"
    chk flame "$FP_TMP/sel"
  }
  read -r t_eq _ n_eq < <(sel_total '{service_name="spin"}')
  read -r t_ne _ n_ne < <(sel_total '{service_name!="spin"}')
  read -r t_re _ n_re < <(sel_total '{service_name=~"sp.n", host=~".+"}')
  read -r t_nre _ n_nre < <(sel_total '{service_name!~"sp.*"}')
  [[ $t_eq -gt 0 && $t_ne -gt 0 && $((t_eq + t_ne)) == "$total_all" && $t_re == "$t_eq" && $t_nre == "$t_ne" ]] ||
    fp_fail "[$mode] selectors: = $t_eq, != $t_ne, =~ $t_re, !~ $t_nre, all $total_all"
  [[ " $n_eq " == *" spin_inner "* && " $n_eq " != *" grafana_busy "* && " $n_ne " == *" grafana_busy "* && " $n_ne " != *" spin_inner "* ]] ||
    fp_fail "[$mode] service_name = and != do not split spin from $PYCOMM: '$n_eq' / '$n_ne'"
  read -r t_thread _ n_thread < <(sel_total '{service_name="spin", thread_name="spin-0"}')
  [[ $t_thread -gt 0 && $t_thread -lt $t_eq ]] || fp_fail "[$mode] thread_name=spin-0: $t_thread of spin's $t_eq"
  read -r t_none _ _ < <(sel_total '{service_name="nobody"}')
  [[ $t_none == 0 ]] || fp_fail "[$mode] service_name=nobody selects $t_none"
  read -r t_pushed _ _ < <(sel_total '{region="eu-1"}')
  [[ $t_pushed == 0 ]] || fp_fail "[$mode] region=eu-1 (a label of nodeapp only) selects cpu-clock samples: $t_pushed"
  call $mode $Q.SelectMergeStacktraces "$(req wall:wall:nanoseconds:wall:nanoseconds '{region="eu-1"}')" >"$FP_TMP/wall" ||
    fp_fail "[$mode] the Pyroscope client's wall profile: $(cat "$FP_TMP/wall")"
  read -r t_wall _ n_wall < <(chk flame "$FP_TMP/wall")
  [[ $t_wall -gt 0 && $n_wall == *busyLeaf* ]] || fp_fail "[$mode] the client's wall profile: $t_wall, names $n_wall"
  call $mode $Q.Series "{\"matchers\":[\"{service_name=\\\"spin\\\"}\"],\"labelNames\":[\"service_name\",\"__profile_type__\"],\"start\":\"$FROM\",\"end\":\"$TO\"}" >"$FP_TMP/sets" ||
    fp_fail "[$mode] Series: $(cat "$FP_TMP/sets")"
  sets=$(chk get "$FP_TMP/sets" '";".join(sorted(",".join(l["name"] + "=" + l["value"] for l in s["labels"]) for s in d["labelsSet"]))')
  [[ $sets == "service_name=spin,__profile_type__=cpu-clock:cpu:nanoseconds:cpu:nanoseconds;service_name=spin,__profile_type__=cpu-clock:samples:count:cpu:nanoseconds" ]] ||
    fp_fail "[$mode] Series of spin: $sets"
  call $mode $Q.Diff "{\"left\":$(req $CPU '{service_name="spin"}'),\"right\":$(req $CPU "{service_name=\"$PYCOMM\"}")}" >"$FP_TMP/diff" ||
    fp_fail "[$mode] Diff: $(cat "$FP_TMP/diff")"
  ticks=$(chk get "$FP_TMP/diff" 'd["flamegraph"]["leftTicks"] + " " + d["flamegraph"]["rightTicks"] + " " + str(len(d["flamegraph"]["levels"][0]["values"]))')
  [[ $ticks == "$t_eq $t_ne 7" ]] || fp_fail "[$mode] Diff's ticks and root: $ticks, not $t_eq $t_ne 7"
  call $mode settings.v1.SettingsService.Get '{}' >"$FP_TMP/settings" || fp_fail "[$mode] settings: $(cat "$FP_TMP/settings")"
  fp_ok "[$mode] selectors: service_name=spin $t_eq + != $t_ne = all; =~ and !~ alike; thread_name=spin-0 $t_thread; a pushed label selects the client's wall profile ($t_wall ns); Series and Diff ($ticks)"

  # ---- 4. errors ----
  expect_error() {
    local code=$1 what=$2
    shift 2
    out=$("$@") && fp_fail "[$mode] $what: answered $out"
    [[ $out == "ERROR $code "* ]] || fp_fail "[$mode] $what: '$out', not $code"
    fp_log "[$mode] $what: $out"
  }
  expect_error InvalidArgument "an unclosed selector" call $mode $Q.SelectMergeStacktraces "$(req $CPU '{service_name="spin"')"
  expect_error InvalidArgument "a bad regular expression" call $mode $Q.SelectMergeStacktraces "$(req $CPU '{host=~"(("}')"
  expect_error InvalidArgument "an unknown profile type" call $mode $Q.SelectMergeStacktraces "$(req nope:cpu:nanoseconds:cpu:nanoseconds '{}')"
  expect_error InvalidArgument "a profile type of the wrong form" call $mode $Q.SelectSeries "$(req cpu-clock '{}' ',"step":1')"
  expect_error InvalidArgument "thread_name with =~" call $mode $Q.SelectMergeStacktraces "$(req $CPU '{thread_name=~"spin.*"}')"
  expect_error Unauthenticated "no read token" call $mode $Q.ProfileTypes '{}' ""
  expect_error Unauthenticated "the write token to read" call $mode $Q.ProfileTypes '{}' "Bearer $TOKEN"
  call $mode $Q.ProfileTypes '{}' "Basic $(printf 'grafana:%s' "$READ" | base64 -w0)" >/dev/null ||
    fp_fail "[$mode] the read token as basic authentication's password is refused"
  call $mode $Q.SelectMergeStacktraces "$(req $CPU '{}' ',"maxNodes":"100000"')" >"$FP_TMP/again" || fp_fail "[$mode] again: $(cat "$FP_TMP/again")"
  [[ $(chk flame "$FP_TMP/again" | cut -d' ' -f1) == "$total_all" ]] || fp_fail "[$mode] the answer changed after the errors"
  fp_ok "[$mode] errors are Connect errors; the same answer after them; basic authentication with the read token"
done

# Profiles Drilldown's older render API: the same flame graph as flamebearer JSON, and its timeline.
curl -sf -H "Authorization: $BEARER" -G "$URL/pyroscope/render" --data-urlencode "query=$CPU{service_name=\"spin\"}" \
  --data-urlencode "from=$((FROM / 1000))" --data-urlencode "until=$TO" --data-urlencode "format=json" -o "$FP_TMP/render" ||
  fp_fail "/pyroscope/render failed: $(curl -s -H "Authorization: $BEARER" "$URL/pyroscope/render?query=x")"
render=$(python3 - "$FP_TMP/render" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
fb = d["flamebearer"]
names = set()
for level in fb["levels"]:
    assert len(level) % 4 == 0, level
    names |= {fb["names"][level[i + 3]] for i in range(0, len(level), 4)}
assert fb["levels"][0][1] == fb["numTicks"], (fb["levels"][0], fb["numTicks"])
print(fb["numTicks"], round(sum(d["timeline"]["samples"])), "spin_inner" in names, d["metadata"]["units"])
PY
) || fp_fail "/pyroscope/render's answer is not a flamebearer: $(head -c 300 "$FP_TMP/render")"
[[ $render == "$t_eq $t_eq True nanoseconds" ]] ||
  fp_fail "/pyroscope/render of spin: '$render', want numTicks and timeline $t_eq, spin_inner, nanoseconds"
code=$(curl -s -o "$FP_TMP/e6" -w '%{http_code}' -H "Authorization: $BEARER" "$URL/pyroscope/render?query=$CPU&from=now-1h&until=now&bogus=1")
[[ $code == 400 ]] || fp_fail "/pyroscope/render with an unknown parameter: HTTP $code"
fp_ok "/pyroscope/render: spin's flame graph as flamebearer JSON, $t_eq ns, its timeline the same"

# The wire, below the client: a body that is not the request, a wrong Content-Type, gzip.
code=$(curl -s -o "$FP_TMP/e1" -w '%{http_code}' -H "Authorization: $BEARER" -H 'Content-Type: application/proto' \
  --data-binary $'\xff\xff\xff' "$URL/$Q/SelectMergeStacktraces")
[[ $code == 400 ]] && grep -q '"code":"invalid_argument"' "$FP_TMP/e1" || fp_fail "a body that is not protobuf: HTTP $code $(cat "$FP_TMP/e1")"
code=$(curl -s -o "$FP_TMP/e2" -w '%{http_code}' -H "Authorization: $BEARER" -H 'Content-Type: text/plain' -d '{}' "$URL/$Q/ProfileTypes")
[[ $code == 415 ]] && grep -q '"code":"invalid_argument"' "$FP_TMP/e2" || fp_fail "a wrong Content-Type: HTTP $code $(cat "$FP_TMP/e2")"
code=$(curl -s -o "$FP_TMP/e3" -w '%{http_code}' -H "Authorization: $BEARER" -H 'Content-Type: application/json' \
  -H 'Connect-Protocol-Version: 2' -d '{}' "$URL/$Q/ProfileTypes")
[[ $code == 400 ]] || fp_fail "Connect-Protocol-Version 2: HTTP $code $(cat "$FP_TMP/e3")"
req $CPU '{service_name="spin"}' | gzip >"$FP_TMP/req.gz"
curl -sf -H "Authorization: $BEARER" -H 'Content-Type: application/json' -H 'Content-Encoding: gzip' \
  --data-binary @"$FP_TMP/req.gz" "$URL/$Q/SelectMergeStacktraces" -o "$FP_TMP/gz" || fp_fail "a gzip request failed"
[[ $(chk flame "$FP_TMP/gz" | cut -d' ' -f1) == "$t_eq" ]] || fp_fail "the gzip request's answer differs"
fp_ok "the wire: a body that is not protobuf 400, a wrong Content-Type 415, Connect-Protocol-Version 2 refused, gzip requests read"
# A query's body past 4 MiB is refused from its head (the gate), as is a chunked one once past it.
head -c $((5 << 20)) /dev/zero >"$FP_TMP/big"
code=$(curl -s -o "$FP_TMP/e4" -w '%{http_code}' -H 'Content-Type: application/proto' \
  --data-binary @"$FP_TMP/big" "$URL/$Q/ProfileTypes")
[[ $code == 413 ]] || fp_fail "a 5 MiB query: HTTP $code $(cat "$FP_TMP/e4")"
code=$(curl -s -o "$FP_TMP/e5" -w '%{http_code}' -H 'Content-Type: application/proto' -H 'Transfer-Encoding: chunked' \
  --data-binary @"$FP_TMP/big" "$URL/$Q/ProfileTypes" || true)
[[ $code != 200 ]] || fp_fail "a 5 MiB chunked query was answered"
curl -sf -H "Authorization: $BEARER" "$URL/healthz" >/dev/null || fp_fail "the collector is down after the large queries"
fp_ok "a 5 MiB query: 413 from its head; chunked: closed (HTTP $code)"

