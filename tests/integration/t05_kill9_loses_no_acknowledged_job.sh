#!/usr/bin/env bash
# Crash safety: 500 jobs from 4 concurrent clients, tenbind killed with -9
# in the middle and restarted.  Every job that got a 201 is there, and
# clients that retry with their Idempotency-Key never create a job twice.
. "$(dirname "$0")/lib.sh"
t_start
port=${T_URL##*:}
PER_CLIENT=125

client() {
  local c=$1 i code tries
  for i in $(seq 1 $PER_CLIENT); do
    tries=0
    while :; do
      code=$(curl -sS -o "$T_DIR/c$c.body" -w '%{http_code}' --max-time 10 \
        -X POST "http://127.0.0.1:$port/v1/jobs" \
        -H 'Content-Type: application/json' -H "Idempotency-Key: c$c-$i" \
        -d "{\"name\": \"c$c-$i\", \"project\": \"crash\", \"command\": [\"true\"], \"hold\": true}" 2>/dev/null) || code=000
      if [ "$code" = 201 ]; then
        echo "$(jq -r .id "$T_DIR/c$c.body") c$c-$i" >>"$T_DIR/acked.$c"
        break
      fi
      tries=$((tries + 1))
      [ "$tries" -lt 600 ] || { echo "client $c gave up on job $i ($code)" >&2; return 1; }
      sleep 0.05
    done
  done
}

pids=()
for c in 1 2 3 4; do
  client "$c" &
  pids+=($!)
done
# Kill tenbind once about 200 jobs were acknowledged.
for _ in $(seq 1 600); do
  n=$(cat "$T_DIR"/acked.* 2>/dev/null | wc -l) || true
  [ "$n" -ge 200 ] && break
  sleep 0.05
done
t_expect "jobs were being acknowledged before the crash" "$n" '^[0-9]+$'
t_crash
echo "killed tenbind with -9 after $n acknowledgements"
sleep 0.5
t_start --listen "127.0.0.1:$port"
ok=1
for p in "${pids[@]}"; do wait "$p" || ok=0; done
[ "$ok" = 1 ] && t_ok "every client finished" || t_fail "every client finished"

acked=$(cat "$T_DIR"/acked.* | wc -l | tr -d ' ')
t_expect "all 500 submissions were acknowledged in the end" "$acked" '^500$'
"$TENBIN" --json jobs --project crash --all >"$T_DIR/all.json"
jq -r '.jobs[] | "\(.id) \(.name)"' "$T_DIR/all.json" | sort >"$T_DIR/stored"
sort "$T_DIR"/acked.* >"$T_DIR/acked"
missing=$(comm -23 "$T_DIR/acked" "$T_DIR/stored" | wc -l | tr -d ' ')
t_expect "every acknowledged job is stored with its id and name" "$missing" '^0$'
dups=$(awk '{print $2}' "$T_DIR/stored" | sort | uniq -d | wc -l | tr -d ' ')
t_expect "no job was created twice" "$dups" '^0$'
t_expect "exactly 500 jobs exist" "$(wc -l <"$T_DIR/stored" | tr -d ' ')" '^500$'
t_stop
t_done
