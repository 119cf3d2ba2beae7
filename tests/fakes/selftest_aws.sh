#!/usr/bin/env bash
# Self-test of aws_front.py (and vmemu.py under it): starts moto_server and
# the proxy on loopback, drives them with the aws CLI and with raw curl
# requests (to see the exact HTTP status), and checks every behaviour the
# fakes promise.  Prints "ok - ..." / "FAIL - ..."; exits 1 on a failure.
# Stops everything it started, by pid, however it ends.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/selftest_aws.XXXXXX)
MOTO_PID= FRONT_PID= MOTO2_PID= FRONT2_PID= FAILS=0

stop_pid() { [ -n "$1" ] && kill -TERM "$1" 2>/dev/null && wait "$1" 2>/dev/null; }
cleanup() {
  stop_pid "$FRONT_PID"; stop_pid "$FRONT2_PID"
  stop_pid "$MOTO_PID"; stop_pid "$MOTO2_PID"
  if [ "$FAILS" -eq 0 ]; then rm -rf "$WORK"; else echo "# kept $WORK" >&2; fi
}
trap cleanup EXIT

ok() { echo "ok - $1"; }
fail() { FAILS=$((FAILS + 1)); echo "FAIL - $1" >&2; }
check() { # check DESC COMMAND...
  local desc=$1; shift
  if "$@"; then ok "$desc"; else fail "$desc"; fi
}
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# jq-less JSON: jget EXPR reads JSON on stdin, prints python's eval of EXPR
# with the document as d.
jget() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
wait_for() { # wait_for SECONDS COMMAND...: true once COMMAND is
  local end=$((SECONDS + $1)); shift
  while [ $SECONDS -le $end ]; do "$@" && return 0; sleep 0.2; done
  return 1
}
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
dead() { ! alive "$1"; }

export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
export AWS_DEFAULT_REGION=us-east-1 AWS_RETRY_MODE=standard AWS_MAX_ATTEMPTS=1
export AWS_PAGER= AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset INITIAL_NO_AUTH_ACTION_COUNT

MOTO_PORT=$(free_port)
moto_server -H 127.0.0.1 -p "$MOTO_PORT" >"$WORK/moto.log" 2>&1 &
MOTO_PID=$!
moto_up() { curl -s -o /dev/null "http://127.0.0.1:$MOTO_PORT/moto-api/"; }
wait_for 30 moto_up || { fail "moto_server started"; exit 1; }

cat >"$WORK/prices.json" <<'EOF'
[{"zone":"us-east-1a","type":"p5.48xlarge","price":"24.500000","timestamp":"2026-11-21T10:00:00Z"},
 {"zone":"us-east-1a","type":"p5.48xlarge","price":"25.100000","timestamp":"2026-11-21T12:00:00Z"},
 {"zone":"us-east-1b","type":"p5.48xlarge","price":26.0,"timestamp":"2026-11-21T11:00:00Z"},
 {"zone":"us-east-1b","type":"p5.48xlarge","price":"26.400000","timestamp":"2026-11-20T09:00:00Z"},
 {"zone":"us-east-1a","type":"p4d.24xlarge","price":"9.800000","timestamp":"2026-11-21T08:00:00Z"},
 {"zone":"us-east-1c","type":"p4d.24xlarge","price":"9.900000","timestamp":"2026-11-21T09:30:00Z"},
 {"zone":"us-east-1c","type":"p4d.24xlarge","price":"10.100000","timestamp":"2026-11-19T09:30:00Z"}]
EOF

python3 "$HERE/aws_front.py" --moto "http://127.0.0.1:$MOTO_PORT" \
  --root "$WORK/vms" --port-file "$WORK/port" --spot-prices "$WORK/prices.json" \
  2>"$WORK/front.log" &
FRONT_PID=$!
wait_for 15 test -s "$WORK/port" || { fail "aws_front wrote its port"; exit 1; }
PORT=$(cat "$WORK/port")
URL="http://127.0.0.1:$PORT"
ok "moto on $MOTO_PORT, aws_front on $PORT"

ec2() { aws --endpoint-url "$URL" --output json ec2 "$@"; }
ctl() { # ctl METHOD PATH [JSON]
  if [ $# -ge 3 ]; then curl -s -X "$1" -H 'Content-Type: application/json' -d "$3" "$URL$2"
  else curl -s -X "$1" "$URL$2"; fi
}
# raw FORM: an unsigned EC2 Query POST (moto checks no signature here), so
# the exact HTTP status is seen.  Leaves the status in $WORK/status and the
# body on stdout.
raw() {
  curl -s -o "$WORK/raw" -w '%{http_code}' -X POST \
    -H 'Content-Type: application/x-www-form-urlencoded; charset=utf-8' \
    --data "$1&Version=2016-11-15" "$URL/" >"$WORK/status"
  cat "$WORK/raw"
}
status() { cat "$WORK/status"; }
vm_field() { # vm_field ID FIELD: from /_fake/vms
  ctl GET /_fake/vms | jget "[v['$2'] for v in d if v['id']=='$1'][0]"
}
stat_of() { ctl GET /_fake/stats | jget "d['$1']"; }

# The user data every VM runs: it records its identity, starts a sleeper
# in the VM's group and one that escapes into its own session, then waits.
cat >"$WORK/user-data.sh" <<'EOF'
#!/bin/sh
echo "$TENBIN_VM_ID $TENBIN_METADATA_URL" > ran.txt
sleep 300 & echo $! > sleeper.pid
setsid sleep 301 & echo $! > escaped.pid
wait
EOF
TAGS='ResourceType=instance,Tags=[{Key=tenbin-node,Value=n-1},{Key=tenbin-instance,Value=inst-1}]'
launch() { # launch TOKEN TYPE ZONE [extra args]: prints the instance id
  local tok=$1 type=$2 zone=$3; shift 3
  ec2 run-instances --image-id ami-12345678 --instance-type "$type" --count 1 \
    --client-token "$tok" --placement "AvailabilityZone=$zone" \
    --user-data "file://$WORK/user-data.sh" --tag-specifications "$TAGS" "$@" \
    --query 'Instances[0].InstanceId' --output text
}

# --- launch, user data, dedup, mismatch -----------------------------------
ID1=$(launch tok-1 p5.48xlarge us-east-1a)
check "run-instances returned an id ($ID1)" test -n "$ID1" -a "${ID1#i-}" != "$ID1"
ID1b=$(launch tok-1 p5.48xlarge us-east-1a)
check "same token, same params: same id" test "$ID1b" = "$ID1"
check "one instance launched, one deduplicated" \
  test "$(stat_of launched) $(stat_of deduplicated)" = "1 1"
check "one VM process" test "$(ctl GET /_fake/vms | jget 'len(d)')" = 1
ran() { test -s "$WORK/vms/$ID1/ran.txt"; }
check "user data ran in the VM" wait_for 10 ran
check "user data saw its id and metadata URL" \
  grep -qx "$ID1 $URL/_meta/$ID1" "$WORK/vms/$ID1/ran.txt"
check "the VM has its tags in /_fake/vms" \
  test "$(vm_field "$ID1" node)/$(vm_field "$ID1" instance)/$(vm_field "$ID1" zone)" = "n-1/inst-1/us-east-1a"
if launch tok-1 p4d.24xlarge us-east-1a >"$WORK/out" 2>"$WORK/err"; then
  fail "same token, other params refused"
else
  check "same token, other params: IdempotentParameterMismatch" \
    grep -q IdempotentParameterMismatch "$WORK/err"
fi
raw 'Action=RunInstances&ImageId=ami-12345678&InstanceType=m5.large&MinCount=1&MaxCount=1&ClientToken=tok-1' >/dev/null
check "mismatch is HTTP 400" test "$(status)" = 400
check "still one launch" test "$(stat_of launched)" = 1

# --- capacity, quota, throttle ---------------------------------------------
ctl POST /_fake/faults '{"capacity":["us-east-1b","us-east-1c/p4d.24xlarge"],"quota":["g5.48xlarge"]}' >/dev/null
raw 'Action=RunInstances&ImageId=ami-12345678&InstanceType=p5.48xlarge&MinCount=1&MaxCount=1&Placement.AvailabilityZone=us-east-1b' >"$WORK/ice"
check "capacity fault in a zone: HTTP 500" test "$(status)" = 500
check "... InsufficientInstanceCapacity with AWS's message" \
  grep -q '<Code>InsufficientInstanceCapacity</Code><Message>We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you requested (us-east-1b).' "$WORK/ice"
check "... in EC2's error XML" grep -q '^<Response><Errors><Error>.*</Errors><RequestID>.*</RequestID></Response>$' "$WORK/ice"
if launch tok-ice p5.48xlarge us-east-1b >/dev/null 2>"$WORK/err"; then
  fail "aws CLI sees ICE"
else
  check "aws CLI sees InsufficientInstanceCapacity" grep -q InsufficientInstanceCapacity "$WORK/err"
fi
raw 'Action=RunInstances&ImageId=ami-12345678&InstanceType=p4d.24xlarge&MinCount=1&MaxCount=1&Placement.AvailabilityZone=us-east-1c' >/dev/null
check "capacity fault for a shape in a zone: 500" test "$(status)" = 500
raw 'Action=RunInstances&ImageId=ami-12345678&InstanceType=g5.48xlarge&MinCount=1&MaxCount=1&Placement.AvailabilityZone=us-east-1a' >"$WORK/quota"
check "quota fault: 400 VcpuLimitExceeded" \
  test "$(status)" = 400 -a -n "$(grep -o '<Code>VcpuLimitExceeded</Code>' "$WORK/quota")"
check "refusals counted" test "$(stat_of refused)" = 4
check "refused launches started no VM" test "$(ctl GET /_fake/vms | jget 'len(d)')" = 1
ctl POST /_fake/faults '{"capacity":[],"quota":[],"throttle":2}' >"$WORK/faults"
check "faults answer is the whole state" \
  test "$(jget 'sorted(d)' <"$WORK/faults")" = "['boot_delay_s', 'capacity', 'never_boot', 'pending_s', 'quota', 'throttle']"
raw 'Action=DescribeInstances' >"$WORK/thr"
check "throttle: HTTP 503" test "$(status)" = 503
check "... RequestLimitExceeded" grep -q '<Code>RequestLimitExceeded</Code>' "$WORK/thr"
if ec2 describe-instances >/dev/null 2>"$WORK/err"; then fail "aws CLI throttled"
else check "aws CLI sees RequestLimitExceeded" grep -q RequestLimitExceeded "$WORK/err"; fi
raw 'Action=DescribeInstances' >/dev/null
check "throttle ends after N calls" test "$(status)" = 200
check "throttled calls counted" test "$(stat_of throttled)" = 2
check "calls counted per action" \
  test "$(ctl GET /_fake/stats | jget "d['calls']['DescribeInstances']")" = 3
bad=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"throttle":"x"}' "$URL/_fake/faults")
check "a bad fault is refused (400)" test "$bad" = 400
raw "Action=DescribeInstances&Filter.1.Name=$(printf '\377')" >/dev/null
check "a body that is not percent-encoded ASCII: 400" test "$(status)" = 400

# --- pending ----------------------------------------------------------------
ctl POST /_fake/faults '{"pending_s":3}' >/dev/null
ID2=$(launch tok-2 p4d.24xlarge us-east-1c)
state2() { ec2 describe-instances --instance-ids "$ID2" --query 'Reservations[0].Instances[0].State.Name' --output text; }
check "young instance is pending in DescribeInstances" test "$(state2)" = pending
check "... and in /_fake/vms" test "$(vm_field "$ID2" state)" = pending
sleep 3.2
check "running after pending_s" test "$(state2)" = running
ctl POST /_fake/faults '{"pending_s":0}' >/dev/null

# --- terminate ------------------------------------------------------------
wait_for 10 test -s "$WORK/vms/$ID1/escaped.pid"
S1=$(cat "$WORK/vms/$ID1/sleeper.pid"); E1=$(cat "$WORK/vms/$ID1/escaped.pid")
check "VM processes are running" alive "$S1"
check "... also the one in its own session" alive "$E1"
ec2 terminate-instances --instance-ids "$ID1" >/dev/null
check "terminate stops the script's processes" wait_for 6 dead "$S1"
check "... and the one that escaped its group" wait_for 6 dead "$E1"
check "terminated in /_fake/vms" test "$(vm_field "$ID1" state)" = terminated
check "terminations counted" test "$(stat_of terminated)" = 1

# --- never_boot, boot_delay -------------------------------------------------
ctl POST /_fake/faults '{"never_boot":1}' >/dev/null
ID3=$(launch tok-3 p5.48xlarge us-east-1a)
sleep 1
check "never_boot: the VM runs no script" test ! -e "$WORK/vms/$ID3/ran.txt" -a "$(vm_field "$ID3" booted)" = False
ctl POST /_fake/faults '{"boot_delay_s":1.5}' >/dev/null
ID4=$(launch tok-4 p5.48xlarge us-east-1a)
check "boot_delay: not booted at once" test ! -e "$WORK/vms/$ID4/ran.txt"
check "boot_delay: booted later" wait_for 6 test -s "$WORK/vms/$ID4/ran.txt"
ctl POST /_fake/faults '{"boot_delay_s":0}' >/dev/null

# --- spot interruption through IMDSv2 ---------------------------------------
ID5=$(launch tok-5 p5.48xlarge us-east-1a --instance-market-options MarketType=spot)
check "spot launch" test "$(vm_field "$ID5" spot)" = True
wait_for 10 test -s "$WORK/vms/$ID5/escaped.pid"
META=$(cut -d' ' -f2 "$WORK/vms/$ID5/ran.txt")
IA=latest/meta-data/spot/instance-action
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "$META/latest/api/token")
check "IMDS token without a TTL header: 400" test "$code" = 400
TOK=$(curl -s -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$META/latest/api/token")
check "IMDSv2 token issued" test -n "$TOK"
code=$(curl -s -o /dev/null -w '%{http_code}' "$META/$IA")
check "metadata without a token: 401" test "$code" = 401
check "instance-id from metadata" \
  test "$(curl -s -H "X-aws-ec2-metadata-token: $TOK" "$META/latest/meta-data/instance-id")" = "$ID5"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-aws-ec2-metadata-token: $TOK" "$META/$IA")
check "no interruption yet: 404" test "$code" = 404
ctl POST /_fake/interrupt "{\"vm\":\"$ID5\",\"notice_s\":2}" >"$WORK/intr"
check "interrupt accepted" grep -q "\"vm\": \"$ID5\"" "$WORK/intr"
curl -s -H "X-aws-ec2-metadata-token: $TOK" "$META/$IA" >"$WORK/notice"
check "notice in instance-action" \
  test "$(jget 'd["action"]+" "+str(len(d["time"]))' <"$WORK/notice")" = "terminate 20"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d "{\"vm\":\"$ID5\"}" "$URL/_fake/interrupt")
check "a second interrupt is refused (409)" test "$code" = 409
S5=$(cat "$WORK/vms/$ID5/sleeper.pid")
check "VM still runs during the notice" alive "$S5"
check "VM stopped after the notice" wait_for 8 dead "$S5"
reason() { ec2 describe-instances --instance-ids "$ID5" \
  --query 'Reservations[0].Instances[0].[State.Name,StateReason.Code]' --output text; }
gone() { test "$(reason)" = "terminated	Server.SpotInstanceTermination"; }
check "terminated with Server.SpotInstanceTermination" wait_for 5 gone
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"vm":"i-nope"}' "$URL/_fake/interrupt")
check "interrupting an unknown VM: 404" test "$code" = 404

# --- spot price history ------------------------------------------------------
raw 'Action=DescribeSpotPriceHistory&MaxResults=3' >"$WORK/p1"
items() { grep -o '<item>' "$1" | wc -l; }
ntok() { sed -n 's:.*<nextToken>\([^<]*\)</nextToken>.*:\1:p' "$1"; }
check "spot history page 1: 3 items and a token" test "$(items "$WORK/p1")" = 3 -a -n "$(ntok "$WORK/p1")"
check "newest first" grep -q '<item><availabilityZone>us-east-1a</availabilityZone><instanceType>p5.48xlarge</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>25.100000</spotPrice><timestamp>2026-11-21T12:00:00.000Z</timestamp></item>' "$WORK/p1"
raw "Action=DescribeSpotPriceHistory&MaxResults=3&NextToken=$(ntok "$WORK/p1")" >"$WORK/p2"
raw "Action=DescribeSpotPriceHistory&MaxResults=3&NextToken=$(ntok "$WORK/p2")" >"$WORK/p3"
check "page 2: 3 items, page 3: the last one, empty token" \
  test "$(items "$WORK/p2") $(items "$WORK/p3") $(grep -c '<nextToken/>' "$WORK/p3")" = "3 1 1"
raw "Action=DescribeSpotPriceHistory&MaxResults=3&InstanceType.1=m5.large&NextToken=$(ntok "$WORK/p1")" >/dev/null
check "a token from another question: 400" test "$(status)" = 400
raw 'Action=DescribeSpotPriceHistory&NextToken=garbage' >"$WORK/pbad"
check "a bad token: 400 InvalidPaginationToken" grep -q InvalidPaginationToken "$WORK/pbad"
n=$(ec2 describe-spot-price-history --instance-types p4d.24xlarge --query 'length(SpotPriceHistory)')
check "aws CLI reads the history (instance type filter)" test "$n" = 3
n=$(ec2 describe-spot-price-history --filters Name=availability-zone,Values=us-east-1b --query 'length(SpotPriceHistory)')
check "availability-zone filter" test "$n" = 2
n=$(ec2 describe-spot-price-history --start-time 2026-11-21T09:00:00Z --end-time 2026-11-21T11:30:00Z \
  --instance-types p5.48xlarge --query 'SpotPriceHistory[].SpotPrice' --output text)
check "a window keeps the price in effect at its start" test "$n" = "26.000000	24.500000	26.400000"
n=$(ec2 describe-spot-price-history --page-size 2 --query 'length(SpotPriceHistory)')
check "aws CLI pages through all of it" test "$n" = 7

# --- shutdown -----------------------------------------------------------------
wait_for 10 test -s "$WORK/vms/$ID2/escaped.pid"
S2=$(cat "$WORK/vms/$ID2/sleeper.pid"); E2=$(cat "$WORK/vms/$ID2/escaped.pid")
kill -TERM "$FRONT_PID"
wait "$FRONT_PID"; rc=$?
FRONT_PID=
check "aws_front exits 0 on SIGTERM" test "$rc" = 0
check "... having stopped every VM" dead "$S2"
check "... even processes that left the VM's group" dead "$E2"
check "front log has one line per request" grep -q 'POST / RunInstances -> 200' "$WORK/front.log"
stop_pid "$MOTO_PID"; MOTO_PID=

# --- moto checking signatures ------------------------------------------------
# moto answers its first 3 calls unsigned: they make an IAM user, its key
# and an ec2:* policy.  Then every EC2 call through the proxy must carry a
# good SigV4 signature (the proxy forwards Host and Authorization as they
# came), and the proxy's own boto3 calls need that key too.
MOTO2_PORT=$(free_port)
INITIAL_NO_AUTH_ACTION_COUNT=3 moto_server -H 127.0.0.1 -p "$MOTO2_PORT" >"$WORK/moto2.log" 2>&1 &
MOTO2_PID=$!
moto2_up() { curl -s -o /dev/null "http://127.0.0.1:$MOTO2_PORT/moto-api/"; }
wait_for 30 moto2_up || { fail "signing moto_server started"; exit 1; }
read -r KEY SECRET < <(python3 - "$MOTO2_PORT" <<'PY'
import json, sys, boto3
iam = boto3.client("iam", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}",
                   region_name="us-east-1", aws_access_key_id="x",
                   aws_secret_access_key="y")
iam.create_user(UserName="selftest")
k = iam.create_access_key(UserName="selftest")["AccessKey"]
iam.put_user_policy(UserName="selftest", PolicyName="ec2",
                    PolicyDocument=json.dumps({"Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "ec2:*",
                                       "Resource": "*"}]}))
print(k["AccessKeyId"], k["SecretAccessKey"])
PY
)
check "moto made a signing key" test -n "${SECRET:-}"
python3 "$HERE/aws_front.py" --moto "http://127.0.0.1:$MOTO2_PORT" --root "$WORK/vms2" \
  --port-file "$WORK/port2" --access-key "$KEY" --secret-key "$SECRET" 2>"$WORK/front2.log" &
FRONT2_PID=$!
wait_for 15 test -s "$WORK/port2" || { fail "second aws_front wrote its port"; exit 1; }
URL="http://127.0.0.1:$(cat "$WORK/port2")"
ID6=$(AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=$SECRET launch tok-6 p5.48xlarge us-east-1a)
check "a signed launch passes moto's check through the proxy" test -n "$ID6" -a "${ID6#i-}" != "$ID6"
if AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=wrong ec2 describe-instances >/dev/null 2>"$WORK/err"; then
  fail "a wrong secret is refused"
else
  check "a wrong secret is refused (AuthFailure)" grep -q AuthFailure "$WORK/err"
fi
ctl POST /_fake/interrupt "{\"vm\":\"$ID6\",\"notice_s\":0.5}" >/dev/null
reason6() { AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=$SECRET ec2 describe-instances --instance-ids "$ID6" \
  --query 'Reservations[0].Instances[0].[State.Name,StateReason.Code]' --output text; }
gone6() { test "$(reason6)" = "terminated	Server.SpotInstanceTermination"; }
check "the proxy's own boto3 call terminates with the key" wait_for 8 gone6

[ "$FAILS" -eq 0 ] && echo "# all passed" || echo "# $FAILS failed" >&2
exit $((FAILS > 0))
