#!/usr/bin/env bash
# A site's "cost" block shows in GET /v1/sites and `tenbin site show`:
# an owned site's sunk and marginal rates derived from its finance
# inputs, a rented site's prices per GPU type, and a site without the
# block as unpriced, never as $0.  GET /v1/prices and `tenbin prices`
# list the rates in force; an admin sets a rented price with `tenbin
# prices set`, which holds across a restart with the same config.  A
# bad block stops tenbind at start, naming the field.
. "$(dirname "$0")/lib.sh"

cat >"$T_DIR/config.json" <<'JSON'
{"auth": {"enabled": true},
 "sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 2},
   "cost": {"owned": {"capex_per_node": 350000, "nodes": 12, "years": 4,
            "support_per_year": 0.10, "power_kw_busy": 7.0,
            "power_kw_idle": 2.0, "pue": 1.4, "dollars_per_kwh": 0.09,
            "staff_per_year": 40000}}},
  {"name": "cloud", "kind": "local", "gpus": {},
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88, "a10g": 1.006},
            "spot_per_gpu_hour": {"h100": 3.10}, "min_billed_seconds": 60,
            "egress_per_gb": 0.09}}},
  {"name": "lab", "kind": "local", "gpus": {}}]}
JSON
admin=$("$TENBIND" token create --role admin --name ops --state "$T_STATE")
viewer=$("$TENBIND" token create --role viewer --state "$T_STATE")
export TENBIN_TOKEN=$admin
A=(-H "Authorization: Bearer $admin")
t_start --config "$T_DIR/config.json"

t_expect "an owned site shows its rates in integer micro-dollars" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/sites/onprem" | jq -c '.cost | [.pricing, .sunk_per_gpu_hour_micro, .marginal_per_gpu_hour_micro]')" \
  '^\["owned",1905817,78750\]$'
t_expect "a rented site shows its prices per GPU type" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/sites/cloud" | jq -c '.cost | [.per_gpu_hour_micro.h100, .per_gpu_hour_micro.a10g, .spot_per_gpu_hour_micro.h100, (.spot_per_gpu_hour_micro | has("a10g")), .min_billed_seconds, .egress_per_gb_micro]')" \
  '^\[6880000,1006000,3100000,false,60,90000\]$'
t_expect "a site without a cost block is unpriced" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/sites" | jq -r '.sites[] | select(.name == "lab") | .cost.pricing')" \
  '^unpriced$'
t_expect "site show prints an owned site's rates in dollars" \
  "$("$TENBIN" site show onprem | grep '^prices')" \
  'owned: \$1\.905817 sunk, \$0\.078750 marginal per GPU-hour'
t_expect "site show prints a rented site's prices, minimum and egress" \
  "$("$TENBIN" site show cloud | grep '^prices')" \
  'rented: h100 \$6\.880000 \(spot \$3\.100000\), a10g \$1\.006000 per GPU-hour; at least 60 s billed; egress \$0\.090000/GB'
t_expect "an owned site's rates come with the finance inputs they are derived from" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/prices" | jq -c '[.prices[] | select(.site == "onprem") | .inputs | [.nodes, .capex_per_node, .years, .pue, .gpus_per_node]] | unique')" \
  '^\[\[12,350000,4,1\.4,8\]\]$'
t_expect "site show prints the inputs" \
  "$("$TENBIN" site show onprem | grep '^cost inputs')" \
  '12 nodes of 8 GPUs at \$350000 over 4 years, support 10 % a year, 7/2 kW busy/idle, PUE 1\.4 at \$0\.09/kWh, staff \$40000 a year'
t_expect "site show says unpriced" \
  "$("$TENBIN" site show lab | grep '^prices')" 'unpriced'

# ---- the rates in force, and an admin's price ----
t_expect "GET /v1/prices lists every rate in force, from the config" \
  "$(curl -fsS -H "Authorization: Bearer $viewer" "$T_URL/v1/prices" | jq -r '.prices[] | "\(.site)/\(.gpu_type)/\(.kind)=\(.per_gpu_hour_micro):\(.source)"' | tr '\n' ' ')" \
  '^cloud/a10g/on_demand=1006000:config cloud/h100/on_demand=6880000:config cloud/h100/spot=3100000:config onprem/\*/marginal=78750:config onprem/\*/sunk=1905817:config $'
J=(-H 'Content-Type: application/json')
t_expect "a viewer cannot set a price" \
  "$(t_http PUT /v1/prices/cloud/h100 "${J[@]}" -H "Authorization: Bearer $viewer" -d '{"per_gpu_hour": 1}')" '^403 '
t_expect "a price needs per_gpu_hour" \
  "$(t_http PUT /v1/prices/cloud/h100 "${J[@]}" "${A[@]}" -d '{"spot_per_gpu_hour": 1}')" "^400 .*'per_gpu_hour'"
t_expect "a null price is no price" \
  "$(t_http PUT /v1/prices/cloud/h100 "${J[@]}" "${A[@]}" -d '{"per_gpu_hour": null}')" "^400 .*'per_gpu_hour': required"
t_expect "a negative price is refused naming the field" \
  "$(t_http PUT /v1/prices/cloud/h100 "${J[@]}" "${A[@]}" -d '{"per_gpu_hour": -1}')" "^400 .*'per_gpu_hour'"
t_expect "an unknown field is refused naming it" \
  "$(t_http PUT /v1/prices/cloud/h100 "${J[@]}" "${A[@]}" -d '{"per_gpu_hour": 1, "per_hour": 2}')" "^400 .*per_hour"
t_expect "a type the site does not rent is 422" \
  "$(t_http PUT /v1/prices/cloud/a100 "${J[@]}" "${A[@]}" -d '{"per_gpu_hour": 1}')" "^422 .*'gpu_type'.*'a100'"
t_expect "an owned site's rates are not set here" \
  "$(t_http PUT /v1/prices/onprem/h100 "${J[@]}" "${A[@]}" -d '{"per_gpu_hour": 1}')" "^422 .*owned"
t_expect "an unknown site is 404" \
  "$(t_http PUT /v1/prices/nowhere/h100 "${J[@]}" "${A[@]}" -d '{"per_gpu_hour": 1}')" "^404 "
out=$("$TENBIN" prices set cloud --gpu-type H100 --per-gpu-hour 6.5 --spot 2.75)
t_expect "tenbin prices set answers the rates in force, the admin's among them" \
  "$(printf '%s\n' "$out" | grep '^cloud *h100 *on_demand')" '6\.500000 .* admin$'
t_expect "tenbin prices set refuses a price that is not one" \
  "$({ "$TENBIN" prices set cloud --gpu-type h100 --per-gpu-hour six 2>&1 | head -1; echo "rc=${PIPESTATUS[0]}"; } | tr '\n' ' ')" \
  "'--per-gpu-hour': 'six' is not an amount in dollars.*rc=[1-9]"
t_stop
t_start --config "$T_DIR/config.json"
t_expect "the admin's price holds across a restart with the same config" \
  "$("$TENBIN" prices | grep '^cloud *h100')" \
  'on_demand +6\.500000 .*admin'
t_expect "tenbin prices shows owned rates too" \
  "$("$TENBIN" prices | grep '^onprem')" 'sunk +1\.905817'
t_expect "the rates are recorded once, and the admin's after them" \
  "$(sqlite3 "$T_STATE/tenbin.db" "select count(*), sum(source = 'admin') from prices where site = 'cloud' and gpu_type = 'h100'")" \
  '^4\|2$'
t_stop

# A bad block: tenbind refuses to start, naming the field.
cat >"$T_DIR/bad.json" <<'JSON'
{"sites": [{"name": "cloud", "kind": "local", "gpus": {},
  "cost": {"rented": {"per_gpu_hour": {"h100": -6.88}}}}]}
JSON
rc=0
"$TENBIND" --listen 127.0.0.1:0 --state "$T_DIR/bad-state" \
  --config "$T_DIR/bad.json" >"$T_DIR/bad.out" 2>"$T_DIR/bad.err" || rc=$?
t_expect "a negative price stops tenbind" "$rc" '^[1-9][0-9]*$'
t_expect "naming the field" "$(cat "$T_DIR/bad.err")" \
  "sites\[0\]\.cost\.rented\.per_gpu_hour\.h100.*0 to 10000"
t_done
