#!/usr/bin/env bash
# A site per cloud, each against its fake serving price files: EC2's spot
# price history (behind our EC2 front, before moto), the Cloud Billing
# Catalog's SKUs and Azure's Retail Prices.  At start tenbind asks each
# provider and records its prices per GPU-hour (a node's price over its
# GPUs) with source provider, overriding the config's; AWS's on-demand
# price stays the config's.  An admin's price holds against the provider,
# across a restart whose refresh gives the provider's again.
. "$(dirname "$0")/lib.sh"

umask 077
ago() { date -u -d "-$1" +%Y-%m-%dT%H:%M:%SZ; }

# EC2: in us-east-1a, the site's first zone, $24.50 then $25.10 per node
# (the price in effect now); us-east-1b is cheaper and us-east-1c not the
# site's: the first zone's is the one.
cat >"$T_DIR/spot.json" <<JSON
[{"zone": "us-east-1a", "type": "p5.48xlarge", "price": "24.500000", "timestamp": "$(ago '3 days')"},
 {"zone": "us-east-1a", "type": "p5.48xlarge", "price": "25.100000", "timestamp": "$(ago '2 hours')"},
 {"zone": "us-east-1b", "type": "p5.48xlarge", "price": "20.000000", "timestamp": "$(ago '1 hour')"},
 {"zone": "us-east-1c", "type": "p5.48xlarge", "price": "1.000000", "timestamp": "$(ago '1 hour')"},
 {"zone": "us-east-1a", "type": "p4d.24xlarge", "price": "9.800000", "timestamp": "$(ago '1 hour')"}]
JSON
# GCP: the H100 GPU SKUs of us-central1, and others to be passed over.
python3 - "$T_DIR/skus.json" <<'PY'
import json, sys
def sku(i, desc, group, usage, regions, units, nanos, unit="h", cur="USD"):
    return {"name": f"services/6F81-5844-456A/skus/S-{i}", "skuId": f"S-{i}",
            "description": desc,
            "category": {"serviceDisplayName": "Compute Engine",
                         "resourceFamily": "Compute", "resourceGroup": group,
                         "usageType": usage},
            "serviceRegions": regions,
            "pricingInfo": [{"effectiveTime": "2026-11-01T00:00:00Z",
                             "summary": "", "pricingExpression": {
                "usageUnit": unit, "usageUnitDescription": "hour",
                "baseUnit": "s", "baseUnitDescription": "second",
                "baseUnitConversionFactor": 3600, "displayQuantity": 1,
                "tieredRates": [{"startUsageAmount": 0, "unitPrice": {
                    "currencyCode": cur, "units": units, "nanos": nanos}}]},
                "currencyConversionRate": 1}],
            "serviceProviderName": "Google"}
rows = [sku(1, "A3 Instance Core running in Americas", "CPU", "OnDemand", ["us-central1"], "0", 31611000),
        sku(2, "Nvidia H100 80GB GPU running in Americas", "GPU", "OnDemand", ["us-central1", "us-east4"], "11", 60000000),
        sku(3, "Nvidia H100 80GB GPU running in Belgium", "GPU", "OnDemand", ["europe-west1"], "12", 0),
        sku(4, "Spot Preemptible Nvidia H100 80GB GPU running in Americas", "GPU", "Preemptible", ["us-central1"], "2", 250000000),
        sku(5, "Commitment v1: Nvidia H100 GPU in Americas for 1 Year", "GPU", "Commit1Yr", ["us-central1"], "7", 0),
        sku(6, "Nvidia L4 GPU running in Americas", "GPU", "OnDemand", ["us-central1"], "0", 560000000)]
json.dump({"skus": rows}, open(sys.argv[1], "w"))
PY
# Azure: the rows the Retail Prices API gives for one size, Windows, Low
# Priority and Reservation among them (two to a page).
python3 - "$T_DIR/retail.json" <<'PY'
import json, sys
def row(sku, region, meter, product, price, typ="Consumption"):
    return {"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price,
            "unitPrice": price, "armRegionName": region, "location": "US East",
            "effectiveStartDate": "2026-09-01T00:00:00Z", "meterId": "m",
            "meterName": meter, "productId": "p", "skuId": "s",
            "productName": product, "skuName": meter,
            "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8",
            "serviceFamily": "Compute", "unitOfMeasure": "1 Hour", "type": typ,
            "isPrimaryMeterRegion": True, "armSkuName": sku}
H = "Standard_ND96isr_H100_v5"
P = "Virtual Machines NDsr H100 v5 Series"
rows = [row(H, "eastus", "ND96isr H100 v5", P + " Windows", 102.736),
        row(H, "eastus", "ND96isr H100 v5 Low Priority", P + " Windows", 41.09),
        row(H, "eastus", "ND96isr H100 v5", P, 516000.0, "Reservation"),
        row(H, "westus", "ND96isr H100 v5", P, 99.0),
        row(H, "eastus", "ND96isr H100 v5 Spot", P, 18.17),
        row(H, "eastus", "ND96isr H100 v5", P, 98.32)]
json.dump({"Items": rows}, open(sys.argv[1], "w"))
PY

t_aws_start --spot-prices "$T_DIR/spot.json"
t_gcp_fake_start --root "$T_DIR/vms-gcp" --skus "$T_DIR/skus.json"
t_azure_fake_start --root "$T_DIR/vms-azure" --prices "$T_DIR/retail.json" \
  --prices-page-size 2

port=$(t_free_port)
agent=$(t_node_agent_json "$port")
cat >"$T_DIR/config.json" <<JSON
{"sites": [
  {"name": "aws", $(t_aws_site_json),
   "zones": ["us-east-1a", "us-east-1b"],
   "shapes": [{"name": "p5", "type": "p5.48xlarge", "gpu_type": "h100",
               "gpus": 8, "market": "spot-fallback"}],
   "max_nodes": 1, $agent,
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88},
                       "spot_per_gpu_hour": {"h100": 4.00}}}},
  {"name": "gcp", $(t_gcp_site_json), "zones": ["us-central1-a"],
   "billing_endpoint": "$GCE_URL",
   "shapes": [{"name": "a3", "type": "a3-highgpu-8g", "gpu_type": "h100",
               "gpus": 8}],
   "max_nodes": 1, $agent,
   "cost": {"rented": {"per_gpu_hour": {"h100": 10.00}}}},
  {"name": "az", $(t_azure_site_json), "zones": ["1"],
   "prices_endpoint": "$AZURE_URL",
   "shapes": [{"name": "nd96", "type": "Standard_ND96isr_H100_v5",
               "gpu_type": "h100", "gpus": 8}],
   "max_nodes": 1, $agent,
   "cost": {"rented": {"per_gpu_hour": {"h100": 12.00},
                       "price_refresh_s": 600}}}
]}
JSON
admin=$("$TENBIND" token create --role admin --name ops --state "$T_STATE")
export TENBIN_TOKEN=$admin
A=(-H "Authorization: Bearer $admin")
start() { t_start --config "$T_DIR/config.json" --listen "127.0.0.1:$port"; }
# "site/gpu_type/kind=micro:source" of every rate in force.
prices() {
  curl -fsS "${A[@]}" "$T_URL/v1/prices" |
    jq -r '.prices[] | "\(.site)/\(.gpu_type)/\(.kind)=\(.per_gpu_hour_micro):\(.source)"' |
    tr '\n' ' '
}
# Requests of Retail Prices answered so far.
asks() { grep -ac 'GET /api/retail/prices?[^ ]* -> 200' "$T_DIR/azure.log" || true; }
# Wait until the rates in force match want.
wait_prices() {
  local want=$1 now=""
  for _ in $(seq 1 150); do
    now=$(prices)
    [[ "$now" =~ $want ]] && break
    sleep 0.2
  done
  echo "$now"
}
start

want='^aws/h100/on_demand=6880000:config aws/h100/spot=3137500:provider az/h100/on_demand=12290000:provider az/h100/spot=2271250:provider gcp/h100/on_demand=11060000:provider gcp/h100/spot=2250000:provider $'
t_expect "each provider's prices are recorded per GPU-hour with source provider" \
  "$(wait_prices "$want")" "$want"
t_expect "EC2 was asked for the spot prices of the site's type and zones" \
  "$(grep -c 'DescribeSpotPriceHistory' "$T_DIR/front.log" || true)" '^[1-9]'
t_expect "the Billing Catalog was asked with the site's token" \
  "$(grep -c 'GET /v1/services/6F81-5844-456A/skus?pageSize=5000 -> 200' "$T_DIR/gce.log" || true)" '^[1-9]'
# Four rows are the size's Consumption rows in eastus: two pages.
t_expect "Retail Prices was read through its NextPageLink" \
  "$(asks)" '^2$'
t_expect "tenbin prices shows the provider's prices" \
  "$("$TENBIN" prices | grep '^gcp *h100 *on_demand')" '11\.060000 .*provider$'
t_expect "the cost policy's rate of the site is the provider's" \
  "$(curl -fsS "${A[@]}" "$T_URL/v1/sites/az" | jq -c '.cost | [.per_gpu_hour_micro.h100, .spot_per_gpu_hour_micro.h100]')" \
  '^\[12290000,2271250\]$'
t_expect "the refresh is logged with its interval" \
  "$(grep -c 'site az: prices from its provider every 600 s' "$T_DIR/tenbind.err")" '^1$'

# An admin's price holds: a restart asks every provider again, and the
# admin's on-demand price stays in force while the spot price is the
# provider's.
"$TENBIN" prices set az --gpu-type h100 --per-gpu-hour 11.5 >/dev/null
t_stop
before=$(asks)
start
for _ in $(seq 1 150); do
  [ "$(asks)" -ge $((before + 2)) ] && break
  sleep 0.2
done
sleep 0.5
t_expect "the restart asked Retail Prices again" "$(($(asks) - before))" '^2$'
t_expect "an admin's price holds against the provider's" \
  "$(prices)" 'az/h100/on_demand=11500000:admin az/h100/spot=2271250:provider '
t_expect "and each change was recorded once" \
  "$(sqlite3 "$T_STATE/tenbin.db" "select source, count(*) from prices where site = 'az' group by source order by source" | tr '\n' ' ')" \
  '^admin\|1 config\|1 provider\|2 $'
t_stop

# A refresh asked of a site with no price source is refused at start.
cat >"$T_DIR/bad.json" <<'JSON'
{"sites": [{"name": "lab", "kind": "local", "gpus": {},
  "cost": {"rented": {"per_gpu_hour": {"h100": 1}, "price_refresh_s": 600}}}]}
JSON
rc=0
"$TENBIND" --listen 127.0.0.1:0 --state "$T_DIR/bad-state" \
  --config "$T_DIR/bad.json" 2>"$T_DIR/bad.err" || rc=$?
t_expect "tenbind refuses price_refresh_s on a site without a price source" \
  "rc=$rc $(cat "$T_DIR/bad.err")" "rc=[1-9].*sites\[0\]\.cost\.rented\.price_refresh_s.*no price source"
t_done
