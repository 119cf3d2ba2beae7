#!/usr/bin/env bash
# Self-test of tests/fakes/gce_fake.py: starts it on loopback, drives
# every behaviour tenbin relies on with the request shapes Google
# documents (the token grant, insert/get/list/delete, operations, faults,
# a spot preemption, the SKU catalog) and checks the answers, then stops
# it with SIGTERM and checks that no VM process outlives it.
# usage: bash tests/fakes/selftest_gce.sh      (prints ok/FAIL lines)
# shellcheck source=tests/fakes/lib.sh
. "$(dirname "$0")/lib.sh"
src=$(cd "$here/../.." && pwd)
new_token() { grant "$(mkjwt)"; }
# grant JWT: POST it to /token; status in $code, body in $T/out.
grant() {
  code=$(curl -s -o "$T/out" -w '%{http_code}' -X POST \
    --data-urlencode "grant_type=${2:-urn:ietf:params:oauth:grant-type:jwt-bearer}" \
    --data-urlencode "assertion=$1" "$base/token")
}
# listq PATH CURL-ARGS...: a GET with -G (query from --data-urlencode).
listq() {
  local p=$1
  shift
  fresh
  code=$(curl -s -o "$T/out" -w '%{http_code}' -G -H "Authorization: Bearer $TOKEN" "$@" "$base$p")
}

sa=$src/tests/data/gcp/service-account.json
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["private_key"], end="")' "$sa" >"$T/key.pem"
chmod 600 "$T/key.pem"
cat >"$T/mkjwt.py" <<'PY'
# mkjwt.py AUD [OVERRIDES-JSON]: a JWT of the test key, signed by openssl.
import base64, json, os, subprocess, sys, time
sa = json.load(open(os.environ["SA"]))
over = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
hdr = {"alg": "RS256", "typ": "JWT", "kid": sa["private_key_id"]}
hdr.update(over.pop("_hdr", {}))
now = int(time.time())
cl = {"iss": sa["client_email"], "aud": sys.argv[1], "iat": now,
      "exp": now + 3600,
      "scope": "https://www.googleapis.com/auth/cloud-platform"}
cl.update(over)
cl = {k: v for k, v in cl.items() if v is not None}
b = lambda x: base64.urlsafe_b64encode(x).rstrip(b"=").decode()
inp = b(json.dumps(hdr).encode()) + "." + b(json.dumps(cl).encode())
sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign",
                      os.path.join(os.environ["T"], "key.pem")],
                     input=inp.encode(), capture_output=True,
                     check=True).stdout
print(inp + "." + b(sig))
PY
export SA=$sa
mkjwt() { python3 "$T/mkjwt.py" "$base/token" "$@"; }

python3 - "$T/skus.json" <<'PY'
import json, sys
rows = [{"name": f"services/6F81-5844-456A/skus/SKU-{i}", "skuId": f"SKU-{i}",
         "description": f"sku {i}",
         "category": {"resourceGroup": "GPU", "usageType": "OnDemand"},
         "serviceRegions": ["us-central1"], "pricingInfo": []}
        for i in range(5)]
json.dump(rows, open(sys.argv[1], "w"))
PY

start_fake gce_fake.py --service-account "$sa" --token-ttl 5 \
  --op-seconds 2 --pending-s 2 --wait-s 3 --skus "$T/skus.json"
P=/compute/v1/projects/demo-proj/zones/us-central1-a

# --- the token endpoint -------------------------------------------------------
grant "$(mkjwt)"
expect "a JWT signed by the service account's key gets a token" "$code $(j 'd["token_type"], d["expires_in"], d["access_token"][:4]')" "^200 \('Bearer', 5, 'ya29'\)$"
jwt=$(mkjwt)
sig=${jwt##*.}
# One character of the signature changed (a swap of two may swap equals).
c=A
[ "${sig:20:1}" = A ] && c=B
grant "${jwt%.*}.${sig:0:20}$c${sig:21}"
expect "a bad signature is invalid_grant" "$code $(j 'd["error"], d["error_description"]')" "^400 \('invalid_grant', 'Invalid JWT Signature.'\)$"
grant "$(python3 "$T/mkjwt.py" https://oauth2.googleapis.com/token)"
expect "another audience is refused" "$code $(j 'd["error"], d["error_description"]')" "^400 \('invalid_grant', 'Invalid JWT: Failed audience"
now=$(date +%s)
grant "$(mkjwt "{\"iat\": $now, \"exp\": $((now + 3700))}")"
expect "a JWT living over an hour is refused" "$code $(j 'd["error_description"]')" "^400 Invalid JWT: Token must be a short-lived"
grant "$(mkjwt "{\"iat\": $((now - 4000)), \"exp\": $((now - 400))}")"
expect "an expired JWT is refused" "$code" "^400$"
grant "$(mkjwt "{\"iat\": $((now + 900)), \"exp\": $((now + 1800))}")"
expect "a JWT from the future is refused" "$code" "^400$"
grant "$(mkjwt '{"scope": null}')"
expect "a JWT without scope is invalid_scope" "$code $(j 'd["error"]')" "^400 invalid_scope$"
grant "$(mkjwt '{"iss": "someone@else.iam.gserviceaccount.com"}')"
expect "another issuer is refused" "$code $(j 'd["error"]')" "^400 invalid_grant$"
grant "$(mkjwt '{"_hdr": {"alg": "HS256"}}')"
expect "alg HS256 is refused" "$code $(j 'd["error"]')" "^400 invalid_grant$"
grant "$(mkjwt)" "client_credentials"
expect "another grant_type is refused" "$code $(j 'd["error"]')" "^400 unsupported_grant_type$"

# --- auth on the API ------------------------------------------------------------------
TOKEN=ya29.made-up norefresh=1 call GET "$P/instances"
expect "an unknown token gets 401 UNAUTHENTICATED" "$code $(j 'd["error"]["code"], d["error"]["status"], d["error"]["errors"][0]["reason"]')" "^401 \(401, 'UNAUTHENTICATED', 'authError'\)$"
issued=0
call GET "/compute/v1/projects/other-proj/zones/us-central1-a/instances"
expect "another project is 403 forbidden" "$code $(j 'd["error"]["errors"][0]["reason"]')" "^403 forbidden$"
call GET "/compute/v1/projects/demo-proj/zones/nowhere/instances"
expect "a malformed zone is 400" "$code" "^400$"
call GET "$P/instances"
expect "an empty list leaves items and nextPageToken out" "$code $(j '"items" in d, "nextPageToken" in d, d["kind"]')" "^200 \(False, False, 'compute#instanceList'\)$"

# --- insert, operations, instance states -----------------------------------------------------
body() { # body NAME [SPOT-ACTION] [SCRIPT] [INSTANCE-LABEL]
  python3 - "$@" <<'PY'
import json, sys
name = sys.argv[1]
action = sys.argv[2] if len(sys.argv) > 2 else ""
script = sys.argv[3] if len(sys.argv) > 3 else "echo booted $TENBIN_VM_ID; sleep 300"
inst = sys.argv[4] if len(sys.argv) > 4 else "inst-1"
b = {"name": name,
     "machineType": "zones/us-central1-a/machineTypes/a3-highgpu-8g",
     "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
         "diskSizeGb": "200",
         "sourceImage": "projects/debian-cloud/global/images/family/debian-12"}}],
     "networkInterfaces": [{"network": "global/networks/default"}],
     "labels": {"tenbin-instance": inst, "tenbin-node": "node-" + name},
     "metadata": {"items": [{"key": "startup-script", "value": script}]},
     "scheduling": {"onHostMaintenance": "TERMINATE",
                    "automaticRestart": False}}
if action:
    b["scheduling"].update(provisioningModel="SPOT",
                           instanceTerminationAction=action)
print(json.dumps(b))
PY
}
rid1=0b5c4c1e-1f0a-4c1e-9a4b-000000000001
issued=0
fresh
call POST "$P/instances?requestId=$rid1" "$(body vm-a)"
expect "insert answers a PENDING insert Operation" "$code $(j 'd["kind"], d["operationType"], d["status"], d["targetLink"].endswith("/instances/vm-a")')" "^200 \('compute#operation', 'insert', 'PENDING', True\)$"
op1=$(j 'd["name"]')
call GET "$P/instances/vm-a"
expect "the new instance is PROVISIONING" "$code $(j 'd["status"], d["labels"]["tenbin-node"], d["machineType"].rsplit("/", 1)[1]')" "^200 \('PROVISIONING', 'node-vm-a', 'a3-highgpu-8g'\)$"
for _ in $(seq 30); do
  call GET "$P/operations/$op1"
  [ "$(j 'd["status"]')" != PENDING ] && break
  sleep 0.1
done
expect "the Operation goes RUNNING" "$code $(j 'd["status"], "startTime" in d')" "^200 \('RUNNING', True\)$"
call POST "$P/instances?requestId=$rid1" "$(body vm-a)"
expect "the same requestId answers the same Operation" "$code $(j 'd["name"]')" "^200 $op1$"
call POST "$P/instances?requestId=0b5c4c1e-1f0a-4c1e-9a4b-000000000002" "$(body vm-a)"
expect "an existing name under another requestId is 409 alreadyExists" "$code $(j 'd["error"]["errors"][0]["reason"]')" "^409 alreadyExists$"
call POST "$P/operations/$op1/wait"
expect "wait returns it DONE, without error" "$code $(j 'd["status"], "error" in d, d["progress"]')" "^200 \('DONE', False, 100\)$"
sleep 1
call GET "$P/instances/vm-a"
expect "the instance is RUNNING after pending_s" "$(j 'd["status"], "lastStartTimestamp" in d, d["creationTimestamp"][-6:]')" "^\('RUNNING', True, '-08:00'\)$"
for _ in $(seq 50); do grep -q booted "$T/root/vm-a/console.log" 2>/dev/null && break; sleep 0.1; done
expect "the startup script ran in the emulator" "$(cat "$T/root/vm-a/console.log" 2>/dev/null)" "booted vm-a"
code=$(curl -s -o "$T/out" -w '%{http_code}' "$base/_meta/vm-a/computeMetadata/v1/instance/preempted")
expect "metadata without Metadata-Flavor is 403" "$code" "^403$"
expect "metadata says not preempted" "$(curl -s -H 'Metadata-Flavor: Google' "$base/_meta/vm-a/computeMetadata/v1/instance/preempted")" "^FALSE$"
call GET "/_fake/stats"
expect "stats: one launch, one deduplicated insert" "$(j 'd["launched"], d["deduplicated"], d["calls"]["instances.insert"]')" "^\(1, 1, 3\)$"

# --- validation -------------------------------------------------------------------------
call POST "$P/instances" "$(body Bad_Name)"
expect "a bad name is 400 invalid" "$code $(j 'd["error"]["errors"][0]["reason"]')" "^400 invalid$"
call POST "$P/instances" "$(body vm-x | python3 -c 'import json,sys; b=json.load(sys.stdin); b["labels"]["Owner"]="x"; print(json.dumps(b))')"
expect "an uppercase label key is 400" "$code $(j 'd["error"]["message"]')" "^400 Invalid value for field 'resource.labels'"
call POST "$P/instances" "$(body vm-x | python3 -c 'import json,sys; b=json.load(sys.stdin); b["machineType"]="a3-highgpu-8g"; print(json.dumps(b))')"
expect "a bare machine type is 400" "$code $(j 'd["error"]["message"]')" "^400 .*machineType.*malformed"
call POST "$P/instances" "$(body vm-x | python3 -c 'import json,sys; b=json.load(sys.stdin); b["machineType"]="zones/us-central1-b/machineTypes/a3-highgpu-8g"; print(json.dumps(b))')"
expect "another zone's machine type is 400" "$code" "^400$"
call POST "$P/instances" "$(body vm-x DELETE | python3 -c 'import json,sys; b=json.load(sys.stdin); b["scheduling"]["onHostMaintenance"]="MIGRATE"; print(json.dumps(b))')"
expect "SPOT with MIGRATE is 400" "$code $(j 'd["error"]["message"]')" "^400 .*onHostMaintenance"
call POST "$P/instances" "$(body vm-x | python3 -c 'import json,sys; b=json.load(sys.stdin); b["machine_type"]="x"; print(json.dumps(b))')"
expect "an unknown field is 400" "$code $(j 'd["error"]["message"]')" "^400 Invalid JSON payload received. Unknown name"
call POST "$P/instances" "$(body vm-x | python3 -c 'import json,sys; b=json.load(sys.stdin); b["metadata"]["items"].append(b["metadata"]["items"][0]); print(json.dumps(b))')"
expect "duplicate metadata keys are 400" "$code" "^400$"
call POST "$P/instances?requestId=not-a-uuid" "$(body vm-x)"
expect "a requestId that is no UUID is 400" "$code $(j 'd["error"]["message"]')" "^400 .*requestId"
call POST "$P/instances" '{"name": "vm-x"'
expect "a truncated body is 400 parseError" "$code $(j 'd["error"]["errors"][0]["reason"]')" "^400 parseError$"

# --- faults ---------------------------------------------------------------------------
fault '{"capacity": ["us-central1-a"]}'
call POST "$P/instances?requestId=0b5c4c1e-1f0a-4c1e-9a4b-000000000003" "$(body vm-cap)"
op=$(j 'd["name"]')
call POST "$P/operations/$op/wait"
expect "a capacity fault ends the op DONE with ZONE_RESOURCE_POOL_EXHAUSTED, 503" "$code $(j 'd["status"], d["error"]["errors"][0]["code"], d["httpErrorStatusCode"]')" "^200 \('DONE', 'ZONE_RESOURCE_POOL_EXHAUSTED', 503\)$"
call GET "$P/instances/vm-cap"
expect "and no instance exists" "$code $(j 'd["error"]["errors"][0]["reason"]')" "^404 notFound$"
fault '{"capacity": ["us-central1-a/a2-highgpu-8g"]}'
call POST "$P/instances" "$(body vm-cap2 | sed 's/a3-highgpu-8g/a2-highgpu-8g/')"
op=$(j 'd["name"]')
call POST "$P/operations/$op/wait"
expect "a zone/shape capacity fault hits that shape" "$(j 'd["error"]["errors"][0]["code"]')" "^ZONE_RESOURCE_POOL_EXHAUSTED$"
fault '{"capacity": [], "quota": ["a3-highgpu-8g"]}'
call POST "$P/instances" "$(body vm-quota DELETE)"
op=$(j 'd["name"]')
call POST "$P/operations/$op/wait"
expect "a quota fault ends DONE with QUOTA_EXCEEDED on the spot GPU quota" "$(j 'd["error"]["errors"][0]["code"], d["error"]["errors"][0]["message"], d["httpErrorStatusCode"]')" "^\('QUOTA_EXCEEDED', \"Quota 'PREEMPTIBLE_NVIDIA_H100_GPUS' exceeded.  Limit: 0.0 in region us-central1.\", 403\)$"
fault '{"quota": [], "throttle": 2}'
call GET "$P/instances/vm-a"
expect "throttled once: 403 rateLimitExceeded" "$code $(j 'd["error"]["errors"][0]["reason"], d["error"]["errors"][0]["domain"]')" "^403 \('rateLimitExceeded', 'usageLimits'\)$"
call GET "$P/instances/vm-a"
expect "throttled twice: 429 RESOURCE_EXHAUSTED" "$code $(j 'd["error"]["status"]')" "^429 RESOURCE_EXHAUSTED$"
call GET "$P/instances/vm-a"
expect "then served again" "$code" "^200$"
curl -s "$base/_fake/faults" >"$T/out"
expect "GET /_fake/faults answers the whole state" "$(j 'sorted(d)')" "boot_delay_s.*capacity.*never_boot.*pending_s.*quota.*throttle"
code=$(curl -s -o "$T/out" -w '%{http_code}' -X POST --data-binary '{"throttle": -1}' "$base/_fake/faults")
expect "a bad fault is 400" "$code" "^400$"

# --- list with filter and pages -----------------------------------------------------------
fault '{"pending_s": 0}'
for n in b c d; do call POST "$P/instances" "$(body vm-$n "" "sleep 300" inst-2)"; done
call POST "$P/instances" "$(body vm-e "" "sleep 300" inst-3)"
f='labels.tenbin-instance = "inst-2"'
listq "$P/instances" --data-urlencode "filter=$f" --data-urlencode maxResults=2
expect "a label filter pages 2 at a time" "$(j '[i["name"] for i in d["items"]], "nextPageToken" in d')" "^\(\['vm-b', 'vm-c'\], True\)$"
pt=$(j 'd["nextPageToken"]')
listq "$P/instances" --data-urlencode "filter=$f" --data-urlencode maxResults=2 --data-urlencode "pageToken=$pt"
expect "its last page has no nextPageToken" "$(j '[i["name"] for i in d["items"]], "nextPageToken" in d')" "^\(\['vm-d'\], False\)$"
listq "$P/instances" --data-urlencode "filter=(labels.tenbin-instance = \"inst-3\") AND (status = RUNNING)"
expect "(a) AND (b) filters" "$(j '[i["name"] for i in d["items"]]')" "^\['vm-e'\]$"
listq "$P/instances" --data-urlencode "filter=labels.tenbin-instance:*"
expect "labels.KEY:* selects every labelled instance" "$(j 'len(d["items"])')" "^5$"
listq "$P/instances" --data-urlencode 'filter=labels.tenbin-instance = "none"'
expect "a filter matching nothing leaves items out" "$(j '"items" in d')" "^False$"
listq "$P/instances" --data-urlencode 'filter=(status = RUNNING) OR (status = STAGING)'
expect "OR is refused with 400 invalid" "$code $(j 'd["error"]["errors"][0]["reason"]')" "^400 invalid$"
listq "$P/instances" --data-urlencode 'filter=bogus = 1'
expect "an unknown field in a filter is 400" "$code" "^400$"
listq "$P/instances" --data-urlencode 'pageToken=garbage'
expect "a made-up pageToken is 400" "$code" "^400$"
listq "$P/instances" --data-urlencode 'maxResults=501'
expect "maxResults over 500 is 400" "$code" "^400$"
call GET "/compute/v1/projects/demo-proj/aggregated/instances?maxResults=3"
expect "the aggregated list groups by zone and pages" "$(j 'list(d["items"]), len(d["items"]["zones/us-central1-a"]["instances"]), "nextPageToken" in d')" "^\(\['zones/us-central1-a'\], 3, True\)$"

# --- delete ----------------------------------------------------------------------------
call GET "/_fake/vms"
vmpid=$(j '[v["pid"] for v in d if v["id"] == "vm-a"][0]')
expect "the fake lists the VM with its pid and tags" "$(j '[(v["state"], v["node"], v["instance"], v["spot"]) for v in d if v["id"] == "vm-a"][0]')" "^\('RUNNING', 'node-vm-a', 'inst-1', False\)$"
rid=0b5c4c1e-1f0a-4c1e-9a4b-0000000000d1
call DELETE "$P/instances/vm-a?requestId=$rid"
expect "delete answers a delete Operation" "$code $(j 'd["operationType"]')" "^200 delete$"
dop=$(j 'd["name"]')
call DELETE "$P/instances/vm-a?requestId=$rid"
expect "the same delete requestId answers the same Operation" "$code $(j 'd["name"]')" "^200 $dop$"
call GET "$P/instances/vm-a"
expect "the instance is STOPPING while it is deleted" "$(j 'd["status"]')" "^STOPPING$"
call POST "$P/operations/$dop/wait"
expect "the delete op ends DONE" "$(j 'd["status"]')" "^DONE$"
call GET "$P/instances/vm-a"
expect "then the instance is gone" "$code" "^404$"
call DELETE "$P/instances/vm-a"
expect "a second delete is 404 notFound" "$code $(j 'd["error"]["errors"][0]["reason"]')" "^404 notFound$"
for _ in $(seq 50); do kill -0 "$vmpid" 2>/dev/null || break; sleep 0.1; done
expect "the VM's processes ended" "$(kill -0 "$vmpid" 2>&1 && echo alive || echo gone)" "gone"

# --- spot preemption ----------------------------------------------------------------------
call POST "$P/instances" "$(body spot-del DELETE)"
call POST "$P/instances" "$(body spot-stop STOP)"
sleep 0.3
code=$(curl -s -o "$T/out" -w '%{http_code}' -X POST --data-binary '{"vm": "vm-b", "notice_s": 1}' "$base/_fake/interrupt")
expect "a standard VM is not preempted" "$code" "^409$"
code=$(curl -s -o "$T/out" -w '%{http_code}' -X POST --data-binary '{"vm": "spot-del", "notice_s": 1}' "$base/_fake/interrupt")
expect "interrupting a spot VM is accepted" "$code" "^200$"
curl -s -X POST --data-binary '{"vm": "spot-stop", "notice_s": 0.5}' "$base/_fake/interrupt" >/dev/null
expect "its metadata says preempted at once" "$(curl -s -H 'Metadata-Flavor: Google' "$base/_meta/spot-del/computeMetadata/v1/instance/preempted")" "^TRUE$"
call GET "$P/instances/spot-del"
expect "and it is STOPPING during the notice" "$(j 'd["status"]')" "^STOPPING$"
sleep 1.6
call GET "$P/instances/spot-del"
expect "DELETE action: the preempted instance is gone" "$code" "^404$"
call GET "$P/instances/spot-stop"
expect "STOP action: the preempted instance is TERMINATED" "$code $(j 'd["status"], "lastStopTimestamp" in d')" "^200 \('TERMINATED', True\)$"
listq "$P/operations" --data-urlencode 'filter=operationType = "compute.instances.preempted"'
expect "zone operations record both preemptions" "$(j 'sorted(o["targetLink"].rsplit("/", 1)[1] for o in d["items"])')" "^\['spot-del', 'spot-stop'\]$"
call GET "/_fake/vms"
expect "the fake lists spot-del DELETED and interrupted" "$(j '[(v["state"], v["interrupted"], v["ended"] is not None) for v in d if v["id"] == "spot-del"][0]')" "^\('DELETED', True, True\)$"

# --- never_boot and boot_delay ---------------------------------------------------------------
fault '{"never_boot": 1}'
call POST "$P/instances" "$(body vm-dead "" "echo should-not-run")"
call POST "$P/instances" "$(body vm-live "" "echo live")"
sleep 0.5
call GET "$P/instances/vm-dead"
expect "a never-booting VM is RUNNING to the API" "$(j 'd["status"]')" "^RUNNING$"
call GET "/_fake/vms"
expect "but its script never started, and the next VM's did" "$(j '[(v["id"], v["booted"]) for v in d if v["id"] in ("vm-dead", "vm-live")]')" "^\[\('vm-dead', False\), \('vm-live', True\)\]$"
expect "so it wrote no console output" "$(cat "$T/root/vm-dead/console.log" 2>/dev/null)" "^$"

# --- prices --------------------------------------------------------------------------------
curl -s -o "$T/out" "$base/v1/services/6F81-5844-456A/skus?pageSize=2&key=k"
expect "SKUs page 1 of 3" "$(j '[s["skuId"] for s in d["skus"]], bool(d["nextPageToken"])')" "^\(\['SKU-0', 'SKU-1'\], True\)$"
pt=$(j 'd["nextPageToken"]')
curl -s -o "$T/out" "$base/v1/services/6F81-5844-456A/skus?pageSize=2&key=k&pageToken=$pt"
pt=$(j 'd["nextPageToken"]')
fresh
curl -s -o "$T/out" -H "Authorization: Bearer $TOKEN" "$base/v1/services/6F81-5844-456A/skus?pageSize=2&pageToken=$pt"
expect "the last page has nextPageToken \"\" (a bearer token works too)" "$(j '[s["skuId"] for s in d["skus"]], d["nextPageToken"] == ""')" "^\(\['SKU-4'\], True\)$"
code=$(curl -s -o "$T/out" -w '%{http_code}' "$base/v1/services/6F81-5844-456A/skus")
expect "SKUs without a key or token are 403" "$code" "^403$"

# --- token expiry ----------------------------------------------------------------------------
issued=0
fresh
sleep 5.2
norefresh=1 call GET "$P/instances/vm-b"
expect "a token past its expires_in is 401" "$code" "^401$"

call GET "/_fake/stats"
expect "stats count throttles, refusals, launches and ends" "$(j 'd["throttled"], d["refused"] >= 3, d["launched"], d["terminated"]')" "^\(2, True, 9, 3\)$"

# --- SIGTERM stops everything --------------------------------------------------------------------
finish gce
