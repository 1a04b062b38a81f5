#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A disk that stops answering (a hung NFS server, a dead iSCSI target)
# must cost the agent one symbol loader, not its loop and not both loaders.
#
# The test makes such a disk: an ext4 image in a file served through a
# FUSE mount (bindfs), attached to a loop device and mounted. Stopping
# bindfs (SIGSTOP) leaves every read of that filesystem that misses the
# page cache waiting in the kernel (state D) until it is continued.
#
# 1. Root's process runs in two files on that disk (bigsyms.py), the
#    caches are dropped and the disk stopped; then it is profiled. One
#    loader waits on the disk (a thread of the agent in state D); the
#    other file waits for the disk too instead of taking the second
#    loader; status answers throughout and shows the reads; a process
#    started meanwhile, its files on the root disk, is named on the other
#    loader.
# 2. The agent stopped while its loader still waits: it exits (status 0)
#    and says it left the loader.
# 3. The disk continued and the agent started again (resuming its target
#    from its store): the process's code is named.

set -euo pipefail
source "$(dirname "$0")/lib.sh"
fp_init 240

for tool in bindfs losetup mkfs.ext4; do
  command -v "$tool" >/dev/null || fp_fail "$tool is missing (scripts/deps.sh installs it)"
done
[[ -e /dev/fuse && -e /dev/loop-control ]] || fp_fail "this kernel has no FUSE or no loop devices"

# ---- a disk that can be made to stop ------------------------------------------------------
D=$FP_TMP/disk
mkdir -p "$D/back" "$D/fuse" "$D/mnt"
truncate -s 32M "$D/back/ext4.img"
mkfs.ext4 -q -F "$D/back/ext4.img"
bindfs -f "$D/back" "$D/fuse" &
FUSED=$!
fp_track "$FUSED"
LOOP=
undo_disk() { # (the processes using it first, or it stays busy)
  kill -CONT "$FUSED" 2>/dev/null || true
  [[ -z ${H:-} ]] || fp_kill "$H"
  umount "$D/mnt" 2>/dev/null || umount -l "$D/mnt" 2>/dev/null || true
  [[ -z $LOOP ]] || losetup -d "$LOOP" 2>/dev/null || true
  umount "$D/fuse" 2>/dev/null || umount -l "$D/fuse" 2>/dev/null || true
}
fp_on_exit undo_disk
fp_wait_for 10 test -e "$D/fuse/ext4.img" || fp_fail "bindfs did not mount $D/fuse"
LOOP=$(losetup -f --show "$D/fuse/ext4.img")
mount "$LOOP" "$D/mnt"
for f in h1 h2; do python3 "$(dirname "$0")/bigsyms.py" write "$D/mnt/$f.so" 1000; done
cp "$(dirname "$0")/bigsyms.py" "$D/mnt/"
sync
stop_disk() {
  echo 3 >/proc/sys/vm/drop_caches
  kill -STOP "$FUSED"
}

# ---- 1. a stuck disk takes one loader --------------------------------------------------------
# (Under AddressSanitizer, the leak check at exit would wait for ever to
# stop the loader the kernel holds: this agent exits without it.)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 fp_start_agent
python3 "$D/mnt/bigsyms.py" run "$D/mnt/h1.so" "$D/mnt/h2.so" &
H=$!
fp_track "$H"
fp_wait_for 10 grep -q h2.so "/proc/$H/maps" || fp_fail "the process did not map its files"
stop_disk
timeout 2 cat "$D/mnt/h1.so" >/dev/null 2>&1 && fp_fail "the stopped disk still answers: the test shows nothing"
fp_ctl start "$H" --freq 499 >/dev/null
loading() { fp_timeout 2 "$FP_AGENTCTL" --socket "$FP_SOCK" status --json | fp_json_get 'd["symbol_files_loading"]'; }
waiting_loader() { # a thread of the agent waiting on the disk
  local t
  for t in /proc/"$FP_AGENT_PID"/task/*/stat; do
    [[ $(<"$t") == *") D "* ]] && return 0
  done 2>/dev/null
  return 1
}
both_waiting() { [[ $(loading) -ge 2 ]] && waiting_loader; }
fp_wait_for 20 both_waiting || fp_fail "h1.so and h2.so are not both being read with a loader stuck: $(loading) loading"
"$FP_SPIN" --threads 1 --seconds 30 >/dev/null &
OTHER=$!
fp_track "$OTHER"
fp_ctl start "$OTHER" --freq 499 >/dev/null
named() { fp_ctl dump "$OTHER" --format folded | grep -q spin_inner; }
fp_wait_for 10 named ||
  fp_fail "a process on the root disk is not named while the stuck disk holds a loader: $(fp_ctl dump "$OTHER" --format folded | head -c 300)"
for _ in 1 2 3 4 5; do
  n=$(loading) || fp_fail "the agent did not answer status within 2 s while a loader is stuck"
  sleep 0.2
done
[[ $n -ge 2 ]] || fp_fail "the stuck files are no longer shown being read ($n)"
grep -qE "h[12].so waits for a symbol loader" "$FP_TMP/agent.log" ||
  fp_fail "neither file waited for the disk: $(grep -E 'h[12].so' "$FP_TMP/agent.log")"
fp_ok "a stuck disk holds one loader: h1.so and h2.so wait ($n loading), the agent answers, and a process on another disk is named"

# ---- 2. stopping the agent while a loader waits ------------------------------------------
waiting_loader || fp_fail "no loader waits on the disk any more: the test shows nothing"
start=$(date +%s%N)
fp_stop_agent
ms=$((($(date +%s%N) - start) / 1000000))
grep -q "a symbol loader is still reading a file; leaving it" "$FP_TMP/agent.log" ||
  fp_fail "the agent did not say it left its stuck loader: $(tail -5 "$FP_TMP/agent.log")"
fp_ok "the agent stopped in $ms ms with a loader stuck on the disk, and said it left it"

# ---- 3. the disk answers again ---------------------------------------------------------------
kill -CONT "$FUSED"
mv "$FP_TMP/agent.log" "$FP_TMP/agent.1.log"
fp_start_agent # it resumes its target from its store
fp_wait_for 20 sh -c "'$FP_AGENTCTL' --socket '$FP_SOCK' dump $H --format folded | grep -q bigsyms_spin" ||
  fp_fail "the process's code is not named once the disk answers: $(fp_ctl dump "$H" --format folded | head -c 300)"
fp_ctl stop "$H" >/dev/null
fp_kill "$H"
fp_kill "$OTHER"
fp_stop_agent
fp_ok "once the disk answers, the process's code is named"
