#!/usr/bin/env bash
# tenbin's EC2 calls (adapters/sigv4 and adapters/aws_ec2, driven by
# tests/integration/ec2_call) against moto_server checking real SigV4
# signatures: keys made in moto's IAM sign a RunInstances that launches a
# tagged spot instance, a DescribeInstances by tag that finds it running,
# and a TerminateInstances that ends it; a wrong secret is refused with
# 401 AuthFailure, read from moto's error answer.
. "$(dirname "$0")/lib.sh"

moto=$(command -v moto_server || echo "$TENBIN_SOURCE_DIR/var/py/bin/moto_server")
aws=$(command -v aws || echo "$TENBIN_SOURCE_DIR/var/py/bin/aws")
[ -x "$moto" ] && [ -x "$aws" ] || { echo "moto_server and aws are needed: run scripts/setup" >&2; exit 1; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The first 4 requests go unchecked: the readiness probe below, the IAM
# user, its key and its policy.
INITIAL_NO_AUTH_ACTION_COUNT=4 "$moto" -H 127.0.0.1 -p "$port" >"$T_DIR/moto.log" 2>&1 &
moto_pid=$!
# Stop moto (by its PID), then clean up as lib.sh does, with the status
# the test ended with.
trap 'rc=$?; kill -TERM "$moto_pid" 2>/dev/null; wait "$moto_pid" 2>/dev/null; (exit $rc); t_cleanup' EXIT
url="http://127.0.0.1:$port/"
for _ in $(seq 1 100); do
  curl -s -o /dev/null "$url" && break
  sleep 0.1
done
export AWS_ACCESS_KEY_ID=setup AWS_SECRET_ACCESS_KEY=setup AWS_DEFAULT_REGION=us-east-1
A=("$aws" --endpoint-url "$url")
"${A[@]}" iam create-user --user-name tenbin >/dev/null
key=$("${A[@]}" iam create-access-key --user-name tenbin)
"${A[@]}" iam put-user-policy --user-name tenbin --policy-name ec2 \
  --policy-document '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:*","Resource":"*"}]}'
ak=$(jq -r .AccessKey.AccessKeyId <<<"$key")
sk=$(jq -r .AccessKey.SecretAccessKey <<<"$key")
call() { "$TENBIN_BIN/ec2_call" "$url" us-east-1 "$@"; }

out=$(call "$ak" "$sk" run node-7-launch-1 tenbin:node 7 spot)
t_expect "a signed RunInstances launches one instance, pending" "$out" '^i-[0-9a-f]+ pending$'
id=${out%% *}
t_expect "DescribeInstances by tenbin's tag finds it running" \
  "$(call "$ak" "$sk" describe tenbin:node 7)" "^$id running$"
t_expect "another tag's value finds nothing" \
  "[$(call "$ak" "$sk" describe tenbin:node 8)]" '^\[\]$'
t_expect "TerminateInstances ends it" \
  "$(call "$ak" "$sk" terminate "$id")" "^$id (shutting-down|terminated)$"
rc=0
out=$(call "$ak" "not-the-secret" describe tenbin:node 7) || rc=$?
t_expect "a wrong secret is refused: 401 AuthFailure" "$rc $out" '^1 error 401 AuthFailure: '
t_done
