#!/usr/bin/env bash
# tenbind with two sites, each with a real tenbin-agent: a dataset
# registered at one site is published and replicated through the REST
# API and the CLI, a job pinned to the other site that names the dataset
# is `staging` until the replica is verified and then runs reading it,
# and a job whose dataset cannot be staged fails with the reason and is
# never dispatched.
. "$(dirname "$0")/lib.sh"

t_agent_start ONPREM "$T_DIR/onprem"
t_agent_start CLOUD "$T_DIR/cloud"
mkdir -p "$T_DIR/onprem/train/shards"
for i in 1 2 3; do head -c 300000 /dev/urandom >"$T_DIR/onprem/train/shards/$i.bin"; done
echo "tokens: 42" >"$T_DIR/onprem/train/meta.txt"
# The job proves it read the replica: it prints the file and a checksum.
cat >"$T_DIR/config.json" <<EOF
{"sites": [
  {"name": "onprem", "kind": "local", "gpus": {"h100": 2},
   "agent": {"url": "$AGENT_URL_ONPREM", "token_file": "$T_DIR/agent-ONPREM.token"}},
  {"name": "cloud", "kind": "local", "gpus": {"h100": 2}, "first_gpu": 2,
   "agent": {"url": "$AGENT_URL_CLOUD", "token_file": "$T_DIR/agent-CLOUD.token"}},
  {"name": "bare", "kind": "local", "gpus": {"h100": 2}, "first_gpu": 4}
 ],
 "tick_ms": 100}
EOF
t_start --config "$T_DIR/config.json"

out=$(t_http POST /v1/datasets -d '{"name":"train","source_site":"onprem","path":"train"}')
t_expect "a dataset is registered at its source site" "$out" '^201 '
out=$(t_http POST /v1/datasets -d '{"name":"train","source_site":"onprem","path":"train"}')
t_expect "registering the same name again is 409" "$out" '^409 '
out=$(t_http POST /v1/datasets -d '{"name":"x","source_site":"bare","path":"p"}')
t_expect "a source site without an agent is 422 naming it" "$out" \
  '^422 .*bare'
out=$(t_http POST /v1/datasets -d '{"name":"../x","source_site":"onprem","path":"p"}')
t_expect "a bad dataset name is 400" "$out" '^400 .*name'

out=$("$TENBIN" dataset publish train)
t_expect "tenbin dataset publish prints the version" "$out" '[0-9a-f]{12}'
V=$(curl -fsS "$T_URL/v1/datasets/train" | jq -r '.versions[0].version')

# A job on the other site waits for the replica, then reads it.
id=$("$TENBIN" submit --project demo --gpus 1 --site cloud \
  --dataset "train@latest" -- sh -c \
  'cat "$TENBIN_DATASET_DIR/meta.txt"; cat "$TENBIN_DATASET_DIR"/shards/*.bin | sha256sum')
state=$(t_wait_state "$id" succeeded 60)
t_expect "the job runs once the replica is verified" "$state" '^succeeded$'
t_expect "the job went through staging before it was dispatched" \
  "$(curl -fsS "$T_URL/v1/jobs/$id/events" | jq -r '[.events[].to] | join(",")')" \
  'staging,.*placed,submitted'
want=$(cat "$T_DIR"/onprem/train/shards/*.bin | sha256sum)
t_expect "the job read the replicated data" "$("$TENBIN" logs "$id" | tr '\n' ' ')" \
  "tokens: 42.*${want%% *}"
out=$(curl -fsS "$T_URL/v1/datasets/train")
t_expect "the replica at cloud is complete with its bytes" \
  "$(printf '%s' "$out" | jq -c '.replicas[] | select(.site=="cloud") | [.state, .version, .bytes_total > 0, .bytes_wire > 0]')" \
  "^\\[\"complete\",\"$V\",true,true\\]$"
t_expect "the transfer is recorded with bytes per site pair" \
  "$(printf '%s' "$out" | jq -c '.transfers[0] | [.from_site, .to_site, .bytes_wire > 0]')" \
  '^\["onprem","cloud",true\]$'
t_expect "the replica is in the cloud agent's store" \
  "$(ls "$T_DIR/cloud/.tenbin/data/train")" "^$V\$"
t_expect "tenbin dataset show lists the replica" \
  "$("$TENBIN" dataset show train)" 'cloud.*complete'
t_expect "tenbin dataset ls lists the dataset" "$("$TENBIN" dataset ls)" \
  'train.*onprem'

# A second version, synced from the CLI (plain lines, not a terminal).
echo "tokens: 43" >"$T_DIR/onprem/train/meta.txt"
"$TENBIN" dataset publish train >/dev/null
out=$("$TENBIN" dataset sync train --site cloud 2>&1)
t_expect "tenbin dataset sync waits for the replica and says so" "$out" \
  'complete'
t_expect "the source holds only its latest version: the first is superseded, not failed" \
  "$(curl -fsS "$T_URL/v1/datasets/train" | jq -c --arg v "$V" '.replicas[] | select(.site=="onprem" and .version==$v) | [.state, .error]')" \
  '^\["superseded",".*superseded.*"\]$'
show=$("$TENBIN" dataset show train)
t_expect "tenbin dataset show says superseded, not failed, for the source's old version" \
  "$(printf '%s\n' "$show" | grep "^onprem *${V:0:12}")" 'superseded'
t_expect "tenbin dataset show prints the error whole" "$show" \
  'superseded at the source by version [0-9a-f]{12} \(its files changed\)'
t_expect "the sync printed no control characters off a terminal" \
  "$(printf '%s' "$out" | tr -d '\n' | grep -c $'\r' || true)" '^0$'

# Publishing refuses what it cannot hash (a fifo is not data).
mkfifo "$T_DIR/onprem/train/pipe"
out=$(t_http POST /v1/datasets/train/versions -d '{}')
t_expect "publishing a tree with a fifo fails naming it" "$out" '^4.. .*pipe'
rm "$T_DIR/onprem/train/pipe"

# A job whose dataset cannot be staged fails with the reason: a file the
# destination does not have changes at the source after publishing.
head -c 300000 /dev/urandom >"$T_DIR/onprem/train/shards/4.bin"
"$TENBIN" dataset publish train >/dev/null
head -c 300000 /dev/urandom >"$T_DIR/onprem/train/shards/4.bin"
id=$("$TENBIN" submit --project demo --gpus 1 --site cloud \
  --dataset train -- sh -c 'echo should-not-run')
state=$(t_wait_state "$id" failed 60)
t_expect "a job whose dataset cannot be staged fails" "$state" '^failed$'
t_expect "the failure names the dataset and the file" \
  "$(curl -fsS "$T_URL/v1/jobs/$id" | jq -r .reason)" 'train.*4\.bin.*changed'
t_expect "that job was never dispatched" \
  "$(curl -fsS "$T_URL/v1/jobs/$id/events" | jq -r '[.events[].to] | join(",")')" \
  '^[a-z,]*staging,failed$'

out=$(t_http POST /v1/jobs -d '{"project":"demo","gpus":1,"command":["true"],"dataset":"nosuch"}')
t_expect "a job naming an unknown dataset is 422 naming the field" "$out" \
  "^422 .*dataset"

t_stop
t_done
