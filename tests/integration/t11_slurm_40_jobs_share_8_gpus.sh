#!/usr/bin/env bash
# 40 jobs of 2 GPUs each on a Slurm site with 8 (fake) GPUs: Slurm never
# has more than 8 in use, every job succeeds, and each one's log records
# the CUDA_VISIBLE_DEVICES Slurm gave it.
. "$(dirname "$0")/lib.sh"
t_slurm_start
t_start --config "$T_DIR/slurm.json"

ids=()
for i in $(seq 1 40); do
  ids+=("$("$TENBIN" submit --project demo --site onprem --gpus 2 --gpu-type h100 \
    --name "pair-$i" -- sh -c 'echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"; sleep 1')")
done

# Watch Slurm's own count of allocated GPUs until every job has ended.
max=0
for _ in $(seq 1 600); do
  used=$(t_slurmrest onprem GET /nodes |
    jq '[.nodes[].gres_used | capture("gpu:[a-z0-9]*:(?<n>[0-9]+)").n | tonumber] | add')
  [ "$used" -gt "$max" ] && max=$used
  left=$(curl -fsS "$T_URL/v1/jobs?limit=1000" |
    jq '[.jobs[] | select(.state | test("queued|placed|submitted|running"))] | length')
  [ "$left" -eq 0 ] && break
  sleep 0.2
done
t_expect "Slurm never had more than 8 GPUs in use" "$max" '^[2-8]$'
succeeded=0
logs_ok=0
for id in "${ids[@]}"; do
  [ "$(curl -fsS "$T_URL/v1/jobs/$id" | jq -r .state)" = succeeded ] && succeeded=$((succeeded + 1))
  "$TENBIN" logs "$id" | grep -Eq '^CUDA_VISIBLE_DEVICES=[0-7],[0-7]$' && logs_ok=$((logs_ok + 1))
done
t_expect "all 40 jobs succeeded" "$succeeded" '^40$'
t_expect "each log has the two GPUs it got" "$logs_ok" '^40$'
t_stop
t_done
