#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Exact stacks on real binaries (agent/stacks/cfi.c, agent/stacks/unwind.c):
#
# 1. leafcall: a frameless hot leaf under four callers with measured
#    shares, built with frame pointers (leaves still frameless), without
#    (Debian's default), and as a PIE calling a library built without. In
#    the default auto mode at least 98% of the leaf's samples show their
#    caller, the callers' shares are within 1.5 points of the truth, and
#    98% of all samples reach __libc_start_main; with --unwind fp the leaf
#    fix-up alone puts the caller back (frame-pointer build).
# 2. A Go program whose hot leaf (frameless, as Go compiles small leaves)
#    has ten callers with shares 1/55 .. 10/55: each within 1.5 points;
#    the same built with -ldflags='-s -w', named from its .gopclntab.
#    2b. Go code inlined two deep (main.inner into main.outer into
#    main.spin): built whole and stripped, the samples in it show
#    main.inner under main.outer under main.spin, from the inline tree.
# 3. Stock Debian binaries without frame pointers (xz, perl, python3):
#    98% of samples reach the libc entry (and perl's main); the process's
#    start (exec, the dynamic loader relocating before libc's entry) is
#    set aside, as its stacks are whole without it.
# 4. JIT code in anonymous memory named from the target's perf map, with
#    its caller; 4b. calls through PLT stubs (lazy .plt and IBT .plt.sec):
#    each stub named func@plt under its caller, every sample at _start.
# 5. status and the profile say which mode unwound the stacks and how.
# 6. The stack copy fitted to the stacks (stackwalk.h): python3 in a
#    shallow loop gets a copy well under 16 KiB once a thousand samples
#    reached their root; then it recurses 20 deep through C code (map and
#    max: each level a few hundred bytes of C stack), past that copy: the
#    samples that ran out are counted, the copy grows at once, and from
#    then on every sample reaches its root again.
source "$(dirname "$0")/lib.sh"
fp_init 300
CHECK="python3 $FP_SRC/tests/integration/unwind_check.py"
fp_start_agent

# profile NAME SECONDS MODE CMD...: runs CMD (which prints its pid first
# and waits for "$FP_TMP/NAME.go"), profiles it at $HZ (default 999) with
# MODE, and leaves its folded profile in $FP_TMP/NAME.folded. The share
# checks sample at 4 kHz: 20,000 samples put the binomial noise of a 40%
# share at 0.35 points, well inside the 1.5 points they allow.
# samples_at_least PID N: the target PID has N samples or more.
samples_at_least() {
  fp_status_json | python3 -c 'import json, sys
t = [t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])]
sys.exit(0 if t and t[0]["samples"] >= int(sys.argv[2]) else 1)' "$1" "$2"
}

profile() {
  local name=$1 secs=$2 mode=$3
  shift 3
  "$@" >"$FP_TMP/$name.out" 2>"$FP_TMP/$name.err" &
  local pid=$!
  fp_track "$pid"
  fp_wait_for 20 test -s "$FP_TMP/$name.out" || fp_fail "$name did not start: $(cat "$FP_TMP/$name.err")"
  fp_ctl start "$pid" --freq "${HZ:-999}" --unwind "$mode" >/dev/null || fp_fail "start $name failed"
  touch "$FP_TMP/$name.go"
  sleep "$secs"
  # On a busy machine the target runs less: on until it has MIN_SAMPLES (20 s at most).
  [[ -n ${MIN_SAMPLES:-} ]] && fp_wait_for 20 samples_at_least "$pid" "$MIN_SAMPLES"
  fp_ctl dump "$pid" --format folded >"$FP_TMP/$name.folded" || fp_fail "dump $name failed"
  fp_ctl status --json >"$FP_TMP/$name.status" || fp_fail "status failed"
  fp_ctl stop "$pid" >/dev/null || true
  # A workload that ends by itself (and then writes its truth) may finish.
  [[ -n ${WAIT_EXIT:-} ]] && fp_wait_for 15 bash -c '! kill -0 "$0" 2>/dev/null || [[ $(awk "{print \$3}" /proc/$0/stat) == Z ]]' "$pid"
  fp_kill "$pid"
  LAST_PID=$pid
}

# ---- 1. C: frameless leaves, three builds ----------------------------------
WAIT_EXIT=1
HZ=4000
for build in fp nofp pie; do
  profile "c-$build" 5 auto "$FP_BUILD/tests/leafcall-$build" --seconds 6 --ready /dev/null \
    --go "$FP_TMP/c-$build.go" --truth "$FP_TMP/c-$build.truth"
  fp_wait_for 10 test -s "$FP_TMP/c-$build.truth" || fp_fail "leafcall-$build wrote no truth"
  out=$($CHECK callers "$FP_TMP/c-$build.folded" shared_leaf 'caller_[1-4]' \
    --truth "$FP_TMP/c-$build.truth") || fp_fail "[$build, auto] $out"
  fp_ok "[$build, auto] $out"
  out=$($CHECK root "$FP_TMP/c-$build.folded" __libc_start_main,main) || fp_fail "[$build, auto] $out"
  fp_ok "[$build, auto] $out"
done
profile c-fixup 5 fp "$FP_BUILD/tests/leafcall-fp" --seconds 6 --ready /dev/null \
  --go "$FP_TMP/c-fixup.go" --truth "$FP_TMP/c-fixup.truth"
fp_wait_for 10 test -s "$FP_TMP/c-fixup.truth" || fp_fail "leafcall-fp wrote no truth"
out=$($CHECK callers "$FP_TMP/c-fixup.folded" shared_leaf 'caller_[1-4]' \
  --truth "$FP_TMP/c-fixup.truth") || fp_fail "[fp, --unwind fp] $out"
fp_ok "[fp, --unwind fp: leaf fix-up] $out"
fixups=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([t for t in d["targets"] if t["pid"]==int(sys.argv[2])][0]["unwind"]["leaf_fixups"])' \
  "$FP_TMP/c-fixup.status" "$LAST_PID")
((fixups > 0)) || fp_fail "status counts no leaf fix-ups in fp mode"
profile c-dwarf 4 dwarf "$FP_BUILD/tests/leafcall-nofp" --seconds 5 --ready /dev/null \
  --go "$FP_TMP/c-dwarf.go" --truth "$FP_TMP/c-dwarf.truth"
fp_wait_for 10 test -s "$FP_TMP/c-dwarf.truth" || fp_fail "leafcall-nofp wrote no truth"
out=$($CHECK callers "$FP_TMP/c-dwarf.folded" shared_leaf 'caller_[1-4]' --truth "$FP_TMP/c-dwarf.truth") ||
  fp_fail "[nofp, --unwind dwarf] $out"
fp_ok "[nofp, --unwind dwarf] $out"

# ---- 2. Go: a frameless leaf under ten callers -----------------------------
WAIT_EXIT=
GOBIN=$FP_TMP/leafcall-go
(cd "$FP_TMP" && HOME=$FP_TMP GOCACHE=$FP_TMP/gocache GOPATH=$FP_TMP/gopath GO111MODULE=off \
  GOFLAGS= GOTOOLCHAIN=local fp_timeout 120 "${GO:-go}" build -o "$GOBIN" \
  "$FP_SRC/tests/workloads/unwind/go/leafcall.go") >"$FP_TMP/go-build.log" 2>&1 ||
  fp_fail "go build failed: $(cat "$FP_TMP/go-build.log")"
profile go 8 auto "$GOBIN" 9 /dev/null "$FP_TMP/go.go"
weights=$(for k in 01 02 03 04 05 06 07 08 09 10; do printf 'main.caller%s=%d,' "$k" "$((10#$k))"; done)
out=$($CHECK callers "$FP_TMP/go.folded" main.leaf 'main\.caller[0-9][0-9]' --weights "${weights%,}") ||
  fp_fail "[go] $out"
fp_ok "[go] $out"
# The same program stripped (-ldflags='-s -w': no symbol table, no DWARF, so no
# .debug_frame either): named from its .gopclntab, unwound by frame pointers.
(cd "$FP_TMP" && HOME=$FP_TMP GOCACHE=$FP_TMP/gocache GOPATH=$FP_TMP/gopath GO111MODULE=off \
  GOFLAGS= GOTOOLCHAIN=local fp_timeout 120 "${GO:-go}" build -ldflags='-s -w' -o "$GOBIN-stripped" \
  "$FP_SRC/tests/workloads/unwind/go/leafcall.go") >"$FP_TMP/go-build.log" 2>&1 ||
  fp_fail "go build -ldflags='-s -w' failed: $(cat "$FP_TMP/go-build.log")"
readelf -SW "$GOBIN-stripped" | grep -q ' \.symtab ' && fp_fail "the stripped Go binary has a .symtab"
# (Without CFI the frameless leaf's own caller is skipped by the frame-pointer walk:
# what is checked here is the names, and that the stacks go on to main.main.)
profile go-stripped 6 auto "$GOBIN-stripped" 9 /dev/null "$FP_TMP/go-stripped.go"
out=$(python3 - "$FP_TMP/go-stripped.folded" <<'PY'
import sys
tot = leaf = rooted = 0
for line in open(sys.argv[1]):
    st, n = line.rstrip("\n").rsplit(" ", 1)
    n = int(n)
    tot += n
    f = st.split(";")
    leaf += n if f[-1] == "main.leaf" else 0
    rooted += n if "main.main" in f else 0
assert tot >= 1000 and leaf >= 0.8 * tot and rooted >= 0.8 * tot, \
    "main.leaf at the leaf in %d, main.main in %d of %d samples" % (leaf, rooted, tot)
print("main.leaf at the leaf in %d of %d samples, main.main below it in %d" % (leaf, tot, rooted))
PY
) || fp_fail "[go, stripped] $out"
python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["symbol_sources"]["pclntab"] >= 1 else 1)' \
  "$FP_TMP/go-stripped.status" || fp_fail "[go, stripped] status does not count a .gopclntab"
fp_ok "[go, stripped: names from .gopclntab] $out"

# ---- 2b. Go: inlined calls from the inline tree ------------------------------
for build in whole stripped; do
  flags=
  [[ $build == stripped ]] && flags=-s\ -w
  (cd "$FP_TMP" && HOME=$FP_TMP GOCACHE=$FP_TMP/gocache GOPATH=$FP_TMP/gopath GO111MODULE=off \
    GOFLAGS= GOTOOLCHAIN=local fp_timeout 120 "${GO:-go}" build -ldflags="$flags" -o "$GOBIN-inl-$build" \
    "$FP_SRC/tests/workloads/unwind/go/inlined.go") >"$FP_TMP/go-build.log" 2>&1 ||
    fp_fail "go build of inlined.go failed: $(cat "$FP_TMP/go-build.log")"
  profile "go-inl-$build" 5 auto "$GOBIN-inl-$build" 6 /dev/null "$FP_TMP/go-inl-$build.go"
  out=$(python3 - "$FP_TMP/go-inl-$build.folded" <<'PY'
import sys
spin = chain = wrong = 0
for line in open(sys.argv[1]):
    st, n = line.rstrip("\n").rsplit(" ", 1)
    n, f = int(n), st.split(";")
    # An interrupt's time, or the runtime's (a preemption) or code named later than the
    # sample's export (FILE+0xOFFSET), on top of the frame it stopped. gogo (a
    # file-local assembly symbol of the runtime) switches stacks: a sample inside it,
    # after it loaded the goroutine's stack pointer, unwinds through a return address
    # that is not yet there ([unknown]) into the preempted goroutine.
    while f and (f[-1] in ("[kernel]", "gogo", "[unknown]") or f[-1].startswith("runtime.") or "+0x" in f[-1]):
        f.pop()
    if "main.spin" not in f:
        continue
    spin += n
    at = f.index("main.spin")
    if f[at + 1:] == ["main.outer", "main.inner"]:
        chain += n
    # Every frame past main.spin is one of its inlined calls, in their order.
    elif f[at + 1:] not in ([], ["main.outer"]):
        wrong += n
        print("wrong:", st, file=sys.stderr)
assert spin >= 1000 and chain >= 0.5 * spin and wrong == 0, \
    "main.spin;main.outer;main.inner in %d of %d samples in main.spin, %d otherwise" % (chain, spin, wrong)
print("main.spin;main.outer;main.inner in %d of %d samples in main.spin, none otherwise" % (chain, spin))
PY
  ) || fp_fail "[go inlined, $build] $out"
  fp_ok "[go inlined, $build] $out"
done

# ---- 3. Debian's own binaries, without frame pointers ----------------------
HZ=999
head -c 60000000 /dev/urandom >"$FP_TMP/data"
profile xz 4 auto bash -c 'echo $$; while [ ! -e "$1" ]; do sleep 0.01; done; exec xz -9 -T1 -c "$2" >/dev/null' \
  sh "$FP_TMP/xz.go" "$FP_TMP/data"
out=$($CHECK root --startup-ok "$FP_TMP/xz.folded" __libc_start_main) || fp_fail "[xz] $out"
fp_ok "[xz] $out"
profile perl 4 auto bash -c 'echo $$; while [ ! -e "$1" ]; do sleep 0.01; done; exec perl -e '\''my $x = 0; sub f { my $n = shift; return $n < 1 ? 0 : f($n - 1) + 1 } while (1) { $x += f(50) }'\' \
  sh "$FP_TMP/perl.go"
out=$($CHECK root --startup-ok "$FP_TMP/perl.folded" __libc_start_main,main) || fp_fail "[perl] $out"
fp_ok "[perl] $out"
# python3 says its pid once started: its start-up (deep imports, past the
# 16 KiB stack copy) is not what this measures.
profile python 4 auto /usr/bin/python3 -c "
import os, sys, time
print(os.getpid(), flush=True)
while not os.path.exists(sys.argv[1]): time.sleep(0.01)
def f(n): return 0 if n < 1 else f(n - 1) + 1
while True: f(40)" "$FP_TMP/python.go"
out=$($CHECK root --startup-ok "$FP_TMP/python.folded" __libc_start_main) || fp_fail "[python3] $out"
fp_ok "[python3] $out"

# ---- 4. JIT code named from a perf map --------------------------------------
profile jit 3 auto "$FP_BUILD/tests/jitcall" --seconds 5 --ready /dev/null --go "$FP_TMP/jit.go"
out=$($CHECK has "$FP_TMP/jit.folded" 'jit_driver;jit_hot_loop$' --min-share 0.5) || fp_fail "[jit] $out"
fp_ok "[jit] $out"

# ---- 4b. through PLT stubs ----------------------------------------------------
# A sample on a PLT stub's jump is unwound by the PLT's own CFI (an
# expression on rip) and named func@plt; every sample reaches _start, and
# status counts to the root only what did. (The PLT rows' threshold once
# lay in the row's flags, where 11 read as "return address undefined": each
# such sample ended there, a lone frame counted as reaching the root.)
for v in plt ibt; do
  MIN_SAMPLES=1200 profile "plt-$v" 3 auto "$FP_BUILD/tests/pltcall-$v" --seconds 25 --go "$FP_TMP/plt-$v.go"
  out=$(python3 - "$FP_TMP/plt-$v.folded" "$FP_TMP/plt-$v.status" "$LAST_PID" <<'PY'
import json, sys
stacks = {}
for line in open(sys.argv[1]):
    st, n = line.rsplit(" ", 1)
    stacks[st] = stacks.get(st, 0) + int(n)
total = sum(stacks.values())
# The process's start (exec, the loader) and its end (exit) are not the loop.
loop = {s: n for s, n in stacks.items() if ";main;" in s + ";"}
plt = {s: n for s, n in loop.items() if s.split(";")[-1].endswith("@plt")}
n_plt = sum(plt.values())
assert total >= 1000, "too few samples: %d" % total
# (The stubs' share depends on where the timer's interrupts land: 1.8-16% in our runs.)
assert n_plt >= 20, "PLT stubs: %d of %d samples, %s" % (n_plt, total, sorted(stacks.items(), key=lambda x: -x[1])[:6])
# Two stubs are called: pltcall_inner's (from caller_a, and from
# pltcall_outer in the library) and pltcall_outer's, which caller_b reaches
# by a tail jump (`jmp pltcall_outer@plt`): caller_b's frame is gone by then,
# so main is that stub's true caller. main also reads the clock once a
# round (now_ns(), inlined into it): a sample can land on that stub too.
callers = {"pltcall_inner@plt": ("caller_a", "pltcall_outer"), "pltcall_outer@plt": ("main",),
           "clock_gettime@plt": ("main",)}
for s, n in plt.items():
    f = s.split(";")
    assert f[0] == "_start" and f[-2] in callers.get(f[-1], ()), "a PLT sample without its callers: %s %d" % (s, n)
rooted = sum(n for s, n in stacks.items() if s.startswith("_start;"))
assert rooted >= 0.99 * total, "reached _start: %d of %d: %s" % (rooted, total, [s for s in stacks if not s.startswith("_start;")][:5])
t = [t for t in json.load(open(sys.argv[2]))["targets"] if t["pid"] == int(sys.argv[3])][0]
u = t["unwind"]
# (status is read after the dump, with more samples: compared as shares)
assert u["samples_to_root"] <= (rooted / total + 0.01) * t["samples"], \
    "status: %d of %d to the root, the profile: %d of %d" % (u["samples_to_root"], t["samples"], rooted, total)
print("%d of %d samples on PLT stubs, named and under their callers; %d reached _start, status says %d of %d"
      % (n_plt, total, rooted, u["samples_to_root"], t["samples"]))
PY
) || fp_fail "[plt-$v] $out"
  fp_ok "[plt-$v] $out"
done

# ---- 5. status says how ------------------------------------------------------
python3 - "$FP_TMP/xz.status" <<'PY' || fp_fail "status --json lacks the unwinding figures: $(cat "$FP_TMP/xz.status")"
import json, sys
d = json.load(open(sys.argv[1]))
t = d["targets"][0]
u = t["unwind"]
assert u["mode"] == "auto", u
assert u["frames_cfi"] > 0 and u["samples_to_root"] > 0 and u["stack_bytes_per_sample"] > 0, u
PY
fp_ok "status --json reports the unwind mode and how frames were unwound"

# ---- 6. the stack copy fitted -----------------------------------------------
/usr/bin/python3 -c "
import os, sys, time
print(os.getpid(), flush=True)
def f(n): return 0 if n < 1 else max(map(f, (n - 1,))) + 1
x = 0
while not os.path.exists(sys.argv[1]): x += 1
while True: f(20)" "$FP_TMP/fit.deep" >"$FP_TMP/fit.out" 2>"$FP_TMP/fit.err" &
FIT=$!
fp_track "$FIT"
fp_wait_for 20 test -s "$FP_TMP/fit.out" || fp_fail "python3 did not start: $(cat "$FP_TMP/fit.err")"
fp_ctl start "$FIT" --freq 999 >/dev/null || fp_fail "start python3 (fit) failed"
# unwind_of: "copy resizes shorts roots samples" of the target now.
unwind_of() {
  fp_status_json | python3 -c '
import json, sys
t = [t for t in json.load(sys.stdin)["targets"] if t["pid"] == int(sys.argv[1])][0]
u = t["unwind"]
print(u["stack_copy_bytes"], u["stack_resizes"], u["stack_copy_short"], u["samples_to_root"], t["samples"])' "$FIT"
}
# copy_until OP BYTES: waits (15 s at most) until the copy's size is OP (< or >) BYTES.
copy_until() {
  local copy i
  for ((i = 0; i < 150; i++)); do
    read -r copy _ <<<"$(unwind_of)"
    if [[ $1 == "<" ]]; then ((copy < $2)) && return 0; else ((copy > $2)) && return 0; fi
    sleep 0.1
  done
  return 1
}
copy_until "<" 16384 || fp_fail "the copy was not fitted to a shallow loop: $(unwind_of)"
read -r small resizes shorts0 _ _ <<<"$(unwind_of)"
((resizes >= 1)) || fp_fail "a fitted copy without a resize counted"
fp_ok "a shallow loop: the copy fitted to $small bytes (from 16384)"
touch "$FP_TMP/fit.deep"
copy_until ">" "$small" || fp_fail "recursing past the copy did not grow it: $(unwind_of)"
# It may grow more than once: on once a second passed without a sample cut short.
prev=-1
for ((i = 0; i < 15; i++)); do
  read -r _ _ shorts1 roots1 samples1 <<<"$(unwind_of)"
  ((shorts1 == prev)) && break
  prev=$shorts1
  sleep 1
done
((shorts1 > shorts0)) || fp_fail "samples that ran out of the copy were not counted: $(unwind_of)"
# 1000 samples more (on a busy machine the loop runs less: 20 s at most).
for ((i = 0; i < 200; i++)); do
  read -r copy2 _ shorts2 roots2 samples2 <<<"$(unwind_of)"
  ((samples2 - samples1 >= 1000)) && break
  sleep 0.1
done
python3 - "$shorts1" "$shorts2" "$roots1" "$roots2" "$samples1" "$samples2" <<'PY' || fp_fail "after growing: $(unwind_of)"
import sys
s1, s2, r1, r2, n1, n2 = map(int, sys.argv[1:])
assert n2 - n1 >= 1000, "too few samples: %d" % (n2 - n1)
assert s2 - s1 <= (n2 - n1) // 1000, "still cut short: %d of %d" % (s2 - s1, n2 - n1)
assert r2 - r1 >= 0.98 * (n2 - n1), "to the root: %d of %d" % (r2 - r1, n2 - n1)
PY
fp_ok "20 deep: $((shorts1 - shorts0)) samples ran out, the copy grew to $copy2 bytes, then $((roots2 - roots1)) of $((samples2 - samples1)) reached the root"
fp_ctl stop "$FIT" >/dev/null || true
fp_kill "$FIT"
fp_stop_agent
