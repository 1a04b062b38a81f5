# SPDX-License-Identifier: MIT
#
# Shared helpers for the integration tests (sourced, not run).
#
# A test sources this file, calls fp_init with its time budget, and then
# uses the helpers.  fp_init makes a private temporary directory ($FP_TMP)
# and installs an EXIT trap that stops every process the test started
# (registered with fp_track, which fp_start_agent and fp_start_workload do
# for you), so a failing or timed-out test leaves nothing behind.  A
# watchdog ends the test after its budget, so nothing hangs ctest.
#
# Environment: FP_BUILD (build tree, default $FP_SRC/build), FP_SRC (source
# tree, default two levels above this file), GO (default go).

FP_SRC=${FP_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
FP_BUILD=${FP_BUILD:-$FP_SRC/build}
# Debian's python3 for the tests' helpers (standard library only): the python3
# on PATH may be a pyenv shim, half a second a start (a status poll every 0.3 s
# took 1.1 s), or an old version. tests/bin/python3 links to /usr/bin/python3.
[[ -x /usr/bin/python3 && :$PATH: != *":$FP_SRC/tests/bin:"* ]] && PATH=$FP_SRC/tests/bin:$PATH
FP_AGENT=$FP_BUILD/agent/fleetprof-agent
FP_AGENTCTL=$FP_BUILD/agent/agentctl
FP_TRUTH=$FP_BUILD/tests/truth
FP_SPIN=$FP_BUILD/tests/spin
FP_PPROFRAW=$FP_SRC/tests/integration/pprofraw.py
FP_TMP=
FP_SOCK=
FP_AGENT_PID=
FP_TRACKED=()
FP_WATCHDOG_PID=
FP_TEST_NAME=$(basename "${0%.sh}")

fp_log() { printf '%s: %s\n' "$FP_TEST_NAME" "$*"; }
fp_ok() { printf '%s: ok: %s\n' "$FP_TEST_NAME" "$*"; }

# fp_fail MESSAGE: report the failure (with the agent's log tail) and exit 1.
fp_fail() {
  printf '%s: FAIL: %s\n' "$FP_TEST_NAME" "$*" >&2
  [[ -n $FP_TMP && -s $FP_TMP/cpu.mark ]] &&
    echo "--- the host since the test began: $(fp_cpu_since "$FP_TMP/cpu.mark" text) ---" >&2
  if [[ -n $FP_TMP && -s $FP_TMP/agent.log ]]; then
    echo "--- last lines of the agent log ---" >&2
    tail -n 25 "$FP_TMP/agent.log" >&2
  fi
  exit 1
}

# fp_cpu_mark FILE: note the host's CPU times (/proc/stat) in FILE.
fp_cpu_mark() { head -1 /proc/stat >"$1"; }

# fp_cpu_since FILE [text]: the share of the host's CPU time since fp_cpu_mark FILE
# that its hypervisor took (steal: a vCPU that was not running while its
# thread thought it was; Linux leaves it out of threads' CPU clocks); with
# "text", that and how busy the host was, as a phrase.
fp_cpu_since() {
  python3 - "$(cat "$1")" "$(head -1 /proc/stat)" "${2:-}" <<'PY'
import sys
a = [int(x) for x in sys.argv[1].split()[1:9]]
b = [int(x) for x in sys.argv[2].split()[1:9]]
d = [y - x for x, y in zip(a, b)]
total = sum(d) or 1
steal, idle = d[7] / total, (d[3] + d[4]) / total
if sys.argv[3] == "text":
    print("%.1f%% of its CPU time stolen by the hypervisor, %.0f%% busy" % (steal * 100, (1 - idle - steal) * 100))
else:
    print("%.4f" % steal)
PY
}

# fp_track PID...: stop these processes when the test exits.
fp_track() { FP_TRACKED+=("$@"); }

# fp_untrack PID: forget PID (it has been reaped; its number may be reused).
fp_untrack() {
  local i
  for i in "${!FP_TRACKED[@]}"; do
    [[ ${FP_TRACKED[i]} == "$1" ]] && unset 'FP_TRACKED[i]'
  done
  FP_TRACKED=("${FP_TRACKED[@]}")
}

# fp_kill PID: SIGTERM, up to 5 s of grace, then SIGKILL; reaps it (it must
# be our child) and forgets it.
fp_kill() {
  local pid=$1 i
  fp_untrack "$pid"
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    # A zombie child counts as gone.
    [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
    sleep 0.1
  done
  # It may end between the check and the kill (and if it is not our child,
  # vanish): a kill that finds nothing is no failure.
  if kill -0 "$pid" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]]; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# fp_on_exit CMD: run CMD (a string) at the end, before the tracked
# processes are killed, whatever the outcome (which it cannot change).
FP_EXIT_HOOKS=()
fp_on_exit() { FP_EXIT_HOOKS+=("$1"); }

fp_cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  for ((i = ${#FP_EXIT_HOOKS[@]} - 1; i >= 0; i--)); do
    eval "${FP_EXIT_HOOKS[i]}" || true
  done
  local pids=("${FP_TRACKED[@]}")
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    fp_kill "${pids[i]}"
  done
  if [[ -n $FP_WATCHDOG_PID ]]; then
    kill "$FP_WATCHDOG_PID" 2>/dev/null || true
    wait "$FP_WATCHDOG_PID" 2>/dev/null || true
  fi
  if [[ -n $FP_TMP && -d $FP_TMP ]]; then
    if [[ $rc -ne 0 && -n ${FP_KEEP_TMP:-} ]]; then
      echo "kept $FP_TMP" >&2
    else
      rm -rf "$FP_TMP"
    fi
  fi
  if [[ $rc -eq 0 ]]; then
    printf '%s: PASS\n' "$FP_TEST_NAME"
  else
    printf '%s: FAILED (exit %d)\n' "$FP_TEST_NAME" "$rc" >&2
  fi
  exit "$rc"
}

# fp_init BUDGET_SECONDS: temp dir, cleanup trap, watchdog, binaries present.
fp_init() {
  local budget=${1:-240}
  FP_TMP=$(mktemp -d "${TMPDIR:-/tmp}/fp-${FP_TEST_NAME}.XXXXXX")
  chmod 755 "$FP_TMP"
  fp_cpu_mark "$FP_TMP/cpu.mark"
  FP_SOCK=$FP_TMP/agent.sock
  trap fp_cleanup EXIT
  trap 'fp_fail "interrupted"' INT
  # Under set -e a failing command ends the test; say which one, also when
  # it is inside a function (errtrace: without it such an exit is silent).
  set -o errtrace
  trap 'fp_log "FAIL: line $LINENO${FUNCNAME:+ (in $FUNCNAME)}: \"$BASH_COMMAND\" failed (status $?)" >&2' ERR
  trap 'fp_fail "watchdog: the test took longer than its budget"' TERM
  # The watchdog signals the test shell, whose TERM trap fails the test;
  # bash runs that trap only once its foreground command has ended, so the
  # watchdog also ends the shell's direct children (by pid, found through
  # /proc/PID/stat), except itself.
  (
    sp=
    trap 'kill $sp 2>/dev/null; exit 0' TERM
    sleep "$budget" &
    sp=$!
    wait $sp
    kill -TERM $$ 2>/dev/null
    for st in /proc/[0-9]*/stat; do
      line=$(<"$st") 2>/dev/null || continue
      read -r _ ppid _ <<<"${line##*) }" # after "pid (comm) ": state ppid ...
      cpid=${st#/proc/}
      cpid=${cpid%/stat}
      [[ $ppid == "$$" && $cpid != "$BASHPID" ]] && { kill -TERM "$cpid" 2>/dev/null || true; }
    done
    exit 0
  ) &
  FP_WATCHDOG_PID=$!
  local b
  for b in "$FP_AGENT" "$FP_AGENTCTL" "$FP_TRUTH"; do
    [[ -x $b ]] || fp_fail "missing binary $b (build first: cmake --build $FP_BUILD)"
  done
  [[ $(id -u) -eq 0 ]] || fp_log "warning: not running as root; profiling other processes may be refused"
}

# fp_timeout SECONDS CMD...: run CMD, killed after SECONDS (exit 124).
fp_timeout() {
  local secs=$1
  shift
  timeout --kill-after=5 "$secs" "$@"
}

# fp_wait_for SECONDS CMD...: poll CMD every 0.1 s until it succeeds; 1 if never.
fp_wait_for() {
  local secs=$1 deadline
  shift
  deadline=$((SECONDS + secs))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# fp_agent_supports FLAG: the agent's --help mentions FLAG. (Read whole
# first: grep -q leaving the pipe early let the agent's write fail with
# SIGPIPE, and pipefail then said no, now and then: a test's agent then
# ran on the default store, /var/lib/fleetprof-agent/agent.db, and read
# what earlier runs had left there.)
fp_agent_supports() {
  local help
  help=$(fp_timeout 10 "$FP_AGENT" --help 2>&1) || true
  grep -q -- "$1" <<<"$help"
}

# fp_start_agent [ARGS...]: run the agent in the foreground mode on $FP_SOCK,
# logging to $FP_TMP/agent.log; waits for the socket.  Sets FP_AGENT_PID.
fp_start_agent() {
  local args=(--foreground --socket "$FP_SOCK")
  # Keep the store in the test's directory when the agent has one.
  if fp_agent_supports --store; then
    args+=(--store "$FP_TMP/agent.db")
  fi
  rm -f "$FP_SOCK" # a socket left by an earlier agent of this test
  "$FP_AGENT" "${args[@]}" "$@" >"$FP_TMP/agent.log" 2>&1 &
  FP_AGENT_PID=$!
  fp_track "$FP_AGENT_PID"
  if ! fp_wait_for 15 test -S "$FP_SOCK"; then
    kill -0 "$FP_AGENT_PID" 2>/dev/null || fp_fail "the agent exited at start-up"
    fp_fail "the agent did not create its socket $FP_SOCK within 15 s"
  fi
  kill -0 "$FP_AGENT_PID" 2>/dev/null || fp_fail "the agent exited at start-up"
  fp_log "agent running, pid $FP_AGENT_PID, socket $FP_SOCK"
}

# fp_stop_agent: SIGTERM the agent and check that it exits 0 within 10 s.
fp_stop_agent() {
  local rc=0 i
  kill -TERM "$FP_AGENT_PID" 2>/dev/null || fp_fail "the agent (pid $FP_AGENT_PID) was already gone"
  for ((i = 0; i < 100; i++)); do
    [[ $(awk '{print $3}' "/proc/$FP_AGENT_PID/stat" 2>/dev/null) =~ ^(Z|)$ ]] && break
    sleep 0.1
  done
  ((i < 100)) || fp_fail "the agent did not exit within 10 s of SIGTERM"
  wait "$FP_AGENT_PID" || rc=$?
  fp_untrack "$FP_AGENT_PID"
  [[ $rc -eq 0 ]] || fp_fail "the agent exited with status $rc after SIGTERM (want 0)"
  FP_AGENT_PID=
}

# fp_ctl ARGS...: agentctl against the test's agent, bounded to 30 s.
fp_ctl() { fp_timeout 30 "$FP_AGENTCTL" --socket "$FP_SOCK" "$@"; }

# fp_python_recognised PID: the agent has recognised the CPython of its target
# PID (status --json's python.version).
fp_python_recognised() {
  fp_status_json | python3 -c 'import json,sys
t = [t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])]
sys.exit(0 if t and isinstance(t[0]["python"], dict) and t[0]["python"].get("version") else 1)' "$1"
}

# fp_status_json: print `agentctl status --json`, validated as JSON.
fp_status_json() {
  local out
  out=$(fp_ctl status --json) || fp_fail "agentctl status --json failed"
  python3 -c 'import json,sys; json.loads(sys.argv[1])' "$out" 2>/dev/null ||
    fp_fail "agentctl status --json printed something that is not JSON: $out"
  printf '%s\n' "$out"
}

# fp_target_field PID FIELD: that field of PID's entry in status --json,
# "absent" if PID is not listed, "null" if the field is missing.
fp_target_field() {
  fp_status_json | python3 -c '
import json, sys
d = json.load(sys.stdin)
pid, field = int(sys.argv[1]), sys.argv[2]
for t in d.get("targets", []):
    if t.get("pid") == pid:
        v = t.get(field)
        print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)
        break
else:
    print("absent")' "$1" "$2"
}

# fp_wait_samples_settle PID: wait (up to 20 s) until the sample count of
# PID in status stops changing, so the agent has read everything.
fp_wait_samples_settle() {
  local prev=-1 cur i
  for ((i = 0; i < 40; i++)); do
    cur=$(fp_target_field "$1" samples)
    [[ $cur == "$prev" ]] && break
    prev=$cur
    sleep 0.5
  done
}

# fp_perf_fds PID: how many perf_event file descriptors PID holds.
fp_perf_fds() {
  local n=0 fd link
  for fd in /proc/"$1"/fd/*; do
    link=$(readlink "$fd" 2>/dev/null) || continue
    [[ $link == "anon_inode:[perf_event]" ]] && n=$((n + 1))
  done
  echo "$n"
}

# fp_cpu_ns PID: the CPU time of all threads of PID so far, in nanoseconds
# (schedstat), for the benchmarks.
fp_cpu_ns() {
  local t sum=0 f
  for f in /proc/"$1"/task/*/schedstat; do
    read -r t _ <"$f" 2>/dev/null || continue
    sum=$((sum + t))
  done
  echo "$sum"
}

# fp_proc_state PID: the state letter of PID (R, S, Z...), empty if gone.
fp_proc_state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true; }

# fp_start_workload NAME OUTFILE READYFILE ARGS...: start a workload
# ($FP_BUILD/tests/NAME) in the background with --ready READYFILE, wait for
# READYFILE, and set FP_WL_PID.
fp_start_workload() {
  local name=$1 out=$2 ready=$3
  shift 3
  # A ready file left by an earlier run of the same name would be taken for this one's
  # (before it printed its pid: "printed pid ''").
  rm -f "$ready"
  "$FP_BUILD/tests/$name" --ready "$ready" "$@" >"$out" 2>"$out.err" &
  FP_WL_PID=$!
  fp_track "$FP_WL_PID"
  fp_wait_for 20 test -e "$ready" || fp_fail "$name did not become ready within 20 s: $(cat "$out.err")"
  [[ $(head -n1 "$out") == "$FP_WL_PID" ]] || fp_fail "$name printed pid '$(head -n1 "$out")', expected $FP_WL_PID"
}

# fp_pprof ARGS...: `go tool pprof` in an offline, private environment.
fp_pprof() {
  local h=$FP_TMP/gohome
  mkdir -p "$h/pprof"
  HOME=$h PPROF_TMPDIR=$h/pprof GOCACHE=$h/gocache GOPROXY=off GOTOOLCHAIN=local GOFLAGS= \
    fp_timeout 120 "${GO:-go}" tool pprof "$@"
}

# fp_pprofraw ARGS...: the profile checker (see pprofraw.py).
fp_pprofraw() { fp_timeout 150 python3 "$FP_PPROFRAW" "$@"; }

# fp_require_go: fail unless `go tool pprof` is usable.
fp_require_go() {
  command -v "${GO:-go}" >/dev/null || fp_fail "go is not installed; the profile checks need 'go tool pprof'"
}

# ---- the collector ----------------------------------------------------------

FP_COLLECTOR=$FP_BUILD/collector/fleetprof-collector
FP_COLL_PID=

# fp_free_port: a TCP port free on 127.0.0.1 right now.
fp_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# fp_start_collector URL ARGS...: starts the collector with ARGS (its
# --listen among them), logging to $FP_TMP/collector.log, and waits until
# URL/healthz answers (curl options for TLS: $FP_CURL_OPTS). Sets FP_COLL_PID.
fp_start_collector() {
  local url=$1
  shift
  "$FP_COLLECTOR" "$@" >>"$FP_TMP/collector.log" 2>&1 &
  FP_COLL_PID=$!
  fp_track "$FP_COLL_PID"
  # shellcheck disable=SC2086
  fp_wait_for 15 curl -sf ${FP_CURL_OPTS:-} "$url/healthz" -o /dev/null ||
    fp_fail "the collector did not come up: $(tail -5 "$FP_TMP/collector.log")"
}

# fp_stop_collector: SIGTERM (then SIGKILL) the collector fp_start_collector started.
fp_stop_collector() {
  [[ -n $FP_COLL_PID ]] && fp_kill "$FP_COLL_PID"
  FP_COLL_PID=
}

# fp_profile_total FILE [TYPE]: the sum of sample type TYPE (default
# samples) of a pprof file, as go tool pprof reads it.
fp_profile_total() {
  fp_pprof -raw -symbolize=none "$1" 2>/dev/null | python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
import pprofraw
print(pprofraw.parse(sys.stdin.read()).total(sys.argv[2]))' "$FP_SRC/tests/integration" "${2:-samples}"
}

# fp_json_get EXPR: evaluates the Python expression EXPR over the JSON on
# stdin (bound to d) and prints the result.
fp_json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# ---- ClickHouse -------------------------------------------------------------

FP_CH_PID=
FP_CH_PORT=

# fp_start_clickhouse DIR [HTTP_PORT]: Debian's clickhouse-server as an
# ordinary process with its data, logs and ports of its own (HTTP on
# HTTP_PORT or a free one: FP_CH_PORT), 127.0.0.1 only; waits until it
# answers. Sets FP_CH_PID. Restart it with the same DIR and FP_CH_PORT.
# With FP_CH_ZSTD=1 its parts are compressed with zstd rather than LZ4 (a
# copy of Debian's configuration, and in its config.d the <compression>
# that docs/clickhouse.md recommends).
fp_start_clickhouse() {
  local dir=$1 tcp inter config=/etc/clickhouse-server/config.xml
  FP_CH_PORT=${2:-$(fp_free_port)}
  tcp=$(fp_free_port)
  inter=$(fp_free_port)
  command -v clickhouse-server >/dev/null ||
    fp_fail "clickhouse-server is not installed (bash scripts/deps.sh installs it)"
  mkdir -p "$dir/tmp" "$dir/user_files" "$dir/format_schemas"
  if [[ ${FP_CH_ZSTD:-0} == 1 ]]; then
    mkdir -p "$dir/etc/config.d"
    cp "$config" /etc/clickhouse-server/users.xml "$dir/etc/"
    echo '<yandex><compression><case><method>zstd</method></case></compression></yandex>' \
      >"$dir/etc/config.d/zstd.xml"
    config=$dir/etc/config.xml
  fi
  (cd "$dir" && exec clickhouse-server --config-file="$config" -- \
    --path="$dir/" --tmp_path="$dir/tmp/" --user_files_path="$dir/user_files/" \
    --format_schema_path="$dir/format_schemas/" --listen_host=127.0.0.1 \
    --http_port="$FP_CH_PORT" --tcp_port="$tcp" --interserver_http_port="$inter" \
    --logger.log="$dir/server.log" --logger.errorlog="$dir/error.log" --logger.console=0 \
    >>"$dir/console.log" 2>&1) &
  FP_CH_PID=$!
  fp_track "$FP_CH_PID"
  fp_wait_for 60 curl -sf "http://127.0.0.1:$FP_CH_PORT/ping" -o /dev/null ||
    fp_fail "clickhouse-server did not come up: $(tail -3 "$dir/error.log" "$dir/console.log" 2>/dev/null)"
}

# fp_stop_clickhouse: stops the server fp_start_clickhouse started.
fp_stop_clickhouse() {
  [[ -n $FP_CH_PID ]] && fp_kill "$FP_CH_PID"
  FP_CH_PID=
}

# fp_ch_query SQL: runs SQL on the test's ClickHouse, prints the answer (TSV).
fp_ch_query() { curl -sf --data-binary "$1" "http://127.0.0.1:$FP_CH_PORT/"; }

# fp_interp_switch LANG NAMED EVAL CMD...: an interpreter's own switch
# (agentctl start's --no-LANG, LANG php, ruby or perl) turns off that one
# interpreter only: CMD (a program of LANG that runs 2 s once its last
# argument, a file, appears) started twice, as a target with the other
# interpreters' switches (its samples still carry NAMED, a frame of the
# language) and as one with --no-LANG (NAMED nowhere; EVAL, the
# interpreter's own eval frame, in most of its samples).
fp_interp_switch() {
  local lang=$1 named=$2 eval=$3 others="" l pid_on pid_off
  shift 3
  for l in python php ruby perl; do [[ $l == "$lang" ]] || others+=" --no-$l"; done
  "$@" "$FP_TMP/switch-on.json" 2 "$FP_TMP/switch.go" &
  pid_on=$!
  "$@" "$FP_TMP/switch-off.json" 2 "$FP_TMP/switch.go" &
  pid_off=$!
  fp_track "$pid_on" "$pid_off"
  # shellcheck disable=SC2086
  fp_ctl start "$pid_on" --freq 499 $others >/dev/null || fp_fail "start $others failed"
  fp_ctl start "$pid_off" --freq 499 "--no-$lang" >/dev/null || fp_fail "start --no-$lang failed"
  touch "$FP_TMP/switch.go"
  fp_wait_for 30 test -e "$FP_TMP/switch-on.json" -a -e "$FP_TMP/switch-off.json" ||
    fp_fail "the $lang programs of the switches wrote no times"
  sleep 0.3
  fp_ctl dump "$pid_on" --format folded >"$FP_TMP/switch-on.folded" || fp_fail "dump $pid_on failed"
  fp_ctl dump "$pid_off" --format folded >"$FP_TMP/switch-off.folded" || fp_fail "dump $pid_off failed"
  grep -qF "$named" "$FP_TMP/switch-on.folded" ||
    fp_fail "with$others, the $lang program has no $named: $(head -c 400 "$FP_TMP/switch-on.folded")"
  ! grep -qF "$named" "$FP_TMP/switch-off.folded" ||
    fp_fail "with --no-$lang, the $lang program still has $named"
  local n_eval n_all
  n_eval=$(awk -v e="$eval" 'index($0, e) {n += $NF} END {print n + 0}' "$FP_TMP/switch-off.folded")
  n_all=$(awk '{n += $NF} END {print n + 0}' "$FP_TMP/switch-off.folded")
  ((n_all > 200 && n_eval * 2 > n_all)) ||
    fp_fail "with --no-$lang, $n_eval of $n_all samples in $eval"
  fp_ok "--no-$lang: $n_eval of $n_all samples in $eval and none named $named; with$others, $named named"
}
