#!/usr/bin/env bash
# A job that ends and is purged from slurmctld while slurmrestd is away is
# never left hanging: on a site with slurmdbd its true end is read from the
# accounting database; without one it ends lost, saying why.
. "$(dirname "$0")/lib.sh"
export SLURM_TESTBED_MIN_JOB_AGE=2

# wait_purged CLUSTER RID: until slurmctld no longer knows the job.
wait_purged() {
  local conf
  conf=$(eval echo "\$${1^^}_SLURM_CONF")
  for _ in $(seq 1 600); do
    SLURM_CONF=$conf scontrol show job "$2" >/dev/null 2>&1 || return 0
    sleep 0.1
  done
  return 1
}

# run_and_purge: submit a job that succeeds and one that fails, take
# slurmrestd away, let the jobs end, wait until Slurm has forgotten both,
# then bring slurmrestd back.  The jobs end only when released (a file in
# the testbed's job directory, which their user can read), after
# slurmrestd is gone: a job that merely slept (1 s, then 5 s) ended
# before it on loaded hosts, and tenbind saw its end.
round=0
run_and_purge() {
  local gate
  round=$((round + 1))
  gate="$T_TB/onprem/jobs/release-$round"
  ok=$("$TENBIN" submit --project demo --site onprem -- \
    sh -c "while [ ! -e $gate ]; do sleep 0.2; done; echo fine")
  bad=$("$TENBIN" submit --project demo --site onprem -- \
    sh -c "while [ ! -e $gate ]; do sleep 0.2; done; exit 7")
  t_wait_state "$ok" running 60 >/dev/null || true
  t_wait_state "$bad" running 60 >/dev/null || true
  ok_rid=$(curl -fsS "$T_URL/v1/jobs/$ok" | jq -r .remote_id)
  bad_rid=$(curl -fsS "$T_URL/v1/jobs/$bad" | jq -r .remote_id)
  "$TENBIN_SOURCE_DIR/scripts/slurm-testbed" stop-rest onprem --dir "$T_TB" 2>/dev/null
  touch "$gate"
  wait_purged onprem "$ok_rid" && wait_purged onprem "$bad_rid"
  t_expect "slurmctld has purged both jobs" "$?" '^0$'
  "$TENBIN_SOURCE_DIR/scripts/slurm-testbed" start-rest onprem --dir "$T_TB" 2>/dev/null
}

# Without slurmdbd: the last state seen was running; nobody can say more.
t_slurm_start --clusters 1
t_start --config "$T_DIR/slurm.json"
run_and_purge
t_expect "without slurmdbd a purged job ends lost" "$(t_wait_state "$ok" lost 60)" '^lost$'
t_expect "saying what happened" "$(curl -fsS "$T_URL/v1/jobs/$ok" | jq -r .reason)" \
  "purged before its end was seen .*no slurmdbd"
t_expect "so does the other" "$(t_wait_state "$bad" lost 60)" '^lost$'
t_stop
t_slurm_stop
rm -rf "$T_STATE"

# With slurmdbd: the accounting database knows how they ended.
t_slurm_start --clusters 1 --with-accounting
t_expect "the testbed site has slurmdbd" "$(jq -r '.sites[0].slurmdbd' "$T_DIR/slurm.json")" '^true$'
t_start --config "$T_DIR/slurm.json"
run_and_purge
t_expect "with slurmdbd the purged job that succeeded succeeds" "$(t_wait_state "$ok" succeeded 60)" '^succeeded$'
t_expect "the purged job that failed fails" "$(t_wait_state "$bad" failed 60)" '^failed$'
t_expect "and no job was lost" "$(curl -fsS "$T_URL/v1/jobs?state=lost" | jq '.jobs | length')" '^0$'
t_stop
t_done
