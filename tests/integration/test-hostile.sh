#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Attacks by an unprivileged local user (nobody) on the root agent, each
# shown to fail while the agent keeps serving (see docs/security.md).
# The machine's perf_event_paranoid is set to 2 (Linux's default) for the
# test and put back after.
#
# 1. Kernel addresses for anyone: nobody's `start --kernel` on its own
#    process is refused (at paranoid 2 the kernel gives kernel-mode samples
#    only to CAP_PERFMON); so is a rule with --kernel. Its plain `start`
#    is granted user mode only: the target says kernel_excluded, and a
#    process that lives in the kernel (dd from /dev/zero) shows no [kernel]
#    frame in nobody's dump, while root's own dd does.
# 2. Credentials in the collector URL: nobody's status (text and JSON)
#    shows the URL without "user:password@"; root's shows it whole.
# 3. Connections: nobody holding 16 idle connections gets "too many
#    connections of your user" for the next, while root is still served.
# 3b. A library swapped under the agent: nobody's process, once profiled,
#    maps its own copy of libz, then renames its directory and puts there
#    a symlink to a directory only root may read (holding libbz2 by the
#    same name), or puts a FIFO in the library's place: the agent reads
#    neither (only a file with the mapping's device and inode), names the
#    hot frames crc32 from libz, never BZ2_ from the secret, and keeps
#    answering.
# 3c. Ownership is checked again at exec: nobody's process, profiled at
#    nobody's request, execs a set-user-ID root copy of spin: nothing of
#    it is kept (no spin frame in root's dump), the agent stops the target
#    and says why, and nobody can no longer dump that PID. The same exec
#    under a target root asked for goes on being profiled, also when a
#    restarted agent resumed that target from its store.
# 3d. Stored samples are matched by PID and start time: once nobody's
#    process has a PID that root's exited target had, nobody's dump of it
#    holds none of root's samples.
# 3e. A file slow to read: nobody's process runs in a file of its own
#    whose symbol table holds 6 million symbols (210 MB, seconds of
#    parsing), and a copy of it, each mapped twice: the agent reads each
#    once, one after the other on one loader thread, answers every status
#    meanwhile (which shows the files being read), names root's process
#    started meanwhile (its files on the same disk) on the other loader,
#    and names nobody's code once the tables are in.
# 3f. Answers nobody reads: nobody asks for dumps of its process on one
#    connection after another and reads none: once more than 4 MiB of
#    answers sit unread, the next command is refused in one line (root is
#    still served); of three dumps sent at once the third is refused (two
#    commands under way per user); once nobody reads, it is served.
# 4. Growth: nobody's process of 40 threads against an agent with
#    --max-threads 16: 16 are sampled, the other 25 counted in status
#    (text and JSON) and logged once, and the agent still answers root.
#    Nobody's 20 short-lived processes, each profiled by PID: once exited
#    and --keep-exited (3 s) past, the agent has forgotten every one (with
#    no other target running, so no other bucket's write to wait for).
#    Nobody's 70 processes: 64 are profiled, the 65th is refused in one
#    line, and root may still start more.
#
# And the collector against its network:
# 5. Reads need --read-token-file's token when it is set: no token or a
#    wrong one is 401 (JSON, series, profile, the /series page, metrics),
#    the bearer token or the page's cookie is let in, /healthz and the
#    page's own files stay open; the page (in chromium) asks for the token
#    once and then draws. Without it, listening beyond loopback warns.
# 6. Uploads without the token: 20 clients at once claim and push 15 MiB
#    bodies (under --max-body-mb): every one gets 401 from its headers, its
#    body unread (the collector's memory does not grow by what they sent).
# 7. Heads the collector could read otherwise than the gate: a body on
#    HEAD or GET, two Content-Lengths, a signed one, a NUL in a header
#    name, a chunked upload without the token, a 70 KiB head, a forged
#    gate mark, and an upload without the token pipelined after a good
#    request: each refused, the good request answered.
# 8. Slow and many clients: a head trickled a byte a second is closed
#    5 s after its accept while others are served; past
#    --max-connections-per-ip 429 (Retry-After), other addresses still
#    served; past --max-connections a newcomer sheds a connection that
#    never sent a head, and only when all are uploads under way gets 503,
#    far past it closed at once; served again once they go (the flood of
#    many addresses: test-flood.sh).
# 9. A gzip bomb (400 MiB of zeros): decoded on the decoder thread, so
#    /metrics keeps answering while it is decoded (and shows it queued);
#    then refused with 400.
# 10. A read's cost is bounded: with --max-read-ms 1, merging 30 uploads of
#    20,000 samples is stopped and answered 503 (saying why) while
#    /healthz and uploads go on; with the default budget it is answered.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 480
if [[ $(id -u) -ne 0 ]] || ! command -v setpriv >/dev/null; then
  fp_log "SKIP: needs root and setpriv"
  exit 0
fi
PARANOID=$(cat /proc/sys/kernel/perf_event_paranoid)
fp_on_exit 'echo "$PARANOID" >/proc/sys/kernel/perf_event_paranoid'
echo 2 >/proc/sys/kernel/perf_event_paranoid

DEAD=$(fp_free_port)
AGENT_ARGS=(--bucket 1 --collector "http://fpuser:s3cret@127.0.0.1:$DEAD" --upload-interval 5
  --max-threads 16 --keep-exited 3)
fp_start_agent "${AGENT_ARGS[@]}"
install -m 0755 "$FP_AGENTCTL" "$FP_TMP/agentctl"
asnobody=(fp_timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups "$FP_TMP/agentctl" --socket "$FP_SOCK")
refused() { # refused WHAT WANT CMD...: exit 1, one line containing WANT
  local what=$1 want=$2 rc=0 msg
  shift 2
  msg=$("$@" 2>&1) || rc=$?
  [[ $rc -eq 1 && $msg == *"$want"* && $(wc -l <<<"$msg") -eq 1 ]] || fp_fail "$what: rc $rc, '$msg'"
  fp_ok "$what: $msg"
}

# nobodys PID: waits until setpriv's child is nobody's (setpriv runs as root a moment: a start
# of nobody's before that is refused as another user's).
nobodys() { fp_wait_for 10 sh -c "[ \"\$(stat -c %u /proc/$1 2>/dev/null)\" = 65534 ]"; }

# ---- 1. kernel addresses -------------------------------------------------------------
setpriv --reuid=65534 --regid=65534 --clear-groups dd if=/dev/zero of=/dev/null bs=64k &
NP=$!
fp_track "$NP"
dd if=/dev/zero of=/dev/null bs=64k &
RP=$!
fp_track "$RP"
sleep 0.3
nobodys "$NP" || fp_fail "dd did not become nobody's"
refused "nobody's start --kernel" "need CAP_PERFMON" "${asnobody[@]}" start "$NP" --kernel
refused "nobody's rule with --kernel" "need CAP_PERFMON" "${asnobody[@]}" start --name '^dd$' --kernel
[[ $(fp_status_json | fp_json_get 'len(d["rules"])') == 0 ]] || fp_fail "nobody's --kernel rule was added"
"${asnobody[@]}" start "$NP" --freq 499 >/dev/null
fp_ctl start "$RP" --freq 499 --kernel >/dev/null
[[ $(fp_target_field "$NP" kernel_excluded) == true ]] || fp_fail "nobody's target samples kernel mode"
[[ $(fp_target_field "$RP" kernel_excluded) == false ]] || fp_fail "root's target lost kernel mode"
sleep 2
"${asnobody[@]}" dump "$NP" --format folded >"$FP_TMP/nobody.folded"
fp_ctl dump "$RP" --format folded >"$FP_TMP/root.folded"
grep -q '\[kernel\]\|vfs_\|__x64_sys\|entry_SYSCALL' "$FP_TMP/nobody.folded" &&
  fp_fail "nobody's profile holds kernel frames: $(grep -m2 'kernel\|sys' "$FP_TMP/nobody.folded")"
grep -q 'entry_SYSCALL\|__x64_sys\|\[kernel\]' "$FP_TMP/root.folded" || fp_fail "root's --kernel profile has no kernel frame"
fp_ok "nobody gets user mode only ($(wc -l <"$FP_TMP/nobody.folded") stacks, no kernel frame); root's dd shows the kernel"

# ---- 2. credentials in the collector URL -------------------------------------------------
fp_ctl flush >/dev/null 2>&1 || true # a failing round: its error names the URL
"${asnobody[@]}" status >"$FP_TMP/nobody.status"
"${asnobody[@]}" status --json >"$FP_TMP/nobody.json"
fp_ctl status >"$FP_TMP/root.status"
grep -q s3cret "$FP_TMP/nobody.status" "$FP_TMP/nobody.json" && fp_fail "nobody sees the collector's password: $(grep -h s3cret "$FP_TMP"/nobody.*)"
grep -q "http://127.0.0.1:$DEAD" "$FP_TMP/nobody.status" || fp_fail "nobody's status lost the collector's address"
grep -q s3cret "$FP_TMP/root.status" || fp_fail "root's status lost the URL"
fp_ok "nobody's status: $(grep -m1 '^upload' "$FP_TMP/nobody.status")"

# ---- 3. connections --------------------------------------------------------------------------
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import socket, sys, time
socks = []
for i in range(16):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    socks.append(s)
print("held", flush=True)
time.sleep(25)' "$FP_SOCK" >"$FP_TMP/held" &
HOLDER=$!
fp_track "$HOLDER"
fp_wait_for 10 grep -q held "$FP_TMP/held" || fp_fail "could not hold connections"
refused "nobody's 17th connection" "too many connections of your user" "${asnobody[@]}" status
fp_ctl status >/dev/null || fp_fail "root is not served while nobody holds connections"
fp_kill "$HOLDER"
fp_wait_for 10 "${asnobody[@]}" status >/dev/null || fp_fail "nobody is not served once its connections closed"
fp_ok "nobody's idle connections are bounded; root is served meanwhile"

# ---- 3b. a library swapped under the agent --------------------------------------------
LIBDIR=/usr/lib/x86_64-linux-gnu
install -d -m 0777 "$FP_TMP/nb"
install -d -m 0700 "$FP_TMP/secret"
install -m 0600 "$LIBDIR/libbz2.so.1.0" "$FP_TMP/secret/lib.so"
swapped() { # swapped KIND: nobody's process maps its libz once profiled, then swaps its path
  local kind=$1 dir=$FP_TMP/nb/$1
  rm -f "$FP_TMP/nb/ready-$kind" "$FP_TMP/nb/go-$kind"
  setpriv --reuid=65534 --regid=65534 --clear-groups mkdir "$dir"
  setpriv --reuid=65534 --regid=65534 --clear-groups cp "$LIBDIR/libz.so.1" "$dir/lib.so"
  setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import ctypes, os, sys, time
d, secret, kind, ready, go = sys.argv[1:6]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.05)
z = ctypes.CDLL(d + "/lib.so")  # the MMAP2 record names d/lib.so
if kind == "symlink":           # the file lives on as d.moved/lib.so; d/lib.so is root-only
    os.rename(d, d + ".moved")
    os.symlink(secret, d)
else:                           # a FIFO where the library was
    os.unlink(d + "/lib.so")
    os.mkfifo(d + "/lib.so")
b = b"x" * (1 << 20)
while True:
    z.crc32(0, b, len(b))' "$dir" "$FP_TMP/secret" "$kind" "$FP_TMP/nb/ready-$kind" "$FP_TMP/nb/go-$kind" &
  SWAPPED=$!
  fp_track "$SWAPPED"
  fp_wait_for 10 test -e "$FP_TMP/nb/ready-$kind" || fp_fail "nobody's libz loop did not start"
  "${asnobody[@]}" start "$SWAPPED" --freq 499 >/dev/null || fp_fail "nobody could not start its $kind process"
  touch "$FP_TMP/nb/go-$kind"
  sleep 2
  fp_timeout 10 "$FP_AGENTCTL" --socket "$FP_SOCK" status >/dev/null || fp_fail "the agent stopped answering ($kind)"
  "${asnobody[@]}" dump "$SWAPPED" --format folded >"$FP_TMP/swapped-$kind.folded"
  grep -q 'BZ2_' "$FP_TMP/swapped-$kind.folded" &&
    fp_fail "the agent read the root-only file in nobody's name ($kind): $(grep -m1 -o 'BZ2_[A-Za-z_]*' "$FP_TMP/swapped-$kind.folded")"
  grep -q 'crc32' "$FP_TMP/swapped-$kind.folded" ||
    fp_fail "the mapped libz was not read ($kind): $(sort -t' ' -k2 -n "$FP_TMP/swapped-$kind.folded" | tail -2)"
  fp_ctl stop "$SWAPPED" >/dev/null || true
  fp_kill "$SWAPPED"
}
swapped symlink
swapped fifo
fp_ok "libz's path swapped after it was mapped (its directory for a symlink to a root-only one, or the file for a FIFO): the agent read the mapped libz (crc32), never the secret, and answers"

# ---- 3c. ownership checked again at exec -----------------------------------------------
install -m 4755 -o root -g root "$FP_SPIN" "$FP_TMP/spin-suid"
exec_suid() { # exec_suid WHO [restart]: nobody's shell, started by WHO, execs the set-user-ID spin
  local who=$1 restart=${2:-}
  rm -f "$FP_TMP/nb/go-$who"
  setpriv --reuid=65534 --regid=65534 --clear-groups sh -c \
    'while [ ! -e "$1" ]; do sleep 0.05; done; exec "$2" --threads 1 --seconds 6' sh \
    "$FP_TMP/nb/go-$who" "$FP_TMP/spin-suid" &
  SUID=$!
  fp_track "$SUID"
  sleep 0.3
  if [[ $who == nobody ]]; then
    "${asnobody[@]}" start "$SUID" --freq 499 >/dev/null || fp_fail "nobody could not start its shell"
  else
    fp_ctl start "$SUID" --freq 499 >/dev/null || fp_fail "root could not start nobody's shell"
  fi
  if [[ -n $restart ]]; then # the agent restarts and resumes the target from its store
    sleep 1.5
    fp_stop_agent
    fp_start_agent "${AGENT_ARGS[@]}"
    fp_wait_for 10 grep -q "resumed profiling $SUID" "$FP_TMP/agent.log" ||
      fp_fail "the restarted agent did not resume $SUID: $(cat "$FP_TMP/agent.log")"
  fi
  touch "$FP_TMP/nb/go-$who"
  fp_wait_for 5 sh -c "[ \"\$(stat -c %u /proc/$SUID)\" = 0 ]" || fp_fail "the set-user-ID spin did not start"
  sleep 3
}
exec_suid nobody
fp_wait_for 5 grep -q "Stopped profiling $SUID .*another user" "$FP_TMP/agent.log" ||
  fp_fail "the agent did not stop nobody's target after its set-user-ID exec: $(tail -3 "$FP_TMP/agent.log")"
[[ -z $(fp_status_json | fp_json_get "[t for t in d['targets'] if t['pid'] == $SUID]") || \
  $(fp_status_json | fp_json_get "[t for t in d['targets'] if t['pid'] == $SUID]") == "[]" ]] ||
  fp_fail "nobody's target is still listed after its set-user-ID exec"
refused "nobody's dump after the exec" "not being profiled" "${asnobody[@]}" dump "$SUID" --format folded
fp_ctl dump "$SUID" --format folded >"$FP_TMP/suid-nobody.folded" 2>&1 || true
grep -q spin_inner "$FP_TMP/suid-nobody.folded" &&
  fp_fail "samples of the set-user-ID program were kept for nobody's target: $(grep -c spin_inner "$FP_TMP/suid-nobody.folded")"
fp_kill "$SUID"
exec_suid root
fp_ctl dump "$SUID" --format folded >"$FP_TMP/suid-root.folded" || fp_fail "root's dump failed"
grep -q spin_inner "$FP_TMP/suid-root.folded" || fp_fail "root's target lost the set-user-ID program: $(head -3 "$FP_TMP/suid-root.folded")"
fp_ctl stop "$SUID" >/dev/null || true
fp_kill "$SUID"
exec_suid root restart
fp_ctl dump "$SUID" --format folded >"$FP_TMP/suid-resumed.folded" || fp_fail "root's dump failed"
grep -q spin_inner "$FP_TMP/suid-resumed.folded" ||
  fp_fail "root's target, resumed by a restarted agent, lost the set-user-ID program: $(tail -3 "$FP_TMP/agent.log")"
fp_ctl stop "$SUID" >/dev/null || true
fp_kill "$SUID"
fp_ok "a set-user-ID exec under nobody's target: nothing kept, target stopped and logged, nobody's dump refused; under root's, profiled on, also once resumed by a restarted agent"

# ---- 3d. stored samples matched by PID and start time ------------------------------------
"$FP_SPIN" --threads 1 --seconds 2 --ready "$FP_TMP/rootspin.ready" >/dev/null &
ROOTSPIN=$!
fp_track "$ROOTSPIN"
fp_wait_for 5 test -e "$FP_TMP/rootspin.ready" || fp_fail "root's spin did not start"
fp_ctl start "$ROOTSPIN" --freq 499 >/dev/null || fp_fail "root could not profile its spin"
wait "$ROOTSPIN" || true
fp_untrack "$ROOTSPIN"
sleep 2.5 # its last bucket stored
grep -q spin_inner <<<"$(fp_ctl dump "$ROOTSPIN" --format folded)" || fp_fail "root's exited spin is not in the store"
reused=
for _ in 1 2 3 4 5 6 7 8; do # the next fork gets ROOTSPIN's PID (ns_last_pid), as nobody's
  echo $((ROOTSPIN - 1)) >/proc/sys/kernel/ns_last_pid
  setpriv --reuid=65534 --regid=65534 --clear-groups sleep 20 &
  p=$!
  fp_track "$p"
  if [[ $p == "$ROOTSPIN" ]]; then
    reused=$p
    break
  fi
  fp_kill "$p"
done
[[ -n $reused ]] || fp_fail "could not give nobody's process PID $ROOTSPIN"
"${asnobody[@]}" dump "$reused" --format folded >"$FP_TMP/reused.folded" 2>&1 || true
grep -q spin_inner "$FP_TMP/reused.folded" &&
  fp_fail "nobody's dump of PID $reused holds root's earlier process: $(grep -m1 spin_inner "$FP_TMP/reused.folded" | cut -c1-120)"
"${asnobody[@]}" start "$reused" --freq 499 >"$FP_TMP/reused.start" 2>&1 ||
  fp_fail "nobody could not profile its own process at a PID root's exited target had: $(cat "$FP_TMP/reused.start")"
sleep 1.5
"${asnobody[@]}" dump "$reused" --format folded >"$FP_TMP/reused.folded" 2>&1 || true
grep -q spin_inner "$FP_TMP/reused.folded" &&
  fp_fail "nobody's profile of PID $reused holds root's earlier process: $(grep -m1 spin_inner "$FP_TMP/reused.folded" | cut -c1-120)"
grep -q spin_inner <<<"$(fp_ctl dump "$reused" --format folded)" || fp_fail "root's dump of PID $reused lost root's earlier process"
fp_ctl stop "$reused" >/dev/null || true
fp_kill "$reused"
fp_ok "PID $ROOTSPIN reused by nobody: nobody may profile its process there, and its dumps hold none of root's earlier process (root's still do)"

# ---- 3e. a file slow to read ---------------------------------------------------------------
python3 "$(dirname "$0")/bigsyms.py" write "$FP_TMP/nb/big.so" 6000000
cp "$FP_TMP/nb/big.so" "$FP_TMP/nb/big2.so" # another file (inode), the same cost
chown 65534:65534 "$FP_TMP/nb/big.so" "$FP_TMP/nb/big2.so"
install -m 0755 "$(dirname "$0")/bigsyms.py" "$FP_TMP/bigsyms.py"
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 "$FP_TMP/bigsyms.py" run \
  "$FP_TMP/nb/big.so" "$FP_TMP/nb/big2.so" &
BIG=$!
fp_track "$BIG"
fp_wait_for 10 grep -q big2.so "/proc/$BIG/maps" || fp_fail "nobody's process did not map its files"
"${asnobody[@]}" start "$BIG" --freq 499 >/dev/null
loading() { fp_timeout 2 "$FP_AGENTCTL" --socket "$FP_SOCK" status --json | fp_json_get 'd["symbol_files_loading"]'; }
being_read() { [[ $(loading) -ge 1 ]]; }
fp_wait_for 20 being_read || fp_fail "status never showed big.so being read"
# Meanwhile root's process, its files on the same disk, is named as usual:
# nobody's two files take one loader, one after the other.
"$FP_SPIN" --threads 1 --seconds 30 >/dev/null &
OTHER=$!
fp_track "$OTHER"
fp_ctl start "$OTHER" --freq 499 >/dev/null
sleep 1.5
fp_ctl dump "$OTHER" --format folded >"$FP_TMP/other.folded"
[[ $(loading) -ge 1 ]] || fp_fail "big.so was read before root's process was dumped: the test shows nothing"
grep -q spin_inner "$FP_TMP/other.folded" ||
  fp_fail "root's process is not named while big.so is read: $(head -c 300 "$FP_TMP/other.folded")"
fp_ctl stop "$OTHER" >/dev/null
fp_kill "$OTHER"
for _ in $(seq 1 600); do # the loop answers every status while the file is read
  n=$(loading) || fp_fail "the agent did not answer status within 2 s while reading big.so"
  [[ $n == 0 ]] && break
  sleep 0.2
done
for f in big.so big2.so; do
  fp_wait_for 120 grep -q "read /proc/[0-9]*/root.*/$f in [0-9]* ms" "$FP_TMP/agent.log" ||
    fp_fail "$f was never read: $(grep big "$FP_TMP/agent.log")"
  [[ $(grep -c "read /proc/[0-9]*/root.*/$f in" "$FP_TMP/agent.log") == 1 ]] ||
    fp_fail "$f's two mappings read it more than once: $(grep big "$FP_TMP/agent.log")"
done
fp_wait_for 10 sh -c "'$FP_AGENTCTL' --socket '$FP_SOCK' dump $BIG --since 2s --format folded | grep -q bigsyms_spin" ||
  fp_fail "big.so's loop is not named once read: $(fp_ctl dump "$BIG" --format folded | cut -c1-200)"
fp_ctl stop "$BIG" >/dev/null || true
fp_kill "$BIG"
fp_ok "two 6-million-symbol files are read off the loop: status answered throughout ($(grep -o 'big2*.so in [0-9]* ms' "$FP_TMP/agent.log" | paste -sd, -)), root's process was named meanwhile, and nobody's code is named once read"

# ---- 3f. answers nobody reads ------------------------------------------------------------------
install -m 0755 "$FP_BUILD/tests/manystacks" "$(dirname "$0")/ctlflood.py" "$FP_TMP/"
setpriv --reuid=65534 --regid=65534 --clear-groups "$FP_TMP/manystacks" --threads 2 --depth 8 \
  --seconds 120 >"$FP_TMP/nb/ms.out" &
MS=$!
fp_track "$MS"
nobodys "$MS" || fp_fail "manystacks did not become nobody's"
"${asnobody[@]}" start "$MS" --freq 999 >/dev/null || fp_fail "nobody could not start its manystacks"
sleep 10 # its profile grows to hundreds of KiB of folded stacks
flood() { setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 "$FP_TMP/ctlflood.py" "$@"; }
flood unread "$FP_SOCK" "$MS" 15 >"$FP_TMP/unread.json"
last=$(fp_json_get 'd["answers"][-1]' <"$FP_TMP/unread.json")
held=$(fp_json_get 'd["held"]' <"$FP_TMP/unread.json")
[[ $last == *"earlier answers hold"*"unread: read them first"* ]] ||
  fp_fail "nobody's unread dumps were never refused: $(cat "$FP_TMP/unread.json")"
fp_ctl status >/dev/null || fp_fail "root is not served while nobody's answers sit unread"
flood burst "$FP_SOCK" "$MS" 10 >"$FP_TMP/burst.json"
[[ $(fp_json_get 'd["refused"]' <"$FP_TMP/burst.json") -ge 1 ]] ||
  fp_fail "three dumps at once were never refused: $(cat "$FP_TMP/burst.json")"
"${asnobody[@]}" dump "$MS" --format folded >/dev/null || fp_fail "nobody's own dump is refused once it reads"
fp_ctl stop "$MS" >/dev/null || true
fp_kill "$MS"
fp_ok "nobody's unread answers are bounded: $held dumps held unread, then '$last'; three at once: $(fp_json_get 'd["refused"]' <"$FP_TMP/burst.json") of 10 tries had one refused"

# ---- 4. a thread limit and the agent still serves ----------------------------------------------
install -d -m 0777 "$FP_TMP/nobody"
setpriv --reuid=65534 --regid=65534 --clear-groups "$FP_BUILD/tests/spin" --threads 40 --seconds 60 \
  --duty 0.05 --ready "$FP_TMP/nobody/many.ready" >/dev/null 2>&1 &
MP=$!
fp_track "$MP"
fp_wait_for 20 test -e "$FP_TMP/nobody/many.ready" || fp_fail "the 40-thread workload did not start"
"${asnobody[@]}" start "$MP" >/dev/null || fp_fail "nobody could not profile its own 40 threads"
live=$(fp_target_field "$MP" threads) over=$(fp_target_field "$MP" threads_over_limit)
[[ $live == 16 && $over == 25 ]] || fp_fail "--max-threads 16 of 41 threads: $live sampled, $over counted"
grep -q "^$MP: 25 threads not sampled: --max-threads 16 were" <<<"$(fp_ctl status)" ||
  fp_fail "status does not say what --max-threads left out: $(fp_ctl status)"
[[ $(grep -c "$MP (spin): 16 threads are sampled" "$FP_TMP/agent.log") == 1 ]] ||
  fp_fail "the limit is not logged once: $(grep -c "$MP (spin)" "$FP_TMP/agent.log")"
fp_kill "$MP"
fp_ok "--max-threads 16: nobody's 41 threads give 16 sampled, 25 counted and logged once"
fp_ctl status >/dev/null || fp_fail "the agent stopped answering"
fp_kill "$NP"
fp_kill "$RP"
fp_ok "the agent still answers"

sleepers() { # sleepers N SECS: N sleep processes of nobody's, their PIDs in SLEEPERS
  SLEEPERS=()
  for _ in $(seq "$1"); do
    setpriv --reuid=65534 --regid=65534 --clear-groups sleep "$2" &
    SLEEPERS+=($!)
    fp_track "$!"
  done
  for p in "${SLEEPERS[@]}"; do nobodys "$p" || fp_fail "sleep $p did not become nobody's"; done
}
# Alive long enough for 20 starts one after the other: under ASan beside a
# CPU-bound job they took 2.9 s, and 3 s sleepers left 6 unprofiled.
sleepers 20 6
short=("${SLEEPERS[@]}")
for p in "${short[@]}"; do
  "${asnobody[@]}" start "$p" >/dev/null 2>&1 || true
done
listed() { fp_status_json | python3 -c '
import json, sys
d = json.load(sys.stdin)
want = set(int(x) for x in sys.argv[1:])
print(sum(1 for t in d["targets"] if t["pid"] in want))' "${short[@]}"; }
n_listed=$(listed)
((n_listed >= 15)) || fp_fail "only $n_listed of nobody's 20 short processes were profiled"
for p in "${short[@]}"; do wait "$p" 2>/dev/null || true; fp_untrack "$p"; done
for _ in $(seq 30); do
  [[ $(listed) == 0 ]] && break
  sleep 0.5
done
[[ $(listed) == 0 ]] || fp_fail "$(listed) of nobody's exited targets are still kept after --keep-exited 3"
fp_ok "nobody's $n_listed exited short-lived targets forgotten after --keep-exited"
sleepers 65 60
many=("${SLEEPERS[@]}")
for p in "${many[@]:0:64}"; do
  "${asnobody[@]}" start "$p" >/dev/null || fp_fail "nobody could not profile its process $p"
done
refused "nobody's 65th target" "too many targets" "${asnobody[@]}" start "${many[64]}"
fp_ctl start "${many[64]}" >/dev/null || fp_fail "root could not profile past nobody's limit"
for p in "${many[@]}"; do fp_ctl stop "$p" >/dev/null 2>&1 || true; fp_kill "$p"; done
fp_ok "nobody's targets are bounded at 64; root is not"

# ---- 5. the collector's reads --------------------------------------------------------------
printf 'r34d-t0k3n\n' >"$FP_TMP/read.token"
printf 'wr1te\n' >"$FP_TMP/write.token"
PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/c.db" \
  --token-file "$FP_TMP/write.token" --read-token-file "$FP_TMP/read.token"
python3 "$FP_SRC/tests/integration/mkpprof.py" good "$FP_TMP/up.pb.gz" --stacks 20 --samples 500
now=$(date +%s%N)
curl -sf -H "Authorization: Bearer wr1te" --data-binary @"$FP_TMP/up.pb.gz" \
  "$URL/api/v1/ingest?host=h&pid=7&starttime=1&event=cpu-clock&from=$((now - 5000000000))&to=$now" >/dev/null ||
  fp_fail "the upload with the write token failed"
code() { curl -s -o "$FP_TMP/body" -w '%{http_code}' "$@"; }
for path in /api/v1/series /api/v1/profile /api/v1/flamegraph /series /metrics; do
  [[ $(code "$URL$path") == 401 ]] || fp_fail "$path without the read token: $(cat "$FP_TMP/body")"
  [[ $(code -H "Authorization: Bearer wr1te" "$URL$path") == 401 ]] || fp_fail "$path with the write token was let in"
  [[ $(code -H "Authorization: Bearer r34d-t0k3n" "$URL$path") == 200 ]] || fp_fail "$path with the read token: $(cat "$FP_TMP/body")"
done
[[ $(code -H "Cookie: a=b; fleetprof_read=r34d-t0k3n" "$URL/api/v1/series") == 200 ]] || fp_fail "the read cookie was refused"
[[ $(code -H "Cookie: fleetprof_read=nope" "$URL/api/v1/series") == 401 ]] || fp_fail "a wrong cookie was let in"
for path in /healthz / /ui/app.js; do
  [[ $(code "$URL$path") == 200 ]] || fp_fail "$path is not open"
done
fp_ok "reads need the read token (bearer or cookie); the write token is not one; /healthz and the page's files stay open"
PW=/var/cache/fleetprof-test/node_modules
out=$(fp_timeout 60 env NODE_PATH="$PW" node "$FP_SRC/tests/integration/weblogin.js" "$URL" r34d-t0k3n) ||
  fp_fail "the browser login failed"
python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["askedBefore"] and not o["askedAfter"], o
assert int(o["total"]) > 0 and "read token" in o["statusBefore"], o
' "$out" || fp_fail "the page's login: $out"
fp_ok "the page asks for the read token once, then draws: $out"
fp_stop_collector
WPORT=$(fp_free_port)
"$FP_COLLECTOR" --listen "0.0.0.0:$WPORT" --store "$FP_TMP/c2.db" >"$FP_TMP/open.log" 2>&1 &
OPEN=$!
fp_track "$OPEN"
fp_wait_for 10 curl -sf "http://127.0.0.1:$WPORT/healthz" -o /dev/null || fp_fail "the open collector did not start"
grep -q "reads are open" "$FP_TMP/open.log" || fp_fail "no warning for open reads on 0.0.0.0: $(cat "$FP_TMP/open.log")"
grep -q "reads are open" "$FP_TMP/collector.log" && fp_fail "a warning for reads on loopback"
fp_kill "$OPEN"
fp_ok "listening beyond loopback without --read-token-file warns"

# ---- 6-9. the collector against hostile clients ------------------------------------------
ATTACK=$FP_SRC/tests/integration/netattack.py
PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/c3.db" \
  --token-file "$FP_TMP/write.token" --max-connections 6 --max-connections-per-ip 4 --max-profile-mb 512
out=$(fp_timeout 60 python3 "$ATTACK" bodies "$PORT" "$FP_COLL_PID" 20 15) || fp_fail "the body attack failed: $out"
python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert len(o["results"]) == 20, o
for r in o["results"]:
    assert r["status"] == 401 and "the body was not read" in r["answer"], r
    assert r["sent"] < 15 << 20, r  # the collector closed before taking it all
grew = o["rss_peak_kib"] - o["rss_before_kib"]
assert grew < 16 * 1024, o          # 20 x 15 MiB were offered
assert o["healthz"] == 200, o
print("rss +%d KiB, sent %d KiB at most" % (grew, max(r["sent"] for r in o["results"]) >> 10))
' "$out" >"$FP_TMP/bodies.txt" || fp_fail "uploads without the token: $out"
fp_ok "20 uploads without the token of 15 MiB each: 401 from the headers, bodies unread ($(cat "$FP_TMP/bodies.txt"))"

out=$(fp_timeout 60 python3 "$ATTACK" heads "$PORT") || fp_fail "the head attack failed: $out"
python3 -c '
import json, sys
o = json.loads(sys.argv[1])
want = {"head_with_length": [400], "get_with_body": [400], "two_lengths": [400],
        "signed_length": [400], "nul_in_key": [400], "chunked": [401], "huge_head": [431],
        "forged_mark": [200], "forged_mark_folded": [200], "pipelined": [200, 401]}
assert o == want, o
' "$out" || fp_fail "heads: $out"
fp_ok "ambiguous heads refused, a forged gate mark ignored, a pipelined upload without the token refused"

out=$(fp_timeout 60 python3 "$ATTACK" slow "$PORT") || fp_fail "the slow attack failed: $out"
python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["closed_after"] is not None and 4 <= o["closed_after"] <= 8, o
assert o["healthz"] == [200, 200, 200], o
' "$out" || fp_fail "a trickled head: $out"
fp_ok "a head trickled a byte a second: closed 5 s after its accept, others served meanwhile ($out)"

out=$(fp_timeout 60 python3 "$ATTACK" caps "$PORT" 4 6 "$(cat "$FP_TMP/write.token")") ||
  fp_fail "the connection attack failed: $out"
python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["over_per_ip"] == 429 and o["retry_after"], o
assert o["other_ip"] == 200 and o["room"] == 200 and o["idle_shed"] >= 1, o
assert o["full"] == 503 and o["full_retry_after"] and o["uploads_kept"] == 6, o
assert o["flood_closed"] >= 1 and o["after"] == 200, o
' "$out" || fp_fail "connection caps: $out"
fp_ok "connection caps: 429 past 4 from one address; past 6 an idle one shed for a newcomer, 503 when all 6 upload, closed far past, served after"

out=$(fp_timeout 90 python3 "$ATTACK" bomb "$PORT" wr1te 400) || fp_fail "the bomb failed: $out"
python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["status"] == 400, o
assert o["metrics_answered_while_decoding"] >= 1, o
' "$out" || fp_fail "a gzip bomb: $out"
fp_ok "a gzip bomb of 400 MiB: /metrics answered while it was decoded, then 400 ($out)"
m=$(curl -sf "$URL/metrics") || fp_fail "no metrics"
for r in unauthorized wrong_token bad_head body_not_allowed head_too_large busy peer_busy slow flood shed; do
  grep -qE "^fleetprof_collector_refused_total\{reason=\"$r\"\} [1-9]" <<<"$m" || fp_fail "metrics count no $r refusal"
done
fp_ok "every refusal counted in /metrics"
fp_stop_collector

# ---- 10. a read's cost is bounded ------------------------------------------------------------
python3 "$FP_SRC/tests/integration/mkpprof.py" good "$FP_TMP/big.pb.gz" --stacks 2000 --samples 20000
PORT=$(fp_free_port)
URL=http://127.0.0.1:$PORT
upload_big() { # upload_big N: N uploads of big.pb.gz from hosts h1..hN
  local now
  now=$(date +%s%N)
  for i in $(seq "$1"); do
    curl -sf --data-binary @"$FP_TMP/big.pb.gz" \
      "$URL/api/v1/ingest?host=h$i&pid=7&starttime=1&event=cpu-clock&from=$((now - 5000000000))&to=$now" \
      >/dev/null || fp_fail "upload $i of big.pb.gz failed"
  done
}
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/c4.db" --max-read-ms 1
upload_big 30
code=$(curl -s -o "$FP_TMP/body" -w '%{http_code}' "$URL/api/v1/profile")
[[ $code == 503 ]] && grep -q "time limit" "$FP_TMP/body" ||
  fp_fail "a merge past --max-read-ms 1 was not stopped: $code $(head -c 200 "$FP_TMP/body")"
curl -sf "$URL/healthz" -o /dev/null || fp_fail "/healthz after a stopped read"
upload_big 1
fp_stop_collector
fp_start_collector "$URL" --listen "127.0.0.1:$PORT" --store "$FP_TMP/c4.db"
curl -sf "$URL/api/v1/profile" -o "$FP_TMP/all.pb.gz" || fp_fail "the same merge with the default budget failed"
[[ $(fp_profile_total "$FP_TMP/all.pb.gz") == $((31 * 20000)) ]] ||
  fp_fail "the merge holds $(fp_profile_total "$FP_TMP/all.pb.gz") samples, not $((31 * 20000))"
fp_ok "a merge past --max-read-ms 1 is stopped with 503 and the reason; uploads and /healthz go on; the default budget answers it"
fp_stop_collector
