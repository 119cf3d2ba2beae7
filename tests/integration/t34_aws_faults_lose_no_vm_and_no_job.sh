#!/usr/bin/env bash
# An aws site under faults, against moto behind our EC2 front: kill -9
# right after a node is committed and right after its launch was
# answered (one VM either way: the resend carries the same ClientToken);
# no capacity in the first zone; a throttling storm; a VM that never
# boots; a spot interruption mid-job (the job runs again, with
# TENBIN_RESTART_COUNT=1); a node agent killed (its job is lost, its VM
# reaped); a VM tagged with this tenbind but no node of it (reaped after
# the grace period).  Every launched VM ends.
. "$(dirname "$0")/lib.sh"

t_aws_start
umask 077
port=$(t_free_port)
# A subnet lives in one zone: one per zone, as a real account has them.
aws=$(command -v aws || echo "$TENBIN_SOURCE_DIR/var/py/bin/aws")
A=(env AWS_ACCESS_KEY_ID="$AWS_AK" AWS_SECRET_ACCESS_KEY="$AWS_SK" AWS_DEFAULT_REGION=us-east-1 "$aws" --endpoint-url "$MOTO_URL")
vpc=$("${A[@]}" ec2 create-vpc --cidr-block 10.9.0.0/16 | jq -r .Vpc.VpcId)
subnet_a=$("${A[@]}" ec2 create-subnet --vpc-id "$vpc" --cidr-block 10.9.1.0/24 --availability-zone us-east-1a | jq -r .Subnet.SubnetId)
subnet_b=$("${A[@]}" ec2 create-subnet --vpc-id "$vpc" --cidr-block 10.9.2.0/24 --availability-zone us-east-1b | jq -r .Subnet.SubnetId)
cat >"$T_DIR/config.json" <<JSON
{"policy": {"burst": {"tick_s": 1}},
 "sites": [
  {"name": "here", "kind": "local", "gpus": {}},
  {"name": "aws", $(t_aws_site_json),
   "zones": ["us-east-1a", "us-east-1b"],
   "subnets": {"us-east-1a": "$subnet_a", "us-east-1b": "$subnet_b"},
   "shapes": [{"name": "p5", "type": "p5.48xlarge", "gpu_type": "h100",
               "gpus": 8},
              {"name": "p5-spot", "type": "p5.48xlarge", "gpu_type": "a100",
               "gpus": 8, "market": "spot"}],
   "max_nodes": 3, "idle_timeout_s": 1, "burst": {"cooldown_s": 0}, "boot_timeout_s": 5,
   "lost_after_s": 3, "orphan_grace_s": 2, "backoff_s": 2,
   "reconcile_s": 1, "heartbeat_ms": 200, $(t_node_agent_json "$port")}
]}
JSON
start() { t_start --config "$T_DIR/config.json" --listen "127.0.0.1:$port"; }
# Wait until every VM has ended (idle nodes go after 1 s), so that the
# next job needs a new one.
idle_out() {
  local live
  live=$(t_vms_left terminated)
  [ "$live" = 0 ] || t_fail "VMs still running: $live"
}

# kill -9 between the node's commit and its launch request.
TENBIN_FAULT=cloud-node-committed start
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- echo one)
t_crashed
t_expect "the crash came before any launch" "$(t_fake GET /_fake/stats | jq .launched)" '^0$'
start
t_expect "after the restart the job runs" "$(t_wait_state "$id" succeeded 60)" '^succeeded$'
t_expect "its node has exactly one VM" "$(t_vms_of_node 1 | jq length)" '^1$'

idle_out
# kill -9 after the launch was answered: the VM exists, unrecorded.
t_stop
TENBIN_FAULT=cloud-launch-answered start
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- echo two)
t_crashed
start
t_expect "after the restart the job runs" "$(t_wait_state "$id" succeeded 60)" '^succeeded$'
node=$(t_node_of_job "$id")
t_expect "its node still has exactly one VM" "$(t_vms_of_node "$node" | jq length)" '^1$'
t_expect "the resend was answered with the first VM (same ClientToken)" \
  "$(t_fake GET /_fake/stats | jq '.deduplicated >= 1')" '^true$'

idle_out
# No capacity in the first zone: the next one.
t_fake POST /_fake/faults '{"capacity": ["us-east-1a"]}' >/dev/null
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- echo three)
t_expect "without capacity in us-east-1a the job still runs" "$(t_wait_state "$id" succeeded 60)" '^succeeded$'
node=$(t_node_of_job "$id")
t_expect "in us-east-1b's subnet" \
  "$(AWS_ACCESS_KEY_ID=$AWS_AK AWS_SECRET_ACCESS_KEY=$AWS_SK AWS_DEFAULT_REGION=us-east-1 "$aws" --endpoint-url "$MOTO_URL" ec2 describe-instances --filters "Name=tag:tenbin-node,Values=$node" | jq -r '.Reservations[].Instances[].SubnetId')" "^$subnet_b\$"
t_expect "on a VM in us-east-1b" \
  "$(t_fake GET /_fake/vms | jq -r --arg n "$node" '.[] | select(.node == $n) | .zone')" '^us-east-1b$'
t_fake POST /_fake/faults '{"capacity": []}' >/dev/null

idle_out
# A throttling storm: retried with backoff, same token.
t_fake POST /_fake/faults '{"throttle": 5}' >/dev/null
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- echo four)
t_expect "through 5 throttled calls the job runs" "$(t_wait_state "$id" succeeded 90)" '^succeeded$'
t_expect "the front throttled them" "$(t_fake GET /_fake/stats | jq '.throttled >= 5')" '^true$'

idle_out
# A VM that never boots: terminated at the boot timeout, the job placed
# again.
t_fake POST /_fake/faults '{"never_boot": 1}' >/dev/null
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- echo five)
t_expect "past a VM that never boots the job runs" "$(t_wait_state "$id" succeeded 90)" '^succeeded$'
t_expect "the silent node ended, saying why" \
  "$(curl -fsS "$T_URL/v1/sites/aws" | jq -r '.nodes[].reason // empty')" 'never registered within 5 s'

idle_out
# A spot interruption mid-job: placed again, restarted, nothing lost.
id=$("$TENBIN" submit --gpus 8 --gpu-type a100 -- sh -c \
  'echo "restart $TENBIN_RESTART_COUNT"; [ "$TENBIN_RESTART_COUNT" -gt 0 ] || sleep 120; echo finished')
t_wait_state "$id" running 60 >/dev/null
node=$(t_node_of_job "$id")
vm=$(t_fake GET /_fake/vms | jq -r --arg n "$node" '.[] | select(.node == $n) | .id')
# The agent polls the metadata every 2 s: a notice shorter than that
# may end the VM before the agent has heard of it (its job is then lost,
# as a killed agent's).
t_fake POST /_fake/interrupt "{\"vm\": \"$vm\", \"notice_s\": 6}" >/dev/null
t_expect "after the interruption the job runs again and ends" "$(t_wait_state "$id" succeeded 90)" '^succeeded$'
t_expect "its second run knows it is one" "$("$TENBIN" logs "$id")" 'restart 1'
t_expect "the events say it was preempted" \
  "$(curl -fsS "$T_URL/v1/jobs/$id/events" | jq -r '.events[].detail // empty' | tr '\n' ' ')" 'preempted: spot interruption'
[ "$(t_node_of_job "$id")" != "$node" ] && t_ok "another node ran it" || t_fail "the interrupted node ran it again"

idle_out
# A node agent killed: its job is lost, its VM reaped.
id=$("$TENBIN" submit --gpus 8 --gpu-type h100 -- sleep 120)
t_wait_state "$id" running 60 >/dev/null
node=$(t_node_of_job "$id")
vm=$(t_fake GET /_fake/vms | jq -r --arg n "$node" '.[] | select(.node == $n) | .id')
agent=$(pgrep -f "tenbin-agent node .*--root $T_DIR/vms/$vm" | head -n 1)
t_expect "the node agent of $vm was found" "$agent" '^[0-9]+$'
kill -KILL "$agent"
t_expect "the job is lost" "$(t_wait_state "$id" lost 30)" '^lost$'
t_expect "its VM is terminated" "$(t_wait_vm_state "$vm" terminated)" '^terminated$'

# A VM tagged with this tenbind but with no node of it: reaped.
instance=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("select value from meta where key = ?", ("instance",)).fetchone()[0])' "$T_STATE/tenbin.db")
aws=$(command -v aws || echo "$TENBIN_SOURCE_DIR/var/py/bin/aws")
stray=$(AWS_ACCESS_KEY_ID=$AWS_AK AWS_SECRET_ACCESS_KEY=$AWS_SK AWS_DEFAULT_REGION=us-east-1 \
  "$aws" --endpoint-url "$FRONT_URL" ec2 run-instances --image-id ami-12c6146b \
  --instance-type p5.48xlarge --count 1 \
  --tag-specifications "ResourceType=instance,Tags=[{Key=tenbin-instance,Value=$instance},{Key=tenbin-node,Value=999999}]" |
  jq -r '.Instances[0].InstanceId')
t_expect "a VM of no node of this tenbind is terminated after the grace" \
  "$(t_wait_vm_state "$stray" terminated)" '^terminated$'
t_expect "and reported" "$(cat "$T_DIR/tenbind.err")" "reaping VM $stray"

# In the end every VM ends (idle nodes go after 1 s).
t_expect "no VM is left running" "$(t_vms_left terminated)" '^0$'
t_expect "every node tenbind launched is recorded as ended" \
  "$(t_nodes_left aws 0)" '^0$'
t_stop
t_done
