#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The man pages match the programs: every long option a program's --help
# prints appears in its man page, and every option the man page names
# appears in --help (fleetprof-agent(8), agentctl(1), and
# fleetprof-collector(8) when the collector is built). The pages must
# also render without a groff warning, and every program answers
# --version with the project's version.
source "$(dirname "$0")/lib.sh"
fp_init 60

man_dir=$FP_SRC/packaging/man
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$FP_BUILD/CMakeCache.txt")
[[ -n $version ]] || fp_fail "no CMAKE_PROJECT_VERSION in $FP_BUILD/CMakeCache.txt"

# Long options (--foo-bar) in a program's --help.
help_flags() { "$1" --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u; }
# Long options in a roff page: "\-\-foo" is "--foo" once the escapes go.
man_flags() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$1" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u; }

check() {
  local prog=$1 page=$2 name
  name=$(basename "$prog")
  [[ -x $prog ]] || fp_fail "missing program $prog"
  [[ -f $page ]] || fp_fail "missing man page $page"
  local h m
  h=$(help_flags "$prog") || fp_fail "$name --help failed"
  m=$(man_flags "$page")
  [[ -n $h ]] || fp_fail "$name --help lists no options"
  local only_help only_man
  only_help=$(comm -23 <(echo "$h") <(echo "$m"))
  only_man=$(comm -13 <(echo "$h") <(echo "$m"))
  [[ -z $only_help ]] || fp_fail "$name: in --help but not in $(basename "$page"): $only_help"
  [[ -z $only_man ]] || fp_fail "$name: in $(basename "$page") but not in --help: $only_man"
  fp_ok "$name: the $(echo "$h" | wc -l) options of --help and $(basename "$page") agree"

  local warn
  warn=$(sed "s/@PROJECT_VERSION@/$version/" "$page" | groff -man -Tutf8 -ww -z 2>&1)
  [[ -z $warn ]] || fp_fail "groff warns about $(basename "$page"): $warn"
  [[ $("$prog" --version) == "$name $version" ]] ||
    fp_fail "$name --version printed '$("$prog" --version)', want '$name $version'"
  fp_ok "$name: page renders cleanly; --version is $version"
}

check "$FP_AGENT" "$man_dir/fleetprof-agent.8"
check "$FP_AGENTCTL" "$man_dir/agentctl.1"
if [[ -x $FP_BUILD/collector/fleetprof-collector ]]; then
  check "$FP_BUILD/collector/fleetprof-collector" "$man_dir/fleetprof-collector.8"
else
  fp_log "no collector in this build: fleetprof-collector(8) not checked"
fi

# The check itself must notice a difference: a page without one option.
sed 's/\\-\\-store\\-max\\-mb/\\-\\-store\\-budget/g' "$man_dir/fleetprof-agent.8" >"$FP_TMP/bad.8"
only=$(comm -23 <(help_flags "$FP_AGENT") <(man_flags "$FP_TMP/bad.8"))
[[ $only == "--store-max-mb" ]] || fp_fail "the comparison missed a removed option (got '$only')"
fp_ok "a page missing --store-max-mb is caught"
