#!/usr/bin/env bash
# Budgets act.  At submit a job's cost is forecast (the 201 and tenbin
# submit show it with the budget left); a hard budget refuses a job whose
# upper bound does not fit (402, with the numbers) or has no bound; once
# it is spent, the project's queued jobs wait for owned capacity (with
# that reason) and never go to a rented site, running jobs go on, and a
# raised budget releases them.  A soft budget warns at 100 % in the log,
# in tenbin budgets and in /metrics.  Only admins set budgets; bad ones
# are refused naming the field.
. "$(dirname "$0")/lib.sh"

cat >"$T_DIR/config.json" <<'JSON'
{"auth": {"enabled": true},
 "projects": ["vision", "nlp"],
 "sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 1},
   "cost": {"owned": {"capex_per_node": 350000, "nodes": 12, "years": 4,
            "power_kw_busy": 7.0, "power_kw_idle": 2.0,
            "dollars_per_kwh": 0.09}}},
  {"name": "cloud", "kind": "local", "gpus": {"h100": 4}, "first_gpu": 1,
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88},
            "min_billed_seconds": 60}}}]}
JSON
admin=$("$TENBIND" token create --role admin --name ops --state "$T_STATE")
sub=$("$TENBIND" token create --role submitter --project vision --state "$T_STATE")
export TENBIN_TOKEN=$admin
A=(-H "Authorization: Bearer $admin")
J=(-H 'Content-Type: application/json')
t_start --config "$T_DIR/config.json"

# ---- who may set one, and what a budget must be ----
t_expect "a submitter cannot set a budget" \
  "$(t_http PUT /v1/budgets/vision "${J[@]}" -H "Authorization: Bearer $sub" -d '{"monthly": 5}')" '^403 '
t_expect "a negative budget is 400 naming 'monthly'" \
  "$(t_http PUT /v1/budgets/vision "${J[@]}" "${A[@]}" -d '{"monthly": -5}')" "^400 .*'monthly'"
t_expect "an absurd budget is 400 naming 'monthly'" \
  "$(t_http PUT /v1/budgets/vision "${J[@]}" "${A[@]}" -d '{"monthly": 1e15}')" "^400 .*'monthly'"
t_expect "a budget needs 'monthly'" \
  "$(t_http PUT /v1/budgets/vision "${J[@]}" "${A[@]}" -d '{"hard": true}')" "^400 .*'monthly'"
t_expect "counts is rented or all" \
  "$(t_http PUT /v1/budgets/vision "${J[@]}" "${A[@]}" -d '{"monthly": 5, "counts": "owned"}')" "^400 .*'counts'"
t_expect "an unknown project is 422 naming 'project'" \
  "$(t_http PUT /v1/budgets/ghost "${J[@]}" "${A[@]}" -d '{"monthly": 5}')" "^422 .*'project'.*ghost"
t_expect "a project without a budget is 404" \
  "$(t_http GET /v1/budgets/vision "${A[@]}")" '^404 '

# ---- a hard budget of $0.20: the forecast, and what it refuses ----
"$TENBIN" budget set vision --monthly 0.20 --hard >/dev/null
# Keep the owned site busy so that vision's jobs would go to the cloud.
busy=$("$TENBIN" submit --project nlp --site onprem --gpus 1 -- sleep 60)
t_wait_state "$busy" running >/dev/null
out=$("$TENBIN" submit --project vision --gpus 1 -- sleep 1 2>&1 || true)
t_expect "a job without a time limit has no bound: refused with 402 saying why" \
  "$out" "hard budget.*no time limit.*'cloud'.*\(HTTP 402\)"
out=$("$TENBIN" submit --project vision --gpus 2 --time 60 -- sleep 1 2>&1 || true)
t_expect "a job that could cost more than is left is refused with the numbers" \
  "$out" "\\\$0\.20 left of its hard budget.*up to \\\$13\.76 \(2 GPUs for 3600 s at 'cloud'\).*\(HTTP 402\)"
t_expect "the refusal is the error table's over_budget" \
  "$(t_http POST /v1/jobs "${J[@]}" "${A[@]}" -d '{"project": "vision", "command": ["true"], "gpus": 1}')" '^402 .*"OVER_BUDGET"'
reply=$(curl -fsS "${A[@]}" "${J[@]}" -X POST "$T_URL/v1/jobs" -d '{"project": "vision", "command": ["sleep", "1"], "gpus": 1, "time_limit": 1}')
a=$(jq -r .id <<<"$reply")
t_expect "the 201 shows the forecast: at most 60 s of a GPU at \$6.88, and the budget left" \
  "$(jq -c '.forecast | [.upper_micro, .budget_left_micro, .runtime_basis]' <<<"$reply")" '^\[114666,200000,"time limit"\]$'
out=$("$TENBIN" submit --project vision --gpus 1 --time 1 -- sleep 1 2>&1 >/dev/null)
t_expect "tenbin submit shows the forecast and the budget left" \
  "$out" 'forecast: about 1m \(time limit\), \$0\.114666 expected, at most \$0\.114666; budget left \$0\.200000'
c=$("$TENBIN" submit --project vision --gpus 1 --time 1 --hold -- true 2>/dev/null)
for id in "$a"; do t_wait_state "$id" succeeded >/dev/null || t_fail "job $id succeeded"; done
t_wait_state "$((a + 1))" succeeded >/dev/null || t_fail "the second job succeeded"

# Two jobs of 60 billed seconds spent $0.229: the budget is spent.
t_expect "tenbin budgets shows what was spent and that nothing is left" \
  "$("$TENBIN" budgets | grep '^vision')" '^vision +[0-9-]+ +0\.20 +0\.23 +-0\.03 .* hard +rented'
"$TENBIN" release "$c" >/dev/null
sleep 2
t_expect "a spent hard budget keeps a queued job off the rented site, saying why" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/jobs/$c" | jq -c '[.state, .site]') $(curl -fsS "${A[@]}" "$T_URL/v1/jobs/$c" | jq -r .reason)" \
  '^\["queued",null\] waits for owned capacity: project .vision. spent its hard budget'
t_expect "the busy job on the owned site ran on, budgets never stop a job" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/jobs/$busy" | jq -r .state)" '^running$'
"$TENBIN" budget set vision --monthly 5 --hard >/dev/null
t_expect "a raised budget releases the job to the rented site" \
  "$(t_wait_state "$c" succeeded 30) $(curl -fsS "${A[@]}" "$T_URL/v1/jobs/$c" | jq -r .site)" '^succeeded cloud$'

# ---- a soft budget warns ----
"$TENBIN" budget set nlp --monthly 0.10 >/dev/null
n=$("$TENBIN" submit --project nlp --site cloud --gpus 1 -- true 2>/dev/null)
t_wait_state "$n" succeeded >/dev/null
t_expect "a soft budget spent is shown warned at 100 %" \
  "$("$TENBIN" budgets | grep '^nlp')" '^nlp .* soft +rented +100%$'
t_expect "and in /metrics" \
  "$(curl -fsS "${A[@]}" "$T_URL/metrics" | grep -E '^tenbin_budget_(warned_percent|limit_dollars|spent_dollars)\{project="nlp"\}' | tr '\n' ' ')" \
  'tenbin_budget_limit_dollars\{project="nlp"\} 0\.100000 tenbin_budget_spent_dollars\{project="nlp"\} 0\.114666 tenbin_budget_warned_percent\{project="nlp"\} 100'
t_expect "and in the log" \
  "$(grep -c "project 'nlp' spent .* soft budget .*(100 %)" "$T_DIR/tenbind.err")" '^1$'
t_expect "a soft budget refuses nothing" \
  "$("$TENBIN" submit --project nlp --site cloud --gpus 4 -- true 2>/dev/null)" '^[0-9]+$'
t_expect "a submitter reads its own project's budget only" \
  "$(curl -fsS -H "Authorization: Bearer $sub" "$T_URL/v1/budgets" | jq -c '[.budgets[].project]')" '^\["vision"\]$'
"$TENBIN" cancel "$busy" >/dev/null
t_stop
t_done
