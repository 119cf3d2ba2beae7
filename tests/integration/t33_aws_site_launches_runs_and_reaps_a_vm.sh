#!/usr/bin/env bash
# An aws site end to end, against moto checking real SigV4 signatures
# behind our EC2 front (tests/fakes/aws_front.py), whose VM emulator runs
# each instance's user-data as local processes: a job that only the aws
# site can run makes tenbind launch a tagged VM, the VM's tenbin-agent
# registers with its node token, runs the job and streams its output
# (tenbin logs), then the node idles out and its VM is terminated; the
# node's launch and end are recorded.  A forged token, and the token of
# an ended node, are refused.
. "$(dirname "$0")/lib.sh"

t_aws_start
umask 077
port=$(t_free_port)
cat >"$T_DIR/config.json" <<JSON
{"policy": {"burst": {"tick_s": 1}, "wait_value": {"default": 1000}},
 "sites": [
  {"name": "here", "kind": "local", "gpus": {}},
  {"name": "aws", $(t_aws_site_json),
   "zones": ["us-east-1a", "us-east-1b"],
   "shapes": [{"name": "p5", "type": "p5.48xlarge", "gpu_type": "h100",
               "gpus": 8}],
   "max_nodes": 2, "idle_timeout_s": 2, "burst": {"cooldown_s": 0}, "boot_timeout_s": 60,
   "reconcile_s": 1, "heartbeat_ms": 200, "tags": {"team": "ml"},
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88}}},
   $(t_node_agent_json "$port")}
]}
JSON
t_start --config "$T_DIR/config.json" --listen "127.0.0.1:$port"

t_hello aws
vms=$(t_fake GET /_fake/vms)
vm=$(jq -r '.[0].id' <<<"$vms")
t_expect "one VM was launched, tagged with its node" \
  "$(jq -r 'length, .[0].node, .[0].shape, .[0].zone' <<<"$vms" | tr '\n' ' ')" \
  '^1 1 p5.48xlarge us-east-1a $'
t_expect_hello_output "$vm" aws
t_expect "/metrics counts the node by state" \
  "$(curl -fsS "$T_URL/metrics" | grep '^tenbin_nodes{site="aws"')" '^tenbin_nodes\{site="aws",state="(idle|busy)"\} 1$'
t_expect "tenbin site show lists the node and its VM" \
  "$("$TENBIN" site show aws)" "1 +(idle|busy|terminating|ended) +p5 +us-east-1a +on-demand +$vm +[0-9]+s +[$][0-9.]+"

# Idle for 2 s: terminated, in EC2 and in tenbin's record.
t_expect_idled_out aws 2
t_expect "the VM is terminated at the provider" \
  "$(t_fake GET /_fake/vms | jq -r '.[0].state')" '^(shutting-down|terminated)$'
# The node agent runs with the VM's directory as its root.
pgrep -f -- "--root $T_DIR/vms/$vm" >/dev/null && t_fail "a process of the VM still runs" || t_ok "no process of the VM is left"

# The ledger has the VM's whole uptime: the job's hold (1 GPU) plus the
# idle pieces of the node's 8 GPUs, the idle ones billed to '(idle)'.
t_expect "the job's hold and the idle pieces add up to the VM's uptime x 8 GPUs" \
  "$(python3 - "$T_STATE/tenbin.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
billed = db.execute("select sum((to_ms - from_ms) * gpus) from usage where site = 'aws'").fetchone()[0]
up = db.execute("select sum((ended_ms - launched_ms) * gpus) from nodes where site = 'aws'").fetchone()[0]
# A job's times come from its agent, the VM's from EC2 and tenbind: a
# few milliseconds apart on one machine.
print("ok" if abs(billed - up) <= 8 * 100 else f"billed {billed} of {up} GPU-ms")
PY
)" '^ok$'
t_expect "the report shows the idle GPUs as their own line, in dollars" \
  "$(curl -fsS "$T_URL/v1/reports/usage?by=project" | jq -r '.lines[] | select(.project == "(idle)") | .billed_micro > 0')" '^true$'

# Node tokens: forged, and one of a node that has ended.
t_expect_node_tokens_refused "$(t_node_token "$vm")"
t_stop

# A bad aws site is refused at start, naming the file, the field and why.
refused() {
  local what=$1 patch=$2 want=$3 rc=0 out
  jq "$patch" "$T_DIR/config.json" >"$T_DIR/bad.json"
  out=$("$TENBIND" --listen 127.0.0.1:0 --state "$T_DIR/bad-state" --config "$T_DIR/bad.json" 2>&1 >/dev/null) || rc=$?
  t_expect "tenbind refuses $what" "$rc $out" "^[1-9][0-9]* .*bad.json.*$want"
}
refused "min_nodes over max_nodes" '.sites[1].min_nodes = 5' "sites\\[1\\].*'min_nodes'.*more than max_nodes"
refused "a negative timeout" '.sites[1].idle_timeout_s = -1' "idle_timeout_s"
refused "a zone of another region" '.sites[1].zones = ["eu-west-1a"]' "'zones\\[0\\]'.*not a zone of region us-east-1"
refused "a shape without a GPU type" 'del(.sites[1].shapes[0].gpu_type)' "'shapes\\[0\\].gpu_type'"
refused "a price on a shape (prices come from the cost block)" '.sites[1].shapes[0].price_per_hour = 55.04' "'shapes\\[0\\].price_per_hour'"
refused "an unknown market" '.sites[1].shapes[0].market = "cheap"' "'shapes\\[0\\].market'"
refused "an unknown field" '.sites[1].zone = "us-east-1a"' "'zone': not a field of aws sites"
refused "credentials that are not there" '.sites[1].credentials.file = "/nonexistent/creds"' "'credentials'"
refused "a dataset agent of its own" '.sites[1].agent = {"url": "http://127.0.0.1:1", "token": "x"}' "'sites\\[1\\].agent': aws sites have no agent"
refused "a subnet for a zone the site does not have" '.sites[1].subnets = {"us-east-1a": "subnet-1", "us-east-1b": "subnet-2", "us-east-1c": "subnet-3"}' "'subnets.us-east-1c': not one of the site's zones"
refused "a zone without a subnet" '.sites[1].subnets = {"us-east-1a": "subnet-1"}' "'subnets': zone us-east-1b has none"
refused "no URL for the nodes to dial" 'del(.sites[1].node_agent.server)' "'node_agent.server'"
t_done
