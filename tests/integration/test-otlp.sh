#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# OpenTelemetry's profiles over OTLP/HTTP into the collector (otlp.h,
# opentelemetry-proto v1.9.0), with requests encoded by hand from the
# published field numbers (mkotlp.py) and answers decoded the same way:
#
# 1. A request of the OpenTelemetry eBPF profiler's kind (samples/count,
#    period cpu/nanoseconds): its resource's service.name, host.name and
#    process.pid make the series, other attributes stay in its text; the
#    profile (go tool pprof) holds each stack leaf first with the inlined
#    function before its caller, each sample worth the period, the
#    thread's id and name, the mapping's build ID. The answer is an empty
#    ExportProfilesServiceResponse.
# 2. gzip (Content-Encoding) and basic authentication; the same request
#    twice is stored once; a dictionary without mapping, function and
#    attribute tables (bare addresses) is taken. The same request in
#    OTLP's JSON encoding (otlp2json.py: camelCase, or the proto's
#    snake_case names, gzip) is stored as its protobuf twin, and answered
#    in JSON.
# 3. Partial success: a profile whose sample names a stack the dictionary
#    has not is rejected, the other stored; the answer's partial_success
#    says 1 rejected and why.
# 4. Refusals in one google.rpc.Status (code 3): a dictionary whose index
#    points past its strings, bytes that are not protobuf, malformed JSON
#    (in JSON); another type gets 415, no token 401; nothing stored.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=otlp
fp_init 120
fp_require_go
HERE=$(dirname "$0")
PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
echo "otlp-token-$RANDOM$RANDOM" >"$FP_TMP/token"
TOKEN=$(cat "$FP_TMP/token")
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/collector.db" --token-file "$FP_TMP/token"
EP=$URL/v1development/profiles
PB=(-H "Content-Type: application/x-protobuf")

# post FILE OUT [CURL-ARGS...]: the status code
post() {
  local f=$1 out=$2
  shift 2
  curl -s -o "$out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "${PB[@]}" "$@" --data-binary @"$f" "$EP"
}
# answer FILE: the answer decoded (ExportProfilesServiceResponse or google.rpc.Status) as JSON
answer() {
  python3 - "$1" <<'PY'
import json, sys
data = open(sys.argv[1], "rb").read()
def fields(b):
    i, out = 0, []
    while i < len(b):
        tag, i = varint(b, i)
        f, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise SystemExit("unexpected wire type %d" % wt)
        out.append((f, v))
    return out
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7f) << s; s += 7
        if not c & 0x80:
            return v, i
d = {}
for f, v in fields(data):
    if f == 1 and isinstance(v, bytes):   # partial_success
        for g, w in fields(v):
            d["rejected_profiles" if g == 1 else "error_message"] = w if g == 1 else w.decode()
    elif f == 1:                          # Status.code
        d["code"] = v
    elif f == 2:                          # Status.message
        d["message"] = v.decode()
print(json.dumps(d))
PY
}

# ---- 1. the eBPF profiler's kind ----
python3 "$HERE/mkotlp.py" "$FP_TMP/req.bin"
code=$(post "$FP_TMP/req.bin" "$FP_TMP/req.out")
[[ $code == 200 && ! -s $FP_TMP/req.out ]] || fp_fail "an OTLP request answered $code: $(answer "$FP_TMP/req.out")"
curl -sf "$URL/api/v1/series?service=otel-app" >"$FP_TMP/series.json" || fp_fail "no series of otel-app"
python3 - "$FP_TMP/series.json" <<'PY' || fp_fail "the OTLP series is wrong"
import json, sys
s = json.load(open(sys.argv[1]))["series"]
print("otel-app: %s" % [(x["host"], x["pid"], x["event"], x["samples"], x["value"], x["config"]) for x in s])
assert len(s) == 1, s
x = s[0]
assert (x["host"], x["pid"], x["event"], x["samples"], x["value"]) == ("otel-host", 4242, "cpu", 40, 2000000000), x
assert "k8s.pod.name=web-1" in x["config"], x
PY
curl -sf "$URL/api/v1/profile?service=otel-app" -o "$FP_TMP/p.pb.gz" || fp_fail "no profile of otel-app"
fp_pprof -raw "$FP_TMP/p.pb.gz" >"$FP_TMP/p.raw" 2>&1 || fp_fail "go tool pprof cannot read it"
grep -q "/usr/bin/otelapp 0123abcd" "$FP_TMP/p.raw" || fp_fail "the mapping's file or build ID is lost: $(grep -A2 Mappings "$FP_TMP/p.raw")"
python3 - "$FP_TMP/p.pb.gz" "$HERE" <<'PY' || fp_fail "the OTLP profile's stacks are wrong"
import sys
sys.path.insert(0, sys.argv[2])
import pprofraw
p = pprofraw.load(sys.argv[1])
vi = p.value_index("cpu")
by = {tuple(s.stack): (s.values[0], s.values[vi], s.thread_name()) for s in p.samples}
print("stacks: %s" % by)
assert by[("leaf", "inl", "work", "main")] == (30, 1500000000, "worker"), by
assert by[("inl", "work", "main")][:2] == (10, 500000000), by
PY
fp_ok "OTLP: series from the resource, stacks leaf first with the inlined function, the period, thread and build ID"

# ---- 2. gzip, basic authentication, a request twice ----
python3 "$HERE/mkotlp.py" "$FP_TMP/gz.bin" --service otel-gz --gzip
code=$(curl -s -o "$FP_TMP/gz.out" -w '%{http_code}' -u "collector:$TOKEN" "${PB[@]}" -H "Content-Encoding: gzip" \
  --data-binary @"$FP_TMP/gz.bin" "$EP")
[[ $code == 200 ]] || fp_fail "a gzip OTLP request with basic authentication answered $code: $(answer "$FP_TMP/gz.out")"
[[ $(post "$FP_TMP/req.bin" "$FP_TMP/again.out") == 200 ]] || fp_fail "the same request again was refused"
[[ $(curl -sf "$URL/api/v1/series?service=otel-app" | fp_json_get 'd["series"][0]["samples"]') == 40 ]] ||
  fp_fail "the same request twice was stored twice"
[[ $(curl -sf "$URL/api/v1/series?service=otel-gz" | fp_json_get 'd["series"][0]["samples"]') == 40 ]] ||
  fp_fail "the gzip request was not stored"
python3 "$HERE/mkotlp.py" "$FP_TMP/bare.bin" --service otel-bare --bare
code=$(post "$FP_TMP/bare.bin" "$FP_TMP/bare.out")
[[ $code == 200 ]] || fp_fail "a request without mapping and function tables answered $code: $(answer "$FP_TMP/bare.out")"
[[ $(curl -sf "$URL/api/v1/series?service=otel-bare" | fp_json_get 'd["series"][0]["samples"]') == 40 ]] ||
  fp_fail "a request of bare addresses was not stored"
fp_ok "gzip and basic authentication; the same request twice stored once; bare addresses without tables"

# ---- 2b. the same in OTLP's JSON encoding ----
python3 "$HERE/mkotlp.py" "$FP_TMP/j.bin" --service otel-json
python3 "$HERE/otlp2json.py" "$FP_TMP/j.bin" "$FP_TMP/j.json"
python3 "$HERE/mkotlp.py" "$FP_TMP/js.bin" --service otel-snake
python3 "$HERE/otlp2json.py" "$FP_TMP/js.bin" "$FP_TMP/js.json" --snake
gzip -c "$FP_TMP/js.json" >"$FP_TMP/js.json.gz"
jpost() { # jpost FILE OUT [CURL ARGS]: the JSON request's HTTP status
  curl -s -o "$2" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \
    "${@:3}" --data-binary @"$1" "$EP"
}
code=$(jpost "$FP_TMP/j.json" "$FP_TMP/j.out")
[[ $code == 200 && $(cat "$FP_TMP/j.out") == "{}" ]] || fp_fail "a JSON request answered $code: $(cat "$FP_TMP/j.out")"
code=$(jpost "$FP_TMP/js.json.gz" "$FP_TMP/js.out" -H "Content-Encoding: gzip")
[[ $code == 200 ]] || fp_fail "a gzip JSON request with snake_case names answered $code: $(cat "$FP_TMP/js.out")"
for svc in otel-json otel-snake; do
  curl -sf "$URL/api/v1/profile?service=$svc" -o "$FP_TMP/$svc.pb.gz" || fp_fail "no profile of $svc"
  # The same stacks, values, threads and pid; only the service's name differs.
  [[ $(fp_pprof -traces "$FP_TMP/$svc.pb.gz" 2>/dev/null | sed -e 1,4d -e '/process:/d' -e '/service:/d') == \
    $(fp_pprof -traces "$FP_TMP/p.pb.gz" 2>/dev/null | sed -e 1,4d -e '/process:/d' -e '/service:/d') ]] ||
    fp_fail "the JSON request ($svc) was not stored as its protobuf twin"
done
python3 "$HERE/mkotlp.py" "$FP_TMP/jp.bin" --service otel-jpart --partial
python3 "$HERE/otlp2json.py" "$FP_TMP/jp.bin" "$FP_TMP/jp.json"
code=$(jpost "$FP_TMP/jp.json" "$FP_TMP/jp.out")
[[ $code == 200 ]] && fp_json_get 'd["partialSuccess"]["rejectedProfiles"] == "1" and "stack_index 99" in d["partialSuccess"]["errorMessage"]' \
  <"$FP_TMP/jp.out" | grep -q True || fp_fail "a JSON partial success: $code $(cat "$FP_TMP/jp.out")"
fp_ok "JSON (camelCase and snake_case, gzip): stored as the protobuf twin; partial success in JSON"

# ---- 3. partial success ----
python3 "$HERE/mkotlp.py" "$FP_TMP/part.bin" --service otel-part --partial
code=$(post "$FP_TMP/part.bin" "$FP_TMP/part.out")
ans=$(answer "$FP_TMP/part.out")
[[ $code == 200 ]] || fp_fail "a partly bad request answered $code: $ans"
fp_json_get 'd["rejected_profiles"] == 1 and "stack_index 99" in d["error_message"]' <<<"$ans" | grep -q True ||
  fp_fail "the partial success does not say 1 profile rejected and why: $ans"
[[ $(curl -sf "$URL/api/v1/series?service=otel-part" | fp_json_get 'd["series"][0]["samples"]') == 40 ]] ||
  fp_fail "the good profile of a partly bad request was not stored"
fp_ok "partial success: $ans"

# ---- 4. refusals ----
before=$(curl -sf "$URL/api/v1/series" | fp_json_get 'len(d["series"])')
python3 "$HERE/mkotlp.py" "$FP_TMP/bad.bin" --service otel-bad --bad-dict
code=$(post "$FP_TMP/bad.bin" "$FP_TMP/bad.out")
ans=$(answer "$FP_TMP/bad.out")
[[ $code == 400 ]] && fp_json_get 'd["code"] == 3 and "outside the strings" in d["message"]' <<<"$ans" | grep -q True ||
  fp_fail "a dictionary with an index past its strings: $code $ans"
fp_ok "refused 400: $ans"
head -c 300 /dev/urandom >"$FP_TMP/noise.bin"
code=$(post "$FP_TMP/noise.bin" "$FP_TMP/noise.out")
ans=$(answer "$FP_TMP/noise.out")
[[ $code == 400 ]] && fp_json_get 'd["code"] == 3' <<<"$ans" | grep -q True || fp_fail "noise: $code $ans"
fp_ok "refused 400: $ans"
code=$(curl -s -o "$FP_TMP/json.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" \
  --data-binary '{"resourceProfiles": [{"scopeProfiles": [}]}' "$EP")
[[ $code == 400 ]] && fp_json_get 'd["code"] == 3 and "in JSON" in d["message"]' <"$FP_TMP/json.out" | grep -q True ||
  fp_fail "malformed JSON: $code $(cat "$FP_TMP/json.out")"
fp_ok "refused 400 in JSON: $(cat "$FP_TMP/json.out")"
code=$(curl -s -o "$FP_TMP/xml.out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -H "Content-Type: text/xml" \
  --data-binary '<x/>' "$EP")
[[ $code == 415 ]] || fp_fail "XML answered $code"
fp_ok "refused 415: $(answer "$FP_TMP/xml.out")"
code=$(curl -s -o "$FP_TMP/noauth.out" -w '%{http_code}' "${PB[@]}" --data-binary @"$FP_TMP/req.bin" "$EP")
[[ $code == 401 ]] || fp_fail "no token answered $code"
[[ $(curl -sf "$URL/api/v1/series" | fp_json_get 'len(d["series"])') == "$before" ]] || fp_fail "a refused request stored something"
fp_ok "done"
