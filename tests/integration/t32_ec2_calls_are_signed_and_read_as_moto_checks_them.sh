#!/usr/bin/env bash
# tenbin's EC2 calls (adapters/sigv4 and adapters/aws_ec2, driven by
# tests/integration/ec2_call) against moto_server checking real SigV4
# signatures: keys made in moto's IAM sign a RunInstances that launches a
# tagged spot instance, a DescribeInstances by tag that finds it running,
# and a TerminateInstances that ends it; a wrong secret is refused with
# 401 AuthFailure, read from moto's error answer.
. "$(dirname "$0")/lib.sh"

t_moto_start
url="$MOTO_URL/"
ak=$AWS_AK
sk=$AWS_SK
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
