#!/usr/bin/env bash
# The local site hands out GPUs from its inventory through
# CUDA_VISIBLE_DEVICES and never more than exist; jobs that do not fit
# wait queued.  Each job claims its GPUs with mkdir, which fails if
# another job holds the same GPU at the same time.
. "$(dirname "$0")/lib.sh"
cat >"$T_DIR/config.json" <<'JSON'
{"sites": [{"name": "local", "kind": "local", "gpus": {"h100": 4}}],
 "tick_ms": 50}
JSON
t_start --config "$T_DIR/config.json"
mkdir -p "$T_DIR/claims"
script='set -e
for g in $(echo "$CUDA_VISIBLE_DEVICES" | tr , " "); do
  mkdir "'"$T_DIR"'/claims/gpu$g" || { echo CONFLICT; exit 9; }
done
echo "gpus=$CUDA_VISIBLE_DEVICES"
sleep 0.5
for g in $(echo "$CUDA_VISIBLE_DEVICES" | tr , " "); do rmdir "'"$T_DIR"'/claims/gpu$g"; done'
ids=()
for i in $(seq 1 10); do
  ids+=("$("$TENBIN" submit --project demo --gpus 2 --gpu-type h100 -- sh -c "$script")")
done
queued=$(curl -fsS "$T_URL/v1/jobs?state=queued" | jq '.jobs | length')
t_expect "jobs that do not fit wait queued" "$queued" '^[1-9][0-9]*$'
peak=0
for _ in $(seq 1 300); do
  used=$(curl -fsS "$T_URL/v1/sites/local" | jq .gpus_in_use)
  [ "$used" -gt "$peak" ] && peak=$used
  left=$(curl -fsS "$T_URL/v1/jobs?project=demo" | jq '[.jobs[] | select(.state != "succeeded" and .state != "failed")] | length')
  [ "$left" -eq 0 ] && break
  sleep 0.1
done
t_expect "never more than 4 GPUs in use" "$peak" '^[1-4]$'
for id in "${ids[@]}"; do
  job=$(curl -fsS "$T_URL/v1/jobs/$id")
  if [ "$(jq -r .state <<<"$job")" != succeeded ]; then
    t_fail "job $id succeeded without a GPU conflict ($(jq -r .state,.reason <<<"$job" | tr '\n' ' '))"
    continue
  fi
  out=$("$TENBIN" logs "$id")
  case "$out" in
    *CONFLICT*) t_fail "job $id saw a GPU held by another job" ;;
    gpus=[0-3],[0-3]) t_ok "job $id got 2 GPUs of its own ($out)" ;;
    *) t_fail "job $id got CUDA_VISIBLE_DEVICES '$out'" ;;
  esac
done
r=$(t_http POST /v1/jobs -H 'Content-Type: application/json' -d '{"project":"demo","gpus":5,"command":["true"]}')
t_expect "5 GPUs on a 4-GPU site is 422" "$r" '^422 '
t_expect "metrics show GPUs by site and type" "$(curl -fsS "$T_URL/metrics")" 'tenbin_gpus\{site="local",type="h100"\} 4'
metrics=$(curl -fsS "$T_URL/metrics")
t_expect "metrics show jobs by site and state" "$metrics" 'tenbin_jobs\{site="local",state="succeeded"\} 10'
t_expect "metrics count requests by route and status" "$metrics" 'tenbin_http_requests_total\{route="POST /v1/jobs",status="201"\} 10'
t_stop
t_done
