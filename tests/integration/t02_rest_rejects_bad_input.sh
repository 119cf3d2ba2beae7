#!/usr/bin/env bash
# Bad input gets a clear error with the right status and a message naming
# the problem, and loses nothing: tenbind keeps serving, under ASan.
. "$(dirname "$0")/lib.sh"
cat >"$T_DIR/config.json" <<'JSON'
{"sites": [{"name": "local", "kind": "local", "gpus": {"h100": 2}}],
 "projects": ["demo", "research"]}
JSON
t_start --config "$T_DIR/config.json"
J=(-H 'Content-Type: application/json')

r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["true"], ')
t_expect "malformed JSON is 400 naming the problem" "$r" '^400 .*"INVALID".*malformed JSON at line 1'
r=$(t_http POST /v1/jobs "${J[@]}" -d '[1,2]')
t_expect "a non-object body is 400" "$r" '^400 .*JSON object'
r=$(t_http POST /v1/jobs "${J[@]}" -d '')
t_expect "an empty body is 400" "$r" '^400 .*empty'
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["true"], "project": "demo", "gpuz": 1}')
t_expect "an unknown field is 400 naming it" "$r" "^400 .*unknown field 'gpuz'"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["true"], "project": "demo", "gpus": "two"}')
t_expect "a mistyped field is 400 naming it" "$r" "^400 .*'gpus'.*integer"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["true"], "project": "demo", "gpus": -1}')
t_expect "a negative GPU count is 400" "$r" "^400 .*'gpus'"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["true"], "project": "demo", "gpus": 99999999999}')
t_expect "an absurd GPU count is 400" "$r" "^400 .*'gpus'"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["true"], "project": "demo", "gpus": 3}')
t_expect "more GPUs than any site has is 422" "$r" '^422 .*h100|^422 .*GPU'
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["true"], "project": "demo", "gpus": 1, "gpu_type": "a10g"}')
t_expect "a GPU type no site has is 422" "$r" '^422 .*a10g'
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": [], "project": "demo"}')
t_expect "an empty command is 400" "$r" "^400 .*'command'"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": [""], "project": "demo"}')
t_expect "an empty program name is 400" "$r" "^400 .*command"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"project": "demo"}')
t_expect "no command at all is 400" "$r" "^400 .*'command'"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["true"], "project": "nope"}')
t_expect "an unknown project is 422" "$r" "^422 .*project 'nope'"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"workload": "nope", "project": "demo"}')
t_expect "an unknown workload is 422" "$r" "^422 .*workload 'nope'"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["true"], "project": "demo", "site": "mars"}')
t_expect "an unknown site is 422" "$r" "^422 .*site 'mars'"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["true"], "project": "demo", "time_limit": "forever"}')
t_expect "a bad time limit is 400" "$r" "^400 .*time_limit"
r=$(t_http POST /v1/jobs "${J[@]}" -d '{"command": ["tr\u0000ue"], "project": "demo"}')
t_expect "a NUL inside a string is 400" "$r" '^400 '

head -c 1100000 /dev/zero | tr '\0' 'a' >"$T_DIR/big"
r=$(t_http POST /v1/jobs "${J[@]}" --data-binary @"$T_DIR/big")
t_expect "a body over 1 MiB is 413" "$r" '^413 .*TOO_LARGE'

r=$(t_http GET /v1/jobs/424242)
t_expect "an unknown job is 404" "$r" '^404 .*job 424242 not found'
r=$(t_http GET /v1/jobs/abc)
t_expect "a non-numeric job id is 400" "$r" "^400 .*'abc'"
r=$(t_http GET /v1/nothing)
t_expect "an unknown route is 404" "$r" '^404 '
r=$(t_http DELETE /v1/jobs)
t_expect "a wrong method is 405" "$r" '^405 '
r=$(t_http GET '/v1/jobs?limit=0')
t_expect "a limit of 0 is 400" "$r" "^400 .*'limit'"
r=$(t_http GET '/v1/jobs?state=sleeping')
t_expect "an unknown state filter is 400" "$r" "^400 .*'state'"
r=$(t_http GET /v1/workloads/nope)
t_expect "an unknown workload is 404" "$r" '^404 '
r=$(t_http GET /v1/sites/nope)
t_expect "an unknown site is 404" "$r" '^404 '

# Strings with quotes, SQL and unicode are stored and returned verbatim.
name="Robert'); DROP TABLE jobs;-- \"x\" ✓"
body=$(jq -n --arg n "$name" '{name: $n, project: "demo", command: ["true"], hold: true}')
r=$(t_http POST /v1/jobs "${J[@]}" -d "$body")
t_expect "a job with a hostile name is accepted" "$r" '^201 '
id=$(jq -r .id "$T_DIR/body")
t_expect "its name comes back verbatim" "$(curl -fsS "$T_URL/v1/jobs/$id" | jq -r .name)" "^Robert'\\); DROP TABLE jobs;-- \"x\" ✓\$"
t_expect "the jobs table is still there" "$(t_http GET /v1/jobs)" '^200 '

r=$(t_http GET /healthz)
t_expect "tenbind is still healthy after all of it" "$r" '^200 .*ok'

# A bad config stops tenbind at start with the file, the field and why.
bad() {
  printf '%s' "$2" >"$T_DIR/bad.json"
  local out rc=0
  out=$("$TENBIND" --listen "${4:-127.0.0.1:0}" --state "$T_DIR/badstate" --config "$T_DIR/bad.json" 2>&1 >/dev/null) || rc=$?
  t_expect "$1 (exit $rc)" "$rc $(printf '%s' "$out" | tr '\n' ' ')" "^2 .*bad.json.*$3"
}
bad "unknown top-level field" '{"sites": [{"name":"x","kind":"local"}], "listn": "x"}' "unknown field 'listn'"
bad "unknown site kind" '{"sites": [{"name":"x","kind":"pbs"}]}' "sites\\[0\\].kind.*pbs"
bad "bad GPU inventory" '{"sites": [{"name":"x","kind":"local","gpus":{"h100":-2}}]}' "sites\\[0\\].*gpus"
bad "duplicate site" '{"sites": [{"name":"x","kind":"local"},{"name":"x","kind":"local","gpus":{}}]}' "duplicate site"
bad "malformed file" '{"sites": [' "malformed JSON"
bad "bad workload" '{"sites": [{"name":"x","kind":"local"}], "workloads": [{"name":"w"}]}' "workloads\\[0\\].*command"
bad "non-loopback without auth" '{"sites": [{"name":"x","kind":"local"}]}' "auth" 0.0.0.0:0

t_stop
t_done
