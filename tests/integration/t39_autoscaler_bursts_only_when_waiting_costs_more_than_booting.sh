#!/usr/bin/env bash
# Burst mode end to end: an owned site and an aws site (moto behind our
# EC2 front, its VM emulator booting each VM).  While the owned site's
# predicted wait is shorter than a cloud node's boot delay, a queued job
# waits for it and the autoscaler launches nothing; once the owned site
# is busy for an hour, the next job makes the autoscaler launch one node,
# the job runs there, and the idle node is released after its idle
# timeout.  Every decision is in `tenbin autoscaler log`, in the site's
# view and in /metrics; a bad burst setting is refused naming it.
. "$(dirname "$0")/lib.sh"

t_aws_start
umask 077
port=$(t_free_port)
cat >"$T_DIR/config.json" <<JSON
{"policy": {"wait_value": {"default": 100}, "burst": {"tick_s": 1}},
 "tick_ms": 200,
 "sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 2},
   "cost": {"owned": {"capex_per_node": 350000, "nodes": 12, "years": 4,
            "support_per_year": 0.10, "power_kw_busy": 7.0,
            "power_kw_idle": 2.0, "pue": 1.4, "dollars_per_kwh": 0.09,
            "staff_per_year": 40000}}},
  {"name": "aws", $(t_aws_site_json),
   "zones": ["us-east-1a"],
   "shapes": [{"name": "p5", "type": "p5.48xlarge", "gpu_type": "h100",
               "gpus": 8}],
   "max_nodes": 2, "idle_timeout_s": 2, "boot_timeout_s": 60,
   "burst": {"boot_s": 300, "cooldown_s": 0, "spend_cap_per_hour": 120},
   "reconcile_s": 1, "heartbeat_ms": 200,
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88}}},
   $(t_node_agent_json "$port")}
]}
JSON
t_start --config "$T_DIR/config.json" --listen "127.0.0.1:$port"

launches() { t_fake GET /_fake/vms | jq length; }

# ---- a short owned wait: no burst ----
short=$("$TENBIN" submit --site onprem --gpus 2 --name short --time 1 -- sleep 4 2>/dev/null)
t_wait_state "$short" running >/dev/null
job=$("$TENBIN" submit --gpus 2 --gpu-type h100 --name quick --time 1 -- true 2>/dev/null)
for _ in $(seq 1 15); do
  [ "$(curl -fsS "$T_URL/v1/jobs/$job/placement" | jq -r .verdict)" = wait ] && break
  sleep 0.2
done
p=$(curl -fsS "$T_URL/v1/jobs/$job/placement")
# The owned site frees its GPUs within a minute; a node boots in 5.
t_expect "a job whose owned wait is shorter than a boot waits for the owned site" \
  "$(jq -r '[.verdict, .site] | join(" ")' <<<"$p")" '^wait onprem$'
t_expect "the aws candidate starts only once a node boots, 5 minutes out" \
  "$(jq -r '.candidates[] | select(.site == "aws") | .reason' <<<"$p")" \
  'starts in [45]m([0-9]+s)?; once the site grows a node for it$'
sleep 2
t_expect "the autoscaler launched nothing" "$(launches)" '^0$'
t_expect "the job ran on the owned site" \
  "$(t_wait_state "$job" succeeded 30) $(curl -fsS "$T_URL/v1/jobs/$job" | jq -r .site)" '^succeeded onprem$'
t_expect "the autoscaler log has no launch" \
  "$(curl -fsS "$T_URL/v1/autoscaler/log?site=aws" | jq '[.decisions[] | select(.action == "launch")] | length')" '^0$'

# ---- the owned site busy for an hour: burst ----
long=$("$TENBIN" submit --site onprem --gpus 2 --name long --time 60 -- sleep 300 2>/dev/null)
t_wait_state "$long" running >/dev/null
# A burst of three 2-GPU jobs: one 8-GPU node holds them all.
jobs=()
for i in 1 2 3; do
  jobs+=("$("$TENBIN" submit --gpus 2 --gpu-type h100 --name "burst$i" --time 1 -- echo burst 2>/dev/null)")
done
for job in "${jobs[@]}"; do
  t_expect "job $job, which the owned site would start in an hour, runs on a node launched for the burst" \
    "$(t_wait_state "$job" succeeded 60) $(curl -fsS "$T_URL/v1/jobs/$job" | jq -r .site)" '^succeeded aws$'
done
t_expect "one node was launched for the three" "$(launches)" '^1$'
log=$(curl -fsS "$T_URL/v1/autoscaler/log?site=aws")
t_expect "the launch is logged with its reason and inputs" \
  "$(jq -r '[.decisions[] | select(.action == "launch")][0] | [.reason, .launched, .live_nodes, .wanted_nodes, .demand_gpus, .spend_micro_per_hour] | map(tostring) | join(" ")' <<<"$log")" \
  '^demand 1 0 1 [246] 55040000$'

# Idle for 2 s: released, in EC2 and in tenbin's record.
t_expect_idled_out aws 2
t_expect "the release is logged as idle" \
  "$(curl -fsS "$T_URL/v1/autoscaler/log?site=aws" | jq -r '[.decisions[] | select(.action == "release")][0] | [.reason, .released] | map(tostring) | join(" ")')" \
  '^idle 1$'
t_expect "tenbin autoscaler log lists both, newest first" \
  "$("$TENBIN" autoscaler log --site aws | awk 'NR > 1 {print $4, $5}' | grep -E '^(launch|release) ' | tr '\n' '|')" \
  '^release idle\|launch demand\|$'
t_expect "tenbin site show has the autoscaler's state and last decision" \
  "$("$TENBIN" site show aws | grep -E '^(autoscaler|last decision)' | tr -s ' ' | tr '\n' '|')" \
  '^autoscaler: wants 0 nodes \(launching 0, idle 0, busy 0\).*cap \$120\.000000/h\); boot [0-9]+s\|last decision: release \(idle\): release node 1 '
t_expect "/metrics counts the decisions by reason" \
  "$(curl -fsS "$T_URL/metrics" | grep -E '^tenbin_autoscaler_decisions_total\{site="aws",reason="(demand|idle)"\}' | tr '\n' '|')" \
  '^tenbin_autoscaler_decisions_total\{site="aws",reason="demand"\} [1-9][0-9]*\|tenbin_autoscaler_decisions_total\{site="aws",reason="idle"\} [1-9]'
t_expect "/metrics has the nodes wanted, launching, idle and busy" \
  "$(curl -fsS "$T_URL/metrics" | grep -c '^tenbin_autoscaler_nodes{site="aws",state="\(wanted\|launching\|idle\|busy\)"}')" '^4$'
t_expect "a site the autoscaler does not grow has no autoscaler view" \
  "$(curl -fsS "$T_URL/v1/sites/onprem" | jq 'has("autoscaler")')" '^false$'
t_expect "an unknown site's log is 404" \
  "$(t_http GET '/v1/autoscaler/log?site=nowhere')" '^404 '
t_expect "a limit out of range is 400 naming it" \
  "$(t_http GET '/v1/autoscaler/log?limit=0')" "^400 .*'limit'"
"$TENBIN" cancel "$long" >/dev/null
t_stop

# ---- bad settings are refused, naming the field ----
refused() {
  jq "$2" "$T_DIR/config.json" >"$T_DIR/bad.json"
  t_expect "tenbind refuses $1" \
    "$("$TENBIND" --config "$T_DIR/bad.json" --state "$T_DIR/bad-state" --listen 127.0.0.1:0 2>&1 >/dev/null)" "$3"
}
refused "an unknown burst field" '.sites[1].burst.boost = 1' "burst.boost"
refused "a negative spend cap" '.sites[1].burst.spend_cap_per_hour = -1' "burst.spend_cap_per_hour"
refused "a billing unit of 0" '.sites[1].burst.billing_s = 0' "burst.billing_s"
refused "an overall cap that is not a number" '.policy.burst.spend_cap_per_hour = "lots"' "policy.burst.spend_cap_per_hour"
refused "a tick of 0" '.policy.burst.tick_s = 0' "policy.burst.tick_s"
t_done
