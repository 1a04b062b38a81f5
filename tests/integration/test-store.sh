#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The on-disk ring store, with the real agent:
#   1. a 2 MiB budget, 1 s buckets and a workload with thousands of distinct
#      stacks: the file and its WAL stay within 1.5x the budget at every
#      look, old buckets are evicted and counted as "evicted" drops, the
#      file passes integrity_check, and `dump --since` and
#      `dump --store PATH` (the file read directly) both give profiles
#      that go tool pprof reads; no bucket is a sliver of its length;
#   2. kill -9 of the agent before a new target's first bucket is stored
#      and at random moments while it writes: the file always passes
#      integrity_check, and the restarted agent resumes the target it had
#      (same pid and start time) and keeps the old buckets;
#   3. a truncated store is moved aside (kept as PATH.corrupt-*) with one
#      log line and a fresh store is started;
#   4. a full disk (a 1 MiB tmpfs) and a read-only directory: the agent
#      keeps sampling, says so in status, and never dies.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 280
fp_require_go
command -v sqlite3 >/dev/null || fp_fail "sqlite3 (the CLI) is needed for integrity checks"

MANY=$FP_BUILD/tests/manystacks
DB=$FP_TMP/agent.db
json() { fp_status_json | fp_json_get "$1"; }
integrity() { sqlite3 "file:$1?mode=ro" "pragma integrity_check;" 2>&1 | head -1; }

# ---- 1. budget, eviction, dumps ----------------------------------------
fp_start_agent --bucket 1 --store-max-mb 2
fp_start_workload manystacks "$FP_TMP/ms.out" "$FP_TMP/ms.ready" --threads 2 --seconds 60 --depth 9
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 2500 >/dev/null || fp_fail "start failed"
max=0
for _ in $(seq 24); do
  sleep 0.5
  sz=$(( $(stat -c %s "$DB" 2>/dev/null || echo 0) + $(stat -c %s "$DB-wal" 2>/dev/null || echo 0) ))
  ((sz > max)) && max=$sz
  ((sz <= 3 * 1024 * 1024)) || fp_fail "store + WAL is $sz bytes, over 1.5x the 2 MiB budget"
done
fp_log "largest store + WAL seen: $max bytes (budget 2097152, limit 3145728)"
fp_ok "the store stays within 1.5x its budget"
# Buckets end on the wall clock's seconds, none a sliver (a timer that fires a little early
# must not leave one of a few milliseconds behind it); the newest may still be written.
short=$(sqlite3 "file:$DB?mode=ro" "select count(*) || ' of ' || (select count(*) from buckets)
  from buckets where length_ns < 100000000 and id < (select max(id) from buckets);")
[[ $short == "0 of "* ]] || fp_fail "$short buckets are shorter than a tenth of their length"
# On a busy machine the workload makes its stacks more slowly: give the
# budget up to 30 s more to fill (the size is still checked meanwhile).
evicted_any() { (($(json 'sum(t["drops"].get("evicted",0) for t in d["targets"])') > 0)); }
for _ in $(seq 60); do
  evicted_any && break
  sz=$(( $(stat -c %s "$DB" 2>/dev/null || echo 0) + $(stat -c %s "$DB-wal" 2>/dev/null || echo 0) ))
  ((sz <= 3 * 1024 * 1024)) || fp_fail "store + WAL is $sz bytes, over 1.5x the 2 MiB budget"
  sleep 0.5
done
buckets=$(json 'd["store"]["buckets"]')
evicted=$(json 'sum(t["drops"].get("evicted",0) for t in d["targets"])')
fp_log "store: $buckets buckets kept, $evicted samples evicted before upload"
((buckets > 0)) || fp_fail "no buckets in the store"
((evicted > 0)) || fp_fail "nothing was evicted with thousands of stacks in a 2 MiB budget"
fp_status_json | grep -q '"ok":true' || fp_fail "status says the store is not ok"
fp_ok "old buckets evicted and counted as drops"
fp_ctl status | grep -q "dropped from $pid:.*evicted" || fp_fail "status does not show drops by reason"
[[ $(integrity "$DB") == ok ]] || fp_fail "integrity_check failed on the live store"

fp_ctl dump "$pid" --since 3s -o "$FP_TMP/recent.pb.gz" 2>/dev/null || fp_fail "dump --since failed"
fp_pprof -raw -symbolize=none "$FP_TMP/recent.pb.gz" >"$FP_TMP/recent.raw" 2>&1 || fp_fail "pprof rejected dump --since"
grep -q "hop_a" "$FP_TMP/recent.raw" || fp_fail "dump --since lacks the workload's functions"
grep -Eq "dropped evicted: [0-9]+" "$FP_TMP/recent.raw" || fp_log "note: no evicted drops in the last 3 s"
"$FP_AGENTCTL" dump "$pid" --store "$DB" -o "$FP_TMP/direct.pb.gz" 2>"$FP_TMP/direct.err" ||
  fp_fail "dump --store failed while the agent runs: $(cat "$FP_TMP/direct.err")"
fp_pprof -raw -symbolize=none "$FP_TMP/direct.pb.gz" >"$FP_TMP/direct.raw" 2>&1 || fp_fail "pprof rejected dump --store"
grep -q "hop_b" "$FP_TMP/direct.raw" || fp_fail "dump --store lacks the workload's functions"
n_stacks=$(sqlite3 "file:$DB?mode=ro" "select count(*) from stacks;" 2>/dev/null || echo "?")
fp_ok "dump --since and dump --store give readable profiles ($n_stacks distinct stacks stored)"
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
fp_stop_agent
"$FP_AGENTCTL" dump "$pid" --store "$DB" --format top >"$FP_TMP/after.top" 2>&1 || fp_fail "dump --store failed with the agent down: $(cat "$FP_TMP/after.top")"
grep -q "hop_" "$FP_TMP/after.top" || fp_fail "dump --store with the agent down lacks the workload"
[[ $(integrity "$DB") == ok ]] || fp_fail "integrity_check failed after a clean stop"
fp_ok "readable with the agent down; integrity ok"

# ---- 2. kill -9 while writing; resume after restart --------------------
rm -f "$DB" "$DB-wal" "$DB-shm"
# First a kill before the target's first bucket is stored (60 s buckets):
# `start` records the target at once, so the restarted agent resumes it.
fp_start_agent --bucket 60
fp_start_workload manystacks "$FP_TMP/k.out" "$FP_TMP/k.ready" --threads 2 --seconds 40 --depth 6
pid=$FP_WL_PID
fp_ctl start "$pid" --freq 997 >/dev/null || fp_fail "start failed"
fp_wait_for 10 bash -c "[[ \$(sqlite3 'file:$DB?mode=ro' 'SELECT count(*) FROM targets WHERE pid = $pid AND active' 2>/dev/null) == 1 ]]" ||
  fp_fail "the started target is not in the store (active) within 10 s"
buckets=$(sqlite3 "file:$DB?mode=ro" "SELECT count(*) FROM buckets")
kill -KILL "$FP_AGENT_PID"
wait "$FP_AGENT_PID" 2>/dev/null || true
fp_start_agent --bucket 1
fp_wait_for 10 bash -c "$FP_AGENTCTL --socket $FP_SOCK status --json | grep -q '\"pid\":$pid,'" ||
  fp_fail "the restarted agent did not resume pid $pid, killed before its first bucket ($buckets stored)"
fp_ok "a target killed with the agent before its first bucket is resumed ($buckets buckets were stored)"
# CPU seconds of the workload so far (utime + stime of /proc/PID/stat).
cpu_s() { awk -v tck="$(getconf CLK_TCK)" '{sub(/.*\) /, ""); print ($12 + $13) / tck}' "/proc/$1/stat"; }
cpu0=$(cpu_s "$pid")
for round in 1 2 3; do
  sleep "1.$((RANDOM % 10))"
  kill -KILL "$FP_AGENT_PID"
  wait "$FP_AGENT_PID" 2>/dev/null || true
  [[ $(integrity "$DB") == ok ]] || fp_fail "integrity_check failed after kill -9 (round $round)"
  fp_start_agent --bucket 1
  fp_wait_for 10 bash -c "$FP_AGENTCTL --socket $FP_SOCK status --json | grep -q '\"pid\":$pid,'" ||
    fp_fail "the restarted agent did not resume pid $pid (round $round)"
  grep -q "resumed profiling $pid" "$FP_TMP/agent.log" || fp_fail "no 'resumed' line in the log"
done
sleep 1.5
fp_ctl dump "$pid" --format folded >"$FP_TMP/k.folded" || fp_fail "dump after restarts failed"
total=$(awk '{s += $NF} END {print s + 0}' "$FP_TMP/k.folded")
# What the workload really ran decides what there was to sample: on a busy
# machine it gets less CPU. Each kill loses at most the open 1 s bucket and
# the seconds until the restarted agent attaches again, about half of the
# ~6 s in all; a quarter must survive.
expect=$(awk -v a="$cpu0" -v b="$(cpu_s "$pid")" 'BEGIN {printf "%d", (b - a) * 997}')
fp_log "after 3 kill -9 and restarts: $total samples in the dump, $expect for the workload's CPU time"
((total * 4 > expect)) || fp_fail "too few samples survived the restarts ($total of $expect)"
fp_ok "kill -9 loses at most the open bucket; the agent resumes its target"
fp_kill "$pid"
fp_stop_agent

# ---- 3. a truncated store ----------------------------------------------
size=$(stat -c %s "$DB")
truncate -s $((size / 2)) "$DB"
rm -f "$DB-wal" "$DB-shm"
fp_start_agent --bucket 1
fp_wait_for 5 grep -qi "corrupt\|damaged\|moved aside\|renamed" "$FP_TMP/agent.log" ||
  fp_fail "no log line about the damaged store: $(cat "$FP_TMP/agent.log")"
ls "$DB".corrupt-* >/dev/null 2>&1 || fp_fail "the damaged store was not kept aside as $DB.corrupt-*"
fp_status_json | grep -q '"ok":true' || fp_fail "the fresh store is not ok"
fp_ok "truncated store moved aside: $(grep -i "corrupt\|damaged\|aside\|renamed" "$FP_TMP/agent.log" | head -1)"
fp_stop_agent

# ---- 4. full disk, read-only directory ---------------------------------
# The agent runs in its own mount namespace over a small tmpfs, so the mount
# goes away with it.
for kind in full readonly; do
  d=$FP_TMP/$kind
  mkdir -p "$d"
  opts="size=1m"
  [[ $kind == readonly ]] && opts="size=1m,ro"
  unshare -m --propagation private bash -c \
    "mount -t tmpfs -o $opts tmpfs '$d' && exec '$FP_AGENT' --foreground --socket '$FP_SOCK' --store '$d/agent.db' --bucket 1 --store-max-mb 8" \
    >"$FP_TMP/agent.log" 2>&1 &
  FP_AGENT_PID=$!
  fp_track "$FP_AGENT_PID"
  fp_wait_for 15 test -S "$FP_SOCK" || fp_fail "$kind: the agent did not start: $(cat "$FP_TMP/agent.log")"
  fp_start_workload manystacks "$FP_TMP/$kind.out" "$FP_TMP/$kind.ready" --threads 2 --seconds 40 --depth 7
  pid=$FP_WL_PID
  fp_ctl start "$pid" --freq 1000 >/dev/null || fp_fail "$kind: start failed"
  sleep 5
  kill -0 "$FP_AGENT_PID" || fp_fail "$kind: the agent died"
  s1=$(fp_target_field "$pid" samples)
  sleep 1
  s2=$(fp_target_field "$pid" samples)
  ((s2 > s1)) || fp_fail "$kind: sampling stopped ($s1 -> $s2)"
  st=$(fp_ctl status)
  fp_log "$kind: $(grep '^store:' <<<"$st")"
  if [[ $kind == readonly ]]; then
    grep -q "FAILING" <<<"$st" || fp_fail "readonly: status does not say the store fails"
    json 'd["targets"][0]["drops"].get("store_write_failed", 0)' | grep -qv '^0$' ||
      fp_fail "readonly: buckets that could not be stored were not counted"
  else
    # How soon 1 MiB fills depends on how much CPU the workload gets; wait
    # for it rather than for a fixed time.
    full_has_drops() {
      local n
      n=$(json 'sum(v for k, v in d["targets"][0]["drops"].items() if k in ("evicted", "store_write_failed"))')
      ((n > 0))
    }
    fp_wait_for 25 full_has_drops ||
      fp_fail "full: neither evictions nor failed writes were counted on a 1 MiB disk"
  fi
  fp_ctl dump "$pid" --format top >/dev/null || fp_fail "$kind: dump failed"
  fp_ok "$kind: the agent keeps sampling, counts what it could not keep, and says so"
  fp_kill "$pid"
  fp_stop_agent
done
