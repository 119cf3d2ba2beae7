#!/usr/bin/env bash
# slurmrestd stops while jobs run: the site shows unreachable (tenbin sites,
# /metrics) with the reason, the jobs keep their state instead of being
# given up, and once slurmrestd is back every job is reconciled to what
# really happened meanwhile (success, failure, cancel behind our back).
. "$(dirname "$0")/lib.sh"
t_slurm_start
t_start --config "$T_DIR/slurm.json"

ok=$("$TENBIN" submit --project demo --site onprem --gpus 2 -- sh -c 'sleep 4; echo done')
bad=$("$TENBIN" submit --project demo --site onprem --gpus 2 -- sh -c 'sleep 4; exit 7')
gone=$("$TENBIN" submit --project demo --site onprem -- sleep 300)
for id in $ok $bad $gone; do
  t_wait_state "$id" running 60 >/dev/null || true
done
gone_rid=$(curl -fsS "$T_URL/v1/jobs/$gone" | jq -r .remote_id)

"$TENBIN_SOURCE_DIR/scripts/slurm-testbed" stop-rest onprem --dir "$T_TB" 2>/dev/null
for _ in $(seq 1 50); do
  r=$(curl -fsS "$T_URL/v1/sites/onprem" | jq -r .reachable)
  [ "$r" = false ] && break
  sleep 0.1
done
site=$(curl -fsS "$T_URL/v1/sites/onprem")
t_expect "the site is marked unreachable" "$(jq -r .reachable <<<"$site")" '^false$'
t_expect "saying why" "$(jq -r .detail <<<"$site")" 'listing (jobs|nodes)'
t_expect "tenbin sites shows it" "$("$TENBIN" sites | grep onprem)" 'unreachable'
t_expect "/metrics shows it down" "$(curl -fsS "$T_URL/metrics" | grep 'tenbin_site_up{site="onprem"}')" ' 0$'
t_expect "the other site stays up" "$(curl -fsS "$T_URL/v1/sites/cloud" | jq -r .reachable)" '^true$'

# While it is away the jobs end (and one is cancelled on the site itself,
# with Slurm's own tool, since its REST API is down).
SLURM_CONF=$ONPREM_SLURM_CONF scancel "$gone_rid"
sleep 6
for id in $ok $bad $gone; do
  t_expect "job $id keeps its state while the site is away" \
    "$(curl -fsS "$T_URL/v1/jobs/$id" | jq -r .state)" '^running$'
done

"$TENBIN_SOURCE_DIR/scripts/slurm-testbed" start-rest onprem --dir "$T_TB" 2>/dev/null
t_expect "back: the job that succeeded meanwhile succeeds" "$(t_wait_state "$ok" succeeded 60)" '^succeeded$'
t_expect "the one that failed fails" "$(t_wait_state "$bad" failed 60)" '^failed$'
t_expect "with its exit code" "$(curl -fsS "$T_URL/v1/jobs/$bad" | jq -r .exit_code)" '^7$'
t_expect "the one cancelled on the site is cancelled" "$(t_wait_state "$gone" cancelled 60)" '^cancelled$'
t_expect "the site is reachable again" "$(curl -fsS "$T_URL/v1/sites/onprem" | jq -r .reachable)" '^true$'
t_stop
t_done
