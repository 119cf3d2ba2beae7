#!/usr/bin/env bash
# With auth on, datasets are scoped like jobs: a token of project A
# neither sees nor touches B's datasets (404, as an unknown name), a
# non-admin registers only under the roots its project is allowed at the
# source site ("agent": {"projects": {...}}), an admin anywhere, and a
# job that names another project's dataset is refused naming the field.
. "$(dirname "$0")/lib.sh"

t_agent_start ONPREM "$T_DIR/onprem"
t_agent_start CLOUD "$T_DIR/cloud"
mkdir -p "$T_DIR/onprem/research/rdata" "$T_DIR/onprem/prod/pdata"
echo "research data" >"$T_DIR/onprem/research/rdata/a.txt"
echo "prod data" >"$T_DIR/onprem/prod/pdata/b.txt"
cat >"$T_DIR/config.json" <<EOF2
{"auth": {"enabled": true},
 "projects": ["research", "prod"],
 "sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 1},
   "agent": {"url": "$AGENT_URL_ONPREM", "token_file": "$T_DIR/agent-ONPREM.token",
             "projects": {"research": ["research"], "prod": ["prod"]}}},
  {"name": "cloud", "kind": "local", "gpus": {"h100": 1}, "first_gpu": 1,
   "agent": {"url": "$AGENT_URL_CLOUD", "token_file": "$T_DIR/agent-CLOUD.token"}}
 ]}
EOF2
admin=$("$TENBIND" token create --role admin --state "$T_STATE")
sub_r=$("$TENBIND" token create --role submitter --project research --state "$T_STATE")
view_r=$("$TENBIND" token create --role viewer --project research --state "$T_STATE")
sub_p=$("$TENBIND" token create --role submitter --project prod --state "$T_STATE")
t_start --config "$T_DIR/config.json"
J=(-H 'Content-Type: application/json')
as() { local tok=$1; shift; TENBIN_TOKEN=$tok "$TENBIN" "$@"; }

out=$(as "$sub_r" dataset add rdata --site onprem --path research/rdata --project research)
t_expect "a submitter registers under its project's root" "$out" 'project research'
rc=0
out=$(as "$sub_r" dataset add x --site onprem --path prod/pdata --project research 2>&1) || rc=$?
t_expect "... but not under another project's root (403 naming the path)" \
  "$rc:$out" "^1:.*field 'path'"
rc=0
out=$(as "$sub_r" dataset add x --site onprem --path prod/x --project prod 2>&1) || rc=$?
t_expect "... nor for a project outside its scope" "$rc:$out" "^1:.*project 'prod'"
rc=0
out=$(as "$sub_r" dataset add x --site cloud --path research/x --project research 2>&1) || rc=$?
t_expect "... nor at a site that allows its project no root" "$rc" '^1$'
rc=0
out=$(as "$sub_r" dataset add x --site onprem --path research/x 2>&1) || rc=$?
t_expect "... and it must name a project" "$rc:$out" "^1:.*field 'project'"
as "$sub_p" dataset add pdata --site onprem --path prod/pdata --project prod >/dev/null
as "$admin" dataset add legacy --site onprem --path . >/dev/null
t_expect "an admin registers anywhere, with no project" \
  "$(as "$admin" dataset ls)" 'legacy +- +onprem'

t_expect "a research viewer lists research's datasets only" \
  "$(as "$view_r" --json dataset ls | jq -c '[.datasets[].name]')" '^\["rdata"\]$'
t_expect "an admin lists them all" \
  "$(as "$admin" --json dataset ls | jq -c '[.datasets[].name]')" '^\["legacy","pdata","rdata"\]$'
t_expect "another project's dataset is 404, as an unknown one" \
  "$(t_http GET /v1/datasets/pdata -H "Authorization: Bearer $view_r")" \
  "^404 .*dataset 'pdata' not found"
t_expect "an admins' dataset is 404 to a project's token" \
  "$(t_http GET /v1/datasets/legacy -H "Authorization: Bearer $view_r")" '^404 '
t_expect "publishing another project's dataset is 404" \
  "$(t_http POST /v1/datasets/rdata/versions -H "Authorization: Bearer $sub_p")" '^404 '
as "$sub_r" dataset publish rdata >/dev/null
as "$sub_p" dataset publish pdata >/dev/null
t_expect "replicating another project's dataset is 404" \
  "$(t_http POST /v1/datasets/rdata/replicas "${J[@]}" -H "Authorization: Bearer $sub_p" -d '{"site":"cloud"}')" '^404 '

# Jobs read their own project's data only.
t_expect "a job naming another project's dataset is refused as unknown" \
  "$(t_http POST /v1/jobs "${J[@]}" -H "Authorization: Bearer $sub_p" \
     -d '{"project":"prod","gpus":0,"command":["true"],"dataset":"rdata"}')" \
  "^422 .*field 'dataset': unknown dataset 'rdata'"
t_expect "even an admin's prod job may not name research's dataset" \
  "$(t_http POST /v1/jobs "${J[@]}" -H "Authorization: Bearer $admin" \
     -d '{"project":"prod","gpus":0,"command":["true"],"dataset":"rdata"}')" \
  "^422 .*field 'dataset'.*belongs to project 'research'"
id=$(TENBIN_TOKEN=$sub_r "$TENBIN" submit --project research --gpus 1 --site cloud \
  --dataset rdata -- sh -c 'cat "$TENBIN_DATASET_DIR/a.txt"')
state=""
for _ in $(seq 1 600); do
  state=$(curl -fsS -H "Authorization: Bearer $sub_r" "$T_URL/v1/jobs/$id" | jq -r .state)
  [ "$state" = succeeded ] || [ "$state" = failed ] && break
  sleep 0.1
done
t_expect "a research job with research's dataset is staged and runs" \
  "$state" '^succeeded$'
t_expect "it read the replica" "$(as "$sub_r" logs "$id")" '^research data$'

t_stop
t_done
