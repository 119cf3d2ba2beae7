#!/usr/bin/env bash
# The usage ledger bills every GPU-hour a job held exactly once: jobs on
# an owned site (sunk and marginal), a rented one (its price, at least
# its billing minimum, piecewise across an admin's price change) and an
# unpriced one (hours, no money), failed and cancelled jobs included,
# with tenbind killed -9 again and again while jobs start and end.  Every
# job's cost, recomputed from its events by an independent script, is
# what the ledger says; the report's total is the jobs' sum to the
# micro-dollar; /metrics agrees; a scoped token reads its projects only;
# bad report requests name the field.
. "$(dirname "$0")/lib.sh"

cat >"$T_DIR/config.json" <<'JSON'
{"auth": {"enabled": true},
 "projects": ["vision", "nlp"],
 "sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 2},
   "cost": {"owned": {"capex_per_node": 350000, "nodes": 12, "years": 4,
            "support_per_year": 0.10, "power_kw_busy": 7.0,
            "power_kw_idle": 2.0, "pue": 1.4, "dollars_per_kwh": 0.09,
            "staff_per_year": 40000}}},
  {"name": "cloud", "kind": "local", "gpus": {"h100": 4}, "first_gpu": 2,
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88},
            "min_billed_seconds": 60, "egress_per_gb": 0.09}}},
  {"name": "lab", "kind": "local", "gpus": {"a10g": 1}, "first_gpu": 6}]}
JSON
admin=$("$TENBIND" token create --role admin --name ops --state "$T_STATE")
nlp=$("$TENBIND" token create --role submitter --project nlp --state "$T_STATE")
export TENBIN_TOKEN=$admin
A=(-H "Authorization: Bearer $admin")
t_start --config "$T_DIR/config.json"
port=${T_URL##*:}

submit() { # PROJECT SITE GPUS COMMAND...
  local project=$1 site=$2 gpus=$3
  shift 3
  "$TENBIN" submit --project "$project" --site "$site" --gpus "$gpus" -- "$@"
}

# ---- a price change in the middle of a running job ----
long=$(submit vision cloud 2 sleep 3)
t_wait_state "$long" running >/dev/null
sleep 1
"$TENBIN" prices set cloud --gpu-type h100 --per-gpu-hour 3.44 >/dev/null
change=$(curl -fsS "${A[@]}" "$T_URL/v1/prices" | jq -r '.prices[] | select(.site == "cloud" and .kind == "on_demand") | .since')
t_wait_state "$long" succeeded >/dev/null

# ---- jobs that start and end while tenbind is killed -9, again and again
ids=()
for round in 1 2 3 4 5; do
  ids+=("$(submit vision onprem 1 sleep 0.$((round + 3)))")
  ids+=("$(submit vision cloud 1 sleep 0.$((round + 2)))")
  ids+=("$(submit nlp lab 1 sleep 0.$round)")
  ids+=("$(submit vision cloud 2 false)")
  sleep "0.$((RANDOM % 9 + 1))"
  t_crash
  t_start --config "$T_DIR/config.json" --listen "127.0.0.1:$port"
done
cancelled=$(submit nlp cloud 1 sleep 60)
t_wait_state "$cancelled" running >/dev/null
"$TENBIN" cancel "$cancelled" >/dev/null
for id in "${ids[@]}" "$cancelled"; do
  t_wait_state "$id" 'succeeded|failed|cancelled' 60 >/dev/null ||
    t_fail "job $id ended"
done

# The rates as the test knows them: the config's, and the change above.
change_ms=$(python3 -c "import calendar,time,sys; s='$change'.rstrip('Z').split('.'); print(calendar.timegm(time.strptime(s[0], '%Y-%m-%dT%H:%M:%S'))*1000+int(s[1]))")
cat >"$T_DIR/rates.json" <<JSON
{"cloud": {"kind": "rented", "min_ms": 60000,
           "periods": [[0, 6880000], [$change_ms, 3440000]]},
 "onprem": {"kind": "owned", "sunk": [[0, 1905817]],
            "marginal": [[0, 78750]]}}
JSON
out=$(python3 "$TENBIN_SOURCE_DIR/tests/integration/ledger_check.py" "$T_URL" "$admin" "$T_DIR/rates.json" 2>&1) && rc=0 || rc=$?
t_expect "every job's cost recomputed from its events is what the ledger billed, and the report's total is their sum" \
  "$out rc=$rc" '^checked 22 jobs, total [0-9]+ [0-9]+ [0-9]+ rc=0$'

job=$(curl -fsS "${A[@]}" "$T_URL/v1/jobs/$long" | jq -c .cost)
t_expect "the job across the price change was billed at both prices (more than at the new one alone)" \
  "$(jq -n --argjson c "$job" '$c.billed_micro > ($c.gpu_ms * 3440000 / 3600000)')" '^true$'
t_expect "a failed job on a rented site is billed its minimum (60 s of 2 GPUs at \$3.44)" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/jobs/${ids[3]}" | jq -c '[.state, .cost.billed_micro >= 114666]')" '^\["failed",true\]$'
t_expect "a cancelled job is billed for the time it held its GPU" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/jobs/$cancelled" | jq -c '[.state, .cost.gpu_ms > 0, .cost.billed_micro > 0]')" '^\["cancelled",true,true\]$'
t_expect "an unpriced site's hours are counted, at no money" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/reports/usage?by=site" | jq -c '.lines[] | select(.site == "lab") | [.jobs, .gpu_ms > 0, .billed_micro, .sunk_micro]')" '^\[5,true,0,0\]$'

t_expect "an owned site shows its use over 30 days and what a used GPU-hour sinks at that use" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/sites/onprem" | jq -c '.cost | [.utilization_30d > 0, .utilization_30d < 0.01, .sunk_at_utilization_micro > .sunk_per_gpu_hour_micro]')" \
  '^\[true,true,true\]$'
t_expect "site show says so" \
  "$("$TENBIN" site show onprem | grep '^prices')" 'per used GPU-hour at the 0\.[0-9] % used over 30 days'

# ---- the report's lines add up to its total; scope; CSV; metrics ----
rep=$(curl -fsS "${A[@]}" "$T_URL/v1/reports/usage?by=project,site,gpu_type,day")
t_expect "lines by project, site, GPU type and day add up to the total" \
  "$(jq -c '[([.lines[].billed_micro] | add) == .total.billed_micro, ([.lines[].sunk_micro] | add) == .total.sunk_micro, ([.lines[].gpu_ms] | add) == .total.gpu_ms, .total.jobs]' <<<"$rep")" \
  '^\[true,true,true,22\]$'
t_expect "failed and cancelled jobs' share of GPU-hours is reported" \
  "$(jq -c '.total.failed_share > 0 and .total.failed_share < 1' <<<"$rep")" '^true$'
t_expect "a token scoped to nlp reads nlp's lines only" \
  "$(curl -fsS -H "Authorization: Bearer $nlp" "$T_URL/v1/reports/usage?by=project" | jq -c '[.lines[].project]')" '^\["nlp"\]$'
csv=$(curl -fsS "${A[@]}" "$T_URL/v1/reports/usage?by=site&format=csv")
t_expect "the CSV has a header and one line per site" \
  "$(printf '%s' "$csv" | tr -d '\r' | cut -d, -f1 | tr '\n' ' ')" '^site cloud lab onprem $'
t_expect "tenbin report prints the total" \
  "$("$TENBIN" report | grep '^TOTAL')" '^TOTAL +[0-9.]+ +22 '
metrics=$(curl -fsS "${A[@]}" "$T_URL/metrics" | grep '^tenbin_cost_dollars_total' | awk '{s += $2} END {printf "%.6f", s}')
t_expect "tenbin_cost_dollars_total adds up to the report's total" \
  "$metrics $(jq -r '(.total.billed_micro + .total.sunk_micro + .total.marginal_micro) / 1000000 | . * 1000000 | round / 1000000' <<<"$rep")" \
  '^([0-9]+\.[0-9]{6}) ([0-9.]+)$'
t_expect "the metric and the report agree to the micro-dollar" \
  "$(python3 -c "a, b = '$metrics', $(jq '.total.billed_micro + .total.sunk_micro + .total.marginal_micro' <<<"$rep"); print(round(float(a) * 1e6) == b)")" '^True$'

# ---- bad requests name the field ----
t_expect "an unknown grouping is 400 naming 'by'" \
  "$(t_http GET '/v1/reports/usage?by=project,colour' "${A[@]}")" "^400 .*'by'.*colour"
t_expect "a malformed day is 400 naming 'from'" \
  "$(t_http GET '/v1/reports/usage?from=2026-02-30' "${A[@]}")" "^400 .*'from'"
t_expect "a reversed range is 422 naming 'to'" \
  "$(t_http GET '/v1/reports/usage?from=2026-11-02&to=2026-11-01' "${A[@]}")" "^422 .*'to'"
t_expect "a range over a year is 422 naming 'from'" \
  "$(t_http GET '/v1/reports/usage?from=2024-01-01&to=2026-01-01' "${A[@]}")" "^422 .*'from'.*366"
t_expect "an unknown format is 400 naming 'format'" \
  "$(t_http GET '/v1/reports/usage?format=xlsx' "${A[@]}")" "^400 .*'format'"
t_stop
t_done
