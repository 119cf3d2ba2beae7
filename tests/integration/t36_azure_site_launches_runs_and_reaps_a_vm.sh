#!/usr/bin/env bash
# An azure site end to end, against our Azure fake
# (tests/fakes/azure_fake.py), whose token endpoint checks the client's
# secret and whose VM emulator boots each VM's customData as local
# processes: a job that only the azure site can run makes tenbind PUT a
# tagged VM and follow its Azure-AsyncOperation, the VM's tenbin-agent
# registers with its node token, runs the job and streams its output
# (tenbin logs), then the node idles out and its VM is deleted; the
# node's launch and end are recorded.  A forged token, and the token of
# an ended node, are refused.  An allocation failure in zone 1 moves the
# next node's launch to zone 2, after the failed VM is deleted.  Killed
# with -9 after the PUT was answered, tenbind makes one VM per node (the
# VM's name is the node's).  The access token is renewed before it
# expires.
. "$(dirname "$0")/lib.sh"

# Tokens live 12 s here, so that one is renewed during the test.
t_azure_fake_start --token-ttl 12 --op-seconds 1
port=$(t_free_port)
cat >"$T_DIR/config.json" <<JSON
{"sites": [
  {"name": "here", "kind": "local", "gpus": {}},
  {"name": "az", "kind": "azure", "subscription": "$AZ_SUB",
   "resource_group": "rg-gpu", "location": "eastus", "zones": ["1", "2"],
   "endpoint": "$AZURE_URL", "login_endpoint": "$AZURE_URL",
   "credentials": {"tenant": "$AZ_TENANT", "client_id": "$AZ_CLIENT",
                   "client_secret_file": "$AZ_SECRET_FILE"},
   "image": "microsoft-dsvm:ubuntu-hpc:2204:latest",
   "subnet_id": "/subscriptions/$AZ_SUB/resourceGroups/rg-gpu/providers/Microsoft.Network/virtualNetworks/vnet/subnets/default",
   "admin_user": "tenbin",
   "shapes": [{"name": "nd96", "type": "Standard_ND96isr_H100_v5",
               "gpu_type": "h100", "gpus": 8}],
   "max_nodes": 2, "idle_timeout_s": 2, "boot_timeout_s": 60,
   "reconcile_s": 1, "heartbeat_ms": 200, "tags": {"team": "ml"},
   "node_agent": {"path": "$TENBIN_BIN/tenbin-agent",
                  "server": "http://127.0.0.1:$port"}}
]}
JSON
start() { t_start --config "$T_DIR/config.json" --listen "127.0.0.1:$port"; }
vms_of_node() { t_fake GET /_fake/vms | jq --arg n "$1" "[.[] | select(.node == \$n)${2:-}]"; }
node_of_job() { curl -fsS "$T_URL/v1/jobs/$1" | jq -r '.remote_id // "" | sub("^node-"; "")'; }
grants() { grep -c 'POST /[^ ]*/oauth2/v2.0/token -> 200' "$T_DIR/azure.log" || true; }
# Wait for tenbind to kill itself at its fault point (or kill it).
crashed() {
  for _ in $(seq 1 300); do kill -0 "$T_PID" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$T_PID" 2>/dev/null || true
  wait "$T_PID" 2>/dev/null || true
  T_PID=""
}
# Wait until every node of the site has ended (idle ones go after 2 s).
all_ended() {
  local left
  for _ in $(seq 1 150); do
    left=$(curl -fsS "$T_URL/v1/sites/az" | jq '[.nodes[] | select(.state != "ended")] | length')
    [ "$left" = 0 ] && break
    sleep 0.2
  done
  echo "$left"
}
start

id=$("$TENBIN" submit --gpus 1 --gpu-type h100 --name hello -- \
  sh -c 'echo "hello from $TENBIN_VM_ID"; echo "gpus $CUDA_VISIBLE_DEVICES"')
t_expect "the job goes to the azure site, the only one with h100s" \
  "$(t_wait_state "$id" 'submitted|running|succeeded' 30)" 'submitted|running|succeeded'
t_expect "it runs on the VM and succeeds" "$(t_wait_state "$id" succeeded 60)" '^succeeded$'
vms=$(t_fake GET /_fake/vms)
vm=$(jq -r '.[0].id' <<<"$vms")
emu=$(jq -r '.[0].vm_id' <<<"$vms")
t_expect "one VM was launched, tagged with its node" \
  "$(jq -r 'length, .[0].node, .[0].shape, .[0].zone, .[0].spot' <<<"$vms" | tr '\n' ' ')" \
  '^1 1 Standard_ND96isr_H100_v5 1 false $'
t_expect "named as the pool names it, tagged with this tenbind" \
  "$(jq -r '.[0].id + " " + .[0].instance' <<<"$vms")" '^tenbin-[a-z0-9-]+-1 [a-z0-9-]+$'
t_expect "its output came back through the node agent" \
  "$("$TENBIN" logs "$id")" "hello from $emu"
t_expect "the job had one GPU of the node" "$("$TENBIN" logs "$id")" 'gpus 0$'
t_expect "tenbin site show lists the node and its VM" \
  "$("$TENBIN" site show az)" "1 +(idle|busy|terminating|ended) +nd96 +1 +on-demand +$vm"
t_expect "the startup script went in as the VM's customData" \
  "$(head -n 2 "$T_DIR/vms/$emu/user-data" | tr '\n' ' ')" '^#!/bin/sh # tenbin node 1 of site az $'
t_expect "the token endpoint granted a token" "$(grants)" '^[1-9]'
t_expect "and refused none" \
  "$(grep -c 'oauth2/v2.0/token -> 4' "$T_DIR/azure.log" || true)" '^0$'
t_expect "the launch followed its Azure-AsyncOperation" \
  "$(grep -c 'GET /subscriptions/[^ ]*/operations/' "$T_DIR/azure.log")" '^[1-9]'

# Idle for 2 s: deleted, in ARM and in tenbin's record.
for _ in $(seq 1 100); do
  state=$(curl -fsS "$T_URL/v1/sites/az" | jq -r '.nodes[0].state')
  [ "$state" = ended ] && break
  sleep 0.2
done
t_expect "the idle node ends" "$state" '^ended$'
node=$(curl -fsS "$T_URL/v1/sites/az" | jq -c '.nodes[0]')
t_expect "its reason says idle" "$(jq -r .reason <<<"$node")" '^idle for 2 s$'
t_expect "its launch and end are recorded" \
  "$(jq -r '[.launched != null, .ended != null, .uptime_s >= 0] | all' <<<"$node")" '^true$'
t_expect "the VM is deleted at the provider" \
  "$(t_fake GET /_fake/vms | jq -r '.[0].state')" '^(Deleting|deleted)$'
for _ in $(seq 1 50); do
  pgrep -f "TENBIN_VM_ID=$emu" >/dev/null || break
  sleep 0.1
done
pgrep -f "TENBIN_VM_ID=$emu" >/dev/null && t_fail "a process of the VM still runs" || t_ok "no process of the VM is left"

# Node tokens: forged, and one of a node that has ended.
t_expect "a forged node token gets 401" \
  "$(t_http POST /v1/nodes/heartbeat -H 'Authorization: Bearer tbnode_forged' -d '{}')" '^401 '
token=$(sed -n "s/^TENBIN_NODE_TOKEN='\(.*\)'$/\1/p" "$T_DIR/vms/$emu/user-data" 2>/dev/null || true)
t_expect "the VM's script carries its node token" "$token" '.'
if [ -n "$token" ]; then
  t_expect "the ended node's own token gets 401" \
    "$(t_http POST /v1/nodes/heartbeat -H "Authorization: Bearer $token" -d '{}')" '^401 .*has ended'
fi
t_expect "an API token's place is no node token's: no token, 401" \
  "$(t_http POST /v1/nodes/heartbeat -d '{}')" '^401 '

# No capacity in zone 1: the operation fails with AllocationFailed, the
# failed VM is deleted, and the node is launched in zone 2.
t_fake POST /_fake/faults '{"capacity": ["1"]}' >/dev/null
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- sh -c 'echo "zone two on $TENBIN_VM_ID"')
t_expect "the job runs anyway" "$(t_wait_state "$id" succeeded 60)" '^succeeded$'
node=$(node_of_job "$id")
t_expect "its node's launch in zone 1 failed, the next went to zone 2" \
  "$(vms_of_node "$node" | jq -r '[.[] | .zone + ":" + .state] | join(" ")')" '^1:Failed 2:(Succeeded|Deleting|deleted)$'
t_expect "the pool moved on from the allocation failure" \
  "$(grep -c "node $node: VM .* in zone 1 failed: AllocationFailed" "$T_DIR/tenbind.err")" '^[1-9]'
t_expect "the failed VM was deleted before the next launch" \
  "$(grep -c "DELETE /subscriptions/[^ ]*/virtualMachines/tenbin-[a-z0-9-]*-$node?[^ ]* -> 20[024]" "$T_DIR/azure.log")" '^[1-9]'
t_expect "tenbin site show has the node in zone 2" \
  "$("$TENBIN" site show az)" "$node +(booting|idle|busy|terminating|ended) +nd96 +2 "
emu2=$(vms_of_node "$node" '| select(.zone == "2")' | jq -r '.[0].vm_id')
t_expect "and the job ran there" "$("$TENBIN" logs "$id")" "zone two on $emu2"
t_fake POST /_fake/faults '{"capacity": []}' >/dev/null

# kill -9 after the PUT was answered: the VM exists, unrecorded.  No
# node is left to take the job, so it needs a launch.
t_expect "the zone 2 node idles out" "$(all_ended)" '^0$'
t_stop
TENBIN_FAULT=cloud-launch-answered start
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- echo three)
crashed
t_expect "tenbind died with the launch done" \
  "$(grep -c "fault point 'cloud-launch-answered'" "$T_DIR/tenbind.err")" '^1$'
grants_before=$(grants)
before=$(t_fake GET /_fake/stats | jq .deduplicated)
start
t_expect "after the restart the job runs" "$(t_wait_state "$id" succeeded 60)" '^succeeded$'
node=$(node_of_job "$id")
t_expect "its node still has exactly one VM" "$(vms_of_node "$node" | jq length)" '^1$'
t_expect "the resent PUT met the first VM (same name)" \
  "$(t_fake GET /_fake/stats | jq --argjson b "$before" '.deduplicated > $b')" '^true$'

# In the end every VM ends (idle nodes go after 2 s).
for _ in $(seq 1 150); do
  live=$(t_fake GET /_fake/vms | jq '[.[] | select(.state != "deleted" and .state != "Failed")] | length')
  [ "$live" = 0 ] && break
  sleep 0.2
done
t_expect "no VM is left" "$live" '^0$'

# Tokens live 12 s: this run of tenbind got one at start and renewed it
# (at 9 s) before it expired, with no ARM call refused for its token.
for _ in $(seq 1 150); do
  [ $(($(grants) - grants_before)) -ge 2 ] && break
  sleep 0.1
done
t_expect "the access token was renewed" "$(($(grants) - grants_before))" '^([2-9]|[1-9][0-9]+)$'
t_expect "no ARM call was refused for its token" \
  "$(grep -c ' -> 401' "$T_DIR/azure.log" || true)" '^0$'
t_expect "every node tenbind launched is recorded as ended" "$(all_ended)" '^0$'
t_stop
t_done
