#!/usr/bin/env bash
# A slurm site's cloud block: tenbind reads the cluster's VMs from EC2
# (moto, checking real SigV4 signatures) and bills their real node-hours.
# The testbed's elastic cluster stands for a ParallelCluster cluster; in
# moto, VMs tagged with the cluster's tag stand for its instances, one
# named after the elastic node elastic-h100-1, one its head node, and one
# of another cluster.  The cluster's two VMs become nodes of the site
# (tenbin site show), billed from EC2's launch time; a job tenbin sends
# to the node runs; the ledger has the VM's whole uptime x 8 GPUs as the
# job's hold plus idle pieces billed to "(idle)" at the site's rented
# price; the VM terminated in EC2 ends its node.
. "$(dirname "$0")/lib.sh"

export SLURM_TESTBED_BOOT_S=3 SLURM_TESTBED_SUSPEND_S=10
t_slurm_start --clusters 1 --elastic
t_moto_start
t_aws_credentials
A=(env AWS_ACCESS_KEY_ID="$AWS_AK" AWS_SECRET_ACCESS_KEY="$AWS_SK" AWS_DEFAULT_REGION=us-east-1
  "$(command -v aws || echo "$TENBIN_SOURCE_DIR/var/py/bin/aws")" --endpoint-url "$MOTO_URL" --output json)
run_vm() { # CLUSTER NAME TYPE: a VM as the cluster's manager launches it; prints its id
  "${A[@]}" ec2 run-instances --image-id ami-12c6146b --instance-type "$3" --count 1 \
    --tag-specifications "ResourceType=instance,Tags=[{Key=parallelcluster:cluster-name,Value=$1},{Key=Name,Value=$2},{Key=parallelcluster:node-type,Value=Compute}]" |
    jq -r '.Instances[0].InstanceId'
}
vm=$(run_vm elastic elastic-h100-1 p5.48xlarge)
head=$(run_vm elastic HeadNode m5.large)
other=$(run_vm another elastic-h100-2 p5.48xlarge)
t_expect "moto holds the three VMs" "$vm $head $other" '^i-[0-9a-f]+ i-[0-9a-f]+ i-[0-9a-f]+$'

jq --arg url "$MOTO_URL" --arg creds "$T_DIR/aws-credentials" \
  '.sites |= map(if .name == "elastic" then . + {
     cost: {rented: {per_gpu_hour: {h100: 6.88}}},
     cloud: {kind: "aws", region: "us-east-1", endpoint: $url,
             credentials: {file: $creds, profile: "tenbin"},
             tag: {key: "parallelcluster:cluster-name", value: "elastic"},
             node_tag: "Name", reconcile_s: 1}} else . end)' \
  "$T_DIR/slurm.json" >"$T_DIR/config.json"
started=$(date +%s%3N)
t_start --config "$T_DIR/config.json"

# Before the first listing a slurm site's "nodes" is its node count.
nodes() { curl -fsS "$T_URL/v1/sites/elastic" | jq -c '[.nodes | arrays | .[]]'; }
for _ in $(seq 1 100); do
  n=$(nodes)
  [ "$(jq '[.[] | select(.gpus == 8)] | length' <<<"$n")" = 1 ] && [ "$(jq length <<<"$n")" = 2 ] && break
  sleep 0.1
done
t_expect "the cluster's two VMs are the site's nodes, the other cluster's is not" \
  "$(jq -r '[.[].vm_id] | sort | join(" ")' <<<"$n")" "^$(printf '%s\n' "$vm" "$head" | sort | tr '\n' ' ' | sed 's/ $//')\$"
node=$(jq -c --arg v "$vm" '.[] | select(.vm_id == $v)' <<<"$n")
t_expect "the VM named elastic-h100-1 is that Slurm node, with its 8 h100" \
  "$(jq -r '[.shape, .zone, .gpus, .gpu_type, .reason] | join(" ")' <<<"$node")" \
  '^p5.48xlarge us-east-1[a-z] 8 h100 Slurm node elastic-h100-1$'
launch=$("${A[@]}" ec2 describe-instances --instance-ids "$vm" | jq -r '.Reservations[0].Instances[0].LaunchTime')
t_expect "billed from EC2's launch time" \
  "$(jq -r --arg l "$launch" '(.launched | sub("\\.[0-9]+Z$"; "Z") | fromdate) == ($l | sub("\\.[0-9]+"; "") | sub("\\+00:00$"; "Z") | fromdate)' <<<"$node")" '^true$'
t_expect "the head node is listed, no Slurm node, no GPU" \
  "$(jq -r --arg v "$head" '.[] | select(.vm_id == $v) | [.shape, .gpus, .reason] | join(" ")' <<<"$n")" \
  '^m5.large 0 no Slurm node matches it$'
t_expect "tenbin site show lists the VM with its cost so far" \
  "$("$TENBIN" site show elastic)" "$vm +[0-9]+s +[\$][0-9.]+"

j=$("$TENBIN" submit --project demo --site elastic --gpus 2 --gpu-type h100 -- \
  sh -c 'echo "on $SLURMD_NODENAME"; sleep 3' 2>/dev/null)
t_expect "a job runs on the node" "$(t_wait_state "$j" succeeded 90)" '^succeeded$'
t_expect "on elastic-h100-1" "$("$TENBIN" logs "$j")" '^on elastic-h100-1$'
for _ in $(seq 1 50); do
  [ "$(nodes | jq -r --arg v "$vm" '.[] | select(.vm_id == $v) | .state')" = idle ] && break
  sleep 0.1
done
t_expect "the node is idle again" "$(nodes | jq -r --arg v "$vm" '.[] | select(.vm_id == $v) | .state')" '^idle$'
sleep 2

# The cluster's manager terminates the VM: gone from two listings, its
# node ends.
"${A[@]}" ec2 terminate-instances --instance-ids "$vm" >/dev/null
for _ in $(seq 1 100); do
  node=$(nodes | jq -c --arg v "$vm" '.[] | select(.vm_id == $v)')
  [ "$(jq -r .state <<<"$node")" = ended ] && break
  sleep 0.1
done
t_expect "the terminated VM's node ends" "$(jq -r '[.state, .reason] | join(" ")' <<<"$node")" \
  "^ended gone from the provider's listing$"

id=$(jq -r .id <<<"$node")
t_expect_vm_billed_whole "" "$j" "$id" "$started"
t_expect "the head node stays, no GPU billed" \
  "$(nodes | jq -r --arg v "$head" '.[] | select(.vm_id == $v) | [.state, .gpus] | join(" ")')" '^idle 0$'
t_stop

# A bad cloud block is refused at start, naming the field.
refused() {
  local what=$1 patch=$2 want=$3 rc=0 out
  jq "$patch" "$T_DIR/config.json" >"$T_DIR/bad.json"
  out=$("$TENBIND" --listen 127.0.0.1:0 --state "$T_DIR/bad-state" --config "$T_DIR/bad.json" 2>&1 >/dev/null) || rc=$?
  t_expect "tenbind refuses $what" "$rc $out" "^[1-9][0-9]* .*bad.json.*$want"
}
refused "a cloud block without the cluster's tag" '(.sites[] | select(.name == "elastic") | .cloud) |= del(.tag)' "'cloud.tag': required"
refused "a tag without its key" '(.sites[] | select(.name == "elastic") | .cloud.tag) |= del(.key)' "'cloud.tag.key': required"
refused "an unknown provider" '(.sites[] | select(.name == "elastic") | .cloud.kind) = "oci"' "'cloud.kind'"
refused "an unknown field" '(.sites[] | select(.name == "elastic") | .cloud.zones) = ["us-east-1a"]' "cloud.zones"
t_done
