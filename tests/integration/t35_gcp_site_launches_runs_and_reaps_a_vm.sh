#!/usr/bin/env bash
# A gcp site end to end, against our Compute Engine fake
# (tests/fakes/gce_fake.py), whose token endpoint checks the service
# account's JWT signature and whose VM emulator runs each instance's
# startup-script metadata as local processes: a job that only the gcp
# site can run makes tenbind insert a labelled instance, the VM's
# tenbin-agent registers with its node token, runs the job and streams
# its output (tenbin logs), then the node idles out and its instance is
# deleted; the node's launch and end are recorded.  A forged token, and
# the token of an ended node, are refused.  Killed with -9 before the
# insert left, and again after it was answered, tenbind makes one VM per
# node (the resent insert carries the same requestId); a throttling
# storm is waited out; the access token is renewed before it expires.
. "$(dirname "$0")/lib.sh"

# Tokens live 12 s here, so that one is renewed during the test.
t_gcp_fake_start --token-ttl 12 --op-seconds 1 --pending-s 1
port=$(t_free_port)
cat >"$T_DIR/config.json" <<JSON
{"policy": {"burst": {"tick_s": 1}, "wait_value": {"default": 1000}},
 "sites": [
  {"name": "here", "kind": "local", "gpus": {}},
  {"name": "gcp", $(t_gcp_site_json),
   "zones": ["us-central1-a", "us-central1-b"],
   "disk_size_gb": 200, "disk_type": "pd-balanced",
   "shapes": [{"name": "a3", "type": "a3-highgpu-8g", "gpu_type": "h100",
               "gpus": 8}],
   "max_nodes": 2, "idle_timeout_s": 2, "burst": {"cooldown_s": 0}, "boot_timeout_s": 60,
   "reconcile_s": 1, "heartbeat_ms": 200, "labels": {"team": "ml"},
   $(t_node_agent_json "$port")}
]}
JSON
start() { t_start --config "$T_DIR/config.json" --listen "127.0.0.1:$port"; }
# Wait until every node has ended, so that the next job needs a new one.
all_ended() { [ "$(t_nodes_left gcp)" = 0 ] || t_fail "a node is still up"; }
start

t_hello gcp
vms=$(t_fake GET /_fake/vms)
vm=$(jq -r '.[0].id' <<<"$vms")
t_expect "one VM was launched, labelled with its node" \
  "$(jq -r 'length, .[0].node, .[0].shape, .[0].zone, .[0].spot' <<<"$vms" | tr '\n' ' ')" \
  '^1 1 a3-highgpu-8g us-central1-a false $'
t_expect "named as the pool names it, labelled with this tenbind" \
  "$(jq -r '.[0].id + " " + .[0].instance' <<<"$vms")" '^tenbin-[a-z0-9-]+-1 [a-z0-9-]+$'
t_expect_hello_output "$vm" gcp
# The agent may register before the launch's operation is answered:
# the VM's id is known once it is.
for _ in $(seq 1 50); do
  "$TENBIN" site show gcp | grep -q -- "$vm" && break
  sleep 0.2
done
t_expect "tenbin site show lists the node and its VM" \
  "$("$TENBIN" site show gcp)" "1 +(idle|busy|terminating|ended) +a3 +us-central1-a +on-demand +$vm"
t_expect "the startup script went in as the startup-script metadata" \
  "$(head -n 2 "$T_DIR/vms/$vm/user-data" | tr '\n' ' ')" '^#!/bin/sh # tenbin node 1 of site gcp $'

# The token endpoint saw a JWT signed by the key file: it verifies the
# signature (and audience, issuer, scope, lifetime) and granted one.
t_expect "the token endpoint granted a token" \
  "$(grep -c 'POST /token -> 200' "$T_DIR/gce.log")" '^[1-9]'
t_expect "and refused none" "$(grep -c 'POST /token -> 4' "$T_DIR/gce.log" || true)" '^0$'
t_expect "no Compute call was refused for its token" \
  "$(grep -c ' -> 401' "$T_DIR/gce.log" || true)" '^0$'

# Idle for 2 s: deleted, in Compute Engine and in tenbin's record.
t_expect_idled_out gcp 2
t_expect "the VM is deleted at the provider" \
  "$(t_fake GET /_fake/vms | jq -r '.[0].state')" '^(STOPPING|DELETED)$'
t_expect_vm_processes_end "$vm"

# Node tokens: forged, and one of a node that has ended.
token=$(t_node_token "$vm")
t_expect "the VM's script carries its node token" "$token" '.'
t_expect_node_tokens_refused "$token"

# kill -9 between the node's commit and its insert.
t_stop
launched=$(t_fake GET /_fake/stats | jq .launched)
TENBIN_FAULT=cloud-node-committed start
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- echo two)
t_crashed
t_expect "the crash came before any insert" "$(t_fake GET /_fake/stats | jq .launched)" "^$launched\$"
start
t_expect "after the restart the job runs" "$(t_wait_state "$id" succeeded 60)" '^succeeded$'
node=$(t_node_of_job "$id")
t_expect "its node has exactly one VM" "$(t_vms_of_node "$node" | jq length)" '^1$'

# kill -9 after the insert was answered: the VM exists, unrecorded.  Its
# script boots 4 s after it runs, so that the node is still launching
# when tenbind comes back and resends the insert.
all_ended
t_stop
t_fake POST /_fake/faults '{"boot_delay_s": 4}' >/dev/null
TENBIN_FAULT=cloud-launch-answered start
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- echo three)
t_crashed
t_expect "tenbind died with the insert done" \
  "$(grep -c "fault point 'cloud-launch-answered'" "$T_DIR/tenbind.err")" '^1$'
before=$(t_fake GET /_fake/stats | jq .deduplicated)
grants=$(grep -c 'POST /token -> 200' "$T_DIR/gce.log")
start
t_expect "after the restart the job runs" "$(t_wait_state "$id" succeeded 60)" '^succeeded$'
node=$(t_node_of_job "$id")
t_expect "its node still has exactly one VM" "$(t_vms_of_node "$node" | jq length)" '^1$'
t_expect "the resent insert was the first one (same requestId)" \
  "$(t_fake GET /_fake/stats | jq --argjson b "$before" '.deduplicated > $b')" '^true$'
t_expect "both inserts of the node carried one requestId" \
  "$(grep -c "POST /compute/v1/projects/demo-proj/zones/us-central1-a/instances?requestId=$(
    grep 'POST .*/instances?requestId=' "$T_DIR/gce.log" | tail -n 1 | sed 's/.*requestId=\([0-9a-f-]*\).*/\1/') " "$T_DIR/gce.log")" '^2$'
t_fake POST /_fake/faults '{"boot_delay_s": 0}' >/dev/null

# A throttling storm (403 rateLimitExceeded and 429 by turns): waited
# out with backoff.
all_ended
t_fake POST /_fake/faults '{"throttle": 4}' >/dev/null
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- echo four)
t_expect "through 4 throttled calls the job runs" "$(t_wait_state "$id" succeeded 90)" '^succeeded$'
for _ in $(seq 1 100); do
  [ "$(t_fake GET /_fake/stats | jq '.throttled >= 4')" = true ] && break
  sleep 0.1
done
t_expect "the fake throttled them" "$(t_fake GET /_fake/stats | jq '.throttled >= 4')" '^true$'
t_expect "and tenbind read them as throttling" \
  "$(grep -c 'rateLimitExceeded' "$T_DIR/tenbind.err")" '^[1-9]'

# In the end every VM ends (idle nodes go after 2 s).
t_expect "no VM is left" "$(t_vms_left DELETED)" '^0$'

# Tokens live 12 s: this run of tenbind got one at start and renewed it
# (at 6 s) before it expired, with no call refused for its token.
while [ $(($(grep -c 'POST /token -> 200' "$T_DIR/gce.log") - grants)) -lt 2 ] &&
  [ "${waited:-0}" -lt 150 ]; do
  waited=$((${waited:-0} + 1))
  sleep 0.1
done
t_expect "the access token was renewed" \
  "$(($(grep -c 'POST /token -> 200' "$T_DIR/gce.log") - grants))" '^([2-9]|[1-9][0-9]+)$'
t_expect "still no Compute call refused for its token" \
  "$(grep -c ' -> 401' "$T_DIR/gce.log" || true)" '^0$'
t_expect "every node tenbind launched is recorded as ended" \
  "$(t_nodes_left gcp 0)" '^0$'
t_stop
t_done
