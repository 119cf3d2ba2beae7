#!/usr/bin/env bash
# The cost policy, the default once a site is priced, weighs dollars
# against waiting: a project that values its waiting little waits for
# the busy owned site, one that values it highly rents at once, and a job
# whose deadline the owned site cannot meet rents too.  tenbin explain
# and GET /v1/jobs/{id}/placement show every site's terms (compute at the
# owned site's marginal rate and the rented site's price, waiting at the
# project's wait value) and the winner; tenbin jobs shows a waiting job's
# predicted start and why; bad deadlines are refused naming the field.
. "$(dirname "$0")/lib.sh"

cat >"$T_DIR/config.json" <<'JSON'
{"projects": ["patient", "urgent", "nlp"],
 "policy": {"wait_value": {"default": 0.10, "urgent": 100}},
 "sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 2},
   "cost": {"owned": {"capex_per_node": 350000, "nodes": 12, "years": 4,
            "support_per_year": 0.10, "power_kw_busy": 7.0,
            "power_kw_idle": 2.0, "pue": 1.4, "dollars_per_kwh": 0.09,
            "staff_per_year": 40000}}},
  {"name": "cloud", "kind": "local", "gpus": {"h100": 8}, "first_gpu": 2,
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88}}}}],
 "tick_ms": 200}
JSON
t_start --config "$T_DIR/config.json"

# The owned site is busy for a while (a job with no history: an hour is
# predicted for it).
busy=$("$TENBIN" submit --project nlp --site onprem --gpus 2 -- sleep 8 2>/dev/null)
t_wait_state "$busy" running >/dev/null
# Each its own name: the run time predicted is the time limit (a job
# with the name of one that ran would be predicted that run's time).
patient=$("$TENBIN" submit --project patient --name train --gpus 2 --time 10 -- true 2>/dev/null)
urgent=$("$TENBIN" submit --project urgent --name hotfix --gpus 2 --time 10 -- true 2>/dev/null)
late=$("$TENBIN" submit --project patient --name eval --gpus 2 --time 10 --deadline +2 -- true 2>/dev/null)
t_expect "a project whose waiting is worth much rents at once" \
  "$(t_wait_state "$urgent" succeeded 30) $(curl -fsS "$T_URL/v1/jobs/$urgent" | jq -r .site)" '^succeeded cloud$'
t_expect "a job the owned site cannot start by its deadline rents" \
  "$(t_wait_state "$late" succeeded 30) $(curl -fsS "$T_URL/v1/jobs/$late" | jq -r .site)" '^succeeded cloud$'
t_expect "a project whose waiting is worth little waits for the owned site" \
  "$(curl -fsS "$T_URL/v1/jobs/$patient" | jq -r '[.state, .reason] | join(" ")')" '^queued .*onprem'

# The forecast at submit is at the site the policy would pick: waiting
# for the owned site costs the (rented-only) budget nothing, renting
# would cost 10 minutes of 2 GPUs at $6.88.
f=$(curl -fsS -H 'Content-Type: application/json' -X POST "$T_URL/v1/jobs" -d '{"project": "patient", "name": "train", "gpus": 2, "time_limit": 10, "command": ["true"], "hold": true}')
t_expect "a patient job's forecast expects the owned site, bounded by renting" \
  "$(jq -c '.forecast | [.expected_micro, .upper_micro, .runtime_basis]' <<<"$f")" '^\[0,2293333,"time limit"\]$'
f=$(curl -fsS -H 'Content-Type: application/json' -X POST "$T_URL/v1/jobs" -d '{"project": "urgent", "name": "hotfix2", "gpus": 2, "time_limit": 10, "command": ["true"], "hold": true}')
t_expect "an urgent job's forecast expects renting" \
  "$(jq -c '.forecast | [.expected_micro, .upper_micro]' <<<"$f")" '^\[2293333,2293333\]$'

p=$(curl -fsS "$T_URL/v1/jobs/$patient/placement")
t_expect "its decision waits for onprem, predicting a start" \
  "$(jq -r '[.verdict, .site, (.predicted_start != null)] | join(" ")' <<<"$p")" '^wait onprem true$'
# 10 minutes of 2 GPUs: onprem at its marginal $0.07875, cloud at $6.88.
t_expect "compute is the owned site's marginal rate and the rented price" \
  "$(jq -c '[.candidates[] | [.site, .compute_micro, .runtime_ms]]' <<<"$p")" \
  '^\[\["onprem",26250,600000\],\["cloud",2293333,600000\]\]$'
t_expect "waiting at the owned site costs less than renting: it is picked" \
  "$(jq -c '[.candidates[] | [.site, .picked, .waiting_micro > 0, .total_micro]] | .[0][1] and (.[0][3] < .[1][3]) and .[0][2]' <<<"$p")" '^true$'
t_expect "the urgent job's decision rents, naming why" \
  "$(curl -fsS "$T_URL/v1/jobs/$urgent/placement" | jq -r '[.verdict, .site] | join(" ")')" '^now cloud$'
t_expect "the late job's owned site was left out for its deadline" \
  "$(curl -fsS "$T_URL/v1/jobs/$late/placement" | jq -r '.candidates[] | select(.site == "onprem") | .excluded')" '^deadline$'
out=$("$TENBIN" explain "$patient")
t_expect "tenbin explain prints the decision and every site's terms" \
  "$(printf '%s\n' "$out" | tr -s ' ' | tr '\n' '|')" \
  "^job $patient: wait at onprem .*\\* onprem wait in [0-9]+m( [0-9]+s)? 10m 0\\.03 0\\.00 0\\.20 0\\.23 .* cloud now now 10m 2\\.29 0\\.00 0\\.00 2\\.29 "
t_expect "tenbin jobs shows when a waiting job should start and why" \
  "$("$TENBIN" jobs | grep "^ *$patient ")" 'queued .* in [0-9]+m( [0-9]+s)? .*onprem'
t_expect "tenbin show shows its predicted start" \
  "$("$TENBIN" show "$patient" | grep '^starts')" 'in [0-9]+m'
t_expect "once the owned site is free the patient job runs there" \
  "$(t_wait_state "$patient" succeeded 60) $(curl -fsS "$T_URL/v1/jobs/$patient" | jq -r .site)" '^succeeded onprem$'

# ---- bad deadlines, and a job never decided ----
J=(-H 'Content-Type: application/json')
t_expect "a deadline in the past is 422 naming it" \
  "$(t_http POST /v1/jobs "${J[@]}" -d '{"project": "nlp", "command": ["true"], "deadline": "2020-01-01T00:00:00Z"}')" "^422 .*'deadline'"
t_expect "an unparseable deadline is 400 naming it" \
  "$(t_http POST /v1/jobs "${J[@]}" -d '{"project": "nlp", "command": ["true"], "deadline": "soon"}')" "^400 .*'deadline'"
t_expect "tenbin submit refuses a deadline that is not a time" \
  "$("$TENBIN" submit --deadline tomorrow -- true 2>&1 || true)" "option '--deadline': 'tomorrow' is not a time"
held=$("$TENBIN" submit --project nlp --hold -- true 2>/dev/null)
t_expect "a job not decided yet has no placement (404)" \
  "$(t_http GET "/v1/jobs/$held/placement")" '^404 .*no placement decision'
t_stop
t_done
