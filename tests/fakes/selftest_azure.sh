#!/usr/bin/env bash
# Self-test of tests/fakes/azure_fake.py: starts it on loopback, drives
# every behaviour tenbin relies on with the request shapes Microsoft
# documents (the client-credentials grant, VM PUT/GET/DELETE/list, the
# Azure-AsyncOperation polls, faults, a Spot eviction, Retail Prices
# paging) and checks the answers, then stops it with SIGTERM and checks
# that no VM process outlives it.
# usage: bash tests/fakes/selftest_azure.sh      (prints ok/FAIL lines)
# shellcheck source=tests/fakes/lib.sh
. "$(dirname "$0")/lib.sh"
new_token() { grant; }

tenant=72f988bf-86f1-41af-91ab-2d7cd011db47
client=11111111-2222-4333-8444-555555555555
secret='s3cret~value'
sub=0b1f6471-1bf0-4dda-aec3-111111111111
scope=https://management.azure.com/.default

# grant [FIELD=VALUE...]: the token endpoint; status in $code, body in $T/out.
grant() {
  local t=$tenant a=(-s -o "$T/out" -w '%{http_code}' -X POST)
  local f=(grant_type=client_credentials "client_id=$client" "client_secret=$secret" "scope=$scope")
  local kv
  for kv in "$@"; do
    case $kv in
      tenant=*) t=${kv#tenant=} ;;
      -*) f=("${f[@]/#${kv#-}=*/}") ;;
      *) f=("${f[@]/#${kv%%=*}=*/}" "$kv") ;;
    esac
  done
  for kv in "${f[@]}"; do [ -n "$kv" ] && a+=(--data-urlencode "$kv"); done
  code=$(curl "${a[@]}" "$base/$t/oauth2/v2.0/token")
}
# hdr NAME: the last call's header NAME.
hdr() { tr -d '\r' <"$T/hdr" | awk -v n="$(echo "$1" | tr 'A-Z' 'a-z')" 'BEGIN{FS=": "} tolower($1)==n {print substr($0, length($1)+3)}'; }

python3 - "$T/prices.json" <<'PY'
import json, sys
def row(sku, region, meter, product, price, typ="Consumption", term=None):
    r = {"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price,
         "unitPrice": price, "armRegionName": region, "location": "US East",
         "effectiveStartDate": "2026-09-01T00:00:00Z", "meterId": "m",
         "meterName": meter, "productId": "p", "skuId": "s",
         "productName": product, "skuName": meter,
         "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8",
         "serviceFamily": "Compute", "unitOfMeasure": "1 Hour", "type": typ,
         "isPrimaryMeterRegion": True, "armSkuName": sku}
    if term:
        r["reservationTerm"] = term
    return r
H = "Standard_ND96isr_H100_v5"
P = "Virtual Machines NDsr H100 v5 Series"
rows = [row(H, "eastus", "ND96isr H100 v5", P, 98.32),
        row(H, "eastus", "ND96isr H100 v5", P + " Windows", 102.736),
        row(H, "eastus", "ND96isr H100 v5 Spot", P, 18.17),
        row(H, "eastus", "ND96isr H100 v5 Low Priority", P + " Windows", 41.09),
        row(H, "eastus", "ND96isr H100 v5", P, 516000.0, "Reservation", "1 Year"),
        row(H, "westus", "ND96isr H100 v5", P, 99.0),
        row("Standard_ND96asr_v4", "eastus", "ND96asr v4", "Virtual Machines NDasv4 Series", 27.2)]
json.dump({"Items": rows}, open(sys.argv[1], "w"))
PY

start_fake azure_fake.py --tenant "$tenant" --client-id "$client" \
  --client-secret "$secret" --subscription "$sub" --token-ttl 5 \
  --op-seconds 1 --page-size 2 --prices "$T/prices.json" \
  --prices-page-size 2
API=api-version=2024-07-01
RG=/subscriptions/$sub/resourceGroups/rg-gpu/providers/Microsoft.Compute/virtualMachines

# --- the token endpoint -------------------------------------------------------------
grant
expect "client credentials get a v2 token with numeric expires_in" "$code $(j 'd["token_type"], d["expires_in"], d["ext_expires_in"], len(d["access_token"].split("."))')" "^200 \('Bearer', 5, 5, 3\)$"
grant "client_secret=wrong"
expect "a wrong secret is 401 invalid_client AADSTS7000215" "$code $(j 'd["error"], d["error_codes"], d["error_description"][:15]')" "^401 \('invalid_client', \[7000215\], 'AADSTS7000215: '\)$"
grant "-client_secret"
expect "no secret is 401 invalid_client AADSTS7000216" "$code $(j 'd["error"], d["error_codes"]')" "^401 \('invalid_client', \[7000216\]\)$"
grant "client_id=99999999-2222-4333-8444-555555555555"
expect "an unknown app is 400 unauthorized_client AADSTS700016" "$code $(j 'd["error"], d["error_codes"]')" "^400 \('unauthorized_client', \[700016\]\)$"
grant "tenant=00000000-1111-4222-8333-444444444444"
expect "an unknown tenant is 400 AADSTS90002" "$code $(j 'd["error"], d["error_codes"]')" "^400 \('invalid_request', \[90002\]\)$"
grant "scope=https://management.azure.com/user_impersonation"
expect "a scope without /.default is 400 invalid_scope AADSTS70011" "$code $(j 'd["error"], d["error_codes"]')" "^400 \('invalid_scope', \[70011\]\)$"
grant "-scope"
expect "no scope is 400 invalid_request AADSTS900144" "$code $(j 'd["error"], d["error_codes"]')" "^400 \('invalid_request', \[900144\]\)$"
grant "grant_type=password"
expect "another grant type is 400 unsupported_grant_type" "$code $(j 'd["error"]')" "^400 unsupported_grant_type$"

# --- auth and api-version on ARM -------------------------------------------------------------
code=$(curl -s -o "$T/out" -w '%{http_code}' "$base$RG?$API")
expect "no Authorization is 401 AuthenticationFailed" "$code $(j 'd["error"]["code"]')" "^401 AuthenticationFailed$"
TOKEN=made.up.token norefresh=1 call GET "$RG?$API"
expect "an unknown token is 401 InvalidAuthenticationToken" "$code $(j 'd["error"]["code"]')" "^401 InvalidAuthenticationToken$"
grant "scope=https://graph.microsoft.com/.default"
TOKEN=$(j 'd["access_token"]') norefresh=1 call GET "$RG?$API"
expect "a token for another resource is 401 InvalidAuthenticationTokenAudience" "$code $(j 'd["error"]["code"]')" "^401 InvalidAuthenticationTokenAudience$"
call GET "$RG"
expect "no api-version is 400 MissingApiVersionParameter" "$code $(j 'd["error"]["code"]')" "^400 MissingApiVersionParameter$"
call GET "$RG?api-version=2099-01-01"
expect "an unknown api-version is 400 NoRegisteredProviderFound" "$code $(j 'd["error"]["code"]')" "^400 NoRegisteredProviderFound$"
call GET "/subscriptions/someone-else/resourceGroups/rg-gpu/providers/Microsoft.Compute/virtualMachines?$API"
expect "another subscription is 404 SubscriptionNotFound" "$code $(j 'd["error"]["code"]')" "^404 SubscriptionNotFound$"
call GET "$RG?$API"
expect "an empty list is value [] without nextLink" "$code $(j 'd["value"], "nextLink" in d')" "^200 \(\[\], False\)$"

# --- PUT, the async operation, idempotency ------------------------------------------------
body() { # body NAME [PRIORITY] [EVICTION] [SCRIPT] [ZONE] [INSTANCE-TAG]
  python3 - "$@" <<'PY'
import base64, json, sys
a = sys.argv[1:] + [""] * 6
name, prio, evict, script, zone, inst = a[:6]
script = script or "echo booted $TENBIN_VM_ID; sleep 300"
props = {"hardwareProfile": {"vmSize": "Standard_ND96isr_H100_v5"},
         "storageProfile": {"imageReference": {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204", "version": "latest"},
                            "osDisk": {"createOption": "FromImage", "deleteOption": "Delete", "managedDisk": {"storageAccountType": "Premium_LRS"}}},
         "osProfile": {"computerName": name, "adminUsername": "azureuser",
                       "customData": base64.b64encode(script.encode()).decode(),
                       "linuxConfiguration": {"disablePasswordAuthentication": True}},
         "networkProfile": {"networkInterfaces": [{"id": "/subscriptions/s/resourceGroups/rg-gpu/providers/Microsoft.Network/networkInterfaces/nic-" + name}]}}
if prio:
    props["priority"] = prio
if evict:
    props["evictionPolicy"] = evict
    props["billingProfile"] = {"maxPrice": -1}
b = {"location": "eastus", "tags": {"tenbin-instance": inst or "inst-1", "tenbin-node": "node-" + name},
     "properties": props}
if zone:
    b["zones"] = [zone]
print(json.dumps(b))
PY
}
fault '{"pending_s": 2}'
issued=0
fresh
call PUT "$RG/vm-a?$API" "$(body vm-a)"
expect "PUT creates: 201 Creating" "$code $(j 'd["properties"]["provisioningState"], d["name"], d["type"], "customData" in d["properties"]["osProfile"]')" "^201 \('Creating', 'vm-a', 'Microsoft.Compute/virtualMachines', False\)$"
vmid=$(j 'd["properties"]["vmId"]')
aop=$(hdr Azure-AsyncOperation)
expect "with an Azure-AsyncOperation URL on the fake" "$aop" "^$base/subscriptions/$sub/providers/Microsoft.Compute/locations/eastus/operations/[0-9a-f-]+\?api-version=2024-07-01$"
expect "and Retry-After: 1" "$(hdr Retry-After)" "^1$"
call PUT "$RG/vm-a?$API" "$(body vm-a)"
expect "PUT again: 200, the same VM" "$code $(j 'd["properties"]["vmId"]')" "^200 $vmid$"
call GET "$aop"
expect "the operation is InProgress" "$code $(j 'd["status"], "startTime" in d')" "^200 \('InProgress', True\)$"
call GET "$RG/vm-a?$API"
expect "the VM reads Creating meanwhile" "$(j 'd["properties"]["provisioningState"]')" "^Creating$"
fault '{"pending_s": 0}'
sleep 2.1
call GET "$aop"
expect "then Succeeded, with endTime" "$(j 'd["status"], "endTime" in d')" "^\('Succeeded', True\)$"
call GET "$RG/vm-a?$API"
expect "and the VM Succeeded" "$(j 'd["properties"]["provisioningState"], d["tags"]["tenbin-node"]')" "^\('Succeeded', 'node-vm-a'\)$"
call GET "$RG/vm-a/instanceView?$API"
expect "its instanceView says PowerState/running" "$(j '[s["code"] for s in d["statuses"]]')" "PowerState/running"
for _ in $(seq 50); do grep -q booted "$T/root/vm-a/console.log" 2>/dev/null && break; sleep 0.1; done
expect "the decoded customData ran in the emulator" "$(cat "$T/root/vm-a/console.log" 2>/dev/null)" "booted vm-a"
code=$(curl -s -o "$T/out" -w '%{http_code}' "$base/_meta/vm-a/metadata/scheduledevents?api-version=2020-07-01")
expect "Scheduled Events without Metadata: true is 400" "$code" "^400$"
curl -s -o "$T/out" -H 'Metadata: true' "$base/_meta/vm-a/metadata/scheduledevents?api-version=2020-07-01"
expect "Scheduled Events are empty" "$(j 'd["Events"], d["DocumentIncarnation"]')" "^\(\[\], 1\)$"
curl -s -o "$T/out" "$base/_fake/vms"
expect "one VM, whatever the PUTs" "$(j '[(v["id"], v["state"], v["node"], v["instance"]) for v in d]')" "^\[\('vm-a', 'Succeeded', 'node-vm-a', 'inst-1'\)\]$"
curl -s -o "$T/out" "$base/_fake/stats"
expect "stats: one launch, one deduplicated PUT" "$(j 'd["launched"], d["deduplicated"], d["calls"]["virtualMachines.createOrUpdate"]')" "^\(1, 1, 2\)$"

# --- validation -----------------------------------------------------------------------
call PUT "$RG/-bad-?$API" "$(body bad)"
expect "a bad VM name is 400 InvalidResourceName" "$code $(j 'd["error"]["code"]')" "^400 InvalidResourceName$"
call PUT "$RG/vm-x?$API" "$(body vm-x | python3 -c 'import json,sys; b=json.load(sys.stdin); del b["location"]; print(json.dumps(b))')"
expect "no location is 400 LocationRequired" "$code $(j 'd["error"]["code"]')" "^400 LocationRequired$"
call PUT "$RG/vm-x?$API" "$(body vm-x Regular Delete)"
expect "an eviction policy on a Regular VM is 400 InvalidParameter" "$code $(j 'd["error"]["code"], d["error"]["target"]')" "^400 \('InvalidParameter', 'evictionPolicy'\)$"
call PUT "$RG/vm-x?$API" "$(body vm-x | python3 -c 'import json,sys; b=json.load(sys.stdin); b["properties"]["osProfile"]["customData"]="not base64!"; print(json.dumps(b))')"
expect "customData that is no base64 is 400" "$code $(j 'd["error"]["target"]')" "^400 customData$"
call PUT "$RG/vm-x?$API" "$(body vm-x | python3 -c 'import json,sys; b=json.load(sys.stdin); del b["properties"]["hardwareProfile"]; print(json.dumps(b))')"
expect "no vmSize is 400" "$code $(j 'd["error"]["target"]')" "^400 hardwareProfile.vmSize$"
call PUT "$RG/vm-x?$API" '{"location": '
expect "a truncated body is 400 InvalidRequestContent" "$code $(j 'd["error"]["code"]')" "^400 InvalidRequestContent$"

# --- faults ------------------------------------------------------------------------------
fault '{"quota": ["Standard_ND96isr_H100_v5"]}'
call PUT "$RG/vm-q?$API" "$(body vm-q)"
expect "a quota fault is a synchronous 409 OperationNotAllowed" "$code $(j 'd["error"]["code"]')" "^409 OperationNotAllowed$"
expect "saying the quota it exceeds" "$(j 'd["error"]["message"]')" "^Operation could not be completed as it results in exceeding approved standardNDH100v5Family Cores quota. .*Location: eastus, Current Limit: 0, Current Usage: 0, Additional Required: 96,"
call PUT "$RG/vm-q?$API" "$(body vm-q Spot Delete)"
expect "a Spot VM's quota is the low-priority one" "$(j 'd["error"]["message"]')" "Total Regional Low-priority vCPUs quota"
fault '{"quota": [], "capacity": ["Standard_ND96isr_H100_v5"]}'
call PUT "$RG/vm-s?$API" "$(body vm-s)"
expect "a capacity fault on the shape alone is 409 SkuNotAvailable" "$code $(j 'd["error"]["code"]')" "^409 SkuNotAvailable$"
call GET "$RG/vm-s?$API"
expect "and no VM exists" "$code" "^404$"
fault '{"capacity": ["2"]}'
call PUT "$RG/vm-z?$API" "$(body vm-z "" "" "" 2)"
expect "a capacity fault in a zone still answers 201" "$code" "^201$"
aop=$(hdr Azure-AsyncOperation)
sleep 1.1
call GET "$aop"
expect "then the operation Failed with AllocationFailed" "$(j 'd["status"], d["error"]["code"]')" "^\('Failed', 'AllocationFailed'\)$"
call GET "$RG/vm-z?$API"
expect "and the VM does not exist" "$code $(j 'd["error"]["code"]')" "^404 ResourceNotFound$"
fault '{"capacity": ["eastus/Standard_ND96isr_H100_v5"]}'
call PUT "$RG/vm-z2?$API" "$(body vm-z2)"
aop=$(hdr Azure-AsyncOperation)
sleep 1.1
call GET "$aop"
expect "a location/shape capacity fault fails the allocation" "$(j 'd["status"], d["error"]["code"]')" "^\('Failed', 'AllocationFailed'\)$"
fault '{"capacity": [], "throttle": 1}'
call GET "$RG/vm-a?$API"
expect "a throttled call is 429 TooManyRequests" "$code $(j 'd["error"]["code"]')" "^429 TooManyRequests$"
expect "with Retry-After" "$(hdr Retry-After)" "^1$"
call GET "$RG/vm-a?$API"
expect "the next one is served" "$code" "^200$"
code=$(curl -s -o "$T/out" -w '%{http_code}' -X POST --data-binary '{"bogus": 1}' "$base/_fake/faults")
expect "an unknown fault field is 400" "$code" "^400$"

# --- list with nextLink --------------------------------------------------------------------
for n in b c d; do call PUT "$RG/vm-$n?$API" "$(body vm-$n "" "" "sleep 300" "" inst-2)"; done
names=() url="$RG?$API" pages=0
while [ -n "$url" ]; do
  call GET "$url"
  pages=$((pages + 1))
  names+=($(j '" ".join(v["name"] for v in d["value"])'))
  url=$(j 'd.get("nextLink") or ""')
  [ $pages -gt 10 ] && break
done
expect "list pages by 2 with nextLink until it is absent" "$pages ${names[*]}" "^2 vm-a vm-b vm-c vm-d$"
call GET "/subscriptions/$sub/providers/Microsoft.Compute/virtualMachines?$API"
expect "the subscription-wide list pages too" "$(j 'len(d["value"]), d["nextLink"].startswith("'"$base"'/subscriptions/")')" "^\(2, True\)$"
code=$(curl -s -o "$T/out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$base$RG?$API&%24skiptoken=garbage")
expect "a made-up skiptoken is 400" "$code" "^400$"

# --- delete --------------------------------------------------------------------------------
curl -s -o "$T/out" "$base/_fake/vms"
vmpid=$(j '[v["pid"] for v in d if v["id"] == "vm-a"][0]')
call DELETE "$RG/vm-a?$API"
expect "DELETE is 202 with Azure-AsyncOperation and Location" "$code $(hdr Azure-AsyncOperation | grep -c /operations/) $(hdr Location | grep -c monitor=true)" "^202 1 1$"
aop=$(hdr Azure-AsyncOperation)
loc=$(hdr Location)
call GET "$loc"
expect "the Location poll is 202 while it runs" "$code" "^202$"
call GET "$RG/vm-a?$API"
expect "the VM reads Deleting" "$(j 'd["properties"]["provisioningState"]')" "^Deleting$"
call PUT "$RG/vm-a?$API" "$(body vm-a)"
expect "a PUT on a VM being deleted is 409" "$code $(j 'd["error"]["message"]')" "^409 Operation 'PUT' is not allowed on VM 'vm-a' since the VM is marked for deletion"
sleep 1.1
call GET "$aop"
expect "the delete operation Succeeded" "$(j 'd["status"]')" "^Succeeded$"
call GET "$loc"
expect "and the Location poll says 200" "$code" "^200$"
call GET "$RG/vm-a?$API"
expect "the VM is gone" "$code" "^404$"
call DELETE "$RG/vm-a?$API"
expect "a second DELETE is 204" "$code" "^204$"
for _ in $(seq 50); do kill -0 "$vmpid" 2>/dev/null || break; sleep 0.1; done
expect "the VM's processes ended" "$(kill -0 "$vmpid" 2>&1 && echo alive || echo gone)" "gone"
call PUT "$RG/vm-early?$API" "$(body vm-early)"
cop=$(hdr Azure-AsyncOperation)
call DELETE "$RG/vm-early?$API"
call GET "$cop"
expect "a DELETE during Creating cancels the create operation" "$(j 'd["status"], d["error"]["code"]')" "^\('Canceled', 'OperationPreempted'\)$"

# --- Spot eviction ---------------------------------------------------------------------------
call PUT "$RG/spot-del?$API" "$(body spot-del Spot Delete)"
call PUT "$RG/spot-dea?$API" "$(body spot-dea Spot Deallocate)"
sleep 1.1
code=$(curl -s -o "$T/out" -w '%{http_code}' -X POST --data-binary '{"vm": "vm-b", "notice_s": 1}' "$base/_fake/interrupt")
expect "a Regular VM is not evicted" "$code" "^409$"
code=$(curl -s -o "$T/out" -w '%{http_code}' -X POST --data-binary '{"vm": "spot-del", "notice_s": 1}' "$base/_fake/interrupt")
expect "evicting a Spot VM is accepted" "$code" "^200$"
curl -s -X POST --data-binary '{"vm": "spot-dea", "notice_s": 0.5}' "$base/_fake/interrupt" >/dev/null
curl -s -o "$T/out" -H 'Metadata: true' "$base/_meta/spot-del/metadata/scheduledevents?api-version=2020-07-01"
expect "Scheduled Events announce a Preempt of it at once" "$(j 'd["DocumentIncarnation"], [(e["EventType"], e["Resources"], e["EventStatus"]) for e in d["Events"]]')" "^\(2, \[\('Preempt', \['spot-del'\], 'Scheduled'\)\]\)$"
sleep 1.6
call GET "$RG/spot-del?$API"
expect "evictionPolicy Delete: the VM is gone" "$code" "^404$"
call GET "$RG/spot-dea?$API&%24expand=instanceView"
expect "evictionPolicy Deallocate: it stays, PowerState/deallocated" "$code $(j 'd["properties"]["instanceView"]["statuses"][-1]["code"]')" "^200 PowerState/deallocated$"
curl -s -o "$T/out" "$base/_fake/vms"
expect "the fake lists spot-del deleted and interrupted" "$(j '[(v["state"], v["interrupted"], v["spot"]) for v in d if v["id"] == "spot-del"][0]')" "^\('deleted', True, True\)$"

# --- never_boot --------------------------------------------------------------------------------
fault '{"never_boot": 1}'
call PUT "$RG/vm-dead?$API" "$(body vm-dead "" "" "echo should-not-run")"
call PUT "$RG/vm-live?$API" "$(body vm-live "" "" "echo live")"
sleep 1.3
call GET "$RG/vm-dead?$API"
expect "a never-booting VM is Succeeded to ARM" "$(j 'd["properties"]["provisioningState"]')" "^Succeeded$"
curl -s -o "$T/out" "$base/_fake/vms"
expect "but its script never started, and the next VM's did" "$(j '[(v["id"], v["booted"]) for v in d if v["id"] in ("vm-dead", "vm-live")]')" "^\[\('vm-dead', False\), \('vm-live', True\)\]$"

# --- Retail Prices -------------------------------------------------------------------------------
f="serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and armSkuName eq 'Standard_ND96isr_H100_v5'"
url="$base/api/retail/prices?api-version=2023-01-01-preview&%24filter=$(python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$f")"
rows=() pages=0
while [ -n "$url" ]; do
  curl -s -o "$T/out" "$url"
  pages=$((pages + 1))
  rows+=($(j '" ".join(str(r["retailPrice"]) for r in d["Items"])'))
  [ "$(j 'd["Count"] == len(d["Items"])')" = True ] || bad "Count is the page's row count" "$(cat "$T/out")"
  url=$(j 'd["NextPageLink"] or ""')
  [ $pages -gt 10 ] && break
done
expect "prices page by 2 through NextPageLink until null, with every row kind" "$pages ${rows[*]}" "^3 98.32 102.736 18.17 41.09 516000.0$"
curl -s -o "$T/out" -G --data-urlencode "api-version=2023-01-01-preview" --data-urlencode "\$filter=armRegionName eq 'EastUS'" "$base/api/retail/prices"
expect "filter values are case-sensitive in 2023-01-01-preview" "$(j 'd["Count"], d["NextPageLink"]')" "^\(0, None\)$"
code=$(curl -s -o "$T/out" -w '%{http_code}' -G --data-urlencode "\$filter=armRegionName eq 'eastus' or armRegionName eq 'westus'" "$base/api/retail/prices")
expect "a filter with 'or' is refused with 400" "$code" "^400$"

# --- token expiry -----------------------------------------------------------------------------------
issued=0
fresh
sleep 5.2
norefresh=1 call GET "$RG/vm-b?$API"
expect "a token past its expires_in is 401 ExpiredAuthenticationToken" "$code $(j 'd["error"]["code"]')" "^401 ExpiredAuthenticationToken$"

curl -s -o "$T/out" "$base/_fake/stats"
expect "stats count throttles, refusals, launches and ends" "$(j 'd["throttled"], d["refused"], d["launched"], d["terminated"]')" "^\(1, 12, 8, 4\)$"

# --- SIGTERM stops everything ---------------------------------------------------------------------------
finish azure
