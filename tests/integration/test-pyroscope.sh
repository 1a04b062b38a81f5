#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Pyroscope's push protocols into the collector (pyroscope.h):
#
# 1. A real client: a Node.js program profiled by npm's @pyroscope/nodejs
#    (wall and heap) pushes gzip pprof to /ingest with the write token as
#    its bearer token. go tool pprof reads back, under its appName, the
#    functions it ran (busyLeaf called by busyMiddle, most of the wall
#    time), the heap profile as inuse_space, the tags it was given in the
#    series' text; the flame graph answers; basic authentication with the
#    token as the password works as well.
# 2. /ingest?format=folded (as the SDKs of Go, Ruby and Python send it):
#    frames root first, counts as samples at sampleRate, the name's .cpu
#    and the hostname label; the same push twice is stored once.
# 3. Connect's Push (binary PushRequest, gzip or not): two series with
#    their labels, each a series of its own; sample IDs and labels kept.
# 4. Hostile pushes get one line and store nothing: no or a wrong token
#    (bearer and basic), a bad name, an unknown parameter, a malformed
#    folded line, a body that is not a PushRequest, a label too long,
#    too many labels, a Content-Type that is not protobuf.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=pyroscope
fp_init 200
fp_require_go
NODE_MODULES=/var/cache/fleetprof-test/node_modules
[[ -d $NODE_MODULES/@pyroscope/nodejs ]] || fp_fail "missing @pyroscope/nodejs in $NODE_MODULES (scripts/deps.sh installs it)"
command -v node >/dev/null || fp_fail "node is not installed (scripts/deps.sh installs it)"
HERE=$(dirname "$0")

PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
echo "pyro-token-$RANDOM$RANDOM" >"$FP_TMP/token"
chmod 600 "$FP_TMP/token"
TOKEN=$(cat "$FP_TMP/token")
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/collector.db" --token-file "$FP_TMP/token"
series_count() { curl -sf "$URL/api/v1/series" | fp_json_get 'len(d["series"])'; }

# ---- 1. a real client ----
# It runs with --no-turbo-inlining: in one CI run on a fast VM, V8's own sampler gave some of
# busyLeaf's samples to tick, its caller's caller, most likely once TurboFan had inlined
# busyMiddle into it. That is the client's attribution, which the collector keeps as it comes.
cat >"$FP_TMP/app.js" <<'EOF'
// A Node.js program profiled by the real Pyroscope client, for 5 s.
const Pyroscope = require('@pyroscope/nodejs');
const auth = process.argv[3] === 'basic'
  ? {basicAuthUser: 'fleet', basicAuthPassword: process.argv[4]}
  : {authToken: process.argv[4]};
Pyroscope.init(Object.assign({serverAddress: process.argv[2], appName: process.argv[5],
  tags: {region: 'eu-1', hostname: 'node-host'}, flushIntervalMs: 2000}, auth));
Pyroscope.start();
function busyLeaf(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i); return s; }
function busyMiddle() { return busyLeaf(2e6); }
const keep = [];
const end = Date.now() + 5000;
function tick() {
  if (Date.now() > end) { Pyroscope.stop().then(() => process.exit(0)); return; }
  busyMiddle();
  keep.push(new Array(1000).fill(keep.length));
  setImmediate(tick);
}
tick();
EOF
NODE_PATH=$NODE_MODULES DEBUG=pyroscope fp_timeout 60 node --no-turbo-inlining "$FP_TMP/app.js" "$URL" bearer "$TOKEN" nodeapp >"$FP_TMP/node.log" 2>&1 ||
  fp_fail "the Node.js program failed: $(tail -5 "$FP_TMP/node.log")"
if grep -q "rejected\|Error sending" "$FP_TMP/node.log"; then
  fp_fail "the client's pushes were refused: $(grep -m3 "rejected\|Error sending" -A1 "$FP_TMP/node.log")"
fi
curl -sf "$URL/api/v1/series?service=nodeapp" >"$FP_TMP/node.series" || fp_fail "no series of nodeapp"
python3 - "$FP_TMP/node.series" <<'EOF' || fp_fail "the series of the Node.js program are wrong"
import json, sys
s = json.load(open(sys.argv[1]))["series"]
events = sorted({x["event"] for x in s})
print("nodeapp: %d series, events %s, host %s" % (len(s), events, sorted({x["host"] for x in s})))
assert "wall" in events and "inuse_space" in events, events
assert all(x["host"] == "node-host" for x in s), s
assert all(x["process"] == "nodeapp" for x in s), s
EOF
fp_json_get 'd["series"][0]["config"]' <"$FP_TMP/node.series" | grep -q "region=eu-1" ||
  fp_fail "the tags the client gave are not kept with its series: $(fp_json_get 'd["series"][0]["config"]' <"$FP_TMP/node.series")"
# The tags select: the series labelled so, the profile of them, nothing for another value.
[[ $(curl -sf "$URL/api/v1/series?label=region:eu-1" | fp_json_get 'sorted({x["service"] for x in d["series"]})') == "['nodeapp']" ]] ||
  fp_fail "label=region:eu-1 does not select the Node.js program's series"
[[ $(curl -sf "$URL/api/v1/series?label=region:us-9" | fp_json_get 'len(d["series"])') == 0 ]] ||
  fp_fail "label=region:us-9 selects series"
curl -sf "$URL/api/v1/profile?label=region:eu-1&event=wall" -o "$FP_TMP/bylabel.pb.gz" ||
  fp_fail "no profile by label"
curl -sf "$URL/api/v1/profile?service=nodeapp&event=wall" -o "$FP_TMP/byservice.pb.gz" || fp_fail "no profile"
[[ $(fp_profile_total "$FP_TMP/bylabel.pb.gz" wall) == $(fp_profile_total "$FP_TMP/byservice.pb.gz" wall) ]] ||
  fp_fail "the profile by label differs from the profile by service"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v1/series?label=region")
[[ $code == 400 ]] || fp_fail "label without a value: HTTP $code"
fp_ok "the client's tags select its series and profile (label=region:eu-1)"
fp_pprof -top -nodecount 40 "$URL/api/v1/profile?service=nodeapp&event=wall" >"$FP_TMP/node.top" 2>&1 ||
  fp_fail "go tool pprof cannot read the Node.js program's wall profile: $(tail -3 "$FP_TMP/node.top")"
curl -sf "$URL/api/v1/profile?service=nodeapp&event=wall" -o "$FP_TMP/node.pb.gz" || fp_fail "no wall profile of nodeapp"
python3 - "$FP_TMP/node.pb.gz" "$HERE" <<'EOF' || fp_fail "the wall profile does not hold the program's functions"
import sys
sys.path.insert(0, sys.argv[2])
import pprofraw
p = pprofraw.load(sys.argv[1])
vi = p.value_index("wall")
# The client names a function FILE:NAME:LINE (its own shortening of the path).
def at(stack, name):
    return next((i for i, f in enumerate(stack) if f == name or f.endswith(":%s" % name)
                 or ":%s:" % name in f), None)
total = sum(s.values[vi] for s in p.samples)
leaf = sum(s.values[vi] for s in p.samples if at(s.stack, "busyLeaf") == 0)
callers = {s.stack[at(s.stack, "busyLeaf") + 1] for s in p.samples
           if at(s.stack, "busyLeaf") is not None and at(s.stack, "busyLeaf") + 1 < len(s.stack)}
print("wall %.2f s, busyLeaf (leaf) %.2f s (%.0f%%), called by %s" % (total / 1e9, leaf / 1e9,
      100.0 * leaf / total if total else 0, sorted(callers)))
assert total > 2e9, total
assert leaf > 0.5 * total, (leaf, total)
assert len(callers) == 1 and at([callers.pop()], "busyMiddle") == 0, callers
EOF
fp_pprof -top "$URL/api/v1/profile?service=nodeapp&event=inuse_space" >"$FP_TMP/node.heap" 2>&1 ||
  fp_fail "go tool pprof cannot read the heap profile"
grep -q "Type: inuse_space" "$FP_TMP/node.heap" || fp_fail "the heap profile is not inuse_space: $(head -5 "$FP_TMP/node.heap")"
curl -sf "$URL/api/v1/flamegraph?service=nodeapp&event=wall" | grep -q 'app.js:busyLeaf:' ||
  fp_fail "the flame graph of nodeapp has no busyLeaf"
# The web page, in chromium, draws the program's leaf right on top of its caller.
NODE_PATH=$NODE_MODULES fp_timeout 90 node "$HERE/webview.js" "$URL" "service=nodeapp&event=wall" \
  >"$FP_TMP/page.json" 2>"$FP_TMP/page.err" || fp_fail "the web page did not load: $(tail -3 "$FP_TMP/page.err")"
python3 - "$FP_TMP/page.json" <<'EOF' || fp_fail "the web page does not draw busyLeaf on busyMiddle"
import json, sys
d = json.load(open(sys.argv[1]))
assert not d["errors"], d["errors"]
def named(part):
    return [b for b in d["drawn"] if (":%s:" % part) in b["name"]]
leaves, middles = named("busyLeaf"), named("busyMiddle")
assert leaves and middles, sorted({b["name"] for b in d["drawn"]})[:30]
leaf = max(leaves, key=lambda b: b["w"])
rows = sorted({b["y"] for b in d["drawn"]})
step = min(b - a for a, b in zip(rows, rows[1:]))
on = [m for m in middles if m["x"] <= leaf["x"] + 0.5 and leaf["x"] + leaf["w"] <= m["x"] + m["w"] + 0.5
      and abs(abs(m["y"] - leaf["y"]) - step) < 0.5]
print("page: %d boxes; busyLeaf %.0f px wide, on busyMiddle: %s" % (len(d["drawn"]), leaf["w"], bool(on)))
assert on, (leaf, middles)
EOF
fp_ok "a real Pyroscope client (Node.js): its wall and heap profiles, functions, callers and tags read back, the web page drawing them"
NODE_PATH=$NODE_MODULES DEBUG=pyroscope fp_timeout 60 node --no-turbo-inlining "$FP_TMP/app.js" "$URL" basic "$TOKEN" nodebasic >"$FP_TMP/basic.log" 2>&1 ||
  fp_fail "the Node.js program (basic authentication) failed"
[[ $(curl -sf "$URL/api/v1/series?service=nodebasic" | fp_json_get 'len(d["series"])') -ge 1 ]] ||
  fp_fail "basic authentication with the token as password stored nothing: $(tail -3 "$FP_TMP/basic.log")"
fp_ok "basic authentication: the token as the password"

# ---- 2. folded ----
NOW=$(date +%s)
printf 'main;work;leaf 30\nmain;work 5\nmain;idle 10\n' >"$FP_TMP/folded.txt"
FQ="name=foldapp.cpu%7Bhostname%3Dfold-host%2Cenv%3Dprod%7D&from=$((NOW - 10))&until=$NOW&sampleRate=100&spyName=gospy"
for i in 1 2; do
  code=$(curl -s -o "$FP_TMP/folded.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?$FQ")
  [[ $code == 200 ]] || fp_fail "a folded push answered $code: $(cat "$FP_TMP/folded.out")"
done
curl -sf "$URL/api/v1/profile?service=foldapp&event=cpu" -o "$FP_TMP/fold.pb.gz" || fp_fail "no profile of foldapp"
python3 - "$FP_TMP/fold.pb.gz" "$HERE" <<'EOF' || fp_fail "the folded push is not what was sent (once)"
import sys
sys.path.insert(0, sys.argv[2])
import pprofraw
p = pprofraw.load(sys.argv[1])
vi = p.value_index("cpu")
by = {tuple(s.stack): (s.values[0], s.values[vi]) for s in p.samples}
print("folded: %s" % by)
assert by.get(("leaf", "work", "main")) == (30, 300000000), by
assert by.get(("work", "main")) == (5, 50000000), by
assert by.get(("idle", "main")) == (10, 100000000), by
EOF
[[ $(curl -sf "$URL/api/v1/series?service=foldapp" | fp_json_get 'd["series"][0]["host"]') == fold-host ]] ||
  fp_fail "the folded push's hostname label is not its host"
# A client's last push at its stop may last less than a second: from == until in seconds.
code=$(curl -s -o "$FP_TMP/same.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
  --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?name=sameapp&from=$NOW&until=$NOW")
[[ $code == 200 ]] || fp_fail "a push with from == until answered $code: $(cat "$FP_TMP/same.out")"
fp_ok "folded: frames, counts at 100 Hz, host and type from the name; the same push twice stored once; from == until taken"

# ---- 3. Connect ----
python3 "$HERE/mkpush.py" "$FP_TMP/push.bin" \
  --series "service_name=connapp,__name__=process_cpu,pod=web-1,namespace=shop" "$FP_TMP/fold.pb.gz" --id a1 \
  --series "service_name=connapp,__name__=process_cpu,pod=web-2,namespace=shop" "$FP_TMP/fold.pb.gz" --id a2
python3 "$HERE/mkpush.py" "$FP_TMP/push.gz" --gzip \
  --series "service_name=connzip,__name__=process_cpu" "$FP_TMP/fold.pb.gz"
for f in push.bin push.gz; do
  enc=()
  [[ $f == push.gz ]] && enc=(-H "Content-Encoding: gzip")
  code=$(curl -s -o "$FP_TMP/$f.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    -H "Content-Type: application/proto" "${enc[@]}" --data-binary @"$FP_TMP/$f" \
    "$URL/push.v1.PusherService/Push")
  [[ $code == 200 ]] || fp_fail "a Connect push ($f) answered $code: $(cat "$FP_TMP/$f.out")"
done
python3 - "$FP_TMP/fold.pb.gz" >"$FP_TMP/push.json" <<'EOF'
import base64, json, sys
raw = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"series": [{"labels": [{"name": "service_name", "value": "connjson"},
                                         {"name": "__name__", "value": "process_cpu"},
                                         {"name": "note", "value": "caf\u00e9 \"quoted\""}],
                              "samples": [{"rawProfile": raw, "ID": "j1"}]}]}))
EOF
code=$(curl -s -o "$FP_TMP/json.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
  -H "Content-Type: application/json" --data-binary @"$FP_TMP/push.json" "$URL/push.v1.PusherService/Push")
[[ $code == 200 && $(cat "$FP_TMP/json.out") == "{}" ]] || fp_fail "a Connect JSON push answered $code: $(cat "$FP_TMP/json.out")"
python3 - "$URL" <<'EOF' || fp_fail "the Connect push's series are wrong"
import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/series?service=connapp"))["series"]
print("connapp: %d series: %s" % (len(s), [x.get("config", "") for x in s]))
assert len(s) == 2, s
z = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/series?service=connzip"))["series"]
assert len(z) == 1 and z[0]["samples"] == 45, z
j = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/series?service=connjson"))["series"]
print("connjson: %s" % [(x["samples"], x["config"]) for x in j])
assert len(j) == 1 and j[0]["samples"] == 45 and "note=caf%C3%A9" in j[0]["config"], j
EOF
fp_ok "Connect: a PushRequest of two series (two series stored), a gzip one, a JSON one"

# ---- 4. hostile pushes ----
before=$(series_count)
refuse() { # refuse CODE WANT CURL-ARGS...: the status, one line holding WANT
  local want_code=$1 want=$2 code
  shift 2
  code=$(curl -s -o "$FP_TMP/refused" -w '%{http_code}' "$@")
  [[ $code == "$want_code" && $(wc -l <"$FP_TMP/refused") -le 1 ]] && grep -q -- "$want" "$FP_TMP/refused" ||
    fp_fail "curl $*: $code '$(cat "$FP_TMP/refused")' (want $want_code '$want')"
  # Every refusal is JSON: the collector's {"error"} or Connect's {"code", "message"}.
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert "error" in d or ("code" in d and "message" in d), d' \
    "$FP_TMP/refused" || fp_fail "the refusal is not JSON: $(cat "$FP_TMP/refused")"
  fp_ok "refused $want_code: $(cat "$FP_TMP/refused")"
}
AUTH=(-H "Authorization: Bearer $TOKEN")
refuse 401 "missing bearer token" --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?$FQ"
refuse 401 "wrong bearer token" -H "Authorization: Bearer nope" --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?$FQ"
refuse 401 "or basic password" -u "fleet:nope" --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?$FQ"
refuse 400 "has no application name" "${AUTH[@]}" --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?name=%7Ba%3Db%7D"
refuse 400 "unknown parameter 'bogus'" "${AUTH[@]}" --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?name=x&bogus=1"
refuse 400 "must be one {k=v,...} at its end" "${AUTH[@]}" --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?name=x%7Ba%3Db"
printf 'main;work;leaf thirty\n' >"$FP_TMP/badfold.txt"
refuse 400 "folded line 1 is not" "${AUTH[@]}" --data-binary @"$FP_TMP/badfold.txt" "$URL/ingest?name=badfold"
refuse 400 "not a profile" "${AUTH[@]}" --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?name=badpprof&format=pprof"
LONG=$(head -c 300 /dev/zero | tr '\0' v)
refuse 400 "at most 256 printable" "${AUTH[@]}" --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?name=x%7Ba%3D$LONG%7D"
MANY=$(python3 -c 'print("%2C".join("k%d%%3Dv" % i for i in range(40)))')
refuse 400 "'until' must not be before 'from'" "${AUTH[@]}" --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?name=x&from=$NOW&until=$((NOW - 5))"
refuse 400 "more than 32 labels" "${AUTH[@]}" --data-binary @"$FP_TMP/folded.txt" "$URL/ingest?name=x%7B$MANY%7D"
refuse 415 "Content-Type must be application/proto" "${AUTH[@]}" -H "Content-Type: text/plain" \
  --data-binary @"$FP_TMP/push.bin" "$URL/push.v1.PusherService/Push"
head -c 200 /dev/urandom >"$FP_TMP/noise.bin"
refuse 400 "invalid_argument" "${AUTH[@]}" -H "Content-Type: application/proto" --data-binary @"$FP_TMP/noise.bin" \
  "$URL/push.v1.PusherService/Push"
printf '{"series": [{"labels": [{"name": "service_name", "value": "x"}], "samples": [{"rawProfile": "@@@"}]}]}' >"$FP_TMP/bad64.json"
refuse 400 "rawProfile is not base64" "${AUTH[@]}" -H "Content-Type: application/json" --data-binary @"$FP_TMP/bad64.json" \
  "$URL/push.v1.PusherService/Push"
python3 -c 'print("{\"a\": " * 40 + "1" + "}" * 40)' >"$FP_TMP/deep.json"
refuse 400 "nested too deep" "${AUTH[@]}" -H "Content-Type: application/json" --data-binary @"$FP_TMP/deep.json" \
  "$URL/push.v1.PusherService/Push"
printf '{"series": [{"labels": [' >"$FP_TMP/cut.json"
refuse 400 "not a PushRequest in JSON" "${AUTH[@]}" -H "Content-Type: application/json" --data-binary @"$FP_TMP/cut.json" \
  "$URL/push.v1.PusherService/Push"
python3 "$HERE/mkpush.py" "$FP_TMP/noname.bin" --series "__name__=process_cpu,pod=x" "$FP_TMP/fold.pb.gz"
refuse 400 "needs a service_name (or service.name) label" "${AUTH[@]}" -H "Content-Type: application/proto" \
  --data-binary @"$FP_TMP/noname.bin" "$URL/push.v1.PusherService/Push"
[[ $(series_count) == "$before" ]] || fp_fail "a refused push stored something ($before -> $(series_count) series)"
fp_ok "hostile pushes refused in one line, nothing stored"
fp_ok "done"
