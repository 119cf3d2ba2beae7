#!/usr/bin/env bash
# A slurm site's cloud block on gcp and on azure, as t42 on aws: tenbind
# reads the cluster's VMs from our Compute Engine fake (a label filter in
# the block's zones, behind a signed-JWT token) and then from our Azure
# fake (the resource group's VMs, kept by tag, behind Entra's client
# credentials), and bills their real node-hours.  The testbed's elastic
# cluster stands for the cloud cluster; each fake's test control
# (POST /_fake/instances) adds the VMs a cluster manager would have
# launched, without booting anything: one named after the elastic node
# elastic-h100-1, one head node, one of another cluster.  One testbed
# cluster is one site, so the two providers take turns: gcp with one
# tenbind, then azure with another on a fresh state.  Each time the
# cluster's VMs are the site's nodes (tenbin site show), a job on the
# node runs, the ledger has the VM's whole uptime x 8 GPUs as the job's
# hold plus idle pieces billed to "(idle)" at the site's rented price,
# and the VM deleted in the fake ends its node.
. "$(dirname "$0")/lib.sh"

export SLURM_TESTBED_BOOT_S=3 SLURM_TESTBED_SUSPEND_S=10
t_slurm_start --clusters 1 --elastic
t_gcp_fake_start --root "$T_DIR/vms-gce"
GCE_CTL=$FRONT_URL
t_azure_fake_start --root "$T_DIR/vms-azure"
AZ_CTL=$FRONT_URL

add_vm() { # CTL JSON: a VM as the cluster's manager launched it
  curl -fsS -X POST -H 'Content-Type: application/json' -d "$2" "$1/_fake/instances" >/dev/null
}
del_vm() { # CTL NAME
  curl -fsS -X DELETE "$1/_fake/instances/$2" >/dev/null
}
# Until the first listing made a node, .nodes is Slurm's count of them.
nodes() { curl -fsS "$T_URL/v1/sites/elastic" | jq -c '[.nodes | arrays | .[]]'; }

# check KIND CTL CLOUD_JSON SHAPE ZONE_RE: the whole story on one
# provider, whose fake at CTL holds the three VMs already.
check() {
  local kind=$1 ctl=$2 cloud=$3 shape=$4 zone=$5 n node vm j id started
  jq --argjson c "$cloud" \
    '.sites |= map(if .name == "elastic" then . + {
       cost: {rented: {per_gpu_hour: {h100: 6.88}}}, cloud: $c} else . end)' \
    "$T_DIR/slurm.json" >"$T_DIR/config-$kind.json"
  T_STATE="$T_DIR/state-$kind"
  started=$(date +%s%3N)
  t_start --config "$T_DIR/config-$kind.json"

  for _ in $(seq 1 100); do
    n=$(nodes)
    [ "$(jq '[.[] | select(.gpus == 8)] | length' <<<"$n")" = 1 ] && [ "$(jq length <<<"$n")" = 2 ] && break
    sleep 0.1
  done
  t_expect "$kind: the cluster's two VMs are the site's nodes, the other cluster's is not" \
    "$(jq -r '[.[].vm_id] | sort | join(" ")' <<<"$n")" '^elastic-h100-1 elastic-head$'
  node=$(jq -c '.[] | select(.gpus == 8)' <<<"$n")
  vm=$(jq -r .vm_id <<<"$node")
  t_expect "$kind: billed from the VM's creation time in the fake" \
    "$(curl -fsS "$ctl/_fake/vms" | jq -r --argjson node "$node" \
      '.[] | select(.id == "elastic-h100-1" and .ended == null) |
       (($node.launched | sub("\\.[0-9]+Z$"; "Z") | fromdate) - .launched | fabs < 1)')" '^true$'
  t_expect "$kind: the VM named elastic-h100-1 is that Slurm node, with its 8 h100" \
    "$(jq -r '[.shape, .zone, .gpus, .gpu_type, .reason] | join(" ")' <<<"$node")" \
    "^$shape $zone 8 h100 Slurm node elastic-h100-1\$"
  t_expect "$kind: the head node is listed, no GPU" \
    "$(jq -r '.[] | select(.gpus != 8) | [.gpus, .reason] | join(" ")' <<<"$n")" \
    '^0 no Slurm node matches it$'
  t_expect "$kind: tenbin site show lists the VM with its cost so far" \
    "$("$TENBIN" site show elastic)" "$vm +[0-9]+s +[\$][0-9.]+"

  j=$("$TENBIN" submit --project demo --site elastic --gpus 2 --gpu-type h100 -- \
    sh -c 'echo "on $SLURMD_NODENAME"; sleep 3' 2>/dev/null)
  t_expect "$kind: a job runs on the node" "$(t_wait_state "$j" succeeded 90)" '^succeeded$'
  t_expect "$kind: on elastic-h100-1" "$("$TENBIN" logs "$j")" '^on elastic-h100-1$'
  for _ in $(seq 1 50); do
    [ "$(nodes | jq -r --arg v "$vm" '.[] | select(.vm_id == $v) | .state')" = idle ] && break
    sleep 0.1
  done
  t_expect "$kind: the node is idle again" \
    "$(nodes | jq -r --arg v "$vm" '.[] | select(.vm_id == $v) | .state')" '^idle$'
  sleep 2

  del_vm "$ctl" elastic-h100-1
  for _ in $(seq 1 100); do
    node=$(nodes | jq -c --arg v "$vm" '.[] | select(.vm_id == $v)')
    [ "$(jq -r .state <<<"$node")" = ended ] && break
    sleep 0.1
  done
  t_expect "$kind: the deleted VM's node ends" "$(jq -r '[.state, .reason] | join(" ")' <<<"$node")" \
    "^ended gone from the provider's listing$"

  id=$(jq -r .id <<<"$node")
  t_expect_vm_billed_whole "$kind: " "$j" "$id" "$started"
  t_expect "$kind: the head node stays, no GPU billed" \
    "$(nodes | jq -r '.[] | select(.gpus != 8 and .state != "ended") | [.state, .gpus] | join(" ")')" '^idle 0$'
  t_stop
}

# Compute Engine: labels (lowercase, Google's rules) on instances in the
# block's zone; the node's VM also carries a networkIP of its own.
add_vm "$GCE_CTL" '{"name": "elastic-h100-1", "zone": "us-central1-a", "shape": "a3-highgpu-8g",
  "labels": {"slurm-cluster": "elastic"}, "network_ip": "10.128.9.9"}'
add_vm "$GCE_CTL" '{"name": "elastic-head", "zone": "us-central1-a", "shape": "n2-standard-4",
  "labels": {"slurm-cluster": "elastic"}}'
add_vm "$GCE_CTL" '{"name": "elastic-h100-2", "zone": "us-central1-a", "shape": "a3-highgpu-8g",
  "labels": {"slurm-cluster": "another"}}'
t_expect "the GCE fake holds the three VMs, none booted" \
  "$(curl -fsS "$GCE_CTL/_fake/vms" | jq -r '[.[] | [.id, .state, .booted] | join(":")] | join(" ")')" \
  '^elastic-h100-1:RUNNING:false elastic-head:RUNNING:false elastic-h100-2:RUNNING:false$'
check gcp "$GCE_CTL" "$(jq -nc --arg url "$GCE_URL/compute/v1" --arg key "$GCP_KEY" \
  '{kind: "gcp", project: "demo-proj", region: "us-central1", zones: ["us-central1-a"],
    endpoint: $url, credentials_file: $key,
    tag: {key: "slurm-cluster", value: "elastic"}, reconcile_s: 1}')" \
  a3-highgpu-8g us-central1-a

# Azure: the resource group's VMs, tagged as CycleCloud tags its nodes.
add_vm "$AZ_CTL" '{"name": "elastic-h100-1", "group": "rg-gpu", "zone": "1", "shape": "Standard_ND96isr_H100_v5",
  "tags": {"ClusterName": "elastic"}}'
add_vm "$AZ_CTL" '{"name": "elastic-head", "group": "rg-gpu", "shape": "Standard_D4s_v5",
  "tags": {"ClusterName": "elastic"}}'
add_vm "$AZ_CTL" '{"name": "elastic-h100-2", "group": "rg-gpu", "shape": "Standard_ND96isr_H100_v5",
  "tags": {"ClusterName": "another"}}'
check azure "$AZ_CTL" "$(jq -nc --arg url "$AZURE_URL" --arg sub "$AZ_SUB" --arg t "$AZ_TENANT" \
  --arg c "$AZ_CLIENT" --arg s "$AZ_SECRET_FILE" \
  '{kind: "azure", subscription: $sub, resource_group: "rg-gpu", endpoint: $url, login_endpoint: $url,
    credentials: {tenant: $t, client_id: $c, client_secret_file: $s},
    tag: {key: "ClusterName", value: "elastic"}, reconcile_s: 1}')" \
  Standard_ND96isr_H100_v5 1

# The controls are bounded like the others: a bad body is a 400 naming
# what is wrong, never a VM.
bad() { # CTL JSON WANT
  t_expect "the fake refuses $2" \
    "$(curl -sS -X POST -H 'Content-Type: application/json' -d "$2" "$1/_fake/instances")" "$3"
}
bad "$GCE_CTL" '{"zone": "us-central1-a"}' 'name must be'
bad "$GCE_CTL" '{"name": "x", "zones": []}' 'unknown field zones'
bad "$GCE_CTL" '{"name": "UPPER"}' 'no GCE name'
bad "$AZ_CTL" '{"name": "x", "tags": {"k": 1}}' 'tags: each key'
t_expect "a VM the fake does not hold is a 404" \
  "$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$AZ_CTL/_fake/instances/nope")" '^404$'
t_done
