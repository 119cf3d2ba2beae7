#!/usr/bin/env bash
# A job that names a dataset and that only an aws site can run: tenbind
# does not stage it (a VM has no inbound port and no replica outlives
# it) but submits it at once, telling the VM's node agent where the
# version comes from; the node agent pulls it from the source site's
# tenbin-agent into its own root and starts the job with
# TENBIN_DATASET_DIR there.  The bytes it pulled are a transfer from
# the source to the aws site, billed once as the source's egress.  A
# version the source cannot give fails the job with the reason.
. "$(dirname "$0")/lib.sh"

t_agent_start ONPREM "$T_DIR/onprem"
mkdir -p "$T_DIR/onprem/train/shards"
for i in 1 2; do head -c 1500000 /dev/urandom >"$T_DIR/onprem/train/shards/$i.bin"; done
echo "tokens: 42" >"$T_DIR/onprem/train/meta.txt"
t_moto_start
t_aws_front_start
umask 077
printf '[tenbin]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
  "$AWS_AK" "$AWS_SK" >"$T_DIR/aws-credentials"
port=$(t_free_port)
cat >"$T_DIR/config.json" <<JSON
{"policy": {"burst": {"tick_s": 1}},
 "sites": [
  {"name": "onprem", "kind": "local", "gpus": {},
   "cost": {"rented": {"per_gpu_hour": {"h100": 1}, "egress_per_gb": 90}},
   "agent": {"url": "$AGENT_URL_ONPREM", "token_file": "$T_DIR/agent-ONPREM.token"}},
  {"name": "aws", "kind": "aws", "region": "us-east-1",
   "zones": ["us-east-1a"], "endpoint": "$FRONT_URL",
   "credentials": {"file": "$T_DIR/aws-credentials", "profile": "tenbin"},
   "image": "ami-12c6146b",
   "shapes": [{"name": "p5", "type": "p5.48xlarge", "gpu_type": "h100",
               "gpus": 8}],
   "max_nodes": 1, "idle_timeout_s": 30, "burst": {"cooldown_s": 0}, "boot_timeout_s": 60,
   "reconcile_s": 1, "heartbeat_ms": 200,
   "cost": {"rented": {"per_gpu_hour": {"h100": 6.88}}},
   "node_agent": {"path": "$TENBIN_BIN/tenbin-agent",
                  "server": "http://127.0.0.1:$port"}}
 ],
 "tick_ms": 100}
JSON
t_start --config "$T_DIR/config.json" --listen "127.0.0.1:$port"

"$TENBIN" dataset add train --site onprem --path train --project ml >/dev/null
"$TENBIN" dataset publish train >/dev/null
V=$(curl -fsS "$T_URL/v1/datasets/train" | jq -r '.versions[0].version')

id=$("$TENBIN" submit --project ml --gpus 1 --gpu-type h100 --name reads \
  --dataset train -- sh -c \
  'cat "$TENBIN_DATASET_DIR/meta.txt"; echo "dataset $TENBIN_DATASET"; echo "dir $TENBIN_DATASET_DIR"; cat "$TENBIN_DATASET_DIR"/shards/*.bin | sha256sum')
t_expect "the job runs on the VM and succeeds" "$(t_wait_state "$id" succeeded 90)" '^succeeded$'
events=$(curl -fsS "$T_URL/v1/jobs/$id/events")
t_expect "it was submitted at once, never staged" \
  "$(jq -r '[.events[].to] | join(",")' <<<"$events")" '^queued,placed,submitted,(submitted,)*running,succeeded$'
t_expect "its placement weighed moving the data to the VM" \
  "$(jq -r '.events[] | select(.to == "placed") | .detail' <<<"$events")" "runs at 'aws'.* data [$]0\\.27"
vm=$(t_fake GET /_fake/vms | jq -r '.[0].id')
logs=$("$TENBIN" logs "$id")
want=$(cat "$T_DIR"/onprem/train/shards/*.bin | sha256sum)
t_expect "the job read the version through TENBIN_DATASET_DIR (tenbin logs)" \
  "$(tr '\n' ' ' <<<"$logs")" "^tokens: 42 dataset train@$V dir $T_DIR/vms/$vm/datasets/.*/train/$V ${want%% *} "
t_expect "the version is in the node's own store, on the VM" \
  "$(ls "$T_DIR/vms/$vm/datasets/.tenbin/data/train")" "^$V\$"

ds=$(curl -fsS "$T_URL/v1/datasets/train")
t_expect "no replica is recorded at the aws site" \
  "$(jq '[.replicas[] | select(.site == "aws")] | length' <<<"$ds")" '^0$'
t_expect "the node's pull is a transfer from the source to the aws site" \
  "$(jq -c '[.transfers[] | select(.to_site == "aws") | [.from_site, .state, .bytes_wire > 3000000]]' <<<"$ds")" \
  '^\[\["onprem","complete",true\]\]$'
wire=$(jq '[.transfers[] | select(.to_site == "aws") | .bytes_wire] | add' <<<"$ds")
rep=$(curl -fsS "$T_URL/v1/reports/usage?by=project,site")
t_expect "its bytes are billed as the source's egress to the job's project (\$90/GB)" \
  "$(jq -c '.lines[] | select(.project == "ml" and .site == "onprem") | [.egress_bytes, .egress_micro]' <<<"$rep")" \
  "^\\[$wire,$((wire * 90000000 / 1000000000))\\]$"
cents=$((wire * 90 / 10000000))
t_expect "tenbin report shows the egress on the source's line" \
  "$("$TENBIN" report --by project,site | grep -E '^ml +onprem ')" \
  " [$]?$((cents / 100))\\.$(printf '%02d' $((cents % 100))) "

# A version the source cannot give (its file changed after publishing)
# fails the job on the VM with the reason; the job never runs.
head -c 1500000 /dev/urandom >"$T_DIR/onprem/train/shards/2.bin"
"$TENBIN" dataset publish train >/dev/null
head -c 1500000 /dev/urandom >"$T_DIR/onprem/train/shards/2.bin"
id2=$("$TENBIN" submit --project ml --gpus 1 --gpu-type h100 \
  --dataset train -- sh -c 'echo should-not-run')
t_expect "a job whose pull fails ends failed" "$(t_wait_state "$id2" failed 90)" '^failed$'
t_expect "the reason names the dataset and the pull" \
  "$(curl -fsS "$T_URL/v1/jobs/$id2" | jq -r .reason)" 'dataset train@[0-9a-f]{64}: the pull failed: .*2\.bin'
t_expect "it never ran" "[$("$TENBIN" logs "$id2" 2>/dev/null || true)]" '^\[\]$'
t_expect "what its pull moved is a failed transfer, billed too" \
  "$(curl -fsS "$T_URL/v1/datasets/train" | jq -c '[.transfers[] | select(.to_site == "aws" and .state == "failed") | .bytes_wire > 0]')" \
  '^\[true\]$'

# A restart bills nothing twice; first-fit places such a job the same.
before=$(curl -fsS "$T_URL/v1/reports/usage" | jq '.total.egress_bytes')
t_stop
jq '.policy = {"placement": "first-fit"}' "$T_DIR/config.json" >"$T_DIR/ff.json"
t_start --config "$T_DIR/ff.json" --listen "127.0.0.1:$port"
t_expect "a restart bills no pull twice" \
  "$(curl -fsS "$T_URL/v1/reports/usage" | jq '.total.egress_bytes')" "^$before\$"
id3=$("$TENBIN" submit --project ml --gpus 1 --gpu-type h100 \
  --dataset "train@$V" -- sh -c 'cat "$TENBIN_DATASET_DIR/meta.txt"')
t_expect "under first-fit too, the job runs on a VM" "$(t_wait_state "$id3" succeeded 90)" '^succeeded$'
t_expect "placed at aws at once, not staged" \
  "$(curl -fsS "$T_URL/v1/jobs/$id3/events" | jq -r '[.events[] | .to + ":" + .detail] | join("|")')" \
  "^queued:[^|]*\\|placed:first site that fits is 'aws'"
t_expect "it read the version" "$("$TENBIN" logs "$id3")" '^tokens: 42$'
t_stop
if grep -q "ERROR: AddressSanitizer\|runtime error:\|LeakSanitizer" "$T_DIR"/vms/*/console.log 2>/dev/null; then
  t_fail "the node agents are clean under the sanitizers"
else
  t_ok "the node agents are clean under the sanitizers"
fi
t_done
