#!/usr/bin/env bash
# A name of multibyte characters that an error message cuts inside a
# character still gets its own status and a valid JSON error object, from
# both daemons (one router writes both): tenbind's "site '%.64s' not
# found" used to answer 500, and the agent's "dataset name '%.64s'" and
# "no route" messages a bare "null".
. "$(dirname "$0")/lib.sh"

t_agent_start SRC "$T_DIR/src"
t_start

# cjk N: N times U+4E2D, percent-encoded.
cjk() { for _ in $(seq 1 "$1"); do printf '%%E4%%B8%%AD'; done; }

# check WHO STATUS CODE OUT: OUT is "STATUS BODY"; the body must be valid
# UTF-8 JSON whose error code is CODE, and its message must keep the
# whole characters before the cut ('?' for the cut one).
check() {
  local who=$1 status=$2 code=$3 out=$4 got
  t_expect "$who: status $status" "$out" "^$status "
  got=$(python3 -c '
import json, sys
body = open(sys.argv[1], "rb").read()
e = json.loads(body.decode("utf-8", "strict"))["error"]
print(e["code"], "whole" if "\u4e2d" * 3 in e["message"] else "cut")
' "$T_DIR/body" 2>&1 || true)
  t_expect "$who: a valid JSON error object with code $code" "$got" \
    "^$code whole$"
}

check "tenbind, a site named by 22 CJK characters" 404 NOT_FOUND \
  "$(t_http GET "/v1/sites/$(cjk 22)")"
# "/v1/xy" puts the cut of "%.100s" (and of the agent's former "%.200s")
# inside a character.
check "tenbind, a path of 70 CJK characters with no route" 404 NOT_FOUND \
  "$(t_http GET "/v1/xy$(cjk 70)")"

check "agent, a path of 70 CJK characters with no route" 404 NOT_FOUND \
  "$(t_agent SRC GET "/v1/xy$(cjk 70)")"
check "agent, a dataset named by 22 CJK characters" 400 INVALID \
  "$(t_agent SRC GET "/v1/datasets/$(cjk 22)/versions")"

t_agent_stop SRC
t_stop
t_done
