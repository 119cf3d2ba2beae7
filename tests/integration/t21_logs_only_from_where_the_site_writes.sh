#!/usr/bin/env bash
# GET /v1/jobs/{id}/log serves only a file the job wrote beneath its
# site's log directory: a job's output path naming another file, a link,
# a hard link, a fifo or a directory is refused with a message naming the
# path and the site, and a fifo never stalls the daemon.  Another
# project's job answers 404 like an unknown one, on every job route.
. "$(dirname "$0")/lib.sh"
cat >"$T_DIR/config.json" <<'JSON'
{"auth": {"enabled": true},
 "sites": [{"name": "local", "kind": "local"}]}
JSON
admin=$("$TENBIND" token create --role admin --name ops --state "$T_STATE")
view_a=$("$TENBIND" token create --role viewer --project alpha --state "$T_STATE")
sub_a=$("$TENBIND" token create --role submitter --project alpha --state "$T_STATE")
t_start --config "$T_DIR/config.json"
export TENBIN_TOKEN=$admin
A=(-H "Authorization: Bearer $admin")
echo "the broker's secret" >"$T_DIR/secret"

# submit JSON-FIELDS: a job of project alpha; prints its id once ended.
submit() {
  local id
  id=$(curl -fsS "${A[@]}" -H 'Content-Type: application/json' \
    -d "{\"project\": \"alpha\", $1}" "$T_URL/v1/jobs" | jq -r .id)
  # t_wait_state knows no token.
  for _ in $(seq 1 300); do
    curl -fsS "${A[@]}" "$T_URL/v1/jobs/$id" | jq -r .state |
      grep -Eq '^(succeeded|failed)$' && break
    sleep 0.1
  done
  echo "$id"
}

id=$(submit '"command": ["sh", "-c", "echo hello"]')
t_expect "a job's own log is served" "$("$TENBIN" logs "$id")" '^hello$'
curl -sS -D "$T_DIR/h" -o /dev/null "${A[@]}" "$T_URL/v1/jobs/$id/log?offset=100"
t_expect "an offset past the end is echoed" "$(tr -d '\r' <"$T_DIR/h" | grep -i '^X-Log-Offset:')" ': 100$'
t_expect "as the next offset too" "$(tr -d '\r' <"$T_DIR/h" | grep -i '^X-Log-Next-Offset:')" ': 100$'
t_expect "with the true size" "$(tr -d '\r' <"$T_DIR/h" | grep -i '^X-Log-Size:')" ': 6$'

id=$(submit "\"command\": [\"true\"], \"output\": \"$T_DIR/secret\"")
r=$(t_http GET "/v1/jobs/$id/log" "${A[@]}")
t_expect "an output naming a file outside the job's directory is refused" "$r" \
  "^403 .*secret', outside '.*/jobs/$id' where site 'local' writes logs"
[[ $r == *"broker's secret"* ]] && t_fail "the secret leaked" || t_ok "the secret stays secret"

id=$(submit "\"command\": [\"true\"], \"output\": \"../1/output.log\"")
t_expect "a relative output that climbs out is refused" \
  "$(t_http GET "/v1/jobs/$id/log" "${A[@]}")" "^403 .*outside"

id=$(submit "\"command\": [\"sh\", \"-c\", \"rm output.log; ln -s $T_DIR/secret output.log\"]")
r=$(t_http GET "/v1/jobs/$id/log" "${A[@]}")
t_expect "a log swapped for a symlink is refused" "$r" "^403 .*symlink.*site 'local'"
[[ $r == *"broker's secret"* ]] && t_fail "the secret leaked through a link" || t_ok "not through a link"

id=$(submit "\"command\": [\"sh\", \"-c\", \"rm output.log; ln $T_DIR/secret output.log\"]")
r=$(t_http GET "/v1/jobs/$id/log" "${A[@]}")
t_expect "a log swapped for a hard link is refused" "$r" "^403 .*2 links"
[[ $r == *"broker's secret"* ]] && t_fail "the secret leaked through a hard link" || t_ok "not through a hard link"

id=$(submit '"command": ["sh", "-c", "rm output.log; mkdir output.log"]')
t_expect "a log that is a directory is a clear 422" \
  "$(t_http GET "/v1/jobs/$id/log" "${A[@]}" -m 10)" "^422 .*output.log', is a directory"

id=$(submit '"command": ["sh", "-c", "rm output.log; mkfifo output.log"]')
t_expect "a log that is a fifo is a clear 422" \
  "$(t_http GET "/v1/jobs/$id/log" "${A[@]}" -m 10)" "^422 .*is a fifo"
t_expect "and the daemon still answers" "$(t_http GET /healthz -m 5)" '^200 '

# Another project's job looks exactly like one that does not exist.
beta=$(curl -fsS "${A[@]}" -H 'Content-Type: application/json' \
  -d '{"project": "beta", "command": ["true"], "hold": true}' "$T_URL/v1/jobs" | jq -r .id)
V=(-H "Authorization: Bearer $view_a")
S=(-H "Authorization: Bearer $sub_a")
unknown=$(t_http GET "/v1/jobs/999999" "${V[@]}")
t_expect "an unknown job is 404" "$unknown" '^404 '
for route in "" /log /events; do
  r=$(t_http GET "/v1/jobs/$beta$route" "${V[@]}")
  t_expect "GET another project's job$route is 404" "$r" "^404 .*job $beta not found"
done
for route in /cancel /release; do
  r=$(t_http POST "/v1/jobs/$beta$route" "${S[@]}")
  t_expect "POST another project's job$route is 404" "$r" "^404 .*job $beta not found"
done
r=$(t_http GET "/v1/jobs/$beta" "${V[@]}")
[[ $r == *beta* ]] && t_fail "the 404 names the project: $r" || t_ok "and names no project"

t_stop
t_done
