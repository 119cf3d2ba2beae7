#!/usr/bin/env bash
# Dataset transfers are billed as egress: the bytes on the wire times the
# source site's $/GB (to the internet, or to a named site), to the project of the job that caused the transfer
# (a job that names a dataset missing at its site), or to the dataset's
# project for an explicit `tenbin dataset sync`; once per transfer, in
# the report's egress columns and in tenbin_cost_dollars_total.
. "$(dirname "$0")/lib.sh"

t_agent_start SRC "$T_DIR/src"
t_agent_start DST "$T_DIR/dst"
t_agent_start DST2 "$T_DIR/dst2"
mkdir -p "$T_DIR/src/train" "$T_DIR/src/corpus"
head -c 3000000 /dev/urandom >"$T_DIR/src/train/shard.bin"
head -c 3000000 /dev/urandom >"$T_DIR/src/corpus/shard.bin"
cat >"$T_DIR/config.json" <<EOF
{"projects": ["vision", "nlp"],
 "sites": [
  {"name": "cloud", "kind": "local", "gpus": {"h100": 1},
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88}, "egress_per_gb": 90,
            "egress_to_sites_per_gb": {"lab": 20}}},
   "agent": {"url": "$AGENT_URL_SRC", "token_file": "$T_DIR/agent-SRC.token"}},
  {"name": "onprem", "kind": "local", "gpus": {"h100": 1}, "first_gpu": 1,
   "agent": {"url": "$AGENT_URL_DST", "token_file": "$T_DIR/agent-DST.token"}},
  {"name": "lab", "kind": "local", "gpus": {"h100": 1}, "first_gpu": 2,
   "agent": {"url": "$AGENT_URL_DST2", "token_file": "$T_DIR/agent-DST2.token"}}
 ],
 "tick_ms": 100}
EOF
t_start --config "$T_DIR/config.json"

"$TENBIN" dataset add train --site cloud --path train --project vision >/dev/null
"$TENBIN" dataset publish train >/dev/null
"$TENBIN" dataset sync train --site onprem >/dev/null
# A job that needs its project's dataset at another site causes a
# transfer of its own.
"$TENBIN" dataset add corpus --site cloud --path corpus --project nlp >/dev/null
"$TENBIN" dataset publish corpus >/dev/null
id=$("$TENBIN" submit --project nlp --gpus 1 --site lab --dataset corpus -- true)
t_wait_state "$id" succeeded 60 >/dev/null || t_fail "the staged job ran"

ds=$(curl -fsS "$T_URL/v1/datasets/train")
wire_onprem=$(jq '[.transfers[] | select(.to_site == "onprem") | .bytes_wire] | add' <<<"$ds")
wire_lab=$(curl -fsS "$T_URL/v1/datasets/corpus" | jq '[.transfers[] | select(.to_site == "lab") | .bytes_wire] | add')
rep=$(curl -fsS "$T_URL/v1/reports/usage?by=project,site")
t_expect "an explicit sync is billed to the dataset's project at the source's rate (\$90/GB)" \
  "$(jq -c '.lines[] | select(.project == "vision" and .site == "cloud") | [.egress_bytes, .egress_micro]' <<<"$rep")" \
  "^\\[$wire_onprem,$((wire_onprem * 90000000 / 1000000000))\\]$"
t_expect "a job's staging is billed to the job's project, at the rate to its site (\$20/GB)" \
  "$(jq -c '.lines[] | select(.project == "nlp" and .site == "cloud") | [.egress_bytes, .egress_micro]' <<<"$rep")" \
  "^\\[$wire_lab,$((wire_lab * 20000000 / 1000000000))\\]$"
t_expect "the transfers moved the data (not a token amount)" \
  "$([ "$wire_onprem" -gt 2000000 ] && [ "$wire_lab" -gt 2000000 ] && echo yes)" '^yes$'
t_expect "egress is in tenbin_cost_dollars_total" \
  "$(curl -fsS "$T_URL/metrics" | grep '^tenbin_cost_dollars_total{project="nlp",site="cloud",gpu_type="",kind="egress"}')" \
  " $((wire_lab * 20000000 / 1000000000 / 1000000))\.[0-9]{6}$"
t_expect "site show gives both egress rates" \
  "$("$TENBIN" site show cloud | grep '^prices')" 'egress \$90\.000000/GB, \$20\.000000/GB to lab$'
# A restart changes nothing: each transfer is charged once.
t_stop
t_start --config "$T_DIR/config.json"
t_expect "a restart bills no transfer twice" \
  "$(curl -fsS "$T_URL/v1/reports/usage" | jq '.total.egress_bytes')" "^$((wire_onprem + wire_lab))$"
t_stop
jq '.sites[0].cost.rented.egress_to_sites_per_gb = {"mars": 1}' "$T_DIR/config.json" >"$T_DIR/bad.json"
t_expect "egress to a site that does not exist stops tenbind, naming the field" \
  "$("$TENBIND" --listen 127.0.0.1:0 --state "$T_STATE" --config "$T_DIR/bad.json" 2>&1 || true)" \
  "egress_to_sites_per_gb\.mars': no such site"
t_done
