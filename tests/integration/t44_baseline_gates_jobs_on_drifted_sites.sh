#!/usr/bin/env bash
# The NCCL baseline end to end on local sites, with the real tenbin-probe
# (no GPU here: its fingerprint, its measurement skipped and why).  The
# reference site and a twin are at the baseline; a site whose job
# environment sets NCCL_ALGO has drifted, and `baseline diff` says so.
# Jobs that require the baseline wait while no site is probed and then
# never go to the drifted site (`tenbin explain` names the rule); others
# still may.  Metrics, REST errors, the probe's token, and a kill -9
# between storing a probe and submitting its job (one job after the
# restart) are checked too.
. "$(dirname "$0")/lib.sh"

cat >"$T_DIR/config.json" <<JSON
{
  "sites": [
    {"name": "onprem", "kind": "local", "gpus": {"h100": 2}},
    {"name": "twin", "kind": "local", "gpus": {"h100": 2}, "first_gpu": 2},
    {"name": "cloudy", "kind": "local", "gpus": {"h100": 2}, "first_gpu": 4,
     "job_env": {"NCCL_ALGO": "Ring"}}
  ],
  "baseline": {"reference": "onprem", "every_s": 0, "sites": [],
               "probe": "$TENBIN_BIN/tenbin-probe"}
}
JSON
t_start --config "$T_DIR/config.json"

# Before any probe: the reference has no result, so nothing is at the
# baseline and a job that requires it waits.
early=$("$TENBIN" submit --project demo --gpus 1 --require-baseline -- true)
sleep 1
t_expect "a job that requires the baseline waits while no site is probed" \
  "$(curl -fsS "$T_URL/v1/jobs/$early" | jq -r .state)" '^queued$'
t_expect "explain says the site was never probed" "$("$TENBIN" explain "$early")" \
  "not at the baseline of 'onprem': probed"
t_expect "the spec keeps require_baseline" \
  "$(curl -fsS "$T_URL/v1/jobs/$early" | jq -r .spec.require_baseline)" '^true$'
t_expect "a site never probed shows so" \
  "$(curl -fsS "$T_URL/v1/sites/twin/baseline" | jq -r .status)" '^never_probed$'

# The reference, then the others.
out=$("$TENBIN" baseline run onprem --wait)
t_expect "baseline run --wait ends with the reference at its baseline" "$out" 'status: +at_baseline'
t_expect "the probe reports its fingerprint: NCCL's version" "$out" 'nccl\.version +[0-9]+\.[0-9]+'
t_expect "and the site's GPUs it was given" "$out" 'env\.CUDA_VISIBLE_DEVICES +0,1'
t_expect "and why it measured nothing here" "$out" 'measurement: skipped: '
pjob=$(curl -fsS "$T_URL/v1/sites/onprem/baseline" | jq -r .latest_probe.job_id)
t_expect "the probe's token is not in its job's spec, which viewers see" \
  "$(curl -fsS "$T_URL/v1/jobs/$pjob" | jq -c '.spec.env')" '^\{"TENBIN_PROBE_URL":"[^"]*"\}$'
t_expect "the job it ran as succeeded" \
  "$(curl -fsS "$T_URL/v1/jobs?project=baseline" | jq -r '[.jobs[] | .state] | join(",")')" '^succeeded$'
t_expect "the waiting job runs once the reference is probed" \
  "$(t_wait_state "$early" succeeded 30)" '^succeeded$'
t_expect "at the reference, the only site at the baseline" \
  "$(curl -fsS "$T_URL/v1/jobs/$early" | jq -r .site)" '^onprem$'

"$TENBIN" baseline run twin --wait >/dev/null
"$TENBIN" baseline run cloudy --wait >/dev/null
t_expect "the twin is at the baseline" \
  "$(curl -fsS "$T_URL/v1/sites/twin/baseline" | jq -r .status)" '^at_baseline$'
view=$(curl -fsS "$T_URL/v1/sites/cloudy/baseline")
t_expect "the site with NCCL_ALGO set has drifted" "$(jq -r .status <<<"$view")" '^drifted$'
t_expect "by the nccl_env rule" "$(jq -r '.findings[0].rule' <<<"$view")" '^nccl_env$'
diff=$("$TENBIN" baseline diff cloudy)
t_expect "baseline diff marks the NCCL setting a rule judges" "$diff" \
  '! +env\.NCCL_ALGO +- +Ring +nccl_env'
t_expect "and the GPU indices, which no rule judges, as a plain difference" "$diff" \
  '~ +env\.CUDA_VISIBLE_DEVICES +0,1 +4,5'
t_expect "an equal key is not marked" "$(grep 'nccl.version' <<<"$diff")" '^ +nccl\.version'
t_expect "diff --against compares with another site" \
  "$("$TENBIN" baseline diff twin --against cloudy | head -3)" 'against: +cloudy$'

# Gating: pinned to the drifted site, a job that requires the baseline
# waits and says why; one that does not require it runs there.
pinned=$("$TENBIN" submit --project demo --gpus 1 --site cloudy --require-baseline -- true)
free=$("$TENBIN" submit --project demo --gpus 1 --site cloudy -- sh -c 'echo "algo=$NCCL_ALGO"')
t_expect "a job without the requirement runs at the drifted site" \
  "$(t_wait_state "$free" succeeded 30)" '^succeeded$'
t_expect "with the site's job environment" "$("$TENBIN" logs "$free")" '^algo=Ring$'
t_expect "the pinned job that requires the baseline still waits" \
  "$(curl -fsS "$T_URL/v1/jobs/$pinned" | jq -r .state)" '^queued$'
t_expect "explain names the rule the site fails" "$("$TENBIN" explain "$pinned")" \
  "cloudy .*not at the baseline of 'onprem': nccl_env: NCCL_ALGO=Ring"
many=()
for _ in 1 2 3 4; do
  many+=("$("$TENBIN" submit --project demo --gpus 1 --require-baseline -- sleep 1)")
done
for j in "${many[@]}"; do t_wait_state "$j" succeeded 60 >/dev/null; done
t_expect "jobs that require the baseline run only at sites at the baseline" \
  "$(for j in "${many[@]}"; do curl -fsS "$T_URL/v1/jobs/$j" | jq -r .site; done | sort -u | tr '\n' ' ')" \
  '^(onprem |twin |onprem twin )$'
curl -fsS -X POST "$T_URL/v1/workloads" -H 'Content-Type: application/json' \
  -d '{"name":"allreduce","project":"demo","gpus":1,"require_baseline":true,"command":["true"]}' >/dev/null
w=$("$TENBIN" submit --workload allreduce)
t_expect "a workload may require the baseline" \
  "$(curl -fsS "$T_URL/v1/jobs/$w" | jq -r .spec.require_baseline)" '^true$'

t_expect "tenbin site show gives the verdict in one row" "$("$TENBIN" site show cloudy)" \
  "baseline: +drifted against onprem: not at the baseline of 'onprem': nccl_env"
t_expect "and the site view has it" \
  "$(curl -fsS "$T_URL/v1/sites/twin" | jq -r '.baseline.status + " " + (.baseline.probe_id|tostring)')" \
  '^at_baseline [0-9]+$'
metrics=$(curl -fsS "$T_URL/metrics")
t_expect "the drift gauge is 1 for the drifted site's rule" "$metrics" \
  '^tenbin_baseline_drift\{site="cloudy",rule="nccl_env"\} 1$'
t_expect "and 0 for the twin" "$(grep 'site="twin",rule="nccl_env"' <<<"$metrics")" ' 0$'

# Bad input.
t_expect "a multi-node probe of a local site is refused" \
  "$(t_http POST /v1/sites/twin/baseline/run -d '{"nodes":2}')" '^422 .*nodes'
t_expect "nodes must be a number" \
  "$(t_http POST /v1/sites/twin/baseline/run -d '{"nodes":"two"}')" "^400 .*'nodes'"
t_expect "an unknown site is 404" "$(t_http GET /v1/sites/nowhere/baseline)" '^404 '
t_expect "an unknown comparison site is 404" \
  "$(t_http GET '/v1/sites/twin/baseline?against=nowhere')" "^404 .*against"
t_expect "a report without the probe's token is 401" \
  "$(t_http POST /v1/probes/1/report -d '{}')" '^401 '
t_expect "a report with another token is 401" \
  "$(t_http POST /v1/probes/1/report -H 'Authorization: Bearer tbprobe_00' -d '{}')" '^401 '
t_expect "the NCCL id of a probe is not given without its token" \
  "$(t_http GET /v1/probes/1/nccl-id)" '^401 '
t_stop

# kill -9 after the probe is stored, before its job is: the restart
# submits it, once.
TENBIN_FAULT=baseline-probe-stored t_start --config "$T_DIR/config.json"
curl -sS -X POST "$T_URL/v1/sites/twin/baseline/run" >/dev/null 2>&1 || true
t_crashed
t_expect "tenbind died at the crash point" \
  "$(grep -c "fault point 'baseline-probe-stored'" "$T_DIR/tenbind.err")" '^1$'
t_start --config "$T_DIR/config.json"
id=$(sqlite3 "$T_STATE/tenbin.db" "select max(id) from probes where site = 'twin'")
for _ in $(seq 1 100); do
  state=$(sqlite3 "$T_STATE/tenbin.db" "select state from probes where id = $id")
  [ "$state" = done ] && break
  sleep 0.2
done
t_expect "the stored probe runs after the restart" "$state" '^done$'
t_expect "as exactly one job" \
  "$(sqlite3 "$T_STATE/tenbin.db" "select count(*) from jobs where name = 'baseline-probe-$id'")" '^1$'
t_expect "the twin is still at the baseline" \
  "$(curl -fsS "$T_URL/v1/sites/twin/baseline" | jq -r '.status + " " + (.probe_id|tostring)')" "^at_baseline $id\$"
t_stop
t_done
