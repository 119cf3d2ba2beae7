#!/usr/bin/env bash
# Hostile clients cannot take tenbind down: slowloris from one address is
# held to max_connections_per_address while others are served, slow
# headers and half bodies are cut (header_timeout_s, min_body_rate), and
# accepting resumes after 1030 half bodies fill the 1024-connection limit,
# round after round; unauthenticated uploads are answered 401 from their
# headers, their bodies never read; a NUL in the path or query and
# ambiguous framing are 400.  Asserts service, never a time.
. "$(dirname "$0")/lib.sh"
# 1030 client sockets here and as many in tenbind, plus their files.
ulimit -n 4096 2>/dev/null || true
[ "$(ulimit -n)" -ge 2200 ] || { echo "ulimit -n is $(ulimit -n); need 2200" >&2; exit 1; }
cat >"$T_DIR/config.json" <<'JSON'
{"auth": {"enabled": true},
 "http": {"max_connections": 1024, "max_connections_per_address": 128,
          "header_timeout_s": 2},
 "sites": [{"name": "local", "kind": "local"}]}
JSON
admin=$("$TENBIND" token create --role admin --state "$T_STATE")
t_start --config "$T_DIR/config.json"
rc=0
python3 -u "$(dirname "$0")/slow_clients.py" "${T_URL##*:}" "$admin" "$T_PID" || rc=$?
t_expect "every hostile-client check passed" "$rc" '^0$'
t_expect "the NUL request submitted no job" \
  "$(curl -fsS -H "Authorization: Bearer $admin" "$T_URL/v1/jobs" | jq '.jobs | length')" '^0$'
t_expect "tenbind logged the connections it cut" \
  "$(grep -c 'too slow to send a request' "$T_DIR/tenbind.err")" '^[1-9]'
t_stop
t_done
