# shellcheck shell=bash
# What the self-tests of the token-granting fakes share
# (selftest_gce.sh, selftest_azure.sh): a scratch directory ($T, removed
# at exit), ok/FAIL lines, calls with a fresh bearer token, the start of
# the fake and its SIGTERM at the end.  A self-test sources this file and
# defines new_token, which asks the fake's token endpoint (body in
# $T/out).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
export T
fails=0
pid=

cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$T"
}
trap cleanup EXIT

ok() { echo "ok - $1"; }
bad() { echo "FAIL - $1: $2" >&2; fails=$((fails + 1)); }
# expect DESC ACTUAL REGEX
expect() { if [[ $2 =~ $3 ]]; then ok "$1"; else bad "$1" "got '${2:0:400}', want /$3/"; fi; }

TOKEN=none
issued=0
# fresh: a new token when the one held is near its (short) expiry.
fresh() {
  if [ $(($(date +%s) - issued)) -ge 2 ] && [ -z "${norefresh:-}" ]; then
    new_token
    TOKEN=$(j 'd["access_token"]')
    issued=$(date +%s)
  fi
}
# call METHOD URL-OR-PATH [JSON]: status in $code, body in $T/out,
# headers in $T/hdr.
# shellcheck disable=SC2034 # code is the self-test's to read
call() {
  local m=$1 p=$2
  shift 2
  fresh
  local a=(-s -D "$T/hdr" -o "$T/out" -w '%{http_code}' -X "$m" -H "Authorization: Bearer $TOKEN")
  if [ $# -gt 0 ]; then a+=(-H 'Content-Type: application/json' --data-binary "$1"); fi
  case $p in http*) ;; *) p=$base$p ;; esac
  : >"$T/out"
  code=$(curl "${a[@]}" "$p")
}
# j EXPR: a Python expression over the last body, d.
j() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/out" "$1"; }
fault() { curl -s -X POST --data-binary "$1" "$base/_fake/faults" >/dev/null; }

# start_fake FAKE.py [ARGS...]: the fake on a port of its own, VMs under
# $T/root, log in $T/fake.log; sets pid and base (or exits).
start_fake() {
  local fake=$1
  shift
  python3 "$here/$fake" --root "$T/root" --port-file "$T/port" "$@" 2>"$T/fake.log" &
  pid=$!
  for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
  [ -s "$T/port" ] || { echo "FAIL - the fake did not start" >&2; cat "$T/fake.log" >&2; exit 1; }
  base=http://127.0.0.1:$(cat "$T/port")
}

# finish NAME: SIGTERM ends the fake with status 0 and every VM process
# with it; then the verdict (the fake's log on a failure).
finish() {
  local pids rc=0 alive="" p
  pids=$(curl -s "$base/_fake/vms" | python3 -c 'import json,sys; print(" ".join(str(v["pid"]) for v in json.load(sys.stdin) if v["pid"]))')
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  pid=
  expect "SIGTERM ends the fake with status 0" "$rc" "^0$"
  for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
  expect "and no VM process outlives it" "${alive:-none}" "^none$"

  if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed; the fake's log:" >&2
    tail -n 40 "$T/fake.log" >&2
    exit 1
  fi
  echo "all $1 fake checks passed"
}
