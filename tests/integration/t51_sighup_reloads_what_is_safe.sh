#!/usr/bin/env bash
# tenbind reads its config again on SIGHUP.  Prices, a site's job
# environment, workloads, wait values and the baseline change at once,
# without a restart: jobs keep running.  A change that needs a restart
# (the listen address, a site's kind or settings, a new site) is refused
# as a whole and logged with the field; a file that does not parse
# leaves the running config as it was.  `tenbind --check-config` checks
# a file as a start would.
. "$(dirname "$0")/lib.sh"

write_config() { # PRICE NCCL_ALGO WORKLOAD [EXTRA-SITE-FIELD]
  cat >"$T_DIR/config.json" <<JSON
{"sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 2}${4:-}},
  {"name": "cloud", "kind": "local", "gpus": {"h100": 2}, "first_gpu": 2,
   "job_env": {"NCCL_ALGO": "$2"},
   "cost": {"rented": {"per_gpu_hour": {"h100": $1}}}}
 ],
 "workloads": [{"name": "$3", "project": "demo", "gpus": 0,
                "command": ["sh", "-c", "echo algo=\$NCCL_ALGO"]}]}
JSON
}
hup_and_wait() { # PATTERN: SIGHUP, then until tenbind.err logs it
  local before
  before=$(wc -l <"$T_DIR/tenbind.err")
  kill -HUP "$T_PID"
  for _ in $(seq 1 100); do
    tail -n +"$((before + 1))" "$T_DIR/tenbind.err" | grep -q "$1" && break
    sleep 0.05
  done
  tail -n +"$((before + 1))" "$T_DIR/tenbind.err" | grep "$1" | tail -n 1
}
rate() { curl -fsS "$T_URL/v1/prices" | jq -r '.prices[] | select(.site == "cloud") | .per_gpu_hour_micro // .rate_micro' | head -1; }

write_config 2.50 Ring first
t_expect "tenbind --check-config accepts a good file" \
  "$("$TENBIND" --check-config "$T_DIR/config.json")" 'config.json: OK: 2 sites, 1 workload'
t_start --config "$T_DIR/config.json"
long=$("$TENBIN" submit --project demo --gpus 1 --site onprem -- sleep 30)
t_wait_state "$long" running 30 >/dev/null
before=$(curl -fsS "$T_URL/v1/prices")
j=$("$TENBIN" submit --workload first --site cloud)
t_wait_state "$j" succeeded 30 >/dev/null
t_expect "a job at cloud gets its job_env" "$("$TENBIN" logs "$j")" '^algo=Ring$'

write_config 3.75 Tree second
t_expect "SIGHUP applies the new prices, job_env and workloads" \
  "$(hup_and_wait 'reloaded')" 'reloaded .*cost of cloud, job_env of cloud, 1 workload'
t_expect "the new price is in force" "$(curl -fsS "$T_URL/v1/prices" | jq -c '[.prices[] | select(.site == "cloud")][0]')" '3750000'
t_expect "the new workload is in the catalog" "$("$TENBIN" workloads)" 'second'
j=$("$TENBIN" submit --workload second --site cloud)
t_wait_state "$j" succeeded 30 >/dev/null
t_expect "a new job gets the new job_env" "$("$TENBIN" logs "$j")" '^algo=Tree$'
t_expect "the job that ran through the reload still runs" \
  "$(curl -fsS "$T_URL/v1/jobs/$long" | jq -r .state)" '^running$'
t_expect "tenbind answered all along, as the same process" "$(kill -0 "$T_PID" && echo alive)" '^alive$'

# What needs a restart is refused whole.
cp "$T_DIR/config.json" "$T_DIR/good.json"
write_config 9.99 Ring third ', "max_jobs": 1'
t_expect "a site's other settings are refused, naming the field" \
  "$(hup_and_wait 'reload refused')" "reload refused, nothing changed: .*field 'sites\[0\]\.max_jobs'.* needs a restart"
t_expect "and nothing of that file was applied" \
  "$(curl -fsS "$T_URL/v1/prices" | jq -c '[.prices[] | select(.site == "cloud")][0]') $("$TENBIN" workloads | grep -c third)" '3750000.* 0$'
jq '.tick_ms = 50' "$T_DIR/good.json" >"$T_DIR/config.json"
t_expect "a new scheduler period needs a restart" \
  "$(hup_and_wait 'reload refused')" "field 'tick_ms' changed, which needs a restart"
jq '.sites += [{"name": "more", "kind": "local", "gpus": {}}]' "$T_DIR/good.json" >"$T_DIR/config.json"
t_expect "so does a new site" "$(hup_and_wait 'reload refused')" "adding or removing a site needs a restart"
jq '.sites[1].cost.rented.per_gpu_hour.h100 = 8.5 | .workloads[0].gpus = "many"' \
  "$T_DIR/good.json" >"$T_DIR/config.json"
t_expect "a bad workload after a good price refuses the whole file" \
  "$(hup_and_wait 'reload refused')" "workloads\[0\]"
t_expect "the price stays as it was" \
  "$(curl -fsS "$T_URL/v1/prices" | jq -c '[.prices[] | select(.site == "cloud")][0]')" '3750000'
echo '{"sites": [' >"$T_DIR/config.json"
t_expect "a file that does not parse leaves the running config" \
  "$(hup_and_wait 'reload refused')" 'the running configuration stays: .*config.json'
t_expect "tenbind --check-config names what is wrong" \
  "$("$TENBIND" --check-config "$T_DIR/config.json" 2>&1 | tr '\n' ' '; echo "rc=${PIPESTATUS[0]}")" 'config.json.*malformed JSON.*rc=1'
jq '.sites[1].cost.rented.per_gpu_hour.h100 = -1' "$T_DIR/good.json" >"$T_DIR/bad.json"
t_expect "--check-config checks a site's prices as a start does" \
  "$("$TENBIND" --check-config "$T_DIR/bad.json" 2>&1 | tr '\n' ' '; echo "rc=${PIPESTATUS[0]}")" "sites\[1\]\.cost.*rc=1"
cp "$T_DIR/good.json" "$T_DIR/config.json"
t_expect "the good file reloads again" "$(hup_and_wait 'reloaded')" 'reloaded'
"$TENBIN" cancel "$long" >/dev/null
t_stop
t_done
