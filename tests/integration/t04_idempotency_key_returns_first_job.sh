#!/usr/bin/env bash
# Idempotency-Key on POST /v1/jobs: a retry returns the first job; the
# same key with another body is refused; keys survive a restart.
. "$(dirname "$0")/lib.sh"
t_start
J=(-H 'Content-Type: application/json')
body='{"project": "demo", "command": ["true"], "hold": true}'

r1=$(t_http POST /v1/jobs "${J[@]}" -H 'Idempotency-Key: k-1' -d "$body")
id1=$(jq -r .id "$T_DIR/body")
r2=$(t_http POST /v1/jobs "${J[@]}" -H 'Idempotency-Key: k-1' -d "$body" -D "$T_DIR/headers")
id2=$(jq -r .id "$T_DIR/body")
t_expect "the first request creates a job" "$r1" '^201 '
t_expect "the retry returns the same job" "$id2" "^$id1\$"
t_expect "the retry says it was replayed" "$(cat "$T_DIR/headers")" 'Idempotent-Replayed: true'
r=$(t_http POST /v1/jobs "${J[@]}" -H 'Idempotency-Key: k-1' -d '{"project": "demo", "command": ["false"], "hold": true}')
t_expect "the same key with another body is 422" "$r" '^422 .*Idempotency-Key'
r=$(t_http POST /v1/jobs "${J[@]}" -H "Idempotency-Key: $(head -c 200 /dev/zero | tr '\0' k)" -d "$body")
t_expect "an overlong key is 400" "$r" '^400 .*Idempotency-Key'

# Concurrent duplicates in one batch still make one job.
pids=()
for i in 1 2 3 4 5 6 7 8; do
  curl -sS -X POST "$T_URL/v1/jobs" "${J[@]}" -H 'Idempotency-Key: burst' -d "$body" | jq -r .id >"$T_DIR/burst.$i" &
  pids+=($!)
done
wait "${pids[@]}"
t_expect "eight concurrent retries give one job" "$(cat "$T_DIR"/burst.* | sort -u | wc -l | tr -d ' ')" '^1$'

t_stop
t_start
r=$(t_http POST /v1/jobs "${J[@]}" -H 'Idempotency-Key: k-1' -d "$body")
t_expect "after a restart the key still returns the first job" "$(jq -r .id "$T_DIR/body")" "^$id1\$"
t_stop
t_done
