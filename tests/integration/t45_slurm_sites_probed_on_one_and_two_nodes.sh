#!/usr/bin/env bash
# The NCCL baseline on real Slurm clusters (scripts/slurm-testbed): the
# probe runs as a Slurm job on the reference cluster and reports what the
# job saw (Slurm's GPUs); a cluster whose jobs get another NCCL_IB_HCA has
# drifted and a job that requires the baseline is not sent there; and a
# two-node probe of the elastic cluster (Slurm powers both nodes up) runs
# one probe process per node under srun, both report, and the two nodes
# agree.
. "$(dirname "$0")/lib.sh"
export SLURM_TESTBED_BOOT_S=3 SLURM_TESTBED_SUSPEND_S=30
t_slurm_start --clusters 2 --elastic
jq --arg probe "$TENBIN_BIN/tenbin-probe" '
  .sites |= map(if .name == "cloud" then . + {job_env: {NCCL_IB_HCA: "mlx5_9"}} else . end)
  | . + {baseline: {reference: "onprem", every_s: 0, sites: [], probe: $probe,
                    probe_args: ["--no-measure"]}}' \
  "$T_DIR/slurm.json" >"$T_DIR/config.json"
t_start --config "$T_DIR/config.json"
for _ in $(seq 1 100); do
  up=$(curl -fsS "$T_URL/v1/sites" | jq '[.sites[] | select(.reachable)] | length')
  [ "$up" = 3 ] && break
  sleep 0.1
done
t_expect "the three Slurm sites are reachable" "$up" '^3$'

out=$("$TENBIN" baseline run onprem --wait)
t_expect "the reference cluster's probe ran as a Slurm job and reported" "$out" 'status: +at_baseline'
t_expect "with the GPUs Slurm gave the job (a whole node)" "$out" \
  'env\.CUDA_VISIBLE_DEVICES +0,1,2,3,4,5,6,7'
job=$(curl -fsS "$T_URL/v1/sites/onprem/baseline" | jq -r .latest_probe.job_id)
t_expect "its job has a Slurm id" "$(curl -fsS "$T_URL/v1/jobs/$job" | jq -r .remote_id)" '^[0-9]+$'
t_expect "and Slurm has it once" "$(t_slurm_tagged onprem "$job")" '^1$'

"$TENBIN" baseline run cloud --wait >/dev/null || true
view=$(curl -fsS "$T_URL/v1/sites/cloud/baseline")
t_expect "the cluster whose jobs get another NCCL_IB_HCA has drifted" \
  "$(jq -r '.status + " " + .findings[0].rule' <<<"$view")" '^drifted nccl_env$'
t_expect "baseline diff shows both values" "$("$TENBIN" baseline diff cloud)" \
  '! +env\.NCCL_IB_HCA +- +mlx5_9'
j=$("$TENBIN" submit --project demo --gpus 1 --gpu-type h100 --site cloud --require-baseline -- true)
k=$("$TENBIN" submit --project demo --gpus 1 --gpu-type h100 --require-baseline -- true)
t_expect "a job that requires the baseline runs at the reference" \
  "$(t_wait_state "$k" succeeded 60) $(curl -fsS "$T_URL/v1/jobs/$k" | jq -r .site)" '^succeeded onprem$'
t_expect "and one pinned to the drifted cluster waits, saying why" \
  "$(curl -fsS "$T_URL/v1/jobs/$j" | jq -r .state) $("$TENBIN" explain "$j" | head -2 | tail -1)" \
  "^queued .*nccl_env"
t_expect "the drifted cluster never got it" "$(t_slurm_tagged cloud "$j")" '^0$'
"$TENBIN" cancel "$j" >/dev/null

out=$("$TENBIN" baseline run elastic --nodes 2 --wait)
view=$(curl -fsS "$T_URL/v1/sites/elastic/baseline")
t_expect "a two-node probe is done" "$(jq -r .latest_probe.state <<<"$view")" '^done$'
t_expect "both nodes reported" \
  "$(sqlite3 "$T_STATE/tenbin.db" "select group_concat(node_rank) from probe_reports where probe_id = $(jq -r .probe_id <<<"$view")")" '^0,1$'
t_expect "as ranks of a two-node probe" "$(jq -r '.result.nodes' <<<"$view")" '^2$'
t_expect "the nodes agree with each other" "$(jq -r .nodes_differing <<<"$view")" '^0$'
t_expect "and the elastic cluster is at the baseline" "$(jq -r .status <<<"$view")" '^at_baseline$'
t_stop
t_done
