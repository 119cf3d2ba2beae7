#!/usr/bin/env bash
# Two real Slurm clusters (scripts/slurm-testbed) behind one tenbind: jobs
# pinned to a site land there, an a10g job lands only where a10g exists, a
# GPU type no site has is refused at submit, #SBATCH scripts keep their
# directives, exit codes and cancels come back right, and logs are read.
. "$(dirname "$0")/lib.sh"
t_slurm_start
t_start --config "$T_DIR/slurm.json"

for _ in $(seq 1 50); do
  up=$(curl -fsS "$T_URL/v1/sites" | jq '[.sites[] | select(.reachable)] | length')
  [ "$up" = 2 ] && break
  sleep 0.1
done
t_expect "both Slurm sites are reachable" "$up" '^2$'
sites=$("$TENBIN" sites)
t_expect "tenbin sites shows onprem's 8 h100" "$(grep onprem <<<"$sites")" 'h100 0/8'
t_expect "and cloud's h100 and a10g pools" "$(grep cloud <<<"$sites")" 'a10g 0/4'

# Pinned jobs.
a=$("$TENBIN" submit --project demo --site onprem --gpus 2 --gpu-type h100 -- \
  sh -c 'echo "on $SLURM_CLUSTER_NAME gpus=$CUDA_VISIBLE_DEVICES id=$TENBIN_JOB_ID"')
b=$("$TENBIN" submit --project demo --site cloud -- sh -c 'echo "on $SLURM_CLUSTER_NAME"')
t_expect "a job pinned to onprem succeeds" "$(t_wait_state "$a" succeeded 60)" '^succeeded$'
t_expect "a job pinned to cloud succeeds" "$(t_wait_state "$b" succeeded 60)" '^succeeded$'
ja=$(curl -fsS "$T_URL/v1/jobs/$a")
t_expect "it ran at onprem" "$(jq -r .site <<<"$ja")" '^onprem$'
t_expect "with Slurm's job id as its remote id" "$(jq -r .remote_id <<<"$ja")" '^[0-9]+$'
t_expect "Slurm has it under our tag, once" "$(t_slurm_tagged onprem "$a")" '^1$'
t_expect "its log is read from the Slurm output file" "$("$TENBIN" logs "$a")" \
  "^on onprem gpus=0,1 id=$a\$"
t_expect "the cloud job ran on cloud" "$("$TENBIN" logs "$b")" '^on cloud$'

# GPU types decide the site.
c=$("$TENBIN" submit --project demo --gpus 1 --gpu-type a10g -- sh -c 'echo $SLURM_JOB_NODELIST')
t_expect "an a10g job succeeds" "$(t_wait_state "$c" succeeded 60)" '^succeeded$'
t_expect "on the only site with a10g" "$(curl -fsS "$T_URL/v1/jobs/$c" | jq -r .site)" '^cloud$'
t_expect "on the a10g node" "$("$TENBIN" logs "$c")" '^cloud-a10g-1$'
out=$(t_http POST /v1/jobs -H 'Content-Type: application/json' \
  -d '{"project":"demo","gpus":1,"gpu_type":"b200","command":["true"]}')
t_expect "a GPU type no site has is refused with 422" "$out" '^422 .*b200'

# An #SBATCH script keeps its directives: Slurm sees the time limit, the
# CPU count and the GPUs the script asked for.  (slurmrestd 22.05 shows
# cpus_per_task as null even when set; the job's cpus tell.)
cat >"$T_DIR/job.sh" <<'SCRIPT'
#!/bin/bash
#SBATCH --job-name=train-small
#SBATCH --gpus=h100:3
#SBATCH --time=00:07:00
#SBATCH --cpus-per-task=2
echo "gpus=$CUDA_VISIBLE_DEVICES cpus=$SLURM_CPUS_ON_NODE"
sleep 2
SCRIPT
d=$("$TENBIN" sbatch --project demo --site onprem "$T_DIR/job.sh" 2>/dev/null)
t_wait_state "$d" running 60 >/dev/null || true
rid=$(curl -fsS "$T_URL/v1/jobs/$d" | jq -r .remote_id)
sj=$(t_slurmrest onprem GET "/job/$rid" | jq -c '.jobs[0] | {name, time_limit, cpus, tres_per_job}')
t_expect "Slurm got the script's directives" "$sj" \
  '"name":"train-small","time_limit":7,"cpus":2,"tres_per_job":"gres:gpu:h100:3"'
t_expect "the script job succeeds" "$(t_wait_state "$d" succeeded 60)" '^succeeded$'
t_expect "with 3 GPUs and 2 CPUs" "$("$TENBIN" logs "$d")" '^gpus=0,1,2 cpus=2$'

# Exit codes and signals come back decoded from Slurm's wait status.
e=$("$TENBIN" submit --project demo --site onprem -- sh -c 'exit 3')
t_expect "a job exiting 3 fails" "$(t_wait_state "$e" failed 60)" '^failed$'
je=$(curl -fsS "$T_URL/v1/jobs/$e")
t_expect "with exit code 3" "$(jq -r .exit_code <<<"$je")" '^3$'
t_expect "and says so" "$(jq -r .reason <<<"$je")" 'exit code 3'
f=$("$TENBIN" submit --project demo --site onprem -- sh -c 'kill -9 $$')
t_expect "a job killed by a signal fails" "$(t_wait_state "$f" failed 60)" '^failed$'
t_expect "naming the signal" "$(curl -fsS "$T_URL/v1/jobs/$f" | jq -r .signal)" '^9$'

# Cancel through tenbin, and behind tenbin's back.
g=$("$TENBIN" submit --project demo --site onprem -- sleep 300)
t_wait_state "$g" running 60 >/dev/null || true
"$TENBIN" cancel "$g" >/dev/null
t_expect "tenbin cancel ends a Slurm job cancelled" "$(t_wait_state "$g" cancelled 60)" '^cancelled$'
rid=$(curl -fsS "$T_URL/v1/jobs/$g" | jq -r .remote_id)
t_expect "and Slurm cancelled it" "$(t_slurmrest onprem GET "/job/$rid" | jq -r '.jobs[0].job_state')" '^CANCELLED$'
h=$("$TENBIN" submit --project demo --site cloud -- sleep 300)
t_wait_state "$h" running 60 >/dev/null || true
rid=$(curl -fsS "$T_URL/v1/jobs/$h" | jq -r .remote_id)
t_slurmrest cloud DELETE "/job/$rid" >/dev/null
t_expect "a job scancelled on the site ends cancelled" "$(t_wait_state "$h" cancelled 60)" '^cancelled$'
i=$("$TENBIN" submit --project demo --site cloud -- sleep 300)
t_wait_state "$i" running 60 >/dev/null || true
rid=$(curl -fsS "$T_URL/v1/jobs/$i" | jq -r .remote_id)
t_slurmrest cloud DELETE "/job/$rid?signal=TERM" >/dev/null
state=$(t_wait_state "$i" 'cancelled|failed' 60)
t_expect "a job signalled on the site ends in a final state" "$state" '^(cancelled|failed)$'

# A log the broker host cannot see (no shared filesystem) is a clear 404.
rm -f "$(curl -fsS "$T_URL/v1/jobs/$b" | jq -r .log_path)"
out=$("$TENBIN" logs "$b" 2>&1 || true)
t_expect "an unreadable log says where it is" "$out" "not readable from the broker host.*HTTP 404"
t_expect "naming the site" "$out" "site 'cloud'"

metrics=$(curl -fsS "$T_URL/metrics")
t_expect "/metrics says both sites are up" "$(grep -c 'tenbin_site_up{site="\(onprem\|cloud\)"} 1' <<<"$metrics")" '^2$'
t_stop
t_done
