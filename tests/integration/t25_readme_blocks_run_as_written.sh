#!/usr/bin/env bash
# The README's command blocks work as written, in order, on a fresh
# checkout: every block fenced "```sh tested=NAME" is taken from README.md
# itself and run, so that none can rot unseen.
#
# The blocks run in one shell (a block's PATH and variables carry on, as in
# a terminal), with `set -e`: any command that fails fails the test.  They
# run in a checkout-like folder of their own (scripts/, examples/ and
# build/bin, the build under test) whose var/ starts empty.  Emulated, as a
# person at two terminals would do it:
# - a line marked "# terminal 1" runs in the background until its block
#   ends; then it gets Ctrl-C (SIGINT) and must exit 0 (sanitizers clean);
# - after a server starts (that line, or one ending in " &"), the test
#   waits until it answers, and until tenbind's sites are reachable;
# - what a block leaves running in the background is ended with it.
# After each block a check of this file may verify what the README says
# the block shows.
. "$(dirname "$0")/lib.sh"
README=$TENBIN_SOURCE_DIR/README.md

for port in 8750 8761 8762; do
  if curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/"; then
    echo "port $port is in use: the README's blocks need it free" >&2
    exit 1
  fi
done

# The checkout: its parents are searchable by all, as a clone in /srv or
# /home/user would be (T_DIR is private), so only its own modes count.
T_CO=$(mktemp -d /tmp/tenbin-t25-checkout.XXXXXX)
chmod 755 "$T_CO"
mkdir -p "$T_CO/scripts" "$T_CO/build"
for f in run slurm-testbed; do
  ln -s "$TENBIN_SOURCE_DIR/scripts/$f" "$T_CO/scripts/$f"
done
ln -s "$TENBIN_SOURCE_DIR/examples" "$T_CO/examples"
ln -s "$TENBIN_BIN" "$T_CO/build/bin"
# scripts/run runs these binaries and builds nothing; the testbed's state
# is this test's (lib.sh stops it and removes it at exit).
export TENBIN_BIN
T_TB=$(mktemp -d /tmp/tenbin-t25-tb.XXXXXX)
chmod 755 "$T_TB"
export SLURM_TESTBED_DIR=$T_TB
# Local jobs of the README's var/ are ended at exit like a test's own.
# shellcheck disable=SC2034 # lib.sh reads it
T_STATE=$T_CO/var
unset TENBIN_SERVER

# ---- the harness the blocks run in ----

T1_PID=""
T1_LOG=""
demo=""

# t25_listening URL PID: waits up to 60 s until URL answers at all.
t25_listening() {
  local url=$1 pid=$2
  for _ in $(seq 1 600); do
    curl -s -o /dev/null --max-time 2 "$url" && return 0
    kill -0 "$pid" 2>/dev/null || { echo "t25: pid $pid exited before $url answered" >&2; return 1; }
    sleep 0.1
  done
  echo "t25: $url does not answer" >&2
  return 1
}

# t25_ready PID: tenbind on 8750 answers /healthz and all its sites are
# reachable (a Slurm site is after its first poll).
t25_ready() {
  t25_listening http://127.0.0.1:8750/healthz "$1" || return 1
  for _ in $(seq 1 600); do
    [ "$(curl -fsS http://127.0.0.1:8750/v1/sites |
          jq '[.sites[] | select(.reachable | not)] | length')" = 0 ] && return 0
    sleep 0.1
  done
  echo "t25: tenbind's sites are not all reachable" >&2
  return 1
}

# t25_terminal1 CMD...: the line runs "in terminal 1", in the background.
t25_terminal1() {
  T1_LOG=$T_DIR/terminal1-$T25_BLOCK.log
  "$@" >"$T1_LOG" 2>&1 &
  T1_PID=$!
  t25_ready "$T1_PID" || { cat "$T1_LOG" >&2; return 1; }
}

# t25_background LINE-TEXT: after a line that ended in " &".
t25_background() {
  local pid=$! port=8750
  if [[ $1 =~ --listen\ 127\.0\.0\.1:([0-9]+) ]]; then port=${BASH_REMATCH[1]}; fi
  if [[ $1 == tenbind* ]]; then
    t25_ready "$pid"
  else
    t25_listening "http://127.0.0.1:$port/" "$pid"
  fi
}

t25_begin() {
  T25_BLOCK=$1
  echo "---- README block '$1'"
}

t25_end() {
  local pid rc
  if declare -F "check_$1" >/dev/null; then "check_$1"; fi
  if [ -n "$T1_PID" ]; then
    kill -INT "$T1_PID"
    rc=0
    wait "$T1_PID" || rc=$?
    t_expect "block $1: terminal 1 exits cleanly on Ctrl-C" "$rc" '^0$'
    if grep -q "Sanitizer\|runtime error:" "$T1_LOG"; then
      t_fail "block $1: terminal 1 is clean under the sanitizers"
      cat "$T1_LOG" >&2
    fi
    T1_PID=""
    if declare -F "stopped_$1" >/dev/null; then "stopped_$1"; fi
  fi
  for pid in $(jobs -p); do
    kill -TERM "$pid" 2>/dev/null || true
    rc=0
    wait "$pid" || rc=$?
    t_expect "block $1: background pid $pid exited cleanly" "$rc" '^0$'
  done
}

t25_cleanup() {
  local rc=$? pid
  [ -z "$T1_PID" ] || kill -INT "$T1_PID" 2>/dev/null || true
  for pid in $(jobs -p); do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ "$rc" -ne 0 ]; then
    echo "t25: README block '${T25_BLOCK:-}' failed (exit $rc); its script: $T_DIR/readme.sh" >&2
  fi
  # lib.sh's cleanup ends the local jobs of $T_STATE and the testbed.
  # It reads the exit status from $?.
  set +e
  (exit "$rc")
  t_cleanup
  case $demo in /tmp/tenbin-demo.*) rm -rf "$demo" ;; esac
  rm -rf "$T_CO"
}
trap t25_cleanup EXIT

# ---- what the README says each block shows ----

check_quickstart() {
  local js
  js=$(curl -fsS 'http://127.0.0.1:8750/v1/jobs?limit=100')
  t_expect "quickstart: three jobs" "$(jq '.jobs | length' <<<"$js")" '^3$'
  t_expect "quickstart: the first says hello" "$(tenbin logs 1)" '^hello$'
  t_expect "quickstart: the counter printed 1 2 3" "$(tenbin logs 2 | tr '\n' ' ')" '^1 2 3 $'
  t_expect "quickstart: two succeeded" \
    "$(jq -r '[.jobs[] | select(.id < 3) | .state] | join(" ")' <<<"$js")" '^succeeded succeeded$'
  t_expect "quickstart: the sleep is cancelled" "$(t25_wait_state 3 cancelled)" '^cancelled$'
}

# $job is the README's (set by the block, in this shell).
# shellcheck disable=SC2154
check_slurm() {
  local js
  js=$(curl -fsS 'http://127.0.0.1:8750/v1/jobs?limit=100')
  t_expect "slurm: every job succeeded" \
    "$(jq -r '[.jobs[] | .state] | unique | join(" ")' <<<"$js")" '^succeeded$'
  t_expect "slurm: the a10g job ran on cloud" \
    "$(jq -r '.jobs[] | select(.name == "a10g-check") | .site' <<<"$js")" '^cloud$'
  t_expect "slurm: train.sh got its 2 h100 and 4 CPUs" \
    "$(tenbin logs "$job" | sed -n 1p)" '^train on onprem: GPUs [0-9],[0-9], 4 CPUs$'
  t_expect "slurm: the testbed is stopped" \
    "$( (scripts/slurm-testbed status 2>&1 || true) | tail -n 1)" '^not running$'
}

check_datasets() {
  local ev
  ev=$(tenbin events "$job")
  t_expect "datasets: the job waited in staging" "$ev" 'queued +staging'
  t_expect "datasets: and ran once the replica was staged" "$ev" 'staging +placed .*staged'
  t_expect "datasets: it succeeded" "$ev" 'running +succeeded'
  t_expect "datasets: the token file is 0600" "$(stat -c %a "$demo/token")" '^600$'
  # The file's first MiB changed: a little more than that goes on the wire.
  t_expect "datasets: the second sync moved about 1 MB" \
    "$(curl -fsS http://127.0.0.1:8750/v1/datasets/train |
       jq '.latest as $v | .replicas[] | select(.site == "cloud" and .version == $v) |
           .bytes_wire > 1000000 and .bytes_wire < 4000000')" '^true$'
}

# $job is the block's h100 job.
check_clouds() {
  local js left=""
  js=$(curl -fsS 'http://127.0.0.1:8750/v1/jobs?limit=100')
  t_expect "clouds: one job ran on each provider" \
    "$(jq -r '[.jobs[] | select(.state == "succeeded") | .site] | sort | join(" ")' <<<"$js")" '^aws azure gcp$'
  t_expect "clouds: the h100 job's output came from its EC2 instance" \
    "$(tenbin logs "$job")" '^hi from i-[0-9a-f]+$'
  # The README says idle nodes go after 20 s.
  for _ in $(seq 1 600); do
    left=$(for s in aws gcp azure; do curl -fsS "http://127.0.0.1:8750/v1/sites/$s"; done |
      jq -s '[.[].nodes[] | select(.state != "ended")] | length')
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  t_expect "clouds: every node idled out within a minute" "$left" '^0$'
  t_expect "clouds: one node per site, each ended for being idle" \
    "$(for s in aws gcp azure; do curl -fsS "http://127.0.0.1:8750/v1/sites/$s"; done |
       jq -rs '[.[].nodes[] | .reason] | join(",")')" '^(released by the autoscaler: release node [0-9]+ \(idle [0-9]+ s\),?){3}$'
}

# After Ctrl-C: the fakes and the VMs' processes (all named by their
# paths under var/clouds) are gone.
stopped_clouds() {
  local left=""
  for _ in $(seq 1 300); do
    left=$(pgrep -f -- "$T_CO/var/clouds/" || true)
    [ -z "$left" ] && break
    sleep 0.1
  done
  t_expect "clouds: Ctrl-C left no fake and no VM running" "${left:-none}" '^none$'
}

t25_wait_state() {
  local id=$1 want=$2 state=""
  for _ in $(seq 1 300); do
    state=$(curl -fsS "http://127.0.0.1:8750/v1/jobs/$id" | jq -r .state)
    [ "$state" = "$want" ] && break
    sleep 0.1
  done
  echo "$state"
}

# ---- extract and run ----

awk '
  /^```sh tested=/ { name = substr($0, 14); print "t25_begin " name; inb = 1; next }
  inb && /^```[[:space:]]*$/ { print "t25_end " name; inb = 0; next }
  !inb { next }
  /# terminal 1/ { sub(/[[:space:]]*#.*$/, ""); print "t25_terminal1 " $0; next }
  / &[[:space:]]*$/ { line = $0; sub(/[[:space:]]*&[[:space:]]*$/, "", line);
                      gsub(/\x27/, "\x27\\\x27\x27", line);
                      print; print "t25_background \x27" line "\x27"; next }
  { print }
' "$README" >"$T_DIR/readme.sh"
blocks=$(sed -n 's/^t25_begin //p' "$T_DIR/readme.sh" | tr '\n' ' ')
t_expect "the README marks its runnable blocks" "$blocks" '^quickstart slurm clouds datasets $'

cd "$T_CO" || exit 1
set -E
trap 'echo "t25: README line failed in block ${T25_BLOCK:-}: $BASH_COMMAND" >&2' ERR
# shellcheck disable=SC1091
. "$T_DIR/readme.sh"
trap - ERR
set +E
cd /

t_done
