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
{"policy": {"burst": {"tick_s": 1}, "wait_value": {"default": 1000}},
 "sites": [
  {"name": "here", "kind": "local", "gpus": {}},
  {"name": "az", $(t_azure_site_json), "zones": ["1", "2"],
   "shapes": [{"name": "nd96", "type": "Standard_ND96isr_H100_v5",
               "gpu_type": "h100", "gpus": 8}],
   "max_nodes": 2, "idle_timeout_s": 2, "burst": {"cooldown_s": 0}, "boot_timeout_s": 60,
   "reconcile_s": 1, "heartbeat_ms": 200, "tags": {"team": "ml"},
   $(t_node_agent_json "$port")}
]}
JSON
start() { t_start --config "$T_DIR/config.json" --listen "127.0.0.1:$port"; }
grants() { grep -c 'POST /[^ ]*/oauth2/v2.0/token -> 200' "$T_DIR/azure.log" || true; }
start

t_hello azure
vms=$(t_fake GET /_fake/vms)
vm=$(jq -r '.[0].id' <<<"$vms")
emu=$(jq -r '.[0].vm_id' <<<"$vms")
t_expect "one VM was launched, tagged with its node" \
  "$(jq -r 'length, .[0].node, .[0].shape, .[0].zone, .[0].spot' <<<"$vms" | tr '\n' ' ')" \
  '^1 1 Standard_ND96isr_H100_v5 1 false $'
t_expect "named as the pool names it, tagged with this tenbind" \
  "$(jq -r '.[0].id + " " + .[0].instance' <<<"$vms")" '^tenbin-[a-z0-9-]+-1 [a-z0-9-]+$'
t_expect_hello_output "$emu" az
# The agent may register before the launch's operation is answered:
# the VM's id is known once it is.
for _ in $(seq 1 50); do
  "$TENBIN" site show az | grep -q -- "$vm" && break
  sleep 0.2
done
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
t_expect_idled_out az 2
t_expect "the VM is deleted at the provider" \
  "$(t_fake GET /_fake/vms | jq -r '.[0].state')" '^(Deleting|deleted)$'
t_expect_vm_processes_end "$emu"

# Node tokens: forged, and one of a node that has ended.
token=$(t_node_token "$emu")
t_expect "the VM's script carries its node token" "$token" '.'
t_expect_node_tokens_refused "$token"

# No capacity in zone 1: the operation fails with AllocationFailed, the
# failed VM is deleted, and the node is launched in zone 2.
t_fake POST /_fake/faults '{"capacity": ["1"]}' >/dev/null
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- sh -c 'echo "zone two on $TENBIN_VM_ID"')
t_expect "the job runs anyway" "$(t_wait_state "$id" succeeded 60)" '^succeeded$'
node=$(t_node_of_job "$id")
t_expect "its node's launch in zone 1 failed, the next went to zone 2" \
  "$(t_vms_of_node "$node" | jq -r '[.[] | .zone + ":" + .state] | join(" ")')" '^1:Failed 2:(Succeeded|Deleting|deleted)$'
t_expect "the pool moved on from the allocation failure" \
  "$(grep -c "node $node: VM .* in zone 1 failed: AllocationFailed" "$T_DIR/tenbind.err")" '^[1-9]'
t_expect "the failed VM was deleted before the next launch" \
  "$(grep -c "DELETE /subscriptions/[^ ]*/virtualMachines/tenbin-[a-z0-9-]*-$node?[^ ]* -> 20[024]" "$T_DIR/azure.log")" '^[1-9]'
t_expect "tenbin site show has the node in zone 2" \
  "$("$TENBIN" site show az)" "$node +(booting|idle|busy|terminating|ended) +nd96 +2 "
emu2=$(t_vms_of_node "$node" | jq -r '[.[] | select(.zone == "2")][0].vm_id')
t_expect "and the job ran there" "$("$TENBIN" logs "$id")" "zone two on $emu2"
t_fake POST /_fake/faults '{"capacity": []}' >/dev/null

# kill -9 after the PUT was answered: the VM exists, unrecorded.  No
# node is left to take the job, so it needs a launch.
t_expect "the zone 2 node idles out" "$(t_nodes_left az)" '^0$'
t_stop
TENBIN_FAULT=cloud-launch-answered start
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- echo three)
t_crashed
t_expect "tenbind died with the launch done" \
  "$(grep -c "fault point 'cloud-launch-answered'" "$T_DIR/tenbind.err")" '^1$'
grants_before=$(grants)
before=$(t_fake GET /_fake/stats | jq .deduplicated)
start
t_expect "after the restart the job runs" "$(t_wait_state "$id" succeeded 60)" '^succeeded$'
node=$(t_node_of_job "$id")
t_expect "its node still has exactly one VM" "$(t_vms_of_node "$node" | jq length)" '^1$'
t_expect "the resent PUT met the first VM (same name)" \
  "$(t_fake GET /_fake/stats | jq --argjson b "$before" '.deduplicated > $b')" '^true$'

# In the end every VM ends (idle nodes go after 2 s).
t_expect "no VM is left" "$(t_vms_left 'deleted|Failed')" '^0$'

# Tokens live 12 s: this run of tenbind got one at start and renewed it
# (at 9 s) before it expired, with no ARM call refused for its token.
for _ in $(seq 1 150); do
  [ $(($(grants) - grants_before)) -ge 2 ] && break
  sleep 0.1
done
t_expect "the access token was renewed" "$(($(grants) - grants_before))" '^([2-9]|[1-9][0-9]+)$'
t_expect "no ARM call was refused for its token" \
  "$(grep -c ' -> 401' "$T_DIR/azure.log" || true)" '^0$'
t_expect "every node tenbind launched is recorded as ended" "$(t_nodes_left az)" '^0$'
t_stop
t_done
