#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Java methods named in the profile, with nothing added to the JVM's command
# line, on tests/workloads/java/Shares.java, checked against what it
# measured of itself (java_check.py).
#
# Parts 1-7, the agent run with java-names = perf-map: a target whose
# process maps libjvm.so and catches SIGQUIT is asked, through HotSpot's
# attach socket, to write its perf map (Compiler.perfmap) when its samples
# land in JIT code the map it has does not name (jvmattach.h, jvmnames.c):
#   1. with -XX:+PreserveFramePointer: 90% of the main thread's samples in a
#      named Shares method and 5% at most with their leaf in JIT code not
#      named, the methods' shares within 5 points, shared() split between
#      its two callers within 10 points; status counts the requests, none
#      failed, and nothing is left in the JVM's /tmp but its map;
#   2. without it: the methods still named, and every stack ends at
#      [truncated] below its first compiled method (no frame pointer to
#      follow: no caller guessed), counted as jit_no_frame_pointer;
#   3. a JVM run as nobody, profiled by root: asked as nobody, named;
#   4. a process that maps a file named libjvm.so and does not catch
#      SIGQUIT: refused in one line once 5 s old (a young JVM may not catch
#      it yet), never signalled (it lives on), its samples kept;
#   5. a JVM run with -XX:+DisableAttachMechanism: its listener never
#      starts, each signal only prints a thread dump; after two it is not
#      asked again, and status says why;
#   6. a process like a JVM (tests/workloads/java/stalljvm.py) that takes
#      the request and exits without answering: the request counted as
#      failed, none pending, no helper process left, the agent answering;
#   7. a method first called 20 s into the run, and compiled then: named
#      once the JVM has been asked again, its share within 5 points.
# Parts 8-15, the agent's default: compiled code read from the JVM's code
# cache (hotspot-code.c), never asked for a perf map:
#   8. the JVM's defaults (no frame pointers, tiered compilation, inlining):
#      the shares and the caller split as in 1, every compiled frame's
#      caller found by its size (97% of stacks to their root, 1% at most
#      ending at a compiled frame), work() below each method it was inlined
#      into, inlined methods counted; status says "code cache";
#   9. nobody's JVM, profiled at nobody's own request (its agentctl start);
#  10. a method first called 20 s into the run: named as sampled;
#  11. a rule (--exe of the JVM's launcher): the JVM it starts at its exec,
#      before libjvm.so is mapped, is read once it is, and named;
#  12. the host tier (no target): the JVM found, read and listed in the
#      tier's status;
#  13. --off-cpu: a thread parked in LockSupport.parkNanos (Parks.java)
#      shows Parks.waiter() below it, named;
#  14. every method interpreted (-Xint, no frame pointers asked for): each
#      named from the JVM's memory (hotspot.h) as the perf map names
#      compiled code, the shares and the caller split right, the stacks to
#      their root, and status counts the methods named;
#  15. processes that lie about their code cache (hostilejvm with
#      tests/workloads/java/fakejvm.c as its libjvm.so): segment maps that
#      lead back one segment at a time, a blob with a 512 KiB frame and a
#      scope that is its own sender, a heap with no blob, a VMStructs
#      table with no end. Each is sampled on, its samples kept and cut
#      short where they must be, nothing named it does not say, the agent
#      answering; the table with no end is refused in one line.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
FP_TEST_NAME=java
fp_init 840
command -v javac >/dev/null && command -v java >/dev/null ||
  fp_fail "missing OpenJDK (Debian's openjdk-17-jdk-headless: scripts/deps.sh installs it)"
CHECK=$FP_SRC/tests/integration/java_check.py
# A directory nobody can read the classes from and write its truth to.
JDIR=$(mktemp -d /tmp/fp-java.XXXXXX)
fp_on_exit "rm -rf '$JDIR'"
chmod 755 "$JDIR"
mkdir -p "$JDIR/cls" "$JDIR/out"
javac -d "$JDIR/cls" "$FP_SRC/tests/workloads/java/Shares.java" "$FP_SRC/tests/workloads/java/Parks.java" ||
  fp_fail "javac failed"
chmod -R a+rX "$JDIR/cls"
chown nobody "$JDIR/out"

# Parts 1-7: compiled methods named from the perf map the JVM is asked for.
fp_start_agent --java-names perf-map

# run NAME USER [java options]: Shares under USER for $SECONDS_RUN s (12), with gamma()
# from $LATE s on when set, profiled at 499 Hz from 3 s on (warmed up); leaves
# $FP_TMP/NAME.pb.gz, NAME.status, $JDIR/out/NAME.truth.
run() {
  local name=$1 user=$2 pid
  shift 2
  runuser -u "$user" -- java "$@" -cp "$JDIR/cls" Shares "$JDIR/out/$name.truth" "${SECONDS_RUN:-12}" \
    "$JDIR/out/$name.go" ${LATE:+"$LATE"} \
    >"$FP_TMP/$name.out" 2>"$FP_TMP/$name.err" &
  fp_track "$!"
  fp_wait_for 30 test -s "$FP_TMP/$name.out" || fp_fail "$name did not start: $(cat "$FP_TMP/$name.err")"
  pid=$(head -1 "$FP_TMP/$name.out")
  fp_track "$pid"
  # A map an earlier process of this PID left (root's): nobody's JVM could
  # not write over it (the agent ignores a map older than its process).
  rm -f "/tmp/perf-$pid.map"
  fp_on_exit "rm -f /tmp/perf-$pid.map" # the JVM's map, which it leaves
  runuser -u "$user" -- touch "$JDIR/out/$name.go"
  sleep 3
  if [[ -n ${AS_NOBODY:-} ]]; then # nobody's own agentctl: it may profile its own process
    fp_timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups "$JDIR/agentctl" \
      --socket "$FP_SOCK" start "$pid" --freq 499 >/dev/null || fp_fail "start $name as nobody failed"
  else
    fp_ctl start "$pid" --freq 499 >/dev/null || fp_fail "start $name failed"
  fi
  fp_wait_for $((${SECONDS_RUN:-12} + 28)) test -s "$JDIR/out/$name.truth" ||
    fp_fail "$name wrote no truth: $(cat "$FP_TMP/$name.err")"
  fp_wait_for 15 bash -c '! kill -0 "$0" 2>/dev/null' "$pid"
  fp_ctl status --json >"$FP_TMP/$name.status" || fp_fail "status failed"
  fp_ctl status >"$FP_TMP/$name.status.txt" || fp_fail "status failed"
  fp_ctl dump "$pid" -o "$FP_TMP/$name.pb.gz" >/dev/null || fp_fail "dump of $name failed"
  fp_ctl stop "$pid" >/dev/null || true
  LAST_PID=$pid
}

# java_status NAME PID: the target's "java" object, checked: asked, answered, none failed.
java_status() {
  python3 - "$FP_TMP/$1.status" "$2" <<'PY'
import json, sys
t = [t for t in json.load(open(sys.argv[1]))["targets"] if t["pid"] == int(sys.argv[2])][0]
j = t["java"]
print("status: %s, %d requests, %d answered, %d failed" % (j["names"], j["requests"], j["answered"], j["failed"]))
assert j["names"].startswith("perf map") and j["answered"] >= 1 and j["failed"] == 0, j
PY
}

# code_status NAME PID: the target's "java" object, checked: its code cache read, never
# asked; and its stacks: to their root, a compiled frame's caller unknown in 1% at most.
code_status() {
  python3 - "$FP_TMP/$1.status" "$2" <<'PY'
import json, sys
t = [t for t in json.load(open(sys.argv[1]))["targets"] if t["pid"] == int(sys.argv[2])][0]
j, u = t["java"], t["unwind"]
print("status: %s, %d requests, %d blobs read, %d lookups with inlined methods, %d scope chains "
      "that did not hold; %d of %d samples to their root, %d frames by a compiled method's size, "
      "%d stacks ended at a compiled frame"
      % (j["names"], j["requests"], j["code_blobs_read"], j["code_inlined"], j["code_scopes_failed"],
         u["samples_to_root"], t["samples"], u["frames_java"], u["jit_no_frame_pointer"]))
assert j["names"].startswith("code cache") and j["requests"] == 0 and not j["code_cache_why"], j
assert j["code_blobs_read"] >= 1 and j["code_scopes_failed"] == 0, j
assert u["samples_to_root"] >= 0.97 * t["samples"] and u["jit_no_frame_pointer"] <= 0.01 * t["samples"], u
PY
}

# frame_pointers NAME PID WANT: status says whether the JVM keeps them, and counts the ends.
frame_pointers() {
  python3 - "$FP_TMP/$1.status" "$2" "$3" <<'PY'
import json, sys
t = [t for t in json.load(open(sys.argv[1]))["targets"] if t["pid"] == int(sys.argv[2])][0]
fp, ends = t["java"]["frame_pointers"], t["unwind"]["jit_no_frame_pointer"]
print("status: frame_pointers %s, %d stacks ended at a compiled method" % (fp, ends))
want = sys.argv[3] == "true"
assert fp is want and (ends == 0 if want else ends >= 100), (fp, ends)
PY
}

# ---- 1. frame pointers kept ----------------------------------------------------------
# (Shares' methods are not inlined: an inlined method has no code of its
# own, and the perf map names only the method it was inlined into. And they
# are compiled once, early, by C2 alone: tiered compilation compiles a
# method again seconds later and frees the first code, and the JIT may put
# another method at that address; a frame sampled before and named after
# would take the new method's name (perf's limit too; see the notes): a CI
# run once had alpha() 6 points short.)
NOINLINE=(-XX:CompileCommand=quiet "-XX:CompileCommand=dontinline,Shares::*" -XX:-TieredCompilation
  -XX:CompileThreshold=100)
run fp root -XX:+PreserveFramePointer "${NOINLINE[@]}"
out=$(python3 "$CHECK" "$FP_TMP/fp.pb.gz" "$JDIR/out/fp.truth" --callers) || fp_fail "[frame pointers] $out"
fp_ok "[frame pointers] $out"
out=$(java_status fp "$LAST_PID") || fp_fail "[frame pointers] $out"
fp_ok "[frame pointers] $out"
out=$(frame_pointers fp "$LAST_PID" true) || fp_fail "[frame pointers] $out"
fp_ok "[frame pointers] $out"
grep -q "^java of $LAST_PID: HotSpot, compiled methods named from the perf map" "$FP_TMP/fp.status.txt" ||
  fp_fail "the text status has no java line: $(grep java "$FP_TMP/fp.status.txt")"
# The trigger is removed; the socket and the map are the JVM's own (it is gone: they may stay).
[[ ! -e /tmp/.attach_pid$LAST_PID ]] || fp_fail "the attach trigger was left in /tmp"

# ---- 2. without frame pointers -----------------------------------------------------------
run nofp root
out=$(python3 "$CHECK" "$FP_TMP/nofp.pb.gz" "$JDIR/out/nofp.truth" --no-frame-pointers) ||
  fp_fail "[no frame pointers] $out"
fp_ok "[no frame pointers] $out"
out=$(frame_pointers nofp "$LAST_PID" false) || fp_fail "[no frame pointers] $out"
fp_ok "[no frame pointers] $out"
grep -q "^java of $LAST_PID: .*without -XX:+PreserveFramePointer, stacks end at their first compiled method" \
  "$FP_TMP/nofp.status.txt" || fp_fail "the text status does not say the stacks end: $(grep java "$FP_TMP/nofp.status.txt")"

# ---- 3. nobody's JVM ------------------------------------------------------------------------
run nobody nobody -XX:+PreserveFramePointer "${NOINLINE[@]}"
out=$(python3 "$CHECK" "$FP_TMP/nobody.pb.gz" "$JDIR/out/nobody.truth") || fp_fail "[nobody's JVM] $out"
fp_ok "[nobody's JVM] $out"
out=$(java_status nobody "$LAST_PID") || fp_fail "[nobody's JVM] $out"
fp_ok "[nobody's JVM] $out"
owner=$(stat -c %U "/tmp/perf-$LAST_PID.map" 2>/dev/null || echo none)
[[ $owner == nobody ]] || fp_fail "nobody's JVM: its perf map is owned by $owner, not nobody"

# ---- 4. a libjvm.so that is not a JVM ------------------------------------------------------
mkdir -p "$FP_TMP/fake"
cp "$(/usr/bin/python3 -c 'import zlib, ctypes.util; print(ctypes.util.find_library("z") and "/lib/x86_64-linux-gnu/libz.so.1")')" \
  "$FP_TMP/fake/libjvm.so"
/usr/bin/python3 -c '
import ctypes, os, sys, time
ctypes.CDLL(sys.argv[1])
print(os.getpid(), flush=True)
end = time.time() + 10
while time.time() < end:
    sum(i * i for i in range(1000))
' "$FP_TMP/fake/libjvm.so" >"$FP_TMP/fake.out" 2>&1 &
fake=$!
fp_track "$fake"
fp_wait_for 20 test -s "$FP_TMP/fake.out" || fp_fail "the fake did not start"
fp_ctl start "$fake" --freq 199 >/dev/null || fp_fail "start of the fake failed"
# (Refused once it is 5 s old: a young JVM may not catch SIGQUIT yet.)
fake_refused() {
  fp_ctl status >"$FP_TMP/fake.status.txt"
  grep -q "^java of $fake: not asked: java: $fake maps .*libjvm.so but does not catch SIGQUIT" "$FP_TMP/fake.status.txt"
}
fp_wait_for 9 fake_refused ||
  fp_fail "the fake libjvm.so is not refused in status: $(grep java "$FP_TMP/fake.status.txt")"
kill -0 "$fake" 2>/dev/null || fp_fail "the process that maps a fake libjvm.so died"
said=$(grep -c "java: $fake maps" "$FP_TMP/agent.log" || true)
[[ $said == 1 ]] || fp_fail "the refusal was logged $said times, not once"
samples=$(fp_status_json | python3 -c 'import json,sys
print([t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])][0]["samples"])' "$fake")
((samples > 50)) || fp_fail "the fake's samples were not kept: $samples"
fp_ok "a process that maps a libjvm.so and does not catch SIGQUIT: refused in one line, alive, $samples samples kept"
fp_ctl stop "$fake" >/dev/null || true

# ---- 5. a JVM that does not attach ------------------------------------------------------
java -XX:+DisableAttachMechanism -cp "$JDIR/cls" Shares "$JDIR/out/noattach.truth" 30 >"$FP_TMP/noattach.out" 2>&1 &
fp_track "$!"
fp_wait_for 30 test -s "$FP_TMP/noattach.out" || fp_fail "the JVM without attach did not start"
pid=$(head -1 "$FP_TMP/noattach.out")
fp_on_exit "rm -f /tmp/perf-$pid.map"
fp_ctl start "$pid" --freq 99 >/dev/null || fp_fail "start of the JVM without attach failed"
refused() {
  fp_status_json | python3 -c 'import json,sys
j = [t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])][0]["java"]
sys.exit(0 if j and j["names"] == "refused" else 1)' "$1"
}
fp_wait_for 40 refused "$pid" || fp_fail "the JVM without attach is still asked: $(fp_ctl status | grep "java of")"
kill -0 "$pid" 2>/dev/null || fp_fail "the JVM without attach died"
dumps=$(grep -c "^Full thread dump" "$FP_TMP/noattach.out" || true)
((dumps == 2)) || fp_fail "the JVM without attach printed $dumps thread dumps, not 2"
grep -q "^java of $pid: not asked: its attach listener never started in 2 requests" <<<"$(fp_ctl status)" ||
  fp_fail "status does not say why: $(fp_ctl status | grep "java of")"
fp_ok "a JVM with -XX:+DisableAttachMechanism: refused after 2 requests (2 thread dumps), still running"
fp_ctl stop "$pid" >/dev/null || true

# ---- 6. a JVM that exits while a request is pending -----------------------------------------
/usr/bin/python3 "$FP_SRC/tests/workloads/java/stalljvm.py" "$FP_TMP/fake/libjvm.so" "$FP_TMP/stall.asked" 20 \
  >"$FP_TMP/stall.out" 2>&1 &
stall=$!
fp_track "$stall"
fp_wait_for 20 test -s "$FP_TMP/stall.out" || fp_fail "the stalling JVM did not start"
fp_on_exit "rm -f /tmp/.java_pid$stall /tmp/.attach_pid$stall /tmp/perf-$stall.map"
fp_ctl start "$stall" --freq 199 >/dev/null || fp_fail "start of the stalling JVM failed"
fp_wait_for 20 test -s "$FP_TMP/stall.asked" || fp_fail "the stalling JVM was never asked: $(fp_ctl status | grep "java of")"
fp_wait_for 10 eval '! kill -0 '"$stall"' 2>/dev/null' || fp_fail "the stalling JVM did not exit"
stall_failed() {
  fp_status_json | python3 -c 'import json,sys
t = [t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])][0]
j = t["java"]
print("%s: %d requests, %d answered, %d failed, pending %s: %s" % (t["state"], j["requests"], j["answered"], j["failed"], j["pending"], j["why"]))
sys.exit(0 if t["state"] == "exited" and j["failed"] >= 1 and j["answered"] == 0 and not j["pending"] else 1)' "$stall"
}
fp_wait_for 15 stall_failed >/dev/null || fp_fail "the request to the JVM that exited is not counted as failed: $(stall_failed)"
helpers=$( (pgrep -P "$FP_AGENT_PID" || true) | wc -l)
((helpers == 0)) || fp_fail "$helpers helper processes of the agent are left: $(pgrep -a -P "$FP_AGENT_PID")"
fp_ctl status >/dev/null || fp_fail "the agent does not answer after the JVM exited"
fp_ok "a JVM that exits while a request is pending: $(stall_failed); no helper left"

# ---- 7. a method compiled late --------------------------------------------------------------
SECONDS_RUN=36 LATE=20 run late root -XX:+PreserveFramePointer "${NOINLINE[@]}"
out=$(python3 "$CHECK" "$FP_TMP/late.pb.gz" "$JDIR/out/late.truth" --callers) || fp_fail "[late] $out"
[[ $out == *"gamma "* ]] || fp_fail "[late] gamma() is not among the methods checked: $out"
fp_ok "[late] $out"
out=$(python3 - "$FP_TMP/late.status" "$LAST_PID" <<'PY'
import json, sys
j = [t for t in json.load(open(sys.argv[1]))["targets"] if t["pid"] == int(sys.argv[2])][0]["java"]
print("%d requests, %d answered, %d failed%s" % (j["requests"], j["answered"], j["failed"],
                                               j["failed"] and " (%s)" % j["why"] or ""))
# (A request made as the JVM exits fails: that one is not the agent's doing.)
assert j["answered"] >= 2 and j["failed"] <= 1, j
PY
) || fp_fail "[late] the JVM was not asked again: $out"
fp_ok "[late] asked again for the method compiled late: $out"

# ---- from here on: compiled code read from the JVM's code cache (the default) -----------------
fp_stop_agent
fp_start_agent

# ---- 8. the JVM's defaults: no frame pointers, tiered compilation, inlining -------------------
# Each compiled frame's caller found by its size; methods inlined into others (work() into
# alpha(), shared() into callerTwo()...) shown where the JVM says they were.
run defaults root
out=$(python3 "$CHECK" "$FP_TMP/defaults.pb.gz" "$JDIR/out/defaults.truth" --callers --inlined) ||
  fp_fail "[code cache, the JVM's defaults] $out"
fp_ok "[code cache, the JVM's defaults] $out"
out=$(code_status defaults "$LAST_PID") || fp_fail "[code cache, the JVM's defaults] $out"
[[ $out =~ \ ([0-9]+)\ lookups\ with\ inlined && ${BASH_REMATCH[1]} -ge 1 ]] ||
  fp_fail "[code cache, the JVM's defaults] no inlined method was found: $out"
fp_ok "[code cache, the JVM's defaults] $out"
grep -q "^java of $LAST_PID: HotSpot, compiled methods named and unwound from its code cache" \
  "$FP_TMP/defaults.status.txt" || fp_fail "the text status has no java line: $(grep java "$FP_TMP/defaults.status.txt")"
[[ ! -e /tmp/.attach_pid$LAST_PID && ! -e /tmp/perf-$LAST_PID.map ]] ||
  fp_fail "the JVM whose code cache is read was asked for its perf map"

# ---- 9. nobody's JVM, profiled at nobody's own request, its code cache read -------------------
install -m 0755 "$FP_AGENTCTL" "$JDIR/agentctl"
AS_NOBODY=1 run byself nobody "${NOINLINE[@]}"
out=$(python3 "$CHECK" "$FP_TMP/byself.pb.gz" "$JDIR/out/byself.truth" --callers) ||
  fp_fail "[nobody's JVM, by nobody] $out"
fp_ok "[nobody's JVM, started by nobody] $out"
out=$(code_status byself "$LAST_PID") || fp_fail "[nobody's JVM, by nobody] $out"
fp_ok "[nobody's JVM, started by nobody] $out"

# ---- 10. a method compiled late, tiered: named as sampled, with no request --------------------
SECONDS_RUN=36 LATE=20 run latecode root
out=$(python3 "$CHECK" "$FP_TMP/latecode.pb.gz" "$JDIR/out/latecode.truth" --callers --inlined) ||
  fp_fail "[late, code cache] $out"
[[ $out == *"gamma "* ]] || fp_fail "[late, code cache] gamma() is not among the methods checked: $out"
fp_ok "[late, code cache] $out"
out=$(code_status latecode "$LAST_PID") || fp_fail "[late, code cache] $out"
fp_ok "[late, code cache] $out"

# launch NAME SECONDS: Shares (frame pointers kept) for SECONDS, not profiled by
# PID (a rule or the host tier finds it); its pid in $pid.
launch() {
  java -XX:+PreserveFramePointer "${NOINLINE[@]}" -cp "$JDIR/cls" Shares "$JDIR/out/$1.truth" "$2" \
    >"$FP_TMP/$1.out" 2>"$FP_TMP/$1.err" &
  fp_track "$!"
  fp_wait_for 30 test -s "$FP_TMP/$1.out" || fp_fail "$1's JVM did not start: $(cat "$FP_TMP/$1.err")"
  pid=$(head -1 "$FP_TMP/$1.out")
  fp_on_exit "rm -f /tmp/perf-$pid.map"
}

# ---- 11. a rule --------------------------------------------------------------------------------
JAVA_EXE=$(readlink -f "$(command -v java)")
out=$(fp_ctl start --exe "$JAVA_EXE" --service javarule --freq 499) || fp_fail "start --exe $JAVA_EXE failed: $out"
rule=$(sed -n 's/^rule \([0-9]*\):.*/\1/p' <<<"$out")
[[ -n $rule ]] || fp_fail "start --exe did not answer with a rule id: $out"
launch rule 10
fp_wait_for 40 test -s "$JDIR/out/rule.truth" || fp_fail "the rule's JVM wrote no truth"
fp_ctl status --json >"$FP_TMP/rule.status" || fp_fail "status failed"
fp_ctl dump --service javarule -o "$FP_TMP/rule.pb.gz" >/dev/null || fp_fail "dump --service javarule failed"
out=$(python3 "$CHECK" "$FP_TMP/rule.pb.gz" "$JDIR/out/rule.truth") || fp_fail "[rule] $out"
fp_ok "[rule --exe $JAVA_EXE] $out"
out=$(code_status rule "$pid") || fp_fail "[rule] $out"
fp_ok "[rule] $out"
fp_ctl stop --rule "$rule" >/dev/null || fp_fail "stop --rule $rule failed"

# ---- 12. the host tier -------------------------------------------------------------------------
fp_ctl start --host --freq 199 >/dev/null || fp_fail "start --host failed"
launch host 12
host_jvm() {
  fp_status_json | python3 -c 'import json, sys
h = json.load(sys.stdin)["host_tier"]
j = [j for j in h["java"] if j["pid"] == int(sys.argv[1])]
print("%d JVMs; this one: %s" % (h["jvms"], j and "%s, %d requests, %d blobs read, frame pointers %s" % (
    j[0]["names"], j[0]["requests"], j[0]["code_blobs_read"], j[0]["frame_pointers"])))
sys.exit(0 if j and j[0]["names"].startswith("code cache") and j[0]["code_blobs_read"] >= 1 and
         j[0]["requests"] == 0 and j[0]["frame_pointers"] else 1)' "$1"
}
fp_wait_for 30 host_jvm "$pid" >/dev/null || fp_fail "[host tier] the JVM's code cache was not read: $(host_jvm "$pid")"
fp_ok "[host tier] status: $(host_jvm "$pid")"
grep -q "^java of $pid (host tier): HotSpot" <<<"$(fp_ctl status)" ||
  fp_fail "[host tier] the text status has no java line: $(fp_ctl status | grep java)"
fp_wait_for 40 test -s "$JDIR/out/host.truth" || fp_fail "the host tier's JVM wrote no truth"
fp_ctl dump --host -o "$FP_TMP/host.pb.gz" >/dev/null || fp_fail "dump --host failed"
fp_ctl stop --host >/dev/null || fp_fail "stop --host failed"
out=$(python3 "$CHECK" "$FP_TMP/host.pb.gz" "$JDIR/out/host.truth") || fp_fail "[host tier] $out"
fp_ok "[host tier] $out"

# ---- 13. off-CPU: a parked thread -----------------------------------------------------------------
java -XX:+PreserveFramePointer -cp "$JDIR/cls" Parks 12 "$FP_TMP/parks.go" >"$FP_TMP/parks.out" 2>"$FP_TMP/parks.err" &
fp_track "$!"
fp_wait_for 30 bash -c '[[ $(wc -l <"$0") -ge 2 ]]' "$FP_TMP/parks.out" ||
  fp_fail "Parks did not start: $(cat "$FP_TMP/parks.err")"
pid=$(sed -n 1p "$FP_TMP/parks.out")
tid=$(sed -n 2p "$FP_TMP/parks.out")
fp_on_exit "rm -f /tmp/perf-$pid.map"
touch "$FP_TMP/parks.go"
sleep 3
fp_ctl start "$pid" --freq 99 --off-cpu --off-cpu-period 1000000 >/dev/null || fp_fail "start --off-cpu of Parks failed"
sleep 6
fp_ctl dump "$pid" --event off-cpu -o "$FP_TMP/parks.pb.gz" >/dev/null || fp_fail "dump --event off-cpu failed"
fp_ctl stop "$pid" >/dev/null || true
out=$(python3 - "$FP_TMP/parks.pb.gz" "$tid" "$FP_SRC/tests/integration" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
import pprofraw
rows = pprofraw.lines_by_thread(pprofraw.load(sys.argv[1])).get(int(sys.argv[2]), [])
total = sum(n for n, _ in rows)
names = [(n, [f for f, _, _ in lines]) for n, lines in rows]
waiter = sum(n for n, fs in names if any("Parks.waiter" in f for f in fs))
parked = sum(n for n, fs in names if any("Parks.waiter" in f for f in fs) and
             any("LockSupport.park" in f for f in fs[:next(i for i, f in enumerate(fs) if "Parks.waiter" in f)]))
print("%d of %d off-CPU samples of the parked thread under Parks.waiter(), %d of them in LockSupport.park*"
      % (waiter, total, parked))
assert total >= 200 and waiter >= 0.9 * total and parked >= 0.5 * waiter
PY
) || fp_fail "[off-CPU] $out"
fp_ok "[off-CPU, a parked thread] $out"

# ---- 14. interpreted methods -----------------------------------------------------------------
run interpreted root -Xint
out=$(python3 "$CHECK" "$FP_TMP/interpreted.pb.gz" "$JDIR/out/interpreted.truth" --callers) ||
  fp_fail "[interpreted] $out"
fp_ok "[interpreted] $out"
out=$(python3 - "$FP_TMP/interpreted.status" "$LAST_PID" <<'PY'
import json, sys
t = [t for t in json.load(open(sys.argv[1]))["targets"] if t["pid"] == int(sys.argv[2])][0]
j, u = t["java"], t["unwind"]
print("%d interpreted methods named, %d not (%s); %d of %d samples to their root"
      % (j["interpreted_named"], j["interpreted_failed"], j["interpreted_why"] or "-",
         u["samples_to_root"], t["samples"]))
assert j["interpreted_named"] >= 5 and not j["interpreted_why"] and u["samples_to_root"] >= 0.95 * t["samples"]
PY
) || fp_fail "[interpreted] $out"
fp_ok "[interpreted] $out"

# ---- 15. processes that lie about their code cache -------------------------------------------
for mode in loops free endless; do
  "$FP_BUILD/tests/hostilejvm" "$FP_BUILD/tests/fakejvm/libjvm.so" "$mode" >"$FP_TMP/hostile-$mode.out" 2>&1 &
  fp_track "$!"
  fp_wait_for 20 test -s "$FP_TMP/hostile-$mode.out" || fp_fail "hostilejvm $mode did not start"
  pid=$(head -1 "$FP_TMP/hostile-$mode.out")
  fp_on_exit "rm -f /tmp/perf-$pid.map /tmp/.attach_pid$pid"
  fp_ctl start "$pid" --freq 199 >/dev/null || fp_fail "start of hostilejvm $mode failed"
  sleep 4
  fp_status_json >"$FP_TMP/hostile-$mode.status" || fp_fail "status failed with hostilejvm $mode"
  fp_ctl dump "$pid" --format folded >"$FP_TMP/hostile-$mode.folded" || fp_fail "dump of hostilejvm $mode failed"
  kill -0 "$pid" 2>/dev/null || fp_fail "hostilejvm $mode died"
  out=$(python3 - "$FP_TMP/hostile-$mode.status" "$pid" "$mode" "$FP_TMP/hostile-$mode.folded" <<'PY'
import json, sys
t = [t for t in json.load(open(sys.argv[1]))["targets"] if t["pid"] == int(sys.argv[2])][0]
j, mode = t["java"], sys.argv[3]
stacks = {}
for line in open(sys.argv[4]):
    st, n = line.rsplit(" ", 1)
    stacks[st] = stacks.get(st, 0) + int(n)
total = sum(stacks.values())
cut = sum(n for s, n in stacks.items() if s.startswith("[truncated]"))
print("%s: %d samples kept, %d cut short; %s; %d blobs read, %d not found, %d scope chains refused; %s"
      % (mode, total, cut, j["names"], j["code_blobs_read"], j["code_not_found"], j["code_scopes_failed"],
         j["why"] or j["interpreted_why"] or "-"))
assert total >= 200 and cut >= 0.95 * total, "samples not kept, or not cut short"
if mode == "loops":
    # Its one blob read (no more: a cached blob), its scope refused, its method unnamed.
    assert j["names"].startswith("code cache") and j["code_blobs_read"] >= 1 and j["code_scopes_failed"] >= 100, j
    assert all(s.split(";")[1:2] in (["[java]"],) for s in stacks), sorted(stacks)
elif mode == "free":
    assert j["names"].startswith("code cache") and j["code_blobs_read"] == 0 and j["code_not_found"] >= 100, j
    assert j["requests"] == 0, j
else:
    assert j["names"].startswith("perf map") and "VMStructs do not give" in j["interpreted_why"], j
PY
  ) || fp_fail "[a code cache that lies] $out"
  fp_ok "[a code cache that lies] $out"
  fp_ctl stop "$pid" >/dev/null || true
  kill "$pid" 2>/dev/null || true
done
said=$(grep -c "java: $pid (hostilejvm): its methods are not read from its memory" "$FP_TMP/agent.log" || true)
[[ $said == 1 ]] || fp_fail "the table with no end was logged $said times, not once"
fp_stop_agent
