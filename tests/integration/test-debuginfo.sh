#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Names of stripped binaries from elsewhere on the host (agent/stacks/
# debugfile.c), with the real agent: a program whose hot functions are
# static (named only in .symtab) is built four times and stripped:
#   build-id   its debug file in /usr/lib/debug/.build-id/xx/rest.debug;
#   debuglink  its debug file beside it, named by .gnu_debuglink;
#   mini       MiniDebugInfo in .gnu_debugdata (made as Fedora makes it);
#   bare       nothing: frames stay prog+0xOFFSET.
# Each of the first three shows hot_outer;hot_inner in at least 90% of its
# samples, and status counts a symbol file of each source. Refused, the
# stack staying as offsets: a debuglink whose file belongs to another
# user, one that is a symlink, and a build-ID file of another build.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 200
for t in cc objcopy strip nm xz; do command -v $t >/dev/null || fp_fail "$t is not installed"; done

W=$FP_TMP/w
mkdir -p "$W"
chmod 755 "$FP_TMP" "$W"
cat >"$W/prog.c" <<'C'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static volatile uint64_t sink;
static __attribute__((noinline)) uint64_t hot_inner(uint64_t x)
{
        for (int i = 0; i < 100000; i++)
                x = x * 6364136223846793005ULL + VARIANT;
        return x;
}
static __attribute__((noinline)) uint64_t hot_outer(uint64_t x)
{
        return hot_inner(x) ^ 1;
}
int main(int argc, char **argv)
{
        struct timespec t0, t;
        printf("%d\n", (int)getpid());
        fflush(stdout);
        while (argc > 2 && access(argv[2], F_OK) != 0)
                usleep(1000);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
                sink = hot_outer(sink);
                clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < atoi(argv[1]));
        return 0;
}
C
# build NAME VARIANT: $W/NAME (unstripped, with -g) and $W/NAME.stripped.
build() {
  cc -O1 -g -Wl,--build-id -DVARIANT="$2" -o "$W/$1" "$W/prog.c" || fp_fail "cc failed"
  strip --strip-all -o "$W/$1.stripped" "$W/$1"
}
bid() { readelf -n "$1" | awk '/Build ID/ {print $3}'; }

# build-id: the debug file where Debian's -dbgsym packages put it.
build buildid 11
b=$(bid "$W/buildid")
dbg=/usr/lib/debug/.build-id/${b:0:2}/${b:2}.debug
mkdir -p "$(dirname "$dbg")"
fp_on_exit "rm -f '$dbg'"
objcopy --only-keep-debug "$W/buildid" "$dbg"
# debuglink: beside the binary.
build link 13
objcopy --only-keep-debug "$W/link" "$W/link.debug"
objcopy --add-gnu-debuglink="$W/link.debug" "$W/link.stripped"
# mini: MiniDebugInfo, as Fedora's find-debuginfo makes it.
build mini 17
nm -D "$W/mini" --format=posix --defined-only | awk '{print $1}' | sort >"$W/dynsyms"
nm "$W/mini" --format=posix --defined-only | awk '$2 == "T" || $2 == "t" {print $1}' | sort >"$W/funcsyms"
comm -13 "$W/dynsyms" "$W/funcsyms" >"$W/keep"
objcopy --only-keep-debug "$W/mini" "$W/mini.dbg"
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols="$W/keep" "$W/mini.dbg" "$W/mini.min"
xz -f "$W/mini.min"
objcopy --add-section .gnu_debugdata="$W/mini.min.xz" "$W/mini.stripped"
# bare: nothing.
build bare 19
# Refused: a debuglink to another user's file, to a symlink; a build-ID file of another build.
build other 23
objcopy --only-keep-debug "$W/other" "$W/other.debug"
objcopy --add-gnu-debuglink="$W/other.debug" "$W/other.stripped"
chown 65534 "$W/other.debug"
build symlink 29
objcopy --only-keep-debug "$W/symlink" "$W/real.debug"
ln -s "$W/real.debug" "$W/symlink.debug"
objcopy --add-gnu-debuglink="$W/real.debug" "$W/symlink.stripped"
mv "$W/real.debug" "$W/real.keep" && ln -sf "$W/real.keep" "$W/real.debug"
build wrong 31
build wrong2 37
w=$(bid "$W/wrong")
wdbg=/usr/lib/debug/.build-id/${w:0:2}/${w:2}.debug
mkdir -p "$(dirname "$wdbg")"
fp_on_exit "rm -f '$wdbg'"
objcopy --only-keep-debug "$W/wrong2" "$wdbg" # another build's debug file under this one's ID

fp_start_agent
# run NAME: profiles $W/NAME.stripped for 2 s at 499 Hz; prints the share of
# samples under hot_outer;hot_inner, and leaves its folded profile in NAME.folded.
run() {
  rm -f "$W/go"
  "$W/$1.stripped" 2000 "$W/go" >"$W/$1.out" &
  local pid=$!
  fp_track "$pid"
  fp_wait_for 10 test -s "$W/$1.out" || fp_fail "$1 did not start"
  fp_ctl start "$pid" --freq 499 >/dev/null || fp_fail "start $1 failed"
  touch "$W/go"
  wait "$pid" || fp_fail "$1 failed"
  fp_untrack "$pid"
  fp_ctl dump "$pid" --format folded >"$W/$1.folded" || fp_fail "dump $1 failed"
  python3 - "$W/$1.folded" <<'PY'
import sys
tot = hot = 0
for line in open(sys.argv[1]):
    st, n = line.rstrip("\n").rsplit(" ", 1)
    tot += int(n)
    hot += int(n) if st.endswith("hot_outer;hot_inner") else 0
print("%.3f %d" % (hot / tot if tot else 0, tot))
PY
}
for v in buildid link mini; do
  read -r share n <<<"$(run "$v")"
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.9 else 1)" "$share" ||
    fp_fail "$v: hot_outer;hot_inner in $share of $n samples: $(sort -t' ' -k2 -nr "$W/$v.folded" | head -3)"
  fp_ok "$v: hot_outer;hot_inner in $share of $n samples"
done
for v in bare other symlink wrong; do
  read -r share n <<<"$(run "$v")"
  [[ $share == 0.000 ]] || fp_fail "$v: named from a file it must not trust ($share of $n samples)"
  grep -q "$v.stripped+0x" "$W/$v.folded" || fp_fail "$v: no offsets in its stacks: $(head -3 "$W/$v.folded")"
done
fp_ok "refused: no debug file, another user's, a symlink, another build's under this build ID: frames stay offsets"
fp_status_json | python3 -c '
import json, sys
s = json.load(sys.stdin)["symbol_sources"]
assert s["build_id"] >= 1 and s["debuglink"] >= 1 and s["minidebuginfo"] >= 1, s
print(s)' >"$W/sources" || fp_fail "status symbol_sources: $(fp_status_json | head -c 600)"
fp_ok "status counts symbol files by source: $(cat "$W/sources")"
fp_status_json | python3 -c '
import json, sys
s = json.load(sys.stdin)["frames_named"]
assert all(s[k] >= 1 for k in ("build_id", "debuglink", "minidebuginfo", "unnamed")), s
print(s)' >"$W/named" || fp_fail "status frames_named: $(fp_status_json | head -c 900)"
fp_ctl status >"$W/status.txt"
grep -qE "^names: [0-9]+ frames exported:.* debuglink [0-9.]+%.* unnamed [0-9.]+%" "$W/status.txt" ||
  fp_fail "status has no names line: $(fp_ctl status | head -5)"
fp_ok "status counts frames by what named them: $(cat "$W/named")"
fp_stop_agent
