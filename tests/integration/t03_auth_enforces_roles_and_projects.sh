#!/usr/bin/env bash
# Auth: hashed bearer tokens with roles (admin, submitter, viewer) scoped
# to projects.  Missing or wrong token -> 401; wrong role or project -> 403;
# a job of another project -> 404, as for an unknown one.
. "$(dirname "$0")/lib.sh"
cat >"$T_DIR/config.json" <<'JSON'
{"auth": {"enabled": true},
 "sites": [{"name": "local", "kind": "local"}]}
JSON
admin=$("$TENBIND" token create --role admin --name ops --state "$T_STATE")
sub_a=$("$TENBIND" token create --role submitter --project alpha --state "$T_STATE")
view_a=$("$TENBIND" token create --role viewer --project alpha --state "$T_STATE")
t_expect "token create prints a token" "$admin" '^tbn_[A-Za-z0-9_-]{43}$'
t_expect "only the hash is stored" "$(sqlite3 "$T_STATE/tenbin.db" "select count(*) from api_tokens where hash = '$admin'")" '^0$'
t_start --config "$T_DIR/config.json"
J=(-H 'Content-Type: application/json')
job='{"project": "alpha", "command": ["true"], "hold": true}'

t_expect "no token is 401" "$(t_http GET /v1/jobs)" '^401 .*UNAUTHORIZED'
t_expect "a wrong token is 401" "$(t_http GET /v1/jobs -H 'Authorization: Bearer tbn_nope')" '^401 '
t_expect "a malformed header is 401" "$(t_http GET /v1/jobs -H "Authorization: Basic $admin")" '^401 '
t_expect "/healthz needs no token" "$(t_http GET /healthz)" '^200 '

r=$(t_http POST /v1/jobs "${J[@]}" -H "Authorization: Bearer $sub_a" -d "$job")
t_expect "a submitter submits in its project" "$r" '^201 '
id=$(jq -r .id "$T_DIR/body")
r=$(t_http POST /v1/jobs "${J[@]}" -H "Authorization: Bearer $sub_a" -d '{"project": "beta", "command": ["true"], "hold": true}')
t_expect "a submitter cannot submit to another project" "$r" "^403 .*'beta'"
r=$(t_http POST /v1/jobs "${J[@]}" -H "Authorization: Bearer $view_a" -d "$job")
t_expect "a viewer cannot submit" "$r" "^403 .*viewer"
t_expect "a viewer reads a job of its project" "$(t_http GET "/v1/jobs/$id" -H "Authorization: Bearer $view_a")" '^200 '
r=$(t_http POST /v1/jobs "${J[@]}" -H "Authorization: Bearer $admin" -d '{"project": "beta", "command": ["true"], "hold": true}')
t_expect "an admin submits anywhere" "$r" '^201 '
beta=$(jq -r .id "$T_DIR/body")
t_expect "a viewer of alpha cannot read a beta job (404, as if unknown)" "$(t_http GET "/v1/jobs/$beta" -H "Authorization: Bearer $view_a")" '^404 '
t_expect "a submitter of alpha cannot cancel a beta job (404)" "$(t_http POST "/v1/jobs/$beta/cancel" -H "Authorization: Bearer $sub_a")" '^404 '
list=$(curl -fsS "$T_URL/v1/jobs" -H "Authorization: Bearer $view_a" | jq -r '[.jobs[].project] | unique | join(",")')
t_expect "a scoped token lists only its projects" "$list" '^alpha$'
t_expect "a scoped token cannot filter on another project" "$(t_http GET '/v1/jobs?project=beta' -H "Authorization: Bearer $view_a")" '^403 '
wl='{"name": "w", "command": ["true"]}'
t_expect "a submitter cannot add workloads" "$(t_http POST /v1/workloads "${J[@]}" -H "Authorization: Bearer $sub_a" -d "$wl")" '^403 '
t_expect "an admin adds workloads" "$(t_http POST /v1/workloads "${J[@]}" -H "Authorization: Bearer $admin" -d "$wl")" '^201 '
t_expect "the CLI sends TENBIN_TOKEN" "$(TENBIN_TOKEN=$view_a "$TENBIN" show "$id")" 'alpha'
t_expect "the CLI reports 401 clearly" "$("$TENBIN" jobs 2>&1 || true)" '401|token'

t_stop

# A non-loopback listen address is refused without auth, accepted with it.
out=$("$TENBIND" --listen 0.0.0.0:0 --state "$T_STATE" 2>&1 || true)
t_expect "tenbind refuses a non-loopback listen without auth" "$out" 'auth'
t_done
