#!/usr/bin/env bash
# An elastic Slurm site: a cluster that scales itself with Slurm's power
# saving (scripts/slurm-testbed --elastic, real slurmctld power saving with
# a ResumeProgram that starts the node's slurmd).  Before any job its two
# nodes are powered down, and tenbind counts their 16 h100 as capacity the
# site grows into, none of them down; a job tenbin sends there makes
# slurmctld resume a node (POWERING_UP, its ResumeProgram logged), the job
# runs and succeeds, the ledger bills its GPU time at the site's rented
# price, and after SuspendTime idle Slurm powers the node down again.
. "$(dirname "$0")/lib.sh"
# A short boot and SuspendTime keep the test near a minute; Slurm 22.05
# adds up to 30 s of its own between a node's registration and its job's
# start (its periodic check of booting jobs).
export SLURM_TESTBED_BOOT_S=3 SLURM_TESTBED_SUSPEND_S=10
t_slurm_start --clusters 1 --elastic
jq '.sites |= map(if .name == "elastic" then . + {cost: {rented: {per_gpu_hour: {h100: 6.88}}}} else . end)' \
  "$T_DIR/slurm.json" >"$T_DIR/priced.json"
t_expect "the testbed's site says how long a node boots" \
  "$(jq -c '.sites[] | select(.name == "elastic") | .elastic' "$T_DIR/priced.json")" '^\{"boot_s":3\}$'
t_start --config "$T_DIR/priced.json"

node_state() { # NODE: Slurm's state of the elastic cluster's NODE
  SLURM_CONF=$ELASTIC_SLURM_CONF scontrol show node "$1" | sed -n 's/^ *State=\([^ ]*\).*/\1/p'
}

for _ in $(seq 1 50); do
  site=$(curl -fsS "$T_URL/v1/sites/elastic")
  [ "$(jq -r .reachable <<<"$site")" = true ] && break
  sleep 0.1
done
t_expect "the elastic site is reachable" "$(jq -r .reachable <<<"$site")" '^true$'
t_expect "both its nodes are powered down" \
  "$(node_state elastic-h100-1) $(node_state elastic-h100-2)" \
  '^IDLE\+CLOUD\+POWERED_DOWN IDLE\+CLOUD\+POWERED_DOWN$'
t_expect "no slurmd runs for them" \
  "$(grep -c '^slurmd:' "$T_TB/elastic/pids" || true)" '^0$'
t_expect "tenbind counts both nodes, none down" \
  "$(jq -c '[.nodes, .nodes_down]' <<<"$site")" '^\[2,0\]$'
h100=$(jq -c '.gpus[] | select(.type == "h100")' <<<"$site")
t_expect "and their 16 h100, none down, none in use" \
  "$(jq -c '[.total, .down, .in_use]' <<<"$h100")" '^\[16,0,0\]$'
if jq -e 'has("grow")' <<<"$h100" >/dev/null; then
  t_expect "all 16 are growth: Slurm starts the nodes for a job" \
    "$(jq .grow <<<"$h100")" '^16$'
else
  echo "# GET /v1/sites/elastic has no grow yet; it shows the powered-down GPUs as idle: $h100"
fi

# A job pinned to the site: Slurm powers a node up for it.
j=$("$TENBIN" submit --project demo --site elastic --gpus 2 --gpu-type h100 -- \
  sh -c 'echo "on $SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"; sleep 2' 2>/dev/null)
seen=""
for _ in $(seq 1 100); do
  st=$(node_state elastic-h100-1)
  [[ $seen == *"$st"* ]] || seen="$seen $st"
  [[ $st != *POWER* ]] && break
  sleep 0.1
done
t_expect "slurmctld powered the node up for it" "$seen" 'POWERING_UP'
t_expect "the node came up, no longer powered down" "$(node_state elastic-h100-1)" \
  '^(MIXED|ALLOCATED|IDLE)\+CLOUD$'
t_expect "slurmctld ran the ResumeProgram for it" \
  "$(grep -c 'power_save: pid [0-9]* waking nodes elastic-h100-1$' "$T_TB/elastic/log/slurmctld.log")" '^1$'
t_expect "the other node stays powered down" "$(node_state elastic-h100-2)" 'POWERED_DOWN'
t_expect "the job runs" "$(t_wait_state "$j" 'running|succeeded' 10)" '^(running|succeeded)$'
t_expect "and succeeds" "$(t_wait_state "$j" succeeded 60)" '^succeeded$'
t_expect "on the node Slurm powered up, with its 2 GPUs" "$("$TENBIN" logs "$j")" \
  '^on elastic-h100-1 gpus=0,1$'
t_expect "the ResumeProgram started the node's slurmd after its boot" \
  "$(grep -o 'boot elastic-h100-1: slurmd pid [0-9]*' "$T_TB/elastic/log/power.log")" 'slurmd pid [0-9]+$'
t_expect "and recorded it for stop" "$(grep -c '^slurmd:elastic-h100-1 ' "$T_TB/elastic/pids")" '^1$'
ev=$(curl -fsS "$T_URL/v1/jobs/$j/events")
t_expect "it ran before it succeeded" "$(jq -r '[.events[].to] | join(" ")' <<<"$ev")" \
  'running succeeded$'
t_expect "running from its allocation, while its node booted (Slurm's CONFIGURING)" \
  "$(jq -r '[.events[] | select(.to == "running")][0].detail' <<<"$ev")" '^CONFIGURING'

# Billed at the rented price: its 2 GPUs from Slurm's allocation (the
# node's boot included, which a cloud bills too) to its end, at $6.88 per
# GPU-hour, at least the billing minimum (60 s a GPU).
jj=$(curl -fsS "$T_URL/v1/jobs/$j")
t_expect "its GPU time is billed at the site's rented price" \
  "$(jq -c 'def t: (sub("\\.[0-9]+Z$"; "Z") | fromdate) * 1000 + (capture("\\.(?<ms>[0-9]{3})Z$").ms | tonumber); [.cost.gpu_ms == 2 * ((.ended_at | t) - (.started_at | t)), .cost.gpu_ms >= 4000, .cost.billed_micro == ((6880000 * ([.cost.gpu_ms, 120000] | max) / 3600000) | floor)]' <<<"$jj")" \
  '^\[true,true,true\]$'
line=$(curl -fsS "$T_URL/v1/reports/usage?by=site" | jq -c '.lines[] | select(.site == "elastic")')
t_expect "and the usage report bills the site that job, the same amount" \
  "$(jq -c --argjson c "$(jq .cost <<<"$jj")" '[.jobs, .gpu_ms == $c.gpu_ms, .billed_micro == $c.billed_micro]' <<<"$line")" \
  '^\[1,true,true\]$'
t_expect "tenbin report shows it" "$("$TENBIN" report --by site | grep '^elastic')" '^elastic +[0-9.]+ +1 '

# Idle for SuspendTime (10 s), the node is powered down again.
st=""
for _ in $(seq 1 200); do
  st=$(node_state elastic-h100-1)
  [[ $st == *POWERED_DOWN* ]] && break
  sleep 0.2
done
t_expect "idle for SuspendTime, Slurm powers the node down again" "$st" '^IDLE\+CLOUD\+POWERED_DOWN$'
t_expect "its SuspendProgram ended the slurmd" \
  "$(grep -c 'suspend elastic-h100-1: slurmd pid [0-9]* ended' "$T_TB/elastic/log/power.log")" '^1$'
t_expect "and forgot it" "$(grep -c '^slurmd:' "$T_TB/elastic/pids" || true)" '^0$'
for _ in $(seq 1 25); do
  site=$(curl -fsS "$T_URL/v1/sites/elastic")
  [ "$(jq -c '.gpus[] | select(.type == "h100") | [.in_use, .down]' <<<"$site")" = '[0,0]' ] && break
  sleep 0.2
done
t_expect "tenbind sees both nodes again, none down, no GPU in use" \
  "$(jq -c '[.nodes, .nodes_down, (.gpus[] | select(.type == "h100") | .in_use)]' <<<"$site")" '^\[2,0,0\]$'
t_stop
t_done
