#!/usr/bin/env bash
# The NCCL baseline of an aws site (moto behind our EC2 front, whose VM
# emulator runs each instance's user-data as local processes): a probe of
# the site is a job like any other there, so the autoscaler launches a
# VM for it, the VM's tenbin-agent runs tenbin-probe with all the node's
# GPUs, the probe reports to tenbind with its token from the VM, and the
# site is judged against the owned reference.
. "$(dirname "$0")/lib.sh"

t_aws_start
umask 077
port=$(t_free_port)
cat >"$T_DIR/config.json" <<JSON
{"policy": {"burst": {"tick_s": 1}, "wait_value": {"default": 1000}},
 "sites": [
  {"name": "here", "kind": "local", "gpus": {"h100": 8}},
  {"name": "aws", $(t_aws_site_json),
   "zones": ["us-east-1a"],
   "shapes": [{"name": "p5", "type": "p5.48xlarge", "gpu_type": "h100",
               "gpus": 8}],
   "max_nodes": 1, "idle_timeout_s": 60, "burst": {"cooldown_s": 0},
   "boot_timeout_s": 60, "reconcile_s": 1, "heartbeat_ms": 200,
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88}}},
   $(t_node_agent_json "$port")}
 ],
 "baseline": {"reference": "here", "every_s": 0, "sites": []}}
JSON
t_start --config "$T_DIR/config.json" --listen "127.0.0.1:$port"

"$TENBIN" baseline run here --wait >/dev/null
t_expect "the owned reference is probed" \
  "$(curl -fsS "$T_URL/v1/sites/here/baseline" | jq -r .status)" '^at_baseline$'
t_expect "no VM runs before the cloud site is probed" "$(t_fake GET /_fake/vms | jq length)" '^0$'
out=$("$TENBIN" baseline run aws --wait)
t_expect "the cloud site's probe is done" "$out" 'last probe: 2 done'
job=$(curl -fsS "$T_URL/v1/sites/aws/baseline" | jq -r .latest_probe.job_id)
t_expect "its job ran on a node of the site" \
  "$(curl -fsS "$T_URL/v1/jobs/$job" | jq -r '.state + " " + .remote_id')" '^succeeded node-1$'
t_expect "on a VM the autoscaler launched for it" \
  "$(t_fake GET /_fake/vms | jq -r '.[0].node')" '^1$'
t_expect "with the whole node's 8 GPUs" "$out" 'env\.CUDA_VISIBLE_DEVICES +0,1,2,3,4,5,6,7'
t_expect "and the cloud site is at the reference's baseline" \
  "$(curl -fsS "$T_URL/v1/sites/aws/baseline" | jq -r .status)" '^at_baseline$'
t_stop
t_done
