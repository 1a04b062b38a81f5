#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The packages, built and installed on this machine (as CI does; root):
#
#  1. CPack builds fleetprof-agent (and fleetprof-collector when the
#     collector is built) as .deb and .rpm; the test checks the files,
#     the version (project(VERSION)), the shared-library dependencies
#     (dpkg-shlibdeps / rpm's automatic requires), the conffiles and
#     %config(noreplace), and the maintainer scripts' syntax.
#     The .rpm is installed into a throwaway root and erased there.
#  2. dpkg -i installs the .deb(s): group, state directory, enabled unit,
#     man pages, a unit systemd-analyze accepts.
#  3. The installed agent is run the way its unit's ExecStart runs it
#     (command line parsed from the installed unit, same capability
#     bounding set, ambient set, group and limits, the installed config)
#     and the installed agentctl profiles a workload running as another
#     user through the default socket.
#  4. Reinstalling (the upgrade path) and dpkg -r keep the data in
#     /var/lib/fleetprof-agent (-collector) and the (edited) conffile; an
#     upgrade from the earlier layout (one /var/lib/fleetprof for both)
#     moves each store to its own directory; dpkg -P deletes them.
#
# Whatever happens, the EXIT trap purges what the test installed and
# removes the group and user it caused to be created. The test refuses to
# run where fleetprof is already installed or has data, so it never
# touches an operator's installation.
source "$(dirname "$0")/lib.sh"
fp_init 280

# Several checkouts may run their test suites on one machine: one
# installation test at a time (the lock goes with the shell's exit).
exec 9>/run/lock/fleetprof-test-package.lock
flock -w 120 9 || fp_fail "another test-package held /run/lock/fleetprof-test-package.lock for 120 s"

[[ $(id -u) -eq 0 ]] || fp_fail "must run as root (it installs packages)"
for tool in dpkg dpkg-deb rpm rpmbuild cpack setpriv capsh prlimit; do
  command -v "$tool" >/dev/null || fp_fail "$tool is missing (scripts/deps.sh installs it)"
done

version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$FP_BUILD/CMakeCache.txt")
[[ -n $version ]] || fp_fail "no CMAKE_PROJECT_VERSION in $FP_BUILD/CMakeCache.txt"
comps=(agent) have_collector=no
if [[ -x $FP_BUILD/collector/fleetprof-collector ]]; then
  comps+=(collector)
  have_collector=yes
fi

# --- never touch an existing installation --------------------------------
for c in "${comps[@]}"; do
  if dpkg-query -W -f='${Status}' "fleetprof-$c" 2>/dev/null | grep -qv 'not-installed'; then
    fp_fail "fleetprof-$c is installed on this machine; this test installs and purges it, so it will not run here"
  fi
  [[ ! -e /var/lib/fleetprof/$c.db && ! -e /var/lib/fleetprof-$c && ! -e /etc/fleetprof/$c.conf ]] ||
    fp_fail "/var/lib/fleetprof/$c.db, /var/lib/fleetprof-$c or /etc/fleetprof/$c.conf exists; refusing to overwrite it"
done
[[ ! -S /run/fleetprof/agent.sock ]] || fp_fail "/run/fleetprof/agent.sock exists: an agent is running here"

had_group=no had_user=no had_rundir=no installed=()
getent group fleetprof >/dev/null && had_group=yes
getent passwd fleetprof >/dev/null && had_user=yes
[[ -d /run/fleetprof ]] && had_rundir=yes
had_etc=no
[[ -d /etc/fleetprof ]] && had_etc=yes

pkg_cleanup() {
  local p
  [[ -n ${agent_pid:-} ]] && fp_kill "$agent_pid"
  [[ -n ${collector_pid:-} ]] && fp_kill "$collector_pid"
  for p in "${installed[@]}"; do
    dpkg -P "$p" >/dev/null 2>&1 || true
  done
  [[ $had_rundir == no ]] && rm -rf /run/fleetprof
  [[ $had_etc == no ]] && rm -f /etc/fleetprof/token && rmdir /etc/fleetprof 2>/dev/null
  [[ $had_user == no ]] && getent passwd fleetprof >/dev/null && userdel fleetprof 2>/dev/null
  [[ $had_group == no ]] && getent group fleetprof >/dev/null && groupdel fleetprof 2>/dev/null
  return 0
}
trap 'rc=$?; pkg_cleanup; (exit $rc); fp_cleanup' EXIT

# --- 1. build and inspect ------------------------------------------------
out=$FP_TMP/packages
mkdir -p "$out"
(cd "$FP_BUILD" && fp_timeout 300 cpack -G "DEB;RPM" -B "$out") >"$FP_TMP/cpack.log" 2>&1 ||
  fp_fail "cpack failed: $(tail -n 20 "$FP_TMP/cpack.log")"
for c in "${comps[@]}"; do
  deb=$out/fleetprof-${c}_${version}-1_$(dpkg --print-architecture).deb
  rpmf=$out/fleetprof-$c-$version-1.$(uname -m).rpm
  [[ -f $deb ]] || fp_fail "no $deb: $(ls "$out")"
  [[ -f $rpmf ]] || fp_fail "no $rpmf: $(ls "$out")"
done
fp_ok "cpack built ${#comps[@]} package(s) in both formats, version $version"

# expected files per component
declare -A files
files[agent]="/usr/bin/fleetprof-agent /usr/bin/agentctl /usr/lib/systemd/system/fleetprof-agent.service
/etc/fleetprof/agent.conf /usr/share/man/man8/fleetprof-agent.8.gz /usr/share/man/man1/agentctl.1.gz"
files[collector]="/usr/bin/fleetprof-collector /usr/lib/systemd/system/fleetprof-collector.service
/etc/fleetprof/collector.conf /usr/share/man/man8/fleetprof-collector.8.gz"
declare -A libs_deb libs_rpm
libs_deb[agent]="libevent-2.1-7 libsqlite3-0 libcurl4 libelf1 libprotobuf-c1 zlib1g adduser"
libs_rpm[agent]="libevent-2.1.so.7 libsqlite3.so.0 libcurl.so.4 libelf.so.1 libprotobuf-c.so.1 libz.so.1"
libs_deb[collector]="libevent-2.1-7 libevent-openssl-2.1-7 libssl3 libsqlite3-0 libprotobuf-c1 zlib1g adduser"
libs_rpm[collector]="libevent-2.1.so.7 libevent_openssl-2.1.so.7 libssl.so.3 libsqlite3.so.0 libprotobuf-c.so.1 libz.so.1"

for c in "${comps[@]}"; do
  deb=$out/fleetprof-${c}_${version}-1_$(dpkg --print-architecture).deb
  rpmf=$out/fleetprof-$c-$version-1.$(uname -m).rpm
  listing=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')
  rlisting=$(rpm -qpl "$rpmf" 2>/dev/null)
  for f in ${files[$c]}; do
    grep -qx "$f" <<<"$listing" || fp_fail "$(basename "$deb") lacks $f"
    grep -qx "$f" <<<"$rlisting" || fp_fail "$(basename "$rpmf") lacks $f"
  done
  [[ $(dpkg-deb -f "$deb" Package) == "fleetprof-$c" && $(dpkg-deb -f "$deb" Version) == "$version-1" ]] ||
    fp_fail "$(basename "$deb"): Package/Version are $(dpkg-deb -f "$deb" Package Version)"
  [[ $(rpm -qp --qf '%{NAME} %{VERSION}' "$rpmf" 2>/dev/null) == "fleetprof-$c $version" ]] ||
    fp_fail "$(basename "$rpmf"): name and version are $(rpm -qp --qf '%{NAME} %{VERSION}' "$rpmf")"
  depends=$(dpkg-deb -f "$deb" Depends)
  for l in ${libs_deb[$c]}; do
    grep -Eq "(^|, )$l( |,|$)" <<<"$depends" || fp_fail "$(basename "$deb") Depends lacks $l: $depends"
  done
  requires=$(rpm -qpR "$rpmf" 2>/dev/null)
  for l in ${libs_rpm[$c]}; do
    grep -q "^$l()(64bit)" <<<"$requires" || fp_fail "$(basename "$rpmf") does not require $l: $requires"
  done
  dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles >"$FP_TMP/conffiles"
  [[ $(cat "$FP_TMP/conffiles") == "/etc/fleetprof/$c.conf" ]] ||
    fp_fail "$(basename "$deb") conffiles: $(cat "$FP_TMP/conffiles")"
  [[ $(rpm -qpc "$rpmf" 2>/dev/null) == "/etc/fleetprof/$c.conf" ]] || fp_fail "$(basename "$rpmf") config files: $(rpm -qpc "$rpmf")"
  rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' "$rpmf" 2>/dev/null | grep -qx "cn /etc/fleetprof/$c.conf" ||
    fp_fail "$(basename "$rpmf"): /etc/fleetprof/$c.conf is not %config(noreplace)"
  mkdir -p "$FP_TMP/ctl-$c"
  dpkg-deb -e "$deb" "$FP_TMP/ctl-$c"
  for s in postinst prerm postrm; do
    [[ -x $FP_TMP/ctl-$c/$s ]] || fp_fail "$(basename "$deb"): $s missing or not executable"
    sh -n "$FP_TMP/ctl-$c/$s" || fp_fail "$(basename "$deb"): $s is not valid sh"
  done
  for s in pre post preun postun; do
    rpm -qp --qf "%{${s^^}IN}\n" "$rpmf" 2>/dev/null | sh -n || fp_fail "$(basename "$rpmf"): %$s is not valid sh"
  done
  fp_ok "fleetprof-$c: files, version, Depends ($(sed 's/ ([^)]*)//g' <<<"$depends")), rpm requires, conffile / %config(noreplace), scripts"
done

# The .rpm in a throwaway root (rpm is not this machine's package manager,
# so without scripts and dependencies): the files land, and an edited
# %config(noreplace) file is saved as .rpmsave on erase.
for c in "${comps[@]}"; do
  root=$FP_TMP/rpmroot-$c
  rpmf=$out/fleetprof-$c-$version-1.$(uname -m).rpm
  mkdir -p "$root"
  rpm --root "$root" --initdb 2>/dev/null
  rpm --root "$root" -i --nodeps --noscripts "$rpmf" >"$FP_TMP/rpm-i.log" 2>&1 || fp_fail "rpm -i into a throwaway root: $(cat "$FP_TMP/rpm-i.log")"
  for f in ${files[$c]}; do
    [[ -f $root$f ]] || fp_fail "rpm -i did not install $f"
  done
  echo "# edited" >>"$root/etc/fleetprof/$c.conf"
  rpm --root "$root" -e --noscripts "fleetprof-$c" >"$FP_TMP/rpm-e.log" 2>&1 || fp_fail "rpm -e: $(cat "$FP_TMP/rpm-e.log")"
  [[ ! -e $root/usr/bin/fleetprof-$c && -f $root/etc/fleetprof/$c.conf.rpmsave ]] ||
    fp_fail "rpm -e did not keep the edited config as $c.conf.rpmsave"
  fp_ok "fleetprof-$c .rpm: installs into a throwaway root; rpm -e keeps the edited config as $c.conf.rpmsave"
done

# --- 2. install ------------------------------------------------------------
for c in "${comps[@]}"; do
  installed+=("fleetprof-$c")
  dpkg -i "$out/fleetprof-${c}_${version}-1_$(dpkg --print-architecture).deb" >"$FP_TMP/dpkg-i-$c.log" 2>&1 ||
    fp_fail "dpkg -i fleetprof-$c failed: $(cat "$FP_TMP/dpkg-i-$c.log")"
done
getent group fleetprof >/dev/null || fp_fail "postinst did not create the fleetprof group"
[[ $(stat -c '%U:%G %a' /var/lib/fleetprof-agent) == "root:root 700" ]] ||
  fp_fail "/var/lib/fleetprof-agent is $(stat -c '%U:%G %a' /var/lib/fleetprof-agent), want root:root 700"
[[ ! -e /var/lib/fleetprof ]] || fp_fail "postinst made the shared /var/lib/fleetprof of old"
unit=/usr/lib/systemd/system/fleetprof-agent.service
[[ -L /etc/systemd/system/multi-user.target.wants/fleetprof-agent.service ]] ||
  fp_fail "postinst did not enable fleetprof-agent.service"
[[ $(/usr/bin/fleetprof-agent --version) == "fleetprof-agent $version" ]] || fp_fail "installed agent --version"
[[ $(/usr/bin/agentctl --version) == "agentctl $version" ]] || fp_fail "installed agentctl --version"
[[ $(/usr/bin/fleetprof-agent --check-config --config /etc/fleetprof/agent.conf) == ok ]] ||
  fp_fail "the installed agent.conf does not pass --check-config"
if command -v man >/dev/null; then
  for p in fleetprof-agent.8 agentctl.1; do
    man -w "${p%.*}" >/dev/null 2>&1 || fp_fail "man cannot find ${p%.*} after installation"
  done
fi
if command -v systemd-analyze >/dev/null; then
  v=$(systemd-analyze verify "$unit" 2>&1) || fp_fail "systemd-analyze verify $unit: $v"
  [[ -z $v ]] || fp_fail "systemd-analyze verify $unit warns: $v"
  fp_log "$(systemd-analyze security --offline=yes "$unit" 2>/dev/null | tail -n 1)"
fi
fp_ok "installed: group, /var/lib/fleetprof-agent root:root 0700, unit enabled and verified, man pages, config ok"
if [[ $have_collector == yes ]]; then
  cunit=/usr/lib/systemd/system/fleetprof-collector.service
  getent passwd fleetprof >/dev/null || fp_fail "postinst did not create the fleetprof user"
  [[ $(stat -c '%U:%G %a' /var/lib/fleetprof-collector) == "fleetprof:fleetprof 750" ]] ||
    fp_fail "/var/lib/fleetprof-collector is $(stat -c '%U:%G %a' /var/lib/fleetprof-collector), want fleetprof:fleetprof 750"
  # The collector's user cannot reach the root agent's store.
  setpriv --reuid fleetprof --regid fleetprof --clear-groups touch /var/lib/fleetprof-agent/agent.db 2>/dev/null &&
    fp_fail "the fleetprof user could write in /var/lib/fleetprof-agent"
  [[ $(id -gn fleetprof) == fleetprof ]] || fp_fail "the fleetprof user is not in the fleetprof group"
  [[ -L /etc/systemd/system/multi-user.target.wants/fleetprof-collector.service ]] ||
    fp_fail "postinst did not enable fleetprof-collector.service"
  [[ $(/usr/bin/fleetprof-collector --check-config --config /etc/fleetprof/collector.conf) == ok ]] ||
    fp_fail "the installed collector.conf does not pass --check-config"
  if command -v systemd-analyze >/dev/null; then
    v=$(systemd-analyze verify "$cunit" 2>&1) || fp_fail "systemd-analyze verify $cunit: $v"
    [[ -z $v ]] || fp_fail "systemd-analyze verify $cunit warns: $v"
    fp_log "$(systemd-analyze security --offline=yes "$cunit" 2>/dev/null | tail -n 1)"
  fi
  fp_ok "collector installed: user fleetprof, /var/lib/fleetprof-collector its own (0750), the agent's out of its reach, unit enabled and verified, config ok"
fi

# --- 3. run it as the unit does --------------------------------------------
# unit_value KEY [UNIT]: the value of KEY= in the installed unit's [Service].
unit_value() { sed -n "s/^$1=//p" "${2:-$unit}" | tail -n 1; }

# With the collector: configure both the way an operator would (a shared
# token, the collector's port, the agent's collector URL) by editing the
# installed files, and run the collector as its unit does: user
# fleetprof, no capabilities at all.
if [[ $have_collector == yes ]]; then
  port=$(fp_free_port)
  head -c 24 /dev/urandom | base64 >/etc/fleetprof/token
  chown root:fleetprof /etc/fleetprof/token
  chmod 0640 /etc/fleetprof/token
  printf 'listen = 127.0.0.1:%s\ntoken-file = /etc/fleetprof/token\n' "$port" >>/etc/fleetprof/collector.conf
  printf 'collector = http://127.0.0.1:%s\ntoken-file = /etc/fleetprof/token\n' "$port" >>/etc/fleetprof/agent.conf
  read -r -a ccmd <<<"$(unit_value ExecStart "$cunit")"
  [[ -z $(unit_value CapabilityBoundingSet "$cunit") ]] || fp_fail "the collector unit grants capabilities"
  [[ $(unit_value User "$cunit") == fleetprof ]] || fp_fail "the collector unit does not run as fleetprof"
  setpriv --reuid fleetprof --regid fleetprof --clear-groups \
    --inh-caps -all --ambient-caps -all --bounding-set -all -- \
    "${ccmd[@]}" >"$FP_TMP/collector.log" 2>&1 &
  collector_pid=$!
  fp_wait_for 15 curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" ||
    fp_fail "the installed collector does not answer on port $port: $(cat "$FP_TMP/collector.log")"
  [[ $(stat -c %U /var/lib/fleetprof-collector/collector.db) == fleetprof ]] || fp_fail "collector.db is not owned by fleetprof"
  fp_ok "the installed collector runs as its unit does (user fleetprof, no capabilities), store in /var/lib/fleetprof-collector"
fi
exec_start=$(unit_value ExecStart)
read -r -a cmd <<<"$exec_start"
[[ ${cmd[0]} == /usr/bin/fleetprof-agent ]] || fp_fail "ExecStart runs '${cmd[0]}'"
caps=$(unit_value CapabilityBoundingSet)
ambient=$(unit_value AmbientCapabilities)
[[ $caps == "$ambient" ]] || fp_fail "bounding and ambient sets differ: '$caps' vs '$ambient'"
grep -q CAP_SYS_ADMIN <<<"$caps" && fp_fail "the agent unit grants CAP_SYS_ADMIN"
# CAP_FOO_BAR ... -> ,+foo_bar,... (setpriv's notation). A capability this
# machine's own bounding set lacks (a container may lack CAP_SYS_RESOURCE)
# cannot be granted here: it is left out and said so.
have=$(capsh --decode="$(awk '/^CapBnd:/ {print $2}' /proc/self/status)" | tr 'A-Z' 'a-z')
setpriv_caps= missing=
for c in $caps; do
  c=$(tr 'A-Z' 'a-z' <<<"$c")
  if grep -Eq "(=|,)$c(,|$)" <<<"$have"; then setpriv_caps+=",+${c#cap_}"; else missing+=" $c"; fi
done
[[ -z $missing ]] || fp_log "this machine lacks$missing itself: running the agent without it"
# What systemd sets up before ExecStart: the runtime directory and the
# limits (as far as this machine lets root raise them).
group=$(unit_value Group)
group=${group:-root}
install -d -m "$(unit_value RuntimeDirectoryMode)" -o root -g "$group" /run/fleetprof
limits=()
memlock=$(sed 's/infinity/unlimited/' <<<"$(unit_value LimitMEMLOCK)")
nofile=$(unit_value LimitNOFILE)
prlimit --memlock="$memlock" true 2>/dev/null && limits+=(--memlock="$memlock") ||
  fp_log "cannot raise RLIMIT_MEMLOCK to $memlock here; the agent keeps $(ulimit -Hl) KiB"
prlimit --nofile="$nofile" true 2>/dev/null && limits+=(--nofile="$nofile") ||
  fp_log "cannot raise RLIMIT_NOFILE to $nofile here; the agent keeps $(ulimit -Hn)"
fp_log "ExecStart: $exec_start; capabilities: $caps"
prlimit "${limits[@]}" -- \
  setpriv --regid "$group" --clear-groups \
  --inh-caps "-all$setpriv_caps" --ambient-caps "-all$setpriv_caps" --bounding-set "-all$setpriv_caps" \
  -- "${cmd[@]}" >"$FP_TMP/agent.log" 2>&1 &
agent_pid=$!
fp_wait_for 15 test -S /run/fleetprof/agent.sock || fp_fail "the installed agent did not create /run/fleetprof/agent.sock"
grep -q '^CapEff:' "/proc/$agent_pid/status" || fp_fail "the agent (pid $agent_pid) is gone"
capeff=$(awk '/^CapEff:/ {print $2}' "/proc/$agent_pid/status")
[[ $((16#$capeff & (1 << 21))) -eq 0 ]] || fp_fail "the agent runs with CAP_SYS_ADMIN (CapEff $capeff)"
fp_ok "the installed agent runs as ExecStart says, with CapEff $capeff (no CAP_SYS_ADMIN)"

# A workload as another user: needs CAP_PERFMON and CAP_SYS_PTRACE.
install -d -o nobody "$FP_TMP/nobody"
setpriv --reuid nobody --regid nogroup --clear-groups \
  "$FP_SPIN" --threads 2 --seconds 60 --ready "$FP_TMP/nobody/ready" >"$FP_TMP/spin.out" 2>&1 &
spin=$!
fp_track "$spin"
fp_wait_for 20 test -e "$FP_TMP/nobody/ready" || fp_fail "spin did not start: $(cat "$FP_TMP/spin.out")"
ctl() { fp_timeout 30 /usr/bin/agentctl "$@"; }
ctl start "$spin" --freq 199 >"$FP_TMP/start.out" 2>&1 || fp_fail "agentctl start: $(cat "$FP_TMP/start.out")"
sleep 3
ctl status >"$FP_TMP/status.out" 2>&1 || fp_fail "agentctl status: $(cat "$FP_TMP/status.out")"
samples=$(ctl status --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(sum(t.get('samples', 0) for t in d['targets'] if t['pid'] == $spin))")
((samples > 100)) || fp_fail "only $samples samples of spin after 3 s: $(cat "$FP_TMP/status.out")"
ctl dump "$spin" --format top >"$FP_TMP/top.out" 2>&1 || fp_fail "agentctl dump: $(cat "$FP_TMP/top.out")"
grep -q spin_inner "$FP_TMP/top.out" || fp_fail "the dump lacks spin_inner: $(head -20 "$FP_TMP/top.out")"
ctl dump "$spin" -o "$FP_TMP/prof.pb.gz" || fp_fail "agentctl dump -o failed"
gzip -t "$FP_TMP/prof.pb.gz" || fp_fail "the pprof dump is not gzip"
if [[ $have_collector == yes ]]; then
  ctl flush >"$FP_TMP/flush.out" 2>&1 || fp_fail "agentctl flush: $(cat "$FP_TMP/flush.out")"
  series=$(curl -fsS "http://127.0.0.1:$port/api/v1/series") || fp_fail "GET /api/v1/series failed"
  grep -q '"spin"' <<<"$series" || fp_fail "the collector has no series for spin after agentctl flush: $series ($(cat "$FP_TMP/flush.out"))"
  fp_ok "agentctl flush uploaded to the installed collector with the shared token: $(cat "$FP_TMP/flush.out" | head -1)"
fi
ctl stop "$spin" >/dev/null || fp_fail "agentctl stop failed"
fp_kill "$spin"
fp_kill "$agent_pid"
agent_pid=
if [[ $have_collector == yes ]]; then
  fp_kill "$collector_pid"
  collector_pid=
fi
[[ -s /var/lib/fleetprof-agent/agent.db ]] || fp_fail "no /var/lib/fleetprof-agent/agent.db after the agent ran"
grep -q "listening on /run/fleetprof/agent.sock" "$FP_TMP/agent.log" || fp_fail "unexpected agent log: $(cat "$FP_TMP/agent.log")"
fp_ok "installed agentctl profiled a nobody-owned process: $samples samples, spin_inner in the dump, store written"

# --- 4. upgrade and remove keep data and conffiles, purge deletes them ------
echo "bucket = 5" >>/etc/fleetprof/agent.conf
[[ $have_collector == yes ]] && echo "# edited by test-package" >>/etc/fleetprof/collector.conf
db_size=$(stat -c %s /var/lib/fleetprof-agent/agent.db)
# Installing over an installed package runs the upgrade path of every
# maintainer script (prerm upgrade, postrm upgrade, postinst configure OLD).
for c in "${comps[@]}"; do
  dpkg -i "$out/fleetprof-${c}_${version}-1_$(dpkg --print-architecture).deb" >"$FP_TMP/dpkg-u.log" 2>&1 ||
    fp_fail "reinstalling fleetprof-$c failed: $(cat "$FP_TMP/dpkg-u.log")"
done
[[ $(stat -c %s /var/lib/fleetprof-agent/agent.db 2>/dev/null) == "$db_size" ]] || fp_fail "the upgrade changed or deleted agent.db"
tail -n 1 /etc/fleetprof/agent.conf | grep -qx "bucket = 5" || fp_fail "the upgrade lost the edited agent.conf"
if [[ $have_collector == yes ]]; then
  [[ -s /var/lib/fleetprof-collector/collector.db ]] || fp_fail "the upgrade deleted collector.db"
  tail -n 1 /etc/fleetprof/collector.conf | grep -qx "# edited by test-package" || fp_fail "the upgrade lost the edited collector.conf"
fi
fp_ok "upgrade (reinstall): stores and edited conffiles kept"
# An upgrade from an earlier release, when both stores shared /var/lib/fleetprof:
# the stores are put back where they were, and the upgrade moves each home.
install -d -o root -g fleetprof -m 0775 /var/lib/fleetprof
mv /var/lib/fleetprof-agent/agent.db* /var/lib/fleetprof/
[[ $have_collector == yes ]] && mv /var/lib/fleetprof-collector/collector.db* /var/lib/fleetprof/
for c in "${comps[@]}"; do
  dpkg -i "$out/fleetprof-${c}_${version}-1_$(dpkg --print-architecture).deb" >"$FP_TMP/dpkg-u.log" 2>&1 ||
    fp_fail "upgrading fleetprof-$c from the shared layout failed: $(cat "$FP_TMP/dpkg-u.log")"
done
[[ $(stat -c %s /var/lib/fleetprof-agent/agent.db 2>/dev/null) == "$db_size" ]] ||
  fp_fail "the upgrade did not move agent.db to /var/lib/fleetprof-agent: $(ls -la /var/lib/fleetprof* 2>&1)"
[[ ! -e /var/lib/fleetprof ]] || fp_fail "the upgrade left /var/lib/fleetprof: $(ls -la /var/lib/fleetprof)"
if [[ $have_collector == yes ]]; then
  [[ $(stat -c %U /var/lib/fleetprof-collector/collector.db 2>/dev/null) == fleetprof ]] ||
    fp_fail "the upgrade did not move collector.db to /var/lib/fleetprof-collector (owned by fleetprof)"
fi
fp_ok "upgrade from the shared /var/lib/fleetprof: each store moved to its own directory, the old one gone"
for ((i = ${#installed[@]} - 1; i >= 0; i--)); do
  dpkg -r "${installed[i]}" >"$FP_TMP/dpkg-r.log" 2>&1 || fp_fail "dpkg -r ${installed[i]}: $(cat "$FP_TMP/dpkg-r.log")"
done
[[ ! -e /usr/bin/fleetprof-agent && ! -e $unit ]] || fp_fail "dpkg -r left the program or the unit"
[[ -s /var/lib/fleetprof-agent/agent.db ]] || fp_fail "dpkg -r deleted /var/lib/fleetprof-agent/agent.db"
tail -n 1 /etc/fleetprof/agent.conf | grep -qx "bucket = 5" || fp_fail "dpkg -r lost the edited /etc/fleetprof/agent.conf"
dpkg-query -W -f='${Status}' fleetprof-agent | grep -q 'config-files' || fp_fail "after dpkg -r the status is $(dpkg-query -W -f='${Status}' fleetprof-agent)"
if [[ $have_collector == yes ]]; then
  [[ ! -e /usr/bin/fleetprof-collector ]] || fp_fail "dpkg -r left the collector"
  [[ -s /var/lib/fleetprof-collector/collector.db ]] || fp_fail "dpkg -r deleted collector.db"
  tail -n 1 /etc/fleetprof/collector.conf | grep -qx "# edited by test-package" || fp_fail "dpkg -r lost the edited collector.conf"
fi
fp_ok "dpkg -r: programs and units gone; stores and edited conffiles kept"

# The token file is the operator's own, not a conffile: it would (rightly)
# keep /etc/fleetprof after the purge.
rm -f /etc/fleetprof/token
for ((i = ${#installed[@]} - 1; i >= 0; i--)); do
  dpkg -P "${installed[i]}" >"$FP_TMP/dpkg-p.log" 2>&1 || fp_fail "dpkg -P ${installed[i]}: $(cat "$FP_TMP/dpkg-p.log")"
done
installed=()
[[ ! -e /var/lib/fleetprof-agent && ! -e /var/lib/fleetprof-collector && ! -e /var/lib/fleetprof ]] ||
  fp_fail "dpkg -P left $(ls -la /var/lib/fleetprof* 2>&1)"
[[ ! -e /etc/fleetprof/agent.conf && ! -e /etc/fleetprof/collector.conf && ! -e /etc/fleetprof ]] ||
  fp_fail "dpkg -P left /etc/fleetprof: $(ls -la /etc/fleetprof)"
[[ ! -e /etc/systemd/system/multi-user.target.wants/fleetprof-agent.service ]] || fp_fail "dpkg -P left the unit enabled"
if dpkg-query -W -f='${Status}' fleetprof-agent 2>/dev/null | grep -qv 'not-installed'; then
  fp_fail "after dpkg -P the status is $(dpkg-query -W -f='${Status}' fleetprof-agent)"
fi
fp_ok "dpkg -P: store, conffile and enablement gone"
